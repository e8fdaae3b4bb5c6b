"""The example stacks' config, and the program under mocks (tools/program_mocks.py),
for the tests and the benchmarks."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from tools.policy_configs import raw_stack_config, stacks
from tools.program_mocks import Run, run_under_mocks

__all__ = ["ROOT", "Run", "example_stacks", "run_under_mocks", "stack_config"]

ROOT = Path(__file__).resolve().parent.parent


def stack_config(stack: str) -> dict[str, Any]:
    return raw_stack_config(ROOT, stack)


def example_stacks() -> list[str]:
    return stacks(ROOT)


def tracked_files() -> list[Path]:
    """The files git tracks: what a clone holds."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / name for name in listed.split("\0") if name]

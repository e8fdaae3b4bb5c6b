"""The example stacks' config, and the program under mocks (tools/program_mocks.py),
for the tests and the benchmarks."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

from components.config import PlatformConfig, parse_config
from components.config.operator_keys import READ_BY
from tools.policy_configs import raw_stack_config, stacks
from tools.program_mocks import Run, run_under_mocks

__all__ = ["ROOT", "Run", "example_stacks", "run_under_mocks", "stack_config", "without_keys_unread_by"]

ROOT = Path(__file__).resolve().parent.parent


def body(text: str) -> str:
    """A rendered config file without its first line, which must be the RENDERED_BY comment."""
    from slurm_rules.config_files import RENDERED_BY  # on the path once components is imported (python -m tests.snapshot)

    header, _, rest = text.partition("\n")
    assert header == f"# {RENDERED_BY}", text
    return rest


def stack_config(stack: str) -> dict[str, Any]:
    return raw_stack_config(ROOT, stack)


def example_stacks() -> list[str]:
    return stacks(ROOT)


def monitored(stack: str, **monitoring: Any) -> PlatformConfig:
    """An example stack with monitoring on (and `monitoring` keys set)."""
    document = copy.deepcopy(stack_config(stack))
    document["monitoring"] = {**document.get("monitoring", {}), "enabled": True, **monitoring}
    return parse_config(document)


def prometheus_bin() -> Path:
    """The directory of prometheus, promtool and node_exporter as scripts/prometheus-local.sh builds them (cached)."""
    built = subprocess.run([str(ROOT / "scripts" / "prometheus-local.sh"), "build"], capture_output=True, text=True)
    assert built.returncode == 0, f"no prometheus: {built.stderr[-2000:]}\nbuild it with: scripts/prometheus-local.sh build"
    return Path(built.stdout.strip().splitlines()[-1])


def tracked_files() -> list[Path]:
    """The files git tracks: what a clone holds."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / name for name in listed.split("\0") if name]


def without_keys_unread_by(operator: str, document: dict[str, Any]) -> dict[str, Any]:
    """`document` (a stack's config, changed in place) without the keys `operator` (soperator 4.1.7, ack, ...)
    never reads, which it refuses (components/config/operator_keys.py): a stack moved to another operator."""
    for path, entry in READ_BY.items():
        *above, key = path
        block = document
        for part in above:
            block = block.get(part, {})
        if operator not in entry.operators:
            block.pop(key, None)
    return document

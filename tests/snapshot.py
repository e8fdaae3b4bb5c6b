"""What a stack registers, as comparable data: every resource's URN, inputs,
parent, dependencies and data-safety options, under mocks.

`tests/golden/<stack>.json` holds this for every stack file written before the
Slurm operator became a choice; `test_compatibility.py` proves today's program
still registers exactly that (no new URNs, no changed inputs, so no replacements).

    .venv/bin/python -m tests.snapshot prod-hanoi dev ...   # rewrite golden files
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.harness import ROOT, run_under_mocks, stack_config

GOLDEN = ROOT / "tests" / "golden"


def snapshot(stack: str) -> dict[str, Any]:
    """URN -> what the engine would diff (stack outputs are not resources and may grow)."""
    from components.config import parse_config
    from components.platform import build_platform

    raw = stack_config(stack)
    config = parse_config(raw)
    run = run_under_mocks(lambda: build_platform(config), raw, stack=stack)
    resources = {
        r.urn: {
            "inputs": r.inputs,
            "parent": parent_of(r.parent),
            "dependencies": sorted(r.dependencies),
            "protect": r.protect,
            "retainOnDelete": r.retain_on_delete,
            "provider": r.provider,
        }
        for r in run.resources
    }
    # A JSON round trip makes tuples lists and keys strings, as in the file.
    return json.loads(json.dumps(resources, sort_keys=True, default=str))


def parent_of(urn: str) -> str:
    """The parent as the engine keys it, minus the stack: the mocks keep the first run's root Stack URN."""
    return "stack" if "::pulumi:pulumi:Stack::" in urn else urn


def golden_path(stack: str) -> Path:
    return GOLDEN / f"{stack}.json"


def golden_stacks() -> list[str]:
    return sorted(p.stem for p in GOLDEN.glob("*.json"))


if __name__ == "__main__":
    for name in sys.argv[1:]:
        golden_path(name).write_text(json.dumps(snapshot(name), indent=1, sort_keys=True) + "\n")
        print(f"wrote {golden_path(name).relative_to(ROOT)}")

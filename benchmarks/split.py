"""A platform stack and tenant stacks on kwok (issue 40, docs/tenants.md: Platform and tenant stacks): the
160 tenants of tests/scale.py's kwok shape in `--stacks` tenant stacks (tenantStack) beside one platform
stack that lists none, on a fresh kwok control plane with the 1,000 GPU nodes and Kueue's controller, as
benchmarks/scale.py's kwok part. Prints figures, and what would break the split; asserts nothing.

1. the platform stack's first `up`, then each tenant stack's (PULUMI_SKIP_CHECKPOINTS, as scale.py's
   --unchecked-first-up), with their resources and state;
2. the capacity map each stack exports: the same from every stack (the whole cluster);
3. on one tenant stack: a no-change `up`, then an `up` adding one tenant, each with its time and its steps;
4. after it, a `pulumi preview` of another tenant stack (its steps besides `same`: none expected) and of the
   platform stack (what follows every tenant there: its directory and monitoring);
5. a preview of a tenant stack whose file takes the rest of a pool, which other stacks' cells hold: refused
   before anything is registered.

    .venv/bin/python benchmarks/split.py [--tenants 160] [--stacks 8] [--parallel 64]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.scale import COMMAND_TIMEOUT, describe_steps, kwok_cluster, steps_by_operation, timed_up  # noqa: E402
from components.config import PROJECT  # noqa: E402
from components.config.parse import parse_stack  # noqa: E402
from components.config.stacks import read_stack_files  # noqa: E402
from tests.engine import Workspace  # noqa: E402
from tests.harness import ROOT  # noqa: E402
from tests.kube import KWOK_STACK, kwok_workspace  # noqa: E402
from tests.scale import GPUS_PER_NODE, scaled_config  # noqa: E402
from tools.policy_configs import SETTINGS_DIR, policy_config  # noqa: E402

PLATFORM = "split-platform"


def tenant_stack(index: int) -> str:
    return f"split-faculty-{index}"


def stack_files(tenants: int, stacks: int, added: int = 0) -> dict[str, dict[str, Any]]:
    """The platform stack's config (no tenant of its own) and each tenant stack's share of the tenants;
    `added` more in the first tenant stack."""
    raw = scaled_config(tenants + added, KWOK_STACK)
    every = raw.pop("tenants")
    share = tenants // stacks
    files = {PLATFORM: {**raw, "tenants": []}}
    for index in range(stacks):
        files[tenant_stack(index)] = {"tenantStack": {"platform": PLATFORM}, "tenants": every[index * share : (index + 1) * share]}
    files[tenant_stack(0)]["tenants"] += every[tenants:]
    return files


def write_stacks(ws: Workspace, files: dict[str, dict[str, Any]]) -> None:
    """Each Pulumi.<stack>.yaml, and its pack config as `make schema` writes it (from the whole cluster)."""
    for stack, raw in files.items():
        path = ws.project / f"Pulumi.{stack}.yaml"
        is_new = not path.exists()
        path.write_text(yaml.safe_dump({"config": {f"{PROJECT}:{key}": value for key, value in raw.items()}}))
        if is_new:
            ws.pulumi("stack", "init", stack, "--secrets-provider", "passphrase", stack=None)
    settings = json.loads((ROOT / SETTINGS_DIR / f"{KWOK_STACK}.json").read_text())
    read = read_stack_files(ws.project)
    for stack in files:
        config = parse_stack(stack, read[stack], read)
        (ws.project / "policies" / "config" / f"{stack}.json").write_text(json.dumps(policy_config(settings, config), indent=2))


def first_up(ws: Workspace, stack: str, parallel: int) -> None:
    ws.env["PULUMI_SKIP_CHECKPOINTS"] = "true"
    seconds, _, _ = timed_up(ws, stack, parallel)
    ws.env.pop("PULUMI_SKIP_CHECKPOINTS")
    exported = ws.pulumi("stack", "export", stack=stack).stdout
    count = len(json.loads(exported)["deployment"]["resources"])
    print(f"{stack}: first up (PULUMI_SKIP_CHECKPOINTS) {seconds:6.1f} s, resources={count}, state={len(exported) / 1e6:5.2f} MB", flush=True)


def preview_steps(ws: Workspace, stack: str) -> str:
    start = time.perf_counter()
    result = ws.pulumi("preview", "--json", stack=stack)
    seconds = time.perf_counter() - start
    steps = json.loads(result.stdout).get("steps", [])
    changed = sorted(f"{s['op']} {s['urn'].rsplit('::', 1)[-1]}" for s in steps if s["op"] != "same")
    return f"{seconds:5.1f} s, {len(steps)} steps, not same: {', '.join(changed) or 'none'}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tenants", type=int, default=160)
    parser.add_argument("--stacks", type=int, default=8)
    parser.add_argument("--parallel", type=int, default=64, help="as `make up` passes it (the Makefile's PARALLEL)")
    args = parser.parse_args()
    files = stack_files(args.tenants, args.stacks)
    tenant_stacks = [tenant_stack(index) for index in range(args.stacks)]
    with tempfile.TemporaryDirectory() as tmp:
        cluster = kwok_cluster(Path(tmp) / "kube", scaled_config(args.tenants + 1, KWOK_STACK))
        try:
            ws = kwok_workspace(Path(tmp) / "ws", cluster)
            ws.timeout = COMMAND_TIMEOUT
            write_stacks(ws, files)
            for stack in [PLATFORM, *tenant_stacks]:
                first_up(ws, stack, args.parallel)
            maps = {stack: ws.pulumi("stack", "output", "capacityMap", "--json", stack=stack).stdout for stack in [PLATFORM, *tenant_stacks]}
            print(f"capacity maps: {len(set(maps.values()))} distinct of {len(maps)} stacks ({len(json.loads(maps[PLATFORM]))} lines)", flush=True)
            changed = tenant_stacks[0]
            seconds, _, output = timed_up(ws, changed, args.parallel, "--json")
            print(f"{changed}: no-change up {seconds:6.1f} s, steps {describe_steps(steps_by_operation(output))}", flush=True)
            write_stacks(ws, stack_files(args.tenants, args.stacks, added=1))
            seconds, _, output = timed_up(ws, changed, args.parallel, "--json")
            print(f"{changed}: up adding one tenant {seconds:6.1f} s, steps {describe_steps(steps_by_operation(output))}", flush=True)
            print(f"{tenant_stacks[1]}: preview after it {preview_steps(ws, tenant_stacks[1])}", flush=True)
            print(f"{PLATFORM}: preview after it {preview_steps(ws, PLATFORM)}", flush=True)
            # A tenant stack asking for every Slurm worker of a pool that other stacks' cells already hold.
            greedy = stack_files(args.tenants, args.stacks, added=1)
            pool = greedy[PLATFORM]["nodePools"][1]
            greedy[tenant_stacks[2]]["tenants"].append(
                {
                    "name": "greedy",
                    "ldapGroup": "greedy",
                    "cells": [{"pool": pool["name"], "gpusPerCell": GPUS_PER_NODE, "cells": pool["slurmWorkers"]}],
                }
            )
            (ws.project / f"Pulumi.{tenant_stacks[2]}.yaml").write_text(
                yaml.safe_dump({"config": {f"{PROJECT}:{key}": value for key, value in greedy[tenant_stacks[2]].items()}})
            )
            refused = ws.pulumi("preview", stack=tenant_stacks[2], check=False)
            text = refused.stdout + refused.stderr
            line = next((line.strip() for line in text.splitlines() if "every stack's together" in line), "")
            print(
                f"{tenant_stacks[2]}: preview taking pool {pool['name']}: rc={refused.returncode} {'REFUSED' if line else 'NOT REFUSED'}: {line[:300]}",
                flush=True,
            )
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()

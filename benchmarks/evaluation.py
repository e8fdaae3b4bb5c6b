"""Program evaluation under mocks: wall time, resources registered, longest
dependency chain, for the reference stack (prod-hanoi), a large one (50 node
pools, each GPU pool with a Karpenter NodePool, 20 jail submounts), the example
stack of each other Slurm operator, and the large one on soperator 4.1.7.
Prints figures; asserts nothing."""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from components.config import parse_config  # noqa: E402
from components.platform import build_platform  # noqa: E402
from tests.harness import run_under_mocks, stack_config  # noqa: E402

REPEATS = 5


def large_stack() -> dict:
    raw = stack_config("prod-hanoi")
    gpu_pool = raw["nodePools"][0]
    raw["nodePools"] = [
        {**gpu_pool, "name": f"gpu-{i:02d}", "selector": {"worker.fptcloud/pool": f"gpu-{i:02d}"}, "karpenter": {}} for i in range(49)
    ] + [raw["nodePools"][-1]]
    raw["storage"] = {
        **raw["storage"],
        "submounts": [{"name": f"data-{i:02d}", "mountPath": f"/mnt/data-{i:02d}", "size": "1Ti"} for i in range(20)],
    }
    return raw


def measure(label: str, raw: dict) -> None:
    config = parse_config(raw)
    seconds, runs = [], []
    for _ in range(REPEATS):
        start = time.perf_counter()
        runs.append(run_under_mocks(lambda: build_platform(config), raw, stack=label))
        seconds.append(time.perf_counter() - start)
    run = runs[-1]
    chain = run.longest_dependency_chain()
    print(
        f"{label:<16} pools={len(config.node_pools):>3} submounts={len(config.storage.submounts):>3} "
        f"resources={len(run.resources):>4} eval_median={statistics.median(seconds) * 1000:7.1f} ms "
        f"(min {min(seconds) * 1000:.1f}, max {max(seconds) * 1000:.1f}, n={REPEATS}) "
        f"longest_chain={len(chain)}: {' -> '.join(chain)}"
    )


if __name__ == "__main__":
    measure("prod-hanoi", stack_config("prod-hanoi"))
    measure("large", large_stack())
    # One stack per other Slurm operator, and the large one on soperator 4.1.7 (a NodeSet per GPU pool).
    for stack in ("staging-hanoi", "staging-hangzhou", "prod-hcm"):
        measure(stack, stack_config(stack))
    large = large_stack()
    measure("large-4.1.7", {**large, "operators": {**large["operators"], "soperator": {"version": "4.1.7"}}})

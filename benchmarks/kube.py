"""The program against a real Kubernetes API server (scripts/kube-local.sh's
control plane with kwok nodes). Prints figures; asserts nothing.

For the reference `kwok` stack and for stacks of about 100 and 400 resources
(more jail submounts, each a claim kwok provisions and the binder binds, and
more CPU pools whose kwok nodes the program labels): the `pulumi up` that
creates everything, then a no-change preview, and the cost per resource of
each, and the CPU per resource the up costs (the CLI, its plugins and the program). Each size
runs on its own fresh control plane.

    .venv/bin/python benchmarks/kube.py [--parallel N] [--sizes reference,medium,large]

`--parallel` is what `make up` passes (the Makefile's PARALLEL, 64); 0 leaves the CLI's default.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.engine import scaled_stack  # noqa: E402
from tests.engine import Workspace  # noqa: E402
from tests.kube import KWOK_STACK, LocalCluster, kwok_workspace  # noqa: E402

# label, extra submounts, extra CPU pools, kwok nodes per extra pool
SIZES = [("reference", 0, 0, 0), ("medium", 45, 10, 2), ("large", 190, 50, 2)]


def labelled_cpu_pools(count: int, nodes_per_pool: int) -> list[dict]:
    """CPU pools whose (kwok) nodes exist already; the program labels them."""
    return [
        {
            "name": f"cpu-{i:03d}",
            "selector": {"worker.fptcloud/pool": f"cpu-{i:03d}"},
            "cpuPerNode": "32",
            "memoryPerNode": "128Gi",
            "nodeCount": nodes_per_pool,
            "labelExistingNodes": [f"kwok-cpu-{i:03d}-{n}" for n in range(nodes_per_pool)],
        }
        for i in range(count)
    ]


def timed(ws: Workspace, *args: str, stack: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the CLI and every process it waited for: plugins, the program)."""
    start, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    ws.pulumi(*args, stack=stack)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.perf_counter() - start, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(root: Path, label: str, submounts: int, pools: int, nodes_per_pool: int, parallel: int) -> None:
    cluster = LocalCluster(root / "kube")
    cluster.run_dir.mkdir(parents=True)
    try:
        cluster.start()
        ws = kwok_workspace(root / "ws", cluster)
        stack = scaled_stack(ws, label, submounts, labelled_cpu_pools(pools, nodes_per_pool), base=KWOK_STACK) if label != "reference" else KWOK_STACK
        cluster.add_nodes(ws.project / f"Pulumi.{stack}.yaml")
        count = len(ws.preview_steps(stack=stack))
        up, up_cpu = timed(ws, "up", "--yes", "--skip-preview", *(["--parallel", str(parallel)] if parallel else []), stack=stack)
        preview, _ = timed(ws, "preview", "--expect-no-changes", stack=stack)
        print(
            f"{label:<9} parallel={parallel or 'default':<7} resources={count:>4} up={up:7.2f} s ({up / count * 1000:6.1f} ms/resource, "
            f"CPU {up_cpu / count * 1000:6.1f} ms/resource) "
            f"no-change preview={preview:6.2f} s ({preview / count * 1000:6.1f} ms/resource)",
            flush=True,
        )
    finally:
        cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--parallel", type=int, default=64)
    parser.add_argument("--sizes", default=",".join(label for label, *_ in SIZES))
    args = parser.parse_args()
    chosen = args.sizes.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        for label, submounts, pools, nodes_per_pool in SIZES:
            if label in chosen:
                measure(Path(tmp) / label, label, submounts, pools, nodes_per_pool, args.parallel)


if __name__ == "__main__":
    main()

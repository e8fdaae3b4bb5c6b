"""`make preflight` on a cluster of 300 nodes: scripts/kube-local.sh's control plane with kwok nodes
(a GPU pool of 296 nodes and the kwok stack's system pool, as the kwok stack shaped larger), and the
CSI driver its StorageClass needs. Wall time of the whole run (the program under mocks, then every
check against the API server), and of the checks alone, over a few runs. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/preflight.py
"""

from __future__ import annotations

import copy
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent / "policies"))

from benchmarks.kube import fresh_cluster  # noqa: E402
from components.config import parse_config  # noqa: E402
from scripts.kwok_nodes import kwok_nodes  # noqa: E402
from tests.harness import stack_config  # noqa: E402
from tests.kube import KWOK_STACK, wait_until  # noqa: E402
from tools.preflight import LiveCluster, run_checks, stack_needs  # noqa: E402

GPU_NODES, SYSTEM_NODES = 296, 4
RUNS = 5
CSI_DRIVER = {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": "nfs.csi.k8s.io"}, "spec": {"attachRequired": False}}


def main() -> None:
    raw = copy.deepcopy(stack_config(KWOK_STACK))
    raw["nodePools"][0]["nodeCount"] = GPU_NODES
    raw["nodePools"][1]["nodeCount"] = SYSTEM_NODES
    raw["slurm"]["worker"]["size"] = GPU_NODES
    config = parse_config(raw)
    with tempfile.TemporaryDirectory(prefix="preflight-bench-") as root:
        cluster = fresh_cluster(Path(root) / "cluster")
        try:
            cluster.apply([*kwok_nodes(config), CSI_DRIVER])
            count = lambda: len(cluster.kubectl("get", "nodes", "-o", "name").stdout.split())  # noqa: E731
            wait_until(f"{GPU_NODES + SYSTEM_NODES} nodes", lambda: count() == GPU_NODES + SYSTEM_NODES, timeout=120)
            whole, checks_only = [], []
            for _ in range(RUNS):
                start = time.perf_counter()
                needs = stack_needs(config, raw, KWOK_STACK)
                middle = time.perf_counter()
                checks = run_checks(config, needs, LiveCluster("kwok", str(cluster.kubeconfig)))
                end = time.perf_counter()
                failing = [c.line() for c in checks if not c.passed]
                assert not failing, failing
                whole.append(end - start)
                checks_only.append(end - middle)
            started = time.perf_counter()
            command = subprocess.run(
                [sys.executable, "-m", "tools.preflight", "--stack", KWOK_STACK, "--kubeconfig", str(cluster.kubeconfig)],
                capture_output=True,
                text=True,
                check=False,
            )
            cold = time.perf_counter() - started
        finally:
            cluster.stop()
    print(f"preflight on {GPU_NODES + SYSTEM_NODES} kwok nodes, {len(checks)} checks, {RUNS} runs in one process:")
    print(f"  whole (program under mocks + checks): median {statistics.median(whole):.2f} s, min {min(whole):.2f} s")
    print(f"  checks against the API server:        median {statistics.median(checks_only):.2f} s, min {min(checks_only):.2f} s")
    print(f"  `python -m tools.preflight --stack kwok`, a new process: {cold:.2f} s (exit {command.returncode})")


if __name__ == "__main__":
    main()

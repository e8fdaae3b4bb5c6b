"""A real Kubernetes API server for engine tests: scripts/kube-local.sh's control plane.

Shared by tests/test_kube_*.py and benchmarks/kube.py. Every process is started
and stopped by PID through the script; every wait here is bounded.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from scripts.kwok_nodes import kwok_nodes, stack_config
from tests.engine import Workspace, new_workspace
from tests.harness import ROOT

SCRIPT = ROOT / "scripts" / "kube-local.sh"
KWOK_STACK = "kwok"
# Where Pulumi.kwok.yaml expects the stand-in charts, relative to the project.
CHARTS_DIR = ".kwok/charts"


class ClusterError(RuntimeError):
    pass


def run_script(*args: str, timeout: float = 1800) -> str:
    result = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise ClusterError(f"kube-local.sh {' '.join(args)} failed ({result.returncode}):\n{result.stderr[-4000:]}")
    return result.stdout.strip()


def wait_until(what: str, condition: Callable[[], Any], timeout: float = 60, interval: float = 0.5) -> Any:
    """Poll `condition` until it returns something truthy; fail naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


class LocalCluster:
    """One control plane in `run_dir`: start, stop, kubectl, and restarts for the fault tests."""

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.kubeconfig = run_dir / "kubeconfig"
        self.kubectl_path = Path(run_script("bin")) / "kubectl"

    def start(self) -> None:
        run_script("build")
        run_script("start", str(self.run_dir), timeout=300)

    def stop(self) -> None:
        run_script("stop", str(self.run_dir), timeout=120)

    def pid(self, process: str) -> int:
        # The PID file holds "PID STARTTIME" (kube-local.sh's stop kills only the process it started).
        return int((self.run_dir / "pids" / f"{process}.pid").read_text().split()[0])

    def kill(self, process: str) -> None:
        """Kill one process of the control plane (SIGKILL: a crash, not a shutdown)."""
        pid = self.pid(process)
        os.kill(pid, 9)
        wait_until(f"{process} ({pid}) to exit", lambda: not _alive(pid), timeout=30)
        (self.run_dir / "pids" / f"{process}.pid").unlink()

    def restart(self, process: str) -> None:
        """Start a killed process again, then wait until the API server stores objects again: after an
        etcd restart its etcd client reconnects with backoff, and writes time out until it has."""
        run_script({"etcd": "restart-etcd", "kube-apiserver": "restart-apiserver"}[process], str(self.run_dir), timeout=120)
        wait_until(f"the API server to store objects again after restarting {process}", self.stores_objects, timeout=180, interval=2)

    def stores_objects(self) -> bool:
        """/readyz (its etcd checks included) passes and a real write reaches etcd (a create without dry run)."""
        if self.kubectl("get", "--raw", "/readyz", check=False).returncode != 0:
            return False
        probe = "kube-local-restart-probe"
        created = self.kubectl("create", "configmap", probe, "-n", "default", check=False)
        self.kubectl("delete", "configmap", probe, "-n", "default", "--ignore-not-found", check=False)
        return created.returncode == 0

    def kubectl(self, *args: str, check: bool = True, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
        result = subprocess.run(
            [str(self.kubectl_path), "--kubeconfig", str(self.kubeconfig), "--request-timeout=20s", *args],
            capture_output=True,
            text=True,
            input=stdin,
            timeout=timeout,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
        return result

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict | None:
        args = ["get", kind, name, "-o", "json", *(["-n", namespace] if namespace else [])]
        result = self.kubectl(*args, check=False)
        if result.returncode != 0:
            if "NotFound" in result.stderr:
                return None
            raise AssertionError(result.stderr)
        return json.loads(result.stdout)

    def require(self, kind: str, name: str, namespace: str | None = None) -> dict:
        found = self.get(kind, name, namespace)
        assert found is not None, f"{kind} {namespace}/{name} not found"
        return found

    def apply(self, manifests: list[dict], force: bool = False) -> None:
        force_flag = ["--force-conflicts"] if force else []
        self.kubectl("apply", "--server-side", *force_flag, "--field-manager=kube-tests", "-f", "-", stdin=yaml.safe_dump_all(manifests))

    def add_nodes(self, stack_file: Path) -> list[str]:
        """kwok nodes for the stack's pools; returns their names once every one is Ready."""
        nodes = kwok_nodes(stack_config(stack_file))
        self.apply(nodes)
        names = [node["metadata"]["name"] for node in nodes]

        def all_ready() -> bool:
            items = json.loads(self.kubectl("get", "nodes", "-o", "json").stdout)["items"]
            ready = {
                n["metadata"]["name"]
                for n in items
                if any(c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions", []))
            }
            return set(names) <= ready

        wait_until("every kwok node to be Ready", all_ready, timeout=60)
        return names


def contains(stored: Any, sent: Any) -> bool:
    """Every field we sent is in what the server stored, with the same value (nothing pruned or changed)."""
    if isinstance(sent, dict):
        return isinstance(stored, dict) and all(k in stored and contains(stored[k], v) for k, v in sent.items())
    if isinstance(sent, list):
        return isinstance(stored, list) and len(stored) == len(sent) and all(map(contains, stored, sent))
    return stored == sent


def assert_stored_as_sent(cluster: LocalCluster, operator: str, manifests: list[dict[str, Any]]) -> None:
    """Each manifest created with a server-side dry run and strict field validation, and stored with every field."""
    for namespace in sorted({m["metadata"]["namespace"] for m in manifests}):
        if cluster.get("namespace", namespace) is None:
            cluster.kubectl("create", "namespace", namespace)
    for manifest in manifests:
        result = cluster.kubectl("create", "--dry-run=server", "--validate=strict", "-o", "json", "-f", "-", check=False, stdin=json.dumps(manifest))
        assert result.returncode == 0, f"{operator}: {manifest['kind']} {manifest['metadata']['name']}: {result.stderr}"
        stored = json.loads(result.stdout)
        # Nothing we sent was pruned: the server kept every field.
        assert contains(stored["spec"], manifest["spec"]), (operator, manifest["kind"], manifest["metadata"]["name"])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie child of ours has exited too.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


def kwok_workspace(root: Path, cluster: LocalCluster) -> Workspace:
    """A project copy whose `kwok` stack deploys to `cluster`, with the stand-in charts in place."""
    workspace = new_workspace(root, stack=KWOK_STACK)
    run_script("charts", str(workspace.project / CHARTS_DIR))
    workspace.env["KUBECONFIG"] = str(cluster.kubeconfig)
    return workspace

"""A real Kubernetes API server for engine tests: scripts/kube-local.sh's control plane.

Shared by tests/test_kube_*.py and benchmarks/kube.py. Every process is started
and stopped by PID through the script; every wait here is bounded.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml
from slurm_rules.cell_fit import TENANTS_COMPONENT

from components.config import PlatformConfig
from components.operator_charts import KUEUE_DEFAULT_CONFIGURATION, kueue_configuration
from scripts.kwok_nodes import kwok_nodes, stack_config
from tests.engine import Workspace, new_workspace
from tests.harness import ROOT

SCRIPT = ROOT / "scripts" / "kube-local.sh"
KWOK_STACK = "kwok"
# Where Pulumi.kwok.yaml expects the stand-in charts, relative to the project.
CHARTS_DIR = ".kwok/charts"
NODES_PER_APPLY, APPLIES_AT_ONCE = 25, 8


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

    def kubeconfig_with(self, token: str, path: Path) -> Path:
        """The admin's kubeconfig (its server, CA and context) with another identity's token, written to `path`."""
        admin = self.kubeconfig.read_text()
        path.write_text(admin.replace(admin.split("token: ")[1].split("\n")[0], token))
        return path

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

    def apply(self, manifests: list[dict], force: bool = False, timeout: float = 60) -> None:
        force_flag = ["--force-conflicts"] if force else []
        self.kubectl(
            "apply", "--server-side", *force_flag, "--field-manager=kube-tests", "-f", "-", stdin=yaml.safe_dump_all(manifests), timeout=timeout
        )

    def add_nodes(self, stack: Path | PlatformConfig, timeout: float = 60) -> list[str]:
        """kwok nodes for the pools of a stack (its file, or its config); returns their names once every one is Ready
        (`timeout` s for each step: a thousand nodes take minutes)."""
        nodes = kwok_nodes(stack if isinstance(stack, PlatformConfig) else stack_config(stack))
        # In batches, several at once: kubectl applies one object after another, and the scale benchmark's
        # 1,000 nodes in one apply outlast its 60 s.
        with ThreadPoolExecutor(APPLIES_AT_ONCE) as pool:
            batches = [nodes[start : start + NODES_PER_APPLY] for start in range(0, len(nodes), NODES_PER_APPLY)]
            list(pool.map(lambda batch: self.apply(batch, timeout=timeout), batches))
        names = [node["metadata"]["name"] for node in nodes]

        def all_ready() -> bool:
            items = json.loads(self.kubectl("get", "nodes", "-o", "json").stdout)["items"]
            ready = {
                n["metadata"]["name"]
                for n in items
                if any(c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions", []))
            }
            return set(names) <= ready

        wait_until("every kwok node to be Ready", all_ready, timeout=max(timeout, 60 + len(nodes) / 2))
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


def data_snapshot(cluster: LocalCluster, namespace: str, munge_secret: str) -> dict[str, Any]:
    """What no day-2 change may touch: every claim of the Slurm namespace (jail, spool, submounts, LDAP's,
    the accounting database's) with its UID and volume, each bound volume's UID, the munge key's bytes,
    the MariaDB CRs (where the kind exists) and the tenants' namespaces, by UID."""
    claims = json.loads(cluster.kubectl("get", "pvc", "-n", namespace, "-o", "json").stdout)["items"]
    assert claims, f"no claims in {namespace}"
    volumes = [c["spec"]["volumeName"] for c in claims if c["spec"].get("volumeName")]
    mariadbs = cluster.kubectl("get", "mariadbs.k8s.mariadb.com", "-n", namespace, "-o", "json", check=False)
    selector = f"app.kubernetes.io/component={TENANTS_COMPONENT}"
    tenants = json.loads(cluster.kubectl("get", "namespaces", "-l", selector, "-o", "json").stdout)["items"]
    return {
        "claims": {c["metadata"]["name"]: (c["metadata"]["uid"], c["spec"].get("volumeName")) for c in claims},
        "volumes": {name: cluster.require("pv", name)["metadata"]["uid"] for name in volumes},
        "munge": cluster.require("secret", munge_secret, namespace)["data"],
        "mariadb": {m["metadata"]["name"]: m["metadata"]["uid"] for m in json.loads(mariadbs.stdout)["items"]} if mariadbs.returncode == 0 else None,
        "tenants": {n["metadata"]["name"]: n["metadata"]["uid"] for n in tenants},
    }


def assert_data_kept(before: dict[str, Any], after: dict[str, Any]) -> None:
    """Everything of `before` (a data_snapshot) is in `after`, the same object (UID) with the same bytes;
    what came since (a new submount's claim) may be there too."""
    for part in ("claims", "volumes", "tenants"):
        assert {key: after[part].get(key) for key in before[part]} == before[part], part
    assert after["munge"] == before["munge"]
    assert before["mariadb"] is None or {key: (after["mariadb"] or {}).get(key) for key in before["mariadb"]} == before["mariadb"]


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


# --- Kueue's controller on this control plane --------------------------------------------------

# The chart's webhook Service (fullname `kueue`): its DNS name is what Kueue's cert rotator checks.
KUEUE_WEBHOOK_SERVICE = "kueue-webhook-service"
KUEUE_CERT_SECRET = "kueue-webhook-server-cert"
# The CRDs the chart gives a conversion webhook (the kinds served as v1beta1 and v1beta2 whose
# versions differ; Kueue's rotator injects its CA into exactly these).
KUEUE_CONVERTED = ("clusterqueues", "cohorts", "localqueues", "multikueueclusters", "workloads")
# Kueue's own kinds: their webhooks apply everywhere; the jobs' only where Kueue manages jobs.
KUEUE_GROUP = "kueue.x-k8s.io"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class KueueController:
    """Kueue 0.19.2's controller-manager (built by kube-local.sh) against `cluster`, configured as the chart
    would configure it for `config`: the Configuration is operator_charts.kueue_configuration's (the chart's
    managerConfig), with only what a pod gets from its Deployment and Service changed to this machine's
    loopback: free ports, the cert directory (the chart mounts the cert Secret there), the namespace.

    Webhooks: the API server cannot reach a Service's ClusterIP here, so the chart's webhook configurations
    and CRD conversion webhooks are registered with `url: https://127.0.0.1:<port>/<path>`. Kueue's internal
    cert management (the chart's default) stays on: it adopts a CA and serving certificate that
    kube-local.sh issues for the Service's DNS name and 127.0.0.1, seeded in its Secret as the chart's empty
    Secret would be filled, and injects that CA into the webhooks itself. Turning it off would need the
    metrics certificate at /etc/kueue/metrics/certs, a path Kueue does not let one change."""

    def __init__(self, cluster: LocalCluster, config: PlatformConfig):
        self.cluster = cluster
        self.namespace = config.operators.kueue.namespace
        self.dir = cluster.run_dir / "kueue"
        self.webhook_port, self.health_port, self.metrics_port, self.visibility_port = (free_port() for _ in range(4))
        self.configuration = {
            **kueue_configuration(config),
            "namespace": self.namespace,
            # In a pod, the leader election lease goes to the pod's namespace; outside one it must be named.
            "leaderElection": {**KUEUE_DEFAULT_CONFIGURATION["leaderElection"], "resourceNamespace": self.namespace},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": f"127.0.0.1:{self.metrics_port}"},
            "webhook": {"port": self.webhook_port, "host": "127.0.0.1", "certDir": str(self.dir / "certs")},
            "visibilityServer": {"bindAddress": "127.0.0.1", "bindPort": self.visibility_port},
        }
        built = Path(run_script("bin")).parent / "kueue"
        self.crds = [yaml.safe_load(path.read_text()) for path in sorted((built / "crds").glob("*.yaml"))]
        self.webhooks = [doc for doc in yaml.safe_load_all((built / "webhooks.yaml").read_text()) if doc]

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.webhook_port}{path}"

    def crd_manifests(self) -> list[dict[str, Any]]:
        crds = []
        for crd in self.crds:
            if crd["spec"]["names"]["plural"] in KUEUE_CONVERTED:
                crd = {**crd, "spec": {**crd["spec"], "conversion": {
                    "strategy": "Webhook",
                    "webhook": {"clientConfig": {"url": self.url("/convert")}, "conversionReviewVersions": ["v1"]},
                }}}  # fmt: skip
            crds.append(crd)
        return crds

    def webhook_manifests(self) -> list[dict[str, Any]]:
        """The chart's two webhook configurations: its names, `url`s for the Service, and (as the chart does)
        the config's managedJobsNamespaceSelector on every job framework's webhook."""
        manifests = []
        for configuration in self.webhooks:
            hooks = []
            for hook in configuration["webhooks"]:
                hook = {**hook, "clientConfig": {"url": self.url(hook["clientConfig"]["service"]["path"])}}
                if not any(KUEUE_GROUP in rule["apiGroups"] for rule in hook["rules"]):
                    hook["namespaceSelector"] = self.configuration["managedJobsNamespaceSelector"]
                hooks.append(hook)
            name = f"kueue-{configuration['metadata']['name']}"
            manifests.append({**configuration, "metadata": {"name": name}, "webhooks": hooks})
        return manifests

    def start(self) -> None:
        cluster = self.cluster
        if cluster.get("namespace", self.namespace) is None:
            cluster.kubectl("create", "namespace", self.namespace)
        run_script("kueue-pki", str(cluster.run_dir), f"{KUEUE_WEBHOOK_SERVICE}.{self.namespace}.svc")
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": KUEUE_CERT_SECRET, "namespace": self.namespace},
            "data": {
                key: base64.b64encode((self.dir / path).read_bytes()).decode()
                for key, path in (("ca.crt", "ca.crt"), ("ca.key", "ca.key"), ("tls.crt", "certs/tls.crt"), ("tls.key", "certs/tls.key"))
            },
        }
        cluster.apply([secret, *self.crd_manifests(), *self.webhook_manifests()], force=True)
        cluster.kubectl("wait", "--for", "condition=Established", "--timeout", "60s", *(f"crd/{c['metadata']['name']}" for c in self.crds))
        config_file = self.dir / "config.json"
        config_file.write_text(json.dumps(self.configuration, indent=2))
        run_script("start-kueue", str(cluster.run_dir), str(config_file), timeout=60)
        # Ready: certificates adopted and injected, webhooks served, controllers started.
        wait_until("Kueue's controller to be ready", self.ready, timeout=120, interval=1)

    def ready(self) -> bool:
        if not _alive(self.cluster.pid("kueue")):
            raise ClusterError(f"Kueue's controller exited:\n{self.log()[-4000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    def log(self) -> str:
        return (self.cluster.run_dir / "logs" / "kueue.log").read_text(errors="replace")

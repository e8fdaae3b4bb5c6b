"""`make preflight` against a real API server (scripts/kube-local.sh): first a cluster that lacks
each thing a stack needs, then one that has everything, before and after the stack's `up`.

The module's control plane starts bare (no node, no CSI driver); the tests run in file order.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

from components.config import parse_config
from scripts.kwok_nodes import kwok_nodes
from tests.harness import ROOT, stack_config
from tests.kube import KWOK_STACK, LocalCluster, wait_until
from tools.preflight import Check, LiveCluster, run_checks, stack_needs

NAMESPACE = "fpt-hpc"
# scripts/kube-local.sh installs it with the control plane, as a portal would.
SLURM_CLUSTER_CRD = "slurmclusters.slurm.nebius.ai"
NFS_DRIVER = {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": "nfs.csi.k8s.io"}, "spec": {"attachRequired": False}}
# A Helm 3 release as Helm stores it: a Secret labelled owner=helm, name=<release>.
HELM_RELEASE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Secret",
    "metadata": {
        "name": "sh.helm.release.v1.network-operator.v1",
        "namespace": "nvidia-network-operator",
        "labels": {"owner": "helm", "name": "network-operator"},
    },
    "type": "helm.sh/release.v1",
}
# An object of the stack's, made by hand before it (what the FPT guide has users do).
HAND_MADE_CLAIM: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "PersistentVolumeClaim",
    "metadata": {"name": "controller-spool-pvc", "namespace": NAMESPACE},
    "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
}


def preflight(cluster: LocalCluster, raw: dict[str, Any], kubeconfig: Path | None = None) -> list[Check]:
    config = parse_config(raw)
    return run_checks(config, stack_needs(config, raw, KWOK_STACK), LiveCluster("kwok", str(kubeconfig or cluster.kubeconfig)))


def failing(checks: list[Check]) -> dict[str, str]:
    return {c.subject: f"{c.problem}; fix: {c.fix}" for c in checks if not c.passed}


def lacking_config() -> dict[str, Any]:
    """The kwok stack with soperator portal-installed (its CRD must be there beforehand) and the
    system pool labelling two nodes by name, one of which does not exist."""
    raw = copy.deepcopy(stack_config(KWOK_STACK))
    raw["operators"]["soperator"] = {"install": False}
    raw["nodePools"][1]["labelExistingNodes"] = ["kwok-system-0", "system-node-from-the-guide"]
    return raw


def nodes_with_four_gpus(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """The stack's kwok nodes, but the GPU pool's with 4 GPUs where it declares 8, and one system node short."""
    nodes = [n for n in kwok_nodes(parse_config(raw)) if n["metadata"]["name"] != "kwok-system-1"]
    for node in nodes:
        for amounts in node["status"].values():
            if "nvidia.com/gpu" in amounts:
                amounts["nvidia.com/gpu"] = "4"
    return nodes


def namespaces(cluster: LocalCluster, *names: str) -> None:
    cluster.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}} for name in names])


def viewer_kubeconfig(cluster: LocalCluster, directory: Path) -> Path:
    """A kubeconfig whose identity may only read (the built-in `view` role), as a CI token scoped too narrowly."""
    namespaces(cluster, "ci")
    cluster.kubectl("create", "serviceaccount", "deployer", "-n", "ci")
    cluster.kubectl("create", "clusterrolebinding", "deployer-view", "--clusterrole=view", "--serviceaccount=ci:deployer")
    token = cluster.kubectl("create", "token", "deployer", "-n", "ci").stdout.strip()
    return cluster.kubeconfig_with(token, directory / "viewer.kubeconfig")


def test_a_bare_cluster_fails_each_check_with_its_fix(cluster, tmp_path):
    raw = lacking_config()
    cluster.kubectl("delete", "crd", SLURM_CLUSTER_CRD)
    cluster.apply(nodes_with_four_gpus(raw))
    namespaces(cluster, NAMESPACE, "nvidia-network-operator")
    cluster.apply([HAND_MADE_CLAIM, HELM_RELEASE])

    found = failing(preflight(cluster, raw))

    assert "labelExistingNodes names nodes that do not exist: system-node-from-the-guide" in found["node pool system"]
    gpu = found["node pool gpu"]
    assert "nvidia.com/gpu 4 < 8" in gpu and "kwok-gpu-0" in gpu and "nodePools[0].cpuPerNode/memoryPerNode/gpusPerNode" in gpu
    assert "CSI driver nfs.csi.k8s.io is not installed" in found["storage class slurm-nfs"]
    assert "not served: no CRD defines it, and no chart of this stack installs one" in found["SlurmCluster (slurm.nebius.ai/v1)"]
    assert "PersistentVolumeClaim fpt-hpc/controller-spool-pvc" in found["name collisions"]
    assert "a Helm release 'network-operator' is already installed" in found["chart network-operator in nvidia-network-operator"]
    # The NicClusterPolicy's CRD comes with the stack's network-operator chart: not a failure.
    assert not [s for s in found if "NicClusterPolicy" in s]

    denied = failing(preflight(cluster, raw, viewer_kubeconfig(cluster, tmp_path)))["credentials"]
    assert "create persistentvolumeclaims in fpt-hpc" in denied and "create customresourcedefinitions.apiextensions.k8s.io (cluster-wide)" in denied
    # A kind the API server does not serve yet is asked for by Kubernetes' own plural guess.
    assert "create slurmclusters.slurm.nebius.ai in fpt-hpc" in denied


def test_the_command_exits_non_zero_and_writes_the_job_summary(cluster, tmp_path):
    summary = tmp_path / "summary.md"
    env = {"PATH": "/usr/bin:/bin", "KUBECONFIG": str(cluster.kubeconfig), "GITHUB_STEP_SUMMARY": str(summary)}
    result = subprocess.run(
        [sys.executable, "-m", "tools.preflight", "--stack", KWOK_STACK], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "FAIL  [storage] storage class slurm-nfs: its CSI driver nfs.csi.k8s.io is not installed" in result.stdout
    assert result.stdout.rstrip().endswith("failing") and " 0 failing" not in result.stdout
    written = summary.read_text()
    assert written.startswith("### Preflight of `kwok`: ") and "FAIL  [storage] storage class slurm-nfs" in written


def test_a_complete_cluster_passes_before_and_after_the_up(cluster, request):
    cluster.kubectl("delete", "pvc", "controller-spool-pvc", "-n", NAMESPACE, "--wait=false")
    cluster.kubectl("patch", "pvc", "controller-spool-pvc", "-n", NAMESPACE, "--type=merge", "-p", '{"metadata":{"finalizers":null}}', check=False)
    cluster.kubectl("delete", "secret", HELM_RELEASE["metadata"]["name"], "-n", "nvidia-network-operator")
    cluster.kubectl("delete", "nodes", "--all")
    cluster.apply([NFS_DRIVER])
    cluster.kubectl("apply", "--server-side", "--field-manager=kube-local", "-f", str(ROOT / "contracts/soperator/1.14.10"))
    established = lambda: any(  # noqa: E731
        c["type"] == "Established" and c["status"] == "True"
        for c in (cluster.require("crd", SLURM_CLUSTER_CRD).get("status") or {}).get("conditions") or []
    )
    wait_until("the SlurmCluster CRD to be Established", established, timeout=30)
    ws = request.getfixturevalue("ws")  # kwok nodes shaped like the kwok stack's pools

    before = preflight(cluster, stack_config(KWOK_STACK))
    assert failing(before) == {}
    assert {"node pool gpu", "node pool system", "storage class slurm-nfs", "name collisions", "credentials"} <= {c.subject for c in before}

    ws.pulumi("up", "--yes", "--skip-preview", stack=KWOK_STACK)
    after = preflight(cluster, stack_config(KWOK_STACK))
    # What the up made is Pulumi's: no collision, and the objects were found.
    assert failing(after) == {}
    collisions = next(c for c in after if c.subject == "name collisions")
    assert collisions.detail.startswith("none among the ") and int(collisions.detail.split()[3]) > 10


def test_live_nodes_in_two_pools_kueue_labels_and_a_tls_secret_without_its_ca(cluster):
    """After the up: the kwok stack's nodes, as a user's mistakes leave them."""
    raw = copy.deepcopy(stack_config(KWOK_STACK))
    raw["nodePools"][1]["labelExistingNodes"] = ["kwok-system-0", "kwok-system-1", "kwok-gpu-0"]  # a GPU node named for the system pool
    raw["nodePools"][0]["kueueNodeLabels"] = {"worker.fptcloud/scheduler": "kueue"}  # all 4 nodes are Slurm workers: none is Kueue's
    raw["ldap"] = {**raw.get("ldap", {}), "tls": {"enabled": True, "secretName": "ldap-tls"}}
    cluster.kubectl("label", "node", "kwok-gpu-3", "worker.fptcloud/scheduler=kueue")
    tls = {"tls.crt": "certificate", "tls.key": "key"}  # what `kubectl create secret tls` makes: no ca.crt
    cluster.apply(
        [
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "ldap-tls", "namespace": NAMESPACE},
                "type": "kubernetes.io/tls",
                "stringData": tls,
            }
        ]
    )

    found = failing(preflight(cluster, raw))

    assert (
        "kwok-gpu-0 is in gpu (nodePools[0].selector worker.fptcloud/pool=gpu) and system (nodePools[1].labelExistingNodes)"
        in found["node pools apart"]
    )
    assert found["Kueue nodes of pool gpu"].startswith(
        "1 of its nodes carry nodePools[0].kueueNodeLabels worker.fptcloud/scheduler=kueue (kwok-gpu-3), where nodeCount - slurmWorkers is 4 - 4 = 0"
    )
    assert found["Secret fpt-hpc/ldap-tls (ldap.tls.secretName)"].startswith("has no ca.crt (it holds tls.crt, tls.key)")

    cluster.kubectl("label", "node", "kwok-gpu-3", "worker.fptcloud/scheduler-")
    fixed = failing(preflight(cluster, raw))
    assert "Kueue nodes of pool gpu" not in fixed and "node pools apart" in fixed

"""Day 2 on the real API server (scripts/kube-local.sh's control plane, one per module, stopped by PID
pass or fail), on one `kwok` stack, in file order: soperator 1.14.10 -> 4.1.7 by config (the preview
shows the move, the up converges, the data stays), the way back refused, chart and image bumps as
updates, and the stack renamed and moved to another backend with nothing replaced. Data is
tests/kube.py's `data_snapshot`: claims and volumes by UID, the munge key's bytes, MariaDB CRs,
tenants' namespaces."""

from __future__ import annotations

import json

import pytest

from tests.engine import Workspace
from tests.kube import KWOK_STACK, LocalCluster, assert_data_kept, data_snapshot

NAMESPACE = "fpt-hpc"
MUNGE_SECRET = "fpt-hpc-munge"
CRD = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"
CHART = "kubernetes:helm.sh/v4:Chart"
REPLACING = ("replace", "create-replacement", "delete-replaced")


@pytest.fixture(scope="module")
def ws(ws):
    """The shared kwok workspace (conftest), after a first up on soperator 1.14.10."""
    ws.pulumi("up", "--yes", "--skip-preview", stack=KWOK_STACK)
    return ws


@pytest.fixture(scope="module")
def before(ws, cluster):
    """The data and the soperator objects as the first up left them."""
    return {
        "data": data_snapshot(cluster, NAMESPACE, MUNGE_SECRET),
        "cluster": cluster.require("slurmcluster", "fpt-hpc", NAMESPACE)["metadata"]["uid"],
        "crd": cluster.require("crd", "slurmclusters.slurm.nebius.ai")["metadata"]["uid"],
    }


def set_config(ws: Workspace, values: dict[str, str]) -> None:
    """Every value in one CLI call (a start of the CLI costs a second or two)."""
    pairs = [arg for path, value in values.items() for arg in ("--plaintext", f"slurm-platform:{path}={value}")]
    ws.pulumi("config", "set-all", "--path", *pairs, stack=KWOK_STACK)


def changes(ws: Workspace) -> dict[str, str]:
    """`type::name` -> operation of every step of a preview that changes something."""
    result = ws.pulumi("preview", "--json", stack=KWOK_STACK)
    steps = json.loads(result.stdout).get("steps", [])
    return {
        f"{s['urn'].split('::')[-2].rsplit('$', 1)[-1]}::{s['urn'].rsplit('::', 1)[-1]}": s["op"] for s in steps if s["op"] not in ("same", "read")
    }


def names(changed: dict[str, str], *ops: str) -> set[str]:
    return {urn.rsplit("::", 1)[-1] for urn, op in changed.items() if op in ops}


def converge(ws: Workspace, cluster: LocalCluster, before: dict) -> None:
    ws.pulumi("up", "--yes", "--skip-preview", stack=KWOK_STACK)
    ws.pulumi("preview", "--expect-no-changes", stack=KWOK_STACK)
    assert_data_kept(before["data"], data_snapshot(cluster, NAMESPACE, MUNGE_SECRET))


def test_the_data_snapshot_holds_what_must_survive(before):
    data = before["data"]
    assert {"jail-pvc", "controller-spool-pvc", "jail-submount-mlperf-sd-pvc"} <= set(data["claims"])
    assert all(volume for _, volume in data["claims"].values()) and len(data["volumes"]) == len(data["claims"])
    assert data["munge"]["munge.key"]


# kube-local.sh charts: soperator 4.1.7's stand-in charts, its CRDs chart carrying the 4.1.7 contract.
STAND_INS_4 = {"operators.soperator.repository": "./.kwok/charts/soperator-4.1.7"}


def test_the_soperator_4_1_7_move_starts_with_its_crds(ws, cluster, before):
    """The README's first up: the CRDs alone (the SlurmCluster's preview is a server-side dry run,
    checked against the CRD the cluster has, which must be 4.1.7's first)."""
    set_config(ws, {**STAND_INS_4, "operators.soperator.crdsVersion": "4.1.7"})
    changed = changes(ws)
    print(json.dumps(changed, indent=1))
    # The SlurmCluster CRD the cluster has, taken over and updated to 4.1.7's schema, and NodeSet's.
    crds = {urn.rsplit(":", 1)[-1] for urn in changed if urn.startswith(CRD)}
    assert crds == {"slurmclusters.slurm.nebius.ai", "nodesets.slurm.nebius.ai"}, changed
    # Besides them only the charts' own inputs (version, path) change: no object of the cluster.
    assert {urn for urn in changed if not urn.startswith(CRD)} <= {f"{CHART}::operators-soperator-crds", f"{CHART}::operators-soperator"}, changed
    ws.pulumi("up", "--yes", "--skip-preview", stack=KWOK_STACK)
    crd = cluster.require("crd", "slurmclusters.slurm.nebius.ai")
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["slurmNodes"]
    assert crd["metadata"]["uid"] == before["crd"] and "worker" not in schema["properties"]
    # The same SlurmCluster, which the API server now reads through 4.1.7's schema: without the workers
    # (pruned), so the 1.14.10 operator must not be left with it (the README: the next up right away).
    slurm = cluster.require("slurmcluster", "fpt-hpc", NAMESPACE)
    assert slurm["metadata"]["uid"] == before["cluster"] and "worker" not in slurm["spec"]["slurmNodes"]
    assert_data_kept(before["data"], data_snapshot(cluster, NAMESPACE, MUNGE_SECRET))


def test_the_soperator_4_1_7_preview_shows_the_move(ws):
    """The second up: the version, cert-manager declared present (kwok has no chart for it)."""
    set_config(ws, {"operators.soperator.version": "4.1.7", "operators.certManager.install": "false"})
    ws.pulumi("config", "rm", "--path", "slurm-platform:operators.soperator.crdsVersion", stack=KWOK_STACK)
    # 4.1.7 sizes workers per pool (nodeCount, 4 as slurm.worker.size was) and refuses slurm.worker.size.
    ws.pulumi("config", "rm", "--path", "slurm-platform:slurm.worker.size", stack=KWOK_STACK)
    changed = changes(ws)
    print(json.dumps(changed, indent=1))
    # The SlurmCluster is updated in place; the workers move to one NodeSet per GPU pool.
    assert "slurm-cluster" in names(changed, "update")
    assert "slurm-nodeset-gpu" in names(changed, "create")
    # Nothing is replaced, and nothing that holds data is touched.
    assert not names(changed, *REPLACING), changed
    # (The LDAP StatefulSet's pods take the cluster's new PriorityClass; its claim is the StatefulSet's, kept.)
    holds_data = ("kubernetes:core/v1:PersistentVolumeClaim", "kubernetes:core/v1:PersistentVolume")
    touched = {
        urn for urn, op in changed.items() if op in ("update", "delete") and (urn.startswith(holds_data) or "::munge-" in urn or "::storage-" in urn)
    }
    assert not touched, changed


def test_the_soperator_4_1_7_up_converges_with_the_data_intact(ws, cluster, before):
    converge(ws, cluster, before)
    slurm = cluster.require("slurmcluster", "fpt-hpc", NAMESPACE)
    assert slurm["metadata"]["uid"] == before["cluster"] and "worker" not in slurm["spec"]["slurmNodes"]
    assert cluster.require("crd", "slurmclusters.slurm.nebius.ai")["metadata"]["uid"] == before["crd"]
    nodeset = cluster.require("nodeset.slurm.nebius.ai", "gpu", NAMESPACE)
    assert nodeset["metadata"]["annotations"]["slurm.nebius.ai/parental-cluster-ref"] == "fpt-hpc"


def test_going_back_to_1_14_10_is_refused_before_anything_is_registered(ws):
    state = json.loads(ws.pulumi("stack", "export", stack=KWOK_STACK).stdout)["deployment"]["resources"]
    # With 1.14.10's slurm.worker.size back (its default, 8, is more than the pool's 4 nodes): the way back as its user would write it.
    set_config(ws, {"operators.soperator.version": "1.14.10", "slurm.worker.size": "4"})
    try:
        result = ws.pulumi("preview", stack=KWOK_STACK, check=False)
    finally:
        set_config(ws, {"operators.soperator.version": "4.1.7"})
        ws.pulumi("config", "rm", "--path", "slurm-platform:slurm.worker.size", stack=KWOK_STACK)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "Traceback" not in output
    assert "slurm-platform:operators.soperator.version: this stack runs soperator 4.1.7 and soperator has no way back" in output
    after = json.loads(ws.pulumi("stack", "export", stack=KWOK_STACK).stdout)["deployment"]["resources"]
    assert [r["urn"] for r in after] == [r["urn"] for r in state]


def test_chart_and_image_bumps_are_updates_and_the_up_converges(ws, cluster, before):
    set_config(ws, {"operators.networkOperator.version": "25.1.0", "slurm.images.tag": "25.11.3-slurm25.11.3"})
    changed = changes(ws)
    # The Slurm image: the SlurmCluster and its NodeSet updated in place. (A chart's own inputs are no step of
    # their own: a chart bump shows as the updates of what it renders, none here for the stand-in.)
    assert {"slurm-cluster", "slurm-nodeset-gpu"} <= names(changed, "update"), changed
    assert not names(changed, *REPLACING, "delete", "create"), changed
    converge(ws, cluster, before)
    outputs = json.loads(ws.pulumi("stack", "output", "--json", stack=KWOK_STACK).stdout)
    assert outputs["installedCharts"]["network-operator"]["version"] == "25.1.0"
    nodeset = cluster.require("nodeset.slurm.nebius.ai", "gpu", NAMESPACE)
    assert "25.11.3-slurm25.11.3" in json.dumps(nodeset["spec"])
    assert cluster.require("slurmcluster", "fpt-hpc", NAMESPACE)["metadata"]["uid"] == before["cluster"]


# kube-local.sh charts: gpu-operator's and Kueue's stand-ins, each at two versions (the GPU operator's: the major
# release before the pin, from which NVIDIA supports the upgrade), their Deployment's image tag the chart's appVersion,
# as the real charts'. Kueue renders its queues only with tenants (operators.kueue.enabled needs
# one), so the stack gains one, without a namespace: Kueue's flavor, topology and priority classes.
CHARTS_A = {
    "operators.gpuOperator.install": "true",
    "operators.gpuOperator.version": "v26.3.3",
    "operators.gpuOperator.repository": "./.kwok/charts/gpu-operator-v26.3.3",
    "operators.kueue.enabled": "true",
    "operators.kueue.version": "0.19.1",
    "operators.kueue.repository": "./.kwok/charts/kueue-0.19.1",
    "tenants[0].name": "vision",
    "tenants[0].cells[0].pool": "gpu",
    "tenants[0].cells[0].gpusPerCell": "8",
    "tenants[0].cells[0].cells": "1",
}
CHARTS_B = {
    "operators.gpuOperator.version": "v26.7.0",
    "operators.gpuOperator.repository": "./.kwok/charts",
    "operators.kueue.version": "0.19.2",
    "operators.kueue.repository": "./.kwok/charts",
}
# The charts' Deployments (namespace/name) and their images at A and at B.
OPERATORS = {
    ("gpu-operator", "gpu-operator"): ("nvcr.io/nvidia/gpu-operator:v26.3.3", "nvcr.io/nvidia/gpu-operator:v26.7.0"),
    ("kueue-system", "kueue-controller-manager"): ("registry.k8s.io/kueue/kueue:v0.19.1", "registry.k8s.io/kueue/kueue:v0.19.2"),
}
KUEUE_KINDS = ("resourceflavors.kueue.x-k8s.io", "topologies.kueue.x-k8s.io", "workloadpriorityclasses.kueue.x-k8s.io")


def operator_images(cluster: LocalCluster) -> dict[tuple[str, str], tuple[str, str]]:
    """(namespace, name) -> (UID, image) of each chart's Deployment."""
    found = {key: cluster.require("deployment", key[1], key[0]) for key in OPERATORS}
    return {key: (d["metadata"]["uid"], d["spec"]["template"]["spec"]["containers"][0]["image"]) for key, d in found.items()}


def kueue_objects(cluster: LocalCluster) -> dict[str, str]:
    """kind/name -> UID of every cluster-scoped Kueue object."""
    items = [item for kind in KUEUE_KINDS for item in json.loads(cluster.kubectl("get", kind, "-o", "json").stdout)["items"]]
    return {f"{item['kind']}/{item['metadata']['name']}": item["metadata"]["uid"] for item in items}


def test_gpu_operator_and_kueue_chart_bumps_are_updates_in_place(ws, cluster, before):
    set_config(ws, CHARTS_A)
    converge(ws, cluster, before)
    at_a = operator_images(cluster)
    assert {key: image for key, (_, image) in at_a.items()} == {key: images[0] for key, images in OPERATORS.items()}
    queues = kueue_objects(cluster)
    assert {name.split("/")[0] for name in queues} == {"ResourceFlavor", "Topology", "WorkloadPriorityClass"}, queues
    set_config(ws, CHARTS_B)
    changed = changes(ws)
    print(json.dumps(changed, indent=1))
    # Each chart's Deployment updated in place (its image and version label); nothing else of the cluster moves.
    release = {"gpu-operator": "operators-gpu-operator", "kueue-system": "operators-kueue"}
    assert names(changed, "update") == {f"{release[namespace]}:{namespace}/{name}" for namespace, name in OPERATORS}, changed
    assert not names(changed, *REPLACING, "delete", "create"), changed
    converge(ws, cluster, before)
    assert operator_images(cluster) == {key: (at_a[key][0], images[1]) for key, images in OPERATORS.items()}
    assert kueue_objects(cluster) == queues
    outputs = json.loads(ws.pulumi("stack", "output", "--json", stack=KWOK_STACK).stdout)
    assert outputs["installedCharts"]["gpu-operator"]["version"] == "v26.7.0"
    assert outputs["installedCharts"]["kueue"]["version"] == "0.19.2"


def test_a_renamed_stack_and_one_moved_to_another_backend_keep_every_resource(ws, cluster, before, tmp_path):
    urns = [r["urn"] for r in json.loads(ws.pulumi("stack", "export", stack=KWOK_STACK).stdout)["deployment"]["resources"]]
    ws.pulumi("stack", "rename", "kwok-renamed", stack=KWOK_STACK)
    try:
        # Only the stack part of every URN changes; the preview after the rename changes nothing.
        renamed = [r["urn"] for r in json.loads(ws.pulumi("stack", "export", stack="kwok-renamed").stdout)["deployment"]["resources"]]
        # (and the root Stack's own name, slurm-platform-<stack>, which is no resource's parent name).
        expected = [urn.replace(f"urn:pulumi:{KWOK_STACK}::", "urn:pulumi:kwok-renamed::", 1) for urn in urns]
        expected = [
            urn.removesuffix("::slurm-platform-kwok") + ("::slurm-platform-kwok-renamed" if urn.endswith("::slurm-platform-kwok") else "")
            for urn in expected
        ]
        assert [urn for urn in renamed if "StackReference" not in urn] == [urn for urn in expected if "StackReference" not in urn]
        ws.pulumi("preview", "--expect-no-changes", stack="kwok-renamed")
        # Exported, imported into another backend (a new state directory): the same.
        exported = tmp_path / "kwok.json"
        exported.write_text(ws.pulumi("stack", "export", stack="kwok-renamed").stdout)
        moved = Workspace(ws.root)
        (tmp_path / "state").mkdir()
        moved.env = {**ws.env, "PULUMI_BACKEND_URL": f"file://{tmp_path / 'state'}?metadata=skip"}
        moved.pulumi("stack", "init", "kwok-renamed", "--secrets-provider", "passphrase", stack=None)
        moved.pulumi("stack", "import", "--file", str(exported), stack="kwok-renamed")
        moved.pulumi("preview", "--expect-no-changes", stack="kwok-renamed")
    finally:
        ws.pulumi("stack", "rename", KWOK_STACK, stack="kwok-renamed")
    assert_data_kept(before["data"], data_snapshot(cluster, NAMESPACE, MUNGE_SECRET))

"""End-to-end under the real Pulumi engine against a real Kubernetes API server.

scripts/kube-local.sh's control plane (kube-apiserver, controller manager and
scheduler v1.33.3, etcd, kwok's fake nodes) runs on 127.0.0.1 for this module
and is stopped by PID when it ends, pass or fail. The `kwok` stack deploys to
it; kwok stages play the operators (SlurmCluster Available, claims bound,
LoadBalancer addresses). The tests run in file order on one stack: up, no-op
up, CRs as the API server sees them, drift, SSA ownership, the readiness
failure, and finally the destroy that must refuse.
"""

from __future__ import annotations

import json

import pytest

from components.render.munge import MUNGE_KEY_FIELD
from tests.engine import Workspace
from tests.kube import KWOK_STACK, LocalCluster, contains, wait_until

NAMESPACE = "fpt-hpc"
CLAIMS = ["jail-pvc", "controller-spool-pvc", "jail-submount-mlperf-sd-pvc"]
MUNGE_SECRET = "fpt-hpc-munge"
CUSTOM_RESOURCE_TYPES = ("kubernetes:slurm.nebius.ai/v1:SlurmCluster", "kubernetes:mellanox.com/v1alpha1:NicClusterPolicy")


def up(ws: Workspace, *args: str, check: bool = True):
    return ws.pulumi("up", "--yes", "--skip-preview", *args, stack=KWOK_STACK, check=check)


def state_resources(ws: Workspace) -> list[dict]:
    return json.loads(ws.pulumi("stack", "export", stack=KWOK_STACK).stdout)["deployment"]["resources"]


def claim_names(cluster: LocalCluster) -> list[str]:
    return [claim for claim in CLAIMS if cluster.get("pvc", claim, NAMESPACE)]


def test_kwok_nodes_carry_the_pools_labels_taints_and_allocatable(ws, cluster):
    gpu = cluster.get("node", "kwok-gpu-0")
    assert gpu["metadata"]["labels"]["worker.fptcloud/pool"] == "gpu"
    # The node lifecycle controller may still hold its own node.kubernetes.io/* taint for a moment.
    pool_taints = [t for t in gpu["spec"]["taints"] if not t["key"].startswith("node.kubernetes.io/")]
    assert pool_taints == [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    assert gpu["status"]["allocatable"]["nvidia.com/gpu"] == "8" and gpu["status"]["allocatable"]["cpu"] == "112"
    system = cluster.get("node", "kwok-system-1")
    assert system["metadata"]["labels"]["worker.fptcloud/pool"] == "system"
    assert not [t for t in system["spec"].get("taints", []) if not t["key"].startswith("node.kubernetes.io/")]


def test_up_deploys_and_the_operators_part_completes(ws, cluster):
    up(ws)
    # Pulumi waited for these: the claims bound (kwok provisions, the real binder binds) ...
    for claim in CLAIMS:
        assert cluster.get("pvc", claim, NAMESPACE)["status"]["phase"] == "Bound", claim
    # ... the restricted LoadBalancer got its address, the stand-in operators' pods run on fake nodes.
    services = json.loads(cluster.kubectl("get", "svc", "-n", NAMESPACE, "-o", "json").stdout)["items"]
    balancers = [s for s in services if s["spec"]["type"] == "LoadBalancer"]
    assert balancers and all([i["ip"] for i in s["status"]["loadBalancer"]["ingress"]] == ["127.0.0.2"] for s in balancers)
    deployment = cluster.get("deployment", "soperator-controller-manager", "soperator-system")
    assert deployment["status"]["availableReplicas"] == 1
    # soperator's part, faked by a kwok stage: the cluster turns Available.
    wait_until(
        "SlurmCluster fpt-hpc to be Available",
        lambda: (cluster.get("slurmcluster", "fpt-hpc", NAMESPACE).get("status") or {}).get("phase") == "Available",
        timeout=60,
    )
    outputs = json.loads(ws.pulumi("stack", "output", "--json", stack=KWOK_STACK).stdout)
    assert outputs["pvcNames"]["jail"] == "jail-pvc" and outputs["mungeSecretName"] == MUNGE_SECRET


def test_second_up_changes_nothing(ws):
    result = up(ws, "--expect-no-changes")
    assert "Resources:" in result.stdout and "unchanged" in result.stdout


def in_project(position: str) -> bool:
    """A source position in the program's files, as the engine writes it: project:///<path>; a file outside
    the project is project:///../<path>, one the SDK could not place is empty."""
    return position.startswith("project:///") and not position.startswith("project:///..") and "/site-packages/" not in position


def test_the_state_keeps_of_each_resource_only_the_programs_frames_of_its_stack_trace(ws):
    # What the program registers (not the stack itself, registered before it runs, nor the children that
    # the provider's Go code registers for a Chart) keeps its source position and the program's frames only.
    declared = [r for r in state_resources(ws) if in_project(r.get("sourcePosition", ""))]
    assert len(declared) > 40
    for resource in declared:
        first, *callers = [frame.get("sourcePosition", "") for frame in resource["stackTrace"]]
        assert first == resource["sourcePosition"], resource["urn"]
        assert callers and all(map(in_project, callers)), (resource["urn"], callers)


def test_every_custom_resource_is_accepted_and_stored_by_the_api_server(ws, cluster):
    customs = [r for r in state_resources(ws) if r["type"] in CUSTOM_RESOURCE_TYPES]
    assert {r["type"] for r in customs} == set(CUSTOM_RESOURCE_TYPES)
    for resource in customs:
        live = resource["outputs"]
        kind, name = live["kind"], live["metadata"]["name"]
        stored = cluster.get(f"{kind.lower()}.{live['apiVersion'].split('/')[0]}", name, live["metadata"].get("namespace"))
        assert stored is not None, (kind, name)
        assert stored["metadata"]["uid"] == live["metadata"]["uid"]
        # What the server stored (after pruning unknown fields and defaulting) still holds all we sent.
        assert contains(stored["spec"], resource["inputs"]["spec"]), (kind, name)


@pytest.mark.parametrize(
    "bad_spec, message",
    [
        ({"clusterType": "tpu"}, 'spec.clusterType: Unsupported value: "tpu": supported values: "gpu", "cpu"'),
        # A CEL rule: jsonschema cannot check it; the API server checks it only once the schema holds.
        (
            {"telemetry": {"jobsTelemetry": {"otelCollectorGrpcHost": "otel.example", "otelCollectorHttpHost": "otel.example"}}},
            "Both OtelCollectorGrpcHost and OtelCollectorHttpHost cannot be set at the same time",
        ),
    ],
    ids=["enum", "cel-rule"],
)
def test_the_api_server_refuses_an_invalid_slurm_cluster(ws, cluster, bad_spec, message):
    stored = cluster.get("slurmcluster", "fpt-hpc", NAMESPACE)
    invalid = {
        "apiVersion": stored["apiVersion"],
        "kind": "SlurmCluster",
        "metadata": {"name": "broken", "namespace": NAMESPACE},
        "spec": {**stored["spec"], **bad_spec},
    }
    result = cluster.kubectl("create", "--dry-run=server", "-f", "-", check=False, stdin=json.dumps(invalid))
    assert result.returncode != 0
    assert 'The SlurmCluster "broken" is invalid' in result.stderr and message in result.stderr, result.stderr


def test_refresh_shows_out_of_band_drift_and_the_next_up_repairs_it(ws, cluster):
    uid = cluster.get("pvc", "jail-pvc", NAMESPACE)["metadata"]["uid"]
    cluster.kubectl("label", "pvc", "jail-pvc", "-n", NAMESPACE, "slurm-platform/volume-")
    refreshed = ws.pulumi("refresh", "--yes", "--skip-preview", "--diff", stack=KWOK_STACK)
    assert "jail-pvc" in refreshed.stdout and "slurm-platform/volume" in refreshed.stdout
    steps = ws.preview_steps(stack=KWOK_STACK)
    changed = {(s["op"], s["urn"].rsplit("::", 1)[1]) for s in steps if s["op"] not in ("same", "read")}
    assert changed == {("update", "storage-jail-pvc")}
    up(ws)
    repaired = cluster.get("pvc", "jail-pvc", NAMESPACE)
    assert repaired["metadata"]["labels"]["slurm-platform/volume"] == "jail"
    assert repaired["metadata"]["uid"] == uid
    ws.pulumi("preview", "--expect-no-changes", stack=KWOK_STACK)


def test_fields_owned_by_another_manager_survive_an_update(ws, cluster):
    # Another tool (field manager kube-tests) owns an annotation on the SlurmCluster; kwok owns its status.
    cluster.kubectl("annotate", "slurmcluster", "fpt-hpc", "-n", NAMESPACE, "backup.example.com/schedule=nightly", "--field-manager=kube-tests")
    ws.pulumi("config", "set", "--path", "slurm-platform:slurm.worker.size", "3", stack=KWOK_STACK)
    up(ws)
    stored = cluster.get("slurmcluster", "fpt-hpc", NAMESPACE)
    assert stored["spec"]["slurmNodes"]["worker"]["size"] == 3
    assert stored["metadata"]["annotations"]["backup.example.com/schedule"] == "nightly"
    assert stored["status"]["phase"] == "Available"
    shown = json.loads(cluster.kubectl("get", "slurmcluster", "fpt-hpc", "-n", NAMESPACE, "-o", "json", "--show-managed-fields").stdout)
    owners = {entry["manager"]: json.dumps(entry.get("fieldsV1", {})) for entry in shown["metadata"]["managedFields"]}
    assert "backup.example.com/schedule" in owners["kube-tests"]
    assert any(manager.startswith("pulumi") and '"f:slurmNodes"' in fields for manager, fields in owners.items()), list(owners)


def test_a_slurm_cluster_that_fails_shows_its_failure_condition(ws, cluster):
    cluster.kubectl("annotate", "slurmcluster", "fpt-hpc", "-n", NAMESPACE, "kwok.slurm-platform/simulate=failure")
    try:
        status = wait_until(
            "SlurmCluster fpt-hpc to report its failure",
            lambda: (
                (cluster.get("slurmcluster", "fpt-hpc", NAMESPACE).get("status") or {}).get("phase") == "Not available"
                and cluster.get("slurmcluster", "fpt-hpc", NAMESPACE)["status"]
            ),
            timeout=60,
        )
        (condition,) = status["conditions"]
        assert condition["type"] == "Available" and condition["status"] == "False" and condition["reason"] == "ReconcileFailed"
        # A refresh reads the live status into the state: outputs now show the failure.
        ws.pulumi("refresh", "--yes", "--skip-preview", stack=KWOK_STACK)
        (slurm,) = [r for r in state_resources(ws) if r["type"] == CUSTOM_RESOURCE_TYPES[0]]
        assert slurm["outputs"]["status"]["phase"] == "Not available"
    finally:
        cluster.kubectl("annotate", "slurmcluster", "fpt-hpc", "-n", NAMESPACE, "kwok.slurm-platform/simulate-")


def test_destroy_refuses_the_protected_volumes_and_they_stay_in_the_api_server(ws, cluster):
    before = {claim: cluster.get("pvc", claim, NAMESPACE)["metadata"]["uid"] for claim in CLAIMS}
    munge = cluster.get("secret", MUNGE_SECRET, NAMESPACE)
    result = ws.pulumi("destroy", "--yes", "--skip-preview", stack=KWOK_STACK, check=False)
    assert result.returncode != 0
    assert "protected" in result.stdout + result.stderr
    after = {claim: cluster.get("pvc", claim, NAMESPACE)["metadata"]["uid"] for claim in claim_names(cluster)}
    assert after == before
    assert MUNGE_KEY_FIELD in munge["data"]

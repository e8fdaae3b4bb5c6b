"""The preflight's pure parts: what a stack needs, read from the program under mocks, and the node
checks on plain Node objects. tests/test_kube_preflight.py runs every check on a real API server."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.config import parse_config
from tests.harness import stack_config
from tools.preflight import Declared, guess_resource, needs, node_checks, stack_needs
from tools.program_mocks import run_under_mocks


def needs_of(raw: dict[str, Any], stack: str) -> list[Declared]:
    return stack_needs(parse_config(raw), raw, stack).objects


def kinds(objects: list[Declared], from_chart: bool) -> set[str]:
    return {o.kind for o in objects if o.crd_from_chart == from_chart and "." in o.api_version.split("/")[0]}


def test_custom_objects_waiting_for_a_chart_of_the_stack_need_no_crd_beforehand():
    raw = stack_config("prod-hoalac")
    objects = needs_of(raw, "prod-hoalac")
    assert {"SlurmCluster", "NodeSet", "ClusterQueue", "ResourceFlavor", "Topology", "NicClusterPolicy"} <= kinds(objects, True)
    # Kueue portal-installed: the same objects now need Kueue's CRDs in the cluster.
    portal = copy.deepcopy(raw)
    portal["operators"]["kueue"]["install"] = False
    without_chart = needs_of(portal, "prod-hoalac")
    assert {"ClusterQueue", "LocalQueue", "ResourceFlavor", "Topology", "WorkloadPriorityClass"} <= kinds(without_chart, False)
    assert "SlurmCluster" in kinds(without_chart, True)


def test_acks_slurm_cluster_comes_from_no_chart_and_the_ldap_tls_secret_is_read():
    objects = needs_of(stack_config("staging-hangzhou"), "staging-hangzhou")
    assert "SlurmCluster" in kinds(objects, False)
    read = [o for o in objects if o.read]
    assert [(o.kind, o.namespace, o.name) for o in read] == [("Secret", "slurm", "ldap-tls")]


def test_charts_and_adopted_claims():
    raw = copy.deepcopy(stack_config("prod-hanoi"))
    raw["storage"]["jail"]["adopt"] = True
    raw["cluster"]["createNamespace"] = False  # adopted objects live in a namespace made by hand
    config = parse_config(raw)
    found = stack_needs(config, raw, "prod-hanoi")
    assert {(r.name, r.namespace) for r in found.releases} >= {("soperator", "soperator-system"), ("gpu-operator", "gpu-operator")}
    adopted = [o.ref() for o in found.objects if o.adopted]
    assert "PersistentVolumeClaim fpt-hpc/jail-pvc" in adopted
    # Node label patches are not objects of ours.
    assert not [o for o in found.objects if o.kind == "NodePatch"]


def test_needs_skips_what_is_not_a_kubernetes_object():
    run = run_under_mocks(lambda: None)
    assert needs(run.resources).objects == []


@pytest.mark.parametrize(
    ("kind", "resource"), [("ClusterQueue", "clusterqueues"), ("Gateway", "gateways"), ("Policy", "policies"), ("Status", "statuses")]
)
def test_the_plural_is_kubernetes_own_guess(kind, resource):
    # apimachinery's UnsafeGuessKindToResource: -s takes -es, -y becomes -ies (whatever precedes it).
    expected = {"Gateway": "gatewaies"}.get(kind, resource)
    assert guess_resource(kind) == expected


def node(name: str, labels: dict[str, str], cpu: str, memory: str, gpus: str | None = None) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": memory, **({"nvidia.com/gpu": gpus} if gpus else {})}
    return {"metadata": {"name": name, "labels": labels}, "status": {"allocatable": allocatable}}


def test_node_checks_count_selected_nodes_and_their_allocatable():
    config = parse_config(stack_config("kwok"))  # gpu: 4 nodes of 8 GPUs, 112 CPU, 1250Gi; system: 2 nodes
    gpu = {"worker.fptcloud/pool": "gpu"}
    system = {"worker.fptcloud/pool": "system"}
    nodes = [node(f"g{i}", gpu, "112", "1250Gi", "8") for i in range(4)] + [node(f"s{i}", system, "32", "128Gi") for i in range(2)]
    assert all(c.passed for c in node_checks(config, nodes))

    short = copy.deepcopy(nodes)
    short[2]["status"]["allocatable"]["nvidia.com/gpu"] = "7"
    short[3]["status"]["allocatable"]["memory"] = "1000Gi"
    (gpu_check,) = [c for c in node_checks(config, short) if not c.passed]
    assert gpu_check.subject == "node pool gpu"
    assert gpu_check.problem == "nodes have less allocatable than nodePools[0] declares (g2: nvidia.com/gpu 7 < 8; g3: memory 1000Gi < 1250Gi)"

    (missing,) = [c for c in node_checks(config, nodes[1:]) if not c.passed]
    assert missing.problem == "3 nodes labelled worker.fptcloud/pool=gpu, nodePools[0].nodeCount is 4"
    assert "kubectl label node <name> worker.fptcloud/pool=gpu" in missing.fix


def test_node_checks_look_up_named_nodes():
    raw = copy.deepcopy(stack_config("kwok"))
    raw["nodePools"][1]["labelExistingNodes"] = ["s0", "s9"]
    checks = node_checks(parse_config(raw), [node("s0", {}, "32", "128Gi")])
    problems = {c.subject: c.problem for c in checks if not c.passed}
    assert problems["node pool system"] == "nodePools[1].labelExistingNodes names nodes that do not exist: s9"

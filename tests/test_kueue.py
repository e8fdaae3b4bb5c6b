"""Kueue beside Slurm (components/kueue.py): what the tenants' kueueCells render, how the fit
check counts both schedulers, and how the objects are wired (the API server's view is in
tests/test_kube_operators.py)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from components import kueue, operator_charts, tenancy
from components.charts import KUEUE
from components.config import ConfigError, parse_config
from components.slurm import operator_module, resolve
from components.slurm.common import TENANT_NAMESPACE_LABEL, worker_placement
from components.tenancy import POD_PRIORITY
from tests import scale
from tests.harness import stack_config
from tests.test_program import run_stack

STACK = "prod-hoalac"  # soperator 4.1.7, three tenants, a fifth H100 node for Kueue


def by_kind(config) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for rendered in kueue.render(config):
        found.setdefault(rendered.manifest["kind"], []).append(rendered.manifest)
    return found


def gpu_quota(queue: dict[str, Any]) -> dict[str, Any]:
    (group,) = queue["spec"]["resourceGroups"]
    return {f["name"]: next(r for r in f["resources"] if r["name"] == "nvidia.com/gpu") for f in group["flavors"]}


def test_nothing_without_kueue_and_kueue_needs_tenants():
    assert kueue.render(parse_config(stack_config("staging-hanoi"))) == []
    raw = {**stack_config("staging-hanoi"), "operators": {**stack_config("staging-hanoi")["operators"], "kueue": {"enabled": True}}}
    with pytest.raises(ConfigError, match=r"slurm-platform:operators\.kueue\.enabled: needs tenants"):
        parse_config(raw)


def test_a_flavor_and_topology_per_gpu_pool():
    config = parse_config(stack_config(STACK))
    found = by_kind(config)
    (flavor,) = found["ResourceFlavor"]
    assert flavor["metadata"]["name"] == "fpt-hpc-h100"
    assert flavor["spec"] == {
        # The pool's nodes that are not Slurm workers: its kueueNodeLabels.
        "nodeLabels": {"worker.fptcloud/pool": "gpu-h100", "worker.fptcloud/scheduler": "kueue"},
        "topologyName": "fpt-hpc-h100",
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    (topology,) = found["Topology"]
    assert topology["spec"]["levels"] == [{"nodeLabel": "kubernetes.io/hostname"}]
    raw = copy.deepcopy(stack_config(STACK))
    raw["nodePools"][0]["topologyLabels"] = ["cloud.example.com/block", "cloud.example.com/rack"]
    (racked,) = by_kind(parse_config(raw))["Topology"]
    assert [level["nodeLabel"] for level in racked["spec"]["levels"]] == [
        "cloud.example.com/block",
        "cloud.example.com/rack",
        "kubernetes.io/hostname",
    ]


def test_a_cluster_queue_per_tenant_namespace_holds_its_kueue_cells_in_one_cohort():
    raw = copy.deepcopy(stack_config(STACK))
    # Only vision's namespace is the stack's: the others get no queue (one made by anyone else would inherit it).
    assert {q["metadata"]["name"] for q in by_kind(parse_config(raw))["ClusterQueue"]} == {"vision"}
    for tenant in raw["tenants"]:
        tenant["namespace"] = True
    queues = {q["metadata"]["name"]: q for q in by_kind(parse_config(raw))["ClusterQueue"]}
    assert set(queues) == {"llm", "vision", "speech"}
    assert {q["spec"]["cohortName"] for q in queues.values()} == {"fpt-hpc"}
    # vision: one 8-GPU Kueue cell, borrowingCap 8; llm: none of its own, no cap; speech: cap 4.
    assert gpu_quota(queues["vision"]) == {"fpt-hpc-h100": {"name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": "8"}}
    assert gpu_quota(queues["llm"]) == {"fpt-hpc-h100": {"name": "nvidia.com/gpu", "nominalQuota": "0"}}
    assert gpu_quota(queues["speech"])["fpt-hpc-h100"]["borrowingLimit"] == "4"
    # cpu and memory in the share of a node its GPUs are (a whole 112-CPU, 1250Gi node for vision), each quantity
    # spelled as Kueue's webhook writes it back (any other spelling is a diff on every up).
    (flavor,) = queues["vision"]["spec"]["resourceGroups"][0]["flavors"]
    assert [(r["name"], r["nominalQuota"]) for r in flavor["resources"]] == [("cpu", "112"), ("memory", "1250Gi"), ("nvidia.com/gpu", "8")]
    assert queues["vision"]["spec"]["preemption"]["reclaimWithinCohort"] == "Any"
    assert queues["vision"]["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "vision"}}
    # Without the oppo level a tenant borrows nothing.
    raw["tenants"][0]["priorities"] = ["prod", "test"]
    llm = next(q for q in by_kind(parse_config(raw))["ClusterQueue"] if q["metadata"]["name"] == "llm")
    assert gpu_quota(llm)["fpt-hpc-h100"]["borrowingLimit"] == "0"


def test_kueue_cells_need_a_namespace_the_stack_owns():
    raw = copy.deepcopy(stack_config(STACK))
    raw["tenants"][1]["namespace"] = False
    with pytest.raises(ConfigError, match=r"slurm-platform:tenants\[1\]\.namespace: must be true with kueueCells: .* set namespace: true; got false"):
        parse_config(raw)


def test_kueue_manages_every_workload_of_the_tenant_namespaces():
    """The chart's config (Kueue 0.19.2's default Configuration, plus manageJobsWithoutQueueName for the
    tenant namespaces), and the policies that hold whoever configures Kueue."""
    config = parse_config(stack_config(STACK))
    values = operator_charts.kueue_values(config)
    configuration = json.loads(values["managerConfig"]["controllerManagerConfigYaml"])
    assert configuration["apiVersion"] == "config.kueue.x-k8s.io/v1beta2" and configuration["manageJobsWithoutQueueName"] is True
    assert configuration["managedJobsNamespaceSelector"] == {"matchLabels": {TENANT_NAMESPACE_LABEL: config.cluster.name}}
    assert "pod" in configuration["integrations"]["frameworks"] and "batch/job" in configuration["integrations"]["frameworks"]
    (release,) = [r for r in operator_charts.chart_releases(config, resolve(config)) if r.key == KUEUE]
    assert release.values == values
    policies = {m["metadata"]["name"]: m for m in by_kind(config)["ValidatingAdmissionPolicy"]}
    assert set(policies) == {"slurm-tenant-queued-jobs", "slurm-tenant-queued-pods"}
    for policy in policies.values():
        assert policy["spec"]["matchConstraints"]["namespaceSelector"] == configuration["managedJobsNamespaceSelector"]
    (job_rule,) = policies["slurm-tenant-queued-jobs"]["spec"]["matchConstraints"]["resourceRules"]
    assert (job_rule["apiGroups"], job_rule["resources"]) == (["batch"], ["jobs"])
    assert "system:serviceaccount:kube-system:job-controller" in policies["slurm-tenant-queued-pods"]["spec"]["validations"][0]["expression"]


def test_local_queues_only_in_tenant_namespaces_and_priorities_as_the_pod_classes():
    found = by_kind(parse_config(stack_config(STACK)))
    assert [(q["metadata"]["namespace"], q["metadata"]["name"], q["spec"]["clusterQueue"]) for q in found["LocalQueue"]] == [
        ("vision", "vision", "vision")
    ]
    assert {c["metadata"]["name"]: c["value"] for c in found["WorkloadPriorityClass"]} == {f"slurm-{k}": v for k, v in POD_PRIORITY.items()}


def test_the_fit_check_places_kueue_cells_on_the_nodes_that_are_not_slurm_workers():
    raw = copy.deepcopy(stack_config(STACK))
    raw["tenants"][0]["kueueCells"] = [{"pool": "h100", "gpusPerCell": 8, "cells": 1}]  # a second spare node is needed
    raw["tenants"][0]["namespace"] = True
    with pytest.raises(ConfigError) as refused:
        parse_config(raw)
    assert (
        "slurm-platform:tenants: pool 'h100' has 8 GPUs on its 1 Kueue nodes (those that are not Slurm workers), 8 each, and the "
        "tenants' kueueCells there ask 16: llm 8 (1 x 8), vision 8 (1 x 8); 8 GPUs more than it has" in str(refused.value)
    )
    raw["nodePools"][0]["nodeCount"] = 6
    assert parse_config(raw).tenants[0].kueue_cells
    raw = copy.deepcopy(stack_config(STACK))
    raw["operators"]["kueue"] = {"enabled": False}
    with pytest.raises(ConfigError, match=r"tenants\[1\]\.kueueCells: needs operators\.kueue\.enabled: true"):
        parse_config(raw)


def test_kueue_and_slurm_never_share_a_node_of_a_pool_they_share():
    """The flavor selects only the pool's Kueue nodes (kueueNodeLabels) and every operator's Slurm workers keep off them."""
    config = parse_config(stack_config(STACK))
    (pool,) = config.gpu_pools
    (flavor,) = by_kind(config)["ResourceFlavor"]
    assert pool.kueue_node_labels.items() <= flavor["spec"]["nodeLabels"].items()
    not_kueue = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "worker.fptcloud/scheduler", "operator": "NotIn", "values": ["kueue"]}]}]}
    assert worker_placement(config, pool)["affinity"]["nodeAffinity"] == {"requiredDuringSchedulingIgnoredDuringExecution": not_kueue}
    (nodeset,) = [r.manifest for r in operator_module(config).render(config) if r.manifest["kind"] == "NodeSet"]
    assert nodeset["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == not_kueue
    assert "podAntiAffinity" in nodeset["spec"]["affinity"]  # the tenant pods' anti-affinity stays
    # Two labels: a Slurm node lacks either (ORed terms), so a node with only one of them stays Slurm's.
    raw = copy.deepcopy(stack_config(STACK))
    raw["nodePools"][0]["kueueNodeLabels"] = {"a.example/kueue": "yes", "b.example/group": "k"}
    terms = worker_placement(parse_config(raw), parse_config(raw).gpu_pools[0])["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert [t["matchExpressions"][0]["key"] for t in terms["nodeSelectorTerms"]] == ["a.example/kueue", "b.example/group"]


def test_a_pool_shared_by_slurm_and_kueue_must_label_its_kueue_nodes():
    raw = copy.deepcopy(stack_config(STACK))
    del raw["nodePools"][0]["kueueNodeLabels"]
    with pytest.raises(
        ConfigError,
        match=r"slurm-platform:nodePools\[0\]\.kueueNodeLabels: must name the labels of the Kueue nodes of pool 'h100' \(the 1 that are not Slurm workers\).*kueueNodeLabels: \{worker\.fptcloud/scheduler: kueue\}; got",
    ):
        parse_config(raw)
    raw["nodePools"][0]["kueueNodeLabels"] = {"worker.fptcloud/pool": "kueue-h100"}
    with pytest.raises(
        ConfigError, match=r"slurm-platform:nodePools\[0\]\.kueueNodeLabels.*contradicts the pool's selector \(worker\.fptcloud/pool: gpu-h100\)"
    ):
        parse_config(raw)
    # A pool without Slurm workers is Kueue's alone: its selector is enough.
    raw = copy.deepcopy(stack_config(STACK))
    del raw["nodePools"][0]["kueueNodeLabels"]
    raw["nodePools"].append(
        {**raw["nodePools"][0], "name": "kueue-h100", "selector": {"worker.fptcloud/pool": "kueue-h100"}, "slurmWorkers": 0, "nodeCount": 1}
    )
    raw["nodePools"][0]["nodeCount"] = 4
    raw["tenants"][1]["kueueCells"] = [{"pool": "kueue-h100", "gpusPerCell": 8, "cells": 1}]
    config = parse_config(raw)
    (flavor,) = [f for f in by_kind(config)["ResourceFlavor"] if f["metadata"]["name"] == "fpt-hpc-kueue-h100"]
    assert flavor["spec"]["nodeLabels"] == {"worker.fptcloud/pool": "kueue-h100"}


def test_the_objects_wait_for_the_kueue_chart_and_a_local_queue_for_its_namespace():
    run = run_stack(STACK)
    chart = run.named(f"operators-{KUEUE}")
    assert chart.inputs["chart"] == "oci://registry.k8s.io/kueue/charts/kueue" and chart.inputs["version"] == "0.19.2"
    objects = [r for r in run.resources if r.type.startswith("kubernetes:kueue.x-k8s.io/")]
    assert len(objects) == 7  # a topology, a flavor, three priority classes, vision's two queues
    namespace = run.named("tenants-vision-namespace")
    for resource in objects:
        # Only the LocalQueue lives in the tenant's namespace; nothing waits for every tenant's.
        assert chart.urn in resource.dependencies, resource.name
        assert (namespace.urn in resource.dependencies) is resource.type.endswith(":LocalQueue"), resource.name
    assert run.named("kueue-vision-cluster-queue").urn in run.named("kueue-vision-local-queue").dependencies
    assert run.named("kueue-h100-topology").urn in run.named("kueue-h100-flavor").dependencies
    assert run.outputs["kueueQueues"] == {"llm": None, "vision": "vision", "speech": None}


def test_a_tenant_namespace_quota_admits_what_kueue_may_admit_for_it():
    raw = copy.deepcopy(stack_config(STACK))
    vision = parse_config(raw).tenants[1]
    assert vision.guaranteed_gpus == 8 and tenancy.namespace_gpu_quota(parse_config(raw), vision) == 8  # its 8 Kueue GPUs; the cohort has no more
    raw["nodePools"][0]["nodeCount"] = 6
    raw["tenants"][0]["kueueCells"] = [{"pool": "h100", "gpusPerCell": 8, "cells": 1}]
    raw["tenants"][0]["namespace"] = True
    config = parse_config(raw)
    # 8 of its own and up to 8 borrowed (borrowingCap 8) from llm's idle 8: 16, what the ResourceQuota allows.
    assert tenancy.namespace_gpu_quota(config, config.tenants[1]) == 16
    (quota,) = [
        r.manifest
        for r in tenancy.render(config, operator_module(config).accounting_client(config))
        if r.manifest["metadata"] == {**r.manifest["metadata"], "name": "gpu-guarantee", "namespace": "vision"}
    ]
    assert quota["spec"]["hard"] == {"requests.nvidia.com/gpu": "16"}
    raw["tenants"][1]["borrowingCap"] = 2
    assert tenancy.namespace_gpu_quota(parse_config(raw), parse_config(raw).tenants[1]) == 10
    # Without a borrowing cap: every GPU of the pool's Kueue nodes, which the cohort's sum never exceeds. Not that sum:
    # adding or removing another Kueue tenant leaves this namespace's quota as it is.
    del raw["tenants"][1]["borrowingCap"]
    raw["nodePools"][0]["nodeCount"] = 7  # a Kueue node no cell holds
    uncapped = parse_config(raw)
    (pool,) = uncapped.gpu_pools
    kueue_node_gpus = (pool.node_count - pool.worker_replicas) * pool.gpus_per_node
    assert kueue_node_gpus > sum(t.kueue_gpus(pool.name) for t in uncapped.tenants) == 16
    assert tenancy.namespace_gpu_quota(uncapped, uncapped.tenants[1]) == kueue_node_gpus
    del raw["tenants"][0]["kueueCells"]
    assert tenancy.namespace_gpu_quota(parse_config(raw), parse_config(raw).tenants[1]) == kueue_node_gpus
    # Without Kueue, the quota is its (Slurm) guarantee, as before.
    plain = copy.deepcopy(stack_config(STACK))
    plain["operators"]["kueue"] = {"enabled": False}
    del plain["tenants"][1]["kueueCells"]
    assert tenancy.namespace_gpu_quota(parse_config(plain), parse_config(plain).tenants[1]) == 8


def test_the_scaled_stack_gives_every_tenant_a_queue_with_quota_on_enough_kueue_nodes():
    """benchmarks/kueue_admission.py's stack: 160 tenants, each a ClusterQueue with an 8-GPU cell's quota on the first
    pool, in one cohort; the first pool has a Kueue node per cell (the fit check passes), the default shape is kept."""
    config = parse_config(scale.scaled_config(160, kueue_every=1))
    queues = by_kind(config)["ClusterQueue"]
    assert len(queues) == 160
    assert {q["spec"]["cohortName"] for q in queues} == {config.cluster.name}
    first = kueue.flavor_name(config, config.gpu_pools[0])
    assert {gpu_quota(q)[first]["nominalQuota"] for q in queues} == {"8"}
    pool = config.gpu_pools[0]
    assert pool.node_count - pool.worker_replicas == 160
    default = parse_config(scale.scaled_config(160))
    assert default.gpu_pools[0].node_count - default.gpu_pools[0].worker_replicas == scale.KUEUE_NODES
    assert sum(1 for t in default.tenants if t.kueue_cells) == 160 // scale.KUEUE_EVERY

"""Exact shapes where the other tests only sampled a field: the Karpenter
NodePool, the quota arithmetic of MariaDB and workloads, and every violation a
policy reports when there are several. Written against the mutants `mutmut`
left alive (a wrong key, a dropped requirement, a `break` after the first
violation, a wrong default)."""

from __future__ import annotations

import copy

import pytest

from components.config import parse_config
from components.node_pools import karpenter_node_pool
from tests.harness import stack_config
from tests.test_policies import (
    DEPLOYMENT,
    PV,
    SLURM_CLUSTER,
    STATEFUL_SET,
    check,
    one,
    resource,
)
from slurm_policies.quota import stack_demand  # noqa: E402  (tests.test_policies put policies/ on sys.path)


def test_karpenter_node_pool_exact():
    raw = stack_config("dev")
    raw["nodePools"][0]["karpenter"] = {"instanceTypes": ["p5.48xlarge"], "capacityTypes": ["on-demand", "spot"]}
    pool = parse_config(raw).node_pools[0]
    assert karpenter_node_pool(pool) == {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "gpu"},
        "spec": {
            "template": {
                "metadata": {"labels": {"worker.fptcloud/pool": "gpu-h100"}},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "requirements": [
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand", "spot"]},
                        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p5.48xlarge"]},
                    ],
                    "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
                },
            },
            # 2 nodes of 112 CPU / 1250Gi / 8 GPUs
            "limits": {"cpu": "224", "memory": "2500Gi", "nvidia.com/gpu": "16"},
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30m"},
        },
    }


def test_karpenter_node_pool_without_instance_types_or_gpus():
    raw = stack_config("dev")
    raw["nodePools"][1]["karpenter"] = {}
    manifest = karpenter_node_pool(parse_config(raw).node_pools[1])
    assert manifest["spec"]["template"]["spec"]["requirements"] == [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
    ]
    assert manifest["spec"]["limits"] == {"cpu": "32", "memory": "128Gi"}
    assert "taints" not in manifest["spec"]["template"]["spec"]


# --- quota arithmetic -------------------------------------------------------------------------


def accounting_cluster(mariadb: dict) -> dict:
    return {
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"slurmNodes": {"accounting": {"enabled": True, "size": 1, "mariadbOperator": mariadb}}},
    }


def test_mariadb_demand_defaults_one_replica_and_persistent_storage():
    mariadb = {"enabled": True, "resources": {"cpu": "2", "memory": "4Gi"},
               "storage": {"volumeClaimTemplate": {"resources": {"requests": {"storage": "10Gi"}}}}}
    demand = stack_demand([resource(SLURM_CLUSTER, accounting_cluster(mariadb))])
    assert demand.totals["vcpu"] == 2 and demand.totals["memoryGi"] == 4
    assert demand.totals["storageGi"] == 10 and demand.totals["pvcs"] == 1
    assert "SlurmCluster ns/c mariadb: 1 x (2 CPU, 4Gi)" in demand.largest("vcpu")
    assert "SlurmCluster ns/c mariadb storage: 1 x 10Gi" in demand.largest("storageGi")


def test_mariadb_demand_replicas_ephemeral_and_disabled():
    mariadb = {"enabled": True, "replicas": 3, "resources": {"cpu": "1", "memory": "1Gi"}, "storage": {"ephemeral": True, "size": "5Gi"}}
    demand = stack_demand([resource(SLURM_CLUSTER, accounting_cluster(mariadb))])
    assert demand.totals["vcpu"] == 3 and demand.totals["storageGi"] == 0 and demand.totals["pvcs"] == 0
    sized = {**mariadb, "storage": {"size": "5Gi", "volumeClaimTemplate": {"resources": {"requests": {"storage": "99Gi"}}}}}
    assert stack_demand([resource(SLURM_CLUSTER, accounting_cluster(sized))]).totals["storageGi"] == 15
    off = {**mariadb, "enabled": False}
    assert stack_demand([resource(SLURM_CLUSTER, accounting_cluster(off))]).totals["vcpu"] == 0
    assert stack_demand([resource(SLURM_CLUSTER, accounting_cluster({k: v for k, v in mariadb.items() if k != "enabled"}))]).totals["vcpu"] == 0


def test_workload_demand_labels_name_kind_and_object():
    statefulset = {"metadata": {"name": "ldap", "namespace": "ns"}, "spec": {"template": {"spec": {"containers": [
        {"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}}
    deployment = {"metadata": {"name": "web", "namespace": "ns"}, "spec": {"replicas": 2, "template": {"spec": {"containers": [
        {"name": "c", "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}}}]}}}}
    demand = stack_demand([resource(STATEFUL_SET, statefulset), resource(DEPLOYMENT, deployment)])
    assert demand.totals["vcpu"] == 2
    assert demand.largest("vcpu") == ["StatefulSet ns/ldap: 1 x (1 CPU, 1Gi)", "Deployment ns/web: 2 x (0.5 CPU, 0.25Gi)"]


# --- every violation, not only the first ------------------------------------------------------------


def submount(name: str, path: str, source: str) -> dict:
    return {"name": name, "mountPath": path, "volumeSourceName": source}


def test_submount_consistency_reports_every_mismatch_on_both_sides():
    login = [submount("a", "/a", "a"), submount("b", "/b", "b"), submount("only-login", "/l", "l")]
    worker = [submount("a", "/x", "a"), submount("b", "/b", "other"), submount("only-worker", "/w", "w")]
    cluster = {"metadata": {"name": "c", "namespace": "ns"}, "spec": {"slurmNodes": {
        "login": {"volumes": {"jailSubMounts": login}}, "worker": {"volumes": {"jailSubMounts": worker}}}}}
    messages = check("slurm-jail-submounts-consistent", resource(SLURM_CLUSTER, cluster))
    assert len(messages) == 4, messages
    text = "\n".join(messages)
    assert "SlurmCluster ns/c: jailSubMount 'a' is mounted at /x on worker but /a on login" in text
    assert "jailSubMount 'b' uses volumeSource 'other' on worker but 'b' on login" in text
    assert "jailSubMount 'only-login' (/l) is mounted on login but not on worker" in text
    assert "jailSubMount 'only-worker' (/w) is mounted on worker but not on login" in text


@pytest.mark.parametrize("policy,word", [("Delete", "delete"), ("Recycle", "scrub")])
def test_data_protection_names_what_a_reclaim_policy_does(policy, word):
    pv = {"metadata": {"name": "jail-pv"}, "spec": {"claimRef": {"name": "jail-pvc"}, "persistentVolumeReclaimPolicy": policy}}
    one(
        check("protect-slurm-data-volumes", resource(PV, pv, protect=True)),
        f"PersistentVolume jail-pv is bound to Slurm data claim jail-pvc with persistentVolumeReclaimPolicy {policy}; "
        f"releasing the claim would {word} the data",
    )


def test_data_protection_reports_both_problems_of_one_volume():
    pv = {"metadata": {"name": "jail-pv"}, "spec": {"claimRef": {"name": "jail-pvc"}, "persistentVolumeReclaimPolicy": "Delete"}}
    messages = check("protect-slurm-data-volumes", resource(PV, pv))
    assert len(messages) == 2 and "is not protected" in messages[0] and "Delete" in messages[1]


def test_claims_outside_the_data_pattern_are_not_judged():
    pv = {"metadata": {"name": "other"}, "spec": {"claimRef": {"name": "scratch"}, "persistentVolumeReclaimPolicy": "Delete"}}
    assert check("protect-slurm-data-volumes", resource(PV, copy.deepcopy(pv))) == []

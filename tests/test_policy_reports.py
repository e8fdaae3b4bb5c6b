"""Exact shapes where the other tests only sampled a field: the Karpenter
NodePool, the quota arithmetic of MariaDB and workloads, and every violation a
policy reports when there are several. Written against the mutants `mutmut`
left alive (a wrong key, a dropped requirement, a `break` after the first
violation, a wrong default)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pulumi_policy import PolicyResource

from components.config import parse_config
from components.render.node_pools import karpenter_node_pool
from slurm_policies.quota import stack_demand  # noqa: E402  (tests.test_policies put policies/ on sys.path)
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
    assert manifest["spec"]["template"]["spec"]["requirements"] == [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]
    assert manifest["spec"]["limits"] == {"cpu": "32", "memory": "128Gi"}
    assert "taints" not in manifest["spec"]["template"]["spec"]


# --- quota arithmetic -------------------------------------------------------------------------


def accounting_cluster(mariadb: dict) -> dict:
    return {
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"slurmNodes": {"accounting": {"enabled": True, "size": 1, "mariadbOperator": mariadb}}},
    }


def test_mariadb_demand_defaults_one_replica_and_persistent_storage():
    mariadb = {
        "enabled": True,
        "resources": {"cpu": "2", "memory": "4Gi"},
        "storage": {"volumeClaimTemplate": {"resources": {"requests": {"storage": "10Gi"}}}},
    }
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
    statefulset = {
        "metadata": {"name": "ldap", "namespace": "ns"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}},
    }
    deployment = {
        "metadata": {"name": "web", "namespace": "ns"},
        "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}}}]}}},
    }
    demand = stack_demand([resource(STATEFUL_SET, statefulset), resource(DEPLOYMENT, deployment)])
    assert demand.totals["vcpu"] == 2
    assert demand.largest("vcpu") == ["StatefulSet ns/ldap: 1 x (1 CPU, 1Gi)", "Deployment ns/web: 2 x (0.5 CPU, 0.25Gi)"]


# --- every violation, not only the first ------------------------------------------------------------


def submount(name: str, path: str, source: str) -> dict:
    return {"name": name, "mountPath": path, "volumeSourceName": source}


def test_submount_consistency_reports_every_mismatch_on_both_sides():
    login = [submount("a", "/a", "a"), submount("b", "/b", "b"), submount("only-login", "/l", "l")]
    worker = [submount("a", "/x", "a"), submount("b", "/b", "other"), submount("only-worker", "/w", "w")]
    cluster = {
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"slurmNodes": {"login": {"volumes": {"jailSubMounts": login}}, "worker": {"volumes": {"jailSubMounts": worker}}}},
    }
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


# --- shared helpers of the pack ------------------------------------------------------------------

from slurm_policies.common import display, fmt_number, get, name_of  # noqa: E402
from slurm_policies.quota import PodShape, Pool, container_shape, count, gpu_pools, node_enabled, requests_of, storage_gi  # noqa: E402
from slurm_policies.volumes import same_namespace  # noqa: E402


def test_get_walks_maps_and_lists_and_stops_at_the_first_missing_step():
    value = {"a": [{"b": 1}, {"b": 2}], "n": None}
    assert get(value, "a", 0, "b") == 1 and get(value, "a", -1, "b") == 2
    assert get(value, "a", 2, "b", default="x") == "x" and get(value, "a", -3, default="x") == "x"
    assert get(value, "a", "b", default="x") == "x" and get(value, "n", 0, default="x") == "x"
    assert get(value, "n", default="x") == "x" and get(value, "missing") is None
    assert get("text", 0, default="x") == "x"


@pytest.mark.parametrize("number,text", [(2.0, "2"), (1357.4, "1357.4"), (18.97656, "18.98"), (0.5, "0.5"), (3, "3")])
def test_fmt_number(number, text):
    assert fmt_number(number) == text


def test_names_of_unnamed_objects_fall_back():
    assert name_of({}) == "" and display({}, "pulumi-name") == "pulumi-name"
    assert display({"metadata": {"name": "x", "namespace": "ns"}}, "p") == "ns/x"
    assert display({"metadata": {"name": "x"}}, "p") == "x"


@pytest.mark.parametrize("a,b,same", [(None, "a", True), ("a", None, True), (None, None, True), ("a", "a", True), ("a", "b", False)])
def test_unset_namespaces_match_anything(a, b, same):
    assert same_namespace(a, b) is same


def test_pool_fit_is_inclusive_at_the_boundary():
    pool = Pool("gpu", cpu=112, memory_gi=1250, gpus=8, nodes=2)
    assert pool.fits(PodShape(cpu=112, memory_gi=1250, gpus=8))
    assert not pool.fits(PodShape(cpu=112.01, memory_gi=1, gpus=0))
    assert not pool.fits(PodShape(cpu=1, memory_gi=1250.01, gpus=0))
    assert not pool.fits(PodShape(cpu=1, memory_gi=1, gpus=9))


def test_pool_config_defaults_and_gpu_filter():
    pools = gpu_pools({"nodePools": {"gpu": {"gpus": 8}, "one": {"gpus": 1, "cpu": 4, "memoryGi": 8, "nodes": 1}, "cpu": {"cpu": 16}}})
    assert [(p.name, p.cpu, p.memory_gi, p.gpus, p.nodes) for p in pools] == [("gpu", 0.0, 0.0, 8.0, 0), ("one", 4.0, 8.0, 1.0, 1)]


def test_resource_arithmetic_defaults():
    assert requests_of({"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "1"}}) == {"cpu": "1", "memory": "1Gi"}
    assert requests_of({"requests": {"cpu": "1"}}) == {"cpu": "1"} and requests_of({"limits": {"cpu": "2"}}) == {"cpu": "2"}
    assert requests_of("x") == {}
    assert count(None) == 1 and count("3") == 3 and count("x", default=5) == 5
    assert storage_gi({}) == 0 and storage_gi({"resources": {"requests": {"storage": "2Gi"}}}) == 2
    assert node_enabled("worker", {}) and not node_enabled("exporter", {}) and node_enabled("exporter", {"enabled": True})
    assert not node_enabled("accounting", {"enabled": "true"})
    two = [{"resources": {"requests": {"cpu": "1", "nvidia.com/gpu": 2}}}, {"resources": {"limits": {"cpu": "500m", "nvidia.com/gpu": "1"}}}]
    shape = container_shape(two)
    assert (shape.cpu, shape.gpus) == (1.5, 3)


def quota_stack_at(vcpu: float) -> tuple:
    statefulset = {
        "metadata": {"name": "s", "namespace": "ns"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": str(vcpu), "memory": "1Gi"}}}]}}},
    }
    return (resource(STATEFUL_SET, statefulset),)


def test_region_quota_allows_exactly_the_quota():
    config = {"region": "r", "quotas": {"r": {"vcpu": 4}}}
    assert check("slurm-region-quota", *quota_stack_at(4), config=config) == []
    one(check("slurm-region-quota", *quota_stack_at(4.5), config=config), "vcpu: asked 4.5 > allowed 4")
    one(check("slurm-region-quota", *quota_stack_at(1), config={"region": "other", "quotas": {"r": {"vcpu": 4}}}), "no quota for region 'other'")
    # One region configured: it applies without naming it.
    one(check("slurm-region-quota", *quota_stack_at(5), config={"quotas": {"r": {"vcpu": 4}}}), "the 'r' quota")


def test_worker_fit_counts_one_worker_without_a_size():
    cluster: dict[str, Any] = {
        "metadata": {"name": "c"},
        "spec": {"slurmNodes": {"worker": {"slurmd": {"resources": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "8"}}}}},
    }
    config = {"nodePools": {"gpu": {"cpu": 112, "memoryGi": 1250, "gpus": 8, "nodes": 1}}}
    assert check("slurm-worker-node-fit", resource(SLURM_CLUSTER, cluster), config=config) == []
    cluster["spec"]["slurmNodes"]["worker"]["size"] = 2
    one(check("slurm-worker-node-fit", resource(SLURM_CLUSTER, cluster), config=config), "worker size 2 exceeds the 1 GPU node(s)")


def test_source_range_annotation_adds_to_the_spec():
    from slurm_policies.exposure import source_ranges

    props = {
        "metadata": {"annotations": {"service.beta.kubernetes.io/load-balancer-source-ranges": "10.0.0.0/8, 192.168.0.0/16,"}},
        "spec": {"loadBalancerSourceRanges": [" 203.0.113.0/24 "]},
    }
    assert source_ranges(props) == ["203.0.113.0/24", "10.0.0.0/8", "192.168.0.0/16"]


def test_claim_names_follow_the_policy_config():
    cluster = {
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {
            "volumeSources": [
                {"name": "jail", "persistentVolumeClaim": {"claimName": "my-jail"}},
                {"name": "controller-spool", "persistentVolumeClaim": {"claimName": "my-spool"}},
                {"name": "data", "persistentVolumeClaim": {"claimName": "data-claim"}},
            ]
        },
    }
    config = {"jailClaimName": "my-jail", "spoolClaimName": "my-spool", "submountClaimPattern": "{name}-claim"}
    assert check("slurm-volume-claim-names", resource(SLURM_CLUSTER, cluster), config=config) == []
    messages = check("slurm-volume-claim-names", resource(SLURM_CLUSTER, cluster))
    assert len(messages) == 3, messages


def test_volume_references_report_every_missing_claim_with_its_namespace():
    cluster = {
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {
            "volumeSources": [
                {"name": "jail", "persistentVolumeClaim": {"claimName": "jail-pvc"}},
                {"name": "controller-spool", "persistentVolumeClaim": {"claimName": "controller-spool-pvc"}},
            ],
            "slurmNodes": {
                "worker": {
                    "volumes": {
                        "jail": {"volumeSourceName": "jail"},
                        "jailSubMounts": [
                            {"name": "a", "mountPath": "/a", "volumeSourceName": "a"},
                            {"name": "b", "mountPath": "/b", "volumeSourceName": "b"},
                        ],
                    }
                }
            },
        },
    }
    messages = check("slurm-volume-references", resource(SLURM_CLUSTER, cluster))
    text = "\n".join(messages)
    assert len(messages) == 4, messages
    assert "spec.slurmNodes.worker.volumes.jailSubMounts[0] refers to volumeSource 'a'" in text
    assert "spec.slurmNodes.worker.volumes.jailSubMounts[1] refers to volumeSource 'b'" in text
    assert "claims 'ns/jail-pvc', which this stack does not declare" in text
    assert "claims 'ns/controller-spool-pvc'" in text


def test_data_volume_shape_reports_every_claim_and_follows_the_pattern():
    def claim(name, modes, size="100Gi"):
        return resource(
            "kubernetes:core/v1:PersistentVolumeClaim",
            {"metadata": {"name": name, "namespace": "ns"}, "spec": {"accessModes": modes, "resources": {"requests": {"storage": size}}}},
        )

    messages = check("slurm-data-volume-shape", claim("jail-pvc", ["ReadWriteOnce"], "10Gi"), claim("controller-spool-pvc", ["ReadWriteOnce"]))
    assert len(messages) == 3, messages
    assert check("slurm-data-volume-shape", claim("scratch", ["ReadWriteOnce"])) == []
    one(
        check("slurm-data-volume-shape", claim("scratch", ["ReadWriteOnce"]), config={"dataClaimPattern": "^scratch$"}),
        "PersistentVolumeClaim ns/scratch (Slurm volume 'data')",
    )


# --- no-secrets-in-plain-config and pinned-chart-versions: config honoured, every finding -------

from tests.test_policies import SECRET, chart, config_map  # noqa: E402


def deployment_with_env(*env: dict) -> PolicyResource:
    return resource(
        DEPLOYMENT, {"metadata": {"name": "d", "namespace": "ns"}, "spec": {"template": {"spec": {"containers": [{"name": "c", "env": list(env)}]}}}}
    )


def test_plain_secrets_reports_every_env_and_key():
    messages = check("no-secrets-in-plain-config", deployment_with_env({"name": "DB_PASSWORD", "value": "x"}, {"name": "API_TOKEN", "value": "y"}))
    assert len(messages) == 2
    assert len(check("no-secrets-in-plain-config", config_map({"password": "x", "token": "y"}))) == 2
    assert len(check("no-secrets-in-plain-config", config_map({"a": "bindpw x", "b": "ldap_default_authtok = y"}))) == 2


def test_plain_secrets_follow_the_policy_config():
    assert check("no-secrets-in-plain-config", deployment_with_env({"name": "PIN", "value": "1"})) == []
    one(
        check("no-secrets-in-plain-config", deployment_with_env({"name": "PIN", "value": "1"}), config={"secretNamePattern": "^pin$"}),
        "env PIN carries a literal value",
    )
    one(
        check("no-secrets-in-plain-config", config_map({"conf": "VAULT-KEY: abc"}), config={"secretValuePatterns": ["vault-key"]}),
        "matches 'vault-key'",
    )
    assert (
        check("no-secrets-in-plain-config", deployment_with_env({"name": "DB_PASSWORD_REF", "value": "x"}), config={"allowedNamePattern": "_ref$"})
        == []
    )
    assert check("no-secrets-in-plain-config", config_map({"password": "x"}), config={"allowedNames": ["password"]}) == []


def test_config_credentials_in_lists_short_values_and_raw_secret_data(monkeypatch):
    import json

    from slurm_policies.credentials import config_credentials

    stack = {
        "slurm-platform:operators": json.dumps({"x": {"values": {"users": [{"name": "a", "password": "Zq8-list-password"}]}}}),
        "slurm-platform:other": json.dumps({"token": "short"}),
    }
    assert config_credentials(stack) == {"Zq8-list-password": "slurm-platform:operators.x.values.users[0].password"}
    assert config_credentials(stack, min_length=4) == {
        "Zq8-list-password": "slurm-platform:operators.x.values.users[0].password",
        "short": "slurm-platform:other.token",
    }
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps(stack))
    # data that is not base64 is compared as it is
    raw = {"metadata": {"name": "s"}, "data": {"pw": "not base64! Zq8-list-password"}}
    one(check("no-secrets-in-plain-config", resource(SECRET, raw)), "data key 'pw' carries the credential")
    one(check("no-secrets-in-plain-config", config_map({"x": "short"}), config={"minCredentialLength": 4}), "slurm-platform:other.token")


def test_pinned_charts_reports_every_chart_by_kind():
    messages = check("pinned-chart-versions", chart("latest"), chart(">=1.0", type_="kubernetes:helm.sh/v3:Release"))
    assert len(messages) == 2
    assert messages[0].startswith("Helm Chart operators-soperator") and messages[1].startswith("Helm Release operators-soperator")


def test_data_protection_follows_the_claim_pattern():
    pvc = {"metadata": {"name": "scratch", "namespace": "ns"}}
    assert check("protect-slurm-data-volumes", resource("kubernetes:core/v1:PersistentVolumeClaim", pvc)) == []
    one(
        check("protect-slurm-data-volumes", resource("kubernetes:core/v1:PersistentVolumeClaim", pvc), config={"dataClaimPattern": "^scratch$"}),
        "PersistentVolumeClaim ns/scratch holds Slurm data",
    )

"""Config keys that must reach the resources: each test fails if its key is
ignored or hard-coded (the mutations issue 8 found the suite blind to), plus
secret config staying secret and namespaces declared once."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest

from components.config import parse_config
from components.config.charts import GPU_TOOLKIT_ENV
from components.platform import build_platform
from components.slurm import manifest_of, operator_module
from components.slurm.soperator1 import restricted_login_service, slurm_cluster_manifest
from tests.harness import body, run_under_mocks, stack_config

CHART = "kubernetes:helm.sh/v4:Chart"
NAMESPACE = "kubernetes:core/v1:Namespace"
SLURM_CLUSTER = "kubernetes:slurm.nebius.ai/v1:SlurmCluster"


def with_changes(stack: str, **changes: Any) -> dict[str, Any]:
    raw = copy.deepcopy(stack_config(stack))
    for key, value in changes.items():
        raw[key] = value if not isinstance(value, dict) else _merge(raw.get(key, {}), value)
    return raw


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        merged[key] = _merge(merged.get(key, {}), value) if isinstance(value, dict) else value
    return merged


def platform_run(raw: dict[str, Any], secret_keys: frozenset[str] = frozenset()):
    config = parse_config(raw, secret_keys)
    return run_under_mocks(lambda: build_platform(config), raw)


def charts(run) -> dict[str, Any]:
    found = {r.name.removeprefix("operators-"): r for r in run.of_type(CHART)}
    assert found, "no Helm chart registered"
    return found


# --- user Helm values ----------------------------------------------------------------------

USER_VALUES: dict[str, dict[str, Any]] = {
    "gpuOperator": {"driver": {"enabled": False, "repository": "registry.example.com/nvidia"}, "mig": {"strategy": "mixed"}},
    "networkOperator": {"nfd": {"enabled": False}, "operator": {"resources": {"limits": {"memory": "1Gi"}}}},
    "soperator": {"controllerManager": {"manager": {"resources": {"limits": {"memory": "512Mi"}}}}},
    "mariadbOperator": {"metrics": {"enabled": True}},
    "certManager": {"prometheus": {"enabled": False}},
}
CHART_OF = {
    "gpuOperator": "gpu-operator",
    "networkOperator": "network-operator",
    "soperator": "soperator",
    "mariadbOperator": "mariadb-operator",
    "certManager": "cert-manager",
}


@pytest.mark.parametrize("operator", sorted(USER_VALUES))
def test_user_helm_values_reach_the_chart_and_win(operator):
    operators: dict[str, dict[str, Any]] = {key: {"values": values} for key, values in USER_VALUES.items()}
    operators["certManager"]["install"] = True
    run = platform_run(with_changes("prod-hanoi", operators=operators))
    values = charts(run)[CHART_OF[operator]].inputs["values"]
    expected = USER_VALUES[operator]
    for key, value in expected.items():
        assert _merge(values[key], value) == values[key], (operator, key, values[key])


def test_user_values_keep_our_other_values():
    run = platform_run(with_changes("prod-hanoi", operators={"gpuOperator": {"values": USER_VALUES["gpuOperator"]}}))
    values = charts(run)["gpu-operator"].inputs["values"]
    assert values["driver"]["enabled"] is False and values["driver"]["repository"] == "registry.example.com/nvidia"
    assert values["mig"] == {"strategy": "mixed"}
    assert values["toolkit"] == {"enabled": True, "env": GPU_TOOLKIT_ENV} and values["nfd"] == {"enabled": True}


# --- secret config stays secret -------------------------------------------------------------


def test_secret_operators_config_makes_chart_values_secret():
    raw = with_changes("prod-hanoi", operators={"mariadbOperator": {"values": {"rootPassword": "Zq8-from-config"}}})
    secret = platform_run(raw, frozenset({"operators"}))
    for chart in charts(secret).values():
        assert "values" in chart.secret_inputs, chart.name
    assert charts(secret)["mariadb-operator"].inputs["values"]["rootPassword"] == "Zq8-from-config"
    plain = platform_run(raw)
    assert not any("values" in chart.secret_inputs for chart in charts(plain).values())


def test_secret_slurm_config_makes_the_slurm_cluster_spec_secret():
    raw = stack_config("dev")
    (cluster,) = platform_run(raw, frozenset({"slurm"})).of_type(SLURM_CLUSTER)
    assert "spec" in cluster.secret_inputs
    (cluster,) = platform_run(raw).of_type(SLURM_CLUSTER)
    assert "spec" not in cluster.secret_inputs


def test_secret_storage_config_makes_volume_specs_secret():
    raw = stack_config("prod-hanoi")
    secret = platform_run(raw, frozenset({"storage"}))
    (storage_class,) = secret.of_type("kubernetes:storage.k8s.io/v1:StorageClass")
    assert {"parameters", "mountOptions"} <= set(storage_class.secret_inputs)
    for volume in secret.of_type("kubernetes:core/v1:PersistentVolume") + secret.of_type("kubernetes:core/v1:PersistentVolumeClaim"):
        assert "spec" in volume.secret_inputs, volume.name
    (storage_class,) = platform_run(raw).of_type("kubernetes:storage.k8s.io/v1:StorageClass")
    assert not storage_class.secret_inputs


# --- munge key rotation ------------------------------------------------------------------------


def munge_key_keepers(run) -> dict[str, Any]:
    (component,) = run.of_type("slurm-platform:munge:MungeKey")
    keys = [r for r in run.resources if r.parent == component.urn and r.type.startswith("random:")]
    assert len(keys) == 1, [r.name for r in keys]
    return keys[0].inputs["keepers"]


def test_munge_key_rotation_is_wired_from_config():
    assert munge_key_keepers(platform_run(stack_config("dev"))) == {"rotation": "0"}
    rotated = with_changes("dev", slurm={"mungeKeyRotation": 3})
    assert munge_key_keepers(platform_run(rotated)) == {"rotation": "3"}


# --- SlurmCluster fields from config ------------------------------------------------------------


def spec(raw: dict[str, Any]) -> dict[str, Any]:
    return slurm_cluster_manifest(parse_config(raw))["spec"]


@pytest.mark.parametrize("drain", [True, False])
def test_drain_on_failure_is_wired(drain):
    raw = with_changes("dev", slurm={"ncclBenchmark": {"drainOnFailure": drain}})
    assert spec(raw)["periodicChecks"]["ncclBenchmark"]["failureActions"] == {"setSlurmNodeDrainState": drain}


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_cgroup_version_is_wired(version):
    raw = with_changes("dev", slurm={"worker": {"cgroupVersion": version}})
    assert spec(raw)["slurmNodes"]["worker"]["cgroupVersion"] == version


@pytest.mark.parametrize("version", ["v1", "v2"])
@pytest.mark.parametrize("stack", ["staging-hangzhou", "prod-hcm"])
def test_cgroup_version_reaches_ack_and_slinky_cgroup_conf(stack, version):
    config = parse_config(with_changes(stack, slurm={"worker": {"cgroupVersion": version}}))
    (cgroup_conf,) = [
        m["data"]["cgroup.conf"] for m in manifest_of(operator_module(config).render(config), "ConfigMap") if "cgroup.conf" in m["data"]
    ]
    assert body(cgroup_conf).splitlines()[0] == f"CgroupPlugin=cgroup/{version}"


def test_the_restricted_login_service_keeps_client_addresses():
    # Local: no second hop through another node, so the client address the
    # source ranges are checked against is the real one.
    service = restricted_login_service(parse_config(stack_config("prod-hanoi")))
    assert service is not None
    assert service["spec"]["externalTrafficPolicy"] == "Local"
    assert service["spec"]["loadBalancerSourceRanges"] == ["203.0.113.0/24", "198.51.100.16/28"]


def test_rdma_default_follows_the_pools():
    with_rdma = spec(stack_config("dev"))["slurmNodes"]["worker"]["slurmd"]["resources"]
    assert with_rdma["rdma/rdma_shared_device_a"] == "1"
    raw = stack_config("dev")
    raw["nodePools"][0]["rdma"] = False
    without = spec(raw)["slurmNodes"]["worker"]["slurmd"]["resources"]
    assert not [key for key in without if key.startswith("rdma/")]


def test_load_balancer_ip_reaches_the_cluster_only_with_a_load_balancer():
    raw = with_changes("dev", slurm={"login": {"serviceType": "LoadBalancer", "loadBalancerIp": "203.0.113.7"}})
    assert spec(raw)["slurmNodes"]["login"]["sshdServiceLoadBalancerIP"] == "203.0.113.7"
    assert "sshdServiceLoadBalancerIP" not in spec(stack_config("dev"))["slurmNodes"]["login"]


def test_mount_paths_are_normalised_in_the_cluster():
    raw = with_changes("local", storage={"submounts": [{"name": "data", "mountPath": "/mnt//data/./x/../"}]})
    mounts = spec(raw)["slurmNodes"]["worker"]["volumes"]["jailSubMounts"]
    assert mounts == [{"name": "data", "mountPath": "/mnt/data", "volumeSourceName": "data"}]


# --- namespaces ------------------------------------------------------------------------------------


def test_operators_sharing_the_cluster_namespace_declare_it_once_protected():
    shared = {name: {"namespace": "fpt-hpc"} for name in ("gpuOperator", "networkOperator", "soperator", "mariadbOperator")}
    # The default-deny NetworkPolicies would cut operators off in the cluster's namespace (a config error).
    monitoring = {"enabled": True, "prometheus": {"namespace": "fpt-hpc"}}
    run = platform_run(with_changes("prod-hanoi", operators=shared, networkPolicies={"enabled": False}, monitoring=monitoring))
    namespaces = run.of_type(NAMESPACE)
    assert [n.inputs["metadata"]["name"] for n in namespaces] == ["fpt-hpc"]
    (namespace,) = namespaces
    assert namespace.protect and namespace.retain_on_delete
    chart_names = charts(run)
    for chart in chart_names.values():
        assert namespace.urn in chart.dependencies, chart.name


def test_each_operator_namespace_is_declared_once():
    run = platform_run(stack_config("prod-hanoi"))
    names = [n.inputs["metadata"]["name"] for n in run.of_type(NAMESPACE)]
    assert names and len(names) == len(set(names))
    assert {"fpt-hpc", "gpu-operator", "nvidia-network-operator", "soperator-system", "mariadb-operator", "monitoring"} == set(names)


# --- operator values and the provider ----------------------------------------------------------


def test_deep_merge_is_deep_and_copies():
    from components.charts import deep_merge

    ours: dict[str, Any] = {"driver": {"enabled": True, "env": {"A": "1"}}, "mig": {"strategy": "single"}, "list": [1]}
    theirs: dict[str, Any] = {"driver": {"env": {"B": "2"}}, "mig": "off", "new": {"x": 1}}
    merged = deep_merge(ours, theirs)
    assert merged == {"driver": {"enabled": True, "env": {"A": "1", "B": "2"}}, "mig": "off", "list": [1], "new": {"x": 1}}
    merged["driver"]["env"]["A"] = "changed"
    merged["new"]["x"] = 2
    assert ours["driver"]["env"]["A"] == "1" and theirs["new"]["x"] == 1
    assert deep_merge({"a": 1}, {"a": {"b": 2}}) == {"a": {"b": 2}}


def test_operator_values_from_typed_config():
    from components.charts import uses_mariadb_operator
    from components.operator_charts import gpu_operator_values, network_operator_values
    from components.slurm.soperator import operator_values as soperator_values

    raw = with_changes("prod-hanoi", operators={"gpuOperator": {"driverVersion": "550.127.08"}})
    config = parse_config(raw)
    assert gpu_operator_values(config)["driver"] == {"enabled": True, "version": "550.127.08"}
    # The chart's NodeFeatureRule stays on: the GPU operator's NFD serves it.
    assert network_operator_values(config) == {
        "nfd": {"enabled": False, "deployNodeFeatureRules": True},
        "sriovNetworkOperator": {"enabled": False},
        "upgradeCRDs": False,
    }
    assert soperator_values(config)["controllerManager"]["manager"]["env"]["isMariadbCrdInstalled"] == "true"
    external = parse_config(stack_config("prod-hangzhou"))
    assert soperator_values(external)["controllerManager"]["manager"]["env"]["isMariadbCrdInstalled"] == "false"
    assert not uses_mariadb_operator(parse_config(with_changes("prod-hanoi", slurm={"accounting": {"enabled": False}})))


def test_the_kubernetes_provider_follows_config():
    raw = stack_config("local")
    run = run_under_mocks(lambda: build_platform(parse_config(raw)), raw)
    (provider,) = run.of_type("pulumi:providers:kubernetes")
    assert provider.inputs["renderYamlToDirectory"] == "rendered"
    assert provider.inputs["enableServerSideApply"] in (True, "true")
    raw = stack_config("prod-hanoi")
    (provider,) = run_under_mocks(lambda: build_platform(parse_config(raw)), raw).of_type("pulumi:providers:kubernetes")
    assert provider.inputs["context"] == "fke-prod-hanoi" and "renderYamlToDirectory" not in provider.inputs
    # Not the provider's 50 requests/s, which throttled the claims' awaits (issue 21).
    settings = provider.inputs["kubeClientSettings"]
    settings = json.loads(settings) if isinstance(settings, str) else settings
    assert (settings["qps"], settings["burst"]) == (200, 400)


# One stack per operator (and ACK API generation): a `--secret slurm` key keeps every object built from it secret.
OPERATOR_STACKS = {
    "soperator 1.14.10": ("dev", {}),
    "soperator 4.1.7": ("dev-lab", {}),
    "ack 2024-12": ("staging-hangzhou", {}),
    "ack 2024-06": ("staging-hangzhou", {"apiGeneration": "2024-06"}),
    "slinky": ("prod-hcm", {}),
}
MARKER = "zq8secretmarker"


def marked_slurm_config(stack: str, ack_operator: dict[str, Any]) -> dict[str, Any]:
    """The stack with MARKER in strings of its `slurm` key that reach the rendered objects."""
    raw = copy.deepcopy(stack_config(stack))
    if ack_operator:
        raw["operators"] = _merge(raw.get("operators", {}), {"ackSlurmOperator": ack_operator})
    slurm = raw.setdefault("slurm", {})
    login = slurm.setdefault("login", {})
    login["serviceAnnotations"] = {**login.get("serviceAnnotations", {}), "example.com/owner": MARKER}
    if raw.get("slurmOperator", "soperator") != "soperator" or raw.get("operators", {}).get("soperator", {}).get("version") == "4.1.7":
        partitions = slurm.get("partitions") or [{"name": "main", "default": True}]
        slurm["partitions"] = [{**p, "config": f"{p.get('config', 'State=UP')} AllowGroups={MARKER}"} for p in partitions]
    return raw


def plaintext_with(run, marker: str) -> list[str]:
    """`resource.input` pairs whose value shows `marker` outside a Pulumi secret."""
    return [
        f"{r.name}.{key}"
        for r in run.resources
        for key, value in r.inputs.items()
        if key not in r.secret_inputs and marker in json.dumps(value, default=str)
    ]


@pytest.mark.parametrize("operator", sorted(OPERATOR_STACKS))
def test_secret_slurm_config_is_secret_in_every_object_built_from_it(operator):
    stack, ack_operator = OPERATOR_STACKS[operator]
    raw = marked_slurm_config(stack, ack_operator)
    plain = plaintext_with(platform_run(raw), MARKER)
    assert plain, f"{operator}: the marker reaches no object, so this test would prove nothing"
    assert plaintext_with(platform_run(raw, frozenset({"slurm"})), MARKER) == [], operator


def test_secret_tenants_config_is_secret_in_every_object_built_from_it():
    raw = copy.deepcopy(stack_config("dev-lab"))
    raw["tenants"][0]["users"] = [*raw["tenants"][0]["users"], MARKER]
    assert plaintext_with(platform_run(raw), MARKER), "the marker reaches no object, so this test would prove nothing"
    assert plaintext_with(platform_run(raw, frozenset({"tenants"})), MARKER) == []
    # The directory reconciler's desired state carries it base64: encoded is not secret.
    encoded = base64.b64encode(MARKER.encode()).decode()
    assert "ldap-reconciler.data" in plaintext_with(platform_run(raw), encoded)
    assert plaintext_with(platform_run(raw, frozenset({"tenants"})), encoded) == []

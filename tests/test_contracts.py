"""Contract tests: every rendered Slurm custom resource against its upstream
contract (unknown fields rejected), every built-in object against the
Kubernetes schemas."""

import copy
import functools
import json

import pytest

from components.config import parse_config
from components.config.charts import GpuOperatorConfig, release_number
from components.config.monitoring import PrometheusConfig
from components.monitoring import component as monitoring
from components.operator_charts import gpu_operator_values, prometheus_stack_values
from components.slurm import operator_module, resolve, soperator1
from components.slurm.soperator1 import slurm_cluster_manifest
from tests.contracts import CHART_VALUES_DIR, SOPERATOR_CRD, UNCONTRACTED, contract_errors, crd_errors, is_builtin, kubernetes_errors
from tests.harness import example_stacks, stack_config
from tests.test_program import run_stack


@functools.cache
def stack_run(stack):
    """Each stack run once under mocks for the whole module (runs are plain data)."""
    return run_stack(stack)


def test_contract_file_is_present():
    assert SOPERATOR_CRD.is_file(), f"missing {SOPERATOR_CRD}"


def leaf_paths(values: dict, prefix: str = "") -> list[str]:
    """The dotted paths of a values map's leaves (lists are leaves, as Helm replaces them whole)."""
    return [
        path
        for key, value in values.items()
        for path in (leaf_paths(value, f"{prefix}{key}.") if isinstance(value, dict) and value else [f"{prefix}{key}"])
    ]


def test_the_pinned_gpu_operator_carries_a_fixed_toolkit_and_reads_every_value_the_program_sets():
    """The chart's values contract at the program's pin (contracts/charts/gpu-operator): its container toolkit is
    1.17.8 or later (CVE-2025-23266), and every value the example stacks pass is one its templates read (or within a map
    they read), so the CDI and toolkit settings that keep GPUs to the device plugin's list reach the operator."""
    version = GpuOperatorConfig.model_fields["version"].default
    contract = json.loads((CHART_VALUES_DIR / "gpu-operator" / version / "values.json").read_text())
    toolkit = contract["values"]["toolkit"]["version"]["$default"]
    assert release_number(toolkit.split("-", 1)[0]) >= (1, 17, 8), toolkit
    reads = set(contract["templateReads"]) | {d["condition"] for d in contract["dependencies"]}
    checked = []
    for stack in example_stacks():
        config = parse_config(stack_config(stack))
        if config.operators.gpu_operator.install and config.operators.gpu_operator.version == version:
            paths = leaf_paths(gpu_operator_values(config))
            assert {"cdi.enabled", "toolkit.env"} <= set(paths), (stack, paths)
            # A map the templates pass on whole (toYaml: dcgmExporter.serviceMonitor) is read with all its keys.
            unread = [path for path in paths if not any(path == read or path.startswith(f"{read}.") for read in reads)]
            assert unread == [], (stack, unread)
            checked.append(stack)
    assert checked


def in_values_tree(tree: dict, path: str) -> bool:
    """Whether the chart's values.yaml has the key at `path` (a subchart's values pass through its section)."""
    for key in path.split("."):
        if not isinstance(tree, dict) or key not in tree:
            return False
        tree = tree[key]
    return True


def test_the_pinned_prometheus_stack_reads_every_value_the_program_sets():
    """kube-prometheus-stack's values contract at the program's pin: every value the example stacks pass is one its
    templates read (the selectors are read whole, so a leaf counts when a path above it is read), or one of its
    subcharts' sections (Grafana's sidecar) that its values.yaml carries."""
    version = PrometheusConfig.model_fields["version"].default
    contract = json.loads((CHART_VALUES_DIR / "kube-prometheus-stack" / version / "values.json").read_text())
    reads = set(contract["templateReads"]) | {d["condition"] for d in contract["dependencies"]}
    checked = []
    for stack in example_stacks():
        config = parse_config(stack_config(stack))
        if config.monitoring.enabled and config.monitoring.prometheus.install and config.monitoring.prometheus.version == version:
            paths = leaf_paths(prometheus_stack_values(config))
            unread = [p for p in paths if not any(".".join(p.split(".")[:n]) in reads for n in range(1, p.count(".") + 2))]
            assert all(p.startswith("grafana.") and in_values_tree(contract["values"], p) for p in unread), (stack, unread)
            checked.append(stack)
    assert checked


@pytest.mark.parametrize("stack", example_stacks())
def test_every_monitor_and_rule_meets_the_prometheus_operator_crds(stack):
    """Every ServiceMonitor, PodMonitor and PrometheusRule the monitoring parts render, against the CRDs the pinned
    chart installs (contracts/prometheus-operator): with monitoring on whatever the stack says."""
    raw = stack_config(stack)
    config = parse_config({**raw, "monitoring": {**raw.get("monitoring", {}), "enabled": True}})
    checked = []
    for manifest in monitoring.render(config, resolve(config)):
        if manifest["apiVersion"].startswith("monitoring.coreos.com/"):
            assert contract_errors(manifest) == [], manifest["metadata"]["name"]
            checked.append(manifest["kind"])
    assert checked or config.slurm_operator != "soperator", stack


def test_the_prometheus_operator_contract_catches_a_broken_monitor():
    config = parse_config({"monitoring": {"enabled": True}})
    (monitor,) = [m for m in monitoring.render(config, resolve(config)) if m["kind"] == "PodMonitor"]
    broken = copy.deepcopy(monitor)
    broken["spec"]["podMetricsEndpoints"][0]["scrapeEvery"] = "30s"
    broken["spec"]["podMetricsEndpoints"][0]["interval"] = "thirty seconds"
    errors = contract_errors(broken)
    assert any("scrapeEvery: unknown field" in e for e in errors) and any("interval" in e for e in errors), errors


SOPERATOR_1_STACKS = [s for s in example_stacks() if operator_module(parse_config(stack_config(s))).OPERATOR == soperator1.OPERATOR]


def test_there_are_soperator_1_14_10_stacks():
    assert {"dev", "local", "prod-hanoi", "prod-hangzhou"} <= set(SOPERATOR_1_STACKS)


@pytest.mark.parametrize("stack", SOPERATOR_1_STACKS)
def test_slurm_cluster_validates_against_soperator_1_14_10(stack):
    manifest = slurm_cluster_manifest(parse_config(stack_config(stack)))
    assert crd_errors(manifest) == []


@pytest.mark.parametrize("stack", example_stacks())
def test_every_custom_resource_meets_its_upstream_contract(stack):
    run = stack_run(stack)
    checked = []
    for resource in run.kubernetes_objects():
        manifest = resource.inputs
        if is_builtin(manifest) or manifest["kind"] in UNCONTRACTED or resource.type.startswith("kubernetes:helm.sh"):
            continue
        assert contract_errors(manifest) == [], resource.name
        checked.append(manifest["kind"])
    assert checked, "no Slurm custom resource found"


def test_slurm_cluster_as_registered_validates():
    run = stack_run("prod-hanoi")
    (cluster,) = run.of_type("kubernetes:slurm.nebius.ai/v1:SlurmCluster")
    assert crd_errors(cluster.inputs) == []


def test_the_contract_catches_a_broken_cluster():
    manifest = slurm_cluster_manifest(parse_config({}))
    broken = copy.deepcopy(manifest)
    del broken["spec"]["slurmNodes"]["login"]["sshdServiceType"]
    broken["spec"]["slurmNodes"]["worker"]["cgroupVersion"] = "v3"
    broken["spec"]["slurmNodes"]["login"]["sshdServiceSourceRanges"] = ["0.0.0.0/0"]
    errors = crd_errors(broken)
    assert any("sshdServiceSourceRanges: unknown field" in e for e in errors)
    assert any("sshdServiceType" in e for e in errors)
    assert any("cgroupVersion" in e for e in errors)


@pytest.mark.parametrize("stack", example_stacks())
def test_builtin_objects_validate_against_kubernetes(stack):
    run = stack_run(stack)
    checked = 0
    for resource in run.kubernetes_objects():
        manifest = resource.inputs
        if not is_builtin(manifest):
            continue  # custom resources: covered by CRD contracts
        if manifest["kind"].endswith("Patch"):
            continue  # patches are partial by design
        assert kubernetes_errors(manifest) == [], resource.name
        checked += 1
    assert checked >= 5


def test_kubernetes_validation_catches_a_broken_object():
    bad = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "x"}, "spec": {"accessModes": "ReadWriteMany"}}
    assert kubernetes_errors(bad)

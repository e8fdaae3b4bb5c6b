"""Every pod the platform runs is at a system priority class, above every tenant class (tenancy.POD_PRIORITY), so that
no tenant pod preempts it: the Slurm cluster's class (components/slurm/common.py system_priority_class_name) for
the Slurm pods, MariaDB, LDAP and the Jobs, the operators' class (operator_priority_class_name) for the charts'
controllers and webhooks, Kubernetes' system-node-critical for the GPU operator's. Walked in every object and
chart value each example stack registers whose Slurm operator declares the cluster's class (the ones that take
tenants: soperator 4.x, ACK, Slinky)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from components.config import parse_config
from components.slurm import operator_module
from components.slurm.common import operator_priority_class_name, system_priority_class_name
from tests.harness import example_stacks, stack_config
from tests.test_program import CHART, run_stack

TENANT_STACKS = [
    s
    for s in example_stacks()
    if any(r.role == "priority-class" for r in operator_module(parse_config(stack_config(s))).render(parse_config(stack_config(s))))
]
# Where each chart the program installs takes its pods' class, read in the pinned release's templates; None: the
# chart's own default, already Kubernetes' system-node-critical (gpu-operator v24.9.2: operator, daemonsets, NFD).
CHART_CLASS_VALUES: dict[str, tuple[tuple[str, ...], ...] | None] = {
    "cert-manager": (("global", "priorityClassName"),),
    "kueue": (("controllerManager", "manager", "priorityClassName"),),
    "slurm-operator": (("priorityClassName",),),
    "gpu-operator": None,
    # The operator, Prometheus and Alertmanager; its subcharts (Grafana, kube-state-metrics, node-exporter) stay at 0.
    "kube-prometheus-stack": (
        ("prometheusOperator", "priorityClassName"),
        ("prometheus", "prometheusSpec", "priorityClassName"),
        ("alertmanager", "alertmanagerSpec", "priorityClassName"),
    ),
}
# Charts whose pinned release has no value for it (docs/tenants.md: What keeps the platform up): their controllers
# run at priority 0, on the system pool, where no tenant pod is admitted (slurm-tenant-placement).
CHARTS_WITHOUT_A_CLASS = {"helm-soperator", "mariadb-operator", "network-operator"}
# CRDs only: no pod.
CRD_CHARTS = {"helm-soperator-crds", "mariadb-operator-crds", "slurm-operator-crds"}


def pod_specs(value: Any) -> Iterator[dict[str, Any]]:
    """Every core/v1 PodSpec in a manifest (a dict with containers), however deep."""
    if isinstance(value, dict):
        if isinstance(value.get("containers"), list):
            yield value
        for item in value.values():
            yield from pod_specs(item)
    elif isinstance(value, list):
        for item in value:
            yield from pod_specs(item)


def soperator_pods(value: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """soperator's own pod-making specs: each node kind (it places them by k8sNodeFilterName) and its MariaDB."""
    if isinstance(value, dict):
        if "k8sNodeFilterName" in value:
            yield "priorityClass", value
        if isinstance(value.get("mariadbOperator"), dict):
            yield "priorityClassName", value["mariadbOperator"]
        for item in value.values():
            yield from soperator_pods(item)
    elif isinstance(value, list):
        for item in value:
            yield from soperator_pods(item)


def dig(values: dict[str, Any], path: tuple[str, ...]) -> Any:
    for key in path:
        values = values.get(key, {}) if isinstance(values, dict) else {}
    return values


def chart_name(chart: str) -> str:
    return chart.rstrip("/").rsplit("/", 1)[-1]


def test_the_stacks_that_take_tenants_are_walked():
    assert {parse_config(stack_config(s)).slurm_operator for s in TENANT_STACKS} == {"soperator", "ack", "slinky"}


@pytest.mark.parametrize("stack", TENANT_STACKS)
def test_every_platform_pod_runs_at_a_system_priority_class(stack):
    config = parse_config(stack_config(stack))
    system, operators = system_priority_class_name(config), operator_priority_class_name(config)
    run = run_stack(stack)
    found = 0
    for resource in run.resources:
        if resource.type == CHART:
            continue
        for spec in pod_specs(resource.inputs):
            found += 1
            assert spec.get("priorityClassName") in (system, "system-node-critical"), (resource.name, spec.get("priorityClassName"))
        for field, spec in soperator_pods(resource.inputs):
            found += 1
            assert spec.get(field) == system, (resource.name, field, sorted(spec))
    assert found >= 3, "the walk found the pods (LDAP, the Jobs, the Slurm pods)"
    charts = {chart_name(r.inputs["chart"]): r.inputs.get("values") or {} for r in run.of_type(CHART)}
    declared = [r for r in run.of_type("kubernetes:scheduling.k8s.io/v1:PriorityClass") if r.inputs["metadata"]["name"] == operators]
    for chart, values in charts.items():
        assert chart in {*CHART_CLASS_VALUES, *CHARTS_WITHOUT_A_CLASS, *CRD_CHARTS}, f"{chart}: where does its chart take a priority class?"
        paths = CHART_CLASS_VALUES.get(chart)
        if paths:
            for path in paths:
                assert dig(values, path) == operators, (chart, path, dig(values, path))
            assert declared, f"{chart} names {operators}, which the stack must declare"
        elif chart == "gpu-operator":
            # Its defaults stay: the operator's and its operands' system-node-critical.
            assert not dig(values, ("operator", "priorityClassName")) and not dig(values, ("daemonsets", "priorityClassName"))


def test_the_operators_class_is_above_every_tenant_class_and_preempts_no_one():
    from components import tenancy
    from components.slurm.common import SYSTEM_PRIORITY, operator_priority_class

    config = parse_config(stack_config("prod-hoalac"))
    priority_class = operator_priority_class(config)
    assert priority_class["value"] == SYSTEM_PRIORITY > max(tenancy.POD_PRIORITY.values())
    assert priority_class["preemptionPolicy"] == "Never"

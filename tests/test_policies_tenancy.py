"""slurm-tenant-cells-fit with constructed policy args: the tenants ConfigMap and
the workers the stack renders, as the engine hands them to the pack."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from slurm_rules import cell_fit

from components import tenancy
from components.config import parse_config
from components.slurm import operator_module
from slurm_policies import tenancy as hardening
from tests.harness import stack_config
from tests.test_policies import CONFIG_MAP, as_policy_resource, check, one, resource
from tests.test_policies_operator_shapes import as_resources
from tests.test_tenancy import run_stack, two_teams

POLICY = "slurm-tenant-cells-fit"
STACK = "staging-hanoi"  # soperator 4.1.7: NodeSets h100 (2 × 8 GPUs) and h200 (1 × 8 GPUs)


def cells_map(cells: Any) -> Any:
    return resource(
        CONFIG_MAP,
        {"metadata": {"name": "fpt-hpc-tenants", "namespace": "fpt-hpc", "labels": tenancy.LABELS}, "data": {cell_fit.CELLS_KEY: json.dumps(cells)}},
    )


def workers() -> list[Any]:
    config = parse_config(stack_config(STACK))
    return as_resources(operator_module(config).render(config), {"NodeSet"})


def test_the_stack_renders_workers_to_judge_against():
    assert len(workers()) == 2


def test_cells_that_fit_the_workers_pass():
    cells = [{"tenant": "team-a", "pool": "h100", "gpusPerCell": 8, "cells": 1}, {"tenant": "team-b", "pool": "h100", "gpusPerCell": 4, "cells": 2}]
    assert check(POLICY, cells_map(cells), *workers()) == []


def test_over_commitment_is_refused_with_pool_size_counts_tenants_and_workers():
    cells = [{"tenant": "team-a", "pool": "h200", "gpusPerCell": 8, "cells": 1}, {"tenant": "team-b", "pool": "h200", "gpusPerCell": 2, "cells": 1}]
    one(
        check(POLICY, cells_map(cells), *workers()),
        "ConfigMap fpt-hpc/fpt-hpc-tenants: pool 'h200' cannot hold the guaranteed 2-GPU cells: 1 needed, 0 available (asked by team-b)",
        "the stack declares 1 Slurm workers of 8 GPUs in that pool",
        "Fix: shrink or move",
    )


def test_a_hand_edited_worker_count_is_judged_too():
    cells = [{"tenant": "team-a", "pool": "h100", "gpusPerCell": 8, "cells": 2}]
    fewer = [as_policy_resource_with_replicas(w, 1) if w.name.endswith("h100") else w for w in workers()]
    one(check(POLICY, cells_map(cells), *fewer), "2 needed, 1 available (asked by team-a)")


def as_policy_resource_with_replicas(worker: Any, replicas: int) -> Any:
    props = json.loads(json.dumps(dict(worker.props), default=lambda v: dict(v) if hasattr(v, "keys") else list(v)))
    props["spec"]["replicas"] = replicas
    return resource(worker.resource_type, props)


def test_cells_on_a_pool_without_workers_have_no_room():
    one(check(POLICY, cells_map([{"tenant": "a", "pool": "gone", "gpusPerCell": 1, "cells": 1}]), *workers()), "1 needed, 0 available")


def test_an_unreadable_cells_document_is_a_violation():
    one(check(POLICY, cells_map([{"tenant": "a", "pool": "h100", "gpusPerCell": "8", "cells": 1}]), *workers()), "unreadable cells.json")


def test_no_tenants_config_map_nothing_to_judge():
    assert check(POLICY, *workers()) == []


def test_the_mocked_stack_with_tenants_passes_and_over_committed_fails():
    run = run_stack(STACK, tenants=two_teams(STACK))
    resources = [as_policy_resource(r) for r in run.resources if r.custom]
    assert [r for r in resources if r.resource_type == CONFIG_MAP and cell_fit.CELLS_KEY in r.props.get("data", {})]
    assert check(POLICY, *resources) == []
    # The same stack with its h100 workers cut to one: team-a's whole node and team-b's halves no longer fit.
    cut = [as_policy_resource_with_replicas(r, 1) if r.name == "slurm-nodeset-h100" else r for r in resources]
    assert check(POLICY, *cut) != []


# --- tenant-namespace-hardening ---------------------------------------------------------------

HARDENING = "tenant-namespace-hardening"
TENANT_STACK = "prod-hoalac"  # the example with a tenant namespace: vision


@pytest.fixture(scope="module")
def tenant_stack_resources() -> list[Any]:
    run = run_stack(TENANT_STACK)
    return [as_policy_resource(r) for r in run.resources if r.custom]


def without(resources: list[Any], drop: Callable[[Any], bool]) -> list[Any]:
    return [r for r in resources if not drop(r)]


def relabelled(resources: list[Any], namespace: str, labels: dict[str, str]) -> list[Any]:
    """The stack with the Namespace's labels replaced."""
    out = []
    for r in resources:
        if r.resource_type == hardening.NAMESPACE and r.props["metadata"]["name"] == namespace:
            props = json.loads(json.dumps(r.props, default=lambda v: dict(v) if hasattr(v, "keys") else list(v)))
            props["metadata"]["labels"] = labels
            r = resource(r.resource_type, props)
        out.append(r)
    return out


def without_pod_security(resources: list[Any], namespace: str) -> dict[str, str]:
    """The Namespace's labels but Pod Security's: the tenant label, which the admission policies select, stays."""
    (labels,) = [
        r.props["metadata"]["labels"] for r in resources if r.resource_type == hardening.NAMESPACE and r.props["metadata"]["name"] == namespace
    ]
    return {str(k): str(v) for k, v in labels.items() if not str(k).startswith("pod-security.kubernetes.io/")}


def meta(r: Any, key: str) -> Any:
    return r.props["metadata"].get(key)


def admission_policy(name: str) -> Callable[[Any], bool]:
    return lambda r: r.resource_type == hardening.ADMISSION_POLICY and meta(r, "name") == name


def admission_binding(name: str) -> Callable[[Any], bool]:
    return lambda r: r.resource_type == hardening.ADMISSION_BINDING and r.props["spec"]["policyName"] == name


def test_the_rule_names_what_components_render():
    """The pack stands alone (no import of components/): its names are tied to the renders here."""
    assert tenancy.POD_SECURITY_LABELS[hardening.POD_SECURITY_ENFORCE] == hardening.POD_SECURITY_LEVEL
    config = parse_config(stack_config(TENANT_STACK))
    rendered = [r.manifest for r in tenancy.render(config, operator_module(config).accounting_client(config))]
    policies = {m["metadata"]["name"] for m in rendered if m["kind"] == "ValidatingAdmissionPolicy"}
    assert set(hardening.TENANT_ADMISSION_POLICIES) <= policies
    assert {m["metadata"]["name"] for m in rendered if m["kind"] == "Role"} == {hardening.TENANT_ROLE}


def test_the_example_tenant_namespace_passes(tenant_stack_resources):
    assert hardening.tenant_namespaces(tenant_stack_resources) == {"vision"}
    assert check(HARDENING, *tenant_stack_resources) == []


def test_dropping_any_piece_of_the_hardening_fails(tenant_stack_resources):
    """Each piece dropped from the tenant namespace alone, and the rule names it."""
    resources = tenant_stack_resources
    drops: dict[str, tuple[list[Any], str]] = {
        "pod security labels": (
            relabelled(resources, "vision", without_pod_security(resources, "vision")),
            "pod-security.kubernetes.io/enforce=restricted (has none)",
        ),
        "pod security baseline": (
            relabelled(resources, "vision", {**without_pod_security(resources, "vision"), hardening.POD_SECURITY_ENFORCE: "baseline"}),
            "(has baseline)",
        ),
        "default-deny": (
            without(
                resources,
                lambda r: r.resource_type == hardening.NETWORK_POLICY and meta(r, "namespace") == "vision" and meta(r, "name") == "default-deny",
            ),
            "no default-deny NetworkPolicy",
        ),
        "role": (
            without(resources, lambda r: r.resource_type == hardening.ROLE and meta(r, "namespace") == "vision"),
            "the Role slurm-tenant is missing",
        ),
    }
    for name in hardening.TENANT_ADMISSION_POLICIES:
        drops[f"policy {name}"] = (without(resources, admission_policy(name)), f"the ValidatingAdmissionPolicy {name} does not cover it")
        drops[f"binding {name}"] = (without(resources, admission_binding(name)), f"no ValidatingAdmissionPolicyBinding enforces {name} there")
    found = []
    for piece, (broken, fragment) in drops.items():
        assert broken != resources, piece  # the piece was there to drop
        one(check(HARDENING, *broken), "tenant namespace vision: ", fragment, "Fix: ")
        found.append(piece)
    assert len(found) == 4 + 2 * len(hardening.TENANT_ADMISSION_POLICIES)


def test_a_binding_that_only_audits_or_a_policy_that_skips_the_namespace_fails(tenant_stack_resources):
    audited, narrowed = [], []
    for r in tenant_stack_resources:
        props = json.loads(json.dumps(r.props, default=lambda v: dict(v) if hasattr(v, "keys") else list(v)))
        if r.resource_type == hardening.ADMISSION_BINDING and props["spec"]["policyName"] == "slurm-tenant-pods":
            props["spec"]["validationActions"] = ["Audit"]
            audited.append(resource(r.resource_type, props))
            narrowed.append(r)
        elif r.resource_type == hardening.ADMISSION_POLICY and props["metadata"]["name"] == "slurm-tenant-services":
            props["spec"]["matchConstraints"]["namespaceSelector"] = {"matchLabels": {hardening.NAME_LABEL: "elsewhere"}}
            narrowed.append(resource(r.resource_type, props))
            audited.append(r)
        else:
            audited.append(r)
            narrowed.append(r)
    one(check(HARDENING, *audited), "no ValidatingAdmissionPolicyBinding enforces slurm-tenant-pods there")
    one(check(HARDENING, *narrowed), "the ValidatingAdmissionPolicy slurm-tenant-services does not cover it")


def test_a_tenant_namespace_is_known_by_its_objects_even_without_its_labels(tenant_stack_resources):
    unlabelled = relabelled(tenant_stack_resources, "vision", {})
    assert hardening.tenant_namespaces(unlabelled) == {"vision"}
    # Without its tenant label, no admission policy that selects namespaces covers it either: each one is named (the
    # priority classes' policy runs in every namespace).
    messages = check(HARDENING, *unlabelled)
    expected = ["pod-security.kubernetes.io/enforce=restricted"] + [
        f"the ValidatingAdmissionPolicy {name} does not cover it"
        for name in hardening.TENANT_ADMISSION_POLICIES
        if name != "slurm-tenant-priority-classes"
    ]
    assert len(messages) == len(expected) and all(any(fragment in m for m in messages) for fragment in expected), messages
    # Another operator's stack with a tenant namespace passes too; one without tenants has nothing to judge.
    resources = [as_policy_resource(r) for r in run_stack(STACK, tenants=two_teams(STACK)).resources if r.custom]
    assert hardening.tenant_namespaces(resources) == {"team-b"} and check(HARDENING, *resources) == []
    resources = [as_policy_resource(r) for r in run_stack(STACK).resources if r.custom]
    assert hardening.tenant_namespaces(resources) == set() and check(HARDENING, *resources) == []

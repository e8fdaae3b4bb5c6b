"""slurm-tenant-cells-fit: the tenants' guaranteed cells fit the Slurm workers the
stack declares (HiveD's startup check, at preview).

tenant-namespace-hardening: every tenant namespace the stack declares keeps what
confines its pods (components/tenancy.py, components/network_policies.py).

It reads what the stack renders, so a hand-edited stack is judged too: the
guarantees from the tenants ConfigMap (`cells.json`, components/tenancy.py) and
the capacity from the per-pool workers (soperator 4.x and Slinky NodeSets, ACK
worker groups: replicas × GPUs per worker).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pulumi_policy import EnforcementLevel, ReportViolation, StackValidationArgs, StackValidationPolicy
from slurm_rules import cell_fit  # the same check as the stack config

from .common import CONFIG_MAP, display, elements, get, is_list, is_map, items, name_of, namespace_of, of_type, stack_config, violation
from .quota import worker_sets


def cell_requests(document: str) -> list[cell_fit.CellRequest]:
    """The ConfigMap's cells, or ValueError when it is not the list of cells we render."""
    cells = json.loads(document)
    if not is_list(cells):
        raise ValueError("not a list")
    requests = []
    for cell in cells:
        if not is_map(cell):
            raise ValueError("an entry is not an object")
        size, count = cell.get("gpusPerCell"), cell.get("cells")
        if not (isinstance(size, int) and isinstance(count, int) and size > 0 and count > 0):
            raise ValueError(f"gpusPerCell and cells must be positive integers in {dict(cell)}")
        requests.append(cell_fit.CellRequest(str(cell.get("tenant", "?")), str(cell.get("pool", "?")), size, count))
    return requests


def cluster_capacity(config: Any) -> tuple[dict[str, tuple[int, int]], list[cell_fit.CellRequest]]:
    """Where stacks share the cluster (the pack's config: tools/policy_configs.py cluster_cells): the workers of each
    pool, which a tenant stack does not declare, and the cells the other stacks declare."""
    workers = get(config, "workers", default={})
    capacity = {str(pool): (int(get(w, "nodes", default=0)), int(get(w, "gpus", default=0))) for pool, w in items(workers)}
    return capacity, cell_requests(json.dumps(elements(get(config, "otherCells", default=[]))))


def validate_tenant_cells_fit(args: StackValidationArgs, report: ReportViolation) -> None:
    capacity, others = cluster_capacity(stack_config(args))
    declared: dict[str, tuple[int, int]] = {}
    for r in args.resources:
        for _, pool, workers, shape in worker_sets(r.resource_type, r.props):
            nodes, gpus = declared.get(pool, (0, int(shape.gpus)))
            declared[pool] = (nodes + workers, min(gpus, int(shape.gpus)))
    capacity.update(declared)  # what the stack renders is judged, where it renders workers
    for config_map in of_type(args.resources, CONFIG_MAP):
        props = config_map.props
        if get(props, "metadata", "labels", "app.kubernetes.io/component") != cell_fit.TENANTS_COMPONENT or cell_fit.CELLS_KEY not in get(
            props, "data", default={}
        ):
            continue
        where = f"ConfigMap {display(props)}"
        try:
            requests = cell_requests(str(get(props, "data", cell_fit.CELLS_KEY)))
        except ValueError as error:
            report(violation(f"{where} has an unreadable {cell_fit.CELLS_KEY} ({error})", "render it from stack config tenants[]"), config_map.urn)
            continue
        for shortfall in cell_fit.shortfalls(capacity, [*requests, *others]):
            nodes, gpus = capacity.get(shortfall.pool, (0, 0))
            beside = f" beside {len(others)} cells of the cluster's other stacks" if others else ""
            declarer = "the stack declares" if shortfall.pool in declared else "its platform stack declares"
            report(
                violation(
                    f"{where}: {shortfall.describe()}{beside}; {declarer} {nodes} Slurm workers of {gpus} GPUs in that pool",
                    "shrink or move the tenants' cells (tenants[].cells), or add workers to the pool",
                ),
                config_map.urn,
            )


tenant_cells_fit = StackValidationPolicy(
    name="slurm-tenant-cells-fit",
    description="The tenants' guaranteed GPU cells (N GPUs on one node each) fit the Slurm workers of their pools.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_tenant_cells_fit,
)


# --- tenant-namespace-hardening ---------------------------------------------------------------

NAMESPACE = "kubernetes:core/v1:Namespace"
ROLE = "kubernetes:rbac.authorization.k8s.io/v1:Role"
ROLE_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"
RESOURCE_QUOTA = "kubernetes:core/v1:ResourceQuota"
LIMIT_RANGE = "kubernetes:core/v1:LimitRange"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
ADMISSION_POLICY = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
ADMISSION_BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
COMPONENT_LABEL = "app.kubernetes.io/component"
TENANTS_COMPONENT = "tenants"
NAME_LABEL = "kubernetes.io/metadata.name"
# What components/tenancy.py renders for each tenant namespace (tests/test_policies_tenancy.py ties them).
POD_SECURITY_ENFORCE = "pod-security.kubernetes.io/enforce"
POD_SECURITY_LEVEL = "restricted"
TENANT_ROLE = "slurm-tenant"
TENANT_ADMISSION_POLICIES = (
    "slurm-tenant-pods",
    "slurm-tenant-services",
    "slurm-tenant-priority-classes",
    "slurm-tenant-gpu-devices",
    "slurm-tenant-placement",
)
# The stack's tenant objects inside a tenant namespace: any one of them marks it, so dropping the Namespace's labels
# does not hide it.
TENANT_MARKERS = (ROLE, ROLE_BINDING, RESOURCE_QUOTA, LIMIT_RANGE)


def tenant_namespaces(resources: list[Any]) -> set[str]:
    """Every namespace the stack hands a tenant: a Namespace labelled the tenants', or one holding a tenant object."""
    found = set()
    for r in resources:
        if get(r.props, "metadata", "labels", COMPONENT_LABEL) != TENANTS_COMPONENT:
            continue
        if r.resource_type == NAMESPACE:
            found.add(name_of(r.props))
        elif r.resource_type in TENANT_MARKERS and namespace_of(r.props):
            found.add(str(namespace_of(r.props)))
    return found


def selects(selector: Any, labels: dict[str, str]) -> bool:
    """A label selector (an absent one selects everything) applied to `labels`."""
    if not is_map(selector):
        return True
    if any(labels.get(key) != value for key, value in items(get(selector, "matchLabels", default={}))):
        return False
    for expression in elements(get(selector, "matchExpressions")):
        key, operator, values = get(expression, "key"), get(expression, "operator"), [str(v) for v in elements(get(expression, "values"))]
        held = (operator == "In" and labels.get(key) in values) or (operator == "NotIn" and labels.get(key) not in values)
        held = held or (operator == "Exists" and key in labels) or (operator == "DoesNotExist" and key not in labels)
        if not held:
            return False
    return True


def namespace_labels(resources: list[Any], namespace: str) -> dict[str, str]:
    labels = {NAME_LABEL: namespace}
    for r in of_type(resources, NAMESPACE):
        if name_of(r.props) == namespace:
            labels.update({str(k): str(v) for k, v in items(get(r.props, "metadata", "labels", default={}))})
    return labels


def is_default_deny(props: Any) -> bool:
    """Every pod of the namespace, both directions, no rule letting anything through."""
    spec = get(props, "spec", default={})
    selector = get(spec, "podSelector", default={})
    every_pod = is_map(selector) and not get(selector, "matchLabels") and not get(selector, "matchExpressions")
    types = {str(t) for t in elements(get(spec, "policyTypes"))}
    return every_pod and {"Ingress", "Egress"} <= types and not elements(get(spec, "ingress")) and not elements(get(spec, "egress"))


def hardening_gaps(resources: list[Any], namespace: str, platform_policies: Sequence[Any] = ()) -> list[tuple[str, str]]:
    """(what is missing, how to get it back) for one tenant namespace; a tenant stack's admission policies are the
    ones its platform stack declares (`platform_policies`, its pack config: tools/policy_configs.py)."""
    labels = namespace_labels(resources, namespace)
    gaps = []
    declared = [r for r in of_type(resources, NAMESPACE) if name_of(r.props) == namespace]
    if not declared or labels.get(POD_SECURITY_ENFORCE) != POD_SECURITY_LEVEL:
        gaps.append(
            (
                f"its Namespace does not carry {POD_SECURITY_ENFORCE}={POD_SECURITY_LEVEL} (has {labels.get(POD_SECURITY_ENFORCE, 'none')})",
                "declare the Namespace from components/tenancy.py with its Pod Security labels",
            )
        )
    admission = [(r.resource_type, r.props) for r in resources] + [
        (f"kubernetes:{get(m, 'apiVersion')}:{get(m, 'kind')}", m) for m in platform_policies
    ]
    policies = {name_of(props): props for kind, props in admission if kind == ADMISSION_POLICY}
    bindings = [props for kind, props in admission if kind == ADMISSION_BINDING]
    for name in TENANT_ADMISSION_POLICIES:
        policy = policies.get(name)
        denying = [
            b
            for b in bindings
            if get(b, "spec", "policyName") == name
            and "Deny" in [str(a) for a in elements(get(b, "spec", "validationActions"))]
            and selects(get(b, "spec", "matchResources", "namespaceSelector"), labels)
        ]
        if policy is None or not selects(get(policy, "spec", "matchConstraints", "namespaceSelector"), labels):
            gaps.append((f"the ValidatingAdmissionPolicy {name} does not cover it", "keep the tenants' admission policies (components/tenancy.py)"))
        elif not denying:
            gaps.append((f"no ValidatingAdmissionPolicyBinding enforces {name} there (validationActions Deny)", "keep its binding with Deny"))
    if not any(is_default_deny(r.props) for r in of_type(resources, NETWORK_POLICY) if namespace_of(r.props) == namespace):
        gaps.append(("no default-deny NetworkPolicy (every pod, Ingress and Egress, no rule)", "keep networkPolicies.enabled: true"))
    if not any(name_of(r.props) == TENANT_ROLE for r in of_type(resources, ROLE) if namespace_of(r.props) == namespace):
        gaps.append((f"the Role {TENANT_ROLE} is missing", f"keep the Role {TENANT_ROLE} the tenant's groups are bound to"))
    return gaps


def validate_tenant_namespace_hardening(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = list(args.resources)
    platform_policies = [m for m in elements(get(stack_config(args), "platformPolicies")) if is_map(m)]
    for namespace in sorted(tenant_namespaces(resources)):
        urn = next((r.urn for r in of_type(resources, NAMESPACE) if name_of(r.props) == namespace), None)
        for gap, fix in hardening_gaps(resources, namespace, platform_policies):
            report(violation(f"tenant namespace {namespace}: {gap}", fix), urn)


tenant_namespace_hardening = StackValidationPolicy(
    name="tenant-namespace-hardening",
    description="Every tenant namespace keeps Pod Security restricted, the tenants' admission policies bound with Deny, "
    "a default-deny NetworkPolicy and the slurm-tenant Role.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_tenant_namespace_hardening,
)

POLICIES = [tenant_cells_fit, tenant_namespace_hardening]

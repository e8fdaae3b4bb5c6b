"""restricted-load-balancers: no login or other load balancer open to the internet."""

from __future__ import annotations

from typing import Any, Optional

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    StackValidationArgs,
    StackValidationPolicy,
)
from slurm_rules import kube_rules  # the rules the stack config uses too

from .common import (
    SERVICE,
    SLINKY_LOGINSET,
    SLURM_CLUSTER,
    config_value,
    display,
    elements,
    get,
    namespace_of,
    of_type,
    slurm_nodes,
    stack_config,
    violation,
)

# ---------------------------------------------------------------------------
# restricted-load-balancers

SOURCE_RANGES_ANNOTATION = "service.beta.kubernetes.io/load-balancer-source-ranges"
LOGIN_COMPONENT = ("app.kubernetes.io/component", "login")
DEFAULT_CLOUD = "fpt"


def source_ranges(props: Any) -> list[str]:
    ranges = [str(r).strip() for r in elements(get(props, "spec", "loadBalancerSourceRanges"))]
    annotation = get(props, "metadata", "annotations", SOURCE_RANGES_ANNOTATION)
    if annotation:
        ranges += [r.strip() for r in str(annotation).split(",") if r.strip()]
    return ranges


def open_to(ranges: list[str]) -> list[str]:
    """The address families the ranges open completely, judged numerically (1.2.3.4/0 is 0.0.0.0/0)."""
    return kube_rules.open_families(ranges)


def range_problem(ranges: list[str], allow_broad: bool) -> Optional[str]:
    """Why these source ranges do not restrict (None when they do)."""
    if not ranges:
        return "it has no loadBalancerSourceRanges and no private-LB annotation"
    if open_to(ranges):
        return f"loadBalancerSourceRanges {ranges} together cover the whole {' and '.join(open_to(ranges))} internet"
    if kube_rules.broad_families(ranges) and not allow_broad:
        return f"loadBalancerSourceRanges {ranges} {kube_rules.broad_range_message(ranges)}"
    return None


def validate_load_balancers(args: StackValidationArgs, report: ReportViolation) -> None:
    config = stack_config(args)
    cloud = str(config_value(config, "cloud", DEFAULT_CLOUD))
    accept_companion = bool(config_value(config, "acceptCompanionService", False))
    allow_broad = bool(config_value(config, "allowBroadSourceRanges", False))
    firewalled = bool(config_value(config, "nodePortsFirewalled", False))
    example = kube_rules.private_lb_example(cloud)

    def exposure(props: Any, annotations: Any) -> Optional[str]:
        """Why a LoadBalancer is reachable from (too much of) the internet, or None."""
        if kube_rules.private_lb_annotation(annotations, cloud):
            return None
        return range_problem(source_ranges(props), allow_broad)

    def annotation_problems(annotations: Any, what: str, urn: str) -> None:
        for problem in kube_rules.lb_annotation_problems(annotations, cloud):
            report(violation(f"{what} has load-balancer annotations that contradict: {problem}", f"keep only {example} (or none)"), urn)

    def node_ports(spec: Any, annotations: Any, what: str, urn: str, closable: bool = True) -> None:
        if firewalled or get(spec, "allocateLoadBalancerNodePorts") is False:
            return
        direct = closable and kube_rules.pod_backends(annotations, cloud)
        report(
            violation(
                f"{what} is a LoadBalancer with node ports, open on every node and not covered by its source ranges",
                "set spec.allocateLoadBalancerNodePorts: false (its load balancer reaches pods directly)"
                if direct
                else "make sure the nodes' firewall admits 30000-32767 only from the VPC, then set nodePortsFirewalled: true "
                "in this policy's config (and slurm.login.nodePortsFirewalled in the stack's)",
            ),
            urn,
        )

    lb_services = [s for s in of_type(args.resources, SERVICE) if get(s.props, "spec", "type") == "LoadBalancer"]
    for service in lb_services:
        what = f"Service {display(service.props, service.name)}"
        annotations = get(service.props, "metadata", "annotations")
        annotation_problems(annotations, what, service.urn)
        problem = exposure(service.props, annotations)
        if problem is None:
            node_ports(get(service.props, "spec"), annotations, what, service.urn)
            continue
        report(
            violation(
                f"{what} is a LoadBalancer reachable from the internet: {problem}",
                "set spec.loadBalancerSourceRanges to the office/VPN CIDRs (slurm.login.allowedSourceRanges), "
                f"or make it internal with {cloud}'s annotation {example}",
            ),
            service.urn,
        )
    for loginset in of_type(args.resources, SLINKY_LOGINSET):
        service = get(loginset.props, "spec", "service", default={})
        if get(service, "spec", "type") != "LoadBalancer":
            continue
        what = f"LoginSet {display(loginset.props, loginset.name)}"
        annotations = get(service, "metadata", "annotations")
        annotation_problems(annotations, what, loginset.urn)
        problem = exposure(service, annotations)
        if problem is None:
            node_ports(get(service, "spec"), annotations, what, loginset.urn)
            continue
        report(
            violation(
                f"{what} exposes SSH through a LoadBalancer reachable from the internet: spec.service: {problem}",
                "set slurm.login.allowedSourceRanges (rendered into spec.service.spec.loadBalancerSourceRanges), or "
                f"{cloud}'s private-LB annotation {example} in slurm.login.serviceAnnotations",
            ),
            loginset.urn,
        )
    for cluster in of_type(args.resources, SLURM_CLUSTER):
        login = get(slurm_nodes(cluster.props), "login")
        namespace = namespace_of(cluster.props)
        companions = [
            s
            for s in lb_services
            if exposure(s.props, get(s.props, "metadata", "annotations")) is None
            and get(s.props, "spec", "selector", LOGIN_COMPONENT[0]) == LOGIN_COMPONENT[1]
            and (namespace is None or namespace_of(s.props) in (None, namespace))
        ]
        name = get(cluster.props, "metadata", "name", default=cluster.name)
        if get(login, "sshdServiceType") == "NodePort":
            if companions and not firewalled:
                report(
                    violation(
                        f"SlurmCluster {display(cluster.props, cluster.name)} keeps its login Service {name}-login-svc on "
                        f"NodePort {get(login, 'sshdServiceNodePort', default='(auto)')} beside the restricted LoadBalancer "
                        f"{display(companions[0].props, companions[0].name)}: the node port is open on every node and "
                        "not covered by the source ranges",
                        "make sure the nodes' firewall admits 30000-32767 only from the VPC, then set nodePortsFirewalled: "
                        "true in this policy's config (and slurm.login.nodePortsFirewalled in the stack's)",
                    ),
                    cluster.urn,
                )
            continue
        if get(login, "sshdServiceType") != "LoadBalancer":
            continue
        annotations = get(login, "sshdServiceAnnotations")
        what = f"SlurmCluster {display(cluster.props, cluster.name)}"
        annotation_problems(annotations, what, cluster.urn)
        # soperator 4.x restricts its own login Service.
        own_ranges = {"spec": {"loadBalancerSourceRanges": get(login, "sshdServiceLoadBalancerSourceRanges", default=[])}}
        if exposure(own_ranges, annotations) is None:
            # The CRD has no allocateLoadBalancerNodePorts: only a firewall covers these node ports.
            node_ports({}, annotations, f"{what}'s login Service {name}-login-svc", cluster.urn, closable=False)
            continue
        if accept_companion and companions:
            continue
        report(
            violation(
                f"{what} has sshdServiceType LoadBalancer: soperator creates "
                f"Service {name}-login-svc with no source ranges (the 1.14.10 CRD has no such field) and "
                f"sshdServiceAnnotations holds no private-LB annotation of {cloud}, so SSH is open to the internet",
                "set slurm.login.allowedSourceRanges (the program then keeps the CR on NodePort and exposes SSH through "
                f"its own LoadBalancer with loadBalancerSourceRanges), or add {cloud}'s private-LB annotation "
                f"{example} to slurm.login.serviceAnnotations",
            ),
            cluster.urn,
        )


restricted_load_balancers = StackValidationPolicy(
    name="restricted-load-balancers",
    description="LoadBalancer Services (ours, the SlurmCluster's login Service, Slinky LoginSets') are restricted by bounded "
    "source ranges or the cloud's private annotation, and their node ports are closed or firewalled.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_load_balancers,
    config_schema=PolicyConfigSchema(
        properties={
            "cloud": {
                "type": "string",
                "enum": list(kube_rules.CLOUDS),
                "default": DEFAULT_CLOUD,
                "description": "The stack's cloud (its `slurm-platform:cloud`): only its private-LB annotation counts.",
            },
            "acceptCompanionService": {
                "type": "boolean",
                "default": False,
                "description": "Let a public SlurmCluster login LoadBalancer pass when the stack also declares a "
                "restricted LoadBalancer selecting the login pods (the operator's Service stays public).",
            },
            "allowBroadSourceRanges": {
                "type": "boolean",
                "default": False,
                "description": "Accept source ranges reaching more public addresses than an IPv4 /8 or an IPv6 /32 "
                "(the stack's slurm.login.allowBroadSourceRanges).",
            },
            "nodePortsFirewalled": {
                "type": "boolean",
                "default": False,
                "description": "The nodes' firewall admits node ports only from the VPC (the stack's slurm.login.nodePortsFirewalled).",
            },
        }
    ),
)

POLICIES = [restricted_load_balancers]

"""Safety guardrails: no open load balancers, protected data volumes, no
secrets in plain config, pinned operator charts."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any, Optional

import pulumi
from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from slurm_rules import kube_rules  # the rules the stack config uses too

from .common import (
    CHART_TYPES,
    CONFIG_MAP,
    DEFAULT_DATA_CLAIM_REGEX,
    POD_TEMPLATE_TYPES,
    PV,
    PVC,
    SECRET,
    SERVICE,
    SLINKY_LOGINSET,
    SLURM_CLUSTER,
    config_value,
    display,
    elements,
    get,
    items,
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


# ---------------------------------------------------------------------------
# protect-slurm-data-volumes


def validate_data_protection(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type not in (PVC, PV):
        return
    pattern = re.compile(config_value(args.get_config(), "dataClaimPattern", DEFAULT_DATA_CLAIM_REGEX))
    label = display(args.props, args.name)
    if args.resource_type == PVC:
        if pattern.match(str(get(args.props, "metadata", "name", default=""))) and not args.opts.protect:
            report(
                violation(
                    f"PersistentVolumeClaim {label} holds Slurm data (jail, spool or submount) but is not protected; "
                    "a rename or `pulumi destroy` would delete it",
                    "declare it with ResourceOptions(protect=True, retain_on_delete=True) (storage component)",
                ),
                None,
            )
        return
    claim = str(get(args.props, "spec", "claimRef", "name", default=""))
    if not pattern.match(claim):
        return
    if not args.opts.protect:
        report(
            violation(
                f"PersistentVolume {label} is bound to Slurm data claim {claim} but is not protected",
                "declare it with ResourceOptions(protect=True, retain_on_delete=True) (storage component)",
            ),
            None,
        )
    policy = get(args.props, "spec", "persistentVolumeReclaimPolicy")
    if policy is not None and policy != "Retain":
        report(
            violation(
                f"PersistentVolume {label} is bound to Slurm data claim {claim} with persistentVolumeReclaimPolicy "
                f"{policy}; releasing the claim would {'delete' if policy == 'Delete' else 'scrub'} the data",
                "set spec.persistentVolumeReclaimPolicy: Retain",
            ),
            None,
        )


protect_data_volumes = ResourceValidationPolicy(
    name="protect-slurm-data-volumes",
    description="Slurm data claims and the volumes bound to them are protected, and those volumes use reclaim policy Retain.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_data_protection,
    config_schema=PolicyConfigSchema(
        properties={
            "dataClaimPattern": {
                "type": "string",
                "default": DEFAULT_DATA_CLAIM_REGEX,
                "description": "Regex of data claim names (also matched against a PersistentVolume's claimRef.name).",
            }
        }
    ),
)


# ---------------------------------------------------------------------------
# no-secrets-in-plain-config

DEFAULT_SECRET_NAME_PATTERN = r"password|passwd|secret|token|munge|authtok|private.?key"
DEFAULT_SECRET_VALUE_PATTERNS = [r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY", r"ldap_default_authtok", r"\bbindpw\b"]
DEFAULT_ALLOWED_NAME_PATTERN = r"(_FILE|_PATH|_DIR|_NAME)$"
# Stack config keys that hold a credential, and those that only name or point at one.
CREDENTIAL_KEY = re.compile(r"password|passwd|pwd|secret|token|authtok|bindpw|credential|api.?key|private.?key", re.IGNORECASE)
REFERENCE_KEY = re.compile(r"(name|key|ref|file|path|dir|length)$", re.IGNORECASE)
DEFAULT_MIN_CREDENTIAL_LENGTH = 8
SECRET_FIELDS = ("data", "stringData")


def _leaves(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping):
        for key, child in value.items():
            yield from _leaves(child, f"{path}.{key}")
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _leaves(child, f"{path}[{index}]")
    else:
        yield path, value


def config_credentials(stack_config: Mapping[str, Any], min_length: int = DEFAULT_MIN_CREDENTIAL_LENGTH) -> dict[str, str]:
    """credential value -> the stack config key that holds it.

    The engine hands a policy pack the stack's config (decrypted) in PULUMI_CONFIG;
    a credential is a string leaf under a key named like one (password, token, ...)
    that does not merely name or point at one (passwordSecretName, tokenFile).
    """
    found: dict[str, str] = {}
    for full_key, raw in stack_config.items():
        try:
            value = json.loads(raw) if isinstance(raw, str) and raw[:1] in "[{" else raw
        except ValueError:
            value = raw
        for path, leaf in _leaves(value, str(full_key)):
            last = re.split(r"[.:\[]", path)[-1]
            if isinstance(leaf, str) and len(leaf) >= min_length and CREDENTIAL_KEY.search(last) and not REFERENCE_KEY.search(last):
                found.setdefault(leaf, path)
    return found


def _texts(field: str, value: Any) -> str:
    """A Secret's `data` is base64: compare decoded text."""
    if field == "data":
        try:
            return base64.b64decode(str(value), validate=True).decode("utf-8", "replace")
        except (ValueError, binascii.Error):
            return str(value)
    return str(value)


def pod_specs(resource_type: str, props: Any) -> list[tuple[str, Any]]:
    if resource_type == "kubernetes:core/v1:Pod":
        return [("spec", get(props, "spec"))]
    if resource_type == "kubernetes:batch/v1:CronJob":
        return [("spec.jobTemplate.spec.template.spec", get(props, "spec", "jobTemplate", "spec", "template", "spec"))]
    return [("spec.template.spec", get(props, "spec", "template", "spec"))]


def validate_no_plain_secrets(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type not in (CONFIG_MAP, SECRET, *POD_TEMPLATE_TYPES):
        return
    config = args.get_config()
    credentials = config_credentials(pulumi.runtime.get_config_env(), int(config_value(config, "minCredentialLength", DEFAULT_MIN_CREDENTIAL_LENGTH)))

    def from_config(text: Any) -> Optional[str]:
        """The config key whose credential appears in `text`, if any."""
        return next((key for value, key in credentials.items() if value in str(text)), None)

    name_pattern = re.compile(config_value(config, "secretNamePattern", DEFAULT_SECRET_NAME_PATTERN), re.IGNORECASE)
    value_patterns = [re.compile(p, re.IGNORECASE) for p in config_value(config, "secretValuePatterns", DEFAULT_SECRET_VALUE_PATTERNS)]
    allowed_names = set(config_value(config, "allowedNames", []))
    allowed_pattern = re.compile(config_value(config, "allowedNamePattern", DEFAULT_ALLOWED_NAME_PATTERN), re.IGNORECASE)
    label = display(args.props, args.name)

    def suspicious_name(name: str) -> bool:
        return name not in allowed_names and not allowed_pattern.search(name) and bool(name_pattern.search(name))

    if args.resource_type == SECRET:
        # A Secret may hold a credential, but then its data must be a Pulumi secret
        # too, or the value sits in plain text in the state and in previews.
        if set(SECRET_FIELDS) <= set(args.opts.additional_secret_outputs or []):
            return
        for field in SECRET_FIELDS:
            for key, value in items(get(args.props, field)):
                source = from_config(_texts(field, value))
                if source:
                    report(
                        violation(
                            f"Secret {label}: {field} key '{key}' carries the credential from stack config {source} "
                            "while the Secret's data is not marked secret, so it is stored in plain text in the state",
                            "set the config value with `pulumi config set --secret` and declare the Secret with "
                            "additional_secret_outputs=['data', 'stringData']",
                        ),
                        None,
                    )
        return

    if args.resource_type == CONFIG_MAP:
        fix = "move it into a Secret (a Pulumi secret) and mount or reference that Secret instead"
        for field in ("data", "binaryData"):
            for key, value in items(get(args.props, field)):
                if suspicious_name(str(key)):
                    report(
                        violation(
                            f"ConfigMap {label}: {field} key '{key}' looks like a secret; ConfigMaps are not encrypted "
                            "and anyone who can read the namespace can read them",
                            fix,
                        ),
                        None,
                    )
                    continue
                source = from_config(value)
                if source:
                    report(
                        violation(f"ConfigMap {label}: {field} key '{key}' carries the credential from stack config {source} in plain text", fix),
                        None,
                    )
                    continue
                if field == "data" and key not in allowed_names:
                    marker = next((p.pattern for p in value_patterns if p.search(str(value))), None)
                    if marker:
                        report(
                            violation(f"ConfigMap {label}: the value of data key '{key}' contains secret material (matches '{marker}')", fix),
                            None,
                        )
        return

    for base, spec in pod_specs(args.resource_type, args.props):
        for group in ("initContainers", "containers", "ephemeralContainers"):
            for container in elements(get(spec, group)):
                for env in elements(get(container, "env")):
                    name = str(get(env, "name", default=""))
                    value = get(env, "value")
                    if value in (None, ""):
                        continue
                    source = from_config(value)
                    if source:
                        report(
                            violation(
                                f"{args.resource_type.rsplit(':', 1)[-1]} {label}: {base}.{group}"
                                f"[{get(container, 'name', default='?')}] env {name} carries the credential from stack "
                                f"config {source} as a literal value",
                                "put it in a Secret and use env[].valueFrom.secretKeyRef",
                            ),
                            None,
                        )
                        continue
                    if not suspicious_name(name):
                        continue
                    report(
                        violation(
                            f"{args.resource_type.rsplit(':', 1)[-1]} {label}: {base}.{group}"
                            f"[{get(container, 'name', default='?')}] env {name} carries a literal value; "
                            "it ends up in plain text in the object and the Pulumi state",
                            f"use env[].valueFrom.secretKeyRef pointing at a Secret holding {name}",
                        ),
                        None,
                    )


no_plain_secrets = ResourceValidationPolicy(
    name="no-secrets-in-plain-config",
    description="No secret values in ConfigMaps or literal container env values, and no stack config credential "
    "in a ConfigMap, an env literal or a Secret whose data is not a Pulumi secret.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_no_plain_secrets,
    config_schema=PolicyConfigSchema(
        properties={
            "secretNamePattern": {
                "type": "string",
                "default": DEFAULT_SECRET_NAME_PATTERN,
                "description": "Regex (case-insensitive) of ConfigMap keys and env names that hold secrets.",
            },
            "secretValuePatterns": {
                "type": "array",
                "items": {"type": "string"},
                "default": DEFAULT_SECRET_VALUE_PATTERNS,
                "description": "Regexes (case-insensitive) of secret material inside ConfigMap values.",
            },
            "allowedNames": {
                "type": "array",
                "items": {"type": "string"},
                "default": [],
                "description": "Exact keys/env names never flagged.",
            },
            "allowedNamePattern": {
                "type": "string",
                "default": DEFAULT_ALLOWED_NAME_PATTERN,
                "description": "Regex of names that point at a secret rather than hold one (e.g. *_FILE).",
            },
            "minCredentialLength": {
                "type": "integer",
                "minimum": 1,
                "default": DEFAULT_MIN_CREDENTIAL_LENGTH,
                "description": "Shortest stack config credential looked for in Secrets, ConfigMaps and env literals.",
            },
        }
    ),
)


# ---------------------------------------------------------------------------
# pinned-chart-versions

LOCAL_CHART = ("/", "./", "../", "file://")
STACK = "pulumi:pulumi:Stack"
DEFAULT_VERSIONS_OUTPUT = "chartVersions"
PIN_FIX = "pin an exact chart version (e.g. 1.14.10 or v24.9.2) in the stack's operators.<chart>.version"


def unpinned(version: str) -> Optional[str]:
    """Why `version` is not a pin, or None when it is one."""
    if kube_rules.is_exact_version(version):
        return None
    if not version:
        return "has no version, so every deployment installs whatever is newest"
    return f"has version '{version}', a floating tag or range that can resolve to a new release at any deployment"


def validate_pinned_charts(args: StackValidationArgs, report: ReportViolation) -> None:
    config = stack_config(args)
    exempt = set(config_value(config, "exemptCharts", []))
    for chart_resource in of_type(args.resources, *CHART_TYPES):
        chart = get(chart_resource.props, "chart")
        if not chart:
            # helm.sh/v4 Chart is a component: the engine shows it without inputs; see the outputs below.
            continue
        chart = str(chart)
        if chart.startswith(LOCAL_CHART) or chart in exempt:
            continue
        problem = unpinned(str(get(chart_resource.props, "version", default="")).strip())
        if problem:
            kind = chart_resource.resource_type.rsplit(":", 1)[-1]
            report(violation(f"Helm {kind} {chart_resource.name} (chart {chart}) {problem}", PIN_FIX), chart_resource.urn)
    # The program exports the version of every release it installs; the engine
    # shows stack outputs even where it hides a component Chart's inputs.
    output = config_value(config, "versionsOutput", DEFAULT_VERSIONS_OUTPUT)
    for stack_resource in of_type(args.resources, STACK):
        for release, version in items(get(stack_resource.props, output)):
            if str(release) in exempt:
                continue
            problem = unpinned(str(version or "").strip())
            if problem:
                report(
                    violation(f"Helm release {release} (stack output {output}) {problem}", PIN_FIX),
                    stack_resource.urn,
                )


pinned_charts = StackValidationPolicy(
    name="pinned-chart-versions",
    description="Operator Helm charts (helm.sh/v4 Chart, v3 Chart/Release) are pinned to an exact version.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_pinned_charts,
    config_schema=PolicyConfigSchema(
        properties={
            "exemptCharts": {
                "type": "array",
                "items": {"type": "string"},
                "default": [],
                "description": "Chart references (or release keys of the versions output) exempt from pinning.",
            },
            "versionsOutput": {
                "type": "string",
                "default": DEFAULT_VERSIONS_OUTPUT,
                "description": "Stack output mapping release -> chart version, checked as well.",
            },
        }
    ),
)

# ---------------------------------------------------------------------------
# ldap-requires-tls

LDAP_CLIENT_FILE = "ldap.conf"
PHPLDAPADMIN_HTTPS = "PHPLDAPADMIN_HTTPS"


def validate_ldap_tls(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """The LDAP clients' URI is ldaps:// (the read-only bind password would otherwise cross the pod
    network in clear) and phpLDAPadmin serves HTTPS (it takes the directory admin's password)."""
    where = display(args.props, args.name)
    if args.resource_type == CONFIG_MAP:
        text = get(args.props, "data", LDAP_CLIENT_FILE)
        uris = [line.split(None, 1)[1].strip() for line in str(text or "").splitlines() if line.upper().startswith("URI") and len(line.split()) > 1]
        plain = [uri for uri in uris if not uri.lower().startswith("ldaps://")]
        if plain:
            report(
                violation(
                    f"ConfigMap {where} points the LDAP clients at {', '.join(plain)}: binds and lookups cross the network unencrypted",
                    "set ldap.tls.enabled: true and ldap.tls.secretName (a kubernetes.io/tls Secret with ca.crt)",
                ),
                None,
            )
        return
    if args.resource_type not in POD_TEMPLATE_TYPES:
        return
    for field, spec in pod_specs(args.resource_type, args.props):
        for container in elements(get(spec, "containers")):
            for env in elements(get(container, "env")):
                if get(env, "name") == PHPLDAPADMIN_HTTPS and str(get(env, "value", default="")).lower() != "true":
                    report(
                        violation(
                            f"{where} runs phpLDAPadmin over plain HTTP ({field} container {get(container, 'name')}): "
                            "the directory admin's password would cross the network in clear",
                            "set ldap.tls.enabled: true (phpLDAPadmin then serves HTTPS), or ldap.phpLdapAdmin: false",
                        ),
                        None,
                    )


ldap_requires_tls = ResourceValidationPolicy(
    name="ldap-requires-tls",
    description="LDAP clients connect with ldaps:// and phpLDAPadmin serves HTTPS (the stack config requires both in prod).",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_ldap_tls,
)

POLICIES = [restricted_load_balancers, protect_data_volumes, no_plain_secrets, pinned_charts, ldap_requires_tls]

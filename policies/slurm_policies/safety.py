"""Safety guardrails: no open load balancers, protected data volumes, no
secrets in plain config, pinned operator charts."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any, Optional

import kube_rules  # policies/kube_rules.py: the rules the stack config uses too
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

# The stack config judges the login's annotations against the same list.
DEFAULT_PRIVATE_LB_ANNOTATIONS = kube_rules.PRIVATE_LB_ANNOTATIONS
SOURCE_RANGES_ANNOTATION = "service.beta.kubernetes.io/load-balancer-source-ranges"
LOGIN_COMPONENT = ("app.kubernetes.io/component", "login")


def private_annotation(annotations: Any, private: Mapping[str, str]) -> Optional[str]:
    return kube_rules.private_lb_annotation(annotations, dict(private))


def source_ranges(props: Any) -> list[str]:
    ranges = [str(r).strip() for r in elements(get(props, "spec", "loadBalancerSourceRanges"))]
    annotation = get(props, "metadata", "annotations", SOURCE_RANGES_ANNOTATION)
    if annotation:
        ranges += [r.strip() for r in str(annotation).split(",") if r.strip()]
    return ranges


def open_to(ranges: list[str]) -> list[str]:
    """The address families the ranges open completely, judged numerically (1.2.3.4/0 is 0.0.0.0/0)."""
    return kube_rules.open_families(ranges)


def restricted(props: Any) -> bool:
    ranges = source_ranges(props)
    return bool(ranges) and not open_to(ranges)


def validate_load_balancers(args: StackValidationArgs, report: ReportViolation) -> None:
    config = stack_config(args)
    private = dict(config_value(config, "privateLoadBalancerAnnotations", DEFAULT_PRIVATE_LB_ANNOTATIONS))
    accept_companion = bool(config_value(config, "acceptCompanionService", False))
    # Deterministic example (config maps arrive in no particular order): the defaults' order first.
    preferred = [k for k in DEFAULT_PRIVATE_LB_ANNOTATIONS if k in private] + sorted(private)
    example = (preferred[0], private[preferred[0]]) if preferred else ("<annotation>", "<value>")
    lb_services = [s for s in of_type(args.resources, SERVICE) if get(s.props, "spec", "type") == "LoadBalancer"]
    for service in lb_services:
        if restricted(service.props) or private_annotation(get(service.props, "metadata", "annotations"), private):
            continue
        ranges = source_ranges(service.props)
        problem = (
            f"loadBalancerSourceRanges {ranges} together cover the whole {' and '.join(open_to(ranges))} internet"
            if ranges
            else "it has no loadBalancerSourceRanges and no private-LB annotation"
        )
        report(
            violation(
                f"Service {display(service.props, service.name)} is a LoadBalancer reachable from the internet: {problem}",
                "set spec.loadBalancerSourceRanges to the office/VPN CIDRs (slurm.login.allowedSourceRanges), "
                f'or make it internal with an annotation such as {example[0]}: "{example[1]}"',
            ),
            service.urn,
        )
    for loginset in of_type(args.resources, SLINKY_LOGINSET):
        service = get(loginset.props, "spec", "service", default={})
        if get(service, "spec", "type") != "LoadBalancer":
            continue
        if restricted(service) or private_annotation(get(service, "metadata", "annotations"), private):
            continue
        report(
            violation(
                f"LoginSet {display(loginset.props, loginset.name)} exposes SSH through a LoadBalancer reachable from "
                "the internet: spec.service has no restricting loadBalancerSourceRanges and no private-LB annotation",
                "set slurm.login.allowedSourceRanges (rendered into spec.service.spec.loadBalancerSourceRanges), or a "
                f'private-LB annotation such as {example[0]}: "{example[1]}" in slurm.login.serviceAnnotations',
            ),
            loginset.urn,
        )
    for cluster in of_type(args.resources, SLURM_CLUSTER):
        login = get(slurm_nodes(cluster.props), "login")
        if get(login, "sshdServiceType") != "LoadBalancer":
            continue
        if private_annotation(get(login, "sshdServiceAnnotations"), private):
            continue
        # soperator 4.x restricts its own login Service.
        if restricted({"spec": {"loadBalancerSourceRanges": get(login, "sshdServiceLoadBalancerSourceRanges", default=[])}}):
            continue
        namespace = namespace_of(cluster.props)
        if accept_companion and any(
            restricted(s.props)
            and get(s.props, "spec", "selector", LOGIN_COMPONENT[0]) == LOGIN_COMPONENT[1]
            and (namespace is None or namespace_of(s.props) in (None, namespace))
            for s in lb_services
        ):
            continue
        name = get(cluster.props, "metadata", "name", default=cluster.name)
        report(
            violation(
                f"SlurmCluster {display(cluster.props, cluster.name)} has sshdServiceType LoadBalancer: soperator creates "
                f"Service {name}-login-svc with no source ranges (the 1.14.10 CRD has no such field) and "
                "sshdServiceAnnotations holds no private-LB annotation, so SSH is open to the internet",
                "set slurm.login.allowedSourceRanges (the program then keeps the CR on NodePort and exposes SSH through "
                "its own LoadBalancer with loadBalancerSourceRanges), or add a private-LB annotation such as "
                f'{example[0]}: "{example[1]}" to slurm.login.serviceAnnotations',
            ),
            cluster.urn,
        )


restricted_load_balancers = StackValidationPolicy(
    name="restricted-load-balancers",
    description="LoadBalancer Services (ours, the SlurmCluster's login Service, Slinky LoginSets') are restricted by source ranges or private.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_load_balancers,
    config_schema=PolicyConfigSchema(
        properties={
            "privateLoadBalancerAnnotations": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "default": DEFAULT_PRIVATE_LB_ANNOTATIONS,
                "description": "Annotation key -> value (case-insensitive) that makes a cloud load balancer internal.",
            },
            "acceptCompanionService": {
                "type": "boolean",
                "default": False,
                "description": "Let a public SlurmCluster login LoadBalancer pass when the stack also declares a "
                "restricted LoadBalancer selecting the login pods (the operator's Service stays public).",
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

POLICIES = [restricted_load_balancers, protect_data_volumes, no_plain_secrets, pinned_charts]

"""Credentials stay secret: no-secrets-in-plain-config (at rest in config) and ldap-requires-tls (in transit to the directory)."""

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
)

from .common import (
    CONFIG_MAP,
    POD_TEMPLATE_TYPES,
    SECRET,
    config_value,
    display,
    elements,
    get,
    items,
    violation,
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
# ldap-requires-tls

LDAP_CLIENT_FILE = "ldap.conf"
# bitnami's OpenLDAP image: TLS on, and TLS required of every connection (olcSecurity tls=1). Its yes values.
LDAP_ENABLE_TLS, LDAP_REQUIRE_TLS = "LDAP_ENABLE_TLS", "LDAP_REQUIRE_TLS"
BITNAMI_YES = ("1", "yes", "true")


def validate_ldap_tls(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """The LDAP clients' URI is ldaps:// (the read-only bind password would otherwise cross the pod network in clear),
    and an LDAP server with TLS requires it, so that no client keeps working with cleartext binds on port 389."""
    if args.resource_type in POD_TEMPLATE_TYPES:
        for field, spec in pod_specs(args.resource_type, args.props):
            for container in elements(get(spec, "containers")):
                env = {get(e, "name"): str(get(e, "value", default="")).lower() for e in elements(get(container, "env"))}
                if env.get(LDAP_ENABLE_TLS) in BITNAMI_YES and env.get(LDAP_REQUIRE_TLS) not in BITNAMI_YES:
                    report(
                        violation(
                            f"{display(args.props, args.name)} serves LDAP with TLS but does not require it ({field} container "
                            f"{get(container, 'name')}, {LDAP_REQUIRE_TLS} is not yes): cleartext binds on its LDAP port still work",
                            f"set {LDAP_REQUIRE_TLS}: yes beside {LDAP_ENABLE_TLS} (components/ldap.py renders both)",
                        ),
                        None,
                    )
        return
    if args.resource_type == CONFIG_MAP:
        where = display(args.props, args.name)
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


ldap_requires_tls = ResourceValidationPolicy(
    name="ldap-requires-tls",
    description="LDAP clients connect with ldaps://, and an LDAP server with TLS requires it (the stack config requires TLS in prod).",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_ldap_tls,
)

POLICIES = [no_plain_secrets, ldap_requires_tls]

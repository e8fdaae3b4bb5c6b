"""Kubernetes' own rules for names, quantities, source ranges and images: ONE
implementation, imported by the stack config (`components.config`, as
`policies.kube_rules`) and by the policy pack (as `kube_rules`, so the pack
still runs from policies/ alone).

* Names mirror k8s.io/apimachinery/pkg/util/validation/validation.go
  (IsDNS1123Label, IsDNS1123Subdomain, IsDNS1035Label, IsQualifiedName,
  IsValidLabelValue, IsConfigMapKey): same patterns, same length limits, and
  the same error wording. No Python library exposes these functions.
* Quantities: the grammar of k8s.io/apimachinery/pkg/api/resource/quantity.go
  (`ParseQuantity`), whose arithmetic is done by the Kubernetes Python
  client's `kubernetes.utils.parse_quantity` (on its own it also takes
  "1K", "nan" or " 1", which the API server refuses).
* Source ranges: `ipaddress`, judged by what they cover, never by spelling.
* Image references: the grammar of github.com/distribution/reference
  (regexp.go), which the kubelet and container runtimes parse.

Patterns are matched with `re.fullmatch` on ASCII classes: Python's `$`
accepts a trailing newline and `\\d`/`\\w` accept any Unicode digit or letter,
neither of which Go's regexp does.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from decimal import Decimal
from typing import Any, Optional, Union

from kubernetes.utils.quantity import parse_quantity as _client_parse_quantity  # type: ignore[import-untyped]

# --- names (apimachinery validation.go) ------------------------------------------------

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
DNS1035_LABEL_MAX = 63
QUALIFIED_NAME_MAX = 63
LABEL_VALUE_MAX = 63
CONFIG_MAP_KEY_MAX = 253

_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = rf"{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*"
_DNS1035_LABEL = r"[a-z]([-a-z0-9]*[a-z0-9])?"
_QUALIFIED_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE = rf"({_QUALIFIED_NAME})?"
_CONFIG_MAP_KEY = r"[-._a-zA-Z0-9]+"


def _too_long(limit: int) -> str:
    return f"must be no more than {limit} characters"


def _matching(value: str, pattern: str, limit: int, message: str) -> list[str]:
    """apimachinery's shape: a length error and/or a format error."""
    errors = [_too_long(limit)] if len(value) > limit else []
    if not re.fullmatch(pattern, value):
        errors.append(message)
    return errors


def is_dns1123_label(value: str) -> list[str]:
    return _matching(
        value,
        _DNS1123_LABEL,
        DNS1123_LABEL_MAX,
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
        "and must start and end with an alphanumeric character (e.g. 'my-name', or '123-abc')",
    )


def is_dns1123_subdomain(value: str) -> list[str]:
    return _matching(
        value,
        _DNS1123_SUBDOMAIN,
        DNS1123_SUBDOMAIN_MAX,
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
        "and must start and end with an alphanumeric character (e.g. 'example.com')",
    )


def is_dns1035_label(value: str) -> list[str]:
    return _matching(
        value,
        _DNS1035_LABEL,
        DNS1035_LABEL_MAX,
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
        "alphabetic character, and end with an alphanumeric character (e.g. 'my-name', or 'abc-123')",
    )


def is_qualified_name(value: str) -> list[str]:
    """Label keys, annotation keys, taint keys: `[prefix/]name`, prefix a DNS-1123 subdomain."""
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
        errors: list[str] = []
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return ["prefix part must be non-empty"]
        errors = [f"prefix part {e}" for e in is_dns1123_subdomain(prefix)]
    else:
        return [
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character (e.g. 'MyName', or 'my.name', or '123-abc'), with an optional "
            "DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > QUALIFIED_NAME_MAX:
        errors.append(f"name part {_too_long(QUALIFIED_NAME_MAX)}")
    if name and not re.fullmatch(_QUALIFIED_NAME, name):
        errors.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
            "an alphanumeric character (e.g. 'MyName', or 'my.name', or '123-abc')"
        )
    return errors


def is_valid_label_value(value: str) -> list[str]:
    return _matching(
        value,
        _LABEL_VALUE,
        LABEL_VALUE_MAX,
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
        "and must start and end with an alphanumeric character (e.g. 'MyValue', or 'my_value', or '12345')",
    )


def is_config_map_key(value: str) -> list[str]:
    """Keys of Secret and ConfigMap data."""
    errors = _matching(
        value,
        _CONFIG_MAP_KEY,
        CONFIG_MAP_KEY_MAX,
        "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name')",
    )
    if value in (".", ".."):
        errors.append(f"must not be '{value}'")
    elif value.startswith(".."):
        errors.append("must not start with '..'")
    return errors


# --- quantities (apimachinery resource/quantity.go) ------------------------------------

# <signedNumber><suffix>; suffix: binarySI | decimalSI (incl. n, u) | e/E<signedNumber>.
_QUANTITY = re.compile(
    r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)"
    r"(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?"
)


def parse_quantity(value: Any) -> Decimal:
    """A Kubernetes quantity ("100Gi", "1500m", "8", 8, 0.5, "1e3") as a Decimal; ValueError otherwise.

    Numbers (a bare YAML `cpu: 8`) are taken as the API server takes them in JSON.
    """
    if isinstance(value, bool):
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    if isinstance(value, (int, float)):
        value = str(value)
    if not isinstance(value, str) or not _QUANTITY.fullmatch(value):
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    return _client_parse_quantity(value)


# --- source ranges (ipaddress) -------------------------------------------------------------

Network = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]
_IPV4_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")
_EVERYTHING = {4: ipaddress.IPv4Network("0.0.0.0/0"), 6: ipaddress.IPv6Network("::/0")}


def parse_cidr(text: str) -> Network:
    """A CIDR as Kubernetes' ParseCIDR takes it (host bits allowed: 1.2.3.4/0 is 0.0.0.0/0)."""
    if not isinstance(text, str) or "/" not in text or "%" in text or text.strip() != text:
        raise ValueError(f"not a CIDR: {text!r}")
    return ipaddress.ip_network(text, strict=False)


def parse_ip(text: str) -> Union[ipaddress.IPv4Address, ipaddress.IPv6Address]:
    if not isinstance(text, str) or "%" in text or text.strip() != text:
        raise ValueError(f"not an IP address: {text!r}")
    return ipaddress.ip_address(text)


def _as_ipv4(network: Network) -> Network:
    """::ffff:a.b.c.d/n reaches the same hosts as a.b.c.d/(n-96)."""
    if isinstance(network, ipaddress.IPv6Network) and network.subnet_of(_IPV4_MAPPED):
        return ipaddress.IPv4Network((int(network.network_address) & 0xFFFFFFFF, network.prefixlen - 96))
    return network


def open_families(ranges: Iterable[str]) -> list[str]:
    """The address families (`IPv4`, `IPv6`) that `ranges` together cover entirely.

    Judged numerically: 1.2.3.4/0, 0:0:0:0:0:0:0:0/0 and 0.0.0.0/1 + 128.0.0.0/1
    are all the whole internet. Unparsable entries are ignored here.
    """
    by_family: dict[int, list[Network]] = {4: [], 6: []}
    for text in ranges:
        try:
            network = _as_ipv4(parse_cidr(str(text).strip()))
        except ValueError:
            continue
        by_family[network.version].append(network)
    return [
        f"IPv{version}"
        for version, networks in by_family.items()
        if networks and list(ipaddress.collapse_addresses(networks)) == [_EVERYTHING[version]]  # type: ignore[type-var]
    ]


# --- private load balancers ------------------------------------------------------------------

# The one list of annotations that make a cloud load balancer internal, with the
# value that does so, for the clouds the stacks run on.
PRIVATE_LB_ANNOTATIONS = {
    "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-address-type": "intranet",
    "service.beta.kubernetes.io/openstack-internal-load-balancer": "true",
    "networking.gke.io/load-balancer-type": "Internal",
    "cloud.google.com/load-balancer-type": "Internal",
    "service.beta.kubernetes.io/azure-load-balancer-internal": "true",
    "service.beta.kubernetes.io/aws-load-balancer-scheme": "internal",
    "service.beta.kubernetes.io/aws-load-balancer-internal": "true",
}


def private_lb_annotation(annotations: Any, known: Optional[dict[str, str]] = None) -> Optional[str]:
    """The annotation key that makes the load balancer internal, or None.

    Only a known key with its private value counts (case-insensitively):
    `address-type: internet` is public.
    """
    known = PRIVATE_LB_ANNOTATIONS if known is None else known
    if not hasattr(annotations, "items"):
        return None
    for key, value in annotations.items():
        expected = known.get(key)
        if expected is not None and str(value).strip().lower() == str(expected).strip().lower():
            return key
    return None


# --- versions ----------------------------------------------------------------------------------

# A SemVer 2.0.0 version (semver.org's regex), optionally with a leading v:
# what an exact Helm chart pin looks like. Ranges, `latest` and "" are not pins.
EXACT_VERSION = re.compile(
    r"v?(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
    r"(-((0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(\+([0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*))?"
)


def is_exact_version(version: str) -> bool:
    return isinstance(version, str) and EXACT_VERSION.fullmatch(version) is not None


# --- image references (distribution/reference) ------------------------------------------------

_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
_REPOSITORY = rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
IMAGE_REFERENCE = re.compile(rf"(?P<repository>{_REPOSITORY})(?::(?P<tag>{TAG}))?(?:@(?P<digest>{_DIGEST}))?")
REPOSITORY_MAX = 255


def image_reference_errors(reference: str, *, pinned: bool = True) -> list[str]:
    """Why `reference` is not a usable image reference (empty when it is one).

    pinned: it must name a tag other than `latest`, or a digest.
    """
    match = IMAGE_REFERENCE.fullmatch(reference) if isinstance(reference, str) else None
    if match is None:
        return ["must be an image reference such as registry.example.com/team/image:1.2.3 (lowercase repository path)"]
    if len(match.group("repository")) > REPOSITORY_MAX:
        return [f"repository name must be no more than {REPOSITORY_MAX} characters"]
    if pinned and not match.group("digest") and match.group("tag") in (None, "latest"):
        return ["must name a tag other than 'latest' (or a @sha256 digest) so every node runs the same image"]
    return []


def image_repository_errors(repository: str) -> list[str]:
    """An image name without tag or digest, e.g. a registry prefix or `<repo>/<image>`."""
    match = IMAGE_REFERENCE.fullmatch(repository) if isinstance(repository, str) else None
    if match is None or match.group("tag") or match.group("digest"):
        return ["must be an image repository without tag or digest, such as registry.example.com/team/image"]
    return []

"""Kubernetes' own rules for names, quantities, source ranges and images: ONE
implementation, imported as `slurm_rules.kube_rules` by the stack config
(`components.config`) and by the policy pack alike (the pack still runs from
policies/ alone).

* Names mirror k8s.io/apimachinery/pkg/util/validation/validation.go
  (IsDNS1123Label, IsDNS1123Subdomain, IsDNS1035Label, IsQualifiedName,
  IsValidLabelValue, IsConfigMapKey): same patterns, same length limits, and
  the same error wording. No Python library exposes these functions.
* Quantities: the grammar of k8s.io/apimachinery/pkg/api/resource/quantity.go
  (`ParseQuantity`), whose arithmetic is done by the Kubernetes Python
  client's `kubernetes.utils.parse_quantity` (on its own it also takes
  "1K", "nan" or " 1", which the API server refuses); and the canonical form
  Go's `Quantity.String()` writes back (`CanonicalizeBytes`), which the
  client's `format_quantity` leaves to its caller to choose.
* Source ranges: `ipaddress`, judged by what they cover, never by spelling.
* Image references: the grammar of github.com/distribution/reference
  (regexp.go), which the kubelet and container runtimes parse.
* ConfigMap and Secret size: what ValidateConfigMap and ValidateSecret of
  k8s.io/kubernetes pkg/apis/core/validation/validation.go sum against
  core.MaxSecretSize.

Patterns are matched with `re.fullmatch` on ASCII classes: Python's `$`
accepts a trailing newline and `\\d`/`\\w` accept any Unicode digit or letter,
neither of which Go's regexp does.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any, Optional, Union

from kubernetes.utils.quantity import parse_quantity as _client_parse_quantity

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


# --- ConfigMap and Secret size (k8s.io/kubernetes pkg/apis/core/validation/validation.go) ----------

# core.MaxSecretSize (pkg/apis/core/types.go), 1 MiB: ValidateConfigMap refuses a ConfigMap whose `data` and
# `binaryData` values together are longer, ValidateSecret a Secret whose `data` values are. Keys are not counted.
MAX_DATA_SIZE = 1024 * 1024


def decoded_size(value: Any) -> int:
    """Bytes a base64 value (a []byte field in JSON) decodes to; where it is not base64 (which the API server
    refuses anyway) its own length, so a large value is never measured as nothing."""
    text = str(value)
    try:
        return len(base64.b64decode(text, validate=True))
    except binascii.Error:
        return len(text.encode())


def config_map_data_sizes(data: Mapping[str, Any], binary_data: Mapping[str, Any]) -> dict[str, int]:
    """`data.<key>` / `binaryData.<key>` -> the bytes ValidateConfigMap counts: a string's UTF-8 bytes, binaryData decoded."""
    return {
        **{f"data.{key}": len(str(value).encode()) for key, value in data.items()},
        **{f"binaryData.{key}": decoded_size(value) for key, value in binary_data.items()},
    }


def secret_data_sizes(data: Mapping[str, Any], string_data: Mapping[str, Any]) -> dict[str, int]:
    """`data.<key>` / `stringData.<key>` -> the bytes ValidateSecret counts: `data` decoded, after the v1 conversion
    (pkg/apis/core/v1/conversion.go, Convert_v1_Secret_To_core_Secret) wrote each `stringData` entry over `data`'s."""
    merged = {key: (f"data.{key}", decoded_size(value)) for key, value in data.items()}
    merged.update({key: (f"stringData.{key}", len(str(value).encode())) for key, value in string_data.items()})
    return dict(merged.values())


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


_BINARY_SUFFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL_SUFFIXES = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}


def canonical_quantity(value: Decimal, binary: bool = False) -> str:
    """`value` as Go's `Quantity.String()` writes it (quantity.go `CanonicalizeBytes`): what a controller
    that decodes a quantity and writes it back stores, so a manifest in this form shows no diff against
    the stored object. `binary` is the BinarySI format (a quantity written in Ki, Mi, ...): an integer
    of at least 1024 takes the largest power of 1024 that divides it ("1280000Mi" is "1250Gi"), anything
    else falls back to decimal SI. Decimal SI takes the largest power of 1000 that keeps the number whole
    ("112000m" is "112"), down to nano, rounding up below it as ParseQuantity does."""
    if not value.is_finite():
        raise ValueError(f"not a Kubernetes quantity: {value}")
    if binary and value == value.to_integral_value() and abs(value) >= 1024:
        number, exponent = int(value), 0
        while number % 1024 == 0 and exponent < len(_BINARY_SUFFIXES) - 1:
            number, exponent = number // 1024, exponent + 1
        return f"{number}{_BINARY_SUFFIXES[exponent]}"
    nanos = (value * 10**9).to_integral_value(rounding="ROUND_CEILING" if value > 0 else "ROUND_FLOOR")
    number, exponent = int(nanos), -9
    while number and number % 1000 == 0 and exponent < 18:
        number, exponent = number // 1000, exponent + 3
    return f"{number}{_DECIMAL_SUFFIXES[exponent if number else 0]}"


def quantity_suffix(value: Any) -> str:
    """The unit a Kubernetes quantity is written with: "Gi" of "100Gi", "m" of "1500m", "e3" of "1e3", "" of "8"."""
    parse_quantity(value)
    match = _QUANTITY.fullmatch(str(value))
    return (match.group(3) if match else None) or ""


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


def _networks_by_family(ranges: Iterable[str]) -> dict[int, list[Network]]:
    """The parsable CIDR blocks of `ranges` by IP version (IPv4-mapped IPv6 counted as IPv4); the rest are ignored."""
    by_family: dict[int, list[Network]] = {4: [], 6: []}
    for text in ranges:
        try:
            network = _as_ipv4(parse_cidr(str(text).strip()))
        except ValueError:
            continue
        by_family[network.version].append(network)
    return by_family


def open_families(ranges: Iterable[str]) -> list[str]:
    """The address families (`IPv4`, `IPv6`) that `ranges` together cover entirely.

    Judged numerically: 1.2.3.4/0, 0:0:0:0:0:0:0:0/0 and 0.0.0.0/1 + 128.0.0.0/1
    are all the whole internet. Unparsable entries are ignored here.
    """
    by_family = _networks_by_family(ranges)
    return [
        f"IPv{version}"
        for version, networks in by_family.items()
        if networks and list(ipaddress.collapse_addresses(networks)) == [_EVERYTHING[version]]  # type: ignore[type-var]
    ]


# A source range may cover at most this many public addresses (all ranges of a
# Service together): an IPv4 /8 or an IPv6 /32, a large organisation's whole
# allocation. More is "the internet minus a bit" (0.0.0.0/1, 2000::/3), not a
# restriction. Private, reserved and documentation blocks do not count.
MAX_PUBLIC_ADDRESSES = {4: 2**24, 6: 2**96}
MAX_PUBLIC_PREFIX = {4: "/8", 6: "/32"}
# Where public unicast lives, and the blocks inside it that are not public
# (each pair disjoint, so their overlaps can simply be subtracted).
_PUBLIC_BLOCKS: dict[int, list[Network]] = {4: [ipaddress.IPv4Network("0.0.0.0/0")], 6: [ipaddress.IPv6Network("2000::/3")]}
_NON_PUBLIC_BLOCKS: dict[int, list[Network]] = {
    4: [
        ipaddress.ip_network(block)
        for block in (
            "0.0.0.0/8",
            "10.0.0.0/8",
            "100.64.0.0/10",
            "127.0.0.0/8",
            "169.254.0.0/16",
            "172.16.0.0/12",
            "192.0.0.0/24",
            "192.0.2.0/24",
            "192.168.0.0/16",
            "198.18.0.0/15",
            "198.51.100.0/24",
            "203.0.113.0/24",
            "224.0.0.0/3",
        )
    ],
    6: [ipaddress.IPv6Network("2001:db8::/32")],
}


def _overlap(a: Network, b: Network) -> int:
    """Addresses two CIDR blocks share (one holds the other, or none)."""
    if a.version != b.version:
        return 0
    if a.subnet_of(b):  # type: ignore[arg-type]
        return a.num_addresses
    return b.num_addresses if b.subnet_of(a) else 0  # type: ignore[arg-type]


def public_addresses(ranges: Iterable[str]) -> dict[int, int]:
    """Public addresses (by IP version) the ranges reach together; unparsable entries are ignored."""
    by_family = _networks_by_family(ranges)
    counts: dict[int, int] = {}
    for version, networks in by_family.items():
        union: list[Network] = list(ipaddress.collapse_addresses(networks))  # type: ignore[type-var]
        public: list[Network] = list(_PUBLIC_BLOCKS[version])
        counts[version] = sum(sum(_overlap(n, p) for p in public) - sum(_overlap(n, q) for q in _NON_PUBLIC_BLOCKS[version]) for n in union)
    return counts


def broad_families(ranges: Iterable[str]) -> list[str]:
    """The address families in which `ranges` together reach more public addresses than MAX_PUBLIC_ADDRESSES."""
    counts = public_addresses(ranges)
    return [f"IPv{v}" for v in (4, 6) if counts[v] > MAX_PUBLIC_ADDRESSES[v]]


def broad_range_message(ranges: Iterable[str]) -> str:
    families = broad_families(ranges)
    limits = " / ".join(f"a {MAX_PUBLIC_PREFIX[int(f[-1])]} ({f})" for f in families)
    return f"together reach more public addresses than {limits}, nearly the whole internet"


# --- private load balancers ------------------------------------------------------------------

# Per cloud, the annotations that make its load balancer internal, with the value
# that does so. A cloud's controller reads only its own: another cloud's key, or
# one of its own saying public, is a mistake, not a restriction.
PRIVATE_LB_ANNOTATIONS: dict[str, dict[str, str]] = {
    # FPT Cloud's FKE runs the OpenStack cloud controller (Octavia).
    "fpt": {"service.beta.kubernetes.io/openstack-internal-load-balancer": "true"},
    "alibaba": {"service.beta.kubernetes.io/alibaba-cloud-loadbalancer-address-type": "intranet"},
    "aws": {
        "service.beta.kubernetes.io/aws-load-balancer-scheme": "internal",
        "service.beta.kubernetes.io/aws-load-balancer-internal": "true",
    },
    "gcp": {"networking.gke.io/load-balancer-type": "Internal", "cloud.google.com/load-balancer-type": "Internal"},
    "azure": {"service.beta.kubernetes.io/azure-load-balancer-internal": "true"},
}
CLOUDS = tuple(PRIVATE_LB_ANNOTATIONS)
# Per cloud, the annotation (and value) that makes its load balancer send traffic
# straight to pod IPs: only then may a Service drop its node ports
# (spec.allocateLoadBalancerNodePorts: false). Octavia, GCP and Azure balance onto nodes.
POD_BACKEND_ANNOTATIONS: dict[str, dict[str, str]] = {
    "alibaba": {"service.beta.kubernetes.io/backend-type": "eni"},
    "aws": {"service.beta.kubernetes.io/aws-load-balancer-nlb-target-type": "ip"},
}


def _same(value: Any, expected: str) -> bool:
    return str(value).strip().lower() == expected.strip().lower()


def lb_annotation_problems(annotations: Any, cloud: str) -> list[str]:
    """What is wrong with a load balancer's exposure annotations on `cloud`: another
    cloud's private-LB key, or keys of its own that disagree (one private, one public)."""
    if not hasattr(annotations, "items"):
        return []
    own = PRIVATE_LB_ANNOTATIONS[cloud]
    problems = []
    for key in sorted(annotations):
        others = [c for c, known in PRIVATE_LB_ANNOTATIONS.items() if c != cloud and key in known and key not in own]
        if others:
            problems.append(
                f"{key} is an annotation of {others[0]}; this stack's cloud is {cloud}, whose load balancers ignore it "
                f"(its private-LB annotation: {private_lb_example(cloud)})"
            )
    said = {key: _same(value, own[key]) for key, value in annotations.items() if key in own}
    if len(set(said.values())) > 1:
        problems.append(
            "conflicting annotations: " + ", ".join(f"{k}: {annotations[k]!r} ({'private' if p else 'public'})" for k, p in sorted(said.items()))
        )
    return problems


def private_lb_annotation(annotations: Any, cloud: str) -> Optional[str]:
    """The annotation that makes the load balancer internal on `cloud`, or None.

    Only the cloud's own key with its private value counts (case-insensitively,
    `address-type: internet` is public), and only when no annotation contradicts it.
    """
    if not hasattr(annotations, "items") or lb_annotation_problems(annotations, cloud):
        return None
    for key, value in annotations.items():
        expected = PRIVATE_LB_ANNOTATIONS[cloud].get(key)
        if expected is not None and _same(value, expected):
            return key
    return None


def private_lb_example(cloud: str) -> str:
    """`key: "value"` of the cloud's (first) private-LB annotation, for messages."""
    key, value = next(iter(PRIVATE_LB_ANNOTATIONS[cloud].items()))
    return f'{key}: "{value}"'


def pod_backends(annotations: Any, cloud: str) -> bool:
    """The load balancer sends traffic straight to pods, so the Service needs no node ports."""
    wanted = POD_BACKEND_ANNOTATIONS.get(cloud, {})
    return hasattr(annotations, "items") and any(k in wanted and _same(v, wanted[k]) for k, v in annotations.items())


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

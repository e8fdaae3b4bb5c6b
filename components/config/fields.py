"""Field types and checks: the rules Kubernetes applies to names, quantities, CIDRs (policies/slurm_rules/kube_rules.py), the base Model, and what every concern shares (chart settings, pod resources, a problem at a key path)."""

from __future__ import annotations

import difflib
import json
import posixpath
import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Any, Optional
from urllib.parse import urlparse

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_ssh_public_key
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError, core_schema
from slurm_rules import kube_rules, slurm_release

from ..names import LOGIN_SERVICE_SUFFIXES

PROJECT = "slurm-platform"

# ---------------------------------------------------------------------------
# Scalar types with the rules Kubernetes applies to them (policies/slurm_rules/kube_rules.py,
# shared with the policy pack).


def quantity_value(quantity: Any) -> Decimal:
    """A Kubernetes resource quantity ("100Gi", "1500m", "8", 8) as a number."""
    return kube_rules.parse_quantity(quantity)


def _rule(check: Callable[[str], list[str]]) -> AfterValidator:
    def validate(value: str) -> str:
        errors = check(value)
        if errors:
            raise ValueError("; ".join(errors))
        return value

    return AfterValidator(validate)


def _number_as_text(value: Any) -> Any:
    # A bare YAML number (`cpu: 8`) is a quantity, as the API server takes it; `true` is not.
    return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def _check_cidr(value: str) -> str:
    try:
        kube_rules.parse_cidr(value)
    except ValueError:
        raise ValueError("must be a CIDR block such as 203.0.113.0/24 or 2001:db8::/48") from None
    return value


def _check_ip(value: str) -> str:
    try:
        kube_rules.parse_ip(value)
    except ValueError:
        raise ValueError("must be an IPv4 or IPv6 address such as 203.0.113.7 (not a hostname)") from None
    return value


def _check_host(value: str) -> str:
    """A server address: an IP, or a DNS name (RFC 1123 subdomain)."""
    try:
        kube_rules.parse_ip(value)
        return value
    except ValueError:
        pass
    if kube_rules.is_dns1123_subdomain(value.lower()):
        raise ValueError("must be an IP address or a DNS name such as nfs.example.internal")
    return value


def _check_absolute_path(value: str) -> str:
    if not value.startswith("/") or not value.isprintable():
        raise ValueError("must be an absolute path such as /export/slurm (printable characters only)")
    return value


def _check_exact_version(value: str) -> str:
    if not kube_rules.is_exact_version(value):
        raise ValueError("must be an exact chart version such as 1.2.3 (not latest, empty or a range like ^1.2 or 1.x)")
    return value


def _leading_v(required: bool) -> AfterValidator:
    def check(value: str) -> str:
        if value.startswith("v") != required:
            raise ValueError(
                "this chart's versions start with v (e.g. v1.2.3)" if required else "this chart's versions have no leading v (e.g. 1.2.3)"
            )
        return value

    return AfterValidator(check)


def _check_chart_repository(value: str) -> str:
    url = urlparse(value)
    # urlparse drops tab, CR and newline before parsing, so control characters are refused here.
    if value.isprintable() and url.scheme in ("http", "https", "oci") and url.netloc and value.strip() == value:
        return value
    if value.isprintable() and not url.scheme and value.startswith(("/", "./", "../")):
        return value
    raise ValueError("must be a Helm repository URL (https://...), an OCI prefix (oci://registry/path) or a local directory (/... or ./...)")


def _check_image_repository_path(value: str) -> str:
    errors = kube_rules.image_repository_errors(value)
    if errors:
        raise ValueError(errors[0])
    if "/" not in value:
        raise ValueError("must be <registry or organisation>/<image>, e.g. ghcr.io/mellanox/k8s-rdma-shared-dev-plugin")
    return value


def _check_tag(value: str) -> str:
    if not re.fullmatch(kube_rules.TAG, value):
        raise ValueError("must be an image tag: letters, digits, '_', '.' or '-', at most 128 characters, not starting with '.' or '-'")
    return value


def _check_slurm_release(value: str) -> str:
    if reason := slurm_release.unknown_release(slurm_release.SlurmRelease.parse(value)):
        raise ValueError(reason)
    return value


def _check_interface_name(value: str) -> str:
    # Linux IFNAMSIZ: at most 15 bytes, no '/', no whitespace.
    if not re.fullmatch(r"[^\s/:]{1,15}", value) or not (value.isascii() and value.isprintable()):
        raise ValueError("must be a network interface name such as ibs1 (at most 15 characters, no '/' or spaces)")
    return value


def _check_mount_path(value: str) -> str:
    _check_absolute_path(value)
    path = posixpath.normpath(value)
    path = "/" + path.lstrip("/")  # normpath keeps a leading '//'
    if path == "/":
        raise ValueError("must not be / (it would hide the whole jail)")
    for system in SYSTEM_DIRECTORIES:
        if path == system or path.startswith(system + "/"):
            raise ValueError(f"must not be or lie under the system directory {system}")
    return path


# The five fields of a Kubernetes CronJob schedule: (lowest, highest, names).
_CRON_FIELDS = (
    (0, 59, ()),
    (0, 23, ()),
    (1, 31, ()),
    (1, 12, ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")),
    (0, 7, ("sun", "mon", "tue", "wed", "thu", "fri", "sat")),
)
_CRON_MACROS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")


def _cron_field_ok(text: str, lowest: int, highest: int, names: tuple[str, ...]) -> bool:
    for part in text.split(","):
        match = re.fullmatch(r"(\*|[0-9A-Za-z]+(?:-[0-9A-Za-z]+)?)(?:/([0-9]+))?", part)
        if not match or (match.group(2) is not None and int(match.group(2)) == 0):
            return False
        if match.group(1) == "*":
            continue
        for bound in match.group(1).split("-"):
            number = names.index(bound.lower()) + lowest if bound.lower() in names else (int(bound) if bound.isdigit() else None)
            if number is None or not lowest <= number <= highest:
                return False
    return True


def _check_cron(value: str) -> str:
    _check_line(value)
    fields = value.split()
    if value.strip() in _CRON_MACROS:
        return value
    if len(fields) != 5 or not all(_cron_field_ok(f, *rule) for f, rule in zip(fields, _CRON_FIELDS, strict=True)):
        raise ValueError("must be a cron schedule: minute hour day-of-month month day-of-week (e.g. '0 */3 * * *') or @hourly, @daily, ...")
    return value


def _check_gpu_product(value: str) -> str:
    # NVIDIA's feature discovery labels a node with the driver's GPU name, '-' for spaces: the name always has
    # capitals (NVIDIA, Tesla, GeForce, A100), and a label selector matches case and all.
    if value == value.lower():
        raise ValueError(
            "is the nvidia.com/gpu.product label NVIDIA's feature discovery puts on the nodes: the driver's GPU name with - for "
            "spaces, case and all (e.g. NVIDIA-H100-80GB-HBM3, Tesla-V100-SXM2-16GB); label values are case-sensitive, so an "
            "all-lower-case one matches no node: copy it from `kubectl get nodes -L nvidia.com/gpu.product`"
        )
    return value


def _check_rdma_resource_name(value: str) -> str:
    errors = kube_rules.is_qualified_name(f"rdma/{value}")
    if errors:
        raise ValueError(f"rdma/{value} must be an extended resource name: " + "; ".join(errors))
    return value


# Characters a shell takes literally (shlex.quote leaves such a word as it is). A path that lands in
# slurm.conf (one `Key=value` per word) or in an operator's init script needs nothing else.
_SHELL_SAFE = r"[A-Za-z0-9_@%+=:,./-]"


def _check_safe_path(value: str) -> str:
    if not re.fullmatch(rf"/{_SHELL_SAFE}*", value):
        raise ValueError(
            "must be an absolute path of letters, digits and _ @ % + = : , . / - only "
            "(no spaces, quotes, $ or control characters: it lands in slurm.conf or a shell script), e.g. /var/slurm"
        )
    return value


def _check_mount_option(value: str) -> str:
    # Node-side CSI drivers (Alibaba's NAS plugin among them) hand mount options to a shell.
    if not re.fullmatch(rf"{_SHELL_SAFE}+", value):
        raise ValueError("must be mount options such as nfsvers=4.1 or nolock,tcp (letters, digits and _ @ % + = : , . / - only)")
    return value


def _check_line(value: str) -> str:
    # str.isprintable() is False for newline, CR, tab, NUL and the Unicode line and paragraph separators.
    if not (value.isascii() and value.isprintable()):
        raise ValueError("must be one line of printable ASCII (no newline, CR, tab, NUL or Unicode line separator)")
    return value


HUMAN_TEXT_MAX = 256


def _human_text(value: str) -> str:
    # Text people read (a company's name, a person's): any script, one line. NFC, so that the same name typed with
    # combining accents (NFD, as some Vietnamese keyboards send it) is stored once. Each target encodes it
    # (components/ldap.py ldif_line, dn_value) or refuses what it cannot carry.
    value = unicodedata.normalize("NFC", value)
    if not value.strip():
        raise ValueError("must not be empty; it is text people read, e.g. Công ty Cổ phần FPT Smart Cloud, Inc. or 阿里云计算有限公司")
    if not value.isprintable():
        raise ValueError(
            "must be one line of printable text in any language (no newline, tab, control, invisible or Unicode separator "
            "characters other than the space)"
        )
    if len(value) > HUMAN_TEXT_MAX:
        raise ValueError(f"must be at most {HUMAN_TEXT_MAX} characters")
    return value


# What sshd should accept in 2026 (OpenSSH's own defaults, NIST SP 800-57's 128-bit level): ed25519, ECDSA on the
# NIST curves, and RSA of at least 3072 bits. DSA is gone from OpenSSH 10; FIDO (sk-) keys need the user's token
# at every login, which a batch cluster's scp and rsync cannot ask for.
MIN_RSA_BITS = 3072
ACCEPTED_KEY_TYPES: dict[str, type] = {
    "ssh-ed25519": ed25519.Ed25519PublicKey,
    **{f"ecdsa-sha2-nistp{bits}": ec.EllipticCurvePublicKey for bits in (256, 384, 521)},
    "ssh-rsa": rsa.RSAPublicKey,
}
PUBLIC_KEY_FORM = (
    "one OpenSSH public key line: ssh-ed25519 AAAA... [comment], ecdsa-sha2-nistp256|384|521 AAAA..., or ssh-rsa AAAA... of at least 3072 bits"
)


def _check_public_key(value: str) -> str:
    """An OpenSSH public key line, parsed by the `cryptography` library (the type, the base64 and the key inside)."""
    if not (value.isascii() and value.isprintable()):
        raise ValueError(f"must be {PUBLIC_KEY_FORM}; this is not one line of printable ASCII")
    parts = value.split(None, 2)
    if len(parts) < 2:
        raise ValueError(f"must be {PUBLIC_KEY_FORM}; this has no base64 key after the type")
    key_class = ACCEPTED_KEY_TYPES.get(parts[0])
    if key_class is None:
        raise ValueError(f"must be {PUBLIC_KEY_FORM}; {parts[0]!r} is not an accepted key type")
    try:
        key = load_ssh_public_key(" ".join(parts[:2]).encode())
    except (UnsupportedAlgorithm, ValueError):
        raise ValueError(f"must be {PUBLIC_KEY_FORM}; the base64 key is damaged") from None
    if not isinstance(key, key_class):
        raise ValueError(f"must be {PUBLIC_KEY_FORM}; the key inside is not a {parts[0]} key")
    if isinstance(key, rsa.RSAPublicKey) and key.key_size < MIN_RSA_BITS:
        raise ValueError(f"must be {PUBLIC_KEY_FORM}; this RSA key has {key.key_size} bits (or use ssh-ed25519)")
    return value


PublicKey = Annotated[str, AfterValidator(_check_public_key)]


# soperator and this program name Services <cluster>-login-svc and <cluster>-login-ssh:
# DNS-1035 labels, so the cluster name leaves room for the longest suffix.
DERIVED_SERVICE_SUFFIXES = LOGIN_SERVICE_SUFFIXES
CLUSTER_NAME_MAX = kube_rules.DNS1035_LABEL_MAX - max(map(len, DERIVED_SERVICE_SUFFIXES))
# Volume source names soperator's SlurmCluster already uses for its own volumes.
RESERVED_VOLUME_NAMES = ("jail", "controller-spool")
# Mounting a shared volume over these would break or hijack the jail's OS.
SYSTEM_DIRECTORIES = (
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/proc",
    "/root",
    "/run",
    "/sbin",
    "/sys",
    "/tmp",
    "/usr",
    "/var/lib",
    "/var/log",
    "/var/run",
    "/var/spool",
)


# What an authenticator (OIDC, a cloud's IAM mapping) may call a group: printable, no spaces, as RBAC subjects are written.
KUBERNETES_GROUP = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@/+=-]{0,252}$")


def _check_kubernetes_group(value: str) -> str:
    if not KUBERNETES_GROUP.match(value):
        raise ValueError("must be a group name as the cluster's authenticator gives it: letters, digits and . _ : @ / + = -, at most 253")
    if value.startswith("system:"):
        # system:authenticated, system:serviceaccounts, ...: every user or every pod of the cluster, not a team.
        raise ValueError("system: groups are Kubernetes' own (system:authenticated is everyone); name the team's group")
    return value


def _check_cluster_name(value: str) -> str:
    errors = kube_rules.is_dns1035_label(value)
    if len(value) > CLUSTER_NAME_MAX:
        errors.append(
            f"must be at most {CLUSTER_NAME_MAX} characters so that Services "
            f"{' and '.join('<name>' + s for s in DERIVED_SERVICE_SUFFIXES)} stay within {kube_rules.DNS1035_LABEL_MAX}"
        )
    if errors:
        raise ValueError("; ".join(errors))
    return value


# What each pattern-constrained string allows, as a sentence: pydantic's own error prints the regular expression.
PATTERN_SENTENCES: dict[str, str] = {}


def matching(pattern: str, sentence: str) -> Any:
    """A string matching `pattern`, which errors (components/config/parse.py) and the reference describe as `sentence`
    ("must be <sentence>"), never as the regular expression."""
    PATTERN_SENTENCES[pattern] = sentence
    return Field(pattern=pattern, json_schema_extra={"x-allowed": sentence})


def allowed(text: str) -> Any:
    """What a checked string type accepts, for people: the configuration reference's "allowed" column
    (`make docs`) reads it from the JSON Schema, where the check itself cannot be written."""
    return Field(json_schema_extra={"x-allowed": text})


# Quantities: each key takes its own dimension (CPUs, or bytes with a unit), in the magnitudes of what it
# describes; the bounds only refuse what no real node, container or volume has (a typo's unit, a few KB of memory).
BINARY_UNITS = ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
DECIMAL_UNITS = ("k", "M", "G", "T", "P", "E")


@dataclass(frozen=True)
class Dimension:
    name: str
    units: tuple[str, ...]  # the suffixes it is written with ("": none)
    form: str  # how it is written, for people
    short: str  # the same, for the configuration reference


CPU = Dimension("cpu", ("", "m"), "a number of CPUs (8, 0.5) or of millicores (1500m)", "CPUs (8, 0.5) or millicores (1500m)")
BYTES = Dimension(
    "bytes",
    BINARY_UNITS + DECIMAL_UNITS,
    "an amount with a byte unit, Ki Mi Gi Ti Pi Ei (powers of 1024) or k M G T P E (powers of 1000), e.g. 64Gi",
    "bytes with a unit (64Gi, 500Mi, 1T)",
)
# How people write units that Kubernetes spells otherwise: 64gi, 100GB, 1.5 TiB, 112 cores.
_SPELLED_UNITS = {
    **{unit.lower(): unit for unit in BINARY_UNITS},
    **{unit.lower() + "b": unit for unit in BINARY_UNITS},
    **{unit.lower() + "b": unit for unit in DECIMAL_UNITS},
    **{unit.lower(): unit for unit in DECIMAL_UNITS if unit != "M"},  # m is milli
    **dict.fromkeys(("cpu", "cpus", "core", "cores", "vcpu", "vcpus"), ""),
}


@dataclass(frozen=True)
class Quantity:
    """A Kubernetes quantity of one dimension between `least` and `most`, the magnitudes `what` can have: the
    metadata of a quantity key's type (`Annotated[str, Quantity(...)]`). Refusals say what was likely meant."""

    dimension: Dimension
    least: str
    most: str
    what: str  # e.g. "a node's allocatable memory"

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_before_validator_function(
            _number_as_text, core_schema.no_info_after_validator_function(self._check, handler(source))
        )

    def __get_pydantic_json_schema__(self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler) -> dict[str, Any]:
        shown = handler(schema)
        shown["x-allowed"] = f"{self.dimension.short}, {self.least} to {self.most}"
        return shown

    def _check(self, value: str) -> str:
        problem, fix = self.problem(value)
        if problem:
            raise PydanticCustomError("quantity", problem + (f"; did you mean {fix}?" if fix else ""), {"fix": fix} if fix else None)
        return value

    def problem(self, value: str) -> tuple[str, Optional[str]]:
        """What is wrong with `value` ("" when nothing is) and the value likely meant, when one is clear."""
        try:
            suffix = kube_rules.quantity_suffix(value)
        except ValueError:
            return f"must be {self.dimension.form}", self._respelled(value)
        amount = quantity_value(value)
        number = value[: len(value) - len(suffix)]
        if suffix not in self.dimension.units:
            return self._wrong_unit(value, number, suffix, amount)
        if amount < quantity_value(self.least):
            return f"is less than {self.what} can be: at least {self.least}", None
        if amount > quantity_value(self.most):
            return f"is more than {self.what} can be: at most {self.most}", None
        return "", None

    def _wrong_unit(self, value: str, number: str, suffix: str, amount: Decimal) -> tuple[str, Optional[str]]:
        if self.dimension is CPU and suffix in BYTES.units:
            return f"is a CPU count, {CPU.form}; {suffix} is a byte unit", self._fitting(number)
        if self.dimension is BYTES and suffix == "":
            return f"has no unit, so it would be {plain_number(amount)} bytes; it must be {BYTES.form}", self._fitting(
                _with_unit(amount) if amount >= 2**20 else f"{number}Gi"
            )
        if self.dimension is BYTES and suffix == "m":
            return f"is {plain_number(amount)} bytes: m is milli (a thousandth), not mega; it must be {BYTES.form}", self._fitting(f"{number}Mi")
        return f"must be {self.dimension.form}, not {value}", None

    def _respelled(self, value: str) -> Optional[str]:
        match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", value)
        unit = _SPELLED_UNITS.get(match.group(2).lower()) if match else None
        return None if match is None or unit is None or unit not in self.dimension.units else self._fitting(match.group(1) + unit)

    def _fitting(self, candidate: Optional[str]) -> Optional[str]:
        return candidate if candidate is not None and not self.problem(candidate)[0] else None


def _with_unit(amount: Decimal) -> Optional[str]:
    """A byte count in the largest unit it is a whole number of (68719476736 -> 64Gi), or None."""
    for units, base in ((BINARY_UNITS, 1024), (DECIMAL_UNITS, 1000)):
        for power, unit in reversed(list(enumerate(units, start=1))):
            if amount % base**power == 0:
                return f"{plain_number(amount / base**power)}{unit}"
    return None


NodeCpu = Annotated[str, Quantity(CPU, "1", "4096", "a node's allocatable CPU")]
NodeMemory = Annotated[str, Quantity(BYTES, "1Gi", "64Ti", "a node's allocatable memory")]
CpuRequest = Annotated[str, Quantity(CPU, "1m", "4096", "a container's CPU request")]
MemoryRequest = Annotated[str, Quantity(BYTES, "1Mi", "64Ti", "a container's memory request")]
StorageRequest = Annotated[str, Quantity(BYTES, "1Mi", "100Pi", "a container's ephemeral storage request")]
SharedMemorySize = Annotated[str, Quantity(BYTES, "1Mi", "64Ti", "a node's /dev/shm")]
VolumeSize = Annotated[str, Quantity(BYTES, "1Mi", "100Pi", "a volume")]
MIN_JAIL_SIZE = "40Gi"
JailSize = Annotated[str, Quantity(BYTES, MIN_JAIL_SIZE, "100Pi", "a jail (a whole OS root filesystem)")]
DnsLabel = Annotated[str, _rule(kube_rules.is_dns1123_label), allowed("a DNS-1123 label: lowercase letters, digits and -, at most 63")]
DnsSubdomain = Annotated[
    str, _rule(kube_rules.is_dns1123_subdomain), allowed("a DNS-1123 subdomain: lowercase letters, digits, - and ., at most 253")
]
ClusterName = Annotated[str, AfterValidator(_check_cluster_name), allowed(f"a DNS-1035 label of at most {CLUSTER_NAME_MAX} characters")]
QualifiedName = Annotated[str, _rule(kube_rules.is_qualified_name), allowed("a Kubernetes qualified name: [DNS subdomain/]name, name at most 63")]
LabelValue = Annotated[str, _rule(kube_rules.is_valid_label_value), allowed("a Kubernetes label value: letters, digits, - _ ., at most 63")]
DataKey = Annotated[str, _rule(kube_rules.is_config_map_key), allowed("a ConfigMap or Secret key: letters, digits, - _ .")]
Cidr = Annotated[str, AfterValidator(_check_cidr), allowed("an IPv4 or IPv6 CIDR block (203.0.113.0/24, 2001:db8::/48)")]
IpAddress = Annotated[str, AfterValidator(_check_ip), allowed("an IPv4 or IPv6 address")]
Host = Annotated[str, AfterValidator(_check_host), allowed("an IP address or a DNS name")]
AbsolutePath = Annotated[str, AfterValidator(_check_absolute_path), allowed("an absolute path of printable characters")]
SafePath = Annotated[str, AfterValidator(_check_safe_path), allowed("an absolute path of letters, digits and _ @ % + = : , . / -")]
MountOption = Annotated[str, AfterValidator(_check_mount_option), allowed("mount options: letters, digits and _ @ % + = : , . / -")]
ConfLine = Annotated[str, AfterValidator(_check_line), allowed("one line of printable ASCII")]
# Text for people (names, descriptions): any language, one line; encoded where it lands.
HumanText = Annotated[str, AfterValidator(_human_text), allowed("one line of text in any language")]
MountPath = Annotated[
    str, AfterValidator(_check_mount_path), allowed("an absolute path, not / and not under a system directory (/etc, /usr, /proc, ...)")
]
ExactVersion = Annotated[str, AfterValidator(_check_exact_version), allowed("an exact version (no latest, empty or range)")]
ChartRepository = Annotated[
    str, AfterValidator(_check_chart_repository), allowed("a Helm repository URL (https://), an OCI prefix (oci://) or a local directory")
]
ImageReference = Annotated[str, _rule(kube_rules.image_reference_errors), allowed("an OCI image reference with a tag other than latest, or a digest")]
ImageRepository = Annotated[str, _rule(kube_rules.image_repository_errors), allowed("an OCI image repository, without a tag")]
ImageTag = Annotated[str, AfterValidator(_check_tag), allowed("an image tag: letters, digits, _ . -, at most 128")]
SlurmReleaseText = Annotated[
    str, AfterValidator(_check_slurm_release), allowed("a Slurm release the program knows, YY.MM or YY.MM.P (22.05 ... 26.05)")
]
GpuProduct = Annotated[LabelValue, AfterValidator(_check_gpu_product), allowed("the nodes' nvidia.com/gpu.product label value, case and all")]
# A Slurm GRES type as the renders write it (gpu:<type>:<n>): lower-case letters and digits.
GpuType = Annotated[str, matching(r"^[a-z0-9]{1,32}$", "a GRES type: 1 to 32 lower-case letters and digits, e.g. h100")]
InterfaceName = Annotated[str, AfterValidator(_check_interface_name), allowed("a network interface name: at most 15 characters, no / or spaces")]
KubernetesGroup = Annotated[str, AfterValidator(_check_kubernetes_group), allowed("a group as the authenticator names it, not a system: group")]
Port = Annotated[int, Field(ge=1, le=65535)]


class Model(BaseModel):
    """Base: camelCase keys in YAML, unknown keys rejected (typos are errors)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


NVIDIA_HELM_REPO = "https://helm.ngc.nvidia.com/nvidia"


def chart_namespace(default: str) -> Any:
    """A chart's `namespace` field: every chart describes it alike."""
    return Field(default, description="Namespace the chart is installed in (and its namespace declared, unless a portal installed it).")


def chart_repository(default: str) -> Any:
    """A chart's `repository` field with its default source: every chart describes it alike."""
    return Field(
        default,
        description="Where the chart comes from: a Helm repository URL, an OCI prefix or a local directory (mirrors, air-gapped sites).",
    )


class ChartConfig(Model):
    install: bool = Field(True, description="Declare the Helm release; false when the cloud portal already installed it.")
    namespace: DnsLabel
    version: ExactVersion = Field(..., description="Chart version, pinned exactly (no latest, no ranges).")
    repository: ChartRepository = Field(
        ..., description="Helm repo URL, OCI prefix (oci://...), or a local directory holding the chart (mirrors, tests)."
    )
    values: dict[str, Any] = Field(default_factory=dict, description="Extra Helm values merged over ours.")


class PodResources(Model):
    """A container's requests."""

    cpu: CpuRequest = Field(..., description="CPU request (1500m, 2).")
    memory: MemoryRequest = Field(..., description="Memory request (3Gi).")
    ephemeral_storage: StorageRequest = Field(..., description="Ephemeral storage request (20Gi).")


class WorkerResources(PodResources):
    gpu: int = Field(8, ge=0, description="GPUs per worker (nvidia.com/gpu).")
    rdma: Optional[int] = Field(None, ge=0, description="RDMA devices per worker; unset: 1 when a GPU pool has RDMA, else 0.")


def pod_resources(cpu: str, memory: str, ephemeral: str) -> PodResources:
    return PodResources(cpu=cpu, memory=memory, ephemeral_storage=ephemeral)


@dataclass(frozen=True)
class Problem:
    path: tuple[Any, ...]  # camelCase keys and list indices
    message: str
    value: Any = None
    fix: tuple[Any, ...] = ()  # values that, set at `path`, fix it (alternatives): shown as config lines


def escaped(text: str) -> str:
    """Printable ASCII as is; anything else (invisible, confusable, non-ASCII) as an escape."""
    return "".join(c if " " <= c <= "~" else json.dumps(c)[1:-1] for c in text)


def key_path(loc: tuple[Any, ...]) -> str:
    """A key path as written after `slurm-platform:` and in `pulumi config set --path`: a.b[0]["dotted.key"]."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part == "[key]":
            path += " (the key)"
        elif path:
            path += f".{escaped(str(part))}" if re.fullmatch(r"[A-Za-z0-9_-]+", str(part)) else f"[{json.dumps(str(part))}]"
        else:
            path = escaped(str(part))
    return path


def duplicates(values: list[Any]) -> Iterator[tuple[int, Any]]:
    """(index, value) of every repeat after the first occurrence."""
    seen: set[Any] = set()
    for index, value in enumerate(values):
        if value in seen:
            yield index, value
        seen.add(value)


def _folded(text: str) -> str:
    return re.sub(r"[\s_-]+", "", text.casefold())


def closest(value: str, allowed: list[str]) -> list[str]:
    """The allowed value `value` was meant to be: the same but for case and separators (alibaba-nas), the one it
    abbreviates or spells out (production), or a close spelling (alibab); none when it is not clear."""
    folded = {_folded(a): a for a in allowed}
    if _folded(value) in folded:
        return [folded[_folded(value)]]
    prefixed = [a for f, a in folded.items() if f and _folded(value) and (f.startswith(_folded(value)) or _folded(value).startswith(f))]
    if len(prefixed) == 1:
        return prefixed
    return difflib.get_close_matches(value, allowed, n=1, cutoff=0.6)


def gib_text(amount: Decimal) -> str:
    return f"{plain_number(amount / 2**30)}Gi"


def plain_number(amount: Decimal) -> str:
    return f"{amount.normalize():f}"

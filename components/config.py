"""Stack configuration: one pydantic model tree, the single source of truth.

Every key lives under the `slurm-platform:` namespace in `Pulumi.<stack>.yaml`
as a structured object (camelCase keys). Defaults follow FPT Cloud's
"Slurm on Managed GPU Cluster" guide (soperator / helm-slurm-cluster 1.14.10).

`load_config()` validates everything before a single resource is registered
and turns pydantic's errors into messages that name the config key path
(`slurm-platform:storage.jail.size`), the bad value and what is allowed.
"""

from __future__ import annotations

import difflib
import json
import posixpath
import re
import typing
import unicodedata
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Any, Literal, Optional
from urllib.parse import urlparse

import pulumi
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from policies import cell_fit, kube_rules

PROJECT = "slurm-platform"

# ---------------------------------------------------------------------------
# Scalar types with the rules Kubernetes applies to them (policies/kube_rules.py,
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


def _check_positive_quantity(value: str) -> str:
    try:
        amount = kube_rules.parse_quantity(value)
    except ValueError:
        raise ValueError("must be a Kubernetes quantity such as 100Gi, 1500m or 8") from None
    if amount <= 0:
        raise ValueError("must be greater than zero")
    return value


def _check_jail_size(value: str) -> str:
    if quantity_value(value) < quantity_value(MIN_JAIL_SIZE):
        raise ValueError(f"must be at least {MIN_JAIL_SIZE}: the jail holds a whole OS root filesystem")
    return value


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


def _check_ldif_value(value: str) -> str:
    # A plain LDIF value (RFC 2849 SAFE-STRING): one ASCII line, not starting with space, ':' or '<'.
    _check_line(value)
    if value[:1] in (" ", ":", "<") or value.endswith(" ") or any(c in value for c in ":,="):
        raise ValueError("must not contain ':', ',' or '=' nor start or end with a space (it is an LDIF value)")
    return value


def _check_public_key(value: str) -> str:
    if not re.fullmatch(r"(ssh-(ed25519|rsa|dss)|ecdsa-sha2-nistp[0-9]+|sk-[!-~]+) [A-Za-z0-9+/]+={0,2}( [ -~]*)?", value):
        raise ValueError("must be one OpenSSH public key line, e.g. ssh-ed25519 AAAA... user@host")
    return value


MIN_JAIL_SIZE = "40Gi"
# soperator and this program name Services <cluster>-login-svc and <cluster>-login-ssh:
# DNS-1035 labels, so the cluster name leaves room for the longest suffix.
DERIVED_SERVICE_SUFFIXES = ("-login-svc", "-login-ssh")
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


Quantity = Annotated[str, BeforeValidator(_number_as_text), AfterValidator(_check_positive_quantity)]
JailSize = Annotated[Quantity, AfterValidator(_check_jail_size)]
DnsLabel = Annotated[str, _rule(kube_rules.is_dns1123_label)]
DnsSubdomain = Annotated[str, _rule(kube_rules.is_dns1123_subdomain)]
ClusterName = Annotated[str, AfterValidator(_check_cluster_name)]
QualifiedName = Annotated[str, _rule(kube_rules.is_qualified_name)]
LabelValue = Annotated[str, _rule(kube_rules.is_valid_label_value)]
DataKey = Annotated[str, _rule(kube_rules.is_config_map_key)]
Cidr = Annotated[str, AfterValidator(_check_cidr)]
IpAddress = Annotated[str, AfterValidator(_check_ip)]
Host = Annotated[str, AfterValidator(_check_host)]
AbsolutePath = Annotated[str, AfterValidator(_check_absolute_path)]
SafePath = Annotated[str, AfterValidator(_check_safe_path)]
MountOption = Annotated[str, AfterValidator(_check_mount_option)]
ConfLine = Annotated[str, AfterValidator(_check_line)]
MountPath = Annotated[str, AfterValidator(_check_mount_path)]
ExactVersion = Annotated[str, AfterValidator(_check_exact_version)]
ChartRepository = Annotated[str, AfterValidator(_check_chart_repository)]
ImageReference = Annotated[str, _rule(kube_rules.image_reference_errors)]
ImageRepository = Annotated[str, _rule(kube_rules.image_repository_errors)]
ImageTag = Annotated[str, AfterValidator(_check_tag)]
InterfaceName = Annotated[str, AfterValidator(_check_interface_name)]
Port = Annotated[int, Field(ge=1, le=65535)]


class Model(BaseModel):
    """Base: camelCase keys in YAML, unknown keys rejected (typos are errors)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


# ---------------------------------------------------------------------------
# Cluster-wide identity


class ClusterConfig(Model):
    name: ClusterName = Field(
        "fpt-hpc",
        description="SlurmCluster name (Slurm's ClusterName; do not change after creation): a DNS-1035 label of at most "
        f"{CLUSTER_NAME_MAX} characters (room for the -login-svc / -login-ssh Services).",
    )
    namespace: DnsLabel = Field("fpt-hpc", description="Namespace for the Slurm cluster, its volumes, secrets and LDAP.")
    create_namespace: bool = Field(True, description="Declare the namespace; false when it already exists.")


class KubernetesConfig(Model):
    """How the program reaches Kubernetes: a kubeconfig context, or no cluster at all."""

    context: Optional[str] = Field(None, description="kubeconfig context to use; the ambient default when unset.")
    render_yaml_to_directory: Optional[str] = Field(None, description="Write manifests to this directory instead of talking to a cluster.")


# ---------------------------------------------------------------------------
# Node pools


class Taint(Model):
    key: QualifiedName = Field(..., description="Taint key: a qualified name such as nvidia.com/gpu.")
    value: Optional[LabelValue] = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"


CapacityType = Literal["on-demand", "spot", "reserved"]


class KarpenterConfig(Model):
    """A Karpenter `karpenter.sh/v1` NodePool provisioning this pool's nodes."""

    node_class_group: DnsSubdomain = Field("karpenter.k8s.aws", description="nodeClassRef.group")
    node_class_kind: str = Field("EC2NodeClass", pattern=r"^[A-Z][A-Za-z0-9]*$", description="nodeClassRef.kind")
    node_class_name: DnsSubdomain = Field("default", description="nodeClassRef.name")
    instance_types: list[LabelValue] = Field(default_factory=list, description="node.kubernetes.io/instance-type values.")
    capacity_types: list[CapacityType] = Field(default_factory=lambda: list[CapacityType](["on-demand"]))


class NodePoolConfig(Model):
    name: DnsLabel
    selector: dict[QualifiedName, LabelValue] = Field(
        ..., min_length=1, description="Node labels that select this pool, e.g. {worker.fptcloud/pool: h100}."
    )
    gpu_product: Optional[LabelValue] = Field(None, description="nvidia.com/gpu.product label value, e.g. NVIDIA-H100-80GB-HBM3.")
    gpus_per_node: int = Field(0, ge=0, le=16, description="GPUs per node; 0 makes this a no-gpu (system) pool.")
    cpu_per_node: Quantity = Field(..., description="Allocatable CPU per node.")
    memory_per_node: Quantity = Field(..., description="Allocatable memory per node.")
    node_count: int = Field(..., ge=0, description="Nodes in the pool (capacity used by policies).")
    rdma: bool = Field(False, description="Nodes have RDMA/InfiniBand NICs (enables the NicClusterPolicy).")
    topology_labels: list[QualifiedName] = Field(
        default_factory=list,
        description="Node labels of the pool's network topology, outermost first (e.g. a block, then a rack label); "
        "Kueue's Topology adds kubernetes.io/hostname below them.",
    )
    taints: list[Taint] = Field(default_factory=list, description="Taints the pool's nodes carry.")
    label_existing_nodes: list[DnsSubdomain] = Field(
        default_factory=list, description="Existing node names to label with `selector` (NodePatch, labels only)."
    )
    karpenter: Optional[KarpenterConfig] = Field(None, description="Provision the pool with a Karpenter NodePool.")
    slurm_workers: Optional[int] = Field(
        None,
        ge=0,
        description="Slurm workers on this GPU pool (soperator 4.x NodeSet, ACK worker group or Slinky NodeSet replicas); "
        "default: nodeCount. soperator 1.14.10 has one worker group: slurm.worker.size.",
    )

    @property
    def has_gpu(self) -> bool:
        return self.gpus_per_node > 0

    @property
    def worker_replicas(self) -> int:
        return self.node_count if self.slurm_workers is None else self.slurm_workers


def _default_pools() -> list[NodePoolConfig]:
    return [
        NodePoolConfig(
            name="gpu",
            selector={"worker.fptcloud/pool": "gpu"},
            gpu_product="NVIDIA-H100-80GB-HBM3",
            gpus_per_node=8,
            cpu_per_node="112",
            memory_per_node="1250Gi",
            node_count=8,
            rdma=True,
            taints=[Taint(key="nvidia.com/gpu", effect="NoSchedule")],
        ),
        NodePoolConfig(name="system", selector={"worker.fptcloud/pool": "system"}, cpu_per_node="16", memory_per_node="64Gi", node_count=3),
    ]


# ---------------------------------------------------------------------------
# Operators


NVIDIA_HELM_REPO = "https://helm.ngc.nvidia.com/nvidia"


class ChartConfig(Model):
    install: bool = Field(True, description="Declare the Helm release; false when the cloud portal already installed it.")
    namespace: DnsLabel
    version: ExactVersion = Field(..., description="Chart version, pinned exactly (no latest, no ranges).")
    repository: ChartRepository = Field(
        ..., description="Helm repo URL, OCI prefix (oci://...), or a local directory holding the chart (mirrors, tests)."
    )
    values: dict[str, Any] = Field(default_factory=dict, description="Extra Helm values merged over ours.")


class GpuOperatorConfig(ChartConfig):
    namespace: DnsLabel = "gpu-operator"
    version: Annotated[ExactVersion, _leading_v(True), Field(description="Chart version with a leading v.")] = "v24.9.2"
    repository: ChartRepository = NVIDIA_HELM_REPO
    driver_enabled: bool = Field(True, description="Install the NVIDIA driver (false when nodes ship one).")
    driver_version: Optional[ImageTag] = Field(None, description="Driver version; the chart's default when unset.")
    toolkit_enabled: bool = True
    device_plugin_enabled: bool = True
    dcgm_exporter_enabled: bool = True
    mig_strategy: Literal["none", "single", "mixed"] = "single"
    node_feature_discovery: bool = Field(True, description="Deploy NFD; only one NFD may run in the cluster.")


class NetworkOperatorConfig(ChartConfig):
    namespace: DnsLabel = "nvidia-network-operator"
    version: Annotated[ExactVersion, _leading_v(False), Field(description="Chart version without a leading v.")] = "24.10.1"
    repository: ChartRepository = NVIDIA_HELM_REPO
    node_feature_discovery: bool = Field(False, description="Deploy NFD; off because the GPU operator runs one.")
    rdma_shared_device_plugin_image: Annotated[str, AfterValidator(_check_image_repository_path)] = Field(
        "ghcr.io/mellanox/k8s-rdma-shared-dev-plugin",
        description="<registry>/<repository>/<image> without a tag (the tag is rdmaSharedDevicePluginVersion).",
    )
    rdma_shared_device_plugin_version: ImageTag = "v1.5.2"
    rdma_resource_name: Annotated[str, AfterValidator(_check_rdma_resource_name)] = Field(
        "rdma_shared_device_a", description="Resource exposed as rdma/<name>."
    )
    rdma_hca_max: int = Field(63, ge=1)
    rdma_if_names: list[InterfaceName] = Field(default_factory=list, description="NIC names for the RDMA selector (all Mellanox NICs when empty).")
    doca_driver_version: Optional[ImageTag] = Field(
        None, description="Deploy NVIDIA's DOCA/OFED driver container at this version (e.g. 24.10-0.7.0.0-0); unset: host MOFED."
    )


class SoperatorConfig(ChartConfig):
    namespace: DnsLabel = "soperator-system"
    version: Literal["1.14.10", "4.1.7"] = Field(
        "1.14.10",
        description="soperator release; the SlurmCluster shape follows it (1.14.10: workers in the CR; 4.1.7: one NodeSet per GPU pool).",
    )
    repository: ChartRepository = "oci://cr.eu-north1.nebius.cloud/soperator"


class MariadbOperatorConfig(ChartConfig):
    namespace: DnsLabel = "mariadb-operator"
    version: Annotated[ExactVersion, _leading_v(False)] = Field(
        "0.29.0", description="0.29.0 serves the k8s.mariadb.com/v1alpha1 API soperator 1.14.10 is built against."
    )
    repository: ChartRepository = Field(
        "https://helm.mariadb.com/mariadb-operator",
        description="Helm repo URL, OCI prefix (oci://ghcr.io/mariadb-operator/charts publishes 26.6.0 and later) or local directory.",
    )
    crds_chart: bool = Field(
        False, description="Install the separate mariadb-operator-crds chart first (charts 0.31+); 0.29 ships its CRDs in the main chart."
    )


class CertManagerConfig(ChartConfig):
    install: bool = Field(
        False,
        description="Installed on its own when the Slurm operator's chart has webhooks (soperator 4.x, Slinky) unless set "
        "to false here (it is already there); soperator 1.14.10 and ACK need none. Set true for your own Certificates.",
    )
    namespace: DnsLabel = "cert-manager"
    version: Annotated[ExactVersion, _leading_v(True)] = "v1.16.2"
    repository: ChartRepository = "https://charts.jetstack.io"


class AckSlurmOperatorConfig(ChartConfig):
    """Alibaba's ack-slurm-operator. Its chart is not public: the guide installs it from the ACK marketplace."""

    install: bool = Field(False, description="Declare the Helm release; the default false matches the guide (ACK marketplace).")
    namespace: DnsLabel = "ack-slurm-operator"
    version: str = Field("", description="Chart version (required with install: true).")
    repository: str = Field("", description="Where the chart is mirrored (required with install: true).")
    api_generation: Literal["2024-06", "2024-12"] = Field(
        "2024-12",
        description="SlurmCluster API the installed operator serves: 2024-06 (spec.headGroupSpec) or 2024-12 (spec.slurmctld, slurmdbd, slurmrestd).",
    )

    @model_validator(mode="after")
    def _chart_named_when_installed(self) -> AckSlurmOperatorConfig:
        if self.install and not (self.version and self.repository):
            raise ValueError("install: true needs version and repository (the chart is not published in a public repo)")
        return self


class SlinkyOperatorConfig(ChartConfig):
    """SchedMD's slurm-operator (Slinky) and its CRDs chart."""

    namespace: DnsLabel = "slinky"
    version: Literal["1.2.1"] = Field("1.2.1", description="slurm-operator release (API slinky.slurm.net/v1beta1).")
    repository: str = "oci://ghcr.io/slinkyproject/charts"


class KueueConfig(ChartConfig):
    """Kueue beside Slurm for Kubernetes-native GPU jobs: the tenants' kueueCells become ClusterQueue quotas."""

    enabled: bool = Field(
        False,
        description="Render Kueue's queues from the tenants: a ResourceFlavor and Topology per GPU pool, a ClusterQueue per "
        "tenant in one cohort, a LocalQueue in each tenant namespace, WorkloadPriorityClasses slurm-prod/test/oppo.",
    )
    install: bool = Field(True, description="With enabled: declare the Helm release; false when Kueue is already installed.")
    namespace: DnsLabel = "kueue-system"
    version: Annotated[ExactVersion, _leading_v(False)] = "0.19.2"
    repository: ChartRepository = "oci://registry.k8s.io/kueue/charts"


class OperatorsConfig(Model):
    gpu_operator: GpuOperatorConfig = GpuOperatorConfig()
    network_operator: NetworkOperatorConfig = NetworkOperatorConfig()
    soperator: SoperatorConfig = SoperatorConfig()
    mariadb_operator: MariadbOperatorConfig = MariadbOperatorConfig()
    cert_manager: CertManagerConfig = CertManagerConfig()
    ack_slurm_operator: AckSlurmOperatorConfig = AckSlurmOperatorConfig()
    slinky: SlinkyOperatorConfig = SlinkyOperatorConfig()
    kueue: KueueConfig = KueueConfig()


# ---------------------------------------------------------------------------
# Storage


class NfsServer(Model):
    server: Host = Field(..., description="NFS server address: an IP or a DNS name.")
    share: AbsolutePath = Field(..., description="Exported path.")
    mount_options: list[MountOption] = Field(default_factory=lambda: ["nfsvers=4.1", "hard"])


class AlibabaNas(Model):
    server: str = Field(
        ...,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*:/[A-Za-z0-9_@%+=:,./-]*$",
        description="NAS mount target and path, e.g. xxx.cn-hangzhou.nas.aliyuncs.com:/share",
    )
    volume_as: Literal["subpath", "filesystem"] = "subpath"
    mount_options: list[MountOption] = Field(default_factory=lambda: ["nolock,tcp,noresvport", "vers=3"])


class StorageClassConfig(Model):
    """The read-write-many class: an existing one by name, or one we declare."""

    kind: Literal["existing", "nfs", "alibabaNas"] = Field("existing", description="existing | nfs | alibabaNas")
    name: DnsSubdomain = Field("default", description="StorageClass name (FPT: default or xplat-nfs).")
    nfs: Optional[NfsServer] = None
    alibaba_nas: Optional[AlibabaNas] = None


class StaticNfsVolume(Model):
    """A pre-existing NFS export bound to the claim through a static PersistentVolume."""

    server: Host
    path: AbsolutePath
    mount_options: list[MountOption] = Field(default_factory=lambda: ["nfsvers=4.1", "hard"])


ADOPT_DESCRIPTION = (
    "The claim (and its static PV) already exists, e.g. made by hand from the FPT guide: import it into the stack "
    "as is (Pulumi `import`) instead of creating it; the declared spec must match the live object."
)


class JailConfig(Model):
    size: JailSize = Field("100Gi", description="Jail (shared root) size; at least 40Gi.")
    static_nfs: Optional[StaticNfsVolume] = Field(
        None, description="Bind jail-pvc to this NFS export (production: re-attachable from another cluster)."
    )
    adopt: bool = Field(False, description=ADOPT_DESCRIPTION)


class SpoolConfig(Model):
    size: Quantity = Field("10Gi", description="controller-spool-pvc size.")
    adopt: bool = Field(False, description=ADOPT_DESCRIPTION)


class SubmountConfig(Model):
    name: DnsLabel = Field(..., description="Volume source name; the claim is jail-submount-<name>-pvc.")
    mount_name: Optional[DnsLabel] = Field(None, description="jailSubMounts name; defaults to `name`.")
    mount_path: MountPath = Field(..., description="Same path on login and worker nodes (normalised; not / and not under a system directory).")
    size: Quantity = "100Gi"
    static_nfs: Optional[StaticNfsVolume] = None
    adopt: bool = Field(False, description=ADOPT_DESCRIPTION)

    @property
    def claim_name(self) -> str:
        return f"jail-submount-{self.name}-pvc"

    @property
    def effective_mount_name(self) -> str:
        return self.mount_name or self.name


class StorageConfig(Model):
    storage_class: StorageClassConfig = StorageClassConfig()
    jail: JailConfig = JailConfig()
    controller_spool: SpoolConfig = SpoolConfig()
    submounts: list[SubmountConfig] = Field(default_factory=list)


# ---------------------------------------------------------------------------
# LDAP


class LdapTls(Model):
    enabled: bool = False
    secret_name: Optional[DnsSubdomain] = Field(None, description="kubernetes.io/tls Secret with tls.crt, tls.key, ca.crt.")


class LdapConfig(Model):
    enabled: bool = True
    image: ImageReference = Field(
        "docker.io/bitnamilegacy/openldap:2.6.10",
        description="OpenLDAP server image (bitnami's env contract); mirror it into your registry for production.",
    )
    # Both end up in the seed LDIF and the client configs: one line, no LDIF or DN syntax.
    base_dn: str = Field("dc=example,dc=org", pattern=r"^(dc|o|ou)=[A-Za-z0-9][A-Za-z0-9 ._-]*(,(dc|o|ou)=[A-Za-z0-9][A-Za-z0-9 ._-]*)*$")
    organisation: Annotated[str, AfterValidator(_check_ldif_value)] = "Example Org"
    admin_username: str = Field("admin", pattern=r"^[a-z][a-z0-9_-]*$")
    storage_size: Quantity = "8Gi"
    storage_class_name: Optional[DnsSubdomain] = Field(None, description="RWO class for the LDAP data volume; cluster default when unset.")
    tls: LdapTls = LdapTls()
    php_ldap_admin: bool = Field(False, description="Deploy phpLDAPadmin (ClusterIP only).")
    php_ldap_admin_image: ImageReference = "docker.io/osixia/phpldapadmin:0.9.0"
    readonly_username: str = Field(
        "slurm-readonly",
        pattern=r"^[a-z][a-z0-9-]*$",
        description="Read-only service account sssd and nslcd bind with (cn=<name>,ou=services,<baseDn>).",
    )


# ---------------------------------------------------------------------------
# Slurm


class PodResources(Model):
    cpu: Quantity
    memory: Quantity
    ephemeral_storage: Quantity


class WorkerResources(PodResources):
    gpu: int = Field(8, ge=0)
    rdma: Optional[int] = Field(None, ge=0, description="RDMA devices per worker; unset: 1 when a GPU pool has RDMA, else 0.")


def _res(cpu: str, memory: str, ephemeral: str) -> PodResources:
    return PodResources(cpu=cpu, memory=memory, ephemeral_storage=ephemeral)


class ImagesConfig(Model):
    registry: ImageRepository = Field("cr.eu-north1.nebius.cloud/soperator", description="soperator image registry.")
    tag: Optional[ImageTag] = Field(
        None,
        description="Image tag shared by soperator's Slurm images; default: the release's own "
        "(1.14.10-jammy-slurm24.05.2 for 1.14.10, 4.1.7-slurm25.11.3 for 4.1.7).",
    )
    mariadb: ImageReference = "docker-registry1.mariadb.com/library/mariadb:11.4.3"


class ControllerConfig(Model):
    size: int = Field(1, ge=1, le=2)
    slurmctld: PodResources = _res("1000m", "3Gi", "20Gi")
    munge: PodResources = _res("1000m", "1Gi", "5Gi")


class WorkerConfig(Model):
    size: int = Field(8, ge=0, description="Worker count; workers are worker-[0..size-1].")
    cgroup_version: Literal["v1", "v2"] = "v2"
    slurmd: WorkerResources = WorkerResources(cpu="110000m", memory="1220Gi", ephemeral_storage="55Gi", gpu=8)
    munge: PodResources = _res("2000m", "4Gi", "5Gi")
    spool_storage_class_name: DnsSubdomain = Field("xplat-nfs", description="Class of each worker's spool volume (ReadWriteOnce).")
    spool_size: Quantity = "120Gi"
    shared_memory_size: Quantity = "64Gi"


class LoginConfig(Model):
    size: int = Field(2, ge=1)
    service_type: Literal["NodePort", "LoadBalancer"] = "NodePort"
    node_port: int = Field(30022, ge=30000, le=32767, description="sshdServiceNodePort (30000-32767).")
    load_balancer_ip: Annotated[Optional[IpAddress], BeforeValidator(lambda v: v or None)] = Field(
        None, description="sshdServiceLoadBalancerIP, with serviceType LoadBalancer only (unset: assigned by the cloud)."
    )
    ssh_address: Optional[Host] = Field(
        None,
        description="Host for sshCommand with a NodePort login (a node's address or a DNS name for the nodes); "
        "a LoadBalancer's address is read from the live Service.",
    )
    service_annotations: dict[QualifiedName, str] = Field(default_factory=dict, description="sshdServiceAnnotations (e.g. a private-LB one).")
    allowed_source_ranges: list[Cidr] = Field(
        default_factory=list,
        description="CIDRs allowed to reach SSH: declares our own LoadBalancer Service with loadBalancerSourceRanges.",
    )
    allow_broad_source_ranges: bool = Field(
        False,
        description="Accept allowedSourceRanges that together reach more public addresses than an IPv4 /8 or an IPv6 /32 "
        "(by default refused: 0.0.0.0/1 or 2000::/3 is the internet, not a restriction).",
    )
    node_ports_firewalled: bool = Field(
        False,
        description="The nodes' firewall (security group) admits the NodePort range 30000-32767 only from inside the VPC. "
        "A production LoadBalancer whose cloud balances onto node ports, or a NodePort login beside a restricted "
        "LoadBalancer, needs it: loadBalancerSourceRanges do not cover node ports.",
    )
    ssh_root_public_keys: list[Annotated[str, AfterValidator(_check_public_key)]] = Field(
        default_factory=list, description="Root's authorized keys (OpenSSH public key lines)."
    )
    sshd: PodResources = _res("3000m", "9Gi", "30Gi")
    munge: PodResources = _res("500m", "500Mi", "5Gi")


class ExternalDbConfig(Model):
    host: Host
    port: Port = 3306
    user: str = Field("slurm", pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,79}$")
    password_secret_name: DnsSubdomain = Field(..., description="Existing Secret holding the database password.")
    password_secret_key: DataKey = "password"


class AccountingConfig(Model):
    enabled: bool = True
    database: Literal["mariadbOperator", "external"] = "mariadbOperator"
    external: Optional[ExternalDbConfig] = None
    storage_class_name: DnsSubdomain = Field("xplat-nfs", description="Class of the MariaDB data volume.")
    storage_size: Quantity = "10Gi"
    mariadb: PodResources = _res("1000m", "1Gi", "5Gi")
    slurmdbd: PodResources = _res("1000m", "3Gi", "5Gi")
    munge: PodResources = _res("1000m", "1Gi", "5Gi")


class ExporterConfig(Model):
    enabled: bool = True
    resources: PodResources = _res("250m", "256Mi", "500Mi")
    munge: PodResources = _res("1000m", "1Gi", "5Gi")


class NcclBenchmarkConfig(Model):
    enabled: bool = True
    schedule: Annotated[str, AfterValidator(_check_cron)] = Field(
        "0 */3 * * *", description="Cron schedule of the benchmark CronJob (5 fields, or @hourly/@daily/...)."
    )
    drain_on_failure: bool = Field(True, description="Drain a Slurm node whose NCCL benchmark fails.")
    min_bandwidth_gbps: str = Field(
        "400", pattern=r"^[0-9]+(\.[0-9]+)?$", description="thresholdMoreThan: minimum NCCL all-reduce bus bandwidth (GB/s)."
    )
    use_infiniband: Optional[bool] = Field(None, description="Unset: on when a GPU pool has RDMA.")


class PopulateJailConfig(Model):
    overwrite: bool = Field(False, description="Re-populate (ERASE) the jail on every reconcile of the job.")
    wipe_existing_jail_intended: bool = Field(False, description="Required with overwrite: true on a static jail: you mean to erase its contents.")


class ReadinessConfig(Model):
    """How `pulumi up` awaits the SlurmCluster (never on a render-only stack: there is no cluster to watch)."""

    await_available: bool = Field(True, description="Wait until soperator reports .status.phase Available (pulumi.com/waitFor).")
    timeout_minutes: int = Field(
        40,
        ge=5,
        le=24 * 60,
        description="Create/update timeout; FPT's guide measures ~20 minutes for a first install (populate-jail job, then the pods).",
    )


# ---------------------------------------------------------------------------
# Per-operator Slurm settings (the operator-neutral ones above are shared)


class HomeNasConfig(Model):
    """The guide's shared /home: an existing NAS file system bound through a static PersistentVolume."""

    server: Host = Field(..., description="NAS mount target, e.g. 0a1b2c3d4e-abc12.cn-hangzhou.nas.aliyuncs.com")
    path: SafePath = Field("/", description="Directory on the NAS.")
    size: Quantity = "1Ti"
    claim_name: DnsLabel = Field("slurm-home-pvc", description="PersistentVolumeClaim mounted at /home in every pod.")
    nfs_version: Literal["3", "4.0"] = Field("3", description="NFS protocol version (the CSI driver's `vers`).")


class AckAutoscalingConfig(Model):
    """Slurm power saving with CLOUD nodes. The copilot runs in its own pod (the only ACK pod with a token, never
    the head users log into): it watches sinfo for powering nodes and runs these programs, which patch the CR."""

    enabled: bool = False
    max_nodes_per_group: int = Field(16, ge=1, description="CLOUD node names declared per worker group (<cluster>-worker-<group>-[0-N-1]).")
    suspend_time: int = Field(600, ge=1, description="SuspendTime: idle seconds before a worker is suspended.")
    suspend_timeout: int = Field(600, ge=1)
    resume_timeout: int = Field(600, ge=1)
    resume_rate: int = Field(1, ge=0, description="Nodes resumed per minute.")
    suspend_rate: int = Field(1, ge=0, description="Nodes suspended per minute.")
    suspend_program: SafePath = Field(
        "/slurm-suspend.sh", description="Run by the copilot pod once per node powering down, as the guide's image ships it."
    )
    resume_program: SafePath = Field("/slurm-resume.sh", description="Run by the copilot pod once per node powering up.")


class AckClusterConfig(Model):
    """ack-slurm-operator's SlurmCluster: images are bring-your-own, config comes from our ConfigMap."""

    image: ImageReference = Field(..., description="Slurm image for head and workers (the guide's, or your own build).")
    # The operator's init script copies from these paths: shell-safe characters only.
    slurm_conf_path: SafePath = Field("/var/slurm", description="slurmConfPath: where the slurm.conf ConfigMap is mounted.")
    munge_key_dir: SafePath = Field("/var/munge", description="Where the munge Secret is mounted; mungeConfPath is <dir>/munge.key.")
    slurmctld_host: Optional[DnsSubdomain] = Field(
        None, description="SlurmctldHost in slurm.conf (a DNS name, it also reaches the tenants' script); default <cluster>-head."
    )
    home: Optional[HomeNasConfig] = Field(None, description="Shared /home on NAS (static PV + PVC), mounted in head and workers.")
    slurmdbd_conf_secret_name: Optional[DnsLabel] = Field(
        None, description="Existing Secret with key slurmdbd.conf (holds the DB password); needed with slurm.accounting.enabled."
    )
    autoscaling: AckAutoscalingConfig = AckAutoscalingConfig()
    extra_slurm_conf: list[ConfLine] = Field(default_factory=list, description="Extra slurm.conf lines, appended verbatim (one line each).")


class SlinkyClusterConfig(Model):
    registry: ImageRepository = Field("ghcr.io/slinkyproject", description="Slinky image registry (slurmctld, slurmd, login, slurmdbd, slurmrestd).")
    tag: ImageTag = Field("26.05-ubuntu26.04", description="Slurm image tag of slurm-operator 1.2.1's chart.")
    controller_storage_size: Quantity = Field("4Gi", description="slurmctld save-state volume (ReadWriteOnce).")
    controller_storage_class_name: Optional[DnsSubdomain] = Field(None, description="Class of that volume; cluster default when unset.")
    rest_api: bool = Field(False, description="Declare a RestApi (slurmrestd).")
    rest_api_replicas: int = Field(1, ge=1)
    rest_api_resources: PodResources = _res("500m", "1Gi", "1Gi")


class PartitionConfig(Model):
    """A Slurm partition over GPU pools (soperator 4.x, ACK and Slinky; soperator 1.14.10 has one implicit partition)."""

    name: DnsLabel
    pools: list[DnsLabel] = Field(default_factory=list, description="GPU pool names; empty: every GPU pool.")
    default: bool = Field(False, description="The partition jobs go to when they name none.")
    config: ConfLine = Field("MaxTime=INFINITE State=UP", description="Further PartitionName options (one slurm.conf line).")


def _default_partitions() -> list[PartitionConfig]:
    return [PartitionConfig(name="main", default=True)]


class SlurmConfig(Model):
    images: ImagesConfig = ImagesConfig()
    controller: ControllerConfig = ControllerConfig()
    worker: WorkerConfig = WorkerConfig()
    login: LoginConfig = LoginConfig()
    accounting: AccountingConfig = AccountingConfig()
    exporter: ExporterConfig = ExporterConfig()
    nccl_benchmark: NcclBenchmarkConfig = NcclBenchmarkConfig()
    populate_jail: PopulateJailConfig = PopulateJailConfig()
    munge_key_rotation: int = Field(0, ge=0, description="Bump to generate a new munge key on the next update.")
    adopt_munge_secret: bool = Field(
        False,
        description="Secret <cluster>-munge already exists (made by hand or by soperator): import it and keep its key; "
        "Pulumi owns the object but not the key until this is turned off (which writes a new key).",
    )
    readiness: ReadinessConfig = ReadinessConfig()
    partitions: list[PartitionConfig] = Field(
        default_factory=_default_partitions, min_length=1, description="Slurm partitions (default: `main` over every GPU pool)."
    )
    ack: Optional[AckClusterConfig] = Field(None, description="ack-slurm-operator settings (required with slurmOperator: ack).")
    slinky: SlinkyClusterConfig = SlinkyClusterConfig()


# ---------------------------------------------------------------------------
# Tenants: the OpenPAI/HiveD lab's virtual clusters on Slurm (components/tenancy.py)


TenantPriority = Literal["prod", "test", "oppo"]
# Users and groups the Slurm images already have: Debian/Ubuntu's base-passwd, the daemons the images
# run, and groups other distributions grant privileges to. An LDAP entry of the same name shadows or
# joins them (sudo matches `%sudo` by group name), and sacctmgr would change the associations of root.
RESERVED_POSIX_NAMES = frozenset(
    {
        *("root", "daemon", "bin", "sys", "sync", "games", "man", "lp", "mail", "news", "uucp", "proxy", "www-data"),
        *("backup", "list", "irc", "gnats", "nobody", "nogroup", "_apt", "adm", "tty", "disk", "kmem", "dialout"),
        *("fax", "voice", "cdrom", "floppy", "tape", "sudo", "audio", "dip", "operator", "src", "shadow", "utmp"),
        *("video", "sasl", "plugdev", "staff", "users", "input", "render", "netdev", "crontab", "messagebus"),
        *("slurm", "munge", "sshd", "nslcd", "sssd", "mysql", "wheel", "admin", "docker"),
    }
)
# Slurm's own account: the parent of every other; a tenant's GrpTRES on it would cap the whole cluster.
RESERVED_SLURM_ACCOUNTS = ("root",)


def _check_not_reserved_posix_name(value: str) -> str:
    if value in RESERVED_POSIX_NAMES:
        raise ValueError(
            f"{value!r} is a system user or group of the Slurm images and cannot be seeded into LDAP or Slurm "
            "(reserved: Debian's base-passwd users and groups such as root, nobody, sudo, adm, staff, users, and the images' "
            "daemons slurm, munge, sshd, nslcd, sssd; README: Reserved names)"
        )
    return value


def _check_not_reserved_account(value: str) -> str:
    if value in RESERVED_SLURM_ACCOUNTS:
        raise ValueError(f"{value!r} is Slurm's root account, the parent of every account; choose another name")
    return value


# A POSIX user or group name as LDAP's posixAccount/posixGroup and Slurm's sacctmgr take it.
POSIX_NAME_PATTERN = r"^[a-z_][a-z0-9_-]{0,31}$"
PosixName = Annotated[str, Field(pattern=POSIX_NAME_PATTERN), AfterValidator(_check_not_reserved_posix_name)]


class TenantCells(Model):
    """Guaranteed cells (HiveD's virtualCells): `cells` of `gpusPerCell` GPUs, each cell on one node of `pool`."""

    pool: DnsLabel = Field(..., description="A GPU node pool (nodePools[].name).")
    gpus_per_cell: int = Field(
        ..., ge=1, description="GPUs in one cell: up to the pool's gpusPerNode, all on one node; or whole nodes (a multiple of it)."
    )
    cells: int = Field(..., ge=1, description="How many such cells the tenant is guaranteed.")


class TenantConfig(Model):
    """A team sharing the GPU pools: a Slurm account with a guarantee, QOS levels, and an LDAP group."""

    name: Annotated[DnsLabel, AfterValidator(_check_not_reserved_account)] = Field(
        ..., description="Slurm account name (and namespace name when namespace is true); not root."
    )
    ldap_group: Optional[PosixName] = Field(None, description="LDAP posixGroup of the tenant's users; default: name.")
    users: list[PosixName] = Field(default_factory=list, description="Users of this tenant (seeded into LDAP when ldap.enabled).")
    cells: list[TenantCells] = Field(..., min_length=1, description="Guaranteed cells (the virtual cluster).")
    kueue_cells: list[TenantCells] = Field(
        default_factory=list,
        description="Cells guaranteed to its Kubernetes jobs through Kueue (operators.kueue.enabled), on the pool's nodes "
        "that are not Slurm workers (nodeCount - slurmWorkers).",
    )
    borrowing_cap: Optional[int] = Field(None, ge=0, description="GPUs beyond the guarantee its oppo jobs may use at once; unset: any idle GPU.")
    priorities: list[TenantPriority] = Field(
        default_factory=lambda: list[TenantPriority](["prod", "test", "oppo"]),
        min_length=1,
        description="QOS levels its users may submit at: prod > test run inside the guarantee; oppo borrows idle GPUs, preemptible.",
    )
    namespace: bool = Field(
        False,
        description="Declare a namespace <name> with a ResourceQuota of requests.nvidia.com/gpu = guarantee (protected and "
        "retained on delete; not default, kube-*, the cluster's or an operator's namespace).",
    )

    @property
    def group(self) -> str:
        return self.ldap_group or self.name

    @property
    def guaranteed_gpus(self) -> int:
        return sum(cell.gpus_per_cell * cell.cells for cell in self.cells)

    def kueue_gpus(self, pool: str) -> int:
        """The GPUs of its kueueCells on `pool`."""
        return sum(cell.gpus_per_cell * cell.cells for cell in self.kueue_cells if cell.pool == pool)

    @property
    def oppo_account(self) -> str:
        """The Slurm account of its opportunistic jobs."""
        return f"{self.name}-oppo"

    @property
    def pools(self) -> set[str]:
        """The GPU pools it holds cells on: the only ones its guaranteed jobs may run on."""
        return {cell.pool for cell in self.cells}


# ---------------------------------------------------------------------------
# The whole stack


SlurmOperatorKind = Literal["soperator", "ack", "slinky"]


class PlatformConfig(Model):
    environment: Literal["local", "dev", "staging", "prod"] = Field("dev", description="Environment tier.")
    slurm_operator: SlurmOperatorKind = Field(
        "soperator",
        description="The Slurm operator: soperator (version: operators.soperator.version), ack (Alibaba ack-slurm-operator, "
        "API: operators.ackSlurmOperator.apiGeneration) or slinky (SchedMD slurm-operator, operators.slinky.version).",
    )
    region: str = Field("local", pattern=r"^[a-z0-9-]+$", description="Cloud region, e.g. hanoi, hcm, cn-hangzhou.")
    cloud: Literal["fpt", "alibaba", "aws", "gcp", "azure"] = Field(
        "fpt",
        description="The cloud whose load balancers serve the stack: its private-LB annotation is the one that counts "
        "(fpt: OpenStack's openstack-internal-load-balancer; alibaba: alibaba-cloud-loadbalancer-address-type).",
    )
    cluster: ClusterConfig = ClusterConfig()
    kubernetes: KubernetesConfig = KubernetesConfig()
    node_pools: list[NodePoolConfig] = Field(default_factory=_default_pools, min_length=1)
    operators: OperatorsConfig = OperatorsConfig()
    storage: StorageConfig = StorageConfig()
    ldap: LdapConfig = LdapConfig()
    slurm: SlurmConfig = SlurmConfig()
    tenants: list[TenantConfig] = Field(
        default_factory=list,
        description="Teams sharing the GPU pools with guarantees, priorities and preemption (soperator 4.1.7, ack or slinky; needs accounting).",
    )

    @property
    def gpu_pools(self) -> list[NodePoolConfig]:
        return [pool for pool in self.node_pools if pool.has_gpu]

    @property
    def partitions(self) -> list[PartitionConfig]:
        """The Slurm partitions to render: slurm.partitions, and with tenants but the default
        partitions, one more per GPU pool (named after it) so jobs can ask for the pool of a cell."""
        declared = list(self.slurm.partitions)
        if not self.tenants or "partitions" in self.slurm.model_fields_set:
            return declared
        taken = {p.name for p in declared}
        return declared + [PartitionConfig(name=pool.name, pools=[pool.name]) for pool in self.gpu_pools if pool.name not in taken]

    @property
    def slurm_gpus(self) -> int:
        """The GPUs of every Slurm worker: what tenants' cells and borrowing share."""
        return sum(pool.gpus_per_node * pool.worker_replicas for pool in self.gpu_pools)

    @property
    def has_rdma(self) -> bool:
        return any(pool.rdma for pool in self.gpu_pools)

    @property
    def uses_jail(self) -> bool:
        """jail-pvc and controller-spool-pvc are soperator's; ACK and Slinky pods have their own root FS."""
        return self.slurm_operator == "soperator"

    @property
    def jail_is_static(self) -> bool:
        return self.storage.jail.static_nfs is not None

    _secret_keys: frozenset[str] = PrivateAttr(default_factory=frozenset)

    @property
    def render_only(self) -> bool:
        """Manifests go to a directory: there is no cluster to read, await or import from."""
        return self.kubernetes.render_yaml_to_directory is not None

    @property
    def adopted_objects(self) -> list[str]:
        """Config keys of the objects this stack imports instead of creating."""
        storage = self.storage
        adopted = [
            key for key, on in (("storage.jail.adopt", storage.jail.adopt), ("storage.controllerSpool.adopt", storage.controller_spool.adopt)) if on
        ]
        adopted += [f"storage.submounts[{i}].adopt" for i, sub in enumerate(storage.submounts) if sub.adopt]
        if self.slurm.adopt_munge_secret:
            adopted.append("slurm.adoptMungeSecret")
        return adopted

    @property
    def worker_rdma(self) -> int:
        """RDMA devices each worker asks for: explicit, else 1 exactly when a GPU pool has RDMA."""
        rdma = self.slurm.worker.slurmd.rdma
        return (1 if self.has_rdma else 0) if rdma is None else rdma

    @property
    def secret_keys(self) -> frozenset[str]:
        """Top-level keys set with `pulumi config set --secret` (everything under them is secret)."""
        return self._secret_keys

    def secret_if(self, key: str, value: Any) -> Any:
        """`value` as a Pulumi secret when it was built from secret config key `key`."""
        return pulumi.Output.secret(value) if key in self._secret_keys else value


# ---------------------------------------------------------------------------
# Rules across fields, each reported at the exact key path it is about.


@dataclass(frozen=True)
class Problem:
    path: tuple[Any, ...]  # camelCase keys and list indices
    message: str
    value: Any = None


def _cross_field_problems(config: PlatformConfig) -> Iterator[Problem]:
    yield from _node_pool_problems(config)
    yield from _operator_problems(config)
    yield from _slurm_operator_problems(config)
    yield from _storage_problems(config)
    yield from _scheduling_problems(config)
    yield from _system_pod_problems(config)
    yield from _adoption_problems(config)
    yield from _login_problems(config)
    yield from _tenant_problems(config)
    ldap = config.ldap
    if ldap.enabled and ldap.tls.enabled and not ldap.tls.secret_name:
        yield Problem(("ldap", "tls", "secretName"), "required when tls.enabled is true (a kubernetes.io/tls Secret with ca.crt)")
    if ldap.enabled and ldap.tls.enabled and config.render_only:
        yield Problem(
            ("ldap", "tls", "enabled"),
            "needs a cluster: the clients' CA is read from the TLS Secret, and kubernetes.renderYamlToDirectory has none",
            True,
        )
    if ldap.enabled and config.environment == "prod" and not ldap.tls.enabled:
        # sssd and nslcd send the read-only bind password on every connection.
        yield Problem(
            ("ldap", "tls", "enabled"),
            "must be true in production: the clients' bind password would cross the pod network in clear; "
            "set ldap.tls.enabled: true and ldap.tls.secretName (a kubernetes.io/tls Secret with ca.crt)",
            False,
        )
        if ldap.php_ldap_admin:
            yield Problem(
                ("ldap", "phpLdapAdmin"),
                "serves the directory's admin login over plain HTTP without ldap.tls; in production enable ldap.tls "
                "(phpLDAPadmin then serves HTTPS and speaks StartTLS) or turn it off",
                True,
            )
    accounting = config.slurm.accounting
    if accounting.enabled and accounting.database == "external" and accounting.external is None:
        yield Problem(("slurm", "accounting", "external"), "required when database is 'external' (host, passwordSecretName)")
    populate = config.slurm.populate_jail
    if populate.overwrite and config.jail_is_static and not populate.wipe_existing_jail_intended:
        yield Problem(
            ("slurm", "populateJail", "overwrite"),
            "is true while storage.jail.staticNfs binds an existing jail: the populate job would erase it; "
            "set slurm.populateJail.wipeExistingJailIntended: true if that is intended",
            True,
        )


def _adoption_problems(config: PlatformConfig) -> Iterator[Problem]:
    adopted = config.adopted_objects
    if not adopted:
        return
    first = tuple(int(p) if p.isdigit() else p for p in re.findall(r"[^.\[\]]+", adopted[0]))
    if config.render_only:
        yield Problem(
            first,
            "adoption imports live objects, but kubernetes.renderYamlToDirectory makes this a render-only stack "
            f"with no cluster to import from (adopted: {', '.join(adopted)})",
        )
    if config.cluster.create_namespace:
        yield Problem(
            first,
            "adopted objects live in an existing namespace; set cluster.createNamespace: false "
            f"(namespace {config.cluster.namespace!r}; adopted: {', '.join(adopted)})",
        )
    if config.slurm.adopt_munge_secret and config.slurm.munge_key_rotation:
        yield Problem(
            ("slurm", "mungeKeyRotation"),
            "slurm.adoptMungeSecret keeps the existing key, so slurm.mungeKeyRotation cannot rotate it; "
            "set adoptMungeSecret: false to let Pulumi write (and rotate) the key",
            config.slurm.munge_key_rotation,
        )


def _duplicates(values: list[Any]) -> Iterator[tuple[int, Any]]:
    """(index, value) of every repeat after the first occurrence."""
    seen: set[Any] = set()
    for index, value in enumerate(values):
        if value in seen:
            yield index, value
        seen.add(value)


def _node_pool_problems(config: PlatformConfig) -> Iterator[Problem]:
    for index, name in _duplicates([pool.name for pool in config.node_pools]):
        yield Problem(("nodePools", index, "name"), "must be unique among nodePools", name)
    nodes = [(i, j, node) for i, pool in enumerate(config.node_pools) for j, node in enumerate(pool.label_existing_nodes)]
    seen: set[str] = set()
    for i, j, node in nodes:
        if node in seen:
            yield Problem(("nodePools", i, "labelExistingNodes", j), "names a node another entry already labels", node)
        seen.add(node)
    if not config.gpu_pools:
        yield Problem(("nodePools",), "at least one pool needs gpusPerNode > 0 to host Slurm workers")


def _operator_problems(config: PlatformConfig) -> Iterator[Problem]:
    ops = config.operators
    if (
        ops.gpu_operator.install
        and ops.network_operator.install
        and ops.gpu_operator.node_feature_discovery
        and ops.network_operator.node_feature_discovery
    ):
        yield Problem(
            ("operators", "networkOperator", "nodeFeatureDiscovery"),
            "is true while gpuOperator.nodeFeatureDiscovery is true too; only one Node Feature Discovery may run in the cluster",
            True,
        )


def _slurm_operator_problems(config: PlatformConfig) -> Iterator[Problem]:
    """What the chosen Slurm operator (components/slurm/<module>.py) can render."""
    slurm = config.slurm
    soperator_version = config.operators.soperator.version if config.slurm_operator == "soperator" else None
    if config.slurm_operator == "ack":
        yield from _ack_problems(config)
    if soperator_version == "4.1.7" and slurm.controller.size != 1:
        yield Problem(("slurm", "controller", "size"), "must be 1 with soperator 4.1.7 (it runs a single slurmctld)", slurm.controller.size)
    if soperator_version == "1.14.10":
        if "partitions" in slurm.model_fields_set:
            yield Problem(
                ("slurm", "partitions"),
                "soperator 1.14.10 has one implicit partition; partitions need operators.soperator.version 4.1.7, ack or slinky",
                [p.name for p in slurm.partitions],
            )
        for index, pool in enumerate(config.node_pools):
            if pool.slurm_workers is not None:
                yield Problem(
                    ("nodePools", index, "slurmWorkers"),
                    "needs per-pool workers (soperator 4.1.7, ack, slinky); soperator 1.14.10 has one worker group, sized by slurm.worker.size",
                    pool.slurm_workers,
                )
    for index, name in _duplicates([p.name for p in slurm.partitions]):
        yield Problem(("slurm", "partitions", index, "name"), "must be unique among partitions", name)
    defaults = [index for index, p in enumerate(slurm.partitions) if p.default]
    for index in defaults[1:]:
        yield Problem(
            ("slurm", "partitions", index, "default"),
            f"at most one partition can be the default (slurm.partitions[{defaults[0]}] already is)",
            True,
        )
    gpu_pool_names = sorted(pool.name for pool in config.gpu_pools)
    for index, partition in enumerate(slurm.partitions):
        unknown = sorted(set(partition.pools) - set(gpu_pool_names))
        if unknown:
            yield Problem(
                ("slurm", "partitions", index, "pools"),
                f"{', '.join(unknown)} {'is not a GPU pool' if len(unknown) == 1 else 'are not GPU pools'} (GPU pools: {', '.join(gpu_pool_names)})",
                list(partition.pools),
            )
    if config.slurm_operator == "slinky" and not config.ldap.enabled:
        yield Problem(("ldap", "enabled"), "must be true when slurmOperator is slinky: its LoginSet's sssd.conf binds to our LDAP", False)


def _ack_problems(config: PlatformConfig) -> Iterator[Problem]:
    slurm = config.slurm
    if slurm.ack is None:
        yield Problem(("slurm", "ack"), "required when slurmOperator is ack (at least slurm.ack.image)")
        return
    autoscaling = slurm.ack.autoscaling
    if autoscaling.enabled:
        for index, pool in enumerate(config.node_pools):
            if pool.has_gpu and pool.worker_replicas > autoscaling.max_nodes_per_group:
                yield Problem(
                    ("nodePools", index, "slurmWorkers"),
                    f"is more than slurm.ack.autoscaling.maxNodesPerGroup ({autoscaling.max_nodes_per_group}), "
                    "the CLOUD node names slurm.conf declares per group; raise it or lower slurmWorkers",
                    pool.worker_replicas,
                )
    if slurm.controller.size != 1:
        yield Problem(
            ("slurm", "controller", "size"),
            "must be 1 with slurmOperator ack (the generated slurm.conf names one SlurmctldHost)",
            slurm.controller.size,
        )
    accounting = slurm.accounting
    if accounting.enabled and accounting.database != "external":
        yield Problem(
            ("slurm", "accounting", "database"),
            "must be 'external' with slurmOperator ack (its slurmdbd reads slurm.ack.slurmdbdConfSecretName), or set slurm.accounting.enabled: false",
            accounting.database,
        )
    if accounting.enabled and not slurm.ack.slurmdbd_conf_secret_name:
        yield Problem(
            ("slurm", "ack", "slurmdbdConfSecretName"),
            "required when accounting is enabled with slurmOperator ack (an existing Secret holding slurmdbd.conf)",
        )


def _storage_problems(config: PlatformConfig) -> Iterator[Problem]:
    storage_class = config.storage.storage_class
    for kind, block, present in (("nfs", "nfs", storage_class.nfs), ("alibabaNas", "alibabaNas", storage_class.alibaba_nas)):
        if storage_class.kind == kind and present is None:
            yield Problem(("storage", "storageClass", block), f"required when kind is '{kind}'")
        if storage_class.kind != kind and present is not None:
            yield Problem(("storage", "storageClass", block), f"is set but kind is '{storage_class.kind}'; set kind: {kind} or remove it")
    submounts = config.storage.submounts
    for index, sub in enumerate(submounts):
        for key, value in (("name", sub.name), ("mountName", sub.effective_mount_name)):
            if value in RESERVED_VOLUME_NAMES:
                yield Problem(("storage", "submounts", index, key), f"'{value}' is reserved for soperator's own volume", value)
    for index, name in _duplicates([sub.name for sub in submounts]):
        yield Problem(("storage", "submounts", index, "name"), "must be unique among submounts", name)
    for index, name in _duplicates([sub.effective_mount_name for sub in submounts]):
        yield Problem(("storage", "submounts", index, "mountName"), "must be unique among submounts (defaults to name)", name)
    for index, path in _duplicates([sub.mount_path for sub in submounts]):
        yield Problem(("storage", "submounts", index, "mountPath"), "is already used by another submount (after normalising)", path)


def _scheduling_problems(config: PlatformConfig) -> Iterator[Problem]:
    """Workers that could never be scheduled: checked in every environment."""
    worker = config.slurm.worker
    slurmd = ("slurm", "worker", "slurmd")
    if not config.gpu_pools:
        return
    most_gpus = max(pool.gpus_per_node for pool in config.gpu_pools)
    if worker.slurmd.gpu > most_gpus:
        yield Problem((*slurmd, "gpu"), f"is more than any GPU pool has per node ({most_gpus})", worker.slurmd.gpu)
        return
    if worker.slurmd.rdma and not config.has_rdma:
        yield Problem((*slurmd, "rdma"), "asks for RDMA devices but no GPU pool has rdma: true; set it to 0", worker.slurmd.rdma)
    cpu = quantity_value(worker.slurmd.cpu) + quantity_value(worker.munge.cpu)
    memory = quantity_value(worker.slurmd.memory) + quantity_value(worker.munge.memory)
    with_gpus = [pool for pool in config.gpu_pools if pool.gpus_per_node >= worker.slurmd.gpu]
    largest_cpu = max(quantity_value(pool.cpu_per_node) for pool in with_gpus)
    largest_memory = max(quantity_value(pool.memory_per_node) for pool in with_gpus)
    if cpu > largest_cpu:
        yield Problem(
            (*slurmd, "cpu"),
            f"plus the worker's munge container asks {_plain(cpu)} CPU, more than any GPU pool allocates per node ({_plain(largest_cpu)})",
            worker.slurmd.cpu,
        )
    if memory > largest_memory:
        yield Problem(
            (*slurmd, "memory"),
            f"plus the worker's munge container asks {_gib(memory)}, more than any GPU pool allocates per node ({_gib(largest_memory)})",
            worker.slurmd.memory,
        )
    fitting = [pool for pool in with_gpus if quantity_value(pool.cpu_per_node) >= cpu and quantity_value(pool.memory_per_node) >= memory]
    capacity = sum(pool.node_count for pool in fitting)
    # Only soperator 1.14.10 sizes workers with slurm.worker.size; the others size them per pool.
    workers_in_cr = config.slurm_operator == "soperator" and config.operators.soperator.version == "1.14.10"
    if fitting and workers_in_cr and worker.size > capacity:
        pools = ", ".join(f"{pool.name}: {pool.node_count}" for pool in fitting)
        yield Problem(
            ("slurm", "worker", "size"),
            f"is more than the {capacity} GPU node(s) that can host a worker ({pools}); soperator runs one worker per node",
            worker.size,
        )


def _system_pod_problems(config: PlatformConfig) -> Iterator[Problem]:
    """Controller, login, accounting and exporter pods run on the no-gpu pools (the GPU pools when there are none)."""
    slurm = config.slurm
    pools = [pool for pool in config.node_pools if not pool.has_gpu] or config.gpu_pools
    if not pools:
        return
    largest_cpu = max(quantity_value(pool.cpu_per_node) for pool in pools)
    largest_memory = max(quantity_value(pool.memory_per_node) for pool in pools)
    pods = [("controller", "slurmctld", slurm.controller.slurmctld, slurm.controller.munge), ("login", "sshd", slurm.login.sshd, slurm.login.munge)]
    if slurm.accounting.enabled:
        pods.append(("accounting", "slurmdbd", slurm.accounting.slurmdbd, slurm.accounting.munge))
    if slurm.exporter.enabled:
        pods.append(("exporter", "resources", slurm.exporter.resources, slurm.exporter.munge))
    for kind, container, main, munge in pods:
        cpu = quantity_value(main.cpu) + quantity_value(munge.cpu)
        memory = quantity_value(main.memory) + quantity_value(munge.memory)
        if cpu > largest_cpu:
            yield Problem(
                ("slurm", kind, container, "cpu"),
                f"plus its munge container asks {_plain(cpu)} CPU, more than any node of the pools it runs on allocates ({_plain(largest_cpu)})",
                main.cpu,
            )
        if memory > largest_memory:
            yield Problem(
                ("slurm", kind, container, "memory"),
                f"plus its munge container asks {_gib(memory)}, more than any node of the pools it runs on allocates ({_gib(largest_memory)})",
                main.memory,
            )


def _gib(amount: Decimal) -> str:
    return f"{_plain(amount / 2**30)}Gi"


def _plain(amount: Decimal) -> str:
    return f"{amount.normalize():f}"


def login_lb_annotations(config: PlatformConfig) -> Optional[dict[str, str]]:
    """The annotations of the login LoadBalancer the stack declares (its own or the operator's), None without one.

    ACK's login is always a LoadBalancer, private by default; the user's annotations override that default."""
    login = config.slurm.login
    if config.slurm_operator == "ack":
        return {**kube_rules.PRIVATE_LB_ANNOTATIONS["alibaba"], **login.service_annotations}
    if login.allowed_source_ranges or login.service_type == "LoadBalancer":
        return dict(login.service_annotations)
    return None


def _login_problems(config: PlatformConfig) -> Iterator[Problem]:
    login = config.slurm.login
    path = ("slurm", "login")
    ranges = list(login.allowed_source_ranges)
    open_families = kube_rules.open_families(ranges)
    if open_families:
        yield Problem(
            (*path, "allowedSourceRanges"),
            f"together cover the whole {' and '.join(open_families)} internet; list the office/VPN ranges instead",
            ranges,
        )
    elif kube_rules.broad_families(ranges) and not login.allow_broad_source_ranges:
        yield Problem(
            (*path, "allowedSourceRanges"),
            f"{kube_rules.broad_range_message(ranges)}; list the office/VPN ranges, or set "
            "slurm.login.allowBroadSourceRanges: true if that many addresses are meant",
            ranges,
        )
    if config.slurm_operator == "ack" and config.cloud != "alibaba":
        yield Problem(("cloud",), "must be alibaba with slurmOperator ack (ACK's login is an Alibaba Cloud load balancer)", config.cloud)
    if login.load_balancer_ip and login.service_type != "LoadBalancer":
        yield Problem(
            (*path, "loadBalancerIp"),
            f"only applies to serviceType LoadBalancer (serviceType is {login.service_type})",
            login.load_balancer_ip,
        )
    annotations = login_lb_annotations(config)
    for problem in kube_rules.lb_annotation_problems(login.service_annotations, config.cloud):
        yield Problem((*path, "serviceAnnotations"), problem)
    if config.environment != "prod" or annotations is None:
        return
    example = kube_rules.private_lb_example(config.cloud)
    if not ranges and kube_rules.private_lb_annotation(annotations, config.cloud) is None:
        what = "ACK's login is always a LoadBalancer (serviceAnnotations override its intranet default), and a production one"
        yield Problem(
            (*path, "allowedSourceRanges" if config.slurm_operator == "ack" else "serviceType"),
            f"{what if config.slurm_operator == 'ack' else 'a production LoadBalancer'} needs allowedSourceRanges "
            f"or {config.cloud}'s private-LB annotation in serviceAnnotations ({example})",
            ranges if config.slurm_operator == "ack" else login.service_type,
        )
    if login.node_ports_firewalled:
        return
    if config.slurm_operator == "soperator":
        # soperator's own login Service is NodePort or LoadBalancer, always with node ports (no field closes them).
        why = (
            f"soperator keeps its login Service on NodePort {login.node_port} beside the restricted LoadBalancer"
            if ranges
            else "soperator's login LoadBalancer keeps node ports (its CRD cannot turn them off)"
        )
        closable = ""
    elif not kube_rules.pod_backends(annotations, config.cloud):
        why = f"{config.cloud}'s load balancer reaches the login pods through node ports"
        direct = kube_rules.POD_BACKEND_ANNOTATIONS.get(config.cloud)
        closable = f" (or let the load balancer reach pods directly: {', '.join(f'{k}: {v}' for k, v in direct.items())})" if direct else ""
    else:
        return
    yield Problem(
        (*path, "nodePortsFirewalled"),
        f"{why}, open on every node and not covered by loadBalancerSourceRanges; make sure the nodes' firewall admits "
        f"30000-32767 only from the VPC, then set slurm.login.nodePortsFirewalled: true{closable}",
        False,
    )


# ---------------------------------------------------------------------------
# Loading


def reserved_namespaces(config: PlatformConfig) -> dict[str, str]:
    """Namespaces a tenant may not declare (besides kube-*), with their owner. Tenant names are
    unique, so no tenant's namespace is another's. The kubernetes provider adopts an existing
    Namespace on create, and deleting the tenant would then delete it with everything in it."""
    reserved = {"default": "Kubernetes' default namespace", config.cluster.namespace: "cluster.namespace, the Slurm cluster's"}
    for key, field in OperatorsConfig.model_fields.items():
        chart = getattr(config.operators, key)
        how = "installed by this stack" if chart.install else "installed outside this stack"
        reserved.setdefault(chart.namespace, f"operators.{field.alias or to_camel(key)}.namespace, {how}")
    return reserved


def _tenant_problems(config: PlatformConfig) -> Iterator[Problem]:
    tenants = config.tenants
    if not tenants:
        if config.operators.kueue.enabled:
            yield Problem(("operators", "kueue", "enabled"), "needs tenants: Kueue's queues are the tenants' (tenants[].kueueCells)", True)
        return
    if config.slurm_operator == "soperator" and config.operators.soperator.version == "1.14.10":
        yield Problem(
            ("tenants",),
            "soperator 1.14.10 cannot carry partitions or preemption settings; set operators.soperator.version: 4.1.7, "
            "or slurmOperator: ack or slinky",
            [t.name for t in tenants],
        )
    if not config.slurm.accounting.enabled:
        yield Problem(
            ("slurm", "accounting", "enabled"),
            "must be true when tenants are set: their accounts, QOS and GPU guarantees live in slurmdbd",
            False,
        )
    for index, name in _duplicates([t.name for t in tenants]):
        yield Problem(("tenants", index, "name"), "must be unique among tenants", name)
    # Each tenant also owns the Slurm account <name>-oppo.
    oppo_accounts = {t.oppo_account: t.name for t in tenants}
    for index, tenant in enumerate(tenants):
        if tenant.name in oppo_accounts:
            yield Problem(
                ("tenants", index, "name"),
                f"is the Slurm account for the oppo jobs of tenant {oppo_accounts[tenant.name]!r}; choose another name",
                tenant.name,
            )
    # With tenants, who may use a partition follows from the cells (components/slurm/common.py partition_options).
    for index, partition in enumerate(config.slurm.partitions):
        if {option.partition("=")[0].lower() for option in partition.config.split()} & {"allowaccounts", "denyaccounts"}:
            yield Problem(
                ("slurm", "partitions", index, "config"),
                "sets AllowAccounts/DenyAccounts, which the tenants decide: a tenant's account may use the partitions over its cells' "
                "pools, every oppo account all of them; remove it",
                partition.config,
            )
    pools = {pool.name: pool for pool in config.node_pools}
    gpu_pool_names = ", ".join(sorted(pool.name for pool in config.gpu_pools))
    reserved = reserved_namespaces(config)
    listed = ", ".join(["kube-*", *reserved])
    for i, tenant in enumerate(tenants):
        owner = reserved.get(tenant.name) or ("Kubernetes' own" if tenant.name.startswith("kube-") else None)
        if tenant.namespace and owner:
            yield Problem(
                ("tenants", i, "namespace"),
                f"would declare namespace {tenant.name!r}, which is not the tenant's: {owner}; rename the tenant or set namespace: false "
                f"(reserved: {listed})",
                True,
            )
        if config.ldap.enabled and tenant.ldap_group is None and tenant.name in RESERVED_POSIX_NAMES:
            yield Problem(
                ("tenants", i, "name"),
                f"is also its LDAP group (ldapGroup unset), and {tenant.name!r} is a system group of the Slurm images; set ldapGroup",
                tenant.name,
            )
        elif config.ldap.enabled and tenant.ldap_group is None and not re.fullmatch(POSIX_NAME_PATTERN, tenant.name):
            yield Problem(
                ("tenants", i, "name"),
                "is also its LDAP group (ldapGroup unset), and a group name is at most 32 characters, starting with a letter or _; set ldapGroup",
                tenant.name,
            )
        for k, user in _duplicates(list(tenant.users)):
            yield Problem(("tenants", i, "users", k), "is listed twice in this tenant", user)
        borrowable = config.slurm_gpus - tenant.guaranteed_gpus
        if tenant.borrowing_cap is not None and tenant.borrowing_cap > borrowable:
            yield Problem(
                ("tenants", i, "borrowingCap"),
                f"is more than the {max(borrowable, 0)} GPUs it could borrow (the Slurm workers' GPUs beyond its own guarantee); "
                f"at most {max(borrowable, 0)}, or unset for any idle GPU",
                tenant.borrowing_cap,
            )
        for k, level in _duplicates(list(tenant.priorities)):
            yield Problem(("tenants", i, "priorities", k), "is listed twice", level)
        if not {"prod", "test"} & set(tenant.priorities):
            yield Problem(("tenants", i, "priorities"), "needs prod or test: its guaranteed cells are used at those levels", list(tenant.priorities))
        if tenant.borrowing_cap is not None and "oppo" not in tenant.priorities:
            yield Problem(("tenants", i, "borrowingCap"), "caps oppo jobs, but priorities has no oppo", tenant.borrowing_cap)
        if tenant.kueue_cells and not config.operators.kueue.enabled:
            yield Problem(("tenants", i, "kueueCells"), "needs operators.kueue.enabled: true (Kueue holds these cells)", len(tenant.kueue_cells))
        for field, cells in (("cells", tenant.cells), ("kueueCells", tenant.kueue_cells)):
            for j, cell in enumerate(cells):
                pool = pools.get(cell.pool)
                if pool is None or not pool.has_gpu:
                    what = "is not a node pool" if pool is None else "has no GPUs"
                    yield Problem(("tenants", i, field, j, "pool"), f"{what} (GPU pools: {gpu_pool_names})", cell.pool)
                elif cell.gpus_per_cell > pool.gpus_per_node and cell.gpus_per_cell % pool.gpus_per_node:
                    yield Problem(
                        ("tenants", i, field, j, "gpusPerCell"),
                        f"is more than pool '{pool.name}' has per node ({pool.gpus_per_node}) and not whole nodes; a cell is GPUs on one "
                        f"node, or whole nodes (a multiple of {pool.gpus_per_node})",
                        cell.gpus_per_cell,
                    )
    # Both schedulers' guarantees, each on its own nodes of a pool: Slurm's on its workers (nodeCount unless
    # slurmWorkers says less), Kueue's on the rest, where no slurmd pod holds the GPUs.
    for field, capacity, where in (
        ("cells", lambda pool: pool.worker_replicas, ""),
        ("kueueCells", lambda pool: pool.node_count - pool.worker_replicas, " (Kueue: the nodes that are not Slurm workers)"),
    ):
        fits = {pool.name: (capacity(pool), pool.gpus_per_node) for pool in config.gpu_pools}
        requests = [
            cell_fit.CellRequest(t.name, c.pool, c.gpus_per_cell, c.cells)
            for t in tenants
            for c in (t.cells if field == "cells" else t.kueue_cells)
            if c.pool in fits and (c.gpus_per_cell <= fits[c.pool][1] or c.gpus_per_cell % fits[c.pool][1] == 0)
        ]
        for shortfall in cell_fit.shortfalls(fits, requests):
            yield Problem(("tenants",), shortfall.describe() + where)


class ConfigError(Exception):
    """Invalid stack config; the message lists every problem, one per line."""


SHOWN_VALUE_MAX = 80
SECRET_SHOWN = "[secret]"


def _escaped(text: str) -> str:
    """Printable ASCII as is; anything else (invisible, confusable, non-ASCII) as an escape."""
    return "".join(c if " " <= c <= "~" else json.dumps(c)[1:-1] for c in text)


def _shown(value: Any) -> str:
    if isinstance(value, (dict, Mapping)):
        return "{...}"
    text = json.dumps(value, default=str, ensure_ascii=True)
    if len(text) > SHOWN_VALUE_MAX:
        text = f"{text[: SHOWN_VALUE_MAX - 3]}... ({len(text)} characters)"
    return text


def _key_path(loc: tuple[Any, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part == "[key]":
            path += " (the key)"
        elif path:
            path += f".{_escaped(str(part))}" if re.fullmatch(r"[A-Za-z0-9_-]+", str(part)) else f"[{json.dumps(str(part))}]"
        else:
            path = _escaped(str(part))
    return f"{PROJECT}:{path}" if path else PROJECT


def _line(loc: tuple[Any, ...], message: str, value: Any, secret_keys: frozenset[str], show_value: bool = True) -> str:
    line = f"{_key_path(loc)}: {message}"
    if show_value:
        secret = bool(loc) and str(loc[0]) in secret_keys
        line += f"; got {SECRET_SHOWN if secret else _shown(value)}"
    return line


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models a field's type can hold: through Optional, unions, Annotated, list and dict values."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is dict:
        args = args[1:]
    elif typing.get_origin(annotation) is Annotated:
        args = args[:1]
    return [model for arg in args for model in _models_in(arg)]


def _keys_at(loc: tuple[Any, ...]) -> list[str]:
    """The keys the model allows at `loc` (a key path into PlatformConfig), by their config (camelCase) names."""
    models: list[type[BaseModel]] = [PlatformConfig]
    for part in loc:
        if isinstance(part, int):
            continue  # a list index: the item is the same model
        fields = [model.model_fields.get(str(part)) or _field_by_alias(model, str(part)) for model in models]
        models = [m for field in fields if field is not None for m in _models_in(field.annotation)]
    return sorted({field.alias or name for model in models for name, field in model.model_fields.items()})


def _field_by_alias(model: type[BaseModel], alias: str) -> Any:
    return next((field for name, field in model.model_fields.items() if (field.alias or name) == alias), None)


def _comparable(key: str) -> str:
    """A key as a person reads it: case folded, invisible and format characters (U+200B ...) dropped."""
    return "".join(c for c in key.casefold() if c.isprintable() and not c.isspace() and unicodedata.category(c) != "Cf")


def _unknown_key_message(loc: tuple[Any, ...]) -> str:
    known = _keys_at(loc[:-1])
    by_comparable = {_comparable(k): k for k in known}
    close = difflib.get_close_matches(_comparable(str(loc[-1])), list(by_comparable), n=1, cutoff=0.75)
    if close:
        return f"unknown key; did you mean {by_comparable[close[0]]}? (config.schema.json lists every key)"
    return f"unknown key (allowed: {', '.join(known)})" if known else "unknown key (check the spelling; see config.schema.json)"


def _describe(error: Mapping[str, Any], secret_keys: frozenset[str]) -> str:
    loc = tuple(error["loc"])
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        return _line(loc, _unknown_key_message(loc), None, secret_keys, show_value=False)
    if error["type"] == "missing":
        return _line(loc, "required but not set", None, secret_keys, show_value=False)
    value = error.get("input")
    if error["type"] in ("model_type", "model_attributes_type", "dict_type", "list_type") and isinstance(value, str):
        message = (
            f"{message}; it is a plain string that is not a JSON {'list' if error['type'] == 'list_type' else 'object'} "
            "(`pulumi config set` without --path stores text): set nested keys with "
            "`pulumi config set --path 'storage.jail.size' 100Gi` or write the YAML in Pulumi.<stack>.yaml"
        )
    ctx = error.get("ctx") or {}
    if "expected" in ctx:
        message += f" (allowed: {ctx['expected']})"
    elif "pattern" in ctx:
        message += f" (must match {ctx['pattern']})"
    return _line(loc, message, value, secret_keys)


def _fail(lines: list[str]) -> ConfigError:
    return ConfigError(f"invalid stack config ({len(lines)} problem{'s' if len(lines) > 1 else ''}):\n  " + "\n  ".join(lines))


def parse_config(raw: Mapping[str, Any], secret_keys: frozenset[str] = frozenset()) -> PlatformConfig:
    """Validate a dict of top-level keys; raise ConfigError naming every problem.

    Field rules come first; the rules across fields run once every field is valid.
    """
    try:
        config = PlatformConfig.model_validate(dict(raw))
    except ValidationError as error:
        raise _fail([_describe(e, secret_keys) for e in error.errors(include_url=False)]) from None
    problems = list(_cross_field_problems(config))
    if problems:
        raise _fail([_line(p.path, p.message, p.value, secret_keys, show_value=p.value is not None) for p in problems])
    config._secret_keys = frozenset(secret_keys)
    return config


def _config_keys() -> list[str]:
    """Our model's top-level keys, plus any other `slurm-platform:` key the stack sets (typos are errors)."""
    known = [field.alias or name for name, field in PlatformConfig.model_fields.items()]
    prefix = f"{PROJECT}:"
    stack = [key[len(prefix) :] for key in pulumi.runtime.get_config_env() if key.startswith(prefix)]
    return list(dict.fromkeys([*known, *sorted(stack)]))


def raw_config_from_pulumi() -> tuple[dict[str, Any], frozenset[str]]:
    """The `slurm-platform:*` keys of the running stack (or mocks'), read with Pulumi's
    config API, and which of them are secrets."""
    config = pulumi.Config(PROJECT)
    raw: dict[str, Any] = {}
    for key in _config_keys():
        text = config.get(key)
        if text is None:
            continue
        try:
            value = config.get_object(key)
        except pulumi.ConfigTypeError:
            value = text  # not JSON: the model says which structure it expected
        # Structured values arrive as JSON text, scalars as plain strings.
        raw[key] = value if isinstance(value, (dict, list)) else text
    secret_keys = frozenset(key for key in raw if pulumi.runtime.is_config_secret(config.full_key(key)))
    return raw, secret_keys


def load_config() -> PlatformConfig:
    raw, secret_keys = raw_config_from_pulumi()
    return parse_config(raw, secret_keys)


def json_schema() -> dict[str, Any]:
    """The config's JSON Schema (by alias), as committed in config.schema.json."""
    schema = PlatformConfig.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "slurm-platform stack config (keys under `slurm-platform:`)"
    return schema

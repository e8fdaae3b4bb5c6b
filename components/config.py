"""Stack configuration: one pydantic model tree, the single source of truth.

Every key lives under the `slurm-platform:` namespace in `Pulumi.<stack>.yaml`
as a structured object (camelCase keys). Defaults follow FPT Cloud's
"Slurm on Managed GPU Cluster" guide (soperator / helm-slurm-cluster 1.14.10).

`load_config()` validates everything before a single resource is registered
and turns pydantic's errors into messages that name the config key path
(`slurm-platform:storage.jail.size`), the bad value and what is allowed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Optional

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)
from pydantic.alias_generators import to_camel

PROJECT = "slurm-platform"

# ---------------------------------------------------------------------------
# Scalar types with the rules Kubernetes applies to them.

_QUANTITY = re.compile(r"^([0-9]+(\.[0-9]+)?)(m|k|Ki|M|Mi|G|Gi|T|Ti|P|Pi|E|Ei)?$")
_BINARY_SUFFIX = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL_SUFFIX = {"m": 1e-3, "": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_CIDR = re.compile(r"^([0-9]{1,3}\.){3}[0-9]{1,3}/([0-9]|[12][0-9]|3[0-2])$|^[0-9a-fA-F:]+/[0-9]{1,3}$")


def quantity_value(quantity: str) -> float:
    """A Kubernetes resource quantity ("100Gi", "1500m", "8") as a plain number."""
    match = _QUANTITY.match(str(quantity))
    if not match:
        raise ValueError(f"not a Kubernetes quantity: {quantity!r}")
    number, suffix = float(match.group(1)), match.group(3) or ""
    return number * _BINARY_SUFFIX.get(suffix, _DECIMAL_SUFFIX.get(suffix, 1))


def _check_quantity(value: str) -> str:
    if not _QUANTITY.match(value):
        raise ValueError("must be a Kubernetes quantity such as 100Gi, 1500m or 8")
    return value


def _check_dns_label(value: str) -> str:
    if len(value) > 63 or not _DNS_LABEL.match(value):
        raise ValueError("must be a DNS-1123 label: lowercase letters, digits and '-', at most 63 characters")
    return value


def _check_cidr(value: str) -> str:
    if not _CIDR.match(value):
        raise ValueError("must be a CIDR block such as 203.0.113.0/24")
    return value


def _require_unique(values: list[str], what: str) -> None:
    duplicates = sorted({v for v in values if values.count(v) > 1})
    if duplicates:
        raise ValueError(f"{what} must be unique; repeated: {', '.join(duplicates)}")


def _check_jail_size(value: str) -> str:
    if quantity_value(value) < quantity_value(MIN_JAIL_SIZE):
        raise ValueError(f"must be at least {MIN_JAIL_SIZE}: the jail holds a whole OS root filesystem")
    return value


MIN_JAIL_SIZE = "40Gi"
Quantity = Annotated[str, AfterValidator(_check_quantity)]
JailSize = Annotated[str, AfterValidator(_check_quantity), AfterValidator(_check_jail_size)]
DnsLabel = Annotated[str, AfterValidator(_check_dns_label)]
Cidr = Annotated[str, AfterValidator(_check_cidr)]
Port = Annotated[int, Field(ge=1, le=65535)]


class Model(BaseModel):
    """Base: camelCase keys in YAML, unknown keys rejected (typos are errors)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


# ---------------------------------------------------------------------------
# Cluster-wide identity


class ClusterConfig(Model):
    name: DnsLabel = Field("fpt-hpc", description="SlurmCluster name (Slurm's ClusterName; do not change after creation).")
    namespace: DnsLabel = Field("fpt-hpc", description="Namespace for the Slurm cluster, its volumes, secrets and LDAP.")
    create_namespace: bool = Field(True, description="Declare the namespace; false when it already exists.")


class KubernetesConfig(Model):
    """How the program reaches Kubernetes: a kubeconfig context, or no cluster at all."""

    context: Optional[str] = Field(None, description="kubeconfig context to use; the ambient default when unset.")
    render_yaml_to_directory: Optional[str] = Field(None, description="Write manifests to this directory instead of talking to a cluster.")


# ---------------------------------------------------------------------------
# Node pools


class Taint(Model):
    key: str
    value: Optional[str] = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"


CapacityType = Literal["on-demand", "spot", "reserved"]


class KarpenterConfig(Model):
    """A Karpenter `karpenter.sh/v1` NodePool provisioning this pool's nodes."""

    node_class_group: str = Field("karpenter.k8s.aws", description="nodeClassRef.group")
    node_class_kind: str = Field("EC2NodeClass", description="nodeClassRef.kind")
    node_class_name: str = Field("default", description="nodeClassRef.name")
    instance_types: list[str] = Field(default_factory=list, description="node.kubernetes.io/instance-type values.")
    capacity_types: list[CapacityType] = Field(default_factory=lambda: list[CapacityType](["on-demand"]))


class NodePoolConfig(Model):
    name: DnsLabel
    selector: dict[str, str] = Field(..., min_length=1, description="Node labels that select this pool, e.g. {worker.fptcloud/pool: h100}.")
    gpu_product: Optional[str] = Field(None, description="nvidia.com/gpu.product label value, e.g. NVIDIA-H100-80GB-HBM3.")
    gpus_per_node: int = Field(0, ge=0, le=16, description="GPUs per node; 0 makes this a no-gpu (system) pool.")
    cpu_per_node: Quantity = Field(..., description="Allocatable CPU per node.")
    memory_per_node: Quantity = Field(..., description="Allocatable memory per node.")
    node_count: int = Field(..., ge=0, description="Nodes in the pool (capacity used by policies).")
    rdma: bool = Field(False, description="Nodes have RDMA/InfiniBand NICs (enables the NicClusterPolicy).")
    taints: list[Taint] = Field(default_factory=list, description="Taints the pool's nodes carry.")
    label_existing_nodes: list[str] = Field(
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
    version: str = Field(..., min_length=1, description="Chart version, pinned.")
    repository: str = Field(
        ..., min_length=1, description="Helm repo URL, OCI prefix (oci://...), or a local directory holding the chart (mirrors, tests)."
    )
    values: dict[str, Any] = Field(default_factory=dict, description="Extra Helm values merged over ours.")


class GpuOperatorConfig(ChartConfig):
    namespace: DnsLabel = "gpu-operator"
    version: Annotated[str, Field(pattern=r"^v\d+\.\d+\.\d+$", description="Chart version with a leading v.")] = "v24.9.2"
    repository: str = NVIDIA_HELM_REPO
    driver_enabled: bool = Field(True, description="Install the NVIDIA driver (false when nodes ship one).")
    driver_version: Optional[str] = Field(None, description="Driver version; the chart's default when unset.")
    toolkit_enabled: bool = True
    device_plugin_enabled: bool = True
    dcgm_exporter_enabled: bool = True
    mig_strategy: Literal["none", "single", "mixed"] = "single"
    node_feature_discovery: bool = Field(True, description="Deploy NFD; only one NFD may run in the cluster.")


class NetworkOperatorConfig(ChartConfig):
    namespace: DnsLabel = "nvidia-network-operator"
    version: Annotated[str, Field(pattern=r"^\d+\.\d+\.\d+$", description="Chart version without a leading v.")] = "24.10.1"
    repository: str = NVIDIA_HELM_REPO
    node_feature_discovery: bool = Field(False, description="Deploy NFD; off because the GPU operator runs one.")
    rdma_shared_device_plugin_image: str = "ghcr.io/mellanox/k8s-rdma-shared-dev-plugin"
    rdma_shared_device_plugin_version: str = "v1.5.2"
    rdma_resource_name: str = Field("rdma_shared_device_a", description="Resource exposed as rdma/<name>.")
    rdma_hca_max: int = Field(63, ge=1)
    rdma_if_names: list[str] = Field(default_factory=list, description="NIC names for the RDMA selector (all Mellanox NICs when empty).")
    doca_driver_version: Optional[str] = Field(
        None, description="Deploy NVIDIA's DOCA/OFED driver container at this version (e.g. 24.10-0.7.0.0-0); unset: host MOFED."
    )


class SoperatorConfig(ChartConfig):
    namespace: DnsLabel = "soperator-system"
    version: Literal["1.14.10", "4.1.7"] = Field(
        "1.14.10",
        description="soperator release; the SlurmCluster shape follows it (1.14.10: workers in the CR; 4.1.7: one NodeSet per GPU pool).",
    )
    repository: str = "oci://cr.eu-north1.nebius.cloud/soperator"


class MariadbOperatorConfig(ChartConfig):
    namespace: DnsLabel = "mariadb-operator"
    version: str = Field("0.29.0", description="0.29.0 serves the k8s.mariadb.com/v1alpha1 API soperator 1.14.10 is built against.")
    repository: str = Field(
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
    version: Annotated[str, Field(pattern=r"^v\d+\.\d+\.\d+$")] = "v1.16.2"
    repository: str = "https://charts.jetstack.io"


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


class OperatorsConfig(Model):
    gpu_operator: GpuOperatorConfig = GpuOperatorConfig()
    network_operator: NetworkOperatorConfig = NetworkOperatorConfig()
    soperator: SoperatorConfig = SoperatorConfig()
    mariadb_operator: MariadbOperatorConfig = MariadbOperatorConfig()
    cert_manager: CertManagerConfig = CertManagerConfig()
    ack_slurm_operator: AckSlurmOperatorConfig = AckSlurmOperatorConfig()
    slinky: SlinkyOperatorConfig = SlinkyOperatorConfig()


# ---------------------------------------------------------------------------
# Storage


class NfsServer(Model):
    server: str = Field(..., min_length=1, description="NFS server address.")
    share: str = Field(..., pattern=r"^/", description="Exported path.")
    mount_options: list[str] = Field(default_factory=lambda: ["nfsvers=4.1", "hard"])


class AlibabaNas(Model):
    server: str = Field(..., min_length=1, description="NAS mount target, e.g. xxx.cn-hangzhou.nas.aliyuncs.com:/share")
    volume_as: Literal["subpath", "filesystem"] = "subpath"
    mount_options: list[str] = Field(default_factory=lambda: ["nolock,tcp,noresvport", "vers=3"])


class StorageClassConfig(Model):
    """The read-write-many class: an existing one by name, or one we declare."""

    kind: Literal["existing", "nfs", "alibabaNas"] = Field("existing", description="existing | nfs | alibabaNas")
    name: DnsLabel = Field("default", description="StorageClass name (FPT: default or xplat-nfs).")
    nfs: Optional[NfsServer] = None
    alibaba_nas: Optional[AlibabaNas] = None

    @model_validator(mode="after")
    def _backend_present(self) -> StorageClassConfig:
        if self.kind == "nfs" and self.nfs is None:
            raise ValueError("kind 'nfs' needs the nfs block (server, share)")
        if self.kind == "alibabaNas" and self.alibaba_nas is None:
            raise ValueError("kind 'alibabaNas' needs the alibabaNas block (server)")
        return self


class StaticNfsVolume(Model):
    """A pre-existing NFS export bound to the claim through a static PersistentVolume."""

    server: str = Field(..., min_length=1)
    path: str = Field(..., pattern=r"^/")
    mount_options: list[str] = Field(default_factory=lambda: ["nfsvers=4.1", "hard"])


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
    mount_path: str = Field(..., pattern=r"^/", description="Same path on login and worker nodes.")
    size: Quantity = "100Gi"
    static_nfs: Optional[StaticNfsVolume] = None
    adopt: bool = Field(False, description=ADOPT_DESCRIPTION)

    @property
    def claim_name(self) -> str:
        return f"jail-submount-{self.name}-pvc"


class StorageConfig(Model):
    storage_class: StorageClassConfig = StorageClassConfig()
    jail: JailConfig = JailConfig()
    controller_spool: SpoolConfig = SpoolConfig()
    submounts: list[SubmountConfig] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_submounts(self) -> StorageConfig:
        _require_unique([s.name for s in self.submounts], "submount names")
        _require_unique([s.mount_path for s in self.submounts], "submount mountPaths")
        return self


# ---------------------------------------------------------------------------
# LDAP


class LdapTls(Model):
    enabled: bool = False
    secret_name: Optional[DnsLabel] = Field(None, description="kubernetes.io/tls Secret with tls.crt, tls.key, ca.crt.")

    @model_validator(mode="after")
    def _secret_when_enabled(self) -> LdapTls:
        if self.enabled and not self.secret_name:
            raise ValueError("tls.enabled needs tls.secretName (a kubernetes.io/tls Secret with ca.crt)")
        return self


class LdapConfig(Model):
    enabled: bool = True
    image: str = Field(
        "docker.io/bitnamilegacy/openldap:2.6.10",
        description="OpenLDAP server image (bitnami's env contract); mirror it into your registry for production.",
    )
    base_dn: str = Field("dc=example,dc=org", pattern=r"^(dc|o|ou)=[^,]+(,(dc|o|ou)=[^,]+)*$")
    organisation: str = Field("Example Org", min_length=1)
    admin_username: str = Field("admin", pattern=r"^[a-z][a-z0-9_-]*$")
    storage_size: Quantity = "8Gi"
    storage_class_name: Optional[str] = Field(None, description="RWO class for the LDAP data volume; cluster default when unset.")
    tls: LdapTls = LdapTls()
    php_ldap_admin: bool = Field(False, description="Deploy phpLDAPadmin (ClusterIP only).")
    php_ldap_admin_image: str = "docker.io/osixia/phpldapadmin:0.9.0"


# ---------------------------------------------------------------------------
# Slurm


class PodResources(Model):
    cpu: Quantity
    memory: Quantity
    ephemeral_storage: Quantity


class WorkerResources(PodResources):
    gpu: int = Field(8, ge=0)
    rdma: int = Field(1, ge=0)


def _res(cpu: str, memory: str, ephemeral: str) -> PodResources:
    return PodResources(cpu=cpu, memory=memory, ephemeral_storage=ephemeral)


class ImagesConfig(Model):
    registry: str = Field("cr.eu-north1.nebius.cloud/soperator", description="soperator image registry.")
    tag: Optional[str] = Field(
        None,
        description="Image tag shared by soperator's Slurm images; default: the release's own "
        "(1.14.10-jammy-slurm24.05.2 for 1.14.10, 4.1.7-slurm25.11.3 for 4.1.7).",
    )
    mariadb: str = "docker-registry1.mariadb.com/library/mariadb:11.4.3"


class ControllerConfig(Model):
    size: int = Field(1, ge=1, le=2)
    slurmctld: PodResources = _res("1000m", "3Gi", "20Gi")
    munge: PodResources = _res("1000m", "1Gi", "5Gi")


class WorkerConfig(Model):
    size: int = Field(8, ge=0, description="Worker count; workers are worker-[0..size-1].")
    cgroup_version: Literal["v1", "v2"] = "v2"
    slurmd: WorkerResources = WorkerResources(cpu="110000m", memory="1220Gi", ephemeral_storage="55Gi", gpu=8, rdma=1)
    munge: PodResources = _res("2000m", "4Gi", "5Gi")
    spool_storage_class_name: str = Field("xplat-nfs", description="Class of each worker's spool volume (ReadWriteOnce).")
    spool_size: Quantity = "120Gi"
    shared_memory_size: Quantity = "64Gi"


class LoginConfig(Model):
    size: int = Field(2, ge=1)
    service_type: Literal["NodePort", "LoadBalancer"] = "NodePort"
    node_port: int = Field(30022, ge=30000, le=32767, description="sshdServiceNodePort (30000-32767).")
    load_balancer_ip: str = Field("", description="sshdServiceLoadBalancerIP (empty: assigned by the cloud).")
    ssh_address: Optional[str] = Field(
        None,
        min_length=1,
        description="Host for sshCommand with a NodePort login (a node's address or a DNS name for the nodes); "
        "a LoadBalancer's address is read from the live Service.",
    )
    service_annotations: dict[str, str] = Field(default_factory=dict, description="sshdServiceAnnotations (e.g. a private-LB one).")
    allowed_source_ranges: list[Cidr] = Field(
        default_factory=list,
        description="CIDRs allowed to reach SSH: declares our own LoadBalancer Service with loadBalancerSourceRanges.",
    )
    ssh_root_public_keys: list[str] = Field(default_factory=list, description="Root's authorized keys.")
    sshd: PodResources = _res("3000m", "9Gi", "30Gi")
    munge: PodResources = _res("500m", "500Mi", "5Gi")

    @model_validator(mode="after")
    def _keys_look_like_keys(self) -> LoginConfig:
        for key in self.ssh_root_public_keys:
            if not re.match(r"^(ssh-(ed25519|rsa|dss)|ecdsa-sha2-nistp\d+|sk-\S+) [A-Za-z0-9+/=]+( .*)?$", key):
                raise ValueError(f"sshRootPublicKeys entry {key[:40]!r} is not an OpenSSH public key line")
        return self


class ExternalDbConfig(Model):
    host: str = Field(..., min_length=1)
    port: Port = 3306
    user: str = Field("slurm", min_length=1)
    password_secret_name: DnsLabel = Field(..., description="Existing Secret holding the database password.")
    password_secret_key: str = "password"


class AccountingConfig(Model):
    enabled: bool = True
    database: Literal["mariadbOperator", "external"] = "mariadbOperator"
    external: Optional[ExternalDbConfig] = None
    storage_class_name: str = Field("xplat-nfs", description="Class of the MariaDB data volume.")
    storage_size: Quantity = "10Gi"
    mariadb: PodResources = _res("1000m", "1Gi", "5Gi")
    slurmdbd: PodResources = _res("1000m", "3Gi", "5Gi")
    munge: PodResources = _res("1000m", "1Gi", "5Gi")

    @model_validator(mode="after")
    def _external_block(self) -> AccountingConfig:
        if self.enabled and self.database == "external" and self.external is None:
            raise ValueError("database 'external' needs the external block (host, passwordSecretName)")
        return self


class ExporterConfig(Model):
    enabled: bool = True
    resources: PodResources = _res("250m", "256Mi", "500Mi")
    munge: PodResources = _res("1000m", "1Gi", "5Gi")


class NcclBenchmarkConfig(Model):
    enabled: bool = True
    schedule: str = Field("0 */3 * * *", pattern=r"^(\S+\s+){4}\S+$", description="Cron schedule.")
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

    server: str = Field(..., min_length=1, description="NAS mount target, e.g. 0a1b2c3d4e-abc12.cn-hangzhou.nas.aliyuncs.com")
    path: str = Field("/", pattern=r"^/", description="Directory on the NAS.")
    size: Quantity = "1Ti"
    claim_name: DnsLabel = Field("slurm-home-pvc", description="PersistentVolumeClaim mounted at /home in every pod.")
    nfs_version: Literal["3", "4.0"] = Field("3", description="NFS protocol version (the CSI driver's `vers`).")


class AckAutoscalingConfig(Model):
    """Slurm power saving with CLOUD nodes: slurmctld-copilot resumes/suspends workers by patching the CR."""

    enabled: bool = False
    max_nodes_per_group: int = Field(16, ge=1, description="CLOUD node names declared per worker group (<cluster>-worker-<group>-[0-N-1]).")
    suspend_time: int = Field(600, ge=1, description="SuspendTime: idle seconds before a worker is suspended.")
    suspend_timeout: int = Field(600, ge=1)
    resume_timeout: int = Field(600, ge=1)
    resume_rate: int = Field(1, ge=0, description="Nodes resumed per minute.")
    suspend_rate: int = Field(1, ge=0, description="Nodes suspended per minute.")
    suspend_program: str = Field("/slurm-suspend.sh", pattern=r"^/", description="As the guide's image ships it.")
    resume_program: str = Field("/slurm-resume.sh", pattern=r"^/")


class AckClusterConfig(Model):
    """ack-slurm-operator's SlurmCluster: images are bring-your-own, config comes from our ConfigMap."""

    image: str = Field(..., min_length=1, description="Slurm image for head and workers (the guide's, or your own build).")
    slurm_conf_path: str = Field("/var/slurm", pattern=r"^/", description="slurmConfPath: where the slurm.conf ConfigMap is mounted.")
    munge_key_dir: str = Field("/var/munge", pattern=r"^/", description="Where the munge Secret is mounted; mungeConfPath is <dir>/munge.key.")
    slurmctld_host: Optional[str] = Field(None, description="SlurmctldHost in slurm.conf; default <cluster>-head.")
    home: Optional[HomeNasConfig] = Field(None, description="Shared /home on NAS (static PV + PVC), mounted in head and workers.")
    slurmdbd_conf_secret_name: Optional[DnsLabel] = Field(
        None, description="Existing Secret with key slurmdbd.conf (holds the DB password); needed with slurm.accounting.enabled."
    )
    autoscaling: AckAutoscalingConfig = AckAutoscalingConfig()
    extra_slurm_conf: list[str] = Field(default_factory=list, description="Extra slurm.conf lines, appended verbatim.")


class SlinkyClusterConfig(Model):
    registry: str = Field("ghcr.io/slinkyproject", description="Slinky image registry (slurmctld, slurmd, login, slurmdbd, slurmrestd).")
    tag: str = Field("26.05-ubuntu26.04", description="Slurm image tag of slurm-operator 1.2.1's chart.")
    controller_storage_size: Quantity = Field("4Gi", description="slurmctld save-state volume (ReadWriteOnce).")
    controller_storage_class_name: Optional[str] = Field(None, description="Class of that volume; cluster default when unset.")
    rest_api: bool = Field(False, description="Declare a RestApi (slurmrestd).")
    rest_api_replicas: int = Field(1, ge=1)
    rest_api_resources: PodResources = _res("500m", "1Gi", "1Gi")


class PartitionConfig(Model):
    """A Slurm partition over GPU pools (soperator 4.x, ACK and Slinky; soperator 1.14.10 has one implicit partition)."""

    name: DnsLabel
    pools: list[DnsLabel] = Field(default_factory=list, description="GPU pool names; empty: every GPU pool.")
    default: bool = Field(False, description="The partition jobs go to when they name none.")
    config: str = Field("MaxTime=INFINITE State=UP", pattern=r"^[^\n]*$", description="Further PartitionName options.")


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
    cluster: ClusterConfig = ClusterConfig()
    kubernetes: KubernetesConfig = KubernetesConfig()
    node_pools: list[NodePoolConfig] = Field(default_factory=_default_pools, min_length=1)
    operators: OperatorsConfig = OperatorsConfig()
    storage: StorageConfig = StorageConfig()
    ldap: LdapConfig = LdapConfig()
    slurm: SlurmConfig = SlurmConfig()

    @property
    def gpu_pools(self) -> list[NodePoolConfig]:
        return [pool for pool in self.node_pools if pool.has_gpu]

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

    @model_validator(mode="after")
    def _cross_checks(self) -> PlatformConfig:
        _require_unique([pool.name for pool in self.node_pools], "nodePools names")
        if not self.gpu_pools:
            raise ValueError("nodePools: at least one pool needs gpusPerNode > 0 to host Slurm workers")
        ops = self.operators
        if (
            ops.gpu_operator.install
            and ops.network_operator.install
            and ops.gpu_operator.node_feature_discovery
            and ops.network_operator.node_feature_discovery
        ):
            raise ValueError(
                "operators: gpuOperator.nodeFeatureDiscovery and networkOperator.nodeFeatureDiscovery are both true; "
                "only one Node Feature Discovery may run in the cluster"
            )
        populate = self.slurm.populate_jail
        if populate.overwrite and self.jail_is_static and not populate.wipe_existing_jail_intended:
            raise ValueError(
                "slurm.populateJail.overwrite is true while storage.jail.staticNfs binds an existing jail: "
                "the populate job would erase it; set slurm.populateJail.wipeExistingJailIntended: true if that is intended"
            )
        worker_gpus = self.slurm.worker.slurmd.gpu
        if worker_gpus > max(pool.gpus_per_node for pool in self.gpu_pools):
            raise ValueError(
                f"slurm.worker.slurmd.gpu is {worker_gpus}, more than any GPU pool has per node "
                f"({max(pool.gpus_per_node for pool in self.gpu_pools)})"
            )
        if (
            self.environment == "prod"
            and self.slurm.login.service_type == "LoadBalancer"
            and not (self.slurm.login.allowed_source_ranges or self.slurm.login.service_annotations)
        ):
            raise ValueError("slurm.login: a production LoadBalancer needs allowedSourceRanges or a private-LB serviceAnnotations entry")
        self._check_adoption()
        return self

    def _check_adoption(self) -> None:
        adopted = self.adopted_objects
        if not adopted:
            return
        if self.render_only:
            raise ValueError(
                f"{', '.join(adopted)}: adoption imports live objects, but kubernetes.renderYamlToDirectory "
                "makes this a render-only stack with no cluster to import from"
            )
        if self.cluster.create_namespace:
            raise ValueError(
                f"{', '.join(adopted)}: adopted objects live in an existing namespace; "
                f"set cluster.createNamespace: false (namespace {self.cluster.namespace!r})"
            )
        if self.slurm.adopt_munge_secret and self.slurm.munge_key_rotation:
            raise ValueError(
                "slurm.adoptMungeSecret keeps the existing key, so slurm.mungeKeyRotation cannot rotate it; "
                "set adoptMungeSecret: false to let Pulumi write (and rotate) the key"
            )

    @model_validator(mode="after")
    def _operator_checks(self) -> PlatformConfig:
        accounting = self.slurm.accounting
        if self.slurm_operator == "ack":
            if self.slurm.ack is None:
                raise ValueError("slurmOperator is ack: slurm.ack is required (at least slurm.ack.image)")
            autoscaling = self.slurm.ack.autoscaling
            too_many = sorted(p.name for p in self.gpu_pools if autoscaling.enabled and p.worker_replicas > autoscaling.max_nodes_per_group)
            if too_many:
                raise ValueError(
                    f"nodePools {', '.join(too_many)}: more Slurm workers than slurm.ack.autoscaling.maxNodesPerGroup "
                    f"({autoscaling.max_nodes_per_group}) CLOUD node names; raise it or lower slurmWorkers"
                )
            if self.slurm.controller.size != 1:
                raise ValueError("slurmOperator is ack: slurm.controller.size must be 1 (the generated slurm.conf names one SlurmctldHost)")
            if accounting.enabled and (accounting.database != "external" or not self.slurm.ack.slurmdbd_conf_secret_name):
                raise ValueError(
                    "slurmOperator is ack: slurm.accounting needs database: external and slurm.ack.slurmdbdConfSecretName "
                    "(an existing Secret with slurmdbd.conf), or slurm.accounting.enabled: false"
                )
        if self.slurm_operator == "soperator" and self.operators.soperator.version == "4.1.7" and self.slurm.controller.size != 1:
            raise ValueError("slurm.controller.size must be 1 with soperator 4.1.7 (it runs a single slurmctld)")
        if self.slurm_operator == "soperator" and self.operators.soperator.version == "1.14.10":
            if "partitions" in self.slurm.model_fields_set:
                raise ValueError("slurm.partitions: soperator 1.14.10 has one implicit partition (4.1.7 takes partitions)")
            per_pool = sorted(pool.name for pool in self.node_pools if pool.slurm_workers is not None)
            if per_pool:
                raise ValueError(
                    f"nodePools {', '.join(per_pool)}: slurmWorkers needs per-pool workers (soperator 4.1.7, ack, slinky); "
                    "soperator 1.14.10 has one worker group, sized by slurm.worker.size"
                )
        gpu_pool_names = {pool.name for pool in self.gpu_pools}
        _require_unique([p.name for p in self.slurm.partitions], "slurm.partitions names")
        if sum(p.default for p in self.slurm.partitions) > 1:
            raise ValueError("slurm.partitions: at most one partition can be the default")
        for partition in self.slurm.partitions:
            unknown = sorted(set(partition.pools) - gpu_pool_names)
            if unknown:
                raise ValueError(
                    f"slurm.partitions {partition.name}: pools {', '.join(unknown)} are not GPU pools "
                    f"(GPU pools: {', '.join(sorted(gpu_pool_names))})"
                )
        if self.slurm_operator == "slinky" and not self.ldap.enabled:
            raise ValueError("slurmOperator is slinky: its LoginSet needs an sssd.conf, so ldap.enabled must be true")
        return self


# ---------------------------------------------------------------------------
# Loading


class ConfigError(Exception):
    """Invalid stack config; the message lists every problem, one per line."""


def _describe(error: Mapping[str, Any]) -> str:
    # Errors of a model validator sit on the model's own path; list indices read as [i].
    path = ""
    for part in map(str, error["loc"]):
        path += f"[{part}]" if part.isdigit() else (f".{part}" if path else part)
    key = f"{PROJECT}:{path}" if path else f"{PROJECT}"
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        return f"{key}: unknown key (check the spelling; see config.schema.json)"
    if error["type"] == "missing":
        return f"{key}: required but not set"
    allowed = ""
    ctx = error.get("ctx") or {}
    if "expected" in ctx:
        allowed = f" (allowed: {ctx['expected']})"
    elif "pattern" in ctx:
        allowed = f" (must match {ctx['pattern']})"
    value = error.get("input")
    shown = json.dumps(value, default=str) if not isinstance(value, dict) else "{...}"
    return f"{key}: {message}{allowed}; got {shown}"


def parse_config(raw: Mapping[str, Any]) -> PlatformConfig:
    """Validate a dict of top-level keys; raise ConfigError naming every problem."""
    try:
        return PlatformConfig.model_validate(dict(raw))
    except ValidationError as error:
        lines = [_describe(e) for e in error.errors(include_url=False)]
        # The listed problems are the whole story; pydantic's traceback would only repeat them.
        raise ConfigError(f"invalid stack config ({len(lines)} problem{'s' if len(lines) > 1 else ''}):\n  " + "\n  ".join(lines)) from None


def raw_config_from_pulumi() -> dict[str, Any]:
    """Collect `slurm-platform:*` keys from the running stack's config (or mocks')."""
    from pulumi.runtime import config as runtime_config

    every_key = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    raw: dict[str, Any] = {}
    for full_key, value in every_key.items():
        namespace, _, key = full_key.partition(":")
        if namespace != PROJECT:
            continue
        # Structured values arrive as JSON text, scalars as plain strings.
        raw[key] = json.loads(value) if isinstance(value, str) and value.startswith(("[", "{")) else value
    return raw


def load_config() -> PlatformConfig:
    return parse_config(raw_config_from_pulumi())


def json_schema() -> dict[str, Any]:
    """The config's JSON Schema (by alias), as committed in config.schema.json."""
    schema = PlatformConfig.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "slurm-platform stack config (keys under `slurm-platform:`)"
    return schema

"""Slurm settings shared by every operator: controller, workers, login, accounting, partitions."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Literal, Optional

from pydantic import AfterValidator, BeforeValidator, Field
from slurm_rules import kube_rules

from .ack import AckClusterConfig
from .cloud import cloud_note
from .fields import (
    Cidr,
    ConfLine,
    DataKey,
    DnsLabel,
    DnsSubdomain,
    Host,
    ImageReference,
    ImageRepository,
    ImageTag,
    IpAddress,
    Model,
    PodResources,
    Port,
    Problem,
    PublicKey,
    QualifiedName,
    SharedMemorySize,
    VolumeSize,
    WorkerResources,
    _check_cron,
    duplicates,
    matching,
    pod_resources,
)
from .slinky import SlinkyClusterConfig
from .slurm_operators import settings_of

if TYPE_CHECKING:
    from .platform import PlatformConfig

# ---------------------------------------------------------------------------
# Slurm


class ImagesConfig(Model):
    registry: ImageRepository = Field("cr.eu-north1.nebius.cloud/soperator", description="soperator image registry.")
    tag: Optional[ImageTag] = Field(
        None,
        description="Image tag shared by soperator's Slurm images; default: the release's own "
        "(1.14.10-jammy-slurm24.05.2 for 1.14.10, 4.1.7-slurm25.11.3 for 4.1.7).",
    )
    mariadb: ImageReference = Field("docker-registry1.mariadb.com/library/mariadb:11.4.3", description="MariaDB image for the accounting database.")


class ControllerConfig(Model):
    size: int = Field(1, ge=1, le=2, description="slurmctld replicas (a second one is a backup controller).")
    slurmctld: PodResources = Field(pod_resources("1000m", "3Gi", "20Gi"), description="slurmctld container requests.")
    munge: PodResources = Field(pod_resources("1000m", "1Gi", "5Gi"), description="munge sidecar container requests.")


class WorkerConfig(Model):
    size: int = Field(8, ge=0, description="Worker count; workers are worker-[0..size-1].")
    cgroup_version: Literal["v1", "v2"] = Field(
        "v2", description="cgroup version of the GPU nodes: every operator's cgroup.conf (CgroupPlugin) and soperator's cgroupVersion."
    )
    slurmd: WorkerResources = Field(
        WorkerResources(cpu="110000m", memory="1220Gi", ephemeral_storage="55Gi", gpu=8),
        description="slurmd container requests, GPUs and RDMA devices.",
    )
    munge: PodResources = Field(pod_resources("2000m", "4Gi", "5Gi"), description="munge sidecar container requests.")
    spool_storage_class_name: DnsSubdomain = Field("xplat-nfs", description="Class of each worker's spool volume (ReadWriteOnce).")
    spool_size: VolumeSize = Field("120Gi", description="Size of each worker's spool volume.")
    shared_memory_size: SharedMemorySize = Field("64Gi", description="Size of each worker's /dev/shm (NCCL and data loaders need a large one).")


class LoginConfig(Model):
    size: int = Field(2, ge=1, description="Login pods.")
    service_type: Literal["NodePort", "LoadBalancer"] = Field("NodePort", description="How SSH reaches the login pods (sshdServiceType).")
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
    ssh_root_public_keys: list[PublicKey] = Field(
        default_factory=list,
        description="Root's authorized keys (OpenSSH public key lines): the platform team's administrators only. Researchers log in "
        "as themselves with tenants[].users[].sshPublicKeys.",
    )
    sshd: PodResources = Field(pod_resources("3000m", "9Gi", "30Gi"), description="sshd container requests.")
    munge: PodResources = Field(pod_resources("500m", "500Mi", "5Gi"), description="munge sidecar container requests.")


class ExternalDbConfig(Model):
    host: Host = Field(..., description="The database server's address.")
    port: Port = Field(3306, description="The database server's port.")
    user: Annotated[
        str,
        matching(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,79}$", "a database user: a letter, digit or _, then up to 79 letters, digits, _ . or -"),
    ] = Field("slurm", description="The database user slurmdbd connects as.")
    password_secret_name: DnsSubdomain = Field(..., description="Existing Secret holding the database password.")
    password_secret_key: DataKey = Field("password", description="The key of that Secret holding the password.")


class AccountingConfig(Model):
    enabled: bool = Field(True, description="Run slurmdbd (job accounting; tenants need it).")
    database: Literal["mariadbOperator", "external"] = Field(
        "mariadbOperator", description="Where slurmdbd keeps its database: a MariaDB the MariaDB operator runs, or an external server."
    )
    external: Optional[ExternalDbConfig] = Field(None, description="The external database (with database: external).")
    storage_class_name: DnsSubdomain = Field("xplat-nfs", description="Class of the MariaDB data volume.")
    storage_size: VolumeSize = Field("10Gi", description="Size of the MariaDB data volume.")
    mariadb: PodResources = Field(pod_resources("1000m", "1Gi", "5Gi"), description="MariaDB container requests.")
    slurmdbd: PodResources = Field(pod_resources("1000m", "3Gi", "5Gi"), description="slurmdbd container requests.")
    munge: PodResources = Field(pod_resources("1000m", "1Gi", "5Gi"), description="munge sidecar container requests.")


class ExporterConfig(Model):
    enabled: bool = Field(True, description="Run the Slurm metrics exporter.")
    resources: PodResources = Field(pod_resources("250m", "256Mi", "500Mi"), description="Exporter container requests.")
    munge: PodResources = Field(pod_resources("1000m", "1Gi", "5Gi"), description="munge sidecar container requests.")


class NcclBenchmarkConfig(Model):
    enabled: bool = Field(True, description="Run soperator's periodic NCCL benchmark on the workers.")
    schedule: Annotated[str, AfterValidator(_check_cron)] = Field(
        "0 */3 * * *", description="Cron schedule of the benchmark CronJob (5 fields, or @hourly/@daily/...)."
    )
    drain_on_failure: bool = Field(True, description="Drain a Slurm node whose NCCL benchmark fails.")
    min_bandwidth_gbps: Annotated[str, matching(r"^[0-9]+(\.[0-9]+)?$", "a number of GB/s such as 400 or 412.5")] = Field(
        "400", description="thresholdMoreThan: minimum NCCL all-reduce bus bandwidth (GB/s)."
    )
    use_infiniband: Optional[bool] = Field(None, description="Unset: on when a GPU pool has RDMA.")


class PopulateJailConfig(Model):
    overwrite: bool = Field(False, description="Re-populate (ERASE) the jail on every reconcile of the job.")
    wipe_existing_jail_intended: bool = Field(False, description="Required with overwrite: true on a static jail: you mean to erase its contents.")


class ReadinessConfig(Model):
    """How `pulumi up` awaits Slurm (never on a render-only stack: there is no cluster to watch)."""

    await_available: bool = Field(
        True,
        description="Wait until the operator reports Slurm ready (pulumi.com/waitFor): soperator's SlurmCluster .status.phase "
        "Available, ACK's SlurmCluster .status.state ready, every Slinky NodeSet's .status.readyReplicas equal to its replicas.",
    )
    timeout_minutes: int = Field(
        40,
        ge=5,
        le=24 * 60,
        description="Create/update timeout; FPT's guide measures ~20 minutes for a first install (populate-jail job, then the pods).",
    )


class PartitionConfig(Model):
    """A Slurm partition over GPU pools (soperator 4.x, ACK and Slinky; soperator 1.14.10 has one implicit partition)."""

    name: DnsLabel = Field(..., description="PartitionName (what jobs name with -p).")
    pools: list[DnsLabel] = Field(default_factory=list, description="GPU pool names; empty: every GPU pool.")
    default: bool = Field(False, description="The partition jobs go to when they name none.")
    config: ConfLine = Field("MaxTime=INFINITE State=UP", description="Further PartitionName options (one slurm.conf line).")


def default_partitions() -> list[PartitionConfig]:
    return [PartitionConfig(name="main", default=True)]


SlurmOperatorKind = Literal["soperator", "ack", "slinky"]


class OperatorSwitchConfig(Model):
    """The acknowledgement a switch of Slurm operator on a live stack needs (components/operator_moves.py)."""

    from_operator: SlurmOperatorKind = Field(..., alias="from", description="The Slurm operator the stack ran until now (its slurmOperator output).")
    acknowledged: bool = Field(
        False,
        description="true: the old operator's Slurm cluster goes (its slurmctld state, queue and running jobs); its data "
        "volumes (jail, spool) and munge key stay in the stack, protected and retained. Keep the key while they do.",
    )


class SlurmConfig(Model):
    """The Slurm cluster: its pods, accounting, login exposure, partitions and each operator's own settings."""

    images: ImagesConfig = Field(ImagesConfig(), description="soperator's images (and the accounting MariaDB's).")
    controller: ControllerConfig = Field(ControllerConfig(), description="slurmctld.")
    worker: WorkerConfig = Field(WorkerConfig(), description="The Slurm workers (slurmd).")
    login: LoginConfig = Field(LoginConfig(), description="The login pods and how SSH reaches them.")
    accounting: AccountingConfig = Field(AccountingConfig(), description="slurmdbd and its database.")
    exporter: ExporterConfig = Field(ExporterConfig(), description="The Prometheus exporter of Slurm metrics (soperator).")
    nccl_benchmark: NcclBenchmarkConfig = Field(NcclBenchmarkConfig(), description="soperator's periodic NCCL benchmark.")
    populate_jail: PopulateJailConfig = Field(PopulateJailConfig(), description="soperator's populate-jail job, which fills the jail from the image.")
    munge_key_rotation: int = Field(0, ge=0, description="Bump to generate a new munge key on the next update.")
    adopt_munge_secret: bool = Field(
        False,
        description="Secret <cluster>-munge already exists (made by hand or by soperator): import it and keep its key; "
        "Pulumi owns the object but not the key until this is turned off (which writes a new key).",
    )
    readiness: ReadinessConfig = ReadinessConfig()
    partitions: list[PartitionConfig] = Field(
        default_factory=default_partitions, min_length=1, description="Slurm partitions (default: `main` over every GPU pool)."
    )
    ack: Optional[AckClusterConfig] = Field(None, description="ack-slurm-operator settings (required with slurmOperator: ack).")
    slinky: SlinkyClusterConfig = Field(SlinkyClusterConfig(), description="Slinky's images and volumes (slurmOperator: slinky).")
    operator_switch: Optional[OperatorSwitchConfig] = Field(
        None, description="Set when slurmOperator changes on a stack that has run: the old operator and the acknowledgement."
    )


def partition_problems(config: PlatformConfig) -> Iterator[Problem]:
    slurm = config.slurm
    for index, name in duplicates([p.name for p in slurm.partitions]):
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


def login_lb_annotations(config: PlatformConfig) -> Optional[dict[str, str]]:
    """The annotations of the login LoadBalancer the stack declares (its own or the operator's), None without one.

    ACK's login is always a LoadBalancer, private by default; the user's annotations override that default."""
    login = config.slurm.login
    operator = settings_of(config)
    if operator.LOGIN_ALWAYS_LOAD_BALANCER:
        return {**operator.DEFAULT_LOGIN_ANNOTATIONS, **login.service_annotations}
    if login.allowed_source_ranges or login.service_type == "LoadBalancer":
        return dict(login.service_annotations)
    return None


def login_problems(config: PlatformConfig) -> Iterator[Problem]:
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
    if login.load_balancer_ip and login.service_type != "LoadBalancer":
        yield Problem(
            (*path, "loadBalancerIp"),
            f"only applies to serviceType LoadBalancer (serviceType is {login.service_type})",
            login.load_balancer_ip,
        )
    annotations = login_lb_annotations(config)
    for problem in kube_rules.lb_annotation_problems(login.service_annotations, config.cloud):
        yield Problem((*path, "serviceAnnotations"), problem + cloud_note(config))
    if config.environment != "prod" or annotations is None:
        return
    example = kube_rules.private_lb_example(config.cloud)
    operator = settings_of(config)
    if not ranges and kube_rules.private_lb_annotation(annotations, config.cloud) is None:
        always = operator.LOGIN_ALWAYS_LOAD_BALANCER
        what = f"{operator.NAME}'s login is always a LoadBalancer (serviceAnnotations override its intranet default), and a production one"
        yield Problem(
            (*path, "allowedSourceRanges" if always else "serviceType"),
            f"{what if always else 'a production LoadBalancer'} needs allowedSourceRanges "
            f"or {config.cloud}'s private-LB annotation in serviceAnnotations ({example}){cloud_note(config)}",
            ranges if always else login.service_type,
        )
    if login.node_ports_firewalled:
        return
    if operator.LOGIN_KEEPS_NODE_PORTS:
        why = (
            f"{operator.NAME} keeps its login Service on NodePort {login.node_port} beside the restricted LoadBalancer"
            if ranges
            else f"{operator.NAME}'s login LoadBalancer keeps node ports (its CRD cannot turn them off)"
        )
        closable = ""
    elif not kube_rules.pod_backends(annotations, config.cloud):
        why = f"{config.cloud}'s load balancer reaches the login pods through node ports{cloud_note(config)}"
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

"""Alibaba ack-slurm-operator: its chart, its SlurmCluster settings and their rules."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any, Literal, Optional, get_args

from pydantic import BeforeValidator, Field, model_validator
from pydantic_core import PydanticCustomError
from slurm_rules import confinement, kube_rules

from .fields import ChartConfig, ConfLine, DnsLabel, DnsSubdomain, Host, ImageReference, Model, Problem, SafePath, SlurmReleaseText, VolumeSize

if TYPE_CHECKING:
    from .platform import PlatformConfig


# What the rules across concerns ask of each Slurm operator (components/config/slurm_operators.py).
NAME = "ACK"
USES_JAIL = False  # its pods have their own root file systems
# ACK's login is always a LoadBalancer, private (intranet) by default; the user's annotations override that.
LOGIN_ALWAYS_LOAD_BALANCER = True
DEFAULT_LOGIN_ANNOTATIONS = kube_rules.PRIVATE_LB_ANNOTATIONS["alibaba"]
LOGIN_KEEPS_NODE_PORTS = False
# The Slurm in the ACK guide's image, slurm:23.06-1.6-aliyun-...: its tag is Alibaba's (there is no Slurm 23.06),
# its slurmctld is 23.02.7. Images are bring-your-own, so the release is config.
DEFAULT_SLURM_RELEASE = "23.02"


def workers_sized_by_worker_size(config: PlatformConfig) -> bool:
    return False  # per pool


# The SlurmCluster APIs of ack-slurm-operator's releases. Which one an installed operator serves is known to the
# cluster only (the chart is not public, nor which of its versions serves which): a value that is neither is told
# how to ask it, and given no generation guessed from its spelling.
ApiGeneration = Literal["2024-06", "2024-12"]


def _served_api(value: Any) -> Any:
    if value not in get_args(ApiGeneration):
        raise PydanticCustomError(
            "ack_api_generation",
            "must be the SlurmCluster API the installed ack-slurm-operator serves, 2024-06 (spec.headGroupSpec) or 2024-12 "
            "(spec.slurmctld), and which one cannot be told from this value: ask the cluster, `kubectl explain slurmcluster.spec` "
            "lists slurmctld on 2024-12 and headGroupSpec on 2024-06",
        )
    return value


class AckSlurmOperatorConfig(ChartConfig):
    """Alibaba's ack-slurm-operator. Its chart is not public: the guide installs it from the ACK marketplace."""

    install: bool = Field(False, description="Declare the Helm release; the default false matches the guide (ACK marketplace).")
    namespace: DnsLabel = Field(
        "ack-slurm-operator", description="Namespace the chart is installed in (and its namespace declared, unless a portal installed it)."
    )
    version: str = Field("", description="Chart version (required with install: true).")
    repository: str = Field("", description="Where the chart is mirrored (required with install: true).")
    api_generation: Annotated[ApiGeneration, BeforeValidator(_served_api)] = Field(
        "2024-12",
        description="SlurmCluster API the installed operator serves: 2024-06 (spec.headGroupSpec) or 2024-12 (spec.slurmctld, slurmdbd, slurmrestd).",
    )

    @model_validator(mode="after")
    def _chart_named_when_installed(self) -> AckSlurmOperatorConfig:
        if self.install and not (self.version and self.repository):
            raise ValueError("install: true needs version and repository (the chart is not published in a public repo)")
        return self


# ---------------------------------------------------------------------------
# Per-operator Slurm settings (the operator-neutral ones above are shared)


class HomeNasConfig(Model):
    """The guide's shared /home: an existing NAS file system bound through a static PersistentVolume."""

    server: Host = Field(..., description="NAS mount target, e.g. 0a1b2c3d4e-abc12.cn-hangzhou.nas.aliyuncs.com")
    path: SafePath = Field("/", description="Directory on the NAS.")
    size: VolumeSize = Field("1Ti", description="Size of the /home claim (NAS bills what is used).")
    claim_name: DnsLabel = Field("slurm-home-pvc", description="PersistentVolumeClaim mounted at /home in every pod.")
    nfs_version: Literal["3", "4.0"] = Field("3", description="NFS protocol version (the CSI driver's `vers`).")


class AckAutoscalingConfig(Model):
    """Slurm power saving with CLOUD nodes. The copilot runs in its own pod (the only ACK pod with a token, never
    the head users log into): it watches sinfo for powering nodes and runs these programs, which patch the CR."""

    enabled: bool = Field(False, description="Scale worker groups with slurmctld-copilot: CLOUD nodes resumed and suspended on demand.")
    max_nodes_per_group: int = Field(16, ge=1, description="CLOUD node names declared per worker group (<cluster>-worker-<group>-[0-N-1]).")
    suspend_time: int = Field(600, ge=1, description="SuspendTime: idle seconds before a worker is suspended.")
    suspend_timeout: int = Field(600, ge=1, description="SuspendTimeout: seconds a node may take to power down.")
    resume_timeout: int = Field(600, ge=1, description="ResumeTimeout: seconds a node may take to power up and register.")
    resume_rate: int = Field(1, ge=0, description="Nodes resumed per minute.")
    suspend_rate: int = Field(1, ge=0, description="Nodes suspended per minute.")
    suspend_program: SafePath = Field(
        "/slurm-suspend.sh", description="Run by the copilot pod once per node powering down, as the guide's image ships it."
    )
    resume_program: SafePath = Field("/slurm-resume.sh", description="Run by the copilot pod once per node powering up.")


class AckClusterConfig(Model):
    """ack-slurm-operator's SlurmCluster: images are bring-your-own, config comes from our ConfigMap."""

    image: ImageReference = Field(..., description="Slurm image for head and workers (the guide's, or your own build).")
    slurm_release: SlurmReleaseText = Field(
        DEFAULT_SLURM_RELEASE,
        description="The Slurm release in that image, YY.MM or YY.MM.P (the ACK guide's image, tagged slurm:23.06-..., carries 23.02.7): "
        "slurm.conf and gres.conf are rendered for it, and slurm.ack.extraSlurmConf lines it does not accept are refused.",
    )
    # The operator's init script copies from these paths: shell-safe characters only.
    slurm_conf_path: SafePath = Field("/var/slurm", description="slurmConfPath: where the slurm.conf ConfigMap is mounted.")
    munge_key_dir: SafePath = Field("/var/munge", description="Where the munge Secret is mounted; mungeConfPath is <dir>/munge.key.")
    slurmctld_host: Optional[DnsSubdomain] = Field(
        None, description="SlurmctldHost in slurm.conf (a DNS name, it also reaches the tenants' script); default <cluster>-head."
    )
    home: Optional[HomeNasConfig] = Field(None, description="Shared /home on NAS (static PV + PVC), mounted in head and workers.")
    state_size: VolumeSize = Field(
        "10Gi", description="<cluster>-slurmctld-state: slurmctld's StateSaveLocation (every queued job), a claim kept like the jail."
    )
    state_storage_class_name: Optional[DnsSubdomain] = Field(
        None, description="Class of that claim (ReadWriteOnce); storage.storageClass.name when unset."
    )
    slurmdbd_conf_secret_name: Optional[DnsLabel] = Field(
        None, description="Existing Secret with key slurmdbd.conf (holds the DB password); needed with slurm.accounting.enabled."
    )
    autoscaling: AckAutoscalingConfig = AckAutoscalingConfig()
    extra_slurm_conf: list[ConfLine] = Field(
        default_factory=list,
        description="Extra slurm.conf lines, appended (one line each): a key the generated slurm.conf already sets, or a partition or node it already defines, is refused rather than overridden.",
    )


def slurm_release_source(config: PlatformConfig) -> tuple[tuple[str, ...], str]:
    """Where the Slurm release of the images comes from: the key and its value (images are bring-your-own)."""
    return ("slurm", "ack", "slurmRelease"), config.slurm.ack.slurm_release if config.slurm.ack else DEFAULT_SLURM_RELEASE


def storage_classes(config: PlatformConfig) -> Iterator[tuple[tuple[str, ...], Optional[str]]]:
    """(key, class) of the volumes only this operator claims: slurmctld's state (components/slurm/ack.py)."""
    if config.slurm.ack is not None:
        yield ("slurm", "ack", "stateStorageClassName"), config.slurm.ack.state_storage_class_name or config.storage.storage_class.name


def problems(config: PlatformConfig) -> Iterator[Problem]:
    """What ack-slurm-operator (components/slurm/ack.py) can render."""
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
    # A line repeating a key the generated slurm.conf sets is refused where the program adds it (slurm_rules/config_files.py).
    for index, line in enumerate(slurm.ack.extra_slurm_conf):
        key, _, value = line.partition("=")
        if reason := confinement.weakening(key, value):
            yield Problem(
                ("slurm", "ack", "extraSlurmConf", index),
                f"would undo the jobs' confinement ({reason}); the generated slurm.conf already sets "
                f"{' and '.join(confinement.SLURM_CONF_LINES)}: remove this line",
                line,
            )
    if accounting.enabled and not slurm.ack.slurmdbd_conf_secret_name:
        yield Problem(
            ("slurm", "ack", "slurmdbdConfSecretName"),
            "required when accounting is enabled with slurmOperator ack (an existing Secret holding slurmdbd.conf)",
        )

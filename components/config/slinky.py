"""SchedMD slurm-operator (Slinky): its chart and cluster settings."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal, Optional

from pydantic import Field

from .fields import (
    ChartConfig,
    DnsLabel,
    DnsSubdomain,
    ImageRepository,
    ImageTag,
    Model,
    PodResources,
    Problem,
    VolumeSize,
    chart_namespace,
    chart_repository,
    pod_resources,
)

if TYPE_CHECKING:
    from .platform import PlatformConfig


# What the rules across concerns ask of each Slurm operator (components/config/slurm_operators.py).
NAME = "slinky"
USES_JAIL = False  # its pods have their own root file systems
LOGIN_ALWAYS_LOAD_BALANCER = False
DEFAULT_LOGIN_ANNOTATIONS: dict[str, str] = {}
LOGIN_KEEPS_NODE_PORTS = False


def workers_sized_by_worker_size(config: PlatformConfig) -> bool:
    return False  # per pool


class SlinkyOperatorConfig(ChartConfig):
    """SchedMD's slurm-operator (Slinky) and its CRDs chart."""

    namespace: DnsLabel = chart_namespace("slinky")
    version: Literal["1.2.1"] = Field("1.2.1", description="slurm-operator release (API slinky.slurm.net/v1beta1).")
    repository: str = chart_repository("oci://ghcr.io/slinkyproject/charts")


class SlinkyClusterConfig(Model):
    registry: ImageRepository = Field("ghcr.io/slinkyproject", description="Slinky image registry (slurmctld, slurmd, login, slurmdbd, slurmrestd).")
    tag: ImageTag = Field("26.05-ubuntu26.04", description="Slurm image tag of slurm-operator 1.2.1's chart.")
    controller_storage_size: VolumeSize = Field("4Gi", description="slurmctld save-state volume (ReadWriteOnce).")
    controller_storage_class_name: Optional[DnsSubdomain] = Field(None, description="Class of that volume; cluster default when unset.")
    rest_api: bool = Field(False, description="Declare a RestApi (slurmrestd).")
    rest_api_replicas: int = Field(1, ge=1, description="slurmrestd replicas (with restApi).")
    rest_api_resources: PodResources = Field(pod_resources("500m", "1Gi", "1Gi"), description="slurmrestd container requests.")


def storage_classes(config: PlatformConfig) -> Iterator[tuple[tuple[str, ...], Optional[str]]]:
    """(key, class; None for the cluster's default) of the volumes only this operator claims: slurmctld's state."""
    yield ("slurm", "slinky", "controllerStorageClassName"), config.slurm.slinky.controller_storage_class_name


def slurm_release_source(config: PlatformConfig) -> tuple[tuple[str, ...], str]:
    """Where the Slurm release of the images comes from: the key and its value (the image tag)."""
    return ("slurm", "slinky", "tag"), config.slurm.slinky.tag


def problems(config: PlatformConfig) -> Iterator[Problem]:
    """What Slinky (components/slurm/slinky.py) needs."""
    if not config.ldap.enabled:
        yield Problem(("ldap", "enabled"), "must be true when slurmOperator is slinky: its LoginSet's sssd.conf binds to our LDAP", False)

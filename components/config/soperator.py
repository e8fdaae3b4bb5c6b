"""soperator (Nebius): its chart and what each release can render."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal, Optional

from pydantic import Field

from .fields import ChartConfig, ChartRepository, DnsLabel, Problem, chart_namespace, chart_repository

if TYPE_CHECKING:
    from .platform import PlatformConfig


# What the rules across concerns ask of each Slurm operator (components/config/slurm_operators.py).
NAME = "soperator"
USES_JAIL = True  # jail-pvc and controller-spool-pvc are soperator's
LOGIN_ALWAYS_LOAD_BALANCER = False
DEFAULT_LOGIN_ANNOTATIONS: dict[str, str] = {}
# Its own login Service is NodePort or LoadBalancer, always with node ports (no field closes them).
LOGIN_KEEPS_NODE_PORTS = True
# The Slurm image tag each soperator release pins (its Slurm release is in the tag).
IMAGE_TAGS = {"1.14.10": "1.14.10-jammy-slurm24.05.2", "4.1.7": "4.1.7-slurm25.11.3"}


def workers_sized_by_worker_size(config: PlatformConfig) -> bool:
    """1.14.10 sizes its one worker group with slurm.worker.size; 4.1.7 sizes them per pool."""
    return config.operators.soperator.version == "1.14.10"


class SoperatorConfig(ChartConfig):
    namespace: DnsLabel = chart_namespace("soperator-system")
    version: Literal["1.14.10", "4.1.7"] = Field(
        "1.14.10",
        description="soperator release; the SlurmCluster shape follows it (1.14.10: workers in the CR; 4.1.7: one NodeSet per GPU pool).",
    )
    repository: ChartRepository = chart_repository("oci://cr.eu-north1.nebius.cloud/soperator")
    crds_version: Optional[Literal["4.1.7"]] = Field(
        None,
        description="The CRDs chart ahead of the operator: 4.1.7 with version 1.14.10 is the upgrade's first up (the "
        "CRDs alone, so the next preview checks the 4.1.7 SlurmCluster against them); unset: version.",
    )


def image_tag(config: PlatformConfig) -> str:
    """The tag of soperator's Slurm images: slurm.images.tag, else the release's own."""
    return config.slurm.images.tag or IMAGE_TAGS[config.operators.soperator.version]


def slurm_release_source(config: PlatformConfig) -> tuple[tuple[str, ...], str]:
    """Where the Slurm release of the images comes from: the key and its value (the image tag)."""
    return ("slurm", "images", "tag"), image_tag(config)


def storage_classes(config: PlatformConfig) -> Iterator[tuple[tuple[str, ...], Optional[str]]]:
    """(key, class) of the volumes only this operator claims: each worker's spool."""
    yield ("slurm", "worker", "spoolStorageClassName"), config.slurm.worker.spool_storage_class_name


def problems(config: PlatformConfig) -> Iterator[Problem]:
    """What the chosen soperator release (components/slurm/soperator1.py, soperator4.py) can render."""
    slurm = config.slurm
    version = config.operators.soperator.version
    if version == "4.1.7" and slurm.controller.size != 1:
        yield Problem(("slurm", "controller", "size"), "must be 1 with soperator 4.1.7 (it runs a single slurmctld)", slurm.controller.size)
    crds_version = config.operators.soperator.crds_version
    if crds_version is not None and version != "1.14.10":
        yield Problem(
            ("operators", "soperator", "crdsVersion"),
            f"only the first step of the 1.14.10 -> 4.1.7 upgrade sets it (with version 1.14.10); with version {version}, remove it",
            crds_version,
        )
    tls = config.ldap.tls
    if version == "4.1.7" and config.ldap.enabled and tls.enabled and not tls.ca_config_map_name:
        yield Problem(
            ("ldap", "tls", "caConfigMapName"),
            "required with soperator 4.1.7 and tls.enabled: its sssd sidecars mount the directory's CA only from a ConfigMap "
            "(sssdLdapCAConfigMapRefName); name one holding the CA of tls.secretName as key ca.crt, e.g. "
            f"kubectl -n {config.cluster.namespace} create configmap ldap-ca --from-file=ca.crt=<the CA's PEM file>",
        )
    if version == "1.14.10" and config.tenants:
        yield Problem(
            ("tenants",),
            "soperator 1.14.10 cannot carry partitions or preemption settings; set operators.soperator.version: 4.1.7, "
            "or slurmOperator: ack or slinky",
            [t.name for t in config.tenants],
        )
    if version == "1.14.10":
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

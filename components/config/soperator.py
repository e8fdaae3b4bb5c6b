"""soperator (Nebius): its chart and what each release can render."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from .fields import ChartConfig, ChartRepository, DnsLabel, Problem

if TYPE_CHECKING:
    from .platform import PlatformConfig


class SoperatorConfig(ChartConfig):
    namespace: DnsLabel = "soperator-system"
    version: Literal["1.14.10", "4.1.7"] = Field(
        "1.14.10",
        description="soperator release; the SlurmCluster shape follows it (1.14.10: workers in the CR; 4.1.7: one NodeSet per GPU pool).",
    )
    repository: ChartRepository = "oci://cr.eu-north1.nebius.cloud/soperator"


def problems(config: PlatformConfig) -> Iterator[Problem]:
    """What the chosen soperator release (components/slurm/soperator1.py, soperator4.py) can render."""
    slurm = config.slurm
    version = config.operators.soperator.version
    if version == "4.1.7" and slurm.controller.size != 1:
        yield Problem(("slurm", "controller", "size"), "must be 1 with soperator 4.1.7 (it runs a single slurmctld)", slurm.controller.size)
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

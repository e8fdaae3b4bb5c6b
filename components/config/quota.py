"""The cloud account's quota in the stack's region: a fact about the account, kept with the stack.

`make schema` writes it into the policy pack's config (tools/policy_configs.py), where
`slurm-region-quota` compares what the stack asks with it; no quota is copied between stacks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Optional

from pydantic import Field

from .fields import Model, Problem

if TYPE_CHECKING:
    from .platform import PlatformConfig


class RegionQuotaConfig(Model):
    """What the account may use in the region, in the cloud console's units; a dimension left out is unlimited."""

    vcpu: Optional[int] = Field(None, ge=0, description="vCPUs (requests of every pod the stack runs).")
    memory_gi: Optional[int] = Field(None, ge=0, description="Memory in GiB.")
    gpus: Optional[int] = Field(None, ge=0, description="GPUs (nvidia.com/gpu).")
    storage_gi: Optional[int] = Field(None, ge=0, description="Block and file storage in GiB (claims, claim templates).")
    load_balancers: Optional[int] = Field(None, ge=0, description="LoadBalancer Services.")
    pvcs: Optional[int] = Field(None, ge=0, description="PersistentVolumeClaims.")

    def policy_quota(self) -> dict[str, int]:
        """The dimensions set, keyed as the policy pack's `slurm-region-quota.quotas.<region>` takes them."""
        return self.model_dump(by_alias=True, exclude_none=True)


def quota_problems(config: PlatformConfig) -> Iterator[Problem]:
    # In production the quota check is mandatory: without the account's numbers it would pass on anything.
    if config.environment == "prod" and config.region_quota is None:
        yield Problem(
            ("regionQuota",),
            f"is required in production: the policy pack's slurm-region-quota checks the stack against the account's quota in "
            f"region {config.region!r}, and another stack's numbers are another account's; copy them from the cloud console: "
            "slurm-platform:regionQuota: {vcpu: ..., memoryGi: ..., gpus: ..., storageGi: ..., loadBalancers: ..., pvcs: ...}",
        )

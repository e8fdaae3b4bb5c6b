"""Quota arithmetic: each tenant's QOS levels and priorities, the GPUs it may borrow, and its namespace's share of the nodes."""

from __future__ import annotations

from decimal import Decimal
from typing import Optional

from slurm_rules import kube_rules

from ..config import NodePoolConfig, PlatformConfig, TenantConfig, quantity_value

LEVELS = ("prod", "test", "oppo")


GUARANTEED_LEVELS = ("prod", "test")


# Slurm QOS priorities, OpenPAI's prod 100 / test 10; oppo lowest (HiveD's -1; Slurm's floor is 0).
QOS_PRIORITY = {"prod": 100, "test": 10, "oppo": 0}


# Kubernetes pod priorities in the same order; oppo below the default 0, like HiveD's -1.
POD_PRIORITY = {"prod": 100000, "test": 10000, "oppo": -1}


GPU = "nvidia.com/gpu"


def qos_names(tenant: TenantConfig) -> list[str]:
    return [level for level in LEVELS if level in tenant.priorities]


def guaranteed_qos(tenant: TenantConfig) -> list[str]:
    return [level for level in GUARANTEED_LEVELS if level in tenant.priorities]


def default_qos(tenant: TenantConfig) -> str:
    """test when allowed (OpenPAI's default level), else prod."""
    return guaranteed_qos(tenant)[-1]


def borrowable_gpus(config: PlatformConfig, tenant: TenantConfig) -> int:
    """GPUs its oppo jobs may use beyond the guarantee: the cap, at most every other GPU of the Slurm workers."""
    if "oppo" not in tenant.priorities:
        return 0
    others = config.slurm_gpus - tenant.guaranteed_gpus
    return others if tenant.borrowing_cap is None else min(tenant.borrowing_cap, others)


def kueue_borrowing_limit(tenant: TenantConfig) -> Optional[int]:
    """What its Kubernetes jobs may borrow per pool through Kueue: nothing without the oppo level
    (borrowing is oppo's), else its borrowingCap (unset: no limit)."""
    return 0 if "oppo" not in tenant.priorities else tenant.borrowing_cap


def node_share_amounts(pool: NodePoolConfig, gpus: int) -> dict[str, Decimal]:
    """`gpus` of the pool's GPUs, with the same share of a node's cpu (whole millicores) and memory
    (whole MiB), as numbers."""
    share = Decimal(gpus) / pool.gpus_per_node
    return {
        "cpu": Decimal(int(quantity_value(pool.cpu_per_node) * share * 1000)) / 1000,
        "memory": Decimal(int(quantity_value(pool.memory_per_node) * share) // 2**20 * 2**20),
        GPU: Decimal(gpus),
    }


def as_quantities(amounts: dict[str, Decimal]) -> dict[str, str]:
    """Each amount in the form Kubernetes writes it back ("112", "1250Gi", "8", memory in binary units):
    Kueue's webhook stores a ClusterQueue's quotas that way, and any other spelling is a diff on every up."""
    return {name: kube_rules.canonical_quantity(amount, binary=name.endswith("memory")) for name, amount in amounts.items()}


def node_share(pool: NodePoolConfig, gpus: int) -> dict[str, str]:
    """`gpus` of the pool's GPUs, with the same share of a node's cpu and memory, as quantities."""
    return as_quantities(node_share_amounts(pool, gpus))


def namespace_pool_gpus(config: PlatformConfig, tenant: TenantConfig) -> dict[str, int]:
    """Per GPU pool, the GPUs its namespace's pods may request: its cells there; with Kueue, at least the
    most Kueue can admit for it (its kueueCells plus what it may borrow), so the quota never refuses a pod
    Kueue admitted. Without a borrowing limit that is the pool's Kueue nodes' GPUs, not the cohort's sum
    (which the fit check keeps below them): the quota then changes with the nodes, not with every tenant added."""
    if not config.operators.kueue.enabled:
        return {pool.name: sum(c.gpus_per_cell * c.cells for c in tenant.cells if c.pool == pool.name) for pool in config.gpu_pools}
    limit = kueue_borrowing_limit(tenant)
    gpus = {}
    for pool in config.gpu_pools:
        kueue_node_gpus = pool.kueue_node_count * pool.gpus_per_node
        gpus[pool.name] = kueue_node_gpus if limit is None else min(tenant.kueue_gpus(pool.name) + limit, kueue_node_gpus)
    return gpus


def namespace_gpu_quota(config: PlatformConfig, tenant: TenantConfig) -> int:
    return sum(namespace_pool_gpus(config, tenant).values())


def namespace_compute_quota(config: PlatformConfig, tenant: TenantConfig) -> dict[str, str]:
    """Beside the GPU quota: the same share of those GPUs' nodes' cpu and memory (as Kueue's ClusterQueue
    gives them), so pods without GPUs cannot take the nodes' cpu or memory either. Requests, what the
    scheduler reserves: a quota on limits would need limits on every container, and a default limit
    below a container's own request makes the pod invalid."""
    pools = {pool.name: pool for pool in config.gpu_pools}
    shares = [node_share_amounts(pools[name], gpus) for name, gpus in namespace_pool_gpus(config, tenant).items()]
    return as_quantities({f"requests.{resource}": sum((s[resource] for s in shares), Decimal(0)) for resource in ("cpu", "memory")})

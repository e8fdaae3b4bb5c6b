"""The tenants' GPU layout as a reviewer reads it in a preview: per GPU pool, which nodes hold
which tenant's cells (Slurm's on its workers, Kueue's on the other nodes), the reservations that
keep them, and what stays free.

Drawn from the placement the program deploys: `cell_fit.node_cells`, the same function behind
the reservations (`tenancy.reservations` through `owned_nodes`) and the fit check, never a
second computation. Node numbers are places in that placement, not node names: Slurm picks a
reservation's nodes among the pool's by its feature, and Kueue admits by quota.
"""

from __future__ import annotations

from itertools import groupby

from slurm_rules import cell_fit

from .config import NodePoolConfig, PlatformConfig
from .tenancy import cell_requests, reservations


def _cells(node: tuple[tuple[str, int], ...], gpus_per_node: int) -> str:
    """`vision 4+4, nlp 2, free 2`; a cell larger than a node shows on each of its nodes."""
    parts = []
    for tenant, cells in groupby(node, key=lambda cell: cell[0]):
        sizes = [size for _, size in cells]
        parts.append(f"{tenant} " + "+".join(f"{gpus_per_node} of a {size}-GPU cell" if size > gpus_per_node else str(size) for size in sizes))
    free = gpus_per_node - sum(min(size, gpus_per_node) for _, size in node)
    return ", ".join(parts + ([f"free {free}"] if free else []))


Reserved = dict[tuple[str, str], str]  # a reservation's name by its pool and tenant


def _holder(node: tuple[tuple[str, int], ...], pool: NodePoolConfig, reserved: Reserved) -> str:
    tenants = {tenant for tenant, _ in node}
    if len(tenants) > 1:
        return "shared: each tenant's count protects it"
    if len(tenants) == 1:
        name = reserved.get((pool.name, tenants.pop()))
        return f"reservation {name}" if name else "no reservation: no partition holds the pool"
    return ""


def _rows(role: str, first: int, layout: list[tuple[tuple[str, int], ...]], pool: NodePoolConfig, reserved: Reserved) -> list[str]:
    """One row per run of nodes that look the same: `slurm 3-4  free 8`."""
    described = [(_cells(node, pool.gpus_per_node), _holder(node, pool, reserved) if role == "slurm" else "") for node in layout]
    rows = []
    index = first
    for (cells, holder), run in groupby(described):
        count = len(list(run))
        places = f"{index}" if count == 1 else f"{index}-{index + count - 1}"
        rows.append(f"  {role:<6} {places:<9} {cells:<40} {holder}".rstrip())
        index += count
    return rows


def _free(layout: list[tuple[tuple[str, int], ...]], gpus_per_node: int) -> int:
    return len(layout) * gpus_per_node - sum(min(size, gpus_per_node) for node in layout for _, size in node)


def _count(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def capacity_map(config: PlatformConfig) -> str:
    """Every GPU pool's layout, as text for the preview and the `capacityMap` output."""
    reserved = {(r.pool, r.tenant): r.name for r in reservations(config)}
    other_role = "kueue" if config.operators.kueue.enabled else "other"
    lines = ["Tenants' cells per GPU pool (node numbers are places, not names):"]
    for pool in config.gpu_pools:
        gpus = pool.gpus_per_node
        slurm = cell_fit.node_cells(pool.worker_replicas, gpus, cell_requests(config, pool))
        others = cell_fit.node_cells(pool.kueue_node_count, gpus, cell_requests(config, pool, kueue=True))
        # The config refuses layouts that do not fit, before anything is declared.
        assert slurm is not None and others is not None, f"pool {pool.name}: the tenants' cells do not fit"
        nodes = f"{_count(len(slurm), 'Slurm worker')}" + (f", {_count(len(others), f'{other_role} node')}" if others else "")
        lines.append(f"pool {pool.name}: {gpus} GPUs per node; {nodes}")
        lines += _rows("slurm", 1, slurm, pool, reserved)
        lines += _rows(other_role, pool.worker_replicas + 1, others, pool, reserved)
        free = f"  free: {_free(slurm, gpus)} of {len(slurm) * gpus} GPUs on Slurm workers"
        lines.append(free + (f", {_free(others, gpus)} of {len(others) * gpus} on {other_role} nodes" if others else ""))
    return "\n".join(lines)

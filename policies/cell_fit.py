"""Do the tenants' guaranteed cells fit the GPU pools? HiveD's startup check
(`initCellNums`: "N needed, M available"), run at preview by the stack config
and by the policy pack alike, so it lives beside kube_rules.py.

A cell of N GPUs is N GPUs on one node: a node of G GPUs holds floor(G/N)
cells of N. Each pool is packed on its own, larger cells first, node by node.
This greedy is exact when the cell sizes divide each other (the usual
1/2/4/8 GPUs: a node's leftover is then always a multiple of the next smaller
size) and conservative otherwise: it may refuse a layout a cleverer packing
would fit, never accept one that cannot fit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class CellRequest:
    tenant: str
    pool: str
    gpus_per_cell: int
    cells: int


@dataclass(frozen=True)
class Shortfall:
    pool: str
    gpus_per_cell: int
    needed: int
    available: int
    tenants: tuple[str, ...]

    def describe(self) -> str:
        return (
            f"pool '{self.pool}' cannot hold the guaranteed {self.gpus_per_cell}-GPU cells: "
            f"{self.needed} needed, {self.available} available (asked by {', '.join(self.tenants)})"
        )


def shortfalls(pools: Mapping[str, tuple[int, int]], requests: Iterable[CellRequest]) -> list[Shortfall]:
    """Every (pool, cell size) whose requested cells do not fit; `pools` maps a pool
    name to (nodes, GPUs per node). A request on a pool missing from `pools` finds
    no room at all."""
    by_pool: dict[str, dict[int, list[CellRequest]]] = {}
    for request in requests:
        by_pool.setdefault(request.pool, {}).setdefault(request.gpus_per_cell, []).append(request)
    found = []
    for pool, sizes in by_pool.items():
        nodes, gpus_per_node = pools.get(pool, (0, 0))
        free = [gpus_per_node] * nodes
        for size in sorted(sizes, reverse=True):
            asked = sizes[size]
            needed = sum(r.cells for r in asked)
            available = sum(gpus // size for gpus in free)
            left = needed
            for node, gpus in enumerate(free):
                placed = min(gpus // size, left)
                free[node] -= placed * size
                left -= placed
            if needed > available:
                found.append(Shortfall(pool, size, needed, available, tuple(dict.fromkeys(r.tenant for r in asked))))
    return found

"""Do the tenants' guaranteed cells fit the GPU pools? HiveD's startup check
(`initCellNums`: "N needed, M available"), run at preview by the stack config
and by the policy pack alike, so it lives beside kube_rules.py.

A cell of up to one node's GPUs sits on one node; a larger cell is a whole
number of nodes and has them to itself. Each pool is decided on its own, by an
exact search: whole-node cells take their nodes, then the smaller cells are
packed into the rest (bin packing over identical nodes: first-fit decreasing
when it succeeds, a lower bound when it cannot, else a depth-first search over
the remaining cell counts, memoised, one node at a time, trying only fillings
that leave no remaining cell able to fit). When a layout does not fit, the
message counts per cell size, as HiveD does, from a larger-first packing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Optional

# Where the program hands the cells to the policy pack: the tenants ConfigMap (labelled
# app.kubernetes.io/component=TENANTS_COMPONENT) holds them as JSON under CELLS_KEY.
CELLS_KEY = "cells.json"
TENANTS_COMPONENT = "tenants"


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
    gpus_per_node: int

    def describe(self) -> str:
        if 0 < self.gpus_per_node < self.gpus_per_cell:
            nodes = self.gpus_per_cell // self.gpus_per_node
            what = f"{self.gpus_per_cell}-GPU cells ({nodes} whole nodes each)"
        else:
            what = f"{self.gpus_per_cell}-GPU cells"
        return f"pool '{self.pool}' cannot hold the guaranteed {what}: {self.needed} needed, {self.available} available (asked by {', '.join(self.tenants)})"


def shortfalls(pools: Mapping[str, tuple[int, int]], requests: Iterable[CellRequest]) -> list[Shortfall]:
    """Every (pool, cell size) whose requested cells do not fit; `pools` maps a pool
    name to (nodes, GPUs per node). A request on a pool missing from `pools` finds
    no room at all. Empty exactly when a placement of every cell exists."""
    by_pool: dict[str, dict[int, list[CellRequest]]] = {}
    for request in requests:
        by_pool.setdefault(request.pool, {}).setdefault(request.gpus_per_cell, []).append(request)
    found = []
    for pool, sizes in by_pool.items():
        nodes, gpus_per_node = pools.get(pool, (0, 0))
        counts = {size: sum(r.cells for r in asked) for size, asked in sizes.items()}
        if placement(nodes, gpus_per_node, counts) is not None:
            continue
        # No placement exists, so the larger-first packing (itself a placement when it succeeds) leaves some size short.
        for size, needed, available in _counted(nodes, gpus_per_node, counts):
            if needed > available:
                tenants = tuple(dict.fromkeys(r.tenant for r in sizes[size]))
                found.append(Shortfall(pool, size, needed, available, tenants, gpus_per_node))
    return found


def placement(nodes: int, gpus_per_node: int, counts: Mapping[int, int]) -> Optional[list[tuple[int, ...]]]:
    """The cells on each node (cell sizes; a whole-node cell of k nodes appears on each of them),
    for `counts` cells of each size on `nodes` nodes of `gpus_per_node` GPUs; None when none exists."""
    counts = {size: count for size, count in counts.items() if count > 0}
    if any(size <= 0 for size in counts) or (counts and gpus_per_node <= 0):
        return None
    layout: list[tuple[int, ...]] = []
    for size in sorted(s for s in counts if s >= gpus_per_node):
        if size % gpus_per_node:
            return None  # larger than a node yet not whole nodes
        layout += [(size,)] * (size // gpus_per_node * counts[size])
    if len(layout) > nodes:
        return None
    small = {size: count for size, count in counts.items() if size < gpus_per_node}
    packed = _pack(nodes - len(layout), gpus_per_node, small)
    return None if packed is None else layout + packed + [()] * (nodes - len(layout) - len(packed))


def node_cells(nodes: int, gpus_per_node: int, requests: Sequence[CellRequest]) -> Optional[list[tuple[tuple[str, int], ...]]]:
    """For one pool's requests: a placement of every cell, node by node, as the (tenant, cell size)
    pairs each node holds (a whole-node cell on each of its nodes), empty nodes last; None when no
    placement exists. Each tenant's smaller cells are first packed on nodes of their own; only when
    that takes more nodes than the pool has do tenants share nodes, and then each node of the
    pool-wide placement goes to a tenant whose remaining cells fill it alone, where one does.
    The reservations (`owned_nodes`) and the capacity map both read it."""
    whole: list[tuple[tuple[str, int], ...]] = []
    small: dict[str, Counter[int]] = {}
    totals: Counter[int] = Counter()
    for request in requests:
        totals[request.gpus_per_cell] += request.cells
        if request.gpus_per_cell >= gpus_per_node:
            whole += [((request.tenant, request.gpus_per_cell),)] * (request.gpus_per_cell // gpus_per_node * request.cells)
        else:
            small.setdefault(request.tenant, Counter())[request.gpus_per_cell] += request.cells
    layout = placement(nodes, gpus_per_node, totals)
    if layout is None:
        return None
    free = nodes - len(whole)
    apart = {tenant: _pack(free, gpus_per_node, counts) for tenant, counts in small.items()}
    placed = list(whole)
    if all(bins is not None for bins in apart.values()) and sum(len(bins or []) for bins in apart.values()) <= free:
        placed += [tuple((tenant, size) for size in node) for tenant, bins in apart.items() for node in bins or []]
        return placed + [()] * (nodes - len(placed))
    left = {tenant: Counter(counts) for tenant, counts in small.items()}
    # The pool-wide placement's nodes of smaller cells (its whole-node cells are placed above).
    for node in (node for node in layout if node and max(node) < gpus_per_node):
        cells = Counter(node)
        owner = next((tenant for tenant, counts in left.items() if not cells - counts), None)
        if owner is not None:
            left[owner] -= cells
            placed.append(tuple((owner, size) for size in node))
            continue
        shared = []
        for size in node:  # a shared node: its cells come off whoever still has cells of that size
            tenant = next(tenant for tenant, counts in left.items() if counts[size])
            left[tenant][size] -= 1
            shared.append((tenant, size))
        placed.append(tuple(shared))
    return placed + [()] * (nodes - len(placed))


def owned_nodes(nodes: int, gpus_per_node: int, requests: Sequence[CellRequest]) -> dict[str, int]:
    """For one pool's requests: how many nodes hold one tenant's cells and nobody else's, by tenant,
    in `node_cells`' placement (empty when none exists). Slurm reserves those nodes for their tenant
    (components/tenancy.py); a node shared by two tenants' cells is protected by their counts only."""
    layout = node_cells(nodes, gpus_per_node, requests)
    if layout is None:
        return {}
    owned = {request.tenant: 0 for request in requests}
    for node in layout:
        tenants = {tenant for tenant, _ in node}
        if len(tenants) == 1:
            owned[tenants.pop()] += 1
    return owned


def _counted(nodes: int, gpus_per_node: int, counts: Mapping[int, int]) -> list[tuple[int, int, int]]:
    """(size, needed, available) per size, larger first, as a larger-first node-by-node packing finds them."""
    free = [gpus_per_node] * nodes
    result = []
    for size in sorted(counts, reverse=True):
        needed = counts[size]
        if size > gpus_per_node:
            span = size // gpus_per_node if gpus_per_node and size % gpus_per_node == 0 else nodes + 1
            empty = [node for node, gpus in enumerate(free) if gpus == gpus_per_node]
            available = len(empty) // span
            for node in empty[: min(needed, available) * span]:
                free[node] = 0
        else:
            available = sum(gpus // size for gpus in free)
            left = needed
            for node, gpus in enumerate(free):
                placed = min(gpus // size, left)
                free[node] -= placed * size
                left -= placed
        result.append((size, needed, available))
    return result


def _pack(bins: int, capacity: int, counts: Mapping[int, int]) -> Optional[list[tuple[int, ...]]]:
    """An exact bin packing of `counts` items of each size into at most `bins` bins of `capacity`:
    the filled bins (items by size), or None."""
    sizes = tuple(sorted(counts, reverse=True))
    start = tuple(counts[size] for size in sizes)
    quick = _first_fit_decreasing(capacity, sizes, start)
    if len(quick) <= bins:
        return quick
    failed: dict[tuple[int, ...], int] = {}  # remaining counts -> the most bins known not to hold them

    def hopeless(left: tuple[int, ...], free_bins: int) -> bool:
        return free_bins <= 0 or failed.get(left, -1) >= free_bins or _lower_bound(capacity, sizes, left) > free_bins

    if hopeless(start, bins):
        return None
    # Depth-first, one bin per level, on an explicit stack: a pool may have more nodes than Python's recursion limit.
    chosen: list[tuple[int, ...]] = []
    frames = [(start, bins, _fillings(capacity, sizes, start))]
    while frames:
        left, free_bins, options = frames[-1]
        for filling in options:
            rest = tuple(n - k for n, k in zip(left, filling, strict=True))
            if not any(rest):
                return [tuple(size for size, k in zip(sizes, f, strict=True) for _ in range(k)) for f in (*chosen, filling)]
            if not hopeless(rest, free_bins - 1):
                chosen.append(filling)
                frames.append((rest, free_bins - 1, _fillings(capacity, sizes, rest)))
                break
        else:
            failed[left] = max(failed.get(left, -1), free_bins)
            frames.pop()
            if chosen:
                chosen.pop()
    return None


def _first_fit_decreasing(capacity: int, sizes: tuple[int, ...], counts: tuple[int, ...]) -> list[tuple[int, ...]]:
    filled: list[list[int]] = []
    room: list[int] = []
    for size, count in zip(sizes, counts, strict=True):
        for _ in range(count):
            target = next((b for b, free in enumerate(room) if free >= size), None)
            if target is None:
                filled.append([])
                room.append(capacity)
                target = len(room) - 1
            filled[target].append(size)
            room[target] -= size
    return [tuple(b) for b in filled]


def _lower_bound(capacity: int, sizes: tuple[int, ...], counts: tuple[int, ...]) -> int:
    """Bins needed at least: by volume, and one per item larger than half a bin (no two share one)."""
    volume = sum(size * count for size, count in zip(sizes, counts, strict=True))
    large = sum(count for size, count in zip(sizes, counts, strict=True) if 2 * size > capacity)
    return max(-(-volume // capacity), large)


def _fillings(capacity: int, sizes: tuple[int, ...], left: tuple[int, ...]):
    """The ways to fill one bin that hold the largest remaining item (some bin must) and leave
    no room for any remaining item (adding one never hurts), largest first."""
    first = next(i for i, n in enumerate(left) if n)

    def extend(index: int, room: int, chosen: list[int]):
        if index == len(sizes):
            if all(n - k == 0 or size > room for size, n, k in zip(sizes, left, chosen, strict=True)):
                yield tuple(chosen)
            return
        most = min(left[index], room // sizes[index])
        least = 1 if index == first else 0
        for k in range(most, least - 1, -1):
            yield from extend(index + 1, room - k * sizes[index], [*chosen, k])

    yield from extend(first, capacity, [0] * first)

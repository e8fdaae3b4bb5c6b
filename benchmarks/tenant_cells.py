"""The exact cell fit (policies/slurm_rules/cell_fit.py) on large pools: wall time of `shortfalls` for
300 nodes of 8 GPUs and five cell sizes, for layouts a larger-first packing settles, tight
ones that need the search, and ones one GPU too large to fit. Prints figures; asserts nothing."""

from __future__ import annotations

import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "policies"))  # the pack's own module names

from slurm_rules.cell_fit import CellRequest, shortfalls  # noqa: E402

NODES, GPUS = 300, 8
SIZES = (1, 2, 3, 5, 6)
REPEATS = 5


def tight_layout(rng: random.Random, overfull: bool) -> list[CellRequest]:
    """Every node cut into cells of SIZES (a packing exists), shuffled into tenants; one GPU more when `overfull`."""
    cells: list[int] = []
    for _ in range(NODES):
        room = GPUS
        while room:
            size = rng.choice([s for s in SIZES if s <= room])
            cells.append(size)
            room -= size
    if overfull:
        cells.append(1)
    return [CellRequest(f"team-{i % 7}", "h100", size, 1) for i, size in enumerate(cells)]


def timed(requests: list[CellRequest]) -> tuple[float, int]:
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        found = shortfalls({"h100": (NODES, GPUS)}, requests)
        times.append(time.perf_counter() - start)
    return statistics.median(times), len(found)


def main() -> None:
    rng = random.Random(7)
    cases = {
        "divisible sizes 1/2/4/8, half full": [CellRequest("a", "h100", s, NODES // 8) for s in (1, 2, 4, 8)],
        "five sizes, every GPU used": tight_layout(rng, overfull=False),
        "five sizes, one GPU too many": tight_layout(rng, overfull=True),
        # 601 GPUs short of 2400 by volume, but a node holds two 3-GPU cells: the search proves it.
        "3-GPU cells, one more than two a node": [CellRequest("a", "h100", 3, 2 * NODES + 1)],
    }
    print(f"cell fit on {NODES} nodes x {GPUS} GPUs (median of {REPEATS})")
    for name, requests in cases.items():
        seconds, problems = timed(requests)
        cells = sum(r.cells for r in requests)
        print(f"  {name:<38} {cells:>5} cells  {seconds * 1000:8.1f} ms  {'fits' if not problems else f'{problems} shortfall(s)'}")


if __name__ == "__main__":
    main()

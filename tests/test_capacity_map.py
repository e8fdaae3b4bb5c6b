"""The capacity map: the placement the program deploys (cell_fit.node_cells), drawn per pool."""

from __future__ import annotations

import copy
import random
import re
from collections import Counter

from slurm_rules.cell_fit import CellRequest, node_cells, owned_nodes, placement

from components.capacity_map import capacity_map
from components.config import parse_config
from components.tenancy import reservations
from tests.harness import stack_config


def test_prod_hoalac_map():
    assert capacity_map(parse_config(stack_config("prod-hoalac"))).splitlines() == [
        "Tenants' cells per GPU pool (node numbers are places, not names):",
        "pool h100: 8 GPUs per node; 4 Slurm workers, 1 kueue node",
        "  slurm  1-2       llm 8                                    reservation cells.h100.llm",
        "  slurm  3         vision 4+4                               reservation cells.h100.vision",
        "  slurm  4         speech 2+2+1+1, free 2                   reservation cells.h100.speech",
        "  kueue  5         vision 8",
        "  free: 2 of 32 GPUs on Slurm workers, 0 of 8 on kueue nodes",
    ]


def test_the_map_names_each_reservation_on_as_many_nodes_as_it_holds():
    for stack in ("prod-hoalac", "dev-lab"):
        config = parse_config(stack_config(stack))
        drawn = capacity_map(config)
        found = reservations(config)
        assert found, stack
        for reservation in found:
            rows = re.findall(rf"^  slurm +(\d+)(?:-(\d+))? .* reservation {re.escape(reservation.name)}$", drawn, re.MULTILINE)
            assert sum(int(last or first) - int(first) + 1 for first, last in rows) == reservation.nodes, (stack, reservation.name)


def test_shared_nodes_whole_node_cells_and_free_nodes():
    raw = copy.deepcopy(stack_config("prod-hoalac"))
    raw["nodePools"][0]["slurmWorkers"] = 3
    raw["nodePools"][0]["nodeCount"] = 4
    raw["tenants"] = [
        {"name": "llm", "users": ["an"], "cells": [{"pool": "h100", "gpusPerCell": 16, "cells": 1}]},
        {"name": "vision", "users": ["binh"], "cells": [{"pool": "h100", "gpusPerCell": 4, "cells": 1}]},
        {"name": "speech", "users": ["chi"], "cells": [{"pool": "h100", "gpusPerCell": 2, "cells": 1}]},
    ]
    drawn = capacity_map(parse_config(raw)).splitlines()
    assert drawn[1:] == [
        "pool h100: 8 GPUs per node; 3 Slurm workers, 1 kueue node",
        "  slurm  1-2       llm 8 of a 16-GPU cell                   reservation cells.h100.llm",
        "  slurm  3         vision 4, speech 2, free 2               shared: each tenant's count protects it",
        "  kueue  4         free 8",
        "  free: 2 of 24 GPUs on Slurm workers, 8 of 8 on kueue nodes",
    ]


def test_node_cells_places_exactly_the_cells_asked_and_owned_nodes_reads_it():
    rng = random.Random(7)
    placed = 0
    for _ in range(3000):
        gpus_per_node = rng.choice([1, 2, 4, 8])
        nodes = rng.randint(0, 6)
        requests = [
            CellRequest(tenant, "p", rng.choice([1, 2, 3, 4, 8, 16]), rng.randint(1, 3))
            for tenant in "abc"[: rng.randint(1, 3)]
            for _ in range(rng.randint(1, 2))
        ]
        layout = node_cells(nodes, gpus_per_node, requests)
        counts: Counter[int] = Counter()
        for request in requests:
            counts[request.gpus_per_cell] += request.cells
        assert (layout is None) == (placement(nodes, gpus_per_node, counts) is None)
        if layout is None:
            assert owned_nodes(nodes, gpus_per_node, requests) == {}
            continue
        placed += 1
        assert len(layout) == nodes
        assert all(sum(min(size, gpus_per_node) for _, size in node) <= gpus_per_node for node in layout)
        # Each cell once (a whole-node cell once per node it spans).
        want: Counter = Counter()
        for request in requests:
            span = request.gpus_per_cell // gpus_per_node if request.gpus_per_cell >= gpus_per_node else 1
            want[(request.tenant, request.gpus_per_cell)] += request.cells * span
        assert Counter(cell for node in layout for cell in node) == want
        alone = Counter(next(iter({t for t, _ in node})) for node in layout if len({t for t, _ in node}) == 1)
        assert owned_nodes(nodes, gpus_per_node, requests) == {r.tenant: alone[r.tenant] for r in requests}
    assert placed > 300

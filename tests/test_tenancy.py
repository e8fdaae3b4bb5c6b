"""Tenants (the OpenPAI/HiveD lab's virtual clusters): the cell fit check, the
config rules around it, and what the tenants render on the Slurm and
Kubernetes sides."""

from __future__ import annotations

from typing import Any

import pytest

from components.config import ConfigError, parse_config
from policies.cell_fit import CellRequest, Shortfall, shortfalls
from tests.harness import stack_config

# ---------------------------------------------------------------------------
# The fit check (HiveD's initCellNums, earlier and clearer)


def test_the_labs_first_layout_fits_two_vcs_on_two_one_gpu_nodes():
    pools = {"gpu-c": (1, 1), "gpu-d": (1, 1)}
    assert shortfalls(pools, [CellRequest("default", "gpu-c", 1, 1), CellRequest("vc1", "gpu-d", 1, 1)]) == []


def test_the_labs_second_layout_fits_both_nodes_in_one_vc():
    assert shortfalls({"gpu": (2, 1)}, [CellRequest("default", "gpu", 1, 2)]) == []


def test_a_second_vc_on_the_labs_one_node_pool_is_refused_with_counts_and_tenants():
    # HiveD: "Insufficient physical cells at chain GPU-C-NODE-POOL level 2: 2 needed, 1 available".
    found = shortfalls({"gpu-c": (1, 1), "gpu-d": (1, 1)}, [CellRequest("default", "gpu-c", 1, 1), CellRequest("vc1", "gpu-c", 1, 1)])
    assert found == [Shortfall("gpu-c", 1, 2, 1, ("default", "vc1"))]
    assert found[0].describe() == "pool 'gpu-c' cannot hold the guaranteed 1-GPU cells: 2 needed, 1 available (asked by default, vc1)"


def test_mixed_sizes_pack_the_larger_cells_first_per_node():
    pools = {"h100": (2, 8)}
    # 8 + 4+2+1+1 = 16 GPUs on two 8-GPU nodes: exactly full.
    full = [CellRequest("a", "h100", 8, 1), CellRequest("b", "h100", 4, 1), CellRequest("b", "h100", 2, 1), CellRequest("c", "h100", 1, 2)]
    assert shortfalls(pools, full) == []
    # One more 1-GPU cell: nothing left anywhere.
    assert shortfalls(pools, [*full, CellRequest("d", "h100", 1, 1)]) == [Shortfall("h100", 1, 3, 2, ("c", "d"))]


def test_free_gpus_split_across_nodes_do_not_make_a_cell():
    # 3 + 3 GPUs free on two nodes is 6 GPUs but no 4-GPU cell.
    found = shortfalls({"h100": (2, 8)}, [CellRequest("a", "h100", 5, 2), CellRequest("b", "h100", 4, 1)])
    assert found == [Shortfall("h100", 4, 1, 0, ("b",))]


def test_sizes_that_do_not_divide_are_counted_per_node():
    # A node of 8 holds two 3-GPU cells (floor(8/3)), so two nodes hold four, not five.
    assert shortfalls({"h100": (2, 8)}, [CellRequest("a", "h100", 3, 4)]) == []
    assert shortfalls({"h100": (2, 8)}, [CellRequest("a", "h100", 3, 5)]) == [Shortfall("h100", 3, 5, 4, ("a",))]


def test_an_unknown_pool_has_no_room():
    assert shortfalls({}, [CellRequest("a", "gone", 1, 1)]) == [Shortfall("gone", 1, 1, 0, ("a",))]


# ---------------------------------------------------------------------------
# The config rules (key paths; the bad-config corpus has one case each)

SOPERATOR_4 = "staging-hanoi"


def with_tenants(*tenants: dict[str, Any], stack: str = SOPERATOR_4, **raw: Any):
    return parse_config({**stack_config(stack), "tenants": list(tenants), **raw})


def gpu_pool(stack: str = SOPERATOR_4) -> dict[str, Any]:
    return next(p for p in stack_config(stack)["nodePools"] if p.get("gpusPerNode", 0) > 0)


def test_the_example_soperator_4_stack_has_a_gpu_pool_to_share():
    pool = gpu_pool()
    assert pool["gpusPerNode"] == 8 and pool["nodeCount"] >= 2


def test_config_refuses_over_commitment_naming_pool_size_counts_and_tenants():
    pool = gpu_pool()
    whole = {"pool": pool["name"], "gpusPerCell": 8, "cells": pool["nodeCount"]}
    with pytest.raises(ConfigError) as raised:
        with_tenants({"name": "team-a", "cells": [whole]}, {"name": "team-b", "cells": [{**whole, "cells": 1}]})
    expected = f"pool '{pool['name']}' cannot hold the guaranteed 8-GPU cells: {pool['nodeCount'] + 1} needed, {pool['nodeCount']} available (asked by team-a, team-b)"
    assert f"slurm-platform:tenants: {expected}" in str(raised.value)


def test_tenants_absent_change_nothing():
    assert parse_config(stack_config(SOPERATOR_4)).tenants == []


def test_a_tenants_guarantee_is_the_sum_of_its_cells():
    pool = gpu_pool()["name"]
    config = with_tenants({"name": "team-a", "cells": [{"pool": pool, "gpusPerCell": 8, "cells": 1}, {"pool": pool, "gpusPerCell": 2, "cells": 3}]})
    assert config.tenants[0].guaranteed_gpus == 14
    assert config.tenants[0].group == "team-a"
    assert config.tenants[0].priorities == ["prod", "test", "oppo"]

"""slurm-tenant-cells-fit with constructed policy args: the tenants ConfigMap and
the workers the stack renders, as the engine hands them to the pack."""

from __future__ import annotations

import json
from typing import Any

from slurm_rules import cell_fit

from components import tenancy
from components.config import parse_config
from components.slurm import operator_module
from tests.harness import stack_config
from tests.test_policies import CONFIG_MAP, as_policy_resource, check, one, resource
from tests.test_policies_operator_shapes import as_resources
from tests.test_tenancy import run_stack, two_teams

POLICY = "slurm-tenant-cells-fit"
STACK = "staging-hanoi"  # soperator 4.1.7: NodeSets h100 (2 × 8 GPUs) and h200 (1 × 8 GPUs)


def cells_map(cells: Any) -> Any:
    return resource(
        CONFIG_MAP,
        {"metadata": {"name": "fpt-hpc-tenants", "namespace": "fpt-hpc", "labels": tenancy.LABELS}, "data": {cell_fit.CELLS_KEY: json.dumps(cells)}},
    )


def workers() -> list[Any]:
    config = parse_config(stack_config(STACK))
    return as_resources(operator_module(config).render(config), {"NodeSet"})


def test_the_stack_renders_workers_to_judge_against():
    assert len(workers()) == 2


def test_cells_that_fit_the_workers_pass():
    cells = [{"tenant": "team-a", "pool": "h100", "gpusPerCell": 8, "cells": 1}, {"tenant": "team-b", "pool": "h100", "gpusPerCell": 4, "cells": 2}]
    assert check(POLICY, cells_map(cells), *workers()) == []


def test_over_commitment_is_refused_with_pool_size_counts_tenants_and_workers():
    cells = [{"tenant": "team-a", "pool": "h200", "gpusPerCell": 8, "cells": 1}, {"tenant": "team-b", "pool": "h200", "gpusPerCell": 2, "cells": 1}]
    one(
        check(POLICY, cells_map(cells), *workers()),
        "ConfigMap fpt-hpc/fpt-hpc-tenants: pool 'h200' cannot hold the guaranteed 2-GPU cells: 1 needed, 0 available (asked by team-b)",
        "the stack declares 1 Slurm workers of 8 GPUs in that pool",
        "Fix: shrink or move",
    )


def test_a_hand_edited_worker_count_is_judged_too():
    cells = [{"tenant": "team-a", "pool": "h100", "gpusPerCell": 8, "cells": 2}]
    fewer = [as_policy_resource_with_replicas(w, 1) if w.name.endswith("h100") else w for w in workers()]
    one(check(POLICY, cells_map(cells), *fewer), "2 needed, 1 available (asked by team-a)")


def as_policy_resource_with_replicas(worker: Any, replicas: int) -> Any:
    props = json.loads(json.dumps(dict(worker.props), default=lambda v: dict(v) if hasattr(v, "keys") else list(v)))
    props["spec"]["replicas"] = replicas
    return resource(worker.resource_type, props)


def test_cells_on_a_pool_without_workers_have_no_room():
    one(check(POLICY, cells_map([{"tenant": "a", "pool": "gone", "gpusPerCell": 1, "cells": 1}]), *workers()), "1 needed, 0 available")


def test_an_unreadable_cells_document_is_a_violation():
    one(check(POLICY, cells_map([{"tenant": "a", "pool": "h100", "gpusPerCell": "8", "cells": 1}]), *workers()), "unreadable cells.json")


def test_no_tenants_config_map_nothing_to_judge():
    assert check(POLICY, *workers()) == []


def test_the_mocked_stack_with_tenants_passes_and_over_committed_fails():
    run = run_stack(STACK, tenants=two_teams(STACK))
    resources = [as_policy_resource(r) for r in run.resources if r.custom]
    assert [r for r in resources if r.resource_type == CONFIG_MAP and cell_fit.CELLS_KEY in r.props.get("data", {})]
    assert check(POLICY, *resources) == []
    # The same stack with its h100 workers cut to one: team-a's whole node and team-b's halves no longer fit.
    cut = [as_policy_resource_with_replicas(r, 1) if r.name == "slurm-nodeset-h100" else r for r in resources]
    assert check(POLICY, *cut) != []

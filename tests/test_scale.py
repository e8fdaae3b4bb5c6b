"""The scale benchmark's stacks (tests/scale.py), and the program's cost growing with the tenants, not their square
(issue 40).

Every size parses on both bases with its tenants and GPU nodes, and the policy pack's capacity checks pass the
program it renders (the benchmark previews the larger ones with the pack). Under the SDK's mocks, each resource
declares a number of dependencies that does not grow with the tenants, and none waits for a list that does: the SDK
checks each declared dependency for a cycle by walking what it depends on (pulumi/runtime/resource_cycle_breaker.py),
and a dependency on a component is one on each of its children. Counted, not timed: benchmarks/scale.py gives the seconds."""

from __future__ import annotations

import json

import pytest

from components.config import parse_config
from components.platform import build_platform
from tests.harness import ROOT, Run, run_under_mocks
from tests.kube import KWOK_STACK
from tests.scale import BASE_STACK, GPU_NODES, GPUS_PER_NODE, SIZES, scaled_config
from tests.test_policies import as_policy_resource, check
from tools.policy_configs import SETTINGS_DIR, policy_config

BASES = (BASE_STACK, KWOK_STACK)
CAPACITY_POLICIES = ("slurm-region-quota", "slurm-worker-node-fit", "slurm-tenant-cells-fit")


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("tenants", SIZES)
def test_every_size_parses_with_its_tenants_over_the_gpu_nodes(base, tenants):
    config = parse_config(scaled_config(tenants, base))
    assert len(config.tenants) == tenants
    assert sum(pool.node_count for pool in config.gpu_pools) == GPU_NODES
    assert {pool.gpus_per_node for pool in config.gpu_pools} == {GPUS_PER_NODE}


def test_the_kwok_base_deploys_offline_with_kueue_left_to_the_tests_controller():
    operators = scaled_config(SIZES[0], KWOK_STACK)["operators"]
    assert operators["soperator"]["repository"].startswith("./.kwok/charts/")
    assert operators["kueue"] == {"enabled": True, "install": False}


@pytest.mark.parametrize("base", BASES)
def test_the_packs_capacity_checks_pass_the_smallest_stack(base):
    raw = scaled_config(SIZES[0], base)
    config = parse_config(raw)
    run = run_under_mocks(lambda: build_platform(config), raw)
    resources = [as_policy_resource(r) for r in run.resources if r.custom]
    pack_config = policy_config(json.loads((ROOT / SETTINGS_DIR / f"{base}.json").read_text()), config)
    for policy in CAPACITY_POLICIES:
        assert check(policy, *resources, config=pack_config[policy]) == [], policy


@pytest.fixture(scope="module")
def runs() -> dict[int, Run]:
    def run(tenants: int) -> Run:
        raw = scaled_config(tenants)
        config = parse_config(raw)
        return run_under_mocks(lambda: build_platform(config), raw, stack="prod-scale")

    return {tenants: run(tenants) for tenants in (40, 160)}


def test_dependencies_per_resource_do_not_grow_with_the_tenants(runs):
    per_resource = {tenants: sum(len(r.dependencies) for r in run.resources) / len(run.resources) for tenants, run in runs.items()}
    assert len(runs[160].resources) > 3 * len(runs[40].resources)  # the tenants' objects are most of the stack
    assert per_resource[160] <= 1.25 * per_resource[40], per_resource


def test_no_resource_waits_for_a_list_that_grows_with_the_tenants(runs):
    most = {tenants: max(len(r.dependencies) for r in run.resources) for tenants, run in runs.items()}
    assert most[160] == most[40], most

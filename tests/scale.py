"""Stacks of many tenants over 1,000 GPU nodes, for the scale benchmark (benchmarks/scale.py) and the
tests that keep the program's cost linear in them (tests/test_scale.py).

prod-hoalac's shape: soperator 4.1.7, LDAP, Kueue and monitoring on; the GPUs in POOLS pools of H100
nodes; every tenant with its namespace, one user and one guaranteed 8-GPU Slurm cell; every
KUEUE_EVERY-th tenant (every `kueue_every`-th: 1 gives each tenant a ClusterQueue with quota, as
benchmarks/kueue_admission.py needs) also one 8-GPU Kueue cell on the Kueue nodes of the first pool."""

from __future__ import annotations

import copy
from typing import Any

from tests.harness import stack_config

BASE_STACK = "prod-hoalac"
GPU_NODES, POOLS, GPUS_PER_NODE = 1000, 4, 8
KUEUE_EVERY = 8
KUEUE_NODES = 40  # of the first pool: room for 320 tenants' Kueue cells
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


def scaled_config(tenants: int, kueue_every: int = KUEUE_EVERY) -> dict[str, Any]:
    """The raw stack config (as `pulumi config` holds it) of `tenants` tenants over GPU_NODES GPU nodes."""
    document = copy.deepcopy(stack_config(BASE_STACK))
    gpu_pool, *other_pools = document["nodePools"]
    nodes = GPU_NODES // POOLS
    pools = []
    for index in range(POOLS):
        pool = {**gpu_pool, "name": pool_name(index), "selector": {"worker.fptcloud/pool": f"gpu-{pool_name(index)}"}, "nodeCount": nodes}
        pool["slurmWorkers"] = nodes - kueue_nodes(tenants, kueue_every) if index == 0 else nodes
        if index:
            pool.pop("kueueNodeLabels")
        pools.append(pool)
    document["nodePools"] = pools + other_pools
    document["slurm"]["partitions"] = [{"name": "h100", "pools": [pool_name(index) for index in range(POOLS)], "default": True}]
    # The region holds the GPU nodes and the system pool with room to spare; the pack checks the stack against it.
    document["regionQuota"] = {
        "vcpu": 200_000,
        "memoryGi": 2_000_000,
        "gpus": GPU_NODES * GPUS_PER_NODE,
        "storageGi": 100_000,
        "loadBalancers": 4,
        "pvcs": 1_000,
    }
    document["tenants"] = [tenant(index, kueue_every) for index in range(tenants)]
    return document

"""Fake kwok nodes for a stack's node pools: `python -m scripts.kwok_nodes Pulumi.kwok.yaml`.

Every pool of the stack's config (read through the same config model the
program uses) becomes `nodeCount` Node objects carrying the pool's selector
labels (and on its nodes beyond `slurmWorkers`, its `kueueNodeLabels`), its topology labels (`topologyLabels`, outermost first: each level
halves the domain above it, e.g. racks of 2 nodes in blocks of 4), taints and
per-node allocatable (cpu, memory, GPUs), annotated so the
kwok controller started by scripts/kube-local.sh manages them. Prints a YAML
List for `kubectl apply -f -`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from components.config import PROJECT, NodePoolConfig, PlatformConfig, parse_config

KWOK_ANNOTATION = {"kwok.x-k8s.io/node": "fake"}
PODS_PER_NODE = "110"


def stack_config(stack_file: Path) -> PlatformConfig:
    """The validated config of a Pulumi.<stack>.yaml, as the program would see it."""
    raw = yaml.safe_load(stack_file.read_text()).get("config", {})
    prefix = f"{PROJECT}:"
    return parse_config({key.removeprefix(prefix): value for key, value in raw.items() if key.startswith(prefix)})


def node_name(pool: NodePoolConfig, index: int) -> str:
    return f"kwok-{pool.name}-{index}"


def topology_domains(pool: NodePoolConfig, index: int) -> dict[str, str]:
    """Node `index`'s domain at each of the pool's topology levels: the innermost holds 2 nodes, each level above twice as many."""
    levels = len(pool.topology_labels)
    return {label: f"{pool.name}-{label.rsplit('/', 1)[-1]}-{index // 2 ** (levels - depth)}" for depth, label in enumerate(pool.topology_labels)}


def pool_nodes(pool: NodePoolConfig) -> list[dict[str, Any]]:
    resources = {"cpu": str(pool.cpu_per_node), "memory": str(pool.memory_per_node), "pods": PODS_PER_NODE}
    labels = {**pool.selector, "type": "kwok"}
    if pool.has_gpu:
        resources["nvidia.com/gpu"] = str(pool.gpus_per_node)
        labels["nvidia.com/gpu.count"] = str(pool.gpus_per_node)
        if pool.gpu_product:
            labels["nvidia.com/gpu.product"] = pool.gpu_product
    nodes = []
    for index in range(pool.node_count):
        name = node_name(pool, index)
        # The Slurm workers' nodes first, then the Kueue nodes with their labels.
        kueue_labels = pool.kueue_node_labels if index >= pool.worker_replicas else {}
        spec: dict[str, Any] = {}
        if pool.taints:
            spec["taints"] = [taint.model_dump(exclude_none=True) for taint in pool.taints]
        nodes.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": {
                        **labels,
                        **kueue_labels,
                        **topology_domains(pool, index),
                        "kubernetes.io/hostname": name,
                        "kubernetes.io/os": "linux",
                    },
                    "annotations": dict(KWOK_ANNOTATION),
                },
                "spec": spec,
                # kwok reports this status; the API server accepts it on create.
                "status": {"allocatable": dict(resources), "capacity": dict(resources)},
            }
        )
    return nodes


def kwok_nodes(config: PlatformConfig) -> list[dict[str, Any]]:
    return [node for pool in config.node_pools for node in pool_nodes(pool)]


if __name__ == "__main__":
    nodes = kwok_nodes(stack_config(Path(sys.argv[1])))
    yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": nodes}, sys.stdout, sort_keys=False)

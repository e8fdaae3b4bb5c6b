"""GPU node pools as plain data: soperator's k8sNodeFilters, capacity figures, Karpenter NodePools (the `NodePools` component declares them)."""

from __future__ import annotations

from typing import Any

from ..config import NodePoolConfig, quantity_value

GPU_FILTER = "gpu"


NO_GPU_FILTER = "no-gpu"


def _tolerations(pools: list[NodePoolConfig]) -> list[dict[str, Any]]:
    """Tolerate every taint the pools carry (Exists: any value), deduplicated."""
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for pool in pools:
        for taint in pool.taints:
            seen.setdefault((taint.key, taint.effect), {"key": taint.key, "operator": "Exists", "effect": taint.effect})
    return list(seen.values())


def _placement(pools: list[NodePoolConfig]) -> dict[str, Any]:
    """One pool: a nodeSelector. Several: node affinity with one term per pool (terms are ORed)."""
    if len(pools) == 1:
        return {"nodeSelector": dict(pools[0].selector)}
    terms = [{"matchExpressions": [{"key": k, "operator": "In", "values": [v]} for k, v in sorted(pool.selector.items())]} for pool in pools]
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}}


def node_filter(name: str, pools: list[NodePoolConfig]) -> dict[str, Any]:
    node_filter_ = {"name": name, **_placement(pools)}
    tolerations = _tolerations(pools)
    if tolerations:
        node_filter_["tolerations"] = tolerations
    return node_filter_


def k8s_node_filters(pools: list[NodePoolConfig]) -> list[dict[str, Any]]:
    """soperator's `k8sNodeFilters`: `gpu` for workers, `no-gpu` for everything else.

    A cluster with GPU nodes only uses the GPU pools for both, as FPT's guide allows.
    """
    gpu_pools = [pool for pool in pools if pool.has_gpu]
    system_pools = [pool for pool in pools if not pool.has_gpu] or gpu_pools
    return [node_filter(GPU_FILTER, gpu_pools), node_filter(NO_GPU_FILTER, system_pools)]


def pool_capacity(pool: NodePoolConfig) -> dict[str, Any]:
    """Per-node allocatable and pool totals, as the quota policies read them."""
    cpu, memory = float(quantity_value(pool.cpu_per_node)), float(quantity_value(pool.memory_per_node))
    return {
        "nodes": pool.node_count,
        "gpuProduct": pool.gpu_product,
        "perNode": {"cpu": cpu, "memoryBytes": memory, "gpus": pool.gpus_per_node},
        "total": {"cpu": cpu * pool.node_count, "memoryBytes": memory * pool.node_count, "gpus": pool.gpus_per_node * pool.node_count},
        "rdma": pool.rdma,
    }


def karpenter_node_pool(pool: NodePoolConfig) -> dict[str, Any]:
    """A `karpenter.sh/v1` NodePool whose nodes carry the pool's labels and taints."""
    assert pool.karpenter is not None
    karpenter = pool.karpenter
    requirements = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": list(karpenter.capacity_types)}]
    if karpenter.instance_types:
        requirements.append({"key": "node.kubernetes.io/instance-type", "operator": "In", "values": list(karpenter.instance_types)})
    node_spec: dict[str, Any] = {
        "nodeClassRef": {"group": karpenter.node_class_group, "kind": karpenter.node_class_kind, "name": karpenter.node_class_name},
        "requirements": requirements,
    }
    if pool.taints:
        node_spec["taints"] = [{k: v for k, v in t.model_dump().items() if v is not None} for t in pool.taints]
    limits: dict[str, Any] = {
        "cpu": str(int(quantity_value(pool.cpu_per_node) * pool.node_count)),
        "memory": f"{int(quantity_value(pool.memory_per_node) * pool.node_count) // 2**30}Gi",
    }
    if pool.has_gpu:
        limits["nvidia.com/gpu"] = str(pool.gpus_per_node * pool.node_count)
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": pool.name},
        "spec": {
            "template": {"metadata": {"labels": dict(pool.selector)}, "spec": node_spec},
            "limits": limits,
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30m"},
        },
    }

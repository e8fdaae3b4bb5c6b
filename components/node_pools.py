"""GPU node pools: soperator's k8sNodeFilters, capacity figures, node labels, Karpenter.

The pure functions turn pool config into plain data; `NodePools` only declares
what needs declaring (labels on existing nodes, Karpenter NodePools).
"""

from __future__ import annotations

from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from .config import NodePoolConfig
from .declare import declare
from .render.node_pools import k8s_node_filters, karpenter_node_pool, pool_capacity
from .resources import child_opts


class NodePools(pulumi.ComponentResource):
    """Node labels and Karpenter NodePools for the GPU and system pools."""

    node_filters: pulumi.Output[list]
    capacity: pulumi.Output[dict]

    def __init__(self, name: str, pools: list[NodePoolConfig], opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("slurm-platform:node_pools:NodePools", name, None, opts)
        child = child_opts(self, opts)
        self.node_filters = pulumi.Output.from_input(k8s_node_filters(pools))
        self.capacity = pulumi.Output.from_input({pool.name: pool_capacity(pool) for pool in pools})
        for pool in pools:
            for node_name in pool.label_existing_nodes:
                # Labels only: taints are an atomic list under server-side apply,
                # so patching them would replace taints other tools put there.
                k8s.core.v1.NodePatch(
                    f"{name}-{pool.name}-{node_name}-labels",
                    metadata=k8s.meta.v1.ObjectMetaPatchArgs(name=node_name, labels=dict(pool.selector)),
                    opts=child,
                )
            if pool.karpenter is not None:
                declare(f"{name}-{pool.name}-karpenter", karpenter_node_pool(pool), child)
        self.register_outputs({"nodeFilters": self.node_filters, "capacity": self.capacity})

"""The kwok stack's fake nodes: one per configured node, with the pool's labels, taints and allocatable."""

from pathlib import Path

import pytest

from components.config import ConfigError
from scripts.kwok_nodes import kwok_nodes, stack_config
from tests.harness import ROOT


def test_every_configured_node_becomes_a_kwok_node_shaped_like_its_pool():
    config = stack_config(ROOT / "Pulumi.kwok.yaml")
    nodes = {node["metadata"]["name"]: node for node in kwok_nodes(config)}
    assert len(nodes) == sum(pool.node_count for pool in config.node_pools) > 0
    for pool in config.node_pools:
        for index in range(pool.node_count):
            node = nodes[f"kwok-{pool.name}-{index}"]
            assert pool.selector.items() <= node["metadata"]["labels"].items()
            assert node["metadata"]["annotations"] == {"kwok.x-k8s.io/node": "fake"}
            assert node["spec"].get("taints", []) == [t.model_dump(exclude_none=True) for t in pool.taints]
            allocatable = node["status"]["allocatable"]
            assert (allocatable["cpu"], allocatable["memory"]) == (pool.cpu_per_node, pool.memory_per_node)
            assert allocatable.get("nvidia.com/gpu", "0") == str(pool.gpus_per_node)


def test_an_invalid_stack_file_is_refused_with_the_key_path(tmp_path: Path):
    stack_file = tmp_path / "Pulumi.bad.yaml"
    stack_file.write_text(
        "config:\n  slurm-platform:nodePools:\n    - name: gpu\n      selector: {}\n      cpuPerNode: '8'\n      memoryPerNode: 8Gi\n      nodeCount: 1\n"
    )
    with pytest.raises(ConfigError, match=r"slurm-platform:nodePools\[0\]\.selector"):
        stack_config(stack_file)

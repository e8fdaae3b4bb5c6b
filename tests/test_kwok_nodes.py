"""The kwok stack's fake nodes: one per configured node, with the pool's labels, taints and allocatable."""

from pathlib import Path

import pytest

from components.config import ConfigError, parse_config
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


def test_nodes_carry_their_pools_topology_labels_in_nested_domains():
    """Racks of 2 nodes inside blocks of 4 (outermost first), so Kueue's Topology finds real domains."""
    raw = {
        "nodePools": [
            {
                "name": "h100",
                "selector": {"pool": "h100"},
                "cpuPerNode": "112",
                "memoryPerNode": "1250Gi",
                "gpusPerNode": 8,
                "nodeCount": 6,
                "topologyLabels": ["example.com/block", "example.com/rack"],
            },
            {"name": "system", "selector": {"pool": "system"}, "cpuPerNode": "32", "memoryPerNode": "128Gi", "nodeCount": 1},
        ],
        "slurm": {"worker": {"size": 6}},
    }
    nodes = [n for n in kwok_nodes(parse_config(raw)) if n["metadata"]["labels"]["pool"] == "h100"]
    domains = [(n["metadata"]["labels"]["example.com/block"], n["metadata"]["labels"]["example.com/rack"]) for n in nodes]
    assert domains == [
        ("h100-block-0", "h100-rack-0"),
        ("h100-block-0", "h100-rack-0"),
        ("h100-block-0", "h100-rack-1"),
        ("h100-block-0", "h100-rack-1"),
        ("h100-block-1", "h100-rack-2"),
        ("h100-block-1", "h100-rack-2"),
    ]

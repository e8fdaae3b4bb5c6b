"""What the state holds: after an `up` on the kwok control plane (benchmarks/kube.py's control plane and
stack sizes), the bytes of each resource in `pulumi stack export`, summed per resource type and listed
per resource, largest first. Each type's bytes are split by part (`parts`): what the engine keeps
(inputs, the stack trace), what pulumi-kubernetes keeps (the live object as the API server returned it,
its managedFields, and `__inputs`, its own copy of the inputs), and the rest. Prints figures; asserts nothing.

kwok's nodes report no images; a real node's status lists every image it holds. With `--node-images N`
(60 by default) every node is given N such entries before the up, so that what a NodePatch keeps of its
Node is what it would keep on a real cluster.

    .venv/bin/python benchmarks/state.py [--sizes reference,medium,large] [--top 15] [--node-images N] [--save DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.kube import SIZES, fresh_cluster, sized_stack  # noqa: E402
from tests.kube import LocalCluster, kwok_workspace  # noqa: E402

PARTS = ("inputs", "outputs", "managedFields", "__inputs", "stackTrace", "rest")


def size(value: Any) -> int:
    """Bytes of `value` as compact JSON (the checkpoint's own indentation left out)."""
    return len(json.dumps(value, separators=(",", ":")))


def parts(resource: dict) -> dict[str, int]:
    """Bytes of one resource's state by part: the engine's inputs; the provider's outputs (the live object)
    less two parts of it shown apart, the API server's managedFields and the copy of the inputs the provider
    keeps in `outputs.__inputs`; the stack trace of the program where it was declared; everything else
    (URN, dependencies, ...)."""
    outputs = dict(resource.get("outputs") or {})
    copied_inputs = outputs.pop("__inputs", None)
    metadata = dict(outputs.get("metadata") or {})
    managed_fields = metadata.pop("managedFields", None)
    if managed_fields is not None:
        outputs["metadata"] = metadata
    split = {
        "inputs": size(resource.get("inputs") or {}),
        "outputs": size(outputs),
        "managedFields": size(managed_fields) if managed_fields is not None else 0,
        "__inputs": size(copied_inputs) if copied_inputs is not None else 0,
        "stackTrace": size(resource["stackTrace"]) if "stackTrace" in resource else 0,
    }
    split["rest"] = size(resource) - sum(split.values())
    return split


def by_type(resources: list[dict]) -> list[tuple[str, int, dict[str, int]]]:
    """(type, resources, bytes by part) per resource type, largest first."""
    totals: dict[str, tuple[int, dict[str, int]]] = {}
    for resource in resources:
        count, summed = totals.get(resource["type"], (0, dict.fromkeys(PARTS, 0)))
        totals[resource["type"]] = (count + 1, {part: summed[part] + value for part, value in parts(resource).items()})
    return sorted(((kind, count, summed) for kind, (count, summed) in totals.items()), key=lambda row: -sum(row[2].values()))


def report(label: str, export: dict, top: int) -> None:
    resources = export["deployment"]["resources"]
    total = size(export)
    print(f"\n{label}: {len(resources)} resources, state {total / 1e3:,.1f} kB ({total / len(resources) / 1e3:,.2f} kB/resource)")
    print(f"  {'type':<58} {'count':>5} {'kB':>9} {'kB each':>8}   " + " ".join(f"{part:>13}" for part in PARTS))
    for kind, count, summed in by_type(resources)[:top]:
        bytes_ = sum(summed.values())
        print(
            f"  {kind:<58} {count:>5} {bytes_ / 1e3:>9,.1f} {bytes_ / count / 1e3:>8,.2f}   "
            + " ".join(f"{summed[part] / 1e3:>13,.1f}" for part in PARTS)
        )
    print("  largest resources:")
    for resource in sorted(resources, key=size, reverse=True)[:top]:
        print(f"  {size(resource) / 1e3:>9,.1f} kB  {resource['urn'].rsplit('::', 1)[1]} ({resource['type']})")


def node_images(count: int) -> list[dict]:
    """`count` entries of a Node's status.images as a kubelet reports them: the image by digest and by tag, its size."""
    images = []
    for index in range(count):
        repository = f"nvcr.io/nvidia/cloud-native/image-{index:02d}"
        digest = hashlib.sha256(repository.encode()).hexdigest()
        images.append({"names": [f"{repository}@sha256:{digest}", f"{repository}:v25.3.{index}"], "sizeBytes": 100_000_000 + index})
    return images


def give_images(cluster: LocalCluster, nodes: list[str], count: int) -> None:
    patch = json.dumps({"status": {"images": node_images(count)}})
    for node in nodes:
        cluster.kubectl("patch", "node", node, "--subresource=status", "--type=merge", "-p", patch)


def measure(root: Path, label: str, submounts: int, pools: int, nodes_per_pool: int, top: int, images: int, save: Path | None) -> None:
    cluster = fresh_cluster(root / "kube")
    try:
        ws = kwok_workspace(root / "ws", cluster)
        stack = sized_stack(ws, label, submounts, pools, nodes_per_pool)
        nodes = cluster.add_nodes(ws.project / f"Pulumi.{stack}.yaml")
        if images:
            give_images(cluster, nodes, images)
        ws.pulumi("up", "--yes", "--skip-preview", stack=stack)
        export = json.loads(ws.pulumi("stack", "export", stack=stack).stdout)
    finally:
        cluster.stop()
    if save:
        (save / f"{label}.json").write_text(json.dumps(export, indent=2))
    report(f"{label} (nodes with {images} images)", export, top)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default=",".join(label for label, *_ in SIZES))
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--node-images", type=int, default=60, help="images in each node's status (0: kwok's none)")
    parser.add_argument("--save", type=Path, help="a folder to keep each export in, as <size>.json")
    args = parser.parse_args()
    chosen = args.sizes.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        for label, submounts, pools, nodes_per_pool in SIZES:
            if label in chosen:
                measure(Path(tmp) / label, label, submounts, pools, nodes_per_pool, args.top, args.node_images, args.save)


if __name__ == "__main__":
    main()

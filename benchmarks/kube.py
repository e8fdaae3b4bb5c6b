"""The program against a real Kubernetes API server (scripts/kube-local.sh's
control plane with kwok nodes, its controller-manager at 200 QPS so that
binding claims is not the bottleneck). Prints figures; asserts nothing.

For the reference `kwok` stack and for stacks of about 100 and 330 resources
(more jail submounts, each a claim kwok provisions and the binder binds, and
more CPU pools whose kwok nodes the program labels), each on fresh control planes:

- the `pulumi up` that creates everything, and the CPU per resource it costs
  (the CLI, its plugins and the program, from the children's rusage);
- the floor: the same objects (the up's own inputs, from `pulumi stack export`)
  applied server-side with kubectl, 8 requests at a time, on another fresh control
  plane, then waited for the way the up waits (claims Bound, Deployments Available,
  StatefulSets ready, every `pulumi.com/waitFor`); and up / floor;
- a no-change preview;
- with `--skip-checkpoints`, the same up once more with PULUMI_SKIP_CHECKPOINTS:
  never a way to deploy (a crash would lose the state), only the control that shows
  how much of the CPU per resource is the engine rewriting its checkpoint after every step.

    .venv/bin/python benchmarks/kube.py [--parallel N] [--sizes reference,medium,large] [--skip-checkpoints]

`--parallel` is what `make up` passes (the Makefile's PARALLEL, 64); 0 leaves the CLI's default.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.engine import scaled_stack  # noqa: E402
from components.slurm.common import WAIT_FOR_ANNOTATION  # noqa: E402
from tests.engine import Workspace  # noqa: E402
from tests.kube import KWOK_STACK, LocalCluster, kwok_workspace, wait_until  # noqa: E402

FLOOR_REQUESTS_AT_ONCE = 8
# One batch of a 160-tenant stack's 2,200 objects took over kubectl's usual 60 s on two busy cores.
FLOOR_BATCH_TIMEOUT = 600.0
SECRET_SIGNATURE = "4dabf18193072939515e22adb298388d"  # marks a secret value in Pulumi's state
# What the provider awaits for a kind with no `pulumi.com/waitFor` (kubectl wait's --for).
AWAITED = {
    "PersistentVolumeClaim": "jsonpath={.status.phase}=Bound",
    "Deployment": "condition=Available",
    "Job": "condition=Complete",
}

# label, extra submounts, extra CPU pools, kwok nodes per extra pool
SIZES = [("reference", 0, 0, 0), ("medium", 45, 10, 2), ("large", 190, 50, 2)]


def labelled_cpu_pools(count: int, nodes_per_pool: int) -> list[dict]:
    """CPU pools whose (kwok) nodes exist already; the program labels them."""
    return [
        {
            "name": f"cpu-{i:03d}",
            "selector": {"worker.fptcloud/pool": f"cpu-{i:03d}"},
            "cpuPerNode": "32",
            "memoryPerNode": "128Gi",
            "nodeCount": nodes_per_pool,
            "labelExistingNodes": [f"kwok-cpu-{i:03d}-{n}" for n in range(nodes_per_pool)],
        }
        for i in range(count)
    ]


def timed(ws: Workspace, *args: str, stack: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the CLI and every process it waited for: plugins, the program)."""
    start, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    ws.pulumi(*args, stack=stack)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.perf_counter() - start, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def plain(value: Any) -> Any:
    """A `stack export --show-secrets` value without Pulumi's secret envelopes."""
    if isinstance(value, dict):
        if SECRET_SIGNATURE in value:
            return plain(json.loads(value["plaintext"]))
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


def deployed_objects(export: dict) -> list[dict]:
    """Every Kubernetes object the up applied, as its inputs (a NodePatch is a partial Node: applied
    server-side, it patches the labels as the up does)."""
    return [
        plain(r["inputs"])
        for r in export["deployment"]["resources"]
        if r.get("custom") and r["type"].startswith("kubernetes:") and not r.get("external")
    ]


def waits(objects: list[dict]) -> dict[tuple[str, str, str], set[str]]:
    """What the up waits for: the names to wait for, by (resource, namespace, condition), where a
    condition is kubectl wait's --for (`condition=C`, `jsonpath={.path}=value`, `jsonpath={.path}`)."""
    grouped: dict[tuple[str, str, str], set[str]] = {}
    for obj in objects:
        kind, meta = obj["kind"], obj["metadata"]
        conditions = meta.get("annotations", {}).get(WAIT_FOR_ANNOTATION) or AWAITED.get(kind)
        if kind == "StatefulSet":
            conditions = f"jsonpath={{.status.readyReplicas}}={obj['spec'].get('replicas', 1)}"
        if not conditions:
            continue
        group = obj["apiVersion"].rpartition("/")[0]
        resource_name = f"{kind.lower()}{'.' + group if group else ''}"
        for condition in json.loads(conditions) if conditions.startswith("[") else [conditions]:
            grouped.setdefault((resource_name, meta.get("namespace", ""), condition), set()).add(meta["name"])
    return grouped


def satisfied(obj: dict, condition: str) -> bool:
    """Whether `obj` meets one kubectl wait --for condition (the forms the up uses)."""
    form, _, expression = condition.partition("=")
    if form == "condition":
        return any(c.get("type") == expression and c.get("status") == "True" for c in obj.get("status", {}).get("conditions", []))
    path, _, wanted = expression.removeprefix("{").partition("}")
    value: Any = obj
    for key in path.strip(".").split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return bool(value) if not wanted else str(value) == wanted.removeprefix("=")


def apply_floor(cluster: LocalCluster, objects: list[dict]) -> float:
    """Seconds to apply `objects` server-side (namespaces and CRDs first, as any installer must)
    and wait for them on `cluster`. The waits list each kind once per poll (kubectl wait would
    watch the objects one at a time, under kubectl's own client rate limit)."""

    def apply(batch: list[dict]) -> None:
        if batch:
            cluster.kubectl(
                "apply",
                "--server-side",
                "--force-conflicts",
                "--field-manager=floor",
                "-f",
                "-",
                stdin=yaml.safe_dump_all(batch),
                timeout=FLOOR_BATCH_TIMEOUT,
            )

    def wait(group: tuple[tuple[str, str, str], set[str]]) -> None:
        (resource_name, namespace, condition), names = group

        def done() -> bool:
            listed = json.loads(cluster.kubectl("get", resource_name, *(["-n", namespace] if namespace else []), "-o", "json").stdout)
            return names <= {item["metadata"]["name"] for item in listed["items"] if satisfied(item, condition)}

        wait_until(f"{resource_name} {sorted(names)} to meet {condition}", done, timeout=300, interval=0.2)

    def in_parallel(call: Callable[[Any], object], items: list) -> None:
        with ThreadPoolExecutor(FLOOR_REQUESTS_AT_ONCE) as pool:
            list(pool.map(call, items))

    first = [o for o in objects if o["kind"] in ("Namespace", "CustomResourceDefinition")]
    rest = [o for o in objects if o not in first]
    start = time.perf_counter()
    in_parallel(apply, [first[i::FLOOR_REQUESTS_AT_ONCE] for i in range(FLOOR_REQUESTS_AT_ONCE)])
    cluster.kubectl("wait", "--timeout=60s", "--for=condition=Established", "crd", "--all")
    in_parallel(apply, [rest[i::FLOOR_REQUESTS_AT_ONCE] for i in range(FLOOR_REQUESTS_AT_ONCE)])
    in_parallel(wait, list(waits(objects).items()))
    return time.perf_counter() - start


def fresh_cluster(root: Path) -> LocalCluster:
    cluster = LocalCluster(root)
    cluster.run_dir.mkdir(parents=True)
    cluster.start()
    return cluster


def sized_stack(ws: Workspace, label: str, submounts: int, pools: int, nodes_per_pool: int) -> str:
    if label == "reference":
        return KWOK_STACK
    return scaled_stack(ws, label, submounts, labelled_cpu_pools(pools, nodes_per_pool), base=KWOK_STACK)


def measure(root: Path, label: str, submounts: int, pools: int, nodes_per_pool: int, parallel: int, skip_checkpoints: bool) -> None:
    parallel_args = ["--parallel", str(parallel)] if parallel else []
    cluster = fresh_cluster(root / "kube")
    try:
        ws = kwok_workspace(root / "ws", cluster)
        stack = sized_stack(ws, label, submounts, pools, nodes_per_pool)
        stack_file = ws.project / f"Pulumi.{stack}.yaml"
        cluster.add_nodes(stack_file)
        count = len(ws.preview_steps(stack=stack))
        up, up_cpu = timed(ws, "up", "--yes", "--skip-preview", *parallel_args, stack=stack)
        preview, _ = timed(ws, "preview", "--expect-no-changes", stack=stack)
        export = ws.pulumi("stack", "export", "--show-secrets", stack=stack).stdout
        objects = deployed_objects(json.loads(export))
    finally:
        cluster.stop()
    floor_cluster = fresh_cluster(root / "floor")
    try:
        floor_cluster.add_nodes(stack_file)
        floor = apply_floor(floor_cluster, objects)
    finally:
        floor_cluster.stop()
    print(
        f"{label:<9} parallel={parallel or 'default':<7} GOGC={os.environ.get('GOGC', '100')} resources={count:>4} objects={len(objects):>4} "
        f"up={up:6.2f} s floor={floor:6.2f} s up/floor={up / floor:4.2f} "
        f"CPU {up_cpu / count * 1000:6.1f} ms/resource, state {len(export) / 1e6:4.1f} MB; no-change preview={preview:6.2f} s ({preview / count * 1000:5.1f} ms/resource)",
        flush=True,
    )
    if skip_checkpoints:
        control = fresh_cluster(root / "control")
        try:
            control_ws = kwok_workspace(root / "control-ws", control)
            sized_stack(control_ws, label, submounts, pools, nodes_per_pool)
            control.add_nodes(stack_file)
            control_ws.env["PULUMI_SKIP_CHECKPOINTS"] = "true"
            unchecked, unchecked_cpu = timed(control_ws, "up", "--yes", "--skip-preview", *parallel_args, stack=stack)
        finally:
            control.stop()
        print(
            f"{label:<9} the same up with PULUMI_SKIP_CHECKPOINTS (control only): up={unchecked:6.2f} s "
            f"CPU {unchecked_cpu / count * 1000:6.1f} ms/resource",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--parallel", type=int, default=64)
    parser.add_argument("--sizes", default=",".join(label for label, *_ in SIZES))
    parser.add_argument("--skip-checkpoints", action="store_true", help="also run each up with PULUMI_SKIP_CHECKPOINTS, as a control")
    args = parser.parse_args()
    chosen = args.sizes.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        for label, submounts, pools, nodes_per_pool in SIZES:
            if label in chosen:
                measure(Path(tmp) / label, label, submounts, pools, nodes_per_pool, args.parallel, args.skip_checkpoints)


if __name__ == "__main__":
    main()

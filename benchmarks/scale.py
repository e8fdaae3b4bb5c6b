"""The program's cost as the tenants grow (issue 40): stacks of 10, 40, 160 and 320 tenants over 1,000
GPU nodes in four pools (tests/scale.py). Prints figures; asserts nothing.

For each size, one line per measurement, and a table at the end:

1. resources: what the program registers under the SDK's mocks (providers and components included);
2. the program under the SDK's mocks (tools/program_mocks.run_under_mocks with build_platform, as
   tests/snapshot.py runs it), prod-hoalac's shape, all sizes in one process one after the other: time,
   time per resource, and the dependency declarations the SDK sends per resource (the sum of each
   registration's dependencies: what its cycle check walks);
3. a real `pulumi preview` of the kwok stack's shape (the one that deploys offline: its charts from
   .kwok/charts) in render mode (`kubernetes.renderYamlToDirectory`, as benchmarks/engine.py), its time
   and time per step, without and with the policy pack (the stack's own pack config, as `make schema`
   would generate it);
4. unless `--skip-kwok`: on a fresh kwok control plane (scripts/kube-local.sh) with the 1,000 GPU nodes
   and Kueue's controller (tests/kube.KueueController), the `pulumi up` that creates everything beside
   its floor (benchmarks/kube.py's: the same objects applied server-side on another fresh control
   plane), and the state (`pulumi stack export`) per resource, by resource type, largest first;
5. at `--change-at` tenants (160) on kwok, after that first up: a no-change `up`, an `up` adding one
   tenant and an `up` changing one tenant's cells, each with its time and its steps (`pulumi up --json`)
   by operation and type: what one tenant's change touches.

Every up runs as `make up` runs it: no `--target`, `--parallel` as the Makefile's PARALLEL (64). With
`--unchecked-first-up`, the first up of each size runs with PULUMI_SKIP_CHECKPOINTS (the state written once,
at the end: a 160-tenant stack's first up then fits the command limit on two cores), and its time is
marked so; the one-tenant changes after it write their checkpoints as always.

    .venv/bin/python benchmarks/scale.py [--sizes 10,40,160,320] [--skip-kwok | --only-kwok] [--parallel N] [--change-at N]
        [--unchecked-first-up]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.kube import apply_floor, deployed_objects, fresh_cluster, timed  # noqa: E402
from components.config import PROJECT, parse_config  # noqa: E402
from components.platform import build_platform  # noqa: E402
from tests.engine import Workspace, new_workspace  # noqa: E402
from tests.harness import ROOT, run_under_mocks  # noqa: E402
from tests.kube import CHARTS_DIR, KWOK_STACK, KueueController, LocalCluster, kwok_workspace, run_script  # noqa: E402
from tests.scale import SIZES, scaled_config  # noqa: E402
from tools.policy_configs import SETTINGS_DIR, policy_config  # noqa: E402

COMMAND_TIMEOUT = 7200.0  # a first up of 2,200 resources (160 tenants) ran past an hour on two shared cores
STATE_KINDS_SHOWN = 15
# A policy's finding in the preview's "Policies:" section (the kwok stack's pack config is advisory).
VIOLATION = re.compile(r"- \[(?:advisory|mandatory)\]\s+(\S+)")
CHANGED_TENANT = 5  # whose cells the last up of the change series doubles


def stack_name(tenants: int) -> str:
    return f"scale-{tenants}"


# --- under the SDK's mocks ----------------------------------------------------------------------


def measure_mocks(tenants: int) -> dict[str, Any]:
    raw = scaled_config(tenants)
    config = parse_config(raw)
    start = time.perf_counter()
    run = run_under_mocks(lambda: build_platform(config), raw, stack=stack_name(tenants))
    seconds = time.perf_counter() - start
    count = len(run.resources)
    declarations = sum(len(r.dependencies) for r in run.resources)
    figures = {"resources": count, "mocks_s": seconds, "dependencies": declarations}
    print(
        f"{tenants:>4} tenants, mocks:   resources={count:>5} program={seconds:7.1f} s "
        f"per_resource={seconds / count * 1000:6.1f} ms dependency_declarations={declarations:>8} "
        f"({declarations / count:6.1f} per resource)",
        flush=True,
    )
    return figures


# --- a stack of the kwok shape in a workspace ----------------------------------------------------


def write_stack(ws: Workspace, tenants: int, raw: dict[str, Any], render_to: str | None = None) -> str:
    """Stack scale-<tenants> with config `raw` (render mode where `render_to` is given); its policy pack config
    beside it in policies/config/, as `make schema` writes one."""
    name = stack_name(tenants)
    if render_to is not None:
        raw = {**raw, "kubernetes": {"renderYamlToDirectory": render_to}}
    stack_file = ws.project / f"Pulumi.{name}.yaml"
    is_new = not stack_file.exists()
    stack_file.write_text(yaml.safe_dump({"config": {f"{PROJECT}:{key}": value for key, value in raw.items()}}))
    settings = json.loads((ROOT / SETTINGS_DIR / f"{KWOK_STACK}.json").read_text())
    pack_config = ws.project / "policies" / "config" / f"{name}.json"
    pack_config.write_text(json.dumps(policy_config(settings, parse_config(raw, stack=name)), indent=2))
    if is_new:
        ws.pulumi("stack", "init", name, "--secrets-provider", "passphrase", stack=None)
    return name


def policy_pack_args(ws: Workspace, stack: str) -> list[str]:
    return ["--policy-pack", "policies", "--policy-pack-config", f"policies/config/{stack}.json"]


def measure_preview(ws: Workspace, tenants: int) -> dict[str, Any]:
    stack = write_stack(ws, tenants, scaled_config(tenants, KWOK_STACK), render_to=f"rendered-{tenants}")
    start = time.perf_counter()
    steps = json.loads(ws.pulumi("preview", "--json", stack=stack).stdout).get("steps", [])
    seconds = time.perf_counter() - start
    start = time.perf_counter()
    packed = ws.pulumi("preview", "--diff=false", *policy_pack_args(ws, stack), stack=stack, check=False)
    with_pack = time.perf_counter() - start
    violated = VIOLATION.findall(packed.stdout)
    accepted = packed.returncode == 0 and not violated
    count = len(steps)
    print(
        f"{tenants:>4} tenants, preview: steps={count:>5} preview={seconds:7.1f} s per_step={seconds / count * 1000:6.1f} ms; "
        f"with the policy pack {with_pack:7.1f} s ({with_pack / count * 1000:6.1f} ms/step), "
        f"{'accepted' if accepted else 'REFUSED: ' + (', '.join(violated) or packed.stderr[-2000:])}",
        flush=True,
    )
    return {"steps": count, "preview_s": seconds, "pack_s": with_pack, "pack": "accepted" if accepted else "refused"}


# --- on kwok --------------------------------------------------------------------------------------


def state_by_type(export: dict[str, Any]) -> list[tuple[str, int, int]]:
    """(type, resources, bytes of their JSON in the export), largest first."""
    sizes: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    for r in export["deployment"]["resources"]:
        sizes[r["type"]] += len(json.dumps(r))
        counts[r["type"]] += 1
    return [(type_, counts[type_], size) for type_, size in sizes.most_common()]


def steps_by_operation(output: str) -> Counter[tuple[str, str]]:
    """(operation, resource type) -> resources, from `pulumi up --json`: the engine's events, each resource's
    step ending in its outputs event."""
    decoder, steps, position = json.JSONDecoder(), Counter[tuple[str, str]](), 0
    while (start := output.find("{", position)) != -1:
        try:
            event, position = decoder.raw_decode(output, start)
        except ValueError:  # the CLI's own lines after the events
            position = start + 1
            continue
        if step := event.get("resOutputsEvent"):
            steps[(step["metadata"]["op"], step["metadata"]["type"])] += 1
    return steps


def describe_steps(steps: Counter[tuple[str, str]]) -> str:
    operations = Counter[str]()
    for (op, _), n in steps.items():
        operations[op] += n
    changed = ", ".join(f"{op} {type_.split(':', 1)[-1]}={n}" for (op, type_), n in sorted(steps.items()) if op != "same")
    return f"{dict(sorted(operations.items()))}; not same: {changed or 'none'}"


def kwok_cluster(root: Path, raw: dict[str, Any]) -> LocalCluster:
    """A fresh control plane with the stack's kwok nodes and Kueue's controller (the stack leaves Kueue's install to it)."""
    config = parse_config(raw)
    cluster = fresh_cluster(root)
    try:
        cluster.add_nodes(config)
        KueueController(cluster, config).start()
    except BaseException:
        cluster.stop()
        raise
    return cluster


def timed_up(ws: Workspace, stack: str, parallel: int, *extra: str) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds, stdout) of `pulumi up` as `make up` runs it."""
    parallel_args = ["--parallel", str(parallel)] if parallel else []
    wall, cpu = timed(ws, "up", "--yes", "--skip-preview", *parallel_args, *extra, stack=stack)
    return wall, cpu, ws.transcript[-1]


def measure_kwok(root: Path, tenants: int, parallel: int, change: bool, unchecked: bool) -> dict[str, Any]:
    raw = scaled_config(tenants, KWOK_STACK)
    cluster = kwok_cluster(root / "kube", raw)
    try:
        ws = kwok_workspace(root / "ws", cluster)
        ws.timeout = COMMAND_TIMEOUT
        stack = write_stack(ws, tenants, raw)
        if unchecked:
            ws.env["PULUMI_SKIP_CHECKPOINTS"] = "true"
        up, up_cpu, _ = timed_up(ws, stack, parallel)
        ws.env.pop("PULUMI_SKIP_CHECKPOINTS", None)
        exported = ws.pulumi("stack", "export", stack=stack).stdout  # as the state holds it: secrets encrypted
        export = json.loads(exported)
        objects = deployed_objects(json.loads(ws.pulumi("stack", "export", "--show-secrets", stack=stack).stdout))
        count = len(export["deployment"]["resources"])
        print(
            f"{tenants:>4} tenants, kwok:    resources={count:>5} up{' (PULUMI_SKIP_CHECKPOINTS)' if unchecked else ''}={up:7.1f} s "
            f"({up / count * 1000:6.1f} ms/resource, "
            f"CPU {up_cpu / count * 1000:6.1f} ms/resource) state={len(exported) / 1e6:5.1f} MB "
            f"({len(exported) / count / 1000:5.1f} kB/resource)",
            flush=True,
        )
        print(f"{tenants:>4} tenants, state by type (largest first): type, resources, kB in all, kB per resource", flush=True)
        for type_, n, size in state_by_type(export)[:STATE_KINDS_SHOWN]:
            print(f"      {type_:<60} {n:>5} {size / 1000:9.1f} {size / n / 1000:7.2f}", flush=True)
        if change:
            measure_changes(ws, stack, tenants, parallel)
    finally:
        cluster.stop()
    floor_cluster = kwok_cluster(root / "floor", raw)
    try:
        floor = apply_floor(floor_cluster, objects)
    finally:
        floor_cluster.stop()
    print(f"{tenants:>4} tenants, kwok:    up={up:7.1f} s floor={floor:6.1f} s up/floor={up / floor:5.1f}", flush=True)
    return {"kwok_resources": count, "up_s": up, "floor_s": floor, "state_bytes": len(exported), "unchecked": unchecked}


def measure_changes(ws: Workspace, stack: str, tenants: int, parallel: int) -> None:
    """A no-change up, one adding a tenant, one changing a tenant's cells: each one's time and steps."""
    one_more = scaled_config(tenants + 1, KWOK_STACK)
    changed = scaled_config(tenants + 1, KWOK_STACK)
    changed["tenants"][CHANGED_TENANT]["cells"][0]["cells"] += 1
    for label, raw in (("no-change up", None), ("up adding one tenant", one_more), ("up changing one tenant's cells", changed)):
        if raw is not None:
            write_stack(ws, tenants, raw)
        seconds, _, output = timed_up(ws, stack, parallel, "--json")
        print(f"{tenants:>4} tenants, {label}: up={seconds:6.1f} s steps {describe_steps(steps_by_operation(output))}", flush=True)


# --- the table -------------------------------------------------------------------------------------


def table(rows: dict[int, dict[str, Any]]) -> str:
    def cell(row: dict[str, Any], key: str, per: str, unit: float, fmt: str) -> str:
        if key not in row:
            return "-"
        return f"{row[key]:{fmt}} ({row[key] / row[per] * unit:.1f})"

    lines = [
        "| tenants | resources (mocks) | program under mocks, s (ms/resource) | dependency declarations (per resource) "
        "| preview steps | preview, s (ms/step) | with the pack, s (ms/step) | kwok resources | up, s (ms/resource) "
        "| floor, s | up/floor | state, MB (kB/resource) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for tenants, row in rows.items():
        kwok = "up_s" in row
        floor = f"{row['floor_s']:.1f} | {row['up_s'] / row['floor_s']:.1f}" if kwok else "- | -"
        state = f"{row['state_bytes'] / 1e6:.1f} ({row['state_bytes'] / row['kwok_resources'] / 1000:.1f})" if kwok else "-"
        lines.append(
            f"| {tenants} | {row.get('resources', '-')} | {cell(row, 'mocks_s', 'resources', 1000, '.1f')} "
            f"| {cell(row, 'dependencies', 'resources', 1, ',')} | {row.get('steps', '-')} "
            f"| {cell(row, 'preview_s', 'steps', 1000, '.1f')} | {cell(row, 'pack_s', 'steps', 1000, '.1f')} "
            f"| {row.get('kwok_resources', '-')} | {cell(row, 'up_s', 'kwok_resources', 1000, '.1f')}{' unchecked' if row.get('unchecked') else ''} "
            f"| {floor} | {state} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="tenants per stack, comma-separated")
    parser.add_argument("--skip-kwok", action="store_true", help="the mocks and the preview only")
    parser.add_argument("--only-kwok", action="store_true", help="the kwok control plane's ups only")
    parser.add_argument("--parallel", type=int, default=64, help="as `make up` passes it (the Makefile's PARALLEL); 0: the CLI's default")
    parser.add_argument("--change-at", type=int, default=160, help="the size whose kwok stack then takes the one-tenant changes")
    parser.add_argument("--unchecked-first-up", action="store_true", help="each size's first kwok up with PULUMI_SKIP_CHECKPOINTS")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    rows: dict[int, dict[str, Any]] = {size: {} for size in sizes}
    with tempfile.TemporaryDirectory() as tmp:
        if not args.only_kwok:
            for size in sizes:
                rows[size].update(measure_mocks(size))
            # The kwok stack's project with its stand-in charts; render mode reaches no cluster.
            preview_ws = new_workspace(Path(tmp) / "preview", stack=KWOK_STACK)
            run_script("charts", str(preview_ws.project / CHARTS_DIR))
            preview_ws.timeout = COMMAND_TIMEOUT
            for size in sizes:
                rows[size].update(measure_preview(preview_ws, size))
        if not args.skip_kwok:
            for size in sizes:
                rows[size].update(
                    measure_kwok(Path(tmp) / f"kwok-{size}", size, args.parallel, change=size == args.change_at, unchecked=args.unchecked_first_up)
                )
    print(table(rows), flush=True)


if __name__ == "__main__":
    main()

"""The usage report: each tenant's GPU-hours used against its guarantee over a period, from Slurm's
accounting (sacct) and Kueue's Workloads. Pure and standard library only: `make report` (tools/report.py)
imports it, and the report CronJob (components/monitoring/report.py) ships this very file to its pod and
runs it there with the pod's python3, so both compute the report the same way.

A job or workload counts its GPUs for the part of its run inside the period (clamped at both edges; one still
running counts up to now). Borrowed GPU-hours are those above the guarantee: the tenant's GPUs in use at
each moment beyond what it is guaranteed, integrated over the period.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any, Optional

# What sacct prints per job (-X: the allocation only, not its steps); the job's own Start and End, not
# its Elapsed, so that a job crossing an edge of the period counts only its part inside.
SACCT_FIELDS = ("JobIDRaw", "Account", "Start", "End", "AllocTRES")
# sacct prints times in the client's time zone, in the format SLURM_TIME_FORMAT names: UTC, ISO 8601.
SACCT_ENV = {"TZ": "UTC", "SLURM_TIME_FORMAT": "standard"}
SACCT_TIME = "%Y-%m-%dT%H:%M:%S"
# AllocTRES's GPUs: every GPU (typed requests count here too, common.accounted_gpu_tres); gres/gpu:<type> beside it.
SLURM_GPU_TRES = "gres/gpu"
KUEUE_GPU = "nvidia.com/gpu"
# The CronJob runs this file with the Slurm image's python3, which may be as old as 3.9: no datetime.UTC, no zip(strict=).
UTC = timezone.utc  # noqa: UP017


@dataclass(frozen=True)
class Guarantee:
    """A tenant's guarantee in one scheduler: `gpus` at all times, and where its use is recorded: Slurm accounts
    (the guaranteed one and its oppo account) or Kueue ClusterQueues."""

    tenant: str
    scheduler: str
    gpus: int
    sources: tuple[str, ...]


@dataclass(frozen=True)
class Run:
    """GPUs held from `start` to `end` (seconds since the epoch) under `source` (an account or a ClusterQueue)."""

    source: str
    start: float
    end: float
    gpus: int


@dataclass(frozen=True)
class Row:
    tenant: str
    scheduler: str
    guaranteed_gpu_hours: float
    used_gpu_hours: float
    used_percent: Optional[float]  # None: nothing guaranteed
    borrowed_gpu_hours: float


def sacct_time(moment: datetime) -> str:
    return utc(moment).strftime(SACCT_TIME)


def sacct_command(cluster: str, start: str, end: str) -> list[str]:
    """Every user's jobs (-a; as root or the Slurm user, whatever PrivateData hides) of `cluster` that were
    eligible or ran from `start` to `end` (sacct_time's, or shell words that expand to them), run with SACCT_ENV."""
    return [
        "sacct",
        "-a",
        "-X",
        "-P",
        "-n",
        f"--clusters={cluster}",
        f"--format={','.join(SACCT_FIELDS)}",
        f"--starttime={start}",
        f"--endtime={end}",
    ]


def tres_gpus(alloc_tres: str) -> int:
    """The GPUs of an AllocTRES such as `billing=2,cpu=2,gres/gpu:h100=2,gres/gpu=2,mem=1G,node=1`: gres/gpu,
    else the typed ones summed (an AccountingStorageTRES without the untyped entry)."""
    counts = dict(item.split("=", 1) for item in alloc_tres.split(",") if "=" in item)
    if SLURM_GPU_TRES in counts:
        return int(counts[SLURM_GPU_TRES])
    return sum(int(value) for key, value in counts.items() if key.startswith(SLURM_GPU_TRES + ":"))


def _sacct_time(text: str) -> Optional[float]:
    """A Start or End as sacct prints it under SACCT_ENV; None for Unknown, None or empty (not started, still running)."""
    try:
        return datetime.strptime(text, SACCT_TIME).replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def parse_sacct(text: str, now: datetime) -> list[Run]:
    """sacct's lines (SACCT_FIELDS, -P -n): the jobs that held GPUs; one still running holds them until `now`."""
    runs = []
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) != len(SACCT_FIELDS):
            continue
        _, account, start_text, end_text, alloc_tres = fields
        start = _sacct_time(start_text)
        gpus = tres_gpus(alloc_tres)
        if start is None or not gpus:
            continue
        end = _sacct_time(end_text)
        runs.append(Run(account, start, utc(now).timestamp() if end is None else end, gpus))
    return runs


def _condition_time(workload: dict[str, Any], kind: str) -> Optional[float]:
    for condition in workload.get("status", {}).get("conditions") or []:
        if condition.get("type") == kind and condition.get("status") == "True":
            return datetime.fromisoformat(condition["lastTransitionTime"].replace("Z", "+00:00")).timestamp()
    return None


def parse_workloads(document: dict[str, Any], now: datetime) -> list[Run]:
    """Kueue Workloads (`kubectl get workloads -A -o json`): each admitted one's GPUs (its podSetAssignments'
    resourceUsage, every pod of the podset together) in its ClusterQueue, from its Admitted condition until its
    Finished one (or `now`). An evicted workload loses its admission: its earlier runs are not in the report."""
    runs = []
    for workload in document.get("items") or []:
        admission = workload.get("status", {}).get("admission")
        admitted = _condition_time(workload, "Admitted")
        if not admission or admitted is None:
            continue
        gpus = sum(_quantity(podset.get("resourceUsage", {}).get(KUEUE_GPU, "0")) for podset in admission.get("podSetAssignments") or [])
        finished = _condition_time(workload, "Finished")
        if gpus:
            runs.append(Run(admission["clusterQueue"], admitted, utc(now).timestamp() if finished is None else finished, gpus))
    return runs


def _quantity(value: Any) -> int:
    """A GPU count as Kubernetes writes it (a whole number: extended resources take no fractions)."""
    return int(str(value))


def _clamped(run: Run, start: float, end: float) -> tuple[float, float]:
    return max(run.start, start), min(run.end, end)


def gpu_seconds(runs: Iterable[Run], start: float, end: float) -> float:
    return sum(max(0.0, b - a) * run.gpus for run in runs for a, b in [_clamped(run, start, end)])


def borrowed_seconds(runs: Iterable[Run], guaranteed: int, start: float, end: float) -> float:
    """GPU-seconds above `guaranteed`: the GPUs in use at each moment of the period beyond it."""
    changes: list[tuple[float, int]] = []
    for run in runs:
        a, b = _clamped(run, start, end)
        if b > a:
            changes += [(a, run.gpus), (b, -run.gpus)]
    borrowed, in_use, since = 0.0, 0, start
    for moment, change in sorted(changes):
        borrowed += max(0, in_use - guaranteed) * (moment - since)
        in_use, since = in_use + change, moment
    return borrowed


def report_rows(guarantees: Sequence[Guarantee], runs: dict[str, list[Run]], start: datetime, end: datetime) -> list[Row]:
    """One row per tenant and scheduler; `runs` by scheduler."""
    a, b = utc(start).timestamp(), utc(end).timestamp()
    rows = []
    for guarantee in guarantees:
        own = [run for run in runs.get(guarantee.scheduler, []) if run.source in guarantee.sources]
        guaranteed = guarantee.gpus * (b - a) / 3600
        used = gpu_seconds(own, a, b) / 3600
        rows.append(
            Row(
                tenant=guarantee.tenant,
                scheduler=guarantee.scheduler,
                guaranteed_gpu_hours=round(guaranteed, 3),
                used_gpu_hours=round(used, 3),
                used_percent=round(100 * used / guaranteed, 1) if guaranteed else None,
                borrowed_gpu_hours=round(borrowed_seconds(own, guarantee.gpus, a, b) / 3600, 3),
            )
        )
    return rows


COLUMNS = ("tenant", "scheduler", "guaranteed GPU-h", "used GPU-h", "used %", "borrowed GPU-h")


def table(rows: Sequence[Row], start: datetime, end: datetime) -> str:
    """The report as text: the period, then one aligned line per row."""
    lines = [COLUMNS] + [
        (
            row.tenant,
            row.scheduler,
            f"{row.guaranteed_gpu_hours:.2f}",
            f"{row.used_gpu_hours:.2f}",
            "-" if row.used_percent is None else f"{row.used_percent:.1f}",
            f"{row.borrowed_gpu_hours:.2f}",
        )
        for row in rows
    ]
    widths = [max(len(line[i]) for line in lines) for i in range(len(COLUMNS))]
    period = f"GPU-hours from {utc(start).isoformat()} to {utc(end).isoformat()}"
    return "\n".join([period, *("  ".join(line[i].ljust(widths[i]) for i in range(len(COLUMNS))).rstrip() for line in lines)]) + "\n"


def as_json(rows: Sequence[Row], start: datetime, end: datetime) -> str:
    return json.dumps({"from": utc(start).isoformat(), "to": utc(end).isoformat(), "rows": [asdict(row) for row in rows]}, indent=2) + "\n"


def guarantees_json(guarantees: Sequence[Guarantee]) -> str:
    return json.dumps([asdict(guarantee) for guarantee in guarantees], indent=2) + "\n"


def guarantees_from_json(text: str) -> list[Guarantee]:
    return [Guarantee(g["tenant"], g["scheduler"], g["gpus"], tuple(g["sources"])) for g in json.loads(text)]


def utc(moment: datetime) -> datetime:
    """Naive times are UTC."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def main(argv: Optional[list[str]] = None) -> int:
    """The CronJob's report: the sacct output its script saved for the period, against the guarantees as rendered
    at preview time (Kueue's Workloads are not read there: the pod has no Kubernetes token). A table, then JSON."""
    parser = argparse.ArgumentParser(description="Each tenant's Slurm GPU-hours against its guarantee, from a saved sacct output.")
    parser.add_argument("--guarantees", required=True, help="the guarantees file (guarantees_json)")
    parser.add_argument("--sacct-file", required=True, help="the output of sacct_command for the period")
    parser.add_argument("--from", dest="start", required=True, help="UTC, as 2026-11-01T00:00:00")
    parser.add_argument("--to", dest="end", required=True, help="UTC, as 2026-11-01T00:00:00")
    args = parser.parse_args(argv)
    with open(args.guarantees, encoding="utf-8") as file:
        guarantees = [g for g in guarantees_from_json(file.read()) if g.scheduler == "slurm"]
    with open(args.sacct_file, encoding="utf-8") as file:
        sacct = file.read()
    start, end = (datetime.strptime(text, SACCT_TIME).replace(tzinfo=UTC) for text in (args.start, args.end))
    rows = report_rows(guarantees, {"slurm": parse_sacct(sacct, end)}, start, end)
    # The table for whoever reads the Job's log, then the same rows for whatever parses it.
    print(table(rows, start, end) + as_json(rows, start, end), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())

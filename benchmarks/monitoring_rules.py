"""The recording rules and alerts (components/monitoring/rules.py) for 40 tenants, evaluated by a real
Prometheus v0.316.0 (scripts/prometheus-local.sh) scraping node_exporter's textfile collector, which
serves synthetic series in the Slurm exporter's shape (components/monitoring/series.py labels) for
40 Slurm worker nodes of 8 GPUs, plus DCGM's and Kueue's for 10 of the tenants through Kueue.
Prints the rule groups' evaluation time (Prometheus's own prometheus_rule_group_last_duration_seconds,
median over the run), the series the rules record per tenant, and the input series per tenant and per
node. The run lasts under a minute, so GPU-hours' 1h window holds that much: with an hour of data
avg_over_time reads up to 120 samples (30 s scrapes) per tenant instead. Asserts only that the rules
recorded every tenant."""

from __future__ import annotations

import copy
import json
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from components.config import PlatformConfig, parse_config  # noqa: E402
from components.monitoring import rules, series  # noqa: E402
from components.slurm import resolve  # noqa: E402
from tests.harness import prometheus_bin, stack_config  # noqa: E402

TENANTS, KUEUE_TENANTS, NODES, GPUS = 40, 10, 40, 8
INTERVAL = 2  # seconds between scrapes and between rule evaluations
SAMPLES = 20  # rule evaluations measured


def config_of_40_tenants() -> PlatformConfig:
    """prod-hoalac grown to 40 Slurm workers (and 10 Kueue nodes), one 8-GPU cell per tenant, the first 10 with Kueue cells too."""
    raw = copy.deepcopy(stack_config("prod-hoalac"))
    pool = raw["nodePools"][0]
    pool["nodeCount"], pool["slurmWorkers"] = NODES + KUEUE_TENANTS, NODES
    raw["regionQuota"] = {key: value * 20 for key, value in raw["regionQuota"].items()}
    kueue = {"namespace": True, "kueueCells": [{"pool": pool["name"], "gpusPerCell": GPUS, "cells": 1}]}
    raw["tenants"] = [
        {"name": f"team-{i:02d}", "cells": [{"pool": pool["name"], "gpusPerCell": GPUS, "cells": 1}], **(kueue if i < KUEUE_TENANTS else {})}
        for i in range(TENANTS)
    ]
    raw["monitoring"] = {"enabled": True}
    return parse_config(raw)


def line(name: str, labels: dict[str, str], value: float) -> str:
    return name + "{" + ",".join(f'{key}="{val}"' for key, val in labels.items()) + "} " + f"{value:g}"


def tenant_series(config: PlatformConfig) -> list[str]:
    """Per tenant as the exporter writes it: GPUs allocated per account and partition, GPUs pending per
    account, partition and reason, jobs per account and state."""
    lines = []
    for i, tenant in enumerate(config.tenants):
        for account in (tenant.name, tenant.oppo_account):
            lines.append(line(series.ACCOUNT_GPUS_ALLOCATED, {"account": account, "partition": "h100"}, (i % 3) * 4))
            lines.append(line(series.ACCOUNT_GPUS_PENDING, {"account": account, "partition": "h100", "reason": "Resources"}, i % 2 * 8))
            for state in ("running", "pending"):
                lines.append(line(series.ACCOUNT_JOBS, {"account": account, "state": state}, i % 4))
    return lines


def node_series() -> list[str]:
    """Per node: the exporter's state, GPUs and GPUs allocated, and DCGM's XID gauge per GPU."""
    lines = []
    for n in range(NODES):
        node = f"worker-{n}"
        lines.append(line(series.NODE_STATE, {"node": node, "state": "mixed", "reason": ""}, 1))
        lines.append(line(series.NODE_GPUS, {"node": node}, GPUS))
        lines.append(line(series.NODE_GPUS_ALLOCATED, {"node": node}, n % (GPUS + 1)))
        lines += [line(series.DCGM_XID, {"gpu": str(g), "UUID": f"GPU-{n}-{g}", "Hostname": node}, 0) for g in range(GPUS)]
    return lines


def kueue_series(config: PlatformConfig) -> list[str]:
    lines = []
    for tenant in rules.kueue_tenants(config):
        queue = {"cohort": config.cluster.name, "cluster_queue": tenant.name, "flavor": f"{config.cluster.name}-h100", "resource": "nvidia.com/gpu"}
        lines.append(line(series.KUEUE_USAGE, {**queue, "replica_role": "leader"}, 4))
        lines.append(line(series.KUEUE_NOMINAL_QUOTA, {**queue, "replica_role": "leader"}, GPUS))
        lines.append(line(series.KUEUE_PENDING_RESOURCES, {"cluster_queue": tenant.name, "resource": "nvidia.com/gpu", "replica_role": "leader"}, 0))
        for status in ("active", "inadmissible"):
            lines.append(line(series.KUEUE_PENDING_WORKLOADS, {"cluster_queue": tenant.name, "status": status, "replica_role": "leader"}, 0))
    return lines


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def query(port: int, expr: str) -> list[dict[str, Any]]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as response:
        return list(json.load(response)["data"]["result"])


def last_evaluations(port: int) -> list[tuple[str, float, float]]:
    """Per rule group, when it was last evaluated and how long that took: from Prometheus's own /metrics
    (it does not scrape itself here)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    found: dict[str, dict[str, float]] = {}
    for metric in ("prometheus_rule_group_last_duration_seconds", "prometheus_rule_group_last_evaluation_timestamp_seconds"):
        for match in re.finditer(rf'^{metric}{{rule_group="[^"]*;([^"]+)"}} (\S+)$', text, re.MULTILINE):
            found.setdefault(match.group(1), {})[metric] = float(match.group(2))
    return [
        (group, values["prometheus_rule_group_last_evaluation_timestamp_seconds"], values["prometheus_rule_group_last_duration_seconds"])
        for group, values in found.items()
        if values.get("prometheus_rule_group_last_evaluation_timestamp_seconds", 0) > 0
    ]


def main() -> None:
    bin_dir = prometheus_bin()
    config = config_of_40_tenants()
    start = time.perf_counter()
    groups = rules.rule_groups(config, resolve(config))
    render_ms = (time.perf_counter() - start) * 1000
    per_tenant, per_node, kueue = tenant_series(config), node_series(), kueue_series(config)
    with tempfile.TemporaryDirectory(prefix="rules-benchmark-") as tmp:
        work = Path(tmp)
        (work / "textfile").mkdir()
        (work / "textfile" / "slurm.prom").write_text("\n".join([*per_tenant, *per_node, *kueue]) + "\n")
        (work / "rules.yaml").write_text(yaml.safe_dump(groups))
        exporter_port, prometheus_port = free_port(), free_port()
        target = {"targets": [f"127.0.0.1:{exporter_port}"], "labels": {"namespace": config.cluster.namespace}}
        scrape = {"job_name": series.EXPORTER_APP, "static_configs": [target]}
        interval = f"{INTERVAL}s"
        prometheus_config = {
            "global": {"scrape_interval": interval, "evaluation_interval": interval},
            "rule_files": ["rules.yaml"],
            "scrape_configs": [scrape],
        }
        (work / "prometheus.yml").write_text(yaml.safe_dump(prometheus_config))
        exporter = subprocess.Popen(
            [
                str(bin_dir / "node_exporter"),
                "--collector.disable-defaults",
                "--collector.textfile",
                f"--collector.textfile.directory={work / 'textfile'}",
                f"--web.listen-address=127.0.0.1:{exporter_port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        prometheus = subprocess.Popen(
            [
                str(bin_dir / "prometheus"),
                f"--config.file={work / 'prometheus.yml'}",
                f"--storage.tsdb.path={work / 'data'}",
                f"--web.listen-address=127.0.0.1:{prometheus_port}",
            ],
            cwd=work,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            durations: dict[str, dict[float, float]] = {}
            deadline = time.monotonic() + 180
            while min((len(v) for v in durations.values()), default=0) < SAMPLES and time.monotonic() < deadline:
                time.sleep(INTERVAL / 2)
                try:
                    for group, evaluated_at, seconds in last_evaluations(prometheus_port):
                        durations.setdefault(group, {})[evaluated_at] = seconds
                except OSError:
                    continue
            recorded = query(prometheus_port, 'count by (tenant, scheduler) ({__name__=~"tenant:.*"})')
            scraped = query(prometheus_port, f'scrape_samples_scraped{{job="{series.EXPORTER_APP}"}}')
        finally:
            for process in (prometheus, exporter):
                process.terminate()
                process.wait(timeout=30)
    tenants_recorded = {(r["metric"]["tenant"], r["metric"]["scheduler"]) for r in recorded}
    assert len(tenants_recorded) == TENANTS + KUEUE_TENANTS, f"recorded {len(tenants_recorded)} tenant rule sets"
    rule_count = sum(len(group["rules"]) for group in groups["groups"])
    print(
        f"rules for {TENANTS} tenants ({KUEUE_TENANTS} also on Kueue), {NODES} nodes x {GPUS} GPUs: {rule_count} rules, rendered in {render_ms:.1f} ms"
    )
    print(
        f"  evaluation time per rule group, median of {min(len(v) for v in durations.values())} evaluations (prometheus_rule_group_last_duration_seconds):"
    )
    medians = {name: statistics.median(values.values()) for name, values in durations.items()}
    for name, seconds in sorted(medians.items()):
        print(f"    {name:<40} {seconds * 1000:8.2f} ms")
    print(f"    {'all groups':<40} {sum(medians.values()) * 1000:8.2f} ms")
    per_record = {int(float(r["value"][1])) for r in recorded}
    print(f"  series recorded per tenant and scheduler: {sorted(per_record)}; input series per tenant {len(per_tenant) // TENANTS} (exporter),")
    print(
        f"  per node {len(per_node) // NODES} ({len(per_node) // NODES - GPUS} exporter + {GPUS} DCGM), per Kueue tenant {len(kueue) // KUEUE_TENANTS};"
    )
    print(f"  scraped per scrape: {int(float(scraped[0]['value'][1]))} samples")


if __name__ == "__main__":
    main()

"""`make report STACK=<stack> FROM=<when> TO=<when>`: each tenant's GPU-hours used against its guarantee over
the period, per scheduler: Slurm from slurmdbd (sacct, run with `kubectl exec` in a Slurm pod of the stack's
cluster, or a saved output with --sacct-file), Kueue from its Workloads (`kubectl get workloads -A -o json`, or
--workloads-file). A table, or JSON with --json. It only reads.

FROM and TO are UTC: a date (2026-11-01, its midnight) or a time (2026-11-01T12:00:00); TO defaults to now and
FROM to seven days before TO. The report itself is components/monitoring/usage.py, the CronJob's too.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Optional

from components.config import ConfigError, PlatformConfig
from components.monitoring import usage
from components.monitoring.report import guarantees
from components.slurm import operator_module
from tools.policy_configs import stack_config
from tools.preflight import label_text


class ReportError(Exception):
    """What could not be read, and how to get it."""


def parse_when(text: str) -> datetime:
    """A date or an ISO time, UTC unless it names its offset."""
    try:
        return usage.utc(datetime.fromisoformat(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither a date (2026-11-01) nor a time (2026-11-01T12:00:00)") from None


def client_pod_selector(config: PlatformConfig) -> dict[str, str]:
    """The pods whose image is the operator's Slurm client image (AccountingClient.image), so sacct is there:
    Slinky's login pods; soperator's slurmctld pods and ACK's head (its one image runs everything)."""
    roles = operator_module(config).pod_roles(config)
    selector = roles.login if config.slurm_operator == "slinky" else roles.controller
    return dict(selector["matchLabels"])


def kubectl(context: Optional[str], *args: str) -> str:
    command = ["kubectl", *(["--context", context] if context else []), *args]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    except FileNotFoundError:
        raise ReportError("kubectl is not on PATH; install it, or pass --sacct-file and --workloads-file") from None
    if done.returncode != 0:
        raise ReportError(f"`{' '.join(command)}` failed: {done.stderr.strip()}")
    return done.stdout


def sacct_output(config: PlatformConfig, context: Optional[str], start: datetime, end: datetime) -> str:
    """sacct's rows for the period, run as root in a Slurm pod (who sees every tenant's jobs despite PrivateData)."""
    namespace, selector = config.cluster.namespace, label_text(client_pod_selector(config))
    pods = kubectl(context, "get", "pods", "-n", namespace, "-l", selector, "--field-selector=status.phase=Running", "-o", "name").split()
    if not pods:
        raise ReportError(f"no running pod in namespace {namespace} matches {selector}; is the cluster up? (or pass --sacct-file)")
    command = usage.sacct_command(config.cluster.name, usage.sacct_time(start), usage.sacct_time(end))
    env = [f"{key}={value}" for key, value in usage.SACCT_ENV.items()]
    return kubectl(context, "exec", "-n", namespace, pods[0], "--", "env", *env, *command)


def workloads(config: PlatformConfig, context: Optional[str]) -> dict[str, Any]:
    return dict(json.loads(kubectl(context, "get", "workloads.kueue.x-k8s.io", "-A", "-o", "json")))


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prog="make report STACK=<stack> FROM=<when> TO=<when>")
    parser.add_argument("--stack", required=True)
    parser.add_argument("--from", dest="start", type=parse_when, help="UTC date or time; default: seven days before --to")
    parser.add_argument("--to", dest="end", type=parse_when, help="UTC date or time; default: now")
    parser.add_argument("--context", help="kubeconfig context; default: the stack's kubernetes.context, then the current-context")
    parser.add_argument(
        "--sacct-file", type=Path, help="sacct's output for the period, saved (the CronJob's log prints it where its image has no python3)"
    )
    parser.add_argument("--workloads-file", type=Path, help="`kubectl get workloads -A -o json`, saved")
    parser.add_argument("--json", action="store_true", help="JSON instead of a table")
    args = parser.parse_args(argv)
    now = datetime.now(usage.UTC).replace(microsecond=0)
    # Work still running counts up to now: a TO in the future ends the period now.
    end = min(args.end or now, now)
    start = args.start or end - timedelta(days=7)
    if start >= end:
        parser.error(f"--from {start.isoformat()} is not before --to {end.isoformat()}")
    try:
        config = stack_config(Path.cwd(), args.stack)
    except ConfigError as error:
        print(f"report {args.stack}: the stack config is invalid\n{error}", file=sys.stderr)
        return 1
    wanted = guarantees(config)
    if not wanted:
        print(f"report {args.stack}: the stack has no tenants, so no guarantee to report on (slurm-platform:tenants)", file=sys.stderr)
        return 1
    context = args.context or config.kubernetes.context
    try:
        sacct = args.sacct_file.read_text() if args.sacct_file else sacct_output(config, context, start, end)
        runs = {"slurm": usage.parse_sacct(sacct, end)}
        if any(g.scheduler == "kueue" for g in wanted):
            document = json.loads(args.workloads_file.read_text()) if args.workloads_file else workloads(config, context)
            runs["kueue"] = usage.parse_workloads(document, end)
    except ReportError as error:
        print(f"report {args.stack}: {error}", file=sys.stderr)
        return 1
    rows = usage.report_rows(wanted, runs, start, end)
    print(usage.as_json(rows, start, end) if args.json else usage.table(rows, start, end), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())

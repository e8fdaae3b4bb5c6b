"""The usage report as a CronJob (monitoring.reportSchedule, in the cluster's namespace): each tenant's Slurm
GPU-hours over the last 7 days against its guarantee, written to the Job's logs.

Its pod is a Slurm client beside the cluster, as the tenants Job is (components/slurm/client.py): the operator's
client image and auth, root in the container (Slurm shows root every job whatever PrivateData hides), no
Kubernetes token; the cluster's key only in its auth sidecar, as the Slurm exporter's. Its script runs sacct for the period, then this package's usage.py, shipped in its
ConfigMap as it is in the checkout, with the image's python3: the report `make report` prints
(tools/report.py) computed the same way. An image without python3 (ACK's is bring-your-own) prints the
guarantees and sacct's rows instead, which `make report --sacct-file` reads. Kueue's Workloads need the API
server, so the CronJob reports Slurm alone; `make report` reports both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from slurm_rules import kube_rules

from ..config import PlatformConfig
from ..slurm import AccountingClient
from ..slurm.client import SCRIPT_DIR, auth_setup, client_pod_spec
from ..slurm.common import client_slurm_conf, cluster_name_with
from . import usage
from .usage import Guarantee

LABELS = {"app.kubernetes.io/managed-by": "slurm-platform", "app.kubernetes.io/component": "usage-report"}
SCRIPT = "report.sh"
USAGE = "usage.py"
GUARANTEES = "guarantees.json"
PERIOD_DAYS = 7
# The API server refuses a longer CronJob name: each Job's name adds "-" and up to 10 digits, and it is a label value (63).
CRONJOB_NAME_MAX = kube_rules.LABEL_VALUE_MAX - 11
# Where the script keeps sacct's output for usage.py (the container's own filesystem, gone with it).
SACCT_OUTPUT = "/tmp/sacct.txt"


def guarantees(config: PlatformConfig) -> list[Guarantee]:
    """Each tenant's guarantee per scheduler, as the tenants and Kueue render them: in Slurm its cells' GPUs
    (TenantConfig.guaranteed_gpus, its account's GrpTRES), used by its account and its oppo account (components/tenancy/);
    in Kueue its kueueCells' GPUs (the nominalQuota of its ClusterQueue, named after it: components/kueue.py)."""
    found = []
    for tenant in config.tenants:
        found.append(Guarantee(tenant.name, "slurm", tenant.guaranteed_gpus, tenant.slurm_accounts))
        if config.operators.kueue.enabled and tenant.namespace and tenant.kueue_cells:
            found.append(Guarantee(tenant.name, "kueue", tenant.kueue_guaranteed_gpus, (tenant.name,)))
    return found


def name(config: PlatformConfig) -> str:
    """`<cluster>-usage-report`, the cluster part cut to fit a CronJob's name (CRONJOB_NAME_MAX)."""
    return cluster_name_with(config, "-usage-report", CRONJOB_NAME_MAX)


def report_script(config: PlatformConfig, client: AccountingClient) -> str:
    env = " ".join(f"{key}={value}" for key, value in usage.SACCT_ENV.items())
    # The period's edges are the shell's: sacct_command writes them as they come.
    sacct = " ".join(usage.sacct_command(config.cluster.name, '"$since"', '"$until"'))
    files = {key: f"{SCRIPT_DIR}/{key}" for key in (USAGE, GUARANTEES)}
    lines = [
        "#!/bin/bash",
        f"# Each tenant's Slurm GPU-hours over the last {PERIOD_DAYS} days against its guarantee (slurm-platform; components/monitoring/report.py).",
        "set -euo pipefail",
        *auth_setup(client, key_in_sidecar=True),
        "now=$(date -u +%s)",
        f'until=$(date -u -d "@$now" +{usage.SACCT_TIME})',
        f'since=$(date -u -d "@$((now - {PERIOD_DAYS * 86400}))" +{usage.SACCT_TIME})',
        f"{env} {sacct} > {SACCT_OUTPUT}",
        "if command -v python3 >/dev/null; then",
        f'  exec python3 {files[USAGE]} --guarantees {files[GUARANTEES]} --sacct-file {SACCT_OUTPUT} --from "$since" --to "$until"',
        "fi",
        'echo "no python3 in this image: the guarantees, then sacct\'s rows from $since to $until (make report --sacct-file reads them)"',
        f"cat {files[GUARANTEES]} {SACCT_OUTPUT}",
    ]
    return "\n".join(lines) + "\n"


def config_map(config: PlatformConfig, client: AccountingClient) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name(config), "namespace": config.cluster.namespace, "labels": LABELS},
        "data": {
            SCRIPT: report_script(config, client),
            "slurm.conf": client_slurm_conf(config, client),
            USAGE: Path(usage.__file__).read_text(encoding="utf-8"),
            GUARANTEES: usage.guarantees_json(guarantees(config)),
        },
    }


def cron_job(config: PlatformConfig, client: AccountingClient) -> dict[str, Any]:
    pod_spec = {"restartPolicy": "OnFailure", **client_pod_spec(config, client, "report", SCRIPT, name(config), key_in_sidecar=True)}
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name(config), "namespace": config.cluster.namespace, "labels": LABELS},
        "spec": {
            "schedule": config.monitoring.report_schedule,
            "timeZone": "Etc/UTC",
            "concurrencyPolicy": "Forbid",
            # The reports are the Jobs' logs: keep the last few.
            "successfulJobsHistoryLimit": 4,
            "failedJobsHistoryLimit": 2,
            "jobTemplate": {
                "metadata": {"labels": LABELS},
                "spec": {"backoffLimit": 2, "activeDeadlineSeconds": 1800, "template": {"metadata": {"labels": LABELS}, "spec": pod_spec}},
            },
        },
    }


def render(config: PlatformConfig, client: AccountingClient) -> list[dict[str, Any]]:
    """The ConfigMap and the CronJob, a client of the operator's Slurm (`client`); nothing unless monitoring is on and
    there are tenants to report on."""
    if not config.monitoring.enabled or not config.tenants:
        return []
    return [config_map(config, client), cron_job(config, client)]

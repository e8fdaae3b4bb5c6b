"""The tenants Job and the ConfigMap holding its script, named after a hash of what they carry."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from slurm_rules import cell_fit

from ..config import PlatformConfig
from ..config.tenants import cell_entries
from ..names import tenants_config_map, tenants_job
from ..slurm import AccountingClient
from ..slurm.client import client_pod_spec
from ..slurm.common import (
    client_slurm_conf,
)
from .accounts import sacctmgr_script
from .reservations import own_reservations

LABELS = {"app.kubernetes.io/managed-by": "slurm-platform", "app.kubernetes.io/component": cell_fit.TENANTS_COMPONENT}


SCRIPT = "sacctmgr.sh"


def script_name(config: PlatformConfig) -> str:
    return tenants_config_map(config.cluster.name, config.stack if config.role == "tenants" else None)


def job_name(config: PlatformConfig) -> str:
    return tenants_job(config.cluster.name, config.stack if config.role == "tenants" else None, tenants_hash(config))


def tenants_hash(config: PlatformConfig) -> str:
    """Short hash of what the Job applies, which its name carries: the stack's tenants as configured and, where other
    stacks share the cluster, what their cells decide here (the nodes of its reservations, the oppo accounts they admit)."""
    applied: list[Any] = [t.model_dump(mode="json", by_alias=True) for t in config.own_tenants]
    if config.shares_tenants:
        applied += [[r.name, r.nodes, r.accounts] for r in own_reservations(config)]
    document = json.dumps(applied, sort_keys=True)
    return hashlib.sha256(document.encode()).hexdigest()[:10]


def cells_document(config: PlatformConfig) -> str:
    """The stack's guaranteed cells as plain JSON, for the policy pack's fit check of the rendered stack (beside other
    stacks' cells, which its config carries where stacks share the cluster: tools/policy_configs.py)."""
    return json.dumps(cell_entries(config.own_tenants), indent=1)


def config_map(config: PlatformConfig, client: AccountingClient) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": script_name(config), "namespace": config.cluster.namespace, "labels": LABELS},
        "data": {
            SCRIPT: sacctmgr_script(config, client),
            "slurm.conf": client_slurm_conf(config, client),
            cell_fit.CELLS_KEY: cells_document(config),
        },
    }


def sacctmgr_job(config: PlatformConfig, client: AccountingClient) -> dict[str, Any]:
    """Runs the script once per tenant config: a new hash is a new Job (Jobs are immutable)."""
    labels = {**LABELS, "slurm-platform/tenants-hash": tenants_hash(config)}
    pod_spec = {"restartPolicy": "OnFailure", **client_pod_spec(config, client, "sacctmgr", SCRIPT, script_name(config))}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job_name(config), "namespace": config.cluster.namespace, "labels": labels},
        # It waits for slurmdbd; give up (and fail `pulumi up`) if it never answers.
        "spec": {"backoffLimit": 20, "activeDeadlineSeconds": 1800, "template": {"metadata": {"labels": labels}, "spec": pod_spec}},
    }

"""Helm charts as data, the building block of every operator's install (components/operator_charts.py
installs them; each Slurm operator's module in components/slurm/ says which charts it needs)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Optional

from .config import PlatformConfig

# Release keys, also the suffix of each Chart resource's name.
CERT_MANAGER = "cert-manager"
GPU_OPERATOR = "gpu-operator"
NETWORK_OPERATOR = "network-operator"
SOPERATOR_CRDS = "soperator-crds"
SOPERATOR = "soperator"
MARIADB_CRDS = "mariadb-operator-crds"
MARIADB_OPERATOR = "mariadb-operator"
KUEUE = "kueue"


# helm.v4.Chart renders a chart like `helm template` and never runs its hooks
# (nor keeps a Helm release object). What each chart we install uses hooks for,
# read from the pinned chart sources, and how this program makes up for it.
HELM_HOOKS: dict[str, str] = {
    GPU_OPERATOR: "v24.9.2: pre-upgrade Job applying the CRDs (operator.upgradeCRD, off here: the CRDs in the chart's crds/ "
    "are Pulumi resources, updated with the chart); pre-delete CRD cleanup (operator.cleanupCRD, off by default); NFD's "
    "post-delete Job pruning node labels (not run: after removing the chart, NFD's labels stay on the nodes)",
    NETWORK_OPERATOR: "24.10.1: pre-install/pre-upgrade Job applying the CRDs (upgradeCRDs, off here: Pulumi applies crds/); "
    "pre-install/pre-upgrade keep-ncp Job protecting a NicClusterPolicy a pre-24.10 chart made (not needed: this program "
    "declares the NicClusterPolicy itself); SR-IOV pre-delete webhook cleanup (SR-IOV is off)",
    SOPERATOR_CRDS: "1.14.10: no hooks; the CRD is a template, so it is updated with the chart",
    SOPERATOR: "1.14.10: no hooks",
    MARIADB_CRDS: "no hooks (26.6.0)",
    MARIADB_OPERATOR: "0.29.0 and 26.6.0: no hooks; webhook certificates come from its own cert-controller",
    CERT_MANAGER: "v1.16.2: post-install startupapicheck Job (startupapicheck.enabled, off here: it only polls the webhook; "
    "Pulumi awaits the webhook Deployment instead)",
    KUEUE: "0.19.2: the autoKueue post-install/post-upgrade Job that applies a default Topology, flavor and ClusterQueue "
    "(enableAutoKueue, off by default: this program declares the queues itself); CRDs are templates, updated with the chart; "
    "webhook certificates come from Kueue's own internal cert rotator",
}


@dataclass(frozen=True)
class ChartRelease:
    """One Helm release, as data: what `helm install` would be told."""

    key: str
    chart: str
    version: str
    namespace: str
    values: dict[str, Any] = field(default_factory=dict)
    repo: Optional[str] = None
    depends_on: tuple[str, ...] = ()
    skip_crds: bool = False


def chart_source(repository: str, chart: str) -> tuple[str, Optional[str]]:
    """(chart, repo) for helm: OCI and local charts by reference, repo charts by URL + name."""
    if repository.startswith(("http://", "https://")):
        return chart, repository
    return f"{repository.rstrip('/')}/{chart}", None


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Config `values` win over ours, key by key."""
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def uses_mariadb_operator(config: PlatformConfig) -> bool:
    accounting = config.slurm.accounting
    return accounting.enabled and accounting.database == "mariadbOperator"

"""NetworkPolicies that let exactly the Prometheus pods (monitoring.prometheus.podLabels in its namespace) reach
exactly the metrics ports in the cluster's namespace, the one the stack's default-deny covers that runs exporters
(components/network_policies.py; a tenant namespace runs none):

- the Slurm exporter (series.EXPORTER_APP, port series.EXPORTER_PORT);
- soperator's own exporter (its `metrics` port, 8080), where it runs;
- slurmdbd's mysqld-exporter (9104), with MariaDB's 3306 open to that exporter only.

Kueue, cert-manager and the GPU operator's DCGM exporter run in their own namespaces, which no policy of ours
covers. Nothing here without monitoring, or without the stack's NetworkPolicies (networkPolicies.enabled).
"""

from __future__ import annotations

from typing import Any

from ..config import PlatformConfig
from ..network_policies import policy, tcp
from ..slurm import Selector, operator_module
from ..slurm.common import MARIADB_PORT, NAMESPACE_NAME_LABEL
from . import series
from .monitors import DATABASE_EXPORTER_PORT, LABELS, SOPERATOR_EXPORTER_PORT, database_exporter

SLURM_EXPORTER: Selector = {"matchLabels": {"app.kubernetes.io/name": series.EXPORTER_APP}}


def prometheus_pods(config: PlatformConfig) -> dict[str, Any]:
    """The peer: the Prometheus pods, in the Prometheus's namespace (both selectors in one peer: AND)."""
    prometheus = config.monitoring.prometheus
    return {
        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: prometheus.namespace}},
        "podSelector": {"matchLabels": dict(prometheus.pod_labels)},
    }


def allow(config: PlatformConfig, name: str, pods: Selector, peer: dict[str, Any], port: int) -> dict[str, Any]:
    """`pods` take `port` from `peer` (this module's labels on the policy)."""
    manifest = policy(name, config.cluster.namespace, pods, ingress=[{"from": [peer], "ports": tcp(port)}])
    return {**manifest, "metadata": {**manifest["metadata"], "labels": LABELS}}


def render(config: PlatformConfig) -> list[dict[str, Any]]:
    if not (config.monitoring.enabled and config.network_policies.enabled):
        return []
    roles = operator_module(config).pod_roles(config)
    prometheus = prometheus_pods(config)
    policies = [allow(config, "allow-prometheus-slurm-exporter", SLURM_EXPORTER, prometheus, series.EXPORTER_PORT)]
    if roles.exporter is not None:
        policies.append(allow(config, "allow-prometheus-soperator-exporter", roles.exporter, prometheus, SOPERATOR_EXPORTER_PORT))
    if roles.database is not None:
        exporter = database_exporter(roles.database)
        policies += [
            allow(config, "allow-prometheus-database-exporter", exporter, prometheus, DATABASE_EXPORTER_PORT),
            # mysqld-exporter reads the database's status: the database takes it in too.
            allow(config, "allow-mariadb-from-exporter", roles.database, {"podSelector": exporter}, MARIADB_PORT),
        ]
    return policies

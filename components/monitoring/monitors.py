"""What Prometheus scrapes beside the Slurm exporter (exporter.py) and the GPUs: Kueue's controller, slurmdbd's
database, cert-manager and soperator's own Slurm exporter. Each monitor carries the Prometheus's selector labels
(monitoring.prometheus.selectorLabels) and the stack's scrape interval.

- soperator's exporter (slurmNodes.exporter, 1.14.10 and 4.1.7): a PodMonitor on its `metrics` port, 8080
  (internal/consts/container.go); the operator makes none itself while isPrometheusCrdInstalled is "false", its chart's default;
- Kueue: a ServiceMonitor on its chart's metrics Service (port `https`, 8443). Kueue authorizes every scrape
  (a TokenReview and a SubjectAccessReview for GET /metrics): Prometheus presents its ServiceAccount's token, which
  kube-prometheus-stack's Prometheus ClusterRole allows (nonResourceURLs /metrics). The chart's own `enablePrometheus`
  monitor carries only the chart's labels (templates/prometheus/monitor.yaml at v0.19.2), which no selector of ours
  matches, and binds ServiceAccounts named prometheus-k8s: off;
- slurmdbd's MariaDB: the MariaDB operator's `metrics` (mysqld-exporter beside the database, port 9104) and a
  ServiceMonitor as the operator's own, which carries none of our labels;
- cert-manager: its chart's `prometheus.servicemonitor`, where this stack installs it.
"""

from __future__ import annotations

from typing import Any

from ..charts import KUEUE
from ..config import PlatformConfig
from ..names import MARIADB_PORT
from ..slurm import PodRoles, Selector
from .series import API_VERSION, LABELS

# soperator's exporter container port, by name and number (1.14.10 and 4.1.7: internal/consts/container.go).
SOPERATOR_EXPORTER_PORT_NAME, SOPERATOR_EXPORTER_PORT = "metrics", 8080
# mysqld-exporter's port in the MariaDB operator's metrics Deployment (its MariaDB `metrics.exporter.port` default).
DATABASE_EXPORTER_PORT = 9104
# The Kueue chart's metrics Service (kueue.metricsService.labels, with the release named after its key).
KUEUE_METRICS_SERVICE = {"app.kubernetes.io/name": "kueue", "app.kubernetes.io/instance": KUEUE, "app.kubernetes.io/component": "metrics-service"}
# Prometheus' own ServiceAccount token: what Kueue's authorizing metrics endpoint checks.
SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"


def monitor(
    config: PlatformConfig,
    kind: str,
    name: str,
    namespace: str,
    selector: Selector,
    endpoints: list[dict[str, Any]],
    labels: dict[str, str] = LABELS,
    **spec: Any,
) -> dict[str, Any]:
    """A ServiceMonitor or PodMonitor: `labels` and those that make the Prometheus select it, every endpoint
    scraped at the stack's interval (`spec`: the kind's other fields, e.g. namespaceSelector, jobLabel)."""
    scraped = [{**endpoint, "interval": config.monitoring.scrape_interval} for endpoint in endpoints]
    return {
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace, "labels": {**labels, **config.monitoring.prometheus.selector_labels}},
        "spec": {**spec, "selector": selector, "endpoints" if kind == "ServiceMonitor" else "podMetricsEndpoints": scraped},
    }


def soperator_exporter_monitor(config: PlatformConfig, exporter: Selector) -> dict[str, Any]:
    namespace = config.cluster.namespace
    endpoints = [{"port": SOPERATOR_EXPORTER_PORT_NAME, "path": "/metrics"}]
    name = f"{config.cluster.name}-soperator-exporter"
    return monitor(config, "PodMonitor", name, namespace, exporter, endpoints, namespaceSelector={"matchNames": [namespace]})


def kueue_monitor(config: PlatformConfig) -> dict[str, Any]:
    namespace = config.operators.kueue.namespace
    endpoint = {
        "port": "https",
        "scheme": "https",
        "path": "/metrics",
        "bearerTokenFile": SERVICE_ACCOUNT_TOKEN,
        # Kueue serves its metrics with a self-signed certificate of its own cert rotator.
        "tlsConfig": {"insecureSkipVerify": True},
    }
    selector = {"matchLabels": KUEUE_METRICS_SERVICE}
    return monitor(
        config, "ServiceMonitor", "kueue-controller-manager", namespace, selector, [endpoint], namespaceSelector={"matchNames": [namespace]}
    )


def database_exporter(database: Selector) -> Selector:
    """The MariaDB operator's metrics Deployment and Service for a database: `exporter`, instance `<database>-metrics`
    (labels.WithMetricsSelectorLabels of its MetricsKey)."""
    instance = database["matchLabels"]["app.kubernetes.io/instance"]
    return {"matchLabels": {"app.kubernetes.io/name": "exporter", "app.kubernetes.io/instance": f"{instance}-metrics"}}


def database_monitor(config: PlatformConfig, database: Selector) -> dict[str, Any]:
    """What the operator's own ServiceMonitor says (pkg/builder/servicemonitor_builder.go): mysqld-exporter probes its
    one database pod, `<database>-0` behind `<database>-internal`, as `target`."""
    name = database["matchLabels"]["app.kubernetes.io/instance"]
    namespace = config.cluster.namespace
    endpoint = {"port": "metrics", "path": "/probe", "scheme": "http", "params": {"target": [f"{name}-0.{name}-internal:{MARIADB_PORT}"]}}
    selector = database_exporter(database)
    return monitor(config, "ServiceMonitor", f"{name}-metrics", namespace, selector, [endpoint], namespaceSelector={"matchNames": [namespace]})


def render(config: PlatformConfig, roles: PodRoles) -> list[dict[str, Any]]:
    """The monitors of this module, over the pods the operator runs (`roles`); none with monitoring off."""
    if not config.monitoring.enabled:
        return []
    monitors = []
    if roles.exporter is not None:
        monitors.append(soperator_exporter_monitor(config, roles.exporter))
    if roles.database is not None:
        monitors.append(database_monitor(config, roles.database))
    if config.operators.kueue.enabled:
        monitors.append(kueue_monitor(config))
    return monitors


def database_metrics(config: PlatformConfig) -> dict[str, Any]:
    """The MariaDB CR's `metrics` (soperator passes its accounting's mariadbOperator.metrics on): mysqld-exporter
    beside the database while monitoring is on. The operator's own ServiceMonitor carries no label of ours (4.1.7
    passes only `enabled` on), so Prometheus leaves it alone and scrapes `database_monitor` instead."""
    return {"enabled": config.monitoring.enabled}


def cert_manager_values(config: PlatformConfig) -> dict[str, Any]:
    """cert-manager's chart values for its ServiceMonitor (none with monitoring off)."""
    if not config.monitoring.enabled:
        return {}
    monitor = {"enabled": True, "labels": dict(config.monitoring.prometheus.selector_labels), "interval": config.monitoring.scrape_interval}
    return {"prometheus": {"enabled": True, "servicemonitor": monitor}}

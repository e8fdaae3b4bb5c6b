"""NetworkPolicies that let exactly the Prometheus pods (monitoring.prometheus.podLabels in its namespace) reach
exactly the metrics ports in the cluster's namespace, the one the stack's default-deny covers that runs exporters
(components/network_policies.py; a tenant namespace runs none):

- the Slurm exporter (series.EXPORTER_APP, port series.EXPORTER_PORT);
- soperator's own exporter (its `metrics` port, 8080), where it runs;
- slurmdbd's mysqld-exporter (9104), with MariaDB's 3306 open to that exporter only.

Every tenant's series are readable on Prometheus' query API, so where this stack installs kube-prometheus-stack its
namespace denies all ingress and lets in only what the chart's own parts send one another (prometheus_stack_policies);
where it installs the GPU operator's dcgm-exporter for Prometheus, only Prometheus reaches that exporter's port.
Kueue and cert-manager run in their own namespaces, which no policy of ours covers. Nothing here without
monitoring, or without the stack's NetworkPolicies (networkPolicies.enabled).
"""

from __future__ import annotations

from typing import Any

from ..config import PlatformConfig
from ..names import MARIADB_PORT
from ..render.network_policies import EVERY_POD, policy, tcp
from ..slurm import PodRoles, Selector
from ..slurm.common import NAMESPACE_NAME_LABEL
from ..slurm.gpu_jobs import maps_gpu_jobs
from . import series
from .monitors import DATABASE_EXPORTER_PORT, LABELS, SOPERATOR_EXPORTER_PORT, database_exporter

SLURM_EXPORTER: Selector = {"matchLabels": {"app.kubernetes.io/name": series.EXPORTER_APP}}
DCGM_EXPORTER: Selector = {"matchLabels": {"app": series.DCGM_EXPORTER_APP}}

# kube-prometheus-stack's pods (chart 88.5.3 and its subcharts' labels) and the ports their peers use.
GRAFANA: Selector = {"matchLabels": {"app.kubernetes.io/name": "grafana"}}
ALERTMANAGER: Selector = {"matchLabels": {"app.kubernetes.io/name": "alertmanager"}}
KUBE_STATE_METRICS: Selector = {"matchLabels": {"app.kubernetes.io/name": "kube-state-metrics"}}
NODE_EXPORTER: Selector = {"matchLabels": {"app.kubernetes.io/name": "prometheus-node-exporter"}}
# The chart's operator labels: app <chart name>-operator (its nameOverride left alone).
PROMETHEUS_OPERATOR: Selector = {"matchLabels": {"app": "kube-prometheus-stack-operator"}}
PROMETHEUS_PORT, GRAFANA_PORT, KUBE_STATE_METRICS_PORT, NODE_EXPORTER_PORT = 9090, 3000, 8080, 9100
ALERTMANAGER_PORT, ALERTMANAGER_MESH_PORT = 9093, 9094
# The config-reloader sidecar of the Prometheus and Alertmanager pods (the chart's monitors scrape it), and the
# operator's metrics port over plain HTTP (its TLS is off: operator_charts.prometheus_stack_values).
RELOADER_PORT = OPERATOR_PORT = 8080


def prometheus_pods(config: PlatformConfig) -> dict[str, Any]:
    """The peer: the Prometheus pods, in the Prometheus's namespace (both selectors in one peer: AND)."""
    prometheus = config.monitoring.prometheus
    return {
        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: prometheus.namespace}},
        "podSelector": {"matchLabels": dict(prometheus.pod_labels)},
    }


def labelled(manifest: dict[str, Any]) -> dict[str, Any]:
    return {**manifest, "metadata": {**manifest["metadata"], "labels": LABELS}}


def allow(config: PlatformConfig, name: str, pods: Selector, peer: dict[str, Any], port: int) -> dict[str, Any]:
    """`pods` of the cluster's namespace take `port` from `peer` (this module's labels on the policy)."""
    return labelled(policy(name, config.cluster.namespace, pods, ingress=[{"from": [peer], "ports": tcp(port)}]))


def from_pods(pods: Selector, *ports: int) -> dict[str, Any]:
    """An ingress rule: from `pods` of the policy's own namespace, on `ports`."""
    return {"from": [{"podSelector": pods}], "ports": tcp(*ports)}


def node_exporter_on_pod_network(config: PlatformConfig) -> bool:
    """The chart's node-exporter runs on the host's network (no NetworkPolicy applies there) unless its values say not."""
    node_exporter = config.monitoring.prometheus.values.get("prometheus-node-exporter", {})
    return node_exporter.get("hostNetwork", True) is False


def prometheus_stack_policies(config: PlatformConfig) -> list[dict[str, Any]]:
    """The Prometheus namespace denies ingress, then lets each of the chart's pods take exactly what the chart's own
    parts send it: Grafana queries Prometheus and Alertmanager (its datasources); Prometheus scrapes the chart's
    monitors' targets (itself and its config reloader, Alertmanager, Grafana, kube-state-metrics, the operator) and
    sends alerts to Alertmanager; Alertmanager's replicas gossip. The operator only calls the API server (egress)."""
    namespace = config.monitoring.prometheus.namespace
    prometheus: Selector = {"matchLabels": dict(config.monitoring.prometheus.pod_labels)}
    mesh = [{"protocol": protocol, "port": ALERTMANAGER_MESH_PORT} for protocol in ("TCP", "UDP")]
    allowed = {
        "prometheus": (prometheus, [from_pods(GRAFANA, PROMETHEUS_PORT), from_pods(prometheus, PROMETHEUS_PORT, RELOADER_PORT)]),
        "alertmanager": (
            ALERTMANAGER,
            [
                from_pods(GRAFANA, ALERTMANAGER_PORT),
                from_pods(prometheus, ALERTMANAGER_PORT, RELOADER_PORT),
                {"from": [{"podSelector": ALERTMANAGER}], "ports": mesh},
            ],
        ),
        "grafana": (GRAFANA, [from_pods(prometheus, GRAFANA_PORT)]),
        "kube-state-metrics": (KUBE_STATE_METRICS, [from_pods(prometheus, KUBE_STATE_METRICS_PORT)]),
        "prometheus-operator": (PROMETHEUS_OPERATOR, [from_pods(prometheus, OPERATOR_PORT)]),
    }
    if node_exporter_on_pod_network(config):
        allowed["node-exporter"] = (NODE_EXPORTER, [from_pods(prometheus, NODE_EXPORTER_PORT)])
    return [
        labelled(policy("monitoring-default-deny-ingress", namespace, EVERY_POD, ingress=[])),
        *[labelled(policy(f"allow-{name}-ingress", namespace, pods, ingress=rules)) for name, (pods, rules) in allowed.items()],
    ]


def dcgm_exporter_policy(config: PlatformConfig) -> dict[str, Any]:
    """Only the Prometheus pods reach dcgm-exporter's port: its series name every GPU's job and pod."""
    rule = {"from": [prometheus_pods(config)], "ports": tcp(series.DCGM_EXPORTER_PORT)}
    return labelled(policy("allow-prometheus-dcgm-exporter", config.operators.gpu_operator.namespace, DCGM_EXPORTER, ingress=[rule]))


def render(config: PlatformConfig, roles: PodRoles) -> list[dict[str, Any]]:
    """Prometheus's way to the exporters, among them those of the pods the operator runs (`roles`)."""
    if not (config.monitoring.enabled and config.network_policies.enabled):
        return []
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
    if config.monitoring.prometheus.install:
        policies += prometheus_stack_policies(config)
    if maps_gpu_jobs(config):
        policies.append(dcgm_exporter_policy(config))
    return policies

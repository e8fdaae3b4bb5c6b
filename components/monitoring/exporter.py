"""The Slurm exporter: Slurm's own clients, run as SlurmUser, and node-exporter serving what they say.

Slurm's native metrics (slurmctld's OpenMetrics endpoint) answer nothing once slurm.conf sets PrivateData,
which every stack with tenants renders (common.PRIVATE_DATA) so that no tenant sees another's jobs; and no
maintained Slurm exporter can be installed from here. So one Deployment per cluster runs two containers:

- `collect`: the operator's Slurm client image (the tenants Job's, `AccountingClient`), as SlurmUser's UID,
  whom PrivateData does not restrict: components/monitoring/slurm-metrics.sh asks slurmctld and slurmdbd every
  `slurmExporter.interval` and writes the series of series.py to a file shared with
- `serve`: node-exporter with its textfile collector only, on series.EXPORTER_PORT, which the ServiceMonitor
  scrapes.

Neither holds the cluster's key: a native sidecar (`auth`, components/slurm/client.py's as the usage report's)
runs munged (or, for auth/slurm, sackd) on it, and the collector signs through its socket. No container gets a service account token."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from slurm_rules import kube_rules

from ..config import PlatformConfig
from ..slurm import AccountingClient
from ..slurm.client import auth_sidecar, auth_socket_dir
from ..slurm.common import client_slurm_conf, cluster_name_with, system_placement, system_priority_class_name
from . import series
from .monitors import monitor

SCRIPT = "slurm-metrics.sh"
SCRIPT_TEXT = (Path(__file__).parent / SCRIPT).read_text()
CONFIG_DIR = "/exporter"
METRICS_DIR = "/metrics"
METRICS_FILE = f"{METRICS_DIR}/slurm.prom"  # the textfile collector reads *.prom
NODE_EXPORTER_IMAGE = "quay.io/prometheus/node-exporter"
# node-exporter's image runs as nobody.
NOBODY = 65534
# The script's environment: each series' name, from series.py (the script names none itself).
SERIES_ENV = {
    "SERIES_SLURMCTLD_UP": series.SLURMCTLD_UP,
    "SERIES_SLURMDBD_UP": series.SLURMDBD_UP,
    "SERIES_ACCOUNT_GPUS_ALLOCATED": series.ACCOUNT_GPUS_ALLOCATED,
    "SERIES_ACCOUNT_GPUS_PENDING": series.ACCOUNT_GPUS_PENDING,
    "SERIES_ACCOUNT_JOBS": series.ACCOUNT_JOBS,
    "SERIES_NODE_STATE": series.NODE_STATE,
    "SERIES_NODE_GPUS": series.NODE_GPUS,
    "SERIES_NODE_GPUS_ALLOCATED": series.NODE_GPUS_ALLOCATED,
    "SERIES_JOB_GPUS": series.JOB_GPUS,
    "SERIES_COLLECTED_AT": series.COLLECTED_AT,
}
DURATION_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
LOCKED_DOWN = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}


def name(config: PlatformConfig) -> str:
    """`<cluster>-slurm-exporter`, cut to fit its Service's name (a DNS-1035 label) whatever the cluster's name."""
    return cluster_name_with(config, f"-{series.EXPORTER_APP}", kube_rules.DNS1035_LABEL_MAX)


def labels(config: PlatformConfig) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": series.EXPORTER_APP,
        "app.kubernetes.io/instance": config.cluster.name,
        "app.kubernetes.io/component": "monitoring",
        "app.kubernetes.io/managed-by": "slurm-platform",
    }


def interval_seconds(duration: str) -> int:
    """A Prometheus duration (config's PromDuration) as the whole seconds `sleep` takes; at least one."""
    match = re.fullmatch(r"([0-9]+)(ms|s|m|h|d|w)", duration)
    assert match, duration  # the config model only admits these
    return max(1, int(int(match[1]) * DURATION_SECONDS[match[2]]))


def collector(config: PlatformConfig, client: AccountingClient) -> dict[str, Any]:
    uid = client.slurm_uid
    env = {
        "SLURM_CONF": f"{CONFIG_DIR}/slurm.conf",
        "METRICS_FILE": METRICS_FILE,
        "INTERVAL_SECONDS": str(interval_seconds(config.monitoring.slurm_exporter.interval)),
        **SERIES_ENV,
    }
    return {
        "name": "collect",
        "image": client.image,
        "command": ["/bin/sh", f"{CONFIG_DIR}/{SCRIPT}"],
        "env": [{"name": key, "value": value} for key, value in env.items()],
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}},
        # SlurmUser: root where the operator runs Slurm as root (soperator), else its own UID, which runs as non-root.
        "securityContext": {**LOCKED_DOWN, "runAsUser": uid, "runAsGroup": uid, "runAsNonRoot": uid != 0},
        "volumeMounts": [
            {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
            {"name": "auth-socket", "mountPath": auth_socket_dir(client), "readOnly": True},
            {"name": "metrics", "mountPath": METRICS_DIR},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }


def server(config: PlatformConfig) -> dict[str, Any]:
    return {
        "name": "serve",
        "image": f"{NODE_EXPORTER_IMAGE}:{config.monitoring.slurm_exporter.node_exporter_version}",
        "args": [
            "--collector.disable-defaults",
            "--collector.textfile",
            f"--collector.textfile.directory={METRICS_DIR}",
            f"--web.listen-address=:{series.EXPORTER_PORT}",
            "--web.disable-exporter-metrics",
        ],
        "ports": [{"name": series.EXPORTER_PORT_NAME, "containerPort": series.EXPORTER_PORT, "protocol": "TCP"}],
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}},
        "securityContext": {**LOCKED_DOWN, "runAsUser": NOBODY, "runAsGroup": NOBODY, "runAsNonRoot": True},
        "readinessProbe": {"httpGet": {"path": "/metrics", "port": series.EXPORTER_PORT_NAME}},
        "volumeMounts": [{"name": "metrics", "mountPath": METRICS_DIR, "readOnly": True}],
    }


def config_map(config: PlatformConfig, client: AccountingClient) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name(config), "namespace": config.cluster.namespace, "labels": labels(config)},
        "data": {SCRIPT: SCRIPT_TEXT, "slurm.conf": client_slurm_conf(config, client)},
    }


def deployment(config: PlatformConfig, client: AccountingClient, priority_classes: tuple[str, ...]) -> dict[str, Any]:
    """`priority_classes`: those the operator renders (SlurmPlan.priority_class_names); its pods take the cluster's
    Slurm class where the operator declares it (soperator 1.14.10's does not)."""
    pod_labels = labels(config)
    selector = {key: pod_labels[key] for key in ("app.kubernetes.io/name", "app.kubernetes.io/instance")}
    pod_spec: dict[str, Any] = {
        # It talks to slurmctld and slurmdbd only, never to the API server.
        "automountServiceAccountToken": False,
        **system_placement(config),
        "initContainers": [auth_sidecar(client, "config", CONFIG_DIR)],
        "containers": [collector(config, client), server(config)],
        "volumes": [
            {"name": "config", "configMap": {"name": name(config)}},
            {"name": "auth-key", "secret": {"secretName": client.key_secret, "items": [{"key": client.key, "path": "key"}], "defaultMode": 0o400}},
            {"name": "auth-socket", "emptyDir": {}},
            {"name": "metrics", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}},
            {"name": "tmp", "emptyDir": {"sizeLimit": "16Mi"}},
        ],
    }
    if system_priority_class_name(config) in priority_classes:
        pod_spec["priorityClassName"] = system_priority_class_name(config)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name(config), "namespace": config.cluster.namespace, "labels": pod_labels},
        "spec": {"replicas": 1, "selector": {"matchLabels": selector}, "template": {"metadata": {"labels": pod_labels}, "spec": pod_spec}},
    }


def service(config: PlatformConfig) -> dict[str, Any]:
    pod_labels = labels(config)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name(config), "namespace": config.cluster.namespace, "labels": pod_labels},
        "spec": {
            "selector": {key: pod_labels[key] for key in ("app.kubernetes.io/name", "app.kubernetes.io/instance")},
            "ports": [{"name": series.EXPORTER_PORT_NAME, "port": series.EXPORTER_PORT, "targetPort": series.EXPORTER_PORT_NAME, "protocol": "TCP"}],
        },
    }


def service_monitor(config: PlatformConfig) -> dict[str, Any]:
    service_labels = labels(config)
    selector = {"matchLabels": {key: service_labels[key] for key in ("app.kubernetes.io/name", "app.kubernetes.io/instance")}}
    endpoints = [{"port": series.EXPORTER_PORT_NAME, "path": "/metrics", "scheme": "http"}]
    # job="slurm-exporter" (the Service's app.kubernetes.io/name), whatever the cluster's name.
    return monitor(
        config, "ServiceMonitor", name(config), config.cluster.namespace, selector, endpoints, service_labels, jobLabel="app.kubernetes.io/name"
    )


def render(config: PlatformConfig, client: AccountingClient, priority_classes: tuple[str, ...]) -> list[dict[str, Any]]:
    """The exporter's ConfigMap, Deployment, Service and ServiceMonitor, a client of the operator's Slurm (`client`,
    `priority_classes`: SlurmPlan's); nothing when monitoring is off."""
    if not config.monitoring.enabled:
        return []
    return [config_map(config, client), deployment(config, client, priority_classes), service(config), service_monitor(config)]

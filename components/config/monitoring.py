"""Monitoring: the Prometheus that scrapes the platform, the Slurm exporter, the alerts' thresholds,
the dashboards and the usage report (components/monitoring renders them all from this and the tenants)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

from .fields import (
    ChartConfig,
    ChartRepository,
    DnsLabel,
    ExactVersion,
    ImageTag,
    LabelValue,
    Model,
    QualifiedName,
    _check_cron,
    _leading_v,
    chart_namespace,
    chart_repository,
    matching,
)

# Prometheus' own duration syntax, the one its rule files and scrape configs take.
DURATION_PATTERN = r"^[1-9][0-9]*(ms|s|m|h|d|w)$"
PromDuration = Annotated[str, matching(DURATION_PATTERN, "a Prometheus duration: a whole number and ms, s, m, h, d or w, e.g. 30s or 10m")]


class PrometheusConfig(ChartConfig):
    """The Prometheus Operator and the Prometheus that scrape the platform: kube-prometheus-stack, or the cluster's own."""

    install: bool = Field(
        True,
        description="Declare kube-prometheus-stack's Helm release (Prometheus Operator and its CRDs, Prometheus, Alertmanager, "
        "Grafana with its dashboard sidecar, kube-state-metrics); false: the cluster already runs a Prometheus Operator.",
    )
    namespace: DnsLabel = chart_namespace("monitoring")
    version: Annotated[ExactVersion, _leading_v(False)] = Field(
        "88.5.3", description="kube-prometheus-stack chart version without a leading v (88.5.3: Prometheus Operator v0.93.1)."
    )
    repository: ChartRepository = chart_repository("https://prometheus-community.github.io/helm-charts")
    selector_labels: dict[QualifiedName, LabelValue] = Field(
        default_factory=lambda: {"release": "kube-prometheus-stack"},
        description="Labels every ServiceMonitor, PodMonitor and PrometheusRule of the stack carries, so that the Prometheus "
        "selects them: with install false, those of the cluster's Prometheus's serviceMonitorSelector and ruleSelector.",
    )
    pod_labels: dict[QualifiedName, LabelValue] = Field(
        default_factory=lambda: {"app.kubernetes.io/name": "prometheus"},
        description="Labels of the Prometheus pods in `namespace`: the only pods the NetworkPolicies let reach a metrics port.",
    )


class SlurmExporterConfig(Model):
    """The Slurm exporter: a collector that runs Slurm's clients as the Slurm user (who sees every job whatever
    PrivateData hides from tenants) and writes a metrics file, served by node-exporter's textfile collector."""

    node_exporter_version: Annotated[ImageTag, _leading_v(True)] = Field(
        "v1.10.1", description="Tag of quay.io/prometheus/node-exporter, which serves the collector's file (textfile collector only)."
    )
    interval: PromDuration = Field("30s", description="How often the collector asks slurmctld and slurmdbd.")


class AlertsConfig(Model):
    """Thresholds of the alerts (docs/monitoring.md: each alert and what to do)."""

    guarantee_broken_for: PromDuration = Field(
        "10m", description="How long a tenant may stay below its guarantee while it has pending GPU jobs before the alert fires."
    )
    jail_full_percent: int = Field(90, ge=50, le=99, description="Fire when the jail's filesystem is fuller than this.")
    certificate_expiry_days: int = Field(14, ge=1, le=90, description="Fire when a certificate cert-manager issues for us expires sooner.")


class MonitoringConfig(Model):
    """Metrics, alerts and dashboards: who uses which GPUs, each tenant's use against its guarantee, which node is sick."""

    enabled: bool = Field(
        False,
        description="Declare the monitors (Slurm exporter, DCGM, Kueue, slurmdbd's database, cert-manager), the recording rules "
        "and alerts, the Grafana dashboards, the usage report CronJob, and NetworkPolicies that let only Prometheus scrape them.",
    )
    prometheus: PrometheusConfig = PrometheusConfig()
    scrape_interval: PromDuration = Field("30s", description="Scrape interval of every monitor the stack declares.")
    slurm_exporter: SlurmExporterConfig = SlurmExporterConfig()
    alerts: AlertsConfig = AlertsConfig()
    dashboards: bool = Field(True, description="Ship the Grafana dashboards as ConfigMaps for Grafana's dashboard sidecar.")
    report_schedule: Annotated[str, AfterValidator(_check_cron)] = Field(
        "0 6 * * 1", description="Cron schedule of the usage report CronJob (each tenant's GPU-hours against its guarantee, to its logs)."
    )

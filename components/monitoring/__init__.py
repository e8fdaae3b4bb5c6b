"""Metrics, alerts, dashboards and the usage report, rendered from the config model (components/config/monitoring.py).

Each part is a pure module with `render(config, ...)`, handed what it reads of the Slurm operator's plan (its pod
roles, its accounting client: components/slurm `SlurmPlan`): the Slurm exporter (exporter.py), the other monitors
(monitors.py), the recording rules and alerts (rules.py), the Grafana dashboards (dashboards.py), the usage
report (report.py) and the NetworkPolicies that let Prometheus scrape (network.py); component.py declares them.
This package file imports nothing, so that lower layers may import a part (series.py, monitors.py) alone.
"""

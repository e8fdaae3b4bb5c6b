"""Metrics, alerts, dashboards and the usage report, rendered from the config model (components/config/monitoring.py)."""

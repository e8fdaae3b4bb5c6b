"""The Monitoring component: every part's manifests (each part's `render`, none with monitoring off), declared."""

from __future__ import annotations

from typing import Any, Optional

import pulumi

from ..config import PlatformConfig
from ..config.monitoring import PrometheusConfig
from ..declare import declare
from ..resources import child_opts
from ..slurm import SlurmPlan
from . import dashboards, exporter, monitors, network, report, rules

# The Prometheus Operator's kinds: they wait for its CRDs.
PROMETHEUS_KINDS = frozenset({"ServiceMonitor", "PodMonitor", "PrometheusRule"})
# Its workloads, each a Slurm client running the script in the ConfigMap of its own name.
WORKLOADS = frozenset({"Deployment", "CronJob"})


def render(config: PlatformConfig, plan: SlurmPlan) -> list[dict[str, Any]]:
    """Every part's manifests, in the order they are declared; each part handed what it reads of the operator's `plan`."""
    return [
        *exporter.render(config, plan.accounting_client, plan.priority_class_names),
        *monitors.render(config, plan.pod_roles),
        *rules.render(config, plan),
        *dashboards.render(config),
        *report.render(config, plan.accounting_client),
        *network.render(config, plan.pod_roles),
    ]


def role(manifest: dict[str, Any]) -> str:
    """A manifest's part of its resource name: kind and name, unique in the stack (the namespace only where two could meet)."""
    metadata = manifest["metadata"]
    return f"{manifest['kind'].lower()}-{metadata.get('namespace', 'cluster')}-{metadata['name']}"


class Monitoring(pulumi.ComponentResource):
    """Declares `manifests` (`render`'s), each object after exactly what it needs: the namespace it lives in where the stack
    declares it (`namespaces`, by name); the monitors and rules after the CRDs of their kinds (`crds`: the release
    that installs them, none when the cluster's own Prometheus Operator does); the workloads (the Slurm exporter,
    the report) after their script's ConfigMap and `slurm`, the custom resources running the daemons they query."""

    def __init__(
        self,
        name: str,
        manifests: list[dict[str, Any]],
        prometheus: PrometheusConfig,
        crds: list[pulumi.Resource],
        slurm: list[pulumi.Resource],
        namespaces: dict[str, pulumi.Resource],
        opts: Optional[pulumi.ResourceOptions] = None,
    ):
        super().__init__("slurm-platform:monitoring:Monitoring", name, None, opts)
        declared: dict[tuple[str, str, str], pulumi.Resource] = {}
        for manifest in manifests:
            kind, namespace, object_name = manifest["kind"], manifest["metadata"].get("namespace", ""), manifest["metadata"]["name"]
            waits_for = [namespaces[namespace]] if namespace in namespaces else []
            if kind in PROMETHEUS_KINDS:
                waits_for += crds
            if kind in WORKLOADS:
                waits_for += [declared[("ConfigMap", namespace, object_name)], *slurm]
            declared[(kind, namespace, object_name)] = declare(
                f"{name}-{role(manifest)}", manifest, child_opts(self, opts, depends_on=waits_for or None)
            )
        self.summary = pulumi.Output.from_input({"namespace": prometheus.namespace, "installed": prometheus.install})
        self.register_outputs({"summary": self.summary})

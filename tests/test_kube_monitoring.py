"""The Prometheus Operator's CRDs as the pinned kube-prometheus-stack installs them (contracts/prometheus-operator)
accept every ServiceMonitor, PodMonitor and PrometheusRule the monitoring parts render, on a real API server
(scripts/kube-local.sh): each operator's stack with monitoring on, created with a server-side dry run and strict
field validation, nothing pruned. Before the CRDs the server knows none of these kinds, which is why the program
declares them after the chart that installs the CRDs."""

from __future__ import annotations

import json

from components.config import parse_config
from components.monitoring import component as monitoring
from components.slurm import resolve
from tests.contracts import PROMETHEUS_OPERATOR_DIR
from tests.kube import LocalCluster, assert_stored_as_sent
from tests.test_kube_operators import install_crds
from tests.test_network_policies import OPERATOR_STACKS, merged, stack_config


def monitors_of(operator: str) -> list[dict]:
    stack, overrides = OPERATOR_STACKS[operator]
    config = parse_config(merged(stack_config(stack), {**overrides, "monitoring": {"enabled": True}}))
    return [m for m in monitoring.render(config, resolve(config)) if m["kind"] in monitoring.PROMETHEUS_KINDS]


def test_the_api_server_accepts_every_monitor_and_rule_once_the_crds_are_there(cluster: LocalCluster):
    rendered = {operator: monitors_of(operator) for operator in OPERATOR_STACKS}
    first = next(m for manifests in rendered.values() for m in manifests)
    if cluster.get("namespace", first["metadata"]["namespace"]) is None:
        cluster.kubectl("create", "namespace", first["metadata"]["namespace"])
    refused = cluster.kubectl("create", "--dry-run=server", "-f", "-", check=False, stdin=json.dumps(first))
    assert refused.returncode != 0 and "no matches for kind" in refused.stderr, refused.stderr
    install_crds(cluster, sorted(PROMETHEUS_OPERATOR_DIR.glob("*.json")))
    kinds = set()
    for operator, manifests in rendered.items():
        assert_stored_as_sent(cluster, operator, manifests)
        kinds |= {m["kind"] for m in manifests}
    assert {"ServiceMonitor", "PodMonitor"} <= kinds

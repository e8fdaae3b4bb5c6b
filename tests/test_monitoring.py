"""Monitoring's core: the monitors beside the Slurm exporter, the NetworkPolicies that let only Prometheus scrape,
kube-prometheus-stack's release and values, and the Monitoring component's wiring (under mocks)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.charts import CERT_MANAGER, KUEUE, PROMETHEUS_STACK
from components.config import ConfigError, PlatformConfig, parse_config
from components.monitoring import component as monitoring
from components.monitoring import monitors, network, series
from components.names import MARIADB_PORT
from components.operator_charts import chart_releases
from components.slurm import operator_module, resolve, soperator1
from components.slurm.slinky import mariadb
from components.slurm.soperator import accounting_node
from tests.harness import example_stacks, stack_config
from tests.test_program import run_stack

SOPERATOR_1, SOPERATOR_4, SLINKY = "prod-hanoi", "prod-hoalac", "prod-hcm"
MONITORED_STACKS = [s for s in example_stacks() if parse_config(stack_config(s)).monitoring.enabled]


def config_of(stack: str, **monitoring_keys: Any) -> PlatformConfig:
    raw = copy.deepcopy(stack_config(stack))
    raw["monitoring"] = {**raw.get("monitoring", {}), **monitoring_keys}
    return parse_config(raw)


def of_kind(manifests: list[dict[str, Any]], *kinds: str) -> list[dict[str, Any]]:
    return [m for m in manifests if m["kind"] in kinds]


def release(config: PlatformConfig, key: str):
    (found,) = [r for r in chart_releases(config, resolve(config)) if r.key == key]
    return found


def test_the_prod_example_stacks_turn_monitoring_on():
    assert set(MONITORED_STACKS) >= {"prod-hangzhou", "prod-hanoi", "prod-hcm", "prod-hoalac"}


@pytest.mark.parametrize("stack", [SOPERATOR_1, SOPERATOR_4, SLINKY])
def test_monitoring_off_adds_nothing(stack):
    config = config_of(stack, enabled=False)
    assert monitoring.render(config, resolve(config)) == []
    assert PROMETHEUS_STACK not in {r.key for r in chart_releases(config, resolve(config))}


def test_every_monitor_carries_the_selector_labels_and_the_scrape_interval():
    selector = {"prometheus": "platform", "team": "sre"}
    found = set()
    for stack in (SOPERATOR_1, SOPERATOR_4):
        config = config_of(stack, scrapeInterval="15s", prometheus={"selectorLabels": selector})
        for monitor in of_kind(monitors.render(config, resolve(config).pod_roles), "ServiceMonitor", "PodMonitor"):
            assert monitor["metadata"]["labels"].items() >= selector.items(), monitor["metadata"]
            endpoints = monitor["spec"].get("endpoints") or monitor["spec"]["podMetricsEndpoints"]
            assert [e["interval"] for e in endpoints] == ["15s"] * len(endpoints), monitor["metadata"]["name"]
            found.add(monitor["kind"])
    assert found == {"ServiceMonitor", "PodMonitor"}


def test_soperators_own_exporter_is_scraped_on_its_metrics_port_where_it_runs():
    for stack in (SOPERATOR_1, SOPERATOR_4):
        config = config_of(stack, enabled=True)
        (monitor,) = of_kind(monitors.render(config, resolve(config).pod_roles), "PodMonitor")
        assert monitor["spec"]["selector"] == {
            "matchLabels": {"app.kubernetes.io/instance": config.cluster.name, "app.kubernetes.io/component": "exporter"}
        }
        assert monitor["spec"]["namespaceSelector"] == {"matchNames": [config.cluster.namespace]}
        assert [e["port"] for e in monitor["spec"]["podMetricsEndpoints"]] == ["metrics"]
    raw = copy.deepcopy(stack_config(SOPERATOR_1))
    raw["slurm"]["exporter"] = {"enabled": False}
    without, slinky = parse_config(raw), config_of(SLINKY)
    assert of_kind(monitors.render(without, resolve(without).pod_roles), "PodMonitor") == []
    assert of_kind(monitors.render(slinky, resolve(slinky).pod_roles), "PodMonitor") == []  # Slinky runs no exporter of its own


def test_kueue_is_scraped_on_its_authorizing_metrics_endpoint_with_prometheus_token():
    config = config_of(SOPERATOR_4)
    assert config.operators.kueue.enabled
    (monitor,) = [
        m
        for m in of_kind(monitors.render(config, resolve(config).pod_roles), "ServiceMonitor")
        if m["metadata"]["name"] == "kueue-controller-manager"
    ]
    assert monitor["metadata"]["namespace"] == config.operators.kueue.namespace
    assert monitor["spec"]["selector"]["matchLabels"]["app.kubernetes.io/instance"] == KUEUE
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == "https" and endpoint["scheme"] == "https"
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    old = config_of(SOPERATOR_1)
    assert [m["metadata"]["name"] for m in of_kind(monitors.render(old, resolve(old).pod_roles), "ServiceMonitor")] == ["fpt-hpc-acct-db-metrics"]


def test_slurmdbd_database_runs_mysqld_exporter_and_a_monitor_prometheus_selects():
    on, off = config_of(SOPERATOR_1), config_of(SOPERATOR_1, enabled=False)
    assert accounting_node(on, soperator1.image)["mariadbOperator"]["metrics"] == {"enabled": True}
    assert accounting_node(off, soperator1.image)["mariadbOperator"]["metrics"] == {"enabled": False}
    assert mariadb(config_of(SLINKY))["spec"]["metrics"] == {"enabled": True}
    assert "metrics" not in mariadb(config_of(SLINKY, enabled=False))["spec"]
    for stack, database in ((SOPERATOR_1, "fpt-hpc-acct-db"), (SOPERATOR_4, "fpt-hpc-acct-db"), (SLINKY, None)):
        config = config_of(stack)
        database = database or mariadb(config)["metadata"]["name"]
        (monitor,) = [m for m in monitors.render(config, resolve(config).pod_roles) if m["metadata"]["name"] == f"{database}-metrics"]
        assert monitor["spec"]["selector"] == {
            "matchLabels": {"app.kubernetes.io/name": "exporter", "app.kubernetes.io/instance": f"{database}-metrics"}
        }
        (endpoint,) = monitor["spec"]["endpoints"]
        assert (endpoint["port"], endpoint["path"]) == ("metrics", "/probe")
        assert endpoint["params"] == {"target": [f"{database}-0.{database}-internal:3306"]}


def test_cert_manager_ships_its_monitor_after_the_prometheus_crds():
    config = config_of(SOPERATOR_4, scrapeInterval="20s")
    cert_manager = release(config, CERT_MANAGER)
    monitor = cert_manager.values["prometheus"]["servicemonitor"]
    assert monitor == {"enabled": True, "labels": {"release": "kube-prometheus-stack"}, "interval": "20s"}
    assert PROMETHEUS_STACK in cert_manager.depends_on
    assert "prometheus" not in release(config_of(SOPERATOR_4, enabled=False), CERT_MANAGER).values


def test_the_prometheus_selects_by_the_selector_labels_and_grafana_loads_the_dashboards_of_its_namespace_only():
    selector, pods = {"prometheus": "platform"}, {"app.kubernetes.io/name": "prometheus", "scraper": "yes"}
    config = config_of(SOPERATOR_1, prometheus={"selectorLabels": selector, "podLabels": pods, "values": {"grafana": {"enabled": False}}})
    stack = release(config, PROMETHEUS_STACK)
    assert (stack.version, stack.namespace) == ("88.5.3", "monitoring")
    spec = stack.values["prometheus"]["prometheusSpec"]
    for kind in ("serviceMonitor", "podMonitor", "rule"):
        assert spec[f"{kind}Selector"] == {"matchLabels": selector}
        assert spec[f"{kind}SelectorNilUsesHelmValues"] is False
    assert spec["podMetadata"] == {"labels": pods}
    assert stack.values["grafana"]["sidecar"]["dashboards"] == {
        "enabled": True,
        "label": "grafana_dashboard",
        "labelValue": "1",
        # Not ALL: a tenant may create a labelled ConfigMap in its own namespace.
        "searchNamespace": "monitoring",
    }
    assert dashboards_namespaces(config) == {"monitoring"}
    assert stack.values["grafana"]["enabled"] is False  # the stack's values win
    # The MariaDB operator starts after the ServiceMonitor kind is there.
    assert PROMETHEUS_STACK in release(config, "mariadb-operator").depends_on


def dashboards_namespaces(config: PlatformConfig) -> set[str]:
    return {
        m["metadata"]["namespace"] for m in monitoring.render(config, resolve(config)) if series.DASHBOARD_LABEL in m["metadata"].get("labels", {})
    }


def test_with_the_clusters_own_prometheus_no_chart_is_installed():
    config = config_of(SOPERATOR_1, prometheus={"install": False, "namespace": "observability"})
    assert PROMETHEUS_STACK not in {r.key for r in chart_releases(config, resolve(config))}
    assert of_kind(monitoring.render(config, resolve(config)), "PodMonitor")
    assert "observability" not in {r.namespace for r in chart_releases(config, resolve(config))}


# --- NetworkPolicies ---------------------------------------------------------------------------


def prometheus_peer(config: PlatformConfig) -> dict[str, Any]:
    prometheus = config.monitoring.prometheus
    return {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": prometheus.namespace}},
        "podSelector": {"matchLabels": prometheus.pod_labels},
    }


@pytest.mark.parametrize("stack", [SOPERATOR_1, SOPERATOR_4, SLINKY])
def test_only_prometheus_reaches_only_the_metrics_ports(stack):
    config = config_of(stack, prometheus={"namespace": "observability", "podLabels": {"app": "prom"}})
    policies = {p["metadata"]["name"]: p for p in network.render(config, resolve(config).pod_roles)}
    expected = {"allow-prometheus-slurm-exporter": series.EXPORTER_PORT, "allow-prometheus-database-exporter": monitors.DATABASE_EXPORTER_PORT}
    if stack != SLINKY:
        expected["allow-prometheus-soperator-exporter"] = monitors.SOPERATOR_EXPORTER_PORT
    for name, port in expected.items():
        policy = policies[name]
        assert policy["metadata"]["namespace"] == config.cluster.namespace
        assert policy["spec"]["policyTypes"] == ["Ingress"]
        # One rule: from the Prometheus pods of its namespace (one peer: both selectors hold), to the one port.
        assert policy["spec"]["ingress"] == [{"from": [prometheus_peer(config)], "ports": [{"protocol": "TCP", "port": port}]}], name
    assert policies["allow-prometheus-slurm-exporter"]["spec"]["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": series.EXPORTER_APP}}
    # mysqld-exporter reads the database: the database lets that exporter in on 3306, and only it.
    database = operator_module(config).pod_roles(config).database
    (to_database,) = [p for p in policies.values() if p["spec"]["podSelector"] == database]
    exporter = policies["allow-prometheus-database-exporter"]["spec"]["podSelector"]
    assert to_database["spec"]["ingress"] == [{"from": [{"podSelector": exporter}], "ports": [{"protocol": "TCP", "port": MARIADB_PORT}]}]
    in_cluster = {name for name, p in policies.items() if p["metadata"]["namespace"] == config.cluster.namespace}
    assert in_cluster == {*expected, to_database["metadata"]["name"]}


def from_pods(labels: dict[str, str], *ports: int) -> dict[str, Any]:
    return {"from": [{"podSelector": {"matchLabels": labels}}], "ports": [{"protocol": "TCP", "port": port} for port in ports]}


@pytest.mark.parametrize("stack", [SOPERATOR_1, SLINKY])
def test_the_prometheus_namespace_takes_in_only_what_the_charts_own_parts_send(stack):
    config = config_of(stack, prometheus={"namespace": "observability", "podLabels": {"app": "prom"}})
    policies = {p["metadata"]["name"]: p for p in network.render(config, resolve(config).pod_roles) if p["metadata"]["namespace"] == "observability"}
    deny = policies.pop("monitoring-default-deny-ingress")
    assert deny["spec"] == {"podSelector": {}, "policyTypes": ["Ingress"]}
    prometheus, grafana = {"app": "prom"}, {"app.kubernetes.io/name": "grafana"}
    alertmanager = {"app.kubernetes.io/name": "alertmanager"}
    expected = {
        "allow-prometheus-ingress": (prometheus, [from_pods(grafana, 9090), from_pods(prometheus, 9090, 8080)]),
        "allow-alertmanager-ingress": (
            alertmanager,
            [
                from_pods(grafana, 9093),
                from_pods(prometheus, 9093, 8080),
                {
                    "from": [{"podSelector": {"matchLabels": alertmanager}}],
                    "ports": [{"protocol": "TCP", "port": 9094}, {"protocol": "UDP", "port": 9094}],
                },
            ],
        ),
        "allow-grafana-ingress": (grafana, [from_pods(prometheus, 3000)]),
        "allow-kube-state-metrics-ingress": ({"app.kubernetes.io/name": "kube-state-metrics"}, [from_pods(prometheus, 8080)]),
        "allow-prometheus-operator-ingress": ({"app": "kube-prometheus-stack-operator"}, [from_pods(prometheus, 8080)]),
    }
    assert {name: (p["spec"]["podSelector"]["matchLabels"], p["spec"]["ingress"]) for name, p in policies.items()} == expected
    assert all(p["spec"]["policyTypes"] == ["Ingress"] and p["metadata"]["labels"] == monitors.LABELS for p in policies.values())
    # The peers are pods of the namespace itself (no namespaceSelector): nothing from a tenant namespace or elsewhere.
    assert all(set(peer) == {"podSelector"} for p in policies.values() for rule in p["spec"]["ingress"] for peer in rule["from"])


def test_node_exporter_off_the_hosts_network_takes_only_prometheus():
    on_host = config_of(SOPERATOR_1)
    assert "allow-node-exporter-ingress" not in {p["metadata"]["name"] for p in network.render(on_host, resolve(on_host).pod_roles)}
    config = config_of(SOPERATOR_1, prometheus={"values": {"prometheus-node-exporter": {"hostNetwork": False}}})
    (policy,) = [p for p in network.render(config, resolve(config).pod_roles) if p["metadata"]["name"] == "allow-node-exporter-ingress"]
    assert policy["spec"]["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "prometheus-node-exporter"}}
    assert policy["spec"]["ingress"] == [from_pods(dict(config.monitoring.prometheus.pod_labels), 9100)]


def test_with_the_clusters_own_prometheus_its_namespace_is_left_alone():
    config = config_of(SOPERATOR_1, prometheus={"install": False, "namespace": "observability"})
    assert "observability" not in {p["metadata"]["namespace"] for p in network.render(config, resolve(config).pod_roles)}


def test_only_prometheus_reaches_the_dcgm_exporter():
    config = config_of(SOPERATOR_1, prometheus={"namespace": "observability", "podLabels": {"app": "prom"}})
    (policy,) = [
        p for p in network.render(config, resolve(config).pod_roles) if p["metadata"]["namespace"] == config.operators.gpu_operator.namespace
    ]
    assert policy["metadata"]["name"] == "allow-prometheus-dcgm-exporter"
    assert policy["spec"]["podSelector"] == {"matchLabels": {"app": series.DCGM_EXPORTER_APP}}
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    assert policy["spec"]["ingress"] == [{"from": [prometheus_peer(config)], "ports": [{"protocol": "TCP", "port": series.DCGM_EXPORTER_PORT}]}]
    # Without the GPU operator's dcgm-exporter here, the GPU operator's namespace is not ours to touch.
    raw = copy.deepcopy(stack_config(SOPERATOR_1))
    raw["operators"]["gpuOperator"] = {**raw["operators"]["gpuOperator"], "dcgmExporterEnabled": False}
    without = parse_config(raw)
    assert without.operators.gpu_operator.namespace not in {p["metadata"]["namespace"] for p in network.render(without, resolve(without).pod_roles)}


def test_no_policies_without_the_stacks_default_deny():
    raw = copy.deepcopy(stack_config(SOPERATOR_1))
    raw["networkPolicies"] = {**raw["networkPolicies"], "enabled": False}
    config = parse_config(raw)
    assert network.render(config, resolve(config).pod_roles) == []


# --- The component, under mocks ------------------------------------------------------------------


@pytest.fixture(scope="module")
def hanoi():
    return run_stack(SOPERATOR_1)


def test_each_monitoring_object_waits_for_exactly_what_it_needs(hanoi):
    chart = hanoi.named(f"operators-{PROMETHEUS_STACK}")
    assert chart.inputs["chart"] == "kube-prometheus-stack" and chart.inputs["version"] == "88.5.3"
    assert chart.inputs["repositoryOpts"]["repo"] == "https://prometheus-community.github.io/helm-charts"
    declared = [r for r in hanoi.resources if r.name.startswith("monitoring-")]
    kinds = {r.inputs["kind"] if "kind" in r.inputs else r.type.rsplit(":", 1)[-1] for r in declared}
    assert {"PodMonitor", "NetworkPolicy", "Deployment"} <= kinds
    cluster = hanoi.named("slurm-cluster").urn  # the SlurmCluster custom resource running the daemons
    prometheus_namespace = hanoi.named("operators-monitoring-ns").urn
    slurm_children = {r.urn for r in hanoi.resources if r.parent == hanoi.named("slurm").urn}
    for resource in declared:
        kind = resource.type.rsplit(":", 1)[-1]
        waits = set(resource.dependencies)
        # The Slurm clients wait for the cluster they query and their script; nothing else waits for any of the cluster.
        assert (cluster in waits) is (kind in ("Deployment", "CronJob")), resource.name
        assert not (slurm_children - {cluster}) & waits, resource.name
        if kind in ("Deployment", "CronJob"):
            script = hanoi.named(f"monitoring-configmap-fpt-hpc-{resource.inputs['metadata']['name']}")
            assert script.urn in waits, resource.name
        assert (chart.urn in waits) is resource.type.startswith("kubernetes:monitoring.coreos.com/"), resource.name
        assert (prometheus_namespace in waits) is (resource.inputs["metadata"].get("namespace") == "monitoring"), resource.name
    assert hanoi.outputs["monitoring"] == {"namespace": "monitoring", "installed": True}


def test_with_the_clusters_own_prometheus_monitors_wait_for_no_chart():
    run = run_stack(SOPERATOR_1, monitoring={"enabled": True, "prometheus": {"install": False}})
    assert not [r for r in run.resources if r.name == f"operators-{PROMETHEUS_STACK}"]
    monitors_declared = [r for r in run.resources if r.type.startswith("kubernetes:monitoring.coreos.com/")]
    assert monitors_declared
    charts = {r.urn for r in run.resources if r.type.startswith("kubernetes:helm.sh")}
    assert all(not charts & set(r.dependencies) for r in monitors_declared)
    assert run.outputs["monitoring"] == {"namespace": "monitoring", "installed": False}


@pytest.mark.parametrize("namespace", ["fpt-hpc", "vision"])
def test_prometheus_in_a_namespace_the_default_deny_covers_is_refused(namespace):
    raw = copy.deepcopy(stack_config(SOPERATOR_4))
    raw["monitoring"] = {"enabled": True, "prometheus": {"namespace": namespace}}
    with pytest.raises(ConfigError) as refused:
        parse_config(raw)
    message = str(refused.value)
    assert "slurm-platform:monitoring.prometheus.namespace: is a namespace the stack's default-deny NetworkPolicies cover" in message
    assert f'got "{namespace}"' in message and "--path monitoring.prometheus.namespace monitoring" in message
    raw["networkPolicies"] = {**raw["networkPolicies"], "enabled": False}
    assert parse_config(raw).monitoring.prometheus.namespace == namespace

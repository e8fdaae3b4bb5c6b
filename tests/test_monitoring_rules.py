"""The recording rules and alerts (components/monitoring/rules.py), as rendered: a rule set per tenant and
scheduler with the guarantee the config gives it, only series that something we run produces, only alerts
whose target the stack has, and the thresholds from monitoring.alerts. promtool's view of them (syntax,
and each rule evaluated on input series) is in tests/test_kube_monitoring_rules.py."""

from __future__ import annotations

import re
from typing import Any

import pytest

from components.config import PlatformConfig, parse_config
from components.monitoring import report, rules, series
from components.operator_charts import kueue_configuration
from components.slurm import resolve
from tests.harness import ROOT, example_stacks, monitored, stack_config
from tests.promql import metric_names
from tools import docs

STACK = "prod-hoalac"  # three tenants, one of them (vision) with kueueCells; LDAP, the jail, cert-manager

# The metric names each source publishes that the rules may read besides the Slurm exporter's (series.py).
# Kueue v0.19.2 pkg/metrics/metrics.go (the resource ones with metrics.enableClusterQueueResources).
KUEUE_METRICS = {
    "kueue_pending_workloads",
    "kueue_cluster_queue_resource_usage",
    "kueue_cluster_queue_nominal_quota",
    "kueue_cluster_queue_resource_pending",
}
# Who else: NVIDIA's DCGM exporter, kube-state-metrics, the kubelet, cert-manager, and Prometheus's own `up`.
OTHER_SOURCES = ("DCGM_FI_", "kube_", "kubelet_volume_stats_", "certmanager_")


def all_rules(config: PlatformConfig) -> list[dict[str, Any]]:
    return [rule for group in rules.rule_groups(config, resolve(config))["groups"] for rule in group["rules"]]


def alert_names(config: PlatformConfig) -> set[str]:
    return {rule["alert"] for rule in all_rules(config) if "alert" in rule}


def test_nothing_with_monitoring_off():
    config = parse_config(stack_config(STACK) | {"monitoring": {"enabled": False}})
    assert rules.render(config, resolve(config)) == []


def test_one_prometheus_rule_in_the_cluster_namespace_with_the_selector_labels():
    config = monitored(STACK, prometheus={"selectorLabels": {"prometheus": "platform"}})
    (manifest,) = rules.render(config, resolve(config))
    assert manifest["apiVersion"] == "monitoring.coreos.com/v1" and manifest["kind"] == "PrometheusRule"
    assert manifest["metadata"]["namespace"] == config.cluster.namespace
    assert manifest["metadata"]["labels"]["prometheus"] == "platform"
    assert manifest["spec"] == rules.rule_groups(config, resolve(config))
    names = [group["name"] for group in manifest["spec"]["groups"]]
    assert len(names) == len(set(names)) and all(name.startswith(f"slurm-platform.{config.cluster.name}.") for name in names)


@pytest.mark.parametrize("stack", example_stacks())
def test_a_rule_set_per_tenant_and_scheduler_with_its_guarantee_from_the_config(stack):
    config = monitored(stack)
    records = [rule for rule in all_rules(config) if "record" in rule]
    per_tenant = {(r["labels"]["tenant"], r["labels"]["scheduler"], r["record"]): r["expr"] for r in records if "labels" in r}
    assert all(r["labels"][series.CLUSTER_LABEL] == config.cluster.name for r in records if "labels" in r)
    accounts = {tenant.name: "|".join(tenant.slurm_accounts) for tenant in config.tenants}
    expected = [(tenant.name, "slurm", tenant.guaranteed_gpus) for tenant in config.tenants]
    expected += [
        (tenant.name, "kueue", sum(tenant.kueue_gpus(pool.name) for pool in config.gpu_pools))
        for tenant in config.tenants
        if tenant.namespace and config.operators.kueue.enabled
    ]
    for tenant, scheduler, guaranteed in expected:
        assert per_tenant.pop((tenant, scheduler, series.TENANT_GPUS_GUARANTEED)) == f"vector({guaranteed})"
        allocated = per_tenant.pop((tenant, scheduler, series.TENANT_GPUS_ALLOCATED))
        pending = per_tenant.pop((tenant, scheduler, series.TENANT_GPUS_PENDING))
        if scheduler == "slurm":
            assert f'account=~"{accounts[tenant]}"' in allocated and series.ACCOUNT_GPUS_ALLOCATED in allocated
            assert f'account="{tenant}"' in pending and series.ACCOUNT_GPUS_PENDING in pending
            assert f'reason=~"{"|".join(rules.WAITING_FOR_GPUS)}"' in pending, "a pending reason that is no demand for GPUs counts"
        else:
            assert f'cluster_queue="{tenant}"' in allocated and 'resource="nvidia.com/gpu"' in allocated
            assert f'cluster_queue="{tenant}"' in pending and 'resource="nvidia.com/gpu"' in pending
            assert series.KUEUE_PENDING_WORKLOADS in pending and 'status="active"' in pending, "inadmissible workloads count"
    assert per_tenant == {}, "a per-tenant rule of no tenant"
    derived = {r["record"] for r in records if "labels" not in r}
    if config.tenants:
        assert derived == {series.TENANT_GPUS_BORROWED, series.TENANT_GPUS_LENT, series.TENANT_GPU_HOURS_1H}
    else:
        assert records == []


def test_the_kueue_tenant_of_prod_hoalac_has_both_rule_sets():
    config = monitored(STACK)
    found = {(r["labels"]["tenant"], r["labels"]["scheduler"]) for r in all_rules(config) if "labels" in r and "record" in r}
    assert found == {("llm", "slurm"), ("vision", "slurm"), ("speech", "slurm"), ("vision", "kueue")}


@pytest.mark.parametrize("stack", example_stacks())
def test_every_rule_reads_only_series_something_we_run_produces(stack):
    config = monitored(stack)
    exporter = {value for name, value in vars(series).items() if name.isupper() and isinstance(value, str)}
    checked = 0
    for rule in all_rules(config):
        for name in metric_names(rule["expr"]):
            checked += 1
            known = name in exporter or name in KUEUE_METRICS or name == "up" or name.startswith(OTHER_SOURCES)
            assert known, f"{rule.get('alert') or rule.get('record')} reads {name}, which nothing we scrape produces"
    assert checked > 5


def without(config: PlatformConfig, **changes: Any) -> PlatformConfig:
    """The config with parts switched off, unvalidated: e.g. LDAP off would first need every user's keys gone."""
    return config.model_copy(update=changes)


def test_alerts_only_where_their_target_exists():
    config = monitored(STACK)
    assert alert_names(config) == set(rules.ALERTS), "prod-hoalac has every target: Kueue, LDAP, the jail, cert-manager, GPUs, accounting"
    operators = config.operators.model_copy(update={"kueue": config.operators.kueue.model_copy(update={"enabled": False})})
    gpuless = without(config, node_pools=[pool for pool in config.node_pools if not pool.has_gpu])
    accounting = config.slurm.accounting.model_copy(update={"enabled": False})
    # dcgm-exporter without the ServiceMonitor this stack turns on (gpu_jobs.maps_gpu_jobs): no DCGM series to alert on.
    no_dcgm = config.operators.gpu_operator.model_copy(update={"install": False})
    gone = [
        ({"KueuePendingWithFreeQuota"}, without(config, operators=operators)),
        ({"LdapUnavailable"}, without(config, ldap=config.ldap.model_copy(update={"enabled": False}))),
        ({"GpuXidError", "GpuUnavailable"}, gpuless),
        ({"GpuXidError"}, without(config, operators=config.operators.model_copy(update={"gpu_operator": no_dcgm}))),
        ({"SlurmdbdDown"}, without(config, slurm=config.slurm.model_copy(update={"accounting": accounting}))),
    ]
    for alerts, lacking in gone:
        assert alert_names(lacking) == set(rules.ALERTS) - alerts, alerts
    # No tenants: no tenant rule, no tenant alert, and no ClusterQueue to watch.
    untenanted = without(config, tenants=[])
    assert alert_names(untenanted) == set(rules.ALERTS) - {"TenantBelowGuarantee", "KueuePendingWithFreeQuota"}
    assert not [rule for rule in all_rules(untenanted) if "record" in rule]


def test_no_jail_alert_without_the_jail_claim():
    config = monitored("staging-hangzhou")  # ACK: no jail
    assert not config.keeps_jail
    assert "JailFilesystemFull" not in alert_names(config)
    assert "JailFilesystemFull" in alert_names(monitored(STACK))


def test_the_exporter_is_stale_after_a_few_of_its_intervals():
    config = monitored(STACK, slurmExporter={"interval": "1m"})
    (stale,) = [rule for rule in all_rules(config) if rule.get("alert") == "SlurmExporterStale"]
    assert stale["expr"] == f'time() - {series.COLLECTED_AT}{{namespace="{config.cluster.namespace}"}} > {rules.STALE_INTERVALS * 60}'


def test_the_thresholds_come_from_monitoring_alerts():
    config = monitored(STACK, alerts={"guaranteeBrokenFor": "25m", "jailFullPercent": 77, "certificateExpiryDays": 3})
    by_name = {rule["alert"]: rule for rule in all_rules(config) if "alert" in rule}
    assert by_name["TenantBelowGuarantee"]["for"] == "25m"
    assert by_name["JailFilesystemFull"]["expr"].endswith("> 77")
    assert by_name["CertificateExpiringSoon"]["expr"].endswith(f"< {3 * 86400}")


def test_every_alert_has_severity_summary_description_and_a_runbook_in_docs():
    page = (ROOT / docs.MONITORING_PAGE).read_text()
    found = 0
    for rule in all_rules(monitored(STACK)):
        if "alert" not in rule:
            continue
        found += 1
        assert rule["labels"]["severity"] in {"critical", "warning"}
        assert set(rule["annotations"]) == {"summary", "description", "runbook_url"}
        path, anchor = rule["annotations"]["runbook_url"].split("#")
        assert path == "docs/monitoring.md" and f"### {rule['alert']}" in page and anchor == rule["alert"].lower()
    assert found == len(rules.ALERTS)


def test_the_monitoring_page_lists_the_rules_and_alerts_make_docs_generates():
    page = (ROOT / docs.MONITORING_PAGE).read_text()
    assert docs.render_monitoring(page) == page, "run `make docs` and commit docs/monitoring.md"
    for record in rules.RECORDS:
        assert f"| `{record.name}` |" in page
    for alert in rules.ALERTS.values():
        assert f"What to do: {alert.action}" in page
    # Under their own headings, in that order.
    assert page.index("## Per tenant") < page.index(docs.RECORDS_MARKERS[0]) < page.index("## Alerts and what to do")
    assert page.index("## Alerts and what to do") < page.index(docs.ALERTS_MARKERS[0]) < page.index(docs.ALERTS_MARKERS[1])


def test_the_jail_ldap_and_certificates_are_looked_for_where_the_stack_puts_them():
    config = monitored(STACK)
    by_name = {rule["alert"]: rule["expr"] for rule in all_rules(config) if "alert" in rule}
    assert 'persistentvolumeclaim="jail-pvc"' in by_name["JailFilesystemFull"]
    assert f'namespace="{config.cluster.namespace}", statefulset="ldap"' in by_name["LdapUnavailable"]
    namespaces = re.search(r'exported_namespace=~"([^"]+)"', by_name["CertificateExpiringSoon"])
    assert namespaces is not None
    # The cluster's and its operator's charts' (soperator 4.1.7's webhook certificates), not every operator's namespace.
    assert set(namespaces.group(1).split("|")) == {config.cluster.namespace, config.operators.soperator.namespace}


def test_the_node_exporter_built_for_tests_is_the_version_the_exporter_deploys():
    """scripts/prometheus-local.sh builds node_exporter from this module: the one the tests scrape is the image's version."""
    go_mod = (ROOT / "scripts" / "kube" / "prometheus" / "node-exporter" / "go.mod").read_text()
    pinned = re.search(r"^require github\.com/prometheus/node_exporter (v\S+)$", go_mod, re.MULTILINE)
    assert pinned is not None
    assert PlatformConfig().monitoring.slurm_exporter.node_exporter_version == pinned.group(1)
    # And the cache directory the script names is Prometheus's version in its module.
    script = (ROOT / "scripts" / "prometheus-local.sh").read_text()
    prometheus = (ROOT / "scripts" / "kube" / "prometheus" / "go.mod").read_text()
    version = re.search(r"^PROMETHEUS_VERSION=(v\S+)$", script, re.MULTILINE)
    assert version is not None and f"require github.com/prometheus/prometheus {version.group(1)}\n" in prometheus


def test_kueue_publishes_the_cluster_queue_series_the_tenants_rules_read_only_with_monitoring():
    read = {name for rule in all_rules(monitored("prod-hoalac")) for name in metric_names(rule["expr"])}
    assert {name for name in read if name.startswith("kueue_cluster_queue_")}, "the rules read no ClusterQueue series"
    assert kueue_configuration(monitored("prod-hoalac"))["metrics"] == {"bindAddress": ":8443", "enableClusterQueueResources": True}
    unmonitored = parse_config(stack_config("prod-hoalac") | {"monitoring": {"enabled": False}})
    assert "enableClusterQueueResources" not in kueue_configuration(unmonitored)["metrics"]


def test_a_tenant_without_oppo_jobs_is_counted_on_the_accounts_the_report_reads():
    config = monitored(STACK)
    tenants = [tenant.model_copy(update={"priorities": ["prod", "test"]}) if tenant.name == "llm" else tenant for tenant in config.tenants]
    lacking = without(config, tenants=tenants)
    (allocated,) = [
        rule["expr"]
        for rule in all_rules(lacking)
        if rule.get("record") == series.TENANT_GPUS_ALLOCATED
        and rule["labels"] == {"cluster": config.cluster.name, "tenant": "llm", "scheduler": "slurm"}
    ]
    assert 'account=~"llm"' in allocated
    assert [g.sources for g in report.guarantees(lacking) if g.tenant == "llm" and g.scheduler == "slurm"] == [("llm",)]

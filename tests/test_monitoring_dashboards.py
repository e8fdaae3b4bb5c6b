"""The Grafana dashboards (components/monitoring/dashboards.py): each is built by the foundation SDK's builders
and survives a round trip through the SDK's typed model; every query names a series that a recording rule, the
Slurm exporter, DCGM, Kueue or kube-state-metrics produces; every tenant has its panels; the ConfigMaps are what
Grafana's sidecar loads.

Series names are read by tests/promql.py's `metric_names`, whose cases are pinned here.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.models import dashboard as dashboard_model
from grafana_foundation_sdk.models import prometheus as prometheus_model
from grafana_foundation_sdk.models import stat as stat_model
from grafana_foundation_sdk.models import table as table_model
from grafana_foundation_sdk.models import timeseries as timeseries_model

from components.config import parse_config
from components.monitoring import dashboards, rules, series
from components.slurm import resolve
from tests.contracts import kubernetes_errors
from tests.harness import example_stacks, stack_config
from tests.promql import metric_names

STACK = "prod-hoalac"  # three tenants, one of them with Kueue cells

# What the dashboards may ask for: our series (the exporter's and the recording rules', from series.py) and these,
# written out here rather than imported, so that a typo in the module's own names fails too.
NOT_SERIES = {series.EXPORTER_APP, series.EXPORTER_PORT_NAME}  # where the exporter listens
OURS = {value for name, value in vars(series).items() if name.isupper() and isinstance(value, str)} - NOT_SERIES
OTHERS = {
    # dcgm-exporter's default counters (etc/default-counters.csv)
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_XID_ERRORS",
    # Kueue's ClusterQueue metrics (site/content/en/docs/reference/metrics.md)
    "kueue_pending_workloads",
    "kueue_admitted_active_workloads",
    # kube-state-metrics' node metrics (docs/metrics/cluster/node-metrics.md)
    "kube_node_status_condition",
}
ALLOWED = OURS | OTHERS
PANEL_OPTIONS = {"timeseries": timeseries_model.Options, "stat": stat_model.Options, "table": table_model.Options}


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("up", {"up"}),
        ('sum by (tenant, scheduler) (tenant:gpus_allocated:sum{scheduler="kueue"})', {"tenant:gpus_allocated:sum"}),
        ("sum(rate(a_total[5m] offset 1h)) without (instance) / on (node) group_left (account) b", {"a_total", "b"}),
        ('label_replace(x{account=~"$tenant"}, "hpc_job", "$1", "job_id", "(.+)")', {"x"}),
        ("max_over_time(c[$__rate_interval:1m]) > bool 0.5e3 and d unless e or f", {"c", "d", "e", "f"}),
        ("time() - max(g) @ end()", {"g"}),
        ('count by(state)(h{state=~".*(down|drain).*", reason!="by (x) ignored"}) == Inf', {"h"}),
        ("sort(avg by (hpc_job) (i{hpc_job=~'.+'}) + on(hpc_job) group_left(account, partition) (0 * j))", {"i", "j"}),
        ("topk(3, k) + ${var} + [[old]] + 0x1F", {"k"}),
        ('clamp_min(sum by (tenant) (a:b{x="y"}[5m]) - c, 0) or vector(0) and on (q) d == 79 unless absent(e{f="g"})', {"a:b", "c", "d", "e"}),
    ],
)
def test_metric_names_tells_series_from_everything_else(expr, names):
    assert metric_names(expr) == names


def test_metric_names_refuses_what_it_cannot_read():
    with pytest.raises(AssertionError, match="__name__"):
        metric_names('{__name__="x"}')
    with pytest.raises(AssertionError, match="unbalanced"):
        metric_names('x{a="b"')
    with pytest.raises(AssertionError, match="does not have"):
        metric_names("x # comment")


# --- The dashboards ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def config():
    return parse_config({**stack_config(STACK), "monitoring": {"enabled": True}})


def queries(board: dict[str, Any]) -> list[tuple[str, str]]:
    return [(panel["title"], target["expr"]) for panel in board["panels"] for target in panel.get("targets", [])]


def unknown_series(board: dict[str, Any]) -> dict[str, set[str]]:
    found = {}
    for title, expr in queries(board):
        names = metric_names(expr)
        assert names, f"{title}: {expr} names no series"
        if names - ALLOWED:
            found[f"{title}: {expr}"] = names - ALLOWED
    return found


@pytest.mark.parametrize("slug", list(dashboards.BUILDERS))
def test_every_query_names_a_series_someone_produces(config, slug):
    board = dashboards.as_json(dashboards.built(config, slug))
    assert len(queries(board)) >= 4
    assert unknown_series(board) == {}


def test_a_typo_in_a_series_name_is_caught(config, monkeypatch):
    monkeypatch.setattr(series, "NODE_GPUS", "slurm_node_gpu")
    monkeypatch.setattr(series, "DCGM_XID", "DCGM_FI_DEV_XID_ERROR")
    overview = dashboards.as_json(dashboards.built(config, "overview"))
    nodes = dashboards.as_json(dashboards.built(config, "nodes"))
    assert set().union(*unknown_series(overview).values()) == {"slurm_node_gpu"}
    assert set().union(*unknown_series(nodes).values()) == {"slurm_node_gpu", "DCGM_FI_DEV_XID_ERROR"}


@pytest.mark.parametrize("slug", list(dashboards.BUILDERS))
def test_each_dashboard_round_trips_through_the_sdks_model(config, slug):
    register_default_plugins()
    board = dashboards.as_json(dashboards.built(config, slug))
    model = dashboard_model.Dashboard.from_json(board)
    assert dashboards.as_json(model) == board
    assert model.uid and len(model.uid) <= 40 and model.schema_version
    panels = [panel for panel in model.panels or [] if isinstance(panel, dashboard_model.Panel)]
    assert panels and len({panel.id_val for panel in model.panels or []}) == len(model.panels or [])
    for panel in panels:
        # Decoded as the SDK's own types: a Prometheus query, the options of the panel's kind.
        assert panel.targets and all(isinstance(target, prometheus_model.Dataquery) for target in panel.targets), panel.title
        assert isinstance(panel.options, PANEL_OPTIONS[panel.type_val]), panel.title
        ref_ids = [target.ref_id for target in panel.targets]  # type: ignore[attr-defined]
        assert all(ref_ids) and len(set(ref_ids)) == len(ref_ids), panel.title
        assert panel.grid_pos and panel.grid_pos.x + panel.grid_pos.w <= dashboards.GRID


def test_the_datasource_is_picked_in_grafana_not_written_in(config):
    for slug in dashboards.BUILDERS:
        board = dashboards.as_json(dashboards.built(config, slug))
        (variable,) = [v for v in board["templating"]["list"] if v["type"] == "datasource"]
        assert variable["query"] == "prometheus"
        sources = [target["datasource"] for panel in board["panels"] for target in panel.get("targets", [])]
        assert sources and all(source == {"type": "prometheus", "uid": "${datasource}"} for source in sources)


def tenant_panels(board: dict[str, Any], tenant: str) -> dict[str, list[str]]:
    """The tenant's panels, by title, with their queries."""
    return {
        panel["title"]: [target["expr"] for target in panel["targets"]]
        for panel in board["panels"]
        if panel["type"] != "row" and panel["title"].startswith(f"{tenant}: ")
    }


def test_every_tenant_has_its_guarantee_beside_its_use(config):
    board = dashboards.as_json(dashboards.built(config, "tenants"))
    assert len(config.tenants) == 3 and any(tenant.kueue_cells for tenant in config.tenants)
    for tenant in config.tenants:
        panels = tenant_panels(board, tenant.name)
        expected = {f"{tenant.name}: Slurm", *([f"{tenant.name}: Kueue"] if tenant.kueue_cells else [])}
        assert set(panels) == expected
        for title, exprs in panels.items():
            scheduler = "kueue" if title.endswith("Kueue") else "slurm"
            matchers = f'{{cluster="{config.cluster.name}",tenant="{tenant.name}",scheduler="{scheduler}"}}'
            assert exprs == [
                f"{name}{matchers}"
                for name in (series.TENANT_GPUS_GUARANTEED, series.TENANT_GPUS_ALLOCATED, series.TENANT_GPUS_BORROWED, series.TENANT_GPUS_PENDING)
            ]
        rows = [panel["title"] for panel in board["panels"] if panel["type"] == "row"]
        assert tenant.name in rows


def test_the_guarantee_is_drawn_as_a_dashed_line(config):
    board = dashboards.as_json(dashboards.built(config, "tenants"))
    found = 0
    for panel in board["panels"]:
        if panel["type"] == "row" or ": " not in panel["title"]:
            continue
        (override,) = panel["fieldConfig"]["overrides"]
        assert override["matcher"] == {"id": "byName", "options": "guaranteed"}
        properties = {item["id"]: item["value"] for item in override["properties"]}
        assert properties["custom.lineStyle"]["fill"] == "dash" and properties["custom.fillOpacity"] == 0
        assert properties["custom.stacking"]["mode"] == "none"
        assert [t["legendFormat"] for t in panel["targets"]][0] == "guaranteed"
        found += 1
    assert found == 4  # llm, vision (Slurm and Kueue), speech


def test_tenants_follow_the_config(config):
    raw = copy.deepcopy(stack_config(STACK))
    raw["tenants"] = [tenant for tenant in raw["tenants"] if tenant["name"] != "speech"]
    fewer = parse_config({**raw, "monitoring": {"enabled": True}})
    board = dashboards.as_json(dashboards.built(fewer, "tenants"))
    assert tenant_panels(board, "speech") == {}
    assert tenant_panels(board, "llm")
    jobs = dashboards.as_json(dashboards.built(fewer, "jobs"))
    (variable,) = [v for v in jobs["templating"]["list"] if v["name"] == dashboards.TENANT_VARIABLE]
    assert variable["query"] == "llm,vision" and variable["allValue"] == ".*"


def test_jobs_join_dcgm_to_slurm_jobs_and_kueue_pods(config):
    board = dashboards.as_json(dashboards.built(config, "jobs"))
    exprs = dict(queries(board))
    per_job = exprs["GPU utilisation per Slurm job"]
    assert per_job.startswith(f'avg by (hpc_job) ({dashboards.DCGM_GPU_UTIL}{{hpc_job=~".+"}}) + on (hpc_job) group_left (account, partition) (0 * ')
    assert f'label_replace({series.JOB_GPUS}{{namespace="fpt-hpc",account=~"($tenant)(-oppo)?"}}, "hpc_job", "$1", "job_id", "(.+)")' in per_job
    assert exprs["GPU utilisation per pod"] == (
        f'avg by (exported_namespace, exported_pod) ({dashboards.DCGM_GPU_UTIL}{{exported_namespace=~"$tenant",exported_pod=~".+"}})'
    )


def test_a_tenants_jobs_are_found_under_both_its_accounts(config):
    """Grafana puts the picked tenants in for $tenant: one name, (a|b) for several, the all value for All."""
    pattern = dashboards.accounts_of("$" + dashboards.TENANT_VARIABLE)
    names = [tenant.name for tenant in config.tenants]
    for picked in [names[0], f"({names[0]}|{names[1]})"]:
        chosen = re.compile(pattern.replace("$tenant", picked))
        inside = [t for t in config.tenants if t.name in picked]
        assert inside
        for tenant in inside:
            assert chosen.fullmatch(tenant.name) and chosen.fullmatch(tenant.oppo_account)
        for tenant in config.tenants:
            if tenant not in inside:
                assert not chosen.fullmatch(tenant.name) and not chosen.fullmatch(tenant.oppo_account)


def test_the_exporters_series_are_this_stacks(config):
    """The exporter's Service is in the cluster's namespace: a Prometheus scraping two stacks keeps them apart."""
    checked = 0
    ours = {value for name, value in vars(series).items() if name.isupper() and isinstance(value, str) and value.startswith("slurm_")}
    for slug in dashboards.BUILDERS:
        for _, expr in queries(dashboards.as_json(dashboards.built(config, slug))):
            for name in metric_names(expr) & ours:
                assert re.search(rf'{name}{{namespace="{config.cluster.namespace}"[,}}]', expr), expr
                checked += 1
    assert checked >= 10


def test_node_health_reads_per_node_and_tables_show_only_their_labels(config):
    """A GPU's DCGM series splits each time its job or pod changes and forty GPUs are forty lines: the GPU panels
    aggregate per node. Tables aggregate to the labels they show, not the scrape's job, instance and pod."""
    board = dashboards.as_json(dashboards.built(config, "nodes"))
    dcgm = [panel for panel in board["panels"] if panel["type"] == "timeseries" and "DCGM" in panel["targets"][0]["expr"]]
    assert len(dcgm) == 3
    for panel in dcgm:
        ((target,),) = [panel["targets"]]
        assert re.match(r"(max|sum|avg) by \(Hostname\) \(DCGM_FI_DEV_\w+\)$", target["expr"]), target["expr"]
        assert target["legendFormat"] == "{{Hostname}}"
    tables = [
        panel for slug in dashboards.BUILDERS for panel in dashboards.as_json(dashboards.built(config, slug))["panels"] if panel["type"] == "table"
    ]
    assert len(tables) == 4
    for panel in tables:
        assert re.search(r"(max|avg) by \(", panel["targets"][0]["expr"]), panel["title"]
        (organize,) = [t["options"] for t in panel["transformations"] if t["id"] == "organize"]
        assert organize["excludeByName"]["Time"] is True


def test_borrowed_and_lent_keep_slurm_and_kueue_apart(config):
    board = dashboards.as_json(dashboards.built(config, "tenants"))
    (panel,) = [panel for panel in board["panels"] if panel["title"] == "Borrowed and lent"]
    assert [t["expr"] for t in panel["targets"]] == [
        f'sum by (tenant, scheduler) ({series.TENANT_GPUS_BORROWED}{{cluster="{config.cluster.name}"}})',
        f'sum by (tenant, scheduler) ({series.TENANT_GPUS_LENT}{{cluster="{config.cluster.name}"}})',
    ]


def test_every_tenant_query_is_this_stacks(config):
    """Two stacks' rules in one Prometheus record tenants of the same names: each dashboard reads its own cluster's."""
    tenant_series = {value for name, value in vars(series).items() if name.startswith("TENANT_")}
    found = 0
    for slug in ("overview", "tenants"):
        for _, expr in queries(dashboards.as_json(dashboards.built(config, slug))):
            for name in tenant_series:
                for match in re.finditer(re.escape(name) + r"(\{[^}]*\})?", expr):
                    found += 1
                    assert f'cluster="{config.cluster.name}"' in (match[1] or ""), expr
    assert found > 10


def test_the_unhealthy_node_states_are_those_alerted_on(config):
    nodes = dashboards.as_json(dashboards.built(config, "nodes"))
    assert any(f'state=~"{series.NODE_OUT_STATES}"' in expr for _, expr in queries(nodes))
    assert any(
        f'state=~"{series.NODE_OUT_STATES}"' in rule["expr"]
        for group in rules.rule_groups(config, resolve(config))["groups"]
        for rule in group["rules"]
    )


def test_all_tenants_is_every_account_and_namespace(config):
    all_value = ".*"
    (variable,) = [v for v in dashboards.as_json(dashboards.built(config, "jobs"))["templating"]["list"] if v["name"] == dashboards.TENANT_VARIABLE]
    assert variable["allValue"] == all_value and variable["includeAll"] and variable["multi"]
    everyone = re.compile(dashboards.accounts_of("$tenant").replace("$tenant", all_value))
    assert all(everyone.fullmatch(account) for account in ("llm", "llm-oppo", "root", "admin"))


@pytest.mark.parametrize("stack", example_stacks())
def test_every_example_stack_gets_dashboards_that_round_trip(stack):
    """Tenants or none, Kueue or not: the four dashboards, every query naming a series someone produces."""
    register_default_plugins()
    config = parse_config({**stack_config(stack), "monitoring": {"enabled": True}})
    maps = dashboards.render(config)
    assert len(maps) == 4
    for config_map in maps:
        (text,) = config_map["data"].values()
        board = json.loads(text)
        assert dashboards.as_json(dashboard_model.Dashboard.from_json(board)) == board
        assert unknown_series(board) == {}


# --- The ConfigMaps ---------------------------------------------------------------------------------


def test_one_config_map_per_dashboard_for_grafanas_sidecar(config):
    maps = dashboards.render(config)
    assert [m["metadata"]["name"] for m in maps] == [f"fpt-hpc-dashboard-{slug}" for slug in ("overview", "tenants", "jobs", "nodes")]
    uids = set()
    for config_map in maps:
        assert kubernetes_errors(config_map) == []
        assert config_map["apiVersion"] == "v1" and config_map["kind"] == "ConfigMap"
        assert config_map["metadata"]["namespace"] == config.monitoring.prometheus.namespace == "monitoring"
        assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert config_map["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "slurm-platform"
        ((key, text),) = config_map["data"].items()
        assert key.endswith(".json")
        board = json.loads(text)
        uids.add(board["uid"])
        assert board["title"].startswith("fpt-hpc: ")
    assert len(uids) == 4


def test_forty_tenants_fit_a_config_map(config):
    """A ConfigMap holds at most 1 MiB; the tenants dashboard grows with the tenants (a row and two panels each). Forty
    tenants with Kueue cells do not fit this stack's nodes, so the config is copied past the fit check."""
    (vision,) = [tenant for tenant in config.tenants if tenant.kueue_cells]
    forty = config.model_copy(update={"tenants": [vision.model_copy(update={"name": f"team{number}"}) for number in range(40)]})
    (text,) = dashboards.config_map(forty, "tenants")["data"].values()
    assert len(json.loads(text)["panels"]) == 2 + 40 * 3
    assert len(text.encode()) < 256 * 1024, "well under 1 MiB, and under the 256 KiB of a client-side apply's annotation"


def test_the_config_maps_follow_the_prometheus_namespace(config):
    raw = {**stack_config(STACK), "monitoring": {"enabled": True, "prometheus": {"install": False, "namespace": "observability"}}}
    assert {m["metadata"]["namespace"] for m in dashboards.render(parse_config(raw))} == {"observability"}


def test_nothing_when_monitoring_or_dashboards_are_off():
    assert dashboards.render(parse_config({**stack_config(STACK), "monitoring": {"enabled": False}})) == []
    assert dashboards.render(parse_config({**stack_config(STACK), "monitoring": {"enabled": True, "dashboards": False}})) == []

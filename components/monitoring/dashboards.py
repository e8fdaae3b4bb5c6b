"""Grafana dashboards, generated from the stack config with Grafana's foundation SDK and shipped as ConfigMaps
that Grafana's dashboard sidecar loads (label grafana_dashboard: "1"; docs/monitoring.md: Dashboards).

- cluster overview: GPUs in Slurm and allocated, pending demand, slurmctld and slurmdbd up, Slurm nodes by
  state, and each tenant's GPUs stacked;
- tenants: for every tenant of the config, and for Slurm and Kueue apart, its GPUs in use, borrowed and
  pending over time with its guarantee drawn as a dashed line;
- jobs: each Slurm job's GPU utilisation (DCGM's per-GPU series, labelled hpc_job by the prolog's job
  mapping, joined to the exporter's job series for the account) and each pod's (DCGM's pod labels);
- nodes: Slurm's node states with their reasons, Kubernetes' NotReady nodes, XID errors, and per node the
  hottest GPU, the GPUs' power and their utilisation (DCGM).

Every query names a series from series.py (the exporter's and the recording rules') or one of the few
DCGM, Kueue and kube-state-metrics series below, which tests/test_monitoring_dashboards.py checks.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any, Literal

from grafana_foundation_sdk.builders import common as common_builder
from grafana_foundation_sdk.builders import dashboard as dashboard_builder
from grafana_foundation_sdk.builders import prometheus as prometheus_builder
from grafana_foundation_sdk.builders import stat as stat_builder
from grafana_foundation_sdk.builders import table as table_builder
from grafana_foundation_sdk.builders import timeseries as timeseries_builder
from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as common_model
from grafana_foundation_sdk.models import dashboard as dashboard_model
from grafana_foundation_sdk.models import prometheus as prometheus_model

from ..config import PlatformConfig, TenantConfig
from ..config.tenants import OPPO_ACCOUNT_SUFFIX
from . import series

# Series of other exporters the dashboards read beside series.py's (its DCGM XID, Kueue and kube-state-metrics names):
# dcgm-exporter's default counters (GPU operator).
DCGM_GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"  # percent, labels: gpu, Hostname, and hpc_job or namespace/pod while in use
DCGM_GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"  # degrees Celsius
DCGM_POWER_USAGE = "DCGM_FI_DEV_POWER_USAGE"  # watts
DCGM_FB_USED = "DCGM_FI_DEV_FB_USED"  # MiB of GPU memory in use
# dcgm-exporter's labels for a pod's GPU as they reach Prometheus: the GPU operator's ServiceMonitor (honorLabels
# false, its default) keeps the scrape target's own namespace and pod labels, and Prometheus renames the exporter's.
DCGM_POD_NAMESPACE = "exported_namespace"
DCGM_POD = "exported_pod"
DCGM_NODE = "Hostname"  # the Kubernetes node (the GPU operator sets dcgm-exporter's NODE_NAME)

# What Grafana's sidecar (kube-prometheus-stack's grafana.sidecar.dashboards.label) loads.
SIDECAR_LABEL = {series.DASHBOARD_LABEL: series.DASHBOARD_LABEL_VALUE}
TAGS = ["slurm-platform", "gpus"]
# The Prometheus data source each panel asks: picked in the dashboard (kube-prometheus-stack's Grafana has one,
# another Grafana may have several), so no data source uid is written into the JSON.
DATASOURCE_VARIABLE = "datasource"
DATASOURCE = dashboard_model.DataSourceRef(type_val="prometheus", uid="${" + DATASOURCE_VARIABLE + "}")
TENANT_VARIABLE = "tenant"
Scheduler = Literal["slurm", "kueue"]
# Grid width Grafana lays panels out on.
GRID = 24


class Regex(str):
    """A label value matched as a regular expression (=~), e.g. a multi-value variable."""


def selector(name: str, **labels: str) -> str:
    """A series and its label matchers."""
    matchers = [f"{label}{'=~' if isinstance(value, Regex) else '='}{json.dumps(value)}" for label, value in labels.items()]
    return f"{name}{{{','.join(matchers)}}}" if matchers else name


def exporter_series(config: PlatformConfig) -> Callable[..., str]:
    """The Slurm exporter's series of this stack: its Service is in the cluster's namespace, which Prometheus
    gives every series it scrapes there (as the recording rules select them), so stacks sharing a Prometheus stay apart."""

    def of(name: str, **labels: str) -> str:
        return selector(name, namespace=config.cluster.namespace, **labels)

    return of


def stack_tenants(config: PlatformConfig, name: str, **labels: str) -> str:
    """A tenant series this stack's rules recorded (their cluster label): another stack's tenants in the same
    Prometheus, even of the same names, stay out."""
    return selector(name, **{series.CLUSTER_LABEL: config.cluster.name}, **labels)


def accounts_of(tenants: str) -> Regex:
    """The Slurm accounts of the tenants a regular expression matches (the $tenant picker's: Grafana's own regex of
    the names picked, so not TenantConfig.slurm_accounts per tenant): each one's own and its oppo jobs'
    (TenantConfig.oppo_account); a tenant without oppo jobs has no such account to match."""
    return Regex(f"({tenants})({OPPO_ACCOUNT_SUFFIX})?")


def ref_id(index: int) -> str:
    """A query's id in its panel (A, B, ...): Grafana keys results and overrides by it."""
    return chr(ord("A") + index)


def query(expr: str, legend: str = "", instant: bool = False) -> prometheus_builder.Dataquery:
    target = prometheus_builder.Dataquery().expr(expr).datasource(DATASOURCE).legend_format(legend or "__auto")
    return target.format(prometheus_model.PromQueryFormat.TABLE).instant() if instant else target.range()


def timeseries(
    title: str, description: str, unit: str, *targets: prometheus_builder.Dataquery, width: int = 12, stacked: bool = False
) -> timeseries_builder.Panel:
    panel = (
        timeseries_builder.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit(unit)
        .min(0)
        .span(width)
        .height(8)
        .fill_opacity(20 if stacked else 10)
        .legend(
            common_builder.VizLegendOptions()
            .display_mode(common_model.LegendDisplayMode.TABLE)
            .placement(common_model.LegendPlacement.BOTTOM)
            .show_legend(True)
            .calcs(["lastNotNull", "max"])
        )
        .tooltip(common_builder.VizTooltipOptions().mode(common_model.TooltipDisplayMode.MULTI).sort(common_model.SortOrder.DESCENDING))
    )
    if stacked:
        panel = panel.stacking(common_builder.StackingConfig().mode(common_model.StackingMode.NORMAL))
    for index, target in enumerate(targets):
        panel = panel.with_target(target.ref_id(ref_id(index)))
    return panel


def stat(
    title: str, description: str, expr: str, unit: str = "none", mappings: list[dashboard_model.ValueMapping] | None = None
) -> stat_builder.Panel:
    panel = (
        stat_builder.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit(unit)
        .span(4)
        .height(4)
        .reduce_options(common_builder.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
        .color_mode(common_model.BigValueColorMode.BACKGROUND if mappings else common_model.BigValueColorMode.NONE)
        .graph_mode(common_model.BigValueGraphMode.AREA)
        .with_target(query(expr).ref_id(ref_id(0)))
    )
    return panel.mappings(mappings) if mappings else panel


def table(title: str, description: str, expr: str, width: int = GRID, value: str | None = None, unit: str = "none") -> table_builder.Panel:
    """One row per series of an instant query: its labels, and its value headed `value` (no value column without)."""
    organize: dict[str, Any] = {"excludeByName": {"Time": True, **({} if value else {"Value": True})}}
    if value:
        organize["renameByName"] = {"Value": value}
    return (
        table_builder.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit(unit)
        .span(width)
        .height(8)
        .show_header(True)
        .filterable(True)
        .with_target(query(expr, instant=True).ref_id(ref_id(0)))
        .with_transformation(dashboard_model.DataTransformerConfig(id_val="organize", options=organize))
    )


def up_mapping() -> list[dashboard_model.ValueMapping]:
    return [
        dashboard_model.ValueMap(
            options={
                "0": dashboard_model.ValueMappingResult(text="down", color="red", index=0),
                "1": dashboard_model.ValueMappingResult(text="up", color="green", index=1),
            }
        )
    ]


def datasource_variable() -> dashboard_builder.DatasourceVariable:
    return dashboard_builder.DatasourceVariable(DATASOURCE_VARIABLE).label("Prometheus").type("prometheus")


def tenant_variable(config: PlatformConfig) -> dashboard_builder.CustomVariable:
    """The tenants of the config, one or several picked: a regular expression in the queries. All (the default) is
    every account and namespace, so that jobs of accounts no tenant owns show too, and a stack without tenants."""
    names = [tenant.name for tenant in config.tenants]
    return (
        dashboard_builder.CustomVariable(TENANT_VARIABLE)
        .label("Tenant")
        .values(",".join(names))
        .multi(True)
        .include_all(True)
        .all_value(".*")
        .current(dashboard_model.VariableOption(selected=True, text=["All"], value=["$__all"]))
    )


def new_dashboard(config: PlatformConfig, slug: str, title: str, description: str) -> dashboard_builder.Dashboard:
    return (
        dashboard_builder.Dashboard(f"{config.cluster.name}: {title}")
        .uid(dashboard_uid(config, slug))
        .description(description)
        .tags([*TAGS, config.cluster.name])
        .time("now-6h", "now")
        .refresh("1m")
        .timezone("browser")
        .tooltip(dashboard_model.DashboardCursorSync.CROSSHAIR)
        .readonly()
        .with_variable(datasource_variable())
    )


def dashboard_uid(config: PlatformConfig, slug: str) -> str:
    """Stable across ups and unique per stack: Grafana's uid is at most 40 characters, a cluster's name up to 63."""
    digest = hashlib.sha256(config.cluster.name.encode()).hexdigest()[:8]
    return f"slurm-{slug}-{digest}"


# --- The dashboards -------------------------------------------------------------------------------

Board = dashboard_builder.Dashboard
Panel = Builder[dashboard_model.Panel]


def section(board: Board, title: str, *contents: Panel) -> Board:
    """An open row, its panels after it: Grafana drops the panels nested in a row that is not collapsed."""
    board = board.with_row(dashboard_builder.Row(title))
    for panel in contents:
        board = board.with_panel(panel)
    return board


def limit_line() -> list[dashboard_model.DynamicConfigValue]:
    """How a limit is drawn beside the uses: a dashed red line, unfilled and outside the stack."""
    return [
        dashboard_model.DynamicConfigValue(id_val="custom.lineStyle", value={"fill": "dash", "dash": [10, 10]}),
        dashboard_model.DynamicConfigValue(id_val="custom.fillOpacity", value=0),
        dashboard_model.DynamicConfigValue(id_val="custom.lineWidth", value=2),
        dashboard_model.DynamicConfigValue(id_val="custom.stacking", value={"mode": "none", "group": "A"}),
        dashboard_model.DynamicConfigValue(id_val="color", value={"mode": "fixed", "fixedColor": "red"}),
    ]


def overview(config: PlatformConfig) -> Board:
    slurm = exporter_series(config)
    board = new_dashboard(config, "overview", "GPUs, cluster overview", "The cluster's GPUs, who holds them and the Slurm daemons' health.")
    board = section(
        board,
        "GPUs and daemons",
        stat("Slurm GPUs", "GPUs of the Slurm nodes.", f"sum({slurm(series.NODE_GPUS)})"),
        stat("Slurm GPUs allocated", "GPUs allocated to running Slurm jobs.", f"sum({slurm(series.NODE_GPUS_ALLOCATED)})"),
        stat("Slurm GPUs pending", "GPUs that pending Slurm jobs ask for.", f"sum({slurm(series.ACCOUNT_GPUS_PENDING)})"),
        stat(
            "Kueue GPUs in use",
            "GPUs of the Kubernetes jobs Kueue admitted.",
            f"sum({stack_tenants(config, series.TENANT_GPUS_ALLOCATED, scheduler='kueue')})",
        ),
        stat("slurmctld", "scontrol ping, as the exporter saw it last.", f"min({slurm(series.SLURMCTLD_UP)})", mappings=up_mapping()),
        stat("slurmdbd", "sacctmgr's answer, as the exporter saw it last.", f"min({slurm(series.SLURMDBD_UP)})", mappings=up_mapping()),
    )
    board = section(
        board,
        "Who holds the GPUs",
        timeseries(
            "GPUs in use per tenant",
            "Each tenant's GPUs in use, stacked, Slurm and Kueue apart.",
            "none",
            query(f"sum by (tenant, scheduler) ({stack_tenants(config, series.TENANT_GPUS_ALLOCATED)})", "{{tenant}} ({{scheduler}})"),
            stacked=True,
        ),
        timeseries(
            "Slurm nodes by state",
            "How many Slurm nodes are in each state (idle, mixed, allocated, drained, down...).",
            "none",
            query(f"count by (state) ({slurm(series.NODE_STATE)})", "{{state}}"),
            stacked=True,
        ),
    )
    return section(
        board,
        "Demand and freshness",
        timeseries(
            "Pending demand per tenant",
            "GPUs that each tenant's pending jobs ask for, Slurm and Kueue apart.",
            "none",
            query(f"sum by (tenant, scheduler) ({stack_tenants(config, series.TENANT_GPUS_PENDING)})", "{{tenant}} ({{scheduler}})"),
        ),
        timeseries(
            "Age of the exporter's data",
            "Seconds since the Slurm exporter last asked slurmctld and slurmdbd successfully: a rising line is a stale exporter.",
            "s",
            query(f"time() - max({slurm(series.COLLECTED_AT)})", "age"),
        ),
    )


def guarantee_text(tenant: TenantConfig, scheduler: Scheduler) -> str:
    cells = tenant.cells if scheduler == "slurm" else tenant.kueue_cells
    return ", ".join(f"{c.cells} × {c.gpus_per_cell} GPUs on {c.pool}" for c in cells)


def tenant_panel(config: PlatformConfig, tenant: TenantConfig, scheduler: Scheduler) -> timeseries_builder.Panel:
    def of(name: str) -> str:
        return stack_tenants(config, name, tenant=tenant.name, scheduler=scheduler)

    where = "Slurm" if scheduler == "slurm" else "Kueue"
    return timeseries(
        f"{tenant.name}: {where}",
        f"{tenant.name}'s GPUs under {where}: guaranteed ({guarantee_text(tenant, scheduler)}; the dashed line), in use, borrowed "
        f"above the guarantee, and the GPUs its pending jobs ask for.",
        "none",
        query(of(series.TENANT_GPUS_GUARANTEED), "guaranteed"),
        query(of(series.TENANT_GPUS_ALLOCATED), "in use"),
        query(of(series.TENANT_GPUS_BORROWED), "borrowed"),
        query(of(series.TENANT_GPUS_PENDING), "pending"),
    ).override_by_name("guaranteed", limit_line())


def tenants(config: PlatformConfig) -> Board:
    board = new_dashboard(config, "tenants", "GPUs per tenant", "Each tenant's GPUs against its guarantee (the dashed line), Slurm and Kueue apart.")
    board = section(
        board,
        "All tenants",
        timeseries(
            "Borrowed and lent",
            "GPUs each tenant uses above its guarantee (borrowed) and leaves to others below it (lent).",
            "none",
            query(f"sum by (tenant, scheduler) ({stack_tenants(config, series.TENANT_GPUS_BORROWED)})", "{{tenant}} ({{scheduler}}) borrowed"),
            query(f"sum by (tenant, scheduler) ({stack_tenants(config, series.TENANT_GPUS_LENT)})", "{{tenant}} ({{scheduler}}) lent"),
            width=GRID,
        ),
    )
    for tenant in config.tenants:
        schedulers: list[Scheduler] = ["slurm", "kueue"] if tenant.kueue_cells else ["slurm"]
        board = section(board, tenant.name, *(tenant_panel(config, tenant, scheduler) for scheduler in schedulers))
    return board


def jobs(config: PlatformConfig) -> Board:
    slurm = exporter_series(config)
    tenant = Regex("$" + TENANT_VARIABLE)
    # DCGM labels a GPU with the Slurm job id the prolog wrote (hpc_job); the exporter's job series, relabelled
    # to hpc_job, adds the job's account and partition (0 * keeps DCGM's value).
    job = series.DCGM_JOB_LABEL
    accounts = f'label_replace({slurm(series.JOB_GPUS, account=accounts_of(tenant))}, "{job}", "$1", "job_id", "(.+)")'
    per_job = f"avg by ({job}) ({selector(DCGM_GPU_UTIL, **{job: Regex('.+')})}) + on ({job}) group_left (account, partition) (0 * {accounts})"
    memory = f"sum by ({job}) ({selector(DCGM_FB_USED, **{job: Regex('.+')})}) + on ({job}) group_left (account) (0 * {accounts})"
    pods = selector(DCGM_GPU_UTIL, **{DCGM_POD_NAMESPACE: tenant, DCGM_POD: Regex(".+")})
    board = new_dashboard(config, "jobs", "GPU utilisation per job", "Each Slurm job's and each Kueue pod's GPU utilisation (DCGM).")
    board = section(
        board.with_variable(tenant_variable(config)),
        "Slurm jobs",
        timeseries(
            "GPU utilisation per Slurm job",
            "The mean utilisation of a job's GPUs (DCGM, through the prolog's job mapping), with its account.",
            "percent",
            query(per_job, f"{{{{{job}}}}} ({{{{account}}}})"),
        ).max(100),
        timeseries(
            "GPU memory per Slurm job", "GPU memory a job's GPUs hold together.", "decmbytes", query(memory, f"{{{{{job}}}}} ({{{{account}}}})")
        ),
        table(
            "Running Slurm jobs, least busy first",
            "Each running job's mean GPU utilisation now: a job that holds GPUs and leaves them idle comes first.",
            f"sort({per_job})",
            value="GPU utilisation",
            unit="percent",
        ),
    )
    return section(
        board,
        "Kueue pods",
        timeseries(
            "GPU utilisation per pod",
            "The mean utilisation of a pod's GPUs (DCGM's pod mapping): a Kueue workload's in its tenant's namespace.",
            "percent",
            query(f"avg by ({DCGM_POD_NAMESPACE}, {DCGM_POD}) ({pods})", f"{{{{{DCGM_POD_NAMESPACE}}}}}/{{{{{DCGM_POD}}}}}"),
        ).max(100),
        timeseries(
            "Kueue workloads",
            "Each tenant's ClusterQueue: workloads admitted and running, and pending.",
            "none",
            query(f"sum by (cluster_queue) ({selector(series.KUEUE_ADMITTED_WORKLOADS, cluster_queue=tenant)})", "{{cluster_queue}} admitted"),
            query(f"sum by (cluster_queue) ({selector(series.KUEUE_PENDING_WORKLOADS, cluster_queue=tenant)})", "{{cluster_queue}} pending"),
        ),
    )


def nodes(config: PlatformConfig) -> Board:
    slurm = exporter_series(config)
    node = "{{" + DCGM_NODE + "}}"
    board = new_dashboard(
        config, "nodes", "Nodes and their health", "Slurm's node states and reasons, Kubernetes' node conditions, and the GPUs' health (DCGM)."
    )
    board = section(
        board,
        "Slurm and Kubernetes",
        table(
            "Slurm nodes out of service",
            "Nodes down, drained, draining or failing, with Slurm's reason (scontrol update nodename=<node> state=resume once fixed).",
            f"max by (node, state, reason) ({slurm(series.NODE_STATE, state=Regex(series.NODE_OUT_STATES))})",
            width=12,
        ),
        table(
            "Kubernetes nodes not Ready",
            "Nodes whose Ready condition is not true (kube-state-metrics).",
            f"max by (node) ({selector(series.KSM_NODE_CONDITION, condition='Ready', status='true')}) == 0",
            width=12,
        ),
        timeseries(
            "GPUs allocated per Slurm node",
            "The share of each Slurm node's GPUs allocated to jobs.",
            "percentunit",
            query(f"{slurm(series.NODE_GPUS_ALLOCATED)} / on (node) {slurm(series.NODE_GPUS)}", "{{node}}"),
            width=GRID,
        ).max(1),
    )
    return section(
        board,
        "GPUs (DCGM)",
        table(
            "GPUs with an XID error",
            "The last XID error of each GPU that reported one (79: fallen off the bus; 48, 63, 64, 94, 95: memory errors).",
            f"max by ({DCGM_NODE}, gpu, UUID) ({series.DCGM_XID}) > 0",
            value="XID",
        ),
        # Per node, not per GPU: forty lines are unreadable, and a GPU's series splits each time its job or pod changes.
        timeseries(
            "Hottest GPU per node",
            "The highest GPU temperature of each node.",
            "celsius",
            query(f"max by ({DCGM_NODE}) ({DCGM_GPU_TEMP})", node),
            width=8,
        ),
        timeseries(
            "GPU power per node", "The power its GPUs draw together.", "watt", query(f"sum by ({DCGM_NODE}) ({DCGM_POWER_USAGE})", node), width=8
        ),
        timeseries(
            "GPU utilisation per node",
            "The mean utilisation of each node's GPUs, whoever uses them.",
            "percent",
            query(f"avg by ({DCGM_NODE}) ({DCGM_GPU_UTIL})", node),
            width=8,
        ).max(100),
    )


# --- As ConfigMaps --------------------------------------------------------------------------------

BUILDERS = {"overview": overview, "tenants": tenants, "jobs": jobs, "nodes": nodes}


def built(config: PlatformConfig, slug: str) -> dashboard_model.Dashboard:
    """A dashboard as the SDK's model, its rows and panels numbered in order (Grafana links to a panel by its id)."""
    board = BUILDERS[slug](config).build()
    for number, panel in enumerate(board.panels or [], start=1):
        panel.id_val = number
    return board


def as_json(board: dashboard_model.Dashboard) -> dict[str, Any]:
    """The dashboard's JSON model, as Grafana imports it."""
    return json.loads(json.dumps(board, cls=JSONEncoder))


def config_map(config: PlatformConfig, slug: str) -> dict[str, Any]:
    text = json.dumps(as_json(built(config, slug)), sort_keys=True, separators=(",", ":"))
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"{config.cluster.name}-dashboard-{slug}",
            "namespace": config.monitoring.prometheus.namespace,
            "labels": {**series.LABELS, **SIDECAR_LABEL},
        },
        "data": {f"{config.cluster.name}-{slug}.json": text},
    }


def render(config: PlatformConfig) -> list[dict[str, Any]]:
    if not (config.monitoring.enabled and config.monitoring.dashboards):
        return []
    return [config_map(config, slug) for slug in BUILDERS]

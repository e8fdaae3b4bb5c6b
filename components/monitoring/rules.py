"""The recording rules and alerts, as one PrometheusRule generated from the tenants and the config.

Recording rules (group `slurm-platform.<cluster>.tenants`): per tenant and scheduler, its guarantee beside its use.
Slurm: the tenant's cells (`TenantConfig.guaranteed_gpus`) against the GPUs of its two accounts
(`<tenant>` and `<tenant>-oppo`, components/tenancy/) from the Slurm exporter. Kueue: its kueueCells
(`TenantConfig.kueue_gpus` over the GPU pools) against its ClusterQueue `<tenant>` (components/kueue.py)
from Kueue's own metrics. Borrowed, lent and GPU-hours follow from those, one rule for all of this
stack's tenants (another stack's, in the same Prometheus, are its own rules' business).

Alerts: one group per concern, each alert only where its target exists in this config (no Kueue alert
without Kueue, no LDAP alert without the directory, ...). Every alert carries a severity, a summary,
a description and a runbook_url into docs/monitoring.md, whose "Per tenant" and "Alerts" sections
are generated from RECORDS and ALERTS below (tools/docs.py), so nothing is written twice.

`rule_groups(config)` is what promtool reads (`{"groups": [...]}`); `render(config)` wraps it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..config import PlatformConfig, TenantConfig
from ..identity.names import STATEFULSET_NAME as LDAP_STATEFULSET
from ..render.storage import JAIL_CLAIM
from ..slurm import SlurmPlan, installs_cert_manager
from ..slurm.gpu_jobs import maps_gpu_jobs
from ..tenancy import GPU
from . import series
from .exporter import interval_seconds

RUNBOOK = "docs/monitoring.md"
SLURM, KUEUE = "slurm", "kueue"

# What the rules read beyond series.py's (Slurm exporter, Kueue, DCGM, kube-state-metrics): the kubelet and cert-manager.
KUBELET_VOLUME_USED = "kubelet_volume_stats_used_bytes"
KUBELET_VOLUME_CAPACITY = "kubelet_volume_stats_capacity_bytes"
CERT_EXPIRY = "certmanager_certificate_expiration_timestamp_seconds"
SCRAPE_UP = "up"
# Slurm's pending reasons (squeue's JOB REASON CODES, the exporter's reason label) of a job that waits for GPUs to free
# up: Resources (none free), Priority (higher-priority jobs take them first), ReqNodeNotAvail (with ", UnavailableNodes:..."
# appended), Nodes_required_for_job_are_DOWN_DRAINED_or_reserved_for_jobs_in_higher_priority_partitions and NodeDown (its
# nodes are out). Every other reason is the job's or the tenant's own doing, not a broken guarantee: Dependency, BeginTime,
# held jobs (JobHeld*), its own association or QOS limits (AssocGrp*, AssocMax*, QOSGrp*, QOSMax*), a bad request.
WAITING_FOR_GPUS = ("Resources", "Priority", "ReqNodeNotAvail.*", "Nodes_required_for_job_are_DOWN.*", "NodeDown")
# NVIDIA's XID catalogue: the XIDs that say the GPU itself (not the application: 13, 31, 43, ...) is in trouble:
# 48 double-bit ECC, 63/64 row remapping (recorded / failed), 74 NVLink, 79 fallen off the bus, 92 high single-bit
# ECC rate, 94/95 contained/uncontained ECC, 119/120 GSP (the GPU's firmware) timeout/error.
HARDWARE_XIDS = (48, 63, 64, 74, 79, 92, 94, 95, 119, 120)
# DCGM keeps a GPU's last XID as its value until the next one: an XID is news while the series changed this recently.
XID_RECENT = "10m"
# How many of the collector's intervals without a successful run make the exporter's data stale.
STALE_INTERVALS = 4
# A follower replica of Kueue reports its gauges too: count the leader's (or a lone replica's) only.
KUEUE_REPORTER = 'replica_role!="follower"'


@dataclass(frozen=True)
class Record:
    """A recording rule as docs/monitoring.md explains it: what it means, from what, per scheduler."""

    name: str
    meaning: str
    slurm: str
    kueue: str


RECORDS = (
    Record(
        series.TENANT_GPUS_GUARANTEED,
        "The GPUs the tenant is guaranteed: a constant from the config, changed only by a deploy.",
        "its `cells`: cells x gpusPerCell",
        "its `kueueCells` over every GPU pool: the nominalQuota of its ClusterQueue",
    ),
    Record(
        series.TENANT_GPUS_ALLOCATED,
        "The GPUs its running jobs hold now, guaranteed and borrowed together.",
        f"`{series.ACCOUNT_GPUS_ALLOCATED}` of its accounts `<tenant>` and `<tenant>-oppo`",
        f"`{series.KUEUE_USAGE}` of its ClusterQueue, resource `{GPU}`",
    ),
    Record(
        series.TENANT_GPUS_BORROWED,
        "The GPUs it uses beyond its guarantee: max(allocated - guaranteed, 0). Preemptible: they go back when their owner asks.",
        "from the two above",
        "from the two above",
    ),
    Record(
        series.TENANT_GPUS_LENT,
        "The GPUs of its guarantee it leaves to others now: max(guaranteed - allocated, 0).",
        "from the two above",
        "from the two above",
    ),
    Record(
        series.TENANT_GPUS_PENDING,
        "The GPUs its jobs waiting for GPUs ask for: demand the guarantee should meet. Above 0 while it lends is the guarantee broken "
        "(alert [TenantBelowGuarantee](#tenantbelowguarantee)).",
        f"`{series.ACCOUNT_GPUS_PENDING}` of its account `<tenant>` (prod and test jobs; its oppo jobs wait for idle GPUs by design), "
        f"pending reason one of {', '.join(f'`{reason}`' for reason in WAITING_FOR_GPUS)}: not Dependency, BeginTime, a held job "
        "or its own association or QOS limits",
        f"`{series.KUEUE_PENDING_RESOURCES}` of its ClusterQueue, resource `{GPU}` (GPUs, not workloads), while it has active "
        f"(admissible) pending workloads: Kueue's GPU count does not tell active from inadmissible workloads, "
        f"`{series.KUEUE_PENDING_WORKLOADS}` does per ClusterQueue",
    ),
    Record(
        series.TENANT_GPU_HOURS_1H,
        "GPU-hours used in the last hour: allocated averaged over 1h (the usage report and dashboards sum these).",
        "from allocated",
        "from allocated",
    ),
)


@dataclass(frozen=True)
class Alert:
    """An alert as its rule and docs/monitoring.md tell it: `summary` and `detail` carry templates of the
    series' labels; `meaning`, `action` and `exists` are the runbook."""

    name: str
    severity: str
    summary: str
    detail: str
    meaning: str
    action: str
    exists: str

    @property
    def anchor(self) -> str:
        """The GitHub anchor of its docs heading (`### <name>`)."""
        return self.name.lower()


ALERTS = {
    alert.name: alert
    for alert in (
        Alert(
            "SlurmExporterDown",
            "critical",
            "The Slurm exporter of {{ $labels.namespace }} is not scraped",
            "Prometheus finds no Slurm exporter to scrape in {{ $labels.namespace }}, or its scrape fails: every Slurm series is stale.",
            "Prometheus's scrape of the Slurm exporter fails: no Slurm series, so no tenant's use, no node state and no alert "
            "below on Slurm can be trusted.",
            "`kubectl -n <cluster namespace> get pods -l app.kubernetes.io/name=slurm-exporter`; read its logs and events. "
            "A NetworkPolicy change that no longer lets Prometheus's pods in shows as a scrape timeout.",
            "always (monitoring.enabled)",
        ),
        Alert(
            "SlurmExporterStale",
            "critical",
            "The Slurm exporter of {{ $labels.namespace }} serves old data",
            "The Slurm exporter's collector last succeeded {{ $value | humanizeDuration }} ago.",
            f"The exporter is scraped but its collector has not succeeded for {STALE_INTERVALS} of its intervals "
            "(monitoring.slurmExporter.interval): the Slurm series are what they were then, a tenant's use may read 0 "
            "and the tenant alerts cannot be trusted.",
            "Read the collector container's log (`kubectl -n <cluster namespace> logs -l app.kubernetes.io/name=slurm-exporter "
            "--all-containers`): squeue, sinfo or sacctmgr failing (slurmctld down, the auth sidecar's key, a timeout).",
            "always (monitoring.enabled)",
        ),
        Alert(
            "SlurmctldDown",
            "critical",
            "slurmctld of {{ $labels.namespace }} does not answer",
            "`scontrol ping` from the exporter finds no primary slurmctld.",
            "No job starts or ends: the controller is down or unreachable from the exporter.",
            "Look at the controller pod (`kubectl -n <cluster namespace> get pods`, its logs); a pod that restarts in a loop "
            "often has a bad slurm.conf after a deploy ([Waiting until Slurm is up](operations.md#waiting-until-slurm-is-up)).",
            "always (monitoring.enabled)",
        ),
        Alert(
            "SlurmdbdDown",
            "critical",
            "slurmdbd of {{ $labels.namespace }} does not answer",
            "`sacctmgr show cluster` from the exporter fails.",
            "Accounting is down: limits (each tenant's GrpTRES) and fairshare come from slurmdbd; slurmctld queues the records "
            "meanwhile, and new accounts or QOS cannot be added.",
            "Look at the accounting pod and its MariaDB ([Backing up the accounting database](operations.md#backing-up-the-accounting-database)); "
            "the tenants' sacctmgr Job fails while it is down.",
            "with slurm.accounting.enabled",
        ),
        Alert(
            "SlurmNodeOut",
            "warning",
            "Slurm node {{ $labels.node }} is {{ $labels.state }}",
            "Node {{ $labels.node }} is {{ $labels.state }}; Slurm's reason: {{ $labels.reason }}.",
            "A node takes no new job: drained or draining by an admin or by a health check, down when slurmd stopped answering.",
            "Read the reason (`sinfo -R`); fix the node (a GPU alert below often says why), then `scontrol update nodename=<node> state=resume`.",
            "always (monitoring.enabled)",
        ),
        Alert(
            "GpuXidError",
            "warning",
            "GPU {{ $labels.gpu }} of {{ $labels.Hostname }} reported XID {{ $value }}",
            "DCGM reports XID {{ $value }} on GPU {{ $labels.gpu }} ({{ $labels.UUID }}) of {{ $labels.Hostname }}.",
            f"The driver reported a hardware XID of the GPU in the last {XID_RECENT} (NVIDIA's XID catalogue: "
            f"{', '.join(map(str, HARDWARE_XIDS))}; e.g. 48 and 94/95 are ECC errors, 79 fallen off the bus). Application "
            "XIDs (13, 31, 43) do not alert, and the alert ends once the XID is older than that: DCGM keeps a GPU's last XID "
            "as its value until the next one.",
            "Look up the XID in NVIDIA's catalogue; drain the node (`scontrol update nodename=<node> "
            "state=drain reason=xid<n>`) and have it checked.",
            "with dcgm-exporter's ServiceMonitor (the GPU operator this stack installs, dcgm-exporter on, monitoring on)",
        ),
        Alert(
            "GpuUnavailable",
            "critical",
            "Node {{ $labels.node }} has {{ $value }} GPU(s) it cannot allocate",
            "Node {{ $labels.node }}'s device plugin allocates {{ $value }} fewer nvidia.com/gpu than the node has.",
            "A GPU of the node is unhealthy or gone (fallen off the bus, XID 79, drops out of DCGM's series altogether): "
            "the device plugin reports it in capacity but no longer in allocatable, so nothing can use it.",
            "Look at the node's GPUs (`nvidia-smi` on it, the device plugin pod's log); drain it (`scontrol update nodename=<node> "
            "state=drain reason=gpu-lost`), reboot it; if the GPU does not come back, have it and its slot checked.",
            "with a GPU pool (kube-state-metrics' node capacity and allocatable)",
        ),
        Alert(
            "TenantBelowGuarantee",
            "critical",
            "Tenant {{ $labels.tenant }} waits below its guarantee ({{ $labels.scheduler }})",
            "Tenant {{ $labels.tenant }} has GPU jobs waiting on {{ $labels.scheduler }} while it holds fewer GPUs than it is guaranteed.",
            "The guarantee is broken: the tenant asks for GPUs, has fewer than its cells, and has waited longer than "
            "monitoring.alerts.guaranteeBrokenFor. Borrowers should have been preempted.",
            "See why its jobs wait (`squeue -A <tenant> -t PD -o '%i %r'`, or the Workloads of its namespace): only jobs "
            "waiting for GPUs count (Resources, Priority, or their nodes down or drained), so either a drained node of its "
            "pool holds its GPUs, or preemption is not happening ([Tenants and GPU sharing](tenants.md)).",
            "per tenant with cells (Slurm) or kueueCells (Kueue)",
        ),
        Alert(
            "KueuePendingWithFreeQuota",
            "warning",
            "ClusterQueue {{ $labels.cluster_queue }} holds workloads pending beside free GPU quota",
            "ClusterQueue {{ $labels.cluster_queue }} has pending workloads while its nominal GPU quota is not used up.",
            "Workloads wait although their ClusterQueue's own quota has room: they ask for more than is left, or for a flavor, "
            "topology or resource the quota does not cover, or the ClusterQueue is inactive.",
            "`kubectl get workloads -n <tenant>` and `kubectl describe` the pending one: its conditions say why it is inadmissible.",
            "with operators.kueue.enabled and a tenant with namespace: true",
        ),
        Alert(
            "JailFilesystemFull",
            "warning",
            "The jail of {{ $labels.namespace }} is {{ $value | humanize }}% full",
            "The jail claim {{ $labels.persistentvolumeclaim }} is {{ $value | humanize }}% full.",
            "The shared root filesystem of every Slurm pod is nearly full (fuller than monitoring.alerts.jailFullPercent): "
            "jobs writing there fail next.",
            "Find what grew (`du -xsh /home/* /opt/*` on a login node), clean up, or grow storage.jail.size ([Configuration](configuration.md)).",
            "with the jail claim (soperator, or kept after a switch from it)",
        ),
        Alert(
            "LdapUnavailable",
            "critical",
            "The LDAP directory of {{ $labels.namespace }} has no ready replica",
            "StatefulSet {{ $labels.statefulset }} has no ready pod.",
            "No login resolves users: sssd and nslcd on the Slurm pods cannot reach the directory, so logins and new jobs' user lookups fail.",
            "`kubectl -n <cluster namespace> describe statefulset ldap` and its pod's logs; a full data claim or a bad TLS secret "
            "are the usual causes ([The directory follows the config](tenants.md#the-directory-follows-the-config)).",
            "with ldap.enabled",
        ),
        Alert(
            "CertificateExpiringSoon",
            "warning",
            "Certificate {{ $labels.name }} expires in {{ $value | humanizeDuration }}",
            "cert-manager's certificate {{ $labels.name }} expires in {{ $value | humanizeDuration }}.",
            "A certificate cert-manager issues in one of the platform's namespaces expires within "
            "monitoring.alerts.certificateExpiryDays and was not renewed: the webhooks that use it stop admitting.",
            "`kubectl describe certificate <name>` and its CertificateRequest: an issuer that fails or a renewal refused says why.",
            "with cert-manager (installed, or needed by the Slurm operator's webhooks)",
        ),
    )
}


def _alert(name: str, expr: str, duration: Optional[str] = None) -> dict[str, Any]:
    """The rule of ALERTS[name]; no duration: it fires at the first evaluation that finds it."""
    alert = ALERTS[name]
    return {
        "alert": name,
        "expr": expr,
        **({"for": duration} if duration else {}),
        "labels": {"severity": alert.severity},
        "annotations": {"summary": alert.summary, "description": alert.detail, "runbook_url": f"{RUNBOOK}#{alert.anchor}"},
    }


def _record(config: PlatformConfig, name: str, expr: str, tenant: str, scheduler: str) -> dict[str, Any]:
    labels = {series.CLUSTER_LABEL: config.cluster.name, "tenant": tenant, "scheduler": scheduler}
    return {"record": name, "expr": expr, "labels": labels}


def _matchers(**labels: str) -> str:
    return "{" + ", ".join(f'{key}="{value}"' for key, value in labels.items()) + "}"


def _one_of(values: list[str]) -> str:
    """A regex matching exactly these label values (names here are DNS labels: nothing to escape)."""
    return "|".join(values)


def kueue_tenants(config: PlatformConfig) -> list[TenantConfig]:
    """The tenants with a ClusterQueue: Kueue on and a namespace (components/kueue.py)."""
    return [tenant for tenant in config.tenants if tenant.namespace] if config.operators.kueue.enabled else []


def tenant_records(config: PlatformConfig) -> list[dict[str, Any]]:
    """Guaranteed, allocated and pending per tenant and scheduler; `or vector(0)`: a tenant with no job has
    no series in its source, and 0 is the truth."""
    exporter = f'namespace="{config.cluster.namespace}"'
    waiting = _one_of(list(WAITING_FOR_GPUS))
    rules = []
    for tenant in config.tenants:
        accounts = _one_of(list(tenant.slurm_accounts))
        rules += [
            _record(config, series.TENANT_GPUS_GUARANTEED, f"vector({tenant.guaranteed_gpus})", tenant.name, SLURM),
            _record(
                config,
                series.TENANT_GPUS_ALLOCATED,
                f'sum({series.ACCOUNT_GPUS_ALLOCATED}{{{exporter}, account=~"{accounts}"}}) or vector(0)',
                tenant.name,
                SLURM,
            ),
            _record(
                config,
                series.TENANT_GPUS_PENDING,
                f'sum({series.ACCOUNT_GPUS_PENDING}{{{exporter}, account="{tenant.name}", reason=~"{waiting}"}}) or vector(0)',
                tenant.name,
                SLURM,
            ),
        ]
    for tenant in kueue_tenants(config):
        queue = f'cluster_queue="{tenant.name}", resource="{GPU}", {KUEUE_REPORTER}'
        active = f'sum({series.KUEUE_PENDING_WORKLOADS}{{cluster_queue="{tenant.name}", status="active", {KUEUE_REPORTER}}}) > 0'
        pending = f"(sum({series.KUEUE_PENDING_RESOURCES}{{{queue}}}) and on () ({active})) or vector(0)"
        rules += [
            _record(config, series.TENANT_GPUS_GUARANTEED, f"vector({tenant.kueue_guaranteed_gpus})", tenant.name, KUEUE),
            _record(config, series.TENANT_GPUS_ALLOCATED, f"sum({series.KUEUE_USAGE}{{{queue}}}) or vector(0)", tenant.name, KUEUE),
            _record(config, series.TENANT_GPUS_PENDING, pending, tenant.name, KUEUE),
        ]
    return rules


def this_stacks(config: PlatformConfig, name: str) -> str:
    """A tenant series this stack recorded (its cluster label): a Prometheus that also holds another stack's rules,
    even for tenants of the same names, would otherwise mix (and alert on) both."""
    return f'{name}{{{series.CLUSTER_LABEL}="{config.cluster.name}"}}'


def derived_records(config: PlatformConfig) -> list[dict[str, Any]]:
    """Borrowed, lent and GPU-hours: one rule each for all its tenants (matched on tenant and scheduler),
    after the per-tenant rules of the same group, which Prometheus evaluates in order."""
    allocated, guaranteed = this_stacks(config, series.TENANT_GPUS_ALLOCATED), this_stacks(config, series.TENANT_GPUS_GUARANTEED)
    return [
        {"record": series.TENANT_GPUS_BORROWED, "expr": f"clamp_min({allocated} - {guaranteed}, 0)"},
        {"record": series.TENANT_GPUS_LENT, "expr": f"clamp_min({guaranteed} - {allocated}, 0)"},
        {"record": series.TENANT_GPU_HOURS_1H, "expr": f"avg_over_time({allocated}[1h])"},
    ]


def slurm_alerts(config: PlatformConfig) -> list[dict[str, Any]]:
    namespace = config.cluster.namespace
    exporter = _matchers(namespace=namespace)
    scrape = f"{SCRAPE_UP}{_matchers(job=series.EXPORTER_APP, namespace=namespace)}"
    rules = [
        # absent: no target at all (no pod, or its Service gone) is down too.
        _alert("SlurmExporterDown", f"{scrape} == 0 or absent({scrape})", "5m"),
        _alert("SlurmExporterStale", f"time() - {series.COLLECTED_AT}{exporter} > {stale_after(config)}", "2m"),
        _alert("SlurmctldDown", f"{series.SLURMCTLD_UP}{exporter} == 0", "2m"),
    ]
    if config.slurm.accounting.enabled:
        rules.append(_alert("SlurmdbdDown", f"{series.SLURMDBD_UP}{exporter} == 0", "5m"))
    rules.append(_alert("SlurmNodeOut", f'{series.NODE_STATE}{{namespace="{namespace}", state=~"{series.NODE_OUT_STATES}"}} == 1', "10m"))
    return rules


def stale_after(config: PlatformConfig) -> int:
    """Seconds without a successful collector run after which the exporter's data is stale."""
    return STALE_INTERVALS * interval_seconds(config.monitoring.slurm_exporter.interval)


def gpu_alerts(config: PlatformConfig) -> list[dict[str, Any]]:
    """GpuUnavailable wherever there are GPU pools (kube-state-metrics sees their device plugin); GpuXidError only
    where dcgm-exporter is scraped: the GPU operator's ServiceMonitor this stack turns on (gpu_jobs.maps_gpu_jobs)."""
    if not config.gpu_pools:
        return []
    gpu = f'resource="{series.KSM_GPU_RESOURCE}"'
    missing = f"{series.KSM_NODE_CAPACITY}{{{gpu}}} - on (node) {series.KSM_NODE_ALLOCATABLE}{{{gpu}}} > 0"
    rules = [_alert("GpuUnavailable", missing, "10m")]
    if maps_gpu_jobs(config):
        hardware = " or ".join(f"{series.DCGM_XID} == {xid}" for xid in HARDWARE_XIDS)
        rules.insert(0, _alert("GpuXidError", f"({hardware}) and changes({series.DCGM_XID}[{XID_RECENT}]) > 0"))
    return rules


def tenant_alerts(config: PlatformConfig) -> list[dict[str, Any]]:
    if not config.tenants:
        return []
    allocated, guaranteed = this_stacks(config, series.TENANT_GPUS_ALLOCATED), this_stacks(config, series.TENANT_GPUS_GUARANTEED)
    below = f"{allocated} < {guaranteed} and {this_stacks(config, series.TENANT_GPUS_PENDING)} > 0"
    return [_alert("TenantBelowGuarantee", below, config.monitoring.alerts.guarantee_broken_for)]


def kueue_alerts(config: PlatformConfig) -> list[dict[str, Any]]:
    queues = [tenant.name for tenant in kueue_tenants(config)]
    if not queues:
        return []
    ours = f'cluster_queue=~"{_one_of(queues)}", {KUEUE_REPORTER}'
    gpus = f'{ours}, resource="{GPU}"'
    free = f"sum by (cluster_queue) ({series.KUEUE_NOMINAL_QUOTA}{{{gpus}}}) - sum by (cluster_queue) ({series.KUEUE_USAGE}{{{gpus}}}) > 0"
    pending = f"sum by (cluster_queue) ({series.KUEUE_PENDING_WORKLOADS}{{{ours}}}) > 0"
    return [_alert("KueuePendingWithFreeQuota", f"{pending} and on (cluster_queue) ({free})", "10m")]


def platform_alerts(config: PlatformConfig, plan: SlurmPlan) -> list[dict[str, Any]]:
    namespace = config.cluster.namespace
    rules = []
    if config.keeps_jail:
        claim = _matchers(namespace=namespace, persistentvolumeclaim=JAIL_CLAIM)
        full = f"100 * {KUBELET_VOLUME_USED}{claim} / {KUBELET_VOLUME_CAPACITY}{claim} > {config.monitoring.alerts.jail_full_percent}"
        rules.append(_alert("JailFilesystemFull", full, "15m"))
    if config.ldap.enabled:
        rules.append(
            _alert("LdapUnavailable", f"{series.KSM_STATEFULSET_READY}{_matchers(namespace=namespace, statefulset=LDAP_STATEFULSET)} < 1", "5m")
        )
    if installs_cert_manager(config.operators.cert_manager, plan.needs_cert_manager) or plan.needs_cert_manager:
        rules.append(_alert("CertificateExpiringSoon", certificate_expiry(config, plan.chart_namespaces), "1h"))
    return rules


def certificate_expiry(config: PlatformConfig, operator_namespaces: tuple[str, ...]) -> str:
    """Seconds left of each certificate in the platform's namespaces (the cluster's and its Slurm operator's charts',
    whose webhooks take cert-manager's certificates), under the expiry threshold. The Certificate's namespace is
    cert-manager's label `namespace`: exported_namespace when the scrape keeps the target's own (honorLabels false,
    the default), namespace itself otherwise."""
    ours = _one_of(sorted({config.cluster.namespace, *operator_namespaces}))
    left = f'{CERT_EXPIRY}{{exported_namespace=~"{ours}"}} or {CERT_EXPIRY}{{exported_namespace="", namespace=~"{ours}"}}'
    return f"({left}) - time() < {config.monitoring.alerts.certificate_expiry_days * 86400}"


def rule_groups(config: PlatformConfig, plan: SlurmPlan) -> dict[str, Any]:
    """The rule file promtool reads and the PrometheusRule's spec: groups named after the cluster, so two
    stacks' rules in one Prometheus stay apart; empty groups left out. `plan`: the operator's (slurm.resolve)."""
    prefix = f"slurm-platform.{config.cluster.name}"
    groups: list[tuple[str, list[dict[str, Any]]]] = [
        ("tenants", [*tenant_records(config), *derived_records(config)] if config.tenants else []),
        ("tenant-alerts", tenant_alerts(config)),
        ("slurm", slurm_alerts(config)),
        ("gpus", gpu_alerts(config)),
        ("kueue", kueue_alerts(config)),
        ("platform", platform_alerts(config, plan)),
    ]
    return {"groups": [{"name": f"{prefix}.{name}", "rules": rules} for name, rules in groups if rules]}


def render(config: PlatformConfig, plan: SlurmPlan) -> list[dict[str, Any]]:
    """The PrometheusRule, in the cluster's namespace with the labels the Prometheus selects rules by; none with monitoring off."""
    if not config.monitoring.enabled:
        return []
    return [
        {
            "apiVersion": series.API_VERSION,
            "kind": "PrometheusRule",
            "metadata": {
                "name": f"{config.cluster.name}-slurm-platform",
                "namespace": config.cluster.namespace,
                "labels": {**series.LABELS, **config.monitoring.prometheus.selector_labels},
            },
            "spec": rule_groups(config, plan),
        }
    ]

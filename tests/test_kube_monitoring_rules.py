"""The recording rules and alerts (components/monitoring/rules.py) as Prometheus reads and evaluates them:
promtool v0.316.0 (scripts/prometheus-local.sh, built from Go modules like the kube tier's other tools)
checks every example stack's rules, and runs `promtool test rules` on input series written here for
prod-hoalac's tenants: llm borrowing, vision lending (and borrowing through Kueue), speech below its
guarantee with jobs waiting, beside a second stack of the same tenants in the same Prometheus; and every other
alert on an input that fires it, not before its `for`, and not on the input that fooled the old rules.
The rule file is the one the PrometheusRule carries; the test file is generated from the rules' names
and annotations (components/monitoring/rules.py ALERTS), never a copy of the expressions."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.config import PlatformConfig
from components.monitoring import rules, series
from components.slurm import resolve
from tests.harness import example_stacks, monitored, prometheus_bin

STACK = "prod-hoalac"  # llm 16 GPUs, vision 8 (and 8 through Kueue), speech 6; LDAP, the jail, cert-manager
OTHER = "other-stack"  # the same config as another cluster (name and namespace) recording into the same Prometheus
MINUTES = 70  # how long every input series lasts: past the 1h of GPU-hours and the certificates' `for`


@pytest.fixture(scope="module")
def promtool() -> Path:
    return prometheus_bin() / "promtool"


def run(promtool: Path, *args: str, cwd: Path) -> str:
    result = subprocess.run([str(promtool), *args], capture_output=True, text=True, cwd=cwd, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def selector(name: str, labels: dict[str, str]) -> str:
    return name + "{" + ", ".join(f'{key}="{value}"' for key, value in labels.items()) + "}"


def expand(template: str, labels: dict[str, str], value: str) -> str:
    """An annotation as Prometheus renders it: the labels', and the value as the test says Prometheus prints it."""
    text = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m.group(1), ""), template)
    return re.sub(r"\{\{ \$value( \| \w+)? \}\}", value, text)


def firing(alert: str, labels: dict[str, str], value: str = "") -> dict[str, Any]:
    spec = rules.ALERTS[alert]
    return {
        "exp_labels": {**labels, "severity": spec.severity},
        "exp_annotations": {
            "summary": expand(spec.summary, labels, value),
            "description": expand(spec.detail, labels, value),
            "runbook_url": f"{rules.RUNBOOK}#{spec.anchor}",
        },
    }


@dataclass
class Case:
    """One alert's input, and when it must (and must not yet) fire."""

    alert: str
    inputs: list[tuple[str, dict[str, str], str]]
    fires: list[dict[str, Any]]
    before: int  # minutes: not firing yet
    after: int  # minutes: firing
    cleared: list[int] = field(default_factory=list)  # minutes: no longer firing

    def promtool_group(self) -> dict[str, Any]:
        checks: list[dict[str, Any]] = [{"eval_time": f"{self.before}m", "alertname": self.alert, "exp_alerts": []}]
        checks.append({"eval_time": f"{self.after}m", "alertname": self.alert, "exp_alerts": self.fires})
        checks += [{"eval_time": f"{minute}m", "alertname": self.alert, "exp_alerts": []} for minute in self.cleared]
        return {
            "name": self.alert,
            "interval": "1m",
            "input_series": [{"series": selector(name, labels), "values": values} for name, labels, values in self.inputs],
            "alert_rule_test": checks,
        }


def steady(value: float) -> str:
    return f"{value:g}x{MINUTES}"


def test_promtool_accepts_every_example_stacks_rules(promtool, tmp_path):
    checked = 0
    for stack in example_stacks():
        path = tmp_path / f"{stack}.yaml"
        config = monitored(stack)
        path.write_text(yaml.safe_dump(rules.rule_groups(config, resolve(config))))
        output = run(promtool, "check", "rules", path.name, cwd=tmp_path)
        assert "SUCCESS" in output, (stack, output)
        checked += 1
    assert checked >= 5


def other_stack(config: PlatformConfig) -> PlatformConfig:
    return config.model_copy(update={"cluster": config.cluster.model_copy(update={"name": OTHER, "namespace": OTHER})})


def tenant_cases(config: PlatformConfig) -> dict[str, Any]:
    """llm borrows (16 guaranteed, 16 + 4 oppo running), vision lends on Slurm (2 of 8) and borrows on Kueue
    (10 of 8), speech holds 2 of 6 while its jobs wait for 4 GPUs for 14 minutes. Jobs that wait for something
    else than GPUs (a dependency, a hold) and Kueue's inadmissible workloads are no demand. The other stack's
    llm holds 100 GPUs of its own exporter: recorded under its cluster label, never ours."""
    namespace = config.cluster.namespace
    cluster = config.cluster.name
    guaranteed = {t.name: t.guaranteed_gpus for t in config.tenants}
    assert guaranteed == {"llm": 16, "vision": 8, "speech": 6}, "the scenario below is written for prod-hoalac's tenants"
    assert config.monitoring.alerts.guarantee_broken_for == "10m"

    def slurm(name: str, account: str, gpus: str) -> tuple[str, dict[str, str], str]:
        return (name, {"namespace": namespace, "account": account, "partition": "h100"}, gpus)

    queue = {"cohort": config.cluster.name, "cluster_queue": "vision", "flavor": f"{config.cluster.name}-h100", "resource": "nvidia.com/gpu"}
    inputs = [
        slurm(series.ACCOUNT_GPUS_ALLOCATED, "llm", steady(16)),
        slurm(series.ACCOUNT_GPUS_ALLOCATED, "llm-oppo", steady(4)),
        slurm(series.ACCOUNT_GPUS_ALLOCATED, "vision", steady(2)),
        slurm(series.ACCOUNT_GPUS_ALLOCATED, "speech", steady(2)),
        # speech's guaranteed jobs wait for 4 GPUs, then get them elsewhere or are cancelled; its oppo jobs do not count.
        (series.ACCOUNT_GPUS_PENDING, {"namespace": namespace, "account": "speech", "partition": "h100", "reason": "Resources"}, f"4x14 0x{MINUTES}"),
        (series.ACCOUNT_GPUS_PENDING, {"namespace": namespace, "account": "speech-oppo", "partition": "h100", "reason": "Resources"}, steady(8)),
        # vision lends 6 GPUs while its jobs wait for another job, a start time, a hold or its own QOS limit: no demand.
        *(
            (series.ACCOUNT_GPUS_PENDING, {"namespace": namespace, "account": "vision", "partition": "h100", "reason": reason}, steady(4))
            for reason in ("Dependency", "BeginTime", "JobHeldUser", "QOSGrpGRES")
        ),
        # Another stack's exporter in the same Prometheus: its rules record it under its cluster label.
        (series.ACCOUNT_GPUS_ALLOCATED, {"namespace": OTHER, "account": "llm", "partition": "h100"}, steady(100)),
        (series.KUEUE_USAGE, {**queue, "replica_role": "leader"}, steady(10)),
        # A follower replica reports the same usage: counted once.
        (series.KUEUE_USAGE, {**queue, "replica_role": "follower"}, steady(10)),
        # Kueue's pending GPUs are the inadmissible workloads' only: no demand.
        (series.KUEUE_PENDING_RESOURCES, {"cluster_queue": "vision", "resource": "nvidia.com/gpu", "replica_role": "leader"}, steady(4)),
        (series.KUEUE_PENDING_WORKLOADS, {"cluster_queue": "vision", "status": "inadmissible", "replica_role": "leader"}, steady(1)),
        (series.KUEUE_PENDING_WORKLOADS, {"cluster_queue": "vision", "status": "active", "replica_role": "leader"}, steady(0)),
    ]
    expected = {
        ("llm", "slurm"): {"guaranteed": 16, "allocated": 20, "borrowed": 4, "lent": 0, "pending": 0},
        ("vision", "slurm"): {"guaranteed": 8, "allocated": 2, "borrowed": 0, "lent": 6, "pending": 0},
        ("speech", "slurm"): {"guaranteed": 6, "allocated": 2, "borrowed": 0, "lent": 4, "pending": 4},
        ("vision", "kueue"): {"guaranteed": 8, "allocated": 10, "borrowed": 2, "lent": 0, "pending": 0},
    }
    names = {
        "guaranteed": series.TENANT_GPUS_GUARANTEED,
        "allocated": series.TENANT_GPUS_ALLOCATED,
        "borrowed": series.TENANT_GPUS_BORROWED,
        "lent": series.TENANT_GPUS_LENT,
        "pending": series.TENANT_GPUS_PENDING,
    }
    exprs = []
    for what, name in names.items():
        samples = [
            {"labels": selector(name, {"cluster": cluster, "scheduler": scheduler, "tenant": tenant}), "value": values[what]}
            for (tenant, scheduler), values in expected.items()
        ]
        exprs.append({"expr": f'{name}{{cluster="{cluster}"}}', "eval_time": "5m", "exp_samples": samples})
    # GPU-hours of the last hour: allocated is steady, so the average is allocated, at 1h as at 5m.
    hours = [
        {"labels": selector(series.TENANT_GPU_HOURS_1H, {"cluster": cluster, "scheduler": scheduler, "tenant": tenant}), "value": values["allocated"]}
        for (tenant, scheduler), values in expected.items()
    ]
    exprs.append({"expr": f'{series.TENANT_GPU_HOURS_1H}{{cluster="{cluster}"}}', "eval_time": "60m", "exp_samples": hours})
    # The other stack's llm, of the same name: its 100 GPUs, apart from ours.
    theirs = {"cluster": OTHER, "scheduler": "slurm", "tenant": "llm"}
    exprs.append(
        {
            "expr": selector(series.TENANT_GPUS_ALLOCATED, theirs),
            "eval_time": "5m",
            "exp_samples": [{"labels": selector(series.TENANT_GPUS_ALLOCATED, theirs), "value": 100}],
        }
    )
    exprs.append(
        {
            "expr": selector(series.TENANT_GPUS_BORROWED, theirs),
            "eval_time": "5m",
            "exp_samples": [{"labels": selector(series.TENANT_GPUS_BORROWED, theirs), "value": 84}],
        }
    )
    speech = firing("TenantBelowGuarantee", {"cluster": cluster, "scheduler": "slurm", "tenant": "speech"})
    alerts = [
        {"eval_time": "9m", "alertname": "TenantBelowGuarantee", "exp_alerts": []},
        {"eval_time": "11m", "alertname": "TenantBelowGuarantee", "exp_alerts": [speech]},
        {"eval_time": "16m", "alertname": "TenantBelowGuarantee", "exp_alerts": []},
    ]
    return {
        "name": "tenants",
        "interval": "1m",
        "input_series": [{"series": selector(name, labels), "values": values} for name, labels, values in inputs],
        "promql_expr_test": exprs,
        "alert_rule_test": alerts,
    }


def alert_cases(config: PlatformConfig) -> list[Case]:
    namespace = config.cluster.namespace
    exporter = {"namespace": namespace, "job": series.EXPORTER_APP}
    target = {**exporter, "instance": "10.0.0.7:9100"}
    gpu = {"gpu": "3", "UUID": "GPU-5f1e", "Hostname": "h100-node-2"}
    node_gpus = {"node": "h100-node-2", "resource": series.KSM_GPU_RESOURCE, "unit": "integer"}
    vision = {"cluster_queue": "vision", "replica_role": "leader"}
    gpus = {**vision, "cohort": config.cluster.name, "flavor": f"{config.cluster.name}-h100", "resource": "nvidia.com/gpu"}
    claim = {"namespace": namespace, "persistentvolumeclaim": "jail-pvc"}
    ldap = {"namespace": namespace, "statefulset": "ldap"}
    certificate = {"namespace": "cert-manager", "exported_namespace": config.operators.soperator.namespace, "name": "soperator-webhook"}
    drained = {"namespace": namespace, "node": "worker-1", "state": "drained", "reason": "xid79 on GPU 3"}
    return [
        Case("SlurmExporterDown", [(rules.SCRAPE_UP, target, f"1x2 0x{MINUTES}")], [firing("SlurmExporterDown", target)], 7, 8, []),
        Case(
            "SlurmExporterStale",
            # The collector succeeds every minute up to 5m, then fails: stale past 4 intervals of 30s, for 2m.
            [(series.COLLECTED_AT, exporter, f"0+60x5 300x{MINUTES}")],
            [firing("SlurmExporterStale", exporter, "5m 0s")],
            8,
            10,
        ),
        Case("SlurmctldDown", [(series.SLURMCTLD_UP, exporter, f"1 0x{MINUTES}")], [firing("SlurmctldDown", exporter)], 2, 3),
        Case("SlurmdbdDown", [(series.SLURMDBD_UP, exporter, f"0x20 1x{MINUTES}")], [firing("SlurmdbdDown", exporter)], 4, 6, [22]),
        Case(
            "SlurmNodeOut",
            [
                (series.NODE_STATE, drained, steady(1)),
                (series.NODE_STATE, {**drained, "node": "worker-2", "state": "idle", "reason": ""}, steady(1)),
            ],
            [firing("SlurmNodeOut", drained)],
            9,
            11,
        ),
        Case(
            "GpuXidError",
            [
                # A hardware XID now: news for 10 minutes, then DCGM's value is only the last XID it saw.
                (series.DCGM_XID, gpu, f"0 48x{MINUTES}"),
                # An old XID 48, held by DCGM as the value since before: no alert.
                (series.DCGM_XID, {**gpu, "gpu": "4"}, steady(48)),
                # An application's XID (13) now: no alert.
                (series.DCGM_XID, {**gpu, "gpu": "5"}, f"0 13x{MINUTES}"),
            ],
            [firing("GpuXidError", gpu, "48")],
            0,
            1,
            [12, 60],
        ),
        Case(
            "GpuUnavailable",
            [
                # One of node-2's 8 GPUs leaves the device plugin's allocatable at 2m; node-3 keeps all of its.
                (series.KSM_NODE_CAPACITY, node_gpus, steady(8)),
                (series.KSM_NODE_ALLOCATABLE, node_gpus, f"8x2 7x{MINUTES}"),
                (series.KSM_NODE_CAPACITY, {**node_gpus, "node": "h100-node-3"}, steady(8)),
                (series.KSM_NODE_ALLOCATABLE, {**node_gpus, "node": "h100-node-3"}, steady(8)),
            ],
            [firing("GpuUnavailable", {"node": "h100-node-2"}, "1")],
            11,
            13,
        ),
        Case(
            "KueuePendingWithFreeQuota",
            [
                (series.KUEUE_PENDING_WORKLOADS, {**vision, "status": "inadmissible"}, steady(1)),
                (series.KUEUE_NOMINAL_QUOTA, gpus, steady(8)),
                (series.KUEUE_USAGE, gpus, f"4x20 8x{MINUTES}"),
            ],
            [firing("KueuePendingWithFreeQuota", {"cluster_queue": "vision"})],
            9,
            11,
            [25],
        ),
        Case(
            "JailFilesystemFull",
            [(rules.KUBELET_VOLUME_USED, claim, steady(95)), (rules.KUBELET_VOLUME_CAPACITY, claim, steady(100))],
            [firing("JailFilesystemFull", claim, "95")],
            14,
            16,
        ),
        Case("LdapUnavailable", [(series.KSM_STATEFULSET_READY, ldap, f"1x3 0x{MINUTES}")], [firing("LdapUnavailable", ldap)], 7, 10),
        Case(
            "CertificateExpiringSoon",
            # Five days after the test's epoch: 4d 22h 59m left at 61m, within the default 14 days.
            [
                (rules.CERT_EXPIRY, certificate, steady(5 * 86400)),
                (rules.CERT_EXPIRY, {**certificate, "exported_namespace": "someone-else"}, steady(0)),
            ],
            [firing("CertificateExpiringSoon", certificate, "4d 22h 59m 0s")],
            59,
            61,
        ),
    ]


def test_promtool_evaluates_the_tenants_rules_and_every_alert_on_its_input(promtool, tmp_path):
    config = monitored(STACK)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules.rule_groups(config, resolve(config))))
    # The other stack's tenant rules only: its Slurm and platform alerts would fire on this test's inputs of ours.
    other = other_stack(config)
    theirs = [group for group in rules.rule_groups(other, resolve(other))["groups"] if group["name"].endswith(("tenants", "tenant-alerts"))]
    assert len(theirs) == 2
    (tmp_path / "theirs.yaml").write_text(yaml.safe_dump({"groups": theirs}))
    cases = alert_cases(config)
    assert {case.alert for case in cases} | {"TenantBelowGuarantee"} == set(rules.ALERTS), "an alert without a promtool case"
    absent_exporter = Case(
        "SlurmExporterDown",
        [],
        [firing("SlurmExporterDown", {"job": series.EXPORTER_APP, "namespace": config.cluster.namespace})],
        4,
        6,
    )
    groups = [tenant_cases(config), *(case.promtool_group() for case in cases), {**absent_exporter.promtool_group(), "name": "no exporter at all"}]
    tests = {"rule_files": ["rules.yaml", "theirs.yaml"], "evaluation_interval": "1m", "tests": groups}
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests, sort_keys=False))
    output = run(promtool, "test", "rules", "tests.yaml", cwd=tmp_path)
    assert "SUCCESS" in output, output

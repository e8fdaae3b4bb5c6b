"""The usage report (components/monitoring/usage.py, report.py, tools/report.py): sacct's and Kueue's records
clamped to the period, per tenant against the guarantee the config gives, and the CronJob that reports weekly."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from components import kueue
from components.config import CLUSTER_NAME_MAX, parse_config
from components.monitoring import report, usage
from components.monitoring.usage import UTC, Guarantee, Run
from components.slurm import operator_module, resolve
from components.slurm.client import SCRIPT_DIR, auth_socket_dir
from components.slurm.common import KEY_DIR
from tests.contracts import manifest_errors
from tests.harness import stack_config
from tools import report as report_tool

START = datetime(2026, 11, 2, tzinfo=UTC)
END = datetime(2026, 11, 9, tzinfo=UTC)
NOW = datetime(2026, 11, 12, 8, 0, tzinfo=UTC)
# sacct -a -X -P -n --format=JobIDRaw,Account,Start,End,AllocTRES under TZ=UTC, as 22.05 and 24.11 print it.
SACCT = """\
101|default|2026-11-01T22:00:00|2026-11-02T02:00:00|billing=2,cpu=2,gres/gpu=2,mem=2G,node=1
102|default|2026-11-08T23:00:00|2026-11-09T01:30:00|billing=8,cpu=8,gres/gpu:h100=4,gres/gpu=4,mem=64G,node=1
103|default-oppo|2026-11-03T10:00:00|2026-11-03T10:00:30|billing=1,cpu=1,gres/gpu=1,mem=1G,node=1
104|vc1|2026-11-04T00:00:00|Unknown|billing=1,cpu=1,gres/gpu=1,mem=1G,node=1
105|vc1|Unknown|Unknown|
106|vc1|None|2026-11-05T00:00:00|
107|vc1|2026-11-05T00:00:00|2026-11-05T01:00:00|billing=4,cpu=4,mem=4G,node=1
108|root|2026-11-05T00:00:00|2026-11-05T01:00:00|billing=1,cpu=1,gres/gpu=8,mem=1G,node=1
109|vc1|2026-10-01T00:00:00|2026-10-02T00:00:00|billing=1,cpu=1,gres/gpu=1,mem=1G,node=1
"""
DEV_LAB_GUARANTEES = [Guarantee("default", "slurm", 1, ("default", "default-oppo")), Guarantee("vc1", "slurm", 1, ("vc1", "vc1-oppo"))]
WEEK_HOURS = 7 * 24


def test_sacct_rows_count_the_part_of_each_job_inside_the_period_per_tenant():
    """101 started 2h before the period (2 GPUs: 4 GPU-h inside), 102 ends 1.5h after it (4 GPUs, 1h inside),
    103 is default's oppo account (30 s), 104 still runs (counted to the period's end), 105/106 never ran,
    107 held no GPU, 108 is no tenant's account, 109 ran a month before."""
    runs = usage.parse_sacct(SACCT, NOW)
    assert [run.source for run in runs] == ["default", "default", "default-oppo", "vc1", "root", "vc1"]
    assert runs[3] == Run("vc1", datetime(2026, 11, 4, tzinfo=UTC).timestamp(), NOW.timestamp(), 1)
    rows = {row.tenant: row for row in usage.report_rows(DEV_LAB_GUARANTEES, {"slurm": runs}, START, END)}
    assert rows["default"].used_gpu_hours == round(2 * 2 + 4 * 1 + 30 / 3600, 3)
    assert rows["vc1"].used_gpu_hours == 5 * 24
    assert rows["default"].guaranteed_gpu_hours == rows["vc1"].guaranteed_gpu_hours == WEEK_HOURS
    assert rows["vc1"].used_percent == round(100 * 120 / WEEK_HOURS, 1)
    # default held 4 GPUs for the period's last hour with 1 guaranteed, 2 for its first two hours: 3 + 2 borrowed.
    assert rows["default"].borrowed_gpu_hours == 5 and rows["vc1"].borrowed_gpu_hours == 0


def test_a_jobs_gpus_are_gres_gpu_else_its_typed_gpus():
    assert usage.tres_gpus("billing=8,cpu=8,gres/gpu:h100=4,gres/gpu=4,mem=64G,node=1") == 4
    assert usage.tres_gpus("cpu=8,gres/gpu:h100=4,gres/gpu:a100=2,node=2") == 6
    assert usage.tres_gpus("cpu=8,mem=1G,node=1") == 0 and usage.tres_gpus("") == 0


def test_borrowed_gpu_hours_are_the_use_above_the_guarantee_at_each_moment():
    hour = 3600.0
    runs = [Run("a", 0, 2 * hour, 2), Run("a", hour, 3 * hour, 1), Run("a", 5 * hour, 6 * hour, 4)]
    # 0-1h: 2 in use, 1-2h: 3, 2-3h: 1, 5-6h: 4; guaranteed 2: 0 + 1 + 0 + 2.
    assert usage.borrowed_seconds(runs, 2, 0, 10 * hour) == 3 * hour
    # The period cuts the last run in half.
    assert usage.borrowed_seconds(runs, 2, 0, 5.5 * hour) == 2 * hour


def workload(queue: str, gpus: str, admitted: str | None, finished: str | None = None, count: int = 1) -> dict:
    conditions = []
    if admitted:
        conditions.append({"type": "Admitted", "status": "True", "lastTransitionTime": admitted, "reason": "Admitted"})
    if finished:
        conditions.append({"type": "Finished", "status": "True", "lastTransitionTime": finished, "reason": "Succeeded"})
    status: dict = {"conditions": conditions}
    if admitted:
        assignment = {
            "name": "main",
            "flavors": {"nvidia.com/gpu": "fpt-hpc-h100"},
            "resourceUsage": {"cpu": "8", "nvidia.com/gpu": gpus},
            "count": count,
        }
        status["admission"] = {"clusterQueue": queue, "podSetAssignments": [assignment]}
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": f"job-{queue}", "namespace": queue}, "status": status}


WORKLOADS = {
    "items": [
        # Finished inside the period: 2 pods of 4 GPUs each (resourceUsage is the podset's total), 3 hours.
        workload("vision", "8", "2026-11-03T00:00:00Z", "2026-11-03T03:00:00Z", count=2),
        # Admitted before the period, still running: counted from the period's start to its end.
        workload("vision", "2", "2026-10-30T00:00:00Z"),
        # Pending (no admission), and an evicted one whose Admitted went False: nothing.
        workload("vision", "8", None),
        {
            **workload("vision", "8", None),
            "status": {"conditions": [{"type": "Admitted", "status": "False", "lastTransitionTime": "2026-11-04T00:00:00Z"}]},
        },
        # Another tenant's ClusterQueue.
        workload("llm", "8", "2026-11-03T00:00:00Z", "2026-11-03T01:00:00Z"),
    ]
}


def test_kueue_workloads_count_their_admitted_gpus_from_admission_until_finished_in_their_cluster_queue():
    runs = usage.parse_workloads(WORKLOADS, NOW)
    assert [(run.source, run.gpus) for run in runs] == [("vision", 8), ("vision", 2), ("llm", 8)]
    rows = usage.report_rows([Guarantee("vision", "kueue", 8, ("vision",))], {"kueue": runs}, START, END)
    assert rows[0].used_gpu_hours == 8 * 3 + 2 * WEEK_HOURS
    # 10 in use for three hours against 8 guaranteed.
    assert rows[0].borrowed_gpu_hours == 2 * 3


def hoalac():
    return parse_config(stack_config("prod-hoalac"))


def test_the_guarantees_are_the_tenants_slurm_cells_and_their_cluster_queues_nominal_gpus():
    config = hoalac()
    found = report.guarantees(config)
    slurm = {g.tenant: (g.gpus, g.sources) for g in found if g.scheduler == "slurm"}
    assert slurm == {t.name: (t.guaranteed_gpus, (t.name, t.oppo_account)) for t in config.tenants}
    assert slurm["llm"][0] == 16
    # Kueue's: what the tenant's ClusterQueue (named after it) holds as nvidia.com/gpu nominalQuota.
    queues = [r.manifest for r in kueue.render(config) if r.manifest["kind"] == "ClusterQueue"]
    nominal = {
        q["metadata"]["name"]: sum(
            int(r["nominalQuota"]) for f in q["spec"]["resourceGroups"][0]["flavors"] for r in f["resources"] if r["name"] == "nvidia.com/gpu"
        )
        for q in queues
    }
    assert {g.tenant: g.gpus for g in found if g.scheduler == "kueue"} == {name: gpus for name, gpus in nominal.items() if gpus} == {"vision": 8}
    assert [g.sources for g in found if g.scheduler == "kueue"] == [("vision",)]


def test_a_tenant_without_the_oppo_level_is_reported_on_its_own_account():
    document = copy.deepcopy(stack_config("prod-hoalac"))
    assert [t["priorities"] for t in document["tenants"] if t["name"] == "speech"] == [["test", "oppo"]]
    document["tenants"] = [{**t, "priorities": ["test"], "borrowingCap": None} if t["name"] == "speech" else t for t in document["tenants"]]
    speech = [g for g in report.guarantees(parse_config(document)) if g.tenant == "speech"]
    assert speech == [Guarantee("speech", "slurm", 6, ("speech",))]


def with_monitoring(stack: str, **monitoring):
    document = copy.deepcopy(stack_config(stack))
    document["monitoring"] = {"enabled": True, **monitoring}
    return parse_config(document)


def test_nothing_is_rendered_when_monitoring_is_off_or_there_are_no_tenants():
    lab = parse_config(stack_config("dev-lab"))
    assert report.render(lab, resolve(lab).accounting_client) == []
    no_tenants = copy.deepcopy(stack_config("dev"))
    no_tenants["monitoring"] = {"enabled": True}
    config = parse_config(no_tenants)
    assert not config.tenants and report.render(config, resolve(config).accounting_client) == []


@pytest.mark.parametrize("stack", ["dev-lab", "prod-hcm", "staging-hangzhou"])
def test_the_cronjob_runs_sacct_and_the_report_as_a_slurm_client_without_a_kubernetes_token(stack):
    config = with_monitoring(stack, reportSchedule="30 5 * * *")
    config_map, cron_job = report.render(config, resolve(config).accounting_client)
    for manifest in (config_map, cron_job):
        assert manifest["metadata"]["namespace"] == config.cluster.namespace and manifest_errors(manifest) == []
    spec = cron_job["spec"]
    assert spec["schedule"] == "30 5 * * *" and spec["concurrencyPolicy"] == "Forbid"
    pod = spec["jobTemplate"]["spec"]["template"]["spec"]
    client = operator_module(config).accounting_client(config)
    assert pod["automountServiceAccountToken"] is False and "serviceAccountName" not in pod
    assert pod["containers"][0]["image"] == client.image
    assert pod["containers"][0]["command"] == ["/bin/bash", f"{SCRIPT_DIR}/{report.SCRIPT}"]
    assert {"name": "script", "configMap": {"name": config_map["metadata"]["name"]}} in pod["volumes"]
    # The key only in the auth sidecar (munged or sackd), never in the root container that runs the report.
    (auth,) = pod["initContainers"]
    assert auth["restartPolicy"] == "Always" and auth["image"] == (client.munge_image or client.image)
    assert ("sackd -D" in auth["command"][-1]) == (client.auth == "auth/slurm")
    key_volumes = {v["name"] for v in pod["volumes"] if "secret" in v}
    assert key_volumes == {"auth-key"}
    mounting = {c["name"] for c in [auth, *pod["containers"]] for m in c["volumeMounts"] if m["name"] in key_volumes}
    assert mounting == {"auth"}
    assert {"name": "auth-socket", "mountPath": auth_socket_dir(client)} in pod["containers"][0]["volumeMounts"]
    script = config_map["data"][report.SCRIPT]
    sacct = " ".join(usage.sacct_command(config.cluster.name, '"$since"', '"$until"'))
    assert f"TZ=UTC SLURM_TIME_FORMAT=standard {sacct} > {report.SACCT_OUTPUT}" in script.splitlines()
    assert f"python3 {SCRIPT_DIR}/{report.USAGE} --guarantees {SCRIPT_DIR}/{report.GUARANTEES}" in script
    # The report's own code, as it is here; the guarantees as the config gives them.
    assert config_map["data"][report.USAGE] == Path(usage.__file__).read_text()
    assert usage.guarantees_from_json(config_map["data"][report.GUARANTEES]) == report.guarantees(config)
    assert f"AuthType={client.auth}" in config_map["data"]["slurm.conf"]
    assert f"until [ -S {auth_socket_dir(client)}/" in script and KEY_DIR not in script  # it signs through the sidecar's socket


def test_a_long_cluster_name_is_cut_to_fit_the_cronjobs_name():
    document = copy.deepcopy(stack_config("dev-lab"))
    document["cluster"] = {**document["cluster"], "name": "c" * CLUSTER_NAME_MAX}
    document["monitoring"] = {"enabled": True}
    config = parse_config(document)
    _, cron_job = report.render(config, resolve(config).accounting_client)
    assert cron_job["metadata"]["name"] == "c" * (52 - len("-usage-report")) + "-usage-report"
    assert report.name(with_monitoring("dev-lab")) == "lab-hpc-usage-report"


def test_the_shipped_usage_file_runs_alone_as_the_pod_runs_it(tmp_path):
    """The ConfigMap's usage.py with nothing of the checkout beside it (python3 -I: no site, no cwd)."""
    config = with_monitoring("dev-lab")
    data = report.config_map(config, resolve(config).accounting_client)["data"]
    for name in (report.USAGE, report.GUARANTEES):
        (tmp_path / name).write_text(data[name])
    (tmp_path / "sacct.txt").write_text(SACCT)
    run = [sys.executable, "-I", str(tmp_path / report.USAGE), "--guarantees", str(tmp_path / report.GUARANTEES), "--sacct-file"]
    done = subprocess.run(
        [*run, str(tmp_path / "sacct.txt"), "--from", "2026-11-02T00:00:00", "--to", "2026-11-09T00:00:00"],
        capture_output=True,
        text=True,
        cwd="/",
    )
    assert done.returncode == 0, done.stderr
    # The table for people, then the same rows as JSON.
    assert done.stdout.startswith(
        usage.table(usage.report_rows(DEV_LAB_GUARANTEES, {"slurm": usage.parse_sacct(SACCT, END)}, START, END), START, END)
    )
    rows = {row["tenant"]: row for row in json.loads(done.stdout[done.stdout.index("\n{") :])["rows"]}
    assert rows["default"]["used_gpu_hours"] == round(8 + 30 / 3600, 3) and rows["vc1"]["used_gpu_hours"] == 120


def test_make_report_reads_saved_outputs_and_reports_both_schedulers(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(Path(__file__).parent.parent)
    hoalac_sacct = SACCT.replace("|default|", "|llm|").replace("|default-oppo|", "|llm-oppo|").replace("|vc1|", "|vision|")
    (tmp_path / "sacct.txt").write_text(hoalac_sacct)
    (tmp_path / "workloads.json").write_text(json.dumps(WORKLOADS))
    files = ["--sacct-file", str(tmp_path / "sacct.txt"), "--workloads-file", str(tmp_path / "workloads.json")]
    assert report_tool.main(["--stack", "prod-hoalac", "--from", "2026-11-02", "--to", "2026-11-09", *files, "--json"]) == 0
    rows = {(row["tenant"], row["scheduler"]): row for row in json.loads(capsys.readouterr().out)["rows"]}
    assert set(rows) == {("llm", "slurm"), ("vision", "slurm"), ("vision", "kueue"), ("speech", "slurm")}
    assert rows[("llm", "slurm")]["guaranteed_gpu_hours"] == 16 * WEEK_HOURS
    assert rows[("vision", "slurm")]["used_gpu_hours"] == 120 and rows[("vision", "kueue")]["used_gpu_hours"] == 24 + 2 * WEEK_HOURS
    assert rows[("speech", "slurm")]["used_gpu_hours"] == 0
    assert report_tool.main(["--stack", "prod-hoalac", "--from", "2026-11-02", "--to", "2026-11-09", *files]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0] == "GPU-hours from 2026-11-02T00:00:00+00:00 to 2026-11-09T00:00:00+00:00"
    assert table[1].split() == ["tenant", "scheduler", "guaranteed", "GPU-h", "used", "GPU-h", "used", "%", "borrowed", "GPU-h"]
    assert table[2].split() == ["llm", "slurm", f"{16 * WEEK_HOURS:.2f}", "8.01", "0.3", "0.00"]


def test_make_report_refuses_a_period_that_ends_before_it_starts(capsys, monkeypatch):
    monkeypatch.chdir(Path(__file__).parent.parent)
    with pytest.raises(SystemExit):
        report_tool.main(["--stack", "prod-hoalac", "--from", "2026-11-09", "--to", "2026-11-02"])
    assert "is not before --to" in capsys.readouterr().err


def test_when_is_a_utc_date_or_a_time_and_a_period_in_the_future_ends_now(tmp_path, capsys, monkeypatch):
    assert report_tool.parse_when("2026-11-02") == datetime(2026, 11, 2, tzinfo=UTC)
    assert report_tool.parse_when("2026-11-02T12:00:00+07:00") == datetime(2026, 11, 2, 5, tzinfo=UTC)
    monkeypatch.chdir(Path(__file__).parent.parent)
    (tmp_path / "sacct.txt").write_text("")
    before = datetime.now(UTC).replace(microsecond=0)
    assert report_tool.main(["--stack", "dev-lab", "--to", "2999-01-01", "--sacct-file", str(tmp_path / "sacct.txt"), "--json"]) == 0
    period = json.loads(capsys.readouterr().out)
    end = datetime.fromisoformat(period["to"])
    assert before <= end <= datetime.now(UTC) and datetime.fromisoformat(period["from"]) == end - timedelta(days=7)


@pytest.mark.parametrize(("stack", "role"), [("dev-lab", "controller"), ("prod-hcm", "login"), ("staging-hangzhou", "controller")])
def test_sacct_runs_in_the_pods_of_the_operators_client_image(stack, role):
    config = parse_config(stack_config(stack))
    roles = operator_module(config).pod_roles(config)
    assert report_tool.client_pod_selector(config) == getattr(roles, role)["matchLabels"]


FAKE_KUBECTL = """#!/bin/sh
echo "$*" >> "$(dirname "$0")/calls"
case " $* " in
  *" get pods "*) echo pod/lab-hpc-controller-0 ;;
  *" exec "*) cat "$(dirname "$0")/sacct.txt" ;;
  *" get workloads"*) echo '{"items": []}' ;;
esac
"""


def test_make_report_runs_the_query_in_a_running_slurm_pod_of_the_stacks_context(tmp_path, capsys, monkeypatch):
    """No saved outputs: kubectl (here a stand-in that records its arguments) finds the pod and runs sacct in it."""
    kubectl = tmp_path / "kubectl"
    kubectl.write_text(FAKE_KUBECTL)
    kubectl.chmod(0o755)
    (tmp_path / "sacct.txt").write_text(SACCT)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    monkeypatch.chdir(Path(__file__).parent.parent)
    assert report_tool.main(["--stack", "dev-lab", "--from", "2026-11-02", "--to", "2026-11-09", "--json"]) == 0
    rows = {row["tenant"]: row["used_gpu_hours"] for row in json.loads(capsys.readouterr().out)["rows"]}
    assert rows == {"default": round(8 + 30 / 3600, 3), "vc1": 120}
    config = parse_config(stack_config("dev-lab"))
    selector = ",".join(f"{k}={v}" for k, v in sorted(report_tool.client_pod_selector(config).items()))
    sacct = usage.sacct_command("lab-hpc", "2026-11-02T00:00:00", "2026-11-09T00:00:00")
    assert (tmp_path / "calls").read_text().splitlines() == [
        f"--context lab get pods -n lab-hpc -l {selector} --field-selector=status.phase=Running -o name",
        f"--context lab exec -n lab-hpc pod/lab-hpc-controller-0 -- env TZ=UTC SLURM_TIME_FORMAT=standard {' '.join(sacct)}",
    ]


def test_make_report_says_what_it_could_not_reach(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no kubectl
    monkeypatch.chdir(Path(__file__).parent.parent)
    assert report_tool.main(["--stack", "dev-lab"]) == 1
    assert "kubectl is not on PATH; install it, or pass --sacct-file and --workloads-file" in capsys.readouterr().err

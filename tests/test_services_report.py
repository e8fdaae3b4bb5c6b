"""The usage report on real Slurm (tests/services.py): jobs of two tenants run, then the report's own sacct
query (components/monitoring/usage.py) counts each tenant's GPU-seconds exactly as long as its jobs held their
GPUs, clamped where the period cuts a job; and the CronJob's script, run as its pod runs it (the generation's
python3, signing through its auth sidecar's munged or sackd on the key), reports them. With each client auth
(ACK's munged in the image, soperator's munge image, Slinky's sackd) on Slurm 24.11 and 26.05; on 22.05, ACK's
oldest, the same query on a job's times."""

from __future__ import annotations

import copy
import functools
import json
import shlex
import subprocess
from datetime import datetime, timedelta
from typing import Any

import pytest

from components.config import parse_config
from components.monitoring import report, usage
from components.monitoring.usage import UTC
from components.slurm import operator_module, resolve
from tests.services import SLURM_KEY, OperatorLab, as_operator, for_this_machine, operator_lab, run_pod_script, tenants_job, wait_for
from tests.test_services_slurm import LAB_CONFIG, LAB_NODES, USERS

# Each client auth (ACK's munged in the image, soperator's munged sidecar, Slinky's sackd) on the generations
# their labs run GPU jobs on.
LABS = [
    pytest.param(("ack", "24.11"), id="ack-24.11"),
    pytest.param(("soperator 4.1.7", "24.11"), id="soperator 4.1.7-24.11"),
    pytest.param(("slinky", "26.05"), id="slinky-26.05"),
]
# Each tenant's jobs: (user, account, seconds asleep), run one after another on gpu-c's one GPU, where default
# holds its cell and vc1 borrows through its oppo account.
JOBS = [("alice", "default", 2), ("carol", "vc1-oppo", 3), ("bob", "default", 2)]


@pytest.fixture(scope="module", params=LABS)
def lab(request):
    operator, release = request.param
    document = copy.deepcopy(LAB_CONFIG)
    document["monitoring"] = {"enabled": True}
    config = parse_config(as_operator(document, operator, release))
    with operator_lab(operator, config, LAB_NODES, USERS, release) as started:
        applied = tenants_job(started, config, "tenants")
        assert applied.returncode == 0, applied.stdout[-2000:] + applied.stderr[-2000:]
        yield started


def sacct_fields(lab: OperatorLab, job: str, fields: str) -> list[str]:
    """A job's fields as root's sacct prints them, times in UTC as the report asks for them."""
    env = [f"{key}={value}" for key, value in usage.SACCT_ENV.items()]
    return lab.run("env", *env, "sacct", "-n", "-X", "-P", "-j", job, "-o", fields).stdout.strip().split("|")


def completed(lab: OperatorLab, job: str) -> bool:
    return sacct_fields(lab, job, "State")[0] == "COMPLETED"


@pytest.fixture(scope="module")
def ran(lab) -> dict[str, Any]:
    """JOBS, each done and recorded in slurmdbd: its id, account and ElapsedRaw, and the period around them."""
    before = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=1)
    done = []
    for user, account, seconds in JOBS:
        job = lab.sbatch(user, "-A", account, "-p", "gpu-c", "--gres=gpu:1", "--wrap", f"sleep {seconds}").stdout.strip()
        wait_for(functools.partial(completed, lab, job), f"job {job} completed in slurmdbd", 60)
        elapsed, tres = sacct_fields(lab, job, "ElapsedRaw,AllocTRES")
        done.append({"job": job, "account": account, "seconds": seconds, "elapsed": int(elapsed), "tres": tres, "gpus": usage.tres_gpus(tres)})
    # Every job's slurmstepd gone too (one still reporting to slurmctld when the lab stops would hold its cgroup).
    wait_for(lambda: not lab.run("squeue", "-h").stdout.strip(), "an empty queue", 30)
    after = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)
    return {"jobs": done, "start": before, "end": after}


def report_query(lab: OperatorLab, start: datetime, end: datetime) -> str:
    """The report's sacct command, as tools/report.py runs it in a Slurm pod (root)."""
    command = usage.sacct_command(lab.config.cluster.name, usage.sacct_time(start), usage.sacct_time(end))
    return lab.run("env", *(f"{key}={value}" for key, value in usage.SACCT_ENV.items()), *command).stdout


def test_the_reports_sacct_query_gives_each_tenant_the_gpu_seconds_its_jobs_ran(lab, ran):
    for job in ran["jobs"]:
        # Each job held one GPU for as long as it slept, to Slurm's second.
        assert job["gpus"] == 1 and job["seconds"] <= job["elapsed"] <= job["seconds"] + 1, str(job)
    start, end = ran["start"], ran["end"]
    runs = usage.parse_sacct(report_query(lab, start, end), end)
    assert sorted(run.source for run in runs) == sorted(account for _, account, _ in JOBS)
    guarantees = report.guarantees(lab.config)
    assert [g.tenant for g in guarantees] == ["default", "vc1"]
    for guarantee in guarantees:
        ran_seconds = sum(job["elapsed"] * job["gpus"] for job in ran["jobs"] if job["account"] in guarantee.sources)
        own = [run for run in runs if run.source in guarantee.sources]
        assert ran_seconds > 0 and usage.gpu_seconds(own, start.timestamp(), end.timestamp()) == ran_seconds
    rows = usage.report_rows(guarantees, {"slurm": runs}, start, end)
    assert [(row.tenant, row.used_gpu_hours) for row in rows] == [
        ("default", round((ran["jobs"][0]["elapsed"] + ran["jobs"][2]["elapsed"]) / 3600, 3)),
        ("vc1", round(ran["jobs"][1]["elapsed"] / 3600, 3)),
    ]


def test_a_period_that_cuts_a_job_counts_only_its_part_inside(lab, ran):
    """From one second into carol's job to one second before bob's ends: alice's job is outside, carol's loses a second."""
    carol, bob = ran["jobs"][1], ran["jobs"][2]
    carol_start, bob_end = (
        datetime.strptime(sacct_fields(lab, job["job"], field)[0], usage.SACCT_TIME).replace(tzinfo=UTC)
        for job, field in ((carol, "Start"), (bob, "End"))
    )
    start, end = carol_start + timedelta(seconds=1), bob_end - timedelta(seconds=1)
    runs = usage.parse_sacct(report_query(lab, start, end), end)
    used = {
        g.tenant: usage.gpu_seconds([r for r in runs if r.source in g.sources], start.timestamp(), end.timestamp())
        for g in report.guarantees(lab.config)
    }
    assert used == {"default": bob["elapsed"] - 1, "vc1": carol["elapsed"] - 1}


def report_pod(lab: OperatorLab) -> subprocess.CompletedProcess:
    """The CronJob's pod on this machine: its auth sidecar's command (the only one given the key) beside the report
    container's, each with its own /etc/slurm; the ConfigMap's slurm.conf naming the lab's daemons. soperator's sidecar runs its
    own munge image, which the lab's root filesystem is not (munged as root there refuses munge's state directory):
    its report signs through the lab's munged, as tests/services.py's slurm_client_pod has soperator's pods do."""
    config = lab.config
    client = operator_module(config).accounting_client(config)
    pod = report.cron_job(config, resolve(config).accounting_client)["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (auth,) = pod["initContainers"]
    (container,) = pod["containers"]
    data = report.config_map(config, resolve(config).accounting_client)["data"]
    conf = for_this_machine(data["slurm.conf"], [client.slurmctld_host], ports={"AccountingStoragePort": lab.dbd_port})
    data = {
        **data,
        "slurm.conf": conf + f"SlurmctldPort={lab.ctld_port}\n",
        "pod.sh": f"exec {shlex.join(container['command'])}\n",
        "sidecar.sh": f"exec {shlex.join(auth['command'])}\n",
    }
    key = SLURM_KEY.encode() if client.auth == "auth/slurm" else (lab.root / "munge" / "munge.key").read_bytes()
    own_sidecar = client.munge_image is None
    return run_pod_script(
        lab, "report", data, [client.slurmdbd_host], key=key if own_sidecar else None, script="pod.sh", sidecar="sidecar.sh" if own_sidecar else None
    )


def test_the_cronjobs_script_run_as_its_pod_reports_both_tenants(lab, ran):
    """Its table for people, then the same rows as JSON (the period: the last seven days, to the second it ran)."""
    done = report_pod(lab)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lines = done.stdout.splitlines()
    table = lines[next(i for i, line in enumerate(lines) if line.startswith("GPU-hours from")) :]
    assert table[1].split()[:2] == ["tenant", "scheduler"] and [line.split()[0] for line in table[2:4]] == ["default", "vc1"]
    rows = json.loads("\n".join(lines[next(i for i, line in enumerate(lines) if line == "{") :]))["rows"]
    jobs = ran["jobs"]
    assert {row["tenant"]: row["used_gpu_hours"] for row in rows} == {
        "default": round((jobs[0]["elapsed"] + jobs[2]["elapsed"]) / 3600, 3),
        "vc1": round(jobs[1]["elapsed"] / 3600, 3),
    }
    assert [row["guaranteed_gpu_hours"] for row in rows] == [7 * 24, 7 * 24]  # one GPU each, the whole week


def test_the_reports_query_runs_on_slurm_22_05():
    """ACK's oldest Slurm: the same flags, fields and UTC times on 22.05's sacct and slurmdbd. Its lab runs soperator's
    slurm.conf, where 22.05 falls back to select/linear and accounts no GPU (AllocTRES cpu only): the job's own
    Start and End are what the report reads, to the second of its ElapsedRaw. Rendered for images of 22.05, as
    the lab runs it: partitions naming each tenant's account (22.05 allows no account by its parent)."""
    document = as_operator(copy.deepcopy(LAB_CONFIG), "soperator 4.1.7", "22.05")
    document["slurm"]["images"] = {**document["slurm"].get("images", {}), "tag": "4.1.7-slurm22.05.11"}
    config = parse_config(document)
    assert str(config.slurm_release) == "22.05"
    with operator_lab("soperator 4.1.7", config, LAB_NODES, USERS, "22.05") as lab:
        applied = tenants_job(lab, config, "tenants")
        assert applied.returncode == 0, applied.stdout[-2000:] + applied.stderr[-2000:]
        before = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=1)
        job = lab.sbatch("alice", "-A", "default", "-p", "gpu-c", "--wrap", "sleep 2").stdout.strip()
        wait_for(functools.partial(completed, lab, job), f"job {job} completed in slurmdbd", 60)
        wait_for(lambda: not lab.run("squeue", "-h").stdout.strip(), "an empty queue", 30)
        start, end, elapsed, tres = sacct_fields(lab, job, "Start,End,ElapsedRaw,AllocTRES")
        after = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)
        assert report_query(lab, before, after).splitlines() == [f"{job}|default|{start}|{end}|{tres}"]
        parsed = [usage.utc(datetime.strptime(text, usage.SACCT_TIME)).timestamp() for text in (start, end)]
        assert parsed[1] - parsed[0] == int(elapsed) >= 2
        assert before.timestamp() <= parsed[0] and parsed[1] <= after.timestamp()

"""Real Slurm (Debian's slurmctld, slurmd, slurmdbd, munged of each generation, the host's MariaDB) on
what the program renders (tests/services.py): each operator on the Slurm generations around the Slurm of
the images it deploys (`OPERATOR_GENERATIONS`): slurmctld and slurmd on its rendered text, the tenants
Job's script run as its pod runs it, and, on the newest of its generations, the lab's experiments
(docs/tenants.md "The lab's experiments") on real jobs."""

from __future__ import annotations

import copy
import functools
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from components import tenancy
from components.config import ConfigError, PlatformConfig, parse_config
from components.config.parse import parse_stack
from components.config.stacks import StackFile
from components.slurm import ack, slinky
from components.slurm.common import accounted_gpu_tres, gres_gpus, partitions_name_parents
from components.slurm.release import SlurmRelease, deployed_release
from tests.harness import body, stack_config, without_keys_unread_by
from tests.services import (
    CLUSTER_FILES,
    GENERATIONS,
    LAB_TASKS,
    OperatorLab,
    SlurmLab,
    as_operator,
    config_complaints,
    etc_digest,
    for_this_machine,
    free_port,
    gpu_device_nodes,
    lab_base,
    nvidia_devices,
    operator_lab,
    scontrol_fields,
    slinky_slurm_conf,
    tenants_job,
    wait_for,
)

USERS = ["alice", "bob", "carol", "dan"]
LAB_NODES = {"gpu-c-0": ("gpu-c", 1), "gpu-d-0": ("gpu-d", 1)}
# The dev-lab tenants with vc1's borrowing capped at one GPU (docs/tenants.md: borrowingCap).
LAB_CONFIG = {**stack_config("dev-lab")}
LAB_CONFIG["tenants"] = [LAB_CONFIG["tenants"][0], {**LAB_CONFIG["tenants"][1], "borrowingCap": 1}]


# Each operator's Slurm generations (tests/services.py GENERATIONS): those around the Slurm of the images it
# deploys; the last is where its experiments run.
OPERATOR_GENERATIONS = {
    "soperator 1.14.10": ("24.11",),
    "soperator 4.1.7": ("24.11", "26.05"),
    "slinky": ("26.05",),
    "ack": ("22.05", "24.11"),
}
# A stack of each operator, its images as the program pins them (ACK: slurm.ack.slurmRelease's default).
OPERATOR_STACKS = {"soperator 1.14.10": "prod-hanoi", "soperator 4.1.7": "dev-lab", "slinky": "prod-hcm", "ack": "staging-hangzhou"}


def labs(operator: str, releases: Iterable[str]) -> list[Any]:
    """The `lab` parameters of `operator`'s cluster on each of `releases`."""
    return [pytest.param((operator, release), id=f"{operator}-{release}") for release in releases]


def beside(releases: Iterable[str]) -> list[Any]:
    """The `lab` parameters of a test whose clusters run beside the lab's own: soperator 4.1.7's, on each of `releases`."""
    return labs("soperator 4.1.7", releases)


SOPERATOR4 = labs("soperator 4.1.7", OPERATOR_GENERATIONS["soperator 4.1.7"])
# Each operator that renders the tenants' Slurm lines (soperator 1.14.10 renders none): the configuration
# and Job checks on all of its generations, the experiments on its newest. But ACK on 22.05: that slurmd
# refuses `--conf "Port=..."` (fatal: option 'Port=' not allowed), so two of its dynamic nodes cannot share
# this machine's loopback; 22.05 runs ACK's slurm.conf with one worker (test_slurmctld_runs_acks_slurm_conf...).
ONE_NODE_ONLY = {("ack", "22.05")}
CONFIGURATIONS = [
    param for operator in CLUSTER_FILES for param in labs(operator, OPERATOR_GENERATIONS[operator]) if param.values[0] not in ONE_NODE_ONLY
]
EXPERIMENTS = [param for operator in CLUSTER_FILES for param in labs(operator, OPERATOR_GENERATIONS[operator][-1:])]


def operator_of(config: PlatformConfig) -> str:
    return f"soperator {config.operators.soperator.version}" if config.slurm_operator == "soperator" else config.slurm_operator


@pytest.mark.parametrize("operator", OPERATOR_STACKS)
def test_each_operators_slurm_runs_on_the_nearest_generation_at_or_above_it(operator):
    """Raising an image to a Slurm no generation reaches, or past the newest in the operator's list, fails here."""
    config = parse_config(stack_config(OPERATOR_STACKS[operator]))
    assert operator_of(config) == operator
    deployed = deployed_release(config)
    generations = [SlurmRelease.parse(release) for release in OPERATOR_GENERATIONS[operator]]
    assert set(map(str, generations)) <= set(GENERATIONS) and generations == sorted(generations)
    at_or_above = [release for release in map(SlurmRelease.parse, GENERATIONS) if release >= deployed]
    assert at_or_above, f"{operator} deploys Slurm {deployed}, newer than every generation ({', '.join(GENERATIONS)}): add one"
    assert at_or_above[0] in generations, f"{operator} deploys Slurm {deployed}: run it on {at_or_above[0]} (OPERATOR_GENERATIONS)"
    assert generations[-1] >= deployed


def test_every_operator_that_takes_tenants_has_a_lab_for_the_experiments():
    """An operator whose clusters carry tenants, with no lab cluster of its own, would never run the experiments."""
    document = copy.deepcopy(LAB_CONFIG)
    document["operators"] = {**document["operators"], "soperator": {"version": "1.14.10"}}
    with pytest.raises(ConfigError, match="soperator 1.14.10 cannot carry"):
        parse_config(document)
    assert set(CLUSTER_FILES) == set(OPERATOR_GENERATIONS) - {"soperator 1.14.10"}
    assert {param.values[0][0] for param in EXPERIMENTS} == set(CLUSTER_FILES)


def lab_config(lab: OperatorLab, document: dict[str, Any]) -> PlatformConfig:
    """A config document (soperator 4.1.7's) as the lab's operator deploys it, for its generation."""
    assert lab.release
    return parse_config(as_operator(document, lab.operator, lab.release))


def reconfigure(lab: OperatorLab, config) -> None:
    lab.reconfigure(config, LAB_NODES)


@pytest.fixture(scope="module")
def lab(request):
    """The lab (LAB_CONFIG's slurm.conf as the operator renders it) of the (operator, generation) a test is
    parametrized with; other clusters run beside it, on its munged and slurmdbd."""
    operator, release = request.param
    with operator_lab(operator, parse_config(as_operator(LAB_CONFIG, operator, release)), LAB_NODES, USERS, release) as started:
        yield started


@pytest.mark.parametrize("lab", SOPERATOR4, indirect=True)
def test_slurmctld_runs_soperator_4_custom_config_with_the_tenants_preemption(lab):
    log = lab.log("slurmctld")
    # The one repeated line is PreemptType (the operator's, then the tenants'), and the tenants' preempt/qos is the one that runs.
    # Matched on the message: 22.05 prefixes it with `slurmctld: `, 26.05 with a timestamp.
    repeated = "error: PreemptType 1 specified more than once, latest value used"
    complaints = config_complaints(log)
    assert lab.alive(lab.ctld) and complaints and all(repeated in line for line in complaints), complaints
    config = lab.run("scontrol", "show", "config").stdout
    assert "PreemptType             = preempt/qos" in config and "PreemptMode             = REQUEUE" in config


@pytest.mark.parametrize("lab", CONFIGURATIONS, indirect=True)
def test_the_tenants_job_applies_exactly_the_config_and_a_rerun_changes_nothing(lab):
    first = tenants_job(lab, lab.config, "first")
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    assoc = lab.sacctmgr("show", "assoc", "where", f"cluster={lab.config.cluster.name}", "format=Account,ParentName,User,GrpTRES,QOS,DefaultQOS")
    expected = ["root||||normal|", "root||root||normal|"]
    # The parents the partitions allow (every release here takes an account's ancestors): one per set of the
    # lab's GPU pools, each tenant's account under its pools' one, every oppo account under oppo_accounts.
    assert partitions_name_parents(lab.config)
    expected += [f"{parent}|root|||normal|" for parent in ("pools_gpu-c", "pools_gpu-c_gpu-d", "pools_gpu-d", "oppo_accounts")]
    # Each tenant's own researchers (dev-lab: alice and bob in default, carol and dan in vc1).
    members = {t["name"]: [u if isinstance(u, str) else u["name"] for u in t["users"]] for t in LAB_CONFIG["tenants"]}
    assert members == {"default": ["alice", "bob"], "vc1": ["carol", "dan"]}
    for tenant, pool, cap in (("default", "gpu-c", ""), ("vc1", "gpu-d", "gres/gpu=1")):
        expected += [f"{tenant}|pools_{pool}||gres/gpu=1|prod,test|test", *(f"{tenant}||{u}||prod,test|test" for u in members[tenant])]
        expected += [f"{tenant}-oppo|oppo_accounts||{cap}|oppo|oppo", *(f"{tenant}-oppo||{u}||oppo|oppo" for u in members[tenant])]
    assert sorted(assoc.split()) == sorted(expected), assoc
    # The partitions name those parents, no tenant's account (adding a tenant changes no slurm.conf).
    partitions = {
        f["PartitionName"]: f["AllowAccounts"] for f in map(scontrol_fields, lab.run("scontrol", "-o", "show", "partition").stdout.splitlines())
    }
    assert partitions == {"gpu-c": "pools_gpu-c,pools_gpu-c_gpu-d,oppo_accounts", "gpu-d": "pools_gpu-d,pools_gpu-c_gpu-d,oppo_accounts"}, partitions
    qos = lab.sacctmgr("show", "qos", "format=Name,Priority,Preempt,PreemptMode").split()
    assert sorted(qos) == sorted(["normal|0||cluster", "oppo|0||requeue", "test|10|oppo|cluster", "prod|100|oppo|cluster"])
    # Each tenant's whole-node cell is a reservation of its pool's node, open to it and every oppo account.
    reservations = lab.run("scontrol", "-o", "show", "reservation").stdout
    held = {f["ReservationName"]: (f["Nodes"], f["Accounts"], f["Flags"]) for f in map(scontrol_fields, reservations.splitlines())}
    assert held == {
        "cells.gpu-c.default": ("gpu-c-0", "default,oppo_accounts", "IGNORE_JOBS,REPLACE_DOWN,MAGNETIC"),
        "cells.gpu-d.vc1": ("gpu-d-0", "vc1,oppo_accounts", "IGNORE_JOBS,REPLACE_DOWN,MAGNETIC"),
    }, reservations
    transactions = lab.sacctmgr("list", "transactions")
    second = tenants_job(lab, lab.config, "second")
    assert second.returncode == 0, second.stderr[-2000:]
    assert lab.sacctmgr("list", "transactions") == transactions
    assert lab.run("scontrol", "-o", "show", "reservation").stdout == reservations and "retrying" not in second.stdout, second.stdout


def parents(lab) -> dict[str, str]:
    """Each account's parent in the lab cluster's tree, as slurmdbd holds it."""
    rows = lab.sacctmgr("show", "assoc", "where", f"cluster={lab.config.cluster.name}", "format=Account,ParentName,User")
    return {account: parent for account, parent, user in (row.split("|") for row in rows.split()) if not user}


@pytest.mark.parametrize("lab", SOPERATOR4[-1:], indirect=True)
def test_an_upgraded_clusters_accounts_move_under_the_parents_the_partitions_name(lab):
    """A stack deployed before partitions named parents (or rendered for Slurm before 24.11) holds every account
    under root; the next tenants Job moves each under its parent, with its users, and a rerun changes nothing. vc1's
    borrowingCap comes in the same run: vc1-oppo is moved and limited by one Job."""
    flat_document = as_operator(LAB_CONFIG, lab.operator, lab.release)
    flat_document["slurm"]["images"] = {**flat_document["slurm"].get("images", {}), "tag": "4.1.7-slurm24.05.8"}
    flat_document["tenants"] = [{key: value for key, value in t.items() if key != "borrowingCap"} for t in flat_document["tenants"]]
    flat = parse_config(flat_document)
    assert not partitions_name_parents(flat) and partitions_name_parents(lab.config)
    before = tenants_job(lab, flat, "flat")
    assert before.returncode == 0, before.stdout[-2000:] + before.stderr[-2000:]
    tenant_accounts = ["default", "default-oppo", "vc1", "vc1-oppo"]
    assert {account: parents(lab)[account] for account in tenant_accounts} == dict.fromkeys(tenant_accounts, "root")
    moved = tenants_job(lab, lab.config, "moved")
    assert moved.returncode == 0, moved.stdout[-2000:] + moved.stderr[-2000:]
    expected = {"default": "pools_gpu-c", "default-oppo": "oppo_accounts", "vc1": "pools_gpu-d", "vc1-oppo": "oppo_accounts"}
    assert {account: parents(lab)[account] for account in tenant_accounts} == expected
    cap = lab.sacctmgr("show", "assoc", "where", "account=vc1-oppo", f"cluster={lab.config.cluster.name}", "format=GrpTRES")
    assert cap.split() == ["gres/gpu=1"], cap
    users = lab.sacctmgr("show", "assoc", "where", "account=vc1", f"cluster={lab.config.cluster.name}", "format=User").split()
    assert sorted(users) == ["carol", "dan"]
    transactions = lab.sacctmgr("list", "transactions")
    again = tenants_job(lab, lab.config, "again")
    assert again.returncode == 0 and lab.sacctmgr("list", "transactions") == transactions, again.stderr[-2000:]
    # carol's guaranteed job runs on vc1's pool and is refused on default's, as before the move.
    refused = lab.sbatch("carol", "-A", "vc1", "-q", "prod", "-p", "gpu-c", "--wrap", "sleep 1", check=False)
    assert refused.returncode != 0 and "Invalid account or account/partition combination" in refused.stderr, refused.stderr
    assert lab.sbatch("carol", "-A", "vc1", "-q", "prod", "-p", "gpu-d", "--wrap", "sleep 1", check=False).returncode == 0
    cancel_all(lab)


@pytest.mark.parametrize("lab", SOPERATOR4[-1:], indirect=True)
def test_a_platform_and_a_tenant_stacks_jobs_each_keep_their_own_tenants(lab):
    """The lab's tenants split: `default` in the platform stack, `vc1` in tenant stack lab-vc1 (tenantStack). Each
    stack's tenants Job adds its own accounts under the parents the partitions name and keeps its own reservation;
    neither deletes the other's, in either order, and a rerun of both changes nothing."""
    document = as_operator(LAB_CONFIG, lab.operator, lab.release)
    tenants = {t["name"]: t for t in document.pop("tenants")}
    files = {
        "lab": StackFile("lab", {**document, "tenants": [tenants["default"]]}, frozenset()),
        "lab-vc1": StackFile("lab-vc1", {"tenantStack": {"platform": "lab"}, "tenants": [tenants["vc1"]]}, frozenset()),
    }
    platform, tenant_stack = (parse_stack(stack, files[stack], files) for stack in ("lab", "lab-vc1"))
    # The platform's Job first: it deletes the single stack's `cells.gpu-d.vc1` (an earlier test's), which held vc1's node.
    for config, name in ((platform, "platform"), (tenant_stack, "lab-vc1"), (platform, "platform-again")):
        result = tenants_job(lab, config, name)
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    expected = {"default": "pools_gpu-c", "default-oppo": "oppo_accounts", "vc1": "pools_gpu-d", "vc1-oppo": "oppo_accounts"}
    assert {account: parents(lab)[account] for account in expected} == expected
    reservations = lab.run("scontrol", "-o", "show", "reservation").stdout
    held = {f["ReservationName"]: (f["Nodes"], f["Accounts"]) for f in map(scontrol_fields, reservations.splitlines())}
    assert held == {"cells.gpu-c.default": ("gpu-c-0", "default,oppo_accounts"), "cells.lab-vc1.gpu-d.vc1": ("gpu-d-0", "vc1,oppo_accounts")}, (
        reservations
    )
    transactions = lab.sacctmgr("list", "transactions")
    for config, name in ((tenant_stack, "lab-vc1-again"), (platform, "platform-third")):
        result = tenants_job(lab, config, name)
        assert result.returncode == 0 and "retrying" not in result.stdout, result.stdout[-2000:] + result.stderr[-2000:]
    assert lab.sacctmgr("list", "transactions") == transactions
    assert lab.run("scontrol", "-o", "show", "reservation").stdout == reservations
    # vc1's guaranteed job runs in its stack's reservation, on its pool, without naming it.
    job = submit(lab, "carol", "-A", "vc1", "-q", "prod", "--gres=gpu:1", "--wrap", "sleep 60")
    wait_for(lambda: lab.squeue(job, "%T %R %v") == "RUNNING gpu-d-0 cells.lab-vc1.gpu-d.vc1", "vc1's job in its stack's reservation", 30)
    cancel_all(lab)


@pytest.mark.parametrize("lab", CONFIGURATIONS, indirect=True)
def test_the_tenants_job_fails_fast_on_a_fatal_error(lab):
    # The client slurm.conf as it was before it named a controller: sacctmgr's fatal error, at once.
    started = time.monotonic()
    result = tenants_job(
        lab, lab.config, "fatal", lambda text: "".join(line for line in text.splitlines(True) if not line.startswith("SlurmctldHost="))
    )
    assert result.returncode == 1 and "No SlurmctldHost defined" in result.stderr, result.stderr
    assert "waiting for slurmdbd" not in result.stdout and time.monotonic() - started < 20


def reservations_held(lab) -> dict[str, str]:
    return {f["ReservationName"]: f["Nodes"] for f in map(scontrol_fields, lab.run("scontrol", "-o", "show", "reservation").stdout.splitlines())}


def submit(lab, user, *args):
    return lab.sbatch(user, *args).stdout.strip()


def state(lab, job):
    return lab.squeue(job)


def cancel_all(lab):
    for user in USERS:
        lab.run("scancel", "--full", "-u", user, check=False)
    wait_for(lambda: not lab.run("squeue", "-h").stdout.strip(), "an empty queue", 30)


@pytest.fixture
def jobs(lab):
    if not lab.sacctmgr("show", "assoc", "where", "account=vc1-oppo", "format=Account").strip():  # run alone (-k)
        applied = tenants_job(lab, lab.config, "for-jobs")
        assert applied.returncode == 0, applied.stderr[-2000:]
    yield
    cancel_all(lab)


@pytest.mark.parametrize("lab", EXPERIMENTS, indirect=True)
def test_experiment_1_a_tenants_jobs_stay_on_its_pools_and_never_take_anothers_guarantee(lab, jobs):
    # No -p: every partition; each job runs only where its account holds cells (default: gpu-c, vc1: gpu-d).
    first = [submit(lab, "alice", "-A", "default", "--gres=gpu:1", "--wrap", "sleep 120") for _ in range(3)]
    vc1 = submit(lab, "dan", "-A", "vc1", "-q", "prod", "--gres=gpu:1", "--wrap", "sleep 120")
    wait_for(lambda: state(lab, vc1) == "RUNNING None", "vc1's job running", 20)
    assert lab.squeue(vc1, "%N") == "gpu-d-0"
    wait_for(lambda: sorted(state(lab, job) for job in first)[-1] == "RUNNING None", "one of default's jobs running", 20)
    time.sleep(3)  # time for a wrongly admitted second job to start
    assert sorted(state(lab, job).split()[0] for job in first) == ["PENDING", "PENDING", "RUNNING"]
    assert [lab.squeue(job, "%N") for job in first if state(lab, job).startswith("RUNNING")] == ["gpu-c-0"]

    # A job on every partition shows the reason of the last one it was checked against, and None between passes.
    def held_by_a_limit(job: str) -> bool:
        return state(lab, job) in {"PENDING AssocGrpGRES", "PENDING PartitionConfig"}

    for job in [job for job in first if state(lab, job).startswith("PENDING")]:
        wait_for(functools.partial(held_by_a_limit, job), f"default's job {job} held by a limit", 20)


def seen_by(lab: OperatorLab, user: str, *command: str) -> list[str]:
    """The words `command` prints run as `user` (an error prints none to stdout)."""
    return lab.run(*command, user=user, check=False).stdout.split()


@pytest.mark.parametrize("lab", EXPERIMENTS, indirect=True)
def test_a_tenants_users_see_neither_another_tenants_jobs_nor_their_records(lab, jobs):
    """PrivateData (common.PRIVATE_DATA): alice's (tenant default) job and records are hers; carol (vc1) sees
    none of them in squeue, scontrol or sacct, nor alice in sacctmgr or sshare. root still sees everything.
    sacct and sacctmgr ask slurmdbd, whose slurmdbd.conf the operator writes: soperator 4.1.7 and Slinky from
    what we render; ACK's is the stack's own Secret (docs/security.md), so its lab checks slurmctld's side only."""
    config = lab.run("scontrol", "show", "config").stdout
    assert "PrivateData             = accounts,jobs,reservations,usage,users" in config, config
    if lab.operator in ("ack", "slinky"):
        assert any(line.split() == ["PrologFlags", "=", "Alloc,Contain"] for line in config.splitlines()), config
    job = submit(lab, "alice", "-A", "default", "--gres=gpu:1", "--wrap", "sleep 120")
    wait_for(lambda: state(lab, job) == "RUNNING None", "alice's job running", 20)
    assert job in seen_by(lab, "alice", "squeue", "-h", "-a", "-o", "%i")
    assert job in lab.run("squeue", "-h", "-a", "-o", "%i").stdout.split()
    assert job not in seen_by(lab, "carol", "squeue", "-h", "-a", "-o", "%i")
    assert "alice" not in " ".join(seen_by(lab, "carol", "scontrol", "-o", "show", "job", job))
    # slurmdbd: her job's record (sent when it started) and her user record.
    sacct = ("sacct", "-n", "-X", "-a", "-j", job, "-o", "JobID")
    wait_for(lambda: job in seen_by(lab, "alice", *sacct), "alice's job in sacct", 20)
    assert job in lab.run(*sacct).stdout.split()
    assert "alice" in seen_by(lab, "alice", "sacctmgr", "-nP", "show", "user", "format=User")
    hidden_by_slurmdbd = lab.operator != "ack"
    assert (job not in seen_by(lab, "carol", *sacct)) == hidden_by_slurmdbd
    assert ("alice" not in seen_by(lab, "carol", "sacctmgr", "-nP", "show", "user", "format=User")) == hidden_by_slurmdbd
    # slurmctld's usage: carol's sshare lists no association of alice's.
    shares = seen_by(lab, "carol", "sshare", "-a", "-n", "-P", "-o", "Account,User")
    assert "vc1|carol" in shares and not [line for line in shares if line.endswith("|alice")], shares
    # Nothing in the daemons' logs about these lines.
    ours = ("PrivateData", "PrologFlags", "Contain", "pam_slurm_adopt", "proctrack")
    for log in ("slurmctld", "slurmdbd"):
        assert [line for line in config_complaints(lab.log(log)) if any(word in line for word in ours)] == [], lab.log(log)[-3000:]


@pytest.mark.parametrize("lab", EXPERIMENTS, indirect=True)
def test_a_tenants_guaranteed_job_on_another_tenants_pool_is_refused_and_oppo_may_borrow_it(lab, jobs):
    refused = lab.sbatch("carol", "-A", "vc1", "-q", "prod", "-p", "gpu-c", "--gres=gpu:1", "--wrap", "sleep 1", check=False)
    assert refused.returncode != 0 and "Invalid account or account/partition combination" in refused.stderr, refused.stderr
    oppo = submit(lab, "carol", "-A", "vc1-oppo", "-q", "oppo", "-p", "gpu-c", "--gres=gpu:1", "--wrap", "sleep 60")
    wait_for(lambda: state(lab, oppo) == "RUNNING None", "vc1's oppo job on default's idle GPU", 20)


@pytest.mark.parametrize("lab", EXPERIMENTS, indirect=True)
def test_cap_prod_and_test_together_stay_within_the_guarantee(lab, jobs):
    test = submit(lab, "carol", "-A", "vc1", "-q", "test", "--gres=gpu:1", "-p", "gpu-d", "--wrap", "sleep 120")
    wait_for(lambda: state(lab, test) == "RUNNING None", "vc1's test job running", 20)
    prod = submit(lab, "carol", "-A", "vc1", "-q", "prod", "--gres=gpu:1", "-p", "gpu-d", "--wrap", "sleep 120")
    # Waited for, not slept on: 26.05 may leave a new job's Reason None for a few scheduler passes.
    wait_for(lambda: state(lab, prod) == "PENDING AssocGrpGRES", "vc1's prod job held by its cap", 20)
    assert state(lab, test) == "RUNNING None"


@pytest.mark.parametrize("lab", EXPERIMENTS, indirect=True)
def test_borrowing_stops_at_the_borrowing_cap(lab, jobs):
    # vc1-oppo may borrow one GPU (borrowingCap 1): with both GPUs idle, its second job waits.
    jobs_ = [submit(lab, "dan", "-A", "vc1-oppo", "-q", "oppo", "-p", "gpu-c,gpu-d", "--gres=gpu:1", "--wrap", "sleep 120") for _ in range(2)]
    wait_for(lambda: "RUNNING None" in [state(lab, j) for j in jobs_], "one oppo job running", 20)
    wait_for(lambda: "PENDING AssocGrpGRES" in [state(lab, j) for j in jobs_], "the other held by the borrowing cap", 20)
    assert sorted(state(lab, j).split()[0] for j in jobs_) == ["PENDING", "RUNNING"]  # the reason reads None between passes
    # default-oppo has no cap: it takes the other idle GPU.
    other = submit(lab, "alice", "-A", "default-oppo", "-q", "oppo", "-p", "gpu-c,gpu-d", "--gres=gpu:1", "--wrap", "sleep 120")
    wait_for(lambda: state(lab, other) == "RUNNING None", "default-oppo borrowing the idle GPU", 20)


@pytest.mark.parametrize("lab", EXPERIMENTS, indirect=True)
def test_experiment_3_prod_and_test_take_their_gpu_back_from_oppo_which_runs_again(lab, jobs):
    prod = submit(lab, "carol", "-A", "vc1", "-q", "prod", "-p", "gpu-d", "--gres=gpu:1", "--wrap", "sleep 600")
    wait_for(lambda: state(lab, prod) == "RUNNING None", "vc1's prod job", 20)
    oppo = submit(lab, "carol", "-A", "vc1-oppo", "-q", "oppo", "-p", "gpu-c,gpu-d", "--gres=gpu:1", "--wrap", "sleep 600")
    wait_for(lambda: state(lab, oppo) == "RUNNING None", "the oppo job on default's idle GPU", 20)
    assert lab.squeue(oppo, "%N") == "gpu-c-0"
    default = submit(lab, "bob", "-A", "default", "-q", "test", "-p", "gpu-c", "--gres=gpu:1", "--wrap", "sleep 8")
    wait_for(lambda: state(lab, default) == "RUNNING None", "default's job on its own GPU", 30)
    history = lab.run("sacct", "-n", "-X", "-D", "-P", "-j", oppo, "-o", "State").stdout.split()
    assert history[0] in ("PREEMPTED", "REQUEUED"), history
    assert state(lab, oppo).startswith("PENDING")
    # default's job ends after 8 s; the oppo job runs again (AuthInfo=cred_expire=10 shortens the hold).
    wait_for(lambda: state(lab, oppo) == "RUNNING None", "the requeued oppo job running again", 60)


@pytest.mark.parametrize("lab", EXPERIMENTS, indirect=True)
def test_experiment_5_two_nodes_over_two_one_node_partitions_is_refused(lab, jobs):
    refused = lab.sbatch("alice", "-A", "default", "-p", "gpu-c,gpu-d", "-N", "2", "--gres=gpu:1", "--wrap", "srun hostname", check=False)
    assert refused.returncode != 0 and "Node count specification invalid" in refused.stderr, refused.stderr


@pytest.mark.parametrize("lab", EXPERIMENTS, indirect=True)
def test_experiment_6_more_nodes_than_the_partition_is_refused_and_a_range_starts_on_what_is_free(lab, jobs):
    busy = submit(lab, "carol", "-A", "vc1", "-p", "gpu-d", "--gres=gpu:1", "--wrap", "sleep 120")
    wait_for(lambda: state(lab, busy) == "RUNNING None", "gpu-d busy", 20)
    ranged = submit(lab, "alice", "-A", "default", "-p", "gpu-c,gpu-d", "-N", "1-2", "--gres=gpu:1", "--wrap", "srun hostname; sleep 60")
    wait_for(lambda: state(lab, ranged) == "RUNNING None", "the -N 1-2 job on the free node", 20)
    assert lab.squeue(ranged, "%N") == "gpu-c-0"
    four = lab.sbatch("alice", "-A", "default", "-N", "4", "--gres=gpu:1", "--wrap", "srun hostname", check=False)
    # Refused either way; which message depends on the nodes' CPUs (ACK's workers have more).
    refusals = ("More processors requested than permitted", "Node count specification invalid")
    assert four.returncode != 0 and any(refusal in four.stderr for refusal in refusals), four.stderr


def on_cgroup_v1(document: dict, **slurm: dict) -> PlatformConfig:
    """A stack's config with `slurm` keys merged in, its workers on cgroup v1 as this machine mounts them."""
    worker = {**document["slurm"].get("worker", {}), "cgroupVersion": "v1"}
    document["slurm"] = {**document["slurm"], **slurm, "worker": worker}
    return parse_config(document)


def node_state(lab: SlurmLab, name: str, node: str) -> str:
    """`node`'s State (and Reason, if any) in the cluster of `lab.slurmctld(..., name=name)`; empty while it is unknown."""
    shown = lab.scontrol(name, "-o", "show", "node", node, check=False)
    fields = dict(field.split("=", 1) for field in shown.stdout.split() if "=" in field)
    return f"{fields.get('State', '')} {fields.get('Reason', '')}".strip()


# The lab's line for ACK's nodes (lab_base has it for the others): their NodeName lines say what a GPU node
# has (28 CPUs, 100 GiB); this machine has less, and slurmd reports the configured counts instead.
CONFIG_OVERRIDES = "SlurmdParameters=config_overrides"


@pytest.mark.parametrize("lab", beside(OPERATOR_GENERATIONS["ack"]), indirect=True)
def test_slurmctld_runs_acks_slurm_conf_and_gres_conf_and_a_worker_registers_its_cloud_node(lab):
    """staging-hangzhou: ACK's generated slurm.conf, gres.conf and cgroup.conf (autoscaling, CLOUD nodes) for
    images of the lab's Slurm (slurm.ack.slurmRelease), verbatim but for site lines; one worker's slurmd
    registers its node, its GPU the /dev/nvidia0 that gres.conf names."""
    document = stack_config("staging-hangzhou")
    config = on_cgroup_v1(document, ack={**document["slurm"]["ack"], "slurmRelease": lab.release})
    hosts = [ack.slurmctld_host(config), ack.slurmdbd_host(config)]
    paths = {"/var/spool/slurmctld": lab.dir("ack-state", "slurm"), "/var/spool/slurmd": lab.dir("ack-slurmd")}
    # ACK's slurmctld runs as slurm (its SlurmUser): its slurmdbd too, as ACK's is.
    dbd_port = lab.slurmdbd("slurm", name="ack")
    ports = {"SlurmctldPort": free_port(), "SlurmdPort": free_port(), "AccountingStoragePort": dbd_port}
    conf = for_this_machine(ack.slurm_conf(config), hosts, paths, ports) + CONFIG_OVERRIDES + "\n"
    cgroup_conf = ack.slurm_conf_config_map(config)["data"]["cgroup.conf"]
    nvidia_devices(lab, config.gpu_pools[0].gpus_per_node)
    process = lab.slurmctld(conf, for_this_machine(ack.gres_conf(config)), [("cgroup.conf", cgroup_conf)], name="ack")
    worker = f"{ack.worker_name_prefix(config, config.gpu_pools[0])}0"
    try:
        log = lab.log("slurmctld-ack")
        assert lab.alive(process) and config_complaints(log) == [], (config_complaints(log), log[-3000:])
        # Every worker the copilot may create is in the partition (22.05 hides powered-down CLOUD nodes from `show node`).
        partition = lab.scontrol("ack", "--oneliner", "show", "partition").stdout
        groups = ack.ack(config).autoscaling.max_nodes_per_group
        expected_nodes = ",".join(f"{ack.worker_name_prefix(config, pool)}[0-{groups - 1}]" for pool in config.gpu_pools)
        assert f" Nodes={expected_nodes} " in partition and f" TotalNodes={groups * len(config.gpu_pools)} " in partition, partition
        lab.slurmd(worker, "ack")
        # Powered down until its slurmd registers (as the copilot's pod does), then idle.
        wait_for(lambda: node_state(lab, "ack", worker) in ("IDLE+CLOUD", "IDLE"), f"{worker} registered and idle", 60)
        assert config_complaints(lab.log(f"slurmd-{worker}")) == [], lab.log(f"slurmd-{worker}")[-3000:]
    finally:
        lab.stop(f"slurmd-{worker}")
        lab.stop("slurmctld-ack")
        lab.stop("slurmdbd-ack")
        lab.remove_cgroups(worker)


# In Slinky's own lab: its clusters share the lab's slurmdbd, and so its auth/slurm.
@pytest.mark.parametrize("lab", labs("slinky", OPERATOR_GENERATIONS["slinky"]), indirect=True)
@pytest.mark.parametrize("stack", ["prod-hcm", "dev-lab"])
def test_slurmctld_runs_slinkys_extra_conf_and_its_dynamic_nodes_register(lab, stack):
    """prod-hcm is Slinky's stack; dev-lab as Slinky adds the tenants' lines. Each NodeSet's dynamic node
    registers as the operator starts it (`slurmd -Z --conf "<NodeSet extraConf> Feature=<nodeset>"`) with the
    rendered gres.conf (AutoDetect=nvidia). This machine has no GPU for the gpu/nvidia plugin to find: the
    node's GPUs are listed by File= (/dev/nvidia<N>, no driver), the lines AutoDetect would have made."""
    document = without_keys_unread_by("slinky", {**stack_config(stack), "slurmOperator": "slinky"})
    config = on_cgroup_v1(document)
    name = f"slinky-{stack}"
    conf = slinky_slurm_conf(config, lab, name)
    nvidia_devices(lab, max(pool.gpus_per_node for pool in config.gpu_pools))
    nodes = {f"{name}-{pool.name}-0": pool for pool in config.gpu_pools}
    # The lab: the GPUs AutoDetect finds on each pool's node, of the type it names them (the pool's).
    found = [
        f"NodeName={node} Name=gpu{f' Type={pool.slurm_gpu_type}' if pool.slurm_gpu_type else ''} File=/dev/nvidia[0-{pool.gpus_per_node - 1}]\n"
        for node, pool in nodes.items()
    ]
    gres = slinky.config_files(config)["data"]["gres.conf"] + "".join(found)
    cgroup_conf = slinky.config_files(config)["data"]["cgroup.conf"]
    process = lab.slurmctld(conf, gres, [("cgroup.conf", cgroup_conf)], name=name)
    try:
        log = lab.log(f"slurmctld-{name}")
        assert lab.alive(process) and config_complaints(log) == [], (config_complaints(log), log[-3000:])
        partitions = lab.scontrol(name, "show", "partition", "-o").stdout
        assert {p.split()[0] for p in partitions.splitlines()} == {f"PartitionName={p.name}" for p in config.partitions}, partitions
        etc = lab.root / f"etc-slurm-{name}"
        for node, pool in nodes.items():
            # One at a time: the NodeSets' nodes share the rendered SlurmdPort, as pods do on their own addresses.
            (extra,) = [nodeset["spec"]["extraConf"] for nodeset in [slinky.nodeset(config, pool)]]
            # Its spool directory, as the pod's volume gives it (a dynamic node's slurmd makes none).
            lab.dir(f"state-{name}/slurmd-{node}")
            lab.start(
                f"slurmd-{node}",
                "env",
                f"SLURM_CONF={etc}/slurm.conf",
                "slurmd",
                "-D",
                "-Z",
                "-N",
                node,
                "--conf",
                f"{extra} Feature={slinky.nodeset_name(pool)}",
            )
            try:
                wait_for(lambda: node_state(lab, name, node).startswith("IDLE"), f"{node} idle", 40)  # noqa: B023 - called here, in this pass
            except AssertionError as error:
                raise AssertionError(f"{error}\n{lab.log(f'slurmd-{node}')[-3000:]}\n{lab.log(f'slurmctld-{name}')[-3000:]}") from None
            shown = lab.scontrol(name, "-o", "show", "node", node).stdout
            assert f"Gres={gres_gpus(pool)}" in shown and f"AvailableFeatures={slinky.nodeset_name(pool)}" in shown, shown
            assert node_state(lab, name, node) == "IDLE+DYNAMIC_NORM", shown
            assert config_complaints(lab.log(f"slurmd-{node}")) == [], lab.log(f"slurmd-{node}")[-3000:]
            lab.stop(f"slurmd-{node}")
            lab.remove_cgroups(node)
    finally:
        for node in nodes:
            lab.stop(f"slurmd-{node}")
        lab.stop(f"slurmctld-{name}")


@pytest.mark.parametrize("lab", EXPERIMENTS, indirect=True)
def test_experiment_2_prod_starts_before_an_earlier_test_job(lab, jobs):
    running = submit(lab, "carol", "-A", "vc1", "-q", "test", "--gres=gpu:1", "-p", "gpu-d", "--wrap", "sleep 8")
    wait_for(lambda: state(lab, running) == "RUNNING None", "vc1's first test job", 20)
    test = submit(lab, "carol", "-A", "vc1", "-q", "test", "--gres=gpu:1", "-p", "gpu-d", "--wrap", "sleep 60")
    prod = submit(lab, "carol", "-A", "vc1", "-q", "prod", "--gres=gpu:1", "-p", "gpu-d", "--wrap", "sleep 60")
    # Each shows the reason in some scheduler pass (None between passes), not always both in the same one.
    held: set[str] = set()

    def both_held() -> bool:
        held.update(job for job in (test, prod) if state(lab, job) == "PENDING AssocGrpGRES")
        return held == {test, prod}

    wait_for(both_held, "both waiting for vc1's guarantee", 6)
    # sprio shows the QOS factor that puts prod first.
    # Every pending job's: 24.11's sprio refuses a list (`-j 5,6`: Invalid job id: 5).
    factors = dict(line.split() for line in lab.run("sprio", "-h", "-o", "%i %Q").stdout.splitlines())
    assert int(factors[prod]) > int(factors[test]) > 0, factors
    wait_for(lambda: state(lab, prod) == "RUNNING None", "the prod job starting when the GPU frees", 40)
    assert state(lab, test).startswith("PENDING")


@pytest.mark.parametrize("lab", EXPERIMENTS, indirect=True)
def test_the_host_etc_is_unchanged_while_the_lab_runs(lab):
    # The lab's users exist (they own jobs above), only inside its namespace.
    assert "alice" in lab.run("getent", "passwd", "alice").stdout
    assert subprocess.run(["getent", "passwd", "alice"], capture_output=True).returncode == 2
    assert etc_digest() == lab.etc_before


@pytest.mark.parametrize("lab", EXPERIMENTS, indirect=True)
def test_experiment_4_both_machines_in_one_tenant(lab, jobs):
    """The lab's second layout: `default` holds a cell on each pool; the Job (a new hash) sets gres/gpu=2.
    A second tenant on top fails the fit check. The first layout is applied again afterwards."""
    second = {
        **LAB_CONFIG,
        "tenants": [
            {**LAB_CONFIG["tenants"][0], "cells": [{"pool": "gpu-c", "gpusPerCell": 1, "cells": 1}, {"pool": "gpu-d", "gpusPerCell": 1, "cells": 1}]}
        ],
    }
    config = lab_config(lab, second)
    assert tenancy.tenants_hash(config) != tenancy.tenants_hash(lab.config)
    with pytest.raises(ConfigError, match="gpu-d"):
        parse_config(
            {**second, "tenants": [*second["tenants"], {**LAB_CONFIG["tenants"][1], "cells": [{"pool": "gpu-d", "gpusPerCell": 1, "cells": 1}]}]}
        )
    try:
        reconfigure(lab, config)
        result = tenants_job(lab, config, "second-layout")
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
        assert lab.sacctmgr("show", "assoc", "where", "account=default", "user=", "format=GrpTRES").split() == ["gres/gpu=2"]
        # vc1's reservation went first, so gpu-d-0 could be default's.
        assert reservations_held(lab) == {"cells.gpu-c.default": "gpu-c-0", "cells.gpu-d.default": "gpu-d-0"}
        jobs_ = [submit(lab, "alice", "-A", "default", "-p", "gpu-c,gpu-d", "--gres=gpu:1", "--wrap", "sleep 60") for _ in range(2)]
        wait_for(lambda: [state(lab, job) for job in jobs_] == ["RUNNING None", "RUNNING None"], "default's two jobs, one per machine", 20)
    finally:
        cancel_all(lab)  # a reservation no longer wanted goes once its jobs are done
        reconfigure(lab, lab.config)
        restored = tenants_job(lab, lab.config, "first-layout-again")
        assert restored.returncode == 0, restored.stderr[-2000:]
        assert reservations_held(lab) == {"cells.gpu-c.default": "gpu-c-0", "cells.gpu-d.vc1": "gpu-d-0"}


# --- Jobs are confined to what they asked for -------------------------------------

# Run by a job: opens each path read-write and prints how that went.
OPEN_DEVICES = """
import errno, os, sys
for path in sys.argv[1:]:
    try:
        os.close(os.open(path, os.O_RDWR))
        print("opened")
    except OSError as error:
        print(errno.errorcode[error.errno])
"""


def confinement_lines(slurm_conf: str) -> list[str]:
    """The rendered lines that say how jobs are tracked and confined, verbatim."""
    lines = [line for line in slurm_conf.splitlines() if line.partition("=")[0].lower() in ("proctracktype", "taskplugin")]
    assert len(lines) == 2, slurm_conf
    return lines


def v1(stack: str) -> PlatformConfig:
    """The stack's config on cgroup v1 nodes, as this machine mounts them (/sys/fs/cgroup/<controller>)."""
    document = stack_config(stack)
    document["slurm"] = {**document["slurm"], "worker": {**document["slurm"].get("worker", {}), "cgroupVersion": "v1"}}
    return parse_config(document)


def acks_render() -> tuple[list[str], str]:
    config = v1("staging-hangzhou")
    return confinement_lines(ack.slurm_conf(config)), ack.slurm_conf_config_map(config)["data"]["cgroup.conf"]


def slinkys_render() -> tuple[list[str], str]:
    config = v1("prod-hcm")
    return confinement_lines(slinky.controller(config)["spec"]["extraConf"]), slinky.config_files(config)["data"]["cgroup.conf"]


def open_gpu(lab: SlurmLab, name: str, device: str, *gres: str) -> tuple[str, str]:
    """What a job of alice's, with `gres` or without, gets opening `device`: (result, its CUDA_VISIBLE_DEVICES)."""
    conf = f"SLURM_CONF={lab.root}/etc-slurm-{name}/slurm.conf"
    script = f"echo ${{CUDA_VISIBLE_DEVICES:-unset}}; exec python3 -c '{OPEN_DEVICES}' {device}"
    job = lab.run("env", conf, "srun", "-N1", "-t1", *gres, "sh", "-c", script, user="alice", check=False, timeout=60)
    slurmd_log = lab.logs / f"slurmd-{name}-0.file"
    assert job.returncode == 0, job.stdout + job.stderr + slurmd_log.read_text(errors="replace")[-3000:]
    visible, opened = job.stdout.split()
    return opened, visible


def jobs_are_confined(lab: SlurmLab, operator: str, render: Callable[[], tuple[list[str], str]], confined: bool) -> None:
    """On real slurmd with an operator's rendered ProctrackType, TaskPlugin and cgroup.conf (for cgroup v1, what
    this machine mounts): the fake GPU is a character device with /dev/nvidia0's numbers and no driver, so an open
    the devices cgroup allows fails ENXIO, and one it denies EPERM."""
    lines, cgroup_conf = render()
    name = f"gpu-{operator}"  # short: slurmstepd's socket path in the lab's spool stays under 108 bytes
    nodes = {f"{name}-0": ("gpu", 1)}
    conf = lab_base(name, lab, nodes, ["GresTypes=gpu", "PartitionName=gpu Nodes=ALL Default=YES"], name, then="\n".join(lines) + "\n")
    gres = gpu_device_nodes(lab, nodes)
    device = gres.split("File=")[1].strip()
    ctld = lab.slurmctld(conf, gres, [("cgroup.conf", for_this_machine(cgroup_conf))], name=name)
    try:
        lab.slurmd(f"{name}-0", name)
        wait_for(lambda: lab.scontrol(name, "-o", "show", "node").stdout.split("State=")[1].startswith("IDLE"), f"{name}-0 idle", 30)
        assert lab.alive(ctld) and config_complaints(lab.log(f"slurmctld-{name}")) == [], lab.log(f"slurmctld-{name}")[-3000:]
        assert open_gpu(lab, name, device, "--gres=gpu:1") == ("ENXIO", "0")
        assert open_gpu(lab, name, device) == ("EPERM" if confined else "ENXIO", "unset")
    finally:
        lab.stop(f"slurmd-{name}-0")
        lab.stop(f"slurmctld-{name}")
        lab.remove_cgroups(f"{name}-0")
    assert not list(Path("/sys/fs/cgroup").glob(f"*/slurm_{name}-0"))


# One test per operator, each parametrized by its lab alone: pytest then runs each in a lab the module already started.
@pytest.mark.parametrize("lab", beside(OPERATOR_GENERATIONS["ack"]), indirect=True)
def test_acks_job_without_gres_cannot_open_the_gpu_a_job_with_gres_can(lab):
    jobs_are_confined(lab, "ack", acks_render, True)


@pytest.mark.parametrize("lab", beside(OPERATOR_GENERATIONS["slinky"]), indirect=True)
def test_slinkys_job_without_gres_cannot_open_the_gpu_a_job_with_gres_can(lab):
    jobs_are_confined(lab, "slinky", slinkys_render, True)


@pytest.mark.parametrize("lab", SOPERATOR4[-1:], indirect=True)
def test_before_that_render_a_job_without_gres_opened_the_gpu(lab):
    """The control: the same cgroup.conf under what ACK and Slinky rendered before (Slinky: Slurm's defaults)."""
    jobs_are_confined(lab, "before", lambda: (list(LAB_TASKS), acks_render()[1]), False)


def typed_job(lab: SlurmLab, name: str, command: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """alice's `srun` or `sbatch` on the cluster of `slurmctld(..., name=name)`."""
    conf = f"SLURM_CONF={lab.root}/etc-slurm-{name}/slurm.conf"
    extra = ("--parsable", "-o", "/dev/null", "--chdir=/tmp") if command == "sbatch" else ()
    return lab.run("env", conf, command, *extra, "-A", "typed", "-t1", *args, user="alice", check=check, timeout=60)


@pytest.mark.parametrize("lab", beside(OPERATOR_GENERATIONS["ack"]), indirect=True)
def test_typed_gpus_take_typed_and_untyped_jobs_refuse_another_type_and_count_against_the_gpu_limit(lab):
    """ACK's render for the lab's Slurm generation, its GPU pool at two GPUs per node: the CLOUD node line's
    `Gres=gpu:<type>:2`, gres.conf's `Type=<type>` with the fake GPUs listed by `File=` (no GPU here: AutoDetect
    needs a driver, docs/operators.md, "What only a GPU host proves"), and the accounted TRES the tenants' limits read."""
    raw = copy.deepcopy(stack_config("staging-hangzhou"))
    raw["slurm"]["ack"]["slurmRelease"] = lab.release
    next(p for p in raw["nodePools"] if p.get("gpusPerNode"))["gpusPerNode"] = 2
    config = parse_config(raw)
    pool = config.gpu_pools[0]
    gpu_type, other_type = pool.slurm_gpu_type, "h100" if pool.slurm_gpu_type != "h100" else "l40s"
    cloud = next(line for line in ack.slurm_conf(config).splitlines() if line.startswith(f"NodeName={ack.worker_name_prefix(config, pool)}"))
    gres = next(word for word in cloud.split() if word.startswith("Gres="))
    (gres_line,) = body(ack.gres_conf(config)).splitlines()
    assert gres == f"Gres=gpu:{gpu_type}:2" and f" Type={gpu_type} " in gres_line, (cloud, gres_line)
    name, cluster = "gpu-typed", f"{config.cluster.name}-typed"
    nodes = {f"{name}-0": ("gpu", 2)}
    own = ["GresTypes=gpu", "PartitionName=gpu Nodes=ALL Default=YES", f"AccountingStorageTRES={accounted_gpu_tres(config)}"]
    conf = lab_base(cluster, lab, nodes, [*own, "AccountingStorageEnforce=associations,limits,safe"], name)
    assert conf.count(" Gres=gpu:2 ") == 1, conf
    conf = conf.replace(" Gres=gpu:2 ", f" {gres} ")  # the node as ACK's render declares it
    devices = gpu_device_nodes(lab, nodes, {f"{name}-0": gpu_type})
    lab.sacctmgr("-i", "add", "cluster", cluster)
    lab.sacctmgr("-i", "add", "account", "typed", f"cluster={cluster}", "GrpTRES=gres/gpu=1")
    lab.sacctmgr("-i", "add", "user", "alice", "account=typed", f"cluster={cluster}")
    ctld = lab.slurmctld(conf, devices, name=name)
    try:
        lab.slurmd(f"{name}-0", name)
        wait_for(lambda: lab.scontrol(name, "-o", "show", "node").stdout.split("State=")[1].startswith("IDLE"), f"{name}-0 idle", 30)
        assert lab.alive(ctld) and config_complaints(lab.log(f"slurmctld-{name}")) == [], lab.log(f"slurmctld-{name}")[-3000:]
        node = lab.scontrol(name, "-o", "show", "node").stdout
        assert f"Gres=gpu:{gpu_type}:2" in node, node
        # Typed and untyped requests both run; another type is refused at submission.
        assert typed_job(lab, name, "srun", f"--gres=gpu:{gpu_type}:1", "true").returncode == 0
        assert typed_job(lab, name, "srun", "--gres=gpu:1", "true").returncode == 0
        refused = typed_job(lab, name, "sbatch", f"--gres=gpu:{other_type}:1", "--wrap", "true", check=False)
        assert refused.returncode != 0 and "Requested node configuration is not available" in refused.stderr, refused.stderr
        # The account's GrpTRES=gres/gpu=1 counts a typed job: the next job, typed or not, waits on it with a GPU free.
        running = typed_job(lab, name, "sbatch", f"--gres=gpu:{gpu_type}:1", "--wrap", "sleep 60").stdout.strip()
        wait_for(lambda: lab.scontrol(name, "-o", "show", "job", running).stdout.count("JobState=RUNNING") == 1, "the typed job running", 20)
        shown = lab.scontrol(name, "-o", "show", "job", running).stdout
        assert "gres/gpu=1" in shown and f"gres/gpu:{gpu_type}=1" in shown, shown
        waiting = [typed_job(lab, name, "sbatch", gres, "--wrap", "true").stdout.strip() for gres in ("--gres=gpu:1", f"--gres=gpu:{gpu_type}:1")]

        # Each shows the reason in some scheduler pass (None between passes), not always both in the same one.
        seen: set[str] = set()

        def held() -> bool:
            seen.update(job for job in waiting if "Reason=AssocGrpGRES" in lab.scontrol(name, "-o", "show", "job", job).stdout)
            return seen == set(waiting)

        wait_for(held, f"jobs {waiting} held by the GPU limit", 20)
        lab.run("env", f"SLURM_CONF={lab.root}/etc-slurm-{name}/slurm.conf", "scancel", running, *waiting)
    finally:
        lab.stop(f"slurmd-{name}-0")
        lab.stop(f"slurmctld-{name}")

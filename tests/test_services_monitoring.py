"""The Slurm exporter against real Slurm (tests/services.py), on each operator's lab with the dev-lab tenants and
PrivateData on as the tenants render it. The collector (components/monitoring/slurm-metrics.sh) runs as the lab's
SlurmUser on the client slurm.conf the exporter renders: what it writes equals what squeue, sinfo and scontrol say
as root, while a tenant's own squeue sees none of the other tenant's jobs. Then a real node_exporter serves its file
and a real Prometheus scrapes it with the rules components/monitoring/rules.py renders: each tenant's series equal
squeue's, and the broken-guarantee alert fires while a guaranteed job is held back and clears when it runs."""

from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from components.config import parse_config
from components.monitoring import exporter, rules, series
from components.slurm import resolve
from tests.harness import prometheus_bin
from tests.services import as_operator, for_this_machine, free_port, operator_lab, tenants_job, wait_for
from tests.test_services_slurm import CONFIGURATIONS, LAB_CONFIG, LAB_NODES, USERS, cancel_all

# One sample of the Prometheus text format: name, labels, value (a textfile node-exporter accepts).
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*)\})? (-?[0-9.e+]+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
# Seconds, not the defaults' minutes: the collector, the scrape and the rules every second, the alert after 5 s.
MONITORING = {"enabled": True, "scrapeInterval": "1s", "slurmExporter": {"interval": "1s"}, "alerts": {"guaranteeBrokenFor": "5s"}}


@pytest.fixture(scope="module")
def lab(request):
    operator, release = request.param
    config = parse_config({**as_operator(LAB_CONFIG, operator, release), "monitoring": MONITORING})
    with operator_lab(operator, config, LAB_NODES, USERS, release) as started:
        applied = tenants_job(started, config, "for-exporter")
        assert applied.returncode == 0, applied.stderr[-2000:]
        yield started
        cancel_all(started)  # pass or fail: no job outlives its lab


def parse(text: str) -> Samples:
    """The file's samples; every line a comment or a well-formed sample, no sample twice."""
    samples: Samples = {}
    for line in text.splitlines():
        if line.startswith("# TYPE ") and line.endswith(" gauge"):
            continue
        match = SAMPLE.match(line)
        assert match, f"not Prometheus text: {line!r}"
        key = (match[1], frozenset(LABEL.findall(match[2] or "")))
        assert key not in samples, f"twice: {line!r}"
        samples[key] = float(match[3])
    return samples


def collector(lab, metrics: str = "slurm.prom") -> tuple[Path, str, list[str]]:
    """The collector's files as its pod has them (the exporter's ConfigMap, its client slurm.conf's hosts this
    machine's), the lab's SlurmUser, and the collect container's environment (its SLURM_CONF and file here)."""
    config = lab.config
    plan = resolve(config)
    client = plan.accounting_client
    files = exporter.config_map(config, client)["data"]
    user = lab.files(config, LAB_NODES).slurm_user
    work = lab.dir("exporter", owner=user)
    conf = for_this_machine(files["slurm.conf"], [client.slurmctld_host, client.slurmdbd_host], ports={"AccountingStoragePort": lab.dbd_port})
    # The lab runs Slinky's slurmctld as root (tests/services.py lab_base), Slinky as slurm: the client names the lab's.
    conf = conf.replace(f"SlurmUser={client.slurm_user}\n", f"SlurmUser={user}\n")
    (work / "slurm.conf").write_text(conf + f"SlurmctldPort={lab.ctld_port}\n")
    (work / exporter.SCRIPT).write_text(files[exporter.SCRIPT])
    container = exporter.deployment(config, client, plan.priority_class_names)["spec"]["template"]["spec"]["containers"][0]
    here = {"SLURM_CONF": f"{work}/slurm.conf", "METRICS_FILE": str(work / metrics)}
    env = [f"{e['name']}={here.get(e['name'], e['value'])}" for e in container["env"]]
    return work, user, env


def collect(lab, broken: str = "") -> Samples:
    """One run of the script as the lab's SlurmUser (a file of its own: the loop's may be running); `broken`: a command that fails."""
    work, user, env = collector(lab, "once.prom")
    path = f"PATH={work}/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    if broken:
        (work / "bin").mkdir(exist_ok=True)
        (work / "bin" / broken).write_text("#!/bin/sh\necho 'slurm_load_jobs error: Unable to contact slurm controller' >&2\nexit 1\n")
        (work / "bin" / broken).chmod(0o755)
    lab.run("env", path, *env, "ONCE=1", "sh", str(work / exporter.SCRIPT), user=user)
    if broken:
        (work / "bin" / broken).unlink()
    return parse((work / "once.prom").read_text())


def of(samples: Samples, name: str) -> dict[frozenset[tuple[str, str]], float]:
    return {labels: value for (series_name, labels), value in samples.items() if series_name == name}


def key(**labels: str) -> frozenset[tuple[str, str]]:
    return frozenset(labels.items())


def gpus(tres: str) -> int:
    return sum(int(part.split("=")[1]) for part in tres.split(",") if part.startswith("gres/gpu="))


def what_root_sees(lab) -> dict[str, dict]:
    """The exporter's job series as root's squeue gives them."""
    rows = [
        line.split("|")
        for line in lab.run(
            "squeue", "-h", "-a", "-r", "-t", "RUNNING,PENDING", "-O", "JobID:|,Account:|,Partition:|,State:|,Reason:|,tres-alloc:|"
        ).stdout.splitlines()
    ]
    allocated: dict = defaultdict(float)
    pending: dict = defaultdict(float)
    jobs: Counter = Counter()
    per_job = {}
    for job, account, partition, state, reason, tres, *_ in rows:
        jobs[key(account=account, state=state.lower())] += 1
        if state == "RUNNING":
            allocated[key(account=account, partition=partition)] += gpus(tres)
            per_job[key(job_id=job, account=account, partition=partition)] = float(gpus(tres))
        elif gpus(tres):
            pending[key(account=account, partition=partition, reason=reason)] += gpus(tres)
    return {
        series.ACCOUNT_GPUS_ALLOCATED: dict(allocated),
        series.ACCOUNT_GPUS_PENDING: dict(pending),
        series.ACCOUNT_JOBS: {labels: float(count) for labels, count in jobs.items()},
        series.JOB_GPUS: per_job,
    }


def exported_jobs(lab) -> dict[str, dict]:
    samples = collect(lab)
    return {name: of(samples, name) for name in (series.ACCOUNT_GPUS_ALLOCATED, series.ACCOUNT_GPUS_PENDING, series.ACCOUNT_JOBS, series.JOB_GPUS)}


def submit(lab, user: str, *args: str) -> str:
    return lab.sbatch(user, "--gres=gpu:1", *args, "--wrap", "sleep 300").stdout.strip()


def running(lab, job: str) -> bool:
    return lab.squeue(job, "%T") == "RUNNING"


@pytest.mark.parametrize("lab", CONFIGURATIONS, indirect=True)
def test_the_exporter_sees_every_tenants_jobs_as_squeue_does_while_tenants_see_only_their_own(lab):
    private = lab.run("scontrol", "show", "config").stdout
    assert "PrivateData             = accounts,jobs,reservations,usage,users" in private
    # vc1 borrows default's idle GPU with an oppo job, and runs a guaranteed job on its own; a second is held by its cap.
    borrowing = submit(lab, "dan", "-A", "vc1-oppo", "-q", "oppo", "-p", "gpu-c")
    guaranteed = submit(lab, "carol", "-A", "vc1", "-q", "prod", "-p", "gpu-d")
    held = submit(lab, "carol", "-A", "vc1", "-q", "prod", "-p", "gpu-d")
    wait_for(lambda: running(lab, borrowing) and running(lab, guaranteed), "vc1's jobs running", 30)
    wait_for(lambda: exported_jobs(lab) == what_root_sees(lab), "the exporter's job series equal to root's squeue", 30)
    seen = exported_jobs(lab)
    assert seen[series.ACCOUNT_GPUS_ALLOCATED] == {key(account="vc1-oppo", partition="gpu-c"): 1, key(account="vc1", partition="gpu-d"): 1}
    assert seen[series.JOB_GPUS][key(job_id=borrowing, account="vc1-oppo", partition="gpu-c")] == 1
    assert sum(value for labels, value in seen[series.ACCOUNT_GPUS_PENDING].items() if ("account", "vc1") in labels) == 1
    assert seen[series.ACCOUNT_JOBS][key(account="vc1", state="pending")] == 1

    # default takes its GPU back (prod requeues oppo): the borrowing job waits, and the exporter says so.
    taken_back = submit(lab, "alice", "-A", "default", "-q", "prod", "-p", "gpu-c")
    wait_for(lambda: running(lab, taken_back), "default's job running on its own GPU", 60)
    wait_for(lambda: exported_jobs(lab) == what_root_sees(lab), "the exporter's job series equal to root's squeue", 30)
    seen = exported_jobs(lab)
    assert seen[series.ACCOUNT_GPUS_ALLOCATED] == {key(account="default", partition="gpu-c"): 1, key(account="vc1", partition="gpu-d"): 1}
    assert {labels for labels in seen[series.ACCOUNT_GPUS_PENDING] if ("account", "vc1-oppo") in labels}

    # PrivateData holds: each tenant's squeue lists its own jobs only; the exporter, as SlurmUser, every one.
    def listed_by(user: str) -> set[str]:
        return set(lab.run("squeue", "-h", "-a", "-o", "%i", user=user).stdout.split())

    assert listed_by("alice") == {taken_back}
    assert listed_by("carol") == {guaranteed, held}
    assert {dict(labels)["job_id"] for labels in seen[series.JOB_GPUS]} == {taken_back, guaranteed}
    assert {dict(labels)["account"] for labels in seen[series.ACCOUNT_JOBS]} == {"default", "vc1", "vc1-oppo"}

    # Nodes: state and reason as sinfo gives them, GPUs as scontrol does.
    lab.run("scontrol", "update", "NodeName=gpu-c-0", "State=DRAIN", "Reason=xid 79 seen")
    samples = collect(lab)
    states = of(samples, series.NODE_STATE)
    assert states[key(node="gpu-c-0", state="draining", reason="xid 79 seen")] == 1
    assert states[key(node="gpu-d-0", state="mixed", reason="")] == 1 and len(states) == 2
    assert of(samples, series.NODE_GPUS) == {key(node="gpu-c-0"): 1, key(node="gpu-d-0"): 1}
    assert of(samples, series.NODE_GPUS_ALLOCATED) == {key(node="gpu-c-0"): 1, key(node="gpu-d-0"): 1}
    assert of(samples, series.SLURMCTLD_UP) == {key(): 1} and of(samples, series.SLURMDBD_UP) == {key(): 1}
    assert of(samples, series.COLLECTED_AT)[key()] > 0
    lab.run("scontrol", "update", "NodeName=gpu-c-0", "State=RESUME")

    # squeue failing: no job series at all (none that look fresh), the rest still there, and no success timestamp.
    failed = collect(lab, broken="squeue")
    assert not of(failed, series.ACCOUNT_GPUS_ALLOCATED) and not of(failed, series.JOB_GPUS) and not of(failed, series.ACCOUNT_JOBS)
    assert of(failed, series.NODE_GPUS) and of(failed, series.SLURMCTLD_UP) == {key(): 1}
    assert not of(failed, series.COLLECTED_AT)


# --- A real Prometheus scraping a real node_exporter that serves the collector's file -----------------------


class Prometheus:
    def __init__(self, port: int):
        self.url = f"http://127.0.0.1:{port}"

    def query(self, expr: str) -> dict[frozenset[tuple[str, str]], float]:
        """An instant query's vector, by its labels but __name__."""
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}", timeout=10) as answer:
            result = json.load(answer)["data"]["result"]
        return {frozenset((k, v) for k, v in sample["metric"].items() if k != "__name__"): float(sample["value"][1]) for sample in result}

    def tenant(self, record: str) -> dict[str, float]:
        """A recording rule's value per tenant (Slurm's)."""
        return {dict(labels)["tenant"]: value for labels, value in self.query(f'{record}{{scheduler="slurm"}}').items()}

    def firing(self, alert: str) -> set[str]:
        return {dict(labels).get("tenant", "") for labels in self.query(f'ALERTS{{alertname="{alert}", alertstate="firing"}}')}


@pytest.fixture(scope="module")
def prometheus(lab):
    """The collector in a loop as the lab's SlurmUser; node_exporter with the `serve` container's arguments on its
    file; Prometheus scraping it as the ServiceMonitor does (job slurm-exporter, the cluster's namespace as the
    target's), with the rules components/monitoring/rules.py renders, evaluated every second."""
    config = lab.config
    binaries = prometheus_bin()
    work, user, env = collector(lab)
    lab.start("collector", "env", *env, "sh", str(work / exporter.SCRIPT), user=user)
    exporter_port, port = free_port(), free_port()
    served = {f"--collector.textfile.directory={exporter.METRICS_DIR}": f"--collector.textfile.directory={work}"}
    args = [served.get(arg, arg) for arg in exporter.server(config)["args"] if not arg.startswith("--web.listen-address")]
    lab.start("node_exporter", str(binaries / "node_exporter"), *args, f"--web.listen-address=127.0.0.1:{exporter_port}", host=True)
    home = lab.dir("prometheus")
    (home / "rules.yml").write_text(json.dumps(rules.rule_groups(config, resolve(config))))
    interval = config.monitoring.scrape_interval
    scrape = {
        "job_name": series.EXPORTER_APP,
        "scrape_interval": interval,
        "static_configs": [{"targets": [f"127.0.0.1:{exporter_port}"], "labels": {"namespace": config.cluster.namespace}}],
    }
    settings = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [str(home / "rules.yml")],
        "scrape_configs": [scrape],
    }
    (home / "prometheus.yml").write_text(json.dumps(settings))
    lab.start(
        "prometheus",
        str(binaries / "prometheus"),
        f"--config.file={home / 'prometheus.yml'}",
        f"--storage.tsdb.path={home / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        host=True,
    )
    server = Prometheus(port)
    target = key(instance=f"127.0.0.1:{exporter_port}", job=series.EXPORTER_APP, namespace=config.cluster.namespace)

    def scraping() -> bool:
        try:
            return server.query(f'up{{job="{series.EXPORTER_APP}"}}') == {target: 1}
        except OSError:  # not listening yet
            return False

    try:
        wait_for(scraping, "Prometheus scraping node_exporter", 60, every=1)
    except AssertionError as error:
        raise AssertionError(f"{error}\nnode_exporter:\n{lab.log('node_exporter')[-2000:]}\nprometheus:\n{lab.log('prometheus')[-3000:]}") from None
    return server


def per_tenant_from_squeue(lab) -> dict[str, dict[str, float]]:
    """What the tenant rules should compute, from root's squeue and the config: allocated (the tenant's account and
    its oppo account), pending (its own account's jobs waiting for GPUs: rules.WAITING_FOR_GPUS), borrowed (allocated
    beyond the guarantee), lent (the rest)."""
    waiting = re.compile("|".join(rules.WAITING_FOR_GPUS))
    seen = what_root_sees(lab)
    found: dict[str, dict[str, float]] = {
        name: {} for name in (series.TENANT_GPUS_ALLOCATED, series.TENANT_GPUS_PENDING, series.TENANT_GPUS_BORROWED, series.TENANT_GPUS_LENT)
    }
    for tenant in lab.config.tenants:
        allocated = sum(v for labels, v in seen[series.ACCOUNT_GPUS_ALLOCATED].items() if dict(labels)["account"] in tenant.slurm_accounts)
        pending = sum(
            v
            for labels, v in seen[series.ACCOUNT_GPUS_PENDING].items()
            if dict(labels)["account"] == tenant.name and waiting.fullmatch(dict(labels)["reason"])
        )
        found[series.TENANT_GPUS_ALLOCATED][tenant.name] = allocated
        found[series.TENANT_GPUS_PENDING][tenant.name] = pending
        found[series.TENANT_GPUS_BORROWED][tenant.name] = max(allocated - tenant.guaranteed_gpus, 0)
        found[series.TENANT_GPUS_LENT][tenant.name] = max(tenant.guaranteed_gpus - allocated, 0)
    return found


def computed_by(server: Prometheus) -> dict[str, dict[str, float]]:
    return {
        record: server.tenant(record)
        for record in (series.TENANT_GPUS_ALLOCATED, series.TENANT_GPUS_PENDING, series.TENANT_GPUS_BORROWED, series.TENANT_GPUS_LENT)
    }


@pytest.mark.parametrize("lab", CONFIGURATIONS, indirect=True)
def test_prometheus_computes_each_tenants_use_as_squeue_says_and_the_broken_guarantee_fires_and_clears(lab, prometheus):
    cancel_all(lab)
    assert prometheus.tenant(series.TENANT_GPUS_GUARANTEED) == {t.name: t.guaranteed_gpus for t in lab.config.tenants} == {"default": 1, "vc1": 1}
    # vc1 borrows default's idle GPU and runs its guaranteed job; a second guaranteed job is held by its cap
    # (its account's GrpTRES, AssocGrpGRES): its own limit, no demand its guarantee owes it.
    borrowing = submit(lab, "dan", "-A", "vc1-oppo", "-q", "oppo", "-p", "gpu-c")
    guaranteed = submit(lab, "carol", "-A", "vc1", "-q", "prod", "-p", "gpu-d")
    submit(lab, "carol", "-A", "vc1", "-q", "prod", "-p", "gpu-d")
    wait_for(lambda: running(lab, borrowing) and running(lab, guaranteed), "vc1's jobs running", 30)
    wait_for(lambda: computed_by(prometheus) == per_tenant_from_squeue(lab), "Prometheus's tenant series equal to squeue's", 30, every=1)
    assert computed_by(prometheus) == {
        series.TENANT_GPUS_ALLOCATED: {"default": 0, "vc1": 2},
        series.TENANT_GPUS_PENDING: {"default": 0, "vc1": 0},
        series.TENANT_GPUS_BORROWED: {"default": 0, "vc1": 1},
        series.TENANT_GPUS_LENT: {"default": 1, "vc1": 0},
    }
    assert prometheus.firing("TenantBelowGuarantee") == set()

    # vc1's node drained: its guaranteed job waits while vc1 has none of its GPU; the alert fires after guaranteeBrokenFor.
    cancel_all(lab)
    lab.run("scontrol", "update", "NodeName=gpu-d-0", "State=DRAIN", "Reason=held back")
    try:
        held = submit(lab, "carol", "-A", "vc1", "-q", "prod", "-p", "gpu-d")
        wait_for(lambda: prometheus.firing("TenantBelowGuarantee") == {"vc1"}, "TenantBelowGuarantee firing for vc1", 60, every=1)
        assert lab.squeue(held, "%T") == "PENDING"
        assert (
            computed_by(prometheus)[series.TENANT_GPUS_PENDING] == {"default": 0, "vc1": 1} == per_tenant_from_squeue(lab)[series.TENANT_GPUS_PENDING]
        )
        assert prometheus.firing("SlurmNodeOut") == set()  # only after its 10 minutes
    finally:
        lab.run("scontrol", "update", "NodeName=gpu-d-0", "State=RESUME")
    wait_for(lambda: running(lab, held), "vc1's guaranteed job running once its node is back", 30)
    wait_for(lambda: prometheus.firing("TenantBelowGuarantee") == set(), "TenantBelowGuarantee cleared", 30, every=1)
    assert computed_by(prometheus) == per_tenant_from_squeue(lab)


def job_records(lab, job: str) -> list[dict[str, str]]:
    """`scontrol show job`'s records of a job: an array's tasks, a het job's components; JobId is each one's SLURM_JOB_ID."""
    return [dict(f.split("=", 1) for f in line.split() if "=" in f) for line in lab.run("scontrol", "-o", "show", "job", job).stdout.splitlines()]


def array_tasks(lab, array: str) -> dict[str, tuple[str, str]]:
    """An array's records: each one's JobId -> (ArrayTaskId, JobState)."""
    return {r["JobId"]: (r["ArrayTaskId"], r["JobState"]) for r in job_records(lab, array)}


@pytest.mark.parametrize("lab", CONFIGURATIONS, indirect=True)
def test_an_arrays_pending_tasks_each_count_and_a_running_task_goes_by_the_job_id_its_prolog_sees(lab):
    cancel_all(lab)
    # Three tasks of one GPU each on gpu-c's one GPU: one runs, two wait.
    array = submit(lab, "alice", "-A", "default", "-q", "prod", "-p", "gpu-c", "--array=0-2")
    wait_for(lambda: [s for _, s in array_tasks(lab, array).values()].count("RUNNING") == 1, "one task of the array running", 30)
    (running_id,) = [job for job, (_, state) in array_tasks(lab, array).items() if state == "RUNNING"]
    assert running_id.isdigit()
    wait_for(lambda: exported_jobs(lab) == what_root_sees(lab), "the exporter's job series equal to root's squeue", 30)
    seen = exported_jobs(lab)
    # The prolog's SLURM_JOB_ID: the running task's JobId, not `<array>_<task>`.
    assert seen[series.JOB_GPUS] == {key(job_id=running_id, account="default", partition="gpu-c"): 1}
    assert seen[series.ACCOUNT_JOBS] == {key(account="default", state="running"): 1, key(account="default", state="pending"): 2}
    assert sum(seen[series.ACCOUNT_GPUS_PENDING].values()) == 2
    cancel_all(lab)


@pytest.mark.parametrize("lab", CONFIGURATIONS, indirect=True)
def test_the_collectors_squeue_names_each_het_component_by_its_own_job_id(lab):
    """squeue's `%i` says `<het>+<offset>`; the collector's `-O JobID` each component's JobId, its SLURM_JOB_ID."""
    cancel_all(lab)
    gpu_c, gpu_d = ("-A", "default", "-q", "prod", "-p", "gpu-c"), ("-A", "default-oppo", "-q", "oppo", "-p", "gpu-d")
    het = lab.sbatch("alice", *gpu_c, "--gres=gpu:1", ":", *gpu_d, "--wrap", "sleep 300").stdout.strip()
    components = {r["JobId"] for r in job_records(lab, het)}
    assert len(components) == 2 and lab.run("squeue", "-h", "-j", het, "-o", "%i").stdout.split() != sorted(components)
    (squeue,) = [line.strip() for line in exporter.SCRIPT_TEXT.splitlines() if line.strip().startswith("squeue ")]
    listed = lab.run("sh", "-c", squeue).stdout.splitlines()
    assert {line.split("|")[0] for line in listed} == components
    cancel_all(lab)

"""dcgm-exporter's HPC job mapping kept by real slurmd (tests/services.py) of each Slurm generation: the rendered
script (components/slurm/gpu_jobs.py) as slurm.conf's Prolog and Epilog, on a node of three fake GPUs, writes
each running job's id under exactly the GPU indices Slurm gave it, and removes them when the job ends; and ACK's
rendered slurm.conf runs it from where its workers mount it."""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.config import parse_config
from components.slurm import gpu_jobs
from tests.harness import stack_config
from tests.services import (
    GENERATIONS,
    SlurmLab,
    as_operator,
    etc_digest,
    gpu_device_nodes,
    lab_node_shape,
    lab_site_lines,
    operator_lab,
    require_packages,
    tenants_job,
    wait_for,
)

NODE = "gpu-0"
GPUS = 3
MAPPING = "job-mapping"  # the test's directory standing for the hostPath


@pytest.fixture(scope="module", params=list(GENERATIONS))
def lab(request) -> Iterator[SlurmLab]:
    """munged, slurmctld and one slurmd of three fake GPUs, the mapping script as Prolog and Epilog, no accounting."""
    release = request.param
    require_packages()
    etc_before = etc_digest()
    # Not under pytest's 0700 temporary directory: munged (user munge) checks every parent of its files.
    root = Path(tempfile.mkdtemp(prefix="slurm-platform-services-"))
    root.chmod(0o755)
    lab = SlurmLab(root, "gpujobs", release)
    try:
        # The script as rendered, but for the site path of the directory (a hostPath in a pod, the test's here).
        script = lab.dir("scripts") / "gpu-job-mapping.sh"
        script.write_text(gpu_jobs.script(str(lab.dir(MAPPING))))
        script.chmod(0o755)
        state = lab.dir("state", "root")
        nodes = {NODE: ("gpu", GPUS)}
        conf = [
            "ClusterName=gpujobs",
            "SlurmctldHost=localhost(127.0.0.1)",
            f"SlurmctldPort={lab.ctld_port}",
            "AuthType=auth/munge",
            "SlurmUser=root",
            f"StateSaveLocation={state}",
            f"SlurmdSpoolDir={state}/slurmd-%n",
            *lab_site_lines(lab, state),
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "MpiDefault=none",
            "ReturnToService=2",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "GresTypes=gpu",
            # The Prolog at allocation, as every operator's PrologFlags=Contain has it.
            "PrologFlags=Alloc",
            f"Prolog={script}",
            f"Epilog={script}",
            f"NodeName={NODE} NodeAddr=127.0.0.1 {lab_node_shape(lab, NODE, GPUS)} Gres=gpu:{GPUS} State=UNKNOWN",
            "PartitionName=gpu Nodes=ALL Default=YES",
        ]
        lab.munged(b"m" * 1024)
        ctld = lab.slurmctld("\n".join(conf) + "\n", gpu_device_nodes(lab, nodes))
        assert lab.alive(ctld), lab.log("slurmctld")
        lab.slurmd(NODE)
        wait_for(lambda: lab.run("sinfo", "-h", "-N", "-o", "%T").stdout.split() == ["idle"], f"{NODE} idle", 60)
        yield lab
    finally:
        lab.close()
        shutil.rmtree(root)
    assert etc_digest() == etc_before


def submit(lab: SlurmLab, gpus: int) -> str:
    job = lab.run("sbatch", "--parsable", "-o", "/dev/null", "--chdir=/tmp", f"--gres=gpu:{gpus}", "--wrap", "sleep 300").stdout.strip()
    wait_for(lambda: lab.squeue(job, "%T") == "RUNNING", f"job {job} running", 30)
    return job


def gpu_indices(lab: SlurmLab, job: str) -> set[str]:
    """The GPUs Slurm gave the job on the node (scontrol's `GRES=gpu:2(IDX:1-2)`)."""
    detail = lab.run("scontrol", "-d", "show", "job", job).stdout
    (indices,) = re.findall(r"GRES=gpu(?::\w+)*:\d+\(IDX:([\d,-]+)\)", detail)
    found: set[str] = set()
    for part in indices.split(","):
        first, _, last = part.partition("-")
        found |= {str(i) for i in range(int(first), int(last or first) + 1)}
    return found


def mapping(lab: SlurmLab) -> dict[str, str]:
    return {path.name: path.read_text() for path in (lab.root / MAPPING).iterdir()}


def mapped(jobs: dict[str, set[str]]) -> dict[str, str]:
    """The mapping that names each job on its GPUs."""
    return {index: f"{job}\n" for job, indices in jobs.items() for index in indices}


def node_state(lab: SlurmLab) -> str:
    return lab.run("sinfo", "-h", "-N", "-o", "%T").stdout.strip()


def test_a_jobs_gpus_carry_its_id_while_it_runs_and_nothing_after(lab):
    holder = submit(lab, 1)
    job = submit(lab, 2)
    held, given = gpu_indices(lab, holder), gpu_indices(lab, job)
    assert len(held) == 1 and len(given) == 2 and not held & given
    wait_for(lambda: mapping(lab) == mapped({holder: held, job: given}), "the mapping of both jobs", 15)
    lab.run("scancel", job)
    wait_for(lambda: mapping(lab) == mapped({holder: held}), f"job {job}'s GPUs unmapped", 60)
    lab.run("scancel", holder)
    wait_for(lambda: mapping(lab) == {}, "no GPU mapped", 60)
    # Neither script failed: a failing Prolog or Epilog drains the node.
    wait_for(lambda: node_state(lab) == "idle", f"{NODE} idle", 30)


def test_without_the_directory_jobs_run_and_the_node_stays_up(lab):
    (lab.root / MAPPING).rmdir()
    try:
        job = submit(lab, 2)
        lab.run("scancel", job)
        wait_for(lambda: node_state(lab) == "idle", f"{NODE} idle", 60)
    finally:
        lab.dir(MAPPING)


# Each operator on the generation of its experiments (tests/test_services_slurm.py), and the GPU node of account
# default's cells there.
OPERATOR_LABS = {"ack": ("24.11", "gpu-c-0"), "soperator 4.1.7": ("26.05", "gpu-c-0"), "slinky": ("26.05", "gpu-c-0")}


@pytest.mark.parametrize("operator", OPERATOR_LABS)
def test_each_operators_slurm_conf_runs_the_mapping_as_it_renders_it(operator):
    """dev-lab with monitoring, deployed by each operator: its Prolog and Epilog lines as the operator writes them
    (ACK: the slurm.conf we render; soperator 4.1.7: slurmConfig; Slinky: a line per key of the ConfigMaps its
    Controller references), the scripts at the lab's copy of their mount (tests/services.py gpu_job_scripts)."""
    release, node = OPERATOR_LABS[operator]
    document = {**stack_config("dev-lab"), "monitoring": {"enabled": True}}
    config = parse_config(as_operator(document, operator, release))
    assert gpu_jobs.maps_gpu_jobs(config)
    nodes = {"gpu-c-0": ("gpu-c", 1), "gpu-d-0": ("gpu-d", 1)}
    with operator_lab(operator, config, nodes, ["alice", "bob", "carol", "dan"], release) as lab:
        applied = tenants_job(lab, config, "gpu-jobs")
        assert applied.returncode == 0, applied.stderr[-2000:]
        job = lab.sbatch("alice", "-A", "default", "-p", "gpu-c", "--gres=gpu:1", "--wrap", "sleep 300").stdout.strip()
        directory = lab.root / "gpu-job-mapping"
        wait_for(lambda: {p.name: p.read_text() for p in directory.iterdir()} == {"0": f"{job}\n"}, f"job {job} mapped", 30)
        lab.run("scancel", job)
        wait_for(lambda: not list(directory.iterdir()), f"job {job} unmapped", 60)
        # Neither script failed (that drains the node): it is as the tenants' reservations leave it.
        wait_for(lambda: lab.run("sinfo", "-h", "-n", node, "-o", "%T").stdout.strip() in ("idle", "reserved"), f"{node} free", 30)

"""The tenants Job (components/tenancy.py's script) at scale, against real daemons: tests/scale.py's stacks
(prod-hoalac's shape, soperator 4.1.7, 1,000 GPU nodes in four pools) of 40 and 160 tenants, their script
run as its pod runs it (tests/services.py `slurm_client_pod`) against a real slurmdbd and slurmctld of each Slurm
generation soperator 4.1.7's clusters run on (tests/test_services_slurm.py OPERATOR_GENERATIONS). slurmctld
holds the 960 Slurm workers of the four pools as IDLE nodes that one slurmd answers for (tests/services.py
`one_slurmd`), room for the reservations.

For each: the first run (an empty database, no reservation) and a second, no-change run: wall time, CPU
seconds (the Job's: the script, sacctmgr and scontrol; the daemons': slurmctld, slurmdbd, MariaDB), and how
many sacctmgr and scontrol commands each ran, by verb (each logged by a shell function in front of the
command, the script itself unchanged); the second run's slurmdbd transactions (0: it changed nothing). Also
the size of the ConfigMap holding the script (Kubernetes refuses one over 1 MiB). Prints figures; asserts nothing.

    .venv/bin/python benchmarks/tenants_job.py [--tenants 40,160] [--releases 24.11,26.05]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "policies"))  # the pack's own module names

from components import tenancy  # noqa: E402
from components.config import PlatformConfig, parse_config  # noqa: E402
from components.slurm import operator_module  # noqa: E402
from components.slurm.client import SCRIPT_DIR  # noqa: E402
from tests.scale import scaled_config  # noqa: E402
from tests.services import OperatorLab, operator_lab, slurm_client_pod  # noqa: E402
from tests.test_services_slurm import OPERATOR_GENERATIONS, operator_of  # noqa: E402

OPERATOR = "soperator 4.1.7"
CALLS = "calls.log"
# In front of the tenants script: each sacctmgr and scontrol it runs (in $(...) too) logged with its first words.
COUNTED = f"""\
sacctmgr() {{ echo "sacctmgr $*" | cut -c1-60 >>{SCRIPT_DIR}/{CALLS}; command sacctmgr "$@"; }}
scontrol() {{ echo "scontrol $*" | cut -c1-60 >>{SCRIPT_DIR}/{CALLS}; command scontrol "$@"; }}
export -f sacctmgr scontrol
exec /bin/bash {SCRIPT_DIR}/{tenancy.SCRIPT}
"""


def nodes(config: PlatformConfig) -> dict[str, tuple[str, int]]:
    """Every Slurm worker of every GPU pool, as the lab names fake nodes: name -> (pool, GPUs)."""
    return {f"{pool.name}-{i}": (pool.name, pool.gpus_per_node) for pool in config.gpu_pools for i in range(pool.worker_replicas)}


def commands(log: Path) -> collections.Counter[str]:
    """The commands a run logged, by program and verb (`sacctmgr add`, `scontrol show`)."""
    counted: collections.Counter[str] = collections.Counter()
    for line in log.read_text().splitlines() if log.exists() else ():
        program, *words = line.split()
        counted[f"{program} {next(w for w in words if not w.startswith('-')).split('=')[0]}"] += 1
    return counted


def cpu_seconds(lab: OperatorLab) -> tuple[float, float]:
    """CPU seconds so far of the pods run (this process's waited-for children: the script, sacctmgr, scontrol)
    and of the daemons (slurmctld, slurmdbd, MariaDB: each its Popen's PID, exec'd through nsenter and chroot)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    ticks = os.sysconf("SC_CLK_TCK")
    daemons = 0.0
    for name, process in lab.daemons:
        if name in ("slurmctld", "slurmdbd", "mariadb"):
            fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
            daemons += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    return children.ru_utime + children.ru_stime, daemons


def run(lab: OperatorLab, config: PlatformConfig, name: str) -> tuple[float, float, float, collections.Counter[str]]:
    """Wall seconds, the Job's CPU seconds, the daemons' CPU seconds, and the commands the Job ran."""
    client = operator_module(config).accounting_client(config)
    data = {**tenancy.config_map(config, client)["data"], "counted.sh": COUNTED}
    job_before, daemons_before = cpu_seconds(lab)
    started = time.perf_counter()
    result = slurm_client_pod(lab, config, name, data, script="counted.sh", timeout=3600)
    seconds = time.perf_counter() - started
    job_after, daemons_after = cpu_seconds(lab)
    if result.returncode != 0:
        raise SystemExit(f"the tenants Job failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return seconds, job_after - job_before, daemons_after - daemons_before, commands(lab.root / f"pod-{name}" / "configmap" / CALLS)


def shown(seconds: float, job: float, daemons: float, counted: collections.Counter[str]) -> str:
    calls = ", ".join(f"{verb} {n}" for verb, n in sorted(counted.items()))
    return f"{seconds:7.1f} s  CPU: Job {job:5.1f} s, daemons {daemons:5.1f} s  {sum(counted.values()):5} commands: {calls}"


def measure(tenants: int, release: str) -> None:
    config = parse_config(scaled_config(tenants))
    assert operator_of(config) == OPERATOR, operator_of(config)
    client = operator_module(config).accounting_client(config)
    configmap = len(json.dumps(tenancy.config_map(config, client)).encode())
    users = [user for tenant in config.tenants for user in tenant.user_names]
    reservations = len(tenancy.reservations(config))
    with operator_lab(OPERATOR, config, nodes(config), users, release, slurmd=False) as lab:
        first = run(lab, config, "first")
        transactions = lab.sacctmgr("list", "transactions").count("\n")
        second = run(lab, config, "second")
        changed = lab.sacctmgr("list", "transactions").count("\n") - transactions
    print(f"Slurm {release}, {tenants} tenants ({reservations} reservations), ConfigMap {configmap / 1024:.0f} KiB", flush=True)
    print(f"  first run   {shown(*first)}")
    print(f"  second run  {shown(*second)}; slurmdbd transactions {changed}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tenants", default="40,160")
    parser.add_argument("--releases", default=",".join(OPERATOR_GENERATIONS[OPERATOR]))
    args = parser.parse_args()
    for release in args.releases.split(","):
        for tenants in map(int, args.tenants.split(",")):
            measure(tenants, release)


if __name__ == "__main__":
    main()

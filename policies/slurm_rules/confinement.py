"""Jobs confined to what they asked for: the slurm.conf and cgroup.conf settings that put every
job step in a cgroup of its own whose devices, cores and memory are the ones it was allocated,
and how a line undoes them. The renders write them (ACK, Slinky; soperator's own upstream
writes the same), the stack config refuses extra lines that weaken them, and the policy pack
flags a rendered Slurm config without them.

Why both files: `ConstrainDevices=yes` alone confines nothing. The task/cgroup plugin applies
cgroup.conf's constraints, and proctrack/cgroup keeps a job's processes in the job's cgroup.
On a real H100, a job without --gres opened /dev/nvidia0 under task/none and was refused
("Operation not permitted") under task/cgroup with ConstrainDevices (docs/operators.md, "Jobs are
confined to their GPUs").
"""

from __future__ import annotations

from typing import Optional

from .config_files import SlurmConfig
from .slurm_release import SlurmRelease

PROCTRACK = "proctrack/cgroup"
TASK_CGROUP = "task/cgroup"
TASK_PLUGINS = f"{TASK_CGROUP},task/affinity"
SLURM_CONF_SETTINGS = (("ProctrackType", PROCTRACK), ("TaskPlugin", TASK_PLUGINS))
SLURM_CONF_LINES = tuple(f"{key}={value}" for key, value in SLURM_CONF_SETTINGS)
CONSTRAINTS = ("ConstrainCores", "ConstrainDevices", "ConstrainRAMSpace")
# Slurm's booleans (s_p_handle_boolean), case-insensitive.
TRUE_VALUES = ("yes", "up", "true", "1")


def cgroup_conf(cgroup_version: str, release: SlurmRelease) -> str:
    """cgroup.conf for workers on cgroup `cgroup_version` (v1 or v2) running Slurm `release`. On v2, slurmd in a
    pod has no systemd to ask for its scope (IgnoreSystemd) and enables the controllers its cgroup namespace's
    root does not delegate (EnableControllers, where the release knows it: 23.02 and later)."""
    conf = SlurmConfig(release, "cgroup.conf")
    conf.set("CgroupPlugin", f"cgroup/{cgroup_version}")
    if cgroup_version == "v2":
        conf.set("IgnoreSystemd", "yes").set_where_taken("EnableControllers", "yes")
    for key in CONSTRAINTS:
        conf.set(key, "yes")
    return conf.text()


def settings(text: str) -> dict[str, str]:
    """A Slurm config's `Key=Value` settings by lower-cased key (Slurm's keys are case-insensitive),
    the last repeat winning as in Slurm; comments dropped."""
    found = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        key, equals, value = line.partition("=")
        if equals and key.strip() and " " not in key.strip():
            found[key.strip().lower()] = value.strip()
    return found


def weakening(key: str, value: str) -> Optional[str]:
    """Why a slurm.conf setting undoes the confinement, or None when it keeps it."""
    key = key.strip().lower()
    if key == "proctracktype" and value.strip() != PROCTRACK:
        return f"ProctrackType must stay {PROCTRACK}: with any other, a job's processes leave its cgroup"
    if key == "taskplugin" and TASK_CGROUP not in [plugin.strip() for plugin in value.split(",")]:
        return f"TaskPlugin must include {TASK_CGROUP}: without it no job is confined to its GPUs, cores or memory"
    return None


def slurm_conf_gaps(text: str) -> list[str]:
    """What a slurm.conf lacks for confinement (its last value of each key counts)."""
    found = settings(text)
    gaps = []
    for line in SLURM_CONF_LINES:
        key, _, _ = line.partition("=")
        if key.lower() not in found:
            gaps.append(f"no {key} (Slurm's default confines nothing)")
        elif reason := weakening(key, found[key.lower()]):
            gaps.append(f"{key}={found[key.lower()]}: {reason}")
    return gaps


def cgroup_conf_gaps(text: str) -> list[str]:
    """What a cgroup.conf lacks for confinement."""
    found = settings(text)
    gaps = [f"{key} is not yes" for key in CONSTRAINTS if found.get(key.lower(), "no").lower() not in TRUE_VALUES]
    if found.get("cgroupplugin", "").lower() == "disabled":
        gaps.append("CgroupPlugin=disabled")
    return gaps

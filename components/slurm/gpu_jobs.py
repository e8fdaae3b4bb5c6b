"""GPU series attributed to Slurm jobs: dcgm-exporter's HPC job mapping (a directory on each GPU node where a
file named by a GPU's index holds the id of the job on it; dcgm-exporter labels that GPU's series hpc_job),
written by a Prolog and removed by an Epilog that slurmd runs (gpu-job-mapping.sh), in the same hostPath the GPU
operator mounts into dcgm-exporter (operator_charts.gpu_operator_values: dcgmExporter.hpcJobMapping).

Each operator module that can run it (soperator 4.1.7, Slinky, ACK) mounts these into its workers; soperator
1.14.10's SlurmCluster has no Prolog, Epilog or extra worker volume to give it (docs/monitoring.md).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from ..config import PlatformConfig
from . import Rendered

# The GPU operator's own default for hpcJobMapping.directory (api/nvidia/v1 DefaultDCGMJobMappingDir), which it
# mounts into dcgm-exporter as a hostPath (DirectoryOrCreate); the workers mount the same path of the same node.
MAPPING_DIR = "/var/lib/dcgm-exporter/job-mapping"
MAPPING_VOLUME = "gpu-job-mapping"
# One script, slurmd's Prolog and its Epilog by SLURM_SCRIPT_CONTEXT; under two names, as Slinky takes each
# ConfigMap of prologScriptRefs and epilogScriptRefs by its keys (one projected /etc/slurm holds them all).
SCRIPT = Path(__file__).parent / "gpu-job-mapping.sh"
PROLOG = "gpu-job-prolog.sh"
EPILOG = "gpu-job-epilog.sh"
# Where the scripts' ConfigMaps are mounted in a worker where the operator leaves their delivery to us.
SCRIPTS_DIR = "/etc/slurm-platform/gpu-jobs"
SCRIPTS_VOLUME = "gpu-job-scripts"
PROLOG_PATH = f"{SCRIPTS_DIR}/{PROLOG}"
EPILOG_PATH = f"{SCRIPTS_DIR}/{EPILOG}"


def maps_gpu_jobs(config: PlatformConfig) -> bool:
    """Monitoring is on and the GPU operator this stack installs runs dcgm-exporter, whose mapping we configure."""
    gpu = config.operators.gpu_operator
    return config.monitoring.enabled and gpu.install and gpu.dcgm_exporter_enabled


def script(directory: str = MAPPING_DIR) -> str:
    return SCRIPT.read_text().replace("@MAPPING_DIR@", shlex.quote(directory))


def script_config_map_names(config: PlatformConfig) -> dict[str, str]:
    """Script name -> its ConfigMap."""
    return {PROLOG: f"{config.cluster.name}-gpu-job-prolog", EPILOG: f"{config.cluster.name}-gpu-job-epilog"}


def rendered(config: PlatformConfig) -> list[Rendered]:
    """The scripts' ConfigMaps, where the mapping is kept (none otherwise)."""
    if not maps_gpu_jobs(config):
        return []
    return [
        Rendered(
            name.removeprefix(f"{config.cluster.name}-"),
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": config.cluster.namespace, "labels": {"app.kubernetes.io/instance": config.cluster.name}},
                "data": {file_name: script()},
            },
        )
        for file_name, name in script_config_map_names(config).items()
    ]


def mapping_volume() -> dict[str, Any]:
    return {"name": MAPPING_VOLUME, "hostPath": {"path": MAPPING_DIR, "type": "DirectoryOrCreate"}}


def mapping_mount() -> dict[str, Any]:
    return {"name": MAPPING_VOLUME, "mountPath": MAPPING_DIR}


def worker_volumes(config: PlatformConfig) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(volumes, volumeMounts) of slurmd's container where the operator leaves the scripts' delivery to us: both
    scripts, executable, at PROLOG_PATH and EPILOG_PATH, and dcgm-exporter's mapping directory (none without the mapping)."""
    if not maps_gpu_jobs(config):
        return [], []
    sources = [{"configMap": {"name": name}} for name in script_config_map_names(config).values()]
    scripts = {"name": SCRIPTS_VOLUME, "projected": {"defaultMode": 0o755, "sources": sources}}
    return [scripts, mapping_volume()], [{"name": SCRIPTS_VOLUME, "mountPath": SCRIPTS_DIR, "readOnly": True}, mapping_mount()]

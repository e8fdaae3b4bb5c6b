"""GPU series attributed to jobs and pods: the GPU operator's dcgm-exporter values (its ServiceMonitor, the HPC job
mapping) and the Prolog/Epilog that keeps the mapping on each Slurm operator that can run it (components/slurm/gpu_jobs.py)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from components.config import parse_config
from components.monitoring.series import DCGM_JOB_LABEL
from components.operator_charts import gpu_operator_values
from components.slurm import gpu_jobs, manifest_of, operator_module
from components.slurm.ack import slurm_conf
from tests.contracts import CHART_VALUES_DIR, CONTRACTS, crd_schema, manifest_errors, pruned_fields
from tests.harness import body, stack_config

# A stack of each operator; ACK's (staging-hangzhou) with the GPU operator this stack installs.
OPERATOR_STACKS = {"soperator 4.1.7": "dev-lab", "Slinky slurm-operator 1.2.1": "prod-hcm", "ack-slurm-operator": "staging-hangzhou"}
SELECTOR = {"prometheus": "platform"}
GPU_OPERATOR_VERSION = "v26.7.0"


def document(stack: str, monitoring: bool = True) -> dict[str, Any]:
    doc = copy.deepcopy(stack_config(stack))
    doc["monitoring"] = {"enabled": monitoring, "scrapeInterval": "20s", "prometheus": {"selectorLabels": SELECTOR}}
    operators = doc.setdefault("operators", {})
    operators["gpuOperator"] = {**operators.get("gpuOperator", {}), "install": True}
    return doc


def config_of(stack: str, monitoring: bool = True):
    return parse_config(document(stack, monitoring))


# --- the GPU operator's chart values ------------------------------------------------------------------


def test_with_monitoring_the_dcgm_exporter_has_a_service_monitor_our_prometheus_selects_and_the_job_mapping():
    dcgm = gpu_operator_values(config_of("dev-lab"))["dcgmExporter"]
    assert dcgm == {
        "enabled": True,
        "serviceMonitor": {"enabled": True, "interval": "20s", "additionalLabels": SELECTOR},
        "hpcJobMapping": {"enabled": True, "directory": gpu_jobs.MAPPING_DIR},
    }
    # The Kubernetes mapping (pod, namespace labels: a Kueue pod's GPUs) is the operator's default: nothing turns it off.
    assert "env" not in dcgm


def test_without_monitoring_or_dcgm_exporter_the_values_are_as_before():
    assert gpu_operator_values(config_of("dev-lab", monitoring=False))["dcgmExporter"] == {"enabled": True}
    doc = document("dev-lab")
    doc["operators"]["gpuOperator"]["dcgmExporterEnabled"] = False
    assert gpu_operator_values(parse_config(doc))["dcgmExporter"] == {"enabled": False}


def test_the_pinned_chart_passes_both_to_the_cluster_policy_whose_contract_takes_them():
    """The chart's templates read dcgmExporter.serviceMonitor and .hpcJobMapping whole (toYaml into the ClusterPolicy's
    spec.dcgmExporter): what we set there meets the ClusterPolicy CRD of the same release (a misspelt key fails)."""
    config = config_of("dev-lab")
    assert config.operators.gpu_operator.version == GPU_OPERATOR_VERSION
    reads = set(json.loads((CHART_VALUES_DIR / "gpu-operator" / GPU_OPERATOR_VERSION / "values.json").read_text())["templateReads"])
    schema = crd_schema(CONTRACTS / "gpu-operator" / GPU_OPERATOR_VERSION / "nvidia.com_clusterpolicies.json")
    dcgm_schema = schema["properties"]["spec"]["properties"]["dcgmExporter"]
    checked = []
    for key, value in gpu_operator_values(config)["dcgmExporter"].items():
        assert f"dcgmExporter.{key}" in reads, key
        field = dcgm_schema["properties"][key]
        assert pruned_fields(value, field) == [], key
        jsonschema.Draft7Validator(field).validate(value)
        checked.append(key)
    assert {"serviceMonitor", "hpcJobMapping"} <= set(checked)


def test_the_job_label_is_dcgm_exporters():
    """The series name the rules and dashboards join on (series.py) is the label dcgm-exporter writes."""
    assert DCGM_JOB_LABEL == "hpc_job"


# --- the Prolog and Epilog on each operator ------------------------------------------------------------


def worker_pods(config) -> list[tuple[list[dict[str, Any]], dict[str, Any]]]:
    """(pod volumes, slurmd container) of every worker template the operator renders, as the pod will have them."""
    rendered = operator_module(config).render(config)
    if config.slurm_operator == "soperator":
        found = []
        for nodeset in manifest_of(rendered, "NodeSet"):
            custom = nodeset["spec"]["slurmd"]["volumes"].get("customVolumeMounts", [])
            volumes = [{"name": m["name"], **m["volumeSource"]} for m in custom]
            found.append((volumes, {"volumeMounts": [{k: v for k, v in m.items() if k != "volumeSource"} for m in custom]}))
        return found
    if config.slurm_operator == "slinky":
        return [(nodeset["spec"]["template"]["spec"].get("volumes", []), nodeset["spec"]["slurmd"]) for nodeset in manifest_of(rendered, "NodeSet")]
    cluster = manifest_of(rendered, "SlurmCluster")[0]
    return [(group["template"]["spec"]["volumes"], group["template"]["spec"]["containers"][0]) for group in cluster["spec"]["workerGroupSpecs"]]


def scripts_configured(config) -> dict[str, str]:
    """Prolog and Epilog as the operator puts them in slurm.conf."""
    rendered = operator_module(config).render(config)
    if config.slurm_operator == "soperator":
        slurm_config = manifest_of(rendered, "SlurmCluster")[0]["spec"].get("slurmConfig", {})
        return {key.capitalize(): value for key, value in slurm_config.items() if key in ("prolog", "epilog")}
    if config.slurm_operator == "slinky":
        # Slinky writes Prolog=<key> and Epilog=<key> for each key of the referenced ConfigMaps.
        spec = manifest_of(rendered, "Controller")[0]["spec"]
        maps = {m["metadata"]["name"]: m for m in manifest_of(rendered, "ConfigMap")}
        return {
            kind: key
            for kind, refs in (("Prolog", "prologScriptRefs"), ("Epilog", "epilogScriptRefs"))
            for ref in spec.get(refs, [])
            for key in maps[ref["name"]]["data"]
        }
    lines = [line.split("=", 1) for line in body(slurm_conf(config)).splitlines()]
    return {key: value for key, value in lines if key in ("Prolog", "Epilog")}


def mounted_at(volumes: list[dict[str, Any]], container: dict[str, Any], path: str) -> dict[str, Any]:
    """The volume slurmd's container has at `path`."""
    (mount,) = [m for m in container.get("volumeMounts", []) if m["mountPath"] == path]
    (volume,) = [v for v in volumes if v["name"] == mount["name"]]
    return volume


@pytest.mark.parametrize("operator", OPERATOR_STACKS)
def test_each_operator_runs_the_mapping_script_as_prolog_and_epilog_in_workers_that_mount_dcgm_exporters_directory(operator):
    config = config_of(OPERATOR_STACKS[operator])
    assert operator == operator_module(config).OPERATOR
    directory = gpu_operator_values(config)["dcgmExporter"]["hpcJobMapping"]["directory"]
    rendered = operator_module(config).render(config)
    scripts = {key: text for m in manifest_of(rendered, "ConfigMap") for key, text in m.get("data", {}).items() if key.startswith("gpu-job-")}
    assert scripts == {gpu_jobs.PROLOG: gpu_jobs.script(), gpu_jobs.EPILOG: gpu_jobs.script()}
    configured = scripts_configured(config)
    if config.slurm_operator == "slinky":
        assert configured == {"Prolog": gpu_jobs.PROLOG, "Epilog": gpu_jobs.EPILOG}
    else:
        assert configured == {"Prolog": gpu_jobs.PROLOG_PATH, "Epilog": gpu_jobs.EPILOG_PATH}
    pods = worker_pods(config)
    assert pods
    for volumes, slurmd in pods:
        assert mounted_at(volumes, slurmd, directory)["hostPath"] == {"path": directory, "type": "DirectoryOrCreate"}
        if config.slurm_operator != "slinky":
            # The scripts where slurm.conf names them, executable.
            scripts_volume = mounted_at(volumes, slurmd, str(Path(gpu_jobs.PROLOG_PATH).parent))["projected"]
            assert scripts_volume["defaultMode"] == 0o755
            names = {source["configMap"]["name"] for source in scripts_volume["sources"]}
            assert names == {m["metadata"]["name"] for m in manifest_of(rendered, "ConfigMap") if set(m["data"]) & {gpu_jobs.PROLOG, gpu_jobs.EPILOG}}
    for manifest in rendered:
        assert manifest_errors(manifest.manifest) == [], manifest.role


@pytest.mark.parametrize("operator", OPERATOR_STACKS)
def test_without_monitoring_no_operator_renders_the_mapping(operator):
    config = config_of(OPERATOR_STACKS[operator], monitoring=False)
    assert scripts_configured(config) == {}
    assert not [m for m in operator_module(config).render(config) if "gpu-job" in json.dumps(m.manifest)]
    assert all(gpu_jobs.MAPPING_DIR not in json.dumps(volumes) for volumes, _ in worker_pods(config))


def test_soperator_1_14_10_has_no_prolog_and_no_worker_volume_to_give_it():
    """Why 1.14.10 renders none (docs/monitoring.md): its SlurmCluster has no slurm.conf setting of ours and its
    workers' volumes are the jail, its submounts, spool and shared memory only."""
    spec = crd_schema(CONTRACTS / "soperator" / "1.14.10" / "slurm.nebius.ai_slurmclusters.json")["properties"]["spec"]["properties"]
    assert not {"slurmConfig", "customSlurmConfig"} & set(spec)
    assert set(spec["slurmNodes"]["properties"]["worker"]["properties"]["volumes"]["properties"]) == {
        "jail",
        "jailSubMounts",
        "sharedMemorySize",
        "spool",
    }
    config = config_of("prod-hanoi")
    assert config.operators.soperator.version == "1.14.10" and gpu_jobs.maps_gpu_jobs(config)
    assert "gpu-job" not in json.dumps([m.manifest for m in operator_module(config).render(config)])


# --- the script ----------------------------------------------------------------------------------------


def test_the_script_parses_and_passes_shellcheck():
    assert subprocess.run(["bash", "-n"], input=gpu_jobs.script(), text=True).returncode == 0
    checked = subprocess.run(["shellcheck", "--shell=bash", "-"], input=gpu_jobs.script(), capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout


def run_script(directory: Path, context: str, **env: str) -> subprocess.CompletedProcess:
    script = directory.parent / "gpu-job-mapping.sh"
    script.write_text(gpu_jobs.script(str(directory)))
    environment = {"SLURM_SCRIPT_CONTEXT": context, **env}
    return subprocess.run(["bash", str(script)], env=environment, capture_output=True, text=True, timeout=10)


def mapping(directory: Path) -> dict[str, str]:
    return {path.name: path.read_text() for path in sorted(directory.iterdir())}


def test_prolog_writes_the_job_id_for_exactly_its_gpus_and_epilog_removes_them(tmp_path):
    directory = tmp_path / "job mapping"  # a space: the directory is quoted
    directory.mkdir()
    assert run_script(directory, "prolog_slurmd", SLURM_JOB_ID="42", SLURM_JOB_GPUS="0,3").returncode == 0
    assert mapping(directory) == {"0": "42\n", "3": "42\n"}
    assert run_script(directory, "epilog_slurmd", SLURM_JOB_ID="42", SLURM_JOB_GPUS="0,3").returncode == 0
    assert mapping(directory) == {}


def test_epilog_leaves_a_gpu_that_names_another_job(tmp_path):
    (tmp_path / "map").mkdir()
    (tmp_path / "map" / "1").write_text("99\n")
    assert run_script(tmp_path / "map", "epilog_slurmd", SLURM_JOB_ID="42", SLURM_JOB_GPUS="1").returncode == 0
    assert mapping(tmp_path / "map") == {"1": "99\n"}


@pytest.mark.parametrize(
    "env",
    [
        {"SLURM_JOB_ID": "42;touch x", "SLURM_JOB_GPUS": "0"},
        {"SLURM_JOB_ID": "../42", "SLURM_JOB_GPUS": "0"},
        {"SLURM_JOB_ID": "", "SLURM_JOB_GPUS": "0"},
        {"SLURM_JOB_ID": "42", "SLURM_JOB_GPUS": "0,../passwd"},
        {"SLURM_JOB_ID": "42", "SLURM_JOB_GPUS": "0 1"},
        {"SLURM_JOB_ID": "42", "SLURM_JOB_GPUS": "$(touch x)"},
    ],
    ids=["command", "path", "empty", "path-gpu", "space", "substitution"],
)
def test_anything_but_digits_writes_nothing_and_the_job_runs(tmp_path, env):
    (tmp_path / "map").mkdir()
    for context in ("prolog_slurmd", "epilog_slurmd"):
        result = run_script(tmp_path / "map", context, **env)
        assert result.returncode == 0 and "mapping left as it is" in result.stderr, result
    assert mapping(tmp_path / "map") == {}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpu-job-mapping.sh", "map"]


def test_a_missing_directory_is_logged_and_the_job_runs(tmp_path):
    result = run_script(tmp_path / "absent", "prolog_slurmd", SLURM_JOB_ID="42", SLURM_JOB_GPUS="0")
    assert result.returncode == 0 and f"no directory {tmp_path / 'absent'}" in result.stderr
    assert not (tmp_path / "absent").exists()


def test_a_job_without_gpus_and_another_context_change_nothing(tmp_path):
    (tmp_path / "map").mkdir()
    assert run_script(tmp_path / "map", "prolog_slurmd", SLURM_JOB_ID="42").returncode == 0
    result = run_script(tmp_path / "map", "task_prolog", SLURM_JOB_ID="42", SLURM_JOB_GPUS="0")
    assert result.returncode == 0 and "nothing done" in result.stderr
    assert mapping(tmp_path / "map") == {}
    assert os.access(tmp_path / "map", os.W_OK)

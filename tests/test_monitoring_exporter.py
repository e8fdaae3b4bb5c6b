"""The Slurm exporter's objects (components/monitoring/exporter.py) on every operator: who runs the collector,
what each container mounts, the script's syntax, the ServiceMonitor's shape. Real Slurm answering it, and a
real node-exporter serving it, are in tests/test_services_monitoring.py."""

from __future__ import annotations

import copy
import subprocess
from typing import Any

import pytest

from components.config import parse_config
from components.monitoring import exporter, series, usage
from components.slurm import operator_module, resolve
from components.slurm.common import KEY_DIR, system_priority_class_name
from tests.harness import monitored, stack_config

# A stack of each operator (tests/test_services_slurm.py OPERATOR_STACKS) and the UID its SlurmUser has in its images.
SLURM_USERS = {"prod-hanoi": 0, "dev-lab": 0, "prod-hcm": 401, "staging-hangzhou": 1109}


def by_kind(config) -> dict[str, dict[str, Any]]:
    plan = resolve(config)
    rendered = exporter.render(config, plan.accounting_client, plan.priority_class_names)
    found = {manifest["kind"]: manifest for manifest in rendered}
    assert len(found) == len(rendered), "one object of each kind"
    return found


def containers(deployment: dict[str, Any]) -> dict[str, dict[str, Any]]:
    spec = deployment["spec"]["template"]["spec"]
    return {c["name"]: c for c in [*spec.get("initContainers", []), *spec["containers"]]}


def test_nothing_when_monitoring_is_off():
    document = copy.deepcopy(stack_config("dev-lab"))
    document["monitoring"] = {"enabled": False}
    config = parse_config(document)
    plan = resolve(config)
    assert exporter.render(config, plan.accounting_client, plan.priority_class_names) == []


@pytest.mark.parametrize("stack", SLURM_USERS)
def test_the_collector_runs_the_operators_client_image_as_slurm_user_and_only_the_auth_sidecar_holds_the_key(stack):
    config = monitored(stack)
    client = operator_module(config).accounting_client(config)
    objects = by_kind(config)
    deployment = objects["Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    found = containers(deployment)
    assert set(found) == {"auth", "collect", "serve"}
    collect, serve, auth = found["collect"], found["serve"], found["auth"]
    assert collect["image"] == client.image
    assert collect["securityContext"]["runAsUser"] == SLURM_USERS[stack] == client.slurm_uid
    assert collect["securityContext"]["runAsNonRoot"] == (SLURM_USERS[stack] != 0)
    # The key's volume: the Secret's key alone, mounted by the auth sidecar alone.
    key_volumes = [v["name"] for v in pod["volumes"] if "secret" in v]
    assert key_volumes == ["auth-key"]
    (secret,) = [v["secret"] for v in pod["volumes"] if "secret" in v]
    assert secret["secretName"] == client.key_secret and secret["items"] == [{"key": client.key, "path": "key"}]
    mounting = {name for name, c in found.items() for m in c.get("volumeMounts", []) if m["name"] == "auth-key"}
    assert mounting == {"auth"} and any(m["mountPath"] == KEY_DIR for m in auth["volumeMounts"])
    assert auth["restartPolicy"] == "Always"  # a native sidecar: up before the collector, for as long as it runs
    # munged where the cluster signs with munge (soperator's own munge image where it has one), sackd for auth/slurm.
    assert ("sackd -D" in auth["command"][-1]) == (client.auth == "auth/slurm")
    assert ("munged -F" in auth["command"][-1]) == (client.auth == "auth/munge")
    assert auth["image"] == (client.munge_image or client.image)
    # The collector reads the script and the client slurm.conf, signs through the sidecar's socket, writes the file.
    assert {m["name"]: m.get("readOnly", False) for m in collect["volumeMounts"]} == {
        "config": True,
        "auth-socket": True,
        "metrics": False,
        "tmp": False,
    }
    assert {m["name"] for m in serve["volumeMounts"]} == {"metrics"}
    config_map = objects["ConfigMap"]
    assert set(config_map["data"]) == {exporter.SCRIPT, "slurm.conf"}
    assert f"SlurmctldHost={client.slurmctld_host}\n" in config_map["data"]["slurm.conf"]
    assert f"AuthType={client.auth}\n" in config_map["data"]["slurm.conf"]
    # scontrol ping addresses its credential to SlurmUser: a slurmctld running as another user could not read it.
    assert f"SlurmUser={client.slurm_user}\n" in config_map["data"]["slurm.conf"]
    env = {e["name"]: e["value"] for e in collect["env"]}
    assert env["SLURM_CONF"] == f"{exporter.CONFIG_DIR}/slurm.conf"
    assert env["SERIES_ACCOUNT_GPUS_ALLOCATED"] == series.ACCOUNT_GPUS_ALLOCATED
    for container in (collect, serve):
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False and context["readOnlyRootFilesystem"] is True
        assert context["capabilities"] == {"drop": ["ALL"]}
        assert container["resources"]["requests"] and container["resources"]["limits"]
    assert auth["resources"]["limits"]


@pytest.mark.parametrize("stack", SLURM_USERS)
def test_the_pods_run_at_the_slurm_class_where_the_operator_declares_it(stack):
    config = monitored(stack)
    pod = by_kind(config)["Deployment"]["spec"]["template"]["spec"]
    declared = [r.manifest["metadata"]["name"] for r in operator_module(config).render(config) if r.manifest["kind"] == "PriorityClass"]
    assert pod.get("priorityClassName") == (system_priority_class_name(config) if declared else None)
    assert (stack == "prod-hanoi") == (not declared)  # soperator 1.14.10 declares none


def test_the_server_is_node_exporter_with_the_textfile_collector_only_on_the_exporter_port():
    config = monitored("dev-lab", slurmExporter={"nodeExporterVersion": "v1.9.1", "interval": "2m"})
    found = containers(by_kind(config)["Deployment"])
    serve = found["serve"]
    assert serve["image"] == "quay.io/prometheus/node-exporter:v1.9.1"
    assert "--collector.disable-defaults" in serve["args"] and "--collector.textfile" in serve["args"]
    assert f"--collector.textfile.directory={exporter.METRICS_DIR}" in serve["args"]
    assert serve["ports"] == [{"name": series.EXPORTER_PORT_NAME, "containerPort": series.EXPORTER_PORT, "protocol": "TCP"}]
    assert serve["securityContext"]["runAsNonRoot"] is True
    assert {e["name"]: e["value"] for e in found["collect"]["env"]}["INTERVAL_SECONDS"] == "120"


@pytest.mark.parametrize(("duration", "seconds"), [("30s", 30), ("2m", 120), ("1h", 3600), ("500ms", 1), ("1500ms", 1)])
def test_the_interval_reaches_sleep_in_whole_seconds(duration, seconds):
    assert exporter.interval_seconds(duration) == seconds


def test_the_service_monitor_selects_the_service_with_the_prometheus_selector_labels_and_scrape_interval():
    config = monitored("dev-lab", scrapeInterval="15s", prometheus={"selectorLabels": {"prometheus": "platform"}})
    objects = by_kind(config)
    monitor, service, deployment = objects["ServiceMonitor"], objects["Service"], objects["Deployment"]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["prometheus"] == "platform"
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"] == config.cluster.namespace
    assert monitor["spec"]["endpoints"] == [{"port": series.EXPORTER_PORT_NAME, "path": "/metrics", "scheme": "http", "interval": "15s"}]
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert deployment["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"] == series.EXPORTER_APP
    assert service["metadata"]["name"] == f"{config.cluster.name}-{series.EXPORTER_APP}"
    # job="slurm-exporter": the Service label it names.
    assert service["metadata"]["labels"][monitor["spec"]["jobLabel"]] == series.EXPORTER_APP
    assert service["spec"]["ports"][0]["name"] == series.EXPORTER_PORT_NAME


@pytest.mark.parametrize("shell", ["sh", "bash", "dash"])
def test_the_collector_script_parses(shell):
    checked = subprocess.run([shell, "-n", str(exporter.Path(exporter.__file__).parent / exporter.SCRIPT)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


def test_the_script_names_no_series_itself_every_one_comes_from_series_py():
    names = [value for key, value in vars(series).items() if key.isupper() and isinstance(value, str) and value.startswith("slurm_")]
    assert names, "series.py names the exporter's series"
    assert not [name for name in names if name in exporter.SCRIPT_TEXT]
    assert set(exporter.SERIES_ENV.values()) == set(names)
    assert all(f"${key}" in exporter.SCRIPT_TEXT for key in exporter.SERIES_ENV)


# TRES lists as squeue's tres-alloc and scontrol's CfgTRES/AllocTRES print them: untyped and typed, typed only, none.
TRES_GPUS = [
    "cpu=2,mem=1G,node=1,billing=2,gres/gpu=2,gres/gpu:h100=2",
    "cpu=2,mem=1G,node=1,gres/gpu:h100=2,gres/gpu:a100=1",
    "cpu=2,mem=1G,node=1,gres/gpumem=80G,gres/gpu:h100=3",
    "cpu=2,mem=1G,node=1",
]


def fake_slurm(bin_dir, squeue: str, show_node: str) -> None:
    """Slurm's clients answering as the collector asks them: squeue's and `scontrol -o show node`'s lines given."""
    answers = {
        "squeue": f"cat <<'END'\n{squeue}\nEND\n",
        "sinfo": "true\n",
        "sacctmgr": "true\n",
        "scontrol": f'[ "$1" = ping ] && echo "Slurmctld(primary) at ctld is UP" && exit 0\ncat <<\'END\'\n{show_node}\nEND\n',
    }
    bin_dir.mkdir()
    for command, body in answers.items():
        (bin_dir / command).write_text(f"#!/bin/sh\n{body}")
        (bin_dir / command).chmod(0o755)


def test_the_collector_counts_a_tres_lists_gpus_as_the_report_does(tmp_path):
    """One gpus() in the script, for squeue's jobs and scontrol's nodes: gres/gpu, else the typed GPUs summed, as usage.tres_gpus."""
    squeue = "\n".join(f"{100 + i}|acct{i}|gpu|RUNNING|None|{tres}" for i, tres in enumerate(TRES_GPUS))
    show_node = "\n".join(f"NodeName=node-{i} State=MIXED CfgTRES={tres} AllocTRES={tres}" for i, tres in enumerate(TRES_GPUS))
    fake_slurm(tmp_path / "bin", squeue, show_node)
    metrics = tmp_path / "slurm.prom"
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "METRICS_FILE": str(metrics), "ONCE": "1", **exporter.SERIES_ENV}
    ran = subprocess.run(["sh", "-c", exporter.SCRIPT_TEXT], env=env, capture_output=True, text=True, timeout=30)
    assert ran.returncode == 0, ran.stderr
    text = metrics.read_text()
    expected = [usage.tres_gpus(tres) for tres in TRES_GPUS]
    assert expected == [2, 3, 3, 0]
    for i, gpus in enumerate(expected):
        assert f'{series.ACCOUNT_GPUS_ALLOCATED}{{account="acct{i}",partition="gpu"}} {gpus}\n' in text
        assert f'{series.NODE_GPUS}{{node="node-{i}"}} {gpus}\n' in text
        assert f'{series.NODE_GPUS_ALLOCATED}{{node="node-{i}"}} {gpus}\n' in text


def test_the_collector_lists_each_array_task_and_het_component_by_its_own_job_id():
    """squeue -r: a pending array's tasks each count their GPUs; -O JobID: the id the prolog's SLURM_JOB_ID is."""
    (squeue,) = [line for line in exporter.SCRIPT_TEXT.splitlines() if line.strip().startswith("squeue ")]
    assert " -r " in squeue and "'JobID:|," in squeue
    assert exporter.SCRIPT_TEXT.count("function gpus(") == 1

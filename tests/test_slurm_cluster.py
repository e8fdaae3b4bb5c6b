"""The pure builders of the SlurmCluster spec."""

import re

from components.config import parse_config
from components.slurm.common import WAIT_FOR_ANNOTATION
from components.slurm.soperator1 import (
    login_address,
    not_ready_message,
    removed_worker_nodes,
    restricted_login_service,
    scale_down_warning,
    service_names,
    slurm_cluster_manifest,
    ssh_line,
    worker_node_names,
)
from tests.contracts import SOPERATOR_CRD, crd_schema
from tests.harness import stack_config


def spec(stack=None, **raw):
    return slurm_cluster_manifest(parse_config(stack_config(stack) if stack else raw))["spec"]


def test_fpt_shape_of_the_default_cluster():
    s = spec()
    assert s["volumeSources"] == [
        {"name": "jail", "persistentVolumeClaim": {"claimName": "jail-pvc", "readOnly": False}},
        {"name": "controller-spool", "persistentVolumeClaim": {"claimName": "controller-spool-pvc", "readOnly": False}},
    ]
    nodes = s["slurmNodes"]
    assert nodes["controller"]["volumes"] == {"spool": {"volumeSourceName": "controller-spool"}, "jail": {"volumeSourceName": "jail"}}
    worker = nodes["worker"]
    assert worker["size"] == 8 and worker["k8sNodeFilterName"] == "gpu" and worker["cgroupVersion"] == "v2"
    assert worker["slurmd"]["resources"] == {
        "cpu": "110000m",
        "memory": "1220Gi",
        "ephemeral-storage": "55Gi",
        "nvidia.com/gpu": "8",
        "rdma/rdma_shared_device_a": "1",
    }
    assert worker["volumes"]["spool"]["volumeClaimTemplateSpec"]["resources"]["requests"]["storage"] == "120Gi"
    assert worker["volumes"]["sharedMemorySize"] == "64Gi"
    login = nodes["login"]
    assert login["size"] == 2 and login["sshdServiceType"] == "NodePort" and login["sshdServiceNodePort"] == 30022
    assert (
        nodes["accounting"]["enabled"] and nodes["accounting"]["mariadbOperator"]["storage"]["volumeClaimTemplate"]["storageClassName"] == "xplat-nfs"
    )
    assert nodes["exporter"]["enabled"]
    assert [f["name"] for f in s["k8sNodeFilters"]] == ["gpu", "no-gpu"]


def test_periodic_checks_drain_on_nccl_failure_and_use_infiniband_with_rdma():
    nccl = spec()["periodicChecks"]["ncclBenchmark"]
    assert nccl["failureActions"] == {"setSlurmNodeDrainState": True}
    assert nccl["ncclArguments"]["useInfiniband"] is True
    assert nccl["k8sNodeFilterName"] == "no-gpu" and nccl["ncclArguments"]["thresholdMoreThan"] == "400"
    hangzhou = spec("prod-hangzhou")["periodicChecks"]["ncclBenchmark"]
    assert hangzhou["ncclArguments"]["useInfiniband"] is False


def test_populate_jail_never_overwrites_by_default():
    assert spec()["populateJail"]["overwrite"] is False
    wipe = spec(slurm={"populateJail": {"overwrite": True}})
    assert wipe["populateJail"]["overwrite"] is True


def test_submounts_are_identical_on_login_and_worker():
    s = spec("prod-hanoi")
    login = s["slurmNodes"]["login"]["volumes"]["jailSubMounts"]
    worker = s["slurmNodes"]["worker"]["volumes"]["jailSubMounts"]
    assert login == worker == [{"name": "mlcommons-sd-bench-data", "mountPath": "/mnt/data-hps", "volumeSourceName": "mlperf-sd"}]
    assert {"name": "mlperf-sd", "persistentVolumeClaim": {"claimName": "jail-submount-mlperf-sd-pvc", "readOnly": False}} in s["volumeSources"]


def test_external_accounting_database():
    accounting = spec("prod-hangzhou")["slurmNodes"]["accounting"]
    assert "mariadbOperator" not in accounting
    assert accounting["externalDB"] == {
        "enabled": True,
        "host": "rm-bp1example.mysql.rds.aliyuncs.com",
        "port": 3306,
        "user": "slurm",
        "passwordSecretKeyRef": {"name": "slurm-accounting-db", "key": "password"},
    }


def test_accounting_off():
    assert spec(slurm={"accounting": {"enabled": False}})["slurmNodes"]["accounting"] == {"enabled": False, "k8sNodeFilterName": "no-gpu"}


def test_login_exposure():
    hanoi = parse_config(stack_config("prod-hanoi"))
    service = restricted_login_service(hanoi)
    assert service is not None and service["spec"]["type"] == "LoadBalancer" and service["spec"]["selector"]
    assert service_names(hanoi) == {"controller": "fpt-hpc-controller-svc", "login": "fpt-hpc-login-svc", "ssh": "fpt-hpc-login-ssh"}
    # soperator's own login Service must not be a public LoadBalancer then
    assert slurm_cluster_manifest(hanoi)["spec"]["slurmNodes"]["login"]["sshdServiceType"] == "NodePort"
    assert restricted_login_service(parse_config({})) is None
    assert (
        spec(slurm={"login": {"serviceType": "LoadBalancer", "loadBalancerIp": "203.0.113.7"}})["slurmNodes"]["login"]["sshdServiceLoadBalancerIP"]
        == "203.0.113.7"
    )


def lb_service(port=22, **ingress):
    return {"spec": {"type": "LoadBalancer", "ports": [{"port": port}]}, "status": {"loadBalancer": {"ingress": [ingress]}}}


def test_login_address_comes_from_the_live_service():
    hanoi = parse_config(stack_config("prod-hanoi"))
    assert login_address(hanoi, lb_service(ip="198.51.100.20")) == ("198.51.100.20", 22)
    assert login_address(hanoi, lb_service(hostname="ssh.example.vn")) == ("ssh.example.vn", 22)
    # Not assigned yet: nothing invented.
    assert login_address(hanoi, {"spec": {"type": "LoadBalancer", "ports": [{"port": 22}]}, "status": {"loadBalancer": {}}}) == (None, 22)
    node_port = {"spec": {"type": "NodePort", "ports": [{"port": 22, "nodePort": 31022}]}, "status": {}}
    default = parse_config({})
    assert login_address(default, node_port) == (None, 31022)
    assert login_address(default, None) == (None, 30022)
    named = parse_config({"slurm": {"login": {"sshAddress": "login.hpc.example.vn"}}})
    assert login_address(named, node_port) == ("login.hpc.example.vn", 31022)


def test_ssh_command_is_a_plain_ssh_line():
    assert ssh_line("198.51.100.20", 22) == "ssh root@198.51.100.20"
    assert ssh_line("login.hpc.example.vn", 31022) == "ssh -p 31022 root@login.hpc.example.vn"
    assert ssh_line(None, 30022) == "ssh -p 30022 root@<any-node-ip>"
    assert ssh_line(None, 22) == "ssh root@<pending address>"
    for command in (ssh_line("h", 22), ssh_line(None, 30022)):
        assert "kubectl" not in command and "$(" not in command


def test_the_cluster_is_awaited_unless_render_only():
    hanoi = slurm_cluster_manifest(parse_config(stack_config("prod-hanoi")))
    assert hanoi["metadata"]["annotations"] == {WAIT_FOR_ANNOTATION: "jsonpath={.status.phase}=Available"}
    local = slurm_cluster_manifest(parse_config(stack_config("local")))
    assert "annotations" not in local["metadata"]
    off = parse_config({**stack_config("prod-hanoi"), "slurm": {"readiness": {"awaitAvailable": False}}})
    assert "annotations" not in slurm_cluster_manifest(off)["metadata"]


def test_not_ready_message_quotes_soperator_conditions():
    config = parse_config({})
    status = {
        "phase": "Not available",
        "conditions": [
            {"type": "ControllersAvailable", "status": "True", "message": "Slurm controllers are available"},
            {"type": "LoginAvailable", "status": "False", "message": "Slurm login is not available yet"},
        ],
    }
    message = not_ready_message(config, status)
    assert message is not None
    assert message.startswith("SlurmCluster fpt-hpc/fpt-hpc is 'Not available', not Available")
    assert "LoginAvailable=False: Slurm login is not available yet" in message
    assert "ControllersAvailable" not in message
    assert not_ready_message(config, {"phase": "Available"}) is None
    assert not_ready_message(config, None) is None


def test_worker_names_and_scale_down():
    assert worker_node_names(3) == ["worker-0", "worker-1", "worker-2"]
    assert removed_worker_nodes(worker_node_names(10), 8) == ["worker-8", "worker-9"]
    assert removed_worker_nodes(worker_node_names(8), 10) == []
    assert removed_worker_nodes(None, 2) == []
    assert scale_down_warning([]) is None
    assert "scontrol delete nodeName=worker-8,worker-9" in str(scale_down_warning(["worker-8", "worker-9"]))


def test_the_awaited_field_exists_in_soperators_status_schema():
    annotation = slurm_cluster_manifest(parse_config(stack_config("prod-hanoi")))["metadata"]["annotations"][WAIT_FOR_ANNOTATION]
    match = re.fullmatch(r"jsonpath=\{\.([a-z.A-Z]+)\}=(\w+)", annotation)
    assert match is not None, annotation
    schema = crd_schema(SOPERATOR_CRD)
    for field in match.group(1).split("."):
        schema = schema["properties"][field]
    assert schema["type"] == "string" and match.group(2) == "Available"

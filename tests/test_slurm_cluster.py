"""The pure builders of soperator 1.14.10's SlurmCluster spec (components/slurm/soperator1.py)."""

from components.config import parse_config
from components.slurm.soperator1 import login_endpoint, restricted_login_service, slurm_cluster_manifest, ssh_command
from components.slurm_cluster import removed_worker_nodes, scale_down_warning, worker_node_names
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
    assert nodes["accounting"]["enabled"] and nodes["accounting"]["mariadbOperator"]["storage"]["volumeClaimTemplate"]["storageClassName"] == "xplat-nfs"
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
    assert service["spec"]["type"] == "LoadBalancer" and service["spec"]["selector"]
    assert login_endpoint(hanoi).startswith("fpt-hpc-login-ssh.fpt-hpc:22")
    # soperator's own login Service must not be a public LoadBalancer then
    assert slurm_cluster_manifest(hanoi)["spec"]["slurmNodes"]["login"]["sshdServiceType"] == "NodePort"
    assert restricted_login_service(parse_config({})) is None
    assert ssh_command(parse_config({})) == "ssh -p 30022 root@<any-node-ip>"
    fixed_ip = parse_config({"slurm": {"login": {"serviceType": "LoadBalancer", "loadBalancerIp": "203.0.113.7"}}})
    assert ssh_command(fixed_ip) == "ssh root@203.0.113.7"
    assert spec(slurm={"login": {"serviceType": "LoadBalancer", "loadBalancerIp": "203.0.113.7"}})["slurmNodes"]["login"][
        "sshdServiceLoadBalancerIP"
    ] == "203.0.113.7"


def test_worker_names_and_scale_down():
    assert worker_node_names(3) == ["worker-0", "worker-1", "worker-2"]
    assert removed_worker_nodes(worker_node_names(10), 8) == ["worker-8", "worker-9"]
    assert removed_worker_nodes(worker_node_names(8), 10) == []
    assert removed_worker_nodes(None, 2) == []
    assert scale_down_warning([]) is None
    assert "scontrol delete nodeName=worker-8,worker-9" in scale_down_warning(["worker-8", "worker-9"])

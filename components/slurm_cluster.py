"""The soperator `SlurmCluster` (`slurm.nebius.ai/v1`) in the 1.14.10 shape that
FPT's `helm-slurm-cluster` chart renders.

Each part of the spec has its own pure builder (config in, plain dict out), in
the spirit of soperator's own render package; `SlurmCluster` only declares the
custom resource, the restricted login Service, and the outputs.
"""

from __future__ import annotations

from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from . import child_opts

from .config import PlatformConfig, PodResources
from .node_pools import GPU_FILTER, NO_GPU_FILTER, k8s_node_filters
from .storage import JAIL_SOURCE, SPOOL_SOURCE, data_volumes

API_VERSION = "slurm.nebius.ai/v1"
KIND = "SlurmCluster"
SSHD_PORT = 22

# soperator 1.14.10 image names under the registry, by component.
IMAGES = {
    "populateJail": "populate_jail",
    "ncclBenchmark": "nccl_benchmark",
    "slurmctld": "controller_slurmctld",
    "slurmd": "worker_slurmd",
    "sshd": "login_sshd",
    "munge": "munge",
    "slurmdbd": "controller_slurmdbd",
    "exporter": "exporter",
}


def image(config: PlatformConfig, component: str) -> str:
    images = config.slurm.images
    return f"{images.registry}/{IMAGES[component]}:{images.tag}"


def resources(pod: PodResources) -> dict[str, Any]:
    """Container resources keyed by Kubernetes resource name, as the chart renders them."""
    return {"cpu": pod.cpu, "memory": pod.memory, "ephemeral-storage": pod.ephemeral_storage}


def munge_container(config: PlatformConfig, pod: PodResources) -> dict[str, Any]:
    return {"image": image(config, "munge"), "resources": resources(pod)}


def volume_sources(config: PlatformConfig) -> list[dict[str, Any]]:
    return [
        {"name": v.source_name, "persistentVolumeClaim": {"claimName": v.claim_name, "readOnly": False}}
        for v in data_volumes(config)
    ]


def jail_sub_mounts(config: PlatformConfig) -> list[dict[str, Any]]:
    """Identical on login and worker nodes: the same path everywhere is what makes a submount shared."""
    return [
        {"name": sub.mount_name or sub.name, "mountPath": sub.mount_path, "volumeSourceName": sub.name}
        for sub in config.storage.submounts
    ]


def uses_infiniband(config: PlatformConfig) -> bool:
    explicit = config.slurm.nccl_benchmark.use_infiniband
    return config.has_rdma if explicit is None else explicit


def periodic_checks(config: PlatformConfig) -> dict[str, Any]:
    nccl = config.slurm.nccl_benchmark
    return {
        "ncclBenchmark": {
            "enabled": nccl.enabled,
            "schedule": nccl.schedule,
            "activeDeadlineSeconds": 1800,
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 3,
            "image": image(config, "ncclBenchmark"),
            # The benchmark job only submits Slurm jobs; it runs off the GPU nodes.
            "k8sNodeFilterName": NO_GPU_FILTER,
            "ncclArguments": {
                "minBytes": "512Mb",
                "maxBytes": "8Gb",
                "stepFactor": "2",
                "timeout": "20:00",
                "thresholdMoreThan": nccl.min_bandwidth_gbps,
                "useInfiniband": uses_infiniband(config),
            },
            "failureActions": {"setSlurmNodeDrainState": nccl.drain_on_failure},
        }
    }


def populate_jail(config: PlatformConfig) -> dict[str, Any]:
    return {
        "image": image(config, "populateJail"),
        "k8sNodeFilterName": GPU_FILTER,
        "overwrite": config.slurm.populate_jail.overwrite,
    }


def accounting_node(config: PlatformConfig) -> dict[str, Any]:
    accounting = config.slurm.accounting
    node: dict[str, Any] = {"enabled": accounting.enabled, "k8sNodeFilterName": NO_GPU_FILTER}
    if not accounting.enabled:
        return node
    node.update(
        slurmdbd={"image": image(config, "slurmdbd"), "port": 6819, "resources": resources(accounting.slurmdbd)},
        munge=munge_container(config, accounting.munge),
    )
    if accounting.database == "external":
        assert accounting.external is not None
        external = accounting.external
        node["externalDB"] = {
            "enabled": True,
            "host": external.host,
            "port": external.port,
            "user": external.user,
            "passwordSecretKeyRef": {"name": external.password_secret_name, "key": external.password_secret_key},
        }
    else:
        node["mariadbOperator"] = {
            "enabled": True,
            "image": config.slurm.images.mariadb,
            "resources": resources(accounting.mariadb),
            "replicas": 1,
            "replication": {},
            "metrics": {"enabled": False},
            "storage": {
                "ephemeral": False,
                "volumeClaimTemplate": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": accounting.storage_size}},
                    "storageClassName": accounting.storage_class_name,
                },
            },
        }
    return node


def controller_node(config: PlatformConfig) -> dict[str, Any]:
    controller = config.slurm.controller
    return {
        "size": controller.size,
        "k8sNodeFilterName": NO_GPU_FILTER,
        "slurmctld": {"image": image(config, "slurmctld"), "port": 6817, "resources": resources(controller.slurmctld)},
        "munge": munge_container(config, controller.munge),
        "volumes": {"spool": {"volumeSourceName": SPOOL_SOURCE}, "jail": {"volumeSourceName": JAIL_SOURCE}},
    }


def worker_node(config: PlatformConfig) -> dict[str, Any]:
    worker = config.slurm.worker
    slurmd = {**resources(worker.slurmd), "nvidia.com/gpu": str(worker.slurmd.gpu)}
    if config.worker_rdma:
        # The resource the NicClusterPolicy's RDMA shared device plugin advertises.
        slurmd[f"rdma/{config.operators.network_operator.rdma_resource_name}"] = str(config.worker_rdma)
    return {
        "size": worker.size,
        "k8sNodeFilterName": GPU_FILTER,
        "cgroupVersion": worker.cgroup_version,
        "slurmd": {"image": image(config, "slurmd"), "port": 6818, "resources": slurmd},
        "munge": munge_container(config, worker.munge),
        "volumes": {
            "spool": {
                "volumeClaimTemplateSpec": {
                    "storageClassName": worker.spool_storage_class_name,
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": worker.spool_size}},
                }
            },
            "jail": {"volumeSourceName": JAIL_SOURCE},
            "jailSubMounts": jail_sub_mounts(config),
            "sharedMemorySize": worker.shared_memory_size,
        },
    }


def operator_login_service_type(config: PlatformConfig) -> str:
    """With source ranges, SSH goes through our restricted Service; soperator's stays inside the VPC."""
    login = config.slurm.login
    return "NodePort" if login.allowed_source_ranges else login.service_type


def login_node(config: PlatformConfig) -> dict[str, Any]:
    login = config.slurm.login
    node: dict[str, Any] = {
        "size": login.size,
        "k8sNodeFilterName": NO_GPU_FILTER,
        "sshd": {"image": image(config, "sshd"), "port": SSHD_PORT, "resources": resources(login.sshd)},
        "sshRootPublicKeys": list(login.ssh_root_public_keys),
        "sshdServiceType": operator_login_service_type(config),
        "sshdServiceAnnotations": {} if login.allowed_source_ranges else dict(login.service_annotations),
        "munge": munge_container(config, login.munge),
        "volumes": {"jail": {"volumeSourceName": JAIL_SOURCE}, "jailSubMounts": jail_sub_mounts(config)},
    }
    if node["sshdServiceType"] == "NodePort":
        node["sshdServiceNodePort"] = login.node_port
    else:
        node["sshdServiceLoadBalancerIP"] = login.load_balancer_ip or ""
    return node


def exporter_node(config: PlatformConfig) -> dict[str, Any]:
    exporter = config.slurm.exporter
    return {
        "enabled": exporter.enabled,
        "size": 1,
        "k8sNodeFilterName": NO_GPU_FILTER,
        "exporter": {"image": image(config, "exporter"), "resources": resources(exporter.resources)},
        "munge": munge_container(config, exporter.munge),
        "volumes": {"jail": {"volumeSourceName": JAIL_SOURCE}},
    }


def slurm_cluster_manifest(config: PlatformConfig) -> dict[str, Any]:
    """The whole custom resource, as `kubectl apply` would take it."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": config.cluster.name, "namespace": config.cluster.namespace},
        "spec": {
            "crVersion": config.operators.soperator.version,
            "pause": False,
            "clusterType": "gpu",
            "ncclSettings": {"topologyType": "auto", "topologyData": ""},
            "k8sNodeFilters": k8s_node_filters(config.node_pools),
            "volumeSources": volume_sources(config),
            "periodicChecks": periodic_checks(config),
            "populateJail": populate_jail(config),
            "secrets": {"sshdKeysName": f"{config.cluster.name}-sshd-keys"},
            "slurmNodes": {
                "accounting": accounting_node(config),
                "controller": controller_node(config),
                "worker": worker_node(config),
                "login": login_node(config),
                "exporter": exporter_node(config),
            },
        },
    }


# --- login exposure ---------------------------------------------------------



def login_pod_selector(config: PlatformConfig) -> dict[str, str]:
    """Labels soperator puts on login pods (used by our restricted SSH Service)."""
    return {"app.kubernetes.io/component": "login", "app.kubernetes.io/instance": config.cluster.name}


def login_service_name(config: PlatformConfig) -> str:
    """The Service users SSH through: our restricted one when ranges are set, else soperator's."""
    suffix = "login-ssh" if config.slurm.login.allowed_source_ranges else "login-svc"
    return f"{config.cluster.name}-{suffix}"


def restricted_login_service(config: PlatformConfig) -> Optional[dict[str, Any]]:
    """A LoadBalancer reachable only from `allowedSourceRanges`.

    The 1.14.10 CRD has no source-range field, so when ranges are configured
    we expose SSH through this Service of our own instead of trusting the
    operator's `<cluster>-login-svc` to the open internet.
    """
    login = config.slurm.login
    if not login.allowed_source_ranges:
        return None
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": login_service_name(config),
            "namespace": config.cluster.namespace,
            "annotations": dict(login.service_annotations),
        },
        "spec": {
            "type": "LoadBalancer",
            "loadBalancerSourceRanges": list(login.allowed_source_ranges),
            "externalTrafficPolicy": "Local",
            "selector": login_pod_selector(config),
            "ports": [{"name": "ssh", "port": SSHD_PORT, "targetPort": SSHD_PORT, "protocol": "TCP"}],
            **({"loadBalancerIP": login.load_balancer_ip} if login.load_balancer_ip else {}),
        },
    }


def login_endpoint(config: PlatformConfig) -> str:
    """Where users SSH to, as far as it is known before the cloud assigns addresses."""
    login = config.slurm.login
    if login.load_balancer_ip:
        return f"{login.load_balancer_ip}:{SSHD_PORT}"
    if login.service_type == "NodePort" and not login.allowed_source_ranges:
        return f"<any-node-ip>:{login.node_port}"
    return f"{login_service_name(config)}.{config.cluster.namespace}:{SSHD_PORT} (LoadBalancer address)"


def ssh_command(config: PlatformConfig) -> str:
    login = config.slurm.login
    if login.load_balancer_ip:
        return f"ssh root@{login.load_balancer_ip}"
    if login.service_type == "NodePort" and not login.allowed_source_ranges:
        return f"ssh -p {login.node_port} root@<any-node-ip>"
    return (
        f"ssh root@$(kubectl get svc {login_service_name(config)} -n {config.cluster.namespace} "
        "-o jsonpath='{.status.loadBalancer.ingress[0].ip}')"
    )


# --- scaling down -------------------------------------------------------------


def worker_node_names(size: int) -> list[str]:
    """soperator names Slurm workers worker-0 .. worker-(size-1)."""
    return [f"worker-{i}" for i in range(size)]


def removed_worker_nodes(previous: Optional[list[str]], size: int) -> list[str]:
    if not previous:
        return []
    keep = set(worker_node_names(size))
    return [node for node in previous if node not in keep]


def scale_down_warning(removed: list[str]) -> Optional[str]:
    if not removed:
        return None
    return (
        f"Slurm workers {', '.join(removed)} will disappear. soperator does not remove them from slurmctld: "
        f"after `pulumi up`, run on a login node: scontrol delete nodeName={','.join(removed)}"
    )


def warn_about_removed_workers(config: PlatformConfig) -> None:
    """Warn at preview time, comparing with the workers this stack last exported."""
    this_stack = pulumi.StackReference(f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}")

    def warn(previous: Optional[list[str]]) -> None:
        message = scale_down_warning(removed_worker_nodes(previous, config.slurm.worker.size))
        if message:
            pulumi.log.warn(message)

    this_stack.get_output("workerNodes").apply(warn)


class SlurmCluster(pulumi.ComponentResource):
    worker_nodes: pulumi.Output[list]
    login_endpoint: pulumi.Output[str]
    ssh_command: pulumi.Output[str]

    def __init__(self, name: str, config: PlatformConfig, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("slurm-platform:slurm_cluster:SlurmCluster", name, None, opts)
        manifest = slurm_cluster_manifest(config)
        self.cluster = k8s.apiextensions.CustomResource(
            f"{name}-cluster",
            api_version=manifest["apiVersion"],
            kind=manifest["kind"],
            metadata=manifest["metadata"],
            spec=config.secret_if("slurm", manifest["spec"]),
            opts=child_opts(self, opts),
        )
        service = restricted_login_service(config)
        if service is not None:
            k8s.core.v1.Service(
                f"{name}-login-ssh",
                metadata=service["metadata"],
                spec=service["spec"],
                opts=child_opts(self, opts),
            )
        self.worker_nodes = pulumi.Output.from_input(worker_node_names(config.slurm.worker.size))
        self.login_endpoint = pulumi.Output.from_input(login_endpoint(config))
        self.ssh_command = pulumi.Output.from_input(ssh_command(config))
        self.register_outputs(
            {"workerNodes": self.worker_nodes, "loginEndpoint": self.login_endpoint, "sshCommand": self.ssh_command}
        )

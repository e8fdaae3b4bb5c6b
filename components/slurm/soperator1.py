"""soperator 1.14.10, the release behind FPT's `helm-slurm-cluster` chart: one
`SlurmCluster` (`slurm.nebius.ai/v1`) holding every Slurm node kind, workers
included, plus our restricted SSH Service when source ranges are configured.

Each part of the spec has its own pure builder (config in, plain dict out), in
the spirit of soperator's own render package.
"""

from __future__ import annotations

from typing import Any, Optional

from ..charts import ChartRelease
from ..config import NodePoolConfig, PlatformConfig
from ..config.soperator import IMAGE_TAGS, image_tag
from ..names import SLURMD_PORT, SSHD_PORT, soperator_login_service_name
from ..render.node_pools import GPU_FILTER, NO_GPU_FILTER, k8s_node_filters
from ..render.storage import JAIL_SOURCE
from . import AccountingClient, KeySecret, PodRoles, Rendered, soperator
from .common import resources
from .soperator import (
    API_VERSION,
    KIND,
    jail_sub_mounts,
    login_service_name,
    operator_login_service_type,
    restricted_login_service,
    slurm_cluster_annotations,
    volume_sources,
)

IMAGE_TAG = IMAGE_TAGS["1.14.10"]

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
    return f"{images.registry}/{IMAGES[component]}:{image_tag(config)}"


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
        "slurmd": {"image": image(config, "slurmd"), "port": SLURMD_PORT, "resources": slurmd},
        "munge": soperator.munge_container(config, image, worker.munge),
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


def slurm_cluster_manifest(config: PlatformConfig) -> dict[str, Any]:
    """The whole custom resource, as `kubectl apply` would take it."""
    metadata: dict[str, Any] = {"name": config.cluster.name, "namespace": config.cluster.namespace}
    annotations = slurm_cluster_annotations(config)
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": metadata,
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
                "accounting": soperator.accounting_node(config, image),
                "controller": soperator.controller_node(config, image),
                "worker": worker_node(config),
                "login": soperator.login_node(config, image),
                "exporter": soperator.exporter_node(config, image),
            },
        },
    }


# --- login exposure ---------------------------------------------------------


def service_names(config: PlatformConfig) -> dict[str, str]:
    """soperator 1.14.10's Services (`<cluster>-<component>-svc`) and the one users SSH through."""
    cluster = config.cluster.name
    return {
        "controller": f"{cluster}-controller-svc",
        "login": soperator_login_service_name(cluster),
        "ssh": login_service_name(config),
    }


def login_address(config: PlatformConfig, service: Optional[dict[str, Any]]) -> tuple[Optional[str], int]:
    """(host, port) users SSH to, from the live login Service (None when there is none, e.g. render-only).

    A LoadBalancer's host is its first `status.loadBalancer.ingress` IP or hostname;
    a NodePort login listens on every node at the Service's `nodePort`, so the host
    is `slurm.login.sshAddress` when set.
    """
    login = config.slurm.login
    spec = (service or {}).get("spec") or {}
    ports = spec.get("ports") or [{}]
    if spec.get("type", operator_login_service_type(config)) == "NodePort" and not login.allowed_source_ranges:
        return login.ssh_address, int(ports[0].get("nodePort") or login.node_port)
    ingress = (((service or {}).get("status") or {}).get("loadBalancer") or {}).get("ingress") or [{}]
    host = ingress[0].get("ip") or ingress[0].get("hostname") or login.load_balancer_ip or None
    return host, int(ports[0].get("port") or SSHD_PORT)


def ssh_line(host: Optional[str], port: int) -> str:
    """A plain `ssh` line; `<any-node-ip>`/`<pending address>` mark what is not known yet."""
    target = host or ("<any-node-ip>" if port != SSHD_PORT else "<pending address>")
    return f"ssh root@{target}" if port == SSHD_PORT else f"ssh -p {port} root@{target}"


# --- scaling down -------------------------------------------------------------


def worker_node_names(size: int) -> list[str]:
    """soperator names Slurm workers worker-0 .. worker-(size-1)."""
    return [f"worker-{i}" for i in range(size)]


def removed_worker_nodes(previous: Optional[list[str]], size: int) -> list[str]:
    if not previous:
        return []
    keep = set(worker_node_names(size))
    return [node for node in previous if node not in keep]


def removed_workers_warning(config: PlatformConfig, previous_workers: Optional[list[str]]) -> Optional[str]:
    """Warn at preview time, comparing with the workers this stack last exported."""
    return scale_down_warning(removed_worker_nodes(previous_workers, config.slurm.worker.size))


def scale_down_warning(removed: list[str]) -> Optional[str]:
    if not removed:
        return None
    return (
        f"Slurm workers {', '.join(removed)} will disappear. soperator does not remove them from slurmctld: "
        f"after `pulumi up`, run on a login node: scontrol delete nodeName={','.join(removed)}"
    )


def login_endpoint(config: PlatformConfig, live_service: Optional[dict[str, Any]]) -> Optional[str]:
    """`host:port` from the live login Service (live_login_service); None while it has no address."""
    host, port = login_address(config, live_service)
    return f"{host}:{port}" if host else None


def ssh_command(config: PlatformConfig, live_service: Optional[dict[str, Any]]) -> str:
    return ssh_line(*login_address(config, live_service))


def user_ssh_command(config: PlatformConfig, live_service: Optional[dict[str, Any]]) -> Optional[str]:
    """None: 1.14.10 cannot read the directory (no sssd, no sshd_config of ours), and tenants are refused on it."""
    return None


def live_login_service(config: PlatformConfig) -> str:
    """Its address is read from the live Service: ours when restricted (declared), else soperator's."""
    return login_service_name(config)


# --- the module interface -------------------------------------------------------

OPERATOR = "soperator 1.14.10"
not_ready_message = soperator.not_ready_message
USES_MUNGE = True
GHOST_NODES_ON_SCALE_DOWN = True


def chart_releases(config: PlatformConfig, after: tuple[str, ...] = ()) -> list[ChartRelease]:
    return soperator.soperator_releases(config, soperator.operator_values(config), after)


def needs_cert_manager(config: PlatformConfig) -> bool:
    return False  # 1.14.10 registers no webhooks


def render(config: PlatformConfig) -> list[Rendered]:
    # The component reports the cluster's phase (and reads the login Service once it is up).
    rendered = [Rendered("cluster", slurm_cluster_manifest(config), live_status=True, ready_when=soperator.READY)]
    service = restricted_login_service(config)
    if service is not None:
        # Its await needs ready login pods behind it, which exist once the cluster is Available.
        rendered.append(Rendered("login-ssh", service, after_cluster=True))
    return rendered


def key_secrets(config: PlatformConfig) -> list[KeySecret]:
    return []  # the munge key is the platform's


def worker_nodes(config: PlatformConfig) -> list[str]:
    return worker_node_names(config.slurm.worker.size)


def accounting_client(config: PlatformConfig) -> AccountingClient:
    return soperator.accounting_client(config, image, lambda pool: pool_feature(config, pool))


def pool_feature(config: PlatformConfig, pool: NodePoolConfig) -> Optional[str]:
    """1.14.10 has one worker group: every Slurm node is the pool's."""
    return None


def pod_roles(config: PlatformConfig) -> PodRoles:
    """1.14.10's workers are the SlurmCluster's own (component worker); it runs no slurmrestd."""
    return soperator.pod_roles(config, "worker", rest_enabled=False)

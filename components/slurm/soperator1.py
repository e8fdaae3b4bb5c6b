"""soperator 1.14.10, the release behind FPT's `helm-slurm-cluster` chart: one
`SlurmCluster` (`slurm.nebius.ai/v1`) holding every Slurm node kind, workers
included, plus our restricted SSH Service when source ranges are configured.

Each part of the spec has its own pure builder (config in, plain dict out), in
the spirit of soperator's own render package.
"""

from __future__ import annotations

from typing import Any, Optional

from ..charts import SOPERATOR, SOPERATOR_CRDS, ChartRelease, chart_source, deep_merge, uses_mariadb_operator
from ..config import NodePoolConfig, PlatformConfig, PodResources
from ..munge import MUNGE_KEY_FIELD, munge_secret_name
from ..node_pools import GPU_FILTER, NO_GPU_FILTER, k8s_node_filters
from ..storage import JAIL_SOURCE, SPOOL_SOURCE, data_volumes
from . import AccountingClient, KeySecret, Rendered
from .common import SSHD_PORT, WAIT_FOR_ANNOTATION, node_port_fields, resources, ssh_command_for, ssh_endpoint, unmet_conditions

API_VERSION = "slurm.nebius.ai/v1"
KIND = "SlurmCluster"
# soperator 1.14.10 phases: Reconciling -> Not available (validating) -> Available.
READY_PHASE = "Available"

IMAGE_TAG = "1.14.10-jammy-slurm24.05.2"

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
    return f"{images.registry}/{IMAGES[component]}:{images.tag or IMAGE_TAG}"


def munge_container(config: PlatformConfig, pod: PodResources) -> dict[str, Any]:
    return {"image": image(config, "munge"), "resources": resources(pod)}


def volume_sources(config: PlatformConfig) -> list[dict[str, Any]]:
    return [{"name": v.source_name, "persistentVolumeClaim": {"claimName": v.claim_name, "readOnly": False}} for v in data_volumes(config)]


def jail_sub_mounts(config: PlatformConfig) -> list[dict[str, Any]]:
    """Identical on login and worker nodes: the same path everywhere is what makes a submount shared."""
    return [{"name": sub.mount_name or sub.name, "mountPath": sub.mount_path, "volumeSourceName": sub.name} for sub in config.storage.submounts]


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


def awaits_readiness(config: PlatformConfig) -> bool:
    """A render-only stack has no cluster whose status could be watched."""
    return config.slurm.readiness.await_available and not config.render_only


def slurm_cluster_annotations(config: PlatformConfig) -> dict[str, str]:
    # pulumi-kubernetes watches the object until the JSONPath matches (its generic await).
    return {WAIT_FOR_ANNOTATION: f"jsonpath={{.status.phase}}={READY_PHASE}"} if awaits_readiness(config) else {}


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
            **node_port_fields(config),
            "selector": login_pod_selector(config),
            "ports": [{"name": "ssh", "port": SSHD_PORT, "targetPort": SSHD_PORT, "protocol": "TCP"}],
            **({"loadBalancerIP": login.load_balancer_ip} if login.load_balancer_ip else {}),
        },
    }


def service_names(config: PlatformConfig) -> dict[str, str]:
    """soperator 1.14.10's Services (`<cluster>-<component>-svc`) and the one users SSH through."""
    cluster = config.cluster.name
    return {
        "controller": f"{cluster}-controller-svc",
        "login": f"{cluster}-login-svc",
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


def not_ready_message(config: PlatformConfig, status: Optional[dict[str, Any]]) -> Optional[str]:
    """soperator's own words when the live cluster is not Available; None when it is (or is not known)."""
    phase = (status or {}).get("phase")
    if not phase or phase == READY_PHASE:
        return None
    failing = unmet_conditions(status)
    return (
        f"SlurmCluster {config.cluster.namespace}/{config.cluster.name} is {phase!r}, not {READY_PHASE}"
        + (f"; {'; '.join(failing)}" if failing else "")
        + f". Inspect: kubectl -n {config.cluster.namespace} get slurmcluster {config.cluster.name} -o yaml"
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


def live_login_service(config: PlatformConfig) -> str:
    """Its address is read from the live Service: ours when restricted (declared), else soperator's."""
    return login_service_name(config)


def static_login_endpoint(config: PlatformConfig, live_service: Optional[dict[str, Any]] = None) -> str:
    """As far as config knows it (soperator 4.1.7, which reads no Service back)."""
    return ssh_endpoint(config, login_service_name(config), node_port=uses_node_port(config))


def static_ssh_command(config: PlatformConfig, live_service: Optional[dict[str, Any]] = None) -> str:
    return ssh_command_for(config, login_service_name(config), node_port=uses_node_port(config))


def uses_node_port(config: PlatformConfig) -> bool:
    """Users reach soperator's own NodePort Service (no restricted LoadBalancer of ours)."""
    login = config.slurm.login
    return login.service_type == "NodePort" and not login.allowed_source_ranges


# --- the module interface -------------------------------------------------------

OPERATOR = "soperator 1.14.10"
USES_MUNGE = True
GHOST_NODES_ON_SCALE_DOWN = True
CRD_RELEASES = (SOPERATOR_CRDS,)


def operator_values(config: PlatformConfig) -> dict[str, Any]:
    # The operator registers the MariaDB scheme (and reconciles MariaDB CRs) only when told the CRDs exist.
    mariadb = "true" if uses_mariadb_operator(config) else "false"
    return {"controllerManager": {"manager": {"env": {"isMariadbCrdInstalled": mariadb}}}}


def soperator_releases(config: PlatformConfig, values: dict[str, Any], after: tuple[str, ...]) -> list[ChartRelease]:
    """The CRDs chart, then the operator chart (shared by every soperator release)."""
    sop = config.operators.soperator
    if not sop.install:
        return []
    crds_chart, crds_repo = chart_source(sop.repository, "helm-soperator-crds")
    chart, repo = chart_source(sop.repository, "helm-soperator")
    return [
        ChartRelease(SOPERATOR_CRDS, crds_chart, sop.version, sop.namespace, repo=crds_repo),
        ChartRelease(
            SOPERATOR,
            chart,
            sop.version,
            sop.namespace,
            deep_merge(values, sop.values),
            repo=repo,
            # The operator chart also carries the CRD in crds/; the CRDs chart owns it.
            skip_crds=True,
            # It watches MariaDB CRs from start-up when told they exist.
            depends_on=(SOPERATOR_CRDS, *after),
        ),
    ]


def chart_releases(config: PlatformConfig, after: tuple[str, ...] = ()) -> list[ChartRelease]:
    return soperator_releases(config, operator_values(config), after)


def needs_cert_manager(config: PlatformConfig) -> bool:
    return False  # 1.14.10 registers no webhooks


def render(config: PlatformConfig) -> list[Rendered]:
    # The component reports the cluster's phase (and reads the login Service once it is up).
    rendered = [Rendered("cluster", slurm_cluster_manifest(config), live_status=True)]
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
    """The controller image (Slurm's client commands; munged is soperator's separate munge image,
    as in its own pods), the platform's munge key, and the operator's `<cluster>-accounting-svc`
    and `<cluster>-controller-svc` (soperator's naming.BuildServiceName)."""
    return AccountingClient(
        image=image(config, "slurmctld"),
        slurmdbd_host=f"{config.cluster.name}-accounting-svc",
        slurmctld_host=f"{config.cluster.name}-controller-svc",
        auth="auth/munge",
        key_secret=munge_secret_name(config.cluster.name),
        key=MUNGE_KEY_FIELD,
        munge_image=image(config, "munge"),
    )


def pool_feature(config: PlatformConfig, pool: NodePoolConfig) -> Optional[str]:
    """1.14.10 has one worker group: every Slurm node is the pool's."""
    return None

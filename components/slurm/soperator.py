"""What both soperator releases share (soperator1.py: 1.14.10, soperator4.py: 4.1.7): the
SlurmCluster's identity and readiness, the node kinds every release has (controller, login,
accounting, exporter: each release passes its own images), the login exposure, the charts and
the accounting client. Neither release module imports the other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

from ..charts import SOPERATOR, SOPERATOR_CRDS, ChartRelease, chart_source, deep_merge, uses_mariadb_operator
from ..config import NodePoolConfig, PlatformConfig, PodResources
from ..monitoring.monitors import database_metrics
from ..names import SLURMCTLD_PORT, SLURMDBD_PORT, SSHD_PORT, restricted_login_service_name, soperator_login_service_name
from ..render.munge import MUNGE_KEY_FIELD, munge_secret_name
from ..render.node_pools import NO_GPU_FILTER
from ..render.storage import JAIL_SOURCE, SPOOL_SOURCE, data_volumes
from . import AccountingClient, PodRoles, ReadyWhen, Selector, node_features
from .common import awaits_address, node_port_fields, readiness_annotations, resources, unmet_conditions

# A release's image for a component (slurmctld, sshd, munge, ...).
ImageOf = Callable[[PlatformConfig, str], str]


API_VERSION = "slurm.nebius.ai/v1"
KIND = "SlurmCluster"
# soperator 1.14.10 phases: Reconciling -> Not available (validating) -> Available.
READY = ReadyWhen("phase", "Available")
# soperator writes SlurmUser=root into slurm.conf (internal/consts/slurm.go SlurmUser).
SLURM_USER = "root"
SLURM_UID = 0


def munge_container(config: PlatformConfig, image: ImageOf, pod: PodResources) -> dict[str, Any]:
    return {"image": image(config, "munge"), "resources": resources(pod)}


def volume_sources(config: PlatformConfig) -> list[dict[str, Any]]:
    return [{"name": v.source_name, "persistentVolumeClaim": {"claimName": v.claim_name, "readOnly": False}} for v in data_volumes(config)]


def jail_sub_mounts(config: PlatformConfig) -> list[dict[str, Any]]:
    """Identical on login and worker nodes: the same path everywhere is what makes a submount shared."""
    return [{"name": sub.mount_name or sub.name, "mountPath": sub.mount_path, "volumeSourceName": sub.name} for sub in config.storage.submounts]


def accounting_node(config: PlatformConfig, image: ImageOf) -> dict[str, Any]:
    accounting = config.slurm.accounting
    node: dict[str, Any] = {"enabled": accounting.enabled, "k8sNodeFilterName": NO_GPU_FILTER}
    if not accounting.enabled:
        return node
    node.update(
        slurmdbd={"image": image(config, "slurmdbd"), "port": SLURMDBD_PORT, "resources": resources(accounting.slurmdbd)},
        munge=munge_container(config, image, accounting.munge),
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
            # mysqld-exporter and its ServiceMonitor, with monitoring on.
            "metrics": database_metrics(config),
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


def controller_node(config: PlatformConfig, image: ImageOf) -> dict[str, Any]:
    controller = config.slurm.controller
    return {
        "size": controller.size,
        "k8sNodeFilterName": NO_GPU_FILTER,
        "slurmctld": {"image": image(config, "slurmctld"), "port": SLURMCTLD_PORT, "resources": resources(controller.slurmctld)},
        "munge": munge_container(config, image, controller.munge),
        "volumes": {"spool": {"volumeSourceName": SPOOL_SOURCE}, "jail": {"volumeSourceName": JAIL_SOURCE}},
    }


def operator_login_service_type(config: PlatformConfig) -> str:
    """With source ranges, SSH goes through our restricted Service; soperator's stays inside the VPC."""
    login = config.slurm.login
    return "NodePort" if login.allowed_source_ranges else login.service_type


def login_node(config: PlatformConfig, image: ImageOf) -> dict[str, Any]:
    login = config.slurm.login
    node: dict[str, Any] = {
        "size": login.size,
        "k8sNodeFilterName": NO_GPU_FILTER,
        "sshd": {"image": image(config, "sshd"), "port": SSHD_PORT, "resources": resources(login.sshd)},
        "sshRootPublicKeys": list(login.ssh_root_public_keys),
        "sshdServiceType": operator_login_service_type(config),
        "sshdServiceAnnotations": {} if login.allowed_source_ranges else dict(login.service_annotations),
        "munge": munge_container(config, image, login.munge),
        "volumes": {"jail": {"volumeSourceName": JAIL_SOURCE}, "jailSubMounts": jail_sub_mounts(config)},
    }
    if node["sshdServiceType"] == "NodePort":
        node["sshdServiceNodePort"] = login.node_port
    else:
        node["sshdServiceLoadBalancerIP"] = login.load_balancer_ip or ""
    return node


def exporter_node(config: PlatformConfig, image: ImageOf) -> dict[str, Any]:
    exporter = config.slurm.exporter
    return {
        "enabled": exporter.enabled,
        "size": 1,
        "k8sNodeFilterName": NO_GPU_FILTER,
        "exporter": {"image": image(config, "exporter"), "resources": resources(exporter.resources)},
        "munge": munge_container(config, image, exporter.munge),
        "volumes": {"jail": {"volumeSourceName": JAIL_SOURCE}},
    }


def slurm_cluster_annotations(config: PlatformConfig) -> dict[str, str]:
    return readiness_annotations(config, READY)


def login_pod_selector(config: PlatformConfig) -> dict[str, str]:
    """Labels soperator puts on login pods (used by our restricted SSH Service)."""
    return {"app.kubernetes.io/component": "login", "app.kubernetes.io/instance": config.cluster.name}


def component_selector(config: PlatformConfig, component: str) -> Selector:
    """soperator's pods of one component (its RenderMatchLabels: instance and component)."""
    return {"matchLabels": {"app.kubernetes.io/instance": config.cluster.name, "app.kubernetes.io/component": component}}


def pod_roles(config: PlatformConfig, worker_component: str, rest_enabled: bool) -> PodRoles:
    """soperator's components (consts.ComponentType*); the MariaDB it asks the MariaDB operator for is
    `<cluster>-acct-db` (naming.BuildMariaDbName), whose pods that operator labels mariadb/<name>."""
    accounting = config.slurm.accounting
    database = {"matchLabels": {"app.kubernetes.io/name": "mariadb", "app.kubernetes.io/instance": f"{config.cluster.name}-acct-db"}}
    return PodRoles(
        controller=component_selector(config, "controller"),
        workers=component_selector(config, worker_component),
        login=login_selector(config),
        accounting=component_selector(config, "accounting") if accounting.enabled else None,
        rest=component_selector(config, "rest") if rest_enabled else None,
        database=database if accounting.enabled and uses_mariadb_operator(config) else None,
        exporter=component_selector(config, "exporter") if config.slurm.exporter.enabled else None,
        # The operator's soperatorchecks controller calls slurmrestd.
        rest_client_namespaces=(config.operators.soperator.namespace,),
    )


def login_selector(config: PlatformConfig) -> Selector:
    return {"matchLabels": login_pod_selector(config)}


def login_service_name(config: PlatformConfig) -> str:
    """The Service users SSH through: our restricted one when ranges are set, else soperator's."""
    cluster = config.cluster.name
    return restricted_login_service_name(cluster) if config.slurm.login.allowed_source_ranges else soperator_login_service_name(cluster)


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
            "annotations": {**login.service_annotations, **awaits_address(config)},
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


def not_ready_message(config: PlatformConfig, status: Optional[dict[str, Any]]) -> Optional[str]:
    """soperator's own words when the live cluster is not Available; None when it is (or is not known)."""
    phase = (status or {}).get("phase")
    if not phase or READY.holds(status):
        return None
    failing = unmet_conditions(status)
    return (
        f"SlurmCluster {config.cluster.namespace}/{config.cluster.name} is {phase!r}, not {READY.value}"
        + (f"; {'; '.join(failing)}" if failing else "")
        + f". Inspect: kubectl -n {config.cluster.namespace} get slurmcluster {config.cluster.name} -o yaml"
    )


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
        ChartRelease(SOPERATOR_CRDS, crds_chart, sop.crds_version or sop.version, sop.namespace, repo=crds_repo),
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


def accounting_client(config: PlatformConfig, image: ImageOf, feature: Callable[[NodePoolConfig], Optional[str]]) -> AccountingClient:
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
        slurm_user=SLURM_USER,
        slurm_uid=SLURM_UID,
        node_features=node_features(config, feature),
        munge_image=image(config, "munge"),
    )

"""SchedMD's Slinky slurm-operator 1.2.1 (`slinky.slurm.net/v1beta1`):

- `Controller` (slurmctld) with `slurmKeyRef` / `jwtKeyRef` Secrets of random keys
  (pulumi_random; Slinky uses auth/slurm, there is no munge);
- one `NodeSet` per GPU pool (whole GPU nodes, the pool's selector and taints);
- a `LoginSet` whose users come from our LDAP through SSSD (`sssd-config`
  Secret), exposed like every other login: restricted LoadBalancer or NodePort;
- `Accounting` (slurmdbd) on a MariaDB of the MariaDB operator or an external DB;
- `RestApi` (slurmrestd) when asked for.
Partitions go into the Controller's `extraConf` over NodeSet names.
"""

from __future__ import annotations

from typing import Any, Optional

from slurm_rules import confinement, slurm_options
from slurm_rules.config_files import SlurmConfig, options_text

from ..charts import ChartRelease, chart_source, deep_merge, uses_mariadb_operator
from ..config import NodePoolConfig, PartitionConfig, PlatformConfig
from ..identity.clients import sshd_settings
from ..identity.names import SSSD_CA_FILE, SSSD_SECRET
from ..monitoring.monitors import database_metrics
from ..names import MARIADB_PORT
from . import AccountingClient, KeySecret, PodRoles, ReadyWhen, Rendered, gpu_jobs, node_features
from .common import (
    USER_PLACEHOLDER,
    add_tenant_settings,
    contain,
    container_resources,
    default_memory,
    define_partitions,
    gpu_resources,
    gres_gpus,
    ldap_ca_files,
    login_service_spec,
    no_live_login,
    no_removed_workers_warning,
    no_status_message,
    operator_priority_class_name,
    private_data,
    readiness_annotations,
    ssh_command_for,
    ssh_endpoint,
    submount_volumes,
    system_placement,
    system_priority,
    system_priority_class_name,
    worker_placement,
)

OPERATOR = "Slinky slurm-operator 1.2.1"
USES_MUNGE = False  # auth/slurm with the slurm.key Secret
GHOST_NODES_ON_SCALE_DOWN = False
CRDS_RELEASE = "slurm-operator-crds"
OPERATOR_RELEASE = "slurm-operator"
# The SlurmUser Slinky's controller writes (controllerbuilder/controller_config.go), its UID in Slinky's images (common/const.go).
SLURM_USER = "slurm"
SLURM_UID = 401

API_VERSION = "slinky.slurm.net/v1beta1"
MARIADB_API_VERSION = "k8s.mariadb.com/v1alpha1"
SLURM_KEY, JWT_KEY = "slurm.key", "jwt.key"
# The chart's `randAscii 1024` for both keys.
KEY_LENGTH = 1024
ACCOUNTING_DATABASE = "slurm_acct_db"


def names(config: PlatformConfig) -> dict[str, str]:
    cluster = config.cluster.name
    return {
        "controller": cluster,
        "slurm_key": f"{cluster}-auth-slurm",
        "jwt_key": f"{cluster}-auth-jwt",
        "login": f"{cluster}-login",
        "accounting": cluster,
        "restapi": cluster,
        "config": f"{cluster}-slurm-config",
        "mariadb": f"{cluster}-mariadb",
        "mariadb_password": f"{cluster}-mariadb-password",
        "mariadb_root": f"{cluster}-mariadb-root",
    }


def image(config: PlatformConfig, component: str) -> str:
    slinky = config.slurm.slinky
    return f"{slinky.registry}/{component}:{slinky.tag}"


def metadata(config: PlatformConfig, name: str) -> dict[str, Any]:
    return {"name": name, "namespace": config.cluster.namespace, "labels": {"app.kubernetes.io/instance": config.cluster.name}}


def key_refs(config: PlatformConfig) -> dict[str, Any]:
    n = names(config)
    return {"slurmKeyRef": {"name": n["slurm_key"], "key": SLURM_KEY}, "jwtKeyRef": {"name": n["jwt_key"], "key": JWT_KEY}}


def nodeset_name(pool: NodePoolConfig) -> str:
    return pool.name


def pod_spec(config: PlatformConfig, placement: dict[str, Any]) -> dict[str, Any]:
    """A template's PodSpec: above every tenant class, and no Kubernetes token (the operator talks
    to the API server; slurmctld, slurmd, login, slurmdbd and slurmrestd never do)."""
    return {**placement, "priorityClassName": system_priority_class_name(config), "automountServiceAccountToken": False}


def partition_nodes(config: PlatformConfig, partition: PartitionConfig) -> str:
    """The NodeSets a partition spans (every GPU pool's where it names none)."""
    return ",".join(nodeset_name(p) for p in config.gpu_pools if not partition.pools or p.name in partition.pools)


def extra_conf(config: PlatformConfig) -> str:
    """The Controller's extraConf: what the operator's own slurm.conf lacks. It writes no ProctrackType, TaskPlugin
    or PrologFlags: Slurm's defaults confine no job."""
    conf = SlurmConfig(config.slurm_release)
    conf.set("GresTypes", "gpu").set(*default_memory(config))
    for key, value in confinement.SLURM_CONF_SETTINGS:
        conf.set(key, value)
    contain(conf)
    add_tenant_settings(conf, config)
    define_partitions(conf, config, lambda partition: partition_nodes(config, partition))
    return conf.fragment()


def config_files(config: PlatformConfig) -> dict[str, Any]:
    """Extra files the Controller mounts into /etc/slurm, which configless slurmd fetch from slurmctld:
    GPUs found through NVML, and the jobs' cgroup constraints (our cgroup.conf replaces the operator's
    default, `CgroupPlugin=cgroup/v2` and `IgnoreSystemd=yes` alone, which constrain nothing)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(config, names(config)["config"]),
        "data": {
            "gres.conf": SlurmConfig(config.slurm_release, "gres.conf").set("AutoDetect", slurm_options.gpu_autodetect(config.slurm_release)).text(),
            "cgroup.conf": confinement.cgroup_conf(config.slurm.worker.cgroup_version, config.slurm_release),
        },
    }


def controller(config: PlatformConfig) -> dict[str, Any]:
    n, slinky = names(config), config.slurm.slinky
    persistence: dict[str, Any] = {
        "enabled": True,
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": slinky.controller_storage_size}},
    }
    if slinky.controller_storage_class_name:
        persistence["storageClassName"] = slinky.controller_storage_class_name
    spec: dict[str, Any] = {
        "clusterName": config.cluster.name,
        **key_refs(config),
        "extraConf": extra_conf(config),
        "configFileRefs": [{"name": n["config"]}],
        "slurmctld": {"image": image(config, "slurmctld"), "resources": container_resources(config.slurm.controller.slurmctld)},
        "template": {"spec": pod_spec(config, system_placement(config))},
        "persistence": persistence,
    }
    if config.slurm.accounting.enabled:
        spec["accountingRef"] = {"name": n["accounting"]}
    if gpu_jobs.maps_gpu_jobs(config):
        # Mounted into /etc/slurm as Prolog= and Epilog= by their keys; configless slurmd fetch them with slurm.conf.
        scripts = gpu_jobs.script_config_map_names(config)
        spec["prologScriptRefs"] = [{"name": scripts[gpu_jobs.PROLOG]}]
        spec["epilogScriptRefs"] = [{"name": scripts[gpu_jobs.EPILOG]}]
    return {"apiVersion": API_VERSION, "kind": "Controller", "metadata": metadata(config, n["controller"]), "spec": spec}


def nodeset_ready(pool: NodePoolConfig) -> ReadyWhen:
    return ReadyWhen("readyReplicas", str(pool.worker_replicas))


def nodeset(config: PlatformConfig, pool: NodePoolConfig) -> dict[str, Any]:
    """One pool's workers. Awaited until every replica is ready: slurmd is configless (it fetches slurm.conf from
    slurmctld), so a ready NodeSet also means the Controller serves; the Controller's own status (conditions only)
    reports nothing in 1.2.1."""
    worker = config.slurm.worker
    volumes, mounts = submount_volumes(config)
    ca_volumes, ca_mounts = ldap_ca_files(config, SSSD_CA_FILE)
    volumes, mounts = volumes + ca_volumes, mounts + ca_mounts
    if gpu_jobs.maps_gpu_jobs(config):
        # Where the Prolog writes dcgm-exporter's HPC job mapping: the same directory of the node.
        volumes, mounts = [*volumes, gpu_jobs.mapping_volume()], [*mounts, gpu_jobs.mapping_mount()]
    pod = worker_placement(config, pool)
    if volumes:
        pod["volumes"] = volumes
    slurmd: dict[str, Any] = {"image": image(config, "slurmd"), "resources": container_resources(worker.slurmd, gpu_resources(config, pool))}
    if mounts:
        slurmd["volumeMounts"] = mounts
    meta = metadata(config, nodeset_name(pool))
    # A NodeSet of no replicas omits readyReplicas (omitempty): nothing to await.
    if pool.worker_replicas and (annotations := readiness_annotations(config, nodeset_ready(pool))):
        meta["annotations"] = annotations
    return {
        "apiVersion": API_VERSION,
        "kind": "NodeSet",
        "metadata": meta,
        "spec": {
            "controllerRef": {"name": names(config)["controller"]},
            "replicas": pool.worker_replicas,
            # Registered with its GPUs from the start (upstream #191: Gres=(null) otherwise).
            "extraConf": options_text(config.slurm_release, "NodeName", [("Gres", gres_gpus(pool))]),
            "partition": {"enabled": False},
            "slurmd": slurmd,
            "template": {"spec": pod_spec(config, pod)},
        },
    }


def loginset(config: PlatformConfig) -> dict[str, Any]:
    login = config.slurm.login
    volumes, mounts = submount_volumes(config)
    ca_volumes, ca_mounts = ldap_ca_files(config, SSSD_CA_FILE)
    volumes, mounts = volumes + ca_volumes, mounts + ca_mounts
    pod = system_placement(config)
    if volumes:
        pod["volumes"] = volumes
    container: dict[str, Any] = {"image": image(config, "login"), "resources": container_resources(login.sshd)}
    if mounts:
        container["volumeMounts"] = mounts
    service: dict[str, Any] = {"spec": login_service_spec(config)}
    annotations = dict(login.service_annotations)
    if annotations:
        service["metadata"] = {"annotations": annotations}
    if service["spec"]["type"] == "NodePort":
        service["nodePort"] = login.node_port
    spec: dict[str, Any] = {
        "controllerRef": {"name": names(config)["controller"]},
        "replicas": login.size,
        # LDAP users through SSSD, with our read-only sssd.conf (ldap.py).
        "sssdConfRef": {"name": SSSD_SECRET, "key": "sssd.conf"},
        # Researchers log in as themselves on the directory's keys: appended to the operator's sshd_config
        # (Include sshd_config.d, UsePAM yes, X11Forwarding yes, Subsystem sftp), which sets none of these
        # keywords but UsePAM, to the same value. Homes: the login image's PAM (authselect sssd with-mkhomedir).
        "extraSshdConfig": "\n".join(sshd_settings()) + "\n",
        "login": container,
        "template": {"spec": pod_spec(config, pod)},
        "service": service,
    }
    if login.ssh_root_public_keys:
        spec["rootSshAuthorizedKeys"] = "\n".join(login.ssh_root_public_keys) + "\n"
    return {"apiVersion": API_VERSION, "kind": "LoginSet", "metadata": metadata(config, names(config)["login"]), "spec": spec}


def storage_config(config: PlatformConfig) -> dict[str, Any]:
    accounting, n = config.slurm.accounting, names(config)
    if accounting.database == "external":
        assert accounting.external is not None
        external = accounting.external
        return {
            "host": external.host,
            "port": external.port,
            "database": ACCOUNTING_DATABASE,
            "username": external.user,
            "passwordKeyRef": {"name": external.password_secret_name, "key": external.password_secret_key},
        }
    return {
        "host": f"{n['mariadb']}.{config.cluster.namespace}.svc.cluster.local",
        "port": MARIADB_PORT,
        "database": ACCOUNTING_DATABASE,
        "username": "slurm",
        "passwordKeyRef": {"name": n["mariadb_password"], "key": "password"},
    }


def accounting(config: PlatformConfig) -> dict[str, Any]:
    """slurmdbd, its slurmdbd.conf's `extraConf` hiding each tenant's records from the others (sacct, sacctmgr)."""
    hidden = private_data(config)
    return {
        "apiVersion": API_VERSION,
        "kind": "Accounting",
        "metadata": metadata(config, names(config)["accounting"]),
        "spec": {
            **key_refs(config),
            **({"extraConf": f"PrivateData={hidden}"} if hidden else {}),
            "slurmdbd": {"image": image(config, "slurmdbd"), "resources": container_resources(config.slurm.accounting.slurmdbd)},
            "template": {"spec": pod_spec(config, system_placement(config))},
            "storageConfig": storage_config(config),
        },
    }


def mariadb(config: PlatformConfig) -> dict[str, Any]:
    """The accounting database, run by the MariaDB operator (its volume retained with the claim)."""
    accounting, n = config.slurm.accounting, names(config)
    return {
        "apiVersion": MARIADB_API_VERSION,
        "kind": "MariaDB",
        "metadata": metadata(config, n["mariadb"]),
        "spec": {
            "image": config.slurm.images.mariadb,
            "rootPasswordSecretKeyRef": {"name": n["mariadb_root"], "key": "password"},
            "database": ACCOUNTING_DATABASE,
            "username": "slurm",
            "passwordSecretKeyRef": {"name": n["mariadb_password"], "key": "password"},
            "storage": {"size": accounting.storage_size, "storageClassName": accounting.storage_class_name},
            "replicas": 1,
            # Its pod, as every Slurm pod: above every tenant class.
            "priorityClassName": system_priority_class_name(config),
            # mysqld-exporter and its ServiceMonitor, with monitoring on.
            **({"metrics": database_metrics(config)} if config.monitoring.enabled else {}),
        },
    }


def restapi(config: PlatformConfig) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "RestApi",
        "metadata": metadata(config, names(config)["restapi"]),
        "spec": {
            "controllerRef": {"name": names(config)["controller"]},
            "replicas": config.slurm.slinky.rest_api_replicas,
            "slurmrestd": {"image": image(config, "slurmrestd"), "resources": container_resources(config.slurm.slinky.rest_api_resources)},
            "template": {"spec": pod_spec(config, system_placement(config))},
        },
    }


# --- the module interface -------------------------------------------------------


def chart_releases(config: PlatformConfig, after: tuple[str, ...] = ()) -> list[ChartRelease]:
    slinky = config.operators.slinky
    if not slinky.install:
        return []
    crds_chart, crds_repo = chart_source(slinky.repository, "slurm-operator-crds")
    chart, repo = chart_source(slinky.repository, "slurm-operator")
    # The CRDs come from their own chart; webhook certificates from cert-manager.
    # priorityClassName: the operator's and the webhook's pods (its chart's one value for both).
    values = deep_merge(
        {"crds": {"enabled": False}, "certManager": {"enabled": True}, "priorityClassName": operator_priority_class_name(config)}, slinky.values
    )
    return [
        ChartRelease(CRDS_RELEASE, crds_chart, slinky.version, slinky.namespace, repo=crds_repo),
        ChartRelease(OPERATOR_RELEASE, chart, slinky.version, slinky.namespace, values, repo=repo, depends_on=(CRDS_RELEASE, *after)),
    ]


def needs_cert_manager(config: PlatformConfig) -> bool:
    return config.operators.slinky.install


def render(config: PlatformConfig) -> list[Rendered]:
    rendered = [*system_priority(config), Rendered("slurm-config", config_files(config)), *gpu_jobs.rendered(config)]
    rendered.append(Rendered("controller", controller(config)))
    rendered += [
        Rendered(f"nodeset-{pool.name}", nodeset(config, pool), ready_when=nodeset_ready(pool) if pool.worker_replicas else None)
        for pool in config.gpu_pools
    ]
    rendered.append(Rendered("loginset", loginset(config)))
    if config.slurm.accounting.enabled:
        if uses_mariadb_operator(config):
            rendered.append(Rendered("mariadb", mariadb(config)))
        rendered.append(Rendered("accounting", accounting(config)))
    if config.slurm.slinky.rest_api:
        rendered.append(Rendered("restapi", restapi(config)))
    return rendered


def key_secrets(config: PlatformConfig) -> list[KeySecret]:
    n, namespace, rotation = names(config), config.cluster.namespace, config.slurm.munge_key_rotation
    labels = {"app.kubernetes.io/instance": config.cluster.name}
    # The auth keys play munge's part: slurm.mungeKeyRotation rotates them too.
    secrets = [
        KeySecret("slurm-key", n["slurm_key"], namespace, SLURM_KEY, KEY_LENGTH, rotation, labels),
        KeySecret("jwt-key", n["jwt_key"], namespace, JWT_KEY, KEY_LENGTH, rotation, labels),
    ]
    if config.slurm.accounting.enabled and uses_mariadb_operator(config):
        secrets += [
            KeySecret("mariadb-password", n["mariadb_password"], namespace, "password", 32, labels=labels),
            KeySecret("mariadb-root", n["mariadb_root"], namespace, "password", 32, labels=labels),
        ]
    return secrets


def worker_nodes(config: PlatformConfig) -> list[str]:
    return [f"{nodeset_name(pool)}-{i}" for pool in config.gpu_pools for i in range(pool.worker_replicas)]


def login_service_name(config: PlatformConfig) -> str:
    return names(config)["login"]  # the LoginSet's Service carries its name


def login_endpoint(config: PlatformConfig, live_service: Optional[dict[str, Any]] = None) -> str:
    return ssh_endpoint(config, login_service_name(config), node_port=login_service_spec(config)["type"] == "NodePort")


def ssh_command(config: PlatformConfig, live_service: Optional[dict[str, Any]] = None) -> str:
    """Root's, on rootSshAuthorizedKeys (the administrators')."""
    node_port = login_service_spec(config)["type"] == "NodePort"
    return ssh_command_for(config, login_service_name(config), node_port=node_port)


def user_ssh_command(config: PlatformConfig, live_service: Optional[dict[str, Any]] = None) -> str:
    """A researcher's, as themselves (sssd, extraSshdConfig)."""
    node_port = login_service_spec(config)["type"] == "NodePort"
    return ssh_command_for(config, login_service_name(config), node_port=node_port, user=USER_PLACEHOLDER)


def service_names(config: PlatformConfig) -> dict[str, str]:
    return {"ssh": login_service_name(config)}


live_login_service = no_live_login
not_ready_message = no_status_message
removed_workers_warning = no_removed_workers_warning


def accounting_client(config: PlatformConfig) -> AccountingClient:
    """The login image (Slurm's client commands), the cluster's slurm.key (auth/slurm), and the
    Services the operator names after the Accounting and Controller objects (`<name>-accounting`, `<name>-controller`)."""
    n = names(config)
    return AccountingClient(
        image=image(config, "login"),
        slurmdbd_host=f"{n['accounting']}-accounting",
        slurmctld_host=f"{n['controller']}-controller",
        auth="auth/slurm",
        key_secret=n["slurm_key"],
        key=SLURM_KEY,
        slurm_user=SLURM_USER,
        slurm_uid=SLURM_UID,
        node_features=node_features(config, lambda pool: pool_feature(config, pool)),
    )


def pool_feature(config: PlatformConfig, pool: NodePoolConfig) -> Optional[str]:
    """A NodeSet's dynamic nodes register with its name as their feature (the partitions' `Nodes=<nodeset>`)."""
    return nodeset_name(pool)


def pod_roles(config: PlatformConfig) -> PodRoles:
    """Slinky's labels (internal/builder/labels): app.kubernetes.io/name per component and the
    custom resource's name as instance; a NodeSet's pods also carry slinky.slurm.net/cluster, the
    Controller they join. The MariaDB operator labels its pods mariadb/<MariaDB name>."""
    n, accounting = names(config), config.slurm.accounting

    def app(name: str, instance: str) -> dict[str, Any]:
        return {"matchLabels": {"app.kubernetes.io/name": name, "app.kubernetes.io/instance": instance}}

    return PodRoles(
        controller=app("slurmctld", n["controller"]),
        workers={"matchLabels": {"app.kubernetes.io/name": "slurmd", "slinky.slurm.net/cluster": n["controller"]}},
        login=app("login", n["login"]),
        accounting=app("slurmdbd", n["accounting"]) if accounting.enabled else None,
        rest=app("slurmrestd", n["restapi"]) if config.slurm.slinky.rest_api else None,
        database=app("mariadb", n["mariadb"]) if accounting.enabled and uses_mariadb_operator(config) else None,
        # The operator reads and drains nodes through slurmrestd (internal/controller/slurmclient).
        rest_client_namespaces=(config.operators.slinky.namespace,),
    )

"""soperator 4.1.7: the `SlurmCluster` (`slurm.nebius.ai/v1`) no longer holds
workers; each GPU pool gets a `NodeSet` (`slurm.nebius.ai/v1alpha1`) in the
cluster's namespace, linked by the `slurm.nebius.ai/parental-cluster-ref`
annotation. Partitions are `partitionConfiguration` (structured, by NodeSet).
The config controller (sconfigcontroller) and the exporter run under their own
ServiceAccounts, as the helm-slurm-cluster chart declares them.

Volumes, claims, the munge Secret and the login exposure are the same as in
1.14.10 (the renderers both releases share, `soperator.py`), which is what makes the upgrade an
in-place update of the SlurmCluster with the data untouched.
"""

from __future__ import annotations

from typing import Any, Optional

from slurm_rules.config_files import SlurmConfig, options_text

from ..charts import ChartRelease
from ..config import NodePoolConfig, PlatformConfig
from ..config.soperator import IMAGE_TAGS, image_tag
from ..identity.clients import sshd_settings
from ..identity.names import SSSD_SECRET
from ..names import SLURMD_PORT, SSHD_PORT
from ..render.node_pools import GPU_FILTER, NO_GPU_FILTER, k8s_node_filters
from ..render.storage import JAIL_CLAIM
from . import AccountingClient, KeySecret, PodRoles, Rendered, gpu_jobs, soperator
from .common import (
    USER_PLACEHOLDER,
    add_tenant_settings,
    default_memory,
    gpu_resources,
    no_live_login,
    no_removed_workers_warning,
    partition_options,
    partition_origin,
    private_data,
    resources,
    service_account_rbac,
    ssh_command_for,
    ssh_endpoint,
    system_priority,
    system_priority_class_name,
    worker_placement,
)

OPERATOR = "soperator 4.1.7"
VERSION = "4.1.7"
USES_MUNGE = True
GHOST_NODES_ON_SCALE_DOWN = False  # NodeSet workers are dynamic Slurm nodes

NODESET_API_VERSION = "slurm.nebius.ai/v1alpha1"
PARENT_ANNOTATION = "slurm.nebius.ai/parental-cluster-ref"
IMAGE_TAG = IMAGE_TAGS["4.1.7"]
SSSD_IMAGE = "cr.eu-north1.nebius.cloud/soperator/sssd:2.9.4-1-63"
IMAGES = {
    "slurmctld": "controller_slurmctld",
    "slurmd": "worker_slurmd",
    "sshd": "login_sshd",
    "munge": "munge",
    "slurmdbd": "controller_slurmdbd",
    "slurmrestd": "slurmrestd",
    "exporter": "soperator-exporter",
    "sconfigcontroller": "sconfigcontroller",
}
CUDA_VERSION = "12.9.0"


def image_repository(config: PlatformConfig, component: str) -> str:
    return f"{config.slurm.images.registry}/{IMAGES[component]}"


def image(config: PlatformConfig, component: str) -> str:
    # sconfigcontroller is tagged with the operator version alone.
    tag = VERSION if component == "sconfigcontroller" else image_tag(config)
    return f"{image_repository(config, component)}:{tag}"


def populate_jail_image(config: PlatformConfig) -> str:
    """The chart's `<repo>/populate_jail:<tag>-cuda<version>`."""
    return f"{config.slurm.images.registry}/populate_jail:{image_tag(config)}-cuda{CUDA_VERSION}"


def sssd(config: PlatformConfig) -> dict[str, Any]:
    """LDAP users through the SSSD sidecar, with our sssd.conf Secret (key sssd.conf) and, with TLS, the directory's
    CA from ldap.tls.caConfigMapName, which the sidecar mounts at /mnt/ldapCA (names.SSSD_CA_FILE)."""
    if not config.ldap.enabled:
        return {}
    tls = config.ldap.tls
    return {
        "sssd": {"image": SSSD_IMAGE, "resources": {"cpu": "200m", "memory": "500Mi", "ephemeral-storage": "5Gi"}},
        "sssdConfSecretRefName": SSSD_SECRET,
        **({"sssdLdapCAConfigMapRefName": tls.ca_config_map_name} if tls.enabled else {}),
    }


# soperator 4.1.7's login (render/login, images/login/sshd_entrypoint.sh): the sshdConfigMapRefName ConfigMap is
# mounted at /mnt/ssh-configs and sshd runs `-f /mnt/ssh-configs/sshd_config`; the host keys of the sshdKeysName
# Secret are at /etc/ssh/sshd_keys; the jail at /mnt/jail, whose /home is the login's /home (a symlink).
SSHD_CONFIG_KEY = "sshd_config"
SSHD_KEYS_DIR = "/etc/ssh/sshd_keys"
HOST_KEYS = ("ssh_host_rsa_key", "ssh_host_ecdsa_key", "ssh_host_ed25519_key")
JAIL = "/mnt/jail"


def sshd_config_name(config: PlatformConfig) -> str:
    """Ours, beside the operator's own `<cluster>-ssh-configs` (which it keeps rendering, unused)."""
    return f"{config.cluster.name}-login-sshd-config"


def sshd_config(config: PlatformConfig) -> str:
    """soperator 4.1.7's own sshd_config (render/login/configmap.go generateSshdConfig, with its SSSD lines)
    with our settings (identity.clients.sshd_settings) first, as sshd takes a keyword's first value: the
    directory's keys through sssd's ssh responder, run as nobody instead of root; keys only. Everyone but
    root is chrooted into the jail, as the operator has it; root keeps the administrators' keys
    (sshRootPublicKeys) and the jail's. LogLevel INFO (the operator's DEBUG3 up to its Match)."""
    ours = sshd_settings()
    keywords = {line.split()[0] for line in ours}
    operators = [
        f"Port {SSHD_PORT}",
        "PermitRootLogin yes",
        "PasswordAuthentication no",
        "ChallengeResponseAuthentication no",
        "UsePAM yes",
        "AcceptEnv LANG LC_*",
        "X11Forwarding no",
        "AllowTcpForwarding yes",
        "Subsystem sftp internal-sftp",
        *(f"HostKey {SSHD_KEYS_DIR}/{key}" for key in HOST_KEYS),
        f"ChrootDirectory {JAIL}",
        "ClientAliveInterval 3600",
        "ClientAliveCountMax 5",
        "MaxStartups 100:50:300",
        "LoginGraceTime 120",
        "MaxAuthTries 4",
        "LogLevel INFO",
    ]
    # ChallengeResponseAuthentication is KbdInteractiveAuthentication's old name: ours says it.
    kept = [line for line in operators if line.split()[0] not in keywords | {"ChallengeResponseAuthentication"}]
    lines = [
        "# slurm-platform: soperator 4.1.7's sshd_config with researchers' logins (components/slurm/soperator4.py)",
        *ours,
        *kept,
        "",
        "Match User root",
        f"    AuthorizedKeysFile /root/.ssh/authorized_keys {JAIL}/root/.ssh/authorized_keys",
    ]
    return "\n".join(lines) + "\n"


def sshd_config_map(config: PlatformConfig) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": sshd_config_name(config),
            "namespace": config.cluster.namespace,
            "labels": {"app.kubernetes.io/component": "login", "app.kubernetes.io/instance": config.cluster.name},
        },
        "data": {SSHD_CONFIG_KEY: sshd_config(config)},
    }


def nodeset_name(pool: NodePoolConfig) -> str:
    return pool.name


def sconfigcontroller_account(config: PlatformConfig) -> str:
    return f"{config.cluster.name}-sconfigcontroller"


def partition_configuration(config: PlatformConfig) -> dict[str, Any]:
    partitions = []
    for partition in config.partitions:
        entry: dict[str, Any] = {"name": partition.name}
        if partition.pools:
            entry["nodeSetRefs"] = [nodeset_name(p) for p in config.gpu_pools if p.name in partition.pools]
        else:
            entry["isAll"] = True
        options = [("Default", "YES" if partition.default else "NO"), *partition_options(config, partition)]
        entry["config"] = options_text(config.slurm_release, "PartitionName", options, partition_origin(config, partition))
        partitions.append(entry)
    return {"configType": "structured", "partitions": partitions}


def controller_node(config: PlatformConfig) -> dict[str, Any]:
    node = soperator.controller_node(config, image)
    del node["size"]  # 4.x runs a single slurmctld
    node["priorityClass"] = system_priority_class_name(config)
    if private_data(config):
        # slurmctld's OpenMetrics endpoint answers 401 to every scrape once slurm.conf has PrivateData (Slurm 25.11's
        # http.c; the operator's own comment says as much): off, with its ServiceMonitor. The exporter, root by its JWT, stays.
        node["openMetrics"] = {"enabled": False}
    return node


def login_node(config: PlatformConfig) -> dict[str, Any]:
    node = soperator.login_node(config, image)
    node.update(priorityClass=system_priority_class_name(config), **sssd(config))
    if config.ldap.enabled:
        # Researchers log in as themselves: our sshd_config (sshd_config_map) instead of the operator's.
        node["sshdConfigMapRefName"] = sshd_config_name(config)
    return node


def accounting_node(config: PlatformConfig) -> dict[str, Any]:
    node = soperator.accounting_node(config, image)
    node["priorityClass"] = system_priority_class_name(config)
    if "mariadbOperator" in node:
        # The MariaDB pod the operator makes for slurmdbd: 4.1.7's own field for it, else priority 0, below every tenant.
        node["mariadbOperator"]["priorityClassName"] = system_priority_class_name(config)
    if node["enabled"] and (hidden := private_data(config)):
        # slurmdbd.conf's PrivateData (sacct, sacctmgr, sreport); slurm.conf's comes with customSlurmConfig.
        node["slurmdbdConfig"] = {"privateData": hidden}
    return node


def exporter_account(config: PlatformConfig) -> str:
    return f"{config.cluster.name}-slurm-exporter"


def exporter_node(config: PlatformConfig) -> dict[str, Any]:
    node = soperator.exporter_node(config, image)
    # 4.x: the soperator exporter container under its own ServiceAccount, no munge sidecar.
    del node["munge"]
    node["exporterContainer"] = node.pop("exporter")
    node["serviceAccountName"] = exporter_account(config)
    node["priorityClass"] = system_priority_class_name(config)
    return node


def rest_node(config: PlatformConfig) -> dict[str, Any]:
    return {
        "enabled": False,
        "k8sNodeFilterName": NO_GPU_FILTER,
        "rest": {"image": image(config, "slurmrestd")},
        "priorityClass": system_priority_class_name(config),
    }


# What the operator's own slurm.conf sets as the tenants need it, besides PreemptType=preempt/partition_prio;
# customSlurmConfig is included after it.
WRITTEN_BY_OPERATOR = frozenset({("PreemptMode", "REQUEUE")})


def custom_slurm_config(config: PlatformConfig) -> str:
    """The tenants' settings but for what the operator writes itself. PreemptType is the one key
    both write: the tenants need preempt/qos (oppo requeued by QOS, whatever the partition), and
    customSlurmConfig is included after the operator's preempt/partition_prio, so Slurm runs the
    later value (logging the repeat once; the services tier checks which one runs). Before them, the default
    memory per CPU the operator's CR_Core_Memory lacks."""
    conf = SlurmConfig(config.slurm_release).set(*default_memory(config))
    add_tenant_settings(conf, config, WRITTEN_BY_OPERATOR)
    return conf.fragment()


def slurm_cluster_manifest(config: PlatformConfig) -> dict[str, Any]:
    return {
        "apiVersion": soperator.API_VERSION,
        "kind": soperator.KIND,
        # The same readiness wait as 1.14.10 (4.x keeps .status.phase Available).
        "metadata": {
            "name": config.cluster.name,
            "namespace": config.cluster.namespace,
            **({"annotations": annotations} if (annotations := soperator.slurm_cluster_annotations(config)) else {}),
        },
        "spec": {
            "crVersion": VERSION,
            "maintenance": "none",
            "cgroupVersion": config.slurm.worker.cgroup_version,
            "k8sNodeFilters": k8s_node_filters(config.node_pools),
            "volumeSources": soperator.volume_sources(config),
            "partitionConfiguration": partition_configuration(config),
            "customSlurmConfig": custom_slurm_config(config),
            # slurmd's Prolog and Epilog, which the operator writes from slurmConfig into slurm.conf.
            **({"slurmConfig": {"prolog": gpu_jobs.PROLOG_PATH, "epilog": gpu_jobs.EPILOG_PATH}} if gpu_jobs.maps_gpu_jobs(config) else {}),
            "populateJail": {
                "image": populate_jail_image(config),
                "k8sNodeFilterName": GPU_FILTER,
                "overwrite": config.slurm.populate_jail.overwrite,
                "priorityClass": system_priority_class_name(config),
            },
            "secrets": {"sshdKeysName": f"{config.cluster.name}-sshd-keys"},
            "sConfigController": {
                "serviceAccountName": sconfigcontroller_account(config),
                "node": {"size": 1, "k8sNodeFilterName": NO_GPU_FILTER, "priorityClass": system_priority_class_name(config)},
                "container": {
                    "image": image(config, "sconfigcontroller"),
                    "resources": {"cpu": "250m", "memory": "256Mi", "ephemeral-storage": "500Mi"},
                },
            },
            "slurmNodes": {
                "accounting": accounting_node(config),
                "controller": controller_node(config),
                "login": login_node(config),
                "exporter": exporter_node(config),
                "rest": rest_node(config),
            },
        },
    }


def gpu_job_mapping_mounts(config: PlatformConfig) -> list[dict[str, Any]]:
    """The scripts and dcgm-exporter's mapping directory in slurmd's container, where the Prolog runs (outside the jail)."""
    volumes, mounts = gpu_jobs.worker_volumes(config)
    return [{**mount, "volumeSource": {k: v for k, v in volume.items() if k != "name"}} for volume, mount in zip(volumes, mounts, strict=True)]


def nodeset_manifest(config: PlatformConfig, pool: NodePoolConfig) -> dict[str, Any]:
    """The workers of one GPU pool: whole GPU nodes, the pool's selector and tolerations."""
    worker = config.slurm.worker
    spec: dict[str, Any] = {
        "replicas": pool.worker_replicas,
        "maxUnavailable": "20%",
        "priorityClass": system_priority_class_name(config),
        **worker_placement(config, pool),
        "gpu": {"enabled": True},
        # The pool's Slurm node feature: the tenants' reservations pick their nodes by it (and `sbatch -C <pool>` works).
        "nodeConfig": {"features": [pool_feature(config, pool)]},
        "slurmd": {
            "image": {"repository": image_repository(config, "slurmd"), "tag": image_tag(config)},
            "port": SLURMD_PORT,
            "resources": {**resources(worker.slurmd), **gpu_resources(config, pool)},
            # NodeSet volumes are core VolumeSources (the CRD has no volumeSourceName here).
            "volumes": {
                "spool": {
                    "ephemeral": {
                        "volumeClaimTemplate": {
                            "spec": {
                                "storageClassName": worker.spool_storage_class_name,
                                "accessModes": ["ReadWriteOnce"],
                                "resources": {"requests": {"storage": worker.spool_size}},
                            }
                        }
                    }
                },
                "jail": {"persistentVolumeClaim": {"claimName": JAIL_CLAIM}},
                "jailSubMounts": [
                    {
                        "name": sub.mount_name or sub.name,
                        "mountPath": sub.mount_path,
                        "volumeSource": {"persistentVolumeClaim": {"claimName": sub.claim_name}},
                    }
                    for sub in config.storage.submounts
                ],
                "sharedMemorySize": worker.shared_memory_size,
                **({"customVolumeMounts": mounts} if (mounts := gpu_job_mapping_mounts(config)) else {}),
            },
        },
        "munge": {
            "image": {"repository": image_repository(config, "munge"), "tag": image_tag(config)},
            "resources": resources(worker.munge),
        },
        **sssd(config),
    }
    if "sssd" in spec:
        repository, tag = SSSD_IMAGE.rsplit(":", 1)
        spec["sssd"]["image"] = {"repository": repository, "tag": tag}
    return {
        "apiVersion": NODESET_API_VERSION,
        "kind": "NodeSet",
        "metadata": {
            "name": nodeset_name(pool),
            "namespace": config.cluster.namespace,
            "annotations": {PARENT_ANNOTATION: config.cluster.name},
        },
        "spec": spec,
    }


def rest_jwt_key_secret(config: PlatformConfig) -> str:
    """The Secret soperator keeps the slurmrestd JWT signing key in (its naming.BuildSecretSlurmRESTSecretName)."""
    return f"{config.cluster.name}-rest-jwt-key"


def jwt_key_rule(config: PlatformConfig) -> dict[str, Any]:
    """The one Secret the exporter and sconfigcontroller read (to sign their slurmrestd tokens).

    The chart grants every Secret of the namespace, which holds the munge key, ldap-secret (the
    LDAP admin password), ldap-seed and sssd-config: named here, none of those is in reach."""
    return {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"], "resourceNames": [rest_jwt_key_secret(config)]}


def sconfigcontroller_rbac(config: PlatformConfig) -> list[Rendered]:
    """The helm-slurm-cluster chart's ServiceAccount, Role and RoleBinding for sconfigcontroller,
    with Secrets narrowed to the JWT key (jwt_key_rule)."""
    rules = [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]},
        jwt_key_rule(config),
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "list", "watch", "create", "update", "patch"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
        {"apiGroups": ["slurm.nebius.ai"], "resources": ["jailedconfigs"], "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
        {"apiGroups": ["slurm.nebius.ai"], "resources": ["jailedconfigs/status"], "verbs": ["get", "update", "patch"]},
        {"apiGroups": ["slurm.nebius.ai"], "resources": ["jailedconfigs/finalizers"], "verbs": ["update"]},
    ]
    labels = {"app.kubernetes.io/component": "sconfigcontroller"}
    return service_account_rbac("sconfigcontroller", sconfigcontroller_account(config), config.cluster.namespace, labels, rules)


def exporter_rbac(config: PlatformConfig) -> list[Rendered]:
    """The chart's exporter ServiceAccount: it reads the JWT key Secret, by name (a plain Get)."""
    if not config.slurm.exporter.enabled:
        return []
    rules = [jwt_key_rule(config)]
    labels = {"app.kubernetes.io/component": "slurm-exporter"}
    return service_account_rbac("exporter", exporter_account(config), config.cluster.namespace, labels, rules)


# --- the module interface -------------------------------------------------------


def operator_values(config: PlatformConfig) -> dict[str, Any]:
    values = soperator.operator_values(config)
    # Webhook certificates from cert-manager; workers and login are OpenKruise StatefulSets;
    # no ServiceMonitor unless the Prometheus CRDs are there (set operators.soperator.values to enable).
    values.update(certManager={"enabled": True}, kruise={"installOperator": True}, serviceMonitor={"enabled": False})
    return values


def chart_releases(config: PlatformConfig, after: tuple[str, ...] = ()) -> list[ChartRelease]:
    return soperator.soperator_releases(config, operator_values(config), after)


def needs_cert_manager(config: PlatformConfig) -> bool:
    return config.operators.soperator.install


def render(config: PlatformConfig) -> list[Rendered]:
    rendered = [*system_priority(config)]
    if config.ldap.enabled:
        rendered.append(Rendered("login-sshd-config", sshd_config_map(config)))
    rendered += gpu_jobs.rendered(config)
    rendered.append(Rendered("cluster", slurm_cluster_manifest(config), live_status=True, ready_when=soperator.READY))
    rendered += [Rendered(f"nodeset-{pool.name}", nodeset_manifest(config, pool)) for pool in config.gpu_pools]
    rendered += sconfigcontroller_rbac(config) + exporter_rbac(config)
    service = soperator.restricted_login_service(config)
    if service is not None:
        rendered.append(Rendered("login-ssh", service))
    return rendered


def key_secrets(config: PlatformConfig) -> list[KeySecret]:
    return []


def worker_nodes(config: PlatformConfig) -> list[str]:
    return [f"{nodeset_name(pool)}-{i}" for pool in config.gpu_pools for i in range(pool.worker_replicas)]


login_service_name = soperator.login_service_name
not_ready_message = soperator.not_ready_message


def uses_node_port(config: PlatformConfig) -> bool:
    """Users reach soperator's own NodePort Service (no restricted LoadBalancer of ours)."""
    login = config.slurm.login
    return login.service_type == "NodePort" and not login.allowed_source_ranges


def login_endpoint(config: PlatformConfig, live_service: Optional[dict[str, Any]] = None) -> str:
    """As far as config knows it: 4.1.7 reads no Service back."""
    return ssh_endpoint(config, login_service_name(config), node_port=uses_node_port(config))


def ssh_command(config: PlatformConfig, live_service: Optional[dict[str, Any]] = None) -> str:
    return ssh_command_for(config, login_service_name(config), node_port=uses_node_port(config))


def user_ssh_command(config: PlatformConfig, live_service: Optional[dict[str, Any]] = None) -> Optional[str]:
    """A researcher's login (our sshd_config, with the directory): None without LDAP."""
    if not config.ldap.enabled:
        return None
    return ssh_command_for(config, login_service_name(config), node_port=uses_node_port(config), user=USER_PLACEHOLDER)


def service_names(config: PlatformConfig) -> dict[str, str]:
    return {"ssh": login_service_name(config)}


live_login_service = no_live_login
removed_workers_warning = no_removed_workers_warning


def accounting_client(config: PlatformConfig) -> AccountingClient:
    return soperator.accounting_client(config, image, lambda pool: pool_feature(config, pool))


def pool_feature(config: PlatformConfig, pool: NodePoolConfig) -> Optional[str]:
    """The feature each NodeSet declares for its Slurm nodes (`nodeConfig.features`): the pool's name."""
    return nodeset_name(pool)


def pod_roles(config: PlatformConfig) -> PodRoles:
    """4.1.7's workers belong to NodeSets (component nodeset, render/worker/statefulset.go)."""
    return soperator.pod_roles(config, "nodeset", rest_enabled=rest_node(config)["enabled"])

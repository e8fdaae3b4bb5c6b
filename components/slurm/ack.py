"""Alibaba ack-slurm-operator (`kai.alibabacloud.com/v1` `SlurmCluster`), the way
the ACK guide builds it, in both API generations:

- 2024-06: `spec.headGroupSpec` (slurmctld, and slurmdbd when slurmdbd.conf is there);
- 2024-12: `spec.slurmctld` (+ `spec.slurmdbd` with accounting).

Workers are `workerGroupSpecs[]`, one group per GPU pool (`replicas`). Images
are bring-your-own; the operator prepends its init script, which copies
`slurmConfPath/*` to /etc/slurm and the file at `mungeConfPath` to
/etc/munge/munge.key. So we mount: our generated slurm.conf ConfigMap at
slurmConfPath, the platform's munge Secret (key `munge.key`) in `mungeKeyDir`,
the LDAP client files for nslcd, and the shared /home claim on NAS.

Users SSH into a login of their own (the `<cluster>-login` Deployment, off the GPU
nodes): sshd, sssd and munged in the cluster's image, researchers as themselves on
the keys the directory holds, administrators as root; the head runs slurmctld
alone and no Service reaches it from outside.

With autoscaling, the resume/suspend programs run in a pod of their own (the
copilot Deployment), the only pod with a Kubernetes token: its Role may patch
this SlurmCluster. Neither the head nor the login has a token at all, so no
Slurm user can rewrite the worker templates (image, hostPath) through them.
slurmctld's own SuspendProgram/ResumeProgram are `/bin/true`; the copilot
polls `sinfo` for nodes slurmctld is powering up or down and runs the
configured programs for each, once per transition.

The operator's source is not public: where the guide leaves a name open
(slurmctld host, Service name, volume names) the choice is ours, configurable,
and listed in docs/operators.md.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any, Optional

from slurm_rules import confinement, slurm_options
from slurm_rules.config_files import SlurmConfig

from ..charts import ChartRelease, chart_source
from ..config import AckClusterConfig, NodePoolConfig, PartitionConfig, PlatformConfig, login_lb_annotations
from ..identity.clients import MKHOMEDIR_SESSION, sshd_settings
from ..identity.names import CLIENT_CONFIGMAP, NSLCD_CA_FILE, NSLCD_SECRET, SSSD_CA_FILE, SSSD_SECRET
from ..names import SLURMCTLD_PORT, SLURMD_PORT, SLURMDBD_PORT, SSHD_PORT
from ..render.munge import MUNGE_KEY_FIELD, munge_secret_name
from ..render.scripts import data_and_steps, shell_function, steps_of
from . import AccountingClient, KeySecret, PodRoles, ReadyWhen, Rendered, gpu_jobs, node_features
from .common import (
    USER_PLACEHOLDER,
    add_tenant_settings,
    awaits_address,
    contain,
    container_resources,
    default_memory,
    define_partitions,
    gpu_resources,
    gres_gpus,
    ldap_ca_files,
    munged_lines,
    no_live_login,
    no_removed_workers_warning,
    node_port_fields,
    readiness_annotations,
    service_account_rbac,
    ssh_command_for,
    ssh_endpoint,
    submount_volumes,
    system_placement,
    system_priority,
    system_priority_class_name,
    worker_placement,
    worker_shape,
)

OPERATOR = "ack-slurm-operator"
# SlurmCluster.status.state when the cluster is up (ClusterState in the API types of both generations:
# ready, unhealthy, failed, progressing; `kubectl get slurmcluster` prints it as STATUS), with .status.reason.
READY = ReadyWhen("state", "ready")
USES_MUNGE = True
GHOST_NODES_ON_SCALE_DOWN = False  # workers are dynamic Slurm nodes
OPERATOR_RELEASE = "ack-slurm-operator"
# slurm.conf's SlurmUser; the guide's image makes it with UID 1109 (building-slurm-image/sh/create-users.sh).
SLURM_USER = "slurm"
SLURM_UID = 1109

API_VERSION = "kai.alibabacloud.com/v1"
CLUSTER_LABEL = "kai.alibabacloud.com/slurm-cluster"
NODE_TYPE_LABEL = "kai.alibabacloud.com/slurm-node-type"
# Ours on the worker template (the operator copies template labels onto its pods): what the network
# policies select workers by, whatever node-type label the operator adds.
ROLE_LABEL = "slurm-platform/role"
NAS_DRIVER = "nasplugin.csi.alibabacloud.com"
HOME = "/home"
# What slurmctld-copilot rewrites on the live CR when it resumes or suspends workers.
AUTOSCALED_FIELDS = tuple(f"spec.workerGroupSpecs[*].{field}" for field in ("replicas", "podsToBeCreated", "podsToBeDeleted"))
# slurmctld's own power-saving programs: the copilot pod does the resuming and suspending.
SLURMCTLD_POWER_PROGRAM = "/bin/true"
COPILOT_SCRIPT = "copilot.sh"
COPILOT_DIR = "/copilot"
# Where the guide's slurm-resume.sh/slurm-suspend.sh read namespace, labels and the API address.
PODINFO_DIR = "/etc/slurmd-podinfo"
K8S_INFO_DIR = "/var/k8s-info"
COPILOT_POLL_SECONDS = 10
# The login pods' files (login_config_map) and where they are mounted.
LOGIN_DIR = "/login"
LOGIN_SCRIPT = "login.sh"
# The steps of the login and of the copilot, which act on the data their renderers write above them.
LOGIN_STEPS = steps_of(Path(__file__).parent / "ack-login.sh")
COPILOT_STEPS = steps_of(Path(__file__).parent / "ack-copilot.sh")
LOGIN_APP = "slurm-login"
# slurmctld's state (every queued job), on a claim of ours: the operator gives the head no volume for it.
STATE_SAVE_LOCATION = "/var/spool/slurmctld"


def ack(config: PlatformConfig) -> AckClusterConfig:
    assert config.slurm.ack is not None, "validated: slurmOperator ack needs slurm.ack"
    return config.slurm.ack


def new_api(config: PlatformConfig) -> bool:
    return config.operators.ack_slurm_operator.api_generation == "2024-12"


def names(config: PlatformConfig) -> dict[str, str]:
    cluster = config.cluster.name
    return {
        "config": f"{cluster}-slurm-conf",
        "login": f"{cluster}-login",
        "copilot": f"{cluster}-slurmctld-copilot",
        "login_files": f"{cluster}-login-files",
        "state": f"{cluster}-slurmctld-state",
        "home_volume": f"{home.claim_name}-nas" if (home := ack(config).home) else "",
    }


def slurmctld_host(config: PlatformConfig) -> str:
    return ack(config).slurmctld_host or f"{config.cluster.name}-head"


def slurmdbd_host(config: PlatformConfig) -> str:
    # 2024-06 runs slurmdbd in the head pod; 2024-12 gives it its own pod.
    return f"{config.cluster.name}-slurmdbd" if new_api(config) else slurmctld_host(config)


def munge_conf_path(config: PlatformConfig) -> str:
    return f"{ack(config).munge_key_dir.rstrip('/')}/{MUNGE_KEY_FIELD}"


def worker_name_prefix(config: PlatformConfig, pool: NodePoolConfig) -> str:
    """slurmctld-copilot's node name format: <cluster>-worker-<group>-<index>."""
    return f"{config.cluster.name}-worker-{pool.name}-"


# --- slurm.conf -----------------------------------------------------------------


def define_workers(conf: SlurmConfig, config: PlatformConfig) -> None:
    """A Slurm NodeSet per worker group (workers register as dynamic nodes with Feature=<group>),
    and with autoscaling the guide's CLOUD NodeName lines the copilot resumes and suspends."""
    autoscaling = ack(config).autoscaling
    cpus, memory = worker_shape(config)
    for pool in config.gpu_pools:
        conf.define("NodeSet", pool.name, [("Feature", pool.name)])
        if autoscaling.enabled:
            nodes = f"{worker_name_prefix(config, pool)}[0-{autoscaling.max_nodes_per_group - 1}]"
            shape = [("CPUs", cpus), ("RealMemory", memory), ("Gres", gres_gpus(pool))]
            conf.define("NodeName", nodes, [*shape, ("Feature", f"{pool.name},cloud"), ("State", "CLOUD")])


def partition_nodes(config: PlatformConfig, partition: PartitionConfig) -> str:
    """The NodeSets (one per worker group) a partition spans."""
    return ",".join(p.name for p in config.gpu_pools if p.name in partition.pools) if partition.pools else "ALL"


def slurm_conf(config: PlatformConfig) -> str:
    settings = ack(config)
    conf = SlurmConfig(config.slurm_release)
    conf.set("ClusterName", config.cluster.name).set("SlurmctldHost", slurmctld_host(config)).set("SlurmUser", SLURM_USER)
    conf.set("AuthType", "auth/munge").set("SlurmctldPort", SLURMCTLD_PORT).set("SlurmdPort", SLURMD_PORT)
    conf.set("StateSaveLocation", STATE_SAVE_LOCATION).set("SlurmdSpoolDir", "/var/spool/slurmd")
    conf.set("ReturnToService", 2).set("MpiDefault", "none")
    for key, value in confinement.SLURM_CONF_SETTINGS:
        conf.set(key, value)
    # Every job's extern step holds its cgroup on each node (pam_slurm_adopt's, where the image has it).
    contain(conf)
    conf.set("SchedulerType", "sched/backfill").set("SelectType", "select/cons_tres").set("SelectTypeParameters", "CR_Core_Memory")
    conf.set(*default_memory(config)).set("GresTypes", "gpu")
    conf.set("SlurmctldTimeout", 300).set("SlurmdTimeout", 300).set("MaxNodeCount", 1024)
    if config.slurm.accounting.enabled:
        conf.set("AccountingStorageType", "accounting_storage/slurmdbd").set("AccountingStorageHost", slurmdbd_host(config))
        conf.set("AccountingStoragePort", SLURMDBD_PORT)
        conf.set("JobAcctGatherType", "jobacct_gather/linux").set("JobAcctGatherFrequency", 30)
    autoscaling = settings.autoscaling
    if autoscaling.enabled:
        conf.set("SuspendProgram", SLURMCTLD_POWER_PROGRAM).set("ResumeProgram", SLURMCTLD_POWER_PROGRAM)
        conf.set("SuspendTimeout", autoscaling.suspend_timeout).set("ResumeTimeout", autoscaling.resume_timeout)
        conf.set("SuspendTime", autoscaling.suspend_time).set("ResumeRate", autoscaling.resume_rate)
        conf.set("SuspendRate", autoscaling.suspend_rate)
        # The guide's lines for CLOUD nodes, where the release takes them.
        conf.set_where_taken("CommunicationParameters", "NoAddrCache")
        conf.set_where_taken("ReconfigFlags", "KeepPowerSaveSettings")
    if gpu_jobs.maps_gpu_jobs(config):
        # dcgm-exporter's HPC job mapping, from the scripts the workers mount (worker_group).
        conf.set("Prolog", gpu_jobs.PROLOG_PATH).set("Epilog", gpu_jobs.EPILOG_PATH)
    add_tenant_settings(conf, config)
    define_workers(conf, config)
    define_partitions(conf, config, lambda partition: partition_nodes(config, partition))
    for index, line in enumerate(settings.extra_slurm_conf):
        conf.line(line, ("slurm", "ack", "extraSlurmConf", index))
    return conf.text()


def gres_conf(config: PlatformConfig) -> str:
    """GPUs found by the release's AutoDetect plugin on each worker; with autoscaling, the CLOUD nodes' GPUs
    listed by device file instead: slurmctld refuses `AutoDetect` on a CLOUD node (fatal up to 23.11.3,
    an error that drops the node's GPUs since)."""
    autoscaling = ack(config).autoscaling
    conf = SlurmConfig(config.slurm_release, "gres.conf")
    if not autoscaling.enabled:
        return conf.set("AutoDetect", slurm_options.gpu_autodetect(config.slurm_release)).text()
    for pool in config.gpu_pools:
        devices = "/dev/nvidia0" if pool.gpus_per_node == 1 else f"/dev/nvidia[0-{pool.gpus_per_node - 1}]"
        gpu_type = [("Type", pool.slurm_gpu_type)] if pool.slurm_gpu_type else []
        nodes = f"{worker_name_prefix(config, pool)}[0-{autoscaling.max_nodes_per_group - 1}]"
        conf.define("NodeName", nodes, [("Name", "gpu"), *gpu_type, ("File", devices)])
    return conf.text()


def slurm_conf_config_map(config: PlatformConfig) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": names(config)["config"], "namespace": config.cluster.namespace, "labels": {CLUSTER_LABEL: config.cluster.name}},
        # The operator's init script copies every file here to /etc/slurm: cgroup.conf lands beside slurm.conf.
        "data": {
            "slurm.conf": slurm_conf(config),
            "gres.conf": gres_conf(config),
            "cgroup.conf": confinement.cgroup_conf(config.slurm.worker.cgroup_version, config.slurm_release),
        },
    }


# --- pod templates ----------------------------------------------------------------


def volumes(config: PlatformConfig, with_slurmdbd_conf: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(volumes, volumeMounts) every Slurm pod gets; slurmdbd.conf (DB password) only where slurmdbd runs."""
    settings = ack(config)
    conf_sources: list[dict[str, Any]] = [{"configMap": {"name": names(config)["config"]}}]
    if with_slurmdbd_conf and config.slurm.accounting.enabled:
        conf_sources.append(
            {"secret": {"name": settings.slurmdbd_conf_secret_name, "items": [{"key": "slurmdbd.conf", "path": "slurmdbd.conf", "mode": 0o600}]}}
        )
    pod_volumes: list[dict[str, Any]] = [
        {"name": "slurm-conf", "projected": {"sources": conf_sources}},
        {"name": "munge-key", "secret": {"secretName": munge_secret_name(config.cluster.name), "defaultMode": 0o400}},
    ]
    mounts: list[dict[str, Any]] = [
        {"name": "slurm-conf", "mountPath": settings.slurm_conf_path, "readOnly": True},
        {"name": "munge-key", "mountPath": settings.munge_key_dir, "readOnly": True},
    ]
    if config.ldap.enabled:
        # The guide's nslcd client: /etc/nslcd.conf (a Secret: it holds the bind password; nslcd wants
        # it unreadable to others) and /etc/ldap/ldap.conf (libnss-ldapd in the image).
        pod_volumes += [
            {"name": "ldap-client", "configMap": {"name": CLIENT_CONFIGMAP}},
            {"name": "nslcd-conf", "secret": {"secretName": NSLCD_SECRET, "defaultMode": 0o600}},
        ]
        mounts += [
            {"name": "nslcd-conf", "mountPath": "/etc/nslcd.conf", "subPath": "nslcd.conf", "readOnly": True},
            {"name": "ldap-client", "mountPath": "/etc/ldap/ldap.conf", "subPath": "ldap.conf", "readOnly": True},
        ]
    if settings.home is not None:
        pod_volumes.append({"name": "home", "persistentVolumeClaim": {"claimName": settings.home.claim_name}})
        mounts.append({"name": "home", "mountPath": HOME})
    shared_volumes, shared_mounts = submount_volumes(config)
    ca_volumes, ca_mounts = ldap_ca_files(config, NSLCD_CA_FILE)
    return pod_volumes + shared_volumes + ca_volumes, mounts + shared_mounts + ca_mounts


def pod_template(
    config: PlatformConfig,
    container_name: str,
    ports: list[int],
    resources: dict[str, Any],
    placement: dict[str, Any],
    labels: dict[str, str],
    with_slurmdbd_conf: bool = False,
    privileged: bool = False,
) -> dict[str, Any]:
    """A pod the operator runs: no Kubernetes token (none of them talks to the API server)."""
    pod_volumes, mounts = volumes(config, with_slurmdbd_conf)
    container: dict[str, Any] = {
        "name": container_name,
        "image": ack(config).image,
        "ports": [{"containerPort": port, "protocol": "TCP"} for port in ports],
        "resources": resources,
        "volumeMounts": mounts,
    }
    if privileged:
        container["securityContext"] = {"privileged": True}
    spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "priorityClassName": system_priority_class_name(config),
        "containers": [container],
        "volumes": pod_volumes,
        **placement,
    }
    return {"metadata": {"labels": {CLUSTER_LABEL: config.cluster.name, **labels}}, "spec": spec}


def head_template(config: PlatformConfig) -> dict[str, Any]:
    """slurmctld (and slurmdbd in the 2024-06 API) only: users SSH into the login Deployment. Its state lives on the
    state claim, made slurm's before slurmctld starts (the image's own directory is hidden under the mount)."""
    controller = config.slurm.controller
    ports = [SLURMCTLD_PORT] + ([] if new_api(config) else [SLURMDBD_PORT])
    template = pod_template(
        config,
        "slurmctld",
        ports,
        container_resources(controller.slurmctld),
        system_placement(config),
        {NODE_TYPE_LABEL: "head"},
        with_slurmdbd_conf=not new_api(config),
    )
    state_mount = {"name": "slurmctld-state", "mountPath": STATE_SAVE_LOCATION}
    spec = template["spec"]
    spec["volumes"].append({"name": "slurmctld-state", "persistentVolumeClaim": {"claimName": names(config)["state"]}})
    spec["containers"][0]["volumeMounts"].append(state_mount)
    # A squashed export refuses root's chown: there the storage team makes the directory slurm's beforehand.
    owned = f'cd {STATE_SAVE_LOCATION} && if [ "$(stat -c %U .)" != slurm ]; then chown slurm:slurm . && chmod 0700 .; fi'
    spec["initContainers"] = [
        {
            "name": "state-owner",
            "image": ack(config).image,
            "command": ["/bin/sh", "-c", owned],
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}},
            "volumeMounts": [state_mount],
        }
    ]
    return template


def worker_group(config: PlatformConfig, pool: NodePoolConfig) -> dict[str, Any]:
    placement = worker_placement(config, pool)
    # slurmd confines each job in a cgroup of its own (cgroup.conf): that takes a writable /sys/fs/cgroup and,
    # on cgroup v2, loading BPF device filters, which a container gets only privileged (as Slinky's and soperator's slurmd).
    resources = container_resources(config.slurm.worker.slurmd, gpu_resources(config, pool))
    template = pod_template(config, "slurmd", [SLURMD_PORT], resources, placement, {ROLE_LABEL: "worker"}, privileged=True)
    volumes, mounts = gpu_jobs.worker_volumes(config)
    template["spec"]["volumes"] += volumes
    template["spec"]["containers"][0]["volumeMounts"] += mounts
    return {"groupName": pool.name, "replicas": pool.worker_replicas, "template": template}


def slurm_cluster_manifest(config: PlatformConfig) -> dict[str, Any]:
    settings = ack(config)
    spec: dict[str, Any] = {}
    if new_api(config):
        spec["slurmctld"] = {"template": head_template(config), "replicas": config.slurm.controller.size}
        if config.slurm.accounting.enabled:
            spec["slurmdbd"] = {
                "template": pod_template(
                    config,
                    "slurmdbd",
                    [SLURMDBD_PORT],
                    container_resources(config.slurm.accounting.slurmdbd),
                    system_placement(config),
                    {NODE_TYPE_LABEL: "slurmdbd"},
                    with_slurmdbd_conf=True,
                )
            }
    else:
        spec["headGroupSpec"] = {"template": head_template(config)}
    spec.update(
        workerGroupSpecs=[worker_group(config, pool) for pool in config.gpu_pools],
        mungeConfPath=munge_conf_path(config),
        slurmConfPath=settings.slurm_conf_path,
    )
    metadata: dict[str, Any] = {"name": config.cluster.name, "namespace": config.cluster.namespace}
    if annotations := readiness_annotations(config, READY):
        metadata["annotations"] = annotations
    return {"apiVersion": API_VERSION, "kind": "SlurmCluster", "metadata": metadata, "spec": spec}


# --- login, /home, autoscaling RBAC ----------------------------------------------


def login_labels(config: PlatformConfig) -> dict[str, str]:
    """Our login pods' labels (the Service's selector, the network policies' login role): like the copilot's, not the
    operator's cluster label, which marks the pods it runs itself."""
    return {"app.kubernetes.io/name": LOGIN_APP, "app.kubernetes.io/instance": config.cluster.name}


def login_sshd_config(config: PlatformConfig) -> str:
    """The login's sshd_config: researchers on the directory's keys (identity.clients.sshd_settings, sssd),
    root on the administrators' keys alone (sshRootPublicKeys, no password)."""
    lines = [
        "# slurm-platform: the ACK login's sshd (components/slurm/ack.py)",
        *sshd_settings(),
        f"Port {SSHD_PORT}",
        "PermitRootLogin prohibit-password",
        *(f"HostKey /etc/ssh/ssh_host_{kind}_key" for kind in ("rsa", "ecdsa", "ed25519")),
        "AcceptEnv LANG LC_*",
        "X11Forwarding no",
        "Subsystem sftp internal-sftp",
        "LogLevel INFO",
    ]
    return "\n".join(lines) + "\n"


def login_script(config: PlatformConfig) -> str:
    """What the login container runs: the steps of ack-login.sh, on this stack's data."""
    settings, q = ack(config), shlex.quote
    needed = ["sshd", "munged", *(["sssd", "sss_ssh_authorizedkeys"] if config.ldap.enabled else [])]
    data = [
        f"NEEDED=({' '.join(needed)})",
        f"SLURM_CONF_DIR={q(settings.slurm_conf_path.rstrip('/'))}",
        f"LOGIN_DIR={LOGIN_DIR}",
        f"LDAP={'yes' if config.ldap.enabled else 'no'}",
        f"MKHOMEDIR_SESSION={q(MKHOMEDIR_SESSION)}",
        *shell_function("start_munged", munged_lines(q(munge_conf_path(config)))),
    ]
    return data_and_steps("The ACK login: its data, then its steps (components/slurm/ack-login.sh).", data, LOGIN_STEPS)


def login_config_map(config: PlatformConfig) -> dict[str, Any]:
    keys = "".join(f"{key}\n" for key in config.slurm.login.ssh_root_public_keys)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": names(config)["login_files"], "namespace": config.cluster.namespace, "labels": {CLUSTER_LABEL: config.cluster.name}},
        "data": {LOGIN_SCRIPT: login_script(config), "sshd_config": login_sshd_config(config), "authorized_keys": keys},
    }


def login_deployment(config: PlatformConfig) -> dict[str, Any]:
    """The login pods: a Slurm client (slurm.conf, munge) with sshd and sssd, off the GPU nodes, no Kubernetes token.
    sssd reads the directory as the read-only account (sssd-config, and its CA with TLS); nslcd's files stay off it."""
    labels = login_labels(config)
    pod_volumes, mounts = volumes(config, with_slurmdbd_conf=False)
    nslcd = ("ldap-client", "nslcd-conf", "ldap-ca")
    pod_volumes = [v for v in pod_volumes if v["name"] not in nslcd] + [{"name": "login", "configMap": {"name": names(config)["login_files"]}}]
    mounts = [m for m in mounts if m["name"] not in nslcd] + [{"name": "login", "mountPath": LOGIN_DIR, "readOnly": True}]
    if config.ldap.enabled:
        sssd = {
            "name": "sssd-conf",
            "secret": {"secretName": SSSD_SECRET, "defaultMode": 0o600, "items": [{"key": "sssd.conf", "path": "sssd.conf"}]},
        }
        pod_volumes.append(sssd)
        mounts.append({"name": "sssd-conf", "mountPath": "/etc/sssd/sssd.conf", "subPath": "sssd.conf", "readOnly": True})
        ca_volumes, ca_mounts = ldap_ca_files(config, SSSD_CA_FILE)
        pod_volumes, mounts = pod_volumes + ca_volumes, mounts + ca_mounts
    pod_spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "priorityClassName": system_priority_class_name(config),
        "containers": [
            {
                "name": "login",
                "image": ack(config).image,
                "command": ["/bin/bash", f"{LOGIN_DIR}/{LOGIN_SCRIPT}"],
                "ports": [{"containerPort": SSHD_PORT, "protocol": "TCP"}],
                "resources": container_resources(config.slurm.login.sshd),
                "volumeMounts": mounts,
            }
        ],
        "volumes": pod_volumes,
        **system_placement(config),
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": names(config)["login"], "namespace": config.cluster.namespace, "labels": labels},
        "spec": {
            "replicas": config.slurm.login.size,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        },
    }


def login(config: PlatformConfig) -> list[Rendered]:
    return [
        Rendered("login-files", login_config_map(config)),
        Rendered("login", login_deployment(config)),
        Rendered("login-ssh", login_service(config)),
    ]


def login_service(config: PlatformConfig) -> dict[str, Any]:
    """The guide's LoadBalancer on a private (intranet) CLB, selecting our login pods (login_deployment), not the head."""
    login = config.slurm.login
    labels = login_labels(config)
    spec: dict[str, Any] = {
        "type": "LoadBalancer",
        "externalTrafficPolicy": "Local",
        **node_port_fields(config),
        "selector": labels,
        "ports": [{"name": "ssh", "port": SSHD_PORT, "targetPort": SSHD_PORT, "protocol": "TCP"}],
    }
    if login.allowed_source_ranges:
        spec["loadBalancerSourceRanges"] = list(login.allowed_source_ranges)
    if login.load_balancer_ip:
        spec["loadBalancerIP"] = login.load_balancer_ip
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": names(config)["login"],
            "namespace": config.cluster.namespace,
            "labels": labels,
            "annotations": {**(login_lb_annotations(config) or {}), **awaits_address(config)},
        },
        "spec": spec,
    }


def home_volumes(config: PlatformConfig) -> list[Rendered]:
    """The guide's static NAS PersistentVolume and its claim (data: protected, retained)."""
    home = ack(config).home
    if home is None:
        return []
    namespace, pv_name = config.cluster.namespace, names(config)["home_volume"]
    labels = {"slurm-platform/volume": "home"}
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": pv_name, "labels": labels},
        "spec": {
            "capacity": {"storage": home.size},
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "csi": {
                "driver": NAS_DRIVER,
                "volumeHandle": pv_name,
                "volumeAttributes": {"server": home.server, "path": home.path, "vers": home.nfs_version},
            },
            "claimRef": {"namespace": namespace, "name": home.claim_name},
        },
    }
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": home.claim_name, "namespace": namespace, "labels": labels},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": pv_name,
            "resources": {"requests": {"storage": home.size}},
        },
    }
    return [Rendered("home-pv", pv, keep=True), Rendered("home-pvc", pvc, keep=True)]


def state_claim(config: PlatformConfig) -> Rendered:
    """slurmctld's StateSaveLocation: its claim outlives the head pod, and is kept like the jail (protected, retained)."""
    settings = ack(config)
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": names(config)["state"], "namespace": config.cluster.namespace, "labels": {"slurm-platform/volume": "slurmctld-state"}},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": settings.state_storage_class_name or config.storage.storage_class.name,
            "resources": {"requests": {"storage": settings.state_size}},
        },
    }
    return Rendered("slurmctld-state", claim, keep=True)


def copilot_rbac(config: PlatformConfig) -> list[Rendered]:
    """What slurmctld-copilot needs to patch this SlurmCluster (the guide's rbac.yaml)."""
    rule = {
        "apiGroups": ["kai.alibabacloud.com"],
        "resources": ["slurmclusters"],
        "verbs": ["get", "watch", "list", "update", "patch"],
        "resourceNames": [config.cluster.name],
    }
    labels = {CLUSTER_LABEL: config.cluster.name}
    return service_account_rbac("copilot", names(config)["copilot"], config.cluster.namespace, labels, [rule])


def copilot_step_function() -> str:
    """ack-copilot.sh's `step STATE PROGRAM` (and the table it keeps), for a test to run alone."""
    start = COPILOT_STEPS.index("declare -A handled")
    return COPILOT_STEPS[start : COPILOT_STEPS.index("\n}\n", start) + 2]


def copilot_script(config: PlatformConfig) -> str:
    """What the copilot container runs: the steps of ack-copilot.sh, on this stack's data."""
    settings, q = ack(config), shlex.quote
    autoscaling = settings.autoscaling
    data = [
        f"SLURM_CONF_DIR={q(settings.slurm_conf_path.rstrip('/'))}",
        f"K8S_INFO_DIR={K8S_INFO_DIR}",
        f"PODINFO_DIR={PODINFO_DIR}",
        f"NAMESPACE={q(config.cluster.namespace)}",
        f"LABELS={q(f'{CLUSTER_LABEL}={json.dumps(config.cluster.name)}')}",
        f"RESUME_PROGRAM={q(autoscaling.resume_program)}",
        f"SUSPEND_PROGRAM={q(autoscaling.suspend_program)}",
        f"POLL_SECONDS={COPILOT_POLL_SECONDS}",
        *shell_function("start_munged", munged_lines(q(munge_conf_path(config)))),
    ]
    what = "The ACK copilot: resumes and suspends CLOUD workers for slurmctld (components/slurm/ack-copilot.sh)."
    return data_and_steps(what, data, COPILOT_STEPS)


def copilot_config_map(config: PlatformConfig) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": names(config)["copilot"], "namespace": config.cluster.namespace, "labels": {CLUSTER_LABEL: config.cluster.name}},
        "data": {COPILOT_SCRIPT: copilot_script(config)},
    }


def copilot_deployment(config: PlatformConfig) -> dict[str, Any]:
    """The only pod with a token (the copilot's, which may patch this SlurmCluster): no sshd,
    no Service, nothing users reach. One replica, replaced not rolled, so no two resume a node."""
    name = names(config)["copilot"]
    labels = {"app.kubernetes.io/name": "slurmctld-copilot", "app.kubernetes.io/instance": config.cluster.name}
    pod_volumes, mounts = volumes(config, with_slurmdbd_conf=False)
    needed = ("slurm-conf", "munge-key")
    pod_volumes = [v for v in pod_volumes if v["name"] in needed] + [
        {"name": "script", "configMap": {"name": name}},
        {"name": "k8s-info", "emptyDir": {}},
        {"name": "podinfo", "emptyDir": {}},
    ]
    mounts = [m for m in mounts if m["name"] in needed] + [
        {"name": "script", "mountPath": COPILOT_DIR, "readOnly": True},
        {"name": "k8s-info", "mountPath": K8S_INFO_DIR},
        {"name": "podinfo", "mountPath": PODINFO_DIR},
    ]
    pod_spec: dict[str, Any] = {
        "serviceAccountName": name,
        "automountServiceAccountToken": True,
        "priorityClassName": system_priority_class_name(config),
        "containers": [
            {
                "name": "copilot",
                "image": ack(config).image,
                "command": ["/bin/bash", f"{COPILOT_DIR}/{COPILOT_SCRIPT}"],
                "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}},
                "volumeMounts": mounts,
            }
        ],
        "volumes": pod_volumes,
        **system_placement(config),
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": config.cluster.namespace, "labels": labels},
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        },
    }


def copilot(config: PlatformConfig) -> list[Rendered]:
    if not ack(config).autoscaling.enabled:
        return []
    return [
        *copilot_rbac(config),
        Rendered("copilot-script", copilot_config_map(config)),
        Rendered("copilot", copilot_deployment(config)),
    ]


# --- the module interface -------------------------------------------------------


def chart_releases(config: PlatformConfig, after: tuple[str, ...] = ()) -> list[ChartRelease]:
    chart_config = config.operators.ack_slurm_operator
    if not chart_config.install:
        return []
    chart, repo = chart_source(chart_config.repository, "ack-slurm-operator")
    return [
        ChartRelease(OPERATOR_RELEASE, chart, chart_config.version, chart_config.namespace, dict(chart_config.values), repo=repo, depends_on=after)
    ]


def needs_cert_manager(config: PlatformConfig) -> bool:
    return False


def render(config: PlatformConfig) -> list[Rendered]:
    autoscaled = AUTOSCALED_FIELDS if ack(config).autoscaling.enabled else ()
    return [
        *home_volumes(config),
        state_claim(config),
        *system_priority(config),
        Rendered("slurm-conf", slurm_conf_config_map(config)),
        *gpu_jobs.rendered(config),
        Rendered("cluster", slurm_cluster_manifest(config), ignore_changes=autoscaled, live_status=True, ready_when=READY),
        *copilot(config),
        *login(config),
    ]


def key_secrets(config: PlatformConfig) -> list[KeySecret]:
    return []  # the munge key is the platform's <cluster>-munge (key munge.key)


def worker_nodes(config: PlatformConfig) -> list[str]:
    return [f"{worker_name_prefix(config, pool)}{i}" for pool in config.gpu_pools for i in range(pool.worker_replicas)]


def login_service_name(config: PlatformConfig) -> str:
    return names(config)["login"]


def login_endpoint(config: PlatformConfig, live_service: Optional[dict[str, Any]] = None) -> str:
    return ssh_endpoint(config, login_service_name(config), node_port=False)


def ssh_command(config: PlatformConfig, live_service: Optional[dict[str, Any]] = None) -> str:
    """Root's, on sshRootPublicKeys (the administrators')."""
    return ssh_command_for(config, login_service_name(config), node_port=False)


def user_ssh_command(config: PlatformConfig, live_service: Optional[dict[str, Any]] = None) -> str:
    """A researcher's, as themselves (sssd on the login pods)."""
    return ssh_command_for(config, login_service_name(config), node_port=False, user=USER_PLACEHOLDER)


def service_names(config: PlatformConfig) -> dict[str, str]:
    return {"ssh": login_service_name(config)}


live_login_service = no_live_login
removed_workers_warning = no_removed_workers_warning


def not_ready_message(config: PlatformConfig, status: Optional[dict[str, Any]]) -> Optional[str]:
    """The operator's own words when the live SlurmCluster is not ready; None when it is (or reports nothing yet)."""
    state = (status or {}).get("state")
    if not state or READY.holds(status):
        return None
    reason = (status or {}).get("reason")
    namespace, name = config.cluster.namespace, config.cluster.name
    return (
        f"SlurmCluster {namespace}/{name} is {state!r}, not {READY.value}"
        + (f": {reason}" if reason else "")
        + f". Inspect: kubectl -n {namespace} get slurmcluster {name} -o yaml"
    )


def accounting_client(config: PlatformConfig) -> AccountingClient:
    """The cluster's own Slurm image (bring-your-own: it runs slurmctld and munged) and the platform's munge key."""
    return AccountingClient(
        image=ack(config).image,
        slurmdbd_host=slurmdbd_host(config),
        slurmctld_host=slurmctld_host(config),
        auth="auth/munge",
        key_secret=munge_secret_name(config.cluster.name),
        key=MUNGE_KEY_FIELD,
        slurm_user=SLURM_USER,
        slurm_uid=SLURM_UID,
        node_features=node_features(config, lambda pool: pool_feature(config, pool)),
    )


def pool_feature(config: PlatformConfig, pool: NodePoolConfig) -> Optional[str]:
    """Each worker group's nodes carry its name as a feature (define_workers)."""
    return pool.name


def pod_roles(config: PlatformConfig) -> PodRoles:
    """Our templates' labels, which the operator copies onto its pods: the head runs slurmctld (and slurmdbd in the
    2024-06 API); the login pods are our Deployment's."""
    cluster = {CLUSTER_LABEL: config.cluster.name}
    head = {"matchLabels": {**cluster, NODE_TYPE_LABEL: "head"}}
    workers = {"matchLabels": {**cluster, ROLE_LABEL: "worker"}}
    accounting = None
    if config.slurm.accounting.enabled:
        accounting = {"matchLabels": {**cluster, NODE_TYPE_LABEL: "slurmdbd"}} if new_api(config) else head
    return PodRoles(controller=head, workers=workers, login={"matchLabels": login_labels(config)}, accounting=accounting)

"""The soperator `SlurmCluster` (`slurm.nebius.ai/v1`) in the 1.14.10 shape that
FPT's `helm-slurm-cluster` chart renders.

Each part of the spec has its own pure builder (config in, plain dict out), in
the spirit of soperator's own render package; `SlurmCluster` only declares the
custom resource, the restricted login Service, and the outputs.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s
from pydantic.alias_generators import to_camel, to_snake

from . import child_opts, warn
from .config import PlatformConfig, PodResources
from .munge import generated_key, secret_data
from .node_pools import GPU_FILTER, NO_GPU_FILTER, k8s_node_filters
from .slurm import KeySecret, Rendered, SlurmOperator, operator_module
from .storage import JAIL_SOURCE, SPOOL_SOURCE, data_volumes

API_VERSION = "slurm.nebius.ai/v1"
KIND = "SlurmCluster"
SSHD_PORT = 22
WAIT_FOR_ANNOTATION = "pulumi.com/waitFor"
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


def resources(pod: PodResources) -> dict[str, Any]:
    """Container resources keyed by Kubernetes resource name, as the chart renders them."""
    return {"cpu": pod.cpu, "memory": pod.memory, "ephemeral-storage": pod.ephemeral_storage}


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


def ssh_command(host: Optional[str], port: int) -> str:
    """A plain `ssh` line; `<any-node-ip>`/`<pending address>` mark what is not known yet."""
    target = host or ("<any-node-ip>" if port != SSHD_PORT else "<pending address>")
    return f"ssh root@{target}" if port == SSHD_PORT else f"ssh -p {port} root@{target}"


def unmet_conditions(status: Optional[dict[str, Any]]) -> list[str]:
    """soperator's conditions that do not hold, in its own words: `Type=Status: message`."""
    return [f"{c.get('type')}={c.get('status')}: {c.get('message')}" for c in (status or {}).get("conditions") or [] if c.get("status") != "True"]


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


def scale_down_warning(removed: list[str]) -> Optional[str]:
    if not removed:
        return None
    return (
        f"Slurm workers {', '.join(removed)} will disappear. soperator does not remove them from slurmctld: "
        f"after `pulumi up`, run on a login node: scontrol delete nodeName={','.join(removed)}"
    )


def warn_about_removed_workers(config: PlatformConfig, previous_workers: pulumi.Output[Any]) -> None:
    """Warn at preview time, comparing with the workers this stack last exported."""
    previous_workers.apply(lambda previous: warn(scale_down_warning(removed_worker_nodes(previous, config.slurm.worker.size))))


class LiveCustomResource(pulumi.CustomResource):
    """A custom resource whose live `status` is an output too.

    pulumi-kubernetes' `CustomResource` resolves only the properties it was given;
    declaring `status` (sent as nothing) makes the provider's answer, read after
    the await, visible to the program. The type token is the same.
    """

    status: pulumi.Output[Any]

    def __init__(self, name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions):
        props = {key: manifest[key] for key in ("apiVersion", "kind", "metadata", "spec")}
        # Like the SDK's CustomResource: ask for the provider plugin of the installed SDK.
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(version=metadata.version("pulumi-kubernetes")))
        super().__init__(f"kubernetes:{manifest['apiVersion']}:{manifest['kind']}", name, {**props, "status": None}, opts)


# --- other Slurm operators (components/slurm/): their manifests, declared generically ----

# Built-in kinds the operator modules render, declared with their typed resources.
BUILTIN_KINDS = {
    ("v1", "Service"): k8s.core.v1.Service,
    ("v1", "ConfigMap"): k8s.core.v1.ConfigMap,
    ("v1", "ServiceAccount"): k8s.core.v1.ServiceAccount,
    ("v1", "PersistentVolume"): k8s.core.v1.PersistentVolume,
    ("v1", "PersistentVolumeClaim"): k8s.core.v1.PersistentVolumeClaim,
    ("rbac.authorization.k8s.io/v1", "Role"): k8s.rbac.v1.Role,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): k8s.rbac.v1.RoleBinding,
}


def declare(name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """One manifest as a Pulumi resource (typed for built-ins, CustomResource otherwise)."""
    fields = {to_snake(key): value for key, value in manifest.items() if key not in ("apiVersion", "kind")}
    builtin = BUILTIN_KINDS.get((manifest["apiVersion"], manifest["kind"]))
    if builtin is not None:
        return builtin(name, **fields, opts=opts)
    return k8s.apiextensions.CustomResource(name, api_version=manifest["apiVersion"], kind=manifest["kind"], **fields, opts=opts)


class SlurmCluster(pulumi.ComponentResource):
    worker_nodes: pulumi.Output[list]
    login_endpoint: pulumi.Output[Optional[str]]
    ssh_command: pulumi.Output[str]
    phase: pulumi.Output[Optional[str]]
    unmet_conditions: pulumi.Output[list]
    service_names: pulumi.Output[dict]

    def __init__(self, name: str, config: PlatformConfig, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("slurm-platform:slurm_cluster:SlurmCluster", name, None, opts)
        module: SlurmOperator = operator_module(config)
        if module.OPERATOR != "soperator 1.14.10":
            self._other_operator(name, config, module, opts)
            return
        manifest = slurm_cluster_manifest(config)
        manifest["spec"] = config.secret_if("slurm", manifest["spec"])
        timeout = f"{config.slurm.readiness.timeout_minutes}m"
        self.cluster = LiveCustomResource(
            f"{name}-cluster",
            manifest,
            opts=child_opts(
                self,
                opts,
                custom_timeouts=pulumi.CustomTimeouts(create=timeout, update=timeout) if awaits_readiness(config) else None,
            ),
        )
        status = self.cluster.status.apply(lambda live: dict(live) if live else None)
        status.apply(lambda live: warn(not_ready_message(config, live)))
        login_service = self._login_service(name, config, opts)
        address = login_service.apply(lambda live: login_address(config, live))
        self.worker_nodes = pulumi.Output.from_input(worker_node_names(config.slurm.worker.size))
        self.login_endpoint = address.apply(lambda hp: f"{hp[0]}:{hp[1]}" if hp[0] else None)
        self.ssh_command = address.apply(lambda hp: ssh_command(*hp))
        self.phase = status.apply(lambda live: (live or {}).get("phase"))
        self.unmet_conditions = status.apply(unmet_conditions)
        self.service_names = pulumi.Output.from_input(service_names(config))
        self.register_outputs(
            {
                "workerNodes": self.worker_nodes,
                "loginEndpoint": self.login_endpoint,
                "sshCommand": self.ssh_command,
                "phase": self.phase,
                "unmetConditions": self.unmet_conditions,
                "serviceNames": self.service_names,
            }
        )

    def _other_operator(self, name: str, config: PlatformConfig, module: SlurmOperator, opts: Optional[pulumi.ResourceOptions]) -> None:
        """soperator 4.x, ACK, Slinky: whatever the module renders, its key Secrets first; outputs as far as known."""
        key_secrets = [self._key_secret(name, spec, opts) for spec in module.key_secrets(config)]
        for rendered in module.render(config):
            self._declare(name, rendered, key_secrets, opts)
        self.worker_nodes = pulumi.Output.from_input(module.worker_nodes(config))
        self.login_endpoint = pulumi.Output.from_input(module.login_endpoint(config))
        self.ssh_command = pulumi.Output.from_input(module.ssh_command(config))
        self.phase = pulumi.Output.from_input(None)
        self.unmet_conditions = pulumi.Output.from_input([])
        self.service_names = pulumi.Output.from_input({"ssh": module.login_service_name(config)})
        self.register_outputs({"workerNodes": self.worker_nodes, "loginEndpoint": self.login_endpoint, "sshCommand": self.ssh_command})

    def _declare(self, name: str, rendered: Rendered, key_secrets: list[pulumi.Resource], opts: Optional[pulumi.ResourceOptions]) -> None:
        extra: dict[str, Any] = {}
        if rendered.ignore_changes:
            extra["ignore_changes"] = list(rendered.ignore_changes)
        if rendered.keep:
            extra.update(protect=True, retain_on_delete=True)
        # Custom resources reference the key Secrets by name: create those first.
        depends_on = key_secrets if "." in rendered.manifest["apiVersion"].split("/")[0] and key_secrets else None
        declare(f"{name}-{rendered.role}", rendered.manifest, child_opts(self, opts, depends_on=depends_on, **extra))

    def _key_secret(self, name: str, spec: KeySecret, opts: Optional[pulumi.ResourceOptions]) -> pulumi.Resource:
        key = generated_key(f"{name}-{spec.role}-random", spec.length, spec.rotation, child_opts(self, opts))
        return k8s.core.v1.Secret(
            f"{name}-{spec.role}",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=spec.name, namespace=spec.namespace, labels=spec.labels or None),
            type="Opaque",
            data={spec.key: secret_data(key.result)},
            opts=child_opts(self, opts, additional_secret_outputs=["data", "stringData"]),
        )

    def _login_service(self, name: str, config: PlatformConfig, opts: Optional[pulumi.ResourceOptions]) -> pulumi.Output[Optional[dict[str, Any]]]:
        """The live Service users SSH through: ours when restricted, else soperator's (read once the cluster is up)."""
        manifest = restricted_login_service(config)
        if manifest is not None:
            # Its await needs ready login pods behind it (which exist once the cluster is
            # Available), then waits for the LoadBalancer's address.
            service = k8s.core.v1.Service(
                f"{name}-login-ssh",
                metadata=manifest["metadata"],
                spec=manifest["spec"],
                opts=child_opts(self, opts, depends_on=[self.cluster]),
            )
        elif config.render_only:
            return pulumi.Output.from_input(None)
        else:
            # The ID waits for the cluster's outputs: unknown while it is being created, so
            # a first preview skips the read instead of failing on a Service not there yet.
            service_id = pulumi.Output.all(self.cluster.id, self.cluster.status).apply(
                lambda _: f"{config.cluster.namespace}/{service_names(config)['login']}"
            )
            service = k8s.core.v1.Service.get(f"{name}-login-svc", service_id, opts=child_opts(self, opts))
        return pulumi.Output.all(spec=service.spec, status=service.status).apply(api_names)


def api_names(value: Any) -> Any:
    """Typed SDK outputs (dicts keyed `load_balancer`, `node_port`) as the API's camelCase objects."""
    if isinstance(value, dict):
        return {to_camel(key): api_names(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [api_names(item) for item in value]
    return value

"""Quota: what the stack asks of the region, and whether a Slurm worker fits a GPU node.

* `slurm-region-quota` sums CPU, memory, GPUs, storage, claims and load
  balancers over the SlurmCluster's pods and volumes and every StatefulSet,
  Deployment, PersistentVolumeClaim and LoadBalancer Service in the stack, and
  compares the totals with the region's quota from the policy config.
* `slurm-worker-node-fit`: a worker pod (slurmd + munge) fits one node of a GPU
  pool, and there are at least as many such nodes as workers (soperator runs
  one worker per whole GPU node).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from .common import (
    ACK_SLURM_CLUSTER,
    DEPLOYMENT,
    GI,
    MARIADB,
    PVC,
    SERVICE,
    SLINKY_ACCOUNTING,
    SLINKY_CONTROLLER,
    SLINKY_LOGINSET,
    SLINKY_NODESET,
    SLINKY_RESTAPI,
    SLURM_CLUSTER,
    SOPERATOR_NODESET,
    STATEFUL_SET,
    ack_templates,
    config_value,
    display,
    elements,
    fmt_number,
    get,
    is_map,
    items,
    maybe_quantity,
    of_type,
    slurm_nodes,
    stack_config,
    violation,
)

# Quota dimensions, in the units the policy config uses.
DIMENSIONS = {
    "vcpu": "vCPU",
    "memoryGi": "memory (Gi)",
    "gpus": "GPUs",
    "storageGi": "storage (Gi)",
    "loadBalancers": "LoadBalancer Services",
    "pvcs": "PersistentVolumeClaims",
}

# The containers of each soperator node kind (1.14.10 CRD), main container first.
SLURM_CONTAINERS = {
    "controller": ("slurmctld", "munge"),
    "worker": ("slurmd", "munge"),
    "login": ("sshd", "munge"),
    "exporter": ("exporter", "exporterContainer", "munge"),  # exporterContainer: 4.x
    "accounting": ("slurmdbd", "munge"),
}
OPTIONAL_NODES = ("exporter", "accounting")


# ---------------------------------------------------------------------------
# Resource arithmetic


def requests_of(resources: Any) -> dict[str, Any]:
    """What the scheduler reserves: `requests`, falling back to `limits` key by key
    (Kubernetes defaults a missing request to its limit). soperator's CRD takes a
    flat map (`{cpu, memory, nvidia.com/gpu}`), which is the request."""
    if not is_map(resources):
        return {}
    if "requests" in resources or "limits" in resources:
        merged = dict(items(get(resources, "limits", default={})))
        merged.update(items(get(resources, "requests", default={})))
        return merged
    return dict(resources.items())


@dataclass
class PodShape:
    cpu: float = 0.0
    memory_gi: float = 0.0
    gpus: float = 0.0

    def add(self, resources: Any) -> PodShape:
        for key, value in requests_of(resources).items():
            amount = maybe_quantity(value)
            if amount is None:
                continue
            if key == "cpu":
                self.cpu += amount
            elif key == "memory":
                self.memory_gi += amount / GI
            elif str(key).endswith("/gpu"):
                self.gpus += amount
        return self

    def describe(self) -> str:
        parts = [f"{fmt_number(self.cpu)} CPU", f"{fmt_number(self.memory_gi)}Gi"]
        if self.gpus:
            parts.append(f"{fmt_number(self.gpus)} GPUs")
        return ", ".join(parts)


def container_shape(containers: Any) -> PodShape:
    shape = PodShape()
    for container in elements(containers):
        shape.add(get(container, "resources"))
    return shape


def pod_spec_shape(pod_spec: Any) -> PodShape:
    """A pod's running containers: its containers and its native sidecars (init containers with restartPolicy
    Always, which run beside them for the pod's life); the other init containers run before and finish."""
    sidecars = [c for c in elements(get(pod_spec, "initContainers")) if get(c, "restartPolicy") == "Always"]
    return container_shape([*elements(get(pod_spec, "containers")), *sidecars])


def storage_gi(claim_spec: Any) -> float:
    amount = maybe_quantity(get(claim_spec, "resources", "requests", "storage"))
    return (amount or 0.0) / GI


def count(value: Any, default: int = 1) -> int:
    amount = maybe_quantity(value)
    return default if amount is None else int(amount)


@dataclass
class Demand:
    totals: dict[str, float] = field(default_factory=lambda: {d: 0.0 for d in DIMENSIONS})
    parts: dict[str, list[tuple[float, str]]] = field(default_factory=lambda: {d: [] for d in DIMENSIONS})

    def add(self, dimension: str, amount: float, what: str) -> None:
        if amount:
            self.totals[dimension] += amount
            self.parts[dimension].append((amount, what))

    def add_pods(self, replicas: int, shape: PodShape, what: str) -> None:
        label = f"{what}: {replicas} x ({shape.describe()})"
        self.add("vcpu", replicas * shape.cpu, label)
        self.add("memoryGi", replicas * shape.memory_gi, label)
        self.add("gpus", replicas * shape.gpus, label)

    def add_claims(self, claims: int, size_gi: float, what: str) -> None:
        label = f"{what}: {claims} x {fmt_number(size_gi)}Gi"
        self.add("storageGi", claims * size_gi, label)
        self.add("pvcs", claims, label)

    def largest(self, dimension: str, n: int = 3) -> list[str]:
        ranked = sorted(self.parts[dimension], key=lambda part: -part[0])
        return [what for _, what in ranked[:n]]


def node_enabled(kind: str, node: Any) -> bool:
    """exporter and accounting run only when enabled (the 1.14.10 CRD defaults both to false)."""
    return kind not in OPTIONAL_NODES or get(node, "enabled", default=False) is True


def slurm_pod_shape(kind: str, node: Any) -> PodShape:
    shape = PodShape()
    for container in SLURM_CONTAINERS[kind]:
        shape.add(get(node, container, "resources"))
    return shape


def add_slurm_cluster(demand: Demand, cluster: Any, label: str) -> None:
    nodes = slurm_nodes(cluster)
    for kind in SLURM_CONTAINERS:
        node = get(nodes, kind)
        if not is_map(node) or not node_enabled(kind, node):
            continue
        size = count(get(node, "size"), default=1)
        demand.add_pods(size, slurm_pod_shape(kind, node), f"SlurmCluster {label} {kind}")
        # Per-pod claims, e.g. the worker spool's volumeClaimTemplateSpec.
        for key, volume in items(get(node, "volumes")):
            template = get(volume, "volumeClaimTemplateSpec")
            if is_map(template):
                demand.add_claims(size, storage_gi(template), f"SlurmCluster {label} {kind} {key} volumes")
        if kind == "accounting":
            mariadb = get(node, "mariadbOperator")
            if is_map(mariadb) and get(mariadb, "enabled", default=False):
                replicas = count(get(mariadb, "replicas"), default=1)
                demand.add_pods(replicas, PodShape().add(get(mariadb, "resources")), f"SlurmCluster {label} mariadb")
                storage = get(mariadb, "storage", default={})
                if not get(storage, "ephemeral", default=False):
                    # storage.size supersedes the template's request (CRD).
                    volume_size = maybe_quantity(get(storage, "size"))
                    size_gi = volume_size / GI if volume_size is not None else storage_gi(get(storage, "volumeClaimTemplate"))
                    demand.add_claims(replicas, size_gi, f"SlurmCluster {label} mariadb storage")
    if get(nodes, "login", "sshdServiceType") == "LoadBalancer" and is_map(get(nodes, "login")):
        demand.add("loadBalancers", 1, f"SlurmCluster {label} login sshdServiceType LoadBalancer")


# Slinky CRs: (container fields, replicas field or None for one pod).
SLINKY_PODS = {
    SLINKY_CONTROLLER: (("slurmctld",), None),
    SLINKY_NODESET: (("slurmd",), "replicas"),
    SLINKY_LOGINSET: (("login",), "replicas"),
    SLINKY_ACCOUNTING: (("slurmdbd",), None),
    SLINKY_RESTAPI: (("slurmrestd",), "replicas"),
}


def add_soperator_nodeset(demand: Demand, nodeset: Any, label: str) -> None:
    """soperator 4.x workers: replicas x (slurmd + munge + sssd), and a spool claim per worker."""
    spec = get(nodeset, "spec", default={})
    replicas = count(get(spec, "replicas"), default=1)
    shape = PodShape()
    for container in ("slurmd", "munge", "sssd"):
        shape.add(get(spec, container, "resources"))
    demand.add_pods(replicas, shape, f"NodeSet {label}")
    template = get(spec, "slurmd", "volumes", "spool", "ephemeral", "volumeClaimTemplate", "spec")
    if is_map(template):
        demand.add_claims(replicas, storage_gi(template), f"NodeSet {label} spool")


def add_ack_cluster(demand: Demand, cluster: Any, label: str) -> None:
    """ACK: every pod template (head, slurmdbd, restd) times its replicas, worker groups included."""
    for where, replicas, template in ack_templates(cluster):
        demand.add_pods(replicas, container_shape(get(template, "spec", "containers")), f"SlurmCluster {label} {where}")


def add_slinky(demand: Demand, resource_type: str, props: Any, label: str) -> None:
    containers, replicas_field = SLINKY_PODS[resource_type]
    spec = get(props, "spec", default={})
    replicas = count(get(spec, replicas_field), default=1) if replicas_field else 1
    shape = container_shape(get(spec, "template", "spec", "containers"))
    for container in containers:
        shape.add(get(spec, container, "resources"))
    kind = resource_type.rsplit(":", 1)[-1]
    demand.add_pods(replicas, shape, f"{kind} {label}")
    persistence = get(spec, "persistence")
    if is_map(persistence) and get(persistence, "enabled") is True and not get(persistence, "existingClaim"):
        demand.add_claims(1, storage_gi(persistence), f"{kind} {label} persistence")
    if get(spec, "service", "spec", "type") == "LoadBalancer":
        demand.add("loadBalancers", 1, f"{kind} {label} service")


def add_mariadb(demand: Demand, mariadb: Any, label: str) -> None:
    size = maybe_quantity(get(mariadb, "spec", "storage", "size"))
    replicas = count(get(mariadb, "spec", "replicas"), default=1)
    if size:
        demand.add_claims(replicas, size / GI, f"MariaDB {label} storage")


def stack_demand(resources: list[Any]) -> Demand:
    demand = Demand()
    for cluster in of_type(resources, SLURM_CLUSTER):
        add_slurm_cluster(demand, cluster.props, display(cluster.props, cluster.name))
    for nodeset in of_type(resources, SOPERATOR_NODESET):
        add_soperator_nodeset(demand, nodeset.props, display(nodeset.props, nodeset.name))
    for cluster in of_type(resources, ACK_SLURM_CLUSTER):
        add_ack_cluster(demand, cluster.props, display(cluster.props, cluster.name))
    for resource in of_type(resources, *SLINKY_PODS):
        add_slinky(demand, resource.resource_type, resource.props, display(resource.props, resource.name))
    for mariadb in of_type(resources, MARIADB):
        add_mariadb(demand, mariadb.props, display(mariadb.props, mariadb.name))
    for workload in of_type(resources, STATEFUL_SET, DEPLOYMENT):
        spec = get(workload.props, "spec", default={})
        replicas = count(get(spec, "replicas"), default=1)
        kind = workload.resource_type.rsplit(":", 1)[-1]
        label = f"{kind} {display(workload.props, workload.name)}"
        demand.add_pods(replicas, pod_spec_shape(get(spec, "template", "spec")), label)
        for template in elements(get(spec, "volumeClaimTemplates")):
            demand.add_claims(replicas, storage_gi(get(template, "spec")), f"{label} volumeClaimTemplate")
    for pvc in of_type(resources, PVC):
        demand.add_claims(1, storage_gi(get(pvc.props, "spec")), f"PersistentVolumeClaim {display(pvc.props, pvc.name)}")
    for service in of_type(resources, SERVICE):
        if get(service.props, "spec", "type") == "LoadBalancer":
            demand.add("loadBalancers", 1, f"Service {display(service.props, service.name)}")
    return demand


# ---------------------------------------------------------------------------
# slurm-region-quota


# Where a quota comes from: the stack config, through `make schema` (tools/policy_configs.py).
DECLARE_QUOTA = "declare the account's quota in the stack config (slurm-platform:regionQuota) and run make schema"


def select_quota(config: Mapping[str, Any]) -> tuple[Optional[str], Optional[Mapping[str, Any]], Optional[str]]:
    """(region, quota, problem). Neither quotas nor a region configured: (None, None, None)."""
    quotas = config_value(config, "quotas", {})
    region = config_value(config, "region", "")
    if not quotas and not region:
        return None, None, None
    if not quotas:
        # The stack names its region but declares no quota: say so rather than pass on anything.
        return region, None, violation(f"slurm-region-quota: no quota is declared for region '{region}'", DECLARE_QUOTA)
    if not region:
        if len(quotas) == 1:
            region = next(iter(quotas))
        else:
            return (
                None,
                None,
                violation(
                    f"slurm-region-quota: quotas are set for {', '.join(sorted(quotas))} but no region is selected",
                    "set slurm-region-quota.region in the policy pack config",
                ),
            )
    if region not in quotas:
        return (
            region,
            None,
            violation(
                f"slurm-region-quota: no quota for region '{region}' (quotas exist for {', '.join(sorted(quotas))})",
                f"{DECLARE_QUOTA}, or add quotas.{region} to a hand-written slurm-region-quota policy config",
            ),
        )
    return region, quotas[region], None


def validate_region_quota(args: StackValidationArgs, report: ReportViolation) -> None:
    region, quota, problem = select_quota(stack_config(args))
    if problem:
        report(problem, None)
    if quota is None:
        return
    demand = stack_demand(args.resources)
    exceeded = []
    for dimension in DIMENSIONS:
        allowed = quota.get(dimension)
        if allowed is None:
            continue
        asked = demand.totals[dimension]
        if asked > float(allowed) + 1e-9:
            top = "; ".join(demand.largest(dimension))
            exceeded.append(f"{dimension}: asked {fmt_number(asked)} > allowed {fmt_number(float(allowed))} ({top})")
    if exceeded:
        report(
            violation(
                f"The stack exceeds the '{region}' quota for {len(exceeded)} dimension(s): " + " | ".join(exceeded),
                "reduce worker/login size or pod resources, volume sizes or LoadBalancer Services, "
                f"or raise the '{region}' quota (slurm-platform:regionQuota, then make schema) once the cloud quota has been raised",
            ),
            None,
        )


_QUOTA_SCHEMA = {
    "type": "object",
    "properties": {
        "vcpu": {"type": "number", "minimum": 0},
        "memoryGi": {"type": "number", "minimum": 0},
        "gpus": {"type": "number", "minimum": 0},
        "storageGi": {"type": "number", "minimum": 0},
        "loadBalancers": {"type": "integer", "minimum": 0},
        "pvcs": {"type": "integer", "minimum": 0},
    },
    "additionalProperties": False,
}

region_quota = StackValidationPolicy(
    name="slurm-region-quota",
    description="The stack's CPU, memory, GPU, storage, claim and LoadBalancer demand fits the region quota.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_region_quota,
    config_schema=PolicyConfigSchema(
        properties={
            "region": {"type": "string", "description": "Key of `quotas` that applies to this stack."},
            "quotas": {
                "type": "object",
                "additionalProperties": _QUOTA_SCHEMA,
                "default": {},
                "description": "Per-region quota: {region: {vcpu, memoryGi, gpus, storageGi, loadBalancers, pvcs}}; "
                "a missing dimension is unlimited.",
            },
        }
    ),
)


# ---------------------------------------------------------------------------
# slurm-worker-node-fit


@dataclass(frozen=True)
class Pool:
    name: str
    cpu: float
    memory_gi: float
    gpus: float
    nodes: int

    def fits(self, pod: PodShape) -> bool:
        return pod.cpu <= self.cpu + 1e-9 and pod.memory_gi <= self.memory_gi + 1e-9 and pod.gpus <= self.gpus

    def describe(self) -> str:
        return f"'{self.name}' ({fmt_number(self.cpu)} CPU, {fmt_number(self.memory_gi)}Gi, {fmt_number(self.gpus)} GPUs per node)"


def gpu_pools(config: Mapping[str, Any]) -> list[Pool]:
    pools = [
        Pool(
            str(name),
            float(get(pool, "cpu", default=0)),
            float(get(pool, "memoryGi", default=0)),
            float(get(pool, "gpus", default=0)),
            int(get(pool, "nodes", default=0)),
        )
        for name, pool in items(config_value(config, "nodePools", {}))
    ]
    return [pool for pool in pools if pool.gpus > 0]


def worker_sets(resource_type: str, props: Any) -> list[tuple[str, str, int, PodShape]]:
    """(what, pool name, workers, pod shape) of per-pool workers: soperator 4.x and Slinky NodeSets
    (named after their pool) and ACK worker groups (groupName = pool)."""
    name = str(get(props, "metadata", "name", default=""))
    spec = get(props, "spec", default={})
    if resource_type == SOPERATOR_NODESET:
        shape = PodShape()
        for container in ("slurmd", "munge", "sssd"):
            shape.add(get(spec, container, "resources"))
        return [(f"NodeSet {display(props)}", name, count(get(spec, "replicas"), default=1), shape)]
    if resource_type == SLINKY_NODESET:
        shape = container_shape(get(spec, "template", "spec", "containers")).add(get(spec, "slurmd", "resources"))
        return [(f"NodeSet {display(props)}", name, count(get(spec, "replicas"), default=1), shape)]
    if resource_type == ACK_SLURM_CLUSTER:
        return [
            (
                f"SlurmCluster {display(props)} {where}",
                where.removeprefix("workerGroupSpecs[").rstrip("]"),
                replicas,
                container_shape(get(template, "spec", "containers")),
            )
            for where, replicas, template in ack_templates(props)
            if where.startswith("workerGroupSpecs")
        ]
    return []


def validate_worker_sets(args: ResourceValidationArgs, report: ReportViolation, pools: list[Pool]) -> None:
    for what, pool_name, workers, pod in worker_sets(args.resource_type, args.props):
        matching = [pool for pool in pools if pool.name == pool_name] or pools
        fitting = [pool for pool in matching if pool.fits(pod)]
        if not fitting:
            report(
                violation(
                    f"{what}: a worker pod asks {pod.describe()}, more than a node of GPU pool "
                    f"{', '.join(p.describe() for p in matching)} has; workers would stay Pending",
                    "lower slurm.worker.slurmd / slurm.worker.munge requests to fit the node's allocatable",
                ),
                None,
            )
            continue
        capacity = sum(pool.nodes for pool in fitting)
        if workers > capacity:
            report(
                violation(
                    f"{what}: {workers} workers exceed the {capacity} node(s) of GPU pool "
                    f"{', '.join(p.name for p in fitting)}; each worker takes a whole GPU node",
                    f"set nodePools[{pool_name}].slurmWorkers to at most {capacity}, or add nodes to the pool",
                ),
                None,
            )


def validate_worker_node_fit(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type in (SOPERATOR_NODESET, SLINKY_NODESET, ACK_SLURM_CLUSTER):
        config = args.get_config()
        if config_value(config, "nodePools", {}):
            validate_worker_sets(args, report, gpu_pools(config))
        return
    if args.resource_type != SLURM_CLUSTER:
        return
    config = args.get_config()
    if not config_value(config, "nodePools", {}):
        return
    worker = get(slurm_nodes(args.props), "worker")
    if not is_map(worker):
        return
    cluster = display(args.props, args.name)
    pools = gpu_pools(config)
    if not pools:
        report(
            violation(
                f"SlurmCluster {cluster}: the policy config's nodePools has no GPU pool to host workers",
                "list the GPU pools (gpus > 0) under slurm-worker-node-fit.nodePools",
            ),
            None,
        )
        return
    pod = slurm_pod_shape("worker", worker)
    size = count(get(worker, "size"), default=1)
    fitting = [pool for pool in pools if pool.fits(pod)]
    if not fitting:
        largest = max(pools, key=lambda p: (p.gpus, p.memory_gi, p.cpu))
        report(
            violation(
                f"SlurmCluster {cluster}: a worker pod asks {pod.describe()} (slurmd + munge), more than the largest "
                f"GPU node allocatable, pool {largest.describe()}; workers would stay Pending",
                "lower slurm.worker.slurmd / slurm.worker.munge requests to fit the node's allocatable "
                "(leave room for kubelet and daemonsets), or add a larger GPU pool",
            ),
            None,
        )
        return
    capacity = sum(pool.nodes for pool in fitting)
    if size > capacity:
        excluded = [pool.name for pool in pools if pool not in fitting]
        note = f"; pools too small for a worker: {', '.join(excluded)}" if excluded else ""
        per_pool = ", ".join(f"{pool.name}: {pool.nodes}" for pool in fitting)
        report(
            violation(
                f"SlurmCluster {cluster}: worker size {size} exceeds the {capacity} GPU node(s) that can host a "
                f"worker ({per_pool}{note}); soperator runs one worker per whole GPU node",
                f"set slurm.worker.size to at most {capacity}, or add GPU nodes (and raise nodePools.*.nodes)",
            ),
            None,
        )


_POOL_SCHEMA = {
    "type": "object",
    "properties": {
        "cpu": {"type": "number", "minimum": 0, "description": "Allocatable CPU per node."},
        "memoryGi": {"type": "number", "minimum": 0, "description": "Allocatable memory per node, Gi."},
        "gpus": {"type": "integer", "minimum": 0, "description": "GPUs per node; 0 for a system pool."},
        "nodes": {"type": "integer", "minimum": 0, "description": "Nodes in the pool."},
    },
    "required": ["cpu", "memoryGi", "gpus", "nodes"],
    "additionalProperties": False,
}

worker_node_fit = ResourceValidationPolicy(
    name="slurm-worker-node-fit",
    description="A Slurm worker pod (SlurmCluster worker, NodeSet, ACK worker group) fits one GPU node, and the GPU pools have a node for every worker.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_worker_node_fit,
    config_schema=PolicyConfigSchema(
        properties={
            "nodePools": {
                "type": "object",
                "additionalProperties": _POOL_SCHEMA,
                "default": {},
                "description": "Node pool capacity: {pool: {cpu, memoryGi, gpus, nodes}}.",
            }
        }
    ),
)

POLICIES = [region_quota, worker_node_fit]

"""Kueue for Kubernetes-native GPU jobs beside Slurm (operators.kueue.enabled).

The same tenants, the same GPU pools, two schedulers, each with its own nodes of
a pool: Slurm's cells (tenants[].cells) on the Slurm workers, Kueue's
(tenants[].kueueCells) on the pool's other nodes, where no slurmd pod holds the
GPUs. The fit check places both (components/config/tenants.py), so the guarantees add up.

- a `ResourceFlavor` `<cluster>-<pool>` per GPU pool: the pool's node labels (with its
  kueueNodeLabels: only the nodes that are not Slurm workers) and tolerations, and its `Topology` (the pool's topologyLabels, then
  kubernetes.io/hostname) for topology-aware scheduling;
- per tenant with a namespace (`namespace: true`), a `ClusterQueue` `<tenant>` in cohort `<cluster>`: `nvidia.com/gpu`
  `nominalQuota` per flavor is its kueueCells' GPUs on that pool (cpu and memory
  in the same share of a node), `borrowingLimit` its borrowingCap (none without
  the oppo level), lent quota reclaimed by preemption;
- a `LocalQueue` `<tenant>` in the tenant's namespace (tenants with `namespace: true`:
  the only namespace the program owns for a tenant);
- `WorkloadPriorityClass`es slurm-prod/test/oppo, valued as the PriorityClasses;
- a policy: in tenant namespaces, Jobs name the tenant's LocalQueue, and pods either do or come from
  a Job (the chart's config also makes Kueue manage every workload there: operator_charts.kueue_values).

A ClusterQueue admits from its tenant's namespace only, so it exists only where the stack owns that
namespace: one the stack never declared would be whoever creates it first (kueueCells without
`namespace: true` is a config error).
"""

from __future__ import annotations

import json
from typing import Any, Optional

import pulumi

from .config import NodePoolConfig, PlatformConfig, TenantConfig
from .declare import declare_each
from .rendered import Rendered, namespace_key
from .slurm.common import HOSTNAME_LABEL, admission_policy, pool_tolerations, tenant_namespaces_selector
from .tenancy import GPU, LEVELS, POD_PRIORITY, kueue_borrowing_limit, node_share

API_VERSION = "kueue.x-k8s.io/v1beta2"
LABELS = {"app.kubernetes.io/managed-by": "slurm-platform", "app.kubernetes.io/component": "kueue"}
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# Who creates a Job's pods: the job controller's own account (--use-service-account-credentials), else the controller manager's.
JOB_CONTROLLER_USERS = ("system:serviceaccount:kube-system:job-controller", "system:kube-controller-manager")


def flavor_name(config: PlatformConfig, pool: NodePoolConfig) -> str:
    """Cluster-scoped: named after the cluster too, so two stacks on one cluster do not collide."""
    return f"{config.cluster.name}-{pool.name}"


def topology(config: PlatformConfig, pool: NodePoolConfig) -> dict[str, Any]:
    levels = [*pool.topology_labels, HOSTNAME_LABEL]
    return {
        "apiVersion": API_VERSION,
        "kind": "Topology",
        "metadata": {"name": flavor_name(config, pool), "labels": LABELS},
        "spec": {"levels": [{"nodeLabel": label} for label in levels]},
    }


def resource_flavor(config: PlatformConfig, pool: NodePoolConfig) -> dict[str, Any]:
    # Only the pool's Kueue nodes where it has Slurm workers too (kueueNodeLabels): never a slurmd pod's GPUs.
    spec: dict[str, Any] = {"nodeLabels": {**pool.selector, **pool.kueue_node_labels}, "topologyName": flavor_name(config, pool)}
    if pool.taints:
        spec["tolerations"] = pool_tolerations(pool)
    return {"apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": flavor_name(config, pool), "labels": LABELS}, "spec": spec}


def cluster_queue(config: PlatformConfig, tenant: TenantConfig) -> dict[str, Any]:
    flavors = []
    limit = kueue_borrowing_limit(tenant)
    for pool in config.gpu_pools:
        nominal = node_share(pool, tenant.kueue_gpus(pool.name))
        borrowing = node_share(pool, limit) if limit is not None else {}
        resources = [
            {"name": name, "nominalQuota": quota, **({"borrowingLimit": borrowing[name]} if borrowing else {})} for name, quota in nominal.items()
        ]
        flavors.append({"name": flavor_name(config, pool), "resources": resources})
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": tenant.name, "labels": LABELS},
        "spec": {
            "cohortName": config.cluster.name,
            # Its LocalQueue's namespace only (the tenant's, when declared).
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": tenant.name}},
            "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": [{"coveredResources": ["cpu", "memory", GPU], "flavors": flavors}],
            # Lent quota comes back: a borrower is preempted when the lender needs it.
            "preemption": {"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "Never"}, "withinClusterQueue": "LowerPriority"},
        },
    }


def local_queue(tenant: TenantConfig) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "LocalQueue",
        "metadata": {"name": tenant.name, "namespace": tenant.name, "labels": LABELS},
        "spec": {"clusterQueue": tenant.name},
    }


def workload_priority_class(level: str) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": f"slurm-{level}", "labels": LABELS},
        "value": POD_PRIORITY[level],
        "description": f"The tenants' {level} level, as Slurm's QOS {level} and PriorityClass slurm-{level}.",
    }


def names_own_queue() -> str:
    """CEL: the object names its namespace's LocalQueue (named after the tenant, as the namespace)."""
    label = json.dumps(QUEUE_LABEL)
    return f"has(object.metadata.labels) && {label} in object.metadata.labels && object.metadata.labels[{label}] == namespaceObject.metadata.name"


def queue_policies(config: PlatformConfig) -> list[Rendered]:
    """Nothing runs in a tenant namespace outside Kueue, whoever configured Kueue (operators.kueue.install
    false leaves its config to someone else): a Job names the tenant's LocalQueue (Kueue suspends it until
    admitted), and a pod either names it too (Kueue's pod, Deployment and StatefulSet integrations gate
    it) or is created by the job controller, for a Job that did."""
    namespaces = tenant_namespaces_selector(config)
    job_message = f"a Job in a tenant namespace must carry the label {QUEUE_LABEL}: <the namespace> (the tenant's LocalQueue)"
    pod_message = f"a pod in a tenant namespace comes from a Job, or carries the label {QUEUE_LABEL}: <the namespace> (the tenant's LocalQueue)"
    jobs = admission_policy(
        "slurm-tenant-queued-jobs", "jobs", [{"expression": names_own_queue(), "message": job_message}], namespaces, LABELS, "batch"
    )
    pod_rule = f"{names_own_queue()} || request.userInfo.username in {json.dumps(list(JOB_CONTROLLER_USERS))}"
    pods = admission_policy("slurm-tenant-queued-pods", "pods", [{"expression": pod_rule, "message": pod_message}], namespaces, LABELS)
    return [
        Rendered("queued-jobs-policy", jobs[0]),
        Rendered("queued-jobs-policy-binding", jobs[1]),
        Rendered("queued-pods-policy", pods[0]),
        Rendered("queued-pods-policy-binding", pods[1]),
    ]


def render(config: PlatformConfig) -> list[Rendered]:
    """Everything Kueue adds; nothing unless operators.kueue.enabled. The flavors, priorities and policies are the
    platform stack's; each stack declares its own tenants' queues."""
    if not config.operators.kueue.enabled:
        return []
    queued = [tenant for tenant in config.own_tenants if tenant.namespace]
    cluster_wide = [
        *(Rendered(f"{pool.name}-topology", topology(config, pool)) for pool in config.gpu_pools),
        *(
            Rendered(f"{pool.name}-flavor", resource_flavor(config, pool), after=(("Topology", "", flavor_name(config, pool)),))
            for pool in config.gpu_pools
        ),
        *(Rendered(f"{level}-priority", workload_priority_class(level)) for level in LEVELS),
    ]
    return [
        *(cluster_wide if config.role == "platform" else []),
        *(Rendered(f"{tenant.name}-cluster-queue", cluster_queue(config, tenant)) for tenant in queued),
        *(
            Rendered(f"{tenant.name}-local-queue", local_queue(tenant), after=(("ClusterQueue", "", tenant.name), namespace_key(tenant.name)))
            for tenant in queued
        ),
        *(queue_policies(config) if config.role == "platform" and any(t.namespace for t in config.tenants) else []),
    ]


class Kueue(pulumi.ComponentResource):
    """Declares `render(config)`, after the Kueue chart (its CRDs: the component's `depends_on`). A LocalQueue
    waits for its ClusterQueue and its tenant's namespace (`namespaces`, by tenant), a flavor for its topology."""

    def __init__(self, name: str, config: PlatformConfig, namespaces: dict[str, pulumi.Resource], opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("slurm-platform:kueue:Kueue", name, None, opts)
        declare_each(name, render(config), self, opts, {namespace_key(n): [namespace] for n, namespace in namespaces.items()})
        self.queues = pulumi.Output.from_input({t.name: t.name if t.namespace else None for t in config.own_tenants})
        self.register_outputs({"queues": self.queues})

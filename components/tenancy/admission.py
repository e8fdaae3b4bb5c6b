"""PriorityClasses and the admission policies over tenant namespaces: priority, pods, placement on the tenant's pools, Services, GPU devices."""

from __future__ import annotations

import json
from typing import Any

from ..config import NodePoolConfig, PlatformConfig, TenantConfig
from ..slurm import Rendered
from ..slurm.common import (
    admission_policy,
    priority_class_policy,
    tenant_namespaces_of,
    tenant_namespaces_selector,
)
from .job import LABELS
from .quota import LEVELS, POD_PRIORITY


def priority_classes() -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": f"slurm-{level}", "labels": LABELS},
            "value": POD_PRIORITY[level],
            # oppo pods wait for idle GPUs and never evict anyone; prod and test may evict oppo.
            "preemptionPolicy": "Never" if level == "oppo" else "PreemptLowerPriority",
            "description": f"HiveD-style {level} priority for workloads beside Slurm (slurm-platform tenants).",
        }
        for level in LEVELS
    ]


def tenant_priority_policy(config: PlatformConfig) -> list[Rendered]:
    """The tenant classes are cluster-wide: only tenant namespaces may name them."""
    classes = [f"slurm-{level}" for level in LEVELS]
    policy, binding = priority_class_policy("slurm-tenant-priority-classes", classes, tenant_namespaces_of(config), LABELS)
    return [Rendered("priority-policy", policy), Rendered("priority-policy-binding", binding)]


def tenant_pod_policy(config: PlatformConfig) -> list[Rendered]:
    """What Pod Security `restricted` leaves open in a tenant namespace, refused for every pod created there:
    a priority class other than the tenant ones (Kubernetes' system-*-critical would evict a Slurm worker),
    inline CSI volumes (restricted allows them: a driver such as csi-driver-nfs mounts any server the pod
    names, outside the cluster's storage classes), and `spec.nodeName` (it skips the scheduler, and with
    it the Slurm workers' anti-affinity and every taint)."""
    classes = [f"slurm-{level}" for level in LEVELS]
    validations = [
        {
            "expression": f"!has(object.spec.priorityClassName) || object.spec.priorityClassName in {json.dumps(classes)}",
            "message": f"a tenant namespace's pods may name priority classes {', '.join(classes)} only",
        },
        {
            "expression": "!has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.csi))",
            "message": "inline csi volumes are not allowed in a tenant namespace: use a PersistentVolumeClaim of a storage class",
        },
        {
            "expression": "!has(object.spec.nodeName) || object.spec.nodeName == ''",
            "message": "spec.nodeName is not allowed in a tenant namespace: the scheduler places its pods",
        },
    ]
    policy, binding = admission_policy("slurm-tenant-pods", "pods", validations, tenant_namespaces_selector(config), LABELS)
    return [Rendered("pod-policy", policy), Rendered("pod-policy-binding", binding)]


# On a tenant namespace, one per GPU pool its pods may run on (`<prefix><pool>: "true"`): slurm-tenant-placement reads
# them from the namespace, so that it names pools, never tenants.
POOL_LABEL_PREFIX = "pools.slurm-platform.io/"


def pool_place(config: PlatformConfig, pool: NodePoolConfig) -> dict[str, str]:
    """The node labels of a GPU pool's place for tenant pods: with Kueue, its flavor's nodeLabels (the pool's Kueue
    nodes, which Kueue sets on the pods it admits); without, the pool's selector."""
    return {**pool.selector, **pool.kueue_node_labels} if config.operators.kueue.enabled else dict(pool.selector)


def tenant_pools(config: PlatformConfig, tenant: TenantConfig) -> list[NodePoolConfig]:
    """The GPU pools the tenant's pods may run on: with Kueue, every one (Kueue's flavors); without, its cells' pools."""
    return [pool for pool in config.gpu_pools if config.operators.kueue.enabled or pool.name in tenant.pools]


def tenant_node_labels(config: PlatformConfig, tenant: TenantConfig) -> list[dict[str, str]]:
    """The node labels of each place the tenant's pods may run (pool_place of each of tenant_pools)."""
    return [pool_place(config, pool) for pool in tenant_pools(config, tenant)]


# CEL over a pod: its required node affinity's every term pins each label of one of variables.pools to its value.
PINNED_BY_AFFINITY = (
    "has(object.spec.affinity) && has(object.spec.affinity.nodeAffinity)"
    " && has(object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution)"
    " && object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.all(t,"
    " variables.pools.exists(p, p.all(k, has(t.matchExpressions)"
    " && t.matchExpressions.exists(e, e.key == k && e.operator == 'In' && e.values.all(v, v == p[k])))))"
)


def tenant_placement_policy(config: PlatformConfig) -> list[Rendered]:
    """A tenant namespace's pods run only on the nodes meant for its tenant (tenant_node_labels, which the namespace's
    pool labels name), by admission:
    the Slurm workers' anti-affinity keeps them off the workers, but nothing else keeps them off the system pool,
    where slurmctld, slurmdbd, login, LDAP, MariaDB and the operators run. A pod selects all the labels of one
    place by spec.nodeSelector, or by required node affinity in every term. A pod held by a scheduling gate is
    admitted as it is (Kueue gates the pods it manages, then sets its flavor's labels when it lifts the gate),
    and the update that lifts the last gate is checked like a new pod: the scheduler never sees a pod unchecked."""
    places = {pool.name: pool_place(config, pool) for pool in config.gpu_pools}
    described = {name: json.dumps(labels, sort_keys=True) for name, labels in places.items()}
    gates = "has({0}.spec.schedulingGates) && size({0}.spec.schedulingGates) > 0"
    variables = [
        # The pools the namespace's labels name, and their places.
        {
            "name": "poolNames",
            "expression": f"{json.dumps(list(places))}.filter(p, has(namespaceObject.metadata.labels)"
            f" && ({json.dumps(POOL_LABEL_PREFIX)} + p) in namespaceObject.metadata.labels)",
        },
        {"name": "pools", "expression": f"variables.poolNames.map(p, {json.dumps(places)}[p])"},
        {"name": "gated", "expression": gates.format("object")},
        {"name": "wasGated", "expression": f"request.operation == 'UPDATE' && {gates.format('oldObject')}"},
        {
            "name": "selected",
            "expression": "has(object.spec.nodeSelector) && variables.pools.exists(p, p.all(k, k in object.spec.nodeSelector"
            " && object.spec.nodeSelector[k] == p[k]))",
        },
    ]
    message = "a tenant namespace's pods run on its tenant's nodes only: spec.nodeSelector (or required node affinity) must select them"
    validations = [
        {
            "expression": "variables.gated || (request.operation == 'UPDATE' && !variables.wasGated) || variables.selected"
            f" || ({PINNED_BY_AFFINITY})",
            "message": message,
            "messageExpression": f"{json.dumps(message + '; in ')} + namespaceObject.metadata.name + {json.dumps(', all the labels of ')}"
            f" + (size(variables.poolNames) == 0 ? '(none)' : variables.poolNames.map(p, {json.dumps(described)}[p]).join(' or '))",
        }
    ]
    policy, binding = admission_policy(
        "slurm-tenant-placement", "pods", validations, tenant_namespaces_selector(config), LABELS, operations=("CREATE", "UPDATE")
    )
    policy["spec"]["variables"] = variables
    return [Rendered("placement-policy", policy), Rendered("placement-policy-binding", binding)]


def tenant_service_policy(config: PlatformConfig) -> list[Rendered]:
    """A tenant's Services stay inside the cluster: ClusterIP only (a LoadBalancer or NodePort would expose its
    pods beyond the cluster's network), and no externalIPs, which capture traffic the whole cluster sends to
    those addresses (CVE-2020-8554): Alibaba's metadata endpoint 100.100.100.200, or another tenant's Service."""
    validations = [
        {
            "expression": "!has(object.spec.type) || object.spec.type == 'ClusterIP'",
            "message": "a tenant namespace's Services are ClusterIP: exposing a tenant's pods beyond the cluster is the platform team's",
        },
        {
            "expression": "!has(object.spec.externalIPs) || size(object.spec.externalIPs) == 0",
            "message": "externalIPs are not allowed in a tenant namespace: they capture the cluster's traffic to those addresses",
        },
    ]
    policy, binding = admission_policy(
        "slurm-tenant-services", "services", validations, tenant_namespaces_selector(config), LABELS, operations=("CREATE", "UPDATE")
    )
    return [Rendered("service-policy", policy), Rendered("service-policy-binding", binding)]


# The kinds a tenant may create whose pod templates the GPU policy reads (TENANT_RULES), and where each keeps its pod spec.
POD_TEMPLATE_RULES = [
    {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["deployments", "statefulsets", "replicasets"]},
    {"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["jobs", "cronjobs"]},
]


POD_SPEC = "object.kind == 'Pod' ? object.spec : object.kind == 'CronJob' ? object.spec.jobTemplate.spec.template.spec : object.spec.template.spec"


def tenant_gpu_device_policy(config: PlatformConfig) -> list[Rendered]:
    """A tenant pod gets GPUs only by asking for nvidia.com/gpu, which the quota and Kueue count. Refused in its pods
    and in the pod templates of its workloads: NVIDIA_* variables in `env` (the container toolkit hands a container
    the GPUs NVIDIA_VISIBLE_DEVICES names: every one on the node with `all`), `runtimeClassName` (the nvidia class
    runs the toolkit's runtime, which reads that variable) and a scheduler other than Kubernetes' (which may ignore
    the Slurm workers' anti-affinity and the taints). `envFrom` imports a ConfigMap's or Secret's keys as variables,
    which admission cannot see: the toolkit ignores the variable from unprivileged containers, which a tenant's are
    (the GPU operator's values, gpu_operator_values; ACK: docs/security.md)."""
    validations = [
        {
            "expression": "variables.containers.all(c, !has(c.env) || c.env.all(e, !e.name.startsWith('NVIDIA_')))",
            "message": "NVIDIA_* environment variables are not allowed in a tenant namespace: a pod gets GPUs by asking for nvidia.com/gpu",
        },
        {
            "expression": "!has(variables.spec.runtimeClassName) || variables.spec.runtimeClassName == ''",
            "message": "runtimeClassName is not allowed in a tenant namespace: the nvidia runtime class hands out GPUs no quota counts",
        },
        {
            "expression": "!has(variables.spec.schedulerName) || variables.spec.schedulerName == 'default-scheduler'",
            "message": "a tenant namespace's pods are placed by default-scheduler, which keeps them off the Slurm workers' nodes",
        },
    ]
    policy, binding = admission_policy("slurm-tenant-gpu-devices", "pods", validations, tenant_namespaces_selector(config), LABELS)
    policy["spec"]["matchConstraints"]["resourceRules"] += POD_TEMPLATE_RULES
    policy["spec"]["variables"] = [
        {"name": "spec", "expression": POD_SPEC},
        {"name": "containers", "expression": "variables.spec.containers + (has(variables.spec.initContainers) ? variables.spec.initContainers : [])"},
    ]
    return [Rendered("gpu-device-policy", policy), Rendered("gpu-device-policy-binding", binding)]

"""Each tenant's namespace: Pod Security labels, quotas, container defaults, and the tenant group's RBAC."""

from __future__ import annotations

from ..config import PlatformConfig, TenantConfig, platform_storage_classes
from ..rendered import Rendered, namespace_key
from ..slurm.common import (
    TENANT_NAMESPACE_LABEL,
)
from .admission import POOL_LABEL_PREFIX, tenant_pools
from .job import LABELS
from .quota import GPU, namespace_compute_quota, namespace_gpu_quota

# Pod Security Standards, pinned: a cluster upgrade does not change what a tenant namespace admits.
# 1.30 is the oldest Kubernetes the program supports (ValidatingAdmissionPolicy is GA there).
POD_SECURITY_LEVEL = "restricted"


POD_SECURITY_VERSION = "v1.30"


POD_SECURITY_LABELS = {
    f"pod-security.kubernetes.io/{mode}{suffix}": value
    for mode in ("enforce", "warn", "audit")
    for suffix, value in (("", POD_SECURITY_LEVEL), ("-version", POD_SECURITY_VERSION))
}


# What a container that asks nothing requests (a quota on requests refuses pods without them).
DEFAULT_REQUESTS = {"cpu": "100m", "memory": "128Mi"}


# The least a container may request (and limit): pods of 1m would cost the compute quota nothing.
MIN_REQUESTS = {"cpu": "10m", "memory": "16Mi"}


def tenant_namespace_labels(config: PlatformConfig, tenant: TenantConfig) -> dict[str, str]:
    """What a tenant namespace carries besides the Pod Security labels: the tenant label (what the policies, the
    workers' anti-affinity and Kueue select) and one label per pool its pods may run on."""
    return {
        TENANT_NAMESPACE_LABEL: config.cluster.name,
        **{f"{POOL_LABEL_PREFIX}{pool.name}": "true" for pool in tenant_pools(config, tenant)},
    }


def tenant_bounds(config: PlatformConfig, tenant: TenantConfig) -> Rendered:
    """A ResourceQuota of the pods its namespace holds (many tiny pods would use up the nodes' max-pods) and of its
    claims per storage class: none on the platform's own classes (the share holding every user's jail, MariaDB and
    LDAP) unless its `storage` grants some, and what `storage` says on any other class it lists."""
    hard = {"pods": str(tenant.max_pods)}
    for storage_class in dict.fromkeys([*platform_storage_classes(config), *tenant.storage]):
        grant = tenant.storage.get(storage_class)
        prefix = f"{storage_class}.storageclass.storage.k8s.io"
        hard[f"{prefix}/requests.storage"] = grant.size if grant else "0"
        hard[f"{prefix}/persistentvolumeclaims"] = str(grant.claims) if grant else "0"
    return Rendered(
        f"{tenant.name}-bounds-quota",
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "pods-and-storage", "namespace": tenant.name, "labels": LABELS},
            "spec": {"hard": hard},
        },
        after=(namespace_key(tenant.name),),
    )


# What a tenant may do in its namespace (Role slurm-tenant): run and manage its workloads, claims, Secrets and
# Services, and read its queues, quotas and network policies. Never RBAC, quotas, limit ranges or NetworkPolicies
# (Kubernetes' edit and admin roles may change NetworkPolicies: deleting default-deny would open the metadata
# endpoints and the NFS servers), nor pods/binding or pods/ephemeralcontainers.
TENANT_ROLE = "slurm-tenant"


READ = ["get", "list", "watch"]


MANAGE = [*READ, "create", "update", "patch", "delete", "deletecollection"]


TENANT_RULES = [
    {"apiGroups": [""], "resources": ["pods", "services", "configmaps", "secrets", "persistentvolumeclaims"], "verbs": MANAGE},
    {"apiGroups": [""], "resources": ["pods/log"], "verbs": READ},
    {"apiGroups": [""], "resources": ["pods/exec", "pods/attach", "pods/portforward"], "verbs": ["get", "create"]},
    {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets", "replicasets"], "verbs": MANAGE},
    {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": MANAGE},
    {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": READ},
    {"apiGroups": [""], "resources": ["resourcequotas", "limitranges"], "verbs": READ},
    {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": READ},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads", "localqueues"], "verbs": READ},
]


def tenant_access(tenant: TenantConfig) -> list[Rendered]:
    """The Role slurm-tenant in its namespace, bound to its kubernetesGroups when it names any."""
    metadata = {"name": TENANT_ROLE, "namespace": tenant.name, "labels": LABELS}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": metadata, "rules": TENANT_RULES}
    in_namespace = (namespace_key(tenant.name),)
    rendered = [Rendered(f"{tenant.name}-role", role, after=in_namespace)]
    if tenant.kubernetes_groups:
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": metadata,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": TENANT_ROLE},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group} for group in tenant.kubernetes_groups],
        }
        rendered.append(Rendered(f"{tenant.name}-role-binding", binding, after=in_namespace))
    return rendered


def tenant_namespaces(config: PlatformConfig) -> list[Rendered]:
    rendered = []
    for tenant in config.own_tenants:
        if not tenant.namespace:
            continue
        metadata = {"namespace": tenant.name, "labels": LABELS}
        in_namespace = (namespace_key(tenant.name),)
        rendered += [
            # Holds the tenant's workloads and claims: removing the tenant must not delete them (docs/tenants.md: Tenant namespaces).
            Rendered(
                f"{tenant.name}-namespace",
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {"name": tenant.name, "labels": {**LABELS, **POD_SECURITY_LABELS, **tenant_namespace_labels(config, tenant)}},
                },
                keep=True,
            ),
            Rendered(
                f"{tenant.name}-gpu-quota",
                {
                    "apiVersion": "v1",
                    "kind": "ResourceQuota",
                    "metadata": {"name": "gpu-guarantee", **metadata},
                    # Extended resources take only the requests. prefix in a quota.
                    "spec": {"hard": {f"requests.{GPU}": str(namespace_gpu_quota(config, tenant))}},
                },
                after=in_namespace,
            ),
            Rendered(
                f"{tenant.name}-compute-quota",
                {
                    "apiVersion": "v1",
                    "kind": "ResourceQuota",
                    "metadata": {"name": "compute-share", **metadata},
                    "spec": {"hard": namespace_compute_quota(config, tenant)},
                },
                after=in_namespace,
            ),
            Rendered(
                f"{tenant.name}-limit-range",
                {
                    "apiVersion": "v1",
                    "kind": "LimitRange",
                    "metadata": {"name": "container-defaults", **metadata},
                    # A container that asks nothing gets these, so the quota above admits it; none asks less than min.
                    "spec": {"limits": [{"type": "Container", "defaultRequest": DEFAULT_REQUESTS, "min": MIN_REQUESTS}]},
                },
                after=in_namespace,
            ),
            tenant_bounds(config, tenant),
        ]
        rendered += tenant_access(tenant)
    return rendered

"""Pieces every operator module renders the same way: container resources,
pod placement on a pool, and where users SSH to."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable
from typing import Any, Optional

from slurm_rules import kube_rules
from slurm_rules.config_files import Origin, SlurmConfig, options_of
from slurm_rules.slurm_release import SlurmRelease

from ..config import NodePoolConfig, PartitionConfig, PlatformConfig, PodResources, TenantConfig, login_lb_annotations, quantity_value
from ..identity.names import TLS_CA_KEY
from ..names import SLURMDBD_PORT, SSHD_PORT
from . import AccountingClient, ReadyWhen, Rendered


def cluster_name_with(config: PlatformConfig, suffix: str, limit: int) -> str:
    """`<cluster><suffix>`, the cluster part cut so the whole fits `limit` (a Service's or a CronJob's name)."""
    return config.cluster.name[: limit - len(suffix)].rstrip("-") + suffix


# Slurm's own pods outrank every tenant PriorityClass (tenancy.POD_PRIORITY, at most 100000) and
# stay below Kubernetes' system-cluster-critical (2000000000): no tenant pod can preempt a worker.
SYSTEM_PRIORITY = 1000000
# Kubernetes' own classes (2000001000 and 2000000000): above every other, they evict anything, Slurm workers included.
SYSTEM_CRITICAL_CLASSES = ("system-node-critical", "system-cluster-critical")
# Every namespace carries its name in this label (set by the API server, nobody can change it).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
HOSTNAME_LABEL = "kubernetes.io/hostname"


def resources(pod: PodResources) -> dict[str, Any]:
    """Container resources keyed by Kubernetes resource name (soperator's ResourceList shape)."""
    return {"cpu": pod.cpu, "memory": pod.memory, "ephemeral-storage": pod.ephemeral_storage}


def container_resources(pod: PodResources, extra: dict[str, str] | None = None) -> dict[str, Any]:
    """A core/v1 ResourceRequirements: requests = limits, so Slurm's view of the node holds."""
    amounts = {**resources(pod), **(extra or {})}
    return {"requests": dict(amounts), "limits": dict(amounts)}


def pool_tolerations(pool: NodePoolConfig) -> list[dict[str, Any]]:
    return [{"key": t.key, "operator": "Exists", "effect": t.effect} for t in pool.taints]


def system_pools(config: PlatformConfig) -> list[NodePoolConfig]:
    """Where controllers, login and accounting run: the no-GPU pools, else the GPU ones."""
    return [pool for pool in config.node_pools if not pool.has_gpu] or config.gpu_pools


def system_placement(config: PlatformConfig) -> dict[str, Any]:
    """nodeSelector/affinity + tolerations for pods off the GPU nodes (PodSpec fields)."""
    from ..render.node_pools import node_filter

    placement = node_filter("system", system_pools(config))
    placement.pop("name")
    return placement


def namespaces_named(names: list[str]) -> dict[str, Any]:
    """A namespaceSelector of these namespaces, by the name label the API server sets on every one."""
    return {"matchExpressions": [{"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": list(names)}]}


def tenant_namespace_names(config: PlatformConfig) -> list[str]:
    """The namespaces the stack declares for tenants (namespace: true): the ones handed to tenants."""
    return [t.name for t in config.tenants if t.namespace]


# On each tenant namespace the stack declares, with the cluster's name as its value: the workers' anti-affinity, the
# tenants' admission policies and Kueue select tenant namespaces by it, not by a list of names, so adding a tenant
# changes none of them (docs/tenants.md: Many tenants in one stack). A tenant's Role writes no Namespace.
TENANT_NAMESPACE_LABEL = "slurm-platform.io/tenant-of"


def tenant_namespaces_selector(config: PlatformConfig) -> dict[str, Any]:
    """A namespaceSelector of this cluster's tenant namespaces, by their label."""
    return {"matchLabels": {TENANT_NAMESPACE_LABEL: config.cluster.name}}


def worker_anti_affinity(config: PlatformConfig) -> dict[str, Any]:
    """A Slurm worker pod's `affinity`: no pod of a tenant namespace on its node. Required pod anti-affinity
    binds both ways: the scheduler places no tenant pod where a worker runs, and no worker where a tenant
    pod runs, whatever the tenant's pod says (tenant pods cannot bypass the scheduler: `spec.nodeName` is
    refused there, tenancy.tenant_pod_policy). Nothing without tenant namespaces."""
    if not tenant_namespace_names(config):
        return {}
    term = {
        # Empty: every pod of those namespaces, whatever its labels.
        "labelSelector": {},
        "namespaceSelector": tenant_namespaces_selector(config),
        "topologyKey": HOSTNAME_LABEL,
    }
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def worker_placement(config: PlatformConfig, pool: NodePoolConfig) -> dict[str, Any]:
    """A Slurm worker pod's placement on `pool` (PodSpec fields): its nodes (not the pool's Kueue nodes), their taints, and
    no tenant pod beside it."""
    placement: dict[str, Any] = {"nodeSelector": dict(pool.selector)}
    if pool.taints:
        placement["tolerations"] = pool_tolerations(pool)
    affinity = worker_anti_affinity(config)
    if pool.kueue_node_labels:
        # Never on the pool's Kueue nodes: a node lacking any of their labels (terms are ORed).
        terms = [{"matchExpressions": [{"key": key, "operator": "NotIn", "values": [value]}]} for key, value in pool.kueue_node_labels.items()]
        affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}, **affinity}
    if affinity:
        placement["affinity"] = affinity
    return placement


def gpu_resources(config: PlatformConfig, pool: NodePoolConfig) -> dict[str, str]:
    """The extended resources a worker on `pool` takes: all its GPUs, and RDMA where the pool has it."""
    extra = {"nvidia.com/gpu": str(pool.gpus_per_node)}
    rdma = config.slurm.worker.slurmd.rdma
    if pool.rdma and rdma:
        extra[f"rdma/{config.operators.network_operator.rdma_resource_name}"] = str(rdma)
    return extra


# pulumi-kubernetes watches an object so annotated until the JSONPath matches (its generic await).
WAIT_FOR_ANNOTATION = "pulumi.com/waitFor"


def awaits_readiness(config: PlatformConfig) -> bool:
    """`pulumi up` waits until the operator reports Slurm ready (slurm.readiness); a render-only stack has no
    cluster whose status could be watched."""
    return config.slurm.readiness.await_available and not config.render_only


def readiness_annotations(config: PlatformConfig, ready: ReadyWhen) -> dict[str, str]:
    """Await `ready` on the object's live status, where the stack awaits readiness. The provider also holds the wait
    while a `.status.observedGeneration` is behind `metadata.generation`: after an update, the operator's report on the
    old spec does not end it."""
    return {WAIT_FOR_ANNOTATION: f"jsonpath={{.status.{ready.field}}}={ready.value}"} if awaits_readiness(config) else {}


def awaits_address(config: PlatformConfig) -> dict[str, str]:
    """A login LoadBalancer is ready when the cloud gives it an address: wait for that (a watch),
    not for the provider's default Service await (endpoints, then a 10 s settle). None without a cluster."""
    return {} if config.render_only else {WAIT_FOR_ANNOTATION: "jsonpath={.status.loadBalancer.ingress}"}


def unmet_conditions(status: Optional[dict[str, Any]]) -> list[str]:
    """soperator's conditions that do not hold, in its own words: `Type=Status: message`."""
    return [f"{c.get('type')}={c.get('status')}: {c.get('message')}" for c in (status or {}).get("conditions") or [] if c.get("status") != "True"]


def gres_gpus(pool: NodePoolConfig) -> str:
    """A worker's GPUs as a node line's Gres: typed (gpu:h100:8) where the pool has a type (NodePoolConfig.slurm_gpu_type),
    so users can ask for --gres=gpu:h100:1 as well as --gres=gpu:1; else gpu:8."""
    gpu_type = pool.slurm_gpu_type
    return f"gpu:{gpu_type}:{pool.gpus_per_node}" if gpu_type else f"gpu:{pool.gpus_per_node}"


def accounted_gpu_tres(config: PlatformConfig) -> str:
    """AccountingStorageTRES: every GPU (gres/gpu, which the tenants' GrpTRES limits, and which typed requests count
    too), and each pool's type, so sreport and sacct show GPU use per model."""
    types = sorted({t for pool in config.gpu_pools if (t := pool.slurm_gpu_type)})
    return ",".join(["gres/gpu", *(f"gres/gpu:{t}" for t in types)])


def worker_shape(config: PlatformConfig) -> tuple[int, int]:
    """(CPUs, memory in MiB) a worker pod asks for (`slurm.worker.slurmd`; at least one CPU)."""
    worker = config.slurm.worker.slurmd
    return max(1, int(quantity_value(worker.cpu))), int(quantity_value(worker.memory) // 2**20)


def default_memory(config: PlatformConfig) -> tuple[str, int]:
    """Every operator's Slurm treats memory as consumable (soperator and ACK write CR_Core_Memory, Slinky leaves
    Slurm's default, the same): a job that asks for none would hold its whole node, so a second tenant's job waits
    beside idle GPUs (the services tier saw it). Its cores' share of a worker instead."""
    cpus, memory = worker_shape(config)
    return "DefMemPerCPU", memory // cpus


# Where a pod beside the cluster (the tenants Job, the Slurm exporter) mounts the cluster's auth key.
KEY_DIR = "/auth-key"
# libmunge's default socket, shared with a munged sidecar through an emptyDir.
MUNGE_SOCKET = "/run/munge/munge.socket.2"
# Where sackd listens, and auth/slurm's clients look (its RUNTIME_DIRECTORY default).
SACK_SOCKET = "/run/slurm/sack.socket"


def client_slurm_conf(config: PlatformConfig, client: AccountingClient) -> str:
    """Just enough slurm.conf for a client beside the cluster (sacctmgr, scontrol, squeue) to reach slurmdbd and slurmctld;
    SlurmUser too: `scontrol ping` addresses its credential to it, which a slurmctld running as another user cannot read."""
    conf = SlurmConfig(config.slurm_release)
    conf.set("ClusterName", config.cluster.name).set("SlurmctldHost", client.slurmctld_host)
    conf.set("SlurmUser", client.slurm_user).set("AuthType", client.auth)
    conf.set("AccountingStorageType", "accounting_storage/slurmdbd").set("AccountingStorageHost", client.slurmdbd_host)
    conf.set("AccountingStoragePort", SLURMDBD_PORT)
    return conf.text()


def munged_lines(key_file: str, foreground: bool = False) -> list[str]:
    """Shell lines that start munged on `key_file` (a shell word) as the munge package lays it out: key and state
    private to munge, the socket's directory open to every client (munged refuses to start on a 0700 one).
    `foreground`: the shell becomes munged (a sidecar whose life is munged's)."""
    return [
        "install -d -o munge -g munge -m 0700 /etc/munge /var/lib/munge /var/log/munge",
        "install -d -o munge -g munge -m 0755 /run/munge",
        f"install -o munge -g munge -m 0400 {key_file} /etc/munge/munge.key",
        "exec runuser -u munge -- munged -F" if foreground else "runuser -u munge -- munged",
    ]


# QOS priority weight: large enough that prod > test > oppo outweighs age and fair share.
PRIORITY_WEIGHT_QOS = 100000


# What one tenant's users may not see of another's (slurm.conf for slurmctld: squeue, scontrol, sshare, sprio;
# slurmdbd.conf for slurmdbd: sacct, sacctmgr, sreport): others' jobs, usage, user and account records, and the
# reservations they cannot use. Not `nodes` or `partitions` (every user's sinfo needs them; partitions open by
# AllowAccounts are not hidden by it anyway), nor `events` (node events: the cluster's, no tenant's). SlurmUser,
# root, operators and admins see everything (the tenants Job, the exporters); an account's coordinators see its jobs.
PRIVATE_DATA = ("accounts", "jobs", "reservations", "usage", "users")
# Every job gets an extern step at allocation that holds its cgroup on each node: what pam_slurm_adopt
# puts an SSH session into (ACK's and Slinky's renders; soperator writes its own slurm.conf).
PROLOG_FLAGS_CONTAIN = ("PrologFlags", "Contain")


def contain(conf: SlurmConfig) -> None:
    """`PROLOG_FLAGS_CONTAIN` where the release takes it (every release the program knows)."""
    conf.set_where_taken(*PROLOG_FLAGS_CONTAIN)


def private_data(config: PlatformConfig) -> str:
    """slurm.conf's and slurmdbd.conf's PrivateData value where the stack has tenants, else ""."""
    return ",".join(PRIVATE_DATA) if config.tenants else ""


def tenant_settings(config: PlatformConfig) -> list[tuple[str, object]]:
    """What the tenants (components/tenancy/) need from slurm.conf: QOS-weighted
    multifactor priority, oppo jobs requeued when a guaranteed QOS wants their GPUs,
    limits enforced from slurmdbd (associations carry the guarantees), and each tenant's
    jobs and records hidden from the others (PrivateData)."""
    if not config.tenants:
        return []
    return [
        # A job that names no partition is submitted to every partition and runs only where its account
        # is allowed (partition_options); one that names only partitions its account may not use is refused.
        ("JobSubmitPlugins", "all_partitions"),
        ("EnforcePartLimits", "ANY"),
        ("PriorityType", "priority/multifactor"),
        ("PriorityWeightQOS", PRIORITY_WEIGHT_QOS),
        ("PriorityWeightFairshare", 10000),
        ("PriorityWeightAge", 1000),
        ("PreemptType", "preempt/qos"),
        ("PreemptMode", "REQUEUE"),
        ("AccountingStorageEnforce", "associations,limits,qos,safe"),
        ("AccountingStorageTRES", accounted_gpu_tres(config)),
        ("PrivateData", private_data(config)),
    ]


def add_tenant_settings(conf: SlurmConfig, config: PlatformConfig, written_by_operator: frozenset[tuple[str, str]] = frozenset()) -> None:
    """`tenant_settings` where the release takes them, but for those the operator's own slurm.conf already writes."""
    for key, value in tenant_settings(config):
        if (key, str(value)) not in written_by_operator:
            conf.set_where_taken(key, value)


# Partitions name parent accounts, not tenants, where the release's AllowAccounts takes an account's
# ancestors (measured on 24.11 and 26.05; 22.05 compares the job's account alone): a tenant's account sits
# under the parent of the GPU pools it holds cells on, every oppo account under one parent, so adding a
# tenant changes no partition. Up to this many GPU pools: a partition spanning one of n pools names the
# 2^(n-1) pool sets that contain it, 32 at most.
ANCESTOR_ALLOWS_SINCE = SlurmRelease(24, 11)
MAX_POOLS_FOR_PARENT_ACCOUNTS = 6
POOL_SET_ACCOUNT_PREFIX = "pools_"  # "_" is in no tenant name (a DNS label): no tenant's account can take these
OPPO_PARENT_ACCOUNT = "oppo_accounts"


def partitions_name_parents(config: PlatformConfig) -> bool:
    """Whether partitions allow parent accounts (see ANCESTOR_ALLOWS_SINCE) rather than each tenant's."""
    return config.slurm_release >= ANCESTOR_ALLOWS_SINCE and len(config.gpu_pools) <= MAX_POOLS_FOR_PARENT_ACCOUNTS


def pool_set_account(pools: Iterable[str]) -> str:
    """The parent account of the tenants holding cells on exactly these GPU pools."""
    return POOL_SET_ACCOUNT_PREFIX + "_".join(sorted(pools))


def pool_set_accounts(config: PlatformConfig, within: Iterable[str] = ()) -> list[str]:
    """The parent account of every set of GPU pools that holds all of `within` (of every set, by default)."""
    required = set(within)
    others = [pool.name for pool in config.gpu_pools if pool.name not in required]
    subsets = (combo for size in range(len(others) + 1) for combo in itertools.combinations(others, size))
    return [pool_set_account(required | set(combo)) for combo in subsets if required or combo]


def parent_account(config: PlatformConfig, tenant: TenantConfig, oppo: bool) -> str:
    """Where one of the tenant's accounts (its oppo one if `oppo`) sits in Slurm's tree of accounts."""
    if not partitions_name_parents(config):
        return "root"
    if oppo:
        return OPPO_PARENT_ACCOUNT
    # No cells on a GPU pool (Kueue's only): under root, which no partition names.
    return pool_set_account(tenant.pools) if tenant.pools else "root"


def partition_options(config: PlatformConfig, partition: PartitionConfig) -> list[tuple[str, str]]:
    """A partition's slurm.conf options. With tenants, guaranteed work stays on the pools of its cells:
    a tenant's account may use a partition only if it holds cells on every pool the partition spans,
    and every oppo account may use any partition (its jobs borrow idle GPUs and are preempted)."""
    written = options_of(partition.config)
    if not config.tenants:
        return written
    spanned = set(partition.pools) or {pool.name for pool in config.gpu_pools}
    if partitions_name_parents(config):
        accounts = [*pool_set_accounts(config, spanned), OPPO_PARENT_ACCOUNT]
    else:
        accounts = [t.name for t in config.tenants if spanned <= t.pools]
        accounts += [t.oppo_account for t in config.tenants if "oppo" in t.priorities]
    # Nobody's: only Slurm's own root account (an administrators') may use it.
    return [*written, ("AllowAccounts", ",".join(accounts) or "root")]


def partition_origin(config: PlatformConfig, partition: PartitionConfig) -> Origin:
    """Where the stack config wrote the partition's options (none for the program's default partition)."""
    written = config.slurm.partitions
    return ("slurm", "partitions", written.index(partition), "config") if partition in written else ()


def define_partitions(conf: SlurmConfig, config: PlatformConfig, nodes: Callable[[PartitionConfig], str]) -> None:
    """A PartitionName line per partition, over the nodes the operator names for it."""
    for partition in config.partitions:
        options = [("Nodes", nodes(partition)), ("Default", "YES" if partition.default else "NO"), *partition_options(config, partition)]
        conf.define("PartitionName", partition.name, options, partition_origin(config, partition))


def system_priority_class_name(config: PlatformConfig) -> str:
    """Per cluster: a class shared by two stacks would go with the first one torn down."""
    return f"{config.cluster.name}-slurm-system"


def operator_priority_class_name(config: PlatformConfig) -> str:
    """The class of the operators' controllers and webhooks the stack installs, per cluster as the Slurm one."""
    return f"{config.cluster.name}-platform-operators"


def operator_priority_class(config: PlatformConfig) -> dict[str, Any]:
    """At the Slurm pods' priority, above every tenant class: a tenant pod never preempts the controllers and
    webhooks the platform runs on (Kueue's refuses every tenant Job while it is down); and, as Slurm's, it never
    preempts anyone itself (Kubernetes' system-cluster-critical would evict a Slurm worker)."""
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": operator_priority_class_name(config), "labels": {"app.kubernetes.io/managed-by": "slurm-platform"}},
        "value": SYSTEM_PRIORITY,
        "preemptionPolicy": "Never",
        "description": f"Slurm cluster {config.cluster.name}: the operators' controllers and webhooks, above every tenant class (slurm-platform).",
    }


# Which namespaces a priority class is for: a CEL condition on namespaceObject, and the same in words.
AllowedNamespaces = tuple[str, str]


def namespaces_in(names: list[str]) -> AllowedNamespaces:
    return f"namespaceObject.metadata.name in {json.dumps(names)}", f"namespaces {', '.join(names) or '(none)'}"


def tenant_namespaces_of(config: PlatformConfig) -> AllowedNamespaces:
    label = json.dumps(TENANT_NAMESPACE_LABEL)
    return (
        f"has(namespaceObject.metadata.labels) && {label} in namespaceObject.metadata.labels"
        f" && namespaceObject.metadata.labels[{label}] == {json.dumps(config.cluster.name)}",
        f"the namespaces labelled {TENANT_NAMESPACE_LABEL}={config.cluster.name} (the tenants')",
    )


def priority_class_policy(name: str, classes: list[str], allowed: AllowedNamespaces, labels: dict[str, str]) -> list[dict[str, Any]]:
    """A ValidatingAdmissionPolicy and its binding: a pod naming one of `classes` is admitted only
    in the `allowed` namespaces, whoever creates it (a PriorityClass itself is usable from any namespace).
    On create only: priorityClassName cannot change after creation."""
    condition, described = allowed
    expression = f"!has(object.spec.priorityClassName) || !(object.spec.priorityClassName in {json.dumps(classes)}) || {condition}"
    message = f"priority classes {', '.join(classes)} are for {described} only"
    return admission_policy(name, "pods", [{"expression": expression, "message": message}], None, labels)


def admission_policy(
    name: str,
    resource: str,
    validations: list[dict[str, str]],
    namespaces: Optional[dict[str, Any]],
    labels: dict[str, str],
    group: str = "",
    version: str = "v1",
    operations: tuple[str, ...] = ("CREATE",),
) -> list[dict[str, Any]]:
    """A ValidatingAdmissionPolicy checking every `resource` created (or as `operations` say) in the namespaces
    `namespaces` selects (None: in every namespace), whoever sends it, and its binding."""
    metadata = {"name": name, "labels": labels}
    match: dict[str, Any] = {
        "resourceRules": [{"apiGroups": [group], "apiVersions": [version], "operations": list(operations), "resources": [resource]}]
    }
    if namespaces is not None:
        match["namespaceSelector"] = namespaces
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": metadata,
        "spec": {"failurePolicy": "Fail", "matchConstraints": match, "validations": validations},
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": metadata,
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    }
    return [policy, binding]


def system_priority(config: PlatformConfig) -> list[Rendered]:
    """The class every Slurm pod of this cluster runs at (each operator's own field for it),
    usable in the cluster's namespace only; and Kubernetes' system-*-critical kept out of that
    namespace (unless the GPU operator, whose pods run at system-node-critical, shares it)."""
    name = system_priority_class_name(config)
    labels = {"app.kubernetes.io/managed-by": "slurm-platform"}
    priority_class = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name, "labels": labels},
        "value": SYSTEM_PRIORITY,
        # Never preempted by tenant pods, and never evicts them either: a Slurm pod that finds
        # its node taken waits, as before, instead of killing a tenant's workload.
        "preemptionPolicy": "Never",
        "description": f"Slurm cluster {config.cluster.name}: above every tenant class (slurm-platform).",
    }
    policy, binding = priority_class_policy(name, [name], namespaces_in([config.cluster.namespace]), labels)
    rendered = [Rendered("priority-class", priority_class), Rendered("priority-policy", policy), Rendered("priority-policy-binding", binding)]
    if config.operators.gpu_operator.namespace != config.cluster.namespace:
        critical = admission_policy(
            f"{name}-namespace",
            "pods",
            [
                {
                    "expression": f"!has(object.spec.priorityClassName) || !(object.spec.priorityClassName in {json.dumps(list(SYSTEM_CRITICAL_CLASSES))})",
                    "message": f"{' and '.join(SYSTEM_CRITICAL_CLASSES)} are not for the Slurm cluster's namespace: its pods run at {name}",
                }
            ],
            namespaces_named([config.cluster.namespace]),
            labels,
        )
        rendered += [Rendered("namespace-priority-policy", critical[0]), Rendered("namespace-priority-policy-binding", critical[1])]
    return rendered


def ssh_endpoint(config: PlatformConfig, service_name: str, node_port: bool) -> str:
    """Where users SSH to, as far as it is known before the cloud assigns addresses."""
    login = config.slurm.login
    if login.load_balancer_ip:
        return f"{login.load_balancer_ip}:{SSHD_PORT}"
    if node_port:
        return f"<any-node-ip>:{login.node_port}"
    return f"{service_name}.{config.cluster.namespace}:{SSHD_PORT} (LoadBalancer address)"


# What a researcher types for their own login name in userSshCommand (their shell fills it in when it is theirs).
USER_PLACEHOLDER = "$USER"


def ssh_command_for(config: PlatformConfig, service_name: str, node_port: bool, user: str = "root") -> str:
    login = config.slurm.login
    if login.load_balancer_ip:
        return f"ssh {user}@{login.load_balancer_ip}"
    if node_port:
        return f"ssh -p {login.node_port} {user}@<any-node-ip>"
    return f"ssh {user}@$(kubectl get svc {service_name} -n {config.cluster.namespace} -o jsonpath='{{.status.loadBalancer.ingress[0].ip}}')"


def no_live_login(config: PlatformConfig) -> None:
    """The login address is known from config: no Service is read back."""
    return None


def no_status_message(config: PlatformConfig, status: Optional[dict[str, Any]]) -> None:
    """No cluster resource reports a status the component waits on."""
    return None


def no_removed_workers_warning(config: PlatformConfig, previous_workers: Optional[list[str]]) -> None:
    """Workers are dynamic Slurm nodes: a removed one leaves slurmctld with its pod."""
    return None


def service_account_rbac(role_prefix: str, name: str, namespace: str, labels: dict[str, str], rules: list[dict[str, Any]]) -> list[Rendered]:
    """A ServiceAccount, a Role with `rules` and the RoleBinding between them, all named `name`."""
    metadata = {"name": name, "namespace": namespace, "labels": labels}
    return [
        Rendered(f"{role_prefix}-sa", {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata}),
        Rendered(f"{role_prefix}-role", {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": metadata, "rules": rules}),
        Rendered(
            f"{role_prefix}-binding",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": metadata,
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
            },
        ),
    ]


def node_port_fields(config: PlatformConfig) -> dict[str, Any]:
    """`allocateLoadBalancerNodePorts: false` when the cloud's load balancer reaches the login pods directly
    (node ports would only open SSH on every node, outside the source ranges); else nothing."""
    annotations = login_lb_annotations(config) or {}
    return {"allocateLoadBalancerNodePorts": False} if kube_rules.pod_backends(annotations, config.cloud) else {}


def login_service_spec(config: PlatformConfig) -> dict[str, Any]:
    """A Service spec (no selector) for SSH: LoadBalancer restricted to allowedSourceRanges, or NodePort."""
    login = config.slurm.login
    if login.service_type == "NodePort" and not login.allowed_source_ranges:
        return {"type": "NodePort"}
    spec: dict[str, Any] = {"type": "LoadBalancer", "externalTrafficPolicy": "Local", **node_port_fields(config)}
    if login.allowed_source_ranges:
        spec["loadBalancerSourceRanges"] = list(login.allowed_source_ranges)
    if login.load_balancer_ip:
        spec["loadBalancerIP"] = login.load_balancer_ip
    return spec


def ldap_ca_files(config: PlatformConfig, path: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(volumes, volumeMounts) that put the LDAP server's CA, ca.crt of its TLS Secret mounted by reference
    (the program never reads the Secret), at `path`, where sssd.conf / nslcd.conf point; nothing without TLS."""
    tls = config.ldap.tls
    if not (config.ldap.enabled and tls.enabled):
        return [], []
    volume = {"name": "ldap-ca", "secret": {"secretName": tls.secret_name, "items": [{"key": TLS_CA_KEY, "path": TLS_CA_KEY}]}}
    return [volume], [{"name": "ldap-ca", "mountPath": path, "subPath": TLS_CA_KEY, "readOnly": True}]


def submount_volumes(config: PlatformConfig) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(volumes, volumeMounts) for the shared submount claims, at the same path in every pod."""
    submounts = config.storage.submounts
    volumes = [{"name": f"submount-{sub.name}", "persistentVolumeClaim": {"claimName": sub.claim_name}} for sub in submounts]
    mounts = [{"name": f"submount-{sub.name}", "mountPath": sub.mount_path} for sub in submounts]
    return volumes, mounts

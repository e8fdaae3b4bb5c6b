"""Shared helpers: Kubernetes quantities, safe access to engine property bags,
resource type names, and the common shape of every violation message.

The engine hands policies read-only `Mapping`/`Sequence` proxies (not dicts
and lists), so every helper here tests for the abstract types.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Optional

from pulumi_policy import PolicyResource, StackValidationArgs
from slurm_rules import kube_rules  # the rules the stack config uses too

# --- resource types, as the engine names them --------------------------------

PVC = "kubernetes:core/v1:PersistentVolumeClaim"
PV = "kubernetes:core/v1:PersistentVolume"
SERVICE = "kubernetes:core/v1:Service"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
SECRET = "kubernetes:core/v1:Secret"
STATEFUL_SET = "kubernetes:apps/v1:StatefulSet"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
SLURM_CLUSTER = "kubernetes:slurm.nebius.ai/v1:SlurmCluster"
# The other Slurm operators' resources (soperator 4.x workers, ACK, Slinky).
SOPERATOR_NODESET = "kubernetes:slurm.nebius.ai/v1alpha1:NodeSet"
ACK_SLURM_CLUSTER = "kubernetes:kai.alibabacloud.com/v1:SlurmCluster"
SLINKY_CONTROLLER = "kubernetes:slinky.slurm.net/v1beta1:Controller"
SLINKY_NODESET = "kubernetes:slinky.slurm.net/v1beta1:NodeSet"
SLINKY_LOGINSET = "kubernetes:slinky.slurm.net/v1beta1:LoginSet"
SLINKY_ACCOUNTING = "kubernetes:slinky.slurm.net/v1beta1:Accounting"
SLINKY_RESTAPI = "kubernetes:slinky.slurm.net/v1beta1:RestApi"
MARIADB = "kubernetes:k8s.mariadb.com/v1alpha1:MariaDB"
CHART_TYPES = (
    "kubernetes:helm.sh/v4:Chart",
    "kubernetes:helm.sh/v3:Chart",
    "kubernetes:helm.sh/v3:Release",
)
# Workloads whose pod templates may carry env literals.
POD_TEMPLATE_TYPES = (
    STATEFUL_SET,
    DEPLOYMENT,
    "kubernetes:apps/v1:DaemonSet",
    "kubernetes:apps/v1:ReplicaSet",
    "kubernetes:batch/v1:Job",
    "kubernetes:batch/v1:CronJob",
    "kubernetes:core/v1:Pod",
)

GI = 2**30

# --- data volume names ---------------------------------------------------------

JAIL_SOURCE = "jail"
SPOOL_SOURCE = "controller-spool"
DEFAULT_JAIL_CLAIM = "jail-pvc"
DEFAULT_SPOOL_CLAIM = "controller-spool-pvc"
DEFAULT_SUBMOUNT_PATTERN = "jail-submount-{name}-pvc"
DEFAULT_DATA_CLAIM_REGEX = r"^(jail-pvc|controller-spool-pvc|jail-submount-[a-z0-9]([-a-z0-9]*[a-z0-9])?-pvc)$"


# --- property access -------------------------------------------------------------


def is_map(value: Any) -> bool:
    return isinstance(value, Mapping)


def is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def get(value: Any, *path: Any, default: Any = None) -> Any:
    """`value[path[0]][path[1]]...`, or `default` as soon as a step is missing."""
    for step in path:
        if isinstance(step, int):
            if not is_list(value) or not -len(value) <= step < len(value):
                return default
            value = value[step]
        else:
            if not is_map(value) or step not in value:
                return default
            value = value[step]
    return default if value is None else value


def items(value: Any) -> Iterator[tuple[str, Any]]:
    return iter(value.items()) if is_map(value) else iter(())


def elements(value: Any) -> list[Any]:
    return list(value) if is_list(value) else []


def name_of(props: Any) -> str:
    return str(get(props, "metadata", "name", default=""))


def namespace_of(props: Any) -> Optional[str]:
    namespace = get(props, "metadata", "namespace")
    return str(namespace) if namespace else None


def display(props: Any, fallback: str = "") -> str:
    """`namespace/name` of a Kubernetes object (or the Pulumi name when unnamed)."""
    name = name_of(props) or fallback
    namespace = namespace_of(props)
    return f"{namespace}/{name}" if namespace else name


def config_value(config: Mapping[str, Any], key: str, default: Any) -> Any:
    """A policy config property; the schema default when unset (the CLI fills
    defaults too, but tests and older CLIs may not)."""
    value = config.get(key) if config else None
    return default if value is None else value


def violation(problem: str, fix: str) -> str:
    """Every message states the problem, then how to fix it."""
    return f"{problem.rstrip('.')}. Fix: {fix.rstrip('.')}."


# --- quantities ---------------------------------------------------------------------


def quantity(value: Any) -> float:
    """A Kubernetes resource quantity ("100Gi", "110000m", "1.5", "8", 8, "1e3") as a number.

    The same parser as the stack config (kube_rules); raises ValueError for anything else.
    """
    return float(kube_rules.parse_quantity(value))


def maybe_quantity(value: Any) -> Optional[float]:
    try:
        return quantity(value)
    except ValueError:
        return None


def fmt_number(value: float) -> str:
    """2 -> "2", 1357.4 -> "1357.4", 18.97656 -> "18.98"."""
    return f"{value:.2f}".rstrip("0").rstrip(".") if value != int(value) else str(int(value))


def gib(value: float) -> str:
    return f"{fmt_number(value / GI)}Gi"


# --- SlurmCluster shape ----------------------------------------------------------------

SLURM_NODE_KINDS = ("controller", "worker", "login", "exporter", "accounting")


def slurm_nodes(cluster: Any) -> Mapping[str, Any]:
    nodes = get(cluster, "spec", "slurmNodes", default={})
    return nodes if is_map(nodes) else {}


def volume_sources(cluster: Any) -> list[Any]:
    return [source for source in elements(get(cluster, "spec", "volumeSources")) if is_map(source)]


def claim_of(source: Any) -> Optional[str]:
    claim = get(source, "persistentVolumeClaim", "claimName")
    return str(claim) if claim else None


def source_claims(cluster: Any) -> dict[str, Optional[str]]:
    """volumeSource name -> claimName (None when the source is not a claim)."""
    return {str(get(source, "name", default="")): claim_of(source) for source in volume_sources(cluster)}


def jail_sub_mounts(node: Any) -> list[Any]:
    return [mount for mount in elements(get(node, "volumes", "jailSubMounts")) if is_map(mount)]


def of_type(resources: Iterable[PolicyResource], *types: str) -> list[PolicyResource]:
    return [r for r in resources if r.resource_type in types]


def stack_config(args: StackValidationArgs) -> Mapping[str, Any]:
    return args.get_config() or {}


# --- ACK pod templates ------------------------------------------------------------------

ACK_TEMPLATE_ROLES = ("headGroupSpec", "slurmctld", "slurmdbd", "slurmrestd")


def ack_templates(cluster: Any) -> list[tuple[str, int, Any]]:
    """(where, replicas, pod template) of every pod kind an ACK SlurmCluster runs."""
    spec = get(cluster, "spec", default={})
    found = []
    for role in ACK_TEMPLATE_ROLES:
        part = get(spec, role)
        if is_map(part):
            replicas = get(part, "replicas", default=1)
            found.append((f"spec.{role}", int(replicas) if isinstance(replicas, (int, float)) else 1, get(part, "template")))
    for i, group in enumerate(elements(get(spec, "workerGroupSpecs"))):
        name = get(group, "groupName", default=str(i))
        replicas = get(group, "replicas", default=0)
        found.append((f"workerGroupSpecs[{name}]", int(replicas) if isinstance(replicas, (int, float)) else 0, get(group, "template")))
    return found

"""Tenants: the OpenPAI/HiveD lab's virtual clusters on Slurm (components/tenancy/), and their rules."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Annotated, Any, Literal, Optional

from pydantic import AfterValidator, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel
from slurm_rules import cell_fit

from .charts import OperatorsConfig
from .fields import DnsLabel, DnsSubdomain, KubernetesGroup, Model, Problem, PublicKey, VolumeSize, closest, duplicates, matching

if TYPE_CHECKING:
    from .platform import PlatformConfig

# ---------------------------------------------------------------------------
# Tenants: the OpenPAI/HiveD lab's virtual clusters on Slurm (components/tenancy/)


TenantPriority = Literal["prod", "test", "oppo"]
# Users and groups the Slurm images already have: Debian/Ubuntu's base-passwd, the daemons the images
# run, and groups other distributions grant privileges to. An LDAP entry of the same name shadows or
# joins them (sudo matches `%sudo` by group name), and sacctmgr would change the associations of root.
RESERVED_POSIX_NAMES = frozenset(
    {
        *("root", "daemon", "bin", "sys", "sync", "games", "man", "lp", "mail", "news", "uucp", "proxy", "www-data"),
        *("backup", "list", "irc", "gnats", "nobody", "nogroup", "_apt", "adm", "tty", "disk", "kmem", "dialout"),
        *("fax", "voice", "cdrom", "floppy", "tape", "sudo", "audio", "dip", "operator", "src", "shadow", "utmp"),
        *("video", "sasl", "plugdev", "staff", "users", "input", "render", "netdev", "crontab", "messagebus"),
        *("slurm", "munge", "sshd", "nslcd", "sssd", "mysql", "wheel", "admin", "docker"),
    }
)
# Slurm's own account: the parent of every other; a tenant's GrpTRES on it would cap the whole cluster.
RESERVED_SLURM_ACCOUNTS = ("root",)
# What a tenant's name takes for the Slurm account of its oppo jobs (TenantConfig.oppo_account).
OPPO_ACCOUNT_SUFFIX = "-oppo"


def _check_not_reserved_posix_name(value: str) -> str:
    if value in RESERVED_POSIX_NAMES:
        raise ValueError(
            f"{value!r} is a system user or group of the Slurm images and cannot be seeded into LDAP or Slurm "
            "(reserved: Debian's base-passwd users and groups such as root, nobody, sudo, adm, staff, users, and the images' "
            "daemons slurm, munge, sshd, nslcd, sssd; docs/tenants.md: Names a tenant cannot take)"
        )
    return value


def _check_not_reserved_account(value: str) -> str:
    if value in RESERVED_SLURM_ACCOUNTS:
        raise ValueError(f"{value!r} is Slurm's root account, the parent of every account; choose another name")
    return value


# A POSIX user or group name as LDAP's posixAccount/posixGroup and Slurm's sacctmgr take it.
POSIX_NAME_PATTERN = r"^[a-z_][a-z0-9_-]{0,31}$"
PosixName = Annotated[
    str,
    matching(POSIX_NAME_PATTERN, "a POSIX name: a lower-case letter or _, then up to 31 lower-case letters, digits, _ or -, e.g. alice"),
    AfterValidator(_check_not_reserved_posix_name),
]


# A uid or gid a researcher's entry may carry: above the system range every distribution reserves (0-999), and
# clear of Debian's globally allocated ids (60000-64999: slurm is 64030 in Debian's base-passwd), nobody (65534)
# and the 16-bit -1 (65535). Below 2^31: some tools still read ids as signed 32-bit numbers.
MIN_USER_ID = 1000
RESERVED_ID_RANGES = ((0, MIN_USER_ID - 1, "the system range"), (60000, 65535, "Debian's global ids, nobody and 65535"))
MAX_ID = 2**31 - 2
# The operators' own service accounts above the system range, which a researcher's number must not take:
# ACK's sample images (ack-slurm-operator's Dockerfile) make slurm with uid and gid 1109.
OPERATOR_SERVICE_IDS: dict[str, dict[str, int]] = {"ack": {"slurm": 1109}}


def reserved_id(number: int) -> Optional[str]:
    """What a uid or gid is reserved for, or None."""
    return next((what for low, high, what in RESERVED_ID_RANGES if low <= number <= high), None)


def _check_id_range(value: Optional[int]) -> Optional[int]:
    if value is not None and reserved_id(value):
        raise ValueError(f"is in {reserved_id(value)}; a researcher's number must be {MIN_USER_ID}-59999 or 65536-{MAX_ID}")
    return value


IdNumber = Annotated[int, Field(ge=MIN_USER_ID, le=MAX_ID), AfterValidator(_check_id_range)]


def _name_or_object(schema: dict[str, Any]) -> None:
    # The schema editors and `make docs` read: a user is its name alone, or the object.
    whole = dict(schema)
    schema.clear()
    schema["anyOf"] = [{"type": "string", "pattern": POSIX_NAME_PATTERN, "description": "A user's name alone (no key, derived uidNumber)."}, whole]


class TenantUser(Model):
    """A researcher: a login name in the directory, the keys they log in with, and (for files they already own) their uid."""

    model_config = ConfigDict(json_schema_extra=_name_or_object)

    name: PosixName = Field(..., description="Login name (LDAP uid, Slurm user).")
    ssh_public_keys: list[PublicKey] = Field(
        default_factory=list,
        description="The user's own OpenSSH public keys (ssh-ed25519, ecdsa-sha2-nistp256/384/521, or ssh-rsa of at least "
        "3072 bits): sshd on the login pods reads them from the directory. None: the user cannot log in by key.",
    )
    uid_number: Optional[IdNumber] = Field(
        None,
        description="Pin the uidNumber, for a user who already owns files on the jail or home (e.g. made with adduser by "
        "FPT's guide). Unset: derived from the name, so no reordering of tenants or users ever changes it.",
    )

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, value: Any) -> Any:
        # `users: [alice]`: a user with no key and a derived number.
        return {"name": value} if isinstance(value, str) else value


class TenantCells(Model):
    """Guaranteed cells (HiveD's virtualCells): `cells` of `gpusPerCell` GPUs, each cell on one node of `pool`."""

    pool: DnsLabel = Field(..., description="A GPU node pool (nodePools[].name).")
    gpus_per_cell: int = Field(
        ..., ge=1, description="GPUs in one cell: up to the pool's gpusPerNode, all on one node; or whole nodes (a multiple of it)."
    )
    cells: int = Field(..., ge=1, description="How many such cells the tenant is guaranteed.")


# Pods a tenant namespace holds at once unless its maxPods says otherwise: enough for a multi-node job and its
# helpers, far below what a few nodes' max-pods (110 each by default) and the pod network's addresses allow.
DEFAULT_TENANT_PODS = 100


class TenantStorage(Model):
    """What a tenant namespace's claims may take of one storage class."""

    size: VolumeSize = Field(..., description="The most its claims of the class may request together, e.g. 500Gi.")
    claims: int = Field(..., ge=1, description="The most claims of the class it may hold at once.")


class TenantConfig(Model):
    """A team sharing the GPU pools: a Slurm account with a guarantee, QOS levels, and an LDAP group."""

    name: Annotated[DnsLabel, AfterValidator(_check_not_reserved_account)] = Field(
        ..., description="Slurm account name (and namespace name when namespace is true); not root."
    )
    ldap_group: Optional[PosixName] = Field(None, description="LDAP posixGroup of the tenant's users; default: name.")
    gid_number: Optional[IdNumber] = Field(
        None,
        description="Pin the gidNumber of the tenant's group, for a group that already owns files. Unset: derived from the "
        "group's name, never from its place in the list.",
    )
    users: list[TenantUser] = Field(
        default_factory=list,
        description="Its researchers, each a name or {name, sshPublicKeys, uidNumber}: kept in the directory on every up "
        "(ldap.enabled), each in this tenant only.",
    )
    cells: list[TenantCells] = Field(..., min_length=1, description="Guaranteed cells (the virtual cluster).")
    kueue_cells: list[TenantCells] = Field(
        default_factory=list,
        description="Cells guaranteed to its Kubernetes jobs through Kueue (operators.kueue.enabled), on the pool's nodes "
        "that are not Slurm workers (nodeCount - slurmWorkers).",
    )
    borrowing_cap: Optional[int] = Field(None, ge=0, description="GPUs beyond the guarantee its oppo jobs may use at once; unset: any idle GPU.")
    priorities: list[TenantPriority] = Field(
        default_factory=lambda: list[TenantPriority](["prod", "test", "oppo"]),
        min_length=1,
        description="QOS levels its users may submit at: prod > test run inside the guarantee; oppo borrows idle GPUs, preemptible.",
    )
    namespace: bool = Field(
        False,
        description="Declare a namespace <name> for the tenant: Pod Security restricted, quotas of its GPUs and their share "
        "of the nodes' cpu and memory, no pod beside a Slurm worker (protected and retained on delete; not default, ci, kube-*, "
        "the cluster's or an operator's namespace). Needed for kueueCells.",
    )
    max_pods: int = Field(
        DEFAULT_TENANT_PODS,
        ge=1,
        description="Pods its namespace may hold at once (its ResourceQuota's pods), whatever they request: many tiny pods would "
        "otherwise use up the nodes' max-pods and the pod network's addresses. Needs namespace: true.",
    )
    storage: dict[DnsSubdomain, TenantStorage] = Field(
        default_factory=dict,
        description="Per storage class, what its namespace's claims may take ({size, claims}). The classes the platform's own "
        "volumes use (the jail, spools, MariaDB, LDAP) are closed to it unless listed here; another class listed is bounded too. "
        "Needs namespace: true.",
    )
    kubernetes_groups: list[KubernetesGroup] = Field(
        default_factory=list,
        description="Groups, as the cluster's authenticator names them (e.g. OIDC's), bound in its namespace to the Role "
        "slurm-tenant: its workloads, claims, Secrets and Services, and reading its queues, quotas and network policies; "
        "never RBAC, quotas or NetworkPolicies. Needs namespace: true.",
    )

    @property
    def group(self) -> str:
        return self.ldap_group or self.name

    @property
    def user_names(self) -> list[str]:
        return [user.name for user in self.users]

    @property
    def guaranteed_gpus(self) -> int:
        return sum(cell.gpus_per_cell * cell.cells for cell in self.cells)

    def kueue_gpus(self, pool: str) -> int:
        """The GPUs of its kueueCells on `pool`."""
        return sum(cell.gpus_per_cell * cell.cells for cell in self.kueue_cells if cell.pool == pool)

    @property
    def kueue_guaranteed_gpus(self) -> int:
        """The GPUs of all its kueueCells: its ClusterQueue's nominal GPU quota over every pool."""
        return sum(cell.gpus_per_cell * cell.cells for cell in self.kueue_cells)

    @property
    def oppo_account(self) -> str:
        """The Slurm account of its opportunistic jobs."""
        return f"{self.name}{OPPO_ACCOUNT_SUFFIX}"

    @property
    def slurm_accounts(self) -> tuple[str, ...]:
        """Its Slurm accounts (components/tenancy/): its own, and its oppo jobs' where it runs oppo jobs."""
        return (self.name, *([self.oppo_account] if "oppo" in self.priorities else []))

    @property
    def pools(self) -> set[str]:
        """The GPU pools it holds cells on: the only ones its guaranteed jobs may run on."""
        return {cell.pool for cell in self.cells}


# ---------------------------------------------------------------------------
# Loading


# Namespaces the platform uses whatever the config says: Kubernetes' default, and `ci`, where the deploy and
# preview identities live with their tokens (ci/preview-access.yaml): a tenant's Role there would hand them over.
FIXED_RESERVED_NAMESPACES = {
    "default": "Kubernetes' default namespace",
    "ci": "the deploy and preview identities' namespace, holding their tokens (ci/preview-access.yaml)",
}


def reserved_namespaces(config: PlatformConfig) -> dict[str, str]:
    """Namespaces a tenant may not declare (besides kube-*), with their owner. Tenant names are
    unique, so no tenant's namespace is another's. The kubernetes provider adopts an existing
    Namespace on create, and deleting the tenant would then delete it with everything in it."""
    reserved = {**FIXED_RESERVED_NAMESPACES, config.cluster.namespace: "cluster.namespace, the Slurm cluster's"}
    for key, field in OperatorsConfig.model_fields.items():
        chart = getattr(config.operators, key)
        how = "installed by this stack" if chart.install else "installed outside this stack"
        reserved.setdefault(chart.namespace, f"operators.{field.alias or to_camel(key)}.namespace, {how}")
    return reserved


def tenant_problems(config: PlatformConfig) -> Iterator[Problem]:
    tenants = config.tenants
    if not tenants:
        if config.operators.kueue.enabled:
            yield Problem(("operators", "kueue", "enabled"), "needs tenants: Kueue's queues are the tenants' (tenants[].kueueCells)", True)
        return
    if not config.slurm.accounting.enabled:
        yield Problem(
            ("slurm", "accounting", "enabled"),
            "must be true when tenants are set: their accounts, QOS and GPU guarantees live in slurmdbd",
            False,
        )
    for index, name in duplicates([t.name for t in tenants]):
        yield Problem(("tenants", index, "name"), "must be unique among tenants", name)
    # Each tenant also owns the Slurm account <name>-oppo.
    oppo_accounts = {t.oppo_account: t.name for t in tenants}
    for index, tenant in enumerate(tenants):
        if tenant.name in oppo_accounts:
            yield Problem(
                ("tenants", index, "name"),
                f"is the Slurm account for the oppo jobs of tenant {oppo_accounts[tenant.name]!r}; choose another name",
                tenant.name,
            )
    # With tenants, who may use a partition follows from the cells (components/slurm/common.py partition_options).
    for index, partition in enumerate(config.slurm.partitions):
        if {option.partition("=")[0].lower() for option in partition.config.split()} & {"allowaccounts", "denyaccounts"}:
            yield Problem(
                ("slurm", "partitions", index, "config"),
                "sets AllowAccounts/DenyAccounts, which the tenants decide: a tenant's account may use the partitions over its cells' "
                "pools, every oppo account all of them; remove it",
                partition.config,
            )
    pools = {pool.name: pool for pool in config.node_pools}
    gpu_pool_names = ", ".join(sorted(pool.name for pool in config.gpu_pools))
    reserved = reserved_namespaces(config)
    listed = ", ".join(["kube-*", *reserved])
    for i, tenant in enumerate(tenants):
        owner = reserved.get(tenant.name) or ("Kubernetes' own" if tenant.name.startswith("kube-") else None)
        if tenant.namespace and owner:
            yield Problem(
                ("tenants", i, "namespace"),
                f"would declare namespace {tenant.name!r}, which is not the tenant's: {owner}; rename the tenant or set namespace: false "
                f"(reserved: {listed})",
                True,
            )
        if config.ldap.enabled and tenant.ldap_group is None and tenant.name in RESERVED_POSIX_NAMES:
            yield Problem(
                ("tenants", i, "name"),
                f"is also its LDAP group (ldapGroup unset), and {tenant.name!r} is a system group of the Slurm images; set ldapGroup",
                tenant.name,
            )
        elif config.ldap.enabled and tenant.ldap_group is None and not re.fullmatch(POSIX_NAME_PATTERN, tenant.name):
            yield Problem(
                ("tenants", i, "name"),
                "is also its LDAP group (ldapGroup unset), and a group name is at most 32 characters, starting with a letter or _; set ldapGroup",
                tenant.name,
            )
        for field, names in (("users", tenant.user_names), ("kubernetesGroups", tenant.kubernetes_groups)):
            for k, name in duplicates(list(names)):
                yield Problem(("tenants", i, field, k), "is listed twice in this tenant", name)
        for key in ("max_pods", "storage"):
            if key in tenant.model_fields_set and not tenant.namespace:
                alias = TenantConfig.model_fields[key].alias or to_camel(key)
                yield Problem(
                    ("tenants", i, alias),
                    "bounds the tenant's namespace, which the stack declares only with namespace: true; add `namespace: true` or remove it",
                    getattr(tenant, key) if key == "max_pods" else sorted(tenant.storage),
                )
        if tenant.kubernetes_groups and not tenant.namespace:
            yield Problem(
                ("tenants", i, "kubernetesGroups"),
                "are bound in the tenant's namespace, which the stack declares only with namespace: true; add `namespace: true`",
                tenant.kubernetes_groups,
            )
        borrowable = config.slurm_gpus - tenant.guaranteed_gpus
        if tenant.borrowing_cap is not None and tenant.borrowing_cap > borrowable:
            yield Problem(
                ("tenants", i, "borrowingCap"),
                f"is more than the {max(borrowable, 0)} GPUs it could borrow (the Slurm workers' GPUs beyond its own guarantee); "
                f"at most {max(borrowable, 0)}, or unset for any idle GPU",
                tenant.borrowing_cap,
            )
        for k, level in duplicates(list(tenant.priorities)):
            yield Problem(("tenants", i, "priorities", k), "is listed twice", level)
        if not {"prod", "test"} & set(tenant.priorities):
            yield Problem(("tenants", i, "priorities"), "needs prod or test: its guaranteed cells are used at those levels", list(tenant.priorities))
        if tenant.borrowing_cap is not None and "oppo" not in tenant.priorities:
            yield Problem(("tenants", i, "borrowingCap"), "caps oppo jobs, but priorities has no oppo", tenant.borrowing_cap)
        if tenant.kueue_cells and not config.operators.kueue.enabled:
            yield Problem(("tenants", i, "kueueCells"), "needs operators.kueue.enabled: true (Kueue holds these cells)", len(tenant.kueue_cells))
        if tenant.kueue_cells and not tenant.namespace:
            yield Problem(
                ("tenants", i, "namespace"),
                "must be true with kueueCells: its ClusterQueue admits workloads from the namespace named after the tenant, "
                "so the stack must own that namespace (one made by anyone else would inherit the queue); set namespace: true",
                tenant.namespace,
            )
        for field, cells in (("cells", tenant.cells), ("kueueCells", tenant.kueue_cells)):
            for j, cell in enumerate(cells):
                pool = pools.get(cell.pool)
                if pool is None or not pool.has_gpu:
                    what = "is not a node pool" if pool is None else "has no GPUs"
                    gpu_pools = [p.name for p in config.gpu_pools]
                    yield Problem(
                        ("tenants", i, field, j, "pool"), f"{what} (GPU pools: {gpu_pool_names})", cell.pool, tuple(closest(cell.pool, gpu_pools))
                    )
                elif cell.gpus_per_cell > pool.gpus_per_node and cell.gpus_per_cell % pool.gpus_per_node:
                    yield Problem(
                        ("tenants", i, field, j, "gpusPerCell"),
                        f"is more than pool '{pool.name}' has per node ({pool.gpus_per_node}) and not whole nodes; a cell is GPUs on one "
                        f"node, or whole nodes (a multiple of {pool.gpus_per_node})",
                        cell.gpus_per_cell,
                    )
    # Kueue's nodes of a pool it shares with Slurm must be told apart by label: the pool's selector matches
    # the Slurm workers' nodes too, where Kueue would admit and place jobs on GPUs a slurmd pod needs.
    kueue_pools = {c.pool for t in tenants for c in t.kueue_cells}
    for k, pool in enumerate(config.node_pools):
        if pool.name in kueue_pools and pool.worker_replicas and not pool.kueue_node_labels:
            yield Problem(
                ("nodePools", k, "kueueNodeLabels"),
                f"must name the labels of the Kueue nodes of pool '{pool.name}' (the {pool.kueue_node_count} that are "
                "not Slurm workers), as kueueCells use it beside Slurm workers: its selector also matches the Slurm nodes; label those "
                "nodes (e.g. a node group of their own) and set e.g. kueueNodeLabels: {worker.fptcloud/scheduler: kueue}",
                {},
            )
        for key, value in pool.kueue_node_labels.items():
            if pool.selector.get(key, value) != value:
                yield Problem(
                    ("nodePools", k, "kueueNodeLabels", key),
                    f"contradicts the pool's selector ({key}: {pool.selector[key]}): no node of the pool would carry it; use another key",
                    value,
                )
    # Both schedulers' guarantees, each on its own nodes of a pool: Slurm's on its workers (nodeCount unless
    # slurmWorkers says less), Kueue's on the rest, where no slurmd pod holds the GPUs.
    for field, capacity, where in (
        ("cells", lambda pool: pool.worker_replicas, "Slurm worker nodes"),
        ("kueueCells", lambda pool: pool.kueue_node_count, "Kueue nodes (those that are not Slurm workers)"),
    ):
        fits = {pool.name: (capacity(pool), pool.gpus_per_node) for pool in config.gpu_pools}
        requests = [
            cell_fit.CellRequest(t.name, c.pool, c.gpus_per_cell, c.cells)
            for t in tenants
            for c in (t.cells if field == "cells" else t.kueue_cells)
            if c.pool in fits and (c.gpus_per_cell <= fits[c.pool][1] or c.gpus_per_cell % fits[c.pool][1] == 0)
        ]
        shortfalls = cell_fit.shortfalls(fits, requests)
        for pool_name in dict.fromkeys(s.pool for s in shortfalls):
            in_pool = [r for r in requests if r.pool == pool_name]
            short = [s for s in shortfalls if s.pool == pool_name]
            yield Problem(("tenants",), _guarantees_beyond(pool_name, *fits[pool_name], where, field, in_pool, short))


def _guarantees_beyond(
    pool: str, nodes: int, gpus_per_node: int, where: str, field: str, requests: list[cell_fit.CellRequest], short: list[cell_fit.Shortfall]
) -> str:
    """The pool's GPUs, each tenant's guarantee in it and the excess: no one tenant is to blame for a sum."""
    by_tenant: dict[str, list[cell_fit.CellRequest]] = {}
    for request in requests:
        by_tenant.setdefault(request.tenant, []).append(request)

    def gpus(asked: list[cell_fit.CellRequest]) -> int:
        return sum(r.gpus_per_cell * r.cells for r in asked)

    has, asked = nodes * gpus_per_node, gpus(requests)
    each = ", ".join(f"{tenant} {gpus(cells)} ({' + '.join(f'{c.cells} x {c.gpus_per_cell}' for c in cells)})" for tenant, cells in by_tenant.items())
    counts = "; ".join(f"{s.gpus_per_cell}-GPU cells: {s.needed} needed, {s.available} available" for s in short)
    said = f"pool '{pool}' has {has} GPUs on its {nodes} {where}, {gpus_per_node} each, and the tenants' {field} there ask {asked}: {each}; "
    if asked > has:
        return said + f"{asked - has} GPUs more than it has ({counts}): lower those guarantees by {asked - has} GPUs, or add nodes"
    return said + f"they fit in number but not in place, as a cell's GPUs are on one node ({counts}): use cells that fill whole nodes, or add nodes"


def cell_entries(tenants: Iterable[TenantConfig]) -> list[dict[str, Any]]:
    """The tenants' guaranteed Slurm cells as plain JSON, as the policy pack's fit check reads them."""
    return [{"tenant": t.name, "pool": c.pool, "gpusPerCell": c.gpus_per_cell, "cells": c.cells} for t in tenants for c in t.cells]

"""Tenants: the OpenPAI/HiveD lab's virtual clusters (VCs) on Slurm and Kubernetes.

A tenant's guarantee is its cells' GPUs, checked to fit the pools at preview
(policies/slurm_rules/cell_fit.py, from config validation and from the policy pack). In Slurm:

- account `<tenant>` with `GrpTRES=gres/gpu=<guarantee>` and QOS prod/test:
  its guaranteed work. A job carries one QOS, so the guarantee sits on the
  account (Grp limits count every job of the account: prod + test together
  stay within it) and the QOS carry the level;
- account `<tenant>-oppo` with QOS oppo (and `GrpTRES` = the borrowing cap):
  opportunistic work on any idle GPU, requeued when a prod or test job needs
  the GPUs back (`Preempt=oppo`, slurm.conf `PreemptType=preempt/qos`);
- every partition allows the accounts of the tenants holding cells on each of
  its pools, and every oppo account: guaranteed work stays on its own pools.
  From Slurm 24.11 the partitions name parent accounts (one per set of GPU
  pools, one for oppo) and this script puts each account under its parent, so
  adding a tenant changes no slurm.conf (components/slurm/common.py `parent_account`);
- the nodes a tenant's cells fill alone (policies/slurm_rules/cell_fit.py `owned_nodes`) are
  a Slurm reservation `cells.<pool>.<tenant>` (MAGNETIC: its jobs go there
  without asking) open to the tenant and every oppo account: another tenant's
  guaranteed jobs cannot fragment them, so a whole-node cell stays placeable;
- the slurm.conf side goes through each operator's own mechanism
  (components/slurm/common.py `tenant_settings`, `partition_options`).

Accounts, QOS and associations are applied by a Kubernetes Job running
`sacctmgr -i` (add what is absent, modify what differs, check what slurmdbd holds),
then `scontrol` for the reservations (shrink and retire first, then create and grow),
named after a hash of the tenants so that it runs again only when they change.
On Kubernetes: PriorityClasses slurm-prod/test/oppo for workloads beside Slurm,
and per tenant (when asked) a namespace safe to hand to the tenant: Pod Security
`restricted` enforced, a policy for what that leaves open (inline CSI volumes,
spec.nodeName, any priority class but the tenant ones), a policy keeping its pods
on its own nodes (never the system pool), quotas of its GPUs and their share of the
nodes' cpu and memory, of its pods and of its claims per storage class (none on the
platform's own classes unless granted), and defaults and minimums for containers.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Optional

import pulumi
from slurm_rules import cell_fit, kube_rules

from .config import NodePoolConfig, PlatformConfig, TenantConfig, platform_storage_classes, quantity_value
from .config.tenants import cell_entries
from .declare import declare, secret_fields
from .resources import child_opts
from .slurm import AccountingClient, Rendered, operator_module
from .slurm.client import auth_setup, client_pod_spec
from .slurm.common import (
    OPPO_PARENT_ACCOUNT,
    TENANT_NAMESPACE_LABEL,
    admission_policy,
    client_slurm_conf,
    parent_account,
    partitions_name_parents,
    pool_set_accounts,
    priority_class_policy,
    tenant_namespace_names,
    tenant_namespaces_of,
    tenant_namespaces_selector,
)

LEVELS = ("prod", "test", "oppo")
GUARANTEED_LEVELS = ("prod", "test")
# Slurm QOS priorities, OpenPAI's prod 100 / test 10; oppo lowest (HiveD's -1; Slurm's floor is 0).
QOS_PRIORITY = {"prod": 100, "test": 10, "oppo": 0}
# Kubernetes pod priorities in the same order; oppo below the default 0, like HiveD's -1.
POD_PRIORITY = {"prod": 100000, "test": 10000, "oppo": -1}
LABELS = {"app.kubernetes.io/managed-by": "slurm-platform", "app.kubernetes.io/component": cell_fit.TENANTS_COMPONENT}
SCRIPT = "sacctmgr.sh"
# The tenants' reservations are named `cells.<pool>.<tenant>` (a pool name has no dot): the Job owns these only.
RESERVATION_PREFIX = "cells."
# Slurm's Duration=infinite is one year; a reservation held for a guarantee ends with the tenant instead.
RESERVATION_END = "2100-01-01T00:00:00"
# The Job retries a reservation change this often, this far apart (20 minutes, within the Job's
# activeDeadlineSeconds): slurmctld up, the pool's nodes registered, a retired reservation's last jobs done.
RESERVATION_RETRY_SECONDS = 5
RESERVATION_TRIES = 240
GPU = "nvidia.com/gpu"
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


def qos_names(tenant: TenantConfig) -> list[str]:
    return [level for level in LEVELS if level in tenant.priorities]


def guaranteed_qos(tenant: TenantConfig) -> list[str]:
    return [level for level in GUARANTEED_LEVELS if level in tenant.priorities]


def default_qos(tenant: TenantConfig) -> str:
    """test when allowed (OpenPAI's default level), else prod."""
    return guaranteed_qos(tenant)[-1]


def borrowable_gpus(config: PlatformConfig, tenant: TenantConfig) -> int:
    """GPUs its oppo jobs may use beyond the guarantee: the cap, at most every other GPU of the Slurm workers."""
    if "oppo" not in tenant.priorities:
        return 0
    others = config.slurm_gpus - tenant.guaranteed_gpus
    return others if tenant.borrowing_cap is None else min(tenant.borrowing_cap, others)


def script_name(config: PlatformConfig) -> str:
    """The tenants ConfigMap: `<cluster>-tenants`, a tenant stack's `<cluster>-tenants-<stack>` (each stack runs its own)."""
    return f"{config.cluster.name}-tenants" + (f"-{config.stack}" if config.role == "tenants" else "")


def job_name(config: PlatformConfig) -> str:
    """`<cluster>-tenants[-<stack>]-<hash>`, the cluster part cut to fit: a Job's name is its pods' `job-name` label (63 at most)."""
    suffix = script_name(config)[len(config.cluster.name) :] + f"-{tenants_hash(config)}"
    return config.cluster.name[: kube_rules.LABEL_VALUE_MAX - len(suffix)].rstrip("-") + suffix


def kueue_borrowing_limit(tenant: TenantConfig) -> Optional[int]:
    """What its Kubernetes jobs may borrow per pool through Kueue: nothing without the oppo level
    (borrowing is oppo's), else its borrowingCap (unset: no limit)."""
    return 0 if "oppo" not in tenant.priorities else tenant.borrowing_cap


def node_share_amounts(pool: NodePoolConfig, gpus: int) -> dict[str, Decimal]:
    """`gpus` of the pool's GPUs, with the same share of a node's cpu (whole millicores) and memory
    (whole MiB), as numbers."""
    share = Decimal(gpus) / pool.gpus_per_node
    return {
        "cpu": Decimal(int(quantity_value(pool.cpu_per_node) * share * 1000)) / 1000,
        "memory": Decimal(int(quantity_value(pool.memory_per_node) * share) // 2**20 * 2**20),
        GPU: Decimal(gpus),
    }


def as_quantities(amounts: dict[str, Decimal]) -> dict[str, str]:
    """Each amount in the form Kubernetes writes it back ("112", "1250Gi", "8", memory in binary units):
    Kueue's webhook stores a ClusterQueue's quotas that way, and any other spelling is a diff on every up."""
    return {name: kube_rules.canonical_quantity(amount, binary=name.endswith("memory")) for name, amount in amounts.items()}


def node_share(pool: NodePoolConfig, gpus: int) -> dict[str, str]:
    """`gpus` of the pool's GPUs, with the same share of a node's cpu and memory, as quantities."""
    return as_quantities(node_share_amounts(pool, gpus))


def namespace_pool_gpus(config: PlatformConfig, tenant: TenantConfig) -> dict[str, int]:
    """Per GPU pool, the GPUs its namespace's pods may request: its cells there; with Kueue, at least the
    most Kueue can admit for it (its kueueCells plus what it may borrow), so the quota never refuses a pod
    Kueue admitted. Without a borrowing limit that is the pool's Kueue nodes' GPUs, not the cohort's sum
    (which the fit check keeps below them): the quota then changes with the nodes, not with every tenant added."""
    if not config.operators.kueue.enabled:
        return {pool.name: sum(c.gpus_per_cell * c.cells for c in tenant.cells if c.pool == pool.name) for pool in config.gpu_pools}
    limit = kueue_borrowing_limit(tenant)
    gpus = {}
    for pool in config.gpu_pools:
        kueue_node_gpus = pool.kueue_node_count * pool.gpus_per_node
        gpus[pool.name] = kueue_node_gpus if limit is None else min(tenant.kueue_gpus(pool.name) + limit, kueue_node_gpus)
    return gpus


def namespace_gpu_quota(config: PlatformConfig, tenant: TenantConfig) -> int:
    return sum(namespace_pool_gpus(config, tenant).values())


def namespace_compute_quota(config: PlatformConfig, tenant: TenantConfig) -> dict[str, str]:
    """Beside the GPU quota: the same share of those GPUs' nodes' cpu and memory (as Kueue's ClusterQueue
    gives them), so pods without GPUs cannot take the nodes' cpu or memory either. Requests, what the
    scheduler reserves: a quota on limits would need limits on every container, and a default limit
    below a container's own request makes the pod invalid."""
    pools = {pool.name: pool for pool in config.gpu_pools}
    shares = [node_share_amounts(pools[name], gpus) for name, gpus in namespace_pool_gpus(config, tenant).items()]
    return as_quantities({f"requests.{resource}": sum((s[resource] for s in shares), Decimal(0)) for resource in ("cpu", "memory")})


def tenants_hash(config: PlatformConfig) -> str:
    """Short hash of what the Job applies, which its name carries: the stack's tenants as configured and, where other
    stacks share the cluster, what their cells decide here (the nodes of its reservations, the oppo accounts they admit)."""
    applied: list[Any] = [t.model_dump(mode="json", by_alias=True) for t in config.own_tenants]
    if config.shares_tenants:
        applied += [[r.name, r.nodes, r.accounts] for r in own_reservations(config)]
    document = json.dumps(applied, sort_keys=True)
    return hashlib.sha256(document.encode()).hexdigest()[:10]


def cells_document(config: PlatformConfig) -> str:
    """The stack's guaranteed cells as plain JSON, for the policy pack's fit check of the rendered stack (beside other
    stacks' cells, which its config carries where stacks share the cluster: tools/policy_configs.py)."""
    return json.dumps(cell_entries(config.own_tenants), indent=1)


@dataclass(frozen=True)
class Reservation:
    """Whole nodes of a pool kept for one tenant's cells (and every oppo account)."""

    name: str
    pool: str
    nodes: int
    feature: Optional[str]  # the pool's Slurm node feature; None: every node is the pool's
    partition: Optional[str]  # where Slurm picks the nodes; None: the default partition
    accounts: tuple[str, ...]

    @property
    def tenant(self) -> str:
        return self.accounts[0]


def reservation_partition(config: PlatformConfig, pool: NodePoolConfig) -> Optional[str]:
    """A partition holding the pool's nodes (Slurm picks a reservation's nodes in one partition):
    the pool's own first, then the default, then any; None where the operator's default covers every node."""
    if not config.partitions:
        return None
    holding = [p for p in config.partitions if not p.pools or pool.name in p.pools]
    ranked = sorted(holding, key=lambda p: (p.pools != [pool.name], not p.default))
    return ranked[0].name if ranked else None


def cell_requests(config: PlatformConfig, pool: NodePoolConfig, kueue: bool = False) -> list[cell_fit.CellRequest]:
    """The tenants' cells on `pool`: Slurm's (`cells`), or Kueue's (`kueueCells`)."""
    return [
        cell_fit.CellRequest(t.name, c.pool, c.gpus_per_cell, c.cells)
        for t in config.tenants
        for c in (t.kueue_cells if kueue else t.cells)
        if c.pool == pool.name
    ]


def reservation_prefix(stack: Optional[str]) -> str:
    """`cells.`, and `cells.<stack>.` for a tenant stack's tenants: each stack's Job keeps (and deletes) its own alone."""
    return RESERVATION_PREFIX + (f"{stack}." if stack else "")


def reservations(config: PlatformConfig) -> list[Reservation]:
    """Per pool, a reservation for each tenant of the cluster with nodes of its own in the placement of every cell."""
    module = operator_module(config)
    oppo = oppo_accounts(config)
    found = []
    for pool in config.gpu_pools:
        requests = cell_requests(config, pool)
        partition = reservation_partition(config, pool)
        if not requests or (config.partitions and partition is None):
            continue  # no cells here, or no partition holds the pool (no job runs there)
        for tenant, nodes in cell_fit.owned_nodes(pool.worker_replicas, pool.gpus_per_node, requests).items():
            if nodes:
                accounts = (tenant, *oppo)
                name = f"{reservation_prefix(config.stack_of(tenant))}{pool.name}.{tenant}"
                found.append(Reservation(name, pool.name, nodes, module.pool_feature(config, pool), partition, accounts))
    return found


def own_reservations(config: PlatformConfig) -> list[Reservation]:
    """The reservations of the stack's own tenants: what its Job applies."""
    own = {t.name for t in config.own_tenants}
    return [r for r in reservations(config) if r.tenant in own]


# What sacctmgr prints while slurmdbd is not up yet (or its Service has no address yet);
# anything else is a fault that waiting does not fix.
NOT_REACHABLE_YET = ("Connection refused", "Unable to resolve", "Name or service not known", "Connection timed out", "No route to host")


def sacctmgr_script(config: PlatformConfig, client: AccountingClient) -> str:
    """Idempotent and exact: what slurmdbd holds is read once; each entity is added (with its
    settings) when absent and modified only where it differs, so a second run records no
    transaction; then everything is read again and checked. Every per-cluster call names the
    cluster (a shared slurmdbd has others); any sacctmgr error fails the Job."""
    q = shlex.quote
    cluster = q(config.cluster.name)
    assoc_format = "format=Account,ParentName,User,GrpTRES,QOS,DefaultQOS"
    lines = [
        "#!/bin/bash",
        "# The tenants' Slurm accounts, QOS and associations (slurm-platform; components/tenancy.py).",
        "set -euo pipefail",
        *auth_setup(client),
        # Wait only while slurmdbd is unreachable; fail at once on anything else (auth, config, ...).
        "until out=$(sacctmgr -nP show cluster format=Cluster 2>&1); do",
        f'  grep -qE {q("|".join(NOT_REACHABLE_YET))} <<<"$out" || {{ echo "$out" >&2; exit 1; }}',
        f"  echo waiting for slurmdbd at {q(client.slurmdbd_host)}; sleep 5",
        "done",
        "read_state() {",
        "  clusters=$(sacctmgr -nP show cluster format=Cluster)",
        "  qos=$(sacctmgr -nP show qos format=Name,Priority,Preempt,PreemptMode)",
        f"  assoc=$(sacctmgr -nP show assoc where cluster={cluster} {assoc_format})",
        "}",
        "# has VAR LINE: that exact line; starts VAR PREFIX: a line starting so.",
        "has() { [[ $'\\n'${!1}$'\\n' == *$'\\n'\"$2\"$'\\n'* ]]; }",
        "starts() { [[ $'\\n'${!1} == *$'\\n'\"$2\"* ]]; }",
        "# modify_account ACCOUNT PARENT LISTED SETTING...: moved where its parent differs, then set where its settings",
        "# (LISTED: GrpTRES|QOS|DefaultQOS as its line ACCOUNT|PARENT||... lists them) differ: a modify that changes nothing fails.",
        "modify_account() {",
        "  local account=$1 parent=$2 listed=$3 line; shift 3",
        f'  starts assoc "$account|$parent|" || sacctmgr -i modify account where name="$account" cluster={cluster} set Parent="$parent"',
        "  while IFS= read -r line; do",
        '    if [[ $line == "$account|"?*"||"* && $line != "$account||"* ]]; then',
        f'      [[ ${{line#"$account|"*"||"}} == "$listed" ]] || sacctmgr -i modify account where name="$account" cluster={cluster} set "$@"',
        "      return",
        "    fi",
        '  done <<<"$assoc"',
        "}",
        "read_state",
        f"has clusters {cluster} || sacctmgr -i add cluster {cluster}",
        "# The ladder: prod > test > oppo; a guaranteed level takes GPUs back from oppo by requeueing it.",
        "# QOS are global in slurmdbd, not per cluster.",
    ]
    wanted = [f"has clusters {cluster}"]
    for level in reversed(LEVELS):  # oppo first: prod and test name it
        settings = f"Priority={QOS_PRIORITY[level]} " + ("PreemptMode=requeue" if level == "oppo" else "Preempt=oppo")
        want = q(f"{level}|{QOS_PRIORITY[level]}|" + ("|requeue" if level == "oppo" else "oppo|cluster"))
        lines += [
            f"if ! starts qos '{level}|'; then sacctmgr -i add qos {level} {settings}",
            f"elif ! has qos {want}; then sacctmgr -i modify qos where name={level} set {settings}; fi",
        ]
        wanted.append(f"has qos {want}")
    if partitions_name_parents(config):
        lines.append("# The parents the partitions allow (components/slurm/common.py partition_options): one per set of GPU pools, one for oppo.")
        for parent in [*pool_set_accounts(config), OPPO_PARENT_ACCOUNT]:
            lines += [
                f"if ! starts assoc '{parent}|'; then sacctmgr -i add account {parent} Cluster={cluster} Organization=slurm-platform "
                f"Description={q('partitions allow its child accounts')}",
                f"elif ! starts assoc '{parent}|root||'; then sacctmgr -i modify account where name={parent} cluster={cluster} set Parent=root; fi",
            ]
            wanted.append(f"starts assoc '{parent}|root||'")
    for tenant in config.own_tenants:
        accounts = [
            (tenant.name, f"gres/gpu={tenant.guaranteed_gpus}", guaranteed_qos(tenant), default_qos(tenant), parent_account(config, tenant, False))
        ]
        if "oppo" in tenant.priorities:
            cap = "-1" if tenant.borrowing_cap is None else str(tenant.borrowing_cap)
            accounts.append((tenant.oppo_account, f"gres/gpu={cap}", ["oppo"], "oppo", parent_account(config, tenant, True)))
        lines.append(f"# Tenant {tenant.name}: {tenant.guaranteed_gpus} guaranteed GPUs, QOS {','.join(qos_names(tenant))}.")
        for account, limit, qos, default, parent in accounts:
            # As sacctmgr lists them: no limit is empty, an association's QOS sorted by name, a user's parent empty.
            shown = f"{'' if limit.endswith('=-1') else limit}|{','.join(sorted(qos))}|{default}"
            settings = f"QOS={','.join(qos)} DefaultQOS={default}"
            want = q(f"{account}|{parent}||{shown}")
            lines += [
                f"if ! starts assoc '{account}|'; then sacctmgr -i add account {account} Cluster={cluster} Parent={parent} "
                f"Organization={tenant.name} Description={q(f'tenant {tenant.name}')} GrpTRES={limit} {settings}",
                f"elif ! has assoc {want}; then modify_account {account} {parent} {q(shown)} GrpTRES={limit} {settings}; fi",
            ]
            wanted.append(f"has assoc {want}")
            for user in tenant.user_names:
                user_want = q(f"{account}||{user}||{','.join(sorted(qos))}|{default}")
                lines += [
                    f"if ! starts assoc '{account}||{user}|'; then sacctmgr -i add user {user} Account={account} Cluster={cluster} {settings}",
                    f"elif ! has assoc {user_want}; then sacctmgr -i modify user where name={user} account={account} cluster={cluster} set {settings}; fi",
                ]
                wanted.append(f"has assoc {user_want}")
    lines += ["# What slurmdbd holds now.", "read_state", "missing=0"]
    lines += [f'{check} || {{ echo "slurmdbd does not hold: {check.split(" ", 2)[2]}" >&2; missing=1; }}' for check in wanted]
    lines += reservation_lines(config)
    lines.append("exit $missing")
    return "\n".join(lines) + "\n"


def reservation_lines(config: PlatformConfig) -> list[str]:
    """The reservations made exact: ours that are no longer wanted deleted (or, while jobs run in
    them, no longer magnetic and purged once idle), smaller ones shrunk, then new ones created and
    grown ones extended, so nodes are freed before they are asked for; then checked. What slurmctld
    holds is read once per phase into a table by name, not once per reservation, and the oppo
    accounts every reservation is open to are named once: script and run grow linearly with the tenants."""
    q = shlex.quote
    wanted = own_reservations(config)
    oppo = oppo_accounts(config)
    prefix = reservation_prefix(config.stack if config.role == "tenants" else None)
    lines = [
        "# The reservations of the tenants' cells (slurmctld; retried while it or the pool's nodes are not there yet).",
        "retry() {",
        "  local tries=0 out",
        '  until out=$("$@" 2>&1); do',
        f'    (( ++tries < {RESERVATION_TRIES} )) || {{ echo "gave up: $* : $out" >&2; return 1; }}',
        f'    echo "retrying in {RESERVATION_RETRY_SECONDS} s: $* : $out"; sleep {RESERVATION_RETRY_SECONDS}',
        "  done",
        "}",
        "# Every reservation slurmctld holds, its line by its name: read again after each phase of changes.",
        "declare -A held",
        "read_reservations() {",
        "  local all line name",
        "  all=$(scontrol -o show reservation)",
        "  held=()",
        "  while IFS= read -r line; do",
        '    name=${line#ReservationName=}; [[ $name == "$line" ]] || held[${name%% *}]=$line',
        '  done <<<"$all"',
        "}",
        "# is NAME KEY VALUE: slurmctld holds reservation NAME with KEY=VALUE; larger NAME N: with more than N nodes.",
        'is() { [[ "${held[$1]-} " == *" $2=$3 "* ]]; }',
        "larger() { [[ ${held[$1]-} =~ \\ NodeCnt=([0-9]+) ]] && (( BASH_REMATCH[1] > $2 )); }",
        'gone() { scontrol delete ReservationName="$1" || { read_reservations && [[ -z ${held[$1]-} ]]; }; }',
        "# Every oppo account: each reservation is open to its tenant's account and these.",
        f"oppo={q(','.join(oppo))}",
        "retry scontrol -o show reservation",
        "read_reservations",
        'for name in "${!held[@]}"; do',
        f"  [[ $name == {q(prefix)}* ]] || continue",
        *(
            ["  [[ $name == *.*.*.* ]] && continue  # a tenant stack's (cells.<stack>.<pool>.<tenant>)"]
            if config.shares_tenants and config.role == "platform"
            else []
        ),
        f"  case $name in {' | '.join(q(r.name) for r in wanted) or q('')}) continue ;; esac",
        '  if ! scontrol delete ReservationName="$name" 2>/dev/null; then',
        "    # Jobs still run in it: no new ones go there, and Slurm deletes it a minute after the last (should this Job give up first).",
        '    scontrol update ReservationName="$name" Flags-=MAGNETIC Flags+=PURGE_COMP=00:01:00',
        '    retry gone "$name"',
        "  fi",
        "done",
    ]
    for r in wanted:
        lines.append(f"if larger {q(r.name)} {r.nodes}; then retry scontrol update ReservationName={q(r.name)} NodeCnt={r.nodes}; fi")
    lines.append("read_reservations")
    for r in wanted:
        where = (f" Features={q(r.feature)}" if r.feature else "") + (f" PartitionName={q(r.partition)}" if r.partition else "")
        accounts = reservation_accounts(r, oppo)
        lines += [
            f"if [[ -z ${{held[{q(r.name)}]-}} ]]; then",
            f"  retry scontrol create reservation ReservationName={q(r.name)} StartTime=now EndTime={RESERVATION_END} NodeCnt={r.nodes}{where} "
            f"Accounts={accounts} Flags=MAGNETIC,REPLACE_DOWN,IGNORE_JOBS",
            "else",
            f"  is {q(r.name)} Accounts {accounts} || retry scontrol update ReservationName={q(r.name)} Accounts={accounts}",
            f"  is {q(r.name)} NodeCnt {r.nodes} || retry scontrol update ReservationName={q(r.name)} NodeCnt={r.nodes}",
            "fi",
        ]
    lines.append("read_reservations")
    for r in wanted:
        accounts = reservation_accounts(r, oppo)
        lines.append(
            f"is {q(r.name)} NodeCnt {r.nodes} && is {q(r.name)} Accounts {accounts} "
            f'|| {{ echo "slurmctld does not hold: reservation {r.name} of {r.nodes} nodes for "{accounts} >&2; missing=1; }}'
        )
    return lines


def oppo_accounts(config: PlatformConfig) -> tuple[str, ...]:
    """What admits every tenant's oppo account to a reservation: opportunistic work may borrow any idle GPU, reserved
    ones too. Their parent where they have one: a reservation's Accounts= admits an account's children (measured on
    24.11 and 26.05), so a reservation does not change when another tenant, or another stack's, comes."""
    if partitions_name_parents(config):
        return (OPPO_PARENT_ACCOUNT,)
    return tuple(t.oppo_account for t in config.tenants if "oppo" in t.priorities)


def reservation_accounts(reservation: Reservation, oppo: tuple[str, ...]) -> str:
    """A reservation's Accounts= as one shell word: its tenant's account, then `$oppo` (each named once in the script)."""
    tenant, *others = reservation.accounts
    assert tuple(others) == oppo, f"{reservation.name} is open to {others}, not every oppo account"
    return shlex.quote(tenant) + (',"$oppo"' if oppo else "")


def config_map(config: PlatformConfig, client: AccountingClient) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": script_name(config), "namespace": config.cluster.namespace, "labels": LABELS},
        "data": {
            SCRIPT: sacctmgr_script(config, client),
            "slurm.conf": client_slurm_conf(config, client),
            cell_fit.CELLS_KEY: cells_document(config),
        },
    }


def sacctmgr_job(config: PlatformConfig, client: AccountingClient) -> dict[str, Any]:
    """Runs the script once per tenant config: a new hash is a new Job (Jobs are immutable)."""
    labels = {**LABELS, "slurm-platform/tenants-hash": tenants_hash(config)}
    pod_spec = {"restartPolicy": "OnFailure", **client_pod_spec(config, client, "sacctmgr", SCRIPT, script_name(config))}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job_name(config), "namespace": config.cluster.namespace, "labels": labels},
        # It waits for slurmdbd; give up (and fail `pulumi up`) if it never answers.
        "spec": {"backoffLimit": 20, "activeDeadlineSeconds": 1800, "template": {"metadata": {"labels": labels}, "spec": pod_spec}},
    }


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


def tenant_namespace_labels(config: PlatformConfig, tenant: TenantConfig) -> dict[str, str]:
    """What a tenant namespace carries besides the Pod Security labels: the tenant label (what the policies, the
    workers' anti-affinity and Kueue select) and one label per pool its pods may run on."""
    return {
        TENANT_NAMESPACE_LABEL: config.cluster.name,
        **{f"{POOL_LABEL_PREFIX}{pool.name}": "true" for pool in tenant_pools(config, tenant)},
    }


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
    )


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
    rendered = [Rendered(f"{tenant.name}-role", role)]
    if tenant.kubernetes_groups:
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": metadata,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": TENANT_ROLE},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group} for group in tenant.kubernetes_groups],
        }
        rendered.append(Rendered(f"{tenant.name}-role-binding", binding))
    return rendered


def tenant_namespaces(config: PlatformConfig) -> list[Rendered]:
    rendered = []
    for tenant in config.own_tenants:
        if not tenant.namespace:
            continue
        metadata = {"namespace": tenant.name, "labels": LABELS}
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
            ),
            Rendered(
                f"{tenant.name}-compute-quota",
                {
                    "apiVersion": "v1",
                    "kind": "ResourceQuota",
                    "metadata": {"name": "compute-share", **metadata},
                    "spec": {"hard": namespace_compute_quota(config, tenant)},
                },
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
            ),
            tenant_bounds(config, tenant),
        ]
        rendered += tenant_access(tenant)
    return rendered


def cluster_wide(config: PlatformConfig) -> list[Rendered]:
    """What holds for every tenant of the cluster, the platform stack's: the priority classes, and the admission
    policies that select tenant namespaces by label."""
    namespaced = bool(tenant_namespace_names(config))
    return [
        *(Rendered(pc["metadata"]["name"], pc) for pc in priority_classes()),
        *tenant_priority_policy(config),
        *(tenant_pod_policy(config) + tenant_service_policy(config) if namespaced else []),
        *(tenant_gpu_device_policy(config) if namespaced else []),
        *(tenant_placement_policy(config) if namespaced else []),
    ]


def render(config: PlatformConfig) -> list[Rendered]:
    """Everything the tenants add; nothing without tenants. What holds for every tenant (priority classes, admission
    policies selecting tenant namespaces by label) is the platform stack's; each stack declares its own tenants'."""
    if not config.tenants:
        return []
    client = operator_module(config).accounting_client(config)
    return [
        *(cluster_wide(config) if config.role == "platform" else []),
        *tenant_namespaces(config),
        Rendered("sacctmgr-script", config_map(config, client)),
        Rendered("sacctmgr", sacctmgr_job(config, client)),
    ]


def summary(config: PlatformConfig) -> dict[str, Any]:
    """The `tenants` stack output: per tenant, what it is guaranteed and may borrow, and how to submit."""
    return {
        t.name: {
            "guaranteedGpus": t.guaranteed_gpus,
            "cells": [{"pool": c.pool, "gpusPerCell": c.gpus_per_cell, "cells": c.cells} for c in t.cells],
            "borrowableGpus": borrowable_gpus(config, t),
            "qos": qos_names(t),
            "accounts": {"guaranteed": t.name, **({"oppo": t.oppo_account} if "oppo" in t.priorities else {})},
            "namespace": t.name if t.namespace else None,
        }
        for t in config.own_tenants
    }


class Tenants(pulumi.ComponentResource):
    """Declares `render(config)`. Each object waits for exactly what it needs first: a namespace's quotas, limit
    range and Role for the namespace, the Job for its script and for `slurm` (the custom resources running the
    slurmdbd it talks to). Nothing waits for every tenant: the cost of a preview grows with the tenants, not their square."""

    def __init__(self, name: str, config: PlatformConfig, slurm: list[pulumi.Resource], opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("slurm-platform:tenancy:Tenants", name, None, opts)
        declared: dict[tuple[str, str], pulumi.Resource] = {}
        for rendered in render(config):
            manifest = rendered.manifest
            in_namespace = ("Namespace", manifest["metadata"].get("namespace", ""))
            needs = {
                "ResourceQuota": in_namespace,
                "LimitRange": in_namespace,
                "Role": in_namespace,
                "RoleBinding": in_namespace,
                "Job": ("ConfigMap", script_name(config)),
            }
            after = declared.get(needs.get(manifest["kind"], ("", "")))
            waits_for = [*([after] if after else []), *(slurm if manifest["kind"] == "Job" else [])]
            keep = {"protect": True, "retain_on_delete": True} if rendered.keep else {}
            # Built from the tenants and the cluster's Slurm config: secret when either key is.
            fields = secret_fields(config, manifest, ("tenants", "slurm"))
            resource = declare(f"{name}-{rendered.role}", fields, child_opts(self, opts, depends_on=waits_for or None, **keep))
            declared[(manifest["kind"], manifest["metadata"]["name"])] = resource
        # Each tenant's namespace, for what other components declare in it (its LocalQueue, its NetworkPolicies).
        self.namespaces: dict[str, pulumi.Resource] = {
            tenant.name: declared[("Namespace", tenant.name)] for tenant in config.own_tenants if tenant.namespace
        }
        self.summary = pulumi.Output.from_input(summary(config))
        self.register_outputs({"tenants": self.summary})

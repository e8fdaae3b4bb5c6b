"""The reservations that hold each tenant's cells (`cells.<stack>.<pool>.<tenant>`), and the scontrol lines that keep them."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Optional

from slurm_rules import cell_fit

from ..config import NodePoolConfig, PlatformConfig
from ..names import reservation_name, reservation_prefix
from ..slurm import AccountingClient
from ..slurm.common import (
    OPPO_PARENT_ACCOUNT,
    partitions_name_parents,
)

# Slurm's Duration=infinite is one year; a reservation held for a guarantee ends with the tenant instead.
RESERVATION_END = "2100-01-01T00:00:00"


# The Job retries a reservation change this often, this far apart (20 minutes, within the Job's
# activeDeadlineSeconds): slurmctld up, the pool's nodes registered, a retired reservation's last jobs done.
RESERVATION_RETRY_SECONDS = 5


RESERVATION_TRIES = 240


@dataclass(frozen=True)
class Reservation:
    """Whole nodes of a pool kept for one tenant's cells (and every oppo account)."""

    name: str
    pool: str
    nodes: int
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


def reservations(config: PlatformConfig) -> list[Reservation]:
    """Per pool, a reservation for each tenant of the cluster with nodes of its own in the placement of every cell."""
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
                name = reservation_name(config.stack_of(tenant), pool.name, tenant)
                found.append(Reservation(name, pool.name, nodes, partition, accounts))
    return found


def own_reservations(config: PlatformConfig) -> list[Reservation]:
    """The reservations of the stack's own tenants: what its Job applies."""
    own = {t.name for t in config.own_tenants}
    return [r for r in reservations(config) if r.tenant in own]


def reservation_data(config: PlatformConfig) -> list[str]:
    """What the Job's reservation steps (accounts.sh) act on: which reservations are ours (the prefix; a platform stack
    of several leaves its tenant stacks' alone), which are wanted, and the oppo accounts every one is open to, named once."""
    q = shlex.quote
    prefix = reservation_prefix(config.stack if config.role == "tenants" else None)
    others = "keep" if config.shares_tenants and config.role == "platform" else "none"
    return [
        f"RESERVATION_PREFIX={q(prefix)}",
        f"OTHER_STACKS_RESERVATIONS={others}",
        f"RESERVATION_TRIES={RESERVATION_TRIES}",
        f"RESERVATION_RETRY_SECONDS={RESERVATION_RETRY_SECONDS}",
        "# Every oppo account: each reservation is open to its tenant's account and these.",
        f"oppo={q(','.join(oppo_accounts(config)))}",
        f"WANTED_RESERVATIONS=({' '.join(q(r.name) for r in own_reservations(config))})",
    ]


def reservation_steps(config: PlatformConfig, client: AccountingClient) -> dict[str, list[str]]:
    """The reservations made exact, as the bodies of accounts.sh's steps: once ours no longer wanted are gone (or, while
    jobs run in them, no longer magnetic and purged once idle), smaller ones shrunk, then new ones created and grown ones
    extended, so nodes are freed before they are asked for; then checked. What slurmctld holds is read once per phase
    into a table by name, not once per reservation: script and run grow linearly with the tenants."""
    q = shlex.quote
    wanted = own_reservations(config)
    oppo = oppo_accounts(config)
    shrink = [f"if larger {q(r.name)} {r.nodes}; then retry scontrol update ReservationName={q(r.name)} NodeCnt={r.nodes}; fi" for r in wanted]
    create, check = [], []
    for r in wanted:
        feature = client.node_feature(r.pool)
        where = (f" Features={q(feature)}" if feature else "") + (f" PartitionName={q(r.partition)}" if r.partition else "")
        accounts = reservation_accounts(r, oppo)
        create += [
            f"if [[ -z ${{held[{q(r.name)}]-}} ]]; then",
            f"  retry scontrol create reservation ReservationName={q(r.name)} StartTime=now EndTime={RESERVATION_END} NodeCnt={r.nodes}{where} "
            f"Accounts={accounts} Flags=MAGNETIC,REPLACE_DOWN,IGNORE_JOBS",
            "else",
            f"  is {q(r.name)} Accounts {accounts} || retry scontrol update ReservationName={q(r.name)} Accounts={accounts}",
            f"  is {q(r.name)} NodeCnt {r.nodes} || retry scontrol update ReservationName={q(r.name)} NodeCnt={r.nodes}",
            "fi",
        ]
        check += [
            f"if ! {{ is {q(r.name)} NodeCnt {r.nodes} && is {q(r.name)} Accounts {accounts}; }}; then",
            f"  printf 'slurmctld does not hold: reservation %s of %s nodes for %s\\n' {q(r.name)} {r.nodes} {accounts} >&2; missing=1",
            "fi",
        ]
    return {"shrink_reservations": shrink, "create_reservations": create, "check_reservations": check}


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

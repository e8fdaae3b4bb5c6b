"""The tenants Job's script: sacctmgr for accounts, QOS and associations, then scontrol for the reservations."""

from __future__ import annotations

import shlex
from pathlib import Path

from ..config import PlatformConfig
from ..render.scripts import data_and_steps, shell_function, steps_of
from ..slurm import AccountingClient
from ..slurm.client import auth_setup
from ..slurm.common import (
    OPPO_PARENT_ACCOUNT,
    parent_account,
    partitions_name_parents,
    pool_set_accounts,
)
from .quota import LEVELS, QOS_PRIORITY, default_qos, guaranteed_qos, qos_names
from .reservations import reservation_data, reservation_steps

# What sacctmgr prints while slurmdbd is not up yet (or its Service has no address yet);
# anything else is a fault that waiting does not fix.
NOT_REACHABLE_YET = ("Connection refused", "Unable to resolve", "Name or service not known", "Connection timed out", "No route to host")


# The Job's steps, which act on the data sacctmgr_script renders above them.
STEPS = steps_of(Path(__file__).parent / "accounts.sh")


def sacctmgr_script(config: PlatformConfig, client: AccountingClient) -> str:
    """Idempotent and exact: what slurmdbd holds is read once; each entity is added (with its
    settings) when absent and modified only where it differs, so a second run records no
    transaction; then everything is read again and checked. Every per-cluster call names the
    cluster (a shared slurmdbd has others); any sacctmgr error fails the Job. The data and the entities' lines
    are rendered here, the steps are accounts.sh's."""
    q = shlex.quote
    cluster = q(config.cluster.name)
    add = [
        "# The ladder: prod > test > oppo; a guaranteed level takes GPUs back from oppo by requeueing it.",
        "# QOS are global in slurmdbd, not per cluster.",
    ]
    wanted = ['has clusters "$CLUSTER"']
    for level in reversed(LEVELS):  # oppo first: prod and test name it
        settings = f"Priority={QOS_PRIORITY[level]} " + ("PreemptMode=requeue" if level == "oppo" else "Preempt=oppo")
        want = q(f"{level}|{QOS_PRIORITY[level]}|" + ("|requeue" if level == "oppo" else "oppo|cluster"))
        add += [
            f"if ! starts qos '{level}|'; then sacctmgr -i add qos {level} {settings}",
            f"elif ! has qos {want}; then sacctmgr -i modify qos where name={level} set {settings}; fi",
        ]
        wanted.append(f"has qos {want}")
    if partitions_name_parents(config):
        add.append("# The parents the partitions allow (components/slurm/common.py partition_options): one per set of GPU pools, one for oppo.")
        for parent in [*pool_set_accounts(config), OPPO_PARENT_ACCOUNT]:
            add += [
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
        add.append(f"# Tenant {tenant.name}: {tenant.guaranteed_gpus} guaranteed GPUs, QOS {','.join(qos_names(tenant))}.")
        for account, limit, qos, default, parent in accounts:
            # As sacctmgr lists them: no limit is empty, an association's QOS sorted by name, a user's parent empty.
            shown = f"{'' if limit.endswith('=-1') else limit}|{','.join(sorted(qos))}|{default}"
            settings = f"QOS={','.join(qos)} DefaultQOS={default}"
            want = q(f"{account}|{parent}||{shown}")
            add += [
                f"if ! starts assoc '{account}|'; then sacctmgr -i add account {account} Cluster={cluster} Parent={parent} "
                f"Organization={tenant.name} Description={q(f'tenant {tenant.name}')} GrpTRES={limit} {settings}",
                f"elif ! has assoc {want}; then modify_account {account} {parent} {q(shown)} GrpTRES={limit} {settings}; fi",
            ]
            wanted.append(f"has assoc {want}")
            for user in tenant.user_names:
                user_want = q(f"{account}||{user}||{','.join(sorted(qos))}|{default}")
                add += [
                    f"if ! starts assoc '{account}||{user}|'; then sacctmgr -i add user {user} Account={account} Cluster={cluster} {settings}",
                    f"elif ! has assoc {user_want}; then sacctmgr -i modify user where name={user} account={account} cluster={cluster} set {settings}; fi",
                ]
                wanted.append(f"has assoc {user_want}")
    check = [f"{c} || {{ printf 'slurmdbd does not hold: %s\\n' {c.split(' ', 2)[2]} >&2; missing=1; }}" for c in wanted]
    data = [
        f"CLUSTER={cluster}",
        f"SLURMDBD_HOST={q(client.slurmdbd_host)}",
        f"NOT_REACHABLE_YET={q('|'.join(NOT_REACHABLE_YET))}",
        *reservation_data(config),
        *shell_function("auth_setup", auth_setup(client)),
        *shell_function("add_accounts", add),
        *shell_function("check_accounts", check),
        *(line for name, body in reservation_steps(config, client).items() for line in shell_function(name, body)),
    ]
    what = "The tenants' accounts and reservations: what they are, then the steps that make them so (components/tenancy/accounts.sh)."
    return data_and_steps(what, data, STEPS)

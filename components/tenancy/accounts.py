"""The tenants Job's script: sacctmgr for accounts, QOS and associations, then scontrol for the reservations."""

from __future__ import annotations

import shlex

from ..config import PlatformConfig
from ..slurm import AccountingClient
from ..slurm.client import auth_setup
from ..slurm.common import (
    OPPO_PARENT_ACCOUNT,
    parent_account,
    partitions_name_parents,
    pool_set_accounts,
)
from .quota import LEVELS, QOS_PRIORITY, default_qos, guaranteed_qos, qos_names
from .reservations import reservation_lines

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
    lines += reservation_lines(config, client)
    lines.append("exit $missing")
    return "\n".join(lines) + "\n"

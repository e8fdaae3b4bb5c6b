"""What a tenant stack (tenantStack) checks of its platform stack before it registers anything.

The whole cluster's config was validated already, from every stack's file (components/config/stacks.py); here the
platform stack's outputs, what it deployed, must match its file, so that a tenant stack never renders against a
platform file that is ahead of, or behind, the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from .config import PlatformConfig
from .config.fields import Problem
from .operator_moves import deployed_operator
from .slurm.common import ANCESTOR_ALLOWS_SINCE, MAX_POOLS_FOR_PARENT_ACCOUNTS, partitions_name_parents


def release_problems(config: PlatformConfig) -> list[Problem]:
    """Partitions must allow parent accounts: otherwise the platform's slurm.conf would list every stack's tenants."""
    if partitions_name_parents(config):
        return []
    return [
        Problem(
            ("tenantStack",),
            f"a tenant stack needs partitions that allow parent accounts: Slurm {ANCESTOR_ALLOWS_SINCE} or later and at most "
            f"{MAX_POOLS_FOR_PARENT_ACCOUNTS} GPU pools (docs/tenants.md, Who may use a partition); the platform stack "
            f"{config.platform_stack} deploys Slurm {config.slurm_release} with {len(config.gpu_pools)} GPU pools: list these tenants "
            "in the platform stack's file instead",
        )
    ]


def deployed_facts(config: PlatformConfig) -> dict[str, Any]:
    """The platform stack's outputs a tenant stack renders against, as its file says they are."""
    return {"clusterName": config.cluster.name, "namespace": config.cluster.namespace, "slurmOperator": deployed_operator(config)}


def platform_problems(config: PlatformConfig, outputs: Mapping[str, Any]) -> list[Problem]:
    """Whether the platform stack deployed what its file says (`outputs`: its outputs now)."""
    platform = config.platform_stack
    if not outputs:
        return [
            Problem(
                ("tenantStack", "platform"),
                f"stack {platform} has deployed nothing yet (it has no outputs): run `pulumi up --stack {platform}` first",
                platform,
            )
        ]
    differing = [
        f"{key} {outputs.get(key)!r} where Pulumi.{platform}.yaml says {expected!r}"
        for key, expected in deployed_facts(config).items()
        if outputs.get(key) != expected
    ]
    if not differing:
        return []
    return [
        Problem(
            ("tenantStack", "platform"),
            f"stack {platform} deployed {'; '.join(differing)}: its file is ahead of or behind the cluster; run "
            f"`pulumi up --stack {platform}` first, or render from the commit it was deployed from",
            platform,
        )
    ]


def tenants_by_stack(config: PlatformConfig) -> dict[str, list[str]]:
    """The platform stack's `tenantStacks` output: each tenant stack's tenants, as the platform's last `up` saw them."""
    by_stack: dict[str, list[str]] = {}
    for tenant in config.tenants:
        stack = config.stack_of(tenant.name)
        if stack:
            by_stack.setdefault(stack, []).append(tenant.name)
    return by_stack


def unlisted_warning(config: PlatformConfig, outputs: Mapping[str, Any]) -> Optional[str]:
    """The platform stack's directory and monitoring follow every stack's tenants: say when its last `up` predates ours."""
    listed = set((outputs.get("tenantStacks") or {}).get(config.stack, []))
    missing = [t.name for t in config.own_tenants if t.name not in listed]
    if not missing:
        return None
    return (
        f"the platform stack {config.platform_stack} does not list tenants {', '.join(missing)} yet: their researchers' logins "
        f"(LDAP) and their rows in the dashboards, rules and report come with `pulumi up --stack {config.platform_stack}`"
    )


def platform_outputs_as_filed(config: PlatformConfig) -> dict[str, Any]:
    """The platform stack's outputs a tenant stack reads, as the files say they are: what tools and tests that run the
    program without the platform's state stand in for them."""
    return {**deployed_facts(config), "tenantStacks": tenants_by_stack(config)}

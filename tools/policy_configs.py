"""The policy pack's per-stack config, `policies/config/<stack>.json`, generated.

The platform team's choices (enforcement levels, claim names) are written once
in `policies/settings/<stack>.json`; the facts of the stack (its region and the
account's quota there, its cloud, the size of each node pool) come from
`Pulumi.<stack>.yaml` through the config models, so they are never kept twice,
and a settings file copied from another stack carries none of that stack's facts:
one that sets a fact is refused.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from components import tenancy
from components.config import PROJECT, PlatformConfig, quantity_value
from components.config.parse import parse_stack
from components.config.stacks import read_stack_file, read_stack_files
from components.config.tenants import cell_entries

SETTINGS_DIR = Path("policies/settings")
CONFIG_DIR = Path("policies/config")


def stack_facts(config: PlatformConfig) -> dict[str, dict[str, Any]]:
    """Per policy, the fields the stack config decides."""
    return {
        # No regionQuota: no quota, which the policy reports for the region (the config refuses it in prod).
        "slurm-region-quota": {
            "region": config.region,
            "quotas": {config.region: config.region_quota.policy_quota()} if config.region_quota else {},
        },
        "slurm-worker-node-fit": {
            "nodePools": {
                pool.name: {
                    "cpu": _number(quantity_value(pool.cpu_per_node)),
                    "memoryGi": _number(quantity_value(pool.memory_per_node) / 2**30),
                    "gpus": pool.gpus_per_node,
                    "nodes": pool.node_count,
                }
                for pool in config.node_pools
            }
        },
        "restricted-load-balancers": {"cloud": config.cloud},
        # Where stacks share the cluster, each stack's pack checks its own cells beside the others' on the whole cluster's workers.
        **({"slurm-tenant-cells-fit": cluster_cells(config)} if config.shares_tenants else {}),
        # A tenant stack's namespaces are covered by admission policies its platform stack declares.
        **({"tenant-namespace-hardening": {"platformPolicies": platform_policies(config)}} if config.role == "tenants" else {}),
    }


def platform_policies(config: PlatformConfig) -> list[dict[str, Any]]:
    """The admission policies and bindings the platform stack declares for every tenant namespace, as it renders them."""
    return [r.manifest for r in tenancy.cluster_wide(config) if r.manifest["kind"].startswith("ValidatingAdmissionPolicy")]


def cluster_cells(config: PlatformConfig) -> dict[str, Any]:
    """The Slurm workers of every GPU pool, and the cells of the tenants other stacks declare."""
    own = {t.name for t in config.own_tenants}
    return {
        "workers": {pool.name: {"nodes": pool.worker_replicas, "gpus": pool.gpus_per_node} for pool in config.gpu_pools},
        "otherCells": cell_entries(t for t in config.tenants if t.name not in own),
    }


def _number(value: Any) -> int | float:
    return int(value) if value == int(value) else float(value)


def facts_in_settings(settings: dict[str, Any], facts: dict[str, dict[str, Any]]) -> list[str]:
    """`policy.key` of each fact the settings set: it belongs to the stack config."""
    return [f"{name}.{key}" for name, fields in facts.items() if isinstance(settings.get(name), dict) for key in fields if key in settings[name]]


def policy_config(settings: dict[str, Any], config: PlatformConfig) -> dict[str, Any]:
    """The settings with the stack's facts beside each policy's enforcement level."""
    document = copy.deepcopy(settings)
    for name, facts in stack_facts(config).items():
        entry = document.get(name)
        entry = {"enforcementLevel": entry} if isinstance(entry, str) else dict(entry or {})
        level = {"enforcementLevel": entry.pop("enforcementLevel")} if "enforcementLevel" in entry else {}
        document[name] = {**level, **facts, **{key: value for key, value in entry.items() if key not in facts}}
    return document


def raw_stack_config(root: Path, stack: str) -> dict[str, Any]:
    """The `slurm-platform:*` keys of `Pulumi.<stack>.yaml`, without the prefix."""
    return read_stack_file(root / f"Pulumi.{stack}.yaml").raw


def stack_config(root: Path, stack: str) -> PlatformConfig:
    """Stack `stack`'s config as its `pulumi up` validates it: with the other stacks of its cluster, from their files in `root`."""
    files = read_stack_files(root)
    return parse_stack(stack, files[stack], files)


def render(root: Path, stack: str) -> str:
    path = SETTINGS_DIR / f"{stack}.json"
    settings = json.loads((root / path).read_text())
    config = stack_config(root, stack)
    if misplaced := facts_in_settings(settings, stack_facts(config)):
        raise ValueError(
            f"{path} sets {', '.join(misplaced)}, which {PROJECT} takes from Pulumi.{stack}.yaml "
            f"(region, regionQuota, cloud, nodePools); delete {'them' if len(misplaced) > 1 else 'it'} from {path} "
            f"and declare the stack's own values there (e.g. {PROJECT}:regionQuota from the cloud console)"
        )
    return json.dumps(policy_config(settings, config), indent=2) + "\n"


def stacks(root: Path) -> list[str]:
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in root.glob("Pulumi.*.yaml"))

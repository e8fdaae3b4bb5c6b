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

import yaml

from components.config import PROJECT, PlatformConfig, parse_config, quantity_value

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
    document = yaml.safe_load((root / f"Pulumi.{stack}.yaml").read_text()) or {}
    return {key.split(":", 1)[1]: value for key, value in (document.get("config") or {}).items() if key.startswith(f"{PROJECT}:")}


def render(root: Path, stack: str) -> str:
    path = SETTINGS_DIR / f"{stack}.json"
    settings = json.loads((root / path).read_text())
    config = parse_config(raw_stack_config(root, stack), stack=stack)
    if misplaced := facts_in_settings(settings, stack_facts(config)):
        raise ValueError(
            f"{path} sets {', '.join(misplaced)}, which {PROJECT} takes from Pulumi.{stack}.yaml "
            f"(region, regionQuota, cloud, nodePools); delete {'them' if len(misplaced) > 1 else 'it'} from {path} "
            f"and declare the stack's own values there (e.g. {PROJECT}:regionQuota from the cloud console)"
        )
    return json.dumps(policy_config(settings, config), indent=2) + "\n"


def stacks(root: Path) -> list[str]:
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in root.glob("Pulumi.*.yaml"))

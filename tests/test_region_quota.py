"""Region quotas are the stack's: `slurm-platform:regionQuota` in `Pulumi.<stack>.yaml`, which
`make schema` writes into the policy pack's config. A settings file copied from another stack
carries none of that stack's quota, and a production stack without a quota is refused."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
import yaml

from components.config import ConfigError, parse_config
from tests.harness import ROOT, example_stacks, stack_config
from tools import policy_configs

QUOTA_POLICY = "slurm-region-quota"


def generated_quotas(root: Path, stack: str) -> dict:
    return json.loads(policy_configs.render(root, stack))[QUOTA_POLICY]


def new_stack(root: Path, name: str, stack_file_from: str, settings_from: str) -> None:
    """A user's new stack: one example's stack file, and another example's policy settings copied beside it."""
    (root / "policies" / "settings").mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / f"Pulumi.{stack_file_from}.yaml", root / f"Pulumi.{name}.yaml")
    shutil.copy(ROOT / "policies" / "settings" / f"{settings_from}.json", root / "policies" / "settings" / f"{name}.json")


@pytest.mark.parametrize("stack", example_stacks())
def test_each_stack_is_checked_against_its_own_declared_quota(stack):
    config = parse_config(stack_config(stack))
    assert config.region_quota is not None, f"{stack} declares no regionQuota"
    quota = generated_quotas(ROOT, stack)
    assert quota["region"] == config.region
    assert quota["quotas"] == {config.region: config.region_quota.policy_quota()}
    assert set(quota["quotas"][config.region]) == {"vcpu", "memoryGi", "gpus", "storageGi", "loadBalancers", "pvcs"}


def test_hanois_settings_copied_to_a_hangzhou_stack_do_not_carry_hanois_quota(tmp_path):
    # README's step: copy prod-hanoi's settings for a new stack, here one in cn-hangzhou.
    new_stack(tmp_path, "hpc-hangzhou", stack_file_from="prod-hangzhou", settings_from="prod-hanoi")
    hangzhou = parse_config(stack_config("prod-hangzhou")).region_quota
    hanoi = parse_config(stack_config("prod-hanoi")).region_quota
    assert hangzhou and hanoi and hangzhou != hanoi
    assert generated_quotas(tmp_path, "hpc-hangzhou")["quotas"] == {"cn-hangzhou": hangzhou.policy_quota()}


def test_a_stack_whose_quota_differs_in_the_same_region_gets_its_own_numbers(tmp_path):
    # staging-hanoi and prod-hanoi share region hanoi, on accounts of different sizes.
    new_stack(tmp_path, "lab-hanoi", stack_file_from="prod-hanoi", settings_from="prod-hanoi")
    path = tmp_path / "Pulumi.lab-hanoi.yaml"
    document = yaml.safe_load(path.read_text())
    document["config"]["slurm-platform:regionQuota"] = {"vcpu": 2000, "gpus": 128}
    path.write_text(yaml.safe_dump(document))
    assert generated_quotas(tmp_path, "lab-hanoi")["quotas"] == {"hanoi": {"vcpu": 2000, "gpus": 128}}


def test_make_schema_refuses_a_settings_file_that_still_holds_quotas(tmp_path):
    # A settings file of an older checkout, quotas and all: refused, not silently replaced.
    new_stack(tmp_path, "hpc-hangzhou", stack_file_from="prod-hangzhou", settings_from="prod-hanoi")
    path = tmp_path / "policies" / "settings" / "hpc-hangzhou.json"
    settings = json.loads(path.read_text())
    settings[QUOTA_POLICY]["quotas"] = {"hanoi": {"vcpu": 1440}}
    path.write_text(json.dumps(settings))
    with pytest.raises(ValueError) as refused:
        policy_configs.render(tmp_path, "hpc-hangzhou")
    assert str(refused.value).startswith("policies/settings/hpc-hangzhou.json sets slurm-region-quota.quotas, which slurm-platform takes from")
    assert "slurm-platform:regionQuota" in str(refused.value)


def test_a_stack_without_a_quota_is_refused_in_production_and_reported_by_the_policy_elsewhere(tmp_path):
    raw = copy.deepcopy(stack_config("prod-hangzhou"))
    del raw["regionQuota"]
    with pytest.raises(ConfigError) as refused:
        parse_config(raw)
    assert "slurm-platform:regionQuota: is required in production" in str(refused.value)
    assert "region 'cn-hangzhou'" in str(refused.value)
    # Elsewhere the generated config names the region with no quota, which the policy reports (tests/test_policies.py).
    staging = copy.deepcopy(stack_config("staging-hangzhou"))
    del staging["regionQuota"]
    facts = policy_configs.stack_facts(parse_config(staging))[QUOTA_POLICY]
    assert facts == {"region": "cn-hangzhou", "quotas": {}}


def test_the_quota_takes_only_the_policys_dimensions():
    raw = {**stack_config("dev"), "regionQuota": {"vcpu": 8, "cpus": 8}}
    with pytest.raises(ConfigError) as refused:
        parse_config(raw)
    assert "slurm-platform:regionQuota.cpus" in str(refused.value)

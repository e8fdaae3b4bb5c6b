"""The policy pack as a publishable unit: it stands alone (own requirements,
version, virtualenv), and every per-stack policy config file is valid against
the pack's own config schema, strictly (an unknown policy or key is an error,
which the CLI would silently ignore)."""

from __future__ import annotations

import ast
import json
import re
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from pulumi_policy import EnforcementLevel

from components.config import parse_config
from tests.harness import ROOT, example_stacks, stack_config

PACK = ROOT / "policies"
sys.path.insert(0, str(PACK))

from slurm_policies import ALL_POLICIES  # noqa: E402

LEVELS = sorted(level.value for level in EnforcementLevel)


def pack_config_schema() -> dict[str, Any]:
    """What `--policy-pack-config` accepts for this pack: per policy a level, or its config object."""
    policies: dict[str, Any] = {}
    for policy in ALL_POLICIES:
        schema = policy.config_schema
        properties = {"enforcementLevel": {"enum": LEVELS}, **(schema.properties if schema else {})}
        config_object = {
            "type": "object",
            "properties": properties,
            "required": list(schema.required or []) if schema else [],
            "additionalProperties": False,
        }
        policies[policy.name] = {"anyOf": [{"enum": LEVELS}, config_object]}
    return {"type": "object", "properties": {"all": {"enum": LEVELS}, **policies}, "additionalProperties": False}


def config_errors(document: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft7Validator(pack_config_schema())
    return [f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in validator.iter_errors(document)]


def policy_config(stack: str) -> dict[str, Any]:
    return json.loads((PACK / "config" / f"{stack}.json").read_text())


@pytest.mark.parametrize("stack", example_stacks())
def test_every_stack_policy_config_is_valid_against_the_pack(stack):
    assert config_errors(policy_config(stack)) == []


def test_the_pack_schema_catches_misspelt_policies_keys_and_levels():
    document = policy_config("prod-hanoi")
    document["slurm-region-qouta"] = "mandatory"
    document["slurm-data-volume-shape"]["minJailSise"] = "40Gi"
    document["pinned-chart-versions"]["enforcementLevel"] = "required"
    errors = "\n".join(config_errors(document))
    assert "'slurm-region-qouta' was unexpected" in errors
    assert "slurm-data-volume-shape" in errors
    assert "pinned-chart-versions" in errors
    assert len(config_errors(document)) == 3


def test_the_pack_stands_alone_with_its_own_requirements_version_and_virtualenv():
    project = yaml.safe_load((PACK / "PulumiPolicy.yaml").read_text())
    assert re.fullmatch(r"\d+\.\d+\.\d+", project["version"])
    assert project["runtime"]["name"] == "python"
    assert project["runtime"]["options"]["virtualenv"] == "venv"  # inside the pack, as published
    pins = dict(line.split("==") for line in (PACK / "requirements.txt").read_text().splitlines() if line.strip() and not line.startswith("#"))
    assert pins["pulumi-policy"] == metadata.version("pulumi-policy")
    assert pins["pulumi"] == metadata.version("pulumi")


def imported_modules(path: Path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module.split(".")[0])
    return modules


def test_the_pack_imports_nothing_outside_itself_but_pulumi_policy():
    sources = [PACK / "__main__.py", *sorted((PACK / "slurm_rules").glob("*.py")), *sorted((PACK / "slurm_policies").glob("*.py"))]
    assert len(sources) > 4
    # slurm_rules is the pack's own package; pulumi and kubernetes are in policies/requirements.txt.
    installed = {"pulumi_policy", "pulumi", "kubernetes", "slurm_policies", "slurm_rules"}
    for source in sources:
        foreign = imported_modules(source) - set(sys.stdlib_module_names) - installed
        assert not foreign, f"{source.relative_to(ROOT)} imports {sorted(foreign)}, which policies/requirements.txt does not install"


@pytest.mark.parametrize("stack", example_stacks())
def test_each_policy_config_mirrors_its_stacks_exposure_keys(stack):
    """The pack cannot read the stack config: its cloud and opt-outs must say the same."""
    config = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]
    login = (config.get("slurm-platform:slurm") or {}).get("login", {})
    policy = json.loads((ROOT / "policies" / "config" / f"{stack}.json").read_text())["restricted-load-balancers"]
    assert policy["cloud"] == parse_config(stack_config(stack)).cloud  # set, or inferred as the program does
    assert policy["allowBroadSourceRanges"] == login.get("allowBroadSourceRanges", False)
    assert policy["nodePortsFirewalled"] == login.get("nodePortsFirewalled", False)

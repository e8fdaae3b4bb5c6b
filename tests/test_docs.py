"""The configuration reference (docs/configuration.md, `make docs`) is what the config models say:
generated, current, every key described, and every section's example accepted by the loader."""

from __future__ import annotations

from typing import Optional

import pytest
import yaml
from pydantic import Field

from components.config import PROJECT, ConfigError, PlatformConfig, parse_config
from components.config.fields import DnsLabel, Model
from components.slurm import slinky, soperator
from tests.harness import ROOT, stack_config
from tools import docs
from tools.docs import EXAMPLES, STACK_SECTION, Schema, keys, render, sections


def test_the_configuration_reference_is_generated_and_current():
    page = (ROOT / docs.PAGE).read_text()
    assert render(page) == page, "run `make docs` and commit docs/configuration.md"


def test_a_stale_reference_is_caught():
    page = (ROOT / docs.PAGE).read_text()
    stale = page.replace("| `cluster.name` | string | `fpt-hpc` |", "| `cluster.name` | string | `hpc` |")
    assert stale != page
    assert render(stale) == page


def undocumented(found: list[docs.Key]) -> list[str]:
    return [key.path for key in found if not key.description.strip()]


def test_every_key_has_a_type_and_a_description():
    found = [key for _, section_keys in sections() for key in section_keys]
    assert len(found) > 250  # every key of the model tree, not a sample
    assert undocumented(found) == [], "give these fields a description (Field(description=...)) or their model a docstring"
    assert [key.path for key in found if key.type in ("", "any")] == []
    paths = {key.path for key in found}
    for expected in ("cluster.name", "nodePools[].taints[].effect", "slurm.login.allowedSourceRanges", "tenants[].cells[].gpusPerCell"):
        assert expected in paths


def test_the_description_check_finds_a_key_without_one():
    class Inner(Model):
        documented: int = Field(1, description="Described.")
        bare: Optional[DnsLabel] = None

    class Outer(Model):
        inner: Inner = Inner()

    schema = Schema(Outer.model_json_schema(by_alias=True))
    found = keys(schema, schema.root, "")
    assert undocumented(found) == ["inner", "inner.bare"]
    bare = next(key for key in found if key.path == "inner.bare")
    assert (bare.type, bare.default) == ("string", "unset")
    assert bare.allowed.startswith("a DNS-1123 label")


def test_allowed_values_and_defaults_come_from_the_model():
    found = {key.path: key for _, section_keys in sections() for key in section_keys}
    assert found["environment"].allowed == "`local`, `dev`, `staging`, `prod`"
    assert found["environment"].default == "`dev`"
    assert found["nodePools[].gpusPerNode"].allowed == "≥ 0; ≤ 16"
    assert found["storage.jail.size"].allowed == "bytes with a unit (64Gi, 500Mi, 1T), 40Gi to 100Pi"
    assert found["nodePools"].default == "below the table" and found["nodePools"].long_default[0]["name"] == "gpu"
    assert found["tenants"].default == "`[]`"
    assert found["slurm.ack"].default == "unset; its keys below"
    assert found["nodePools[].name"].default == "required"
    selector = found["nodePools[].selector"]
    assert selector.type == "map of string to string" and selector.allowed.startswith("keys: a Kubernetes qualified name")


def test_a_map_with_a_key_pattern_is_typed_and_its_keys_and_values_listed():
    schema = Schema({"patternProperties": {"^[a-z]+$": {"type": "string", "x-allowed": "text"}}, "type": "object"})
    assert schema.type_name(schema.root) == "map of string to string"
    assert schema.allowed(schema.root) == "keys: matches `^[a-z]+$`; values: text"


@pytest.mark.parametrize("section", [name for name, _ in sections()])
def test_each_section_has_an_example_the_config_loader_accepts(section):
    document = yaml.safe_load(EXAMPLES[section])
    assert all(key.startswith(f"{PROJECT}:") for key in document), document
    raw = {key.split(":", 1)[1]: value for key, value in document.items()}
    section_keys = dict(sections())[section]
    shown = [key.path for key in section_keys if key.path in raw] if section == STACK_SECTION else [section] if section in raw else []
    assert shown, f"the example of {section} sets none of its keys"
    if section == STACK_SECTION:
        assert sorted(shown) == sorted(key.path for key in section_keys)
    parse_config(raw)  # raises ConfigError naming the key if the example is wrong


def test_an_example_that_rots_fails():
    with pytest.raises(ConfigError, match="cluster.name"):
        parse_config(yaml.safe_load(EXAMPLES["cluster"].replace("slurm-platform:", "").replace("hpc-hanoi", "Hpc_Hanoi")))


def test_every_section_has_exactly_one_example():
    assert sorted(EXAMPLES) == sorted(name for name, _ in sections())


def section(page: str, heading: str) -> str:
    text = (ROOT / page).read_text()
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def soperator_database(config: PlatformConfig) -> str:
    selector = soperator.pod_roles(config, "worker", False).database
    assert selector is not None, "the stack's accounting is not on the MariaDB operator"
    return selector["matchLabels"]["app.kubernetes.io/instance"]


@pytest.mark.parametrize(
    ("stack", "database"),
    [("prod-hanoi", soperator_database), ("prod-hcm", lambda config: slinky.names(config)["mariadb"])],
    ids=["soperator", "slinky"],
)
def test_the_accounting_backup_command_names_the_database_the_program_renders(stack, database):
    """docs/operations.md's backup: a command per operator, on the MariaDB object that operator's stack gets."""
    backup = section("docs/operations.md", "Backing up the accounting database")
    config = parse_config(stack_config(stack))
    name = database(config).replace(config.cluster.name, "<cluster>", 1)
    assert f"db={name}" in backup, f"docs/operations.md's backup names no MariaDB {name}"
    assert "mariadb-dump" in backup and 'kubectl -n "$ns" exec -i "statefulset/$db" -c mariadb' in backup
    assert "](#backing-up-the-accounting-database)" in section("docs/operations.md", "Upgrading soperator 1.14.10 to 4.1.7")

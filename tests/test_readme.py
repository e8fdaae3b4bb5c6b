"""The README's and the docs pages' tables say what the code does: components and
their type tokens, policy rules and their enforcement levels per stack, stack
outputs, the test inventory and the size of the bad-config corpus are derived
from the code here, so the prose cannot drift from it again. Each fact is checked
on the one page that gives it."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
from pathlib import Path

import pulumi
import pytest

import components
from components.config import parse_config
from components.platform import build_platform
from slurm_policies import ALL_POLICIES
from tests.harness import ROOT, example_stacks, run_under_mocks, stack_config
from tests.test_bad_config import CORPUS, UNKNOWN_TOP_LEVEL

README = ROOT / "README.md"
DOCS = ROOT / "docs"
LAYOUT = DOCS / "testing.md"  # the code's layout, the component table, the test inventory
SECURITY = DOCS / "security.md"  # the policy pack's rule table
CONFIGURATION = DOCS / "configuration.md"  # the stack outputs table
POLICIES_README = ROOT / "policies" / "README.md"


def table_after(text: str, header: str) -> list[list[str]]:
    """The rows (cells stripped) of the first Markdown table whose header row starts with `header`."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(header)), None)
    assert start is not None, f"no table with header {header!r}"
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    assert rows, f"the table under {header!r} is empty"
    return rows


def code_names(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def component_classes() -> dict[str, tuple[str, str]]:
    """Every ComponentResource class under components/: name -> (type token, module file)."""
    found = {}
    for module_info in pkgutil.walk_packages(components.__path__, "components."):
        module = importlib.import_module(module_info.name)
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, pulumi.ComponentResource) and cls.__module__ == module.__name__:
                (token,) = re.findall(r'super\(\).__init__\(\s*"([^"]+)"', inspect.getsource(cls))
                found[name] = (token, Path(inspect.getfile(cls)).relative_to(ROOT).as_posix())
    return found


def test_the_component_table_lists_every_component_with_its_type_token_and_module():
    rows = table_after(LAYOUT.read_text(), "| component | type token | module |")
    documented = {code_names(row[0])[0]: (code_names(row[1])[0], code_names(row[2])[0]) for row in rows}
    classes = component_classes()
    assert len(classes) >= 7, classes
    assert documented == classes


def test_the_deployment_diagram_names_every_component():
    text = README.read_text()
    diagram = text.split("## What gets deployed", 1)[1].split("```", 2)[1]
    classes = component_classes()
    missing = [name for name in classes if not re.search(rf"^\s*{name} ─", diagram, re.MULTILINE)]
    assert classes and missing == []


def effective_level(stack: str, policy_name: str, default: str) -> str:
    """What the engine enforces: the policy's own setting, else the pack config's `all`, else the rule's default."""
    config = json.loads((ROOT / "policies" / "config" / f"{stack}.json").read_text())
    own = config.get(policy_name)
    if isinstance(own, dict) and "enforcementLevel" in own:
        return own["enforcementLevel"]
    if isinstance(own, str):
        return own
    return config.get("all", default)


def stacks_of(column: str) -> list[str]:
    """The example stacks a README column speaks for: `dev / local`, or `prod` (prod-* and staging-*)."""
    prefixes = ("dev", "local", "kwok") if column.startswith("dev") else ("prod-", "staging-")
    stacks = [s for s in example_stacks() if s.startswith(prefixes)]
    assert stacks, column
    return stacks


@pytest.mark.parametrize("readme,header", [(SECURITY, "| rule | checks |"), (POLICIES_README, "| Policy | dev / local |")])
def test_the_policy_tables_list_every_rule_with_the_level_each_stack_enforces(readme, header):
    text = readme.read_text()
    rows = table_after(text, header)
    header_cells = [c.strip() for c in next(line for line in text.splitlines() if line.startswith(header)).strip("|").split("|")]
    level_columns = [i for i, cell in enumerate(header_cells) if cell.startswith(("dev", "prod"))]
    assert len(level_columns) == 2, header_cells
    defaults = {policy.name: policy.enforcement_level.value for policy in ALL_POLICIES if policy.enforcement_level}
    assert len(defaults) == len(ALL_POLICIES), "every rule declares its default level"
    documented = {code_names(row[0])[0]: row for row in rows}
    assert sorted(documented) == sorted(defaults), "the table's rules are not the pack's"
    wrong = []
    for name, row in documented.items():
        for column in level_columns:
            for stack in stacks_of(header_cells[column]):
                actual = effective_level(stack, name, defaults[name])
                if row[column] != actual:
                    wrong.append(f"{name} [{header_cells[column]}]: README says {row[column]!r}, {stack} enforces {actual!r}")
    assert wrong == []


def stack_outputs(stack: str) -> set[str]:
    raw = stack_config(stack)
    config = parse_config(raw)
    return set(run_under_mocks(lambda: build_platform(config), raw, stack=stack).outputs)


def test_the_outputs_table_lists_exactly_what_the_stacks_export():
    rows = table_after(CONFIGURATION.read_text(), "| output | example |")
    documented = {name for row in rows for name in code_names(row[0])}
    exported = set().union(*(stack_outputs(stack) for stack in example_stacks()))
    assert "tenants" in exported and "sshCommand" in exported, exported
    assert documented == exported


def test_the_test_inventory_names_every_test_file_and_no_other():
    inventory = LAYOUT.read_text().split("## Tests and benchmarks", 1)[1]
    named = set(re.findall(r"`(tests/test_[a-z0-9_]+\.py)`", inventory))
    present = {p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").glob("test_*.py")}
    assert len(present) > 20
    assert named == present


def test_the_bad_config_corpus_size_is_the_one_the_readme_gives():
    (count,) = re.findall(r"`tests/test_bad_config.py`: (\d+) one-mistake stack configs", LAYOUT.read_text())
    assert int(count) == len(CORPUS) + len(UNKNOWN_TOP_LEVEL)

"""The table of which Slurm operator reads which key (components/config/operator_keys.py) is true: a key it says an
operator reads changes what the program declares for that operator, and one it says the operator ignores is refused,
naming the operator."""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable
from typing import Any, Union

import pytest

from components.config import PROJECT, ConfigError, parse_config
from components.config.operator_keys import READ_BY, READERS, SOPERATOR_1
from components.config.soperator import image_tag
from components.platform import build_platform
from tests.harness import ROOT, run_under_mocks, stack_config

# An example stack of each operator that installs its charts.
BASES = {SOPERATOR_1: "prod-hanoi", "soperator 4.1.7": "staging-hanoi", "ack": "staging-hangzhou", "slinky": "prod-hcm"}

# For each entry of the table: a key under it and a value that differs from the example stacks'.
Value = Union[Any, Callable[[Any], Any]]
CHANGES: dict[tuple[str, ...], tuple[str, Value]] = {
    ("slurm", "images", "registry"): ("slurm.images.registry", "registry.example.com/soperator"),
    ("slurm", "images", "tag"): ("slurm.images.tag", lambda config: image_tag(config) + "-r1"),
    ("slurm", "images", "mariadb"): ("slurm.images.mariadb", "docker-registry1.mariadb.com/library/mariadb:11.4.4"),
    ("slurm", "controller", "size"): ("slurm.controller.size", 2),
    ("slurm", "controller", "munge"): ("slurm.controller.munge.cpu", "1500m"),
    ("slurm", "worker", "size"): ("slurm.worker.size", 1),
    ("slurm", "worker", "munge"): ("slurm.worker.munge.cpu", "1500m"),
    ("slurm", "worker", "spoolStorageClassName"): ("slurm.worker.spoolStorageClassName", "other-class"),
    ("slurm", "worker", "spoolSize"): ("slurm.worker.spoolSize", "100Gi"),
    ("slurm", "worker", "sharedMemorySize"): ("slurm.worker.sharedMemorySize", "32Gi"),
    ("slurm", "login", "munge"): ("slurm.login.munge.cpu", "600m"),
    ("slurm", "accounting", "storageClassName"): ("slurm.accounting.storageClassName", "other-class"),
    ("slurm", "accounting", "storageSize"): ("slurm.accounting.storageSize", "20Gi"),
    ("slurm", "accounting", "mariadb"): ("slurm.accounting.mariadb.cpu", "1500m"),
    ("slurm", "accounting", "munge"): ("slurm.accounting.munge.cpu", "1500m"),
    ("slurm", "exporter", "enabled"): ("slurm.exporter.enabled", False),
    ("slurm", "exporter", "resources"): ("slurm.exporter.resources.cpu", "300m"),
    ("slurm", "exporter", "munge"): ("slurm.exporter.munge.cpu", "1500m"),
    ("slurm", "ncclBenchmark"): ("slurm.ncclBenchmark.schedule", "0 */4 * * *"),
    ("slurm", "populateJail"): ("slurm.populateJail", {"overwrite": True, "wipeExistingJailIntended": True}),
    ("slurm", "ack"): ("slurm.ack.image", "registry.example.com/slurm:23.02.7"),
    ("slurm", "slinky"): ("slurm.slinky.controllerStorageSize", "8Gi"),
    ("storage", "jail"): ("storage.jail.size", "200Gi"),
    ("storage", "controllerSpool"): ("storage.controllerSpool.size", "20Gi"),
    ("operators", "soperator"): ("operators.soperator.namespace", "soperator-elsewhere"),
    ("operators", "ackSlurmOperator"): ("operators.ackSlurmOperator.apiGeneration", "2024-06"),
    ("operators", "slinky"): ("operators.slinky.namespace", "slinky-elsewhere"),
}


def changed(stack: str, path: tuple[str, ...]) -> dict[str, Any]:
    """The stack's config with the key of CHANGES[path] set; a block the file leaves out is first copied from its defaults."""
    raw = copy.deepcopy(stack_config(stack))
    config = parse_config(raw)
    dotted, value = CHANGES[path]
    parts = dotted.split(".")
    node: dict[str, Any] = raw
    defaults: Any = config.model_dump(by_alias=True, mode="json")
    for depth, part in enumerate(parts[:-1]):
        defaults = (defaults or {}).get(part)
        # A container's requests are given whole (cpu, memory, ephemeralStorage are each required).
        whole = depth == len(parts) - 2 and isinstance(defaults, dict) and "ephemeralStorage" in defaults
        node = node.setdefault(part, copy.deepcopy(defaults) if whole else {})
    node[parts[-1]] = value(config) if callable(value) else value
    return raw


def declared(stack: str, raw: dict[str, Any]) -> str:
    """Everything the program declares and exports for `raw`, in a stable order."""
    config = parse_config(raw)
    run = run_under_mocks(lambda: build_platform(config), raw, stack=stack)
    resources = [
        [r.type, r.name, r.inputs, r.custom_timeouts, r.protect, r.import_id, r.ignore_changes, r.read]
        for r in sorted(run.resources, key=lambda r: (r.type, r.name))
    ]
    return json.dumps([resources, run.outputs], sort_keys=True, default=str)


@functools.cache
def declared_by_base(operator: str) -> str:
    return declared(BASES[operator], stack_config(BASES[operator]))


def test_every_entry_of_the_table_has_a_change_and_every_change_an_entry():
    assert set(CHANGES) == set(READ_BY)


READ = [(path, operator) for path, read_by in READ_BY.items() for operator in READERS if operator in read_by.operators]
IGNORED = [(path, operator) for path, read_by in READ_BY.items() for operator in READERS if operator not in read_by.operators]


@pytest.mark.parametrize(("path", "operator"), READ, ids=[f"{'.'.join(p)}-{o}" for p, o in READ])
def test_a_key_the_table_says_an_operator_reads_changes_what_it_declares(path, operator):
    stack = BASES[operator]
    assert declared(stack, changed(stack, path)) != declared_by_base(operator)


@pytest.mark.parametrize(("path", "operator"), IGNORED, ids=[f"{'.'.join(p)}-{o}" for p, o in IGNORED])
def test_a_key_the_table_says_an_operator_ignores_is_refused_naming_the_operator(path, operator):
    with pytest.raises(ConfigError) as error:
        parse_config(changed(BASES[operator], path))
    dotted = ".".join(path)
    lines = [line.strip() for line in str(error.value).splitlines()[1:] if line.strip().startswith(f"{PROJECT}:{dotted}")]
    assert lines, str(error.value)
    # Refused by the table, or by a rule of that operator's about the same key (a value it cannot take).
    assert any(f"slurmOperator {operator} never reads it" in line or "must be" in line for line in lines), lines


def test_the_table_found_keys_each_operator_ignores():
    assert {operator for _, operator in IGNORED} == set(READERS)


def test_a_key_set_to_nothing_new_is_still_refused_and_says_what_to_use_instead():
    """A key counts as set when the stack file gives it, even at its default: slurm.worker.size on soperator 4.1.7."""
    raw = copy.deepcopy(stack_config("staging-hanoi"))
    raw.setdefault("slurm", {}).setdefault("worker", {})["size"] = 8
    with pytest.raises(ConfigError) as error:
        parse_config(raw)
    assert "slurm.worker.size: is read by soperator 1.14.10 only; slurmOperator soperator 4.1.7 never reads it" in str(error.value)
    assert "nodePools[].slurmWorkers" in str(error.value)


def test_the_operator_being_left_keeps_its_keys_during_a_switch():
    """An acknowledged switch keeps the old operator's volumes: its storage keys stay read."""
    raw = copy.deepcopy(stack_config("prod-hcm"))
    raw.setdefault("storage", {})["jail"] = {"size": "200Gi"}
    raw["slurm"]["operatorSwitch"] = {"from": "soperator", "acknowledged": True}
    assert parse_config(raw).storage.jail.size == "200Gi"


def test_a_key_the_table_says_an_operator_ignores_changes_nothing_it_declares(monkeypatch):
    """The other half of the table's truth: with the refusal lifted, the key leaves the operator's objects as they were."""
    monkeypatch.setattr("components.config.parse.unread_key_problems", lambda config, raw: iter(()))
    checked = []
    for path, operator in IGNORED:
        stack = BASES[operator]
        try:
            raw = changed(stack, path)
            parse_config(raw)
        except ConfigError:
            continue  # a rule of that operator's refuses the value itself (slurm.controller.size on ACK)
        assert declared(stack, raw) == declared_by_base(operator), (path, operator)
        checked.append((path, operator))
    assert len(checked) > len(IGNORED) / 2, checked


def test_the_reference_shows_which_operators_read_each_key():
    from tools.docs import PAGE

    reference = [line.split(" | ") for line in (ROOT / PAGE).read_text().splitlines() if line.startswith("| `")]
    rows = {cells[0].strip("| `"): cells[4] for cells in reference if len(cells) >= 6}
    for path, entry in READ_BY.items():
        assert rows[".".join(path)] == ", ".join(name for name in READERS if name in entry.operators), path
    assert rows["slurm.ack.image"] == "ack" and rows["cluster.name"] == "every operator"


def test_a_chart_of_another_operator_may_say_it_is_not_installed_but_nothing_more():
    """prod-hcm (Slinky) writes operators.soperator.install: false, which is true anyway; install: true would not be."""
    raw = stack_config("prod-hcm")
    assert raw["operators"]["soperator"] == {"install": False}
    parse_config(raw)
    raw["operators"]["soperator"] = {"install": True}
    with pytest.raises(ConfigError, match=r"operators\.soperator: is read by soperator 1\.14\.10 and soperator 4\.1\.7 only; slurmOperator slinky"):
        parse_config(raw)


def test_a_key_of_the_operator_a_stack_leaves_points_to_the_switch():
    """Dropping the old operator's keys would change its kept volumes once the switch is acknowledged: the refusal says so."""
    raw = {**stack_config("prod-hanoi"), "slurmOperator": "slinky"}
    with pytest.raises(ConfigError) as error:
        parse_config(raw)
    (line,) = [line for line in str(error.value).splitlines() if line.strip().startswith(f"{PROJECT}:storage.jail:")]
    assert (
        "if this stack ran soperator until now, keep it and acknowledge the switch with slurm.operatorSwitch: {from: soperator, acknowledged: true}"
        in line
    )
    raw["slurm"] = {**raw["slurm"], "operatorSwitch": {"from": "soperator", "acknowledged": True}}
    assert parse_config(raw).storage.jail.size == "2Ti"

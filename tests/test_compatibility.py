"""Stack files written before the Slurm operator became a choice keep working
unchanged: the same resources (URNs), the same inputs, the same options."""

import json

import pytest

from tests.snapshot import golden_path, golden_stacks, snapshot


def test_every_golden_stack_still_exists():
    assert golden_stacks() == ["dev", "local", "prod-hangzhou", "prod-hanoi"]


@pytest.mark.parametrize("stack", golden_stacks())
def test_stack_registers_exactly_what_it_did(stack):
    before = json.loads(golden_path(stack).read_text())
    after = snapshot(stack)
    assert sorted(after) == sorted(before), "URNs added or removed"
    changed = [urn for urn in before if after[urn] != before[urn]]
    assert changed == [], f"inputs/options changed: {changed}"

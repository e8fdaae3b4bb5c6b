"""The program's cost grows with the tenants, not their square (issue 40): under the SDK's mocks, each resource
declares a number of dependencies that does not grow with the tenants, and none waits for a list that does.

The SDK checks each declared dependency for a cycle by walking what it depends on (pulumi/runtime/
resource_cycle_breaker.py); a dependency on a component is one on each of its children. Counted, not timed:
benchmarks/scale.py gives the seconds."""

from __future__ import annotations

import pytest

from components.config import parse_config
from components.platform import build_platform
from tests.harness import Run, run_under_mocks
from tests.scale import scaled_config


@pytest.fixture(scope="module")
def runs() -> dict[int, Run]:
    def run(tenants: int) -> Run:
        raw = scaled_config(tenants)
        config = parse_config(raw)
        return run_under_mocks(lambda: build_platform(config), raw, stack="prod-scale")

    return {tenants: run(tenants) for tenants in (40, 160)}


def test_dependencies_per_resource_do_not_grow_with_the_tenants(runs):
    per_resource = {tenants: sum(len(r.dependencies) for r in run.resources) / len(run.resources) for tenants, run in runs.items()}
    assert len(runs[160].resources) > 3 * len(runs[40].resources)  # the tenants' objects are most of the stack
    assert per_resource[160] <= 1.25 * per_resource[40], per_resource


def test_no_resource_waits_for_a_list_that_grows_with_the_tenants(runs):
    most = {tenants: max(len(r.dependencies) for r in run.resources) for tenants, run in runs.items()}
    assert most[160] == most[40], most

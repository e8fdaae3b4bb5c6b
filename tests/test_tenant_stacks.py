"""A platform stack and tenant stacks (tenantStack) sharing one cluster: each stack validates the whole cluster
from every stack's file before it registers anything, and declares only its own tenants' objects; the platform
stack declares what holds for every tenant (components/config/stacks.py, components/tenant_stacks.py)."""

from __future__ import annotations

import copy
import json
import runpy
from pathlib import Path
from typing import Any, Optional

import pulumi
import pytest
import yaml

from components import tenancy
from components.config import PROJECT, ConfigError, PlatformConfig
from components.config.parse import parse_stack
from components.config.stacks import StackFile, read_stack_files
from components.platform import build_platform
from components.tenant_stacks import deployed_facts, platform_outputs_as_filed
from slurm_policies.tenancy import TENANT_ADMISSION_POLICIES
from tests.harness import ROOT, Run, run_under_mocks
from tests.scale import GPUS_PER_NODE, scaled_config, tenant
from tests.test_policies import CONFIG_MAP, as_policy_resource, check
from tools.policy_configs import cluster_cells, stack_facts
from tools.preflight import stack_needs

PLATFORM = "prod-uni"
# Stack -> the indices of tests/scale.py's tenants it lists.
LAYOUT = {PLATFORM: range(0, 2), "faculty-a": range(2, 5), "faculty-b": range(5, 8)}
# What holds for every tenant: the platform stack's alone.
CLUSTER_WIDE = {
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "PriorityClass",
    "ResourceFlavor",
    "Topology",
    "WorkloadPriorityClass",
}
# What each stack declares per tenant of its own.
PER_TENANT = {"Namespace", "ResourceQuota", "LimitRange", "Role", "RoleBinding", "ClusterQueue", "LocalQueue"}


def write_stack(directory: Path, stack: str, config: dict[str, Any]) -> None:
    document = {"config": {f"{PROJECT}:{key}": value for key, value in config.items()}}
    (directory / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(document, allow_unicode=True))


def write_cluster(directory: Path, layout: dict[str, range] = LAYOUT, extra: int = 0) -> dict[str, Any]:
    """The platform stack's file (tests/scale.py's shape) and a file per tenant stack; `extra` more tenants in faculty-a."""
    platform = scaled_config(8)
    platform.pop("tenants")
    for stack, indices in layout.items():
        tenants = [tenant(i) for i in indices] + ([tenant(100 + i) for i in range(extra)] if stack == "faculty-a" else [])
        write_stack(
            directory,
            stack,
            {**platform, "tenants": tenants} if stack == PLATFORM else {"tenantStack": {"platform": PLATFORM}, "tenants": tenants},
        )
    return platform


def load(directory: Path, stack: str) -> PlatformConfig:
    files = read_stack_files(directory)
    return parse_stack(stack, files[stack], files)


def refusal_of(directory: Path, stack: str, own: Optional[dict[str, Any]] = None) -> str:
    files = read_stack_files(directory)
    with pytest.raises(ConfigError) as error:
        parse_stack(stack, StackFile(stack, own, frozenset()) if own is not None else files[stack], files)
    return str(error.value)


def run_stack(config: PlatformConfig, platform_outputs: Optional[dict[str, Any]] = None) -> Run:
    outputs = platform_outputs_as_filed(config) if platform_outputs is None else platform_outputs
    return run_under_mocks(lambda: build_platform(config), stack=config.stack, previous_outputs=outputs)


def kinds(run: Run) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for r in run.kubernetes_objects():
        found.setdefault(r.type.rsplit(":", 1)[-1], []).append(r.inputs["metadata"]["name"])
    return found


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> dict[str, Run]:
    directory = tmp_path_factory.mktemp("cluster")
    write_cluster(directory)
    return {stack: run_stack(load(directory, stack)) for stack in LAYOUT}


def test_every_stack_sees_the_whole_cluster_and_names_its_own_tenants(tmp_path):
    write_cluster(tmp_path)
    every = [f"team-{i:03d}" for i in range(8)]
    for stack, indices in LAYOUT.items():
        config = load(tmp_path, stack)
        # The same tenants in the same order in every stack, so that every stack packs the cells alike.
        assert [t.name for t in config.tenants] == every
        assert [t.name for t in config.own_tenants] == [f"team-{i:03d}" for i in indices]
        assert config.role == ("platform" if stack == PLATFORM else "tenants") and config.shares_tenants
    # The whole cluster's tenants, field for field the same from every stack.
    assert len({json.dumps([t.model_dump(mode="json") for t in load(tmp_path, stack).tenants]) for stack in LAYOUT}) == 1


def test_a_stack_alone_is_as_before(tmp_path):
    platform = scaled_config(8)
    write_stack(tmp_path, PLATFORM, platform)
    config = load(tmp_path, PLATFORM)
    assert not config.shares_tenants and config.own_tenants == config.tenants and len(config.tenants) == 8


def test_each_stack_declares_its_own_tenants_and_the_platform_what_holds_for_all(cluster):
    found = {stack: kinds(run) for stack, run in cluster.items()}
    for stack, indices in LAYOUT.items():
        own = {f"team-{i:03d}" for i in indices}
        assert {name for name in found[stack]["Namespace"] if name.startswith("team-")} == own
        # Every tenant namespace's queues (tests/scale.py gives each tenant one).
        assert set(found[stack]["LocalQueue"]) == set(found[stack]["ClusterQueue"]) == own
        if stack == PLATFORM:
            assert found[stack].keys() >= CLUSTER_WIDE and {"SlurmCluster", "StatefulSet"} & found[stack].keys()
        else:
            # Nothing but its tenants' objects, their NetworkPolicies and its own accounts Job.
            assert found[stack].keys() <= PER_TENANT | {"NetworkPolicy", "ConfigMap", "Job"}, found[stack].keys()
            assert found[stack]["ConfigMap"] == [f"fpt-hpc-tenants-{stack}"]
            assert len(found[stack]["Job"]) == 1 and found[stack]["Job"][0].startswith(f"fpt-hpc-tenants-{stack}-")
            assert {name.split("/")[0] for name in cluster[stack].outputs.get("networkPolicies", [])} <= own
            assert set(cluster[stack].outputs["tenants"]) == own
    # No object is declared by two stacks: the same kind, namespace and name.
    keys = [
        (r.type, r.inputs["metadata"].get("namespace", ""), r.inputs["metadata"]["name"])
        for run in cluster.values()
        for r in run.kubernetes_objects()
    ]
    assert len(keys) == len(set(keys))
    # The platform stack lists each tenant stack's tenants, which a tenant stack's preview compares with its own.
    assert cluster[PLATFORM].outputs["tenantStacks"] == {
        "faculty-a": ["team-002", "team-003", "team-004"],
        "faculty-b": ["team-005", "team-006", "team-007"],
    }


def test_every_stack_prints_the_same_capacity_map_of_the_whole_cluster(cluster):
    maps = {stack: run.outputs["capacityMap"] for stack, run in cluster.items()}
    assert len({tuple(lines) for lines in maps.values()}) == 1
    text = "\n".join(maps[PLATFORM])
    # Every tenant's reservation, by the name its own stack's Job gives it.
    assert "reservation cells.h100-0.team-000" in text and "reservation cells.faculty-a.h100-2.team-002" in text
    assert "reservation cells.faculty-b.h100-1.team-005" in text


def script_of(run: Run) -> str:
    config_map = next(
        r for r in run.kubernetes_objects() if r.type.endswith(":ConfigMap") and r.inputs["metadata"]["name"].startswith("fpt-hpc-tenants")
    )
    return config_map.inputs["data"][tenancy.SCRIPT]


def test_a_tenant_stacks_job_applies_its_own_accounts_and_reservations_and_deletes_only_its_own(cluster):
    script = script_of(cluster["faculty-a"])
    for index in range(8):
        name = f"team-{index:03d}"
        mine = index in LAYOUT["faculty-a"]
        assert (f"sacctmgr -i add account {name} " in script) == mine, name
        assert (f"ReservationName=cells.faculty-a.h100-{index % 4}.{name} " in script) == mine, name
    # Its reservations are cells.<stack>.*: it deletes no other stack's (the platform's are cells.<pool>.<tenant>).
    assert "\nRESERVATION_PREFIX=cells.faculty-a.\nOTHER_STACKS_RESERVATIONS=none\n" in script
    # Each reservation admits its tenant and every oppo account through their parent: no other stack's tenant is named.
    assert "\noppo=oppo_accounts\n" in script and "team-005" not in script
    platform = script_of(cluster[PLATFORM])
    # The platform's own (cells.<pool>.<tenant>), leaving its tenant stacks' (cells.<stack>.<pool>.<tenant>) alone.
    assert "\nRESERVATION_PREFIX=cells.\nOTHER_STACKS_RESERVATIONS=keep\n" in platform
    assert "[[ $OTHER_STACKS_RESERVATIONS == keep && $name == *.*.*.* ]] && continue" in tenancy.STEPS
    assert "sacctmgr -i add account team-002 " not in platform and "sacctmgr -i add account team-000 " in platform


def test_adding_a_tenant_to_one_stack_changes_nothing_in_the_other_tenant_stacks(tmp_path, cluster):
    write_cluster(tmp_path, extra=1)
    after = {stack: run_stack(load(tmp_path, stack)) for stack in LAYOUT}

    def inputs(run: Run) -> dict[str, Any]:
        return {r.urn: r.inputs for r in run.resources}

    # faculty-b: nothing, not even its Job (a reservation admits oppo_accounts, not each oppo account).
    assert inputs(after["faculty-b"]) == inputs(cluster["faculty-b"])
    # faculty-a: the new tenant's objects, and its accounts Job with its ConfigMap.
    before_a, after_a = inputs(cluster["faculty-a"]), inputs(after["faculty-a"])
    added = after_a.keys() - before_a.keys()
    assert added and all("team-100" in urn or "tenants-sacctmgr" in urn for urn in added), added
    changed = {urn.rsplit("::", 1)[-1] for urn in before_a.keys() & after_a.keys() if before_a[urn] != after_a[urn]}
    assert changed == {"tenants-sacctmgr-script", "tenants-sacctmgr"}, changed
    # The platform: only what follows every tenant of the cluster (its directory and monitoring), on its next up.
    before_p, after_p = inputs(cluster[PLATFORM]), inputs(after[PLATFORM])
    assert before_p.keys() == after_p.keys()
    changed = {urn.rsplit("::", 1)[-1] for urn in before_p if before_p[urn] != after_p[urn]}
    assert changed and all(name.startswith(("ldap-", "monitoring-")) for name in changed), changed


def test_a_tenant_stack_warns_until_the_platform_stack_lists_its_tenants(tmp_path):
    write_cluster(tmp_path)
    config = load(tmp_path, "faculty-a")
    run = run_stack(config, {**deployed_facts(config), "tenantStacks": {"faculty-a": ["team-002"]}})
    assert any("does not list tenants team-003, team-004 yet" in w and f"pulumi up --stack {PLATFORM}" in w for w in run.warnings), run.warnings
    assert not any("does not list" in w for w in run_stack(config).warnings)


@pytest.mark.parametrize(
    "outputs, fragment",
    [
        ({}, f"stack {PLATFORM} has deployed nothing yet"),
        ({"clusterName": "other"}, f"stack {PLATFORM} deployed clusterName 'other' where Pulumi.{PLATFORM}.yaml says 'fpt-hpc'"),
    ],
)
def test_a_tenant_stack_refuses_a_platform_that_deployed_something_else_before_declaring_anything(tmp_path, outputs, fragment):
    write_cluster(tmp_path)
    config = load(tmp_path, "faculty-a")
    deployed = {**deployed_facts(config), **outputs} if outputs else {}
    with pytest.raises(ConfigError) as error:
        run_under_mocks(lambda: build_platform(config), stack="faculty-a", previous_outputs=deployed)
    assert f"slurm-platform:tenantStack.platform: {fragment}" in str(error.value)


def test_a_tenant_stack_needs_partitions_that_name_parent_accounts(tmp_path):
    platform = write_cluster(tmp_path)
    platform["slurm"] = {**platform["slurm"], "images": {**platform["slurm"].get("images", {}), "tag": "4.1.7-slurm24.05.8"}}
    write_stack(tmp_path, PLATFORM, {**platform, "tenants": [tenant(i) for i in LAYOUT[PLATFORM]]})
    config = load(tmp_path, "faculty-a")
    registered: list[Any] = []
    with pytest.raises(ConfigError) as error:
        registered.append(run_under_mocks(lambda: build_platform(config), stack="faculty-a", previous_outputs=deployed_facts(config)))
    assert "slurm-platform:tenantStack: a tenant stack needs partitions that allow parent accounts: Slurm 24.11 or later" in str(error.value)
    assert "deploys Slurm 24.05" in str(error.value)


def test_cells_that_do_not_fit_beside_the_other_stacks_are_refused_naming_the_file_that_lists_them(tmp_path):
    write_cluster(tmp_path)
    files = read_stack_files(tmp_path)
    # faculty-b asks for every Slurm worker of pool h100-1 on top of what the others hold there.
    pool = next(p for p in load(tmp_path, PLATFORM).gpu_pools if p.name == "h100-1")
    greedy = {"name": "greedy", "ldapGroup": "greedy", "cells": [{"pool": "h100-1", "gpusPerCell": GPUS_PER_NODE, "cells": pool.worker_replicas}]}
    own = {**files["faculty-b"].raw, "tenants": [*files["faculty-b"].raw["tenants"], greedy]}
    every = f"slurm-platform:tenants (every stack's together: {PLATFORM}, faculty-a, faculty-b): pool 'h100-1' has 2000 GPUs"
    message = refusal_of(tmp_path, "faculty-b", own)
    assert every in message and "greedy 2000 (250 x 8)" in message and "team-005 8 (1 x 8)" in message, message
    # The platform's preview refuses the same layout once faculty-b's file holds it, and so does faculty-a's.
    write_stack(tmp_path, "faculty-b", own)
    assert every in refusal_of(tmp_path, PLATFORM) and every in refusal_of(tmp_path, "faculty-a")


def test_a_tenant_name_two_stacks_list_is_refused_in_the_file_of_the_second(tmp_path):
    write_cluster(tmp_path)
    files = read_stack_files(tmp_path)
    twin = {**files["faculty-b"].raw, "tenants": [*files["faculty-b"].raw["tenants"], tenant(2)]}
    message = refusal_of(tmp_path, "faculty-b", twin)
    assert "slurm-platform:tenants[3].name" in message and "team-002" in message, message


@pytest.mark.parametrize(
    "own, line",
    [
        (
            {"tenantStack": {"platform": PLATFORM}, "tenants": [], "nodePools": []},
            f"slurm-platform:nodePools: a tenant stack reads it from its platform stack's file, Pulumi.{PLATFORM}.yaml: set it there, not here",
        ),
        (
            {"tenantStack": {"platform": "prod-unii"}, "tenants": []},
            "slurm-platform:tenantStack.platform: names no stack of this project: no Pulumi.prod-unii.yaml beside Pulumi.yaml "
            f'(platform stacks: {PLATFORM}); got "prod-unii"; fix: `pulumi config set --stack faculty-c --path tenantStack.platform {PLATFORM}`',
        ),
        (
            {"tenantStack": {"platform": "faculty-a"}, "tenants": []},
            "slurm-platform:tenantStack.platform: names a tenant stack, not a platform stack",
        ),
        ({"tenantStack": {}, "tenants": []}, "slurm-platform:tenantStack.platform: required but not set"),
        ({"tenantStack": {"platfrom": PLATFORM}}, "slurm-platform:tenantStack.platfrom: unknown key; did you mean platform?"),
    ],
)
def test_a_tenant_stacks_own_mistakes_are_refused_with_the_key_and_the_fix(tmp_path, own, line):
    write_cluster(tmp_path)
    assert line in refusal_of(tmp_path, "faculty-c", own)


def test_a_tenant_stack_name_must_fit_its_jobs_name(tmp_path):
    write_cluster(tmp_path)
    message = refusal_of(tmp_path, "Faculty_C", {"tenantStack": {"platform": PLATFORM}, "tenants": []})
    assert "slurm-platform:tenantStack: a tenant stack's name names its tenants Job" in message and "'Faculty_C'" in message


def test_a_secret_tenants_key_in_a_sibling_is_refused(tmp_path):
    write_cluster(tmp_path)
    write_stack(tmp_path, "faculty-b", {"tenantStack": {"platform": PLATFORM}, "tenants": {"secure": "AAAA"}})
    assert "Pulumi.faculty-b.yaml's tenants are a secret" in refusal_of(tmp_path, "faculty-a")


def test_the_pack_checks_a_tenant_stacks_cells_beside_the_others_on_the_platforms_workers(tmp_path, cluster):
    write_cluster(tmp_path)
    config = load(tmp_path, "faculty-a")
    facts = cluster_cells(config)
    assert sorted(cell["tenant"] for cell in facts["otherCells"]) == ["team-000", "team-001", "team-005", "team-006", "team-007"]
    config_maps = [as_policy_resource(r) for r in cluster["faculty-a"].resources if r.type == CONFIG_MAP]
    assert check("slurm-tenant-cells-fit", *config_maps, config=facts) == []
    # One node fewer in a pool than the cells there need: the tenant stack's pack reports it, though it declares no worker.
    shrunk = copy.deepcopy(facts)
    used = sum(1 for t in config.tenants for c in t.cells if c.pool == "h100-2")
    shrunk["workers"]["h100-2"]["nodes"] = used - 1
    violations = check("slurm-tenant-cells-fit", *config_maps, config=shrunk)
    assert violations and "its platform stack declares" in json.dumps(violations), violations


def test_the_program_reads_the_other_stacks_files_beside_pulumi_yaml(tmp_path, monkeypatch):
    """`pulumi up` of a tenant stack in miniature: the engine hands __main__.py its own config; the platform's and the
    sibling's come from the project directory, and a sibling's mistake there stops this stack before it declares anything."""
    write_cluster(tmp_path)
    monkeypatch.setattr(pulumi, "get_root_directory", lambda: str(tmp_path))
    own = read_stack_files(tmp_path)["faculty-a"].raw
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps({f"{PROJECT}:{key}": json.dumps(value) for key, value in own.items()}))
    monkeypatch.setenv("PULUMI_CONFIG_SECRET_KEYS", "[]")
    platform = load(tmp_path, "faculty-a")
    raised: list[BaseException] = []

    def program() -> None:
        pulumi.runtime.set_all_config(pulumi.runtime.get_config_env(), pulumi.runtime.get_config_secret_keys_env())
        try:
            runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__")
        except pulumi.RunError as error:
            raised.append(error)

    previous = platform_outputs_as_filed(platform)
    run = run_under_mocks(program, stack="faculty-a", previous_outputs=previous)
    assert not raised and {r.inputs["metadata"]["name"] for r in run.of_type("kubernetes:core/v1:Namespace")} == {"team-002", "team-003", "team-004"}
    # faculty-b's file lists a tenant of faculty-a's name: faculty-a's own up refuses, naming faculty-b's file.
    sibling = read_stack_files(tmp_path)["faculty-b"].raw
    write_stack(tmp_path, "faculty-b", {**sibling, "tenants": [*sibling["tenants"], tenant(2)]})
    run = run_under_mocks(program, stack="faculty-a", previous_outputs=previous)
    assert raised and "(in Pulumi.faculty-b.yaml, another stack of this cluster)" in str(raised[-1]), raised
    assert not run.kubernetes_objects()


def test_the_pack_takes_a_tenant_stacks_admission_policies_from_its_platform_stack(tmp_path, cluster):
    """The tenant namespaces of a tenant stack are covered by admission policies the platform stack declares: its pack
    config carries them, as the platform stack renders them; without them the hardening rule names each gap."""
    write_cluster(tmp_path)
    facts = stack_facts(load(tmp_path, "faculty-a"))["tenant-namespace-hardening"]
    assert {m["metadata"]["name"] for m in facts["platformPolicies"] if m["kind"] == "ValidatingAdmissionPolicy"} >= set(TENANT_ADMISSION_POLICIES)
    resources = [as_policy_resource(r) for r in cluster["faculty-a"].resources if r.custom and not r.read]
    assert check("tenant-namespace-hardening", *resources, config=facts) == []
    gaps = check("tenant-namespace-hardening", *resources, config={})
    assert len(gaps) == 3 * len(TENANT_ADMISSION_POLICIES) and all("does not cover it" in gap for gap in gaps), gaps


def test_preflight_reads_what_a_tenant_stack_declares(tmp_path):
    """`make preflight STACK=<tenant stack>` runs the program as its `up` would, against its platform as filed."""
    write_cluster(tmp_path)
    needs = stack_needs(load(tmp_path, "faculty-a"), read_stack_files(tmp_path)["faculty-a"].raw, "faculty-a")
    assert {"team-002", "team-003", "team-004"} <= {d.name for d in needs.objects if d.kind == "Namespace"}
    assert not {"team-000", "team-005"} & {d.name for d in needs.objects if d.kind == "Namespace"}

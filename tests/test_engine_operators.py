"""The other Slurm operators under the real Pulumi engine, offline, in render
mode (manifests written to a directory): Slinky and ACK stacks derived from the
`local` stack are previewed and brought up, their rendered custom resources
checked against the upstream contracts; and the soperator 1.14.10 -> 4.1.7
upgrade is previewed on an up-to-date local stack: the data claims and the
munge Secret are untouched.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest
import yaml

from components.config.operator_keys import reader
from tests.contracts import manifest_errors
from tests.engine import ToolchainError, Workspace, new_workspace
from tests.harness import without_keys_unread_by


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    try:
        return new_workspace(tmp_path_factory.mktemp("engine-operators"))
    except ToolchainError as error:
        pytest.fail(str(error))


def derived_stack(ws: Workspace, stack: str, directory: str, **config) -> None:
    """A stack file from Pulumi.local.yaml with `config` keys replaced, rendering to `directory`."""
    document = yaml.safe_load((ws.project / "Pulumi.local.yaml").read_text())
    document["config"]["slurm-platform:kubernetes"] = {"renderYamlToDirectory": directory}
    for key, value in config.items():
        document["config"][f"slurm-platform:{key}"] = value
    # Without the local stack's keys (soperator's) that the derived stack's operator refuses, as its user would
    # (the blocks are the document's own: dropped in place).
    raw = {key.removeprefix("slurm-platform:"): value for key, value in document["config"].items() if key.startswith("slurm-platform:")}
    version = raw.get("operators", {}).get("soperator", {}).get("version", "1.14.10")
    without_keys_unread_by(reader(raw.get("slurmOperator", "soperator"), version), raw)
    (ws.project / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(document))
    ws.pulumi("stack", "init", stack, "--secrets-provider", "passphrase", stack=None)


def no_operator_charts() -> dict:
    # Offline: no chart can be fetched; the chart wiring is covered by tests/test_engine.py's fixtures.
    return {key: {"install": False} for key in ("gpuOperator", "networkOperator", "soperator", "mariadbOperator", "slinky", "certManager")}


def check_rendered(ws: Workspace, directory: str) -> list[str]:
    """Every rendered manifest against its schema; the kinds found."""
    manifests = ws.rendered(directory)
    for manifest in manifests:
        assert manifest_errors(manifest) == [], (manifest["kind"], manifest["metadata"]["name"])
    return [manifest["kind"] for manifest in manifests]


def preview_after_edit(ws: Workspace, path: str, old: str, new: str, pack: list[str], stack: str) -> subprocess.CompletedProcess:
    """Preview `stack` with the pack after replacing the first `old` in the project's file `path` (restored after)."""
    source = ws.project / path
    original = source.read_text()
    edited = original.replace(old, new, 1)
    assert edited != original
    source.write_text(edited)
    try:
        return ws.pulumi("preview", *pack, check=False, stack=stack)
    finally:
        source.write_text(original)


def test_slinky_stack_previews_and_renders_valid_manifests(ws):
    derived_stack(ws, "slinky", "rendered-slinky", slurmOperator="slinky", operators=no_operator_charts())
    steps = ws.preview_steps("slinky")
    created = {s["urn"].split("::")[-2].rsplit("$", 1)[-1] for s in steps if s["op"] == "create"}
    assert {"kubernetes:slinky.slurm.net/v1beta1:Controller", "kubernetes:slinky.slurm.net/v1beta1:LoginSet"} <= created
    ws.pulumi("up", "--yes", "--skip-preview", stack="slinky")
    kinds = check_rendered(ws, "rendered-slinky")
    assert {"Controller", "NodeSet", "LoginSet", "Accounting", "Secret"} <= set(kinds)
    assert "SlurmCluster" not in kinds
    state = ws.state_file("slinky").read_text()
    exported = json.loads(ws.pulumi("stack", "export", "--show-secrets", stack="slinky").stdout)
    keys = [r for r in exported["deployment"]["resources"] if r["type"] == "random:index/randomPassword:RandomPassword"]
    assert keys and all(r["id"] == "none" for r in keys)
    for key in keys:
        value = key["outputs"]["result"]
        plain = json.loads(value["plaintext"]) if isinstance(value, dict) else value
        assert plain not in state


def test_ack_stack_previews_and_renders_valid_manifests(ws):
    slurm = yaml.safe_load((ws.project / "Pulumi.local.yaml").read_text())["config"]["slurm-platform:slurm"]
    slurm.update(
        accounting={"enabled": False},
        ack={
            "image": "registry.example.cn/slurm:23.06",
            "home": {"server": "nas.example.cn", "path": "/home"},
            "autoscaling": {"enabled": True},
        },
    )
    derived_stack(ws, "ack", "rendered-ack", slurmOperator="ack", cloud="alibaba", operators=no_operator_charts(), slurm=slurm)
    ws.pulumi("preview", stack="ack")
    ws.pulumi("up", "--yes", "--skip-preview", stack="ack")
    kinds = check_rendered(ws, "rendered-ack")
    assert {"SlurmCluster", "ConfigMap", "Service", "PersistentVolume", "PersistentVolumeClaim", "Role"} <= set(kinds)
    (cluster,) = [m for m in ws.rendered("rendered-ack") if m["kind"] == "SlurmCluster"]
    assert cluster["apiVersion"] == "kai.alibabacloud.com/v1" and cluster["spec"]["mungeConfPath"] == "/var/munge/munge.key"
    # Autoscaled fields are the copilot's once the CR exists: a second preview changes nothing.
    ws.pulumi("preview", "--expect-no-changes", stack="ack")


def test_upgrade_to_soperator_4_1_7_keeps_data_and_munge_key(ws):
    derived_stack(ws, "upgrade", "rendered-upgrade", operators=no_operator_charts())
    ws.pulumi("up", "--yes", "--skip-preview", stack="upgrade")
    with ws.config_set("operators.soperator.version", "4.1.7", stack="upgrade"):
        # 4.1.7 sizes workers per pool (nodePools[].slurmWorkers, default nodeCount) and refuses slurm.worker.size.
        ws.pulumi("config", "rm", "--path", "slurm-platform:slurm.worker.size", stack="upgrade")
        steps = ws.preview_steps("upgrade")
    changed = {s["urn"].rsplit("::", 1)[-1]: s["op"] for s in steps if s["op"] not in ("same", "read")}
    assert not [name for name in changed if name.startswith(("storage-", "munge-"))], changed
    assert changed.get("slurm-cluster") == "update"
    assert {"slurm-nodeset-gpu"} <= {name for name, op in changed.items() if op == "create"}
    assert not [name for name, op in changed.items() if op in ("replace", "delete", "create-replacement", "delete-replaced")]


def test_policy_pack_runs_on_the_slinky_stack(ws):
    """The pack under the engine on Slinky's resources: passes as rendered, and its Slinky rule bites when a key is cut."""
    settings = json.loads((ws.project / "policies" / "config" / "local.json").read_text())
    settings["slinky-references"] = "mandatory"
    pack_config = ws.root / "slinky-pack.json"
    pack_config.write_text(json.dumps(settings))
    pack = ["--policy-pack", "policies", "--policy-pack-config", str(pack_config)]
    ws.pulumi("preview", *pack, stack="slinky")
    result = preview_after_edit(
        ws,
        "components/slurm/slinky.py",
        '"slurmKeyRef": {"name": n["slurm_key"], "key": SLURM_KEY}',
        '"slurmKeyRef": {"name": "nowhere", "key": SLURM_KEY}',
        pack,
        "slinky",
    )
    assert result.returncode != 0
    assert "slinky-references" in result.stdout + result.stderr and "'nowhere'" in result.stdout + result.stderr


def test_policy_pack_judges_the_tenants_cells_under_the_engine(ws):
    """Tenants on a Slinky stack: the sacctmgr Job, PriorityClasses and quota render and validate; the
    pack passes them, and its cell fit check bites when the rendered cells are edited past the pool."""
    tenants = [
        {"name": "team-a", "users": ["alice"], "cells": [{"pool": "gpu", "gpusPerCell": 8, "cells": 2}]},
        {"name": "team-b", "users": ["bob"], "cells": [{"pool": "gpu", "gpusPerCell": 4, "cells": 4}], "namespace": True},
    ]
    derived_stack(ws, "tenants", "rendered-tenants", slurmOperator="slinky", operators=no_operator_charts(), tenants=tenants)
    pack = ["--policy-pack", "policies", "--policy-pack-config", "policies/config/local.json"]
    ws.pulumi("preview", *pack, stack="tenants")
    ws.pulumi("up", "--yes", "--skip-preview", stack="tenants")
    kinds = check_rendered(ws, "rendered-tenants")
    assert {"Job", "PriorityClass", "ResourceQuota", "Namespace"} <= set(kinds)
    # A hand edit that asks 100 times the cells: the stack config never sees it, the pack does.
    result = preview_after_edit(ws, "components/config/tenants.py", '"cells": c.cells} for t', '"cells": c.cells * 100} for t', pack, "tenants")
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "slurm-tenant-cells-fit" in output and "200 needed" in output


def test_every_preview_shows_the_tenants_capacity_map_and_a_changed_layout_changes_it(ws):
    """On the tenants stack brought up above: every preview prints the map (diagnostics: stderr under
    --diff), and a tenants change shows line by line in the `capacityMap` output's diff."""
    unchanged = ws.pulumi("preview", "--diff", stack="tenants")
    printed = unchanged.stdout + unchanged.stderr
    assert "pool gpu: 8 GPUs per node; 12 Slurm workers" in printed
    assert re.search(r"slurm +1-2 +team-a 8 +reservation cells\.gpu\.team-a", printed)
    assert re.search(r"slurm +3-4 +team-b 4\+4 +reservation cells\.gpu\.team-b", printed)
    with ws.config_set("tenants[1].cells[0].cells", "3", stack="tenants"):
        changed = ws.pulumi("preview", "--diff", stack="tenants")
    # The output's diff, as the CI comment carries it: team-b's second node goes from two cells to one.
    outputs = changed.stdout.rsplit("--outputs:--", 1)[1]
    assert re.search(r"~ capacityMap\s*: \[", outputs)
    assert re.search(r'"  slurm  3-4 +team-b 4\+4 +reservation cells\.gpu\.team-b" => "  slurm  3 +team-b 4\+4 ', outputs)
    assert re.search(r'"  slurm  4 +team-b 4, free 4 +reservation cells\.gpu\.team-b"', outputs)
    assert "free: 68 of 96 GPUs on Slurm workers" in changed.stdout + changed.stderr

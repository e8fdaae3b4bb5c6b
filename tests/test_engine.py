"""End-to-end under the real Pulumi engine, offline, on a copy of the project.

The `local` stack runs on a file backend in a temporary directory with the
Kubernetes provider rendering manifests to a directory. The tests run in file
order: invalid config first (nothing may be written), then up, idempotence,
secrets in state, previews of config and code changes, chart wiring with local
chart fixtures, policies, and finally the destroy that must refuse.
"""

from __future__ import annotations

import json
import re

import pytest
import yaml

from tests.contracts import SOPERATOR_CRD, crd_errors, kubernetes_errors
from tests.engine import FILE_BACKEND_QUERY, ToolchainError, Workspace, config_map, new_workspace, write_chart
from tests.harness import ROOT

SLURM_CLUSTER = "kubernetes:slurm.nebius.ai/v1:SlurmCluster"
RANDOM_PASSWORD = "random:index/randomPassword:RandomPassword"


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    try:
        return new_workspace(tmp_path_factory.mktemp("engine"))
    except ToolchainError as error:
        pytest.fail(str(error))


def test_invalid_config_fails_preview_and_writes_nothing(ws):
    with ws.config_set("storage.jail.size", "20Gi"):
        result = ws.pulumi("preview", check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert 'slurm-platform:storage.jail.size: is less than a jail (a whole OS root filesystem) can be: at least 40Gi; got "20Gi"' in output
    assert "Traceback" not in output
    assert not (ws.project / "rendered").exists()
    checkpoint = json.loads(ws.state_file().read_text()) if ws.state_file().exists() else {}
    assert not (checkpoint.get("checkpoint", {}).get("latest") or {}).get("resources")


@pytest.mark.parametrize(
    "path,value,line",
    [
        ("nodepools[0].name", "gpu", "slurm-platform:nodepools: unknown key; did you mean nodePools?"),
        ("stor\u200bage.jail.size", "100Gi", "slurm-platform:stor\\u200bage: unknown key; did you mean storage?"),
    ],
)
def test_an_unknown_top_level_key_fails_preview_and_writes_nothing(ws, path, value, line):
    """The engine hands the program every key of the stack file; ours that the model lacks are refused."""
    with ws.config_set(path, value):
        result = ws.pulumi("preview", check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert line in output, output
    assert "Traceback" not in output
    assert not (ws.project / "rendered").exists()


def test_up_renders_valid_manifests(ws):
    # With --diff, so the secrets test can check these creation diffs too.
    ws.pulumi("preview", "--diff")
    ws.pulumi("up", "--yes", "--skip-preview", "--diff")
    manifests = ws.rendered()
    kinds = {(m["kind"], m["metadata"]["name"]) for m in manifests}
    assert {("PersistentVolumeClaim", "jail-pvc"), ("PersistentVolumeClaim", "controller-spool-pvc"), ("Secret", "fpt-hpc-munge")} <= kinds
    (cluster,) = [m for m in manifests if m["kind"] == "SlurmCluster"]
    assert crd_errors(cluster) == []
    builtins = [m for m in manifests if m["kind"] not in ("SlurmCluster", "NicClusterPolicy", "NodePool")]
    assert builtins
    for manifest in builtins:
        assert kubernetes_errors(manifest) == [], manifest["metadata"]["name"]
    outputs = json.loads(ws.pulumi("stack", "output", "--json").stdout)
    assert outputs["pvcNames"]["jail"] == "jail-pvc" and outputs["sshCommand"] == "ssh -p 30022 root@<any-node-ip>"


def test_second_preview_finds_nothing_to_do(ws):
    ws.pulumi("preview", "--expect-no-changes")


def test_the_file_backend_writes_no_sidecar_a_stack_reference_could_read_half_written(ws):
    """The program reads its own outputs while the engine saves checkpoints. The state file is
    replaced atomically, but fileblob's `.attrs` sidecar is rewritten in place on every save: with
    metadata=skip (the Makefile's backend, and the tests') there is none to read."""
    makefile = (ROOT / "Makefile").read_text()
    assert f"PULUMI_BACKEND_URL='file://$(CURDIR)/.pulumi-state?{FILE_BACKEND_QUERY}'" in makefile
    state_files = [path.name for path in ws.state.rglob("*") if path.is_file()]
    assert "local.json" in state_files, state_files
    assert [name for name in state_files if name.endswith(".attrs")] == []


def plaintext(value):
    """A secret as `stack export --show-secrets` prints it: {<secret sig>, plaintext: <JSON>}."""
    return json.loads(value["plaintext"]) if isinstance(value, dict) else value


def generated_secrets(ws: Workspace) -> dict[str, str]:
    """Every RandomPassword's value in the state, by resource name."""
    exported = json.loads(ws.pulumi("stack", "export", "--show-secrets").stdout)
    return {r["urn"].split("::")[-1]: plaintext(r["outputs"]["result"]) for r in exported["deployment"]["resources"] if r["type"] == RANDOM_PASSWORD}


def test_generated_secrets_are_never_plaintext_nor_ids(ws):
    secrets = generated_secrets(ws)
    assert len(secrets["munge-key"]) == 1024 and len(secrets["ldap-admin-password"]) == 32, {k: len(v) for k, v in secrets.items()}
    state = ws.state_file().read_text()
    assert "ciphertext" in state
    resources = json.loads(state)["checkpoint"]["latest"]["resources"]
    assert {r["id"] for r in resources if r["type"] == RANDOM_PASSWORD} == {"none"}
    printed = "\n".join(ws.transcript[:-1])  # all but the export above, which shows secrets on purpose
    assert "+ random:index/randomPassword:RandomPassword: (create)" in printed  # the creation diffs were captured
    for name, value in secrets.items():
        assert value not in state, f"{name} is in plaintext in the state file"
        assert value not in printed, f"{name} was printed by preview --diff or up"


def test_generated_secrets_are_stable_and_rotate_on_request(ws):
    before = generated_secrets(ws)
    ws.pulumi("up", "--yes", "--skip-preview")
    assert generated_secrets(ws) == before
    with ws.config_set("slurm.mungeKeyRotation", "1"):
        steps = ws.preview_steps()
    changed = {s["urn"].split("::")[-1]: s["op"] for s in steps if s["op"] not in ("same", "read")}
    # The Secret's new data is unknown until the key exists, so the provider may plan a replace of it.
    assert changed.get("munge-key") == "replace" and changed.get("munge-secret") in ("update", "replace"), changed
    assert set(changed) == {"munge-key", "munge-secret"}, changed


def test_worker_scale_up_is_one_in_place_update(ws):
    with ws.config_set("slurm.worker.size", "10"):
        steps = ws.preview_steps()
    changed = [(s["op"], s["urn"].split("::")[-2].split("$")[-1]) for s in steps if s["op"] not in ("same", "read")]
    assert changed == [("update", SLURM_CLUSTER)], changed


def test_worker_scale_down_warns_with_scontrol_command(ws):
    with ws.config_set("slurm.worker.size", "6"):
        result = ws.pulumi("preview")
    assert "scontrol delete nodeName=worker-6,worker-7" in result.stdout + result.stderr


def preview_with_storage_renamed(ws: Workspace, alias: bool) -> tuple[int, list[dict], str]:
    """Preview after renaming the Storage component "storage" -> "data" in the code."""
    platform = ws.project / "components" / "platform.py"
    original = platform.read_text()
    options = 'pulumi.ResourceOptions(aliases=[pulumi.Alias(name="storage")])' if alias else "pulumi.ResourceOptions()"
    renamed = original.replace(
        'Storage("storage", config, opts=in_namespace)',
        f'Storage("data", config, opts=pulumi.ResourceOptions.merge(in_namespace, {options}))',
    )
    assert renamed != original
    platform.write_text(renamed)
    try:
        result = ws.pulumi("preview", "--json", check=False)
    finally:
        platform.write_text(original)
    try:
        steps = json.loads(result.stdout).get("steps", [])
    except json.JSONDecodeError:
        steps = []
    return result.returncode, steps, result.stdout + result.stderr


def test_renaming_the_storage_component_keeps_the_volumes(ws):
    # Control: a rename without an alias would delete the claims; protection stops it.
    code, steps, output = preview_with_storage_renamed(ws, alias=False)
    deletes = [s for s in steps if s["op"] in ("delete", "replace") and "PersistentVolumeClaim" in s["urn"]]
    assert code != 0 or deletes, output[-2000:]
    # With the alias the claims keep their identity: nothing is deleted, replaced or re-created.
    code, steps, output = preview_with_storage_renamed(ws, alias=True)
    assert code == 0, output[-2000:]
    touched = [(s["op"], s["urn"]) for s in steps if s["op"] not in ("same", "read") and "Persistent" in s["urn"]]
    assert touched == []
    assert not [s for s in steps if s["op"] in ("delete", "replace", "create-replacement", "delete-replaced")]


def test_chart_wiring_with_local_chart_fixtures(ws):
    charts = ws.root / "charts"
    write_chart(charts, "gpu-operator", "v26.7.0", [config_map("gpu-operator-fixture")])
    write_chart(charts, "network-operator", "24.10.1", [config_map("network-operator-fixture")])
    write_chart(charts, "helm-soperator-crds", "1.14.10", [config_map("soperator-crds-fixture")], crds=[SOPERATOR_CRD])
    write_chart(charts, "helm-soperator", "1.14.10", [config_map("soperator-fixture")])
    write_chart(charts, "mariadb-operator", "0.29.0", [config_map("mariadb-operator-fixture")])
    stack_file = ws.project / "Pulumi.charts.yaml"
    config = yaml.safe_load((ws.project / "Pulumi.local.yaml").read_text())
    config["config"]["slurm-platform:kubernetes"] = {"renderYamlToDirectory": "rendered-charts"}
    config["config"]["slurm-platform:operators"] = {
        key: {"install": True, "repository": str(charts)} for key in ("gpuOperator", "networkOperator", "soperator", "mariadbOperator")
    }
    stack_file.write_text(yaml.safe_dump(config))
    ws.pulumi("stack", "init", "charts", "--secrets-provider", "passphrase", stack=None)
    ws.pulumi("up", "--yes", "--skip-preview", stack="charts")

    crd_dir = ws.project / "rendered-charts" / "0-crd"
    assert any("slurmclusters" in p.name for p in crd_dir.rglob("*.yaml")), list(crd_dir.rglob("*"))
    names = {(m["kind"], m["metadata"]["name"], m["metadata"].get("namespace")) for m in ws.rendered("rendered-charts")}
    for fixture, namespace in [
        ("gpu-operator-fixture", "gpu-operator"),
        ("network-operator-fixture", "nvidia-network-operator"),
        ("soperator-fixture", "soperator-system"),
        ("mariadb-operator-fixture", "mariadb-operator"),
    ]:
        assert ("ConfigMap", fixture, namespace) in names
    assert ("NicClusterPolicy", "nic-cluster-policy", None) in names

    resources = json.loads(ws.pulumi("stack", "export", stack="charts").stdout)["deployment"]["resources"]
    by_urn = {r["urn"]: r for r in resources}
    (cluster,) = [r for r in resources if r["type"] == SLURM_CLUSTER]
    waits_for = {by_urn[u]["urn"].split("::")[-1] for u in cluster.get("dependencies", [])}
    assert "operators-soperator-crds" in waits_for
    assert not waits_for & {"operators-gpu-operator", "operators-network-operator", "operators-soperator"}


def test_policy_pack_passes_the_local_stack_and_fails_a_violation(ws):
    pack = ["--policy-pack", "policies", "--policy-pack-config", "policies/config/local.json"]
    ws.pulumi("preview", *pack)
    tiny_quota = ws.root / "tiny-quota.json"
    settings = json.loads((ws.project / "policies" / "config" / "local.json").read_text())
    for value in settings.values():
        if isinstance(value, dict) and "quotas" in value:
            value["quotas"] = {region: {key: 1 for key in quota} for region, quota in value["quotas"].items()}
            value["enforcementLevel"] = "mandatory"
    tiny_quota.write_text(json.dumps(settings))
    result = ws.pulumi("preview", "--policy-pack", "policies", "--policy-pack-config", str(tiny_quota), check=False)
    assert result.returncode != 0
    assert re.search(r"quota", result.stdout + result.stderr, re.IGNORECASE)


def test_plugins_are_the_built_ones_without_warnings_or_downloads(ws):
    plugins = ws.pulumi("plugin", "ls", stack=None).stdout
    assert re.search(r"kubernetes\s+resource\s+4\.24\.1\+git\.20260115033456\.f47bc2d6f199", plugins), plugins
    assert re.search(r"random\s+resource\s+4\.21\.4\+tfrandom\.3\.6\.3", plugins), plugins
    printed = "\n".join(ws.transcript)
    assert len(ws.transcript) > 10
    assert "is expected to have version" not in printed
    assert not re.search(r"download", printed, re.IGNORECASE)


def test_destroy_refuses_to_delete_protected_volumes(ws):
    result = ws.pulumi("destroy", "--yes", "--skip-preview", check=False)
    assert result.returncode != 0
    assert "protected" in result.stdout + result.stderr
    remaining = json.loads(ws.pulumi("stack", "export").stdout)["deployment"]["resources"]
    claims = {r["inputs"]["metadata"]["name"] for r in remaining if r["type"] == "kubernetes:core/v1:PersistentVolumeClaim"}
    assert {"jail-pvc", "controller-spool-pvc"} <= claims

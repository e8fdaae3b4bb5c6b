"""Day-2 behaviour under the real Pulumi engine, on the render-only `local`
stack (a workspace of its own, from tests/test_engine.py's fixture): nothing
is awaited, read or imported without a cluster; outputs say so plainly; a
munge key rotation is announced at preview with what restarts; the policy pack
runs from its own virtualenv."""

from __future__ import annotations

import json

import tests.test_engine as engine_tests
from tests.engine import Workspace

ws = engine_tests.ws  # the engine tests' fixture: a workspace of this module's own

SLURM_CLUSTER = "kubernetes:slurm.nebius.ai/v1:SlurmCluster"


def test_adoption_on_a_render_only_stack_fails_before_anything_is_registered(ws: Workspace):
    with ws.config_set("storage.jail.adopt", "true"):
        result = ws.pulumi("preview", check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "storage.jail.adopt: adoption imports live objects, but kubernetes.renderYamlToDirectory" in output
    assert "Traceback" not in output


def test_render_only_stack_awaits_and_reads_nothing_and_says_so(ws: Workspace):
    ws.pulumi("up", "--yes", "--skip-preview")
    (cluster,) = [m for m in ws.rendered() if m["kind"] == "SlurmCluster"]
    assert "pulumi.com/waitFor" not in (cluster["metadata"].get("annotations") or {})
    resources = json.loads(ws.pulumi("stack", "export").stdout)["deployment"]["resources"]
    (state,) = [r for r in resources if r["type"] == SLURM_CLUSTER]
    assert not state.get("customTimeouts")
    # No `.get` of a live Kubernetes object (the stack's own StackReference is the only read).
    assert [r["type"] for r in resources if r.get("external")] == ["pulumi:pulumi:StackReference"]
    outputs = json.loads(ws.pulumi("stack", "output", "--json").stdout)
    assert outputs["sshCommand"] == "ssh -p 30022 root@<any-node-ip>"
    assert outputs.get("slurmPhase") is None and outputs.get("loginEndpoint") is None
    assert outputs["slurmServices"] == {"controller": "fpt-hpc-controller-svc", "login": "fpt-hpc-login-svc", "ssh": "fpt-hpc-login-svc"}
    assert outputs["installedCharts"] == {} and outputs["mungeKeyRotation"] == 0
    assert outputs["slurmUnmetConditions"] == []


def test_pulumi_config_set_keeps_the_stack_files_schema_line(ws: Workspace):
    with ws.config_set("slurm.worker.size", "9"):
        lines = (ws.project / "Pulumi.local.yaml").read_text().splitlines()
    assert lines[0] == "# yaml-language-server: $schema=./stack.schema.json"


def test_munge_key_rotation_preview_shows_the_new_key_and_what_restarts(ws: Workspace):
    with ws.config_set("slurm.mungeKeyRotation", "1"):
        result = ws.pulumi("preview", "--json", check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    preview = json.loads(result.stdout)
    replaced = {s["urn"].split("::")[-1] for s in preview.get("steps", []) if s["op"] in ("replace", "create-replacement")}
    assert "munge-key" in replaced
    messages = " ".join(d.get("message", "") for d in preview.get("diagnostics", []))
    assert "munge key rotation 0 -> 1" in messages
    assert "kubectl -n soperator-system rollout restart deployment -l app.kubernetes.io/name=helm-soperator" in messages


def test_the_policy_pack_runs_from_its_own_virtualenv(ws: Workspace):
    # PulumiPolicy.yaml names ./venv (the workspace links the checkout's, built by `make policy-venv`).
    assert (ws.project / "policies" / "venv" / "bin" / "python").exists()
    result = ws.pulumi("preview", "--policy-pack", "policies", "--policy-pack-config", "policies/config/local.json", check=False)
    assert result.returncode == 0, (result.stdout + result.stderr)[-2000:]


def test_an_operator_switch_on_a_live_stack_needs_its_acknowledgement_and_keeps_the_data(ws: Workspace):
    ws.pulumi("up", "--yes", "--skip-preview")  # the stack has run soperator 1.14.10
    before = ws.state_file().read_text()
    with ws.config_set("slurmOperator", "slinky"):
        # Slinky refuses the keys only soperator 1.14.10 reads (slurm.worker.size: 8, its default).
        ws.pulumi("config", "rm", "--path", "slurm-platform:slurm.worker.size")
        refused = ws.pulumi("up", "--yes", "--skip-preview", check=False)
        output = refused.stdout + refused.stderr
        assert refused.returncode != 0 and "Traceback" not in output
        assert "slurm-platform:slurm.operatorSwitch: this stack runs soperator 1.14.10 and slurmOperator is now slinky" in output
        assert "set slurm.operatorSwitch: {from: soperator, acknowledged: true}" in output
        # Refused before anything was registered: every resource is as the last up left it (the
        # StackReference, the one read, holds the outputs it read).
        assert declared(ws.state_file().read_text()) == declared(before)
        ws.pulumi("config", "set", "--path", "slurm-platform:slurm.operatorSwitch.from", "soperator")
        ws.pulumi("config", "set", "--path", "slurm-platform:slurm.operatorSwitch.acknowledged", "true")
        # As the local stack's soperator, Slinky's charts are not fetched (offline).
        ws.pulumi("config", "set", "--path", "slurm-platform:operators.slinky.install", "false")
        steps = ws.preview_steps()
    changed = {s["urn"].rsplit("::", 1)[1]: s["op"] for s in steps if s["op"] not in ("same", "read")}
    # soperator's cluster goes, Slinky's comes; the data volumes and the munge key are untouched.
    assert changed["slurm-cluster"] == "delete" and changed["slurm-controller"] == "create"
    assert not {name for name in changed if name.startswith(("storage-", "munge-"))}, changed


def declared(state: str) -> list[tuple]:
    """Each resource's identity and when it was last written (secrets are re-encrypted on every save)."""
    resources = json.loads(state)["checkpoint"]["latest"]["resources"]
    return [(r["urn"], r.get("id"), r.get("modified")) for r in resources if r["type"] != "pulumi:pulumi:StackReference"]

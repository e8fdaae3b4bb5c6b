"""CI workflows, checked for what they mean: every secret and variable has a
name GitHub allows and is documented for the one-time setup, every stack runs
in its own GitHub Environment with its credentials checked first, production
credentials never reach an unreviewed pull request or a fork, the CLI is the
one the project builds, deploys refresh first, and drift detection fails on
changes. Syntax: GitHub's JSON Schemas (offline) and actionlint (`make lint`)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.harness import ROOT, example_stacks

WORKFLOW_DIR = ROOT / ".github" / "workflows"
WORKFLOWS = sorted(WORKFLOW_DIR.glob("*.yml"))
SETUP_ACTION = ROOT / ".github" / "actions" / "stack-setup" / "action.yml"
CI_DOC = ROOT / "docs" / "ci.md"  # the workflows' documentation, with the one-time setup per stack
DEPLOY_STACKS_ACTION = ROOT / ".github" / "actions" / "deploy-stacks" / "action.yml"
# The matrix every Pulumi job takes from the repository variable DEPLOY_STACKS, through the `stacks` job.
DEPLOY_LIST_MATRIX = "${{ fromJSON(needs.stacks.outputs.stacks) }}"
# The tests read the workflows as in a repository whose DEPLOY_STACKS lists every example stack but
# `local` (renders to a directory) and `kwok` (the loopback test cluster).
DEPLOYED_STACKS = sorted(s for s in example_stacks() if s not in ("local", "kwok"))
PRODUCTION = [s for s in DEPLOYED_STACKS if s.startswith("prod-")]
EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}", re.DOTALL)
CONTEXT_NAME = re.compile(r"\b(secrets|vars)\s*(?:\.\s*([A-Za-z0-9_-]+)|\[\s*([^\]]*?)\s*\])")
# GitHub: letters, digits and underscores, not starting with a digit or GITHUB_.
VALID_NAME = re.compile(r"^(?!GITHUB_)[A-Za-z_][A-Za-z0-9_]*$", re.IGNORECASE)


def load(path: Path) -> dict[str, Any]:
    # PyYAML reads the key `on` as True.
    document = yaml.safe_load(path.read_text())
    if True in document:
        document["on"] = document.pop(True)
    return document


def jobs(workflow: str) -> dict[str, Any]:
    return load(WORKFLOW_DIR / workflow)["jobs"]


def step_uses(step: dict[str, Any], prefix: str) -> bool:
    return str(step.get("uses", "")).startswith(prefix)


def job_stacks(job: dict[str, Any]) -> list[dict[str, str]]:
    """One entry per matrix combination: the values `matrix.*` takes (a job without matrix: one empty entry)."""
    matrix = (job.get("strategy") or {}).get("matrix")
    if not matrix:
        return [{}]
    if "include" in matrix:
        return [dict(entry) for entry in matrix["include"]]
    ((key, values),) = matrix.items()
    if values == DEPLOY_LIST_MATRIX:
        values = DEPLOYED_STACKS
    return [{key: value} for value in values]


def resolve(value: Any, matrix: dict[str, str]) -> str:
    """`${{ matrix.x }}` substituted; any other expression is left as is."""
    return EXPRESSION.sub(lambda m: matrix.get(m.group(1).strip().removeprefix("matrix."), m.group(0)), str(value))


def stack_jobs(workflow: str):
    """(job name, matrix entry, stack, environment, steps) for every job that runs Pulumi on a stack."""
    found = []
    for name, job in jobs(workflow).items():
        steps = job.get("steps", [])
        if not any(step_uses(step, "pulumi/actions@") for step in steps):
            continue
        for matrix in job_stacks(job):
            (pulumi_step,) = [s for s in steps if step_uses(s, "pulumi/actions@")]
            stack = resolve(pulumi_step["with"]["stack-name"], matrix)
            found.append((name, matrix, stack, resolve(job.get("environment", ""), matrix), steps))
    assert found, f"{workflow} runs Pulumi nowhere"
    return found


def every_text(node: Any):
    if isinstance(node, dict):
        for key, value in node.items():
            yield str(key)
            yield from every_text(value)
    elif isinstance(node, list):
        for item in node:
            yield from every_text(item)
    else:
        yield str(node)


def referenced_names(path: Path) -> set[tuple[str, str]]:
    """(`secrets`|`vars`, name) for every reference inside `${{ }}`; dynamic lookups are named as such."""
    names = set()
    for text in every_text(load(path)):
        for expression in EXPRESSION.findall(text):
            for context, dotted, indexed in CONTEXT_NAME.findall(expression):
                if dotted:
                    names.add((context, dotted))
                else:
                    literal = re.fullmatch(r"'([^']*)'|\"([^\"]*)\"", indexed)
                    names.add((context, (literal.group(1) or literal.group(2)) if literal else f"<dynamic: {indexed}>"))
    return names


# --- syntax ------------------------------------------------------------------------


def check_jsonschema(schema: str, *paths: Path) -> subprocess.CompletedProcess:
    checker = Path(sys.executable).with_name("check-jsonschema")
    return subprocess.run([str(checker), "--builtin-schema", schema, *map(str, paths)], capture_output=True, text=True)


def test_workflows_and_the_setup_action_validate_against_githubs_schemas():
    assert WORKFLOWS and SETUP_ACTION.is_file()
    result = check_jsonschema("vendor.github-workflows", *WORKFLOWS)
    assert result.returncode == 0, result.stdout + result.stderr
    result = check_jsonschema("vendor.github-actions", *sorted((ROOT / ".github" / "actions").glob("*/action.yml")))
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_schema_check_catches_a_broken_workflow(tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text("on: push\njobs:\n  x:\n    steps: []\n")  # no runs-on
    assert check_jsonschema("vendor.github-workflows", broken).returncode != 0


# --- secrets and variables -----------------------------------------------------------


def test_every_secret_and_variable_has_a_name_github_allows():
    names = set().union(*(referenced_names(path) for path in WORKFLOWS))
    assert ("secrets", "KUBECONFIG") in names and ("vars", "PULUMI_BACKEND_URL") in names
    for context, name in names:
        assert VALID_NAME.match(name), f"{context}.{name} is not a name GitHub allows (letters, digits, _; no GITHUB_ prefix)"


def test_the_name_check_catches_what_the_old_workflows_did(tmp_path):
    old = tmp_path / "old.yml"
    old.write_text(
        "on: push\njobs:\n  x:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo\n"
        "        env:\n          K: ${{ secrets[format('KUBECONFIG_{0}', matrix.stack)] }}\n"
        "          L: ${{ secrets.KUBECONFIG_prod-hanoi }}\n"
    )
    bad = [name for _, name in referenced_names(old) if not VALID_NAME.match(name)]
    assert sorted(bad) == ["<dynamic: format('KUBECONFIG_{0}', matrix.stack)>", "KUBECONFIG_prod-hanoi"]


def test_every_secret_and_variable_is_in_the_documented_setup():
    readme = CI_DOC.read_text()
    setup = readme[readme.index("## One-time setup per stack") :]
    names = set().union(*(referenced_names(path) for path in WORKFLOWS)) - {("secrets", "GITHUB_TOKEN")}
    for context, name in names:
        assert f"`{name}`" in setup, f"{context}.{name} is used by a workflow but docs/ci.md's setup does not say to create it"


# --- one environment per stack, credentials checked first -----------------------------


@pytest.mark.parametrize("workflow", ["preview.yml", "deploy.yml", "drift.yml"])
def test_every_deployed_stack_runs_in_its_own_environment(workflow):
    runs = stack_jobs(workflow)
    assert sorted(stack for _, _, stack, _, _ in runs) == DEPLOYED_STACKS
    for job, _, stack, environment, _ in runs:
        expected = {stack, f"{stack}-preview"} if workflow == "preview.yml" else {stack}
        assert environment in expected, f"{workflow}:{job} runs stack {stack} in environment {environment!r}"


@pytest.mark.parametrize("workflow", ["preview.yml", "deploy.yml", "drift.yml"])
def test_credentials_are_checked_before_pulumi_runs(workflow):
    jobs = stack_jobs(workflow)
    assert jobs
    for job, _, _stack, _, steps in jobs:
        uses = [str(step.get("uses", "")) for step in steps]
        setup = uses.index("./.github/actions/stack-setup")
        assert setup < next(i for i, u in enumerate(uses) if u.startswith("pulumi/actions@")), f"{workflow}:{job}"
        inputs = steps[setup]["with"]
        required = {name for name, spec in load(SETUP_ACTION)["inputs"].items() if spec.get("required")}
        assert required <= set(inputs), f"{workflow}:{job} leaves {required - set(inputs)} out"
        for name, value in inputs.items():
            if name != "stack":
                assert re.fullmatch(r"\$\{\{ (secrets|vars)\.[A-Z_]+ \}\}", value), f"{workflow}:{job} {name}: {value}"


def test_the_setup_action_fails_on_every_empty_credential():
    action = load(SETUP_ACTION)
    (check,) = [step for step in action["runs"]["steps"] if step["name"] == "Fail fast on a missing credential"]
    checked = re.search(r"for name in ([A-Z_ ]+); do", check["run"])
    assert checked is not None
    credentials = {name for name in action["inputs"] if name != "stack"}
    checked_inputs = {value.removeprefix("${{ inputs.").removesuffix(" }}") for key, value in check["env"].items() if key in checked.group(1).split()}
    assert checked_inputs == credentials


def test_the_setup_action_stops_a_job_with_an_empty_credential(tmp_path):
    action = load(SETUP_ACTION)
    (check,) = [step for step in action["runs"]["steps"] if step["name"] == "Fail fast on a missing credential"]
    env = {key: "x" for key in check["env"]} | {
        "STACK": "prod-hanoi",
        "PULUMI_BACKEND_URL": "s3://state",
        "KUBECONFIG_CONTENT": "",
        "PATH": "/usr/bin:/bin",
    }
    result = subprocess.run(["bash", "-eo", "pipefail", "-c", check["run"]], env=env, capture_output=True, text=True)
    assert result.returncode == 1
    assert "::error title=Stack prod-hanoi is not set up::empty in this job's GitHub Environment: KUBECONFIG_CONTENT" in result.stdout
    env["KUBECONFIG_CONTENT"] = "apiVersion: v1"
    assert subprocess.run(["bash", "-eo", "pipefail", "-c", check["run"]], env=env, capture_output=True).returncode == 0
    env["PULUMI_BACKEND_URL"] = "file://~"
    assert subprocess.run(["bash", "-eo", "pipefail", "-c", check["run"]], env=env, capture_output=True).returncode == 1


# --- who gets production credentials -------------------------------------------------


def environment_protections(readme: str) -> dict[str, str]:
    """Each GitHub Environment of docs/ci.md's one-time setup, with what its table says protects it."""
    setup = readme[readme.index("## One-time setup per stack") :]
    header = re.search(r"^\s*\| environment \| protection \| used by \|\n\s*\|[-| ]+\|\n((?:\s*\|.*\|\n)+)", setup, re.MULTILINE)
    assert header, "docs/ci.md's setup has no environment table"
    protections = {}
    for row in header.group(1).splitlines():
        names, protection, _used_by = (cell.strip() for cell in row.strip().strip("|").split("|"))
        protections.update(dict.fromkeys(re.findall(r"`([^`]+)`", names), protection))
    return protections


# What a job given a credential must wait for: pull request code, a reviewer other than the pusher;
# everything else, code on main.
REVIEWED = ("required reviewers", "prevent self-review")
MAIN_ONLY = ("deployment branches: `main` only",)


def unprotected_credentials(workflow: dict[str, Any], protections: dict[str, str]) -> list[str]:
    """Every way `workflow` hands a credential to code its environment's protection does not gate."""
    problems = []
    if any(credential_secrets(value) for value in (workflow.get("env") or {}).values()):
        problems.append("the workflow-level env carries a credential into every job")
    pull_requests = bool({"pull_request", "pull_request_target"} & set(workflow["on"]))
    for name, job in workflow["jobs"].items():
        if not credential_secrets(job):
            continue
        required = REVIEWED if pull_requests else MAIN_ONLY
        if "environment" not in job:
            problems.append(f"{name}: gets {sorted(credential_secrets(job))} outside any environment (a repository secret)")
            continue
        for matrix in job_stacks(job):
            environment = resolve(job["environment"], matrix)
            protection = protections.get(environment, "").lower()
            missing = [rule for rule in required if rule.lower() not in protection]
            if missing:
                problems.append(f"{name}: environment {environment} ({protection or 'not in the setup'}) lacks {', '.join(missing)}")
    return problems


def test_every_credential_waits_for_a_reviewer_or_for_main():
    protections = environment_protections(CI_DOC.read_text())
    assert {f"{stack}-preview" for stack in DEPLOYED_STACKS} | set(DEPLOYED_STACKS) <= set(protections)
    checked = 0
    for path in WORKFLOWS:
        assert unprotected_credentials(load(path), protections) == [], path.name
        checked += sum(1 for job in load(path)["jobs"].values() if credential_secrets(job))
    assert checked == 3  # preview, deploy, drift


def test_the_protection_check_catches_an_unreviewed_preview_and_a_repository_secret():
    protections = environment_protections(CI_DOC.read_text())
    workflow = load(WORKFLOW_DIR / "preview.yml")
    # The setup as it was: dev's previews ran PR code with the passphrase and bucket key, no reviewer.
    old = {**protections, "dev-preview": "none; read-only credentials", "dev-lab-preview": "none; read-only credentials"}
    assert unprotected_credentials(workflow, old) == [
        "preview: environment dev-preview (none; read-only credentials) lacks required reviewers, prevent self-review",
        "preview: environment dev-lab-preview (none; read-only credentials) lacks required reviewers, prevent self-review",
    ]
    no_self_review = {name: "required reviewers" for name in protections}
    assert len(unprotected_credentials(workflow, no_self_review)) == len(DEPLOYED_STACKS)
    (preview,) = [job for job in workflow["jobs"].values() if "environment" in job]
    del preview["environment"]
    (problem,) = unprotected_credentials(workflow, protections)
    assert problem.startswith(
        "preview: gets ['BACKEND_ACCESS_KEY_ID', 'BACKEND_SECRET_ACCESS_KEY', 'KUBECONFIG', 'PULUMI_CONFIG_PASSPHRASE'] outside"
    )
    drift = load(WORKFLOW_DIR / "drift.yml")
    drift["env"]["PULUMI_CONFIG_PASSPHRASE"] = "${{ secrets.PULUMI_CONFIG_PASSPHRASE }}"
    assert unprotected_credentials(drift, protections) == ["the workflow-level env carries a credential into every job"]


def test_forks_get_no_preview_and_no_secrets():
    workflow = load(WORKFLOW_DIR / "preview.yml")
    assert set(workflow["on"]) == {"pull_request"}  # never pull_request_target: it hands secrets to fork code
    for name, job in workflow["jobs"].items():
        if any(step_uses(step, "./.github/actions/stack-setup") for step in job.get("steps", [])):
            assert str(job.get("if")).startswith("github.event.pull_request.head.repo.full_name == github.repository &&"), name


def test_only_main_deploys_in_the_lists_order_one_stack_at_a_time():
    workflow = load(WORKFLOW_DIR / "deploy.yml")
    assert workflow["on"] == {"push": {"branches": ["main"]}}
    (deploy,) = [job for job in workflow["jobs"].values() if job.get("strategy")]
    assert deploy["strategy"]["max-parallel"] == 1
    assert deploy["strategy"]["fail-fast"] is True  # a failed deploy stops the stacks listed after it


def workflow_rows(readme: str) -> dict[str, dict[str, str]]:
    """docs/ci.md's workflow table: each row's cells by column, keyed by the workflow file it names."""
    table = re.search(r"^\| workflow \|(.*)\|\n\|[-| ]+\|\n((?:\|.*\|\n)+)", readme, re.MULTILINE)
    assert table, "docs/ci.md has no workflow table"
    columns = [cell.strip() for cell in table.group(1).split("|")]
    rows = {}
    for row in table.group(2).splitlines():
        first, *cells = (cell.strip() for cell in row.strip().strip("|").split("|"))
        rows[first.strip("`")] = dict(zip(columns, cells, strict=True))
    return rows


def stale_workflow_rows(readme: str) -> list[str]:
    """What docs/ci.md's workflow table says that the workflows no longer do."""
    rows = workflow_rows(readme)
    problems = [f"{path.name}: not in the table" for path in WORKFLOWS if path.name not in rows]
    for name, row in rows.items():
        if not (WORKFLOW_DIR / name).is_file():
            problems.append(f"{name}: no such workflow")
            continue
        named = set(re.findall(r"`([^`]+)`", row.get("jobs", "")))
        if named != set(jobs(name)):
            problems.append(f"{name}: the table names jobs {sorted(named)}, the workflow has {sorted(jobs(name))}")
        stacks = [stack for stack in example_stacks() if f"`{stack}`" in row.get("what", "")]
        if stacks:
            problems.append(f"{name}: names stacks {stacks}; which stacks CI runs is DEPLOY_STACKS")
    return problems


def test_the_ci_page_names_each_workflows_jobs_and_no_stack():
    assert stale_workflow_rows(CI_DOC.read_text()) == []


def test_the_workflow_table_check_catches_the_old_deploy_row():
    readme = CI_DOC.read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| `deploy.yml` |"))
    old = (
        "| `deploy.yml` | `dev`, `production` | push to `main` | `pulumi up --refresh`: `dev`, then `prod-hanoi` and `prod-hangzhou` one at a time |"
    )
    assert stale_workflow_rows(readme.replace(row, old)) == [
        "deploy.yml: the table names jobs ['dev', 'production'], the workflow has ['deploy', 'stacks']",
        "deploy.yml: names stacks ['dev', 'prod-hangzhou', 'prod-hanoi']; which stacks CI runs is DEPLOY_STACKS",
    ]


# --- which stacks a repository deploys: one list, empty in a fork or a new project ----------


@pytest.mark.parametrize("workflow", ["preview.yml", "deploy.yml", "drift.yml"])
def test_every_pulumi_job_takes_its_stacks_from_the_one_list(workflow):
    all_jobs = jobs(workflow)
    (listing,) = [step for step in all_jobs["stacks"]["steps"] if step_uses(step, "./.github/actions/deploy-stacks")]
    assert listing["with"]["stacks"] == "${{ vars.DEPLOY_STACKS }}"
    assert all_jobs["stacks"]["outputs"]["stacks"] == f"${{{{ steps.{listing['id']}.outputs.stacks }}}}"
    runs = {name for name, _, _, _, _ in stack_jobs(workflow)}
    for name in runs:
        job = all_jobs[name]
        assert "stacks" in ([job["needs"]] if isinstance(job["needs"], str) else job["needs"]), name
        assert job["strategy"]["matrix"] == {"stack": DEPLOY_LIST_MATRIX}, name
        assert str(job["if"]).endswith("needs.stacks.outputs.stacks != '[]'"), f"{name}: an empty list must skip the job"


@pytest.mark.parametrize("workflow", ["preview.yml", "deploy.yml", "drift.yml"])
def test_no_workflow_names_a_stack_of_its_own(workflow):
    """A stack named in a workflow is deployed by every fork and every project made from this one."""
    text = "\n".join(line.split(" #")[0] for line in (WORKFLOW_DIR / workflow).read_text().splitlines() if not line.lstrip().startswith("#"))
    named = [stack for stack in example_stacks() if re.search(rf"(?<![\w-]){re.escape(stack)}(?![\w-])", text)]
    assert named == [], f"{workflow} names {named}: list the stacks this repository deploys in DEPLOY_STACKS"


def run_deploy_list(directory: Path, value: str) -> tuple[subprocess.CompletedProcess, str]:
    (step,) = load(DEPLOY_STACKS_ACTION)["runs"]["steps"]
    output = directory / "github-output"
    output.write_text("")
    env = {"DEPLOY_STACKS": value, "GITHUB_OUTPUT": str(output), "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=directory, env=env, capture_output=True, text=True
    )
    return result, output.read_text()


def test_the_list_is_parsed_checked_against_the_checkout_and_empty_by_default(tmp_path):
    for stack in ("dev", "prod-hanoi"):
        (tmp_path / f"Pulumi.{stack}.yaml").write_text("config: {}\n")
        (tmp_path / "policies" / "config").mkdir(parents=True, exist_ok=True)
        (tmp_path / "policies" / "config" / f"{stack}.json").write_text("{}\n")
    result, output = run_deploy_list(tmp_path, "")  # a fork, or a project made with `pulumi new`: no variable
    assert result.returncode == 0 and output == "stacks=[]\n", result.stdout + result.stderr
    assert "deploys no stack" in result.stdout
    result, output = run_deploy_list(tmp_path, "dev, prod-hanoi\n")
    assert result.returncode == 0 and json.loads(output.removeprefix("stacks=")) == ["dev", "prod-hanoi"]
    result, output = run_deploy_list(tmp_path, "dev prod-hcm")  # a stack this checkout has no file for
    assert result.returncode == 1 and output == ""
    assert "::error title=DEPLOY_STACKS::" in result.stdout and "prod-hcm" in result.stdout


# --- what Pulumi is told ------------------------------------------------------------


def pulumi_steps():
    for path in WORKFLOWS:
        for name, job in load(path)["jobs"].items():
            for step in job.get("steps", []):
                if step_uses(step, "pulumi/actions@"):
                    yield path.name, name, step["with"]


def test_every_pulumi_step_pins_one_exact_cli_version_and_logs_in_to_the_backend():
    steps = list(pulumi_steps())
    assert len(steps) == 3  # preview, deploy, drift
    versions = {str(step["pulumi-version"]) for _, _, step in steps}
    toolchain = re.search(r"^CLI_VERSION=v(\S+)$", (ROOT / "scripts" / "install-pulumi.sh").read_text(), re.MULTILINE)
    assert toolchain is not None
    # The engine CI runs is the one the engine tests ran on.
    assert versions == {toolchain.group(1)}
    for workflow, job, step in steps:
        assert step["cloud-url"] == "${{ vars.PULUMI_BACKEND_URL }}", f"{workflow}:{job}"


def test_ci_runs_pulumi_with_the_makefiles_parallelism_and_gogc():
    makefile = (ROOT / "Makefile").read_text()
    settings = dict(re.findall(r"^(PARALLEL|GOGC) \?= (\d+)$", makefile, re.MULTILINE))
    assert set(settings) == {"PARALLEL", "GOGC"}, settings
    steps = list(pulumi_steps())
    assert steps
    for workflow, job, step in steps:
        assert str(step["parallel"]) == settings["PARALLEL"], f"{workflow}:{job}"
        assert load(WORKFLOW_DIR / workflow)["env"]["GOGC"] == settings["GOGC"], workflow


def test_deploys_refresh_first_and_drift_detection_fails_on_changes():
    commands = {(workflow, job): step for workflow, job, step in pulumi_steps()}
    for (workflow, job), step in commands.items():
        if workflow == "deploy.yml":
            assert step["command"] == "up" and step["refresh"] is True, job
    drift = commands[("drift.yml", "drift")]
    assert drift["command"] == "preview" and drift["refresh"] is True and drift["expect-no-changes"] is True
    workflow = load(WORKFLOW_DIR / "drift.yml")
    assert "schedule" in workflow["on"] and "workflow_dispatch" in workflow["on"]
    report = [s for s in workflow["jobs"]["drift"]["steps"] if s.get("name") == "Report the drift"]
    assert report and "failure()" in report[0]["if"]


def test_a_deploy_fails_unless_the_slurm_cluster_is_available():
    jobs = stack_jobs("deploy.yml")
    assert jobs
    for job, matrix, stack, _, steps in jobs:
        (up,) = [i for i, step in enumerate(steps) if step_uses(step, "pulumi/actions@")]
        check = steps[up + 1]
        assert check["uses"] == "./.github/actions/slurm-available", job
        assert resolve(check["with"]["stack"], matrix) == stack


def test_a_deploy_runs_its_stacks_preflight_right_before_the_up():
    """A cluster that lacks something stops the deploy before anything changes (tools/preflight.py)."""
    jobs = stack_jobs("deploy.yml")
    for job, matrix, stack, _, steps in jobs:
        (up,) = [i for i, step in enumerate(steps) if step_uses(step, "pulumi/actions@")]
        preflight = steps[up - 1]
        assert preflight["run"] == 'make preflight STACK="$STACK"', job
        assert resolve(preflight["env"]["STACK"], matrix) == stack
        assert preflight["env"]["KUBECONFIG"] == steps[up]["env"]["KUBECONFIG"]
        assert not credential_secrets(preflight), job


def test_the_availability_check_quotes_the_operator_and_passes_only_ready(tmp_path):
    """slurmReady is every operator's answer (soperator's phase, ACK's state, Slinky's NodeSets): the check reads it,
    not soperator's phase, which ACK and Slinky never report."""
    (step,) = load(ROOT / ".github" / "actions" / "slurm-available" / "action.yml")["runs"]["steps"]
    fake_pulumi = tmp_path / "pulumi"

    def run(outputs: dict) -> subprocess.CompletedProcess:
        fake_pulumi.write_text(f"#!/bin/sh\ncat <<'EOF'\n{json.dumps(outputs)}\nEOF\n")
        fake_pulumi.chmod(0o755)
        env = {"STACK": "prod-hanoi", "PATH": f"{tmp_path}:/usr/bin:/bin"}
        return subprocess.run(["bash", "-eo", "pipefail", "-c", step["run"]], env=env, capture_output=True, text=True)

    unmet = ["WorkersAvailable=False: Slurm workers are not available yet"]
    failed = run({"slurmReady": False, "slurmPhase": "Not available", "slurmUnmetConditions": unmet})
    assert failed.returncode == 1, failed.stderr
    assert "::error title=Slurm of prod-hanoi is Not available, not ready::" in failed.stdout
    assert "WorkersAvailable=False: Slurm workers are not available yet" in failed.stdout
    assert run({"sshCommand": "ssh root@x"}).returncode == 1
    assert run({"slurmReady": None, "slurmPhase": None, "slurmUnmetConditions": []}).returncode == 1
    assert run({"slurmReady": True, "slurmPhase": "Available", "slurmUnmetConditions": []}).returncode == 0
    # Slinky reports no phase: its NodeSets' readiness is the whole answer.
    assert run({"slurmReady": True, "slurmPhase": None, "slurmUnmetConditions": []}).returncode == 0


def test_pull_requests_preview_with_policies_and_comment():
    previews = [(workflow, job, step) for workflow, job, step in pulumi_steps() if workflow == "preview.yml"]
    assert previews
    for _, job, step in previews:
        assert step["command"] == "preview" and step["diff"] is True and step["comment-on-pr"] is True, job


def test_every_policy_config_a_workflow_names_exists():
    named = 0
    for workflow, job, matrix, stack, step in ((w, j, m, s, st) for w in ("preview.yml", "deploy.yml") for (j, m, s, _, st) in stack_jobs(w)):
        (pulumi_step,) = [s for s in step if step_uses(s, "pulumi/actions@")]
        assert resolve(pulumi_step["with"]["policyPacks"], matrix) == "policies"
        config = resolve(pulumi_step["with"]["policyPackConfigs"], matrix)
        assert config == f"policies/config/{stack}.json" and (ROOT / config).is_file(), f"{workflow}:{job}: {config}"
        named += 1
    assert named == 2 * len(DEPLOYED_STACKS)


# --- least privilege for CI credentials -----------------------------------------------

CREDENTIAL_SECRETS = {"KUBECONFIG", "PULUMI_CONFIG_PASSPHRASE", "BACKEND_ACCESS_KEY_ID", "BACKEND_SECRET_ACCESS_KEY"}
ACTIONS = sorted((ROOT / ".github" / "actions").glob("*/action.yml"))
# What installs or runs code fetched from a registry (pip, go, the toolchain script, setup actions).
INSTALLS = re.compile(r"make venv|pip install|go run|go build|install-pulumi|actions/setup-")


def step_text(step: dict[str, Any]) -> str:
    return " ".join(every_text(step))


def credential_secrets(step: dict[str, Any]) -> set[str]:
    return {
        name
        for context, name in ((c, d or i) for text in every_text(step) for e in EXPRESSION.findall(text) for c, d, i in CONTEXT_NAME.findall(e))
        if context == "secrets" and name in CREDENTIAL_SECRETS
    }


def test_previews_run_in_environments_deploy_and_drift_never_use():
    previews = {environment for _, _, _, environment, _ in stack_jobs("preview.yml")}
    assert previews and all(environment.endswith("-preview") for environment in previews), previews
    writers = {environment for workflow in ("deploy.yml", "drift.yml") for _, _, _, environment, _ in stack_jobs(workflow)}
    assert not previews & writers, previews & writers
    readme = CI_DOC.read_text()
    setup = readme[readme.index("## One-time setup per stack") :]
    for stack in DEPLOYED_STACKS:
        assert re.search(rf"`{stack}-preview`[^\n]*read-only", setup), f"{stack}-preview: docs/ci.md must say its credentials are read-only"


@pytest.mark.parametrize("workflow", ["preview.yml", "deploy.yml", "drift.yml"])
def test_credentials_reach_only_pulumi_steps_after_every_install(workflow):
    for job, _, _stack, _, steps in stack_jobs(workflow):
        holders = [i for i, step in enumerate(steps) if credential_secrets(step)]
        assert holders, f"{workflow}:{job} passes no credentials"
        for i in holders:
            step = steps[i]
            assert any(
                step_uses(step, prefix) for prefix in ("pulumi/actions@", "./.github/actions/stack-setup", "./.github/actions/slurm-available")
            ), f"{workflow}:{job} step {i} ({step.get('name') or step.get('uses') or step.get('run')}) gets {credential_secrets(step)}"
        installs = [i for i, step in enumerate(steps) if INSTALLS.search(step_text(step)) and not step_uses(step, "./.github/actions/stack-setup")]
        assert installs and max(installs) < min(holders), f"{workflow}:{job}: an install step runs after credentials are handed out"


def test_the_setup_action_installs_first_and_exports_no_credential():
    for path in ACTIONS:
        steps = load(path)["runs"]["steps"]
        with_credentials = [
            i
            for i, step in enumerate(steps)
            if set(step.get("env", {})) & {"KUBECONFIG_CONTENT", "PULUMI_CONFIG_PASSPHRASE", "BACKEND_ACCESS_KEY_ID", "BACKEND_SECRET_ACCESS_KEY"}
        ]
        installs = [i for i, step in enumerate(steps) if INSTALLS.search(step_text(step))]
        if installs and with_credentials:
            assert max(installs) < min(with_credentials), f"{path.parent.name}: an install step runs after a credential step"
        for i in with_credentials:
            assert "GITHUB_ENV" not in steps[i].get("run", ""), f"{path.parent.name} step {steps[i]['name']} exports credentials to every later step"
    setup = load(SETUP_ACTION)["runs"]["steps"]
    assert any(INSTALLS.search(step_text(step)) for step in setup)


def action_references(path: Path) -> list[tuple[str, str]]:
    """(uses value, the rest of its line) for every `uses:` of a workflow or action file."""
    return re.findall(r"^\s*-?\s*uses:\s*(\S+)(.*)$", path.read_text(), re.MULTILINE)


def test_every_action_is_pinned_by_commit_sha_with_its_tag_in_a_comment():
    references = [(path, uses, rest) for path in [*WORKFLOWS, *ACTIONS] for uses, rest in action_references(path) if not uses.startswith("./")]
    assert len(references) >= 4
    for path, uses, rest in references:
        assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", uses), f"{path.name}: {uses} is not pinned to a commit"
        assert re.fullmatch(r"\s*# v\d+\.\d+\.\d+", rest), f"{path.name}: {uses} needs its release tag in a comment (# vX.Y.Z)"
    # One commit per action across all files, so an upgrade is one change.
    by_action: dict[str, set[str]] = {}
    for _, uses, rest in references:
        by_action.setdefault(uses.split("@")[0], set()).add(uses + rest.strip())
    assert all(len(pins) == 1 for pins in by_action.values()), by_action


def test_the_pin_check_catches_a_tag(tmp_path):
    old = tmp_path / "old.yml"
    old.write_text(
        "jobs:\n  x:\n    steps:\n      - uses: actions/checkout@v4\n      - uses: actions/checkout@11d5960a326750d5838078e36cf38b85af677262 # v4.4.0\n"
    )
    pins = action_references(old)
    assert [bool(re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", uses)) for uses, _ in pins] == [False, True]


# --- the preview account's cluster side ------------------------------------------------

PREVIEW_ACCESS = ROOT / "ci" / "preview-access.yaml"
PREVIEW_USER = "system:serviceaccount:ci:pulumi-preview"


def test_the_preview_role_names_no_subresource_secret_admission_or_rbac_write_and_the_policy_covers_every_one():
    """The file docs/ci.md has an admin apply (tests/test_kube_preview_access.py runs it on an API server)."""
    documents = [document for document in yaml.safe_load_all(PREVIEW_ACCESS.read_text()) if document]
    roles = {d["metadata"]["name"]: d for d in documents if d["kind"] == "ClusterRole"}
    assert set(roles) == {"pulumi-preview"}
    for rule in roles["pulumi-preview"]["rules"]:
        assert "*" not in rule["apiGroups"] and "*" not in rule["verbs"], rule
        assert not [resource for resource in rule["resources"] if "/" in resource], rule
        # escalate and bind would let a dry run's role become a real grant once the policy is gone.
        assert not {"delete", "deletecollection", "impersonate", "escalate", "bind"} & set(rule["verbs"]), rule
        if "*" in rule["resources"]:
            # Only the operators' own API groups, which serve no pods, tokens, evictions or Secrets.
            assert all("." in group and not group.endswith(".k8s.io") for group in rule["apiGroups"]), rule
        # A dry-run patch of a Secret answers with the whole Secret.
        assert "secrets" not in rule["resources"], rule
        # No admission policy runs on admission policies or their bindings, and a role or binding is a grant:
        # the account may only read them.
        if {"admissionregistration.k8s.io", "rbac.authorization.k8s.io"} & set(rule["apiGroups"]):
            assert set(rule["verbs"]) == {"get", "list", "watch"}, rule
    cluster_bindings = [d for d in documents if d["kind"] == "ClusterRoleBinding"]
    assert [b["roleRef"]["name"] for b in cluster_bindings] == ["pulumi-preview"]
    (policy,) = [d for d in documents if d["kind"] == "ValidatingAdmissionPolicy"]
    (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rule["resources"] == ["*/*"] and rule["operations"] == ["*"] and rule["apiGroups"] == ["*"]
    assert policy["spec"]["failurePolicy"] == "Fail"
    (condition,) = policy["spec"]["matchConditions"]
    assert condition["expression"] == f'request.userInfo.username == "{PREVIEW_USER}"'
    assert [v["expression"] for v in policy["spec"]["validations"]] == ["request.dryRun == true"]
    (binding,) = [d for d in documents if d["kind"] == "ValidatingAdmissionPolicyBinding"]
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}
    readme = CI_DOC.read_text()
    assert "kubectl apply --server-side -f ci/preview-access.yaml" in readme[readme.index("## One-time setup per stack") :]

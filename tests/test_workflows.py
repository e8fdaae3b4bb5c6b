"""CI workflow files: valid against GitHub's workflow schema, covering every stack."""

import subprocess
import sys
from pathlib import Path

import yaml

from tests.harness import ROOT, example_stacks

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
# `local` renders to a directory and `kwok` deploys to the loopback test cluster: neither is deployed by CI.
DEPLOYED_STACKS = [s for s in example_stacks() if s not in ("local", "kwok")]


def test_workflows_validate_against_the_github_workflow_schema():
    assert WORKFLOWS
    checker = Path(sys.executable).with_name("check-jsonschema")
    result = subprocess.run(
        [str(checker), "--builtin-schema", "vendor.github-workflows", *map(str, WORKFLOWS)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_schema_check_catches_a_broken_workflow(tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text("on: push\njobs:\n  x:\n    steps: []\n")  # no runs-on
    checker = Path(sys.executable).with_name("check-jsonschema")
    result = subprocess.run([str(checker), "--builtin-schema", "vendor.github-workflows", str(broken)], capture_output=True, text=True)
    assert result.returncode != 0


def _pulumi_steps(workflow):
    jobs = yaml.safe_load((ROOT / ".github" / "workflows" / workflow).read_text())["jobs"]
    return {name: [s for s in job["steps"] if s.get("uses", "").startswith("pulumi/actions@")] for name, job in jobs.items()}, jobs


def test_pull_requests_preview_every_stack_with_policies_and_comment():
    steps, jobs = _pulumi_steps("preview.yml")
    (step,) = steps["preview"]
    assert sorted(jobs["preview"]["strategy"]["matrix"]["stack"]) == sorted(DEPLOYED_STACKS)
    assert step["with"]["command"] == "preview" and step["with"]["diff"] is True and step["with"]["comment-on-pr"] is True
    assert step["with"]["policyPacks"] == "policies"
    assert step["with"]["cloud-url"] == "${{ vars.PULUMI_BACKEND_URL }}"


def test_merges_deploy_each_environment_with_approval_for_production():
    steps, jobs = _pulumi_steps("deploy.yml")
    assert jobs["production"]["environment"] == "production" and jobs["production"]["needs"] == "dev"
    deployed = ["dev"] + jobs["production"]["strategy"]["matrix"]["stack"]
    assert sorted(deployed) == sorted(DEPLOYED_STACKS)
    for job_steps in steps.values():
        assert [s["with"]["command"] for s in job_steps] == ["up"]


def test_every_policy_config_a_workflow_names_exists():
    for stack in DEPLOYED_STACKS:
        assert (ROOT / "policies" / "config" / f"{stack}.json").is_file(), stack

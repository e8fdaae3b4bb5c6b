"""`pulumi new` from this repository (Pulumi.yaml's `template:`, docs/getting-started.md), with the
CLI the project builds: the prompts' answers make a stack, and that stack previews.

Offline, as every test here: `pulumi new` installs the project's dependencies last (`python -m
venv`, then pip from the package index), so the test's python stands in for that step only. It
makes the virtualenv directory and records the pip commands instead of running them; the preview
then runs on the project's own virtualenv, where every requirement is installed. The operator
charts come from local chart fixtures, as in the engine tests, because the vendors' repositories
are out of reach."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from components.config import PROJECT, parse_config
from tests.contracts import SOPERATOR_CRD
from tests.engine import FILE_BACKEND_QUERY, PASSPHRASE, ToolchainError, config_map, toolchain_env, write_chart
from tests.harness import ROOT, tracked_files

STACK = "trial"
# The charts a stack with the template's defaults installs (accounting on the MariaDB operator).
CHARTS: dict[str, list[tuple[str, str, tuple[Path, ...]]]] = {
    "gpuOperator": [("gpu-operator", "v26.7.0", ())],
    "networkOperator": [("network-operator", "24.10.1", ())],
    "soperator": [("helm-soperator-crds", "1.14.10", (SOPERATOR_CRD,)), ("helm-soperator", "1.14.10", ())],
    "mariadbOperator": [("mariadb-operator", "0.29.0", ())],
}

# `python -m venv DIR` makes DIR a virtualenv whose python records `-m pip install ...` in $PIP_LOG and
# runs everything else on the project's interpreter.
PYTHON_STAND_IN = """#!/bin/bash
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
  echo "venv $3" >> "$PIP_LOG"
  mkdir -p "$3/bin"
  printf '#!/bin/bash\\nif [ "$1 $2 $3" = "-m pip install" ]; then echo "$*" >> %q; exit 0; fi\\nexec %q "$@"\\n' "$PIP_LOG" "$REAL_PYTHON" > "$3/bin/python"
  chmod +x "$3/bin/python"
  exit 0
fi
exec "$REAL_PYTHON" "$@"
"""


def clean_copy(target: Path) -> Path:
    """The repository as a clone has it (docs/getting-started.md: `pulumi new` copies what is on disk)."""
    for path in tracked_files():
        if path.is_file():
            destination = target / path.relative_to(ROOT)
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, destination)
    return target


def template_prompts() -> dict[str, dict[str, str]]:
    return yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["template"]["config"]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    try:
        base = toolchain_env()
    except ToolchainError as error:
        pytest.fail(str(error))
    root = tmp_path_factory.mktemp("template")
    (root / "state").mkdir()
    stand_in = root / "bin" / "python"
    stand_in.parent.mkdir()
    stand_in.write_text(PYTHON_STAND_IN)
    stand_in.chmod(0o755)
    return root, {
        **base,
        "PULUMI_BACKEND_URL": f"file://{root / 'state'}?{FILE_BACKEND_QUERY}",
        "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "NO_COLOR": "1",
        "PULUMI_PYTHON_CMD": str(stand_in),
        "REAL_PYTHON": sys.executable,
        "PIP_LOG": str(root / "pip.log"),
    }


def pulumi(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess:
    result = subprocess.run(["pulumi", *args, "--non-interactive"], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"pulumi {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
    return result


def test_the_template_prompts_for_top_level_keys_whose_defaults_the_config_accepts():
    prompts = template_prompts()
    assert {key.split(":", 1)[0] for key in prompts} == {PROJECT}
    raw = {key.split(":", 1)[1]: yaml.safe_load(prompt["default"]) for key, prompt in prompts.items()}
    assert {"environment", "cloud", "region", "slurmOperator", "kubernetes"} <= set(raw)
    assert all(prompt["description"] for prompt in prompts.values())
    config = parse_config(raw)
    assert config.render_only  # the default stack renders to a directory: it previews with no cluster


def template_first_steps() -> list[str]:
    """The numbered steps of getting-started's `pulumi new` section: what a new project does first."""
    page = (ROOT / "docs/getting-started.md").read_text()
    section = page.split("## `pulumi new`: a stack from this repository", 1)[1].split("\n## ", 1)[0]
    return [step for step in section.split("\n\n") if step[:2] in {f"{n}." for n in range(1, 10)}][0].split("\n")


def test_the_templates_first_steps_run_the_preflight_before_the_deploy():
    steps = " ".join(template_first_steps())
    assert "make preflight STACK=<stack>" in steps, "docs/getting-started.md's `pulumi new` steps lost the preflight"
    assert steps.index("make preflight STACK=<stack>") < steps.index("make preview STACK=<stack>") < steps.index("pulumi up")
    # Pulumi.yaml's own note on the template says so too, beside the prompts.
    note = (ROOT / "Pulumi.yaml").read_text().split("\ntemplate:", 1)[0]
    assert note.index("make preflight STACK=<stack>") < note.index("make preview STACK=<stack>") < note.index("pulumi up")


def test_pulumi_new_makes_a_stack_from_the_prompts_that_previews(env):
    root, environment = env
    template = clean_copy(root / "template")
    charts = root / "charts"
    for name, version, crds in (chart for releases in CHARTS.values() for chart in releases):
        write_chart(charts, name, version, [config_map(f"{name}-fixture")], crds=crds)
    project = root / "new"
    pulumi(
        environment,
        "new", str(template), "--dir", str(project), "--stack", STACK, "--yes", "--secrets-provider", "passphrase",
        "--config-path", "-c", f"{PROJECT}:region=hcm",
        *(arg for key in CHARTS for arg in ("-c", f"{PROJECT}:operators.{key}.repository={charts}")),
        cwd=root,
    )  # fmt: skip

    assert "template" not in yaml.safe_load((project / "Pulumi.yaml").read_text())
    config = yaml.safe_load((project / f"Pulumi.{STACK}.yaml").read_text())["config"]
    expected = {key: prompt["default"] for key, prompt in template_prompts().items()} | {f"{PROJECT}:region": "hcm"}
    assert {key: value for key, value in config.items() if key in expected} == expected
    assert {key: config[f"{PROJECT}:operators"][key]["repository"] for key in CHARTS} == dict.fromkeys(CHARTS, str(charts))
    steps = (root / "pip.log").read_text().splitlines()
    assert steps[0].startswith("venv ") and "-m pip install -r requirements.txt" in steps, steps  # it installs our requirements
    assert not {".pulumi-state", "rendered", ".pytest_cache", "__pycache__"} & {p.name for p in project.rglob("*")}

    # The dependencies went to .venv, as Pulumi.yaml's runtime.options.virtualenv says (the toolchain's host
    # is handed it: scripts/toolchain/pulumi-language-python/wrapper), and the preview runs there: the
    # stand-in's virtualenv python runs the project's interpreter.
    assert steps[0] == f"venv {project / '.venv'}", steps
    environment = {key: value for key, value in environment.items() if key != "PULUMI_PYTHON_CMD"}
    preview = pulumi(environment, "preview", "--stack", STACK, "--json", cwd=project)
    planned = json.loads(preview.stdout)["steps"]
    created = {step["urn"].rsplit("::", 1)[1] for step in planned if step["op"] == "create"}
    assert {"slurm-cluster", "storage-jail-pvc", "munge-secret"} <= created, sorted(created)
    assert {name for name in created if name.endswith("-fixture")}, "the operator charts were not rendered"
    assert all(step["urn"].split("::")[0] == f"urn:pulumi:{STACK}" for step in planned)


def test_pulumi_new_copies_what_is_on_disk_so_the_docs_say_to_use_a_clean_copy(env):
    """The CLI skips only .git: an ignored directory in the template's folder lands in the new project."""
    root, environment = env
    template = clean_copy(root / "checkout")
    (template / ".pulumi-state").mkdir()
    (template / ".pulumi-state" / "stack.json").write_text("{}")
    project = root / "from-checkout"
    pulumi(environment, "new", str(template), "--dir", str(project), "--yes", "--generate-only", cwd=root)
    assert (project / ".pulumi-state" / "stack.json").exists()
    assert (project / "__main__.py").exists() and not (project / ".git").exists()

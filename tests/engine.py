"""The real Pulumi engine on a copy of the project: toolchain, workspace, commands.

Shared by the engine tests (tests/test_engine*.py) and benchmarks/engine.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import yaml

from tests.harness import ROOT

PASSPHRASE = "local-throwaway-passphrase"  # the documented passphrase of the local stack only
FILE_BACKEND_QUERY = "metadata=skip"  # no fileblob sidecars: see the Makefile's LOCAL_ENV
PROJECT_FILES = ["Pulumi.yaml", "Pulumi.local.yaml", "Pulumi.kwok.yaml", "__main__.py", "components", "policies"]


class ToolchainError(RuntimeError):
    pass


def toolchain_env() -> dict[str, str]:
    """Our environment plus the project's Pulumi toolchain, built (once) by scripts/install-pulumi.sh.

    Raises ToolchainError where it cannot be built: engine tests then fail, never skip.
    """
    built = subprocess.run([str(ROOT / "scripts" / "install-pulumi.sh")], capture_output=True, text=True)
    if built.returncode != 0:
        raise ToolchainError(f"the Pulumi toolchain could not be built:\n{built.stderr[-4000:]}")
    env_file = built.stdout.strip().splitlines()[-1]
    sourced = subprocess.run(["bash", "-c", f'. "{env_file}" && env -0'], capture_output=True, text=True, check=True)
    env = dict(entry.split("=", 1) for entry in sourced.stdout.split("\0") if "=" in entry)
    # The language host runs the program on the project's .venv (Pulumi.yaml); with a virtualenv it reads
    # this variable as a name inside the virtualenv's bin/, so an absolute path from the caller breaks it.
    env.pop("PULUMI_PYTHON_CMD", None)
    return env


class Workspace:
    def __init__(self, root: Path):
        self.root = root
        self.project = root / "project"
        self.state = root / "state"
        self.env = {
            **toolchain_env(),
            # As the Makefile's LOCAL_ENV, which says why.
            "PULUMI_BACKEND_URL": f"file://{self.state}?{FILE_BACKEND_QUERY}",
            "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "NO_COLOR": "1",
        }
        # Everything the engine printed, for the tests that look for leaked secrets and plugin trouble.
        self.transcript: list[str] = []
        self.timeout = 600.0  # seconds per command; the scale benchmark's stacks of 2,000 resources need more

    def pulumi(self, *args: str, check: bool = True, stack: str | None = "local") -> subprocess.CompletedProcess:
        result = subprocess.run(
            ["pulumi", *args, *(["--stack", stack] if stack else []), "--non-interactive"],
            cwd=self.project,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=self.timeout,
        )
        self.transcript.append(result.stdout + result.stderr)
        if check and result.returncode != 0:
            raise AssertionError(f"pulumi {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
        return result

    @contextmanager
    def config_set(self, path: str, value: str, stack: str = "local") -> Iterator[None]:
        """`pulumi config set --path slurm-platform:<path> <value>` for the duration of the block."""
        config_file = self.project / f"Pulumi.{stack}.yaml"
        original = config_file.read_text()
        self.pulumi("config", "set", "--path", f"slurm-platform:{path}", value, stack=stack)
        try:
            yield
        finally:
            config_file.write_text(original)

    def preview_steps(self, stack: str = "local") -> list[dict]:
        result = self.pulumi("preview", "--json", stack=stack)
        return json.loads(result.stdout).get("steps", [])

    def state_file(self, stack: str = "local") -> Path:
        return self.state / ".pulumi" / "stacks" / "slurm-platform" / f"{stack}.json"

    def rendered(self, directory: str = "rendered") -> list[dict]:
        manifests = []
        for path in sorted((self.project / directory).rglob("*.yaml")):
            manifests += [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
        return manifests


def new_workspace(root: Path, stack: str = "local", program: Optional[dict[str, str]] = None) -> Workspace:
    """A copy of the project in `root` with its own file backend and an initialised stack.

    `program` (file name -> text) replaces the project's files with another program run on the same virtualenv.
    """
    workspace = Workspace(root)
    workspace.project.mkdir(parents=True)
    if program is not None:
        for name, text in program.items():
            (workspace.project / name).write_text(text)
    else:
        for name in PROJECT_FILES:
            source = ROOT / name
            target = workspace.project / name
            if source.is_dir():
                shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "venv"))
            else:
                shutil.copy(source, target)
        # The policy pack's own virtualenv (PulumiPolicy.yaml: virtualenv: venv), built by `make policy-venv`.
        (workspace.project / "policies" / "venv").symlink_to(ROOT / "policies" / "venv")
    (workspace.project / ".venv").symlink_to(ROOT / ".venv")
    workspace.state.mkdir()
    workspace.pulumi("stack", "init", stack, "--secrets-provider", "passphrase", stack=None)
    return workspace


# Chart fixtures: a local chart directory per operator, for stacks whose charts the tests cannot download.
def write_chart(directory: Path, name: str, version: str, objects: list[dict], crds: Sequence[Path] = ()) -> None:
    chart = directory / name
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text(yaml.safe_dump({"apiVersion": "v2", "name": name, "version": version.lstrip("v")}))
    (chart / "values.yaml").write_text("{}\n")
    (chart / "templates" / "objects.yaml").write_text(yaml.safe_dump_all(objects))
    if crds:
        (chart / "crds").mkdir()
        for crd in crds:
            shutil.copy(crd, chart / "crds" / crd.name)


def config_map(name: str) -> dict:
    # `.Release.Namespace` proves the chart is rendered into the namespace we asked for.
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "{{ .Release.Namespace }}"},
        "data": {"values": "{{ toJson .Values | b64enc }}"},
    }

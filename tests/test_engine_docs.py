"""The README's deploy sequences run as written, in a clean copy of the repository, the way a reader
types them: each `sh` block that starts with the toolchain line, line by line in one bash.

Only what is the reader's own is stood in for: the state backend becomes a local `file://` one, the
passphrase a throwaway, the bucket's keys are not needed, there is no cluster (so no kubeconfig and no
preflight: tests/test_kube_preflight.py runs that one), `pulumi up` is confirmed as a reader answers
its prompt, and the copied stack file gets the reader's edit, here one that needs no cluster: render
to a directory, operators and Prometheus from a portal, no LDAP (over TLS, which the policy pack requires, it reads
its CA from the cluster) and so no tenants' researchers. Every other line, `make` and `pulumi` alike, runs exactly as the page
has it. The shell has neither PULUMI_PYTHON_CMD nor a virtualenv on PATH: a reader's has none."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from components.config import PROJECT
from tests.engine import FILE_BACKEND_QUERY, PASSPHRASE
from tests.harness import ROOT
from tests.test_engine_template import clean_copy

TOOLCHAIN_LINE = '. "$(scripts/install-pulumi.sh)"'
SH_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.S | re.M)
STACK_COPY = re.compile(r"^cp Pulumi\.([\w-]+)\.yaml Pulumi\.([\w-]+)\.yaml")


def deploy_sequences(page: Path) -> list[list[str]]:
    """The `sh` blocks of a page that set up the toolchain and end in a `pulumi up`, as lists of lines."""
    blocks = [block.splitlines() for block in SH_BLOCK.findall(page.read_text())]
    return [lines for lines in blocks if lines and lines[0].startswith(TOOLCHAIN_LINE) and lines[-1].startswith("pulumi up")]


def command(line: str) -> str:
    return re.sub(r"\s+#.*$", "", line).strip()


def as_a_reader_runs_it(line: str, state: Path) -> list[str]:
    """The line as typed, or what stands in for the reader's own infrastructure."""
    text = command(line)
    if text.startswith("export PULUMI_BACKEND_URL="):
        return [f"export PULUMI_BACKEND_URL='file://{state}?{FILE_BACKEND_QUERY}'"]
    if text.startswith("export PULUMI_CONFIG_PASSPHRASE="):
        return [f"export PULUMI_CONFIG_PASSPHRASE={PASSPHRASE}"]
    if text.startswith(("export AWS_ACCESS_KEY_ID=", "export KUBECONFIG=", "make preflight ")):
        return []  # the bucket's keys and the cluster: the reader's own
    if text.startswith("pulumi up "):
        return ["export PULUMI_SKIP_CONFIRMATIONS=true", text]  # the reader answers the prompt
    copied = STACK_COPY.match(text)
    if copied:
        return [text, f"render_to_a_directory Pulumi.{copied.group(2)}.yaml"]
    return [text]


# The reader's edit of the copied stack file, in the shell: no cluster, operators from a portal.
EDIT = f"""render_to_a_directory() {{
  "$READER_PYTHON" - "$1" <<'PY'
import sys, yaml
path, key = sys.argv[1], "{PROJECT}:{{}}".format
stack = yaml.safe_load(open(path))
config = stack["config"]
config[key("kubernetes")] = {{"renderYamlToDirectory": "rendered"}}
for operator in config.get(key("operators"), {{}}).values():
    operator["install"] = False
if key("monitoring") in config:  # and the cluster's own Prometheus Operator
    config[key("monitoring")].setdefault("prometheus", {{}})["install"] = False
config[key("ldap")] = {{"enabled": False}}  # LDAP over TLS reads its CA from the cluster,
config.pop(key("tenants"), None)  # and tenants' researchers log in through LDAP
open(path, "w").write(yaml.safe_dump(stack))
PY
}}
"""


def reader_environment(home: Path) -> dict[str, str]:
    """A login shell's: no virtualenv and no PULUMI_PYTHON_CMD; the toolchain cache as the tests use it."""
    venv_bin = str(ROOT / ".venv" / "bin")
    path = [entry for entry in os.environ["PATH"].split(os.pathsep) if entry and not entry.startswith(venv_bin)]
    keep = ("HOME", "GOPATH", "GOCACHE", "GOMODCACHE", "SLURM_PLATFORM_TOOLCHAIN", "LANG")
    return {
        **{key: os.environ[key] for key in keep if key in os.environ},
        "PATH": os.pathsep.join(path),
        "NO_COLOR": "1",
        "READER_PYTHON": str(ROOT / ".venv" / "bin" / "python"),
    }


def test_the_readme_has_a_deploy_sequence_per_cloud():
    sequences = deploy_sequences(ROOT / "README.md")
    assert len(sequences) == 2, "FPT and ACK"
    assert all(any(STACK_COPY.match(command(line)) for line in lines) for lines in sequences)


@pytest.mark.parametrize("index", [0, 1], ids=["fpt", "ack"])
def test_the_readmes_deploy_sequence_runs_as_written(tmp_path, index):
    lines = deploy_sequences(ROOT / "README.md")[index]
    project = clean_copy(tmp_path / "clone")
    # What `make` built in this checkout, with the requirements it was built from (make finds it current).
    (project / ".venv").symlink_to(ROOT / ".venv")
    (project / "policies" / "venv").symlink_to(ROOT / "policies" / "venv")
    made = min((ROOT / stamp).stat().st_mtime for stamp in (".venv/.installed", "policies/venv/.installed"))
    for requirements in ("requirements.txt", "requirements-dev.txt", "policies/requirements.txt"):
        os.utime(project / requirements, (made - 1, made - 1))
    state = tmp_path / "state"
    state.mkdir()
    steps = [f"echo {shlex.quote('+ ' + command(line))}\n" + "\n".join(as_a_reader_runs_it(line, state)) for line in lines]
    script = "set -euo pipefail\n" + EDIT + "\n".join(steps)
    result = subprocess.run(["bash", "-c", script], cwd=project, env=reader_environment(tmp_path), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{result.stdout[-6000:]}\n{result.stderr[-6000:]}"
    stack = STACK_COPY.match(next(command(line) for line in lines if STACK_COPY.match(command(line)))).group(2)  # type: ignore[union-attr]
    assert (state / ".pulumi" / "stacks" / PROJECT / f"{stack}.json").exists()
    assert list((project / "rendered").rglob("*.yaml")), "the up rendered no manifest"

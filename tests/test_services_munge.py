"""Real munged (Debian's munge) on the key an engine `up` of the `local` stack generated,
as the Secret the pods mount holds it: `munge -n | unmunge` succeeds, at the key path of
soperator's pods and at the path ACK's SlurmCluster names (`mungeConfPath`)."""

from __future__ import annotations

import base64
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from components.config import parse_config
from components.render.munge import MUNGE_KEY_FIELD, munge_secret_name
from components.slurm import ack
from tests.engine import ToolchainError, new_workspace
from tests.harness import stack_config
from tests.services import GENERATIONS, SlurmLab, require_packages
from tests.test_engine import generated_secrets


@pytest.fixture(scope="module")
def mounted_key(tmp_path_factory) -> bytes:
    """The munge.key file a pod sees: the rendered Secret's data, checked against the generated value."""
    require_packages()
    try:
        ws = new_workspace(tmp_path_factory.mktemp("munge-engine"))
    except ToolchainError as error:
        pytest.fail(str(error))
    ws.pulumi("up", "--yes", "--skip-preview")
    generated = generated_secrets(ws)["munge-key"]
    (secret,) = [m for m in ws.rendered() if m["kind"] == "Secret" and m["metadata"]["name"] == munge_secret_name("fpt-hpc")]
    data = secret.get("data", {}).get(MUNGE_KEY_FIELD)
    key = base64.b64decode(data) if data else secret["stringData"][MUNGE_KEY_FIELD].encode()
    assert key == generated.encode() and len(key) == 1024
    return key


@pytest.fixture(params=list(GENERATIONS))
def lab(request):
    """munge of each Slurm generation's root filesystem."""
    # Not under pytest's 0700 temporary directory: munged (user munge) checks every parent of its files.
    root = Path(tempfile.mkdtemp(prefix="slurm-platform-munge-"))
    root.chmod(0o755)
    lab = SlurmLab(root, "munge", request.param)
    try:
        yield lab
    finally:
        lab.close()
        shutil.rmtree(root)


def credential_round_trip(lab: SlurmLab) -> None:
    result = lab.run("sh", "-c", "munge -n | unmunge")
    assert re.search(r"^STATUS: +Success \(0\)$", result.stdout, re.M), result.stdout + result.stderr


def test_munged_runs_on_the_key_the_engine_generated(lab, mounted_key):
    lab.munged(mounted_key)
    credential_round_trip(lab)
    # The key is what decides: a credential made with it is refused by a munged with another key.
    credential = lab.run("munge", "-n").stdout
    lab.stop("munged")
    lab.munged(bytes(reversed(mounted_key)))
    refused = lab.run("unmunge", input=credential, check=False)
    assert refused.returncode != 0 and "Invalid credential" in refused.stderr, refused.stdout + refused.stderr


def test_munged_runs_on_the_key_at_acks_munge_conf_path(lab, mounted_key):
    key_path = ack.munge_conf_path(parse_config(stack_config("staging-hangzhou")))
    assert key_path == "/var/munge/munge.key"
    # A /var of the lab's own (a tmpfs in its namespace), on the host's tree and the generation's, where the
    # lab binds its files: the Secret's mount point exists there only.
    for top in ("", str(lab.fs)):
        lab.run("mount", "-t", "tmpfs", "-o", "mode=0755", "lab-var", f"{top}/var", host=True)
        lab.run("mkdir", "-p", f"{top}{Path(key_path).parent}", host=True)
    lab.munged(mounted_key, key_path=key_path)
    credential_round_trip(lab)
    assert lab.run("cat", key_path).stdout.encode() == mounted_key

"""scripts/kube-local.sh keeps its throwaway control plane to itself: a random
admin token on every start, etcd reachable only over TLS with a certificate of
its own CA, every file of a run private (0600), and `stop` killing only the
processes it started (a PID reused by another process is left alone).

One control plane for the module (started and stopped by PID, pass or fail);
the PID test needs none.
"""

from __future__ import annotations

import http.client
import re
import ssl
import stat
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.kube import SCRIPT, LocalCluster, wait_until

OLD_CONSTANT_TOKEN = "slurm-platform-local-admin"


def ports(cluster: LocalCluster) -> dict[str, int]:
    text = (cluster.run_dir / "ports.env").read_text()
    return {key: int(value) for key, value in re.findall(r"^([A-Z_]+)=(\d+)$", text, re.MULTILINE)}


def admin_token(cluster: LocalCluster) -> str:
    return (cluster.run_dir / "pki" / "tokens.csv").read_text().split(",")[0]


def api_status(cluster: LocalCluster, token: str) -> int:
    context = ssl.create_default_context(cafile=str(cluster.run_dir / "pki" / "ca.crt"))
    request = urllib.request.Request(f"https://127.0.0.1:{ports(cluster)['API_PORT']}/api", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_every_file_of_a_run_is_private(cluster):
    pki = cluster.run_dir / "pki"
    files = [cluster.kubeconfig, *sorted(pki.iterdir())]
    names = {path.name for path in files}
    assert {"kubeconfig", "tokens.csv", "ca.key", "sa.key", "etcd.key", "etcd-client.key"} <= names, names
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, f"{path} is {oct(stat.S_IMODE(path.stat().st_mode))}"
    for directory in (cluster.run_dir, pki, cluster.run_dir / "etcd"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory


def test_etcd_takes_only_clients_with_a_certificate_of_its_own_ca(cluster):
    port = ports(cluster)["ETCD_PORT"]
    pki = cluster.run_dir / "pki"
    # Plain HTTP: no answer at all.
    with pytest.raises((http.client.HTTPException, ConnectionError, urllib.error.URLError)):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10)
    url = f"https://127.0.0.1:{port}/health"
    # TLS without a client certificate, and with the API server's own certificate (another CA): refused.
    for cert in (None, ("apiserver.crt", "apiserver.key")):
        context = ssl.create_default_context(cafile=str(pki / "etcd-ca.crt"))
        if cert:
            context.load_cert_chain(str(pki / cert[0]), str(pki / cert[1]))
        with pytest.raises((ssl.SSLError, ConnectionError, urllib.error.URLError)):
            urllib.request.urlopen(url, context=context, timeout=10).read()
    context = ssl.create_default_context(cafile=str(pki / "etcd-ca.crt"))
    context.load_cert_chain(str(pki / "etcd-client.crt"), str(pki / "etcd-client.key"))
    with urllib.request.urlopen(url, context=context, timeout=10) as response:
        assert b'"health":"true"' in response.read()


def test_the_admin_token_is_random_and_new_on_every_start(cluster):
    first = admin_token(cluster)
    assert re.fullmatch(r"[0-9a-f]{64}", first) and first != OLD_CONSTANT_TOKEN
    assert f"token: {first}" in cluster.kubeconfig.read_text()
    assert api_status(cluster, first) == 200
    assert api_status(cluster, OLD_CONSTANT_TOKEN) == 401
    cluster.stop()
    cluster.start()
    second = admin_token(cluster)
    assert second != first and f"token: {second}" in cluster.kubeconfig.read_text()
    assert api_status(cluster, second) == 200
    assert api_status(cluster, first) == 401  # the last run's token is dead


def start_time(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]


def test_stop_kills_only_the_process_it_started(tmp_path):
    pids = tmp_path / "pids"
    pids.mkdir()
    bystander = subprocess.Popen(["sleep", "120"])
    try:
        # The PID file names this PID but another start time: the PID was reused, not ours.
        (pids / "etcd.pid").write_text(f"{bystander.pid} {int(start_time(bystander.pid)) + 1}\n")
        result = subprocess.run([str(SCRIPT), "stop", str(tmp_path)], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        assert f"etcd: pid {bystander.pid} is no longer the process this script started; not killing it" in result.stderr
        time.sleep(0.5)
        assert bystander.poll() is None and not (pids / "etcd.pid").exists()
        # With its own start time it is the process the file names, and stop ends it.
        (pids / "etcd.pid").write_text(f"{bystander.pid} {start_time(bystander.pid)}\n")
        result = subprocess.run([str(SCRIPT), "stop", str(tmp_path)], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        wait_until("the named process to stop", lambda: bystander.poll() is not None, timeout=20)
        assert not (pids / "etcd.pid").exists()
    finally:
        bystander.kill()
        bystander.wait()

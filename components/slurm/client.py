"""A pod beside the cluster that runs Slurm's client commands (sacctmgr, scontrol, sacct) as root, who sees
every job whatever PrivateData hides from tenants: the tenants Job (components/tenancy/) and the usage
report CronJob (components/monitoring/report.py). The operator's client image and auth (`AccountingClient`),
a client slurm.conf (common.client_slurm_conf), and what signs its requests: munged or sackd on the key, in the
client's container (the tenants Job on ACK and Slinky) or in an auth sidecar, the only container that mounts the
key (the report, the Slurm exporter of components/monitoring/exporter.py, soperator's separate munge image); never
a Kubernetes token."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config import PlatformConfig
from . import AccountingClient
from .common import KEY_DIR, MUNGE_SOCKET, SACK_SOCKET, munged_lines, system_placement, system_priority_class_name

# Where the pod finds its script and client slurm.conf (a ConfigMap); the key is at common.KEY_DIR.
SCRIPT_DIR = "/tenants"


def signs_in_sidecar(client: AccountingClient, key_in_sidecar: bool) -> bool:
    """Whether munged or sackd runs in the auth sidecar: where asked, and always with soperator's separate munge image."""
    return key_in_sidecar or client.munge_image is not None


def auth_socket_dir(client: AccountingClient) -> str:
    """Where the auth sidecar's socket is, which the client commands beside it sign through."""
    return str(Path(MUNGE_SOCKET if client.auth == "auth/munge" else SACK_SOCKET).parent)


def auth_command(client: AccountingClient, config_dir: str) -> str:
    """The sidecar's shell: munged (soperator's munge image, or the cluster image's) or sackd, in the foreground, on the key."""
    if client.munge_image:
        # munged wants a plain root-owned 0400 file in a private directory, not the Secret's symlink.
        return f"install -m 0400 {KEY_DIR}/key /etc/munge/munge.key && exec munged -F -S {MUNGE_SOCKET}"
    if client.auth == "auth/munge":
        return " && ".join(munged_lines(f"{KEY_DIR}/key", foreground=True))
    # sackd reads slurm.conf, and auth/slurm's key beside it.
    return " && ".join(
        [
            "install -d /etc/slurm",
            f"cp {config_dir}/slurm.conf /etc/slurm/slurm.conf",
            f"install -m 0400 {KEY_DIR}/key /etc/slurm/slurm.key",
            "exec sackd -D",
        ]
    )


def auth_sidecar(client: AccountingClient, config_volume: str, config_dir: str) -> dict[str, Any]:
    """The only container that mounts the key: a native sidecar (an init container that keeps running) that starts
    before the client and ends with it. It runs as its image's root, which munged and sackd need to lay their files
    out; sackd reads the client slurm.conf from `config_volume`, mounted at `config_dir`."""
    mounts = [{"name": "auth-key", "mountPath": KEY_DIR, "readOnly": True}, {"name": "auth-socket", "mountPath": auth_socket_dir(client)}]
    if client.auth == "auth/slurm":
        mounts.append({"name": config_volume, "mountPath": config_dir, "readOnly": True})
    return {
        "name": "auth",
        "image": client.munge_image or client.image,
        "restartPolicy": "Always",
        "command": ["/bin/sh", "-c", auth_command(client, config_dir)],
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "200m", "memory": "128Mi"}},
        "securityContext": {"allowPrivilegeEscalation": False},
        "volumeMounts": mounts,
    }


def auth_setup(client: AccountingClient, key_in_sidecar: bool = False) -> list[str]:
    """Shell lines a client's script starts with: its slurm.conf in place, then what signs its requests (the
    sidecar's socket awaited, or munged or sackd started here on the key)."""
    lines = [f"install -d /etc/slurm && cp {SCRIPT_DIR}/slurm.conf /etc/slurm/slurm.conf"]
    if signs_in_sidecar(client, key_in_sidecar):
        socket, daemon = (MUNGE_SOCKET, "munged") if client.auth == "auth/munge" else (SACK_SOCKET, "sackd")
        return lines + [f"until [ -S {socket} ]; do echo waiting for {daemon}; sleep 1; done"]
    if client.auth == "auth/munge":
        return lines + munged_lines(f"{KEY_DIR}/key")
    # auth/slurm signs with the key only inside Slurm's daemons: a client such as sacctmgr asks sackd, over its socket,
    # so the script runs one on the key (as Slinky's login pods do); it ends with the container. sackd detaches before
    # reading slurm.conf: if no socket comes, the client below says why (a bad config, or no sackd).
    return lines + [
        f"install -m 0400 {KEY_DIR}/key /etc/slurm/slurm.key",
        "sackd",
        f"for _ in $(seq 5); do [ -S {SACK_SOCKET} ] && break; echo waiting for sackd; sleep 1; done",
    ]


def client_pod_spec(
    config: PlatformConfig, client: AccountingClient, name: str, script: str, config_map: str, key_in_sidecar: bool = False
) -> dict[str, Any]:
    """The PodSpec of a client pod: container `name` runs `script` (bash) from `config_map`, mounted at SCRIPT_DIR
    with its client slurm.conf; the key in an auth sidecar where `key_in_sidecar` (always for soperator's munge image),
    else in that container."""
    sidecar = signs_in_sidecar(client, key_in_sidecar)
    own_auth = (
        [{"name": "auth-socket", "mountPath": auth_socket_dir(client)}] if sidecar else [{"name": "auth-key", "mountPath": KEY_DIR, "readOnly": True}]
    )
    pod_spec: dict[str, Any] = {
        # It talks to Slurm only, never to the API server.
        "automountServiceAccountToken": False,
        **system_placement(config),
        # Tenants come with soperator 4.x, ACK or Slinky, which all declare the class: no tenant pod outranks it.
        "priorityClassName": system_priority_class_name(config),
        "containers": [
            {
                "name": name,
                "image": client.image,
                "command": ["/bin/bash", f"{SCRIPT_DIR}/{script}"],
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}},
                "volumeMounts": [{"name": "script", "mountPath": SCRIPT_DIR, "readOnly": True}, *own_auth],
            }
        ],
        "volumes": [
            {"name": "script", "configMap": {"name": config_map}},
            {"name": "auth-key", "secret": {"secretName": client.key_secret, "items": [{"key": client.key, "path": "key"}], "defaultMode": 0o400}},
        ],
    }
    if sidecar:
        pod_spec["initContainers"] = [auth_sidecar(client, "script", SCRIPT_DIR)]
        pod_spec["volumes"].append({"name": "auth-socket", "emptyDir": {}})
    return pod_spec

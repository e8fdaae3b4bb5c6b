"""A pod beside the cluster that runs Slurm's client commands (sacctmgr, scontrol, sacct) as root, who sees
every job whatever PrivateData hides from tenants: the tenants Job (components/tenancy.py) and the usage
report CronJob (components/monitoring/report.py). The operator's client image and auth (`AccountingClient`),
a client slurm.conf (common.client_slurm_conf), the key mounted, and munged or sackd started in the container as
each auth needs (the Slurm exporter runs them in a sidecar instead, components/monitoring/exporter.py); never a
Kubernetes token."""

from __future__ import annotations

from typing import Any

from ..config import PlatformConfig
from . import AccountingClient
from .common import KEY_DIR, MUNGE_SOCKET, SACK_SOCKET, munged_lines, system_placement, system_priority_class_name

# Where the pod finds its script and client slurm.conf (a ConfigMap); the key is at common.KEY_DIR.
SCRIPT_DIR = "/tenants"


def auth_setup(client: AccountingClient) -> list[str]:
    """Shell lines a client's script starts with: its slurm.conf in place, then what signs its requests."""
    lines = [f"install -d /etc/slurm && cp {SCRIPT_DIR}/slurm.conf /etc/slurm/slurm.conf"]
    if client.munge_image:
        return lines + [f"until [ -S {MUNGE_SOCKET} ]; do echo waiting for munged; sleep 1; done"]
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


def client_pod_spec(config: PlatformConfig, client: AccountingClient, name: str, script: str, config_map: str) -> dict[str, Any]:
    """The PodSpec of a client pod: container `name` runs `script` (bash) from `config_map`, mounted at SCRIPT_DIR
    with its client slurm.conf; munged in a native sidecar where the client image has none (soperator's)."""
    key_mount = {"name": "auth-key", "mountPath": KEY_DIR, "readOnly": True}
    munge_mount = {"name": "munge-socket", "mountPath": "/run/munge"}
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
                # The key goes where munged runs (a sidecar where the image has no munged).
                "volumeMounts": [{"name": "script", "mountPath": SCRIPT_DIR, "readOnly": True}, *([] if client.munge_image else [key_mount])],
            }
        ],
        "volumes": [
            {"name": "script", "configMap": {"name": config_map}},
            {"name": "auth-key", "secret": {"secretName": client.key_secret, "items": [{"key": client.key, "path": "key"}], "defaultMode": 0o400}},
        ],
    }
    if client.munge_image:
        # A native sidecar (an init container that keeps running): the pod completes when the client does.
        pod_spec["initContainers"] = [
            {
                "name": "munge",
                "image": client.munge_image,
                "restartPolicy": "Always",
                # munged wants a plain root-owned 0400 file in a private directory, not the Secret's symlink.
                "command": ["/bin/sh", "-c", f"install -m 0400 {KEY_DIR}/key /etc/munge/munge.key && exec munged -F -S {MUNGE_SOCKET}"],
                "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "200m", "memory": "128Mi"}},
                "volumeMounts": [key_mount, munge_mount],
            }
        ]
        pod_spec["containers"][0]["volumeMounts"].append(munge_mount)
        pod_spec["volumes"].append({"name": "munge-socket", "emptyDir": {}})
    return pod_spec

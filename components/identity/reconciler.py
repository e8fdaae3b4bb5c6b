"""The directory follows the config: a Job that runs reconcile.sh (in the LDAP server's image) on every change
of the researchers, their groups, keys or numbers, against the live directory, as its admin.

The desired state is rendered here, in the line format reconcile.sh documents: one record a line, TAB-separated,
every name, DN and value base64, so nothing from the config reaches LDIF or the shell as text. It holds users,
groups, numbers and public keys only (a ConfigMap); the admin password comes from the server's Secret.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from ..config import LdapConfig, TenantConfig
from ..config.identity import accounts_of, groups_of
from .entries import group_attributes, group_dn, user_attributes
from .names import (
    LOCKED_SHELL,
    PASSWORD_KEY,
    RECONCILER_CONFIGMAP,
    RECONCILER_JOB_PREFIX,
    SECRET_NAME,
    TLS_CA_KEY,
    admin_dn,
    groups_dn,
    ldap_uri,
    user_dn,
    users_dn,
)
from .server import priority

SCRIPT = "reconcile.sh"
DESIRED_STATE = "desired-state"
MOUNT = "/reconciler"
CA_DIR = "/etc/ldap-ca"
# The image's non-root user (bitnami's openldap runs as 1001).
RUN_AS = 1001
LABELS = {"app.kubernetes.io/name": "ldap-reconciler", "app.kubernetes.io/part-of": "slurm-platform"}
# The attributes reconcile.sh keeps to the config, per kind of entry. objectClass is only ever added to;
# uidNumber and gidNumber are set on a new entry and never changed on a live one (files carry them).
USER_ATTRIBUTES = ("objectClass", "cn", "sn", "displayName", "uidNumber", "gidNumber", "homeDirectory", "loginShell", "sshPublicKey", "shadowExpire")
GROUP_ATTRIBUTES = ("objectClass", "cn", "gidNumber", "memberUid")
# A researcher the config no longer lists: no key, no shell, expired (sssd's ldap_account_expire_policy=shadow
# refuses them), in no group (reconcile.sh); the entry stays, with its numbers, for the files it owns.
LOCK_ATTRIBUTES = ("objectClass", "sshPublicKey", "loginShell", "shadowExpire")
LOCKED = (("objectClass", "shadowAccount"), ("loginShell", LOCKED_SHELL), ("shadowExpire", "1"))


def script() -> str:
    return (Path(__file__).parent / SCRIPT).read_text()


def declared(tenants: Sequence[TenantConfig]) -> bool:
    """The reconciler runs where the config has researchers or groups (every tenant has a group)."""
    return bool(groups_of(tenants))


def _b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def _record(*fields: str) -> str:
    return "\t".join(fields)


def _values(attributes: Sequence[tuple[str, str]]) -> list[str]:
    return [f"{name}={_b64(value)}" for name, value in attributes]


def desired_state(ldap: LdapConfig, tenants: Sequence[TenantConfig]) -> str:
    """What the directory holds of the config: its groups and researchers as the seed has them (entries.py)."""
    groups = groups_of(tenants)
    gids = {group.name: group.gid for group in groups}
    lines = [
        _record("users", _b64(users_dn(ldap))),
        _record("groups", _b64(groups_dn(ldap))),
        _record("manage", "user", *USER_ATTRIBUTES),
        _record("manage", "group", *GROUP_ATTRIBUTES),
        _record("manage", "lock", *LOCK_ATTRIBUTES),
        _record("lock", *_values(LOCKED)),
    ]
    # Sorted (entries by name, values too: they are sets): reordering tenants, users or keys changes nothing
    # here, so it re-runs nothing.
    for group in sorted(groups, key=lambda g: g.name):
        lines.append(_record("group", _b64(group.name), _b64(group_dn(ldap, group)), *_values(sorted(group_attributes(group)))))
    for account in sorted(accounts_of(tenants), key=lambda a: a.name):
        attributes = sorted(user_attributes(ldap, account, gids[account.group]))
        lines.append(_record("user", _b64(account.name), _b64(user_dn(ldap, account.name)), *_values(attributes)))
    return "\n".join(lines) + "\n"


def reconciler_configmap(ldap: LdapConfig, namespace: str, tenants: Sequence[TenantConfig]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": RECONCILER_CONFIGMAP, "namespace": namespace, "labels": LABELS},
        "data": {SCRIPT: script(), DESIRED_STATE: desired_state(ldap, tenants)},
    }


def _pod_spec(ldap: LdapConfig, namespace: str, priority_class: Optional[str]) -> dict[str, Any]:
    env: list[dict[str, Any]] = [
        {"name": "LDAP_URI", "value": ldap_uri(ldap, namespace)},
        {"name": "LDAP_ADMIN_DN", "value": admin_dn(ldap)},
        {"name": "LDAP_ADMIN_PASSWORD", "valueFrom": {"secretKeyRef": {"name": SECRET_NAME, "key": PASSWORD_KEY}}},
        {"name": "DESIRED_STATE", "value": f"{MOUNT}/{DESIRED_STATE}"},
    ]
    mounts = [{"name": "reconciler", "mountPath": MOUNT, "readOnly": True}, {"name": "tmp", "mountPath": "/tmp"}]
    volumes: list[dict[str, Any]] = [{"name": "reconciler", "configMap": {"name": RECONCILER_CONFIGMAP}}, {"name": "tmp", "emptyDir": {}}]
    if ldap.tls.enabled:
        # The CA only (ca.crt), never the server's tls.key.
        env.append({"name": "LDAPTLS_CACERT", "value": f"{CA_DIR}/{TLS_CA_KEY}"})
        mounts.append({"name": "ca", "mountPath": CA_DIR, "readOnly": True})
        volumes.append({"name": "ca", "secret": {"secretName": ldap.tls.secret_name, "items": [{"key": TLS_CA_KEY, "path": TLS_CA_KEY}]}})
    return {
        "restartPolicy": "OnFailure",
        # It talks to the directory only, never to the API server.
        "automountServiceAccountToken": False,
        **priority(priority_class),
        "securityContext": {"runAsNonRoot": True, "runAsUser": RUN_AS, "runAsGroup": RUN_AS, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [
            {
                "name": "reconcile",
                "image": ldap.image,
                "command": ["/bin/bash", f"{MOUNT}/{SCRIPT}"],
                "env": env,
                "volumeMounts": mounts,
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"]},
                    "readOnlyRootFilesystem": True,
                    "runAsNonRoot": True,
                    "runAsUser": RUN_AS,
                },
                "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}},
            }
        ],
        "volumes": volumes,
    }


def reconciler_hash(ldap: LdapConfig, namespace: str, tenants: Sequence[TenantConfig], priority_class: Optional[str]) -> str:
    """Short hash of what the Job runs (script, desired state, pod): the Job's name carries it."""
    document = json.dumps([reconciler_configmap(ldap, namespace, tenants)["data"], _pod_spec(ldap, namespace, priority_class)], sort_keys=True)
    return hashlib.sha256(document.encode()).hexdigest()[:10]


def reconciler_job(ldap: LdapConfig, namespace: str, tenants: Sequence[TenantConfig], priority_class: Optional[str] = None) -> dict[str, Any]:
    """Runs reconcile.sh once per desired state: a new hash is a new Job (Jobs are immutable), so every change
    of the config's researchers re-runs it, and an `up` without one runs nothing."""
    digest = reconciler_hash(ldap, namespace, tenants, priority_class)
    labels = {**LABELS, "slurm-platform/reconciler-hash": digest}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"{RECONCILER_JOB_PREFIX}-{digest}", "namespace": namespace, "labels": labels},
        # It waits for the directory; give up (and fail `pulumi up`) if it never answers.
        "spec": {
            "backoffLimit": 20,
            "activeDeadlineSeconds": 1800,
            "template": {"metadata": {"labels": labels}, "spec": _pod_spec(ldap, namespace, priority_class)},
        },
    }

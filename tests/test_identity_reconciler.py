"""The directory reconciler as rendered (components/identity/reconciler.py): its desired state, its Job and
ConfigMap, and how LdapDirectory declares them. tests/test_services_identity.py runs it against slapd."""

from __future__ import annotations

import base64
import subprocess
from typing import Any

import pytest

from components.config import TenantConfig, parse_config
from components.config.identity import accounts_of, derived_id, groups_of
from components.identity import names, reconciler
from components.identity.directory import LdapDirectory
from components.identity.entries import group_attributes, user_attributes
from tests.harness import run_under_mocks, stack_config

KEYS = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJJBCZ4xUxXZ8AdgqVvnSoDljAe5feFCL0wyhcRDDFt5 alice@laptop",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOvMn486Xy6/0TJV+onNbvu3csjc3DdfE7LE8X5myVaK alice@desk",
)
CELLS = [{"pool": "gpu-c", "gpusPerCell": 1, "cells": 1}]


def lab_config(tenants: list[dict[str, Any]], **ldap: Any):
    raw = stack_config("dev-lab")
    return parse_config({**raw, "tenants": tenants, "ldap": {**raw["ldap"], **ldap}})


def two_tenants(alice_keys: tuple[str, ...] = KEYS[:1]) -> list[dict[str, Any]]:
    return [
        {"name": "default", "users": [{"name": "alice", "sshPublicKeys": list(alice_keys)}, "bob"], "cells": CELLS},
        {
            "name": "vc1",
            "users": [{"name": "carol", "uidNumber": 5001}],
            "gidNumber": 6001,
            "cells": [{"pool": "gpu-d", "gpusPerCell": 1, "cells": 1}],
        },
    ]


def decoded(state: str) -> list[list[Any]]:
    """Each record's fields: the kind and attribute names as they are, every other field decoded."""

    def plain(field: str) -> str:
        return base64.b64decode(field, validate=True).decode()

    def attribute(field: str) -> tuple[str, str]:
        name, _, value = field.partition("=")
        assert name.isalpha(), field
        return name, plain(value)

    records: list[list[Any]] = []
    for line in state.splitlines():
        kind, *fields = line.split("\t")
        if kind == "manage":
            records.append([kind, *fields])
        elif kind in ("users", "groups"):
            records.append([kind, *map(plain, fields)])
        elif kind == "lock":
            records.append([kind, *map(attribute, fields)])
        else:
            assert kind in ("user", "group"), line
            records.append([kind, plain(fields[0]), plain(fields[1]), *map(attribute, fields[2:])])
    return records


def test_the_desired_state_is_the_seeds_groups_and_users_numbered_by_the_config():
    config = lab_config(two_tenants())
    records = decoded(reconciler.desired_state(config.ldap, config.tenants))
    base = config.ldap.base_dn
    assert records[:2] == [["users", f"ou=users,{base}"], ["groups", f"ou=groups,{base}"]]
    manage = {r[1]: r[2:] for r in records if r[0] == "manage"}
    assert manage == {"user": list(reconciler.USER_ATTRIBUTES), "group": list(reconciler.GROUP_ATTRIBUTES), "lock": list(reconciler.LOCK_ATTRIBUTES)}
    (lock,) = [r[1:] for r in records if r[0] == "lock"]
    assert lock == [("objectClass", "shadowAccount"), ("loginShell", names.LOCKED_SHELL), ("shadowExpire", "1")]
    assert set(manage["lock"]) >= {name for name, _ in lock} | {"sshPublicKey"}
    groups = {r[1]: r for r in records if r[0] == "group"}
    users = {r[1]: r for r in records if r[0] == "user"}
    assert list(groups) == ["default", "vc1"] and list(users) == ["alice", "bob", "carol"]
    gids = {g.name: g.gid for g in groups_of(config.tenants)}
    for group in groups_of(config.tenants):
        assert groups[group.name][2:] == [f"cn={group.name},ou=groups,{base}", *sorted(group_attributes(group))]
    for account in accounts_of(config.tenants):
        assert users[account.name][2:] == [f"uid={account.name},ou=users,{base}", *sorted(user_attributes(config.ldap, account, gids[account.group]))]
    alice = dict(users["alice"][3:])
    assert (alice["uidNumber"], alice["gidNumber"], alice["sshPublicKey"]) == (str(derived_id("alice")), str(derived_id("default")), KEYS[0])
    carol = dict(users["carol"][3:])
    assert (carol["uidNumber"], carol["gidNumber"]) == ("5001", "6001")
    # Every attribute the entries carry is one the reconciler keeps (uid names the entry).
    assert {name for record in users.values() for name, _ in record[3:]} - {"uid"} <= set(reconciler.USER_ATTRIBUTES)
    assert {name for record in groups.values() for name, _ in record[3:]} <= set(reconciler.GROUP_ATTRIBUTES)


def test_no_value_reaches_the_script_as_text():
    """A name in any language, with what LDIF and the shell read specially, travels base64: one line per record,
    and no field but the kind and the attribute names is readable text."""
    config = lab_config(two_tenants(), displayNames={"alice": "Nguyễn Văn An $(reboot) `id`; dn: cn=admin"})
    state = reconciler.desired_state(config.ldap, config.tenants)
    assert len(state.splitlines()) == 6 + 2 + 3
    assert "Nguy" not in state and "$(" not in state and "dn: " not in state and " " not in state
    alice = dict(next(r for r in decoded(state) if r[:2] == ["user", "alice"])[3:])
    assert alice["displayName"] == alice["cn"] == "Nguyễn Văn An $(reboot) `id`; dn: cn=admin"


def test_reordering_tenants_or_users_changes_nothing_and_a_key_or_user_change_renames_the_job():
    config = lab_config(two_tenants())
    job = reconciler.reconciler_job(config.ldap, "lab-hpc", config.tenants, "lab-hpc-slurm-system")
    name = job["metadata"]["name"]
    assert name.startswith(names.RECONCILER_JOB_PREFIX + "-") and len(name) <= 63
    assert reconciler.reconciler_job(config.ldap, "lab-hpc", config.tenants, "lab-hpc-slurm-system")["metadata"]["name"] == name
    reordered = [TenantConfig.model_validate(t) for t in reversed(two_tenants())]
    reordered[1] = reordered[1].model_copy(update={"users": list(reversed(reordered[1].users))})
    assert reconciler.reconciler_job(config.ldap, "lab-hpc", reordered, "lab-hpc-slurm-system")["metadata"]["name"] == name
    rotated = lab_config(two_tenants(KEYS[1:]))
    assert reconciler.reconciler_job(rotated.ldap, "lab-hpc", rotated.tenants, "lab-hpc-slurm-system")["metadata"]["name"] != name
    fewer = lab_config(two_tenants()[:1])
    assert reconciler.reconciler_job(fewer.ldap, "lab-hpc", fewer.tenants, "lab-hpc-slurm-system")["metadata"]["name"] != name
    labels = job["spec"]["template"]["metadata"]["labels"]
    assert labels == job["metadata"]["labels"] and labels["slurm-platform/reconciler-hash"] == name.rsplit("-", 1)[1]


@pytest.mark.parametrize("stack", ["dev-lab", "prod-hoalac"])
def test_the_job_runs_unprivileged_with_the_admin_password_and_the_ca_only(stack):
    config = parse_config(stack_config(stack))
    assert config.tenants and config.ldap.enabled
    job = reconciler.reconciler_job(config.ldap, config.cluster.namespace, config.tenants, "cls")
    spec = job["spec"]
    assert spec["backoffLimit"] == 20 and spec["activeDeadlineSeconds"] == 1800
    pod = spec["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False and pod["priorityClassName"] == "cls" and pod["restartPolicy"] == "OnFailure"
    assert pod["securityContext"] == {"runAsNonRoot": True, "runAsUser": 1001, "runAsGroup": 1001, "seccompProfile": {"type": "RuntimeDefault"}}
    (container,) = pod["containers"]
    assert container["image"] == config.ldap.image and container["command"] == ["/bin/bash", "/reconciler/reconcile.sh"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "runAsUser": 1001,
    }
    assert container["resources"]["limits"]["memory"]
    env = {e["name"]: e for e in container["env"]}
    assert env["LDAP_ADMIN_PASSWORD"] == {
        "name": "LDAP_ADMIN_PASSWORD",
        "valueFrom": {"secretKeyRef": {"name": "ldap-secret", "key": "LDAP_ADMIN_PASSWORD"}},
    }
    assert env["LDAP_URI"]["value"] == names.ldap_uri(config.ldap, config.cluster.namespace)
    assert env["LDAP_ADMIN_DN"]["value"] == names.admin_dn(config.ldap)
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["reconciler"] == {"name": "reconciler", "configMap": {"name": names.RECONCILER_CONFIGMAP}}
    if config.ldap.tls.enabled:
        assert env["LDAP_URI"]["value"].startswith("ldaps://") and env["LDAPTLS_CACERT"]["value"] == "/etc/ldap-ca/ca.crt"
        # The TLS Secret's CA only: its tls.key never reaches the pod.
        assert volumes["ca"]["secret"] == {"secretName": config.ldap.tls.secret_name, "items": [{"key": "ca.crt", "path": "ca.crt"}]}
    else:
        assert "LDAPTLS_CACERT" not in env and "ca" not in volumes
    assert not [v for v in pod["volumes"] if (v.get("secret") or {}).get("secretName") == names.SECRET_NAME]


def test_the_script_is_bash_that_parses():
    script = reconciler.script()
    assert script.startswith("#!/bin/bash\n") and "set -euo pipefail\n" in script
    checked = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


def directory_run(tenants: list[dict[str, Any]]):
    config = lab_config(tenants, tls={"enabled": False})
    return config, run_under_mocks(lambda: {"uri": LdapDirectory("ldap", config.ldap, "lab-hpc", config.tenants, "lab-hpc-slurm-system").uri})


def test_ldap_directory_declares_the_reconciler_after_the_server_with_no_secret_in_its_configmap():
    config, run = directory_run(two_tenants())
    configmap = run.named("ldap-reconciler")
    assert configmap.inputs["metadata"]["name"] == names.RECONCILER_CONFIGMAP
    assert configmap.inputs["data"] == reconciler.reconciler_configmap(config.ldap, "lab-hpc", config.tenants)["data"]
    text = "".join(configmap.inputs["data"].values())
    # The mocks' random passwords are p's (32 for the admin's and the read-only account's, 16 for the salt).
    assert {r.name for r in run.of_type("random:index/randomPassword:RandomPassword")} == {
        "ldap-admin-password",
        "ldap-readonly-password",
        "ldap-readonly-salt",
    }
    assert "p" * 16 not in text
    assert "userPassword" not in text and "{SSHA" not in text and not configmap.secret_inputs
    job = run.named("ldap-reconcile")
    assert (
        job.inputs["metadata"]["name"]
        == reconciler.reconciler_job(config.ldap, "lab-hpc", config.tenants, "lab-hpc-slurm-system")["metadata"]["name"]
    )
    waits_for = {run.by_urn(urn).name for urn in job.dependencies}
    assert {"ldap-server", "ldap-service", "ldap-secret", "ldap-reconciler"} <= waits_for, waits_for


def test_without_tenants_there_is_no_reconciler():
    _, run = directory_run([])
    names_declared = {r.name for r in run.resources}
    assert "ldap-reconciler" not in names_declared and "ldap-reconcile" not in names_declared


def test_with_secret_tenants_or_ldap_config_the_desired_state_and_job_spec_are_secret():
    config = lab_config(two_tenants(), tls={"enabled": False})
    run = run_under_mocks(lambda: {"uri": LdapDirectory("ldap", config.ldap, "lab-hpc", config.tenants, secret_config=True).uri})
    assert run.named("ldap-reconciler").secret_inputs == ["data"] and run.named("ldap-reconcile").secret_inputs == ["spec"]

"""The directory follows the config (components/identity/reconciler.py): the rendered reconciler Job's script,
environment and desired state (its ConfigMap's files), run against a real slapd seeded as the program seeds it
(tests/test_services_ldap.py `start_directory`): nothing to do on a directory seeded from the same config; a
researcher added, a key rotated, one removed (locked: no key, no shell, expired, in no group, same numbers) and
the tenants reordered; the removed one re-added (unlocked); a number the directory holds never changed; with TLS,
the server's certificate checked against the CA the Job mounts; and a directory initialised before the
openssh-lpk schema, which the server's init container gives it."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from components.config import PlatformConfig, TenantConfig
from components.config.identity import accounts_of, groups_of
from components.identity import names, reconciler, schema, server
from components.identity.entries import USER_OBJECT_CLASSES
from tests.services import LdapLab, require_packages
from tests.test_services_ldap import ADMIN_PASSWORD, LAB_TENANTS, service_host, start_directory

Live = dict[str, dict[str, list[str]]]


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> list[str]:
    """Three real ed25519 public key lines."""
    directory = tmp_path_factory.mktemp("keys")
    found = []
    for i in range(3):
        path = directory / f"key{i}"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"lab-key-{i}", "-f", str(path)], check=True)
        found.append(path.with_suffix(".pub").read_text().strip())
    return found


def run_reconciler(lab: LdapLab, config: PlatformConfig, tenants: list[TenantConfig], tries: int = 6) -> subprocess.CompletedProcess:
    """The Job as rendered, on this machine: its ConfigMap's files where it mounts them, its environment (the
    admin password its Secret holds, the lab's address and, with TLS, the lab's CA), its command, as the image's user."""
    namespace = config.cluster.namespace
    job = reconciler.reconciler_job(config.ldap, namespace, tenants)
    configmap = reconciler.reconciler_configmap(config.ldap, namespace, tenants)
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] and container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    mounts = {mount["name"]: mount["mountPath"] for mount in container["volumeMounts"]}
    files = lab.root / "reconciler"
    shutil.rmtree(files, ignore_errors=True)
    files.mkdir(mode=0o755)
    for key, text in configmap["data"].items():
        (files / key).write_text(text)
    paths = {mounts["reconciler"]: str(files), **({mounts["ca"]: str(lab.root / "tls")} if config.ldap.tls.enabled else {})}
    env: dict[str, str] = {}
    for entry in container["env"]:
        if "valueFrom" in entry:
            assert entry["valueFrom"]["secretKeyRef"] == {"name": names.SECRET_NAME, "key": names.PASSWORD_KEY}
            env[entry["name"]] = ADMIN_PASSWORD
            continue
        value = entry["value"]
        for mount, path in paths.items():
            value = value.replace(mount, path)
        env[entry["name"]] = value
    if config.ldap.tls.enabled:
        # The certificate's name stays (the lab's /etc/hosts resolves it); the port is the lab's.
        assert env["LDAP_URI"] == f"ldaps://{service_host(config)}:{names.LDAPS_PORT}"
        env["LDAP_URI"] = f"ldaps://{service_host(config)}:{lab.port}"
    else:
        assert env["LDAP_URI"] == f"ldap://{service_host(config)}:{names.LDAP_PORT}"
        env["LDAP_URI"] = lab.url
    command = [part.replace(mounts["reconciler"], str(files)) for part in container["command"]]
    env["LDAP_CONNECT_TRIES"] = str(tries)
    return lab.run("env", *(f"{name}={value}" for name, value in env.items()), *command, user="openldap", check=False, timeout=120)


def reconcile(lab: LdapLab, config: PlatformConfig, tenants: list[TenantConfig]) -> str:
    result = run_reconciler(lab, config, tenants)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def changes(output: str) -> int:
    (summary,) = [line for line in output.splitlines() if line.startswith("reconciled: ")]
    return int(summary.split()[1])


def live(lab: LdapLab, config: PlatformConfig, ou: str) -> Live:
    """The entries under `ou` by their RDN value (uid or cn), each attribute's values decoded and sorted."""
    found = lab.ldap(
        "ldapsearch", "-LLL", "-o", "ldif-wrap=no", "-s", "one", "-b", f"ou={ou},{config.ldap.base_dn}", "*", bind=(lab.admin_dn, ADMIN_PASSWORD)
    ).stdout
    result: Live = {}
    current: dict[str, list[str]] = {}
    for line in found.splitlines():
        if not line:
            continue
        name, _, value = line.partition(":")
        value = base64.b64decode(value[2:]).decode() if value.startswith(":") else value.removeprefix(" ")
        if name == "dn":
            current = {}
            result[value.split(",", 1)[0].split("=", 1)[1]] = current
        else:
            current.setdefault(name, []).append(value)
    return {key: {name: sorted(values) for name, values in attributes.items()} for key, attributes in result.items()}


def numbers(users: Live, groups: Live) -> dict[str, Any]:
    return {**{u: (a["uidNumber"], a["gidNumber"]) for u, a in users.items()}, **{f"group {g}": a["gidNumber"] for g, a in groups.items()}}


def tenants_with(config: PlatformConfig, edits: list[dict[str, Any]]) -> list[TenantConfig]:
    """The lab's tenants with each tenant's `users` (by index) as given; an edit may also reorder."""
    return [tenant.model_copy(update=edit) for tenant, edit in zip(LAB_TENANTS, edits, strict=True)]


def user(name: str, *keys: str, **more: Any) -> Any:
    from components.config.tenants import TenantUser

    return TenantUser.model_validate({"name": name, "sshPublicKeys": list(keys), **more})


def test_the_directory_follows_the_config_and_a_second_run_writes_nothing(directory, keys):
    lab, config = directory
    assert [t.user_names for t in LAB_TENANTS] == [["alice", "bob"], ["carol", "dan"]]
    # a) Seeded from the same config: nothing to do, twice.
    assert changes(reconcile(lab, config, LAB_TENANTS)) == 0
    assert changes(reconcile(lab, config, LAB_TENANTS)) == 0
    before_users, before_groups = live(lab, config, "users"), live(lab, config, "groups")
    # alice gets a key: one change, then none.
    first = tenants_with(config, [{"users": [user("alice", keys[0]), user("bob")]}, {}])
    output = reconcile(lab, config, first)
    assert changes(output) == 1 and "updated user alice" in output and "sshPublicKey" in output, output
    assert changes(reconcile(lab, config, first)) == 0
    assert live(lab, config, "users")["alice"]["sshPublicKey"] == [keys[0]]

    # b) erin added (with a key), alice's key rotated, bob removed, the tenants reordered.
    default, vc1 = LAB_TENANTS
    second = [
        vc1.model_copy(update={"users": [user("carol"), user("dan"), user("erin", keys[2])]}),
        default.model_copy(update={"users": [user("alice", keys[1])]}),
    ]
    output = reconcile(lab, config, second)
    assert changes(output) >= 4, output
    users, groups = live(lab, config, "users"), live(lab, config, "groups")
    erin = accounts_of(second)[2]
    assert users["erin"]["sshPublicKey"] == [keys[2]] and users["erin"]["uidNumber"] == [str(erin.uid)]
    assert set(USER_OBJECT_CLASSES) <= set(users["erin"]["objectClass"]) and users["erin"]["loginShell"] == [names.LOGIN_SHELL]
    assert users["alice"]["sshPublicKey"] == [keys[1]]
    bob = users["bob"]
    assert "sshPublicKey" not in bob and bob["loginShell"] == [names.LOCKED_SHELL] and bob["shadowExpire"] == ["1"], bob
    assert all("bob" not in group.get("memberUid", []) for group in groups.values()), groups
    assert groups["vc1"]["memberUid"] == ["carol", "dan", "erin"] and groups["default"]["memberUid"] == ["alice"]
    # Nobody renumbered; bob still exists with his numbers.
    now = numbers(users, groups)
    assert {key: now[key] for key in numbers(before_users, before_groups)} == numbers(before_users, before_groups)
    assert changes(reconcile(lab, config, second)) == 0

    # bob re-added: unlocked (no expiry, his shell, his key, back in his group), with the same numbers.
    third = [second[0], default.model_copy(update={"users": [user("alice", keys[1]), user("bob", keys[0])]})]
    output = reconcile(lab, config, third)
    users, groups = live(lab, config, "users"), live(lab, config, "groups")
    bob = users["bob"]
    assert "shadowExpire" not in bob and bob["loginShell"] == [names.LOGIN_SHELL] and bob["sshPublicKey"] == [keys[0]], output
    assert groups["default"]["memberUid"] == ["alice", "bob"]
    assert (bob["uidNumber"], bob["gidNumber"]) == (before_users["bob"]["uidNumber"], before_users["bob"]["gidNumber"])
    assert changes(reconcile(lab, config, third)) == 0


def test_a_number_the_directory_holds_is_never_changed(directory):
    lab, config = directory
    default, vc1 = LAB_TENANTS
    reconcile(lab, config, LAB_TENANTS)  # back to the lab's config, whatever an earlier test left
    held = live(lab, config, "users")["carol"]["uidNumber"]
    pinned = [default, vc1.model_copy(update={"users": [user("carol", uidNumber=4242), *vc1.users[1:]], "gid_number": 4343})]
    output = reconcile(lab, config, pinned)
    assert f"warning: user carol keeps uidNumber {held[0]} in the directory (the config says 4242)" in output, output
    assert "warning: group vc1 keeps gidNumber" in output and "pin gidNumber" in output, output
    users, groups = live(lab, config, "users"), live(lab, config, "groups")
    assert users["carol"]["uidNumber"] == held and groups["vc1"]["gidNumber"] == [str(groups_of(LAB_TENANTS)[1].gid)]
    # Warned again, never written.
    assert changes(output) == 0 and changes(reconcile(lab, config, pinned)) == 0


def test_with_tls_the_job_checks_the_servers_certificate_against_the_ca_it_mounts(keys):
    require_packages()
    lab, config = start_directory("staging-hanoi", {})
    try:
        assert config.ldap.tls.enabled
        lab.add_hosts([service_host(config)])
        assert changes(reconcile(lab, config, LAB_TENANTS)) == 0
        keyed = tenants_with(config, [{"users": [user("alice", keys[0]), user("bob")]}, {}])
        assert changes(reconcile(lab, config, keyed)) == 1 and changes(reconcile(lab, config, keyed)) == 0
        # Another CA's certificate is refused.
        other = lab.root / "other-ca"
        other.mkdir()
        subprocess.run(
            [
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "1",
                "-keyout",
                f"{other}/k",
                "-out",
                f"{other}/ca.crt",
                "-subj",
                "/CN=x",
            ],
            check=True,
            capture_output=True,
        )
        shutil.copy(other / "ca.crt", lab.root / "tls" / "ca.crt")
        refused = run_reconciler(lab, config, keyed, tries=1)
        assert refused.returncode != 0 and "reconciled:" not in refused.stdout
    finally:
        lab.close()
        shutil.rmtree(lab.root)


def test_a_directory_initialised_before_the_schema_gets_it_from_the_init_container_then_keys(keys):
    require_packages()
    # Seeded by the program before openssh-lpk: no ldapPublicKey on its researchers, no schema loaded.
    lab, config = start_directory(
        "dev-lab",
        {},
        dropped_env=("LDAP_CUSTOM_SCHEMA_DIR",),
        seed_edit=lambda seed: re.sub(r"(?m)^(objectClass: ldapPublicKey|sshPublicKey: .*)\n", "", seed),
    )
    try:
        keyed = tenants_with(config, [{"users": [user("alice", keys[0]), user("bob")]}, {}])
        before = run_reconciler(lab, config, keyed)
        assert before.returncode != 0, before.stdout + before.stderr
        init = server.schema_container(config.ldap)
        assert init["name"] == "openssh-lpk-schema"
        mounts = {mount["name"]: mount["mountPath"] for mount in init["volumeMounts"]}
        schemas = lab.root / "schemas"
        schemas.mkdir(mode=0o755)
        (schemas / schema.SCHEMA_FILE).write_text(schema.schema_ldif())
        command = [part.replace(server.ONLINE_CONF_DIR, str(lab.config_dir)).replace(mounts["schema"], str(schemas)) for part in init["command"]]
        for _ in range(2):
            # The pod restarts: slapd stops, the init container runs as slapd's user, slapd starts again; twice, the second a no-op.
            lab.stop("slapd")
            lab.run(*command, user="openldap")
            lab.slapd()
        loaded = sorted(p.name for p in (lab.config_dir / "cn=config" / "cn=schema").iterdir() if schema.SCHEMA_NAME in p.name)
        assert len(loaded) == 1, loaded
        output = reconcile(lab, config, keyed)
        assert changes(output) == 4, output  # ldapPublicKey on each researcher, alice's key with it
        users = live(lab, config, "users")
        assert users["alice"]["sshPublicKey"] == [keys[0]] and all("ldapPublicKey" in u["objectClass"] for u in users.values())
        assert changes(reconcile(lab, config, keyed)) == 0
    finally:
        lab.close()
        shutil.rmtree(lab.root)


def test_the_script_passes_shellcheck():
    if shutil.which("shellcheck") is None:
        pytest.fail("the services tier needs shellcheck: apt-get install -y shellcheck")
    checked = subprocess.run(
        ["shellcheck", "--shell=bash", str(Path(reconciler.__file__).parent / reconciler.SCRIPT)], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr

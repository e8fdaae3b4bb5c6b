"""Real OpenLDAP (Debian's slapd, ldap-utils, nslcd, sssd) on what the program renders
(tests/services.py `LdapLab`): slapd configured as the rendered StatefulSet's environment
asks the image to be, loaded with the rendered seed LDIF and ACL script; the read-only
account, anonymous and admin binds; and each operator's rendered client config (sssd for
soperator 4.1.7 and Slinky, nslcd for ACK) resolving a seeded user and its groups."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from components import ldap
from components.config import PlatformConfig, parse_config
from tests.harness import stack_config
from tests.services import LdapLab, for_this_machine, require_packages

ADMIN_PASSWORD = "lab-admin-password"
READONLY_PASSWORD = "lab-readonly-password"
LAB_TENANTS = parse_config(stack_config("dev-lab")).tenants
# The stack whose client config each operator's pods read, and the file that carries it.
CLIENTS = {
    "soperator 4.1.7": ("dev-lab", {}, "sssd"),
    "soperator 4.1.7, TLS": ("staging-hanoi", {}, "sssd"),
    "Slinky": ("dev-lab", {"slurmOperator": "slinky"}, "sssd"),
    "Slinky, TLS": ("prod-hcm", {}, "sssd"),
    "ACK, TLS": ("staging-hangzhou", {}, "nslcd"),
}


def service_host(config) -> str:
    return f"{ldap.SERVICE_NAME}.{config.cluster.namespace}.svc.cluster.local"


def start_directory(stack: str, overrides: dict) -> tuple[LdapLab, PlatformConfig]:
    """A directory for `stack`'s LDAP config, seeded with the lab's tenants (their users and groups)."""
    config = parse_config({**stack_config(stack), **overrides})
    namespace = config.cluster.namespace
    # Not under pytest's 0700 temporary directory: slapd and nslcd drop to their own users.
    root = Path(tempfile.mkdtemp(prefix="slurm-platform-ldap-"))
    root.chmod(0o755)
    lab = LdapLab(root, ldap.ldap_statefulset(config.ldap, namespace), ADMIN_PASSWORD, service_host(config))
    seed = ldap.seed_ldif(config.ldap, ldap.ssha512(READONLY_PASSWORD, "0123456789abcdef"), LAB_TENANTS)
    lab.load(seed, {"acl.sh": ldap.acl_init_script(config.ldap)})
    return lab, config


@pytest.fixture(scope="module")
def directory():
    require_packages()
    lab, config = start_directory("dev-lab", {})
    try:
        yield lab, config
    finally:
        lab.close()
        shutil.rmtree(lab.root)


def entries(result) -> list[str]:
    return [line.removeprefix("dn: ") for line in result.stdout.splitlines() if line.startswith("dn: ")]


def test_slapd_loads_the_rendered_seed_and_acl(directory):
    lab, config = directory
    admin = (lab.admin_dn, ADMIN_PASSWORD)
    found = entries(lab.ldap("ldapsearch", "-LLL", "-b", config.ldap.base_dn, "dn", bind=admin))
    users = sorted({user for tenant in LAB_TENANTS for user in tenant.users})
    assert users and {f"uid={u},ou=users,{config.ldap.base_dn}" for u in users} <= set(found)
    assert {f"cn={t.group},ou=groups,{config.ldap.base_dn}" for t in LAB_TENANTS} <= set(found)
    assert ldap.readonly_dn(config.ldap) in found
    acl = lab.run("ldapsearch", "-LLL", "-Y", "EXTERNAL", "-H", "ldapi:///", "-b", "olcDatabase={2}mdb,cn=config", "olcAccess").stdout
    rendered = [line.removeprefix("olcAccess: ") for line in ldap.readonly_acl_ldif(config.ldap).splitlines() if line.startswith("olcAccess: ")]
    assert rendered and all(rule in " ".join(acl.replace("\n ", "").splitlines()) for rule in rendered), acl


def test_the_readonly_account_reads_users_and_groups_and_cannot_write(directory):
    lab, config = directory
    readonly = (ldap.readonly_dn(config.ldap), READONLY_PASSWORD)
    base = config.ldap.base_dn
    users = entries(lab.ldap("ldapsearch", "-LLL", "-b", f"ou=users,{base}", "(objectClass=posixAccount)", "uid", bind=readonly))
    groups = entries(lab.ldap("ldapsearch", "-LLL", "-b", f"ou=groups,{base}", "(objectClass=posixGroup)", "memberUid", bind=readonly))
    assert len(users) == len({u for t in LAB_TENANTS for u in t.users}) and len(groups) == len({t.group for t in LAB_TENANTS})
    # A user's password hash is for binding only, even to the read-only account.
    lab.ldap("ldappasswd", "-s", "alice-password", f"uid=alice,ou=users,{base}", bind=(lab.admin_dn, ADMIN_PASSWORD))
    hashes = lab.ldap("ldapsearch", "-LLL", "-b", f"uid=alice,ou=users,{base}", "userPassword", bind=readonly)
    assert entries(hashes) == [f"uid=alice,ou=users,{base}"] and "userPassword" not in hashes.stdout
    change = f"dn: uid=alice,ou=users,{base}\nchangetype: modify\nreplace: loginShell\nloginShell: /bin/sh\n"
    refused = lab.ldap("ldapmodify", bind=readonly, check=False, input=change)
    assert refused.returncode == 50 and "Insufficient access" in refused.stderr, refused.stderr
    # Its password is on every node: whoever reads it there must not lock every node out by changing it.
    own = lab.ldap("ldappasswd", "-s", "taken-over", readonly[0], bind=readonly, check=False)
    assert own.returncode == 1 and "Insufficient access (50)" in own.stdout, own.stdout + own.stderr
    # A user still changes their own password.
    lab.ldap("ldappasswd", "-s", "alice-new", f"uid=alice,ou=users,{base}", bind=(f"uid=alice,ou=users,{base}", "alice-password"))
    wrong = lab.ldap("ldapsearch", "-b", base, bind=(readonly[0], "not-the-password"), check=False)
    assert wrong.returncode == 49 and "Invalid credentials" in wrong.stderr


def test_anonymous_binds_are_refused_and_the_admin_writes(directory):
    lab, config = directory
    anonymous = lab.ldap("ldapsearch", "-b", config.ldap.base_dn, check=False)
    assert anonymous.returncode == 48 and "Inappropriate authentication" in anonymous.stderr, anonymous.stdout + anonymous.stderr
    change = f"dn: uid=alice,ou=users,{config.ldap.base_dn}\nchangetype: modify\nreplace: loginShell\nloginShell: /bin/zsh\n"
    lab.ldap("ldapmodify", bind=(lab.admin_dn, ADMIN_PASSWORD), input=change)
    shown = lab.ldap("ldapsearch", "-LLL", "-b", f"uid=alice,ou=users,{config.ldap.base_dn}", "loginShell", bind=(lab.admin_dn, ADMIN_PASSWORD))
    assert "loginShell: /bin/zsh" in shown.stdout


@pytest.mark.parametrize("operator", CLIENTS)
def test_each_operators_client_config_resolves_a_seeded_user_and_its_groups(operator):
    stack, overrides, client = CLIENTS[operator]
    require_packages()
    lab, config = start_directory(stack, overrides)
    try:
        namespace = config.cluster.namespace
        render = ldap.sssd_conf if client == "sssd" else ldap.nslcd_conf
        rendered = render(config.ldap, namespace, READONLY_PASSWORD)
        if config.ldap.tls.enabled:
            # The certificate's name stays (the lab's /etc/hosts resolves it), the port is the lab's, and the
            # CA the pod mounts from the TLS Secret is the lab's.
            lab.add_hosts([service_host(config)])
            ca_path = ldap.ca_file(config.ldap, ldap.NSLCD_CA_FILE if client == "nslcd" else ldap.SSSD_CA_FILE)
            hosts = {f"{service_host(config)}:{ldap.LDAPS_PORT}": f"{service_host(config)}:{lab.port}"}
            conf = for_this_machine(rendered, hosts, {ca_path: lab.root / "tls" / "ca.crt"})
            assert f"ldaps://{service_host(config)}:{lab.port}" in conf and str(lab.root / "tls" / "ca.crt") in conf
        else:
            conf = for_this_machine(rendered, {f"{service_host(config)}:{ldap.LDAP_PORT}": f"127.0.0.1:{lab.port}"})
            assert f"ldap://127.0.0.1:{lab.port}" in conf
        if client == "sssd":
            checked = lab.sssd(conf)
            # Exit 1 only for the missing conf.d: soperator mounts the Secret over the whole /etc/sssd too.
            assert "Issues identified by validators: 0" in checked.stdout, checked.stdout + checked.stderr
        else:
            lab.nslcd(conf)
        (alice,) = [t for t in LAB_TENANTS if "alice" in t.users][:1]
        passwd = lab.run("getent", "passwd", "alice", check=False).stdout
        assert passwd, lab.log("nslcd" if client == "nslcd" else "sssd")[-4000:]
        assert passwd.startswith(f"alice:*:{ldap.FIRST_UID}:") and passwd.rstrip().endswith(":/home/alice:/bin/bash"), passwd
        group = lab.run("getent", "group", alice.group).stdout
        assert group.startswith(f"{alice.group}:") and "alice" in group.rstrip().split(":")[-1].split(","), group
        groups = lab.run("id", "-Gn", "alice").stdout.split()
        assert {t.group for t in LAB_TENANTS if "alice" in t.users} <= set(groups), groups
    finally:
        lab.close()
        shutil.rmtree(lab.root)

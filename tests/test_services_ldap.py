"""Real OpenLDAP (Debian's slapd, ldap-utils, nslcd, sssd) on what the program renders
(tests/services.py `LdapLab`): slapd configured as the rendered StatefulSet's environment
asks the image to be, loaded with the rendered seed LDIF and ACL script; the read-only
account, anonymous and admin binds; with TLS, no bind without it (LDAP_REQUIRE_TLS, and the
require-tls init container for a directory initialised before); and each operator's
rendered client config (sssd for soperator 4.1.7 and Slinky, nslcd for ACK) resolving a
seeded user and its groups; a Vietnamese and a Chinese organisation and full names with diacritics
and in Chinese, read back decoded through ldapsearch, sssd and nslcd."""

from __future__ import annotations

import base64
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from components.config import PlatformConfig, parse_config
from components.config.identity import derived_id
from components.identity import clients, entries, names, server
from tests.harness import stack_config, without_keys_unread_by
from tests.services import LdapLab, for_this_machine, require_packages

ADMIN_PASSWORD = "lab-admin-password"
READONLY_PASSWORD = "lab-readonly-password"
LAB_TENANTS = parse_config(stack_config("dev-lab")).tenants
# The stack whose client config each operator's pods read, and the file that carries it.
CLIENTS = {
    "soperator 4.1.7": ("dev-lab", {}, "sssd"),
    "soperator 4.1.7, TLS": ("staging-hanoi", {}, "sssd"),
    "Slinky": ("dev-lab", without_keys_unread_by("slinky", {**stack_config("dev-lab"), "slurmOperator": "slinky"}), "sssd"),
    "Slinky, TLS": ("prod-hcm", {}, "sssd"),
    "ACK, TLS": ("staging-hangzhou", {}, "nslcd"),
}


def service_host(config) -> str:
    return f"{names.SERVICE_NAME}.{config.cluster.namespace}.svc.cluster.local"


def start_directory(
    stack: str, overrides: dict, dropped_env: tuple[str, ...] = (), seed_edit: Callable[[str], str] = lambda seed: seed
) -> tuple[LdapLab, PlatformConfig]:
    """A directory for `stack`'s LDAP config (less the server's `dropped_env`), seeded with the lab's
    tenants (their users and groups), the seed LDIF as `seed_edit` makes it (a directory seeded by an older program)."""
    config = parse_config({**stack_config(stack), **overrides})
    namespace = config.cluster.namespace
    # Not under pytest's 0700 temporary directory: slapd and nslcd drop to their own users.
    root = Path(tempfile.mkdtemp(prefix="slurm-platform-ldap-"))
    root.chmod(0o755)
    statefulset = server.ldap_statefulset(config.ldap, namespace)
    (container,) = statefulset["spec"]["template"]["spec"]["containers"]
    kept = [entry for entry in container["env"] if entry["name"] not in dropped_env]
    assert len(kept) == len(container["env"]) - len(dropped_env), f"the server renders no {dropped_env}"
    container["env"] = kept
    lab = LdapLab(root, statefulset, ADMIN_PASSWORD, service_host(config))
    seed = entries.seed_ldif(config.ldap, entries.ssha512(READONLY_PASSWORD, "0123456789abcdef"), LAB_TENANTS)
    lab.load(seed_edit(seed), {"acl.sh": entries.acl_init_script(config.ldap)})
    return lab, config


def found_dns(result) -> list[str]:
    return [line.removeprefix("dn: ") for line in result.stdout.splitlines() if line.startswith("dn: ")]


def test_slapd_loads_the_rendered_seed_and_acl(directory):
    lab, config = directory
    admin = (lab.admin_dn, ADMIN_PASSWORD)
    found = found_dns(lab.ldap("ldapsearch", "-LLL", "-b", config.ldap.base_dn, "dn", bind=admin))
    users = sorted({user for tenant in LAB_TENANTS for user in tenant.user_names})
    assert users and {f"uid={u},ou=users,{config.ldap.base_dn}" for u in users} <= set(found)
    assert {f"cn={t.group},ou=groups,{config.ldap.base_dn}" for t in LAB_TENANTS} <= set(found)
    assert names.readonly_dn(config.ldap) in found
    acl = lab.run("ldapsearch", "-LLL", "-Y", "EXTERNAL", "-H", "ldapi:///", "-b", "olcDatabase={2}mdb,cn=config", "olcAccess").stdout
    rendered = [line.removeprefix("olcAccess: ") for line in entries.readonly_acl_ldif(config.ldap).splitlines() if line.startswith("olcAccess: ")]
    assert rendered and all(rule in " ".join(acl.replace("\n ", "").splitlines()) for rule in rendered), acl


def test_the_readonly_account_reads_users_and_groups_and_cannot_write(directory):
    lab, config = directory
    readonly = (names.readonly_dn(config.ldap), READONLY_PASSWORD)
    base = config.ldap.base_dn
    users = found_dns(lab.ldap("ldapsearch", "-LLL", "-b", f"ou=users,{base}", "(objectClass=posixAccount)", "uid", bind=readonly))
    groups = found_dns(lab.ldap("ldapsearch", "-LLL", "-b", f"ou=groups,{base}", "(objectClass=posixGroup)", "memberUid", bind=readonly))
    assert len(users) == len({u for t in LAB_TENANTS for u in t.user_names}) and len(groups) == len({t.group for t in LAB_TENANTS})
    # A user's password hash is for binding only, even to the read-only account.
    lab.ldap("ldappasswd", "-s", "alice-password", f"uid=alice,ou=users,{base}", bind=(lab.admin_dn, ADMIN_PASSWORD))
    hashes = lab.ldap("ldapsearch", "-LLL", "-b", f"uid=alice,ou=users,{base}", "userPassword", bind=readonly)
    assert found_dns(hashes) == [f"uid=alice,ou=users,{base}"] and "userPassword" not in hashes.stdout
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


# A stack with ldap.tls (soperator 4.1.7's staging rehearsal of production).
TLS_STACK = "staging-hanoi"


def whoami(lab: LdapLab, url: str, dn: str, password: str, *options: str):
    """A simple bind as a client does it: the certificate checked against the lab's CA and the name it was issued for."""
    return lab.run(
        "env", f"LDAPTLS_CACERT={lab.root / 'tls' / 'ca.crt'}", "ldapwhoami", "-x", "-H", url, *options, "-D", dn, "-w", password, check=False
    )


def binds(lab: LdapLab, config: PlatformConfig) -> dict[str, int]:
    """The read-only account's bind over each way in, by its exit status (13: confidentiality required)."""
    host = service_host(config)
    readonly = (names.readonly_dn(config.ldap), READONLY_PASSWORD)
    results = {
        "cleartext": whoami(lab, f"ldap://{host}:{lab.ldap_port}", *readonly),
        "StartTLS": whoami(lab, f"ldap://{host}:{lab.ldap_port}", *readonly, "-ZZ"),
        "ldaps": whoami(lab, f"ldaps://{host}:{lab.port}", *readonly),
        "admin, cleartext": whoami(lab, f"ldap://{host}:{lab.ldap_port}", lab.admin_dn, ADMIN_PASSWORD),
    }
    for way, result in results.items():
        if result.returncode == 0:
            assert result.stdout.strip().lower().startswith("dn:"), (way, result.stdout)
        else:
            assert result.returncode == 13 and "Confidentiality required" in result.stderr, (way, result.stdout + result.stderr)
    return {way: result.returncode for way, result in results.items()}


@pytest.fixture
def tls_directory():
    require_packages()
    made: list[LdapLab] = []

    def start(dropped_env: tuple[str, ...] = ()) -> tuple[LdapLab, PlatformConfig]:
        lab, config = start_directory(TLS_STACK, {}, dropped_env)
        made.append(lab)
        lab.add_hosts([service_host(config)])
        return lab, config

    yield start
    for lab in made:
        lab.close()
        shutil.rmtree(lab.root)


def test_with_tls_a_cleartext_bind_is_refused_and_starttls_and_ldaps_binds_work(tls_directory):
    lab, config = tls_directory()
    assert config.ldap.tls.enabled
    assert binds(lab, config) == {"cleartext": 13, "StartTLS": 0, "ldaps": 0, "admin, cleartext": 13}


def test_a_directory_initialised_without_tls_required_gets_it_from_the_init_container(tls_directory):
    # What the stacks' directories were initialised with before LDAP_REQUIRE_TLS: the image never rereads it.
    lab, config = tls_directory(dropped_env=("LDAP_REQUIRE_TLS",))
    assert binds(lab, config) == {"cleartext": 0, "StartTLS": 0, "ldaps": 0, "admin, cleartext": 0}
    pod = server.ldap_statefulset(config.ldap, config.cluster.namespace)["spec"]["template"]["spec"]
    (init,) = [c for c in pod["initContainers"] if c["name"] == "require-tls"]
    (data,) = [m for m in init["volumeMounts"] if m["name"] == "data"]
    assert init["image"] == pod["containers"][0]["image"] and server.ONLINE_CONF_DIR.startswith(data["mountPath"] + "/")
    command = [part.replace(server.ONLINE_CONF_DIR, str(lab.config_dir)) for part in init["command"]]
    # The pod restarts: slapd stops, the init container runs as slapd's user, slapd starts again.
    lab.stop("slapd")
    lab.run(*command, user="openldap")
    lab.slapd()
    assert binds(lab, config) == {"cleartext": 13, "StartTLS": 0, "ldaps": 0, "admin, cleartext": 13}
    # Every later start runs it again: nothing changes.
    lab.stop("slapd")
    lab.run(*command, user="openldap")
    lab.slapd()
    assert binds(lab, config)["cleartext"] == 13


def test_on_a_new_volume_the_init_container_leaves_the_first_start_to_the_image(tmp_path):
    require_packages()
    config = parse_config(stack_config(TLS_STACK))
    (init,) = [
        c
        for c in server.ldap_statefulset(config.ldap, config.cluster.namespace)["spec"]["template"]["spec"]["initContainers"]
        if c["name"] == "require-tls"
    ]
    empty = tmp_path / "slapd.d"
    empty.mkdir()
    command = [part.replace(server.ONLINE_CONF_DIR, str(empty)) for part in init["command"]]
    assert subprocess.run(command, capture_output=True, text=True).returncode == 0
    assert list(empty.iterdir()) == []


@pytest.mark.parametrize("operator", CLIENTS)
def test_each_operators_client_config_resolves_a_seeded_user_and_its_groups(operator):
    stack, overrides, client = CLIENTS[operator]
    require_packages()
    lab, config = start_directory(stack, overrides)
    try:
        namespace = config.cluster.namespace
        render = clients.sssd_conf if client == "sssd" else clients.nslcd_conf
        rendered = render(config.ldap, namespace, READONLY_PASSWORD)
        if config.ldap.tls.enabled:
            # The certificate's name stays (the lab's /etc/hosts resolves it), the port is the lab's, and the
            # CA the pod mounts from the TLS Secret is the lab's.
            lab.add_hosts([service_host(config)])
            ca_path = clients.ca_file(config.ldap, names.NSLCD_CA_FILE if client == "nslcd" else names.SSSD_CA_FILE)
            hosts = {f"{service_host(config)}:{names.LDAPS_PORT}": f"{service_host(config)}:{lab.port}"}
            conf = for_this_machine(rendered, hosts, {ca_path: lab.root / "tls" / "ca.crt"})
            assert f"ldaps://{service_host(config)}:{lab.port}" in conf and str(lab.root / "tls" / "ca.crt") in conf
        else:
            conf = for_this_machine(rendered, {f"{service_host(config)}:{names.LDAP_PORT}": f"127.0.0.1:{lab.port}"})
            assert f"ldap://127.0.0.1:{lab.port}" in conf
        if client == "sssd":
            checked = lab.sssd(conf)
            # Exit 1 only for the missing conf.d: soperator mounts the Secret over the whole /etc/sssd too.
            assert "Issues identified by validators: 0" in checked.stdout, checked.stdout + checked.stderr
        else:
            lab.nslcd(conf)
        (alice,) = [t for t in LAB_TENANTS if "alice" in t.user_names][:1]
        passwd = lab.run("getent", "passwd", "alice", check=False).stdout
        assert passwd, lab.log("nslcd" if client == "nslcd" else "sssd")[-4000:]
        assert passwd.startswith(f"alice:*:{derived_id('alice')}:") and passwd.rstrip().endswith(":/home/alice:/bin/bash"), passwd
        group = lab.run("getent", "group", alice.group).stdout
        assert group.startswith(f"{alice.group}:") and "alice" in group.rstrip().split(":")[-1].split(","), group
        groups = lab.run("id", "-Gn", "alice").stdout.split()
        assert {t.group for t in LAB_TENANTS if "alice" in t.user_names} <= set(groups), groups
    finally:
        lab.close()
        shutil.rmtree(lab.root)


# Text in people's languages, as the program renders it: a Vietnamese and a Chinese organisation, and users whose cn
# is their full name with diacritics or in Chinese characters.
DISPLAY_NAMES = {"alice": "Nguyễn Văn An", "bob": "王小明"}
LANGUAGES = {
    "Vietnamese organisation, sssd": ("Công ty Cổ phần FPT Smart Cloud, Inc.", "sssd"),
    "Chinese organisation, nslcd": ("阿里云计算有限公司", "nslcd"),
}


@pytest.mark.parametrize("case", LANGUAGES)
def test_an_organisation_and_full_names_in_any_language_read_back_through_ldapsearch_and_each_client(case):
    organisation, client = LANGUAGES[case]
    require_packages()
    lab_ldap = {**stack_config("dev-lab")["ldap"], "organisation": organisation, "displayNames": DISPLAY_NAMES}
    lab, config = start_directory("dev-lab", {"ldap": lab_ldap})
    try:
        base = config.ldap.base_dn
        admin = (lab.admin_dn, ADMIN_PASSWORD)
        readonly = (names.readonly_dn(config.ldap), READONLY_PASSWORD)
        # ldapsearch prints what is not a SAFE-STRING in base64, as the seed has it; decoded, it is the config's text.
        root = lab.ldap("ldapsearch", "-LLL", "-o", "ldif-wrap=no", "-s", "base", "-b", base, "o", bind=admin).stdout
        assert f"o:: {base64.b64encode(organisation.encode()).decode()}" in root.splitlines(), root
        # The server matches the UTF-8 text itself: a filter on the name finds the user.
        for user, name in DISPLAY_NAMES.items():
            found = lab.ldap(
                "ldapsearch", "-LLL", "-o", "ldif-wrap=no", "-b", f"ou=users,{base}", f"(cn={name})", "uid", "displayName", bind=readonly
            )
            assert f"uid: {user}" in found.stdout, found.stdout + found.stderr
            assert f"displayName:: {base64.b64encode(name.encode()).decode()}" in found.stdout
        render = clients.sssd_conf if client == "sssd" else clients.nslcd_conf
        conf = for_this_machine(
            render(config.ldap, config.cluster.namespace, READONLY_PASSWORD), {f"{service_host(config)}:{names.LDAP_PORT}": f"127.0.0.1:{lab.port}"}
        )
        lab.sssd(conf) if client == "sssd" else lab.nslcd(conf)
        for user, name in DISPLAY_NAMES.items():
            passwd = lab.run("getent", "passwd", user, check=False).stdout
            assert passwd, lab.log(client)[-4000:]
            # name:password:uid:gid:gecos:home:shell, the gecos field the cn in UTF-8.
            assert passwd.rstrip("\n").split(":")[4] == name and passwd.endswith(f":/home/{user}:/bin/bash\n"), passwd
    finally:
        lab.close()
        shutil.rmtree(lab.root)

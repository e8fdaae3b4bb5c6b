"""Researchers log in as themselves, on real daemons (tests/services.py `LdapLab`): slapd seeded with what the
program renders for tenants whose researchers have SSH keys, sssd on the rendered sssd.conf (its ssh responder
and the shadow expiry check), and a real sshd on each operator's rendered sshd lines: soperator 4.1.7's
ConfigMap, Slinky's extraSshdConfig, ACK's login sshd_config. A researcher's own key lets them in, with their
tenant's group and a home made at the first login (theirs, 0700); a wrong key, an unknown user, an expired
account and a locked one (the reconciler's lock: shadowExpire 1, no key, nologin) are refused.

What the lab changes in the rendered text: host keys (one of the lab's, `-h`), the port and address (`-p`,
ListenAddress 127.0.0.1), soperator's jail (ChrootDirectory /: the lab's root, whose /home is the lab's).
The PAM stack is the lab's (Debian's common stacks as pam-auth-update writes them with libpam-sss, plus
the login's pam_mkhomedir line, components/identity/clients.py): each operator's image brings its own."""

from __future__ import annotations

import copy
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from components.config import PlatformConfig, parse_config
from components.config.identity import derived_id
from components.identity import clients, entries, names, server
from components.slurm import ack, manifest_of, slinky, soperator4
from tests.harness import stack_config, without_keys_unread_by
from tests.services import LdapLab, for_this_machine, free_port, require_packages, wait_for

ADMIN_PASSWORD = "lab-admin-password"
READONLY_PASSWORD = "lab-readonly-password"
# alice logs in; bob is locked as the reconciler locks; carol's account has expired (her key stays); dan has no key.
USERS_WITH_KEYS = ("alice", "bob", "carol")
LAB_PAM = (
    "# The lab's sshd stack: Debian's common stacks with libpam-sss (pam-auth-update), and the login's home line.\n"
    "auth     required   pam_deny.so\n"
    "account  required   pam_nologin.so\n"
    "account  [success=1 new_authtok_reqd=done default=ignore] pam_unix.so\n"
    "account  requisite  pam_deny.so\n"
    "account  required   pam_permit.so\n"
    "account  sufficient pam_localuser.so\n"
    "account  [default=bad success=ok user_unknown=ignore] pam_sss.so\n"
    "session  required   pam_unix.so\n"
    "session  optional   pam_sss.so\n"
    f"{clients.MKHOMEDIR_SESSION}\n"
    "password required   pam_deny.so\n"
)


def soperator4_sshd(config: PlatformConfig) -> str:
    (config_map,) = manifest_of(soperator4.render(config), "ConfigMap", "login-sshd-config")
    return config_map["data"][soperator4.SSHD_CONFIG_KEY]


def slinky_sshd(config: PlatformConfig) -> str:
    (loginset,) = manifest_of(slinky.render(config), "LoginSet")
    return loginset["spec"]["extraSshdConfig"]


def ack_sshd(config: PlatformConfig) -> str:
    (files,) = manifest_of(ack.render(config), "ConfigMap", "login-files")
    return files["data"]["sshd_config"]


# Each operator's sshd text, from a stack that runs it.
SSHD_TEXTS = {
    "soperator 4.1.7": (soperator4_sshd, "dev-lab", {}),
    "Slinky": (slinky_sshd, "dev-lab", without_keys_unread_by("slinky", {**stack_config("dev-lab"), "slurmOperator": "slinky"})),
    "ACK": (ack_sshd, "staging-hangzhou", {}),
}


@pytest.fixture(scope="module")
def keys():
    """An ed25519 key pair per researcher, and one nobody has."""
    require_packages()
    root = Path(tempfile.mkdtemp(prefix="slurm-platform-keys-"))
    try:
        pairs = {}
        for name in (*USERS_WITH_KEYS, "stranger"):
            path = root / name
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{name}@lab", "-f", str(path)], check=True)
            pairs[name] = (path, (root / f"{name}.pub").read_text().strip())
        yield pairs
    finally:
        shutil.rmtree(root)


def lab_config(keys: dict[str, tuple[Path, str]]) -> PlatformConfig:
    """dev-lab's directory and tenants, its researchers with their keys (dan without)."""
    raw = copy.deepcopy(stack_config("dev-lab"))
    for tenant in raw["tenants"]:
        names = [user if isinstance(user, str) else user["name"] for user in tenant["users"]]
        tenant["users"] = [{"name": name, "sshPublicKeys": [keys[name][1]]} if name in keys else name for name in names]
    return parse_config(raw)


def lab_sshd_config(text: str, host_key: Path) -> str:
    """The rendered sshd lines with the lab's host key and root, everything else verbatim."""
    lines = []
    for line in text.splitlines():
        if line.startswith("HostKey "):
            continue
        if line.startswith("ChrootDirectory "):
            line = "ChrootDirectory /"
        lines.append(line)
    return "\n".join([f"HostKey {host_key}", "ListenAddress 127.0.0.1", *lines]) + "\n"


def ssh(key: Path, port: int, user: str, *command: str) -> subprocess.CompletedProcess:
    options = ["-F", "/dev/null", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes"]
    options += ["-o", "IdentitiesOnly=yes", "-o", "ConnectTimeout=10", "-i", str(key), "-p", str(port)]
    return subprocess.run(["ssh", *options, f"{user}@127.0.0.1", *command], capture_output=True, text=True, timeout=60)


def modify(lab: LdapLab, config: PlatformConfig, user: str, *changes: str) -> None:
    """An admin's ldapmodify of a researcher's entry."""
    ldif = f"dn: {names.user_dn(config.ldap, user)}\nchangetype: modify\n" + "\n-\n".join(changes) + "\n"
    lab.ldap("ldapmodify", bind=(lab.admin_dn, ADMIN_PASSWORD), input=ldif)


def start_login(keys: dict[str, tuple[Path, str]], sshd_text: str) -> tuple[LdapLab, PlatformConfig, int]:
    """slapd seeded for the researchers, bob locked and carol expired before anything looks them up, sssd on the
    rendered sssd.conf, and sshd on `sshd_text` in the lab."""
    config = lab_config(keys)
    root = Path(tempfile.mkdtemp(prefix="slurm-platform-login-"))
    root.chmod(0o755)
    lab = LdapLab(root, server.ldap_statefulset(config.ldap, config.cluster.namespace), ADMIN_PASSWORD)
    try:
        seed = entries.seed_ldif(config.ldap, entries.ssha512(READONLY_PASSWORD, "0123456789abcdef"), config.tenants)
        assert seed.count("sshPublicKey: ") == len(USERS_WITH_KEYS), seed
        lab.load(seed, {"acl.sh": entries.acl_init_script(config.ldap)})
        # The reconciler's lock, and an expiry alone.
        modify(
            lab,
            config,
            "bob",
            "replace: shadowExpire\nshadowExpire: 1",
            "delete: sshPublicKey",
            f"replace: loginShell\nloginShell: {names.LOCKED_SHELL}",
        )
        modify(lab, config, "carol", "replace: shadowExpire\nshadowExpire: 1")
        host = f"{names.SERVICE_NAME}.{config.cluster.namespace}.svc.cluster.local:{names.LDAP_PORT}"
        conf = for_this_machine(clients.sssd_conf(config.ldap, config.cluster.namespace, READONLY_PASSWORD), {host: f"127.0.0.1:{lab.port}"})
        checked = lab.sssd(conf)
        assert "Issues identified by validators: 0" in checked.stdout, checked.stdout + checked.stderr
        # As the package lays it out: sss_ssh_authorizedkeys runs as nobody and reaches the ssh responder's socket.
        (root / "sssd-var-lib-sss-pipes").chmod(0o755)
        wait_for(lambda: lab.run("test", "-S", "/var/lib/sss/pipes/ssh", check=False).returncode == 0, "sssd's ssh responder", 30)
        # The lab's /home, PAM stack and sshd's privilege separation directory.
        lab.bind(lab.dir("home"), "/home")
        pam = root / "etc" / "pam-sshd"
        pam.write_text(LAB_PAM)
        lab.bind(pam, "/etc/pam.d/sshd")
        lab.run("install", "-d", "-m", "0755", "/run/sshd")
        host_key = root / "ssh_host_ed25519_key"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(host_key)], check=True)
        sshd_config = root / "sshd_config"
        sshd_config.write_text(lab_sshd_config(sshd_text, host_key))
        lab.run("/usr/sbin/sshd", "-t", "-f", str(sshd_config))
        port = free_port()
        process = lab.start("sshd", "/usr/sbin/sshd", "-D", "-e", "-f", str(sshd_config), "-p", str(port))
        listening = lambda: subprocess.run(["bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{port}"], capture_output=True).returncode == 0  # noqa: E731
        wait_for(lambda: listening() or not lab.alive(process), "sshd", 20)
        assert listening(), lab.log("sshd")[-3000:]
        return lab, config, port
    except BaseException:
        lab.close()
        shutil.rmtree(root)
        raise


def tenant_group(config: PlatformConfig, user: str) -> str:
    (group,) = [t.group for t in config.tenants if user in t.user_names][:1]
    return group


@pytest.mark.parametrize("operator", SSHD_TEXTS)
def test_a_researcher_logs_in_as_themselves_with_their_own_key_and_nobody_else_does(operator: str, keys: Any):
    render, stack, overrides = SSHD_TEXTS[operator]
    sshd_text = render(parse_config({**stack_config(stack), **overrides}))
    for line in clients.sshd_settings():
        assert line in sshd_text.splitlines(), (operator, line)
    lab, config, port = start_login(keys, sshd_text)
    try:
        logged = ssh(keys["alice"][0], port, "alice", "id")
        assert logged.returncode == 0, logged.stderr + lab.log("sshd")[-3000:] + lab.log("sssd")[-2000:]
        uid = derived_id("alice")
        assert logged.stdout.startswith(f"uid={uid}(alice) "), logged.stdout
        assert f"({tenant_group(config, 'alice')})" in logged.stdout, logged.stdout
        # The home, made at the first login: the researcher's, private to them.
        home = lab.root / "home" / "alice"
        assert home.is_dir() and home.stat().st_uid == uid and home.stat().st_mode & 0o777 == 0o700, oct(home.stat().st_mode)
        assert ssh(keys["alice"][0], port, "alice", "pwd").stdout.strip() == entries.home_directory("alice")
        refused = {
            "a wrong key": ssh(keys["stranger"][0], port, "alice", "id"),
            "another researcher's key": ssh(keys["carol"][0], port, "alice", "id"),
            "an unknown user": ssh(keys["alice"][0], port, "mallory", "id"),
            "a locked researcher": ssh(keys["bob"][0], port, "bob", "id"),
            "an expired account": ssh(keys["carol"][0], port, "carol", "id"),
            "a researcher without a key": ssh(keys["alice"][0], port, "dan", "id"),
        }
        for case, result in refused.items():
            assert result.returncode == 255 and not result.stdout, (case, result.stdout, result.stderr)
            assert "Permission denied" in result.stderr or "Connection closed" in result.stderr, (case, result.stderr)
        # carol's key is hers (the directory hands it over): what refuses her is the account's expiry (pam_sss).
        keys_of_carol = lab.run("sss_ssh_authorizedkeys", "carol", user="nobody", host=True, check=False).stdout
        assert keys["carol"][1].split()[1] in keys_of_carol, keys_of_carol
        assert lab.run("sss_ssh_authorizedkeys", "bob", user="nobody", host=True, check=False).stdout.strip() == ""
        assert not (lab.root / "home" / "bob").exists() and not (lab.root / "home" / "carol").exists()
        assert "carol" in lab.log("sshd") and "account" in lab.log("sshd").lower()
    finally:
        lab.close()
        shutil.rmtree(lab.root)

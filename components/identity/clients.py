"""What a Slurm pod reads the directory with: ldap.conf, nslcd.conf and sssd.conf, each binding as the read-only account;
and what a login's sshd needs to let researchers in as themselves, on the keys the directory holds (sshd_settings)."""

from __future__ import annotations

from slurm_rules.config_files import ConfigFile

from ..config import LdapConfig
from .ldif import dn
from .names import CA_FILE, NSLCD_CA_FILE, SSSD_CA_FILE, ldap_uri, readonly_dn

# openssh-lpk's attribute (schema.py), rendered by entries.py from tenants[].users[].sshPublicKeys.
SSH_KEY_ATTRIBUTE = "sshPublicKey"
AUTHORIZED_KEYS_COMMAND = "/usr/bin/sss_ssh_authorizedkeys"
# pam_mkhomedir's session line: a researcher's home made on the first login, private to them.
MKHOMEDIR_SESSION = "session optional pam_mkhomedir.so skel=/etc/skel umask=0077"


def ca_file(ldap: LdapConfig, default: str) -> str:
    """The CA bundle a client trusts: the TLS Secret's CA (copied to `default`) with TLS, else the system's."""
    return default if ldap.tls.enabled else CA_FILE


def ldap_conf(ldap: LdapConfig, namespace: str) -> str:
    conf = ConfigFile("ldap.conf", "\t")
    conf.set("BASE", ldap.base_dn).set("URI", ldap_uri(ldap, namespace)).set("TLS_CACERT", ca_file(ldap, NSLCD_CA_FILE))
    return conf.text()


def nslcd_conf(ldap: LdapConfig, namespace: str, bind_password: str) -> str:
    # Binds as the read-only account: nslcd.conf holds its password, so it lives in a Secret. nslcd takes a
    # base per map: `base passwd` and `base group` beside the default `base`.
    conf = ConfigFile("nslcd.conf", " ", repeatable=["base"])
    conf.set("uid", "nslcd").set("gid", "nslcd").set("uri", ldap_uri(ldap, namespace))
    conf.set("binddn", readonly_dn(ldap)).set("bindpw", bind_password).set("base", ldap.base_dn)
    conf.set("base", f"passwd {dn('ou', 'users', ldap.base_dn)}").set("base", f"group {dn('ou', 'groups', ldap.base_dn)}")
    conf.set("tls_cacertfile", ca_file(ldap, NSLCD_CA_FILE))
    return conf.text()


def sssd_conf(ldap: LdapConfig, namespace: str, bind_password: str) -> str:
    """The ssh responder hands sshd a user's sshPublicKey values (sss_ssh_authorizedkeys, sshd_settings); a locked
    researcher (shadowExpire 1, the reconciler's lock) is refused by the ldap access provider's shadow check."""
    conf = ConfigFile("sssd.conf", " = ")
    conf.section("sssd").set("services", "nss, pam, ssh").set("config_file_version", 2).set("domains", "LDAP")
    conf.section("domain/LDAP").set("id_provider", "ldap").set("auth_provider", "ldap")
    conf.set("access_provider", "ldap").set("ldap_access_order", "expire").set("ldap_account_expire_policy", "shadow")
    conf.set("ldap_user_ssh_public_key", SSH_KEY_ATTRIBUTE)
    conf.set("ldap_uri", ldap_uri(ldap, namespace)).set("ldap_search_base", ldap.base_dn)
    conf.set("ldap_user_search_base", dn("ou", "users", ldap.base_dn)).set("ldap_group_search_base", dn("ou", "groups", ldap.base_dn))
    conf.set("ldap_default_bind_dn", readonly_dn(ldap)).set("ldap_default_authtok", bind_password)
    conf.set("ldap_tls_cacert", ca_file(ldap, SSSD_CA_FILE))
    conf.set("cache_credentials", "true").set("enumerate", "false")
    return conf.text()


def sshd_settings() -> list[str]:
    """The sshd_config lines every login needs, whatever the operator: a researcher's keys come from the
    directory through sssd's ssh responder, run as nobody (it reads sssd's socket, nothing else); keys only,
    no password or keyboard-interactive prompt; PAM for the account check (sssd refuses a locked user) and
    the session. AuthorizedKeysFile stays sshd's default, so root keeps the administrators' keys
    (sshRootPublicKeys, mounted at /root/.ssh/authorized_keys by each operator); sshd tries the file, then the command."""
    return [
        f"AuthorizedKeysCommand {AUTHORIZED_KEYS_COMMAND} %u",
        "AuthorizedKeysCommandUser nobody",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM yes",
    ]

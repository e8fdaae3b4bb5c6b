"""What a Slurm pod reads the directory with: ldap.conf, nslcd.conf and sssd.conf, each binding as the read-only account;
and what a login's sshd needs to let researchers in as themselves, on the keys the directory holds (sshd_settings)."""

from __future__ import annotations

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
    return f"BASE\t{ldap.base_dn}\nURI\t{ldap_uri(ldap, namespace)}\nTLS_CACERT\t{ca_file(ldap, NSLCD_CA_FILE)}\n"


def nslcd_conf(ldap: LdapConfig, namespace: str, bind_password: str) -> str:
    # Binds as the read-only account: nslcd.conf holds its password, so it lives in a Secret.
    return (
        "uid nslcd\ngid nslcd\n"
        f"uri {ldap_uri(ldap, namespace)}\n"
        f"binddn {readonly_dn(ldap)}\n"
        f"bindpw {bind_password}\n"
        f"base {ldap.base_dn}\n"
        f"base passwd {dn('ou', 'users', ldap.base_dn)}\n"
        f"base group {dn('ou', 'groups', ldap.base_dn)}\n"
        f"tls_cacertfile {ca_file(ldap, NSLCD_CA_FILE)}\n"
    )


def sssd_conf(ldap: LdapConfig, namespace: str, bind_password: str) -> str:
    """The ssh responder hands sshd a user's sshPublicKey values (sss_ssh_authorizedkeys, sshd_settings); a locked
    researcher (shadowExpire 1, the reconciler's lock) is refused by the ldap access provider's shadow check."""
    return (
        "[sssd]\nservices = nss, pam, ssh\nconfig_file_version = 2\ndomains = LDAP\n\n"
        "[domain/LDAP]\nid_provider = ldap\nauth_provider = ldap\n"
        "access_provider = ldap\nldap_access_order = expire\nldap_account_expire_policy = shadow\n"
        f"ldap_user_ssh_public_key = {SSH_KEY_ATTRIBUTE}\n"
        f"ldap_uri = {ldap_uri(ldap, namespace)}\n"
        f"ldap_search_base = {ldap.base_dn}\n"
        f"ldap_user_search_base = {dn('ou', 'users', ldap.base_dn)}\n"
        f"ldap_group_search_base = {dn('ou', 'groups', ldap.base_dn)}\n"
        f"ldap_default_bind_dn = {readonly_dn(ldap)}\n"
        f"ldap_default_authtok = {bind_password}\n"
        f"ldap_tls_cacert = {ca_file(ldap, SSSD_CA_FILE)}\n"
        "cache_credentials = true\nenumerate = false\n"
    )


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

"""What a Slurm pod reads the directory with: ldap.conf, nslcd.conf and sssd.conf, each binding as the read-only account."""

from __future__ import annotations

from ..config import LdapConfig
from .ldif import dn
from .names import CA_FILE, NSLCD_CA_FILE, SSSD_CA_FILE, ldap_uri, readonly_dn


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
    return (
        "[sssd]\nservices = nss, pam\nconfig_file_version = 2\ndomains = LDAP\n\n"
        "[domain/LDAP]\nid_provider = ldap\nauth_provider = ldap\n"
        f"ldap_uri = {ldap_uri(ldap, namespace)}\n"
        f"ldap_search_base = {ldap.base_dn}\n"
        f"ldap_user_search_base = {dn('ou', 'users', ldap.base_dn)}\n"
        f"ldap_group_search_base = {dn('ou', 'groups', ldap.base_dn)}\n"
        f"ldap_default_bind_dn = {readonly_dn(ldap)}\n"
        f"ldap_default_authtok = {bind_password}\n"
        f"ldap_tls_cacert = {ca_file(ldap, SSSD_CA_FILE)}\n"
        "cache_credentials = true\nenumerate = false\n"
    )

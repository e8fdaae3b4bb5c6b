"""The directory's object names, ports and DNs: defined once, read by the identity modules and the Slurm operators."""

from __future__ import annotations

from ..config import LdapConfig
from .ldif import dn

STATEFULSET_NAME = "ldap"
SERVICE_NAME = "ldap-service"
SECRET_NAME = "ldap-secret"
CLIENT_CONFIGMAP = "ldap-client-config"
SSSD_SECRET = "sssd-config"
NSLCD_SECRET = "nslcd-config"
SEED_SECRET = "ldap-seed"
INIT_CONFIGMAP = "ldap-init"
SCHEMA_CONFIGMAP = "ldap-schema"
PASSWORD_KEY = "LDAP_ADMIN_PASSWORD"
READONLY_PASSWORD_KEY = "LDAP_READONLY_PASSWORD"
SERVICES_OU = "services"
SALT_LENGTH = 16
LDAP_PORT, LDAPS_PORT = 389, 636
CONTAINER_LDAP_PORT, CONTAINER_LDAPS_PORT = 1389, 1636
APP_LABELS = {"app.kubernetes.io/name": "openldap", "app.kubernetes.io/part-of": "slurm-platform"}
CA_FILE = "/etc/ssl/certs/ca-certificates.crt"
# With TLS, the clients trust the CA of the server's TLS Secret (ca.crt), not the system
# bundle (a private CA is never in it). The program never reads that Secret (its tls.key
# would sit in the state): Slinky and ACK pods mount its ca.crt at these paths
# (components/slurm/common.py ldap_ca_files); soperator 4.1.7's sssd sidecars mount
# ldap.tls.caConfigMapName at /mnt/ldapCA (its sssdLdapCAConfigMapRefName), the same file.
TLS_CA_KEY = "ca.crt"
SSSD_CA_FILE = f"/mnt/ldapCA/{TLS_CA_KEY}"
NSLCD_CA_FILE = "/etc/ldap-ca.crt"
# What the reconciler and sshd use.
RECONCILER_CONFIGMAP = "ldap-reconciler"
RECONCILER_JOB_PREFIX = "ldap-reconcile"
USERS_OU, GROUPS_OU = "users", "groups"
# A locked researcher's shell: sshd refuses a session, su and cron too (pam_shells does not list it).
LOCKED_SHELL = "/usr/sbin/nologin"
LOGIN_SHELL = "/bin/bash"


def admin_dn(ldap: LdapConfig) -> str:
    return dn("cn", ldap.admin_username, ldap.base_dn)


def readonly_dn(ldap: LdapConfig) -> str:
    """The account sssd and nslcd bind with."""
    return dn("cn", ldap.readonly_username, dn("ou", SERVICES_OU, ldap.base_dn))


def users_dn(ldap: LdapConfig) -> str:
    return dn("ou", USERS_OU, ldap.base_dn)


def user_dn(ldap: LdapConfig, user: str) -> str:
    return dn("uid", user, users_dn(ldap))


def groups_dn(ldap: LdapConfig) -> str:
    return dn("ou", GROUPS_OU, ldap.base_dn)


def ldap_uri(ldap: LdapConfig, namespace: str) -> str:
    host = f"{SERVICE_NAME}.{namespace}.svc.cluster.local"
    return f"ldaps://{host}:{LDAPS_PORT}" if ldap.tls.enabled else f"ldap://{host}:{LDAP_PORT}"

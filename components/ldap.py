"""LDAP directory for Slurm users: an OpenLDAP StatefulSet with its own data
volume, Service `ldap-service`, Secret `ldap-secret` (random admin password),
and the client side Slurm nodes need to resolve users:
`ldap.conf` (ConfigMap, no secrets), `sssd.conf` and `nslcd.conf` (Secrets).

Clients never bind as the admin: the seed LDIF (Secret `ldap-seed`) creates a
read-only service account `cn=<readonlyUsername>,ou=services,<baseDn>` whose
password is a random Pulumi secret (stored in the directory as a salted
SHA-512 hash), and a one-time init script sets the ACL that lets it read the
tree and nothing else (anonymous binds are off). Both run when the directory
is first initialised; an existing directory keeps its entries.

The server image follows bitnami's OpenLDAP environment contract
(LDAP_ROOT, LDAP_ADMIN_*, LDAP_CUSTOM_LDIF_DIR, ports 1389/1636); the default
is the frozen `bitnamilegacy` build because osixia/openldap 1.5.0 is stale and
bitnami's maintained images left Docker Hub. Production stacks mirror it.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from . import child_opts
from .config import LdapConfig, TenantConfig

SERVICE_NAME = "ldap-service"
SECRET_NAME = "ldap-secret"
CLIENT_CONFIGMAP = "ldap-client-config"
SSSD_SECRET = "sssd-config"
NSLCD_SECRET = "nslcd-config"
SEED_SECRET = "ldap-seed"
INIT_CONFIGMAP = "ldap-init"
PASSWORD_KEY = "LDAP_ADMIN_PASSWORD"
READONLY_PASSWORD_KEY = "LDAP_READONLY_PASSWORD"
SERVICES_OU = "services"
SALT_LENGTH = 16
LDAP_PORT, LDAPS_PORT = 389, 636
CONTAINER_LDAP_PORT, CONTAINER_LDAPS_PORT = 1389, 1636
APP_LABELS = {"app.kubernetes.io/name": "openldap", "app.kubernetes.io/part-of": "slurm-platform"}
CA_FILE = "/etc/ssl/certs/ca-certificates.crt"
# With TLS, the clients trust the CA of the server's TLS Secret (ca.crt), not the system
# bundle (a private CA is never in it): the program copies it into sssd-config and
# nslcd-config under this key. soperator 4.x mounts sssd-config whole at /etc/sssd;
# Slinky and ACK pods mount the key at these paths (components/slurm/).
CLIENT_CA_KEY = "ldap-ca.crt"
SSSD_CA_FILE = f"/etc/sssd/{CLIENT_CA_KEY}"
NSLCD_CA_FILE = f"/etc/{CLIENT_CA_KEY}"
TLS_CA_KEY = "ca.crt"


# RFC 2849: a value goes as is only as a SAFE-STRING (ASCII without NUL, LF, CR; not starting with
# space, ':' or '<'); and one ending in a space SHOULD be base64 too. Anything else goes base64 after '::'.
_LDIF_SAFE = re.compile(r"[\x01-\x09\x0b\x0c\x0e-\x1f\x21-\x39\x3b\x3d-\x7f][\x01-\x09\x0b\x0c\x0e-\x7f]*")


def ldif_line(attribute: str, value: str) -> str:
    """One LDIF attribute line (`dn` included): every value the seed and the ACL carry goes through here."""
    if value == "":
        return f"{attribute}:"
    if _LDIF_SAFE.fullmatch(value) and not value.endswith(" "):
        return f"{attribute}: {value}"
    return f"{attribute}:: {base64.b64encode(value.encode()).decode()}"


def ldif_entry(entry_dn: str, *attributes: tuple[str, str]) -> list[str]:
    """An entry's lines: its dn, then `(attribute, value)` pairs, each encoded by ldif_line."""
    return [ldif_line("dn", entry_dn), *(ldif_line(attribute, value) for attribute, value in attributes)]


# RFC 4514 2.4: in an attribute value of a DN, these are escaped with a backslash, as are a leading
# space or '#', a trailing space, and NUL (\00); UTF-8 stays as it is.
_DN_SPECIAL = frozenset(',+"\\<>;=')


def dn_value(value: str) -> str:
    """`value` escaped for the value of an RDN (RFC 4514)."""
    escaped = ["\\00" if c == "\0" else "\\" + c if c in _DN_SPECIAL else c for c in value]
    if value[:1] in (" ", "#"):
        escaped[0] = "\\" + escaped[0]
    if len(value) > 1 and value.endswith(" "):
        escaped[-1] = "\\ "
    return "".join(escaped)


def dn(attribute: str, value: str, parent: str) -> str:
    """The DN `attribute=value,parent`, the value escaped: every DN the program builds under the base."""
    return f"{attribute}={dn_value(value)},{parent}"


def admin_dn(ldap: LdapConfig) -> str:
    return dn("cn", ldap.admin_username, ldap.base_dn)


def readonly_dn(ldap: LdapConfig) -> str:
    """The account sssd and nslcd bind with."""
    return dn("cn", ldap.readonly_username, dn("ou", SERVICES_OU, ldap.base_dn))


def ssha512(password: str, salt: str) -> str:
    """An OpenLDAP {SSHA512} userPassword (the image loads the pw-sha2 module)."""
    salt_bytes = salt.encode()
    digest = hashlib.sha512(password.encode() + salt_bytes).digest()
    return "{SSHA512}" + base64.b64encode(digest + salt_bytes).decode()


def ldap_uri(ldap: LdapConfig, namespace: str) -> str:
    host = f"{SERVICE_NAME}.{namespace}.svc.cluster.local"
    return f"ldaps://{host}:{LDAPS_PORT}" if ldap.tls.enabled else f"ldap://{host}:{LDAP_PORT}"


# Numbers of the tenants' seeded users and groups, clear of distribution-reserved ranges.
FIRST_UID = 10000
FIRST_GID = 20000


def tenant_entries(ldap: LdapConfig, tenants: Sequence[TenantConfig]) -> list[str]:
    """A posixGroup per tenant group and a posixAccount per user (no password: users set one, or
    log in by key). Numbers follow the order of first mention, so append tenants and users rather
    than reorder them; like all of the seed, they load when the directory is first initialised."""
    members: dict[str, list[str]] = {}
    for tenant in tenants:
        listed = members.setdefault(tenant.group, [])
        listed += [user for user in tenant.users if user not in listed]
    gids = {group: FIRST_GID + i for i, group in enumerate(members)}
    primary: dict[str, str] = {}
    for group, users in members.items():
        for user in users:
            primary.setdefault(user, group)
    lines: list[str] = []
    groups_dn, users_dn = dn("ou", "groups", ldap.base_dn), dn("ou", "users", ldap.base_dn)
    for group, names in members.items():
        lines += ["", *ldif_entry(dn("cn", group, groups_dn), ("objectClass", "posixGroup"), ("cn", group), ("gidNumber", str(gids[group])))]
        lines += [ldif_line("memberUid", user) for user in names]
    for uid, (user, group) in enumerate(primary.items(), start=FIRST_UID):
        full_name = ldap.display_names.get(user, user)
        lines += [
            "",
            *ldif_entry(
                dn("uid", user, users_dn),
                *(("objectClass", c) for c in ("inetOrgPerson", "posixAccount", "shadowAccount")),
                ("uid", user),
                # sssd and nslcd take the passwd name field (gecos) from cn when the entry has no gecos,
                # which is IA5 (ASCII) in the nis schema: cn carries the name in any language.
                ("cn", full_name),
                ("sn", user),
                *((("displayName", full_name),) if user in ldap.display_names else ()),
                ("uidNumber", str(uid)),
                ("gidNumber", str(gids[group])),
                ("homeDirectory", f"/home/{user}"),
                ("loginShell", "/bin/bash"),
            ),
        ]
    return lines


def seed_ldif(ldap: LdapConfig, readonly_password_hash: str, tenants: Sequence[TenantConfig] = ()) -> str:
    """The base tree: the root entry carries the organisation, users, groups, the read-only account,
    and the tenants' groups and users."""
    first_rdn = ldap.base_dn.split(",")[0]
    attribute, value = first_rdn.split("=", 1)
    root_classes = {"dc": ["dcObject", "organization"], "o": ["organization"], "ou": ["organizationalUnit"]}[attribute]
    root = [*(("objectClass", c) for c in ["top", *root_classes]), (attribute, value)]
    if attribute != "o":
        root.append(("o", ldap.organisation))
    lines = ldif_entry(ldap.base_dn, *root)
    for unit in ("users", "groups", SERVICES_OU):
        lines += ["", *ldif_entry(dn("ou", unit, ldap.base_dn), ("objectClass", "organizationalUnit"), ("ou", unit))]
    lines += [
        "",
        *ldif_entry(
            readonly_dn(ldap),
            ("objectClass", "organizationalRole"),
            ("objectClass", "simpleSecurityObject"),
            ("cn", ldap.readonly_username),
            ("description", "Read-only bind account of the Slurm nodes' sssd and nslcd"),
            ("userPassword", readonly_password_hash),
        ),
        *tenant_entries(ldap, tenants),
    ]
    return "\n".join(lines) + "\n"


def readonly_acl_ldif(ldap: LdapConfig) -> str:
    """The data tree's ACL: the service account reads, users read themselves and change
    their password, password hashes are only used to authenticate. The service account's
    own password is bind-only too: it sits on every node, and whoever reads it there must
    not be able to change it and lock every node out. The admin (rootDN) is not subject to ACLs."""
    rules = (
        f'{{0}}to dn.exact="{readonly_dn(ldap)}" attrs=userPassword by anonymous auth by * none',
        "{1}to attrs=userPassword,shadowLastChange by self write by anonymous auth by * none",
        f'{{2}}to * by dn.exact="{readonly_dn(ldap)}" read by self read by * none',
    )
    lines = [ldif_line("dn", "olcDatabase={2}mdb,cn=config"), "changetype: modify", "add: olcAccess", *(ldif_line("olcAccess", r) for r in rules)]
    return "\n".join(lines) + "\n"


def acl_init_script(ldap: LdapConfig) -> str:
    """Run once by the image after the first initialisation (/docker-entrypoint-initdb.d)."""
    return (
        "#!/bin/bash\n"
        "# Install the read-only service account's ACL (slurm-platform).\n"
        "set -euo pipefail\n"
        "acl=$(mktemp)\n"
        "cat > \"$acl\" <<'LDIF'\n"
        f"{readonly_acl_ldif(ldap)}"
        "LDIF\n"
        "if ldapwhoami -Y EXTERNAL -H ldapi:/// >/dev/null 2>&1; then\n"
        '  ldapmodify -Y EXTERNAL -H ldapi:/// -f "$acl"\n'
        "else\n"
        '  slapmodify -F "${LDAP_ONLINE_CONF_DIR:-/bitnami/openldap/slapd.d}" -n 0 -l "$acl"\n'
        "fi\n"
        'rm -f "$acl"\n'
    )


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


# bitnami's image keeps slapd's cn=config on the data volume (LDAP_ONLINE_CONF_DIR).
ONLINE_CONF_DIR = "/bitnami/openldap/slapd.d"
REQUIRE_TLS_LDIF = "dn: cn=config\nchangetype: modify\nreplace: olcSecurity\nolcSecurity: tls=1\n"


def require_tls_script(conf_dir: str = ONLINE_CONF_DIR) -> str:
    """Sets what LDAP_REQUIRE_TLS sets (bitnami's ldap_configure_tls_required) on a directory the image
    initialised before: the image reads LDAP_REQUIRE_TLS only on a first start. Offline (slapd is not
    running yet), idempotent, and a no-op on a new volume, where the image applies it itself."""
    return f'set -euo pipefail\nif [[ -d "{conf_dir}/cn=config" ]]; then\n  slapmodify -F "{conf_dir}" -n 0 <<\'LDIF\'\n{REQUIRE_TLS_LDIF}LDIF\nfi\n'


def require_tls_container(ldap: LdapConfig) -> dict[str, Any]:
    return {
        "name": "require-tls",
        "image": ldap.image,
        "command": ["bash", "-c", require_tls_script()],
        "volumeMounts": [{"name": "data", "mountPath": "/bitnami/openldap"}],
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
    }


def priority(priority_class: Optional[str]) -> dict[str, Any]:
    """The pod's class: the Slurm cluster's, so no tenant class outranks the directory every login needs."""
    return {"priorityClassName": priority_class} if priority_class else {}


def ldap_statefulset(ldap: LdapConfig, namespace: str, priority_class: Optional[str] = None) -> dict[str, Any]:
    env: list[dict[str, Any]] = [
        {"name": "LDAP_ROOT", "value": ldap.base_dn},
        {"name": "LDAP_ADMIN_USERNAME", "value": ldap.admin_username},
        {"name": PASSWORD_KEY, "valueFrom": {"secretKeyRef": {"name": SECRET_NAME, "key": PASSWORD_KEY}}},
        {"name": "LDAP_CUSTOM_LDIF_DIR", "value": "/ldifs"},
        {"name": "LDAP_PORT_NUMBER", "value": str(CONTAINER_LDAP_PORT)},
        # Every lookup binds (sssd and nslcd as the read-only account).
        {"name": "LDAP_ALLOW_ANON_BINDING", "value": "no"},
    ]
    ports = [{"name": "ldap", "containerPort": CONTAINER_LDAP_PORT}]
    mounts = [
        {"name": "data", "mountPath": "/bitnami/openldap"},
        {"name": "seed", "mountPath": "/ldifs", "readOnly": True},
        {"name": "init", "mountPath": "/docker-entrypoint-initdb.d", "readOnly": True},
    ]
    volumes: list[dict[str, Any]] = [
        {"name": "seed", "secret": {"secretName": SEED_SECRET, "defaultMode": 0o440}},
        {"name": "init", "configMap": {"name": INIT_CONFIGMAP, "defaultMode": 0o555}},
    ]
    if ldap.tls.enabled:
        env += [
            {"name": "LDAP_ENABLE_TLS", "value": "yes"},
            {"name": "LDAP_LDAPS_PORT_NUMBER", "value": str(CONTAINER_LDAPS_PORT)},
            {"name": "LDAP_TLS_CERT_FILE", "value": "/opt/bitnami/openldap/certs/tls.crt"},
            {"name": "LDAP_TLS_KEY_FILE", "value": "/opt/bitnami/openldap/certs/tls.key"},
            {"name": "LDAP_TLS_CA_FILE", "value": "/opt/bitnami/openldap/certs/ca.crt"},
            # No operation without TLS (olcSecurity tls=1): a simple bind on 389 before StartTLS is
            # refused, so no password crosses the pod network in clear. The image sets it only when
            # it first initialises the directory; the require-tls init container keeps it set on older ones.
            {"name": "LDAP_REQUIRE_TLS", "value": "yes"},
        ]
        ports.append({"name": "ldaps", "containerPort": CONTAINER_LDAPS_PORT})
        mounts.append({"name": "tls", "mountPath": "/opt/bitnami/openldap/certs", "readOnly": True})
        volumes.append({"name": "tls", "secret": {"secretName": ldap.tls.secret_name}})
    probe = {"tcpSocket": {"port": "ldap"}, "periodSeconds": 10}
    data_claim: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": ldap.storage_size}}}
    if ldap.storage_class_name:
        data_claim["storageClassName"] = ldap.storage_class_name
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "ldap", "namespace": namespace, "labels": APP_LABELS},
        "spec": {
            "serviceName": SERVICE_NAME,
            "replicas": 1,
            "selector": {"matchLabels": APP_LABELS},
            # The data claims outlive the StatefulSet (the default); said explicitly.
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
            "template": {
                "metadata": {"labels": APP_LABELS},
                "spec": {
                    "automountServiceAccountToken": False,  # no API access needed
                    **priority(priority_class),
                    "securityContext": {"fsGroup": 1001},
                    **({"initContainers": [require_tls_container(ldap)]} if ldap.tls.enabled else {}),
                    "containers": [
                        {
                            "name": "openldap",
                            "image": ldap.image,
                            "env": env,
                            "ports": ports,
                            "volumeMounts": mounts,
                            "readinessProbe": {**probe, "initialDelaySeconds": 5},
                            "livenessProbe": {**probe, "initialDelaySeconds": 30, "failureThreshold": 6},
                            "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
                        }
                    ],
                    "volumes": volumes,
                },
            },
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": data_claim}],
        },
    }


def ldap_service(ldap: LdapConfig, namespace: str) -> dict[str, Any]:
    ports = [{"name": "ldap", "port": LDAP_PORT, "targetPort": "ldap"}]
    if ldap.tls.enabled:
        ports.append({"name": "ldaps", "port": LDAPS_PORT, "targetPort": "ldaps"})
    return {
        "apiVersion": "v1",
        "kind": "Service",
        # Nothing reads its endpoints (clients resolve its name; the StatefulSet stays awaited): no 10 s settle.
        "metadata": {"name": SERVICE_NAME, "namespace": namespace, "labels": APP_LABELS, "annotations": {"pulumi.com/skipAwait": "true"}},
        "spec": {"type": "ClusterIP", "selector": APP_LABELS, "ports": ports},
    }


def ca_from_tls_data(data: Optional[Mapping[str, str]], secret_name: Optional[str]) -> str:
    """The PEM CA of a kubernetes.io/tls Secret's data (base64 values); an error naming the Secret without one."""
    encoded = (data or {}).get(TLS_CA_KEY)
    if not encoded:
        raise ValueError(
            f"Secret {secret_name} (ldap.tls.secretName) has no {TLS_CA_KEY}: sssd and nslcd need the CA that signed "
            f"the server certificate; add it as key {TLS_CA_KEY} (cert-manager Certificates issued by a CA Issuer carry it)"
        )
    return base64.b64decode(encoded).decode()


def tls_ca(name: str, ldap: LdapConfig, namespace: str, opts: pulumi.ResourceOptions) -> pulumi.Output[str]:
    """The CA of the existing TLS Secret, read from the cluster (the read keeps it a Pulumi secret)."""
    tls = k8s.core.v1.Secret.get(f"{name}-tls", f"{namespace}/{ldap.tls.secret_name}", opts=opts)
    return tls.data.apply(lambda data: ca_from_tls_data(data, ldap.tls.secret_name))


def _meta(manifest: dict[str, Any]) -> k8s.meta.v1.ObjectMetaArgs:
    meta = manifest["metadata"]
    return k8s.meta.v1.ObjectMetaArgs(name=meta["name"], namespace=meta["namespace"], labels=meta["labels"], annotations=meta.get("annotations"))


class LdapDirectory(pulumi.ComponentResource):
    uri: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        ldap: LdapConfig,
        namespace: str,
        tenants: Sequence[TenantConfig] = (),
        priority_class: Optional[str] = None,
        opts: Optional[pulumi.ResourceOptions] = None,
    ):
        """`priority_class`: the Slurm cluster's, declared before (opts' depends_on)."""
        super().__init__("slurm-platform:ldap:LdapDirectory", name, None, opts)
        child = child_opts(self, opts)
        password = random.RandomPassword(f"{name}-admin-password", length=32, special=False, opts=child)
        secret = k8s.core.v1.Secret(
            f"{name}-secret",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=SECRET_NAME, namespace=namespace, labels=APP_LABELS),
            string_data={PASSWORD_KEY: password.result},
            opts=child_opts(self, opts, additional_secret_outputs=["data", "stringData"]),
        )
        readonly_password = random.RandomPassword(f"{name}-readonly-password", length=32, special=False, opts=child)
        salt = random.RandomPassword(f"{name}-readonly-salt", length=SALT_LENGTH, special=False, opts=child)
        secret_data = child_opts(self, opts, additional_secret_outputs=["data", "stringData"])
        seed = k8s.core.v1.Secret(
            f"{name}-seed",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=SEED_SECRET, namespace=namespace, labels=APP_LABELS),
            string_data={
                "00-base.ldif": pulumi.Output.all(readonly_password.result, salt.result).apply(lambda args: seed_ldif(ldap, ssha512(*args), tenants))
            },
            opts=secret_data,
        )
        init = k8s.core.v1.ConfigMap(
            f"{name}-init",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=INIT_CONFIGMAP, namespace=namespace, labels=APP_LABELS),
            data={"10-readonly-acl.sh": acl_init_script(ldap)},
            opts=child,
        )
        server = ldap_statefulset(ldap, namespace, priority_class)
        k8s.apps.v1.StatefulSet(
            f"{name}-server",
            metadata=_meta(server),
            spec=server["spec"],
            opts=child_opts(self, opts, depends_on=[secret, seed, init]),
        )
        service = ldap_service(ldap, namespace)
        k8s.core.v1.Service(f"{name}-service", metadata=_meta(service), spec=service["spec"], opts=child)
        k8s.core.v1.ConfigMap(
            f"{name}-client-config",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=CLIENT_CONFIGMAP, namespace=namespace, labels=APP_LABELS),
            data={"ldap.conf": ldap_conf(ldap, namespace)},
            opts=child,
        )
        # With TLS, the server's CA travels with the client configs (read from the TLS Secret).
        ca: dict[str, Any] = {CLIENT_CA_KEY: tls_ca(name, ldap, namespace, child)} if ldap.tls.enabled else {}
        k8s.core.v1.Secret(
            f"{name}-sssd-config",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=SSSD_SECRET, namespace=namespace, labels=APP_LABELS),
            string_data={"sssd.conf": readonly_password.result.apply(lambda pw: sssd_conf(ldap, namespace, pw)), **ca},
            opts=secret_data,
        )
        k8s.core.v1.Secret(
            f"{name}-nslcd-config",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=NSLCD_SECRET, namespace=namespace, labels=APP_LABELS),
            string_data={"nslcd.conf": readonly_password.result.apply(lambda pw: nslcd_conf(ldap, namespace, pw)), **ca},
            opts=secret_data,
        )
        self.uri = pulumi.Output.from_input(ldap_uri(ldap, namespace))
        self.register_outputs({"uri": self.uri})

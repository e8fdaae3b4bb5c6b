"""The directory's entries: the base tree and the read-only account (the seed of a new directory), its ACL,
and each tenant's group and researchers (the seed, and what the reconciler keeps the live directory to)."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence

from ..config import LdapConfig, TenantConfig
from ..config.identity import Account, Group, accounts_of, groups_of
from .ldif import dn, ldif_entry, ldif_line
from .names import GROUPS_OU, LOGIN_SHELL, SERVICES_OU, USERS_OU, groups_dn, readonly_dn, user_dn

# openssh-lpk's ldapPublicKey (components/identity/schema.py) carries sshPublicKey.
USER_OBJECT_CLASSES = ("inetOrgPerson", "posixAccount", "shadowAccount", "ldapPublicKey")


def home_directory(user: str) -> str:
    return f"/home/{user}"


def ssha512(password: str, salt: str) -> str:
    """An OpenLDAP {SSHA512} userPassword (the image loads the pw-sha2 module)."""
    salt_bytes = salt.encode()
    digest = hashlib.sha512(password.encode() + salt_bytes).digest()
    return "{SSHA512}" + base64.b64encode(digest + salt_bytes).decode()


def group_attributes(group: Group) -> list[tuple[str, str]]:
    """A tenant's posixGroup: its number and its researchers (the seed's entry and the reconciler's desired state)."""
    return [("objectClass", "posixGroup"), ("cn", group.name), ("gidNumber", str(group.gid)), *(("memberUid", user) for user in group.members)]


def group_dn(ldap: LdapConfig, group: Group) -> str:
    return dn("cn", group.name, groups_dn(ldap))


def group_entry(ldap: LdapConfig, group: Group) -> list[str]:
    return ldif_entry(group_dn(ldap, group), *group_attributes(group))


def user_attributes(ldap: LdapConfig, account: Account, gid: int) -> list[tuple[str, str]]:
    """A researcher's posixAccount with their keys (openssh-lpk's ldapPublicKey). No password: they log in by key."""
    full_name = ldap.display_names.get(account.name, account.name)
    return [
        *(("objectClass", c) for c in USER_OBJECT_CLASSES),
        ("uid", account.name),
        # sssd and nslcd take the passwd name field (gecos) from cn when the entry has no gecos,
        # which is IA5 (ASCII) in the nis schema: cn carries the name in any language.
        ("cn", full_name),
        ("sn", account.name),
        *((("displayName", full_name),) if account.name in ldap.display_names else ()),
        ("uidNumber", str(account.uid)),
        ("gidNumber", str(gid)),
        ("homeDirectory", home_directory(account.name)),
        ("loginShell", LOGIN_SHELL),
        *(("sshPublicKey", key) for key in account.ssh_public_keys),
    ]


def user_entry(ldap: LdapConfig, account: Account, gid: int) -> list[str]:
    return ldif_entry(user_dn(ldap, account.name), *user_attributes(ldap, account, gid))


def tenant_entries(ldap: LdapConfig, tenants: Sequence[TenantConfig]) -> list[str]:
    """A posixGroup per tenant group and a posixAccount per researcher, numbered as the config says
    (components/config/identity.py: pinned, or derived from the name alone)."""
    groups = groups_of(tenants)
    gids = {group.name: group.gid for group in groups}
    lines: list[str] = []
    for group in groups:
        lines += ["", *group_entry(ldap, group)]
    for account in accounts_of(tenants):
        lines += ["", *user_entry(ldap, account, gids[account.group])]
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
    for unit in (USERS_OU, GROUPS_OU, SERVICES_OU):
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

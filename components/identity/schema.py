"""The openssh-lpk schema: `sshPublicKey` on an auxiliary `ldapPublicKey` class, which sssd's ssh responder
reads (`ldap_user_ssh_public_key`) and sshd asks for through `sss_ssh_authorizedkeys`.

OpenLDAP ships no such schema; this is the openssh-lpk project's definition (its OIDs, under
1.3.6.1.4.1.24552), in cn=config form. A new directory loads it as the image's custom schema
(bitnami's LDAP_CUSTOM_SCHEMA_DIR, before the seed); one initialised before gets it offline from an
init container (`add_schema_script`), as LDAP_REQUIRE_TLS does (components/identity/server.py).
"""

from __future__ import annotations

from .ldif import ldif_line

SCHEMA_NAME = "openssh-lpk"
SCHEMA_FILE = f"{SCHEMA_NAME}.ldif"
ATTRIBUTE_TYPE = (
    "( 1.3.6.1.4.1.24552.500.1.1.1.13 NAME 'sshPublicKey' DESC 'MANDATORY: OpenSSH Public key' "
    "EQUALITY octetStringMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.40 )"
)
OBJECT_CLASS = (
    "( 1.3.6.1.4.1.24552.500.1.1.2.0 NAME 'ldapPublicKey' SUP top AUXILIARY DESC 'MANDATORY: OpenSSH LPK objectclass' MAY ( sshPublicKey $ uid ) )"
)


def schema_ldif() -> str:
    lines = [
        ldif_line("dn", f"cn={SCHEMA_NAME},cn=schema,cn=config"),
        ldif_line("objectClass", "olcSchemaConfig"),
        ldif_line("cn", SCHEMA_NAME),
        ldif_line("olcAttributeTypes", ATTRIBUTE_TYPE),
        ldif_line("olcObjectClasses", OBJECT_CLASS),
    ]
    return "\n".join(lines) + "\n"


def add_schema_script(conf_dir: str, schema_path: str) -> str:
    """Adds the schema to a directory initialised before it existed: offline (slapd is not running yet), once
    (slapd names the entry cn={N}openssh-lpk), and a no-op on a new volume, where the image loads it itself."""
    return (
        "set -euo pipefail\n"
        f'if [[ -d "{conf_dir}/cn=config/cn=schema" ]] && ! compgen -G "{conf_dir}/cn=config/cn=schema/cn={{*}}{SCHEMA_NAME}.ldif" >/dev/null; then\n'
        f'  slapadd -F "{conf_dir}" -n 0 -l "{schema_path}"\n'
        "fi\n"
    )

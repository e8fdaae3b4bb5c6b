"""The LDAP directory."""

from __future__ import annotations

from typing import Annotated, Optional

from pydantic import Field

from .fields import DnsSubdomain, HumanText, ImageReference, Model, VolumeSize, matching
from .tenants import PosixName

# ---------------------------------------------------------------------------
# LDAP


class LdapTls(Model):
    enabled: bool = Field(False, description="Serve LDAPS and StartTLS with the certificate of secretName, and refuse cleartext binds.")
    secret_name: Optional[DnsSubdomain] = Field(
        None, description="kubernetes.io/tls Secret with tls.crt, tls.key, ca.crt; mounted by the pods that use it, never read by the program."
    )
    ca_config_map_name: Optional[DnsSubdomain] = Field(
        None,
        description="ConfigMap with secretName's CA as key ca.crt (e.g. trust-manager's Bundle of it), for soperator 4.1.7, "
        "whose sssd sidecars mount a CA only from a ConfigMap; the other operators mount secretName's ca.crt.",
    )


# phpLDAPadmin (issue 31): its image, osixia/phpldapadmin 0.9.0, last built in 2020, served the server's own TLS
# key to every pod that could reach it, and a web login to the directory's admin is more than the platform needs.
PHP_LDAP_ADMIN_REMOVED = (
    "phpLDAPadmin is no longer deployed (an unmaintained 2020 image holding the LDAP server's TLS key); remove the key. "
    "Users and groups come from `tenants`; for anything else, run ldapmodify in the server pod over ldaps "
    "(docs/security.md: Administering the directory)"
)
REMOVED_KEYS = {("ldap", "phpLdapAdmin"): PHP_LDAP_ADMIN_REMOVED, ("ldap", "phpLdapAdminImage"): PHP_LDAP_ADMIN_REMOVED}


class LdapConfig(Model):
    """The OpenLDAP directory of the cluster's users and groups, and the sssd/nslcd configs that read it."""

    enabled: bool = Field(True, description="Deploy the directory and configure the Slurm pods to resolve users from it.")
    image: ImageReference = Field(
        "docker.io/bitnamilegacy/openldap:2.6.10",
        description="OpenLDAP server image (bitnami's env contract); mirror it into your registry for production.",
    )
    # In the client configs and every DN: strict (an identifier).
    base_dn: Annotated[
        str,
        matching(
            r"^(dc|o|ou)=[A-Za-z0-9][A-Za-z0-9 ._-]*(,(dc|o|ou)=[A-Za-z0-9][A-Za-z0-9 ._-]*)*$",
            "a base DN of dc=, o= or ou= parts joined by commas, each value ASCII letters, digits, spaces and . _ - "
            "from a letter or digit on, e.g. dc=example,dc=org (a name in another script goes in ldap.organisation)",
        ),
    ] = Field("dc=example,dc=org", description="The directory's base DN (dc=, o= and ou= parts).")
    organisation: HumanText = Field(
        "Example Org",
        description="The root entry's o (organizationName), in any language, e.g. Công ty Cổ phần FPT Smart Cloud, Inc. or "
        "阿里云计算有限公司 (UTF-8 in the directory, base64 in the seed LDIF).",
    )
    display_names: dict[PosixName, HumanText] = Field(
        default_factory=dict,
        description="Full names of the tenants' users, in any language, e.g. {alice: Nguyễn Văn An}: their LDAP cn and "
        "displayName, the name field of getent passwd through sssd and nslcd. Unset: the user name.",
    )
    admin_username: Annotated[str, matching(r"^[a-z][a-z0-9_-]*$", "a lower-case letter, then lower-case letters, digits, _ or -, e.g. admin")] = (
        Field("admin", description="The directory admin's cn (cn=<name>,<baseDn>).")
    )
    storage_size: VolumeSize = Field("8Gi", description="Size of the directory's data volume.")
    storage_class_name: Optional[DnsSubdomain] = Field(None, description="RWO class for the LDAP data volume; cluster default when unset.")
    tls: LdapTls = Field(LdapTls(), description="TLS for the directory: required of every connection when on (production needs it).")
    readonly_username: Annotated[
        str, matching(r"^[a-z][a-z0-9-]*$", "a lower-case letter, then lower-case letters, digits or -, e.g. slurm-readonly")
    ] = Field(
        "slurm-readonly",
        description="Read-only service account sssd and nslcd bind with (cn=<name>,ou=services,<baseDn>).",
    )

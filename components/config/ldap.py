"""The LDAP directory."""

from __future__ import annotations

from typing import Annotated, Optional

from pydantic import AfterValidator, Field

from .fields import DnsSubdomain, ImageReference, Model, Quantity, _check_ldif_value

# ---------------------------------------------------------------------------
# LDAP


class LdapTls(Model):
    enabled: bool = False
    secret_name: Optional[DnsSubdomain] = Field(None, description="kubernetes.io/tls Secret with tls.crt, tls.key, ca.crt.")


class LdapConfig(Model):
    enabled: bool = True
    image: ImageReference = Field(
        "docker.io/bitnamilegacy/openldap:2.6.10",
        description="OpenLDAP server image (bitnami's env contract); mirror it into your registry for production.",
    )
    # Both end up in the seed LDIF and the client configs: one line, no LDIF or DN syntax.
    base_dn: str = Field("dc=example,dc=org", pattern=r"^(dc|o|ou)=[A-Za-z0-9][A-Za-z0-9 ._-]*(,(dc|o|ou)=[A-Za-z0-9][A-Za-z0-9 ._-]*)*$")
    organisation: Annotated[str, AfterValidator(_check_ldif_value)] = "Example Org"
    admin_username: str = Field("admin", pattern=r"^[a-z][a-z0-9_-]*$")
    storage_size: Quantity = "8Gi"
    storage_class_name: Optional[DnsSubdomain] = Field(None, description="RWO class for the LDAP data volume; cluster default when unset.")
    tls: LdapTls = LdapTls()
    php_ldap_admin: bool = Field(False, description="Deploy phpLDAPadmin (ClusterIP only).")
    php_ldap_admin_image: ImageReference = "docker.io/osixia/phpldapadmin:0.9.0"
    readonly_username: str = Field(
        "slurm-readonly",
        pattern=r"^[a-z][a-z0-9-]*$",
        description="Read-only service account sssd and nslcd bind with (cn=<name>,ou=services,<baseDn>).",
    )

"""The OpenLDAP server: its StatefulSet (bitnami's environment contract) and Service."""

from __future__ import annotations

from typing import Any, Optional

from ..config import LdapConfig
from .names import (
    APP_LABELS,
    CONTAINER_LDAP_PORT,
    CONTAINER_LDAPS_PORT,
    INIT_CONFIGMAP,
    LDAP_PORT,
    LDAPS_PORT,
    PASSWORD_KEY,
    SCHEMA_CONFIGMAP,
    SECRET_NAME,
    SEED_SECRET,
    SERVICE_NAME,
    STATEFULSET_NAME,
)
from .schema import SCHEMA_FILE, add_schema_script

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


# The image's custom schema directory (LDAP_CUSTOM_SCHEMA_DIR), loaded when it initialises a new volume.
SCHEMA_DIR = "/schemas"


def schema_container(ldap: LdapConfig) -> dict[str, Any]:
    """openssh-lpk on a directory initialised before it (a no-op on a new volume: the image loads SCHEMA_DIR)."""
    return {
        "name": "openssh-lpk-schema",
        "image": ldap.image,
        "command": ["bash", "-c", add_schema_script(ONLINE_CONF_DIR, f"{SCHEMA_DIR}/{SCHEMA_FILE}")],
        "volumeMounts": [{"name": "data", "mountPath": "/bitnami/openldap"}, {"name": "schema", "mountPath": SCHEMA_DIR, "readOnly": True}],
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
        {"name": "LDAP_CUSTOM_SCHEMA_DIR", "value": SCHEMA_DIR},
        {"name": "LDAP_PORT_NUMBER", "value": str(CONTAINER_LDAP_PORT)},
        # Every lookup binds (sssd and nslcd as the read-only account).
        {"name": "LDAP_ALLOW_ANON_BINDING", "value": "no"},
    ]
    ports = [{"name": "ldap", "containerPort": CONTAINER_LDAP_PORT}]
    mounts = [
        {"name": "data", "mountPath": "/bitnami/openldap"},
        {"name": "seed", "mountPath": "/ldifs", "readOnly": True},
        {"name": "init", "mountPath": "/docker-entrypoint-initdb.d", "readOnly": True},
        {"name": "schema", "mountPath": SCHEMA_DIR, "readOnly": True},
    ]
    volumes: list[dict[str, Any]] = [
        {"name": "seed", "secret": {"secretName": SEED_SECRET, "defaultMode": 0o440}},
        {"name": "init", "configMap": {"name": INIT_CONFIGMAP, "defaultMode": 0o555}},
        {"name": "schema", "configMap": {"name": SCHEMA_CONFIGMAP}},
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
        "metadata": {"name": STATEFULSET_NAME, "namespace": namespace, "labels": APP_LABELS},
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
                    "initContainers": [schema_container(ldap), *([require_tls_container(ldap)] if ldap.tls.enabled else [])],
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

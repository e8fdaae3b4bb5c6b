"""The directory component: the OpenLDAP server, its seed and schema, the clients' configs, and the reconciler."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from ..config import LdapConfig, TenantConfig
from ..resources import child_opts
from .clients import ldap_conf, nslcd_conf, sssd_conf
from .entries import acl_init_script, seed_ldif, ssha512
from .names import (
    APP_LABELS,
    CLIENT_CONFIGMAP,
    INIT_CONFIGMAP,
    NSLCD_SECRET,
    PASSWORD_KEY,
    SALT_LENGTH,
    SCHEMA_CONFIGMAP,
    SECRET_NAME,
    SEED_SECRET,
    SSSD_SECRET,
    ldap_uri,
)
from .reconciler import declared, reconciler_configmap, reconciler_job
from .schema import SCHEMA_FILE, schema_ldif
from .server import ldap_service, ldap_statefulset


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
        secret_config: bool = False,
    ):
        """`priority_class`: the Slurm cluster's, declared before (opts' depends_on). `secret_config`: the config keys the
        reconciler's desired state comes from (tenants, ldap) are secret, so its ConfigMap's data and Job spec are too."""
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
        schema = k8s.core.v1.ConfigMap(
            f"{name}-schema",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=SCHEMA_CONFIGMAP, namespace=namespace, labels=APP_LABELS),
            data={SCHEMA_FILE: schema_ldif()},
            opts=child,
        )
        server = ldap_statefulset(ldap, namespace, priority_class)
        statefulset = k8s.apps.v1.StatefulSet(
            f"{name}-server",
            metadata=_meta(server),
            spec=server["spec"],
            opts=child_opts(self, opts, depends_on=[secret, seed, init, schema]),
        )
        service_manifest = ldap_service(ldap, namespace)
        service = k8s.core.v1.Service(f"{name}-service", metadata=_meta(service_manifest), spec=service_manifest["spec"], opts=child)
        if declared(tenants):
            # The directory follows the config: a Job named by a hash of what it runs, so each change runs it once.
            hidden: Any = pulumi.Output.secret if secret_config else (lambda value: value)
            desired = reconciler_configmap(ldap, namespace, tenants)
            configmap = k8s.core.v1.ConfigMap(f"{name}-reconciler", metadata=_meta(desired), data=hidden(desired["data"]), opts=child)
            job = reconciler_job(ldap, namespace, tenants, priority_class)
            k8s.batch.v1.Job(
                f"{name}-reconcile",
                metadata=_meta(job),
                spec=hidden(job["spec"]),
                opts=child_opts(self, opts, depends_on=[statefulset, service, secret, configmap]),
            )
        k8s.core.v1.ConfigMap(
            f"{name}-client-config",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=CLIENT_CONFIGMAP, namespace=namespace, labels=APP_LABELS),
            data={"ldap.conf": ldap_conf(ldap, namespace)},
            opts=child,
        )
        k8s.core.v1.Secret(
            f"{name}-sssd-config",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=SSSD_SECRET, namespace=namespace, labels=APP_LABELS),
            string_data={"sssd.conf": readonly_password.result.apply(lambda pw: sssd_conf(ldap, namespace, pw))},
            opts=secret_data,
        )
        k8s.core.v1.Secret(
            f"{name}-nslcd-config",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=NSLCD_SECRET, namespace=namespace, labels=APP_LABELS),
            string_data={"nslcd.conf": readonly_password.result.apply(lambda pw: nslcd_conf(ldap, namespace, pw))},
            opts=secret_data,
        )
        self.uri = pulumi.Output.from_input(ldap_uri(ldap, namespace))
        self.register_outputs({"uri": self.uri})

"""Rendered manifests as Pulumi resources: every component that declares what a pure
builder renders (the Slurm operators' objects, the tenants', Kueue's, the NIC cluster
policy, Karpenter's NodePools) goes through here."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s
from pydantic.alias_generators import to_snake

from .config import PlatformConfig
from .rendered import ObjectKey, Rendered, key_of
from .resources import child_opts

# Built-in kinds the operator modules render, declared with their typed resources.
BUILTIN_KINDS = {
    ("v1", "Service"): k8s.core.v1.Service,
    ("v1", "ConfigMap"): k8s.core.v1.ConfigMap,
    ("v1", "ServiceAccount"): k8s.core.v1.ServiceAccount,
    ("v1", "PersistentVolume"): k8s.core.v1.PersistentVolume,
    ("v1", "PersistentVolumeClaim"): k8s.core.v1.PersistentVolumeClaim,
    ("rbac.authorization.k8s.io/v1", "Role"): k8s.rbac.v1.Role,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): k8s.rbac.v1.RoleBinding,
    ("v1", "Namespace"): k8s.core.v1.Namespace,
    ("v1", "ResourceQuota"): k8s.core.v1.ResourceQuota,
    ("v1", "LimitRange"): k8s.core.v1.LimitRange,
    ("batch/v1", "Job"): k8s.batch.v1.Job,
    ("apps/v1", "Deployment"): k8s.apps.v1.Deployment,
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"): k8s.admissionregistration.v1.ValidatingAdmissionPolicy,
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"): k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding,
    ("scheduling.k8s.io/v1", "PriorityClass"): k8s.scheduling.v1.PriorityClass,
    ("networking.k8s.io/v1", "NetworkPolicy"): k8s.networking.v1.NetworkPolicy,
}


def declare(name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """One manifest as a Pulumi resource (typed for built-ins, CustomResource otherwise)."""
    fields = {to_snake(key): value for key, value in manifest.items() if key not in ("apiVersion", "kind")}
    builtin = BUILTIN_KINDS.get((manifest["apiVersion"], manifest["kind"]))
    if builtin is not None:
        return builtin(name, **fields, opts=opts)
    if set(fields) <= {"metadata", "spec"}:
        return k8s.apiextensions.CustomResource(name, api_version=manifest["apiVersion"], kind=manifest["kind"], **fields, opts=opts)
    # A custom kind with fields beside spec (Kueue's WorkloadPriorityClass: value, description): the same
    # resource type the provider gives CustomResource, with the manifest's own fields as its inputs.
    return pulumi.CustomResource(f"kubernetes:{manifest['apiVersion']}:{manifest['kind']}", name, dict(manifest), opts)


def secret_fields(config: PlatformConfig, manifest: dict[str, Any], keys: tuple[str, ...] = ("slurm",)) -> dict[str, Any]:
    """Everything but the object's identity (kind, name, namespace, labels) as a secret when one of
    the config `keys` it is built from is: a value from it may sit in any field, annotations included."""
    if not config.secret_keys & set(keys):
        return manifest
    metadata = dict(manifest["metadata"])
    if "annotations" in metadata:
        metadata["annotations"] = pulumi.Output.secret(metadata["annotations"])
    return {
        key: metadata if key == "metadata" else value if key in ("apiVersion", "kind") else pulumi.Output.secret(value)
        for key, value in manifest.items()
    }


def declare_each(
    name: str,
    rendered: Iterable[Rendered],
    parent: pulumi.Resource,
    opts: Optional[pulumi.ResourceOptions],
    handed: Optional[Mapping[ObjectKey, list[pulumi.Resource]]] = None,
    fields: Callable[[dict[str, Any]], dict[str, Any]] = lambda manifest: manifest,
) -> dict[ObjectKey, pulumi.Resource]:
    """Each rendered object as `<name>-<role>`, a child of `parent`, after exactly what its `after` names: an object
    declared here before it, or one `handed` in (a namespace another component declares, the running Slurm). Data is
    protected and retained on delete (`keep`). `fields`: the manifest as declared (secret_fields where config is secret)."""
    waits: dict[ObjectKey, list[pulumi.Resource]] = dict(handed or {})
    declared: dict[ObjectKey, pulumi.Resource] = {}
    for item in rendered:
        first = [resource for key in item.after for resource in waits.get(key, [])]
        extra: dict[str, Any] = {"protect": True, "retain_on_delete": True} if item.keep else {}
        if item.ignore_changes:
            extra["ignore_changes"] = list(item.ignore_changes)
        resource = declare(f"{name}-{item.role}", fields(item.manifest), child_opts(parent, opts, depends_on=first or None, **extra))
        declared[key_of(item.manifest)] = resource
        waits[key_of(item.manifest)] = [resource]
    return declared

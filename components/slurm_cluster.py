"""The Slurm cluster: whatever the chosen operator module renders (components/slurm/),
declared as Kubernetes objects, plus its random key Secrets and the outputs.

The module decides *what* (pure manifests); this component only decides *how*
it is declared: built-in kinds with their typed resources, custom resources as
`CustomResource`, data volumes protected, controller-owned fields ignored.
"""

from __future__ import annotations

from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s
from pydantic.alias_generators import to_snake

from . import child_opts
from .config import PlatformConfig
from .munge import generated_key, secret_data
from .slurm import KeySecret, Rendered, SlurmOperator, operator_module

# Built-in kinds the operator modules render, declared with their typed resources.
BUILTIN_KINDS = {
    ("v1", "Service"): k8s.core.v1.Service,
    ("v1", "ConfigMap"): k8s.core.v1.ConfigMap,
    ("v1", "ServiceAccount"): k8s.core.v1.ServiceAccount,
    ("v1", "PersistentVolume"): k8s.core.v1.PersistentVolume,
    ("v1", "PersistentVolumeClaim"): k8s.core.v1.PersistentVolumeClaim,
    ("rbac.authorization.k8s.io/v1", "Role"): k8s.rbac.v1.Role,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): k8s.rbac.v1.RoleBinding,
}


def declare(name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """One manifest as a Pulumi resource (typed for built-ins, CustomResource otherwise)."""
    fields = {to_snake(key): value for key, value in manifest.items() if key not in ("apiVersion", "kind")}
    builtin = BUILTIN_KINDS.get((manifest["apiVersion"], manifest["kind"]))
    if builtin is not None:
        return builtin(name, **fields, opts=opts)
    return k8s.apiextensions.CustomResource(
        name, api_version=manifest["apiVersion"], kind=manifest["kind"], **fields, opts=opts
    )


# --- scaling down (soperator 1.14.10 leaves removed workers in slurmctld) ------


def worker_node_names(size: int) -> list[str]:
    """soperator names Slurm workers worker-0 .. worker-(size-1)."""
    return [f"worker-{i}" for i in range(size)]


def removed_worker_nodes(previous: Optional[list[str]], size: int) -> list[str]:
    if not previous:
        return []
    keep = set(worker_node_names(size))
    return [node for node in previous if node not in keep]


def scale_down_warning(removed: list[str]) -> Optional[str]:
    if not removed:
        return None
    return (
        f"Slurm workers {', '.join(removed)} will disappear. soperator does not remove them from slurmctld: "
        f"after `pulumi up`, run on a login node: scontrol delete nodeName={','.join(removed)}"
    )


def warn_about_removed_workers(config: PlatformConfig) -> None:
    """Warn at preview time, comparing with the workers this stack last exported."""
    this_stack = pulumi.StackReference(f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}")

    def warn(previous: Optional[list[str]]) -> None:
        message = scale_down_warning(removed_worker_nodes(previous, config.slurm.worker.size))
        if message:
            pulumi.log.warn(message)

    this_stack.get_output("workerNodes").apply(warn)


class SlurmCluster(pulumi.ComponentResource):
    worker_nodes: pulumi.Output[list]
    login_endpoint: pulumi.Output[str]
    ssh_command: pulumi.Output[str]

    def __init__(self, name: str, config: PlatformConfig, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("slurm-platform:slurm_cluster:SlurmCluster", name, None, opts)
        module: SlurmOperator = operator_module(config)
        key_secrets = [self._key_secret(name, spec, opts) for spec in module.key_secrets(config)]
        for rendered in module.render(config):
            self._declare(name, rendered, key_secrets, opts)
        self.worker_nodes = pulumi.Output.from_input(module.worker_nodes(config))
        self.login_endpoint = pulumi.Output.from_input(module.login_endpoint(config))
        self.ssh_command = pulumi.Output.from_input(module.ssh_command(config))
        self.register_outputs(
            {"workerNodes": self.worker_nodes, "loginEndpoint": self.login_endpoint, "sshCommand": self.ssh_command}
        )

    def _declare(
        self, name: str, rendered: Rendered, key_secrets: list[pulumi.Resource], opts: Optional[pulumi.ResourceOptions]
    ) -> None:
        extra: dict[str, Any] = {}
        if rendered.ignore_changes:
            extra["ignore_changes"] = list(rendered.ignore_changes)
        if rendered.keep:
            extra.update(protect=True, retain_on_delete=True)
        # Custom resources reference the key Secrets by name: create those first.
        depends_on = key_secrets if "." in rendered.manifest["apiVersion"].split("/")[0] and key_secrets else None
        declare(f"{name}-{rendered.role}", rendered.manifest, child_opts(self, opts, depends_on=depends_on, **extra))

    def _key_secret(self, name: str, spec: KeySecret, opts: Optional[pulumi.ResourceOptions]) -> pulumi.Resource:
        key = generated_key(f"{name}-{spec.role}-random", spec.length, spec.rotation, child_opts(self, opts))
        return k8s.core.v1.Secret(
            f"{name}-{spec.role}",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=spec.name, namespace=spec.namespace, labels=spec.labels or None),
            type="Opaque",
            data={spec.key: secret_data(key.result)},
            opts=child_opts(self, opts, additional_secret_outputs=["data", "stringData"]),
        )

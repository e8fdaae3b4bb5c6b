"""The munge key: 1024 random bytes in Secret `<cluster>-munge`, key `munge.key`.

soperator uses an existing secret of that name as is, so the key stays ours
(and survives a SlurmCluster re-create). It changes only when the config bumps
`slurm.mungeKeyRotation`: that value is the RandomBytes keeper.

munged reads the key only at start, and soperator 1.14.10 rolls its pods for a
new key only when something else makes it reconcile (it stamps the Secret's
resourceVersion into each pod template, but does not watch a Secret it does not
own). So a rotation is announced at preview with the exact restart step
(`rotation_warning`), which also starts that reconcile.
"""

from __future__ import annotations

from typing import Optional

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from . import child_opts
from .config import PlatformConfig

MUNGE_KEY_BYTES = 1024
MUNGE_KEY_FIELD = "munge.key"


def munge_secret_name(cluster_name: str) -> str:
    return f"{cluster_name}-munge"


def munge_workloads(config: PlatformConfig) -> list[str]:
    """soperator 1.14.10's workloads whose pods run munged (names fixed by its naming package)."""
    slurm = config.slurm
    workloads = ["statefulset/controller", "statefulset/worker", "statefulset/login"]
    if slurm.accounting.enabled:
        workloads.append("deployment/accounting")
    if slurm.exporter.enabled:
        workloads.append("deployment/exporter")
    return workloads


def rotation_warning(config: PlatformConfig, previous_rotation: Optional[float]) -> Optional[str]:
    """What a munge key rotation restarts, and the step that restarts it; None when the key stays."""
    current = config.slurm.munge_key_rotation
    if previous_rotation is None:
        return None
    previous_rotation = int(previous_rotation)  # stack outputs hold numbers as floats
    if previous_rotation == current:
        return None
    namespace = config.cluster.namespace
    workloads = " ".join(munge_workloads(config))
    return (
        f"munge key rotation {previous_rotation} -> {current}: Secret {munge_secret_name(config.cluster.name)} gets a new key, "
        f"which munged reads only at start. These pods must restart: {workloads} (namespace {namespace}); "
        "until they all have, Slurm daemons with different keys reject each other (plan a maintenance window). "
        f"After `pulumi up`, run: kubectl -n {namespace} rollout restart {workloads} && "
        f"kubectl -n {namespace} rollout status {workloads}"
    )


class MungeKey(pulumi.ComponentResource):
    secret_name: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        cluster_name: str,
        namespace: str,
        rotation: int = 0,
        opts: Optional[pulumi.ResourceOptions] = None,
        adopt: bool = False,
    ):
        super().__init__("slurm-platform:munge:MungeKey", name, None, opts)
        secret_name = munge_secret_name(cluster_name)
        metadata = k8s.meta.v1.ObjectMetaArgs(name=secret_name, namespace=namespace)
        secret_opts = child_opts(self, opts, additional_secret_outputs=["data", "stringData"])
        if adopt:
            # Imported as it is: the existing key stays, and no label of ours changes the object.
            secret = k8s.core.v1.Secret(
                f"{name}-secret",
                metadata=metadata,
                type="Opaque",
                opts=pulumi.ResourceOptions.merge(
                    secret_opts,
                    pulumi.ResourceOptions(import_=f"{namespace}/{secret_name}", ignore_changes=["data", "stringData"]),
                ),
            )
        else:
            key = random.RandomBytes(
                f"{name}-key",
                length=MUNGE_KEY_BYTES,
                keepers={"rotation": str(rotation)},
                opts=child_opts(self, opts),
            )
            metadata.labels = {"app.kubernetes.io/managed-by": "pulumi", "slurm.nebius.ai/cluster": cluster_name}
            secret = k8s.core.v1.Secret(
                f"{name}-secret",
                metadata=metadata,
                type="Opaque",
                data={MUNGE_KEY_FIELD: pulumi.Output.secret(key.base64)},
                opts=secret_opts,
            )
        self.secret_name = secret.metadata.name
        self.register_outputs({"secretName": self.secret_name})

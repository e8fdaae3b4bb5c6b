"""The munge key: 1024 random bytes in Secret `<cluster>-munge`, key `munge.key`.

soperator uses an existing secret of that name as is, so the key stays ours
(and survives a SlurmCluster re-create). It changes only when the config bumps
`slurm.mungeKeyRotation`: that value is the RandomBytes keeper.
"""

from __future__ import annotations

from typing import Optional

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from . import child_opts

MUNGE_KEY_BYTES = 1024
MUNGE_KEY_FIELD = "munge.key"


def munge_secret_name(cluster_name: str) -> str:
    return f"{cluster_name}-munge"


class MungeKey(pulumi.ComponentResource):
    secret_name: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        cluster_name: str,
        namespace: str,
        rotation: int = 0,
        opts: Optional[pulumi.ResourceOptions] = None,
    ):
        super().__init__("slurm-platform:munge:MungeKey", name, None, opts)
        key = random.RandomBytes(
            f"{name}-key",
            length=MUNGE_KEY_BYTES,
            keepers={"rotation": str(rotation)},
            opts=child_opts(self, opts),
        )
        secret = k8s.core.v1.Secret(
            f"{name}-secret",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=munge_secret_name(cluster_name),
                namespace=namespace,
                labels={"app.kubernetes.io/managed-by": "pulumi", "slurm.nebius.ai/cluster": cluster_name},
            ),
            type="Opaque",
            data={MUNGE_KEY_FIELD: pulumi.Output.secret(key.base64)},
            opts=child_opts(self, opts, additional_secret_outputs=["data", "stringData"]),
        )
        self.secret_name = secret.metadata.name
        self.register_outputs({"secretName": self.secret_name})

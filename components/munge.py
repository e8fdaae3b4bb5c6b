"""The munge key: 1024 random characters in Secret `<cluster>-munge`, key `munge.key`.

soperator uses an existing secret of that name as is, so the key stays ours
(and survives a SlurmCluster re-create). It changes only when the config bumps
`slurm.mungeKeyRotation`: that value is the key's keeper.

Every generated key is a `RandomPassword`, never `RandomBytes`, `RandomId` or
`RandomString`: those use the value itself as the resource id, and Pulumi keeps
ids in plaintext (the state file, `preview --diff`'s `[id=...]`). A
`RandomPassword`'s id is `none` and its result is a secret.
"""

from __future__ import annotations

import base64
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from . import child_opts

# munged accepts keys of 32 to 1024 bytes. 1024 characters of [A-Za-z0-9]
# carry about 6,100 bits, more than the 8,192-bit `mungekey` default needs.
MUNGE_KEY_LENGTH = 1024
MUNGE_KEY_FIELD = "munge.key"


def munge_secret_name(cluster_name: str) -> str:
    return f"{cluster_name}-munge"


def generated_key(name: str, length: int, rotation: int, opts: pulumi.ResourceOptions) -> random.RandomPassword:
    """A random alphanumeric key whose value is a secret and never a resource id; bumping `rotation` replaces it."""
    return random.RandomPassword(name, length=length, special=False, keepers={"rotation": str(rotation)}, opts=opts)


def secret_data(value: pulumi.Output[str]) -> pulumi.Output[str]:
    """A Secret `data` entry (base64) for a secret string."""
    return pulumi.Output.secret(value.apply(lambda text: base64.b64encode(text.encode()).decode()))


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
        key = generated_key(f"{name}-key", MUNGE_KEY_LENGTH, rotation, child_opts(self, opts))
        secret = k8s.core.v1.Secret(
            f"{name}-secret",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=munge_secret_name(cluster_name),
                namespace=namespace,
                labels={"app.kubernetes.io/managed-by": "pulumi", "slurm.nebius.ai/cluster": cluster_name},
            ),
            type="Opaque",
            data={MUNGE_KEY_FIELD: secret_data(key.result)},
            opts=child_opts(self, opts, additional_secret_outputs=["data", "stringData"]),
        )
        self.secret_name = secret.metadata.name
        self.register_outputs({"secretName": self.secret_name})

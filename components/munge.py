"""The munge key: 1024 random characters in Secret `<cluster>-munge`, key `munge.key`.

soperator uses an existing secret of that name as is, so the key stays ours
(and survives a SlurmCluster re-create). It changes only when the config bumps
`slurm.mungeKeyRotation`: that value is the key's keeper.

Every generated key is a `RandomPassword`, never `RandomBytes`, `RandomId` or
`RandomString`: those use the value itself as the resource id, and Pulumi keeps
ids in plaintext (the state file, `preview --diff`'s `[id=...]`). A
`RandomPassword`'s id is `none` and its result is a secret.

munged reads the key only at start. soperator 1.14.10 stamps the Secret's
resourceVersion into the pod templates of the controller, worker and login
StatefulSets and the accounting Deployment, so it rolls them, once each, on its
next reconcile; but a change to a Secret it does not own triggers none. A
rotation is therefore announced at preview with exactly what restarts and the
controlled step: restart the operator (it reconciles at start), and restart the
exporter, which is not tied to the Secret (`rotation_warning`).
"""

from __future__ import annotations

import base64
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from .render.munge import MUNGE_KEY_FIELD, MUNGE_KEY_LENGTH, munge_secret_name
from .resources import child_opts


def generated_key(name: str, length: int, rotation: int, opts: pulumi.ResourceOptions) -> random.RandomPassword:
    """A random alphanumeric key whose value is a secret and never a resource id; bumping `rotation` replaces it."""
    return random.RandomPassword(name, length=length, special=False, keepers={"rotation": str(rotation)}, opts=opts)


def secret_data(value: pulumi.Output[str]) -> pulumi.Output[str]:
    """A Secret `data` entry (base64) for a secret string."""

    def encode(text: str) -> str:
        # `text` is None when a targeted `up` (--target/--exclude) skipped the key: pass that on.
        return text and base64.b64encode(text.encode()).decode()

    return pulumi.Output.secret(value.apply(encode))


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
            key = generated_key(f"{name}-key", MUNGE_KEY_LENGTH, rotation, child_opts(self, opts))
            metadata.labels = {"app.kubernetes.io/managed-by": "pulumi", "slurm.nebius.ai/cluster": cluster_name}
            secret = k8s.core.v1.Secret(
                f"{name}-secret",
                metadata=metadata,
                type="Opaque",
                data={MUNGE_KEY_FIELD: secret_data(key.result)},
                opts=secret_opts,
            )
        self.secret = secret
        self.secret_name = secret.metadata.name
        self.register_outputs({"secretName": self.secret_name})

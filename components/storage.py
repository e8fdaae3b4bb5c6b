"""Read-write-many storage: the StorageClass, `jail-pvc`, `controller-spool-pvc`,
one claim per jail submount, and static NFS PersistentVolumes for production.

The claim names are fixed by soperator and the FPT guide; they are data, and
data is protected: every claim and static volume is `protect`ed and
`retain_on_delete`, so neither a rename nor a `pulumi destroy` removes it.
"""

from __future__ import annotations

from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from .config import PlatformConfig
from .render.storage import (
    adoption_id,
    claim_manifest,
    data_volumes,
    static_volume_manifest,
    storage_class_manifest,
)
from .resources import child_opts, secret_if


def _metadata(manifest: dict[str, Any]) -> k8s.meta.v1.ObjectMetaArgs:
    meta = manifest["metadata"]
    return k8s.meta.v1.ObjectMetaArgs(name=meta["name"], namespace=meta.get("namespace"), labels=meta.get("labels"))


class Storage(pulumi.ComponentResource):
    """The RWX class and the Slurm data volumes (protected, retained on delete)."""

    claim_names: pulumi.Output[dict]
    storage_class_name: pulumi.Output[str]

    def __init__(self, name: str, config: PlatformConfig, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("slurm-platform:storage:Storage", name, None, opts)
        namespace = config.cluster.namespace
        class_manifest = storage_class_manifest(config.storage.storage_class)
        class_deps: list[pulumi.Resource] = []
        if class_manifest is not None:
            class_deps.append(
                k8s.storage.v1.StorageClass(
                    f"{name}-rwx-class",
                    metadata=_metadata(class_manifest),
                    provisioner=class_manifest["provisioner"],
                    # Server addresses and paths: secret when `storage` was set with --secret.
                    parameters=secret_if(config, "storage", class_manifest["parameters"]),
                    mount_options=secret_if(config, "storage", class_manifest["mountOptions"]),
                    reclaim_policy=class_manifest["reclaimPolicy"],
                    volume_binding_mode=class_manifest["volumeBindingMode"],
                    allow_volume_expansion=class_manifest["allowVolumeExpansion"],
                    opts=child_opts(self, opts),
                )
            )
        # Data must survive renames, refactors and `pulumi destroy` mistakes.
        keep = {"protect": True, "retain_on_delete": True}
        self.claims: dict[str, k8s.core.v1.PersistentVolumeClaim] = {}
        for volume in data_volumes(config):
            deps = list(class_deps)
            if volume.static_nfs is not None:
                pv = static_volume_manifest(volume, namespace)
                deps.append(
                    k8s.core.v1.PersistentVolume(
                        f"{name}-{volume.static_volume_name}",
                        metadata=_metadata(pv),
                        spec=secret_if(config, "storage", pv["spec"]),
                        opts=child_opts(self, opts, import_=adoption_id(pv) if volume.adopt else None, **keep),
                    )
                )
            claim = claim_manifest(volume, namespace, config.storage.storage_class.name)
            # The binder and the API server fill these immutable fields in; an adopted
            # (imported) claim carries them, and a diff on them would plan a replacement.
            filled_in = [] if volume.static_nfs else ["spec.volumeName", "spec.volumeMode"]
            self.claims[volume.source_name] = k8s.core.v1.PersistentVolumeClaim(
                f"{name}-{volume.claim_name}",
                metadata=_metadata(claim),
                spec=secret_if(config, "storage", claim["spec"]),
                opts=child_opts(self, opts, depends_on=deps, import_=adoption_id(claim) if volume.adopt else None, ignore_changes=filled_in, **keep),
            )
        self.claim_names = pulumi.Output.from_input({v.source_name: v.claim_name for v in data_volumes(config)})
        self.storage_class_name = pulumi.Output.from_input(config.storage.storage_class.name)
        self.register_outputs({"claimNames": self.claim_names, "storageClassName": self.storage_class_name})

"""Read-write-many storage: the StorageClass, `jail-pvc`, `controller-spool-pvc`,
one claim per jail submount, and static NFS PersistentVolumes for production.

The claim names are fixed by soperator and the FPT guide; they are data, and
data is protected: every claim and static volume is `protect`ed and
`retain_on_delete`, so neither a rename nor a `pulumi destroy` removes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from . import child_opts
from .config import PlatformConfig, StaticNfsVolume, StorageClassConfig

JAIL_CLAIM = "jail-pvc"
SPOOL_CLAIM = "controller-spool-pvc"
JAIL_SOURCE = "jail"
SPOOL_SOURCE = "controller-spool"
RWX = "ReadWriteMany"

NFS_CSI_DRIVER = "nfs.csi.k8s.io"
ALIBABA_NAS_DRIVER = "nasplugin.csi.alibabacloud.com"


@dataclass(frozen=True)
class DataVolume:
    """One RWX claim the Slurm cluster mounts, as soperator's volumeSources know it."""

    source_name: str
    claim_name: str
    size: str
    static_nfs: Optional[StaticNfsVolume] = None
    adopt: bool = False

    @property
    def static_volume_name(self) -> str:
        return f"{self.claim_name}-nfs"


def data_volumes(config: PlatformConfig) -> list[DataVolume]:
    """The jail and spool (soperator's, also kept after a switch from it), then the shared submounts every operator mounts."""
    storage = config.storage
    shared = [DataVolume(sub.name, sub.claim_name, sub.size, sub.static_nfs, sub.adopt) for sub in storage.submounts]
    if not config.keeps_jail:
        return shared
    return [
        DataVolume(JAIL_SOURCE, JAIL_CLAIM, storage.jail.size, storage.jail.static_nfs, storage.jail.adopt),
        DataVolume(SPOOL_SOURCE, SPOOL_CLAIM, storage.controller_spool.size, adopt=storage.controller_spool.adopt),
        *shared,
    ]


def storage_class_manifest(storage_class: StorageClassConfig) -> Optional[dict[str, Any]]:
    """The RWX StorageClass to declare, or None when an existing class is used by name."""
    if storage_class.kind == "existing":
        return None
    if storage_class.kind == "nfs":
        assert storage_class.nfs is not None
        provisioner = NFS_CSI_DRIVER
        parameters = {"server": storage_class.nfs.server, "share": storage_class.nfs.share}
        mount_options = list(storage_class.nfs.mount_options)
    else:
        assert storage_class.alibaba_nas is not None
        provisioner = ALIBABA_NAS_DRIVER
        parameters = {"server": storage_class.alibaba_nas.server, "volumeAs": storage_class.alibaba_nas.volume_as, "archiveOnDelete": "true"}
        mount_options = list(storage_class.alibaba_nas.mount_options)
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": storage_class.name},
        "provisioner": provisioner,
        "parameters": parameters,
        "mountOptions": mount_options,
        # Jail data outlives its claim; deleting it is a human decision.
        "reclaimPolicy": "Retain",
        "volumeBindingMode": "Immediate",
        "allowVolumeExpansion": True,
    }


def _labels(volume: DataVolume) -> dict[str, Any]:
    # An adopted object is imported as it is: a label of ours would be a change to the hand-made object.
    return {} if volume.adopt else {"labels": {"slurm-platform/volume": volume.source_name}}


def claim_manifest(volume: DataVolume, namespace: str, storage_class_name: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": [RWX], "resources": {"requests": {"storage": volume.size}}}
    if volume.static_nfs is not None:
        # Bind to our static volume only: an empty class disables dynamic provisioning.
        spec["storageClassName"] = ""
        spec["volumeName"] = volume.static_volume_name
    else:
        spec["storageClassName"] = storage_class_name
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": volume.claim_name, "namespace": namespace, **_labels(volume)},
        "spec": spec,
    }


def static_volume_manifest(volume: DataVolume, namespace: str) -> dict[str, Any]:
    """A Retain PersistentVolume on an existing NFS export, pre-bound to its claim."""
    assert volume.static_nfs is not None
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": volume.static_volume_name, **_labels(volume)},
        "spec": {
            "capacity": {"storage": volume.size},
            "accessModes": [RWX],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "mountOptions": list(volume.static_nfs.mount_options),
            "nfs": {"server": volume.static_nfs.server, "path": volume.static_nfs.path},
            "claimRef": {"namespace": namespace, "name": volume.claim_name},
        },
    }


def adoption_id(manifest: dict[str, Any]) -> str:
    """The ID Pulumi imports a live Kubernetes object by: `namespace/name`, or `name` when cluster-scoped."""
    meta = manifest["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


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
                    parameters=config.secret_if("storage", class_manifest["parameters"]),
                    mount_options=config.secret_if("storage", class_manifest["mountOptions"]),
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
                        spec=config.secret_if("storage", pv["spec"]),
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
                spec=config.secret_if("storage", claim["spec"]),
                opts=child_opts(self, opts, depends_on=deps, import_=adoption_id(claim) if volume.adopt else None, ignore_changes=filled_in, **keep),
            )
        self.claim_names = pulumi.Output.from_input({v.source_name: v.claim_name for v in data_volumes(config)})
        self.storage_class_name = pulumi.Output.from_input(config.storage.storage_class.name)
        self.register_outputs({"claimNames": self.claim_names, "storageClassName": self.storage_class_name})

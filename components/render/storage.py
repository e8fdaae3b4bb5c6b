"""Read-write-many storage as plain data: the StorageClass, the data volumes' claims and static NFS volumes (the `Storage` component declares them, protected)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..config import PlatformConfig, StaticNfsVolume, StorageClassConfig

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

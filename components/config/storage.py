"""Storage: the RWX class, the jail, spool and submount volumes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Literal, Optional

from pydantic import Field

from .fields import (
    RESERVED_VOLUME_NAMES,
    AbsolutePath,
    DnsLabel,
    DnsSubdomain,
    Host,
    JailSize,
    Model,
    MountOption,
    MountPath,
    Problem,
    VolumeSize,
    duplicates,
    key_path,
    matching,
)
from .slurm_operators import settings_of

if TYPE_CHECKING:
    from .platform import PlatformConfig

# ---------------------------------------------------------------------------
# Storage


class NfsServer(Model):
    server: Host = Field(..., description="NFS server address: an IP or a DNS name.")
    share: AbsolutePath = Field(..., description="Exported path.")
    mount_options: list[MountOption] = Field(default_factory=lambda: ["nfsvers=4.1", "hard"], description="The StorageClass's mountOptions.")


class AlibabaNas(Model):
    server: Annotated[
        str,
        matching(
            r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*:/[A-Za-z0-9_@%+=:,./-]*$",
            "<mount target>:<path>: the mount target's lower-case DNS name, a colon, and an absolute path of letters, digits "
            "and _ @ % + = : , . / -, e.g. 0a1b2c3d4e-abc12.cn-hangzhou.nas.aliyuncs.com:/share",
        ),
    ] = Field(
        ...,
        description="NAS mount target and path, e.g. xxx.cn-hangzhou.nas.aliyuncs.com:/share",
    )
    volume_as: Literal["subpath", "filesystem"] = Field(
        "subpath", description="The NAS CSI driver's volumeAs: a subdirectory per volume, or a file system each."
    )
    mount_options: list[MountOption] = Field(
        default_factory=lambda: ["nolock,tcp,noresvport", "vers=3"], description="The StorageClass's mountOptions."
    )


class StorageClassConfig(Model):
    """The read-write-many class: an existing one by name, or one we declare."""

    kind: Literal["existing", "nfs", "alibabaNas"] = Field("existing", description="existing | nfs | alibabaNas")
    name: DnsSubdomain = Field("default", description="StorageClass name (FPT: default or xplat-nfs).")
    nfs: Optional[NfsServer] = Field(None, description="The NFS export behind the class (kind: nfs, csi-driver-nfs).")
    alibaba_nas: Optional[AlibabaNas] = Field(None, description="The NAS file system behind the class (kind: alibabaNas).")


class StaticNfsVolume(Model):
    """A pre-existing NFS export bound to the claim through a static PersistentVolume."""

    server: Host = Field(..., description="NFS server address: an IP or a DNS name.")
    path: AbsolutePath = Field(..., description="Exported path.")
    mount_options: list[MountOption] = Field(default_factory=lambda: ["nfsvers=4.1", "hard"], description="The PersistentVolume's mountOptions.")


ADOPT_DESCRIPTION = (
    "The claim (and its static PV) already exists, e.g. made by hand from the FPT guide: import it into the stack "
    "as is (Pulumi `import`) instead of creating it; the declared spec must match the live object."
)


class JailConfig(Model):
    size: JailSize = Field("100Gi", description="Jail (shared root) size; at least 40Gi.")
    static_nfs: Optional[StaticNfsVolume] = Field(
        None, description="Bind jail-pvc to this NFS export (production: re-attachable from another cluster)."
    )
    adopt: bool = Field(False, description=ADOPT_DESCRIPTION)


class SpoolConfig(Model):
    size: VolumeSize = Field("10Gi", description="controller-spool-pvc size.")
    adopt: bool = Field(False, description=ADOPT_DESCRIPTION)


class SubmountConfig(Model):
    name: DnsLabel = Field(..., description="Volume source name; the claim is jail-submount-<name>-pvc.")
    mount_name: Optional[DnsLabel] = Field(None, description="jailSubMounts name; defaults to `name`.")
    mount_path: MountPath = Field(..., description="Same path on login and worker nodes (normalised; not / and not under a system directory).")
    size: VolumeSize = Field("100Gi", description="Size of the submount's claim.")
    static_nfs: Optional[StaticNfsVolume] = Field(None, description="Bind the claim to this NFS export (a static Retain PV).")
    adopt: bool = Field(False, description=ADOPT_DESCRIPTION)

    @property
    def claim_name(self) -> str:
        return f"jail-submount-{self.name}-pvc"

    @property
    def effective_mount_name(self) -> str:
        return self.mount_name or self.name


class StorageConfig(Model):
    """The RWX storage class and the Slurm data volumes (protected and retained on delete)."""

    storage_class: StorageClassConfig = StorageClassConfig()
    jail: JailConfig = Field(JailConfig(), description="jail-pvc: the shared root filesystem of every Slurm node (soperator).")
    controller_spool: SpoolConfig = Field(SpoolConfig(), description="controller-spool-pvc: slurmctld's state (soperator).")
    submounts: list[SubmountConfig] = Field(
        default_factory=list, description="Shared volumes mounted into the jail at the same path on login and workers (jail-submount-<name>-pvc)."
    )


def declared_storage_classes(config: PlatformConfig) -> set[str]:
    """The classes whose servers config names: the one this stack declares (kind nfs or alibabaNas)."""
    storage_class = config.storage.storage_class
    return set() if storage_class.kind == "existing" else {storage_class.name}


def storage_classes_in_use(config: PlatformConfig) -> Iterator[tuple[tuple[object, ...], Optional[str]]]:
    """(key, class; None for the cluster's default) of every class the stack's data sits on: the RWX class (jail,
    spool, submounts), LDAP's, MariaDB's, and the operator's own (settings_of(config).storage_classes)."""
    yield ("storage", "storageClass", "name"), config.storage.storage_class.name
    if config.ldap.enabled:
        yield ("ldap", "storageClassName"), config.ldap.storage_class_name
    accounting = config.slurm.accounting
    if accounting.enabled and accounting.database == "mariadbOperator":
        yield ("slurm", "accounting", "storageClassName"), accounting.storage_class_name
    yield from settings_of(config).storage_classes(config)


def storage_problems(config: PlatformConfig) -> Iterator[Problem]:
    storage_class = config.storage.storage_class
    for kind, block, present in (("nfs", "nfs", storage_class.nfs), ("alibabaNas", "alibabaNas", storage_class.alibaba_nas)):
        if storage_class.kind == kind and present is None:
            yield Problem(("storage", "storageClass", block), f"required when kind is '{kind}'")
        if storage_class.kind != kind and present is not None:
            yield Problem(("storage", "storageClass", block), f"is set but kind is '{storage_class.kind}'; set kind: {kind} or remove it")
    submounts = config.storage.submounts
    for index, sub in enumerate(submounts):
        for key, value in (("name", sub.name), ("mountName", sub.effective_mount_name)):
            if value in RESERVED_VOLUME_NAMES:
                yield Problem(("storage", "submounts", index, key), f"'{value}' is reserved for soperator's own volume", value)
    for index, name in duplicates([sub.name for sub in submounts]):
        yield Problem(("storage", "submounts", index, "name"), "must be unique among submounts", name)
    for index, name in duplicates([sub.effective_mount_name for sub in submounts]):
        yield Problem(("storage", "submounts", index, "mountName"), "must be unique among submounts (defaults to name)", name)
    for index, path in duplicates([sub.mount_path for sub in submounts]):
        yield Problem(("storage", "submounts", index, "mountPath"), "is already used by another submount (after normalising)", path)


def platform_storage_classes(config: PlatformConfig) -> dict[str, str]:
    """The named storage classes the platform's own volumes use (the jail, spools, MariaDB, LDAP, the operator's
    own), each with the key that names it: a tenant's claims on them would fill the share those volumes live on."""
    classes: dict[str, str] = {}
    for path, name in storage_classes_in_use(config):
        if name:
            classes.setdefault(name, key_path(path))
    return classes

"""What a pure renderer hands the component that declares it: the manifest, and what the declaring needs to
know (the role it is named by, data to keep, fields a controller owns, its readiness, what it waits for first).
Pure and at the bottom of the program, beside `names`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

ObjectKey = tuple[str, str, str]  # kind, namespace ("" where cluster-scoped), name


def key_of(manifest: dict[str, Any]) -> ObjectKey:
    return manifest["kind"], manifest["metadata"].get("namespace", ""), manifest["metadata"]["name"]


def namespace_key(name: str) -> ObjectKey:
    return "Namespace", "", name


# The operator's custom resources that run Slurm, which the platform hands a component whose objects are Slurm's
# clients (the tenants Job): what a Rendered names in `after` to wait for slurmdbd and slurmctld.
RUNNING_SLURM: ObjectKey = ("Slurm", "", "running")


@dataclass(frozen=True)
class ReadyWhen:
    """What an operator's status says once its part of Slurm is ready: `.status.<field>` is `value`. One statement
    serves the provider's await (readiness_annotations) and the stack's slurmReady output (SlurmCluster)."""

    field: str
    value: str

    def holds(self, status: Optional[dict[str, Any]]) -> bool:
        value = (status or {}).get(self.field)
        # Outputs cross the engine as protobuf Structs, whose numbers are floats: readyReplicas 4 arrives as 4.0.
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        return str(value) == self.value


@dataclass(frozen=True)
class Rendered:
    """One object to declare, as `f"{component}-{role}"`."""

    role: str
    manifest: dict[str, Any]
    # Fields a controller owns on the live object (e.g. autoscaled replicas).
    ignore_changes: tuple[str, ...] = ()
    # Data (volumes, a tenant's namespace): protected and retained on delete, like the jail.
    keep: bool = False
    # The cluster custom resource whose status the component reports (phase, unmet conditions, not_ready_message),
    # read back even where nothing awaits it. One the provider awaits (pulumi.com/waitFor) is read back too,
    # but reports only when it is this one.
    live_status: bool = False
    # What its status says once it is ready: awaited where the stack awaits readiness (common.readiness_annotations),
    # and read back for the slurmReady output either way.
    ready_when: Optional[ReadyWhen] = None
    # Declared after the live custom resources: its own await needs what the cluster runs (login pods).
    after_cluster: bool = False
    # What must exist first, by `key_of`: objects declared before it by the same component, or handed to it
    # (a tenant's namespace). What the stack does not declare (a namespace it does not own) is not waited for.
    after: tuple[ObjectKey, ...] = ()

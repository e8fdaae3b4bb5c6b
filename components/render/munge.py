"""The munge key's names and its rotation notice, as plain data (the `MungeKey` component generates and declares it)."""

from __future__ import annotations

from typing import Optional

from ..config import PlatformConfig

# munged accepts keys of 32 to 1024 bytes. 1024 characters of [A-Za-z0-9] carry
# about 6,100 bits: fewer than the 8,192 of `mungekey`'s default 1024 random bytes,
# but munged only derives its (at most 256-bit) cipher and MAC keys from the key.
MUNGE_KEY_LENGTH = 1024


MUNGE_KEY_FIELD = "munge.key"


def munge_secret_name(cluster_name: str) -> str:
    return f"{cluster_name}-munge"


# soperator 1.14.10's workload names (its naming package: no cluster prefix).
OPERATOR_ROLLED = ["statefulset/controller", "statefulset/worker", "statefulset/login"]


# The label its helm-soperator chart puts on the operator's Deployment, whatever the release is called.
OPERATOR_SELECTOR = "app.kubernetes.io/name=helm-soperator"


def munge_workloads(config: PlatformConfig) -> tuple[list[str], list[str]]:
    """Workloads whose pods run munged: (those soperator rolls for a new key, those it does not)."""
    slurm = config.slurm
    rolled = OPERATOR_ROLLED + (["deployment/accounting"] if slurm.accounting.enabled else [])
    not_rolled = ["deployment/exporter"] if slurm.exporter.enabled else []
    return rolled, not_rolled


def rotation_warning(config: PlatformConfig, previous_rotation: Optional[float]) -> Optional[str]:
    """What a munge key rotation restarts, and the step that restarts it; None when the key stays."""
    current = config.slurm.munge_key_rotation
    if previous_rotation is None:
        return None
    previous_rotation = int(previous_rotation)  # stack outputs hold numbers as floats
    if previous_rotation == current:
        return None
    namespace = config.cluster.namespace
    rolled, not_rolled = munge_workloads(config)
    steps = [f"kubectl -n {config.operators.soperator.namespace} rollout restart deployment -l {OPERATOR_SELECTOR}"]
    if not_rolled:
        steps.append(f"kubectl -n {namespace} rollout restart {' '.join(not_rolled)}")
    steps.append(f"kubectl -n {namespace} rollout status {' '.join(rolled + not_rolled)}")
    return (
        f"munge key rotation {previous_rotation} -> {current}: Secret {munge_secret_name(config.cluster.name)} gets a new key, "
        f"which munged reads only at start. These pods will restart: {' '.join(rolled + not_rolled)} (namespace {namespace}); "
        "until all have, Slurm daemons holding different keys reject each other (plan a maintenance window). "
        f"After `pulumi up`, run: {' && '.join(steps)} "
        f"(the restarted operator rolls {', '.join(rolled)} once each for the new Secret"
        + ("; it does not tie the exporter to it)" if not_rolled else ")")
    )

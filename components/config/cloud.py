"""Which cloud a stack runs on: `cloud` when set, else what the rest of the config leaves no doubt about.

A signal is a key whose value belongs to one cloud only: the ACK operator and Alibaba's NAS storage,
a region name only one cloud uses, a load-balancer annotation only one cloud's controller reads.
Set, `cloud` is authoritative and a signal that says otherwise is an error naming both keys; unset,
agreeing signals decide it, disagreeing ones are an error naming each, and without any the cloud is
FPT Cloud (the platform's home, and the default before inference)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from slurm_rules import kube_rules

from .fields import PROJECT, Problem, key_path

if TYPE_CHECKING:
    from .platform import PlatformConfig

Cloud = Literal["fpt", "alibaba", "aws", "gcp", "azure"]
DEFAULT_CLOUD: Cloud = "fpt"
# FPT Cloud's regions as its stacks name them.
FPT_REGIONS = frozenset({"hanoi", "hcm", "hoalac"})
# Alibaba Cloud's Chinese region ids (cn-hangzhou, cn-beijing, cn-wuhan-lr); AWS's China regions end in a digit
# (cn-north-1), and other clouds' regions elsewhere (us-east-1, ap-southeast-1) are shared names, not signals.
ALIBABA_REGION = re.compile(r"cn-[a-z]+(-[a-z]+)*")


@dataclass(frozen=True)
class Signal:
    cloud: str
    path: tuple[Any, ...]
    value: Any
    why: str

    def __str__(self) -> str:
        return f"{key_path(self.path)}: {self.value} ({self.why})"


def cloud_signals(config: PlatformConfig) -> list[Signal]:
    """The keys of the config that only make sense on one cloud, strongest first."""
    signals = []
    if config.slurm_operator == "ack":
        signals.append(Signal("alibaba", ("slurmOperator",), "ack", "ACK's operator, behind an Alibaba Cloud load balancer"))
    if config.storage.storage_class.kind == "alibabaNas":
        signals.append(Signal("alibaba", ("storage", "storageClass", "kind"), "alibabaNas", "Alibaba Cloud's NAS CSI driver"))
    for key in sorted(config.slurm.login.service_annotations):
        for cloud in kube_rules.CLOUDS:
            if key in kube_rules.PRIVATE_LB_ANNOTATIONS[cloud] or key in kube_rules.POD_BACKEND_ANNOTATIONS.get(cloud, {}):
                annotation = config.slurm.login.service_annotations[key]
                signals.append(Signal(cloud, ("slurm", "login", "serviceAnnotations", key), annotation, f"read by {cloud}'s load balancers only"))
    if ALIBABA_REGION.fullmatch(config.region):
        signals.append(Signal("alibaba", ("region",), config.region, "an Alibaba Cloud region"))
    elif config.region in FPT_REGIONS:
        signals.append(Signal("fpt", ("region",), config.region, "an FPT Cloud region"))
    return signals


def fix_line(cloud: str) -> str:
    return f"`{PROJECT}:cloud: {cloud}`"


def _by_cloud(signals: list[Signal]) -> str:
    return "; ".join(f"{cloud}: " + ", ".join(str(s) for s in signals if s.cloud == cloud) for cloud in dict.fromkeys(s.cloud for s in signals))


def resolve_cloud(config: PlatformConfig, explicit: bool) -> tuple[str, str, list[Problem]]:
    """(the cloud, where it came from, the problems): `explicit` when the stack sets `cloud`.

    Keys that point to different clouds contradict each other whether `cloud` is set or not: one key against
    several is not outvoted, and setting `cloud` to either side leaves the other side's keys wrong."""
    signals = cloud_signals(config)
    clouds = list(dict.fromkeys(signal.cloud for signal in signals))
    if explicit:
        against = [s for s in signals if s.cloud != config.cloud]
        if not against:
            return config.cloud, "set", []
        changed = ", ".join(key_path(s.path) for s in against)
        if len(clouds) > 1:
            # The keys disagree among themselves: no value of `cloud` satisfies them all.
            message = (
                f"is {config.cloud}, but the config points to more than one cloud ({_by_cloud(signals)}); a stack runs on one: "
                f"change {changed}, the keys that are not {config.cloud}'s"
            )
            return config.cloud, "set", [Problem(("cloud",), message, config.cloud)]
        keys = ", ".join(str(s) for s in against)
        other = clouds[0]
        message = f"is {config.cloud}, but {keys} {'is' if len(against) == 1 else 'are'} {other}'s; set the cloud to {other}, or change {changed}"
        return config.cloud, "set", [Problem(("cloud",), message, config.cloud, (other,))]
    if len(clouds) > 1:
        problem = Problem(
            ("cloud",),
            f"is not set, and the config points to more than one cloud ({_by_cloud(signals)}); set the one the stack runs on "
            "and change the keys of the others",
            fix=tuple(clouds),
        )
        return DEFAULT_CLOUD, "unset", [problem]
    if clouds:
        return clouds[0], "inferred from " + ", ".join(str(s) for s in signals), []
    return DEFAULT_CLOUD, "default", []


def cloud_summary(config: PlatformConfig) -> str:
    """What every preview says about the cloud: which one, and from which keys (a region copied from another
    cloud's stack otherwise changes it with no word)."""
    origin = config.cloud_origin
    if origin == "default":
        return f"cloud: {config.cloud}, the default: {PROJECT}:cloud is unset and no key names a cloud"
    if origin == "set":
        agreeing = ", ".join(str(s) for s in cloud_signals(config))
        return f"cloud: {config.cloud}, set by {PROJECT}:cloud" + (f"; the config agrees: {agreeing}" if agreeing else "")
    return f"cloud: {config.cloud}, {origin} ({PROJECT}:cloud is unset)"


def cloud_note(config: PlatformConfig) -> str:
    """For a message that depends on the cloud: where it came from when the stack does not set it."""
    origin = config.cloud_origin
    if origin == "default":
        others = " or ".join(fix_line(c) for c in kube_rules.CLOUDS if c != config.cloud)
        return f" ({PROJECT}:cloud is unset and no key names a cloud, so {config.cloud}; on another cloud, set {others})"
    if origin == "unset":
        return f" ({PROJECT}:cloud is unset and the keys disagree on the cloud: see {PROJECT}:cloud)"
    return "" if origin == "set" else f" ({PROJECT}:cloud is unset: {config.cloud}, {origin})"

"""A cluster's stacks: one platform stack and the tenant stacks that name it (tenantStack.platform).

Every stack of a cluster validates the whole cluster, every stack's tenants over the platform's pools, before it
registers anything, so two stacks can't both take the last node. The engine hands a stack its own config; the
others' come from their Pulumi.<stack>.yaml beside Pulumi.yaml, which CI reviews together. A StackReference would
come too late: its outputs are known only once the program has begun registering (docs/tenants.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .fields import PROJECT, Problem
from .platform import STACK_NAME_MAX

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")

# What a tenant stack's own file sets; the rest it reads from its platform stack's file.
TENANT_STACK_KEYS = ("tenantStack", "tenants", "kubernetes")
# What each stack's file decides for that stack alone.
OWN_KEYS = ("tenantStack", "kubernetes")


class UnreadableStackFile(Exception):
    """A stack file that is not YAML: no stack can check its cluster without it."""


@dataclass(frozen=True)
class StackFile:
    """One stack's `slurm-platform:` keys, and which are secrets (another stack can't read those: only their own stack decrypts them)."""

    stack: str
    raw: dict[str, Any]
    secret_keys: frozenset[str]

    @property
    def platform(self) -> Any:
        """A tenant stack's platform stack (tenantStack.platform); None for a platform stack."""
        tenant_stack = self.raw.get("tenantStack")
        return tenant_stack.get("platform") if isinstance(tenant_stack, dict) else None


@dataclass(frozen=True)
class Cluster:
    """The config a stack validates: the platform's keys with every stack's tenants (the platform's first, then the
    tenant stacks' by name, so that every stack packs the same cells alike), and where each tenant is written."""

    raw: dict[str, Any]
    secret_keys: frozenset[str]
    origins: tuple[tuple[str, int], ...] = ()  # per tenant: its stack, and its index in that stack's `tenants`
    problems: list[Problem] = field(default_factory=list)


def _holds_secret(value: Any) -> bool:
    if isinstance(value, Mapping):
        return set(value) == {"secure"} or any(_holds_secret(v) for v in value.values())
    return isinstance(value, list) and any(_holds_secret(v) for v in value)


def read_stack_file(path: Path) -> StackFile:
    """A Pulumi.<stack>.yaml's `slurm-platform:` keys, without the prefix, as written (a secret as its `secure:` cipher text)."""
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as error:
        raise UnreadableStackFile(f"{path.name} is not YAML: {error}") from None
    config = (document.get("config") or {}) if isinstance(document, dict) else {}
    prefix = f"{PROJECT}:"
    raw = {key[len(prefix) :]: value for key, value in config.items() if isinstance(key, str) and key.startswith(prefix)}
    return StackFile(path.name[len("Pulumi.") : -len(".yaml")], raw, frozenset(key for key, value in raw.items() if _holds_secret(value)))


def read_stack_files(directory: Path) -> dict[str, StackFile]:
    """Every Pulumi.<stack>.yaml in `directory`, by stack."""
    return {f.stack: f for f in map(read_stack_file, sorted(directory.glob("Pulumi.*.yaml")))}


def _tenants_of(stack_file: StackFile) -> list[Any]:
    tenants = stack_file.raw.get("tenants", [])
    return tenants if isinstance(tenants, list) else []


def _platform_problems(stack: str, platform: str, files: Mapping[str, StackFile]) -> list[Problem]:
    platforms = sorted(name for name, f in files.items() if f.platform is None and name != stack)
    if platform not in files:
        return [
            Problem(
                ("tenantStack", "platform"),
                f"names no stack of this project: no Pulumi.{platform}.yaml beside Pulumi.yaml (platform stacks: {', '.join(platforms) or 'none'})",
                platform,
                tuple(platforms[:3]),
            )
        ]
    if files[platform].platform is not None:
        return [Problem(("tenantStack", "platform"), "names a tenant stack, not a platform stack", platform, tuple(platforms[:3]))]
    if "tenants" in files[platform].secret_keys:
        return [
            Problem(("tenantStack", "platform"), f"its tenants are a secret in Pulumi.{platform}.yaml, which its tenant stacks cannot read", platform)
        ]
    return []


def cluster_of(stack: str, own: StackFile, files: Mapping[str, StackFile]) -> Cluster:
    """The whole cluster `stack` belongs to, from its own config (`own`, as the engine hands it) and the other files."""
    if "tenantStack" in own.raw:
        platform = own.platform
        if not isinstance(platform, str):
            return Cluster(own.raw, own.secret_keys)  # the model says what tenantStack must be
        problems = (
            []
            if DNS_LABEL.fullmatch(stack) and len(stack) <= STACK_NAME_MAX
            else [
                Problem(
                    ("tenantStack",),
                    f"a tenant stack's name names its tenants Job: the stack must be named with lower-case letters, digits and '-', "
                    f"{STACK_NAME_MAX} characters at most (this one is {stack!r}); rename it with `pulumi stack rename`",
                )
            ]
        )
        problems += [
            Problem((key,), f"a tenant stack reads it from its platform stack's file, Pulumi.{platform}.yaml: set it there, not here", own.raw[key])
            for key in own.raw
            if key not in TENANT_STACK_KEYS
        ]
        if "tenants" in own.secret_keys:
            problems.append(Problem(("tenants",), "must not be a secret in a tenant stack: its sibling stacks read it to check the whole cluster"))
        problems += _platform_problems(stack, platform, files)
        if problems:
            return Cluster(own.raw, own.secret_keys, problems=problems)
        base = files[platform]
    else:
        platform, base = stack, own
    if not isinstance(own.raw.get("tenants", []), list):
        return Cluster(own.raw, own.secret_keys)  # the model says what `tenants` must be
    siblings = {name: f for name, f in files.items() if f.platform == platform and name not in (stack, platform)}
    unread = [
        Problem((), f"Pulumi.{name}.yaml's tenants are a secret, which the other stacks of its cluster cannot read to check the whole cluster")
        for name, f in sorted(siblings.items())
        if "tenants" in f.secret_keys
    ]
    if unread:
        return Cluster(own.raw, own.secret_keys, problems=unread)
    if "tenantStack" in own.raw:
        siblings[stack] = own
    elif not siblings:
        return Cluster(own.raw, own.secret_keys)  # a stack on its own: its config as it is
    members = [(platform, base), *sorted(siblings.items())]
    tenants = [t for _, f in members for t in _tenants_of(f)]
    origins = tuple((name, index) for name, f in members for index in range(len(_tenants_of(f))))
    raw = {key: value for key, value in base.raw.items() if key not in OWN_KEYS and (base is own or key not in base.secret_keys)}
    raw.update({key: value for key, value in own.raw.items() if key in OWN_KEYS})
    secret_keys = (base.secret_keys - set(OWN_KEYS)) | (own.secret_keys & set(OWN_KEYS))
    return Cluster({**raw, "tenants": tenants}, frozenset(secret_keys), origins)

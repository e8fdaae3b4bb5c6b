"""Researchers' numbers: every uidNumber and gidNumber the directory gets, and the rules that keep them stable.

A number is pinned in config (`tenants[].users[].uidNumber`, `tenants[].gidNumber`) or derived from the name
alone, never from a place in a list: reordering, inserting or removing tenants and users changes no number,
so a file on the shared jail or home keeps its owner. Two names that derive the same number are refused at
preview (pin one); the directory reconciler (components/identity/) never renumbers a live entry.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .fields import Problem, key_path
from .tenants import MAX_ID, OPERATOR_SERVICE_IDS, TenantConfig

if TYPE_CHECKING:
    from .platform import PlatformConfig

# Derived numbers live in the upper half of the 31-bit range, as sssd's own ID mapping does (its default slices
# start at 200000 and reach 2^31): far from the 1000-59999 that adduser hands out, which pinned numbers keep.
DERIVED_ID_BASE = 2**30
DERIVED_ID_SPAN = MAX_ID - DERIVED_ID_BASE + 1


def derived_id(name: str) -> int:
    """The number of a name that pins none: the name's SHA-256 folded into [2^30, 2^31 - 2]."""
    digest = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big")
    return DERIVED_ID_BASE + digest % DERIVED_ID_SPAN


@dataclass(frozen=True)
class Account:
    """A researcher as the directory holds them."""

    name: str
    uid: int
    group: str  # primary group: the tenant's
    ssh_public_keys: tuple[str, ...]
    path: tuple[Any, ...]  # config key path of the user, for messages
    pinned: bool  # uidNumber set in config


@dataclass(frozen=True)
class Group:
    name: str
    gid: int
    members: tuple[str, ...]
    path: tuple[Any, ...]


def groups_of(tenants: Sequence[TenantConfig]) -> list[Group]:
    """One posixGroup per tenant group (tenants may share one), its gid pinned by any of them or derived."""
    members: dict[str, list[str]] = {}
    pinned: dict[str, int] = {}
    paths: dict[str, tuple[Any, ...]] = {}
    for i, tenant in enumerate(tenants):
        listed = members.setdefault(tenant.group, [])
        listed += [name for name in tenant.user_names if name not in listed]
        paths.setdefault(tenant.group, ("tenants", i))
        if tenant.gid_number is not None:
            pinned.setdefault(tenant.group, tenant.gid_number)
    return [Group(group, pinned.get(group, derived_id(group)), tuple(names), paths[group]) for group, names in members.items()]


def accounts_of(tenants: Sequence[TenantConfig]) -> list[Account]:
    """Every researcher once, in their (first) tenant's group; a user in two tenants is a config problem."""
    accounts: dict[str, Account] = {}
    for i, tenant in enumerate(tenants):
        for k, user in enumerate(tenant.users):
            uid = user.uid_number if user.uid_number is not None else derived_id(user.name)
            accounts.setdefault(
                user.name,
                Account(user.name, uid, tenant.group, tuple(user.ssh_public_keys), ("tenants", i, "users", k), user.uid_number is not None),
            )
    return list(accounts.values())


def _clashes(numbered: list[tuple[str, int, tuple[Any, ...], bool]], what: str, reserved: dict[str, int]) -> Iterator[Problem]:
    """Two names with one number, or a name on an operator's service number: reported at the later (or derived) one."""
    owner: dict[int, tuple[str, tuple[Any, ...]]] = {number: (f"the operator's {name} account", ()) for name, number in reserved.items()}
    for name, number, path, pinned in numbered:
        if number in owner:
            other, other_path = owner[number]
            where = f" ({key_path(other_path)})" if other_path else ""
            how = "is pinned to" if pinned else "derives"
            yield Problem(
                (*path, f"{what}Number") if pinned else path,
                f"{how} {what}Number {number}, which {other}{where} already has; pin another {what}Number on one of them "
                f"(e.g. {what}Number: {_free(number, owner)})",
                number if pinned else name,
            )
        else:
            owner[number] = (repr(name), path)


def _free(number: int, taken: dict[int, Any]) -> int:
    candidate = number + 1 if number < MAX_ID else 1000
    while candidate in taken:
        candidate += 1
    return candidate


def identity_problems(config: PlatformConfig) -> Iterator[Problem]:
    tenants = config.tenants
    first_tenant: dict[str, str] = {}
    for i, tenant in enumerate(tenants):
        for k, name in enumerate(tenant.user_names):
            if first_tenant.setdefault(name, tenant.name) != tenant.name:
                yield Problem(
                    ("tenants", i, "users", k),
                    f"is already a user of tenant {first_tenant[name]!r}; a researcher belongs to one tenant (one primary group "
                    "and default account, one set of files); remove it from one of them",
                    name,
                )
    if not config.ldap.enabled:
        for i, tenant in enumerate(tenants):
            for k, user in enumerate(tenant.users):
                if user.ssh_public_keys:
                    yield Problem(
                        ("tenants", i, "users", k, "sshPublicKeys"),
                        "are read from the directory at login, and ldap.enabled is false; set ldap.enabled: true",
                        len(user.ssh_public_keys),
                    )
    reserved = OPERATOR_SERVICE_IDS.get(config.slurm_operator, {})
    yield from _clashes([(a.name, a.uid, a.path, a.pinned) for a in accounts_of(tenants)], "uid", reserved)
    group_pins: dict[str, tuple[int, int]] = {}
    for i, tenant in enumerate(tenants):
        if tenant.gid_number is None:
            continue
        first = group_pins.setdefault(tenant.group, (i, tenant.gid_number))
        if first[1] != tenant.gid_number:
            yield Problem(
                ("tenants", i, "gidNumber"),
                f"differs from the gidNumber {first[1]} of tenants[{first[0]}], which shares group {tenant.group!r}; one group has one number",
                tenant.gid_number,
            )
    yield from _clashes(
        [(g.name, g.gid, g.path, g.name in group_pins) for g in groups_of(tenants)],
        "gid",
        reserved,
    )

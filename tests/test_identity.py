"""Researchers in the config: their keys parsed by a real SSH key parser, their numbers stable whatever the
order of tenants and users, and every identity mistake refused at its key path before anything is registered."""

from __future__ import annotations

import base64
import copy
import random
import re
import struct
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from components.config import ConfigError, parse_config
from components.config.identity import DERIVED_ID_BASE, accounts_of, derived_id, groups_of
from components.identity.entries import seed_ldif
from tests.harness import stack_config

pytestmark = pytest.mark.unit


def openssh(key: Any, comment: str = "someone@example.vn") -> str:
    return key.public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode() + " " + comment


def _string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


ED25519 = openssh(ed25519.Ed25519PrivateKey.generate().public_key())
ACCEPTED = {
    "ed25519": ED25519,
    "ecdsa-256": openssh(ec.generate_private_key(ec.SECP256R1()).public_key()),
    "ecdsa-384": openssh(ec.generate_private_key(ec.SECP384R1()).public_key()),
    "ecdsa-521": openssh(ec.generate_private_key(ec.SECP521R1()).public_key()),
    "rsa-3072": openssh(rsa.generate_private_key(65537, 3072).public_key()),
    "no-comment": ED25519.rsplit(" ", 1)[0],
}
# A FIDO key (its blob as OpenSSH writes it), which the parser reads as an ed25519 key.
SK_ED25519 = "sk-ssh-ed25519@openssh.com " + base64.b64encode(_string(b"sk-ssh-ed25519@openssh.com") + _string(bytes(32)) + _string(b"ssh:")).decode()
REFUSED = {
    "rsa-2048": openssh(rsa.generate_private_key(65537, 2048).public_key()),
    "dsa": "ssh-dss AAAAB3NzaC1kc3MAAACBAJbqNmQ3dgW1kFq2Xxg0aGU0 old@example.vn",
    "fido": SK_ED25519,
    "type-only": "ssh-ed25519",
    "damaged-base64": ED25519[:40] + " x@y",
    "type-mismatch": "ssh-rsa " + ED25519.split()[1],
    "unknown-type": "ssh-foo AAAAC3NzaC1lZDI1NTE5AAAAIHke7B5",
    "private-key": "-----BEGIN OPENSSH PRIVATE KEY-----",
    "two-lines": ED25519 + "\n" + ED25519,
    "empty": "",
}


def with_users(*tenants: dict[str, Any], operator: str = "soperator") -> dict[str, Any]:
    raw = copy.deepcopy(stack_config("prod-hoalac"))
    raw["tenants"] = list(tenants)
    if operator == "ack":
        raw = copy.deepcopy(stack_config("staging-hangzhou"))
        raw["tenants"] = [{**t, "cells": [{"pool": "a10", "gpusPerCell": 1, "cells": 1}]} for t in tenants]
    return raw


def team(name: str, users: list[Any], **fields: Any) -> dict[str, Any]:
    return {"name": name, "users": users, "cells": [{"pool": "h100", "gpusPerCell": 1, "cells": 1}], **fields}


def refusal(raw: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as error:
        parse_config(raw)
    return str(error.value)


@pytest.mark.parametrize("key", list(ACCEPTED.values()), ids=list(ACCEPTED))
def test_an_accepted_key_reaches_the_users_entry(key):
    config = parse_config(with_users(team("llm", [{"name": "annguyen", "sshPublicKeys": [key]}])))
    assert f"sshPublicKey: {key}" in seed_ldif(config.ldap, "{SSHA512}x", config.tenants)


@pytest.mark.parametrize("key", list(REFUSED.values()), ids=list(REFUSED))
def test_a_refused_key_names_its_key_path_and_the_allowed_form(key):
    message = refusal(with_users(team("llm", ["binh", {"name": "annguyen", "sshPublicKeys": [ED25519, key]}])))
    assert "slurm-platform:tenants[0].users[1].sshPublicKeys[1]: must be one OpenSSH public key line: ssh-ed25519" in message, message
    assert "ssh-rsa AAAA... of at least 3072 bits" in message


def test_root_keys_go_through_the_same_parser():
    raw = copy.deepcopy(stack_config("prod-hoalac"))
    raw["slurm"]["login"]["sshRootPublicKeys"] = [REFUSED["rsa-2048"]]
    assert "slurm-platform:slurm.login.sshRootPublicKeys[0]: must be one OpenSSH public key line" in refusal(raw)


def numbers(raw: dict[str, Any]) -> tuple[dict[str, int], dict[str, int]]:
    config = parse_config(raw)
    return {a.name: a.uid for a in accounts_of(config.tenants)}, {g.name: g.gid for g in groups_of(config.tenants)}


def test_no_reordering_inserting_or_removing_changes_a_number():
    tenants = [team(f"team-{i}", [f"user{i}x{j}" for j in range(3)]) for i in range(6)]
    tenants[2]["users"][1] = {"name": "pinned", "uidNumber": 4321}
    tenants[4]["gidNumber"] = 5432
    uids, gids = numbers(with_users(*tenants))
    assert uids["pinned"] == 4321 and gids["team-4"] == 5432
    assert all(uid >= DERIVED_ID_BASE for name, uid in uids.items() if name != "pinned") and len(set(uids.values())) == len(uids)
    shuffler = random.Random(36)
    for _ in range(25):
        changed = copy.deepcopy(tenants)
        shuffler.shuffle(changed)
        for tenant in changed:
            shuffler.shuffle(tenant["users"])
        removed = changed.pop(shuffler.randrange(len(changed)))
        changed.insert(shuffler.randrange(len(changed) + 1), team("newcomers", [f"new{shuffler.randrange(10**6)}"]))
        after_uids, after_gids = numbers(with_users(*changed))
        kept_users = {name for name in uids if name not in {u if isinstance(u, str) else u["name"] for u in removed["users"]}}
        assert {n: after_uids[n] for n in kept_users} == {n: uids[n] for n in kept_users}
        assert {g: after_gids[g] for g in gids if g != removed["name"]} == {g: n for g, n in gids.items() if g != removed["name"]}


def test_the_derived_number_is_the_names_alone():
    assert derived_id("annguyen") == derived_id("annguyen") != derived_id("annguyen2")
    assert DERIVED_ID_BASE <= derived_id("x") <= 2**31 - 2


@pytest.mark.parametrize(
    "tenants,operator,path,words",
    [
        ([team("llm", ["an"]), team("vision", ["an"])], "soperator", "tenants[1].users[0]", "already a user of tenant 'llm'"),
        (
            [team("llm", [{"name": "an", "uidNumber": 12000}]), team("vision", [{"name": "bo", "uidNumber": 12000}])],
            "soperator",
            "tenants[1].users[0].uidNumber",
            "pinned to uidNumber 12000, which 'an'",
        ),
        ([team("llm", [{"name": "an", "uidNumber": 500}])], "soperator", "tenants[0].users[0].uidNumber", "greater than or equal to 1000"),
        ([team("llm", [{"name": "an", "uidNumber": 65534}])], "soperator", "tenants[0].users[0].uidNumber", "Debian's global ids, nobody"),
        ([team("llm", [{"name": "an", "uidNumber": 2**31}])], "soperator", "tenants[0].users[0].uidNumber", "less than or equal to"),
        ([team("llm", ["an"], gidNumber=999)], "soperator", "tenants[0].gidNumber", "greater than or equal to 1000"),
        ([team("nlp", [{"name": "an", "uidNumber": 1109}])], "ack", "tenants[0].users[0].uidNumber", "the operator's slurm account"),
        ([team("nlp", ["an"], gidNumber=1109)], "ack", "tenants[0].gidNumber", "the operator's slurm account"),
        (
            [team("llm", ["an"], ldapGroup="shared", gidNumber=3000), team("vision", ["bo"], ldapGroup="shared", gidNumber=3001)],
            "soperator",
            "tenants[1].gidNumber",
            "shares group 'shared'",
        ),
        (
            [team("llm", ["an"], gidNumber=3000), team("vision", [{"name": "bo", "uidNumber": 3000}])],
            "soperator",
            None,
            None,
        ),
    ],
    ids=[
        "user-in-two-tenants",
        "uid-pinned-twice",
        "uid-system",
        "uid-nobody",
        "uid-too-large",
        "gid-system",
        "ack-slurm-uid",
        "ack-slurm-gid",
        "shared-group-two-gids",
        "uid-equal-gid-is-fine",
    ],
)
def test_each_numbering_mistake_is_refused_at_its_key_path(tenants, operator, path, words):
    raw = with_users(*tenants, operator=operator)
    if path is None:
        parse_config(raw)  # a uid equal to a gid is no clash: users and groups are numbered apart
        return
    message = refusal(raw)
    line = next((line for line in message.splitlines() if line.strip().startswith(f"slurm-platform:{path}:")), None)
    assert line is not None, message
    assert words in line, line


def test_a_derived_collision_asks_for_a_pin(monkeypatch):
    import components.config.identity as identity

    monkeypatch.setattr(identity, "derived_id", lambda name: 1_500_000_000)
    message = refusal(with_users(team("llm", ["an", "bo"])))
    assert re.search(
        r"tenants\[0\]\.users\[1\]: derives uidNumber 1500000000, which 'an' \(tenants\[0\]\.users\[0\]\) already has; pin another", message
    ), message

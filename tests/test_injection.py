"""Injection, as a class: every string field of the config model (found by introspection,
tests/config_walk.py, so a new field is covered without touching this file) is fed a newline,
CR, NUL, U+2028, quotes, `$(...)`, backticks and `;`. Each must be refused naming its key
path, or the whole stack, rendered under mocks, must keep the structure of everything it
renders: the same lines, the same keys on each line, and in shell scripts the same active
shell syntax."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

import pytest
from slurm_rules import kube_rules

from components.config import PROJECT, ConfigError, parse_config
from components.platform import build_platform
from components.tenant_stacks import platform_outputs_as_filed
from tests.config_walk import KEY, VALUE, Loc, StringField, locate, string_fields, with_value
from tests.harness import Run, run_under_mocks, stack_config
from tests.test_bad_config import KEY as SSH_KEY
from tests.test_bad_config import _set

PAYLOADS = {
    "newline": "\nAuthType=auth/none",
    "carriage return": "\rAuthType=auth/none",
    "NUL": "\x00AuthType=auth/none",
    "U+2028": "\u2028AuthType=auth/none",
    "single quote": "'",
    "double quote": '"',
    "command substitution": "$(touch /tmp/pwned)",
    "backticks": "`touch /tmp/pwned`",
    "semicolon": ";touch /tmp/pwned",
}

# One stack per operator, with every optional block and unset optional string filled in, so
# that each string field has a valid value to append the payload to.
HELM_VALUES = {"podAnnotations": {"team": "hpc"}}
# Keys every operator reads (a key only some operators read is refused on the others: components/config/operator_keys.py).
COMMON_EXTRAS: dict[str, Any] = {
    "nodePools[0].taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
    "nodePools[0].labelExistingNodes": ["gpu-node-0"],
    "nodePools[0].karpenter": {"instanceTypes": ["p5.48xlarge"], "capacityTypes": ["on-demand"]},
    "operators.gpuOperator.driverVersion": "550.127.08",
    "operators.gpuOperator.values": HELM_VALUES,
    "operators.networkOperator.docaDriverVersion": "24.10-0.7.0.0-0",
    "operators.networkOperator.values": HELM_VALUES,
    "operators.mariadbOperator.values": HELM_VALUES,
    "operators.certManager.values": HELM_VALUES,
    # On, so that every monitoring string (selector and pod labels, the namespace) reaches what it renders.
    "monitoring.enabled": True,
    "monitoring.prometheus.values": HELM_VALUES,
    "ldap.tls": {"enabled": True, "secretName": "ldap-tls", "caConfigMapName": "ldap-ca"},
    "ldap.storageClassName": "standard-rwo",
    "slurm.login.sshRootPublicKeys": [SSH_KEY],
}
TENANT = {
    "name": "team-a",
    "ldapGroup": "team-a-users",
    "users": [{"name": "alice", "sshPublicKeys": [SSH_KEY], "uidNumber": 12001}, "bob"],
    "namespace": True,
    "kubernetesGroups": ["oidc:team-a"],
    "priorities": ["prod", "test", "oppo"],
    "storage": {"scratch-nfs": {"size": "10Gi", "claims": 1}},
}
BASES: dict[str, tuple[str, dict[str, Any]]] = {
    "soperator 1.14.10": (
        "prod-hanoi",
        {
            "storage.submounts[0].staticNfs": {"server": "10.40.1.11", "path": "/export/data"},
            "slurm.login.serviceType": "NodePort",
            "slurm.login.allowedSourceRanges": [],
            "slurm.login.sshAddress": "login.hpc.example.internal",
            "networkPolicies.dnsCidrs": ["169.254.20.10/32"],
            # The upgrade's first step, and a switch acknowledged from another operator.
            "operators.soperator.crdsVersion": "4.1.7",
            "slurm.operatorSwitch": {"from": "ack", "acknowledged": True},
            "operators.soperator.values": HELM_VALUES,
            "slurm.images.tag": "1.14.10-jammy-slurm24.05.2",
        },
    ),
    "soperator 4.1.7": (
        "prod-hoalac",
        {
            "slurm.login.loadBalancerIp": "10.40.2.20",
            "operators.soperator.values": HELM_VALUES,
            "slurm.partitions[0].config": "MaxTime=INFINITE State=UP",
            "tenants[0].ldapGroup": "team-llm",
            "nodePools[0].topologyLabels": ["cloud.example.com/rack"],
            "operators.kueue.values": HELM_VALUES,
            "tenants[0].kueueCells": [{"pool": "h100", "gpusPerCell": 8, "cells": 1}],
            "tenants[0].namespace": True,
            "tenants[1].kueueCells": [],
        },
    ),
    "ack 2024-06": (
        "staging-hangzhou",
        {
            "operators.ackSlurmOperator": {
                "install": True,
                "version": "1.2.0",
                "repository": "oci://registry.example.com/ack",
                "apiGeneration": "2024-06",
            },
            "operators.ackSlurmOperator.values": HELM_VALUES,
            "slurm.ack.slurmctldHost": "slurm-head",
            "slurm.ack.stateStorageClassName": "alicloud-disk-essd",
            "slurm.ack.extraSlurmConf": ["SlurmctldDebug=info"],
            "tenants": [{**TENANT, "cells": [{"pool": "a10", "gpusPerCell": 1, "cells": 1}]}],
            "ldap.displayNames": {"alice": "Nguyễn Văn An"},
        },
    ),
    # A tenant stack (tenantStack) of prod-hoalac's cluster: its tenants' objects and accounts Job alone.
    "tenant stack": ("prod-hoalac", {"tenantStack": {"platform": "prod-hoalac"}, "tenants[0].namespace": True}),
    # Rendered to a directory (its string reaches no file), so a dev stack: TLS needs a cluster to read the CA from.
    "slinky": (
        "prod-hcm",
        {
            "slurm.slinky.restApi": True,
            "slurm.slinky.controllerStorageClassName": "standard-rwo",
            "operators.slinky.values": HELM_VALUES,
            "kubernetes.renderYamlToDirectory": "rendered",
            "environment": "dev",
            "ldap.tls": {"enabled": False},
            "nodePools[0].gpuType": "h100",
        },
    ),
}


def base_config(name: str) -> dict[str, Any]:
    stack, extras = BASES[name]
    raw = copy.deepcopy(stack_config(stack))
    # The private-LB annotation of the stack's own cloud (another cloud's is refused).
    private_lb = {"slurm.login.serviceAnnotations": kube_rules.PRIVATE_LB_ANNOTATIONS[raw.get("cloud", "fpt")]}
    for dotted, value in {**COMMON_EXTRAS, **private_lb, **extras}.items():
        _set(raw, dotted, copy.deepcopy(value))
    return raw


def key_path(loc: Loc) -> str:
    """The key path as config errors print it, up to `loc`'s end."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return f"{PROJECT}:{text}"


def field_prefix(field: StringField, loc: Loc) -> Loc:
    """The part of `loc` that names the field itself (not a dict's entry)."""
    return loc[: len(loc) - 1] if field.hops[-1] in (KEY, VALUE) else loc


def materialized(raw: dict[str, Any], dump: dict[str, Any], fields: list[StringField]) -> dict[str, Any]:
    """`raw` with each field's path filled in from the parsed config (defaults made explicit), values unchanged."""
    result = copy.deepcopy(raw)
    for field in fields:
        source: Any = dump
        node: Any = result
        for hop in field.hops[:-1]:
            if hop in (KEY, VALUE):
                break
            if hop == 0:
                if isinstance(node[0], str) and isinstance(source[0], dict):
                    node[0] = copy.deepcopy(source[0])  # a user written as a name alone, in full
                source, node = source[0], node[0]
                continue
            if hop not in node:
                node[hop] = copy.deepcopy(source[hop])
            source, node = source[hop], node[hop]
        else:
            last = field.hops[-1]
            if last not in (0, KEY, VALUE) and last not in node:
                node[last] = copy.deepcopy(source[last])
    return result


# --- what the rendered objects look like, structurally ------------------------------------------

SHELLS = ("sh", "bash")


def shell_shape(text: str) -> list[tuple[str, str]]:
    """Per line: the shell syntax that is active (outside quotes and comments), and the quote left open."""
    shape = []
    for line in text.split("\n"):
        active, quote, i = "", "", 0
        while i < len(line):
            c = line[i]
            if quote == "'":
                quote = "" if c == "'" else quote
            elif c == "\\":
                i += 1
            elif quote == '"':
                if c == '"':
                    quote = ""
                elif c == "`" or line.startswith("$(", i):
                    active += c
            elif c in "'\"":
                quote = c
            elif c == "#" and (i == 0 or line[i - 1].isspace()):
                break
            elif c in ";&|<>()`" or line.startswith("$(", i):
                active += c
            i += 1
        shape.append((active, quote))
    return shape


def text_shape(text: str, shell: bool) -> tuple[Any, ...]:
    """Lines (every separator str.splitlines knows), NULs, the keys on each line (`Key=`, `attr:`,
    `key =`), and for a script its shell syntax. An LDIF base64 value (`attr:: ...`, RFC 2849) is data: its
    alphabet has no separator, and its '=' padding is no key."""
    lines = text.splitlines()
    keys = [
        tuple(re.findall(r"(?:^|\s)([A-Za-z_][A-Za-z0-9_.-]*)\s*[=:]", re.sub(r"^([A-Za-z][A-Za-z0-9-]*):: [A-Za-z0-9+/]*=*$", r"\1::", line)))
        for line in lines
    ]
    return (len(lines), text.count("\x00"), tuple(keys), tuple(shell_shape(text)) if shell else ())


def strings(value: Any, path: tuple[Any, ...] = (), shell: bool = False) -> Iterator[tuple[tuple[Any, ...], str, bool]]:
    """(path, text, is a shell script) of every string leaf. Labels and annotations (also a custom
    resource's `...Annotations` for an object the operator makes) are metadata, not files."""
    if isinstance(value, dict):
        for key, item in value.items():
            if (key in ("annotations", "labels") and path[-1:] == ("metadata",)) or str(key).endswith("Annotations"):
                continue
            script = isinstance(key, str) and key.endswith(".sh")
            yield from strings(item, (*path, key), script)
    elif isinstance(value, list):
        # ["/bin/sh", "-c", script]
        command = len(value) > 2 and all(isinstance(v, str) for v in value) and value[0].endswith(SHELLS) and "-c" in value
        for index, item in enumerate(value):
            yield from strings(item, (*path, index), command and index > value.index("-c"))
    elif isinstance(value, str):
        yield path, value, shell or value.startswith("#!")


def structure(run: Run) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    return {(resource.urn, *path): text_shape(text, shell) for resource in run.kubernetes_objects() for path, text, shell in strings(resource.inputs)}


def render(stack: str, raw: dict[str, Any]) -> Run:
    config = parse_config(raw, stack=stack)
    # A tenant stack renders against its platform stack's outputs: as its file says.
    platform = platform_outputs_as_filed(config) if config.role == "tenants" else None
    return run_under_mocks(lambda: build_platform(config), raw, stack=stack, previous_outputs=platform)


def broken_structure(stack: str, old: Run, after: dict[str, Any]) -> list[str]:
    """What changed shape between the run `old` and rendering `after` (objects added or removed too)."""
    new = render(stack, after)
    old_urns, new_urns = {r.urn for r in old.kubernetes_objects()}, {r.urn for r in new.kubernetes_objects()}
    changed = [f"objects {sorted(old_urns ^ new_urns)}"] if old_urns != new_urns else []
    old_shape, new_shape = structure(old), structure(new)
    return changed + [
        f"{path}: {old_shape[path]} -> {new_shape[path]}" for path in old_shape.keys() & new_shape.keys() if old_shape[path] != new_shape[path]
    ]


# --- the class test -----------------------------------------------------------------------------

FIELDS = string_fields()


def exercised(base: str) -> Iterator[tuple[StringField, Loc, str, dict[str, Any]]]:
    """(field, key path, valid value, raw config holding it) of each field this base can carry:
    it has a value there, and making that value explicit keeps the config valid."""
    raw = base_config(base)
    dump = parse_config(raw).model_dump(by_alias=True, mode="json")
    for field in FIELDS:
        found = locate(dump, field)
        if found is None or found[1] is None:
            continue
        whole = materialized(raw, dump, [field])
        try:
            parse_config(whole)
        except ConfigError:
            continue  # e.g. slurm.partitions set explicitly on soperator 1.14.10
        yield field, found[0], found[1], whole


def test_the_walk_finds_every_string_field_and_a_value_for_each():
    assert len(FIELDS) >= 150, len(FIELDS)
    covered = {str(field) for base in BASES for field, *_ in exercised(base)}
    unexercised = [str(f) for f in FIELDS if str(f) not in covered]
    assert not unexercised, f"add a value for these to a base in tests/test_injection.py: {unexercised}"
    # The walk reaches into lists, dict keys and values, Optional models and string Literals.
    names = {str(f) for f in FIELDS}
    assert {
        "tenants[0].users[0].name",
        "tenants[0].users[0].sshPublicKeys[0]",
        "nodePools[0].selector{key}",
        "slurm.login.serviceAnnotations{value}",
    } <= names
    assert {"slurm.ack.slurmctldHost", "slurm.ack.autoscaling.suspendProgram", "environment"} <= names


@pytest.mark.parametrize("base", BASES)
def test_every_config_string_is_refused_by_key_path_or_keeps_the_rendered_structure(base):
    stack = BASES[base][0]
    raw = base_config(base)
    dump = parse_config(raw).model_dump(by_alias=True, mode="json")
    tried, accepted = 0, {name: list[tuple[StringField, str]]() for name in PAYLOADS}
    for field, loc, value, whole in exercised(base):
        for name, payload in PAYLOADS.items():
            tried += 1
            try:
                parse_config(with_value(whole, field, f"{value}{payload}"))
            except ConfigError as error:
                assert f"\n  {key_path(field_prefix(field, loc))}" in str(error), f"{field} + {name}: {error}"
                continue
            accepted[name].append((field, value))
    assert tried >= 100 * len(PAYLOADS), tried
    # Each payload in every field that took it at once, against one rendering of the same config without them.
    before = materialized(raw, dump, list({str(f): f for fields in accepted.values() for f, _ in fields}.values()))
    baseline = render(stack, before)
    problems = []
    for name, fields in accepted.items():
        after = before
        # Values first, then dict keys: renaming a key reorders its dict.
        for field, value in sorted(fields, key=lambda fv: fv[0].hops[-1] == KEY):
            after = with_value(after, field, f"{value}{PAYLOADS[name]}")
        if fields and (broken := broken_structure(stack, baseline, after)):
            # Name the field(s) that did it.
            for field, value in fields:
                if changed := broken_structure(stack, baseline, with_value(before, field, f"{value}{PAYLOADS[name]}")):
                    problems.append(f"{field} + {name}: {changed[:3]}")
            problems += [] if problems else [f"{name} (together): {broken[:3]}"]
    assert not problems, "\n".join(problems)


# --- the findings, one by one ---------------------------------------------------------------------


def ack_stack(**ack: Any) -> dict[str, Any]:
    raw = copy.deepcopy(stack_config("staging-hangzhou"))
    raw["slurm"]["ack"].update(ack)
    return raw


@pytest.mark.parametrize(
    "ack, path",
    [
        ({"slurmctldHost": "head$(touch /tmp/pwned)"}, "slurm.ack.slurmctldHost"),
        ({"autoscaling": {"enabled": True, "suspendProgram": "/x\nAuthType=auth/none"}}, "slurm.ack.autoscaling.suspendProgram"),
        ({"autoscaling": {"enabled": True, "resumeProgram": "/x AuthType=auth/none"}}, "slurm.ack.autoscaling.resumeProgram"),
        ({"slurmConfPath": "/var/slurm; rm -rf /"}, "slurm.ack.slurmConfPath"),
        ({"extraSlurmConf": ["SlurmctldDebug=info\nAuthType=auth/none"]}, "slurm.ack.extraSlurmConf[0]"),
        ({"home": {"server": "nas.example.com;reboot", "path": "/home"}}, "slurm.ack.home.server"),
    ],
)
def test_the_reviews_injections_are_refused_by_key_path(ack, path):
    with pytest.raises(ConfigError) as caught:
        parse_config(ack_stack(**ack))
    assert f"\n  {PROJECT}:{path}: " in str(caught.value)


def test_a_shell_script_that_takes_a_value_unquoted_changes_shape():
    """The shape check itself: what an unquoted `$(...)` or `;` does to a script line, and what quoting keeps."""
    line = "echo waiting for slurmdbd at {}"
    assert shell_shape(line.format("head")) != shell_shape(line.format("head$(touch /tmp/pwned)"))
    assert shell_shape(line.format("head")) != shell_shape(line.format("head;touch /tmp/pwned"))
    assert shell_shape(line.format("'head'")) == shell_shape(line.format("'head$(touch /tmp/pwned);`x`'"))
    assert text_shape("A=1\nB=2", False) != text_shape("A=1\nB=2\u2028C=3", False)
    assert text_shape("SuspendProgram=/x", False) != text_shape("SuspendProgram=/x AuthType=auth/none", False)

"""Names a tenant must not take: namespaces the stack does not own, Slurm's root account, and
the system users and groups of the Slurm images (for every config string that seeds LDAP or
sacctmgr, found by the same walk as the injection test). Tenant namespaces are protected."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from components import tenancy
from components.config import RESERVED_POSIX_NAMES, ConfigError, OperatorsConfig, parse_config, reserved_namespaces
from components.identity.entries import seed_ldif
from components.slurm import operator_module
from tests.config_walk import with_value
from tests.harness import stack_config
from tests.test_injection import BASES, base_config, exercised
from tests.test_program import run_stack

STACK = "prod-hoalac"  # soperator 4.1.7, three tenants, one with a namespace


def with_tenant(**fields: Any) -> dict[str, Any]:
    raw = copy.deepcopy(stack_config(STACK))
    raw["tenants"] = [{**raw["tenants"][0], **fields}]
    return raw


def error_of(raw: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    return str(caught.value)


# --- namespaces ---------------------------------------------------------------------------------


def namespaces_we_do_not_own() -> list[tuple[str, str]]:
    """(namespace, why) for Kubernetes' own, the cluster's, and every operator's (installed or not)."""
    config = parse_config(stack_config(STACK))
    operators = [(getattr(config.operators, key).namespace, f"operators.{key}") for key in OperatorsConfig.model_fields]
    assert len(operators) >= 7  # the loop below found every chart
    return [
        ("default", "Kubernetes' default"),
        ("ci", "the deploy and preview identities', with their tokens"),
        ("kube-system", "Kubernetes'"),
        ("kube-public", "Kubernetes'"),
        ("kube-node-lease", "Kubernetes'"),
        ("kube-future", "kube-*"),
        (config.cluster.namespace, "the cluster's"),
        *operators,
    ]


@pytest.mark.parametrize("namespace, why", namespaces_we_do_not_own(), ids=[n for n, _ in namespaces_we_do_not_own()])
def test_a_tenant_namespace_is_never_one_we_do_not_own(namespace, why):
    message = error_of(with_tenant(name=namespace, namespace=True))
    assert f"slurm-platform:tenants[0].namespace: would declare namespace {namespace!r}, which is not the tenant's" in message, why
    listed = message.split("(reserved: ", 1)[1]
    for reserved in ["kube-*", *reserved_namespaces(parse_config(stack_config(STACK)))]:
        assert reserved in listed


def test_an_operator_namespace_is_reserved_whether_this_stack_or_the_portal_installs_it():
    raw = with_tenant(name="gpu-operator", namespace=True)
    for install, how in ((True, "installed by this stack"), (False, "installed outside this stack")):
        raw["operators"] = {**raw.get("operators", {}), "gpuOperator": {"install": install}}
        assert f"operators.gpuOperator.namespace, {how}" in error_of(raw)


def test_a_tenant_without_a_namespace_may_share_a_name_with_one():
    """Only the Slurm account is named then."""
    assert parse_config(with_tenant(name="gpu-operator", namespace=False)).tenants[0].name == "gpu-operator"


def test_tenant_namespaces_are_protected_and_kept_when_the_tenant_goes():
    run = run_stack(STACK)
    namespaces = [r for r in run.of_type("kubernetes:core/v1:Namespace") if r.parent.endswith("Tenants::tenants")]
    assert [r.inputs["metadata"]["name"] for r in namespaces] == ["vision"]
    assert all(r.protect and r.retain_on_delete for r in namespaces)
    # Its quotas and defaults are not data: they go with the tenant.
    kept = run.of_type("kubernetes:core/v1:ResourceQuota") + run.of_type("kubernetes:core/v1:LimitRange")
    assert len(kept) == 4 and not any(r.protect or r.retain_on_delete for r in kept)


# --- Slurm's root account, and the images' users and groups ---------------------------------------


def test_slurms_root_account_is_not_a_tenant():
    assert "slurm-platform:tenants[0].name: 'root' is Slurm's root account" in error_of(with_tenant(name="root"))


@pytest.mark.parametrize("name", ["root", "slurm", "munge", "nobody", "sudo"])
def test_system_users_and_groups_are_not_seeded(name):
    assert f"slurm-platform:tenants[0].users[1]: {name!r} is a system user or group" in error_of(with_tenant(users=["alice", name]))
    assert f"slurm-platform:tenants[0].ldapGroup: {name!r} is a system user or group" in error_of(with_tenant(ldapGroup=name))


def test_a_tenant_named_like_a_system_group_needs_its_own_ldap_group():
    assert "slurm-platform:tenants[0].name: is also its LDAP group (ldapGroup unset)" in error_of(with_tenant(name="staff", ldapGroup=None))
    assert parse_config(with_tenant(name="staff", ldapGroup="team-staff")).tenants[0].group == "team-staff"


def seeded(config) -> tuple[str, str]:
    """The seed LDIF and the sacctmgr script: everything config puts into LDAP and slurmdbd."""
    ldif = seed_ldif(config.ldap, "{SSHA512}x", config.tenants) if config.ldap.enabled else ""
    script = tenancy.sacctmgr_script(config, operator_module(config).accounting_client(config)) if config.tenants else ""
    return ldif, script


def seeded_names(ldif: str, script: str) -> tuple[set[str], set[str]]:
    """(the Unix users and groups, the Slurm accounts) that the seed and the script create or change."""
    posix = set(re.findall(r"(?m)^(?:dn: (?:uid|cn)=([^,]+),ou=(?:users|groups),|memberUid: (\S+)$)", ldif))
    users = set(re.findall(r"\buser (?:where name=)?([^\s|']+)|\buser=([^\s|']+)", script))
    accounts = set(re.findall(r"\baccount (?:where name=)?([^\s|']+)|\b[Aa]ccount=([^\s|']+)", script))
    return _flat(posix) | _flat(users), _flat(accounts)


def _flat(alternatives: set[tuple[str, str]]) -> set[str]:
    """re.findall's tuples of alternative groups: the group that matched."""
    return {name for groups in alternatives for name in groups if name}


@pytest.mark.parametrize("base", [base for base in BASES if parse_config(base_config(base)).tenants])
def test_no_config_string_seeds_a_reserved_name_into_ldap_or_slurm(base):
    """The class: every string field, set to a reserved name, is refused or seeds nothing of that name."""
    reserved = ["root", "slurm", "munge", "nobody", "sudo", "staff"]
    assert {"root", "slurm", "munge", "nobody"} <= RESERVED_POSIX_NAMES
    tried = 0
    for field, _, _, whole in exercised(base):
        for name in reserved:
            tried += 1
            try:
                config = parse_config(with_value(whole, field, name))
            except ConfigError:
                continue
            posix, accounts = seeded_names(*seeded(config))
            assert name not in posix, f"{field} = {name!r} seeds the Unix user or group {name!r}"
            assert "root" not in accounts, f"{field} = {name!r} changes Slurm's root account"
    assert tried >= 100 * len(reserved), tried
    # ...and the check sees what a tenant does seed.
    config = parse_config(base_config(base))
    posix, accounts = seeded_names(*seeded(config))
    tenant = config.tenants[0]
    assert {tenant.users[0].name, tenant.group} <= posix and {tenant.name, f"{tenant.name}-oppo"} <= accounts

"""Config files built from properties (policies/slurm_rules/config_files.py): the builder's rules, and every
operator's path into slurm.conf refusing a defunct option where the property is added."""

from __future__ import annotations

import copy

import pytest
from slurm_rules import slurm_options
from slurm_rules.config_files import RENDERED_BY, ConfigFile, RefusedProperty, SlurmConfig, options_text
from slurm_rules.slurm_options import Gate
from slurm_rules.slurm_release import SlurmRelease

from components.config import parse_config
from components.slurm import operator_module
from tests.harness import stack_config

pytestmark = pytest.mark.unit

NEWEST, OLDEST = SlurmRelease(26, 5), SlurmRelease(22, 5)


def test_a_whole_file_begins_with_the_rendered_by_line_and_a_fragment_does_not():
    conf = SlurmConfig(NEWEST).set("ClusterName", "hpc").set("GresTypes", "gpu")
    assert conf.text() == f"# {RENDERED_BY}\nClusterName=hpc\nGresTypes=gpu\n"
    assert conf.fragment() == "ClusterName=hpc\nGresTypes=gpu"
    assert ConfigFile("nslcd.conf", " ").set("uid", "nslcd").text() == f"# {RENDERED_BY}\nuid nslcd\n"


def test_a_key_set_twice_is_refused_in_any_case_unless_the_format_keeps_every_line():
    with pytest.raises(RefusedProperty, match="already has SchedulerType=sched/backfill"):
        SlurmConfig(NEWEST).set("SchedulerType", "sched/backfill").set("schedulertype", "sched/builtin")
    nslcd = ConfigFile("nslcd.conf", " ", repeatable=["base"]).set("base", "dc=example").set("base", "passwd ou=users,dc=example")
    assert nslcd.fragment().splitlines() == ["base dc=example", "base passwd ou=users,dc=example"]
    with pytest.raises(RefusedProperty, match="already has uid nslcd"):
        ConfigFile("nslcd.conf", " ").set("uid", "nslcd").set("uid", "root")


def test_each_section_has_its_own_keys():
    conf = ConfigFile("sssd.conf", " = ").section("sssd").set("domains", "LDAP").section("domain/LDAP").set("domains", "x")
    assert conf.fragment() == "[sssd]\ndomains = LDAP\n\n[domain/LDAP]\ndomains = x"
    with pytest.raises(RefusedProperty):
        conf.set("domains", "y")


def test_definitions_repeat_by_name_and_defaults_repeat_freely():
    conf = SlurmConfig(NEWEST).define("PartitionName", "DEFAULT", [("MaxTime", "INFINITE")])
    conf.define("PartitionName", "DEFAULT", [("State", "UP")]).define("PartitionName", "a", [("Nodes", "ALL")])
    conf.define("PartitionName", "b", [("Nodes", "ALL")])
    with pytest.raises(RefusedProperty, match="already has PartitionName=a Nodes=ALL"):
        conf.define("PartitionName", "a", [("Nodes", "gpu")])
    with pytest.raises(RefusedProperty, match="one Key=Value per line"):
        conf.line("SchedulerType=sched/backfill MaxJobCount=5")


def test_a_property_the_release_calls_defunct_or_does_not_know_is_refused_when_added():
    with pytest.raises(RefusedProperty, match="calls defunct CommunicationParameters=NoAddrCache"):
        SlurmConfig(NEWEST).set("CommunicationParameters", "NoAddrCache", ("slurm", "ack", "extraSlurmConf", 0))
    with pytest.raises(RefusedProperty, match="SchedulerParamters is not a slurm.conf option of any Slurm release"):
        SlurmConfig(NEWEST).set("SchedulerParamters", "bf_continue")
    with pytest.raises(RefusedProperty, match="does not know ExclusiveTopo"):
        SlurmConfig(OLDEST).define("PartitionName", "p", [("Nodes", "ALL"), ("ExclusiveTopo", "YES")])
    with pytest.raises(RefusedProperty, match="Slurm 24.05 does not know RestrictedCoresPerGPU"):
        options_text(SlurmRelease(24, 5), "NodeName", [("Gres", "gpu:8"), ("RestrictedCoresPerGPU", 2)])
    with pytest.raises(RefusedProperty, match="Cores is not a NodeName option"):
        SlurmConfig(NEWEST).define("NodeName", "n1", [("Cores", 8)])
    # The program's own release-dependent lines are left out where the release does not take them...
    assert SlurmConfig(NEWEST).set_where_taken("CommunicationParameters", "NoAddrCache").fragment() == ""
    assert SlurmConfig(OLDEST).set_where_taken("CommunicationParameters", "NoAddrCache").fragment() == "CommunicationParameters=NoAddrCache"
    # ...but a key no release knows is refused all the same.
    with pytest.raises(RefusedProperty, match="not a slurm.conf option of any Slurm release"):
        SlurmConfig(NEWEST).set_where_taken("ComunicationParameters", "NoAddrCache")
    with pytest.raises(RefusedProperty, match="PrologFlags=contained is not a value of any Slurm release"):
        SlurmConfig(OLDEST).set_where_taken("PrologFlags", "Contained")


# --- every operator's path into slurm.conf ------------------------------------------------------------------------

OPERATOR_STACKS = {"ack": "staging-hangzhou", "slinky": "prod-hcm", "soperator 4.1.7": "staging-hanoi"}


def retire(monkeypatch, file: slurm_options.File, key: str) -> None:
    """Every release calls `key` defunct from here on, as a release after ours might."""
    gate = Gate(file, key, until=OLDEST, fate="defunct", fix="remove it")
    monkeypatch.setattr(slurm_options, "GATES", (*slurm_options.GATES, gate))


def refusal_at_add(config) -> RefusedProperty:
    """The operator's render refused, and where: in the builder's add (set or define), not after the text is made."""
    with pytest.raises(RefusedProperty) as refused:
        operator_module(config).render(config)
    assert refused.traceback[-1].name in ("set", "define"), [entry.name for entry in refused.traceback]
    return refused.value


def stack(operator: str, **slurm_changes):
    raw = copy.deepcopy(stack_config(OPERATOR_STACKS[operator]))
    raw["slurm"] = {**raw["slurm"], **slurm_changes}
    return raw


@pytest.mark.parametrize("operator", OPERATOR_STACKS)
def test_a_defunct_option_in_a_partitions_config_is_refused_when_added(operator, monkeypatch):
    raw = stack(operator)
    raw["slurm"]["partitions"] = [{**raw["slurm"]["partitions"][0], "config": "MaxTime=INFINITE"}, *raw["slurm"]["partitions"][1:]]
    config = parse_config(raw)
    retire(monkeypatch, "partition", "MaxTime")
    refused = refusal_at_add(config)
    assert "calls defunct MaxTime" in refused.reason and refused.origin == ("slurm", "partitions", 0, "config")


@pytest.mark.parametrize("operator", OPERATOR_STACKS)
def test_a_defunct_option_in_the_extra_config_is_refused_when_added(operator, monkeypatch):
    # ACK's extra lines are the stack config's; Slinky's extraConf and soperator's customSlurmConfig are ours.
    if operator == "ack":
        config = parse_config(
            stack(operator, ack={**stack_config(OPERATOR_STACKS[operator])["slurm"]["ack"], "extraSlurmConf": ["MaxJobCount=5000"]})
        )
        retire(monkeypatch, "slurm.conf", "MaxJobCount")
        refused = refusal_at_add(config)
        assert "calls defunct MaxJobCount" in refused.reason and refused.origin == ("slurm", "ack", "extraSlurmConf", 0)
    else:
        config = parse_config(stack(operator))
        retire(monkeypatch, "slurm.conf", "DefMemPerCPU")
        assert "calls defunct DefMemPerCPU" in refusal_at_add(config).reason


@pytest.mark.parametrize("operator", ["ack", "slinky"])
def test_a_defunct_option_in_a_worker_line_is_refused_when_added(operator, monkeypatch):
    # ACK's CLOUD NodeName lines and Slinky's NodeSet extraConf; soperator renders its workers' lines itself.
    config = parse_config(stack(operator))
    retire(monkeypatch, "node", "Gres")
    assert "calls defunct Gres" in refusal_at_add(config).reason

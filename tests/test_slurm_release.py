"""The Slurm release a stack deploys: read from the image tag the program pins or the config names."""

import copy
from typing import Any

import pytest
from slurm_rules import confinement, slurm_options
from slurm_rules.slurm_release import RELEASES, unknown_release

from components.config import ConfigError, parse_config
from components.slurm import ack, slinky, soperator1, soperator4
from components.slurm.release import SlurmRelease, deployed_release, release_in_image_tag
from tests.harness import body, stack_config


@pytest.mark.parametrize(
    "text,release",
    [("24.11", SlurmRelease(24, 11)), ("24.11.5", SlurmRelease(24, 11)), ("22.05.8", SlurmRelease(22, 5)), (" 26.05 ", SlurmRelease(26, 5))],
)
def test_a_release_parses_from_major_or_full_version_and_prints_its_major(text, release):
    assert SlurmRelease.parse(text) == release
    assert str(release) == text.strip()[:5]


@pytest.mark.parametrize("text", ["24", "24.1", "v24.11", "24.11.", "24.13", "24.00", "2024.11", "24.11-1"])
def test_text_that_is_no_release_is_refused(text):
    with pytest.raises(ValueError, match="is not a Slurm release: YY.MM"):
        SlurmRelease.parse(text)


def test_releases_order_by_year_then_month():
    assert SlurmRelease.parse("22.05") < SlurmRelease.parse("23.02") < SlurmRelease.parse("23.11") < SlurmRelease.parse("24.05")
    assert list(RELEASES) == sorted(RELEASES) and len(set(RELEASES)) == len(RELEASES)


@pytest.mark.parametrize(
    "tag,release",
    [
        ("1.14.10-jammy-slurm24.05.2", "24.05"),
        ("4.1.7-slurm25.11.3", "25.11"),
        ("26.05-ubuntu26.04", "26.05"),
        ("25.11.2-rockylinux9", "25.11"),
        ("1.15.0-noble-slurm24.11", "24.11"),
        ("23.02", "23.02"),
    ],
)
def test_the_release_is_read_from_each_tag_form(tag, release):
    assert release_in_image_tag(tag) == SlurmRelease.parse(release)


@pytest.mark.parametrize("tag", ["latest", "1.14.10-jammy", "4.1.7", "slurm", "1.14.10-jammy-slurm24.13.1", "v26.05-ubuntu", "ubuntu26.04"])
def test_a_tag_naming_no_release_is_an_error_that_shows_the_forms(tag):
    with pytest.raises(
        ValueError,
        match=r"names no Slurm release: it must name one as the upstream tags do, soperator's .*4\.1\.7-slurm25\.11\.3.*26\.05-ubuntu26\.04",
    ):
        release_in_image_tag(tag)


def test_the_pinned_tags_name_the_releases_the_issue_lists():
    assert release_in_image_tag(soperator1.IMAGE_TAG) == SlurmRelease(24, 5)
    assert release_in_image_tag(soperator4.IMAGE_TAG) == SlurmRelease(25, 11)


def ack_stack(**ack):
    raw = copy.deepcopy(stack_config("staging-hangzhou"))
    raw["slurm"]["ack"].update(ack)
    return raw


@pytest.mark.parametrize(
    "raw,release",
    [
        ({}, "24.05"),
        ({"operators": {"soperator": {"version": "4.1.7"}}}, "25.11"),
        ({"slurm": {"images": {"tag": "1.14.10-jammy-slurm24.11.6"}}}, "24.11"),
        ({"slurmOperator": "slinky"}, "26.05"),
        ({"slurmOperator": "slinky", "slurm": {"slinky": {"tag": "25.11-ubuntu24.04"}}}, "25.11"),
    ],
)
def test_the_deployed_release_follows_the_operator_and_its_tag(raw, release):
    assert deployed_release(parse_config(raw)) == SlurmRelease.parse(release)


def test_acks_release_is_configured_and_defaults_to_the_guides_image():
    assert deployed_release(parse_config(ack_stack())) == SlurmRelease(23, 2)
    assert deployed_release(parse_config(ack_stack(slurmRelease="24.11.5"))) == SlurmRelease(24, 11)


@pytest.mark.parametrize(
    "raw,key,reason",
    [
        ({"slurm": {"images": {"tag": "my-build-7"}}}, "slurm.images.tag", "names no Slurm release"),
        ({"slurm": {"images": {"tag": "1.14.10-jammy-slurm27.05.1"}}}, "slurm.images.tag", "not 27.05: add it to slurm_rules/slurm_release.py"),
        ({"slurmOperator": "slinky", "slurm": {"slinky": {"tag": "latest"}}}, "slurm.slinky.tag", "names no Slurm release"),
        ({"slurmOperator": "slinky", "slurm": {"slinky": {"tag": "21.08-ubuntu"}}}, "slurm.slinky.tag", "not 21.08"),
    ],
)
def test_a_tag_the_program_cannot_render_for_is_refused_by_key_path(raw, key, reason):
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    line = next(line for line in str(caught.value).splitlines() if key in line)
    assert reason in line


@pytest.mark.parametrize("value,reason", [("23.06", "is not a Slurm release (releases: 22.05, 23.02"), ("2023.06", "YY.MM"), ("27.05", "not 27.05")])
def test_acks_release_must_be_a_slurm_release_the_program_knows(value, reason):
    with pytest.raises(ConfigError) as caught:
        parse_config(ack_stack(slurmRelease=value))
    line = next(line for line in str(caught.value).splitlines() if "slurm.ack.slurmRelease" in line)
    assert reason in line


def test_every_known_release_is_known_and_its_neighbours_are_not():
    assert all(unknown_release(release) is None for release in RELEASES)
    assert unknown_release(SlurmRelease(23, 6)) and unknown_release(SlurmRelease(21, 8)) and unknown_release(SlurmRelease(27, 5))


def test_slinky_renders_the_tag_it_reads_the_release_from():
    config = parse_config({"slurmOperator": "slinky"})
    assert slinky.image(config, "slurmd").endswith(":26.05-ubuntu26.04")


# --- what each release takes (slurm_rules/slurm_options.py) and what the renders write for it ---------------------


def line_gates(text: str, release: SlurmRelease, file: slurm_options.File = "slurm.conf") -> list[str]:
    return [f"{line}: {reason}" for line in text.splitlines() if (reason := slurm_options.line_objection(release, file, line))]


@pytest.mark.parametrize("release", [str(r) for r in RELEASES])
def test_acks_slurm_conf_gres_conf_and_cgroup_conf_are_taken_verbatim_by_the_release_they_are_for(release):
    for version in ("v1", "v2"):
        raw = ack_stack(slurmRelease=release)
        raw["slurm"].setdefault("worker", {})["cgroupVersion"] = version
        config = parse_config(raw)
        data = ack.slurm_conf_config_map(config)["data"]
        target = SlurmRelease.parse(release)
        assert line_gates(data["slurm.conf"], target) == []
        assert line_gates(data["gres.conf"], target, "gres.conf") == []
        assert [
            line for line in body(data["cgroup.conf"]).splitlines() if not slurm_options.accepts(target, "cgroup.conf", *line.split("=", 1))
        ] == []


def test_acks_cloud_node_lines_follow_the_release():
    def lines(release):
        return ack.slurm_conf(parse_config(ack_stack(slurmRelease=release))).splitlines()

    assert "CommunicationParameters=NoAddrCache" in lines("22.05") and "ReconfigFlags=KeepPowerSaveSettings" not in lines("22.05")
    assert "CommunicationParameters=NoAddrCache" in lines("23.02") and "ReconfigFlags=KeepPowerSaveSettings" in lines("23.02")
    for release in ("23.11", "24.11", "26.05"):
        assert "CommunicationParameters=NoAddrCache" not in lines(release) and "ReconfigFlags=KeepPowerSaveSettings" in lines(release)


@pytest.mark.parametrize("release,plugin", [("22.05", "nvml"), ("24.05", "nvml"), ("24.11", "nvidia"), ("26.05", "nvidia")])
def test_gpu_autodetect_is_the_plugin_the_release_has(release, plugin):
    raw = ack_stack(slurmRelease=release)
    raw["slurm"]["ack"]["autoscaling"] = {"enabled": False}
    assert body(ack.gres_conf(parse_config(raw))) == f"AutoDetect={plugin}\n"
    slinky_config = parse_config({"slurmOperator": "slinky", "slurm": {"slinky": {"tag": f"{release}-ubuntu24.04"}}})
    assert body(slinky.config_files(slinky_config)["data"]["gres.conf"]) == f"AutoDetect={plugin}\n"


def test_enable_controllers_is_rendered_where_the_release_knows_it():
    def cgroup(release):
        return confinement.cgroup_conf("v2", SlurmRelease.parse(release))

    assert "EnableControllers=yes" not in cgroup("22.05") and "IgnoreSystemd=yes" in cgroup("22.05")
    assert "EnableControllers=yes" in cgroup("23.02")
    assert confinement.cgroup_conf_gaps(cgroup("22.05")) == []


def test_a_render_naming_an_option_no_release_knows_is_a_program_error():
    with pytest.raises(ValueError, match="EnableControlers is no cgroup.conf option"):
        slurm_options.rendered(SlurmRelease(24, 11), "cgroup.conf", ["EnableControlers=yes"])


@pytest.mark.parametrize(
    "line,release,reason",
    [
        ("CommunicationParameters=NoAddrCache", "24.11", "Slurm 24.11 calls defunct CommunicationParameters=NoAddrCache (since 23.11)"),
        ("CommunicationParameters=block_null_hash,NoAddrCache", "23.11", "calls defunct CommunicationParameters=NoAddrCache"),
        ("ReconfigFlags=KeepPowerSaveSettings", "22.05", "Slurm 22.05 does not know ReconfigFlags=KeepPowerSaveSettings (new in 23.02)"),
        ("PrologTimeout=60", "24.11", "does not know PrologTimeout (new in 25.05)"),
        ("FastSchedule=1", "23.02", "has removed FastSchedule"),
        ("PowerPlugin=power/none", "24.05", "calls defunct PowerPlugin (since 24.05)"),
        ("SelectType=select/cons_res", "24.11", "has removed SelectType=select/cons_res (since 23.11); use select/cons_tres"),
        ("SchedulerParamters=bf_continue", "26.05", "SchedulerParamters is not a slurm.conf option of any Slurm release"),
        ("PartitionName=x Nodes=ALL PowerDownOnIdle=YES", "22.05", "does not know PowerDownOnIdle (new in 23.02)"),
    ],
)
def test_extra_slurm_conf_the_release_does_not_take_is_refused_naming_key_line_release_and_fix(line, release, reason):
    with pytest.raises(ConfigError) as caught:
        parse_config(ack_stack(slurmRelease=release, extraSlurmConf=["SchedulerParameters=bf_continue", line]))
    message = next(m for m in str(caught.value).splitlines() if "slurm.ack.extraSlurmConf[1]" in m)
    assert reason in message and f"slurm.ack.slurmRelease: {release}" in message and line in message, message


@pytest.mark.parametrize(
    "line,release",
    [
        ("CommunicationParameters=NoAddrCache", "23.02"),
        ("ReconfigFlags=KeepPowerSaveSettings", "23.02"),
        ("PrologTimeout=60", "25.05"),
        ("NodeName=extra[0-1] CPUs=4 State=CLOUD", "22.05"),
        ("schedulerparameters=bf_continue", "26.05"),
    ],
)
def test_extra_slurm_conf_the_release_takes_passes(line, release):
    parse_config(ack_stack(slurmRelease=release, extraSlurmConf=[line]))


def test_partition_options_are_checked_against_every_operators_release():
    raw: dict[str, Any] = {
        "operators": {"soperator": {"version": "4.1.7"}},
        "slurm": {"partitions": [{"name": "main", "config": "State=UP Toplogy=x"}]},
    }
    with pytest.raises(
        ConfigError, match=r"slurm.partitions\[0\].config: Toplogy is not a PartitionName option.*slurm.images.tag: 4.1.7-slurm25.11.3"
    ):
        parse_config(raw)
    raw["slurm"]["partitions"][0]["config"] = "State=UP Topology=x"  # 25.05 and later
    parse_config(raw)
    raw["slurm"]["images"] = {"tag": "4.1.7-slurm24.11.6"}
    with pytest.raises(ConfigError, match=r"slurm.partitions\[0\].config: Slurm 24.11 does not know Topology \(new in 25.05\)"):
        parse_config(raw)


def test_accepts_says_no_to_an_unknown_key_and_yes_to_a_deprecated_value():
    release = SlurmRelease(26, 5)
    assert not slurm_options.accepts(release, "slurm.conf", "SchedulerParamters", "bf_continue")
    assert slurm_options.accepts(release, "cgroup.conf", "CgroupPlugin", "cgroup/v1")
    assert "deprecates CgroupPlugin=cgroup/v1 (since 25.05)" in str(slurm_options.objection(release, "cgroup.conf", "CgroupPlugin", "cgroup/v1"))
    assert not slurm_options.accepts(release, "slurm.conf", "CommunicationParameters", "NoAddrCache")

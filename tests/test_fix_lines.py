"""Errors that fix themselves: a field error names the line that fixes it where one is clear (the allowed
value a near miss meant, the bound a number crossed), and that line, pasted, does fix it; the cloud is
inferred where the config leaves no doubt, and where it does not the error names `slurm-platform:cloud: ...`
and the keys that pointed where. Walked over every string field of one stack per operator
(tests/test_injection.py's bases), so a new field is covered without touching this file."""

from __future__ import annotations

import copy
import re
import shlex
from typing import Any, Optional

import pytest
import yaml

from components.config import PROJECT, ConfigError, parse_config
from tests.config_walk import KEY, Loc, StringField, locate, string_fields, with_value
from tests.harness import example_stacks, stack_config
from tests.test_bad_config import _set
from tests.test_injection import BASES, base_config

STACK = "lab-hanoi"  # the stack the errors are for: nested fix lines name it


def problems_of(raw: dict[str, Any]) -> list[str]:
    try:
        parse_config(raw, stack=STACK)
    except ConfigError as error:
        return [line.strip() for line in str(error).splitlines()[1:]]
    return []


def line_at(raw: dict[str, Any], path: str) -> Optional[str]:
    return next((line for line in problems_of(raw) if line.startswith(f"{PROJECT}:{path}: ")), None)


def _pulumi_path(text: str) -> list[Any]:
    """`pulumi config set --path` syntax: a.b[0]["dotted.key"]."""
    parts = re.findall(r'\["((?:[^"\\]|\\.)*)"\]|\[(\d+)\]|([^.\[\]]+)', text)
    return [quoted if quoted else int(index) if index else name for quoted, index, name in parts]


def apply_fix(raw: dict[str, Any], fix: str) -> dict[str, Any]:
    """`raw` after the fix line: a Pulumi.<stack>.yaml line for a top-level key, else `pulumi config set --path` on
    this stack (without --stack it would set whichever stack is selected)."""
    changed = copy.deepcopy(raw)
    if fix.startswith("pulumi config set "):
        words = shlex.split(fix)
        assert words[:5] == ["pulumi", "config", "set", "--stack", STACK] and words[5] == "--path", fix
        path, value = words[6:]
        node: Any = changed
        parts = _pulumi_path(path)
        for part in parts[:-1]:
            # As `pulumi config set --path` makes a missing map; a list index names an item that exists.
            node = node[part] if isinstance(node, list) else node.setdefault(part, {})
        node[parts[-1]] = value
        return changed
    (key, value), *_ = yaml.safe_load(fix).items()
    assert key.startswith(f"{PROJECT}:"), fix
    changed[key.removeprefix(f"{PROJECT}:")] = value
    return changed


def fixes_in(line: str) -> list[str]:
    if "; fix: " not in line:
        return []
    return re.findall(r"`([^`]+)`", line.split("; fix: ", 1)[1])


def path_text(loc: Loc) -> str:
    from components.config.fields import key_path

    return key_path(loc)


# --- one field, a near miss: the line that fixes it --------------------------------------------------


def _mistakes() -> list[tuple[str, str, str, str]]:
    """(base, field, valid value, near miss): every string field the bases hold a value in, written as people
    mistype it: upper case, an underscore for a dash, a letter short."""
    found = []
    for base in BASES:
        raw = base_config(base)
        for field in string_fields():
            if field.hops[-1] == KEY:
                continue  # a key, not a value: nothing to set it to
            located = locate(raw, field)
            if located is None or not isinstance(located[1], str) or not located[1]:
                continue
            value = located[1]
            for miss in dict.fromkeys([value.upper(), value.replace("-", "_"), value[:-1]]):
                if miss != value:
                    found.append((base, str(field), value, miss))
    return found


MISTAKES = _mistakes()


def test_the_walk_covers_many_fields():
    assert len({field for _, field, _, _ in MISTAKES}) > 80


@pytest.mark.parametrize(("base", "field", "value", "miss"), MISTAKES, ids=[f"{b}:{f}={m}" for b, f, _, m in MISTAKES])
def test_a_refused_near_miss_says_what_is_allowed_and_its_fix_line_fixes_it(base, field, value, miss):
    (string_field,) = [f for f in string_fields() if str(f) == field]
    raw = base_config(base)
    located = locate(raw, string_field)
    assert located is not None
    loc = located[0]
    wrong = with_value(raw, string_field, miss)
    line = line_at(wrong, path_text(loc))
    if line is None:
        return  # the near miss is a valid value of its own (free text, a path, a label value)
    fixes = fixes_in(line)
    if not fixes:
        # No clear fix: then the line must say what is allowed, not only that it is wrong.
        assert re.search(r"allowed|must|should|at most|at least|only|e\.g\.|more than|pools: ", line), line
        return
    for fix in fixes:
        fixed = apply_fix(wrong, fix)
        assert line_at(fixed, path_text(loc)) is None, (fix, line_at(fixed, path_text(loc)))


@pytest.mark.parametrize(("base", "field", "value", "miss"), MISTAKES, ids=[f"{b}:{f}={m}" for b, f, _, m in MISTAKES])
def test_a_fix_line_changes_case_only_where_the_key_refuses_it_as_written(base, field, value, miss):
    """A label value, a path, a taint: what the target carries, case and all. Lower case is offered only for a key
    that refuses the value with its case kept (a DNS name), never to one that would take it (gpuProduct)."""
    (string_field,) = [f for f in string_fields() if str(f) == field]
    raw = base_config(base)
    located = locate(raw, string_field)
    assert located is not None
    line = line_at(with_value(raw, string_field, miss), path_text(located[0]))
    for fix in fixes_in(line or ""):
        offered = _fixed_value(fix)
        if isinstance(offered, str) and offered != miss and offered.lower() == offered and any(c.isupper() for c in miss):
            for case_kept in (miss.strip(), re.sub(r"[\s_]+", "-", miss.strip())):
                assert line_at(with_value(raw, string_field, case_kept), path_text(located[0])) is not None, (fix, case_kept)


def _fixed_value(fix: str) -> Any:
    if fix.startswith("pulumi config set "):
        return shlex.split(fix)[-1]
    return next(iter(yaml.safe_load(fix).values()))


@pytest.mark.parametrize(
    ("product", "fix"),
    [
        ("NVIDIA H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3"),
        (" NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-80GB-HBM3"),
        ("Tesla V100-SXM2-16GB", "Tesla-V100-SXM2-16GB"),
        ("nvidia-h100-80gb-hbm3", None),
        ("nvidia h100 80gb hbm3", None),  # its dashed form would be refused as lower case: no fix at all
    ],
)
def test_a_gpu_product_is_the_label_the_nodes_carry_case_and_all(product, fix):
    raw = copy.deepcopy(stack_config("dev"))
    _set(raw, "nodePools[0].gpuProduct", product)
    line = line_at(raw, "nodePools[0].gpuProduct")
    assert line is not None, product
    if fix is None:
        assert not fixes_in(line), line
        if " " not in product:
            assert "case-sensitive" in line and "kubectl get nodes -L nvidia.com/gpu.product" in line, line
    else:
        assert fixes_in(line) == [f"pulumi config set --stack {STACK} --path 'nodePools[0].gpuProduct' {fix}"], line
        assert line_at(apply_fix(raw, fixes_in(line)[0]), "nodePools[0].gpuProduct") is None


def test_near_misses_of_the_allowed_values_get_their_fix_line():
    """Not vacuous: the walk's lower-case, dash and literal fields do get fix lines."""
    fixed = 0
    for base, field, _, miss in MISTAKES:
        (string_field,) = [f for f in string_fields() if str(f) == field]
        raw = base_config(base)
        located = locate(raw, string_field)
        assert located is not None
        line = line_at(with_value(raw, string_field, miss), path_text(located[0]))
        fixed += bool(line and fixes_in(line))
    assert fixed > 60, fixed


@pytest.mark.parametrize(
    ("changes", "path", "fix"),
    [
        ({"cloud": "Alibaba", "region": "lab"}, "cloud", f"{PROJECT}:cloud: alibaba"),
        ({"cloud": "alibab", "region": "lab"}, "cloud", f"{PROJECT}:cloud: alibaba"),
        ({"environment": "production"}, "environment", f"{PROJECT}:environment: prod"),
        ({"region": "Cn-Hangzhou"}, "region", f"{PROJECT}:region: cn-hangzhou"),
        (
            {"storage.storageClass.kind": "alibaba-nas"},
            "storage.storageClass.kind",
            f"pulumi config set --stack {STACK} --path storage.storageClass.kind alibabaNas",
        ),
        ({"slurm.worker.size": -1}, "slurm.worker.size", f"pulumi config set --stack {STACK} --path slurm.worker.size 0"),
        ({"slurm.login.nodePort": 22}, "slurm.login.nodePort", f"pulumi config set --stack {STACK} --path slurm.login.nodePort 30000"),
        (
            {"nodePools[0].taints": [{"key": "gpu", "effect": "noschedule"}]},
            "nodePools[0].taints[0].effect",
            f"pulumi config set --stack {STACK} --path 'nodePools[0].taints[0].effect' NoSchedule",
        ),
        ({"cluster.name": "FPT_HPC"}, "cluster.name", f"pulumi config set --stack {STACK} --path cluster.name fpt-hpc"),
    ],
)
def test_the_fix_line_is_exact(changes, path, fix):
    raw = copy.deepcopy(stack_config("dev"))
    for dotted, value in changes.items():
        _set(raw, dotted, value)
    line = line_at(raw, path)
    assert line is not None and fixes_in(line) == [fix], line
    assert line_at(apply_fix(raw, fix), path) is None


def test_no_fix_line_is_guessed_when_the_value_could_mean_several():
    line = line_at({**stack_config("dev"), "slurmOperator": "s"}, "slurmOperator")  # soperator or slinky?
    assert line is not None and "'soperator', 'ack' or 'slinky'" in line and "fix:" not in line


def test_a_boolean_says_true_or_false():
    line = line_at({**stack_config("dev"), "ldap": {"enabled": "enable"}}, "ldap.enabled")
    assert line is not None and "allowed: true or false" in line


def test_a_secret_key_gets_no_fix_line():
    with pytest.raises(ConfigError) as error:
        parse_config({**stack_config("dev"), "environment": "Prod"}, frozenset({"environment"}))
    assert "[secret]" in str(error.value) and "fix:" not in str(error.value)


# --- the cloud ---------------------------------------------------------------------------------------

ALIBABA_ADDRESS_TYPE = "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-address-type"
OPENSTACK_INTERNAL = "service.beta.kubernetes.io/openstack-internal-load-balancer"


def without_cloud(stack: str, **changes: Any) -> dict[str, Any]:
    raw = copy.deepcopy(stack_config(stack))
    raw.pop("cloud", None)
    for dotted, value in changes.items():
        _set(raw, dotted.replace("__", "."), value)
    return raw


@pytest.mark.parametrize("stack", [s for s in example_stacks() if "cloud" in stack_config(s)])
def test_a_stack_that_sets_its_cloud_parses_the_same_without_it(stack):
    """The example Alibaba stacks say `cloud: alibaba`; the rest of their config already does."""
    inferred = parse_config(without_cloud(stack))
    assert inferred.model_dump() == parse_config(stack_config(stack)).model_dump()
    assert inferred.cloud == "alibaba" and inferred.cloud_origin.startswith("inferred from ") and "region: cn-hangzhou" in inferred.cloud_origin


@pytest.mark.parametrize(
    ("changes", "cloud", "keys"),
    [
        ({"region": "cn-hangzhou"}, "alibaba", ["region: cn-hangzhou"]),
        ({"region": "cn-wuhan-lr"}, "alibaba", ["region: cn-wuhan-lr"]),
        ({"region": "hcm"}, "fpt", ["region: hcm"]),
        (
            {"region": "lab", "storage.storageClass": {"kind": "alibabaNas", "alibabaNas": {"server": "10.0.3.7:/share"}}},
            "alibaba",
            ["storage.storageClass.kind: alibabaNas"],
        ),
        ({"region": "lab", "slurm.login.serviceAnnotations": {ALIBABA_ADDRESS_TYPE: "intranet"}}, "alibaba", [ALIBABA_ADDRESS_TYPE]),
        (
            {"region": "us-east-1", "slurm.login.serviceAnnotations": {"service.beta.kubernetes.io/aws-load-balancer-internal": "true"}},
            "aws",
            ["aws-load-balancer-internal"],
        ),
        # AWS's China regions are not Alibaba's, and a name several clouds use is no signal.
        ({"region": "cn-north-1"}, "fpt", []),
        ({"region": "ap-southeast-1"}, "fpt", []),
    ],
)
def test_the_cloud_is_inferred_where_the_config_leaves_no_doubt(changes, cloud, keys):
    config = parse_config(without_cloud("dev", **changes))
    assert config.cloud == cloud
    assert all(key in config.cloud_origin for key in keys) and (config.cloud_origin == "default") == (not keys), config.cloud_origin


def test_an_alibaba_stack_that_leaves_cloud_unset_is_checked_as_alibaba():
    """The issue's case: region cn-hangzhou, alibabaNas and an intranet CLB, told "this stack's cloud is fpt" before."""
    raw = without_cloud(
        "prod-hanoi",
        region="cn-hangzhou",
        **{"storage.storageClass": {"kind": "alibabaNas", "alibabaNas": {"server": "10.0.3.7:/share"}}},
    )
    raw["slurm"]["login"]["serviceAnnotations"] = {ALIBABA_ADDRESS_TYPE: "intranet"}
    raw["slurm"]["login"]["nodePortsFirewalled"] = True
    config = parse_config(raw)
    assert config.cloud == "alibaba"


def test_signals_that_disagree_name_each_key_and_each_fix_line():
    raw = without_cloud("dev")  # region: hanoi
    raw["slurm"]["login"]["serviceAnnotations"] = {ALIBABA_ADDRESS_TYPE: "intranet"}
    line = line_at(raw, "cloud")
    assert line is not None and line.startswith(f"{PROJECT}:cloud: is not set, and the config points to more than one cloud"), line
    assert "region: hanoi (an FPT Cloud region)" in line and f'slurm.login.serviceAnnotations["{ALIBABA_ADDRESS_TYPE}"]: intranet' in line
    assert fixes_in(line) == [f"{PROJECT}:cloud: alibaba", f"{PROJECT}:cloud: fpt"]
    # Either fix keeps the other key's word against the cloud: the error then names that key.
    assert "region: hanoi" in str(line_at(apply_fix(raw, f"{PROJECT}:cloud: alibaba"), "cloud"))
    assert ALIBABA_ADDRESS_TYPE in str(line_at(apply_fix(raw, f"{PROJECT}:cloud: fpt"), "cloud"))


@pytest.mark.parametrize(
    ("stack", "cloud", "said"),
    [
        ("staging-hangzhou", "fpt", ["slurmOperator: ack", "storage.storageClass.kind: alibabaNas", "region: cn-hangzhou"]),
        ("prod-hangzhou", "aws", ["storage.storageClass.kind: alibabaNas", ALIBABA_ADDRESS_TYPE, "region: cn-hangzhou"]),
        ("prod-hanoi", "alibaba", ["region: hanoi"]),
    ],
)
def test_a_cloud_set_against_the_config_names_both_keys_and_the_fix(stack, cloud, said):
    raw = {**stack_config(stack), "cloud": cloud}
    (line,) = [line for line in problems_of(raw) if line.startswith(f"{PROJECT}:cloud: is {cloud}, but ")]
    assert all(key in line for key in said) and f'got "{cloud}"' in line, line
    (fix,) = fixes_in(line)
    assert fix != f"{PROJECT}:cloud: {cloud}" and fix.startswith(f"{PROJECT}:cloud: ")
    # Explicit stays authoritative: the fix it names is the cloud the other keys agree on, and it passes.
    assert not [line for line in problems_of(apply_fix(raw, fix)) if line.startswith(f"{PROJECT}:cloud:")]


def test_a_defaulted_cloud_says_so_where_a_message_depends_on_it():
    """No key names a cloud: fpt, and a message that depends on it says how to set another."""
    raw = without_cloud("prod-hanoi", region="lab")
    raw["slurm"]["login"]["serviceAnnotations"] = {}
    raw["slurm"]["login"]["allowedSourceRanges"] = []
    lines = [line for line in problems_of(raw) if "private-LB annotation" in line]
    assert lines, problems_of(raw)
    assert f"{PROJECT}:cloud is unset and no key names a cloud, so fpt; on another cloud, set `{PROJECT}:cloud: alibaba`" in lines[0]
    # Set, the cloud is the stack's word: no note.
    raw["cloud"] = "fpt"
    assert all("is unset" not in line for line in problems_of(raw))


def test_an_inferred_cloud_says_from_what_where_a_message_depends_on_it():
    raw = without_cloud("dev")  # region: hanoi, fpt
    raw["slurm"]["login"]["serviceAnnotations"] = {OPENSTACK_INTERNAL: "true", "service.beta.kubernetes.io/azure-load-balancer-internal": "true"}
    lines = problems_of(raw)
    assert any(line.startswith(f"{PROJECT}:cloud: is not set") for line in lines), lines


# --- a pattern is said in words --------------------------------------------------------------------


def _patterns(field: StringField) -> list[str]:
    """The regular expressions a string field's type constrains it with (pydantic's `pattern`)."""
    inner = [item for meta in field.metadata for item in (meta, *getattr(meta, "metadata", ()))]
    return [pattern for pattern in (getattr(item, "pattern", None) for item in inner) if pattern]


PATTERNED = [field for field in string_fields() if _patterns(field)]


def test_the_walk_finds_the_pattern_constrained_fields():
    assert {"region", "ldap.baseDn", "tenants[0].users[0].name", "storage.storageClass.alibabaNas.server"} <= {str(f) for f in PATTERNED}


@pytest.mark.parametrize("field", PATTERNED, ids=[str(f) for f in PATTERNED])
def test_a_value_against_a_pattern_is_told_what_is_allowed_in_words(field):
    """User names, base DNs with non-ASCII, NAS paths: the message is a sentence, not the regular expression."""
    base = next((b for b in BASES if locate(base_config(b), field)), next(iter(BASES)))
    raw = base_config(base)
    wrong = with_value(raw, field, "Công ty!")
    located = locate(wrong, field)
    assert located is not None
    loc = (*located[0], "[key]") if field.hops[-1] == KEY else located[0]
    line = line_at(wrong, path_text(loc))
    assert line is not None and ": must be " in line, line
    assert "pattern" not in line and not any(pattern in line for pattern in _patterns(field)), line
    assert not re.search(r"\[[^\]]*-[^\]]*\]|\^|\$|\{\d", line.split("; got ")[0]), line


@pytest.mark.parametrize(("value", "fix"), [("2024-11", None), ("2025-06", None), ("2024-6", None), ("v2024-12", None), ("2024_12", "2024-12")])
def test_no_api_generation_is_guessed_for_the_installed_operator(value, fix):
    """Which SlurmCluster API the installed ack-slurm-operator serves is the cluster's to say: the error says how to ask
    it, and offers no generation a spelling is close to (2025-06 is not 2024-06); a value that is one, but for its
    separator, is the user's own."""
    raw = {**stack_config("staging-hangzhou")}
    raw["operators"] = {**raw["operators"], "ackSlurmOperator": {**raw["operators"]["ackSlurmOperator"], "apiGeneration": value}}
    line = line_at(raw, "operators.ackSlurmOperator.apiGeneration")
    assert line is not None and "kubectl explain slurmcluster.spec" in line, line
    assert [_fixed_value(f) for f in fixes_in(line)] == ([fix] if fix else []), line


# --- every fix line offered, on the corpus of realistic mistakes -------------------------------------


def _offered() -> list[tuple[str, dict[str, Any], str, str, str]]:
    """(mistake, its config, the problem's line and key path, a fix line) for every fix line the corpus's errors offer."""
    from tests.test_bad_config import CORPUS, mistake

    found = []
    for name, changes, _ in CORPUS:
        raw = mistake(changes)
        for line in problems_of(raw):
            path = line.removeprefix(f"{PROJECT}:").split(": ", 1)[0]
            found += [(name, raw, line, path, fix) for fix in fixes_in(line)]
    return found


OFFERED = _offered()


def test_the_corpus_offers_fix_lines_of_both_kinds():
    fixes = [fix for *_, fix in OFFERED]
    assert len(fixes) > 15 and any(f.startswith("pulumi config set --stack ") for f in fixes) and any(f.startswith(f"{PROJECT}:") for f in fixes)


@pytest.mark.parametrize(("raw", "line", "path", "fix"), [o[1:] for o in OFFERED], ids=[f"{o[0]}:{o[4]}" for o in OFFERED])
def test_each_fix_line_offered_names_the_stack_and_fixes_its_problem(raw, line, path, fix):
    """Checked against every rule, not only the key's own: pasted, the line leaves no problem at its key. Where it is one
    of several alternatives (two keys that disagree on the cloud), the problem it answers is gone; the other key's stays."""
    after = line_at(apply_fix(raw, fix), path)
    assert after is None or (len(fixes_in(line)) > 1 and after != line), (fix, after)


@pytest.mark.parametrize(
    ("stack", "cloud", "said"),
    [
        # The region copied from an FPT stack is the one key against two of Alibaba's: set either way, it contradicts them.
        ("staging-hangzhou", "alibaba", ["region: hanoi", "slurmOperator: ack", "storage.storageClass.kind: alibabaNas"]),
        ("staging-hangzhou", "fpt", ["region: hanoi", "slurmOperator: ack", "storage.storageClass.kind: alibabaNas"]),
        ("staging-hangzhou", None, ["region: hanoi", "slurmOperator: ack", "storage.storageClass.kind: alibabaNas"]),
    ],
)
def test_one_key_against_several_is_a_contradiction_not_a_vote(stack, cloud, said):
    raw = {**without_cloud(stack, region="hanoi"), **({"cloud": cloud} if cloud else {})}
    line = line_at(raw, "cloud")
    assert line is not None and "points to more than one cloud" in line and all(key in line for key in said), line
    if cloud:
        # No value of `cloud` satisfies keys that disagree: the fix is to change the keys that are not the cloud's.
        assert fixes_in(line) == [] and "change " in line, line
        for other in ("alibaba", "fpt"):
            assert line_at({**raw, "cloud": other}, "cloud") is not None


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        (without_cloud("dev", region="hcm"), ["cloud: fpt, inferred from region: hcm (an FPT Cloud region)", "cloud is unset"]),
        (without_cloud("prod-hangzhou"), ["cloud: alibaba, inferred from storage.storageClass.kind: alibabaNas", "region: cn-hangzhou"]),
        (stack_config("prod-hangzhou"), [f"cloud: alibaba, set by {PROJECT}:cloud; the config agrees: storage.storageClass.kind: alibabaNas"]),
        (without_cloud("dev", region="lab"), [f"cloud: fpt, the default: {PROJECT}:cloud is unset and no key names a cloud"]),
    ],
)
def test_every_preview_says_the_cloud_and_the_keys_it_came_from(monkeypatch, raw, said):
    """A region copied from another cloud's stack changes the inferred cloud: the preview says so, and so does an output."""
    from components.platform import build_platform
    from tests.harness import run_under_mocks

    logged: list[str] = []
    monkeypatch.setattr("pulumi.log.info", lambda message, *args, **kwargs: logged.append(message))
    config = parse_config(raw)
    run = run_under_mocks(lambda: build_platform(config), raw)
    (line,) = [message for message in logged if message.startswith("cloud: ")]
    assert all(text in line for text in said), line
    assert run.outputs["cloud"] == line


# --- node pools that can match one node -----------------------------------------------------------

GPU_PRODUCT = "nvidia.com/gpu.product"


def _pools(*changes: dict[str, Any]) -> dict[str, Any]:
    """The dev stack (pools gpu-h100: H100 nodes, system) with each pool's keys changed, and pools added after them."""
    raw = copy.deepcopy(stack_config("dev"))
    pools = raw["nodePools"]
    for index, change in enumerate(changes):
        if index < len(pools):
            pools[index] = {**pools[index], **change}
        else:
            pools.append({**pools[0], **change})
    return raw


def overlap_lines(raw: dict[str, Any]) -> list[str]:
    return [line for line in problems_of(raw) if "can match the same node" in line]


@pytest.mark.parametrize(
    ("raw", "pools"),
    [
        # The system pool copied the GPU pool's selector.
        (_pools({}, {"selector": {"worker.fptcloud/pool": "gpu-h100"}}), ("gpu", "system")),
        # Selectors with no key in common: a node can carry both.
        (_pools({}, {"selector": {"node.example/role": "system"}}), ("gpu", "system")),
        # A Slurm pool selecting by the GPU product label next to a pool of Kueue's nodes with that GPU.
        (
            _pools(
                {"selector": {GPU_PRODUCT: "NVIDIA-H100-80GB-HBM3"}},
                {},
                {"name": "kueue-h100", "selector": {"worker.fptcloud/pool": "kueue-h100"}, "slurmWorkers": 0},
            ),
            ("gpu", "kueue-h100"),
        ),
    ],
)
def test_pools_that_can_match_one_node_are_refused_with_a_label_that_separates_them(raw, pools):
    lines = overlap_lines(raw)
    assert any(all(f"({name}, nodes labelled" in line for name in pools) for line in lines), lines
    for line in lines:
        assert GPU_PRODUCT not in line.split(": ", 1)[0], line  # never offers to set the GPU's own label
        (fix,) = fixes_in(line)
        assert len(overlap_lines(apply_fix(raw, fix))) < len(lines), (fix, overlap_lines(apply_fix(raw, fix)))
    # Following the fix lines one after another leaves no overlap.
    for _ in range(len(lines)):
        raw = apply_fix(raw, fixes_in(overlap_lines(raw)[0])[0]) if overlap_lines(raw) else raw
    assert overlap_lines(raw) == []


@pytest.mark.parametrize(
    "raw",
    [
        _pools(),
        # Different GPU products: a node carries one nvidia.com/gpu.product value.
        _pools(
            {"selector": {GPU_PRODUCT: "NVIDIA-H200"}, "gpuProduct": "NVIDIA-H200"},
            {"name": "h100", "gpuProduct": "NVIDIA-H100-80GB-HBM3", "gpusPerNode": 8, "selector": {"worker.fptcloud/pool": "gpu-h100"}},
        ),
    ],
)
def test_pools_a_label_keeps_apart_are_accepted(raw):
    assert overlap_lines(raw) == []


@pytest.mark.parametrize("stack", example_stacks())
def test_no_example_stack_has_pools_that_overlap(stack):
    assert overlap_lines(stack_config(stack)) == []

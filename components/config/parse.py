"""Validation: field rules, then the rules across fields, as messages naming the key path, the bad value and what is allowed."""

from __future__ import annotations

import copy
import difflib
import json
import re
import shlex
import typing
import unicodedata
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ValidationError

from .cloud import resolve_cloud
from .fields import PATTERN_SENTENCES, PROJECT, Problem, closest, key_path
from .ldap import REMOVED_KEYS
from .operator_keys import unread_key_problems
from .platform import PlatformConfig
from .rules import cross_field_problems
from .stacks import StackFile, cluster_of


class ConfigError(Exception):
    """Invalid stack config; the message lists every problem, one per line."""


SHOWN_VALUE_MAX = 80
# The stack a fix line names when the caller does not say (tools that read a stack file): the reader fills it in.
SOME_STACK = "<stack>"
SECRET_SHOWN = "[secret]"


def _shown(value: Any) -> str:
    if isinstance(value, (dict, Mapping)):
        return "{...}"
    text = json.dumps(value, default=str, ensure_ascii=True)
    if len(text) > SHOWN_VALUE_MAX:
        text = f"{text[: SHOWN_VALUE_MAX - 3]}... ({len(text)} characters)"
    return text


def _key_path(loc: tuple[Any, ...]) -> str:
    path = key_path(loc)
    return f"{PROJECT}:{path}" if path else PROJECT


def _config_line(loc: tuple[Any, ...], value: Any, stack: str) -> str:
    """The line that sets `value` at `loc`: a top-level key as Pulumi.<stack>.yaml writes it, a nested one as a command
    on this stack (run elsewhere, without --stack, it would set the selected stack's, not this one's)."""
    text = value if isinstance(value, str) else json.dumps(value)
    if len(loc) > 1:
        return f"`pulumi config set --stack {shlex.quote(stack)} --path {shlex.quote(key_path(loc))} {shlex.quote(text)}`"
    # YAML reads a bare 8, true or no as a number or a boolean: text like that, or with YAML syntax, is quoted.
    if isinstance(value, str) and (
        not re.fullmatch(r"[A-Za-z0-9._/-]+", value) or re.fullmatch(r"[0-9.]+|true|false|null|yes|no|on|off", value, re.I)
    ):
        text = json.dumps(value, ensure_ascii=False)
    return f"`{PROJECT}:{loc[0]}: {text}`"


# Per tenant of a whole cluster's config, the stack whose file lists it and its index there (components/config/stacks.py).
Origins = tuple[tuple[str, int], ...]


def _written_at(loc: tuple[Any, ...], stack: str, origins: Origins) -> tuple[tuple[Any, ...], str]:
    """A key path into the whole cluster's tenants as the stack file that lists the tenant writes it, and that stack."""
    if len(loc) > 1 and loc[0] == "tenants" and isinstance(loc[1], int) and loc[1] < len(origins):
        owner, index = origins[loc[1]]
        return ("tenants", index, *loc[2:]), owner
    return loc, stack


def _line(
    loc: tuple[Any, ...],
    message: str,
    value: Any,
    secret_keys: frozenset[str],
    stack: str,
    show_value: bool = True,
    fix: tuple[Any, ...] = (),
    origins: Origins = (),
) -> str:
    loc, owner = _written_at(loc, stack, origins)
    elsewhere = f" (in Pulumi.{owner}.yaml, another stack of this cluster)" if owner != stack else ""
    if loc == ("tenants",) and origins:  # a sum over the tenants: every stack's count
        elsewhere = f" (every stack's together: {', '.join(dict.fromkeys(name for name, _ in origins))})"
    stack = owner
    line = f"{_key_path(loc)}{elsewhere}: {message}"
    secret = bool(loc) and str(loc[0]) in secret_keys
    if show_value:
        line += f"; got {SECRET_SHOWN if secret else _shown(value)}"
    scalars = [v for v in fix if isinstance(v, (str, int, float))]  # what one config line sets
    if scalars and not secret:
        line += "; fix: " + " or ".join(_config_line(loc, v, stack) for v in scalars)
    return line


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models a field's type can hold: through Optional, unions, Annotated, list and dict values."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is dict:
        args = args[1:]
    elif typing.get_origin(annotation) is Annotated:
        args = args[:1]
    return [model for arg in args for model in _models_in(arg)]


def _keys_at(loc: tuple[Any, ...]) -> list[str]:
    """The keys the model allows at `loc` (a key path into PlatformConfig), by their config (camelCase) names."""
    models: list[type[BaseModel]] = [PlatformConfig]
    for part in loc:
        if isinstance(part, int):
            continue  # a list index: the item is the same model
        fields = [model.model_fields.get(str(part)) or _field_by_alias(model, str(part)) for model in models]
        models = [m for field in fields if field is not None for m in _models_in(field.annotation)]
    return sorted({field.alias or name for model in models for name, field in model.model_fields.items()})


def _field_by_alias(model: type[BaseModel], alias: str) -> Any:
    return next((field for name, field in model.model_fields.items() if (field.alias or name) == alias), None)


def _comparable(key: str) -> str:
    """A key as a person reads it: case folded, invisible and format characters (U+200B ...) dropped."""
    return "".join(c for c in key.casefold() if c.isprintable() and not c.isspace() and unicodedata.category(c) != "Cf")


def _unknown_key_message(loc: tuple[Any, ...]) -> str:
    known = _keys_at(loc[:-1])
    by_comparable = {_comparable(k): k for k in known}
    close = difflib.get_close_matches(_comparable(str(loc[-1])), list(by_comparable), n=1, cutoff=0.75)
    if close:
        return f"unknown key; did you mean {by_comparable[close[0]]}? (config.schema.json lists every key)"
    return f"unknown key (allowed: {', '.join(known)})" if known else "unknown key (check the spelling; see config.schema.json)"


def _as_written(raw: Mapping[str, Any], loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """The key path as the stack file writes it: a shorthand (a user given as its name alone, which the model reads
    as {name: ...}) is reported at the shorthand, not at a key the file does not have."""
    node: Any = raw
    for depth, part in enumerate(loc):
        if isinstance(node, str) and part != "[key]":
            return loc[:depth]
        if isinstance(node, Mapping) and part in node or isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        else:
            break
    return loc


def _describe(error: Mapping[str, Any], secret_keys: frozenset[str], raw: Mapping[str, Any], stack: str, origins: Origins = ()) -> str:
    loc = _as_written(raw, tuple(error["loc"]))
    error = {**error, "loc": loc}
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        if loc in REMOVED_KEYS:
            return _line(loc, REMOVED_KEYS[loc], error.get("input"), secret_keys, stack, origins=origins)
        return _line(loc, _unknown_key_message(loc), None, secret_keys, stack, show_value=False, origins=origins)
    if error["type"] == "missing":
        return _line(loc, "required but not set", None, secret_keys, stack, show_value=False, origins=origins)
    value = error.get("input")
    if error["type"] in ("model_type", "model_attributes_type", "dict_type", "list_type") and isinstance(value, str):
        message = (
            f"{message}; it is a plain string that is not a JSON {'list' if error['type'] == 'list_type' else 'object'} "
            "(`pulumi config set` without --path stores text): set nested keys with "
            f"`pulumi config set --stack {shlex.quote(stack)} --path 'storage.jail.size' 100Gi` or write the YAML in Pulumi.<stack>.yaml"
        )
    ctx = error.get("ctx") or {}
    if error["type"] == "string_pattern_mismatch":  # pydantic's message is the regular expression
        message = f"must be {PATTERN_SENTENCES[ctx['pattern']]}"
    elif "expected" in ctx and error["type"] not in ("literal_error", "enum"):  # theirs already list the allowed values
        message += f" (allowed: {ctx['expected']})"
    elif error["type"] in ("bool_parsing", "bool_type"):
        message += " (allowed: true or false)"
    return _line(loc, message, value, secret_keys, stack, fix=_fixes(error, raw), origins=origins)


# What a value is most often wrong by: stray spaces, '_' or spaces for '-', case. Its case is kept where the key
# takes it as written (a node label value is what the node carries, NVIDIA-H100-80GB-HBM3): lower case is tried
# only after, and fixes only a key that refuses capitals (a DNS name).
def _near_misses(value: str) -> list[str]:
    trimmed = value.strip()
    dashed = re.sub(r"[\s_]+", "-", trimmed)
    return [trimmed, dashed, trimmed.lower(), dashed.lower()]


def _fixes(error: Mapping[str, Any], raw: Mapping[str, Any]) -> tuple[Any, ...]:
    """The value that fixes a field error, when one is clear: the allowed value the bad one is closest to,
    the bound a number crossed, or the bad text with a near miss undone; each tried on the config before it is offered."""
    loc, value, ctx = tuple(error["loc"]), error.get("input"), error.get("ctx") or {}
    if "[key]" in loc or not loc:
        return ()
    if "fix" in ctx:  # the validator's own guess (components/config/fields.py Quantity)
        candidates = [ctx["fix"]]
    elif error["type"] in ("literal_error", "enum"):
        allowed = [json.loads(f'"{v}"') for v in re.findall(r"'((?:[^'\\]|\\.)*)'", str(ctx.get("expected", "")))]
        candidates = allowed if len(allowed) == 1 else closest(value, allowed) if isinstance(value, str) else []
    elif error["type"] in ("greater_than_equal", "less_than_equal"):
        candidates = [ctx.get("ge", ctx.get("le"))]
    elif error["type"] in ("greater_than", "less_than") and isinstance(value, int):
        candidates = [ctx["gt"] + 1] if "gt" in ctx else [ctx["lt"] - 1]
    elif isinstance(value, str):
        candidates = _near_misses(value)
    else:
        candidates = []
    for candidate in dict.fromkeys(c for c in candidates if c is not None and c != value):
        if _fixes_it(raw, loc, candidate):
            return (candidate,)
    return ()


def _fixes_it(raw: Mapping[str, Any], loc: tuple[Any, ...], candidate: Any) -> bool:
    """Whether the config with `candidate` at `loc` has no problem there any more: neither a field's rule nor one
    across fields (an image tag that must name the Slurm release, an NFS server the network policies must know)."""
    tried: Any = copy.deepcopy(dict(raw))
    node = tried
    for part in loc[:-1]:
        if not isinstance(node, (dict, list)) or (isinstance(node, list) and not (isinstance(part, int) and part < len(node))):
            return False
        if isinstance(node, dict) and part not in node:
            return False
        node = node[part]
    if not isinstance(node, (dict, list)):
        return False
    node[loc[-1]] = candidate
    try:
        _, problems = _checked(tried)
    except ValidationError as error:
        return all(tuple(e["loc"])[: len(loc)] != loc for e in error.errors())
    return all(tuple(p.path)[: len(loc)] != loc for p in problems)


def _checked(raw: Mapping[str, Any]) -> tuple[PlatformConfig, list[Problem]]:
    """The config, its cloud resolved, and the problems across fields; ValidationError when a field's rule fails."""
    config = PlatformConfig.model_validate(dict(raw))
    cloud, origin, problems = resolve_cloud(config, "cloud" in raw)
    if cloud != config.cloud:
        config = config.model_copy(update={"cloud": cloud})
    config._cloud_origin = origin
    problems += cross_field_problems(config)
    # A key its operator never reads, unless a rule already names it (e.g. a value that operator cannot take).
    named = {problem.path for problem in problems}
    return config, problems + [problem for problem in unread_key_problems(config, raw) if problem.path not in named]


def _fail(lines: list[str]) -> ConfigError:
    return ConfigError(f"invalid stack config ({len(lines)} problem{'s' if len(lines) > 1 else ''}):\n  " + "\n  ".join(lines))


def refusal(problems: list[Problem], secret_keys: frozenset[str] = frozenset(), stack: str = SOME_STACK, origins: Origins = ()) -> ConfigError:
    """The error naming every problem: key path, message, the value (unless None), and fix lines for `stack`
    (for a tenant another stack lists, that stack's file and fix lines: `origins`)."""
    return _fail(
        [_line(p.path, p.message, p.value, secret_keys, stack, show_value=p.value is not None, fix=p.fix, origins=origins) for p in problems]
    )


def parse_config(raw: Mapping[str, Any], secret_keys: frozenset[str] = frozenset(), stack: str = SOME_STACK, origins: Origins = ()) -> PlatformConfig:
    """Validate a dict of top-level keys; raise ConfigError naming every problem.

    Field rules come first; the rules across fields run once every field is valid.
    """
    try:
        config, problems = _checked(raw)
    except ValidationError as error:
        raise _fail([_describe(e, secret_keys, raw, stack, origins) for e in error.errors(include_url=False)]) from None
    if problems:
        raise refusal(problems, secret_keys, stack, origins)
    config._secret_keys = frozenset(secret_keys)
    config._stack = stack
    if config.tenant_stack:  # a tenant stack read alone (no other stack's file): every tenant is its own
        config._tenant_stacks = {tenant.name: stack for tenant in config.tenants}
    return config


def parse_stack(stack: str, own: StackFile, files: Mapping[str, StackFile]) -> PlatformConfig:
    """Validate `stack` as part of its whole cluster (every stack's tenants together, components/config/stacks.py);
    the config it returns lists them all and names its own."""
    cluster = cluster_of(stack, own, files)
    if cluster.problems:
        raise refusal(cluster.problems, cluster.secret_keys, stack)
    config = parse_config(cluster.raw, cluster.secret_keys, stack, cluster.origins)
    platform = config.platform_stack or stack
    config._tenant_stacks = {config.tenants[index].name: owner for index, (owner, _) in enumerate(cluster.origins) if owner != platform}
    return config

"""Validation: field rules, then the rules across fields, as messages naming the key path, the bad value and what is allowed."""

from __future__ import annotations

import difflib
import json
import re
import typing
import unicodedata
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ValidationError

from .fields import PROJECT
from .ldap import REMOVED_KEYS
from .platform import PlatformConfig
from .rules import cross_field_problems


class ConfigError(Exception):
    """Invalid stack config; the message lists every problem, one per line."""


SHOWN_VALUE_MAX = 80
SECRET_SHOWN = "[secret]"


def _escaped(text: str) -> str:
    """Printable ASCII as is; anything else (invisible, confusable, non-ASCII) as an escape."""
    return "".join(c if " " <= c <= "~" else json.dumps(c)[1:-1] for c in text)


def _shown(value: Any) -> str:
    if isinstance(value, (dict, Mapping)):
        return "{...}"
    text = json.dumps(value, default=str, ensure_ascii=True)
    if len(text) > SHOWN_VALUE_MAX:
        text = f"{text[: SHOWN_VALUE_MAX - 3]}... ({len(text)} characters)"
    return text


def _key_path(loc: tuple[Any, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part == "[key]":
            path += " (the key)"
        elif path:
            path += f".{_escaped(str(part))}" if re.fullmatch(r"[A-Za-z0-9_-]+", str(part)) else f"[{json.dumps(str(part))}]"
        else:
            path = _escaped(str(part))
    return f"{PROJECT}:{path}" if path else PROJECT


def _line(loc: tuple[Any, ...], message: str, value: Any, secret_keys: frozenset[str], show_value: bool = True) -> str:
    line = f"{_key_path(loc)}: {message}"
    if show_value:
        secret = bool(loc) and str(loc[0]) in secret_keys
        line += f"; got {SECRET_SHOWN if secret else _shown(value)}"
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


def _describe(error: Mapping[str, Any], secret_keys: frozenset[str]) -> str:
    loc = tuple(error["loc"])
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        if loc in REMOVED_KEYS:
            return _line(loc, REMOVED_KEYS[loc], error.get("input"), secret_keys)
        return _line(loc, _unknown_key_message(loc), None, secret_keys, show_value=False)
    if error["type"] == "missing":
        return _line(loc, "required but not set", None, secret_keys, show_value=False)
    value = error.get("input")
    if error["type"] in ("model_type", "model_attributes_type", "dict_type", "list_type") and isinstance(value, str):
        message = (
            f"{message}; it is a plain string that is not a JSON {'list' if error['type'] == 'list_type' else 'object'} "
            "(`pulumi config set` without --path stores text): set nested keys with "
            "`pulumi config set --path 'storage.jail.size' 100Gi` or write the YAML in Pulumi.<stack>.yaml"
        )
    ctx = error.get("ctx") or {}
    if "expected" in ctx:
        message += f" (allowed: {ctx['expected']})"
    elif "pattern" in ctx:
        message += f" (must match {ctx['pattern']})"
    return _line(loc, message, value, secret_keys)


def _fail(lines: list[str]) -> ConfigError:
    return ConfigError(f"invalid stack config ({len(lines)} problem{'s' if len(lines) > 1 else ''}):\n  " + "\n  ".join(lines))


def parse_config(raw: Mapping[str, Any], secret_keys: frozenset[str] = frozenset()) -> PlatformConfig:
    """Validate a dict of top-level keys; raise ConfigError naming every problem.

    Field rules come first; the rules across fields run once every field is valid.
    """
    try:
        config = PlatformConfig.model_validate(dict(raw))
    except ValidationError as error:
        raise _fail([_describe(e, secret_keys) for e in error.errors(include_url=False)]) from None
    problems = list(cross_field_problems(config))
    if problems:
        raise _fail([_line(p.path, p.message, p.value, secret_keys, show_value=p.value is not None) for p in problems])
    config._secret_keys = frozenset(secret_keys)
    return config

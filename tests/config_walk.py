"""The string fields of the stack config model, found by introspection, and how to
set one of them in a raw stack config: shared by the class tests that feed every
config string something hostile (injection, reserved names)."""

from __future__ import annotations

import copy
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Optional, Union, get_args, get_origin

from pydantic import BaseModel

from components.config import PlatformConfig

ITEM = 0  # a list hop: the first item
VALUE = "{value}"  # a dict hop: the value of the first entry
KEY = "{key}"  # a dict hop: the first entry's key (a string leaf itself)


@dataclass(frozen=True)
class StringField:
    """A str leaf of the model: hops are camelCase keys, ITEM, VALUE or KEY; `optional` marks
    the hops into an Optional model (which a raw config must already hold to be set)."""

    hops: tuple[Any, ...]
    optional: frozenset[int]
    metadata: tuple[Any, ...] = field(default=(), compare=False)  # its type's constraints (e.g. a fields.Quantity)

    def __str__(self) -> str:
        text = ""
        for hop in self.hops:
            text += "[0]" if hop == ITEM else hop if hop in (VALUE, KEY) else (f".{hop}" if text else hop)
        return text


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    """The annotation without Annotated/Optional, and whether None was allowed."""
    optional = False
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            members = [a for a in get_args(annotation) if a is not type(None)]
            optional = optional or len(members) < len(get_args(annotation))
            if len(members) != 1:
                raise TypeError(f"union of several types: {annotation}")
            annotation = members[0]
        else:
            return annotation, optional


def _is_text(annotation: Any) -> bool:
    return annotation is str or (get_origin(annotation) is Literal and all(isinstance(a, str) for a in get_args(annotation)))


def string_fields(model: type[BaseModel] = PlatformConfig) -> list[StringField]:
    """Every str (and string Literal) leaf of `model`, dict keys included."""
    return list(_walk(model, (), frozenset()))


def _annotated(annotation: Any) -> tuple[Any, ...]:
    """The metadata of Annotated types on the way to the bare type (through Optional)."""
    if get_origin(annotation) is Annotated:
        return (*get_args(annotation)[1:], *_annotated(get_args(annotation)[0]))
    if get_origin(annotation) in (Union, types.UnionType):
        return tuple(m for a in get_args(annotation) for m in _annotated(a))
    return ()


def _walk(annotation: Any, hops: tuple[Any, ...], optional: frozenset[int], metadata: tuple[Any, ...] = ()) -> Iterator[StringField]:
    metadata = (*metadata, *_annotated(annotation))
    annotation, _ = _unwrap(annotation)
    origin = get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        for name, info in annotation.model_fields.items():
            inner, is_optional = _unwrap(info.annotation)
            nested = isinstance(inner, type) and issubclass(inner, BaseModel) and is_optional
            yield from _walk(info.annotation, (*hops, info.alias or name), optional | ({len(hops)} if nested else set()), tuple(info.metadata))
    elif origin is list:
        yield from _walk(get_args(annotation)[0], (*hops, ITEM), optional)
    elif origin is dict:
        key, value = get_args(annotation)
        yield from _walk(key, (*hops, KEY), optional)
        yield from _walk(value, (*hops, VALUE), optional)
    elif _is_text(annotation):
        yield StringField(hops, optional, metadata)
    # Any (chart values), numbers and booleans: not strings of ours.


Loc = tuple[Any, ...]


def _longhand(item: Any, following: Any) -> Any:
    """A list item written as a name alone (`users: [alice]`), as the model reads it when a key of it is wanted."""
    return {"name": item} if isinstance(item, str) and following not in (None, ITEM, KEY, VALUE) else item


def locate(raw: dict[str, Any], field: StringField) -> Optional[tuple[Loc, Any]]:
    """Where `field` is in `raw` (its key path as pydantic reports it) and its value there, or None
    when `raw` cannot hold it (an empty list or dict, or an absent Optional model on the way).
    A leaf or defaulted model that is absent is reported with value None."""
    node: Any = raw
    loc: list[Any] = []
    for index, hop in enumerate(field.hops):
        if hop == ITEM:
            if not isinstance(node, list) or not node:
                return None
            node, loc = _longhand(node[0], (*field.hops, None)[index + 1]), [*loc, 0]
        elif hop in (KEY, VALUE):
            if not isinstance(node, dict) or not node:
                return None
            first = next(iter(node))
            if hop == KEY:
                return (*loc, first), first
            node, loc = node[first], [*loc, first]
        else:
            loc.append(hop)
            if isinstance(node, dict) and hop in node:
                node = node[hop]
            elif index in field.optional or node is None:
                return None
            else:
                node = None  # a defaulted model or leaf: created when set
    return tuple(loc), node


def with_value(raw: dict[str, Any], field: StringField, value: str) -> dict[str, Any]:
    """A copy of `raw` with `field` set to `value` (a dict key renamed, keeping its value)."""
    changed = copy.deepcopy(raw)
    node: Any = changed
    hops = field.hops
    for hop, following in zip(hops, hops[1:], strict=False):
        if hop == ITEM:
            node[0] = _longhand(node[0], following)
            node = node[0]
        elif hop == VALUE:
            node = node[next(iter(node))]
        else:
            node = node.setdefault(hop, [] if following == ITEM else {})
    last = hops[-1]
    if last == KEY:
        first = next(iter(node))
        node[value] = node.pop(first)
    elif last == ITEM:
        node[0] = value
    elif last == VALUE:
        node[next(iter(node))] = value
    else:
        node[last] = value
    return changed

"""Every quantity key takes its own dimension, in the magnitudes of what it describes: a CPU count with a byte
unit, a memory with no unit (bytes, which the API server would take), a node with a few KB of memory or 0.001 CPU
are each refused at their own key path, with the value likely meant where one is clear. The keys are found in
the model tree (a fields.Quantity on their type), so a new one is covered without touching this file."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import pytest

from components.config import parse_config
from components.config.fields import BYTES, CPU, Quantity, plain_number, quantity_value
from components.config.monitoring import DURATION_PATTERN
from tests.config_walk import ITEM, StringField, locate, string_fields, with_value
from tests.test_fix_lines import apply_fix, fixes_in, line_at, path_text
from tests.test_injection import BASES, base_config


def _quantity(field: StringField) -> Quantity | None:
    return next((m for m in field.metadata if isinstance(m, Quantity)), None)


def _holds(base: str, field: StringField) -> bool:
    """Whether `field` can be set in the base: it is there, or only defaulted models lie on the way."""
    return locate(base_config(base), field) is not None or not (field.optional or ITEM in field.hops)


def _placed() -> list[tuple[str, StringField, Quantity]]:
    """(base, field, its quantity) for each quantity key, in the first base that can hold it."""
    found = []
    for field in string_fields():
        quantity = _quantity(field)
        base = next((b for b in BASES if _holds(b, field)), None)
        if quantity is not None and base is not None:
            found.append((base, field, quantity))
    return found


PLACED = _placed()
IDS = [str(field) for _, field, _ in PLACED]


def test_every_quantity_key_is_found_and_has_a_dimension():
    quantities = [field for field in string_fields() if _quantity(field)]
    assert len(PLACED) == len(quantities) > 40, sorted({str(f) for f in quantities} - set(IDS))
    dimensions = {str(field): quantity.dimension for _, field, quantity in PLACED}
    assert dimensions["nodePools[0].cpuPerNode"] is CPU and dimensions["nodePools[0].memoryPerNode"] is BYTES
    assert dimensions["slurm.worker.slurmd.cpu"] is CPU and dimensions["storage.jail.size"] is BYTES


def test_no_string_key_holding_a_quantity_lacks_a_dimension():
    """A key added as a plain str with a quantity in it (a size, a request) is found here."""
    looks_like_one = re.compile(r"[0-9.]+(Ki|Mi|Gi|Ti|Pi|Ei|m)")
    checked = 0
    for base in BASES:
        whole = parse_config(base_config(base)).model_dump(by_alias=True)
        for field in string_fields():
            located = locate(whole, field)
            if located and isinstance(located[1], str) and looks_like_one.fullmatch(located[1]) and not _duration(field):
                checked += 1
                assert _quantity(field), f"{field} holds {located[1]} but its type has no dimension (fields.Quantity)"
    assert checked > 40


def _duration(field: StringField) -> bool:
    """A Prometheus duration (10m: ten minutes), which reads like millicores."""
    return any(getattr(item, "pattern", None) == DURATION_PATTERN for item in field.metadata)


def _path(field: StringField, raw: dict[str, Any]) -> str:
    """The key path of `field` in `raw` as the refusal names it: a map's key is the one there (storage.scratch-nfs)."""
    located = locate(raw, field)
    assert located is not None, field
    return path_text(located[0])


def _refusal(base: str, field: StringField, value: Any) -> str:
    changed = with_value(base_config(base), field, value)
    line = line_at(changed, _path(field, changed))
    assert line is not None, f"{field}: {value!r} accepted"
    return line


def _wrong_dimension(quantity: Quantity) -> str:
    return "8Gi" if quantity.dimension is CPU else "8"


def _below(quantity: Quantity) -> str:
    least = quantity_value(quantity.least)
    return plain_number(least / 2) if quantity.dimension is CPU else f"{plain_number(least / 2 / 1024)}Ki"


def _above(quantity: Quantity) -> str:
    most = quantity_value(quantity.most)
    return plain_number(most * 2) if quantity.dimension is CPU else f"{plain_number(most * 2 / Decimal(2) ** 50)}Pi"


@pytest.mark.parametrize(("base", "field", "quantity"), PLACED, ids=IDS)
def test_a_value_in_another_dimension_is_refused_at_its_own_key(base, field, quantity):
    line = _refusal(base, field, _wrong_dimension(quantity))
    assert ("is a CPU count" in line) if quantity.dimension is CPU else ("has no unit" in line), line


@pytest.mark.parametrize(("base", "field", "quantity"), PLACED, ids=IDS)
def test_an_implausible_magnitude_is_refused_at_its_own_key(base, field, quantity):
    assert f"at least {quantity.least}" in _refusal(base, field, _below(quantity))
    assert f"at most {quantity.most}" in _refusal(base, field, _above(quantity))


BYTE_KEYS = [placed for placed in PLACED if placed[2].dimension is BYTES]


@pytest.mark.parametrize(("base", "field", "quantity"), BYTE_KEYS, ids=[str(field) for _, field, _ in BYTE_KEYS])
def test_a_byte_quantity_without_a_unit_offers_the_unit_and_the_fix_line_fixes_it(base, field, quantity):
    number = plain_number(quantity_value(quantity.least) / 2**30 * 2) if quantity_value(quantity.least) >= 2**30 else "64"
    wrong = with_value(base_config(base), field, number)
    line = line_at(wrong, _path(field, wrong))
    assert line is not None and f"did you mean {number}Gi?" in line, line
    (fix,) = fixes_in(line)
    assert fix.endswith(f" {number}Gi")
    assert line_at(apply_fix(wrong, fix), _path(field, wrong)) is None


@pytest.mark.parametrize(
    ("key", "value", "said", "meant"),
    [
        ("nodePools[0].cpuPerNode", "112Gi", "is a CPU count", "112"),
        ("nodePools[0].memoryPerNode", "1250", "has no unit, so it would be 1250 bytes", "1250Gi"),
        ("nodePools[0].memoryPerNode", "1342177280000", "has no unit", "1250Gi"),
        ("nodePools[0].memoryPerNode", "1250 GB", "must be an amount with a byte unit", "1250G"),
        ("slurm.worker.sharedMemorySize", "64gi", "must be an amount with a byte unit", "64Gi"),
        ("slurm.worker.slurmd.memory", "1000m", "m is milli", "1000Mi"),
        ("nodePools[0].cpuPerNode", "112 cores", "must be a number of CPUs", "112"),
        ("nodePools[0].memoryPerNode", "4Ki", "at least 1Gi", None),
        ("nodePools[0].cpuPerNode", "0.001", "at least 1", None),
        ("nodePools[0].memoryPerNode", "10Pi", "at most 64Ti", None),
    ],
)
def test_the_likely_meaning_is_said_where_it_is_clear(key, value, said, meant):
    from tests.test_bad_config import mistake

    line = line_at(mistake({key: value}), key)
    assert line is not None and said in line, line
    assert (f"did you mean {meant}?" in line) == (meant is not None), line
    if meant is not None:
        (fix,) = fixes_in(line)
        assert line_at(apply_fix(mistake({key: value}), fix), key) is None

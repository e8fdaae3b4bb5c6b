"""PromQL's series names, for the tests that check every rule and panel reads only series someone produces.

PromQL has no parser in this virtualenv (nor a well-kept pure-Python one on PyPI), so `metric_names` is a
tokenizer that follows PromQL's lexer (Prometheus' promql/parser/lex.go): strings, label matchers, range and
subquery brackets, numbers and durations, grouping label lists, function and aggregation names, keywords and
Grafana's variables are told apart from the series names; tests/test_monitoring_dashboards.py pins each case.
"""

from __future__ import annotations

import re

TOKEN = re.compile(
    r"""
    (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<variable>\$\{[^}]*\}|\$\w+|\[\[[^\]]*\]\])
  | (?P<range>\[[^\]]*\])
  | (?P<number>0[xX][0-9a-fA-F]+|\d[\w.]*|\.\d[\w.]*)
  | (?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<symbol>=~|!~|!=|==|<=|>=|[-+*/%^<>=@(){},])
  | (?P<space>\s+)
  | (?P<other>.)
    """,
    re.VERBOSE,
)
# Binary operators, modifiers and literals that read like names (lex.go's key words); case-insensitive there too.
KEYWORDS = {"and", "or", "unless", "atan2", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right", "inf", "nan"}
# Followed by a parenthesised list of label names, never series.
GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}


def tokens(expr: str) -> list[tuple[str, str]]:
    found = [(match.lastgroup or "", match.group()) for match in TOKEN.finditer(expr)]
    strays = [text for kind, text in found if kind == "other"]
    assert not strays, f"{expr!r}: characters PromQL does not have: {strays}"
    return [(kind, text) for kind, text in found if kind != "space"]


def metric_names(expr: str) -> set[str]:
    """The series an expression selects by name."""
    names: set[str] = set()
    items = tokens(expr)
    braces = 0
    skip_until_close = False
    for index, (kind, text) in enumerate(items):
        following = items[index + 1][1] if index + 1 < len(items) else ""
        if skip_until_close:
            skip_until_close = text != ")"
            continue
        assert text != "__name__", f"{expr!r}: name the series, not a __name__ matcher"
        if text == "{":
            braces += 1
        elif text == "}":
            braces -= 1
        elif kind == "name" and braces == 0:  # inside braces: label names
            if text.lower() in GROUPING and following == "(":
                skip_until_close = True
            # A function's or aggregation's name is followed by its arguments or its grouping.
            elif text.lower() not in KEYWORDS and following not in ("(", "by", "without"):
                names.add(text)
    assert braces == 0, f"{expr!r}: unbalanced braces"
    return names

"""Shell scripts as files: the steps live in a `.sh` file beside their renderer (checked by bash -n and shellcheck in
`make lint`); the renderer writes only the data they act on above them, as assignments and functions."""

from __future__ import annotations

from pathlib import Path

from slurm_rules.config_files import RENDERED_BY


def shell_function(name: str, body: list[str]) -> list[str]:
    """`name() { ...; }` (`:` first: a function of no command is a syntax error)."""
    return [f"{name}() {{", ":", *body, "}"]


def steps_of(path: Path) -> str:
    """A steps file's text without its shebang line."""
    return path.read_text(encoding="utf-8").split("\n", 1)[1]


def data_and_steps(what: str, data: list[str], steps: str) -> str:
    """The whole script: shebang, the RENDERED_BY line, what it is, the data, then the steps (`steps_of`)."""
    return "\n".join(["#!/bin/bash", f"# {RENDERED_BY}", f"# {what}", *data]) + "\n" + steps

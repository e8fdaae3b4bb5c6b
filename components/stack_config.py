"""Reading the stack config from Pulumi."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi

from .config.fields import PROJECT
from .config.parse import ConfigError, parse_stack
from .config.platform import PlatformConfig
from .config.stacks import StackFile, UnreadableStackFile, read_stack_files


def _config_keys() -> list[str]:
    """Our model's top-level keys, plus any other `slurm-platform:` key the stack sets (typos are errors)."""
    known = [field.alias or name for name, field in PlatformConfig.model_fields.items()]
    prefix = f"{PROJECT}:"
    stack = [key[len(prefix) :] for key in pulumi.runtime.get_config_env() if key.startswith(prefix)]
    return list(dict.fromkeys([*known, *sorted(stack)]))


def raw_config_from_pulumi() -> tuple[dict[str, Any], frozenset[str]]:
    """The `slurm-platform:*` keys of the running stack (or mocks'), read with Pulumi's
    config API, and which of them are secrets."""
    config = pulumi.Config(PROJECT)
    raw: dict[str, Any] = {}
    for key in _config_keys():
        text = config.get(key)
        if text is None:
            continue
        try:
            value = config.get_object(key)
        except pulumi.ConfigTypeError:
            value = text  # not JSON: the model says which structure it expected
        # Structured values arrive as JSON text, scalars as plain strings.
        raw[key] = value if isinstance(value, (dict, list)) else text
    secret_keys = frozenset(key for key in raw if pulumi.runtime.is_config_secret(config.full_key(key)))
    return raw, secret_keys


def load_config() -> PlatformConfig:
    """The running stack's config, validated with every other stack of its cluster (their files beside Pulumi.yaml)."""
    raw, secret_keys = raw_config_from_pulumi()
    stack = pulumi.get_stack()
    try:
        # The language host runs the program in the project's directory; newer engines also say where it is.
        files = read_stack_files(Path(pulumi.get_root_directory() or Path.cwd()))
    except UnreadableStackFile as error:
        raise ConfigError(str(error)) from None
    return parse_stack(stack, StackFile(stack, raw, secret_keys), files)

"""The JSON Schema of the stack config (config.schema.json, stack.schema.json)."""

from __future__ import annotations

from typing import Any

from .platform import PlatformConfig


def json_schema() -> dict[str, Any]:
    """The config's JSON Schema (by alias), as committed in config.schema.json."""
    schema = PlatformConfig.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "slurm-platform stack config (keys under `slurm-platform:`)"
    return schema

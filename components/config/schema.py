"""The JSON Schema of the stack config (config.schema.json, stack.schema.json)."""

from __future__ import annotations

from typing import Any

from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import core_schema

from .platform import PlatformConfig


class _FactoryDefaults(GenerateJsonSchema):
    """Shows the defaults a `default_factory` makes (empty lists, the default node pools) like any other
    default, so editors and the configuration reference (`make docs`) show every key's default."""

    def get_default_value(self, schema: core_schema.WithDefaultSchema) -> Any:
        factory = schema.get("default_factory")
        if factory is not None and not schema.get("default_factory_takes_data"):
            return factory()  # type: ignore[call-arg]
        return super().get_default_value(schema)


def json_schema() -> dict[str, Any]:
    """The config's JSON Schema (by alias), as committed in config.schema.json."""
    schema = PlatformConfig.model_json_schema(by_alias=True, schema_generator=_FactoryDefaults)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "slurm-platform stack config (keys under `slurm-platform:`)"
    return schema

"""What `make schema` commits, generated from the pydantic models and the stack files:

- `config.schema.json`: the value of each `slurm-platform:` key;
- `stack.schema.json`: a whole `Pulumi.<stack>.yaml` (Pulumi's own keys, and
  `config:` with our keys, with or without the `slurm-platform:` prefix, next to
  other namespaces' keys), the file an editor validates through the
  `# yaml-language-server: $schema=./stack.schema.json` line each stack file
  starts with;
- `policies/config/<stack>.json`: the policy pack's config per stack
  (tools/policy_configs.py).

Files are replaced only once their new text is complete, so a failure leaves
the committed ones as they were.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from components.config import PROJECT, json_schema

from . import policy_configs

CONFIG_SCHEMA_FILE = "config.schema.json"
STACK_SCHEMA_FILE = "stack.schema.json"
SECURE_VALUE = {
    "type": "object",
    "description": "A secret set with `pulumi config set --secret` (ciphertext).",
    "properties": {"secure": {"type": "string"}},
    "required": ["secure"],
    "additionalProperties": False,
}


def _allow_secure_strings(schema: Any) -> Any:
    """Every string may also be a `secure:` value, as `pulumi config set --secret --path` writes it."""
    if isinstance(schema, dict):
        walked = {key: _allow_secure_strings(value) for key, value in schema.items()}
        if walked.get("type") == "string":
            return {"anyOf": [walked, {"$ref": "#/$defs/SecureValue"}]}
        return walked
    if isinstance(schema, list):
        return [_allow_secure_strings(item) for item in schema]
    return schema


def stack_file_schema() -> dict[str, Any]:
    """Schema of a whole `Pulumi.<stack>.yaml` (fields of Pulumi's ProjectStack)."""
    config = json_schema()
    defs = _allow_secure_strings(copy.deepcopy(config.get("$defs", {})))
    defs["SecureValue"] = SECURE_VALUE
    keys: dict[str, Any] = {}
    for name, prop in config["properties"].items():
        value = _allow_secure_strings(prop)
        keys[f"{PROJECT}:{name}"] = value
        keys[name] = value  # Pulumi reads a key without namespace as the project's
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"Pulumi.<stack>.yaml of the {PROJECT} project",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "secretsprovider": {"type": "string", "description": "Secrets provider (passphrase, awskms://, ...)."},
            "encryptedkey": {"type": "string", "description": "Data key encrypted by a cloud secrets provider."},
            "encryptionsalt": {"type": "string", "description": "Salt of the passphrase secrets provider (committed)."},
            "environment": {
                "description": "Pulumi ESC environments (Pulumi Cloud backends only).",
                "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "object"}],
            },
            "config": {
                "type": "object",
                "properties": keys,
                # Other namespaces (kubernetes:, pulumi:, ...) are not ours to check; a misspelt key of ours is an error.
                "patternProperties": {f"^(?!{PROJECT}:)[^:]+:.+$": {}},
                "additionalProperties": False,
            },
        },
        "$defs": defs,
    }


def _text(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def write_atomically(path: Path, render: Callable[[], str]) -> None:
    """Render first, then replace `path` in one step; a failure leaves it untouched."""
    text = render()
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def write_schemas(directory: Path) -> None:
    write_atomically(directory / CONFIG_SCHEMA_FILE, lambda: _text(json_schema()))
    write_atomically(directory / STACK_SCHEMA_FILE, lambda: _text(stack_file_schema()))


def write_policy_configs(root: Path) -> None:
    for stack in policy_configs.stacks(root):
        write_atomically(root / policy_configs.CONFIG_DIR / f"{stack}.json", functools.partial(policy_configs.render, root, stack))


if __name__ == "__main__":
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path.cwd()
    write_schemas(root)
    write_policy_configs(root)

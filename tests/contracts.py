"""Validate manifests against upstream schemas: CRDs from ../shared/contracts/,
built-in kinds with the Kubernetes OpenAPI schemas kubernetes-validate bundles."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

from tests.harness import ROOT

CONTRACTS = ROOT.parent / "shared" / "contracts"
SOPERATOR_CRD = CONTRACTS / "soperator" / "1.14.10" / "slurm.nebius.ai_slurmclusters.yaml"
KUBERNETES_VERSION = "1.31"


@lru_cache
def crd_schema(path: Path, version: str = "v1") -> dict[str, Any]:
    crd = yaml.safe_load(path.read_text())
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    return served["schema"]["openAPIV3Schema"]


def pruned_fields(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Fields the API server would silently prune: not declared by the structural schema."""
    if isinstance(value, dict):
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return []
        properties = schema.get("properties")
        if properties is None:
            extra = schema.get("additionalProperties")
            return [p for k, v in value.items() for p in pruned_fields(v, extra, f"{path}.{k}")] if isinstance(extra, dict) else []
        found = [f"{path}.{k}: unknown field (would be pruned)" for k in value if k not in properties]
        return found + [p for k, v in value.items() if k in properties for p in pruned_fields(v, properties[k], f"{path}.{k}")]
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [p for i, item in enumerate(value) for p in pruned_fields(item, schema["items"], f"{path}[{i}]")]
    return []


def crd_errors(manifest: dict[str, Any], path: Path = SOPERATOR_CRD) -> list[str]:
    """Every schema violation and every field the server would prune, each as 'path: message'."""
    schema = crd_schema(path)
    body = {k: v for k, v in manifest.items() if k != "metadata"}
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in jsonschema.Draft7Validator(schema).iter_errors(body)]
    return errors + pruned_fields(body.get("spec", {}), schema["properties"]["spec"], "spec")


def kubernetes_errors(manifest: dict[str, Any]) -> list[str]:
    try:
        kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as error:
        return [f"{'.'.join(map(str, error.path))}: {error.message}"]
    return []

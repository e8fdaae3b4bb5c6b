"""Validate manifests against upstream schemas: the CRDs the project carries in contracts/,
built-in kinds with the Kubernetes OpenAPI schemas kubernetes-validate bundles."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate

from tests.harness import ROOT

CONTRACTS = ROOT / "contracts"
SOPERATOR_CRD = CONTRACTS / "soperator" / "1.14.10" / "slurm.nebius.ai_slurmclusters.json"
SOPERATOR_4_DIR = CONTRACTS / "soperator" / "4.1.7"
SLINKY_DIR = CONTRACTS / "slinky" / "v1.2.1"
KUEUE_DIR = CONTRACTS / "kueue" / "v0.19.2"
# The Prometheus Operator's CRDs as the pinned kube-prometheus-stack ships them (crd-<plural>.json).
PROMETHEUS_OPERATOR_DIR = CONTRACTS / "prometheus-operator" / "v0.93.1"
PROMETHEUS_PLURALS = {"ServiceMonitor": "servicemonitors", "PodMonitor": "podmonitors", "PrometheusRule": "prometheusrules"}
# Chart values contracts (scripts/contracts.py chart-values): contracts/charts/<chart>/<version>/values.json.
CHART_VALUES_DIR = CONTRACTS / "charts"
KUEUE_PLURALS = {
    "ClusterQueue": "clusterqueues",
    "LocalQueue": "localqueues",
    "ResourceFlavor": "resourceflavors",
    "Topology": "topologies",
    "WorkloadPriorityClass": "workloadpriorityclasses",
}
ACK_SCHEMAS = {
    "headGroupSpec": CONTRACTS / "ack" / "slurmcluster.headgroup-api.schema.json",
    "slurmctld": CONTRACTS / "ack" / "slurmcluster.slurmctld-api.schema.json",
}
KUBERNETES_VERSION = "1.31"


@lru_cache
def crd_schema(path: Path, version: str = "v1") -> dict[str, Any]:
    crd = json.loads(path.read_text())
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
    schema = crd_schema(path, manifest["apiVersion"].split("/")[-1])
    body = {k: v for k, v in manifest.items() if k != "metadata"}
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in jsonschema.Draft7Validator(schema).iter_errors(body)]
    # Every field the server would prune (a kind without spec, such as WorkloadPriorityClass, at its top level).
    if "spec" not in schema["properties"]:
        return errors + pruned_fields(body, schema, "")
    return errors + pruned_fields(body.get("spec", {}), schema["properties"]["spec"], "spec")


def kubernetes_errors(manifest: dict[str, Any]) -> list[str]:
    try:
        kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as error:
        return [f"{'.'.join(map(str, error.path))}: {error.message}"]
    return []


# Custom resources with no upstream contract in contracts/ (NVIDIA, Karpenter, MariaDB operator).
UNCONTRACTED = {"NicClusterPolicy", "NodePool", "MariaDB"}
BUILTIN_GROUPS = (
    "apps/",
    "batch/",
    "storage.k8s.io/",
    "rbac.authorization.k8s.io/",
    "scheduling.k8s.io/",
    "admissionregistration.k8s.io/",
    "networking.k8s.io/",
)


def is_builtin(manifest: dict[str, Any]) -> bool:
    """A kind the Kubernetes OpenAPI schemas cover (core or a built-in API group)."""
    return "." not in manifest["apiVersion"].split("/")[0] or manifest["apiVersion"].startswith(BUILTIN_GROUPS)


def manifest_errors(manifest: dict[str, Any]) -> list[str]:
    """Built-ins against Kubernetes' schemas, custom resources against their contract (none: no check)."""
    if is_builtin(manifest):
        return kubernetes_errors(manifest)
    return [] if manifest["kind"] in UNCONTRACTED else contract_errors(manifest)


def contract_of(manifest: dict[str, Any]) -> Path:
    """The upstream contract a custom resource is checked against (soperator by crVersion)."""
    group, _, version = manifest["apiVersion"].rpartition("/")
    kind = manifest["kind"]
    if group == "slurm.nebius.ai" and kind == "SlurmCluster":
        return CONTRACTS / "soperator" / manifest["spec"]["crVersion"] / "slurm.nebius.ai_slurmclusters.json"
    if group == "slurm.nebius.ai" and kind == "NodeSet":
        return SOPERATOR_4_DIR / "slurm.nebius.ai_nodesets.json"
    if group == "slinky.slurm.net":
        return SLINKY_DIR / f"slinky.slurm.net_{kind.lower()}s.json"
    if group == "kueue.x-k8s.io":
        return KUEUE_DIR / f"kueue.x-k8s.io_{KUEUE_PLURALS[kind]}.json"
    if group == "monitoring.coreos.com":
        return PROMETHEUS_OPERATOR_DIR / f"crd-{PROMETHEUS_PLURALS[kind]}.json"
    if group == "kai.alibabacloud.com" and kind == "SlurmCluster":
        return ACK_SCHEMAS["headGroupSpec" if "headGroupSpec" in manifest.get("spec", {}) else "slurmctld"]
    raise LookupError(f"no contract for {manifest['apiVersion']} {kind}")


def status_schema(manifest: dict[str, Any]) -> dict[str, Any]:
    """The `status` an operator reports on a custom resource, as its contract declares it."""
    path = contract_of(manifest)
    # ACK's is a JSON Schema written from its API types; the others are CRDs.
    ack = path.name.endswith(".schema.json")
    schema = json.loads(path.read_text()) if ack else crd_schema(path, manifest["apiVersion"].split("/")[-1])
    return schema["properties"]["status"]


def pod_template_errors(template: dict[str, Any], where: str) -> list[str]:
    """A core/v1 PodTemplateSpec, checked as the built-in PodTemplate kind."""
    wrapped = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "check"}, "template": template}
    return [f"{where}: {e}" for e in kubernetes_errors(wrapped)]


def ack_errors(manifest: dict[str, Any], path: Path) -> list[str]:
    """ACK has no CRD: the project's JSON Schema (unknown fields rejected), and every pod template as a core/v1 one."""
    schema = json.loads(path.read_text())
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in jsonschema.Draft202012Validator(schema).iter_errors(manifest)]
    spec = manifest.get("spec", {})
    for role in ("headGroupSpec", "slurmctld", "slurmdbd", "slurmrestd"):
        if role in spec:
            errors += pod_template_errors(spec[role]["template"], f"spec.{role}.template")
    for i, group in enumerate(spec.get("workerGroupSpecs", [])):
        errors += pod_template_errors(group["template"], f"spec.workerGroupSpecs[{i}].template")
    return errors


def contract_errors(manifest: dict[str, Any]) -> list[str]:
    """Every way a custom resource breaks its upstream contract (unknown fields included)."""
    path = contract_of(manifest)
    return ack_errors(manifest, path) if path.name.endswith(".schema.json") else crd_errors(manifest, path)

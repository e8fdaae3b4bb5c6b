"""Every custom resource each Slurm operator module renders, put to a real API
server: soperator 1.14.10 and 4.1.7, ACK in both API generations, Slinky.

Each example stack's rendered custom resources are created with a server-side
dry run and strict field validation, so the server applies its own checks
(OpenAPI types, enums, CEL rules, unknown fields) with the CRDs of
contracts/ installed. ACK publishes no CRD: its contract is a JSON
Schema, turned here into the CRD an API server takes (`ack_crd`).
"""

from __future__ import annotations

import copy
import json
import subprocess
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from components import kueue, tenancy
from components.config import parse_config
from components.slurm import operator_module
from components.slurm.common import system_priority_class_name
from tests.contracts import ACK_SCHEMAS, KUEUE_DIR, SLINKY_DIR, SOPERATOR_4_DIR, SOPERATOR_CRD, UNCONTRACTED, is_builtin
from tests.harness import stack_config
from tests.kube import LocalCluster, contains, wait_until

# (stack, config overrides, CRD files the operator brings)
OPERATOR_STACKS: dict[str, tuple[str, dict[str, Any], list[Path]]] = {
    "soperator-1.14.10": ("prod-hanoi", {}, [SOPERATOR_CRD]),
    "soperator-4.1.7": ("staging-hanoi", {}, sorted(SOPERATOR_4_DIR.glob("*.json"))),
    "ack-2024-12": ("staging-hangzhou", {}, [ACK_SCHEMAS["slurmctld"]]),
    "ack-2024-06": ("staging-hangzhou", {"apiGeneration": "2024-06"}, [ACK_SCHEMAS["headGroupSpec"]]),
    "slinky-1.2.1": ("prod-hcm", {}, sorted(SLINKY_DIR.glob("*.json"))),
}


def rendered_custom_resources(stack: str, ack_overrides: dict[str, Any]) -> list[dict[str, Any]]:
    raw = copy.deepcopy(stack_config(stack))
    if ack_overrides:
        raw["operators"]["ackSlurmOperator"].update(ack_overrides)
    config = parse_config(raw)
    # The custom resources with an upstream contract (the MariaDB CR for Slinky's accounting has none here).
    return [r.manifest for r in operator_module(config).render(config) if not is_builtin(r.manifest) and r.manifest["kind"] not in UNCONTRACTED]


def structural(schema: dict[str, Any]) -> dict[str, Any]:
    """A JSON Schema (the keywords ACK's contract uses) as a CRD's structural schema.

    `additionalProperties: false` has no CRD form: strict field validation rejects
    unknown fields instead. An object the contract leaves open (JSON Schema's
    default, e.g. a core/v1 pod template, checked as such by tests/contracts.py)
    keeps its fields (`x-kubernetes-preserve-unknown-fields`).
    """
    out: dict[str, Any] = {}
    if "const" in schema:
        out.update(type="string", enum=[schema["const"]])
    for key in ("type", "description", "required", "minimum", "minItems"):
        if key in schema:
            out[key] = schema[key]
    if "items" in schema:
        out["items"] = structural(schema["items"])
    if "properties" in schema:
        out["properties"] = {name: structural(sub) for name, sub in schema["properties"].items()}
    if isinstance(schema.get("additionalProperties"), dict):
        out["additionalProperties"] = structural(schema["additionalProperties"])
    elif out.get("type") == "object" and schema.get("additionalProperties") is not False:
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def ack_crd(schema_file: Path) -> dict[str, Any]:
    schema = json.loads(schema_file.read_text())
    root = {"type": "object", "properties": {"spec": structural(schema["properties"]["spec"])}, "required": ["spec"]}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "slurmclusters.kai.alibabacloud.com"},
        "spec": {
            "group": "kai.alibabacloud.com",
            "names": {"kind": "SlurmCluster", "plural": "slurmclusters", "singular": "slurmcluster", "listKind": "SlurmClusterList"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": root}}],
        },
    }


def install_crds(cluster: LocalCluster, files: list[Path]) -> None:
    """The operator's CRDs, replacing a sibling version's (soperator 1.14.10 and 4.1.7 share SlurmCluster)."""
    for file in files:
        if file.name.endswith(".schema.json"):
            cluster.apply([ack_crd(file)], force=True)
        else:
            cluster.kubectl("apply", "--server-side", "--force-conflicts", "--field-manager=kube-local", "-f", str(file))
    cluster.kubectl("wait", "--for", "condition=Established", "--timeout", "30s", "crd", "--all")


@pytest.mark.parametrize("operator", list(OPERATOR_STACKS))
def test_every_rendered_custom_resource_is_accepted_by_the_api_server(cluster, operator):
    stack, ack_overrides, crds = OPERATOR_STACKS[operator]
    install_crds(cluster, crds)
    manifests = rendered_custom_resources(stack, ack_overrides)
    assert manifests, f"{operator}: the module rendered no custom resource"
    for namespace in sorted({m["metadata"]["namespace"] for m in manifests}):
        if cluster.get("namespace", namespace) is None:
            cluster.kubectl("create", "namespace", namespace)
    for manifest in manifests:
        result = cluster.kubectl("create", "--dry-run=server", "--validate=strict", "-o", "json", "-f", "-", check=False, stdin=json.dumps(manifest))
        assert result.returncode == 0, f"{operator}: {manifest['kind']} {manifest['metadata']['name']}: {result.stderr}"
        stored = json.loads(result.stdout)
        # Nothing we sent was pruned: the server kept every field.
        assert contains(stored["spec"], manifest["spec"]), (operator, manifest["kind"], manifest["metadata"]["name"])


def test_the_api_server_refuses_an_unknown_field_of_each_operator(cluster):
    """The strict validation above is live: one unknown field in each operator's main resource is refused."""
    refused = 0
    for operator, (stack, ack_overrides, crds) in OPERATOR_STACKS.items():
        install_crds(cluster, crds)
        manifest = copy.deepcopy(rendered_custom_resources(stack, ack_overrides)[0])
        manifest["spec"]["workerCount"] = 2  # the field users expect and no operator has
        result = cluster.kubectl("create", "--dry-run=server", "--validate=strict", "-f", "-", check=False, stdin=json.dumps(manifest))
        assert result.returncode != 0 and 'unknown field "spec.workerCount"' in result.stderr, (operator, result.stderr)
        refused += 1
    assert refused == len(OPERATOR_STACKS)


def test_priority_classes_are_admitted_only_in_their_namespaces(cluster):
    """The ValidatingAdmissionPolicies (components/slurm/common.py priority_class_policy), run by a
    real API server: Slurm's class only in the cluster's namespace, the tenant classes only in
    tenant namespaces, pods naming no class anywhere."""
    raw = copy.deepcopy(stack_config("dev-lab"))
    raw["tenants"][1]["namespace"] = True
    config = parse_config(raw)
    tenant_namespace, slurm_namespace, system_class = raw["tenants"][1]["name"], config.cluster.namespace, system_priority_class_name(config)
    kinds = ("PriorityClass", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
    manifests = [r.manifest for r in operator_module(config).render(config) + tenancy.render(config) if r.manifest["kind"] in kinds]
    assert sorted({m["kind"] for m in manifests}) == sorted(kinds)
    for namespace in (tenant_namespace, slurm_namespace, "elsewhere"):
        if cluster.get("namespace", namespace) is None:
            cluster.kubectl("create", "namespace", namespace)
        wait_until(f"ServiceAccount {namespace}/default", partial(cluster.get, "serviceaccount", "default", namespace))
    cluster.apply(manifests)
    try:

        def admitted(namespace: str, priority_class: str | None) -> subprocess.CompletedProcess:
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "probe", "namespace": namespace},
                "spec": {"containers": [{"name": "probe", "image": "busybox"}], **({"priorityClassName": priority_class} if priority_class else {})},
            }
            return cluster.kubectl("create", "--dry-run=server", "-f", "-", check=False, stdin=json.dumps(pod))

        # Policies take effect shortly after they are created: wait for the first refusal.
        wait_until("the priority class policies", lambda: admitted("elsewhere", "slurm-test").returncode != 0, timeout=60)
        cases = [
            (tenant_namespace, "slurm-test", True),
            (tenant_namespace, "slurm-prod", True),
            (tenant_namespace, system_class, False),
            (slurm_namespace, system_class, True),
            (slurm_namespace, "slurm-prod", False),
            ("elsewhere", "slurm-oppo", False),
            ("elsewhere", system_class, False),
            ("elsewhere", None, True),
        ]
        for namespace, priority_class, allowed in cases:
            result = admitted(namespace, priority_class)
            assert (result.returncode == 0) is allowed, (namespace, priority_class, result.stderr)
            if not allowed:
                assert "ValidatingAdmissionPolicy" in result.stderr and "for namespaces" in result.stderr, result.stderr
    finally:
        for manifest in manifests:
            cluster.kubectl("delete", manifest["kind"].lower(), manifest["metadata"]["name"], "--ignore-not-found")


def test_every_kueue_object_is_accepted_by_the_api_server(cluster):
    """Kueue 0.19.2's CRDs from contracts/, and every object components/kueue.py renders for prod-hoalac
    (Kueue beside soperator 4.1.7), created with strict field validation; an unknown field is refused."""
    install_crds(cluster, sorted(KUEUE_DIR.glob("*.json")))
    config = parse_config(stack_config("prod-hoalac"))
    manifests = [r.manifest for r in kueue.render(config)]
    assert {m["kind"] for m in manifests} == {"Topology", "ResourceFlavor", "WorkloadPriorityClass", "ClusterQueue", "LocalQueue"}
    for namespace in sorted({m["metadata"]["namespace"] for m in manifests if "namespace" in m["metadata"]}):
        if cluster.get("namespace", namespace) is None:
            cluster.kubectl("create", "namespace", namespace)
    for manifest in manifests:
        result = cluster.kubectl("create", "--dry-run=server", "--validate=strict", "-o", "json", "-f", "-", check=False, stdin=json.dumps(manifest))
        assert result.returncode == 0, f"{manifest['kind']} {manifest['metadata']['name']}: {result.stderr}"
        sent = {k: v for k, v in manifest.items() if k not in ("apiVersion", "kind", "metadata")}
        assert contains(json.loads(result.stdout), sent), (manifest["kind"], manifest["metadata"]["name"])
    queue = copy.deepcopy(next(m for m in manifests if m["kind"] == "ClusterQueue"))
    queue["spec"]["gpuQuota"] = 8
    refused = cluster.kubectl("create", "--dry-run=server", "--validate=strict", "-f", "-", check=False, stdin=json.dumps(queue))
    assert refused.returncode != 0 and 'unknown field "spec.gpuQuota"' in refused.stderr, refused.stderr

"""Every custom resource each Slurm operator module renders, put to a real API
server: soperator 1.14.10 and 4.1.7, ACK in both API generations, Slinky.

Each example stack's rendered custom resources are created with a server-side
dry run and strict field validation, so the server applies its own checks
(OpenAPI types, enums, CEL rules, unknown fields) with the CRDs of
contracts/ installed. ACK publishes no CRD: its contract is a JSON
Schema, turned here into the CRD an API server takes (`ack_crd`). Under the real
engine, `pulumi up` of ACK's and Slinky's awaited resources ends only once the test,
playing each operator, reports Slurm ready on their status.
"""

from __future__ import annotations

import copy
import functools
import json
import subprocess
import time
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from components import kueue, tenancy
from components.config import parse_config, platform_storage_classes
from components.slurm import ack, operator_module
from components.slurm.common import WAIT_FOR_ANNOTATION, system_priority_class_name, worker_anti_affinity, worker_placement
from scripts.kwok_nodes import pool_nodes
from tests.contracts import ACK_SCHEMAS, KUEUE_DIR, SLINKY_DIR, SOPERATOR_4_DIR, SOPERATOR_CRD, UNCONTRACTED, is_builtin
from tests.harness import stack_config
from tests.kube import LocalCluster, assert_stored_as_sent, contains, wait_until
from tests.test_tenancy import two_teams, with_tenants

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
    # The status, a subresource as the API types' +kubebuilder:subresource:status make it, is what `pulumi up` awaits.
    fields = {part: structural(schema["properties"][part]) for part in ("spec", "status")}
    root = {"type": "object", "properties": fields, "required": ["spec"]}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "slurmclusters.kai.alibabacloud.com"},
        "spec": {
            "group": "kai.alibabacloud.com",
            "names": {"kind": "SlurmCluster", "plural": "slurmclusters", "singular": "slurmcluster", "listKind": "SlurmClusterList"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": root}, "subresources": {"status": {}}}],
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
    assert_stored_as_sent(cluster, operator, manifests)


@pytest.mark.parametrize("operator", ["soperator-4.1.7", "ack-2024-12", "slinky-1.2.1"])
def test_workers_keeping_off_tenant_pods_are_accepted_by_the_api_server(cluster, operator):
    """With a tenant namespace, every worker carries its pod anti-affinity (an empty label selector,
    which a CRD could prune or refuse) through each operator's own CRD, stored as sent."""
    stack, _, crds = OPERATOR_STACKS[operator]
    install_crds(cluster, crds)
    config = with_tenants(*two_teams(stack), stack=stack)
    manifests = [r.manifest for r in operator_module(config).render(config) if not is_builtin(r.manifest) and r.manifest["kind"] not in UNCONTRACTED]
    affinity = json.dumps(worker_anti_affinity(config))
    assert sum(json.dumps(m).count(affinity) for m in manifests) == len(config.gpu_pools), operator
    assert_stored_as_sent(cluster, operator, manifests)


@pytest.mark.parametrize("generation", ["2024-12", "2024-06"])
def test_acks_slurmctld_state_claim_and_the_head_mounting_it_are_accepted(cluster, generation):
    """ACK's slurmctld keeps its state on our claim: the claim, and the SlurmCluster whose head template mounts it
    (with the init container that makes it slurm's), created with strict validation and stored as sent."""
    operator = f"ack-{generation}"
    stack, ack_overrides, crds = OPERATOR_STACKS[operator]
    install_crds(cluster, crds)
    raw = copy.deepcopy(stack_config(stack))
    raw["operators"]["ackSlurmOperator"].update(ack_overrides)
    config = parse_config(raw)
    claim = ack.state_claim(config).manifest
    (cluster_manifest,) = [r.manifest for r in ack.render(config) if r.manifest["kind"] == "SlurmCluster"]
    head = (cluster_manifest["spec"].get("slurmctld") or cluster_manifest["spec"]["headGroupSpec"])["template"]["spec"]
    claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in head["volumes"] if "persistentVolumeClaim" in v}
    mounted = {m["name"] for m in head["containers"][0]["volumeMounts"]} & {m["name"] for m in head["initContainers"][0]["volumeMounts"]}
    assert [claims[name] for name in mounted] == [claim["metadata"]["name"]]
    assert_stored_as_sent(cluster, operator, [claim, cluster_manifest])


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
    manifests = [
        r.manifest
        for r in operator_module(config).render(config) + tenancy.render(config, operator_module(config).accounting_client(config))
        if r.manifest["kind"] in kinds
    ]
    assert sorted({m["kind"] for m in manifests}) == sorted(kinds)
    for namespace in (tenant_namespace, slurm_namespace, "elsewhere"):
        if cluster.get("namespace", namespace) is None:
            cluster.kubectl("create", "namespace", namespace)
        wait_until(f"ServiceAccount {namespace}/default", partial(cluster.get, "serviceaccount", "default", namespace))
    # The labels the stack's Namespace carries besides Pod Security's (the probes below are not restricted pods).
    labels = tenancy.tenant_namespace_labels(config, config.tenants[1])
    cluster.kubectl("label", "namespace", tenant_namespace, "--overwrite", *(f"{key}={value}" for key, value in labels.items()))
    cluster.apply(manifests)
    try:
        # A tenant namespace's pods select the tenant's nodes (slurm-tenant-placement).
        (tenant_nodes,) = tenancy.tenant_node_labels(config, config.tenants[1])

        def admitted(namespace: str, priority_class: str | None) -> subprocess.CompletedProcess:
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "probe", "namespace": namespace},
                "spec": {
                    "containers": [{"name": "probe", "image": "busybox"}],
                    **({"priorityClassName": priority_class} if priority_class else {}),
                    **({"nodeSelector": tenant_nodes} if namespace == tenant_namespace else {}),
                },
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
                # A tenant namespace's own allow-list may be the first to refuse (slurm-tenant-pods).
                reasons = ("are for namespaces", "are for the namespaces labelled", "may name priority classes")
                assert "ValidatingAdmissionPolicy" in result.stderr and any(r in result.stderr for r in reasons), result.stderr
    finally:
        for manifest in manifests:
            cluster.kubectl("delete", manifest["kind"].lower(), manifest["metadata"]["name"], "--ignore-not-found")


def test_every_kueue_object_is_accepted_by_the_api_server(cluster):
    """Kueue 0.19.2's CRDs from contracts/, and every object components/kueue.py renders for prod-hoalac
    (Kueue beside soperator 4.1.7), created with strict field validation; an unknown field is refused."""
    install_crds(cluster, sorted(KUEUE_DIR.glob("*.json")))
    config = parse_config(stack_config("prod-hoalac"))
    # Kueue's own kinds (its admission policies are run in the tenant namespace test).
    manifests = [r.manifest for r in kueue.render(config) if r.manifest["apiVersion"] == kueue.API_VERSION]
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


# A container Pod Security `restricted` admits: what a tenant's own GPU job looks like.
RESTRICTED_CONTAINER: dict[str, Any] = {
    "name": "train",
    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True, "runAsUser": 1000},
}
RESTRICTED_POD_SECURITY = {"seccompProfile": {"type": "RuntimeDefault"}, "runAsNonRoot": True}


@functools.cache
def tenant_nodes() -> dict[str, str]:
    """The labels of prod-hoalac's Kueue nodes, which Kueue sets on vision's pods when it admits them."""
    config = parse_config(stack_config("prod-hoalac"))
    (labels,) = tenancy.tenant_node_labels(config, next(t for t in config.tenants if t.name == "vision"))
    return labels


def tenant_pod(namespace: str, name: str = "probe", gpus: int = 0, **spec: Any) -> dict[str, Any]:
    """A restricted-compliant pod in a tenant namespace naming its LocalQueue, on the tenant's nodes as Kueue places
    it; `spec` adds or replaces fields."""
    container = copy.deepcopy(RESTRICTED_CONTAINER)
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}, "requests": {"cpu": "8", "memory": "64Gi"}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {kueue.QUEUE_LABEL: namespace}},
        "spec": {
            "securityContext": dict(RESTRICTED_POD_SECURITY),
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "nodeSelector": dict(tenant_nodes()),
            "containers": [container],
            **spec,
        },
    }


def with_container(pod: dict[str, Any], **fields: Any) -> dict[str, Any]:
    pod = copy.deepcopy(pod)
    pod["spec"]["containers"][0].update(fields)
    return pod


def tenant_stack(**vision: Any) -> tuple[Any, list[dict[str, Any]]]:
    """prod-hoalac (soperator 4.1.7, Kueue, tenant vision with a namespace, `vision` set on it): every object that
    decides what a tenant namespace admits, and the cluster's priority class and its policies."""
    raw = copy.deepcopy(stack_config("prod-hoalac"))
    next(t for t in raw["tenants"] if t["name"] == "vision").update(vision)
    config = parse_config(raw)
    kinds = (
        "Namespace",
        "ResourceQuota",
        "LimitRange",
        "PriorityClass",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "Role",
        "RoleBinding",
    )
    rendered = (
        tenancy.render(config, operator_module(config).accounting_client(config)) + operator_module(config).render(config) + kueue.render(config)
    )
    return config, [r.manifest for r in rendered if r.manifest["kind"] in kinds]


def wait_for_quotas(cluster: LocalCluster, namespace: str) -> None:
    """The quota admission refuses pods until the quota controller has counted the namespace."""

    def counted(quota: str) -> Any:
        return (cluster.get("resourcequota", quota, namespace) or {}).get("status", {}).get("hard")

    for quota in ("gpu-guarantee", "compute-share", "pods-and-storage"):
        wait_until(f"quota {namespace}/{quota}", partial(counted, quota))


def test_a_tenant_namespace_admits_a_restricted_gpu_job_and_refuses_every_dangerous_pod(cluster):
    """Pod Security `restricted` (the namespace's labels) and the policies of components/tenancy.py,
    components/kueue.py and components/slurm/common.py, run by a real API server with its quota admission."""
    config, manifests = tenant_stack()
    tenant, slurm_namespace, system_class = "vision", config.cluster.namespace, system_priority_class_name(config)
    if cluster.get("namespace", slurm_namespace) is None:
        cluster.kubectl("create", "namespace", slurm_namespace)
    cluster.apply(manifests)
    try:
        for namespace in (tenant, slurm_namespace):
            wait_until(f"ServiceAccount {namespace}/default", partial(cluster.get, "serviceaccount", "default", namespace))
        wait_for_quotas(cluster, tenant)

        def create(manifest: dict[str, Any], *extra: str) -> subprocess.CompletedProcess:
            return cluster.kubectl("create", "--dry-run=server", *extra, "-f", "-", check=False, stdin=json.dumps(manifest))

        gpu_job = tenant_pod(tenant, gpus=8, priorityClassName="slurm-prod")
        wait_until("the tenant policies", lambda: create(tenant_pod(tenant, nodeName="kwok-h100-0")).returncode != 0, timeout=60)
        assert create(gpu_job).returncode == 0, create(gpu_job).stderr
        # A pod that asks nothing gets the LimitRange's requests, which the cpu and memory quota counts.
        plain = tenant_pod(tenant)
        admitted = create(plain, "-o", "json")
        assert admitted.returncode == 0, admitted.stderr
        assert json.loads(admitted.stdout)["spec"]["containers"][0]["resources"]["requests"] == tenancy.DEFAULT_REQUESTS

        pod_security = 'violates PodSecurity "restricted:v1.30"'
        # The jail's export as prod-hanoi binds it (prod-hoalac's jail is a dynamic claim).
        jail = parse_config(stack_config("prod-hanoi")).storage.jail.static_nfs
        assert jail is not None
        jail_nfs = {"server": jail.server, "path": jail.path}
        refused = {
            "privileged": (with_container(gpu_job, securityContext={"privileged": True}), pod_security),
            "hostPath /var/lib/kubelet": (
                tenant_pod(tenant, volumes=[{"name": "kubelet", "hostPath": {"path": "/var/lib/kubelet"}}]),
                pod_security,
            ),
            "inline nfs of the jail's server": (tenant_pod(tenant, volumes=[{"name": "jail", "nfs": jail_nfs}]), pod_security),
            "inline iscsi": (
                tenant_pod(
                    tenant, volumes=[{"name": "disk", "iscsi": {"targetPortal": "10.0.0.3:3260", "iqn": "iqn.2001-04.com.example:disk", "lun": 0}}]
                ),
                pod_security,
            ),
            "inline csi (a driver mounts what the pod names)": (
                tenant_pod(
                    tenant,
                    volumes=[{"name": "jail", "csi": {"driver": "nfs.csi.k8s.io", "volumeAttributes": {"server": "10.0.0.2", "share": "/jail"}}}],
                ),
                "ValidatingAdmissionPolicy 'slurm-tenant-pods'",
            ),
            "hostNetwork": (tenant_pod(tenant, hostNetwork=True), pod_security),
            "hostPID": (tenant_pod(tenant, hostPID=True), pod_security),
            "hostIPC": (tenant_pod(tenant, hostIPC=True), pod_security),
            "hostPort": (with_container(plain, ports=[{"containerPort": 22, "hostPort": 22}]), pod_security),
            "root": (
                with_container(plain, securityContext={**RESTRICTED_CONTAINER["securityContext"], "runAsNonRoot": False, "runAsUser": 0}),
                pod_security,
            ),
            "added capability": (
                with_container(
                    plain, securityContext={**RESTRICTED_CONTAINER["securityContext"], "capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]}}
                ),
                pod_security,
            ),
            "spec.nodeName onto a Slurm worker": (tenant_pod(tenant, nodeName="kwok-h100-0"), "ValidatingAdmissionPolicy 'slurm-tenant-pods'"),
            "system-node-critical": (tenant_pod(tenant, priorityClassName="system-node-critical"), "ValidatingAdmissionPolicy 'slurm-tenant-pods'"),
            "system-cluster-critical": (
                tenant_pod(tenant, priorityClassName="system-cluster-critical"),
                "ValidatingAdmissionPolicy 'slurm-tenant-pods'",
            ),
            "the Slurm cluster's class": (tenant_pod(tenant, priorityClassName=system_class), "ValidatingAdmissionPolicy"),
            "no queue label": ({**plain, "metadata": {"name": "probe", "namespace": tenant}}, "ValidatingAdmissionPolicy 'slurm-tenant-queued-pods'"),
            "another queue": (
                {**plain, "metadata": {"name": "probe", "namespace": tenant, "labels": {kueue.QUEUE_LABEL: "llm"}}},
                "ValidatingAdmissionPolicy 'slurm-tenant-queued-pods'",
            ),
            "more GPUs than its quota": (tenant_pod(tenant, gpus=16), "exceeded quota: gpu-guarantee"),
        }
        for case, (pod, reason) in refused.items():
            result = create(pod)
            assert result.returncode != 0 and reason in result.stderr, (case, result.stderr)
        # Pods of a Job come from the job controller: admitted without the label (their Job carried it).
        unlabeled = {**plain, "metadata": {"name": "probe", "namespace": tenant}}
        by_job = create(unlabeled, "--as=system:serviceaccount:kube-system:job-controller")
        assert by_job.returncode == 0, by_job.stderr
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "train", "namespace": tenant, "labels": {kueue.QUEUE_LABEL: tenant}},
            "spec": {"template": {"spec": {**gpu_job["spec"], "restartPolicy": "Never"}}},
        }
        assert create(job).returncode == 0, create(job).stderr
        unqueued = create({**job, "metadata": {"name": "train", "namespace": tenant}})
        assert unqueued.returncode != 0 and "ValidatingAdmissionPolicy 'slurm-tenant-queued-jobs'" in unqueued.stderr, unqueued.stderr
        # Kubernetes' own classes stay out of the Slurm cluster's namespace; its class is admitted there.
        slurm_pod: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "probe", "namespace": slurm_namespace},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        }
        for critical in ("system-node-critical", "system-cluster-critical"):
            result = create({**slurm_pod, "spec": {**slurm_pod["spec"], "priorityClassName": critical}})
            assert result.returncode != 0 and f"ValidatingAdmissionPolicy '{system_class}-namespace'" in result.stderr, result.stderr
        assert create({**slurm_pod, "spec": {**slurm_pod["spec"], "priorityClassName": system_class}}).returncode == 0
    finally:
        for manifest in manifests:
            if manifest["kind"] not in ("Namespace", "ResourceQuota", "LimitRange"):
                cluster.kubectl("delete", manifest["kind"].lower(), manifest["metadata"]["name"], "--ignore-not-found")


def test_a_tenant_namespace_refuses_pods_and_templates_that_pick_their_own_gpus(cluster):
    """tenancy.tenant_gpu_device_policy, run by a real API server: NVIDIA_VISIBLE_DEVICES=all (or any NVIDIA_*
    variable), the nvidia runtime class and another scheduler are refused in a tenant's pods and in the pod
    templates of its Deployments, Jobs and CronJobs; a GPU pod and a GPU Job that ask for nvidia.com/gpu, and a
    pod with an ordinary variable, are admitted."""
    config, manifests = tenant_stack()
    tenant = "vision"
    # The class the GPU operator declares: without it the RuntimeClass admission refuses the pod before the policy.
    runtime_class = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"}, "handler": "nvidia"}
    if cluster.get("namespace", config.cluster.namespace) is None:
        cluster.kubectl("create", "namespace", config.cluster.namespace)
    cluster.apply([*manifests, runtime_class])
    try:
        wait_until(f"ServiceAccount {tenant}/default", partial(cluster.get, "serviceaccount", "default", tenant))
        wait_for_quotas(cluster, tenant)

        def create(manifest: dict[str, Any]) -> subprocess.CompletedProcess:
            return cluster.kubectl("create", "--dry-run=server", "-f", "-", check=False, stdin=json.dumps(manifest))

        all_gpus = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
        plain = tenant_pod(tenant)
        picking = with_container(plain, env=all_gpus)
        policy = "ValidatingAdmissionPolicy 'slurm-tenant-gpu-devices'"
        wait_until("the GPU device policy", lambda: policy in create(picking).stderr, timeout=60)

        def job(pod: dict[str, Any], **labels: str) -> dict[str, Any]:
            return {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "train", "namespace": tenant, "labels": {kueue.QUEUE_LABEL: tenant, **labels}},
                "spec": {"template": {"spec": {**pod["spec"], "restartPolicy": "Never"}}},
            }

        def deployment(pod: dict[str, Any]) -> dict[str, Any]:
            selector = {"app": "serve"}
            return {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "serve", "namespace": tenant},
                "spec": {
                    "selector": {"matchLabels": selector},
                    "template": {"metadata": {"labels": {**selector, kueue.QUEUE_LABEL: tenant}}, "spec": pod["spec"]},
                },
            }

        def cron_job(pod: dict[str, Any]) -> dict[str, Any]:
            return {
                "apiVersion": "batch/v1",
                "kind": "CronJob",
                "metadata": {"name": "nightly", "namespace": tenant},
                "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": job(pod)["spec"]}},
            }

        init_picking = copy.deepcopy(plain)
        init_picking["spec"]["initContainers"] = [{**copy.deepcopy(RESTRICTED_CONTAINER), "name": "init", "env": all_gpus}]
        refused = {
            "NVIDIA_VISIBLE_DEVICES=all without nvidia.com/gpu": picking,
            "NVIDIA_VISIBLE_DEVICES in an init container": init_picking,
            "another NVIDIA_ variable": with_container(plain, env=[{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "all"}]),
            "runtimeClassName nvidia": tenant_pod(tenant, runtimeClassName="nvidia"),
            "runtimeClassName nvidia with the variable": with_container(tenant_pod(tenant, runtimeClassName="nvidia"), env=all_gpus),
            "another scheduler": tenant_pod(tenant, schedulerName="my-scheduler"),
            "a Job's template with the variable": job(picking),
            "a Deployment's template with the nvidia class": deployment(tenant_pod(tenant, runtimeClassName="nvidia")),
            "a CronJob's template with the variable": cron_job(picking),
            "a Job's template with another scheduler": job(tenant_pod(tenant, schedulerName="my-scheduler")),
        }
        for case, manifest in refused.items():
            result = create(manifest)
            assert result.returncode != 0 and policy in result.stderr, (case, result.stderr)
        gpu_pod = tenant_pod(tenant, gpus=8, priorityClassName="slurm-prod")
        admitted = {
            "a GPU pod asking for nvidia.com/gpu": gpu_pod,
            "a GPU Job asking for nvidia.com/gpu": job(gpu_pod),
            "an ordinary variable": with_container(plain, env=[{"name": "CUDA_VISIBLE_DEVICES", "value": "0"}]),
            "default-scheduler named": tenant_pod(tenant, schedulerName="default-scheduler"),
        }
        for case, manifest in admitted.items():
            result = create(manifest)
            assert result.returncode == 0, (case, result.stderr)
    finally:
        for manifest in [*manifests, runtime_class]:
            if manifest["kind"] not in ("Namespace", "ResourceQuota", "LimitRange"):
                cluster.kubectl("delete", manifest["kind"].lower(), manifest["metadata"]["name"], "--ignore-not-found")


def test_a_tenant_namespace_confines_its_pods_to_its_nodes_counts_them_and_keeps_off_the_platforms_storage(cluster):
    """slurm-tenant-placement, the pods-and-storage quota and the LimitRange's min (components/tenancy.py), run by a
    real API server: a pod that does not select the tenant's nodes (or selects the system pool's) is refused, by
    selector or by node affinity, and the update lifting a scheduling gate is checked like a new pod; the pod
    past maxPods, a container below the minimum and a claim on the platform's classes are refused."""
    config, manifests = tenant_stack(maxPods=2, storage={"xplat-nfs": {"size": "10Gi", "claims": 1}})
    tenant = "vision"
    (system,) = [pool.selector for pool in config.node_pools if not pool.has_gpu]
    rwx = config.storage.storage_class.name
    if cluster.get("namespace", config.cluster.namespace) is None:
        cluster.kubectl("create", "namespace", config.cluster.namespace)
    cluster.apply(manifests)

    def create(manifest: dict[str, Any], *extra: str) -> subprocess.CompletedProcess:
        return cluster.kubectl("create", *extra, "-f", "-", check=False, stdin=json.dumps(manifest))

    def refused(result: subprocess.CompletedProcess, reason: str) -> bool:
        return result.returncode != 0 and reason in result.stderr

    def affinity(*terms: dict[str, str]) -> dict[str, Any]:
        selector_terms = [{"matchExpressions": [{"key": k, "operator": "In", "values": [v]} for k, v in term.items()]} for term in terms]
        return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": selector_terms}}}

    placement = "ValidatingAdmissionPolicy 'slurm-tenant-placement'"
    gated = tenant_pod(tenant, "gated", schedulingGates=[{"name": "kueue.x-k8s.io/admission"}], nodeSelector={})
    try:
        wait_until(f"ServiceAccount {tenant}/default", partial(cluster.get, "serviceaccount", "default", tenant))
        wait_for_quotas(cluster, tenant)
        unplaced = tenant_pod(tenant, nodeSelector={})
        wait_until("the placement policy", lambda: create(unplaced, "--dry-run=server").returncode != 0, timeout=60)
        assert refused(create(unplaced, "--dry-run=server"), placement), create(unplaced, "--dry-run=server").stderr
        for case, pod, admitted in (
            ("its nodes by nodeSelector", tenant_pod(tenant), True),
            ("its nodes by node affinity", tenant_pod(tenant, nodeSelector={}, affinity=affinity(tenant_nodes())), True),
            ("the system pool", tenant_pod(tenant, nodeSelector=dict(system)), False),
            ("part of its labels only", tenant_pod(tenant, nodeSelector=dict(list(tenant_nodes().items())[:1])), False),
            ("a second affinity term elsewhere", tenant_pod(tenant, nodeSelector={}, affinity=affinity(tenant_nodes(), system)), False),
        ):
            result = create(pod, "--dry-run=server")
            assert (result.returncode == 0) is admitted and (admitted or placement in result.stderr), (case, result.stderr)
        # Held by a gate (as Kueue holds the pods it manages), a pod waits unplaced; lifting the gate places it or is refused.
        assert create(gated).returncode == 0, create(gated).stderr
        ungate = cluster.kubectl(
            "patch", "pod", "gated", "-n", tenant, "--type=json", "-p", '[{"op":"remove","path":"/spec/schedulingGates"}]', check=False
        )
        assert refused(ungate, placement), ungate.stderr
        place = json.dumps([{"op": "remove", "path": "/spec/schedulingGates"}, {"op": "add", "path": "/spec/nodeSelector", "value": tenant_nodes()}])
        placed = cluster.kubectl("patch", "pod", "gated", "-n", tenant, "--type=json", "-p", place, check=False)
        assert placed.returncode == 0, placed.stderr
        # maxPods: 2 (the gated pod is one).
        assert create(tenant_pod(tenant, "second")).returncode == 0
        over = "exceeded quota: pods-and-storage"
        assert refused(create(tenant_pod(tenant, "third"), "--dry-run=server"), over)
        tiny = with_container(tenant_pod(tenant), resources={"requests": {"cpu": "1m", "memory": "1Mi"}})
        assert refused(create(tiny, "--dry-run=server"), "minimum cpu usage per Container is 10m")

        def claim(storage_class: str, size: str) -> dict[str, Any]:
            spec = {"storageClassName": storage_class, "accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": size}}}
            return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": tenant}, "spec": spec}

        assert rwx in platform_storage_classes(config)
        assert refused(create(claim(rwx, "1Gi"), "--dry-run=server"), over)
        # The class granted: up to its size.
        assert create(claim("xplat-nfs", "10Gi"), "--dry-run=server").returncode == 0
        assert refused(create(claim("xplat-nfs", "11Gi"), "--dry-run=server"), over)
        # A class the platform does not use stays the tenant's.
        assert create(claim("scratch", "1Ti"), "--dry-run=server").returncode == 0
    finally:
        cluster.kubectl("delete", "pods", "--all", "-n", tenant, "--ignore-not-found", "--wait=false")
        # Its maxPods and grant are this test's: the next one counts afresh under the stack's own.
        cluster.kubectl("delete", "resourcequota", "pods-and-storage", "-n", tenant, "--ignore-not-found")
        for manifest in manifests:
            if manifest["kind"] not in ("Namespace", "ResourceQuota", "LimitRange"):
                cluster.kubectl("delete", manifest["kind"].lower(), manifest["metadata"]["name"], "--ignore-not-found")


def test_the_scheduler_keeps_tenant_pods_off_slurm_workers_nodes(cluster):
    """A Slurm worker's required anti-affinity (components/slurm/common.py worker_anti_affinity), with the
    real scheduler on kwok nodes: tenant pods never join a worker's node, even when they ask for it, and a
    worker does not join a node that runs a tenant pod."""
    config, manifests = tenant_stack()
    tenant, slurm_namespace = "vision", config.cluster.namespace
    (pool,) = config.gpu_pools
    nodes = pool_nodes(pool.model_copy(update={"node_count": 2}))
    cluster.apply(nodes)
    cluster.apply([m for m in manifests if m["kind"] in ("Namespace", "ResourceQuota", "LimitRange")])
    if cluster.get("namespace", slurm_namespace) is None:
        cluster.kubectl("create", "namespace", slurm_namespace)
    for namespace in (tenant, slurm_namespace):
        wait_until(f"ServiceAccount {namespace}/default", partial(cluster.get, "serviceaccount", "default", namespace))
    wait_for_quotas(cluster, tenant)
    worker_node, other_node = (node["metadata"]["name"] for node in nodes)

    def worker(name: str, node: str) -> dict[str, Any]:
        """A slurmd pod as the operators place it (worker_placement), held to one node."""
        placement = worker_placement(config, pool)
        placement["nodeSelector"] = {**placement["nodeSelector"], "kubernetes.io/hostname": node}
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": slurm_namespace},
            "spec": {**placement, "containers": [{"name": "slurmd", "image": "slurmd", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
        }

    def node_of(namespace: str, name: str) -> str:
        return (cluster.get("pod", name, namespace) or {}).get("spec", {}).get("nodeName", "")

    def unschedulable(namespace: str, name: str) -> str:
        conditions = (cluster.get("pod", name, namespace) or {}).get("status", {}).get("conditions", [])
        return next((c.get("message", "") for c in conditions if c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"), "")

    try:
        cluster.apply([worker("slurmd-0", worker_node)])
        assert wait_until("the worker to be scheduled", partial(node_of, slurm_namespace, "slurmd-0")) == worker_node
        # Tenant pods that may go anywhere in the pool: never beside the worker.
        pool_pods = [tenant_pod(tenant, f"free-{i}", nodeSelector=dict(pool.selector)) for i in range(4)]
        cluster.apply(pool_pods)
        placed = [wait_until(f"free-{i} to be scheduled", partial(node_of, tenant, f"free-{i}")) for i in range(4)]
        assert set(placed) == {other_node}, placed
        # One that asks for the worker's node by its hostname is not placed at all.
        cluster.apply([tenant_pod(tenant, "onto-worker", nodeSelector={"kubernetes.io/hostname": worker_node})])
        reason = wait_until("onto-worker to be refused by the scheduler", partial(unschedulable, tenant, "onto-worker"))
        assert "anti-affinity" in reason and node_of(tenant, "onto-worker") == "", reason
        # And a worker held to a node where tenant pods run is not placed either.
        cluster.apply([worker("slurmd-1", other_node)])
        reason = wait_until("slurmd-1 to be refused by the scheduler", partial(unschedulable, slurm_namespace, "slurmd-1"))
        assert "anti-affinity" in reason and node_of(slurm_namespace, "slurmd-1") == "", reason
    finally:
        cluster.kubectl("delete", "pods", "--all", "-n", tenant, "--ignore-not-found", "--wait=false")
        cluster.kubectl("delete", "pods", "--all", "-n", slurm_namespace, "--ignore-not-found", "--wait=false")
        cluster.kubectl("delete", "nodes", *(node["metadata"]["name"] for node in nodes), "--ignore-not-found", "--wait=false")


def test_a_tenant_group_runs_its_workloads_and_cannot_open_its_namespace(cluster):
    """The Role slurm-tenant bound to prod-hoalac's vision group (tenants[].kubernetesGroups), asked of the real
    API server's RBAC as a member of that group, and the Services policy: ClusterIP only, no externalIPs."""
    config, manifests = tenant_stack()
    tenant = "vision"
    install_crds(cluster, sorted(KUEUE_DIR.glob("*.json")))  # RBAC knows a kind only once it is served
    if cluster.get("namespace", config.cluster.namespace) is None:
        cluster.kubectl("create", "namespace", config.cluster.namespace)
    cluster.apply(manifests)
    member = ["--as=dungpham", "--as-group=oidc:team-vision"]

    def may(*request: str, who: list[str] = member) -> bool:
        answer = cluster.kubectl("auth", "can-i", *request, "-n", tenant, *who, check=False).stdout.strip()
        assert answer in ("yes", "no"), (request, answer)
        return answer == "yes"

    try:
        for request in (
            ("create", "jobs.batch"),
            ("delete", "pods"),
            ("create", "pods/exec"),
            ("create", "services"),
            ("list", "localqueues.kueue.x-k8s.io"),
        ):
            assert may(*request), request
        for refused_request in (
            ("delete", "networkpolicies.networking.k8s.io/default-deny"),
            ("create", "networkpolicies.networking.k8s.io"),
            ("patch", "resourcequotas/gpu-guarantee"),
            ("delete", "limitranges/container-defaults"),
            ("create", "rolebindings.rbac.authorization.k8s.io"),
            ("update", "pods", "--subresource=ephemeralcontainers"),
            ("create", "pods", "--subresource=binding"),
            ("create", "serviceaccounts", "--subresource=token"),
            ("delete", f"namespaces/{tenant}"),
        ):
            assert not may(*refused_request), refused_request
        # Someone outside the group gets nothing there.
        assert not may("create", "jobs.batch", who=["--as=mallory", "--as-group=oidc:team-speech"])

        def service(name: str, **spec: Any) -> dict[str, Any]:
            return {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": name, "namespace": tenant},
                "spec": {"selector": {"app": "train"}, "ports": [{"port": 29500}], **spec},
            }

        def create(manifest: dict[str, Any], *extra: str) -> subprocess.CompletedProcess:
            return cluster.kubectl("create", *member, *extra, "-f", "-", check=False, stdin=json.dumps(manifest))

        policy = "ValidatingAdmissionPolicy 'slurm-tenant-services'"
        wait_until("the Services policy", lambda: create(service("lb", type="LoadBalancer"), "--dry-run=server").returncode != 0, timeout=60)
        exposing: dict[str, dict[str, Any]] = {
            "lb": {"type": "LoadBalancer"},
            "np": {"type": "NodePort"},
            "mitm": {"externalIPs": ["100.100.100.200"]},
        }
        for name, spec in exposing.items():
            refused = create(service(name, **spec), "--dry-run=server")
            assert refused.returncode != 0 and policy in refused.stderr, (name, refused.stderr)
        # A headless Service for a distributed job is the tenant's to make; turning it into a NodePort is not.
        created = create(service("rendezvous", clusterIP="None"))
        assert created.returncode == 0, created.stderr
        changed = cluster.kubectl("patch", "service", "rendezvous", "-n", tenant, *member, "-p", '{"spec":{"externalIPs":["10.0.0.9"]}}', check=False)
        assert changed.returncode != 0 and policy in changed.stderr, changed.stderr
    finally:
        cluster.kubectl("delete", "service", "rendezvous", "-n", tenant, "--ignore-not-found")
        for manifest in manifests:
            if manifest["kind"] not in ("Namespace", "ResourceQuota", "LimitRange", "Role", "RoleBinding"):
                cluster.kubectl("delete", manifest["kind"].lower(), manifest["metadata"]["name"], "--ignore-not-found")


# Each operator that takes researchers, on an example stack that shows one with a key (docs/onboarding.md).
RESEARCHER_STACKS = {"soperator-4.1.7": "prod-hoalac", "ack-2024-12": "staging-hangzhou", "slinky-1.2.1": "prod-hcm"}


@pytest.mark.parametrize("operator", list(RESEARCHER_STACKS))
def test_the_directory_its_reconciler_and_the_logins_are_accepted_by_the_api_server(cluster, operator):
    """What researchers' own logins add, put to the real API server with strict validation: the directory's server
    (schema init container), its schema and reconciler ConfigMaps, the reconciler Job, and each operator's login
    objects of ours (soperator's sshd_config ConfigMap, ACK's login Deployment and files); the login pods of ours
    carry no Kubernetes token."""
    from components.identity import reconciler, schema, server

    config = parse_config(stack_config(RESEARCHER_STACKS[operator]))
    assert any(user.ssh_public_keys for tenant in config.tenants for user in tenant.users), operator
    namespace = config.cluster.namespace
    ours = [r.manifest for r in operator_module(config).render(config) if r.manifest["kind"] in ("ConfigMap", "Deployment") and "login" in r.role]
    with_spec = [
        server.ldap_statefulset(config.ldap, namespace),
        reconciler.reconciler_job(config.ldap, namespace, config.tenants, system_priority_class_name(config)),
        *(m for m in ours if m["kind"] == "Deployment"),
    ]
    schema_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "ldap-schema", "namespace": namespace},
        "data": {schema.SCHEMA_FILE: schema.schema_ldif()},
    }
    config_maps = [
        schema_map,
        reconciler.reconciler_configmap(config.ldap, namespace, config.tenants),
        *(m for m in ours if m["kind"] == "ConfigMap"),
    ]
    if cluster.get("namespace", namespace) is None:
        cluster.kubectl("create", "namespace", namespace)
    # Built-in kinds: strict validation refuses an unknown field outright (the server normalises quantities, 3000m to 3).
    for manifest in [*with_spec, *config_maps]:
        result = cluster.kubectl("create", "--dry-run=server", "--validate=strict", "-o", "json", "-f", "-", check=False, stdin=json.dumps(manifest))
        assert result.returncode == 0, f"{operator}: {manifest['kind']} {manifest['metadata']['name']}: {result.stderr}"
        if manifest["kind"] == "ConfigMap":
            assert json.loads(result.stdout)["data"] == manifest["data"], manifest["metadata"]["name"]
    pods = [m["spec"]["template"]["spec"] for m in with_spec[1:]]
    assert all(pod["automountServiceAccountToken"] is False for pod in pods), operator
    expected = {"soperator-4.1.7": {"ConfigMap"}, "ack-2024-12": {"ConfigMap", "Deployment"}, "slinky-1.2.1": set()}[operator]
    assert {m["kind"] for m in ours} == expected, (operator, [m["metadata"]["name"] for m in ours])


# The awaited custom resources alone, declared as the SlurmCluster component declares them (with the readiness timeout).
READINESS_PROGRAM = {
    "Pulumi.yaml": yaml.safe_dump({"name": "readiness", "runtime": {"name": "python", "options": {"virtualenv": ".venv"}}}),
    "__main__.py": """\
import json

import pulumi
import pulumi_kubernetes as k8s

for index, manifest in enumerate(json.load(open("awaited.json"))):
    k8s.apiextensions.CustomResource(
        f"awaited-{index}",
        api_version=manifest["apiVersion"],
        kind=manifest["kind"],
        metadata=manifest["metadata"],
        spec=manifest["spec"],
        opts=pulumi.ResourceOptions(custom_timeouts=pulumi.CustomTimeouts(create="5m")),
    )
""",
}


def resource_name(manifest: dict[str, Any]) -> str:
    """`<plural>.<group>`: soperator's SlurmCluster and ACK's share a kind name."""
    return f"{manifest['kind'].lower()}s.{manifest['apiVersion'].rpartition('/')[0]}"


def awaited_custom_resources(stack: str) -> list[dict[str, Any]]:
    config = parse_config(stack_config(stack))
    rendered = [r.manifest for r in operator_module(config).render(config) if not is_builtin(r.manifest)]
    return [m for m in rendered if WAIT_FOR_ANNOTATION in (m["metadata"].get("annotations") or {})]


def test_pulumi_up_waits_until_ack_and_slinky_report_slurm_ready(cluster, tmp_path):
    """The engine and the Kubernetes provider against the real API server, with the operators' CRDs and no operator:
    the test plays ack-slurm-operator and Slinky, and `pulumi up` ends only once both report ready on the status
    their CRDs declare (ACK's SlurmCluster .status.state, each Slinky NodeSet's .status.readyReplicas)."""
    from tests.engine import new_workspace

    install_crds(cluster, [ACK_SCHEMAS["slurmctld"], *sorted(SLINKY_DIR.glob("*.json"))])
    awaited = awaited_custom_resources("staging-hangzhou") + awaited_custom_resources("prod-hcm")
    assert {m["kind"] for m in awaited} == {"SlurmCluster", "NodeSet"}, awaited
    for namespace in {m["metadata"]["namespace"] for m in awaited}:
        if cluster.get("namespace", namespace) is None:
            cluster.kubectl("create", "namespace", namespace)
    ws = new_workspace(tmp_path, stack="readiness", program={**READINESS_PROGRAM, "awaited.json": json.dumps(awaited)})
    ws.env["KUBECONFIG"] = str(cluster.kubeconfig)
    up = subprocess.Popen(
        ["pulumi", "up", "--yes", "--skip-preview", "--stack", "readiness", "--non-interactive"],
        cwd=ws.project,
        env=ws.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:

        def stored() -> list[dict[str, Any]]:
            found = [cluster.get(resource_name(m), m["metadata"]["name"], m["metadata"]["namespace"]) for m in awaited]
            return found if all(found) else []

        objects = wait_until("the awaited custom resources in the API server", stored, timeout=300)

        def report(index: int, status: dict[str, Any]) -> None:
            kind, meta = resource_name(awaited[index]), awaited[index]["metadata"]
            body = {"status": {**status, "observedGeneration": objects[index]["metadata"]["generation"]}}
            cluster.kubectl("patch", kind, meta["name"], "-n", meta["namespace"], "--subresource=status", "--type=merge", "-p", json.dumps(body))

        nodesets = [i for i, m in enumerate(awaited) if m["kind"] == "NodeSet"]
        (ack_cluster,) = [i for i, m in enumerate(awaited) if m["kind"] == "SlurmCluster"]
        # Not ready yet, in each operator's words: one worker short, the cluster still progressing.
        report(ack_cluster, {"state": "progressing", "reason": "waiting for slurmctld"})
        for i in nodesets:
            replicas = awaited[i]["spec"]["replicas"]
            report(i, {"replicas": replicas, "readyReplicas": replicas - 1, "selector": "app=slurmd", "nodeSetHash": "h"})
        time.sleep(10)
        assert up.poll() is None, f"pulumi up ended before Slurm was ready:\n{up.communicate()[0]}"
        report(ack_cluster, {"state": "ready"})
        for i in nodesets:
            replicas = awaited[i]["spec"]["replicas"]
            report(i, {"replicas": replicas, "readyReplicas": replicas, "selector": "app=slurmd", "nodeSetHash": "h"})
        output, _ = up.communicate(timeout=180)
        assert up.returncode == 0, output
    finally:
        if up.poll() is None:
            up.kill()
            up.communicate()
        for manifest in awaited:
            meta = manifest["metadata"]
            cluster.kubectl("delete", resource_name(manifest), meta["name"], "-n", meta["namespace"], "--ignore-not-found", "--wait=false")

"""Kueue 0.19.2's real controller on the kube tier: it reads the objects components/kueue.py renders and
admits, borrows, reclaims and places real Jobs and pod groups as the tenants' kueueCells say.

One control plane (scripts/kube-local.sh: API server, controller manager with the job controller,
scheduler, kwok nodes shaped like the pools with their topology labels) and one Kueue controller
(tests/kube.py KueueController: the chart's Configuration, webhooks on loopback) serve the module,
stopped by PID pass or fail. The stack is prod-hoalac made Kueue-sized: pool h100 with 4 Slurm
workers and 2 Kueue nodes (16 GPUs: vision's kueueCells 8 and speech's 8, speech now with a
namespace), in racks of 2 nodes and blocks of 4. Its tenant namespaces, quotas, policies, priority
classes, its Slurm cluster (soperator 4.1.7's stand-in charts) and every Kueue object are created by a
real `pulumi up` of that stack (the kwok stack given tenants), with Kueue's controller running. Stand-in
slurmd pods (the workers' placement and GPU requests from components/slurm/common.py) hold all GPUs of
four nodes, as soperator's workers do.

kwok runs the pods: a Job's pod annotated `kwok.slurm-platform/runs: until-deleted` keeps running
(scripts/kube/stages/job-pod-complete.yaml), a pod group's pods run until deleted. Every wait is bounded.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
import yaml
from kubernetes.utils import parse_quantity

from components import kueue, tenancy
from components.config import parse_config
from components.slurm.common import TENANT_NAMESPACE_LABEL, system_priority_class_name, worker_placement
from tests.engine import Workspace
from tests.harness import stack_config
from tests.kube import CHARTS_DIR, KWOK_STACK, KueueController, LocalCluster, contains, kwok_workspace, wait_until
from tests.test_kube_operators import RESTRICTED_CONTAINER, RESTRICTED_POD_SECURITY, wait_for_quotas

BLOCK, RACK, HOST = "cloud.example.com/block", "cloud.example.com/rack", "kubernetes.io/hostname"
RUNS = {"kwok.slurm-platform/runs": "until-deleted"}
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
POD_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
POD_GROUP_COUNT = "kueue.x-k8s.io/pod-group-total-count"
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
GPU = tenancy.GPU
TENANTS = ("vision", "speech")


def kueue_stack() -> dict[str, Any]:
    """The kwok stack given tenants: prod-hoalac's cluster, tenants and h100 pool, Kueue-sized (6 nodes, 4 Slurm
    workers, racks and blocks), on soperator 4.1.7's stand-in charts (tenants need its partitions and preemption) and
    the Kueue controller this module runs (install: false). Accounting and LDAP as the kwok stack has them."""
    raw = copy.deepcopy(stack_config(KWOK_STACK))
    hoalac = stack_config("prod-hoalac")
    h100 = copy.deepcopy(next(pool for pool in hoalac["nodePools"] if pool["name"] == "h100"))
    h100.update(nodeCount=6, slurmWorkers=4, topologyLabels=[BLOCK, RACK])
    raw["nodePools"] = [h100 if pool.get("gpusPerNode") else pool for pool in raw["nodePools"]]
    raw["operators"]["soperator"] = {"version": "4.1.7", "repository": f"./{CHARTS_DIR}/soperator-4.1.7"}
    raw["operators"]["certManager"] = {"install": False}  # soperator 4.x would install it; kube-local.sh has no stand-in
    raw["operators"]["kueue"] = {"enabled": True, "install": False}
    raw["cluster"] = copy.deepcopy(hoalac["cluster"])
    raw["slurm"]["worker"] = {"slurmd": hoalac["slurm"]["worker"]["slurmd"]}
    raw["tenants"] = copy.deepcopy(hoalac["tenants"])
    speech = next(tenant for tenant in raw["tenants"] if tenant["name"] == "speech")
    speech.update(namespace=True, kueueCells=[{"pool": "h100", "gpusPerCell": 4, "cells": 2}])
    return raw


STACK = kueue_stack()
CONFIG = parse_config(STACK)
POOL = next(pool for pool in CONFIG.gpu_pools if pool.name == "h100")
FLAVOR = kueue.flavor_name(CONFIG, POOL)


@pytest.fixture(scope="module")
def controller(cluster: LocalCluster) -> KueueController:
    cluster.add_nodes(CONFIG)
    controller = KueueController(cluster, CONFIG)
    controller.start()
    return controller


@pytest.fixture(scope="module")
def stack(cluster: LocalCluster, controller: KueueController, tmp_path_factory) -> Workspace:
    """The stack with tenants, up: a real `pulumi up` creates the tenants' namespaces, quotas, policies and priority classes,
    the Slurm cluster, and every Kueue object, with Kueue's controller already reading them."""
    ws = kwok_workspace(tmp_path_factory.mktemp("kueue-stack"), cluster)
    stack_file = ws.project / f"Pulumi.{KWOK_STACK}.yaml"
    settings = yaml.safe_load(stack_file.read_text())
    stack_file.write_text(yaml.safe_dump({**settings, "config": {f"slurm-platform:{key}": value for key, value in STACK.items()}}))
    ws.pulumi("up", "--yes", "--skip-preview", stack=KWOK_STACK)
    for tenant in TENANTS:
        wait_for_quotas(cluster, tenant)
    return ws


@pytest.fixture(scope="module")
def kube(cluster: LocalCluster, controller: KueueController, stack: Workspace) -> KueueController:
    cluster.apply(slurmd_stand_ins())
    namespace = CONFIG.cluster.namespace
    wait_until("every stand-in slurmd pod to run", lambda: len(running_pods(cluster, namespace, "app=slurmd")) == POOL.worker_replicas, timeout=60)
    return controller


@pytest.fixture(autouse=True)
def clean(cluster: LocalCluster, kube: KueueController) -> Iterator[None]:
    """Each test starts with no tenant workload and leaves none, pass or fail."""
    yield
    delete_all(cluster)


def slurmd_stand_ins() -> list[dict[str, Any]]:
    """A slurmd pod per Slurm worker: the operators' placement on the pool (components/slurm/common.py) and all of its node's GPUs."""
    pods = []
    gpus = {GPU: str(POOL.gpus_per_node)}  # kwok's nodes have no RDMA devices: the GPUs are what Kueue could take
    for index in range(POOL.worker_replicas):
        container = {
            **copy.deepcopy(RESTRICTED_CONTAINER),
            "name": "slurmd",
            "resources": {"limits": gpus, "requests": {"cpu": "100", "memory": "1000Gi", **gpus}},
        }
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"worker-{index}",
                    "namespace": CONFIG.cluster.namespace,
                    "labels": {"app": "slurmd", "name": f"worker-{index}"},
                },
                "spec": {**worker_placement(CONFIG, POOL), "priorityClassName": system_priority_class_name(CONFIG), "containers": [container]},
            }
        )
    return pods


def running_pods(cluster: LocalCluster, namespace: str, selector: str = "") -> list[dict[str, Any]]:
    pods = json.loads(cluster.kubectl("get", "pods", "-n", namespace, "-o", "json", *(["-l", selector] if selector else [])).stdout)["items"]
    return [p for p in pods if p.get("status", {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]


def slurm_nodes(cluster: LocalCluster) -> set[str]:
    return {pod["spec"]["nodeName"] for pod in running_pods(cluster, CONFIG.cluster.namespace, "app=slurmd")}


def pod_template(namespace: str, gpus: int, annotations: dict[str, str] | None = None, **labels: str) -> dict[str, Any]:
    container = copy.deepcopy(RESTRICTED_CONTAINER)
    container["resources"] = {"limits": {GPU: str(gpus)}, "requests": {"cpu": "4", "memory": "32Gi", GPU: str(gpus)}}
    return {
        "metadata": {"labels": labels, "annotations": {**RUNS, **(annotations or {})}},
        "spec": {
            "securityContext": dict(RESTRICTED_POD_SECURITY),
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "restartPolicy": "Never",
            "containers": [container],
        },
    }


def job(namespace: str, name: str, gpus: int, pods: int = 1, priority: str | None = None, topology: str | None = None) -> dict[str, Any]:
    """A Job of `pods` pods of `gpus` GPUs each, on the namespace's LocalQueue; `topology`: all its pods in one domain of that level."""
    labels = {kueue.QUEUE_LABEL: namespace, **({PRIORITY_LABEL: f"slurm-{priority}"} if priority else {})}
    template = pod_template(namespace, gpus, {REQUIRED_TOPOLOGY: topology} if topology else None)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"parallelism": pods, "completions": pods, "backoffLimit": 0, "template": template},
    }


def pod_group(namespace: str, name: str, gpus: int, pods: int, topology: str | None = None) -> list[dict[str, Any]]:
    """A plain pod group (Kueue's pod integration): `pods` pods admitted together as one workload."""
    group = []
    for index in range(pods):
        template = pod_template(namespace, gpus, {POD_GROUP_COUNT: str(pods), **({REQUIRED_TOPOLOGY: topology} if topology else {})})
        template["metadata"]["labels"] = {kueue.QUEUE_LABEL: namespace, POD_GROUP_LABEL: name}
        group.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{name}-{index}", "namespace": namespace, **template["metadata"]},
                "spec": template["spec"],
            }
        )
    return group


def workloads(cluster: LocalCluster, namespace: str) -> dict[str, dict[str, Any]]:
    """The namespace's Workloads by the name of the Job or pod group they stand for."""
    items = json.loads(cluster.kubectl("get", "workloads.kueue.x-k8s.io", "-n", namespace, "-o", "json").stdout)["items"]
    named = {}
    for item in items:
        refs = item["metadata"].get("ownerReferences", [])
        named[refs[0]["name"] if refs and refs[0]["kind"] == "Job" else item["metadata"]["name"]] = item
    return named


def condition(workload: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in workload.get("status", {}).get("conditions", []) if c["type"] == kind), {})


def summary(found: dict[str, dict[str, Any]]) -> dict[str, list[tuple[str, str, str, str]]]:
    """Each Workload's conditions, short enough to read in a failure."""
    return {
        name: [(c["type"], c["status"], c.get("reason", ""), c.get("message", "")[:300]) for c in w.get("status", {}).get("conditions", [])]
        for name, w in found.items()
    }


def admitted(workload: dict[str, Any]) -> bool:
    return condition(workload, "Admitted").get("status") == "True"


def wait_workloads(cluster: LocalCluster, namespace: str, what: str, check, timeout: float = 60) -> dict[str, dict[str, Any]]:
    def state():
        found = workloads(cluster, namespace)
        return found if check(found) else None

    try:
        return wait_until(what, state, timeout=timeout)
    except AssertionError:
        conditions = {
            name: [(c["type"], c["status"], c.get("message")) for c in w.get("status", {}).get("conditions", [])]
            for name, w in workloads(cluster, namespace).items()
        }
        pytest.fail(f"timed out after {timeout} s waiting for {what}; workloads: {conditions}")


def delete_all(cluster: LocalCluster) -> None:
    """Every Job and pod of the tenants gone, and with them their Workloads. Kueue keeps its finalizer on a
    pod group's pods until they stop; kwok's nodes run no container, so the test reports them stopped
    (phase Succeeded: a group whose pods failed waits for replacements), as a kubelet does once its containers exit."""
    for namespace in TENANTS:
        cluster.kubectl("delete", "jobs", "--all", "-n", namespace, "--cascade=foreground", "--wait=false")
        cluster.kubectl("delete", "pods", "--all", "-n", namespace, "--wait=false")
    for namespace in TENANTS:
        for pod in json.loads(cluster.kubectl("get", "pods", "-n", namespace, "-o", "json").stdout)["items"]:
            if "kueue.x-k8s.io/managed" in pod["metadata"].get("finalizers", []) and pod["status"].get("phase") == "Running":
                patch = json.dumps({"status": {"phase": "Succeeded"}})
                cluster.kubectl(
                    "patch", "pod", pod["metadata"]["name"], "-n", namespace, "--subresource=status", "--type=merge", "-p", patch, check=False
                )
    for namespace in TENANTS:
        wait_until(f"{namespace}'s pods and workloads to go", partial(tenant_is_empty, cluster, namespace), timeout=60)


def tenant_is_empty(cluster: LocalCluster, namespace: str) -> bool:
    return not workloads(cluster, namespace) and not json.loads(cluster.kubectl("get", "pods,jobs", "-n", namespace, "-o", "json").stdout)["items"]


def cluster_queue(cluster: LocalCluster, name: str) -> dict[str, Any]:
    return cluster.require("clusterqueues.kueue.x-k8s.io", name)


def gpus_in_use(queue: dict[str, Any]) -> tuple[int, int]:
    """(GPUs admitted, of them borrowed) on the flavor, from the ClusterQueue's status."""
    for flavor in queue.get("status", {}).get("flavorsUsage", []):
        if flavor["name"] == FLAVOR:
            for resource in flavor["resources"]:
                if resource["name"] == GPU:
                    return int(resource["total"]), int(resource.get("borrowed", 0))
    return 0, 0


def assert_usage(cluster: LocalCluster, queue: str, gpus: int, borrowed: int) -> None:
    """The ClusterQueue's status reports `gpus` admitted, `borrowed` of them from the cohort (it follows admission shortly)."""
    try:
        wait_until(f"{queue}'s usage", lambda: gpus_in_use(cluster_queue(cluster, queue)) == (gpus, borrowed), timeout=30)
    except AssertionError:
        pytest.fail(f"ClusterQueue {queue} reports {gpus_in_use(cluster_queue(cluster, queue))} GPUs (admitted, borrowed), not {(gpus, borrowed)}")


def test_jobs_are_suspended_and_defaulted_by_kueues_webhook(cluster, kube):
    """The real webhook, over loopback: a Job created running comes back suspended, and becomes a Workload."""
    running = job("vision", "probe", 1)
    running["spec"]["suspend"] = False
    created = json.loads(cluster.kubectl("create", "-o", "json", "-f", "-", stdin=json.dumps(running)).stdout)
    assert created["spec"]["suspend"] is True
    wait_workloads(cluster, "vision", "the probe's Workload", lambda w: "probe" in w)


def submit(cluster: LocalCluster, *manifests: dict[str, Any]) -> None:
    for manifest in manifests:
        cluster.kubectl("create", "-f", "-", stdin=json.dumps(manifest))


def assert_runs(cluster: LocalCluster, namespace: str, name: str, pods: int) -> list[dict[str, Any]]:
    """The admitted Job's pods all run: none refused by the namespace's ResourceQuota (no FailedCreate),
    each on a node of the flavor's pool that no slurmd pod uses."""
    selector = f"batch.kubernetes.io/job-name={name}"
    running = wait_until(
        f"{namespace}/{name}'s {pods} pods to run", lambda: (r := running_pods(cluster, namespace, selector)) and len(r) == pods and r, timeout=60
    )
    events = json.loads(cluster.kubectl("get", "events", "-n", namespace, "-o", "json").stdout)["items"]
    assert not [e["message"] for e in events if e["reason"] == "FailedCreate" and "quota" in e["message"]]
    assert_placed(cluster, running)
    return running


def assert_placed(cluster: LocalCluster, pods: list[dict[str, Any]]) -> None:
    taken = slurm_nodes(cluster)
    assert len(taken) == POOL.worker_replicas, "every slurmd pod still runs on a node of its own"
    for pod in pods:
        node = cluster.require("node", pod["spec"]["nodeName"])
        assert POOL.selector.items() <= node["metadata"]["labels"].items(), (pod["metadata"]["name"], node["metadata"]["name"])
        assert node["metadata"]["name"] not in taken, f"{pod['metadata']['name']} runs beside a slurmd pod on {node['metadata']['name']}"


def pending_reason(cluster: LocalCluster, namespace: str, name: str) -> str:
    """The Workload waits for quota: its QuotaReserved condition is False; its message says why."""
    found = wait_workloads(
        cluster,
        namespace,
        f"{namespace}/{name} to wait for quota",
        lambda w: name in w and condition(w[name], "QuotaReserved").get("status") == "False",
    )
    assert not admitted(found[name])
    return condition(found[name], "QuotaReserved")["message"]


def wait_admitted(cluster: LocalCluster, namespace: str, *names: str) -> dict[str, dict[str, Any]]:
    return wait_workloads(cluster, namespace, f"{namespace}: {', '.join(names)} admitted", lambda w: all(n in w and admitted(w[n]) for n in names))


def as_quantities(value: Any) -> Any:
    """Quantities as numbers: the API server stores 112000m as 112 and 1280000Mi as 1250Gi."""
    if isinstance(value, dict):
        return {k: as_quantities(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_quantities(v) for v in value]
    if isinstance(value, (int, str)) and not isinstance(value, bool):
        try:
            return parse_quantity(value)
        except ValueError:
            return value
    return value


def test_the_controller_reports_every_rendered_object_active(cluster, kube, stack):
    """The up created every Kueue object the program renders (each in the stack's state), stored verbatim, each
    flavor and topology a ClusterQueue names exists, and the controller reports each queue Active (a ClusterQueue
    is inactive while a flavor, its topology or anything it names is missing or unsupported)."""
    rendered = [r.manifest for r in kueue.render(CONFIG) if r.manifest["apiVersion"] == kueue.API_VERSION]
    kinds = {m["kind"] for m in rendered}
    assert kinds == {"Topology", "ResourceFlavor", "WorkloadPriorityClass", "ClusterQueue", "LocalQueue"}, kinds
    state = json.loads(stack.pulumi("stack", "export", stack=KWOK_STACK).stdout)["deployment"]["resources"]
    created = {(r["type"], r["outputs"]["metadata"]["name"]) for r in state if r["type"].startswith(f"kubernetes:{kueue.API_VERSION}:")}
    assert created == {(f"kubernetes:{m['apiVersion']}:{m['kind']}", m["metadata"]["name"]) for m in rendered}, created
    for manifest in rendered:
        stored = cluster.require(f"{manifest['kind'].lower()}.kueue.x-k8s.io", manifest["metadata"]["name"], manifest["metadata"].get("namespace"))
        assert contains(as_quantities(stored), as_quantities({k: v for k, v in manifest.items() if k != "metadata"})), manifest["metadata"]["name"]
    names = {kind: {m["metadata"]["name"] for m in rendered if m["kind"] == kind} for kind in kinds}
    for manifest in rendered:
        if manifest["kind"] == "ClusterQueue":
            flavors = {f["name"] for group in manifest["spec"]["resourceGroups"] for f in group["flavors"]}
            assert flavors and flavors <= names["ResourceFlavor"], (manifest["metadata"]["name"], flavors)
        if manifest["kind"] == "ResourceFlavor":
            assert manifest["spec"]["topologyName"] in names["Topology"], manifest["metadata"]["name"]
    queues = [m for m in rendered if m["kind"] in ("ClusterQueue", "LocalQueue")]
    assert {m["metadata"]["name"] for m in queues if m["kind"] == "ClusterQueue"} == {"vision", "speech"}

    def inactive() -> list[str]:
        found = []
        for manifest in queues:
            stored = cluster.require(
                f"{manifest['kind'].lower()}.kueue.x-k8s.io", manifest["metadata"]["name"], manifest["metadata"].get("namespace")
            )
            active = next((c for c in stored.get("status", {}).get("conditions", []) if c["type"] == "Active"), None)
            if not active or active["status"] != "True":
                found.append(f"{manifest['kind']} {manifest['metadata']['name']}: {active}")
        return found

    try:
        wait_until("every queue Active", lambda: not inactive(), timeout=60)
    except AssertionError:
        pytest.fail(f"inactive: {inactive()}")


def test_a_tenant_is_admitted_up_to_its_cells_and_the_next_job_waits(cluster, kube):
    submit(cluster, job("speech", "s-1", 4), job("speech", "s-2", 4))
    wait_admitted(cluster, "speech", "s-1", "s-2")
    submit(cluster, job("vision", "v-1", 8, priority="prod"))
    wait_admitted(cluster, "vision", "v-1")
    submit(cluster, job("vision", "v-2", 1, priority="prod"))
    message = pending_reason(cluster, "vision", "v-2")
    assert "insufficient" in message, message
    assert_usage(cluster, "vision", 8, 0)
    assert_usage(cluster, "speech", 8, 0)
    for namespace, name, pods in (("speech", "s-1", 1), ("speech", "s-2", 1), ("vision", "v-1", 1)):
        assert_runs(cluster, namespace, name, pods)


def test_borrowing_stops_at_the_cap_and_the_lender_reclaims_by_preemption(cluster, kube):
    # speech fills its own 8 GPUs (one Kueue node), then borrows vision's idle GPUs up to its borrowingCap (4), no further.
    submit(cluster, job("speech", "s-1", 8))
    wait_admitted(cluster, "speech", "s-1")
    # Kueue reclaims from the most recently admitted first, by the Admitted condition's time, which has whole
    # seconds: admitted in the same second, either job may be taken (one run in three took s-1).
    time.sleep(1.1)
    submit(cluster, job("speech", "s-2", 4))
    wait_admitted(cluster, "speech", "s-2")
    assert_usage(cluster, "speech", 12, 4)
    submit(cluster, job("speech", "s-3", 4))
    message = pending_reason(cluster, "speech", "s-3")
    # 4 GPUs of the cohort are idle (vision's): what stops it is its borrowingLimit.
    assert "insufficient unused quota for nvidia.com/gpu" in message, message
    assert_usage(cluster, "vision", 0, 0)
    for name in ("s-1", "s-2"):
        assert_runs(cluster, "speech", name, 1)  # 12 GPUs: the namespace quota (own 8 + cap 4) lets every pod in
    cluster.kubectl("delete", "job", "s-3", "-n", "speech", "--cascade=foreground")
    # vision wants its 8: Kueue preempts the borrower, whose Job is suspended and requeued.
    submit(cluster, job("vision", "v-1", 8, priority="prod"))
    wait_admitted(cluster, "vision", "v-1")
    assert_runs(cluster, "vision", "v-1", 1)
    found = workloads(cluster, "speech")
    assert admitted(found["s-1"]) and not admitted(found["s-2"]), summary(found)
    assert condition(found["s-2"], "Evicted").get("reason") == "Preempted", condition(found["s-2"], "Evicted")
    assert condition(found["s-2"], "Preempted").get("reason") == "InCohortReclamation", condition(found["s-2"], "Preempted")
    assert cluster.require("job", "s-2", "speech")["spec"]["suspend"] is True
    assert_usage(cluster, "speech", 8, 0)
    # The lender's job ends: the borrower is readmitted and runs again.
    cluster.kubectl("delete", "job", "v-1", "-n", "vision", "--cascade=foreground")
    wait_admitted(cluster, "speech", "s-2")
    assert_runs(cluster, "speech", "s-2", 1)


def test_prod_before_test_before_oppo_within_a_tenant(cluster, kube):
    submit(cluster, job("speech", "s-1", 8))  # speech's own 8: nothing for vision to borrow
    submit(cluster, job("vision", "blocker", 8, priority="prod"))
    wait_admitted(cluster, "vision", "blocker")
    for level in ("oppo", "test", "prod"):  # the lowest first: admission order is not submission order
        submit(cluster, job("vision", level, 8, priority=level))
        pending_reason(cluster, "vision", level)
    waiting = ["prod", "test", "oppo"]
    for done in ("blocker", "prod", "test"):
        cluster.kubectl("delete", "job", done, "-n", "vision", "--cascade=foreground")
        first = waiting.pop(0)
        found = wait_admitted(cluster, "vision", first)
        assert not [level for level in waiting if admitted(found[level])], f"{first} is admitted first, then {waiting}"
    # A prod job preempts a running oppo job of its own tenant (withinClusterQueue: LowerPriority).
    submit(cluster, job("vision", "prod-2", 8, priority="prod"))
    found = wait_admitted(cluster, "vision", "prod-2")
    assert condition(found["oppo"], "Preempted").get("reason") == "InClusterQueue", condition(found["oppo"], "Preempted")


def test_admitted_pods_land_on_kueue_nodes_in_the_topology_they_ask_for(cluster, kube):
    """A pod group (Kueue's plain-pod integration) on one node, a Job's pods in one rack: on nodes of the
    flavor's pool that no slurmd pod uses, with every slurmd pod still running on its node."""
    submit(cluster, *pod_group("vision", "pg", 4, pods=2, topology=HOST))
    submit(cluster, job("speech", "racked", 2, pods=2, topology=RACK))
    wait_admitted(cluster, "vision", "pg")
    wait_admitted(cluster, "speech", "racked")
    group = wait_until(
        "the pod group to run", lambda: (r := running_pods(cluster, "vision", f"{POD_GROUP_LABEL}=pg")) and len(r) == 2 and r, timeout=60
    )
    assert_placed(cluster, group)
    assert len({p["spec"]["nodeName"] for p in group}) == 1
    racked = assert_runs(cluster, "speech", "racked", 2)
    assert len({cluster.require("node", p["spec"]["nodeName"])["metadata"]["labels"][RACK] for p in racked}) == 1


def test_a_restarted_slurmd_pod_finds_its_gpus_while_kueue_wants_more(cluster, kube):
    """Slurm beside Kueue: with every Kueue GPU in use, a slurmd pod restarts (an upgrade, an eviction) just as
    a tenant's new job is admitted. The job goes to a Kueue node (Kueue reclaims the GPUs lent there), never
    the node the slurmd pod left, and the slurmd pod gets its node's GPUs back."""
    submit(cluster, job("vision", "v-1", 8, priority="prod"), job("vision", "v-2", 8, priority="prod"))
    wait_admitted(cluster, "vision", "v-1", "v-2")
    assert_usage(cluster, "vision", 16, 8)
    worker = cluster.require("pod", "worker-0", CONFIG.cluster.namespace)
    vacated = worker["spec"]["nodeName"]
    cluster.kubectl("delete", "pod", "worker-0", "-n", CONFIG.cluster.namespace)
    submit(cluster, job("speech", "s-1", 8))
    wait_admitted(cluster, "speech", "s-1")
    (pod,) = wait_until("speech's job to run", lambda: running_pods(cluster, "speech", "batch.kubernetes.io/job-name=s-1"), timeout=60)
    node = cluster.require("node", pod["spec"]["nodeName"])
    assert node["metadata"]["name"] != vacated and POOL.kueue_node_labels.items() <= node["metadata"]["labels"].items()
    cluster.apply([m for m in slurmd_stand_ins() if m["metadata"]["name"] == "worker-0"])
    (back,) = wait_until(
        "the slurmd pod to run again", lambda: running_pods(cluster, CONFIG.cluster.namespace, "app=slurmd,name=worker-0"), timeout=60
    )
    assert not POOL.kueue_node_labels.items() & cluster.require("node", back["spec"]["nodeName"])["metadata"]["labels"].items()
    assert_placed(cluster, running_pods(cluster, "vision") + running_pods(cluster, "speech"))


def test_a_second_up_with_kueues_controller_running_changes_nothing(stack):
    """What Kueue's webhooks and controller store beside our fields (defaults, status) is no change of ours: a
    preview after the up, with the controller running, plans no step. A perpetual diff here made every `up` of a
    Kueue stack update each ClusterQueue (issue 40)."""
    stack.pulumi("preview", "--expect-no-changes", "--diff", stack=KWOK_STACK)


# Last in the module: from here on its project holds a tenant stack, whose tenant the platform stack's config includes.
TENANT_STACK = "kwok-physics"
PHYSICS = {"name": "physics", "users": ["ngocanh"], "namespace": True, "cells": [{"pool": "h100", "gpusPerCell": 2, "cells": 1}]}


def test_a_tenant_stack_beside_it_declares_its_tenant_and_changes_nothing_of_the_platforms(cluster, kube, stack):
    """A tenant stack (tenantStack: kwok) taking the last 2 GPUs of the Slurm workers: its `up` creates its tenant's
    namespace, queues and its own accounts Job against the deployed platform stack, and Kueue's controller makes its
    queue Active; the platform stack's preview then shows only what follows every tenant (and its Job, which now keeps
    to its own reservations), and both stacks export the same capacity map once it has run."""
    document = {"config": {"slurm-platform:tenantStack": {"platform": KWOK_STACK}, "slurm-platform:tenants": [PHYSICS]}}
    (stack.project / f"Pulumi.{TENANT_STACK}.yaml").write_text(yaml.safe_dump(document))
    stack.pulumi("stack", "init", TENANT_STACK, "--secrets-provider", "passphrase", stack=None)
    stack.pulumi("up", "--yes", "--skip-preview", stack=TENANT_STACK)
    namespace = cluster.get("namespace", "physics")
    assert namespace and namespace["metadata"]["labels"][TENANT_NAMESPACE_LABEL] == CONFIG.cluster.name
    wait_until("physics' ClusterQueue Active", lambda: condition(cluster_queue(cluster, "physics"), "Active").get("status") == "True", timeout=60)
    assert cluster.get("localqueue", "physics", "physics")
    assert cluster.get("configmap", f"{CONFIG.cluster.name}-tenants-{TENANT_STACK}", CONFIG.cluster.namespace)
    outputs = json.loads(stack.pulumi("stack", "output", "--json", stack=TENANT_STACK).stdout)
    assert list(outputs["tenants"]) == ["physics"] and outputs["platformStack"] == KWOK_STACK
    # A second up of the tenant stack changes nothing.
    stack.pulumi("preview", "--expect-no-changes", stack=TENANT_STACK)
    # The platform stack: no SlurmCluster, NodeSet, policy or other tenant's object moves for a tenant stack's tenant.
    steps = json.loads(stack.pulumi("preview", "--json", stack=KWOK_STACK).stdout)["steps"]
    changed = {step["urn"].rsplit("::", 1)[-1] for step in steps if step["op"] not in ("same", "read") and "pulumi:pulumi:Stack" not in step["urn"]}
    assert changed and all(name.startswith(("tenants-sacctmgr", "ldap-", "monitoring-")) for name in changed), changed
    stack.pulumi("up", "--yes", "--skip-preview", stack=KWOK_STACK)
    maps = [json.loads(stack.pulumi("stack", "output", "capacityMap", "--json", stack=name).stdout) for name in (KWOK_STACK, TENANT_STACK)]
    assert maps[0] == maps[1] and any("physics 2" in line for line in maps[0]), maps

"""Kueue at 1,000 workloads across 160 ClusterQueues (issue 40, item 5): the real controller
(tests/kube.py KueueController, Kueue 0.19.2) on the kwok control plane, reading OUR objects
(components/kueue.py `render`, the namespaces of components/tenancy.py) for tests/scale.py's
160-tenant stack with every tenant holding one 8-GPU Kueue cell (`kueue_every=1`): 160 ClusterQueues
in one cohort, 1,280 GPUs of quota on the first pool's 160 Kueue nodes (kwok nodes of that pool only: kueue_pool_only).
Prints figures; asserts nothing.

Workloads are Workload objects, as Kueue's own performance runner creates them
(test/performance/scheduler/runner/generator): one pod of whole GPUs with the node's share of cpu and
memory, at prod inside the tenant's guarantee and oppo beyond it. Two loads, 1,000 workloads each:

- `fits`: 1 GPU each, 1,000 of the cohort's 1,280 GPUs: tenants 0-79 nine (one borrowed), tenants
  80-159 three or four;
- `overfull`: the same counts at 2 GPUs, 2,000 wanted: some never fit, the run ends at a steady state.

The ClusterQueues are held (stopPolicy: Hold) while the workloads are created, then released at once,
so what is timed is admission, not creation. A watch records when each workload is first seen
QuotaReserved and Admitted (the conditions' own timestamps have whole seconds: both are printed).
The steady state is all admitted, or QUIET_S seconds without a new admission. CPU is the Kueue
controller's (and the API server's) from /proc, release to steady state.

Each shape variant changes the rendered objects the way the row says, nothing else:
flavors per ClusterQueue, topology-aware flavors, one cohort or a cohort tree, borrowingLimit,
lendingLimit, preemption.

    .venv/bin/python benchmarks/kueue_admission.py [--runs as-rendered/fits,one-flavor/fits,...]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubernetes import client as kube_client  # noqa: E402
from kubernetes import config as kube_config  # noqa: E402
from kubernetes import watch as kube_watch  # noqa: E402

from benchmarks.kube import fresh_cluster  # noqa: E402
from components import kueue, tenancy  # noqa: E402
from components.config import PlatformConfig, parse_config  # noqa: E402
from tests.kube import KUEUE_GROUP, KueueController, LocalCluster, wait_until  # noqa: E402
from tests.scale import scaled_config  # noqa: E402

TENANTS = 160
WORKLOADS = 1000
BORROWERS = 80  # tenants 0-79 want more than their cell
# No new admission for this long, with some still pending: the steady state. One scheduling cycle that
# requeues many workloads took 100 s here (each requeue is a status write): anything shorter stops too early.
QUIET_S = 150.0
RUN_TIMEOUT_S = 600.0
CLIENTS_AT_ONCE = 8  # kubectl processes creating the workloads
FIELD_MANAGER = "kueue-benchmark"
BENCH_LABEL = "benchmark.slurm-platform/kueue-admission"
VERSION = kueue.API_VERSION.rpartition("/")[2]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# --- the stack and the load ------------------------------------------------------------------------


def benchmark_config() -> PlatformConfig:
    return parse_config(scaled_config(TENANTS, kueue_every=1))


def kueue_pool_only(config: PlatformConfig) -> PlatformConfig:
    """The stack with only the pool its Kueue cells are on (250 nodes): 1,003 kwok nodes' heartbeats kept this
    2-core machine, shared with other jobs, too busy to create the workloads. The other pools' flavors (zero quota)
    then have no nodes."""
    return config.model_copy(update={"node_pools": config.gpu_pools[:1]})


def rendered_queues(config: PlatformConfig) -> list[dict[str, Any]]:
    """Our Kueue objects (Topologies, ResourceFlavors, WorkloadPriorityClasses, ClusterQueues, LocalQueues);
    the queue policies are for Jobs and pods, which this load does not create."""
    return [r.manifest for r in kueue.render(config) if r.manifest["apiVersion"] == kueue.API_VERSION]


def tenant_namespaces(config: PlatformConfig) -> list[dict[str, Any]]:
    return [r.manifest for r in tenancy.tenant_namespaces(config) if r.manifest["kind"] == "Namespace"]


def workload_counts() -> list[int]:
    """Workloads per tenant: nine for each borrower, three or four for the rest, WORKLOADS in all."""
    rest = WORKLOADS - 9 * BORROWERS
    others = TENANTS - BORROWERS
    return [9] * BORROWERS + [rest // others + (1 if i < rest % others else 0) for i in range(others)]


def workload(config: PlatformConfig, tenant: str, index: int, gpus: int, level: str) -> dict[str, Any]:
    """One pod of `gpus` GPUs with the node's share of cpu and memory, on the tenant's LocalQueue."""
    pool = config.gpu_pools[0]
    requests = {name: str(value) for name, value in tenancy.node_share(pool, gpus).items()}
    return {
        "apiVersion": kueue.API_VERSION,
        "kind": "Workload",
        "metadata": {"name": f"w-{index:02d}", "namespace": tenant, "labels": {BENCH_LABEL: "true"}},
        "spec": {
            "queueName": tenant,
            "priorityClassRef": {"group": KUEUE_GROUP, "kind": "WorkloadPriorityClass", "name": f"slurm-{level}"},
            "priority": tenancy.POD_PRIORITY[level],
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "tolerations": [{"key": tenancy.GPU, "operator": "Exists", "effect": "NoSchedule"}],
                            "containers": [{"name": "main", "image": "benchmark", "resources": {"requests": requests}}],
                        }
                    },
                }
            ],
        },
    }


def load(config: PlatformConfig, gpus: int) -> list[dict[str, Any]]:
    """WORKLOADS workloads of `gpus` GPUs: prod while the tenant's cell holds them, oppo (borrowing) beyond it."""
    cell = config.gpu_pools[0].gpus_per_node
    manifests = []
    for tenant, count in zip(config.tenants, workload_counts(), strict=True):
        manifests += [workload(config, tenant.name, i, gpus, "prod" if (i + 1) * gpus <= cell else "oppo") for i in range(count)]
    return manifests


LOADS = {"fits": 1, "overfull": 2}


# --- shape variants: each changes our rendered objects in one way ----------------------------------


def queues_of(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in manifests if m["kind"] == "ClusterQueue"]


def first_flavor_resources(queue: dict[str, Any]) -> list[dict[str, Any]]:
    return queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"]


def one_flavor(manifests: list[dict[str, Any]], config: PlatformConfig) -> None:
    """Each ClusterQueue lists only the flavors it has quota on (ours lists every GPU pool's, most at zero)."""
    for queue in queues_of(manifests):
        group = queue["spec"]["resourceGroups"][0]
        group["flavors"] = [f for f in group["flavors"] if any(r["name"] == tenancy.GPU and r["nominalQuota"] != "0" for r in f["resources"])]


def no_topology(manifests: list[dict[str, Any]], config: PlatformConfig) -> None:
    """ResourceFlavors without topologyName: no topology-aware scheduling. New flavors, named apart, since a
    flavor's topologyName is immutable."""
    renamed = {}
    for manifest in manifests:
        if manifest["kind"] == "ResourceFlavor":
            renamed[manifest["metadata"]["name"]] = manifest["metadata"]["name"] = f"{manifest['metadata']['name']}-no-topology"
            manifest["spec"].pop("topologyName")
    for queue in queues_of(manifests):
        for flavor in queue["spec"]["resourceGroups"][0]["flavors"]:
            flavor["name"] = renamed[flavor["name"]]


def cohort_tree(manifests: list[dict[str, Any]], config: PlatformConfig) -> None:
    """16 cohorts of 10 ClusterQueues under the cluster's cohort, in place of one flat cohort."""
    root = config.cluster.name
    queues = queues_of(manifests)
    groups = sorted({f"{root}-{index // 10:02d}" for index in range(len(queues))})
    for index, queue in enumerate(queues):
        queue["spec"]["cohortName"] = f"{root}-{index // 10:02d}"
    manifests += [{"apiVersion": kueue.API_VERSION, "kind": "Cohort", "metadata": {"name": root}, "spec": {}}]
    manifests += [{"apiVersion": kueue.API_VERSION, "kind": "Cohort", "metadata": {"name": name}, "spec": {"parentName": root}} for name in groups]


def limit(field_name: str, gpus: int) -> Callable[[list[dict[str, Any]], PlatformConfig], None]:
    def apply(manifests: list[dict[str, Any]], config: PlatformConfig) -> None:
        share = tenancy.node_share(config.gpu_pools[0], gpus)
        for queue in queues_of(manifests):
            for resource in first_flavor_resources(queue):
                resource[field_name] = share[resource["name"]]

    apply.__doc__ = f"{field_name} of {gpus} GPUs (and their cpu and memory) on the flavor each ClusterQueue has quota on."
    return apply


def no_preemption(manifests: list[dict[str, Any]], config: PlatformConfig) -> None:
    """No preemption: lent quota is not reclaimed, no lower priority job makes room."""
    for queue in queues_of(manifests):
        queue["spec"].pop("preemption")


VARIANTS: dict[str, Callable[[list[dict[str, Any]], PlatformConfig], None] | None] = {
    "as-rendered": None,
    "one-flavor": one_flavor,
    "no-topology": no_topology,
    "cohort-tree": cohort_tree,
    "borrowing-limit-8": limit("borrowingLimit", 8),
    "lending-limit-4": limit("lendingLimit", 4),
    "no-preemption": no_preemption,
}


def shaped(config: PlatformConfig, variant: str) -> list[dict[str, Any]]:
    manifests = copy.deepcopy(rendered_queues(config))
    change = VARIANTS[variant]
    if change:
        change(manifests, config)
    return manifests


def held(manifests: list[dict[str, Any]], hold: bool) -> list[dict[str, Any]]:
    return [{**m, "spec": {**m["spec"], "stopPolicy": "Hold" if hold else "None"}} if m["kind"] == "ClusterQueue" else m for m in manifests]


# --- the control plane ------------------------------------------------------------------------------


def in_parallel(call: Callable[[Any], object], items: list) -> None:
    with ThreadPoolExecutor(CLIENTS_AT_ONCE) as pool:
        list(pool.map(call, items))


def apply_all(cluster: LocalCluster, manifests: list[dict[str, Any]]) -> None:
    def apply(batch: list[dict[str, Any]]) -> None:
        if batch:
            cluster.kubectl(
                "apply",
                "--server-side",
                "--force-conflicts",
                f"--field-manager={FIELD_MANAGER}",
                "-f",
                "-",
                stdin=yaml.safe_dump_all(batch),
                timeout=1200,
            )

    in_parallel(apply, [manifests[i::CLIENTS_AT_ONCE] for i in range(CLIENTS_AT_ONCE)])


def listed(cluster: LocalCluster, resource: str, *args: str) -> list[dict[str, Any]]:
    return json.loads(cluster.kubectl("get", f"{resource}.{KUEUE_GROUP}", *args, "-o", "json", timeout=120).stdout)["items"]


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == kind), {})


def queues_reconciled(cluster: LocalCluster, active: bool) -> bool:
    """Every ClusterQueue's Active condition is for its current spec, and says `active`."""
    queues = listed(cluster, "clusterqueues")
    return len(queues) == TENANTS and all(
        condition(q, "Active").get("observedGeneration") == q["metadata"]["generation"] and (condition(q, "Active").get("status") == "True") == active
        for q in queues
    )


def set_shape(cluster: LocalCluster, manifests: list[dict[str, Any]]) -> None:
    """Our objects in this shape, the ClusterQueues held; Cohorts of another shape gone."""
    apply_all(cluster, [m for m in manifests if m["kind"] in ("Topology", "ResourceFlavor", "WorkloadPriorityClass", "Cohort")])
    apply_all(cluster, held([m for m in manifests if m["kind"] in ("ClusterQueue", "LocalQueue")], hold=True))
    wanted = {m["metadata"]["name"] for m in manifests if m["kind"] == "Cohort"}
    stale = [c["metadata"]["name"] for c in listed(cluster, "cohorts") if c["metadata"]["name"] not in wanted]
    if stale:
        cluster.kubectl("delete", f"cohorts.{KUEUE_GROUP}", *stale)
    wait_until("every ClusterQueue held in its new shape", lambda: queues_reconciled(cluster, active=False), timeout=120, interval=1)


def delete_workloads(cluster: LocalCluster, manifests: list[dict[str, Any]]) -> None:
    """Held first: a deleted workload's quota would admit the pending ones, work that nobody measures."""
    apply_all(cluster, held([m for m in manifests if m["kind"] == "ClusterQueue"], hold=True))
    cluster.kubectl("delete", f"workloads.{KUEUE_GROUP}", "-A", "-l", BENCH_LABEL, "--wait=false", timeout=300)
    wait_until("every workload to go", lambda: not listed(cluster, "workloads", "-A", "-l", BENCH_LABEL), timeout=300, interval=2)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


# --- what the watch sees ------------------------------------------------------------------------------


@dataclass
class Seen:
    """Per workload: when the watch first saw it QuotaReserved and Admitted, its Admitted condition's own
    time, and how often it was preempted."""

    reserved: dict[str, float] = field(default_factory=dict)
    admitted: dict[str, float] = field(default_factory=dict)
    admitted_stamp: dict[str, datetime] = field(default_factory=dict)
    preempted: set[tuple[str, str]] = field(default_factory=set)
    now_admitted: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, workload: dict[str, Any], at: float) -> None:
        key = f"{workload['metadata']['namespace']}/{workload['metadata']['name']}"
        with self.lock:
            if condition(workload, "QuotaReserved").get("status") == "True":
                self.reserved.setdefault(key, at)
            admitted = condition(workload, "Admitted")
            if admitted.get("status") == "True":
                self.admitted.setdefault(key, at)
                self.admitted_stamp.setdefault(key, datetime.fromisoformat(admitted["lastTransitionTime"].replace("Z", "+00:00")))
                self.now_admitted.add(key)
            else:
                self.now_admitted.discard(key)
            preempted = condition(workload, "Preempted")
            if preempted.get("status") == "True":
                self.preempted.add((key, preempted["lastTransitionTime"]))


def watch_workloads(seen: Seen, stop: threading.Event, ready: threading.Event) -> None:
    api = kube_client.CustomObjectsApi()
    version = None
    while not stop.is_set():
        stream = kube_watch.Watch().stream(
            api.list_cluster_custom_object,
            KUEUE_GROUP,
            VERSION,
            "workloads",
            label_selector=BENCH_LABEL,
            timeout_seconds=5,
            **({"resource_version": version} if version else {}),
        )
        ready.set()
        for event in stream:
            obj = event["object"]
            version = obj["metadata"]["resourceVersion"]
            if event["type"] in ("ADDED", "MODIFIED"):
                seen.record(obj, time.monotonic())


# --- one run ---------------------------------------------------------------------------------------


def run(cluster: LocalCluster, config: PlatformConfig, variant: str, load_name: str) -> dict[str, Any]:
    manifests = shaped(config, variant)
    set_shape(cluster, manifests)
    workloads = load(config, LOADS[load_name])
    seen, stop, ready = Seen(), threading.Event(), threading.Event()
    watcher = threading.Thread(target=watch_workloads, args=(seen, stop, ready), daemon=True)
    watcher.start()
    ready.wait(30)
    created = time.perf_counter()
    apply_all(cluster, workloads)
    create_s = time.perf_counter() - created
    wait_until("every workload listed", lambda: len(listed(cluster, "workloads", "-A", "-l", BENCH_LABEL)) == len(workloads), timeout=120)
    kueue_pid, apiserver_pid = cluster.pid("kueue"), cluster.pid("kube-apiserver")
    cpu_before = cpu_seconds(kueue_pid), cpu_seconds(apiserver_pid)
    released = time.monotonic()
    apply_all(cluster, held([m for m in manifests if m["kind"] == "ClusterQueue"], hold=False))
    release_s = time.monotonic() - released
    last_change, last_count = time.monotonic(), 0
    while time.monotonic() - released < RUN_TIMEOUT_S:
        time.sleep(0.2)
        with seen.lock:
            count = len(seen.now_admitted)
        if count != last_count:
            last_change, last_count = time.monotonic(), count
        if count == len(workloads) or time.monotonic() - last_change > QUIET_S:
            break
    cpu_after = cpu_seconds(kueue_pid), cpu_seconds(apiserver_pid)
    stop.set()
    with seen.lock:
        times = sorted(seen.admitted.values())
        stamps = sorted(seen.admitted_stamp.values())
        first_reserved = min(seen.reserved.values(), default=released)
        admitted_now, preemptions = len(seen.now_admitted), len(seen.preempted)
    queues = listed(cluster, "clusterqueues")
    borrowed = sum(
        int(r.get("borrowed", 0))
        for q in queues
        for f in q.get("status", {}).get("flavorsUsage", [])
        for r in f["resources"]
        if r["name"] == tenancy.GPU
    )
    delete_workloads(cluster, manifests)
    watcher.join(10)
    span = times[-1] - times[0] if len(times) > 1 else 0.0
    stamp_span = (stamps[-1] - stamps[0]).total_seconds() if len(stamps) > 1 else 0.0
    return {
        "variant": variant,
        "load": load_name,
        "workloads": len(workloads),
        "gpus_wanted": LOADS[load_name] * len(workloads),
        "create_s": create_s,
        "release_s": release_s,
        "admitted": admitted_now,
        "ever_admitted": len(times),
        "preemptions": preemptions,
        "borrowed_gpus": borrowed,
        "first_reserved_s": first_reserved - released,
        "last_admitted_s": (times[-1] - released) if times else float("nan"),
        "admissions_per_s": (len(times) - 1) / span if span else float("nan"),
        "stamp_span_s": stamp_span,
        # Whole-second timestamps: the span holds up to one second more than it says.
        "stamp_admissions_per_s": len(stamps) / (stamp_span + 1),
        "kueue_cpu_s": cpu_after[0] - cpu_before[0],
        "apiserver_cpu_s": cpu_after[1] - cpu_before[1],
    }


def report(result: dict[str, Any]) -> None:
    print(
        f"{result['variant']:<18} {result['load']:<8} workloads={result['workloads']} gpus_wanted={result['gpus_wanted']} "
        f"admitted={result['admitted']} (ever {result['ever_admitted']}, preemptions {result['preemptions']}, borrowed_gpus {result['borrowed_gpus']}) "
        f"create={result['create_s']:.1f}s release={result['release_s']:.1f}s first_reserved={result['first_reserved_s']:.2f}s "
        f"last_admitted={result['last_admitted_s']:.2f}s admissions_per_s={result['admissions_per_s']:.1f} "
        f"(conditions: {result['stamp_admissions_per_s']:.1f}/s over {result['stamp_span_s']:.0f}s) "
        f"kueue_cpu={result['kueue_cpu_s']:.1f}s apiserver_cpu={result['apiserver_cpu_s']:.1f}s",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    runs = [f"{variant}/{load_name}" for variant in VARIANTS for load_name in LOADS]
    parser.add_argument("--runs", default=",".join(runs), help=f"variant/load pairs, of {', '.join(runs)}")
    args = parser.parse_args()
    config = benchmark_config()
    print(f"load average before: {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        cluster = fresh_cluster(Path(tmp) / "cluster")
        try:
            started = time.perf_counter()
            nodes = cluster.add_nodes(kueue_pool_only(config), timeout=600)
            KueueController(cluster, config).start()
            apply_all(cluster, tenant_namespaces(config))
            kube_config.load_kube_config(str(cluster.kubeconfig))
            queues = queues_of(rendered_queues(config))
            flavors = len(queues[0]["spec"]["resourceGroups"][0]["flavors"])
            print(
                f"control plane: {len(nodes)} kwok nodes, Kueue 0.19.2, {len(queues)} ClusterQueues of {flavors} flavors "
                f"in cohort {config.cluster.name}, ready in {time.perf_counter() - started:.0f}s",
                flush=True,
            )
            for pair in args.runs.split(","):
                variant, load_name = pair.split("/")
                report(run(cluster, config, variant, load_name))
        finally:
            cluster.stop()
    print(f"load average after: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()

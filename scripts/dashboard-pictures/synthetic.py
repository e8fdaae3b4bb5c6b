"""Synthetic series for prod-hoalac (llm 16, vision 8 + Kueue 8, speech 6 guaranteed GPUs; 4 Slurm nodes x 8 + 1 Kueue
node x 8): six hours of the Slurm exporter's, DCGM's, Kueue's and kube-state-metrics' series, as OpenMetrics for
promtool tsdb create-blocks-from openmetrics. Story: llm borrows with llm-oppo jobs from 2:00 to 4:40 while vision's
guaranteed job waits (3:20-4:40, guarantee broken), vision's job 103 idles from 2:30, a GPU of worker-3 falls off the
bus at 5:20 and the node drains, slurmdbd is down 1:40-1:50; Kueue runs vision's pods on the fifth node."""

import math
import random
import sys
from collections import defaultdict

END = int(sys.argv[1])
STEP = 60
MINUTES = 360
START = END - MINUTES * 60
rng = random.Random(37)
NS = 'namespace="fpt-hpc",job="fpt-hpc-slurm-exporter",instance="10.0.3.17:9100",pod="fpt-hpc-slurm-exporter-0"'
DCGM_T = 'namespace="gpu-operator",job="nvidia-dcgm-exporter",container="nvidia-dcgm-exporter",modelName="NVIDIA H100 80GB HBM3"'
SLURM_NODES = [f"worker-{i}" for i in range(4)]
K8S = {f"worker-{i}": f"fpt-hpc-h100-{i}" for i in range(4)}
KUEUE_NODE = "fpt-hpc-h100-4"

# job id, account, partition, node, gpus, start, end (minutes), utilisation level
JOBS = [
    (101, "llm", "h100", "worker-0", range(0, 8), 0, 360, 0.92),
    (102, "llm", "h100", "worker-1", range(0, 8), 0, 360, 0.85),
    (103, "vision", "h100", "worker-2", range(0, 4), 0, 360, 0.60),
    (110, "llm-oppo", "h100-oppo", "worker-2", range(4, 8), 120, 280, 0.70),
    (111, "llm-oppo", "h100-oppo", "worker-3", range(0, 4), 180, 280, 0.75),
    (120, "vision", "h100", "worker-3", range(0, 4), 280, 360, 0.80),
    (104, "speech", "h100", "worker-3", range(4, 6), 0, 360, 0.55),
    (105, "speech", "h100", "worker-3", range(6, 8), 60, 200, 0.65),
]
# pending GPUs: account -> [(start, end, gpus)]
PENDING = {"vision": [(200, 280, 4)], "llm": [(60, 120, 8)], "speech": [(300, 340, 2)]}
# Kueue pods: (pod, gpus, start, end, util)
PODS = [("vision-train-0", range(0, 8), 30, 150, 0.88), ("vision-eval-7f9c2", range(0, 4), 170, 360, 0.45)]
KUEUE_PENDING = [(150, 170, 8)]
XID_NODE, XID_GPU, XID_AT = "worker-3", 7, 320

out: dict[str, list[str]] = defaultdict(list)
types: dict[str, str] = {}


def sample(name: str, labels: str, value: float, t: int, kind: str = "gauge") -> None:
    types[name] = kind
    out[f"{name}{{{labels}}}"].append(f"{value!r} {t}" if isinstance(value, float) else f"{value} {t}")


def running(job, minute):
    return job[5] <= minute < job[6] or (job[6] == MINUTES and minute == MINUTES)


for minute in range(MINUTES + 1):
    t = START + minute * STEP
    sample("slurm_slurmctld_up", NS, 1, t)
    sample("slurm_slurmdbd_up", NS, 0 if 100 <= minute < 110 else 1, t)
    sample("slurm_exporter_last_success_timestamp_seconds", NS, t - 30 if not (100 <= minute < 110) else START + 100 * STEP, t)
    allocated = defaultdict(int)
    used = defaultdict(int)
    for job in JOBS:
        if running(job, minute):
            allocated[(job[1], job[2])] += len(job[4])
            used[job[3]] += len(job[4])
            sample("slurm_job_gpus", f'{NS},job_id="{job[0]}",account="{job[1]}",partition="{job[2]}"', len(job[4]), t)
    for (account, partition), gpus in sorted(allocated.items()):
        sample("slurm_account_gpus_allocated", f'{NS},account="{account}",partition="{partition}"', gpus, t)
    for account, spans in PENDING.items():
        gpus = sum(g for s, e, g in spans if s <= minute < e)
        if gpus:
            sample("slurm_account_gpus_pending", f'{NS},account="{account}",partition="h100",reason="Resources"', gpus, t)
    for node in SLURM_NODES:
        sample("slurm_node_gpus", f'{NS},node="{node}"', 8, t)
        sample("slurm_node_gpus_allocated", f'{NS},node="{node}"', used[node], t)
        state = "allocated" if used[node] == 8 else "mixed" if used[node] else "idle"
        reason = ""
        if node == XID_NODE and minute >= XID_AT:
            state, reason = ("draining" if used[node] else "drained"), "GPU 7 Xid 79, fallen off the bus"
        sample("slurm_node_state", f'{NS},node="{node}",state="{state}",reason="{reason}"', 1, t)
    # DCGM, one series per GPU, labelled with the job or pod that holds it
    for node in SLURM_NODES:
        for gpu in range(8):
            holder = next((job for job in JOBS if running(job, minute) and job[3] == node and gpu in job[4]), None)
            util = 0.0
            extra = ""
            if holder:
                level = holder[7]
                if holder[0] == 103 and minute >= 150:
                    level = 0.04
                util = max(0.0, min(1.0, level + 0.08 * math.sin(minute / 7 + gpu) + rng.uniform(-0.04, 0.04)))
                extra = f',hpc_job="{holder[0]}"'
            lost = node == XID_NODE and gpu == XID_GPU and minute >= XID_AT
            labels = f'{DCGM_T},Hostname="{K8S[node]}",gpu="{gpu}",UUID="GPU-{node[-1]}{gpu:03d}",pod="nvidia-dcgm-exporter-{node[-1]}x"{extra}'
            if not lost:
                sample("DCGM_FI_DEV_GPU_UTIL", labels, round(util * 100), t)
                sample("DCGM_FI_DEV_FB_USED", labels, round(util * 60000 + (2000 if holder else 0)), t)
                sample("DCGM_FI_DEV_GPU_TEMP", labels, round(34 + 42 * util + rng.uniform(-1, 1)), t)
                sample("DCGM_FI_DEV_POWER_USAGE", labels, round(70 + 600 * util + rng.uniform(-5, 5), 1), t)
            sample("DCGM_FI_DEV_XID_ERRORS", labels.replace(extra, ""), 79 if node == XID_NODE and gpu == XID_GPU and minute >= XID_AT - 1 else 0, t)
    for gpu in range(8):
        holder = next((pod for pod in PODS if (pod[2] <= minute < pod[3] or (pod[3] == MINUTES and minute == MINUTES)) and gpu in pod[1]), None)
        util = 0.0
        extra = ""
        if holder:
            util = max(0.0, min(1.0, holder[4] + 0.1 * math.sin(minute / 5 + gpu) + rng.uniform(-0.05, 0.05)))
            extra = f',exported_namespace="vision",exported_pod="{holder[0]}",exported_container="main"'
        labels = f'{DCGM_T},Hostname="{KUEUE_NODE}",gpu="{gpu}",UUID="GPU-4{gpu:03d}",pod="nvidia-dcgm-exporter-4x"{extra}'
        sample("DCGM_FI_DEV_GPU_UTIL", labels, round(util * 100), t)
        sample("DCGM_FI_DEV_FB_USED", labels, round(util * 50000), t)
        sample("DCGM_FI_DEV_GPU_TEMP", labels, round(33 + 40 * util + rng.uniform(-1, 1)), t)
        sample("DCGM_FI_DEV_POWER_USAGE", labels, round(70 + 580 * util + rng.uniform(-5, 5), 1), t)
        sample("DCGM_FI_DEV_XID_ERRORS", labels.replace(extra, ""), 0, t)
    # Kueue (its controller's metrics, replica_role leader)
    kq = 'namespace="kueue-system",job="kueue-controller-manager-metrics-service",cluster_queue="vision",cohort="fpt-hpc",replica_role="leader"'
    usage = sum(len(p[1]) for p in PODS if p[2] <= minute < p[3] or (p[3] == MINUTES and minute == MINUTES))
    pending = sum(g for s, e, g in KUEUE_PENDING if s <= minute < e)
    sample("kueue_cluster_queue_resource_usage", f'{kq},flavor="fpt-hpc-h100",resource="nvidia.com/gpu"', usage, t)
    sample("kueue_cluster_queue_nominal_quota", f'{kq},flavor="fpt-hpc-h100",resource="nvidia.com/gpu"', 8, t)
    sample("kueue_cluster_queue_resource_pending", f'{kq},resource="nvidia.com/gpu"', pending, t)
    sample("kueue_pending_workloads", f'{kq},status="active"', 1 if pending else 0, t)
    sample("kueue_pending_workloads", f'{kq},status="inadmissible"', 0, t)
    sample("kueue_admitted_active_workloads", kq, sum(1 for p in PODS if p[2] <= minute < p[3] or (p[3] == MINUTES and minute == MINUTES)), t)
    # kube-state-metrics
    for node in [*K8S.values(), KUEUE_NODE]:
        ksm = f'namespace="monitoring",job="kube-state-metrics",node="{node}",condition="Ready"'
        for status in ("true", "false", "unknown"):
            sample("kube_node_status_condition", f'{ksm},status="{status}"', 1 if status == "true" else 0, t)

lines = []
for name in sorted(types):
    lines.append(f"# TYPE {name} {types[name]}")
    for series in sorted(key for key in out if key.startswith(name + "{")):
        lines += [f"{series} {value}" for value in out[series]]
lines.append("# EOF")
sys.stdout.write("\n".join(lines) + "\n")

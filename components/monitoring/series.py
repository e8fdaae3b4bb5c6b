"""The names of the series the platform's metrics are built from, defined once: what the Slurm
exporter writes, what the recording rules record. The rules, the alerts, the dashboards, the report
and the tests all name a series through these constants, so a typo is an import error."""

from __future__ import annotations

# --- The Slurm exporter (components/monitoring/exporter.py; job label "slurm-exporter") -------------
# 1 when `scontrol ping` finds the primary slurmctld up, else 0.
SLURMCTLD_UP = "slurm_slurmctld_up"
# 1 when slurmdbd answers (`sacctmgr show cluster`), else 0.
SLURMDBD_UP = "slurm_slurmdbd_up"
# GPUs allocated to running jobs, labels: account, partition.
ACCOUNT_GPUS_ALLOCATED = "slurm_account_gpus_allocated"
# GPUs that pending jobs ask for, labels: account, partition, reason (Slurm's pending reason).
ACCOUNT_GPUS_PENDING = "slurm_account_gpus_pending"
# Jobs, labels: account, state (running, pending).
ACCOUNT_JOBS = "slurm_account_jobs"
# One series per node set to 1, labels: node, state (Slurm's, lower case: idle, mixed, allocated, drained,
# draining, down, ...), reason (Slurm's reason, empty when none).
NODE_STATE = "slurm_node_state"
# The node states (a regex on NODE_STATE's state label; Slurm's flags such as drained* or not_responding included)
# that take a node's GPUs away from the tenants: what SlurmNodeOut alerts on and the dashboards call unhealthy.
NODE_OUT_STATES = ".*(down|drain|fail|not_responding|unknown|inval).*"
# GPUs of a node, labels: node; and those allocated, labels: node.
NODE_GPUS = "slurm_node_gpus"
NODE_GPUS_ALLOCATED = "slurm_node_gpus_allocated"
# One series per running job set to its GPU count, labels: job_id, account, partition: joins DCGM's
# per-GPU series (label hpc_job, from the prolog's job mapping) to a tenant.
JOB_GPUS = "slurm_job_gpus"
# Seconds since the epoch of the collector's last successful run (a stale file shows as an old value).
COLLECTED_AT = "slurm_exporter_last_success_timestamp_seconds"

# --- Recording rules (components/monitoring/rules.py): level:metric:operations ---------------------
# Every tenant series carries the labels tenant and scheduler ("slurm" or "kueue").
TENANT_GPUS_GUARANTEED = "tenant:gpus_guaranteed:sum"
TENANT_GPUS_ALLOCATED = "tenant:gpus_allocated:sum"
TENANT_GPUS_BORROWED = "tenant:gpus_borrowed:sum"
TENANT_GPUS_LENT = "tenant:gpus_lent:sum"
TENANT_GPUS_PENDING = "tenant:gpus_pending:sum"
TENANT_GPU_HOURS_1H = "tenant:gpu_hours:avg_over_time1h"
# The label every tenant series carries for the stack (config.cluster.name) that recorded it: two stacks' tenants
# in one Prometheus, even of the same names, stay apart, and the dashboards' tenant queries select by it.
CLUSTER_LABEL = "cluster"

# --- Where the exporter listens: its pods' label, its port (the NetworkPolicies and monitors name them) ----
EXPORTER_APP = "slurm-exporter"  # app.kubernetes.io/name of its pods; its Service is <cluster>-slurm-exporter
EXPORTER_PORT = 9100
EXPORTER_PORT_NAME = "metrics"

# --- Grafana's dashboard sidecar: it loads every ConfigMap with this label as a dashboard --------------
DASHBOARD_LABEL = "grafana_dashboard"
DASHBOARD_LABEL_VALUE = "1"

# --- The GPU operator's dcgm-exporter (operator_charts.dcgm_exporter_values) ------------------------
# The label its per-GPU series carry for the Slurm job on that GPU (HPC job mapping, components/slurm/gpu_jobs.py),
# beside its Kubernetes labels (pod, namespace, container) for a pod's GPU.
DCGM_JOB_LABEL = "hpc_job"
# Its metrics port (the operator's Service port gpu-metrics) and its pods' label app, in the GPU operator's namespace.
DCGM_EXPORTER_PORT = 9400
DCGM_EXPORTER_APP = "nvidia-dcgm-exporter"
# The last XID a GPU reported, labels gpu, UUID, Hostname: it keeps that value until the next XID (dcgm-exporter#500).
DCGM_XID = "DCGM_FI_DEV_XID_ERRORS"

# --- Kueue's ClusterQueue metrics (v0.19 pkg/metrics; the resource ones need metrics.enableClusterQueueResources) ---
KUEUE_USAGE = "kueue_cluster_queue_resource_usage"  # labels cohort, cluster_queue, flavor, resource, replica_role
KUEUE_NOMINAL_QUOTA = "kueue_cluster_queue_nominal_quota"  # same labels
# GPUs of pending workloads, labels cluster_queue, resource, replica_role: active and inadmissible ones together.
KUEUE_PENDING_RESOURCES = "kueue_cluster_queue_resource_pending"
KUEUE_PENDING_WORKLOADS = "kueue_pending_workloads"  # labels cluster_queue, status (active, inadmissible), replica_role
KUEUE_ADMITTED_WORKLOADS = "kueue_admitted_active_workloads"  # labels cluster_queue

# --- kube-state-metrics ----------------------------------------------------------------------------------------
KSM_STATEFULSET_READY = "kube_statefulset_status_replicas_ready"
KSM_NODE_CONDITION = "kube_node_status_condition"  # labels node, condition, status
# A node's resources, labels node, resource (sanitized: nvidia.com/gpu is nvidia_com_gpu), unit.
KSM_NODE_CAPACITY = "kube_node_status_capacity"
KSM_NODE_ALLOCATABLE = "kube_node_status_allocatable"
KSM_GPU_RESOURCE = "nvidia_com_gpu"

# --- What every monitoring manifest the platform renders carries ------------------------------------------------
API_VERSION = "monitoring.coreos.com/v1"  # the Prometheus Operator's ServiceMonitor, PodMonitor, PrometheusRule
LABELS = {"app.kubernetes.io/managed-by": "slurm-platform", "app.kubernetes.io/component": "monitoring"}

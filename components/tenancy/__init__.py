"""Tenants: the OpenPAI/HiveD lab's virtual clusters (VCs) on Slurm and Kubernetes.

A tenant's guarantee is its cells' GPUs, checked to fit the pools at preview
(policies/slurm_rules/cell_fit.py, from config validation and from the policy pack). In Slurm:

- account `<tenant>` with `GrpTRES=gres/gpu=<guarantee>` and QOS prod/test:
  its guaranteed work. A job carries one QOS, so the guarantee sits on the
  account (Grp limits count every job of the account: prod + test together
  stay within it) and the QOS carry the level;
- account `<tenant>-oppo` with QOS oppo (and `GrpTRES` = the borrowing cap):
  opportunistic work on any idle GPU, requeued when a prod or test job needs
  the GPUs back (`Preempt=oppo`, slurm.conf `PreemptType=preempt/qos`);
- every partition allows the accounts of the tenants holding cells on each of
  its pools, and every oppo account: guaranteed work stays on its own pools.
  From Slurm 24.11 the partitions name parent accounts (one per set of GPU
  pools, one for oppo) and this script puts each account under its parent, so
  adding a tenant changes no slurm.conf (components/slurm/common.py `parent_account`);
- the nodes a tenant's cells fill alone (policies/slurm_rules/cell_fit.py `owned_nodes`) are
  a Slurm reservation `cells.<pool>.<tenant>` (MAGNETIC: its jobs go there
  without asking) open to the tenant and every oppo account: another tenant's
  guaranteed jobs cannot fragment them, so a whole-node cell stays placeable;
- the slurm.conf side goes through each operator's own mechanism
  (components/slurm/common.py `tenant_settings`, `partition_options`).

Accounts, QOS and associations are applied by a Kubernetes Job running
`sacctmgr -i` (add what is absent, modify what differs, check what slurmdbd holds),
then `scontrol` for the reservations (shrink and retire first, then create and grow),
named after a hash of the tenants so that it runs again only when they change.
On Kubernetes: PriorityClasses slurm-prod/test/oppo for workloads beside Slurm,
and per tenant (when asked) a namespace safe to hand to the tenant: Pod Security
`restricted` enforced, a policy for what that leaves open (inline CSI volumes,
spec.nodeName, any priority class but the tenant ones), a policy keeping its pods
on its own nodes (never the system pool), quotas of its GPUs and their share of the
nodes' cpu and memory, of its pods and of its claims per storage class (none on the
platform's own classes unless granted), and defaults and minimums for containers.

The pure builders, a file per output, are re-exported here; the `Tenants` component is components/tenancy/component.py.
"""

from __future__ import annotations

from .accounts import NOT_REACHABLE_YET, STEPS, sacctmgr_script
from .admission import (
    PINNED_BY_AFFINITY,
    POD_SPEC,
    POD_TEMPLATE_RULES,
    POOL_LABEL_PREFIX,
    pool_place,
    priority_classes,
    tenant_gpu_device_policy,
    tenant_node_labels,
    tenant_placement_policy,
    tenant_pod_policy,
    tenant_pools,
    tenant_priority_policy,
    tenant_service_policy,
)
from .job import LABELS, SCRIPT, cells_document, config_map, job_name, sacctmgr_job, script_name, tenants_hash
from .namespaces import (
    DEFAULT_REQUESTS,
    MANAGE,
    MIN_REQUESTS,
    POD_SECURITY_LABELS,
    POD_SECURITY_LEVEL,
    POD_SECURITY_VERSION,
    READ,
    TENANT_ROLE,
    TENANT_RULES,
    tenant_access,
    tenant_bounds,
    tenant_namespace_labels,
    tenant_namespaces,
)
from .objects import cluster_wide, render, summary
from .quota import (
    GPU,
    GUARANTEED_LEVELS,
    LEVELS,
    POD_PRIORITY,
    QOS_PRIORITY,
    as_quantities,
    borrowable_gpus,
    default_qos,
    guaranteed_qos,
    kueue_borrowing_limit,
    namespace_compute_quota,
    namespace_gpu_quota,
    namespace_pool_gpus,
    node_share,
    node_share_amounts,
    qos_names,
)
from .reservations import (
    RESERVATION_END,
    RESERVATION_RETRY_SECONDS,
    RESERVATION_TRIES,
    Reservation,
    cell_requests,
    oppo_accounts,
    own_reservations,
    reservation_accounts,
    reservation_data,
    reservation_partition,
    reservation_steps,
    reservations,
)

__all__ = [
    "DEFAULT_REQUESTS",
    "GPU",
    "GUARANTEED_LEVELS",
    "LABELS",
    "LEVELS",
    "MANAGE",
    "MIN_REQUESTS",
    "NOT_REACHABLE_YET",
    "PINNED_BY_AFFINITY",
    "POD_PRIORITY",
    "POD_SECURITY_LABELS",
    "POD_SECURITY_LEVEL",
    "POD_SECURITY_VERSION",
    "POD_SPEC",
    "POD_TEMPLATE_RULES",
    "POOL_LABEL_PREFIX",
    "QOS_PRIORITY",
    "READ",
    "RESERVATION_END",
    "RESERVATION_RETRY_SECONDS",
    "RESERVATION_TRIES",
    "Reservation",
    "SCRIPT",
    "STEPS",
    "TENANT_ROLE",
    "TENANT_RULES",
    "as_quantities",
    "borrowable_gpus",
    "cell_requests",
    "cells_document",
    "cluster_wide",
    "config_map",
    "default_qos",
    "guaranteed_qos",
    "job_name",
    "kueue_borrowing_limit",
    "namespace_compute_quota",
    "namespace_gpu_quota",
    "namespace_pool_gpus",
    "node_share",
    "node_share_amounts",
    "oppo_accounts",
    "own_reservations",
    "pool_place",
    "priority_classes",
    "qos_names",
    "render",
    "reservation_accounts",
    "reservation_data",
    "reservation_steps",
    "reservation_partition",
    "reservations",
    "sacctmgr_job",
    "sacctmgr_script",
    "script_name",
    "summary",
    "tenant_access",
    "tenant_bounds",
    "tenant_gpu_device_policy",
    "tenant_namespace_labels",
    "tenant_namespaces",
    "tenant_node_labels",
    "tenant_placement_policy",
    "tenant_pod_policy",
    "tenant_pools",
    "tenant_priority_policy",
    "tenant_service_policy",
    "tenants_hash",
]

"""Everything the tenants add, and the `tenants` stack output."""

from __future__ import annotations

from typing import Any

from ..config import PlatformConfig
from ..rendered import RUNNING_SLURM, Rendered, key_of
from ..slurm import AccountingClient
from ..slurm.common import (
    tenant_namespace_names,
)
from .admission import (
    priority_classes,
    tenant_gpu_device_policy,
    tenant_placement_policy,
    tenant_pod_policy,
    tenant_priority_policy,
    tenant_service_policy,
)
from .job import config_map, sacctmgr_job
from .namespaces import tenant_namespaces
from .quota import borrowable_gpus, qos_names


def cluster_wide(config: PlatformConfig) -> list[Rendered]:
    """What holds for every tenant of the cluster, the platform stack's: the priority classes, and the admission
    policies that select tenant namespaces by label."""
    namespaced = bool(tenant_namespace_names(config))
    return [
        *(Rendered(pc["metadata"]["name"], pc) for pc in priority_classes()),
        *tenant_priority_policy(config),
        *(tenant_pod_policy(config) + tenant_service_policy(config) if namespaced else []),
        *(tenant_gpu_device_policy(config) if namespaced else []),
        *(tenant_placement_policy(config) if namespaced else []),
    ]


def render(config: PlatformConfig, client: AccountingClient) -> list[Rendered]:
    """Everything the tenants add; nothing without tenants. What holds for every tenant (priority classes, admission
    policies selecting tenant namespaces by label) is the platform stack's; each stack declares its own tenants'."""
    if not config.tenants:
        return []
    script = config_map(config, client)
    return [
        *(cluster_wide(config) if config.role == "platform" else []),
        *tenant_namespaces(config),
        Rendered("sacctmgr-script", script),
        Rendered("sacctmgr", sacctmgr_job(config, client), after=(key_of(script), RUNNING_SLURM)),
    ]


def summary(config: PlatformConfig) -> dict[str, Any]:
    """The `tenants` stack output: per tenant, what it is guaranteed and may borrow, and how to submit."""
    return {
        t.name: {
            "guaranteedGpus": t.guaranteed_gpus,
            "cells": [{"pool": c.pool, "gpusPerCell": c.gpus_per_cell, "cells": c.cells} for c in t.cells],
            "borrowableGpus": borrowable_gpus(config, t),
            "qos": qos_names(t),
            "accounts": {"guaranteed": t.name, **({"oppo": t.oppo_account} if "oppo" in t.priorities else {})},
            "namespace": t.name if t.namespace else None,
        }
        for t in config.own_tenants
    }

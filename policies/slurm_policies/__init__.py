"""The slurm-platform guardrails, as importable rules (the pack's __main__ only wraps them)."""

from . import chart_pins, credentials, data_protection, exposure, object_size, operator_shapes, quota, tenancy, volumes
from .common import quantity

ALL_POLICIES = [
    *volumes.POLICIES,
    *quota.POLICIES,
    *exposure.POLICIES,
    *data_protection.POLICIES,
    *credentials.POLICIES,
    *chart_pins.POLICIES,
    *operator_shapes.POLICIES,
    *tenancy.POLICIES,
    *object_size.POLICIES,
]

__all__ = [
    "ALL_POLICIES",
    "chart_pins",
    "credentials",
    "data_protection",
    "exposure",
    "object_size",
    "operator_shapes",
    "quantity",
    "quota",
    "tenancy",
    "volumes",
]

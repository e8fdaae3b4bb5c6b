"""The slurm-platform guardrails, as importable rules (the pack's __main__ only wraps them)."""

from . import operators, quota, safety, tenancy, volumes
from .common import quantity

ALL_POLICIES = [*volumes.POLICIES, *quota.POLICIES, *safety.POLICIES, *operators.POLICIES, *tenancy.POLICIES]

__all__ = ["ALL_POLICIES", "operators", "quantity", "quota", "safety", "tenancy", "volumes"]

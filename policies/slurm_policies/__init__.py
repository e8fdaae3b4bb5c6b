"""The slurm-platform guardrails, as importable rules (the pack's __main__ only wraps them)."""

from . import quota, safety, volumes
from .common import quantity

ALL_POLICIES = [*volumes.POLICIES, *quota.POLICIES, *safety.POLICIES]

__all__ = ["ALL_POLICIES", "quantity", "quota", "safety", "volumes"]

"""The slurm-platform policy pack. Thin on purpose: the rules live in
`slurm_policies/` (importable and unit-tested); this only serves them.

    pulumi preview --policy-pack policies --policy-pack-config policies/config/<stack>.json
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pulumi_policy import EnforcementLevel, PolicyPack  # noqa: E402

from slurm_policies import ALL_POLICIES  # noqa: E402

PolicyPack(
    name="slurm-platform-guardrails",
    description="Guardrails for Slurm on Kubernetes (soperator 1.14.10 and 4.x, ACK, Slinky): volumes, quota, exposure, data safety, secrets, pinned charts, operator shape.",
    enforcement_level=EnforcementLevel.ADVISORY,
    policies=ALL_POLICIES,
)

"""Slurm on Kubernetes platform components (one ComponentResource per concern).

Pure renderers (config in, manifests out) import no Pulumi module, this package's __init__ included:
the Pulumi helpers live in components/resources.py."""

from __future__ import annotations

import sys
from pathlib import Path

# The rules the policy pack applies too (policies/slurm_rules/) are imported under the pack's own
# module names (`from slurm_rules import kube_rules`): the program and the pack share one module each.
RULES_DIR = str(Path(__file__).resolve().parent.parent / "policies")
if RULES_DIR not in sys.path:
    sys.path.append(RULES_DIR)

"""Slurm on Kubernetes platform components (one ComponentResource per concern)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import pulumi

# The rules the policy pack applies too (policies/slurm_rules/) are imported under the pack's own
# module names (`from slurm_rules import kube_rules`): the program and the pack share one module each.
RULES_DIR = str(Path(__file__).resolve().parent.parent / "policies")
if RULES_DIR not in sys.path:
    sys.path.append(RULES_DIR)


def warn(message: Optional[str]) -> None:
    """Log a warning (shown by preview and update), if there is one."""
    if message:
        pulumi.log.warn(message)


def child_opts(parent: pulumi.Resource, opts: Optional[pulumi.ResourceOptions], **extra: Any) -> pulumi.ResourceOptions:
    """Options for a component's child: parented, and waiting for what the component waits for.

    A component's own `depends_on` does not reach its children's registrations,
    so e.g. the SlurmCluster CR would not wait for the CRDs without this.
    """
    inherited = (opts.depends_on if opts else None) or []
    waits_for: list[Any] = list(inherited) if isinstance(inherited, list) else [inherited]
    waits_for += extra.pop("depends_on", None) or []
    return pulumi.ResourceOptions(parent=parent, depends_on=waits_for or None, **extra)

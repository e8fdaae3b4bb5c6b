"""Moves between Slurm operators, and between their releases, on a stack that has run: checked against
what the stack's last update exported (its `slurmOperator` output) before anything is registered.

- soperator 1.14.10 -> 4.1.7 is an update in place (the README's "Upgrading soperator" procedure);
- soperator 4.1.7 -> 1.14.10 is refused: soperator has no way back;
- a switch to another operator (soperator -> Slinky, ...) replaces the Slurm cluster, so it needs
  `slurm.operatorSwitch: {from: <old>, acknowledged: true}`; with it the old operator's data volumes
  and munge key stay in the stack, protected and retained.
"""

from __future__ import annotations

from typing import Any, Optional

from .config import PlatformConfig
from .config.fields import Problem

# Releases whose chart key in the installedCharts output names the operator, for stacks whose last
# update predates the slurmOperator output.
OPERATOR_OF_RELEASE = {"soperator": "soperator", "slurm-operator": "slinky", "ack-slurm-operator": "ack"}


def deployed_operator(config: PlatformConfig) -> dict[str, str]:
    """The slurmOperator output: the operator and its release."""
    versions = {
        "soperator": config.operators.soperator.version,
        "slinky": config.operators.slinky.version,
        "ack": config.operators.ack_slurm_operator.version,
    }
    return {"name": config.slurm_operator, "version": versions[config.slurm_operator]}


def previous_operator(outputs: dict[str, Any]) -> Optional[dict[str, str]]:
    """The operator the stack's last update ran, from its outputs; None on a stack that has not run."""
    if outputs.get("slurmOperator"):
        return dict(outputs["slurmOperator"])
    for release, chart in (outputs.get("installedCharts") or {}).items():
        if release in OPERATOR_OF_RELEASE:
            return {"name": OPERATOR_OF_RELEASE[release], "version": chart.get("version", "")}
    return None


def move_problems(config: PlatformConfig, before: Optional[dict[str, str]], stack: str) -> list[Problem]:
    if before is None:
        return []
    now = deployed_operator(config)
    if before["name"] == now["name"] == "soperator" and (before["version"], now["version"]) == ("4.1.7", "1.14.10"):
        return [
            Problem(
                ("operators", "soperator", "version"),
                "this stack runs soperator 4.1.7 and soperator has no way back to 1.14.10: 4.1.7's SlurmCluster has no "
                "spec.slurmNodes.worker, which 1.14.10's CRD requires, and its workers are NodeSets, a kind 1.14.10 does "
                "not know; keep operators.soperator.version: 4.1.7",
                now["version"],
            )
        ]
    switch = config.slurm.operator_switch
    if before["name"] == now["name"]:
        return []
    if switch is None or switch.from_operator != before["name"] or not switch.acknowledged:
        return [
            Problem(
                ("slurm", "operatorSwitch"),
                f"this stack runs {before['name']} {before['version']} and slurmOperator is now {now['name']}: the switch "
                f"deletes {before['name']}'s Slurm cluster (slurmctld state, queue, running jobs), while its data volumes "
                f"and munge key stay, protected and retained. To go ahead, set slurm.operatorSwitch: "
                f"{{from: {before['name']}, acknowledged: true}} (`pulumi config set --stack {stack} --path "
                f"slurm.operatorSwitch.from {before['name']}` and `pulumi config set --stack {stack} --path slurm.operatorSwitch.acknowledged true`)",
                switch.model_dump(by_alias=True) if switch else None,
            )
        ]
    return []

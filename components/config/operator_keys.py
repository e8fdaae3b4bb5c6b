"""Which Slurm operator reads which key: the one table the config refuses unread keys by, and the docs show.

A key the table does not name is read by every operator. A key it names, when the stack file sets it on an
operator that does not read it, is refused: the user would believe it took effect. Which keys an operator
reads is what its renderer (components/slurm/) does with them; tests/test_operator_keys.py checks each entry
against the rendered objects in both directions."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from .fields import Problem

if TYPE_CHECKING:
    from .platform import PlatformConfig

SOPERATOR_1 = "soperator 1.14.10"
SOPERATOR_4 = "soperator 4.1.7"
ACK = "ack"
SLINKY = "slinky"
READERS = (SOPERATOR_1, SOPERATOR_4, ACK, SLINKY)
SOPERATOR = frozenset({SOPERATOR_1, SOPERATOR_4})


@dataclass(frozen=True)
class ReadBy:
    operators: frozenset[str]
    instead: str  # what a stack on another operator uses, or why it needs nothing
    # Keys under the entry that say what happens anyway on another operator (a chart it never installs: install false).
    true_anyway: Mapping[str, Any] = field(default_factory=dict)


def chart_of(operators: frozenset[str], instead: str) -> ReadBy:
    return ReadBy(operators, instead, true_anyway={"install": False})


MUNGE_SIDECAR = ReadBy(SOPERATOR, "only soperator runs munge sidecars (ACK and Slinky pods run munged themselves, or auth/slurm): remove it")
MARIADB = "ACK's slurmdbd reads its database from slurm.ack.slurmdbdConfSecretName: remove it"

READ_BY: dict[tuple[str, ...], ReadBy] = {
    ("slurm", "images", "registry"): ReadBy(SOPERATOR, "ACK: slurm.ack.image; Slinky: slurm.slinky.registry"),
    ("slurm", "images", "tag"): ReadBy(SOPERATOR, "ACK: slurm.ack.image and slurm.ack.slurmRelease; Slinky: slurm.slinky.tag"),
    ("slurm", "images", "mariadb"): ReadBy(SOPERATOR | {SLINKY}, MARIADB),
    ("slurm", "controller", "size"): ReadBy(frozenset({SOPERATOR_1}), "it runs a single slurmctld: remove it"),
    ("slurm", "controller", "munge"): MUNGE_SIDECAR,
    ("slurm", "worker", "size"): ReadBy(frozenset({SOPERATOR_1}), "workers are sized per GPU pool: nodePools[].slurmWorkers"),
    ("slurm", "worker", "munge"): MUNGE_SIDECAR,
    ("slurm", "worker", "spoolStorageClassName"): ReadBy(SOPERATOR, "it declares no spool volume per worker: remove it"),
    ("slurm", "worker", "spoolSize"): ReadBy(SOPERATOR, "it declares no spool volume per worker: remove it"),
    ("slurm", "worker", "sharedMemorySize"): ReadBy(SOPERATOR, "its workers get no /dev/shm volume of ours: remove it"),
    ("slurm", "login", "munge"): MUNGE_SIDECAR,
    ("slurm", "accounting", "storageClassName"): ReadBy(SOPERATOR | {SLINKY}, MARIADB),
    ("slurm", "accounting", "storageSize"): ReadBy(SOPERATOR | {SLINKY}, MARIADB),
    ("slurm", "accounting", "mariadb"): ReadBy(SOPERATOR, "its MariaDB runs with the operator's requests: remove it"),
    ("slurm", "accounting", "munge"): MUNGE_SIDECAR,
    ("slurm", "exporter", "enabled"): ReadBy(SOPERATOR, "it runs no exporter of ours: remove it"),
    ("slurm", "exporter", "resources"): ReadBy(SOPERATOR, "it runs no exporter of ours: remove it"),
    ("slurm", "exporter", "munge"): ReadBy(frozenset({SOPERATOR_1}), "only soperator 1.14.10's exporter has a munge sidecar: remove it"),
    ("slurm", "ncclBenchmark"): ReadBy(frozenset({SOPERATOR_1}), "only soperator 1.14.10's chart runs the NCCL benchmark: remove it"),
    ("slurm", "populateJail"): ReadBy(SOPERATOR, "only soperator has a jail to populate: remove it"),
    ("slurm", "ack"): ReadBy(frozenset({ACK}), "set slurmOperator: ack, or remove it"),
    ("slurm", "slinky"): ReadBy(frozenset({SLINKY}), "set slurmOperator: slinky, or remove it"),
    ("storage", "jail"): ReadBy(SOPERATOR, "its pods have their own root file system: shared data goes in storage.submounts"),
    ("storage", "controllerSpool"): ReadBy(SOPERATOR, "slurmctld keeps its state in the operator's own volume: remove it"),
    ("operators", "soperator"): chart_of(SOPERATOR, "set slurmOperator: soperator, or remove it"),
    ("operators", "ackSlurmOperator"): chart_of(frozenset({ACK}), "set slurmOperator: ack, or remove it"),
    ("operators", "slinky"): chart_of(frozenset({SLINKY}), "set slurmOperator: slinky, or remove it"),
}


def reader(operator: str, soperator_version: str) -> str:
    """The table's name of an operator (soperator by release: 4.1.7 renders another shape than 1.14.10)."""
    return f"soperator {soperator_version}" if operator == "soperator" else operator


def readers_of(config: PlatformConfig) -> frozenset[str]:
    """The operators whose keys the stack uses: the chosen one, and while a switch is acknowledged the one it
    leaves (whose volumes and charts the stack keeps)."""
    current = reader(config.slurm_operator, config.operators.soperator.version)
    left = config.switched_from
    if left is None:
        return frozenset({current})
    return frozenset({current}) | (SOPERATOR if left == "soperator" else frozenset({left}))


def read_by(path: tuple[str, ...]) -> Optional[ReadBy]:
    """The table's entry for the key at `path`, or for the block holding it; None: every operator reads it."""
    return next((READ_BY[path[:depth]] for depth in range(len(path), 0, -1) if path[:depth] in READ_BY), None)


def readers_text(path: tuple[str, ...]) -> str:
    """Who reads the key at `path`, for the docs: every operator, or the ones the table names."""
    entry = read_by(path)
    return "every operator" if entry is None else ", ".join(name for name in READERS if name in entry.operators)


NOT_WRITTEN = object()


def _written(raw: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    """What the stack file writes at `path`; NOT_WRITTEN when it leaves the key out."""
    node: Any = raw
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return NOT_WRITTEN
        node = node[part]
    return node


def _family(name: str) -> str:
    return name.split()[0]  # soperator 1.14.10 -> soperator


def unread_key_problems(config: PlatformConfig, raw: Mapping[str, Any]) -> Iterator[Problem]:
    """Each key the stack file sets that the chosen operator never reads."""
    using = readers_of(config)
    operator = reader(config.slurm_operator, config.operators.soperator.version)
    for path, entry in READ_BY.items():
        written = _written(raw, path)
        if written is NOT_WRITTEN or using & entry.operators:
            continue
        if isinstance(written, Mapping) and written and all(entry.true_anyway.get(k, NOT_WRITTEN) == v for k, v in written.items()):
            continue
        readers = [name for name in READERS if name in entry.operators]
        message = f"is read by {' and '.join(readers)} only; slurmOperator {operator} never reads it, so it would change nothing: {entry.instead}"
        families = list(dict.fromkeys(_family(name) for name in readers))
        if _family(operator) not in families and config.slurm.operator_switch is None:
            # A stack leaving that operator keeps its data through the switch's acknowledgement, not by dropping keys.
            message += (
                f"; if this stack ran {families[0]} until now, keep it and acknowledge the switch with "
                f"slurm.operatorSwitch: {{from: {families[0]}, acknowledged: true}}"
            )
        yield Problem(path, message)

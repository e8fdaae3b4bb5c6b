"""The one place the config picks by Slurm operator: its settings module (soperator.py, ack.py,
slinky.py), which holds its models, its rules (`problems`) and what the rules across concerns ask
of it (`USES_JAIL`, `LOGIN_ALWAYS_LOAD_BALANCER`, ...)."""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from . import ack, slinky, soperator

if TYPE_CHECKING:
    from .platform import PlatformConfig

SLURM_OPERATORS: dict[str, ModuleType] = {"soperator": soperator, "ack": ack, "slinky": slinky}


def settings_of(config: PlatformConfig) -> ModuleType:
    return SLURM_OPERATORS[config.slurm_operator]

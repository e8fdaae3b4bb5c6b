"""Placeholder for the Slurm exporter (helper exporter): another part of issue 37 fills this module; until then it renders nothing."""

from __future__ import annotations

from typing import Any

from ..config import PlatformConfig


def render(config: PlatformConfig) -> list[dict[str, Any]]:
    return []

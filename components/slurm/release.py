"""The Slurm release a stack deploys, from the image tag it pins (soperator, Slinky) or from config where
images are bring-your-own (ACK's slurm.ack.slurmRelease): `PlatformConfig.slurm_release`. The release
model and the tag reader are shared with the config's rules (policies/slurm_rules/slurm_release.py)."""

from __future__ import annotations

from slurm_rules.slurm_release import SlurmRelease, release_in_image_tag

from ..config import PlatformConfig


def deployed_release(config: PlatformConfig) -> SlurmRelease:
    """The Slurm release of the images `config` deploys."""
    return config.slurm_release


__all__ = ["SlurmRelease", "deployed_release", "release_in_image_tag"]

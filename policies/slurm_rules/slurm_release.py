"""Slurm releases: which one an image carries, and what each release's config files accept.

A Slurm release is its major, `YY.MM` (22.05, 24.11, ...): options come and go with majors
(RELEASE_NOTES), so the program renders and checks lines by major alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_RELEASE = re.compile(r"^(\d{2})\.(\d{2})(?:\.\d+)?$")
# soperator's tags name it after "slurm" (1.14.10-jammy-slurm24.05.2, 4.1.7-slurm25.11.3);
# Slinky's and SchedMD's start with it (26.05-ubuntu26.04, 25.11.2-rockylinux9).
_TAGGED = (re.compile(r"(?:^|[-_.])slurm-?(\d{2}\.\d{2})(?:\.\d+)?(?:$|[-_+])"), re.compile(r"^(\d{2}\.\d{2})(?:\.\d+)?(?:$|-)"))


@dataclass(frozen=True, order=True)
class SlurmRelease:
    major: int  # the year, 22 for 22.05
    minor: int  # the month, 5 for 22.05

    def __str__(self) -> str:
        return f"{self.major:02d}.{self.minor:02d}"

    @classmethod
    def parse(cls, text: str) -> SlurmRelease:
        """`24.11` or `24.11.5` (the maintenance number does not change what the config accepts)."""
        match = _RELEASE.match(text.strip())
        if not match or not 1 <= int(match.group(2)) <= 12:
            raise ValueError(f"{text!r} is not a Slurm release: YY.MM or YY.MM.P, e.g. 24.11 or 24.11.5")
        return cls(int(match.group(1)), int(match.group(2)))


def release_in_image_tag(tag: str) -> SlurmRelease:
    """The Slurm release an image tag names: `1.14.10-jammy-slurm24.05.2` -> 24.05, `26.05-ubuntu26.04` -> 26.05."""
    for pattern in _TAGGED:
        if match := pattern.search(tag):
            try:
                return SlurmRelease.parse(match.group(1))
            except ValueError:
                break
    raise ValueError(
        f"image tag {tag!r} names no Slurm release: it must name one as the upstream tags do, soperator's "
        "<operator>-[<os>-]slurm<YY.MM.P> (4.1.7-slurm25.11.3) or Slinky's <YY.MM[.P]>-<os> (26.05-ubuntu26.04)"
    )


# The Slurm majors the program knows the config of (SchedMD releases one each May and November since 23.11).
RELEASES = tuple(SlurmRelease.parse(text) for text in ("22.05", "23.02", "23.11", "24.05", "24.11", "25.05", "25.11", "26.05"))


def unknown_release(release: SlurmRelease) -> str | None:
    """Why the program cannot render for `release`, or None when it knows that release."""
    if release in RELEASES:
        return None
    known = ", ".join(map(str, RELEASES))
    if RELEASES[0] < release < RELEASES[-1]:
        return f"Slurm {release} is not a Slurm release (releases: {known})"
    return f"the program knows what Slurm {known} accept, not {release}: add it to slurm_rules/slurm_release.py first"

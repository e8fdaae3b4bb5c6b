"""What every component's Pulumi side shares: warnings, a child's options, secrets from secret config."""

from __future__ import annotations

from typing import Any, Optional

import pulumi

from .config import PlatformConfig


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


def secret_if(config: PlatformConfig, key: str, value: Any) -> Any:
    """`value` as a Pulumi secret when it was built from secret config key `key`."""
    return pulumi.Output.secret(value) if key in config.secret_keys else value

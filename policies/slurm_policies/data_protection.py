"""protect-slurm-data-volumes: the data volumes survive a rename, an upgrade or a destroy."""

from __future__ import annotations

import re

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)

from .common import (
    DEFAULT_DATA_CLAIM_REGEX,
    PV,
    PVC,
    config_value,
    display,
    get,
    violation,
)

# ---------------------------------------------------------------------------
# protect-slurm-data-volumes


def validate_data_protection(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type not in (PVC, PV):
        return
    pattern = re.compile(config_value(args.get_config(), "dataClaimPattern", DEFAULT_DATA_CLAIM_REGEX))
    label = display(args.props, args.name)
    if args.resource_type == PVC:
        if pattern.match(str(get(args.props, "metadata", "name", default=""))) and not args.opts.protect:
            report(
                violation(
                    f"PersistentVolumeClaim {label} holds Slurm data (jail, spool or submount) but is not protected; "
                    "a rename or `pulumi destroy` would delete it",
                    "declare it with ResourceOptions(protect=True, retain_on_delete=True) (storage component)",
                ),
                None,
            )
        return
    claim = str(get(args.props, "spec", "claimRef", "name", default=""))
    if not pattern.match(claim):
        return
    if not args.opts.protect:
        report(
            violation(
                f"PersistentVolume {label} is bound to Slurm data claim {claim} but is not protected",
                "declare it with ResourceOptions(protect=True, retain_on_delete=True) (storage component)",
            ),
            None,
        )
    policy = get(args.props, "spec", "persistentVolumeReclaimPolicy")
    if policy is not None and policy != "Retain":
        report(
            violation(
                f"PersistentVolume {label} is bound to Slurm data claim {claim} with persistentVolumeReclaimPolicy "
                f"{policy}; releasing the claim would {'delete' if policy == 'Delete' else 'scrub'} the data",
                "set spec.persistentVolumeReclaimPolicy: Retain",
            ),
            None,
        )


protect_data_volumes = ResourceValidationPolicy(
    name="protect-slurm-data-volumes",
    description="Slurm data claims and the volumes bound to them are protected, and those volumes use reclaim policy Retain.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_data_protection,
    config_schema=PolicyConfigSchema(
        properties={
            "dataClaimPattern": {
                "type": "string",
                "default": DEFAULT_DATA_CLAIM_REGEX,
                "description": "Regex of data claim names (also matched against a PersistentVolume's claimRef.name).",
            }
        }
    ),
)

POLICIES = [protect_data_volumes]

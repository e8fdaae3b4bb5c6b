"""configmap-secret-size: no ConfigMap or Secret the API server refuses for its size.

The API server refuses one whose data is over 1 MiB (`slurm_rules.kube_rules.MAX_DATA_SIZE`), which a preview
does not ask it: such a stack passes preview and fails in the middle of `pulumi up`. The tenants ConfigMap's
script grows with every tenant (components/tenancy.py), so a stack of enough tenants reaches it.
"""

from __future__ import annotations

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy
from slurm_rules import cell_fit, kube_rules

from .common import CONFIG_MAP, SECRET, display, get, is_map, violation

TENANTS_FIX = (
    "put fewer tenants in this stack (its tenants[]): the tenants ConfigMap holds the script that creates every "
    "tenant's Slurm accounts and reservations, and grows with each; give the others a stack of their own"
)
GENERIC_FIX = "split the data over several ConfigMaps or Secrets, or ship large files another way (an image, a volume)"


def data_sizes(resource_type: str, props: object) -> dict[str, int]:
    """Per field and key, the bytes the API server counts (ConfigMaps and Secrets only, else nothing)."""

    def field(name: str) -> dict[str, object]:
        value = get(props, name, default={})
        return dict(value) if is_map(value) else {}

    if resource_type == CONFIG_MAP:
        return kube_rules.config_map_data_sizes(field("data"), field("binaryData"))
    if resource_type == SECRET:
        return kube_rules.secret_data_sizes(field("data"), field("stringData"))
    return {}


def validate_object_size(args: ResourceValidationArgs, report: ReportViolation) -> None:
    sizes = data_sizes(args.resource_type, args.props)
    total = sum(sizes.values())
    if total <= kube_rules.MAX_DATA_SIZE:
        return
    kind = "ConfigMap" if args.resource_type == CONFIG_MAP else "Secret"
    largest = max(sizes, key=lambda key: sizes[key])
    tenants = get(args.props, "metadata", "labels", "app.kubernetes.io/component") == cell_fit.TENANTS_COMPONENT
    report(
        violation(
            f"{kind} {display(args.props, args.name)} holds {total:,} bytes of data (the largest, {largest}: "
            f"{sizes[largest]:,}), over the {kube_rules.MAX_DATA_SIZE:,} bytes (1 MiB) the API server accepts in one "
            "ConfigMap or Secret; the preview passes and `pulumi up` fails when the API server refuses it",
            TENANTS_FIX if tenants else GENERIC_FIX,
        ),
        None,
    )


object_size = ResourceValidationPolicy(
    name="configmap-secret-size",
    description="No ConfigMap or Secret holds more data than the API server accepts (1 MiB; a Secret's data decoded).",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_object_size,
)

POLICIES = [object_size]

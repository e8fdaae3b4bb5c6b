"""pinned-chart-versions: every operator chart at an exact version."""

from __future__ import annotations

from typing import Optional

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    StackValidationArgs,
    StackValidationPolicy,
)
from slurm_rules import kube_rules  # the rules the stack config uses too

from .common import (
    CHART_TYPES,
    config_value,
    get,
    items,
    of_type,
    stack_config,
    violation,
)

# ---------------------------------------------------------------------------
# pinned-chart-versions

LOCAL_CHART = ("/", "./", "../", "file://")
STACK = "pulumi:pulumi:Stack"
DEFAULT_VERSIONS_OUTPUT = "chartVersions"
PIN_FIX = "pin an exact chart version (e.g. 1.14.10 or v26.7.0) in the stack's operators.<chart>.version"


def unpinned(version: str) -> Optional[str]:
    """Why `version` is not a pin, or None when it is one."""
    if kube_rules.is_exact_version(version):
        return None
    if not version:
        return "has no version, so every deployment installs whatever is newest"
    return f"has version '{version}', a floating tag or range that can resolve to a new release at any deployment"


def validate_pinned_charts(args: StackValidationArgs, report: ReportViolation) -> None:
    config = stack_config(args)
    exempt = set(config_value(config, "exemptCharts", []))
    for chart_resource in of_type(args.resources, *CHART_TYPES):
        chart = get(chart_resource.props, "chart")
        if not chart:
            # helm.sh/v4 Chart is a component: the engine shows it without inputs; see the outputs below.
            continue
        chart = str(chart)
        if chart.startswith(LOCAL_CHART) or chart in exempt:
            continue
        problem = unpinned(str(get(chart_resource.props, "version", default="")).strip())
        if problem:
            kind = chart_resource.resource_type.rsplit(":", 1)[-1]
            report(violation(f"Helm {kind} {chart_resource.name} (chart {chart}) {problem}", PIN_FIX), chart_resource.urn)
    # The program exports the version of every release it installs; the engine
    # shows stack outputs even where it hides a component Chart's inputs.
    output = config_value(config, "versionsOutput", DEFAULT_VERSIONS_OUTPUT)
    for stack_resource in of_type(args.resources, STACK):
        for release, version in items(get(stack_resource.props, output)):
            if str(release) in exempt:
                continue
            problem = unpinned(str(version or "").strip())
            if problem:
                report(
                    violation(f"Helm release {release} (stack output {output}) {problem}", PIN_FIX),
                    stack_resource.urn,
                )


pinned_charts = StackValidationPolicy(
    name="pinned-chart-versions",
    description="Operator Helm charts (helm.sh/v4 Chart, v3 Chart/Release) are pinned to an exact version.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_pinned_charts,
    config_schema=PolicyConfigSchema(
        properties={
            "exemptCharts": {
                "type": "array",
                "items": {"type": "string"},
                "default": [],
                "description": "Chart references (or release keys of the versions output) exempt from pinning.",
            },
            "versionsOutput": {
                "type": "string",
                "default": DEFAULT_VERSIONS_OUTPUT,
                "description": "Stack output mapping release -> chart version, checked as well.",
            },
        }
    ),
)

POLICIES = [pinned_charts]

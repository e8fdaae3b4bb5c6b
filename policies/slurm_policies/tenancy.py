"""slurm-tenant-cells-fit: the tenants' guaranteed cells fit the Slurm workers the
stack declares (HiveD's startup check, at preview).

It reads what the stack renders, so a hand-edited stack is judged too: the
guarantees from the tenants ConfigMap (`cells.json`, components/tenancy.py) and
the capacity from the per-pool workers (soperator 4.x and Slinky NodeSets, ACK
worker groups: replicas × GPUs per worker).
"""

from __future__ import annotations

import json

from pulumi_policy import EnforcementLevel, ReportViolation, StackValidationArgs, StackValidationPolicy
from slurm_rules import cell_fit  # the same check as the stack config

from .common import CONFIG_MAP, display, get, is_list, is_map, of_type, violation
from .quota import worker_sets


def cell_requests(document: str) -> list[cell_fit.CellRequest]:
    """The ConfigMap's cells, or ValueError when it is not the list of cells we render."""
    cells = json.loads(document)
    if not is_list(cells):
        raise ValueError("not a list")
    requests = []
    for cell in cells:
        if not is_map(cell):
            raise ValueError("an entry is not an object")
        size, count = cell.get("gpusPerCell"), cell.get("cells")
        if not (isinstance(size, int) and isinstance(count, int) and size > 0 and count > 0):
            raise ValueError(f"gpusPerCell and cells must be positive integers in {dict(cell)}")
        requests.append(cell_fit.CellRequest(str(cell.get("tenant", "?")), str(cell.get("pool", "?")), size, count))
    return requests


def validate_tenant_cells_fit(args: StackValidationArgs, report: ReportViolation) -> None:
    capacity: dict[str, tuple[int, int]] = {}
    for r in args.resources:
        for _, pool, workers, shape in worker_sets(r.resource_type, r.props):
            nodes, gpus = capacity.get(pool, (0, int(shape.gpus)))
            capacity[pool] = (nodes + workers, min(gpus, int(shape.gpus)))
    for config_map in of_type(args.resources, CONFIG_MAP):
        props = config_map.props
        if get(props, "metadata", "labels", "app.kubernetes.io/component") != cell_fit.TENANTS_COMPONENT or cell_fit.CELLS_KEY not in get(
            props, "data", default={}
        ):
            continue
        where = f"ConfigMap {display(props)}"
        try:
            requests = cell_requests(str(get(props, "data", cell_fit.CELLS_KEY)))
        except ValueError as error:
            report(violation(f"{where} has an unreadable {cell_fit.CELLS_KEY} ({error})", "render it from stack config tenants[]"), config_map.urn)
            continue
        for shortfall in cell_fit.shortfalls(capacity, requests):
            nodes, gpus = capacity.get(shortfall.pool, (0, 0))
            report(
                violation(
                    f"{where}: {shortfall.describe()}; the stack declares {nodes} Slurm workers of {gpus} GPUs in that pool",
                    "shrink or move the tenants' cells (tenants[].cells), or add workers to the pool",
                ),
                config_map.urn,
            )


tenant_cells_fit = StackValidationPolicy(
    name="slurm-tenant-cells-fit",
    description="The tenants' guaranteed GPU cells (N GPUs on one node each) fit the Slurm workers of their pools.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_tenant_cells_fit,
)

POLICIES = [tenant_cells_fit]

"""Volume naming and shape: the claims soperator 1.14.10 and the FPT guide expect.

* `slurm-volume-claim-names`: `jail` -> `jail-pvc`, `controller-spool` ->
  `controller-spool-pvc`, every other claim -> `jail-submount-<name>-pvc`.
* `slurm-data-volume-shape`: data claims are ReadWriteMany; the jail is big
  enough for a whole OS root filesystem.
* `slurm-volume-references`: every `volumeSourceName` exists; every claim the
  SlurmCluster mounts is declared in the stack (or known to pre-exist).
* `slurm-jail-submounts-consistent`: login and worker mount the same
  submounts at the same paths.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from .common import (
    DEFAULT_DATA_CLAIM_REGEX,
    DEFAULT_JAIL_CLAIM,
    DEFAULT_SPOOL_CLAIM,
    DEFAULT_SUBMOUNT_PATTERN,
    JAIL_SOURCE,
    PVC,
    SLURM_CLUSTER,
    SPOOL_SOURCE,
    config_value,
    display,
    elements,
    get,
    gib,
    is_map,
    items,
    jail_sub_mounts,
    name_of,
    namespace_of,
    of_type,
    quantity,
    slurm_nodes,
    source_claims,
    stack_config,
    violation,
)

RWX = "ReadWriteMany"
DEFAULT_MIN_JAIL_SIZE = "40Gi"


def same_namespace(a: Optional[str], b: Optional[str]) -> bool:
    """Unset namespaces (the provider's default) match anything."""
    return a is None or b is None or a == b


# ---------------------------------------------------------------------------
# slurm-volume-claim-names


def expected_submount_claim(pattern: str, source_name: str) -> str:
    return pattern.replace("{name}", source_name)


def validate_claim_names(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != SLURM_CLUSTER:
        return
    config = args.get_config()
    fixed = {
        JAIL_SOURCE: config_value(config, "jailClaimName", DEFAULT_JAIL_CLAIM),
        SPOOL_SOURCE: config_value(config, "spoolClaimName", DEFAULT_SPOOL_CLAIM),
    }
    pattern = config_value(config, "submountClaimPattern", DEFAULT_SUBMOUNT_PATTERN)
    cluster = display(args.props, args.name)
    claims = source_claims(args.props)
    if JAIL_SOURCE not in claims:
        report(
            violation(
                f"SlurmCluster {cluster} has no volumeSource named 'jail'",
                f"add spec.volumeSources entry {{name: jail, persistentVolumeClaim: {{claimName: {fixed[JAIL_SOURCE]}}}}}",
            ),
            None,
        )
    for source_name, claim in claims.items():
        expected = fixed.get(source_name) or expected_submount_claim(pattern, source_name)
        if claim is None:
            if source_name in fixed:
                report(
                    violation(
                        f"SlurmCluster {cluster}: volumeSource '{source_name}' is not a persistentVolumeClaim",
                        f"back it with persistentVolumeClaim.claimName: {expected} (a ReadWriteMany claim)",
                    ),
                    None,
                )
            continue
        if claim != expected:
            what = "soperator and the FPT guide expect" if source_name in fixed else "submount claims are named"
            report(
                violation(
                    f"SlurmCluster {cluster}: volumeSource '{source_name}' claims '{claim}', but {what} '{expected}'",
                    f"name the PersistentVolumeClaim '{expected}' and point volumeSources[{source_name}].persistentVolumeClaim.claimName at it",
                ),
                None,
            )


claim_names = ResourceValidationPolicy(
    name="slurm-volume-claim-names",
    description="SlurmCluster volumeSources claim jail-pvc, controller-spool-pvc and jail-submount-<name>-pvc.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_claim_names,
    config_schema=PolicyConfigSchema(
        properties={
            "jailClaimName": {"type": "string", "default": DEFAULT_JAIL_CLAIM, "description": "Claim of volumeSource 'jail'."},
            "spoolClaimName": {
                "type": "string",
                "default": DEFAULT_SPOOL_CLAIM,
                "description": "Claim of volumeSource 'controller-spool'.",
            },
            "submountClaimPattern": {
                "type": "string",
                "default": DEFAULT_SUBMOUNT_PATTERN,
                "description": "Claim of every other volumeSource; {name} is the volumeSource name.",
            },
        }
    ),
)


# ---------------------------------------------------------------------------
# slurm-data-volume-shape


def data_claim_roles(resources: list[Any]) -> list[tuple[Optional[str], str, str]]:
    """(namespace, claim, volumeSource name) for every claim a SlurmCluster mounts."""
    roles = []
    for cluster in of_type(resources, SLURM_CLUSTER):
        namespace = namespace_of(cluster.props)
        for source_name, claim in source_claims(cluster.props).items():
            if claim:
                roles.append((namespace, claim, source_name))
    return roles


def role_of(pvc_props: Any, roles: list[tuple[Optional[str], str, str]], pattern: re.Pattern[str]) -> Optional[str]:
    name, namespace = name_of(pvc_props), namespace_of(pvc_props)
    for role_namespace, claim, source_name in roles:
        if claim == name and same_namespace(role_namespace, namespace):
            return source_name
    if pattern.match(name):
        return JAIL_SOURCE if name == DEFAULT_JAIL_CLAIM else "data"
    return None


def validate_data_volume_shape(args: StackValidationArgs, report: ReportViolation) -> None:
    config = stack_config(args)
    min_size_text = str(config_value(config, "minJailSize", DEFAULT_MIN_JAIL_SIZE))
    min_size = quantity(min_size_text)
    pattern = re.compile(config_value(config, "dataClaimPattern", DEFAULT_DATA_CLAIM_REGEX))
    roles = data_claim_roles(args.resources)
    for pvc in of_type(args.resources, PVC):
        role = role_of(pvc.props, roles, pattern)
        if role is None:
            continue
        claim = display(pvc.props, pvc.name)
        modes = [str(m) for m in elements(get(pvc.props, "spec", "accessModes"))]
        if RWX not in modes:
            report(
                violation(
                    f"PersistentVolumeClaim {claim} (Slurm volume '{role}') has accessModes {modes or '[]'}; "
                    "every controller, worker and login pod mounts it at once, so it must be ReadWriteMany",
                    "set spec.accessModes: [ReadWriteMany] and use a read-write-many class (NFS, NAS) or a static RWX volume",
                ),
                pvc.urn,
            )
        if role != JAIL_SOURCE:
            continue
        requested = get(pvc.props, "spec", "resources", "requests", "storage")
        try:
            size = quantity(requested)
        except ValueError:
            report(
                violation(
                    f"PersistentVolumeClaim {claim} (the jail) requests storage {requested!r}, not a Kubernetes quantity",
                    f"set spec.resources.requests.storage to at least {min_size_text}, e.g. 100Gi",
                ),
                pvc.urn,
            )
            continue
        if size < min_size:
            report(
                violation(
                    f"PersistentVolumeClaim {claim} (the jail) requests {requested} ({gib(size)}), "
                    f"less than {min_size_text}; the jail holds a whole OS root filesystem",
                    f"request at least {min_size_text} (storage.jail.size)",
                ),
                pvc.urn,
            )


data_volume_shape = StackValidationPolicy(
    name="slurm-data-volume-shape",
    description="Jail, controller-spool and submount claims are ReadWriteMany; the jail claim is large enough.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_data_volume_shape,
    config_schema=PolicyConfigSchema(
        properties={
            "minJailSize": {
                "type": "string",
                "default": DEFAULT_MIN_JAIL_SIZE,
                "description": "Smallest jail claim (Kubernetes quantity).",
            },
            "dataClaimPattern": {
                "type": "string",
                "default": DEFAULT_DATA_CLAIM_REGEX,
                "description": "Regex of data claim names checked even when no SlurmCluster mounts them.",
            },
        }
    ),
)


# ---------------------------------------------------------------------------
# slurm-volume-references


def volume_source_refs(cluster_props: Any) -> list[tuple[str, str]]:
    """(path, volumeSourceName) for every reference under spec.slurmNodes.*.volumes."""
    refs = []
    for kind, node in items(slurm_nodes(cluster_props)):
        for key, volume in items(get(node, "volumes")):
            path = f"spec.slurmNodes.{kind}.volumes.{key}"
            if is_map(volume) and get(volume, "volumeSourceName"):
                refs.append((path, str(volume["volumeSourceName"])))
            for index, entry in enumerate(elements(volume)):
                if is_map(entry) and get(entry, "volumeSourceName"):
                    refs.append((f"{path}[{index}]", str(entry["volumeSourceName"])))
    return refs


def validate_volume_references(args: StackValidationArgs, report: ReportViolation) -> None:
    config = stack_config(args)
    pre_existing = {str(c) for c in config_value(config, "preExistingClaims", [])}
    pvcs = [(namespace_of(p.props), name_of(p.props)) for p in of_type(args.resources, PVC)]
    for cluster in of_type(args.resources, SLURM_CLUSTER):
        label = display(cluster.props, cluster.name)
        namespace = namespace_of(cluster.props)
        claims = source_claims(cluster.props)
        for path, source_name in volume_source_refs(cluster.props):
            if source_name not in claims:
                report(
                    violation(
                        f"SlurmCluster {label}: {path} refers to volumeSource '{source_name}', "
                        f"which spec.volumeSources does not define (defined: {', '.join(sorted(claims)) or 'none'})",
                        f"add a spec.volumeSources entry named '{source_name}' or correct the volumeSourceName",
                    ),
                    cluster.urn,
                )
        for source_name, claim in claims.items():
            if claim is None:
                continue
            declared = any(name == claim and same_namespace(namespace, ns) for ns, name in pvcs)
            known = claim in pre_existing or (namespace is not None and f"{namespace}/{claim}" in pre_existing)
            if not (declared or known):
                qualified = f"{namespace}/{claim}" if namespace else claim
                report(
                    violation(
                        f"SlurmCluster {label}: volumeSource '{source_name}' claims '{qualified}', which this stack "
                        "does not declare and the policy config does not list as pre-existing; the pods would stay Pending",
                        f"declare the PersistentVolumeClaim '{claim}' in the stack (storage component), or add "
                        f"'{qualified}' to slurm-volume-references.preExistingClaims if it is created outside Pulumi",
                    ),
                    cluster.urn,
                )


volume_references = StackValidationPolicy(
    name="slurm-volume-references",
    description="Every volumeSourceName exists in spec.volumeSources and every claimed PVC is declared or known to pre-exist.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_volume_references,
    config_schema=PolicyConfigSchema(
        properties={
            "preExistingClaims": {
                "type": "array",
                "items": {"type": "string"},
                "default": [],
                "description": "Claims created outside this stack, as 'name' or 'namespace/name'.",
            }
        }
    ),
)


# ---------------------------------------------------------------------------
# slurm-jail-submounts-consistent


def _mounts(node: Any) -> dict[str, tuple[str, str]]:
    return {
        str(get(m, "name", default="")): (str(get(m, "mountPath", default="")), str(get(m, "volumeSourceName", default="")))
        for m in jail_sub_mounts(node)
    }


def validate_submounts_consistent(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != SLURM_CLUSTER:
        return
    nodes = slurm_nodes(args.props)
    if not is_map(get(nodes, "worker")):
        return  # soperator 4.x: workers are NodeSets (rule soperator-nodesets)
    login, worker = _mounts(get(nodes, "login")), _mounts(get(nodes, "worker"))
    cluster = display(args.props, args.name)
    fix = (
        "declare each submount once (storage.submounts) so login and worker get identical "
        "jailSubMounts entries (same name, mountPath and volumeSourceName)"
    )
    for name in sorted(set(login) | set(worker)):
        if name not in login or name not in worker:
            present, missing = ("worker", "login") if name in worker else ("login", "worker")
            path = (worker.get(name) or login.get(name) or ("", ""))[0]
            report(
                violation(
                    f"SlurmCluster {cluster}: jailSubMount '{name}' ({path}) is mounted on {present} but not on {missing}; "
                    "jobs would see different files on login and worker nodes",
                    fix,
                ),
                None,
            )
            continue
        (login_path, login_source), (worker_path, worker_source) = login[name], worker[name]
        if login_path != worker_path:
            report(
                violation(
                    f"SlurmCluster {cluster}: jailSubMount '{name}' is mounted at {worker_path} on worker but {login_path} on login",
                    fix,
                ),
                None,
            )
        if login_source != worker_source:
            report(
                violation(
                    f"SlurmCluster {cluster}: jailSubMount '{name}' uses volumeSource '{worker_source}' on worker but '{login_source}' on login",
                    fix,
                ),
                None,
            )


submounts_consistent = ResourceValidationPolicy(
    name="slurm-jail-submounts-consistent",
    description="jailSubMounts are identical (name, mountPath, volumeSourceName) on login and worker nodes.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_submounts_consistent,
)

POLICIES = [claim_names, data_volume_shape, volume_references, submounts_consistent]

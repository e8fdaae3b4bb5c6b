"""Shape rules of the Slurm operators beyond soperator 1.14.10's SlurmCluster:

* `soperator-nodesets`: each soperator 4.x NodeSet names, in its
  `slurm.nebius.ai/parental-cluster-ref` annotation, a SlurmCluster of the same
  namespace, mounts the jail claim the operator expects, and the same
  jailSubMounts as the login nodes.
* `ack-slurm-config`: every pod of an ACK SlurmCluster mounts, at
  `slurmConfPath`, a ConfigMap of this stack holding slurm.conf whose
  ClusterName is the CR's; `mungeConfPath` lies in a mounted Secret; and /home
  comes from a declared, protected claim.
* `slinky-references`: Slinky's key Secrets (`slurmKeyRef`, `jwtKeyRef`) and
  LoginSet `sssdConfRef` exist in the stack with those keys, and every
  NodeSet/LoginSet/RestApi points at a Controller of the stack.
* `job-confinement`: jobs are confined to what they asked for. ACK's worker
  slurm.conf and Slinky's Controller extraConf set proctrack/cgroup and
  task/cgroup, beside a cgroup.conf of this stack with ConstrainCores,
  ConstrainDevices and ConstrainRAMSpace; soperator 4.x's customSlurmConfig
  and customCgroupConfig undo none of its own.
"""

from __future__ import annotations

from typing import Any, Optional

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    StackValidationArgs,
    StackValidationPolicy,
)
from slurm_rules import confinement

from .common import (
    ACK_SLURM_CLUSTER,
    CONFIG_MAP,
    DEFAULT_JAIL_CLAIM,
    PVC,
    SECRET,
    SLINKY_ACCOUNTING,
    SLINKY_CONTROLLER,
    SLINKY_LOGINSET,
    SLINKY_NODESET,
    SLINKY_RESTAPI,
    SLURM_CLUSTER,
    SOPERATOR_NODESET,
    ack_templates,
    config_value,
    display,
    elements,
    get,
    items,
    jail_sub_mounts,
    name_of,
    namespace_of,
    of_type,
    slurm_nodes,
    source_claims,
    stack_config,
    violation,
)

PARENT_ANNOTATION = "slurm.nebius.ai/parental-cluster-ref"
HOME = "/home"


def by_name(resources: list[Any], *types: str) -> dict[tuple[Optional[str], str], Any]:
    return {(namespace_of(r.props), name_of(r.props)): r for r in of_type(resources, *types)}


def data_keys(secret_or_map: Any) -> set[str]:
    """Keys a Secret/ConfigMap holds (data or stringData; values may be unknown at preview)."""
    keys: set[str] = set()
    for field in ("data", "stringData"):
        keys |= {str(k) for k, _ in items(get(secret_or_map, field))}
    return keys


# ---------------------------------------------------------------------------
# soperator-nodesets


def check_submounts(nodeset: Any, cluster: Any, report: ReportViolation) -> None:
    """A NodeSet's jailSubMounts match the cluster's login ones: same name, path and claim."""
    claims = source_claims(cluster.props)
    login = {
        str(get(m, "name")): (str(get(m, "mountPath")), claims.get(str(get(m, "volumeSourceName"))))
        for m in jail_sub_mounts(get(slurm_nodes(cluster.props), "login"))
    }
    worker = {
        str(get(m, "name")): (str(get(m, "mountPath")), get(m, "volumeSource", "persistentVolumeClaim", "claimName"))
        for m in jail_sub_mounts(get(nodeset.props, "spec", "slurmd"))
    }
    if login != worker:
        report(
            violation(
                f"NodeSet {display(nodeset.props, nodeset.name)}: jailSubMounts {sorted(worker.items())} differ from the "
                f"login nodes' {sorted(login.items())}; jobs would see different files on login and worker nodes",
                "declare each submount once (storage.submounts): login and every NodeSet then mount the same claims at the same paths",
            ),
            nodeset.urn,
        )


def validate_soperator_nodesets(args: StackValidationArgs, report: ReportViolation) -> None:
    jail_claim = config_value(stack_config(args), "jailClaimName", DEFAULT_JAIL_CLAIM)
    clusters = by_name(args.resources, SLURM_CLUSTER)
    for nodeset in of_type(args.resources, SOPERATOR_NODESET):
        label = display(nodeset.props, nodeset.name)
        parent = get(nodeset.props, "metadata", "annotations", PARENT_ANNOTATION)
        if not parent or (namespace_of(nodeset.props), str(parent)) not in clusters:
            report(
                violation(
                    f"NodeSet {label} has {PARENT_ANNOTATION}={parent!r}, which is no SlurmCluster of this stack in "
                    "its namespace; soperator's webhook only fills it in when the namespace holds exactly one cluster",
                    f"annotate it with {PARENT_ANNOTATION}: <SlurmCluster name> and keep it in the cluster's namespace",
                ),
                nodeset.urn,
            )
        cluster = clusters.get((namespace_of(nodeset.props), str(parent)))
        if cluster is not None:
            check_submounts(nodeset, cluster, report)
        claim = get(nodeset.props, "spec", "slurmd", "volumes", "jail", "persistentVolumeClaim", "claimName")
        if claim != jail_claim:
            report(
                violation(
                    f"NodeSet {label} mounts jail claim {claim!r}, not {jail_claim!r}: its workers would see another root",
                    f"set spec.slurmd.volumes.jail.persistentVolumeClaim.claimName: {jail_claim}",
                ),
                nodeset.urn,
            )


soperator_nodesets = StackValidationPolicy(
    name="soperator-nodesets",
    description="soperator 4.x NodeSets belong to a SlurmCluster of their namespace and mount its jail claim.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_soperator_nodesets,
    config_schema=PolicyConfigSchema(
        properties={"jailClaimName": {"type": "string", "default": DEFAULT_JAIL_CLAIM, "description": "The jail claim."}}
    ),
)


# ---------------------------------------------------------------------------
# ack-slurm-config


def mounted(template: Any, path: str) -> list[Any]:
    """The volumes of a pod template mounted at `path` by any container."""
    spec = get(template, "spec", default={})
    names = {
        get(mount, "name")
        for container in elements(get(spec, "containers"))
        for mount in elements(get(container, "volumeMounts"))
        if str(get(mount, "mountPath", default="")).rstrip("/") == path.rstrip("/")
    }
    return [volume for volume in elements(get(spec, "volumes")) if get(volume, "name") in names]


def sources(volume: Any, kind: str) -> list[Any]:
    """The configMap/secret sources of a volume, projected ones included."""
    direct = get(volume, kind)
    found = [direct] if direct else []
    return found + [get(s, kind) for s in elements(get(volume, "projected", "sources")) if get(s, kind)]


def validate_ack_config(args: StackValidationArgs, report: ReportViolation) -> None:
    config_maps = by_name(args.resources, CONFIG_MAP)
    claims = by_name(args.resources, PVC)
    for cluster in of_type(args.resources, ACK_SLURM_CLUSTER):
        label, namespace = display(cluster.props, cluster.name), namespace_of(cluster.props)
        spec = get(cluster.props, "spec", default={})
        conf_path, munge_path = get(spec, "slurmConfPath"), get(spec, "mungeConfPath")
        if not conf_path or not munge_path:
            report(violation(f"SlurmCluster {label} lacks slurmConfPath or mungeConfPath", "set both (slurm.ack)"), cluster.urn)
            continue
        munge_dir = str(munge_path).rsplit("/", 1)[0] or "/"
        for where, _, template in ack_templates(cluster.props):
            config_refs = [s for v in mounted(template, conf_path) for s in sources(v, "configMap")]
            confs = [config_maps.get((namespace, str(get(ref, "name")))) for ref in config_refs]
            good = [c for c in confs if c is not None and "slurm.conf" in data_keys(c.props)]
            if not good:
                report(
                    violation(
                        f"SlurmCluster {label} {where}: nothing mounted at slurmConfPath {conf_path} is a ConfigMap of this "
                        "stack holding slurm.conf; the operator's init script copies that directory to /etc/slurm",
                        "mount the generated slurm.conf ConfigMap at slurmConfPath in every pod template",
                    ),
                    cluster.urn,
                )
            else:
                text = str(get(good[0].props, "data", "slurm.conf", default=""))
                cluster_name = name_of(cluster.props)
                if text and f"ClusterName={cluster_name}\n" not in text + "\n":
                    report(
                        violation(
                            f"SlurmCluster {label} {where}: slurm.conf in ConfigMap {display(good[0].props)} does not say ClusterName={cluster_name}",
                            "generate slurm.conf from the same config as the CR",
                        ),
                        cluster.urn,
                    )
            if not any(sources(v, "secret") for v in mounted(template, munge_dir)):
                report(
                    violation(
                        f"SlurmCluster {label} {where}: mungeConfPath {munge_path} is not inside a mounted Secret "
                        f"(nothing Secret-backed at {munge_dir}); munged would start without the cluster's key",
                        "mount the munge Secret (key munge.key) in the directory of mungeConfPath",
                    ),
                    cluster.urn,
                )
            homes = [get(v, "persistentVolumeClaim", "claimName") for v in mounted(template, HOME)]
            declared = [claims.get((namespace, str(c))) for c in homes if c]
            if not declared or any(c is None for c in declared):
                report(
                    violation(
                        f"SlurmCluster {label} {where}: /home is not a claim this stack declares "
                        f"({homes or 'nothing mounted'}); users' files would differ from node to node",
                        "declare the NAS /home PersistentVolume and claim (slurm.ack.home) and mount it at /home",
                    ),
                    cluster.urn,
                )
            elif not all(c.opts.protect for c in declared if c is not None):
                report(
                    violation(
                        f"SlurmCluster {label} {where}: /home claim {homes[0]} is not protected",
                        "declare it with ResourceOptions(protect=True, retain_on_delete=True)",
                    ),
                    cluster.urn,
                )


ack_slurm_config = StackValidationPolicy(
    name="ack-slurm-config",
    description="ACK SlurmClusters mount this stack's slurm.conf at slurmConfPath, the munge Secret at mungeConfPath, "
    "and a declared, protected /home claim in every pod.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_ack_config,
)


# ---------------------------------------------------------------------------
# slinky-references


def validate_slinky_references(args: StackValidationArgs, report: ReportViolation) -> None:
    secrets = by_name(args.resources, SECRET)
    controllers = by_name(args.resources, SLINKY_CONTROLLER)

    def check_key(owner: Any, what: str, ref: Any, fix: str) -> None:
        label = f"{owner.resource_type.rsplit(':', 1)[-1]} {display(owner.props, owner.name)}"
        if not ref:
            report(violation(f"{label} has no {what}", fix), owner.urn)
            return
        secret = secrets.get((namespace_of(owner.props), str(get(ref, "name"))))
        if secret is None or str(get(ref, "key")) not in data_keys(secret.props):
            report(
                violation(
                    f"{label}: {what} names Secret {get(ref, 'name')!r} key {get(ref, 'key')!r}, which this stack does "
                    "not declare in that namespace; the operator would fail, or the chart would mint a key outside Pulumi",
                    fix,
                ),
                owner.urn,
            )

    key_fix = "reference the Secrets of random keys the program declares (pulumi_random)"
    for owner in of_type(args.resources, SLINKY_CONTROLLER, SLINKY_ACCOUNTING):
        if get(owner.props, "spec", "external") is True:
            continue
        check_key(owner, "slurmKeyRef", get(owner.props, "spec", "slurmKeyRef"), key_fix)
        check_key(owner, "jwtKeyRef", get(owner.props, "spec", "jwtKeyRef"), key_fix)
    for loginset in of_type(args.resources, SLINKY_LOGINSET):
        check_key(loginset, "sssdConfRef", get(loginset.props, "spec", "sssdConfRef"), "reference the sssd.conf Secret of the LDAP component")
    for member in of_type(args.resources, SLINKY_NODESET, SLINKY_LOGINSET, SLINKY_RESTAPI):
        ref = get(member.props, "spec", "controllerRef", "name")
        if (namespace_of(member.props), str(ref)) not in controllers:
            report(
                violation(
                    f"{member.resource_type.rsplit(':', 1)[-1]} {display(member.props, member.name)} points at Controller "
                    f"{ref!r}, which is not in this stack's namespace",
                    "set spec.controllerRef.name to the stack's Controller",
                ),
                member.urn,
            )


slinky_references = StackValidationPolicy(
    name="slinky-references",
    description="Slinky's key Secrets and sssd.conf exist and are referenced; NodeSets, LoginSets and RestApis point at the Controller.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_slinky_references,
)

# ---------------------------------------------------------------------------
# job-confinement

CONFINEMENT_FIX = (
    f"render {' and '.join(confinement.SLURM_CONF_LINES)} and a cgroup.conf with "
    f"{', '.join(f'{key}=yes' for key in confinement.CONSTRAINTS)} (components/slurm)"
)


def cgroup_conf_of(config_maps: list[Any]) -> Optional[str]:
    """The cgroup.conf text among these ConfigMaps ("" while unknown at preview), or None when none holds one."""
    for config_map in config_maps:
        if "cgroup.conf" in data_keys(config_map.props):
            text = get(config_map.props, "data", "cgroup.conf")
            return text if isinstance(text, str) else ""
    return None


def confinement_gaps(slurm_conf: Any, cgroup_conf: Optional[str]) -> list[str]:
    """What a slurm.conf and its cgroup.conf lack; a text unknown at preview (or absent, for slurm.conf) is not judged."""
    gaps = confinement.slurm_conf_gaps(slurm_conf) if isinstance(slurm_conf, str) else []
    if cgroup_conf is None:
        gaps.append("no cgroup.conf of this stack beside it (the operators' own constrain nothing)")
    elif cgroup_conf:
        gaps += confinement.cgroup_conf_gaps(cgroup_conf)
    return gaps


def validate_job_confinement(args: StackValidationArgs, report: ReportViolation) -> None:
    config_maps = by_name(args.resources, CONFIG_MAP)

    def flag(owner: Any, what: str, gaps: list[str]) -> None:
        if gaps:
            report(
                violation(
                    f"{what}: jobs are not confined to what they asked for ({'; '.join(gaps)}); a job without --gres reaches every GPU of its node",
                    CONFINEMENT_FIX,
                ),
                owner.urn,
            )

    for cluster in of_type(args.resources, ACK_SLURM_CLUSTER):
        label, namespace = display(cluster.props, cluster.name), namespace_of(cluster.props)
        conf_path = str(get(cluster.props, "spec", "slurmConfPath", default=""))
        for where, _, template in ack_templates(cluster.props):
            if not where.startswith("workerGroupSpecs") or not conf_path:
                continue
            refs = [s for v in mounted(template, conf_path) for s in sources(v, "configMap")]
            confs = [c for c in (config_maps.get((namespace, str(get(ref, "name")))) for ref in refs) if c is not None]
            slurm_conf = next((get(c.props, "data", "slurm.conf") for c in confs if "slurm.conf" in data_keys(c.props)), None)
            flag(cluster, f"SlurmCluster {label} {where}", confinement_gaps(slurm_conf, cgroup_conf_of(confs)))
    for controller in of_type(args.resources, SLINKY_CONTROLLER):
        if get(controller.props, "spec", "external") is True:
            continue
        namespace = namespace_of(controller.props)
        refs = [config_maps.get((namespace, str(get(ref, "name")))) for ref in elements(get(controller.props, "spec", "configFileRefs"))]
        extra = get(controller.props, "spec", "extraConf", default="")
        flag(
            controller,
            f"Controller {display(controller.props, controller.name)}",
            confinement_gaps(extra, cgroup_conf_of([c for c in refs if c is not None])),
        )
    for cluster in of_type(args.resources, SLURM_CLUSTER):
        spec = get(cluster.props, "spec", default={})
        custom, cgroup = get(spec, "customSlurmConfig"), get(spec, "customCgroupConfig")
        gaps = [
            f"{key.strip()}={value.strip()}: {reason}"
            for key, _, value in (line.partition("=") for line in (custom.splitlines() if isinstance(custom, str) else []))
            if (reason := confinement.weakening(key, value))
        ]
        if isinstance(cgroup, str):
            overridden = confinement.settings(cgroup)
            gaps += [gap for gap in confinement.cgroup_conf_gaps(cgroup) if gap.split()[0].lower() in overridden or gap.startswith("CgroupPlugin")]
        flag(cluster, f"SlurmCluster {display(cluster.props, cluster.name)} (customSlurmConfig/customCgroupConfig)", gaps)


job_confinement = StackValidationPolicy(
    name="job-confinement",
    description="Every Slurm operator confines jobs to what they asked for: proctrack/cgroup, task/cgroup and a cgroup.conf "
    "constraining cores, devices (GPUs) and memory.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_job_confinement,
)

POLICIES = [soperator_nodesets, ack_slurm_config, slinky_references, job_confinement]

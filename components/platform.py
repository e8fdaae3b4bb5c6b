"""The whole platform: the components wired together, and the stack outputs."""

from __future__ import annotations

from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s
from pulumi.runtime.sync_await import _sync_await
from slurm_rules.config_files import RefusedProperty

from .capacity_map import capacity_map
from .config import PlatformConfig, refusal
from .config.cloud import cloud_summary
from .config.fields import Problem
from .identity.directory import LdapDirectory
from .kueue import Kueue
from .kueue import render as kueue_objects
from .monitoring.component import PROMETHEUS_KINDS, Monitoring
from .monitoring.component import render as monitoring_objects
from .munge import MungeKey
from .network_policies import NetworkPolicies
from .node_pools import NodePools
from .operator_charts import Operators
from .operator_moves import deployed_operator, move_problems, previous_operator
from .render.munge import rotation_warning
from .resources import warn
from .slurm import SlurmPlan, resolve, uses_munge
from .slurm_cluster import SlurmCluster, warn_about_removed_workers
from .storage import Storage
from .tenancy.component import Tenants
from .tenant_stacks import platform_problems, release_problems, tenants_by_stack, unlisted_warning

CLIENT_QPS, CLIENT_BURST = 200, 400


def kubernetes_provider(config: PlatformConfig) -> k8s.Provider:
    kube = config.kubernetes
    return k8s.Provider(
        "k8s",
        context=kube.context,
        render_yaml_to_directory=kube.render_yaml_to_directory,
        # Server-side apply keeps fields other controllers own (e.g. operator status).
        enable_server_side_apply=True,
        # The provider's client allows 50 requests/s (burst 120) by default, shared by every
        # create and by the awaits that poll (a claim is polled every 0.5 s until Bound). At
        # 300 resources that throttle added 6 s of the 21.7 s an up takes without checkpoints
        # (issue 21). API priority and fairness protects the server, as it does from kubectl.
        kube_client_settings=k8s.KubeClientSettingsArgs(qps=CLIENT_QPS, burst=CLIENT_BURST),
    )


def last_outputs(previous: pulumi.StackReference) -> dict[str, Any]:
    """The outputs now, not as an Output: the SDK's own synchronous wait (that of its synchronous invokes)."""
    outputs: Optional[dict[str, Any]] = _sync_await(previous.outputs.future())
    return outputs or {}


def resolved(config: PlatformConfig) -> SlurmPlan:
    """The operator's plan, made before anything is registered: a line a person wrote that its files refuse
    (a repeated or defunct key in slurm.ack.extraSlurmConf, slurm.partitions[].config) is a config error."""
    try:
        return resolve(config)
    except RefusedProperty as refused:
        if not refused.origin:
            raise  # the program's own property: a bug, not a config mistake
        raise refusal([Problem(refused.origin, refused.reason, refused.value)], config.secret_keys, pulumi.get_stack()) from None


def build_tenant_stack(config: PlatformConfig, provider: Optional[k8s.Provider] = None) -> dict[str, pulumi.Output]:
    """A tenant stack (tenantStack set): its own tenants' namespace objects, queues, policies and Slurm accounts, against
    the platform stack that deployed the rest. It checks what that stack deployed before registering anything."""
    if problems := release_problems(config):
        raise refusal(problems, config.secret_keys, pulumi.get_stack())
    plan = resolved(config)
    platform = last_outputs(pulumi.StackReference(f"{pulumi.get_organization()}/{pulumi.get_project()}/{config.platform_stack}"))
    if problems := platform_problems(config, platform):
        raise refusal(problems, config.secret_keys, pulumi.get_stack())
    warn(unlisted_warning(config, platform))
    provider = provider or kubernetes_provider(config)
    opts = pulumi.ResourceOptions(providers={"kubernetes": provider})
    # Its accounts' Job waits for slurmdbd itself: the platform stack deployed it.
    tenants = Tenants("tenants", config, plan.accounting_client, [], opts=opts)
    kueue = Kueue("kueue", config, tenants.namespaces, opts=opts) if config.operators.kueue.enabled else None
    if config.network_policies.enabled:
        NetworkPolicies("network-policies", config, plan.pod_roles, tenants.namespaces, opts=opts)
    # The whole cluster's layout: every stack's tenants, as every stack of the cluster packs them.
    layout = capacity_map(config)
    pulumi.log.info(layout)
    return {
        "platformStack": pulumi.Output.from_input(config.platform_stack),
        "clusterName": pulumi.Output.from_input(config.cluster.name),
        "tenants": tenants.summary,
        "capacityMap": pulumi.Output.from_input(layout.splitlines()),
        **({"kueueQueues": kueue.queues} if kueue else {}),
    }


def build_platform(config: PlatformConfig, provider: Optional[k8s.Provider] = None) -> dict[str, pulumi.Output]:
    """Declare every component; return the stack outputs."""
    if config.role == "tenants":
        return build_tenant_stack(config, provider)
    # The Slurm operator the config chooses, and all it renders: once, each component handed its part.
    plan = resolved(config)
    # What this stack exported last time: the baseline of the preview-time warnings, and of the
    # operator moves, checked before anything else is registered.
    previous = pulumi.StackReference(f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}")
    problems = move_problems(config, previous_operator(last_outputs(previous)), pulumi.get_stack())
    if problems:
        raise refusal(problems, config.secret_keys, pulumi.get_stack())
    # Every preview says which cloud's rules the stack is checked by, and which keys chose it.
    pulumi.log.info(cloud_summary(config))
    provider = provider or kubernetes_provider(config)
    opts = pulumi.ResourceOptions(providers={"kubernetes": provider})
    namespace = config.cluster.namespace

    namespace_deps: list[pulumi.Resource] = []
    if config.cluster.create_namespace:
        namespace_deps.append(
            k8s.core.v1.Namespace(
                "slurm-namespace",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=namespace),
                # It holds the data volumes: deleting it would delete them, whatever protects the claims.
                opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(protect=True, retain_on_delete=True)),
            )
        )
    in_namespace = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=namespace_deps))

    pools = NodePools("node-pools", config.node_pools, opts=opts)
    # Operators may share the cluster's namespace; they never declare it themselves.
    operators = Operators("operators", config, plan, opts=in_namespace)
    storage = Storage("storage", config, opts=in_namespace)
    munge = (
        MungeKey(
            "munge",
            config.cluster.name,
            namespace,
            config.slurm.munge_key_rotation,
            opts=in_namespace,
            adopt=config.slurm.adopt_munge_secret,
        )
        if plan.module.USES_MUNGE or uses_munge(config.switched_from)
        else None
    )
    slurm = SlurmCluster(
        "slurm",
        config,
        plan,
        [
            *operators.waits_for_crds(r.manifest for r in plan.rendered),
            *storage.claims.values(),
            *([munge.secret] if munge else []),
        ],
        opts=in_namespace,
    )
    # After the Slurm cluster's priority class, which its pods name (nothing else of the cluster waits for it).
    ldap = (
        LdapDirectory(
            "ldap",
            config.ldap,
            namespace,
            config.tenants,
            slurm.priority_class_name,
            opts=pulumi.ResourceOptions.merge(in_namespace, pulumi.ResourceOptions(depends_on=slurm.priority_classes)),
            secret_config=bool(config.secret_keys & {"tenants", "ldap"}),
        )
        if config.ldap.enabled
        else None
    )
    # From here on each object waits for exactly what must exist first (its namespace, the CRDs of its kind, the
    # Slurm cluster where it is a client), never for a whole component or a list that grows with the tenants: the
    # SDK checks every declared dependency for a cycle, so that would make a preview's cost grow with their square.
    tenants = Tenants("tenants", config, plan.accounting_client, slurm.running, opts=in_namespace) if config.tenants else None
    namespaces = {**operators.namespaces, **(tenants.namespaces if tenants else {})}
    kueue = (
        Kueue(
            "kueue",
            config,
            namespaces,
            opts=pulumi.ResourceOptions.merge(
                in_namespace, pulumi.ResourceOptions(depends_on=operators.waits_for_crds(r.manifest for r in kueue_objects(config)))
            ),
        )
        if config.operators.kueue.enabled
        else None
    )
    if config.network_policies.enabled:
        NetworkPolicies("network-policies", config, plan.pod_roles, namespaces, opts=in_namespace)
    # Its monitors and rules after the Prometheus Operator's CRDs (the chart's, when it installs them).
    monitoring = None
    if config.monitoring.enabled:
        manifests = monitoring_objects(config, plan)
        crds = operators.waits_for_crds(manifest for manifest in manifests if manifest["kind"] in PROMETHEUS_KINDS)
        monitoring = Monitoring("monitoring", manifests, config.monitoring.prometheus, crds, slurm.running, namespaces, opts=in_namespace)
    layout = capacity_map(config) if config.tenants else None
    if layout:
        # Every preview prints it (its diagnostics); the output, a line per element (the CLI cuts a long
        # string short), shows a reviewer line by line what a tenants change moves.
        pulumi.log.info(layout)
    if plan.module.GHOST_NODES_ON_SCALE_DOWN:
        warn_about_removed_workers(config, plan.module, previous.get_output("workerNodes"))
    previous.get_output("mungeKeyRotation").apply(lambda before: warn(rotation_warning(config, before)))

    return {
        "environment": pulumi.Output.from_input(config.environment),
        "region": pulumi.Output.from_input(config.region),
        "cloud": pulumi.Output.from_input(cloud_summary(config)),
        "namespace": pulumi.Output.from_input(namespace),
        "clusterName": pulumi.Output.from_input(config.cluster.name),
        "slurmOperator": pulumi.Output.from_input(deployed_operator(config)),
        "workerNodes": slurm.worker_nodes,
        "slurmPhase": slurm.phase,
        "slurmReady": slurm.ready,
        "slurmUnmetConditions": slurm.unmet_conditions,
        "slurmServices": slurm.service_names,
        "loginEndpoint": slurm.login_endpoint,
        "sshCommand": slurm.ssh_command,
        "userSshCommand": slurm.user_ssh_command,
        "pvcNames": storage.claim_names,
        "storageClassName": storage.storage_class_name,
        "mungeSecretName": munge.secret_name if munge else pulumi.Output.from_input(None),
        "mungeKeyRotation": pulumi.Output.from_input(config.slurm.munge_key_rotation),
        "ldapUri": ldap.uri if ldap else pulumi.Output.from_input(None),
        "chartVersions": operators.versions,
        "installedCharts": operators.installed,
        "k8sNodeFilters": pools.node_filters,
        "nodePoolCapacity": pools.capacity,
        **({"tenants": tenants.summary, "capacityMap": pulumi.Output.from_input(layout.splitlines() if layout else [])} if tenants else {}),
        # What its tenant stacks' previews compare their own tenants with (components/tenant_stacks.py).
        **({"tenantStacks": pulumi.Output.from_input(tenants_by_stack(config))} if config.shares_tenants else {}),
        **({"kueueQueues": kueue.queues} if kueue else {}),
        **({"monitoring": monitoring.summary} if monitoring else {}),
    }

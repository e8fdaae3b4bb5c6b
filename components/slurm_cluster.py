"""The `SlurmCluster` component: declares what the chosen Slurm operator's module
(components/slurm/) renders, and the outputs users need (workers, login, phase).

`pulumi up` waits until the operator reports Slurm ready (slurm.readiness): soperator's and
ACK's SlurmCluster, Slinky's NodeSets. The cluster resource's live status is read back for the
outputs (soperator's phase and conditions) and a warning when it is not ready, and soperator
1.14.10's login Service for its address; the rest is what is known before deployment.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s
from pydantic.alias_generators import to_camel

from .config import PlatformConfig
from .declare import BUILTIN_KINDS, declare, secret_fields
from .munge import generated_key, secret_data
from .resources import child_opts, warn
from .slurm import KeySecret, ReadyWhen, Rendered, SlurmOperator, SlurmPlan
from .slurm.common import WAIT_FOR_ANNOTATION, unmet_conditions

# The built-in kinds whose pods mount the claims and keys other components declare.
WORKLOADS = frozenset({"Deployment", "StatefulSet", "DaemonSet", "Job"})


def warn_about_removed_workers(config: PlatformConfig, module: SlurmOperator, previous_workers: pulumi.Output[Any]) -> None:
    """Warn at preview time, comparing with the workers this stack last exported."""
    previous_workers.apply(lambda previous: warn(module.removed_workers_warning(config, previous)))


class LiveCustomResource(pulumi.CustomResource):
    """A custom resource whose live `status` is an output too.

    pulumi-kubernetes' `CustomResource` resolves only the properties it was given;
    declaring `status` (sent as nothing) makes the provider's answer, read after
    the await, visible to the program. The type token is the same.
    """

    status: pulumi.Output[Any]

    def __init__(self, name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions):
        props = {key: manifest[key] for key in ("apiVersion", "kind", "metadata", "spec")}
        # Like the SDK's CustomResource: ask for the provider plugin of the installed SDK.
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(version=metadata.version("pulumi-kubernetes")))
        super().__init__(f"kubernetes:{manifest['apiVersion']}:{manifest['kind']}", name, {**props, "status": None}, opts)


class SlurmCluster(pulumi.ComponentResource):
    worker_nodes: pulumi.Output[list]
    login_endpoint: pulumi.Output[Optional[str]]
    ssh_command: pulumi.Output[str]
    user_ssh_command: pulumi.Output[Optional[str]]
    phase: pulumi.Output[Optional[str]]
    ready: pulumi.Output[Optional[bool]]
    unmet_conditions: pulumi.Output[list]
    service_names: pulumi.Output[dict]

    def __init__(
        self, name: str, config: PlatformConfig, plan: SlurmPlan, needs: list[pulumi.Resource], opts: Optional[pulumi.ResourceOptions] = None
    ):
        """`plan`: what the chosen operator renders for `config` (slurm.resolve). `needs`: what the custom resources and the workloads (the objects that run pods, or whose operator does) need
        first of other components: the releases installing the CRDs, the claims, the munge key."""
        super().__init__("slurm-platform:slurm_cluster:SlurmCluster", name, None, opts)
        module = plan.module
        # Pods and custom resources name the key Secrets and the priority class: create those first.
        rendered = plan.rendered
        classes = [r for r in rendered if r.manifest["kind"] == "PriorityClass"]
        # The class of every Slurm pod, and of LDAP's (platform.py): None where the operator has none (soperator 1.14.10).
        self.priority_class_name: Optional[str] = classes[0].manifest["metadata"]["name"] if classes else None
        self.priority_classes = [declare(f"{name}-{r.role}", r.manifest, child_opts(self, opts)) for r in classes]
        first = [self._key_secret(name, spec, opts) for spec in plan.key_secrets] + self.priority_classes
        declared: dict[str, pulumi.Resource] = {}
        # The custom resources the operator runs Slurm from: a Slurm client (the tenants' Job, the exporter) waits for
        # these alone, which wait for the keys, config and classes they name.
        self.running: list[pulumi.Resource] = []
        live: list[LiveCustomResource] = []
        reporting: list[tuple[LiveCustomResource, Rendered]] = []
        readiness: list[tuple[LiveCustomResource, ReadyWhen]] = []
        for r in rendered:
            if r.manifest["kind"] != "PriorityClass":
                custom = (r.manifest["apiVersion"], r.manifest["kind"]) not in BUILTIN_KINDS
                runs_pods = custom or r.manifest["kind"] in WORKLOADS
                resource = self._declare(name, config, r, [*first, *(needs if runs_pods else [])], live, opts)
                declared[r.manifest["metadata"]["name"]] = resource
                if custom:
                    self.running.append(resource)
                if isinstance(resource, LiveCustomResource):
                    live.append(resource)
                    if r.live_status:
                        reporting.append((resource, r))
                    if r.ready_when:
                        readiness.append((resource, r.ready_when))
        # The cluster custom resource whose status the operator reports (soperator's and ACK's SlurmCluster);
        # other awaited ones (Slinky's NodeSets) only hold `pulumi up` until they are ready.
        status = reporting[0][0].status.apply(lambda value: dict(value) if value else None) if reporting else pulumi.Output.from_input(None)
        status.apply(lambda value: warn(module.not_ready_message(config, value)))
        login = self._live_login(name, config, module, declared, live, opts)
        self.worker_nodes = pulumi.Output.from_input(module.worker_nodes(config))
        self.login_endpoint = login.apply(lambda service: module.login_endpoint(config, service))
        self.ssh_command = login.apply(lambda service: module.ssh_command(config, service))
        self.user_ssh_command = login.apply(lambda service: module.user_ssh_command(config, service))
        # The operator's own word for the cluster's state: soperator's phase, ACK's state.
        phase_field = reporting[0][1].ready_when.field if reporting and reporting[0][1].ready_when else "phase"
        self.phase = status.apply(lambda value: (value or {}).get(phase_field))
        self.ready = slurm_ready(config, readiness)
        self.unmet_conditions = status.apply(unmet_conditions)
        self.service_names = pulumi.Output.from_input(module.service_names(config))
        self.register_outputs(
            {
                "workerNodes": self.worker_nodes,
                "loginEndpoint": self.login_endpoint,
                "sshCommand": self.ssh_command,
                "userSshCommand": self.user_ssh_command,
                "phase": self.phase,
                "ready": self.ready,
                "unmetConditions": self.unmet_conditions,
                "serviceNames": self.service_names,
            }
        )

    def _declare(
        self,
        name: str,
        config: PlatformConfig,
        rendered: Rendered,
        first: list[pulumi.Resource],
        live: list[LiveCustomResource],
        opts: Optional[pulumi.ResourceOptions],
    ) -> pulumi.Resource:
        """Declare one rendered object: one the provider awaits (`pulumi.com/waitFor`), or whose status
        the component reports, with its live status readable.

        Built from `slurm` config: secret when that key is (secret_fields)."""
        # A custom resource the provider awaits reports its status to us; a built-in kind (a login
        # Service waiting for its address) keeps its typed resource, and the provider awaits it the same way.
        custom = (rendered.manifest["apiVersion"], rendered.manifest["kind"]) not in BUILTIN_KINDS
        awaits = custom and WAIT_FOR_ANNOTATION in (rendered.manifest["metadata"].get("annotations") or {})
        manifest = secret_fields(config, rendered.manifest)
        extra: dict[str, Any] = {}
        if rendered.ignore_changes:
            extra["ignore_changes"] = list(rendered.ignore_changes)
        if rendered.keep:
            extra.update(protect=True, retain_on_delete=True)
        # Its await needs what the cluster runs (the login pods behind a Service): after the live custom resources.
        depends_on = [*first, *(live if rendered.after_cluster else [])] or None
        if not (awaits or rendered.live_status or rendered.ready_when):
            return declare(f"{name}-{rendered.role}", manifest, child_opts(self, opts, depends_on=depends_on, **extra))
        if awaits:
            # The provider's default await timeout is shorter than a first install (slurm.readiness).
            timeout = f"{config.slurm.readiness.timeout_minutes}m"
            extra["custom_timeouts"] = pulumi.CustomTimeouts(create=timeout, update=timeout)
        return LiveCustomResource(f"{name}-{rendered.role}", manifest, child_opts(self, opts, depends_on=depends_on, **extra))

    def _key_secret(self, name: str, spec: KeySecret, opts: Optional[pulumi.ResourceOptions]) -> pulumi.Resource:
        key = generated_key(f"{name}-{spec.role}-random", spec.length, spec.rotation, child_opts(self, opts))
        return k8s.core.v1.Secret(
            f"{name}-{spec.role}",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=spec.name, namespace=spec.namespace, labels=spec.labels or None),
            type="Opaque",
            data={spec.key: secret_data(key.result)},
            opts=child_opts(self, opts, additional_secret_outputs=["data", "stringData"]),
        )

    def _live_login(
        self,
        name: str,
        config: PlatformConfig,
        module: SlurmOperator,
        declared: dict[str, pulumi.Resource],
        live: list[LiveCustomResource],
        opts: Optional[pulumi.ResourceOptions],
    ) -> pulumi.Output[Optional[dict[str, Any]]]:
        """The live Service users SSH through, where the module takes its address from one: ours when
        declared, else the operator's, read once the cluster is up (never without a cluster)."""
        service_name = module.live_login_service(config)
        service = declared.get(service_name) if service_name else None
        if service is None:
            if not service_name or config.render_only:
                return pulumi.Output.from_input(None)
            # The ID waits for the cluster's outputs: unknown while it is being created, so
            # a first preview skips the read instead of failing on a Service not there yet.
            service_id = pulumi.Output.all(*(r.id for r in live), *(r.status for r in live)).apply(
                lambda _: f"{config.cluster.namespace}/{service_name}"
            )
            service = k8s.core.v1.Service.get(f"{name}-login-svc", service_id, opts=child_opts(self, opts))
        assert isinstance(service, k8s.core.v1.Service), service_name
        return pulumi.Output.all(spec=service.spec, status=service.status).apply(api_names)


def slurm_ready(config: PlatformConfig, readiness: list[tuple[LiveCustomResource, ReadyWhen]]) -> pulumi.Output[Optional[bool]]:
    """Whether every object whose status says when Slurm is ready says so now, awaited or not (the deploy's last check,
    .github/actions/slurm-available); None where there is no cluster to ask or nothing reports."""
    if config.render_only or not readiness:
        return pulumi.Output.from_input(None)
    statuses = pulumi.Output.all(*(resource.status for resource, _ in readiness))
    return statuses.apply(
        lambda values: all(ready.holds(dict(value) if value else None) for (_, ready), value in zip(readiness, values, strict=True))
    )


def api_names(value: Any) -> Any:
    """Typed SDK outputs (dicts keyed `load_balancer`, `node_port`) as the API's camelCase objects."""
    if isinstance(value, dict):
        return {to_camel(key): api_names(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [api_names(item) for item in value]
    return value

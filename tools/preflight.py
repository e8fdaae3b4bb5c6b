"""`make preflight STACK=<stack>`: what the live cluster of a stack's kubeconfig context lacks,
before `pulumi up` finds it halfway through. One line per check, pass or what is missing and
how to fix it; exit 1 on any failure. It only reads (SelfSubjectAccessReviews store nothing).

What the stack needs comes from the program itself, run under the SDK's mocks
(tools/program_mocks.py), so the checks follow every object it declares:

- nodes: each pool's nodes exist (named or selected), with the GPUs, CPU and memory it declares;
- storage: the StorageClass it names exists, or the CSI driver of the one it declares;
- CRDs: every custom object whose CRD no chart of this stack installs (the object waits for no
  chart) has its CRD installed, at a served version;
- objects it reads (the LDAP TLS Secret) and adopts (claims made by hand) exist;
- collisions: no object it declares already exists unless Pulumi made it (server-side apply would
  take it over silently), and no chart it installs is already a Helm release (a portal's);
- access: the credentials may create and patch every kind it declares, where it declares it.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Protocol

from kubernetes import client, dynamic
from kubernetes import config as kube_config
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

from components.config import NodePoolConfig, PlatformConfig, parse_config, quantity_value
from components.storage import storage_class_manifest
from tools.policy_configs import raw_stack_config
from tools.program_mocks import Registered, run_under_mocks

CHART_TYPE = "kubernetes:helm.sh/v4:Chart"
# Patches of objects that exist already (node labels): the node checks cover them.
PATCH_TYPES = ("kubernetes:core/v1:NodePatch",)
# The provider's field manager under server-side apply (and its label on client-side creates).
PULUMI_MANAGERS = ("pulumi-kubernetes",)
GPU_RESOURCE = "nvidia.com/gpu"
# The drivers of the StorageClasses this program declares (components/storage.py).
CSI_DRIVER_FIX = {
    "nfs.csi.k8s.io": "install csi-driver-nfs (helm repo https://raw.githubusercontent.com/kubernetes-csi/csi-driver-nfs/master/charts)",
    "nasplugin.csi.alibabacloud.com": "enable the csi-plugin add-on in the ACK console",
}


@dataclass(frozen=True)
class Check:
    """One line of the report: `problem` empty when it passes."""

    subject: str
    detail: str
    problem: str = ""
    fix: str = ""

    @property
    def passed(self) -> bool:
        return not self.problem

    def line(self) -> str:
        if self.passed:
            return f"pass  {self.subject}: {self.detail}"
        return f"FAIL  {self.subject}: {self.problem}" + (f"; fix: {self.fix}" if self.fix else "")


@dataclass(frozen=True)
class Declared:
    """An object the stack declares, reads or adopts."""

    api_version: str
    kind: str
    name: str
    namespace: Optional[str]
    crd_from_chart: bool = False  # it waits for a chart of this stack: its CRD comes from there
    adopted: bool = False  # imported as it is: it must exist
    read: bool = False  # read from the cluster: it must exist

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def ref(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"


@dataclass(frozen=True)
class Release:
    """A Helm chart the stack installs."""

    name: str
    namespace: str


@dataclass(frozen=True)
class Needs:
    objects: list[Declared]
    releases: list[Release]


class Unreadable(Exception):
    """The credentials may not read what a check needs (the check fails, naming it)."""


class Cluster(Protocol):
    """What the checks read of the live cluster."""

    def nodes(self) -> list[dict[str, Any]]: ...
    def storage_class(self, name: str) -> Optional[dict[str, Any]]: ...
    def csi_drivers(self) -> set[str]: ...
    def crds(self) -> list[dict[str, Any]]: ...
    def resource(self, api_version: str, kind: str) -> Optional[tuple[str, bool]]: ...
    def get(self, obj: Declared) -> Optional[dict[str, Any]]: ...
    def helm_releases(self, namespace: str) -> set[str]: ...
    def allowed(self, verb: str, group: str, resource: str, namespace: Optional[str]) -> tuple[bool, str]: ...


# --- what the stack needs -----------------------------------------------------------------------------


def _api_version_kind(resource: Registered) -> tuple[str, str]:
    """From the inputs (typed resources and CustomResource carry them), else from the type token
    `kubernetes:<group>/<version>:<Kind>` (`core` is the empty group)."""
    if resource.inputs.get("apiVersion") and resource.inputs.get("kind"):
        return resource.inputs["apiVersion"], resource.inputs["kind"]
    _, group_version, kind = resource.type.split(":", 2)
    return group_version.removeprefix("core/"), kind


def needs(resources: list[Registered]) -> Needs:
    """The objects and charts the program registers, as the checks see them."""
    by_urn = {r.urn: r for r in resources}

    def waits_for_chart(resource: Registered) -> bool:
        """An explicit dependency of the object or of a component above it is a chart."""
        current: Optional[Registered] = resource
        while current is not None:
            if any(by_urn[d].type == CHART_TYPE for d in current.dependencies if d in by_urn):
                return True
            current = by_urn.get(current.parent)
        return False

    objects, releases = [], []
    for resource in resources:
        if resource.type == CHART_TYPE:
            releases.append(Release(resource.inputs["name"], resource.inputs["namespace"]))
            continue
        if not resource.type.startswith("kubernetes:") or not resource.custom or resource.type in PATCH_TYPES:
            continue
        if resource.read:
            namespace, _, name = resource.import_id.rpartition("/")
            api_version, kind = _api_version_kind(resource)
            objects.append(Declared(api_version, kind, name, namespace or None, read=True))
            continue
        metadata = resource.inputs.get("metadata") or {}
        api_version, kind = _api_version_kind(resource)
        objects.append(
            Declared(
                api_version,
                kind,
                metadata["name"],
                metadata.get("namespace"),
                crd_from_chart=waits_for_chart(resource),
                adopted=bool(resource.import_id),
            )
        )
    return Needs(objects, releases)


def stack_needs(config: PlatformConfig, raw: dict[str, Any], stack: str) -> Needs:
    from components.platform import build_platform

    return needs(run_under_mocks(lambda: build_platform(config), raw, stack=stack).resources)


# --- the checks ---------------------------------------------------------------------------------------


def _quantity(value: Any) -> float:
    return float(quantity_value(str(value)))


def _node_shortfalls(pool: NodePoolConfig, node: dict[str, Any]) -> list[str]:
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    wanted = {"cpu": pool.cpu_per_node, "memory": pool.memory_per_node, **({GPU_RESOURCE: pool.gpus_per_node} if pool.has_gpu else {})}
    return [
        f"{resource} {allocatable.get(resource, 0)} < {want}"
        for resource, want in wanted.items()
        if _quantity(allocatable.get(resource, 0)) < _quantity(want)
    ]


def _labels(node: dict[str, Any]) -> dict[str, str]:
    return (node.get("metadata") or {}).get("labels") or {}


def node_checks(config: PlatformConfig, nodes: list[dict[str, Any]]) -> Iterator[Check]:
    """Per pool: its nodes exist (by name when it labels existing nodes, else by its selector) with
    the allocatable the pool declares (the fit checks and the workers' requests rest on it)."""
    by_name = {node["metadata"]["name"]: node for node in nodes}
    for i, pool in enumerate(config.node_pools):
        subject = f"node pool {pool.name}"
        selector = ",".join(f"{key}={value}" for key, value in sorted(pool.selector.items()))
        if pool.karpenter is not None:
            yield Check(subject, f"provisioned by its Karpenter NodePool ({pool.node_count} nodes as they are needed)")
            continue
        if pool.label_existing_nodes:
            missing = [name for name in pool.label_existing_nodes if name not in by_name]
            if missing:
                yield Check(
                    subject,
                    "",
                    f"nodePools[{i}].labelExistingNodes names nodes that do not exist: {', '.join(missing)}",
                    "list the pool's nodes with `kubectl get nodes` and correct the names",
                )
                continue
            members = [by_name[name] for name in pool.label_existing_nodes]
        else:
            members = [node for node in nodes if all(_labels(node).get(k) == v for k, v in pool.selector.items())]
            if len(members) < pool.node_count:
                yield Check(
                    subject,
                    "",
                    f"{len(members)} nodes labelled {selector}, nodePools[{i}].nodeCount is {pool.node_count}",
                    f"label the pool's nodes (`kubectl label node <name> {selector}`) or list them in nodePools[{i}].labelExistingNodes",
                )
                continue
        short = {node["metadata"]["name"]: s for node in members if (s := _node_shortfalls(pool, node))}
        if short:
            listed = "; ".join(f"{name}: {', '.join(s)}" for name, s in sorted(short.items()))
            yield Check(
                subject,
                "",
                f"nodes have less allocatable than nodePools[{i}] declares ({listed})",
                f"lower nodePools[{i}].cpuPerNode/memoryPerNode/gpusPerNode to what `kubectl describe node` shows as Allocatable"
                + (" (nvidia.com/gpu appears once the GPU operator's device plugin runs)" if pool.has_gpu else ""),
            )
            continue
        gpus = f", {pool.gpus_per_node} GPUs" if pool.has_gpu else ""
        yield Check(subject, f"{len(members)} nodes ({selector}), each at least {pool.cpu_per_node} CPU, {pool.memory_per_node}{gpus}")


def storage_checks(config: PlatformConfig, cluster: Cluster) -> Iterator[Check]:
    """The StorageClass the claims use: named and existing, or declared here on an installed CSI driver."""
    storage_class = config.storage.storage_class
    subject = f"storage class {storage_class.name}"
    declared = storage_class_manifest(storage_class)
    if declared is None:
        if cluster.storage_class(storage_class.name) is None:
            yield Check(
                subject,
                "",
                f"storage.storageClass.name '{storage_class.name}' does not exist",
                "name an existing class (`kubectl get storageclass`) or declare one with storage.storageClass.kind: nfs or alibabaNas",
            )
        else:
            yield Check(subject, "exists")
        return
    provisioner = declared["provisioner"]
    if provisioner not in cluster.csi_drivers():
        yield Check(
            subject,
            "",
            f"its CSI driver {provisioner} is not installed (no CSIDriver object)",
            CSI_DRIVER_FIX.get(provisioner, f"install the {provisioner} CSI driver"),
        )
    else:
        yield Check(subject, f"declared by this stack on CSI driver {provisioner}")


def api_checks(cluster: Cluster, objects: list[Declared]) -> Iterator[Check]:
    """Each kind the stack declares with no chart of its own to bring the CRD is served: a built-in
    kind at its version (no line when it is), a custom kind by its CRD at a served version."""
    crds = cluster.crds()
    wanted = sorted({(o.api_version, o.kind) for o in objects if not o.crd_from_chart and not o.read})
    for api_version, kind in wanted:
        group = api_version.rpartition("/")[0]
        version = api_version.rpartition("/")[2]
        crd = next((c for c in crds if c["spec"]["group"] == group and c["spec"]["names"]["kind"] == kind), None)
        subject = f"{kind} ({api_version})"
        if cluster.resource(api_version, kind) is not None:
            if crd is not None:
                yield Check(subject, f"served, CRD {crd['metadata']['name']}")
            continue
        if crd is not None:
            served = [v["name"] for v in crd["spec"]["versions"] if v.get("served")]
            yield Check(subject, "", f"its CRD {crd['metadata']['name']} serves {', '.join(served) or 'no version'}, not {version}", _api_fix(group))
        else:
            yield Check(subject, "", "not served: no CRD defines it, and no chart of this stack installs one", _api_fix(group))


def _api_fix(group: str) -> str:
    return (
        f"install the operator that owns {group} at the pinned version (operators.<name>.install: true, or the cloud portal's add-on); "
        "for a Kubernetes API, a Kubernetes release that serves it"
    )


def reference_checks(cluster: Cluster, objects: list[Declared]) -> Iterator[Check]:
    """What the stack reads or imports as it is must be there."""
    for obj in objects:
        if not (obj.read or obj.adopted):
            continue
        how = "read by this stack" if obj.read else "adopted as it is (adopt: true)"
        if cluster.get(obj) is None:
            yield Check(obj.ref(), "", f"does not exist, and it is {how}", "create it first, or change the config key that names it")
        else:
            yield Check(obj.ref(), f"exists ({how})")


def collision_checks(cluster: Cluster, needs_: Needs) -> Iterator[Check]:
    """An object of ours that exists already, made by someone else, would be taken over by the first
    `up` (server-side apply) and deleted by a `destroy`; a chart installed by Helm would be doubled."""
    clashes = []
    checked = 0
    for obj in needs_.objects:
        if obj.read or obj.adopted or obj.kind == "Namespace":
            continue  # must exist (above); a namespace of the same name holds nothing of ours by itself
        live = cluster.get(obj)
        checked += 1
        if live is not None and not _made_by_pulumi(live):
            clashes.append(obj.ref())
    if clashes:
        yield Check(
            "name collisions",
            "",
            f"exist already and were not made by Pulumi: {', '.join(clashes)}",
            "delete or rename them, or adopt them (docs/operations.md: Adopting a cluster made by hand)",
        )
    else:
        yield Check("name collisions", f"none among the {checked} objects this stack declares")
    for release in needs_.releases:
        subject = f"chart {release.name} in {release.namespace}"
        if release.name in cluster.helm_releases(release.namespace):
            yield Check(
                subject,
                "",
                f"a Helm release '{release.name}' is already installed there (by hand or a cloud portal)",
                f"use it: set that operator's install: false under slurm-platform:operators; or remove it: `helm uninstall {release.name} -n {release.namespace}`",
            )
        else:
            yield Check(subject, "no Helm release of that name")


def _made_by_pulumi(live: dict[str, Any]) -> bool:
    metadata = live.get("metadata") or {}
    if (metadata.get("labels") or {}).get("app.kubernetes.io/managed-by") == "pulumi":
        return True
    return any(str(entry.get("manager", "")).startswith(PULUMI_MANAGERS) for entry in metadata.get("managedFields") or [])


def guess_resource(kind: str) -> str:
    """The plural of a kind the API server does not serve yet (its CRD comes with this stack's chart):
    Kubernetes' own guess (apimachinery meta.UnsafeGuessKindToResource)."""
    lower = kind.lower()
    if lower.endswith("s"):
        return lower + "es"
    if lower.endswith("y"):
        return lower[:-1] + "ies"
    return lower + "s"


def access_checks(cluster: Cluster, needs_: Needs) -> Iterator[Check]:
    """SelfSubjectAccessReviews: create and patch (server-side apply) of every kind where the stack
    declares it; each chart needs cluster RBAC and CRDs besides its namespaced objects."""
    wanted: dict[tuple[str, str, Optional[str]], None] = {}
    for obj in needs_.objects:
        if obj.read or obj.adopted:
            continue
        found = cluster.resource(obj.api_version, obj.kind)
        resource, namespaced = found if found else (guess_resource(obj.kind), obj.namespace is not None)
        wanted[(obj.group, resource, obj.namespace if namespaced else None)] = None
    for release in needs_.releases:
        for group, resource in (
            ("apiextensions.k8s.io", "customresourcedefinitions"),
            ("rbac.authorization.k8s.io", "clusterroles"),
            ("rbac.authorization.k8s.io", "clusterrolebindings"),
        ):
            wanted[(group, resource, None)] = None
        for group, resource in (("apps", "deployments"), ("", "serviceaccounts"), ("rbac.authorization.k8s.io", "roles")):
            wanted[(group, resource, release.namespace)] = None
    denied = []
    for group, resource, namespace in wanted:
        for verb in ("create", "patch"):
            allowed, reason = cluster.allowed(verb, group, resource, namespace)
            if not allowed:
                where = f" in {namespace}" if namespace else " (cluster-wide)"
                denied.append(f"{verb} {resource}{'.' + group if group else ''}{where}" + (f" ({reason})" if reason else ""))
    if denied:
        yield Check(
            "credentials",
            "",
            f"may not: {'; '.join(denied)}",
            "deploy with an identity bound to cluster-admin (or a role granting these), or set install: false for the charts a portal installs",
        )
    else:
        yield Check("credentials", f"may create and patch all {len(wanted)} kinds, where this stack declares them")


def run_checks(config: PlatformConfig, needs_: Needs, cluster: Cluster) -> list[Check]:
    groups: list[tuple[str, Callable[[], Iterable[Check]]]] = [
        ("nodes", lambda: node_checks(config, cluster.nodes())),
        ("storage", lambda: storage_checks(config, cluster)),
        ("APIs", lambda: api_checks(cluster, needs_.objects)),
        ("references", lambda: reference_checks(cluster, needs_.objects)),
        ("name collisions", lambda: collision_checks(cluster, needs_)),
        ("credentials", lambda: access_checks(cluster, needs_)),
    ]
    checks: list[Check] = []
    for subject, group in groups:
        try:
            checks += list(group())
        except Unreadable as error:
            checks.append(
                Check(subject, "", f"could not be checked: the credentials may not read {error}", "run preflight as the identity that deploys")
            )
    return checks


# --- the live cluster, through the Kubernetes Python client --------------------------------------------


class LiveCluster:
    """Reads only; every list is fetched once."""

    def __init__(self, context: Optional[str], kubeconfig: Optional[str] = None):
        self.api = kube_config.new_client_from_config(config_file=kubeconfig, context=context)
        # Discovery afresh: the client's default cache file is shared and outlives CRDs installed since.
        self._discovery = tempfile.TemporaryDirectory(prefix="preflight-")
        self.dynamic = dynamic.DynamicClient(self.api, cache_file=os.path.join(self._discovery.name, "discovery.json"))
        self._cache: dict[str, Any] = {}

    def _plain(self, value: Any) -> Any:
        return self.api.sanitize_for_serialization(value)

    def _once(self, key: str, fetch: Callable[[], Any]) -> Any:
        if key not in self._cache:
            self._cache[key] = _readable(key, fetch)
        return self._cache[key]

    def nodes(self) -> list[dict[str, Any]]:
        return self._once("nodes", lambda: self._plain(client.CoreV1Api(self.api).list_node()).get("items") or [])

    def storage_class(self, name: str) -> Optional[dict[str, Any]]:
        return self.get(Declared("storage.k8s.io/v1", "StorageClass", name, None))

    def csi_drivers(self) -> set[str]:
        return self._once("csi", lambda: {d.metadata.name for d in client.StorageV1Api(self.api).list_csi_driver().items})

    def crds(self) -> list[dict[str, Any]]:
        return self._once("crds", lambda: self._plain(client.ApiextensionsV1Api(self.api).list_custom_resource_definition()).get("items") or [])

    def resource(self, api_version: str, kind: str) -> Optional[tuple[str, bool]]:
        try:
            found = self.dynamic.resources.get(api_version=api_version, kind=kind)
        except ResourceNotFoundError:
            return None
        return found.name, found.namespaced

    def get(self, obj: Declared) -> Optional[dict[str, Any]]:
        try:
            resource = self.dynamic.resources.get(api_version=obj.api_version, kind=obj.kind)
            return _readable(obj.ref(), lambda: resource.get(name=obj.name, namespace=obj.namespace).to_dict())
        except (ResourceNotFoundError, NotFoundError):
            return None  # the kind is not served (its CRD comes later), or no such object
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    def helm_releases(self, namespace: str) -> set[str]:
        """Helm 3 keeps a release as Secrets labelled owner=helm, name=<release>."""
        secrets = _readable(
            f"Secrets in {namespace}", lambda: client.CoreV1Api(self.api).list_namespaced_secret(namespace, label_selector="owner=helm")
        )
        return {s.metadata.labels.get("name", "") for s in secrets.items}

    def allowed(self, verb: str, group: str, resource: str, namespace: Optional[str]) -> tuple[bool, str]:
        review = client.V1SelfSubjectAccessReview(
            spec=client.V1SelfSubjectAccessReviewSpec(
                resource_attributes=client.V1ResourceAttributes(verb=verb, group=group, resource=resource, namespace=namespace)
            )
        )
        status = client.AuthorizationV1Api(self.api).create_self_subject_access_review(review).status
        return bool(status.allowed), status.reason or ""


def _readable(what: str, fetch: Callable[[], Any]) -> Any:
    try:
        return fetch()
    except ApiException as error:  # the dynamic client's errors too
        if error.status in (401, 403):
            raise Unreadable(f"{what} ({error.status} {error.reason})") from None
        raise


# --- the command ------------------------------------------------------------------------------------


def summary_markdown(stack: str, checks: list[Check]) -> str:
    """For the deploy job's summary: the failing lines first."""
    failing = [c for c in checks if not c.passed]
    head = f"### Preflight of `{stack}`: " + (f"{len(failing)} of {len(checks)} checks failing" if failing else f"all {len(checks)} checks pass")
    lines = [c.line() for c in failing] + [c.line() for c in checks if c.passed]
    return head + "\n\n```\n" + "\n".join(lines) + "\n```\n"


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prog="make preflight STACK=<stack>")
    parser.add_argument("--stack", required=True)
    parser.add_argument("--kubeconfig", help="default: $KUBECONFIG, then ~/.kube/config")
    args = parser.parse_args(argv)
    from components.config import ConfigError

    raw = raw_stack_config(Path.cwd(), args.stack)
    try:
        config = parse_config(raw)
    except ConfigError as error:
        print(f"preflight {args.stack}: the stack config is invalid, nothing was checked\n{error}", file=sys.stderr)
        return 1
    if config.render_only:
        print(f"preflight {args.stack}: kubernetes.renderYamlToDirectory is set; this stack has no cluster to check")
        return 0
    context = config.kubernetes.context
    print(f"preflight {args.stack} (kubeconfig context {context or '(current)'}):")
    checks = run_checks(config, stack_needs(config, raw, args.stack), LiveCluster(context, args.kubeconfig))
    for check in checks:
        print(f"  {check.line()}")
    failing = sum(not c.passed for c in checks)
    print(f"preflight {args.stack}: {len(checks)} checks, {failing} failing")
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as out:
            out.write(summary_markdown(args.stack, checks))
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())

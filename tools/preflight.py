"""`make preflight STACK=<stack>`: what the live cluster of a stack's kubeconfig context lacks,
before `pulumi up` finds it halfway through. One line per check, pass or what is missing and
how to fix it; exit 1 on any failure not accepted with `--ignore <check>`. It only reads
(SelfSubjectAccessReviews store nothing). A kubeconfig, context or API server it cannot reach is one
FAIL line saying what was tried, never a traceback.

What the stack needs comes from the program itself, run under the SDK's mocks
(tools/program_mocks.py), so the checks follow every object it declares:

- the API server's Kubernetes version: at least what the objects the stack declares and its Slurm
  operator need;
- nodes: each pool's nodes exist (named or selected), with the GPUs, CPU and memory it declares; each
  node is in one pool at most; exactly nodeCount - slurmWorkers nodes of a pool carry its kueueNodeLabels;
- storage: the StorageClass it names exists, or the CSI driver of the one it declares;
- CRDs: every custom object whose CRD no chart of this stack installs (the object waits for no
  chart) has its CRD installed, at a served version;
- objects it reads and adopts (claims made by hand) exist; the Secrets its pods mount
  but it does not make (the LDAP TLS Secret) hold the keys their readers need (and ACK's slurmdbd.conf, with tenants, PrivateData);
- collisions: no object it declares already exists unless Pulumi made it (server-side apply would
  take it over silently), and no chart it installs is already a Helm release (a portal's);
- access: the credentials may create and patch every kind it declares, where it declares it.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Optional, Protocol

import urllib3
import yaml
from kubernetes import client, dynamic
from kubernetes import config as kube_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

from components.config import NodePoolConfig, PlatformConfig, quantity_value
from components.identity.names import TLS_CA_KEY
from components.render.storage import storage_class_manifest
from components.slurm.common import PRIVATE_DATA
from tools.policy_configs import raw_stack_config, stack_config
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
    """One line of the report: `problem` empty when it passes. `name` is the check's stable name (what
    `--ignore` takes); `ignored`: a failure the user accepts, reported but not counted."""

    subject: str
    detail: str
    problem: str = ""
    fix: str = ""
    name: str = ""
    ignored: bool = False

    @property
    def passed(self) -> bool:
        return not self.problem

    @property
    def failing(self) -> bool:
        return not self.passed and not self.ignored

    def line(self) -> str:
        if self.passed:
            return f"pass  [{self.name}] {self.subject}: {self.detail}"
        status = "IGNORED" if self.ignored else "FAIL"
        return f"{status}  [{self.name}] {self.subject}: {self.problem}" + (f"; fix: {self.fix}" if self.fix else "")


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
    native_sidecars: bool = False  # a pod template with an init container of restartPolicy: Always

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
    def version(self) -> dict[str, str]: ...


# --- what the stack needs -----------------------------------------------------------------------------


def _api_version_kind(resource: Registered) -> tuple[str, str]:
    """From the inputs (typed resources and CustomResource carry them), else from the type token
    `kubernetes:<group>/<version>:<Kind>` (`core` is the empty group)."""
    if resource.inputs.get("apiVersion") and resource.inputs.get("kind"):
        return resource.inputs["apiVersion"], resource.inputs["kind"]
    _, group_version, kind = resource.type.split(":", 2)
    return group_version.removeprefix("core/"), kind


def has_native_sidecars(value: Any) -> bool:
    """Anywhere in an object (a Pod, a template, a CR embedding one): an init container that keeps running."""
    if isinstance(value, dict):
        init = value.get("initContainers")
        if isinstance(init, list) and any(isinstance(c, dict) and c.get("restartPolicy") == "Always" for c in init):
            return True
        return any(has_native_sidecars(v) for v in value.values())
    if isinstance(value, list):
        return any(has_native_sidecars(v) for v in value)
    return False


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
                native_sidecars=has_native_sidecars(resource.inputs),
            )
        )
    return Needs(objects, releases)


def stack_needs(config: PlatformConfig, raw: dict[str, Any], stack: str) -> Needs:
    from components.platform import build_platform
    from components.tenant_stacks import platform_outputs_as_filed

    platform = platform_outputs_as_filed(config) if config.role == "tenants" else None
    return needs(run_under_mocks(lambda: build_platform(config), raw, stack=stack, previous_outputs=platform).resources)


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


def carries(node: dict[str, Any], labels: dict[str, str]) -> bool:
    """The node carries every one of `labels` (a pool's selector, its Kueue labels)."""
    node_labels = _labels(node)
    return all(node_labels.get(key) == value for key, value in labels.items())


def node_checks(config: PlatformConfig, nodes: list[dict[str, Any]]) -> Iterator[Check]:
    """Per pool: its nodes exist (by name when it labels existing nodes, else by its selector) with
    the allocatable the pool declares (the fit checks and the workers' requests rest on it)."""
    by_name = {node["metadata"]["name"]: node for node in nodes}
    for i, pool in enumerate(config.node_pools):
        subject = f"node pool {pool.name}"
        selector = label_text(pool.selector)
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
            members = [node for node in nodes if carries(node, pool.selector)]
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


def pool_members(pool: NodePoolConfig, node: dict[str, Any]) -> bool:
    """The node is the pool's: it carries the pool's selector, or the pool labels it by name."""
    return node["metadata"]["name"] in pool.label_existing_nodes or carries(node, pool.selector)


def label_text(labels: dict[str, str]) -> str:
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


def pool_overlap_checks(config: PlatformConfig, nodes: list[dict[str, Any]]) -> Iterator[Check]:
    """A node two pools select would hold one pool's Slurm workers and the other's (or Kueue's) pods, and the
    capacity model would count it twice."""
    shared = {}
    for node in nodes:
        pools = [(i, pool) for i, pool in enumerate(config.node_pools) if pool_members(pool, node)]
        if len(pools) > 1:
            shared[node["metadata"]["name"]] = pools
    if not shared:
        yield Check("node pools apart", f"each of the {len(nodes)} nodes is in one pool at most")
        return

    def why(i: int, pool: NodePoolConfig, name: str) -> str:
        if name in pool.label_existing_nodes:
            return f"{pool.name} (nodePools[{i}].labelExistingNodes)"
        return f"{pool.name} (nodePools[{i}].selector {label_text(pool.selector)})"

    listed = "; ".join(f"{name} is in " + " and ".join(why(i, pool, name) for i, pool in pools) for name, pools in sorted(shared.items()))
    yield Check(
        "node pools apart",
        "",
        f"nodes match more than one pool: {listed}",
        "relabel those nodes so each carries one pool's selector (`kubectl label node <name> <key>=<value> --overwrite`), "
        "name each node in one pool's labelExistingNodes only, or give the pools selectors no node carries together",
    )


def kueue_node_checks(config: PlatformConfig, nodes: list[dict[str, Any]]) -> Iterator[Check]:
    """A pool with kueueNodeLabels keeps nodeCount - slurmWorkers nodes for Kueue: exactly that many of its nodes carry
    the labels (fewer leaves Kueue's flavor short; more puts Slurm workers where Kueue's pods go)."""
    for i, pool in enumerate(config.node_pools):
        if not pool.kueue_node_labels or pool.karpenter is not None:
            continue  # a Karpenter pool's nodes come and go: its NodePool labels them
        labels = label_text(pool.kueue_node_labels)
        members = [node for node in nodes if pool_members(pool, node)]
        kueue = sorted(n["metadata"]["name"] for n in members if carries(n, pool.kueue_node_labels))
        wanted = pool.node_count - pool.worker_replicas
        subject = f"Kueue nodes of pool {pool.name}"
        if len(kueue) == wanted:
            yield Check(subject, f"{wanted} of its nodes carry {labels}")
            continue
        change = (
            f"label {wanted - len(kueue)} more of the pool's nodes (`kubectl label node <name> {labels}`)"
            if len(kueue) < wanted
            else f"remove the labels from {len(kueue) - wanted} of them (`kubectl label node <name> {' '.join(k + '-' for k in sorted(pool.kueue_node_labels))}`)"
        )
        yield Check(
            subject,
            "",
            f"{len(kueue)} of its nodes carry nodePools[{i}].kueueNodeLabels {labels}"
            + (f" ({', '.join(kueue)})" if kueue else "")
            + f", where nodeCount - slurmWorkers is {pool.node_count} - {pool.worker_replicas} = {wanted}",
            f"{change}, or change nodePools[{i}].slurmWorkers",
        )


# The oldest Kubernetes each Slurm operator release declares, as read upstream:
# - soperator 4.1.7: helm/soperator/Chart.yaml and helm/soperator-crds/Chart.yaml at tag 4.1.7 of github.com/nebius/soperator,
#   kubeVersion ">=1.29.0-0";
# - soperator 1.14.10: its chart declares no kubeVersion; docs/limitations.md at tag 1.14.10 says "Kubernetes: >= 1.28";
# - Slinky 1.2.1: helm/slurm-operator/Chart.yaml at tag v1.2.1 of github.com/SlinkyProject/slurm-operator, kubeVersion ">= 1.29.0-0";
# - ack-slurm-operator: its chart is not public, and github.com/AliyunContainerService/ai-models-on-ack (framework/slurm)
#   names no Kubernetes version: nothing is claimed for it.
OPERATOR_KUBERNETES: dict[tuple[str, str], tuple[int, int]] = {
    ("soperator", "1.14.10"): (1, 28),
    ("soperator", "4.1.7"): (1, 29),
    ("slinky", "1.2.1"): (1, 29),
}


def operator_releases(config: PlatformConfig) -> list[tuple[str, str]]:
    """The Slurm operator releases the stack runs on: soperator's CRDs chart may be a release ahead of it."""
    if config.slurm_operator == "soperator":
        soperator = config.operators.soperator
        return sorted({("soperator", soperator.version), ("soperator", soperator.crds_version or soperator.version)})
    if config.slurm_operator == "slinky":
        return [("slinky", config.operators.slinky.version)]
    return []


def kubernetes_needs(config: PlatformConfig, objects: list[Declared]) -> list[tuple[tuple[int, int], str]]:
    """The oldest Kubernetes each thing the stack declares needs, with what needs it."""
    found: list[tuple[tuple[int, int], str]] = []
    if any(o.kind == "ValidatingAdmissionPolicy" for o in objects):
        found.append(((1, 30), "its ValidatingAdmissionPolicy objects (admissionregistration.k8s.io/v1 is GA in 1.30)"))
    sidecars = sorted(o.ref() for o in objects if o.native_sidecars)
    if sidecars:
        found.append(((1, 29), f"native sidecars in {', '.join(sidecars)} (init containers with restartPolicy: Always, on by default since 1.29)"))
    for operator, version in operator_releases(config):
        if (operator, version) in OPERATOR_KUBERNETES:
            found.append((OPERATOR_KUBERNETES[(operator, version)], f"{operator} {version}"))
    return found


def server_minor(version: dict[str, str]) -> tuple[int, int]:
    """/version's major and minor; managed clusters add a suffix to the minor (EKS, GKE: "30+")."""
    return int(re.sub(r"\D", "", version["major"])), int(re.sub(r"\D", "", version["minor"]))


def version_checks(config: PlatformConfig, objects: list[Declared], version: dict[str, str]) -> Iterator[Check]:
    have = server_minor(version)
    wanted = kubernetes_needs(config, objects)
    subject = f"Kubernetes {version.get('gitVersion', '.'.join(map(str, have)))}"
    short = [(need, why) for need, why in wanted if have < need]
    if not wanted:
        yield Check(subject, "nothing this stack declares asks for a newer release")
    elif short:
        oldest = max(need for need, _ in short)
        yield Check(
            subject,
            "",
            "older than " + "; ".join(f"{major}.{minor} for {why}" for (major, minor), why in short),
            f"upgrade the control plane to {oldest[0]}.{oldest[1]} or later (kubeadm: `kubeadm upgrade plan`, one minor "
            "release at a time), or its cloud's cluster upgrade",
        )
    else:
        yield Check(subject, "at least " + "; ".join(f"{major}.{minor} for {why}" for (major, minor), why in wanted))


@dataclass(frozen=True)
class ReadSecret:
    """A Secret the stack reads but does not make: the keys its readers need, and the config key naming it."""

    namespace: str
    name: str
    key_path: str
    keys: tuple[str, ...]
    reader: str


def read_secrets(config: PlatformConfig) -> list[ReadSecret]:
    namespace = config.cluster.namespace
    found = []
    tls = config.ldap.tls
    if config.ldap.enabled and tls.enabled and tls.secret_name:
        # The clients mount ca.crt (components/slurm/common.py ldap_ca_files); the server loads all three
        # (LDAP_TLS_*_FILE in components/identity/server.py). The program itself never reads it.
        keys = ("tls.crt", "tls.key", TLS_CA_KEY)
        found.append(ReadSecret(namespace, tls.secret_name, "ldap.tls.secretName", keys, "the LDAP server and its clients"))
    accounting = config.slurm.accounting
    if not accounting.enabled:
        return found
    if config.slurm_operator == "ack" and config.slurm.ack is not None and config.slurm.ack.slurmdbd_conf_secret_name:
        # Mounted into slurmdbd's pod as its whole config (components/slurm/ack.py volumes).
        found.append(
            ReadSecret(namespace, config.slurm.ack.slurmdbd_conf_secret_name, "slurm.ack.slurmdbdConfSecretName", ("slurmdbd.conf",), "slurmdbd")
        )
    elif accounting.database == "external" and accounting.external is not None:
        # soperator's externalDB.passwordSecretKeyRef, Slinky's Accounting storageConfig.passwordKeyRef.
        external = accounting.external
        found.append(
            ReadSecret(
                namespace, external.password_secret_name, "slurm.accounting.external.passwordSecretName", (external.password_secret_key,), "slurmdbd"
            )
        )
    return found


def _secret_data(live: dict[str, Any]) -> dict[str, str]:
    """The Secret's values, decoded (the API serves them base64); a value that is not text stays as given."""
    decoded = {}
    for key, value in (live.get("data") or {}).items():
        try:
            decoded[key] = base64.b64decode(value or "").decode()
        except (binascii.Error, UnicodeDecodeError):
            decoded[key] = value
    return decoded


def private_data_missing(slurmdbd_conf: str) -> list[str]:
    """What a slurmdbd.conf's PrivateData lacks of what the tenants' records need (the last such line is the one
    slurmdbd keeps)."""
    value = ""
    for line in slurmdbd_conf.splitlines():
        key, _, rest = line.split("#", 1)[0].partition("=")
        if key.strip().lower() == "privatedata":
            value = rest.strip()
    present = {word.strip().lower() for word in value.split(",")}
    return [word for word in PRIVATE_DATA if word not in present]


def secret_checks(config: PlatformConfig, cluster: Cluster) -> Iterator[Check]:
    """Each Secret the stack reads but does not make: there, with each key its readers need, not empty."""
    for secret in read_secrets(config):
        subject = f"Secret {secret.namespace}/{secret.name} ({secret.key_path})"
        live = cluster.get(Declared("v1", "Secret", secret.name, secret.namespace))
        if live is None:
            yield Check(
                subject,
                "",
                f"does not exist; read by {secret.reader}",
                f"create it with keys {', '.join(secret.keys)} in namespace {secret.namespace}, or name an existing one in {secret.key_path}",
            )
            continue
        data = _secret_data(live)
        lacking = [key for key in secret.keys if not data.get(key)]
        if lacking:
            yield Check(
                subject,
                "",
                f"has no {', '.join(lacking)} (it holds {', '.join(sorted(data)) or 'nothing'}); read by {secret.reader}",
                _secret_fix(secret, lacking),
            )
        else:
            yield Check(subject, f"holds {', '.join(secret.keys)}")


def _secret_fix(secret: ReadSecret, lacking: list[str]) -> str:
    if TLS_CA_KEY in lacking:
        return (
            f"add the CA that signed the server certificate as key {TLS_CA_KEY} (cert-manager Certificates from a CA Issuer "
            f"carry it; by hand: `kubectl -n {secret.namespace} create secret generic {secret.name} --type=kubernetes.io/tls "
            "--from-file=tls.crt --from-file=tls.key --from-file=ca.crt --dry-run=client -o yaml | kubectl apply -f -`)"
        )
    return f"add {', '.join(lacking)} to it (`kubectl -n {secret.namespace} edit secret {secret.name}`)"


def sacct_privacy_checks(config: PlatformConfig, cluster: Cluster) -> Iterator[Check]:
    """On ACK, slurmdbd.conf is the user's Secret: with tenants, sacct and sacctmgr are private only when it
    carries the PrivateData the other operators' renders set (components/slurm/common.py PRIVATE_DATA)."""
    if not config.tenants:
        return
    for secret in read_secrets(config):
        if "slurmdbd.conf" not in secret.keys:
            continue
        live = cluster.get(Declared("v1", "Secret", secret.name, secret.namespace))
        conf = _secret_data(live).get("slurmdbd.conf") if live else None
        if not conf:
            continue  # secret_checks names it
        subject = f"PrivateData in slurmdbd.conf of Secret {secret.namespace}/{secret.name}"
        missing = private_data_missing(conf)
        if missing:
            yield Check(
                subject,
                "",
                f"lacks {', '.join(missing)}: with tenants, sacct and sacctmgr show each tenant the others' " + ", ".join(missing),
                f"add the line `PrivateData={','.join(PRIVATE_DATA)}` to slurmdbd.conf in Secret {secret.namespace}/{secret.name} "
                "and restart slurmdbd",
            )
        else:
            yield Check(subject, f"PrivateData holds {','.join(PRIVATE_DATA)}")


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


def reference_checks(config: PlatformConfig, cluster: Cluster, objects: list[Declared]) -> Iterator[Check]:
    """What the stack reads or imports as it is must be there (the Secrets it reads: secret_checks, with their keys)."""
    checked_with_keys = {(s.namespace, s.name) for s in read_secrets(config)}
    for obj in objects:
        if not (obj.read or obj.adopted) or (obj.kind == "Secret" and (obj.namespace, obj.name) in checked_with_keys):
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


# Each check by its stable name (what --ignore takes), in report order. Reaching the cluster (CONNECTION) is not
# among them: nothing else runs without it, so it cannot be ignored.
CHECKS: list[tuple[str, Callable[[PlatformConfig, Needs, Cluster], Iterable[Check]]]] = [
    ("kubernetes-version", lambda config, needs_, cluster: version_checks(config, needs_.objects, cluster.version())),
    ("nodes", lambda config, needs_, cluster: node_checks(config, cluster.nodes())),
    ("node-pools-apart", lambda config, needs_, cluster: pool_overlap_checks(config, cluster.nodes())),
    ("kueue-nodes", lambda config, needs_, cluster: kueue_node_checks(config, cluster.nodes())),
    ("storage", lambda config, needs_, cluster: storage_checks(config, cluster)),
    ("apis", lambda config, needs_, cluster: api_checks(cluster, needs_.objects)),
    ("references", lambda config, needs_, cluster: reference_checks(config, cluster, needs_.objects)),
    ("secrets", lambda config, needs_, cluster: secret_checks(config, cluster)),
    ("sacct-privacy", lambda config, needs_, cluster: sacct_privacy_checks(config, cluster)),
    ("collisions", lambda config, needs_, cluster: collision_checks(cluster, needs_)),
    ("credentials", lambda config, needs_, cluster: access_checks(cluster, needs_)),
]
CHECK_NAMES = tuple(name for name, _ in CHECKS)
CONNECTION = "api-server"


def run_checks(config: PlatformConfig, needs_: Needs, cluster: Cluster, ignore: Iterable[str] = ()) -> list[Check]:
    """Every check, each line named by its check; the failures of an ignored check are reported as IGNORED."""
    ignored = set(ignore)
    checks: list[Check] = []
    for name, group in CHECKS:
        try:
            found = list(group(config, needs_, cluster))
        except Unreadable as error:
            found = [Check(name, "", f"could not be checked: the credentials may not read {error}", "run preflight as the identity that deploys")]
        checks += [replace(check, name=name, ignored=name in ignored and not check.passed) for check in found]
    return checks


# --- the live cluster, through the Kubernetes Python client --------------------------------------------


class LiveCluster:
    """Reads only; every list is fetched once."""

    def __init__(self, context: Optional[str], kubeconfig: Optional[str] = None):
        self.api = kube_config.new_client_from_config(config_file=kubeconfig, context=context)
        self._cache: dict[str, Any] = {}

    @cached_property
    def dynamic(self) -> dynamic.DynamicClient:
        """On first use, not before /version has shown the server answers (its discovery asks the server)."""
        # Discovery afresh: the client's default cache file is shared and outlives CRDs installed since.
        self._discovery = tempfile.TemporaryDirectory(prefix="preflight-")
        return dynamic.DynamicClient(self.api, cache_file=os.path.join(self._discovery.name, "discovery.json"))

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

    def version(self) -> dict[str, str]:
        """/version: major, minor, gitVersion. The first request: a short timeout, as a server that is not there answers none."""
        return self._once("version", lambda: self._plain(client.VersionApi(self.api).get_code(_request_timeout=VERSION_TIMEOUT)))

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


# --- reaching the cluster: each way it fails is a FAIL line, never a traceback -----------------------------

VERSION_TIMEOUT = (5, 15)  # seconds: connect, read
KUBECONFIG_FIX = (
    "pass --kubeconfig <file> or set KUBECONFIG; on a kubeadm control plane: "
    "`mkdir -p ~/.kube && sudo cp /etc/kubernetes/admin.conf ~/.kube/config && sudo chown $(id -u):$(id -g) ~/.kube/config`"
)


def kubeconfig_location(given: Optional[str]) -> str:
    """What kubectl reads: --kubeconfig, else $KUBECONFIG (files joined by ':'), else ~/.kube/config."""
    return given or os.environ.get("KUBECONFIG") or "~/.kube/config"


def _contexts(paths: list[str]) -> tuple[list[str], str]:
    """The context names of the kubeconfig files, and the current-context (the first file that sets one, as kubectl)."""
    names: list[str] = []
    current = ""
    for path in paths:
        document = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        if not isinstance(document, dict):
            raise ValueError(f"{path} is not a kubeconfig (a YAML mapping)")
        names += [str(entry["name"]) for entry in document.get("contexts") or [] if isinstance(entry, dict) and "name" in entry]
        current = current or str(document.get("current-context") or "")
    return names, current


def connect(kubeconfig: Optional[str], context: Optional[str], stack: str) -> tuple[Optional[LiveCluster], Check]:
    """The cluster of the kubeconfig's context, and the line saying what was reached, or what was tried and what to do."""
    location = kubeconfig_location(kubeconfig)
    paths = [os.path.expanduser(path) for path in location.split(os.pathsep) if path]

    def failed(problem: str, fix: str) -> tuple[Optional[LiveCluster], Check]:
        return None, Check("API server", "", problem, fix, name=CONNECTION)

    found = [path for path in paths if os.path.isfile(path)]
    if not found:
        return failed(f"no kubeconfig file at {' or '.join(paths)}", KUBECONFIG_FIX)
    try:
        names, current = _contexts(found)
    except (OSError, ValueError, yaml.YAMLError) as error:
        return failed(
            f"kubeconfig {location} could not be read: {' '.join(str(error).split())}",
            "fix the file (`kubectl config view` shows what kubectl makes of it), or " + KUBECONFIG_FIX,
        )
    wanted = context or current
    if wanted not in names:
        has = f"it has {', '.join(names)}" if names else "it has no contexts"
        if context:
            problem = f"context '{context}' (--context, else the stack's kubernetes.context) is not in kubeconfig {location}; {has}"
        elif current:
            problem = f"its current-context '{current}' is not in kubeconfig {location}; {has}"
        else:
            problem = f"no context to use: no --context, no kubernetes.context in the stack and no current-context in kubeconfig {location}; {has}"
        choose = f"`pulumi config set --path kubernetes.context <name> --stack {stack}` (or --context <name>)"
        return failed(problem, f"name one of them: {choose}, or `kubectl config use-context <name>`" if names else KUBECONFIG_FIX)
    try:
        cluster = LiveCluster(wanted, location)
    except (ConfigException, OSError, ValueError) as error:
        return failed(
            f"context '{wanted}' of kubeconfig {location} cannot be used: {error}",
            f"fix its cluster and user entries (`kubectl config view --minify --context {wanted}`)",
        )
    server = cluster.api.configuration.host
    tried = f"the API server {server} (context '{wanted}', kubeconfig {location})"
    try:
        version = cluster.version()
    except ApiException as error:
        return failed(
            f"{tried} answered /version with {error.status} {error.reason}",
            f"renew the context's credentials (`kubectl --context {wanted} get --raw /version` shows the same); on kubeadm, "
            "`kubeadm certs check-expiration` on a control-plane node",
        )
    except (urllib3.exceptions.HTTPError, OSError) as error:
        return failed(
            f"could not reach {tried}: {getattr(error, 'reason', None) or error}",
            f"check the server runs and is reachable from here (`kubectl --context {wanted} get --raw /version`); on a kubeadm "
            "control plane: `systemctl status kubelet` and `crictl ps --name kube-apiserver`; from outside, the firewall on port "
            f"{urllib3.util.parse_url(server).port or 443}",
        )
    return cluster, Check("API server", f"{server} (context '{wanted}', kubeconfig {location}) serves {version.get('gitVersion')}", name=CONNECTION)


# --- the command ------------------------------------------------------------------------------------


def _ignored_text(checks: list[Check]) -> str:
    names = sorted({c.name for c in checks if c.ignored})
    return f", {sum(c.ignored for c in checks)} ignored (--ignore {' --ignore '.join(names)})" if names else ""


def summary_line(stack: str, checks: list[Check]) -> str:
    return f"preflight {stack}: {len(checks)} checks, {sum(c.failing for c in checks)} failing{_ignored_text(checks)}"


def summary_markdown(stack: str, checks: list[Check]) -> str:
    """For the deploy job's summary: the failing lines first, then the ignored ones."""
    failing = [c for c in checks if c.failing]
    head = f"### Preflight of `{stack}`: " + (f"{len(failing)} of {len(checks)} checks failing" if failing else f"all {len(checks)} checks pass")
    ordered = failing + [c for c in checks if c.ignored] + [c for c in checks if c.passed]
    return head + _ignored_text(checks) + "\n\n```\n" + "\n".join(c.line() for c in ordered) + "\n```\n"


def _ignored_names(values: list[str]) -> list[str]:
    """--ignore takes a check's name, repeated or comma-separated (as kubeadm's --ignore-preflight-errors)."""
    return [name.strip() for value in values for name in value.split(",") if name.strip()]


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prog="make preflight STACK=<stack>")
    parser.add_argument("--stack", required=True)
    parser.add_argument("--kubeconfig", help="default: $KUBECONFIG, then ~/.kube/config")
    parser.add_argument("--context", help="kubeconfig context; default: the stack's kubernetes.context, then the current-context")
    parser.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="CHECK",
        help=f"report this check's failures as IGNORED, not counted (repeatable): {', '.join(CHECK_NAMES)}",
    )
    args = parser.parse_args(argv)
    ignore = _ignored_names(args.ignore)
    unknown = [name for name in ignore if name not in CHECK_NAMES]
    if unknown:
        parser.error(f"--ignore {', '.join(unknown)}: no such check; the checks are {', '.join(CHECK_NAMES)}")
    from components.config import ConfigError

    raw = raw_stack_config(Path.cwd(), args.stack)
    try:
        config = stack_config(Path.cwd(), args.stack)
    except ConfigError as error:
        print(f"preflight {args.stack}: the stack config is invalid, nothing was checked\n{error}", file=sys.stderr)
        return 1
    if config.render_only:
        print(f"preflight {args.stack}: kubernetes.renderYamlToDirectory is set; this stack has no cluster to check")
        return 0
    context = args.context or config.kubernetes.context
    print(f"preflight {args.stack} (kubeconfig context {context or '(current)'}):")
    cluster, connection = connect(args.kubeconfig, context, args.stack)
    checks = [connection]
    if cluster is not None:
        checks += run_checks(config, stack_needs(config, raw, args.stack), cluster, ignore)
    for check in checks:
        print(f"  {check.line()}")
    print(summary_line(args.stack, checks))
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as out:
            out.write(summary_markdown(args.stack, checks))
    return 1 if any(c.failing for c in checks) else 0


if __name__ == "__main__":
    sys.exit(main())

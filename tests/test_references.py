"""References resolve: in every example stack, rendered under mocks, each reference a rendered
object makes (volumes' ConfigMaps, Secrets and claims, subPath and items keys, secretKeyRef /
configMapKeyRef, serviceAccountName, priorityClassName, a custom resource's refs to Secrets and
its sibling objects, and each Service's selector) points at an object the stack declares, at
one config names as existing outside the stack, or at one the operator creates itself (a short
list per operator, below). Pod templates sit anywhere in custom resources: the walk is generic."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Optional

import pytest

from components.config import PlatformConfig, parse_config
from components.identity.names import CLIENT_CONFIGMAP, NSLCD_SECRET
from components.slurm import ack, soperator
from tests.harness import Run, example_stacks, stack_config
from tests.test_program import run_stack

# What Kubernetes itself serves.
BUILT_IN = {("PriorityClass", "", "system-cluster-critical"), ("PriorityClass", "", "system-node-critical")}


@dataclass(frozen=True)
class Reference:
    kind: str
    namespace: str
    name: str
    keys: tuple[str, ...] = ()  # data keys it needs (subPath, items, key refs)
    where: str = ""


def existing_outside(config: PlatformConfig) -> dict[tuple[str, str, str], Optional[set[str]]]:
    """Objects config names as existing already (the user makes them), with the keys it promises."""
    namespace = config.cluster.namespace
    objects: dict[tuple[str, str, str], Optional[set[str]]] = {}
    external = config.slurm.accounting.external
    if config.slurm.accounting.enabled and config.slurm.accounting.database == "external" and external:
        objects[("Secret", namespace, external.password_secret_name)] = {external.password_secret_key}
    if config.slurm.ack and config.slurm.ack.slurmdbd_conf_secret_name:
        objects[("Secret", namespace, config.slurm.ack.slurmdbd_conf_secret_name)] = {"slurmdbd.conf"}
    if config.ldap.enabled and config.ldap.tls.enabled and config.ldap.tls.secret_name:
        objects[("Secret", namespace, config.ldap.tls.secret_name)] = {"tls.crt", "tls.key", "ca.crt"}
    return objects


def made_by_the_operator(config: PlatformConfig) -> tuple[dict[tuple[str, str, str], Optional[set[str]]], list[dict[str, str]]]:
    """(objects, pod label sets) the chosen operator creates from our custom resources.
    soperator generates the sshd host keys Secret named in spec.secrets and labels its login pods."""
    if config.slurm_operator != "soperator":
        return {}, []
    namespace = config.cluster.namespace
    return {("Secret", namespace, f"{config.cluster.name}-sshd-keys"): None}, [soperator.login_pod_selector(config)]


def declared(run: Run) -> dict[tuple[str, str, str], Optional[set[str]]]:
    """(kind, namespace, name) of every object the stack declares, with its data keys (None: unknown, e.g. adopted)."""
    objects: dict[tuple[str, str, str], Optional[set[str]]] = {}
    for resource in run.kubernetes_objects():
        meta = resource.inputs.get("metadata") or {}
        data = [resource.inputs.get(field) for field in ("data", "binaryData", "stringData")]
        keys = {key for held in data if held for key in held} if any(f in resource.inputs for f in ("data", "binaryData", "stringData")) else None
        objects[(resource.type.rsplit(":", 1)[1], meta.get("namespace", ""), meta.get("name", ""))] = keys
    return objects


def source_keys(source: dict[str, Any]) -> Optional[tuple[str, ...]]:
    """The file names a ConfigMap/Secret volume source exposes when it lists items."""
    items = source.get("items")
    return tuple(item["path"] for item in items) if items else None


def references(manifest: dict[str, Any]) -> Iterator[Reference]:
    namespace = (manifest.get("metadata") or {}).get("namespace", "")
    spec = manifest.get("spec") or {}
    volume_sources = {v["name"] for v in spec.get("volumeSources") or []}
    node_filters = {f["name"] for f in spec.get("k8sNodeFilters") or []}
    group = manifest["apiVersion"].split("/")[0]

    def walk(node: Any, path: str, volumes: dict[str, dict[str, Any]]) -> Iterator[Reference]:
        if isinstance(node, list):
            for index, item in enumerate(node):
                yield from walk(item, f"{path}[{index}]", volumes)
            return
        if not isinstance(node, dict):
            return
        # A pod spec's volumes by name, for subPath; Slinky's CRs keep the container (`slurmd`, `login`)
        # beside `template.spec`, so its mounts resolve against the template's volumes.
        pod_volumes = node.get("volumes", ((node.get("template") or {}).get("spec") or {}).get("volumes"))
        if isinstance(pod_volumes, list):
            volumes = {v["name"]: v for v in pod_volumes if isinstance(v, dict) and "name" in v}
        for key, value in node.items():
            here = f"{path}.{key}"
            if key == "configMap" and isinstance(value, dict) and "name" in value:
                yield Reference("ConfigMap", namespace, value["name"], tuple(i["key"] for i in value.get("items") or []), here)
            elif key == "secret" and isinstance(value, dict) and ("secretName" in value or "name" in value):
                name = value.get("secretName") or value["name"]
                yield Reference("Secret", namespace, name, tuple(i["key"] for i in value.get("items") or []), here)
            elif key == "persistentVolumeClaim" and isinstance(value, dict):
                yield Reference("PersistentVolumeClaim", namespace, value["claimName"], where=here)
            elif key in ("secretKeyRef", "configMapKeyRef"):
                yield Reference("Secret" if key == "secretKeyRef" else "ConfigMap", namespace, value["name"], (value["key"],), here)
            elif key in ("secretRef", "configMapRef"):
                yield Reference("Secret" if key == "secretRef" else "ConfigMap", namespace, value["name"], where=here)
            elif key == "serviceAccountName" and isinstance(value, str):
                yield Reference("ServiceAccount", namespace, value, where=here)
            elif key == "priorityClassName" and isinstance(value, str):
                yield Reference("PriorityClass", "", value, where=here)
            elif key.endswith("KeyRef") or (key.endswith("Ref") and isinstance(value, dict) and set(value) == {"name", "key"}):
                # Custom resources' SecretKeySelectors: slurmKeyRef, passwordSecretKeyRef, sssdConfRef, ...
                yield Reference("Secret", namespace, value["name"], (value["key"],), here)
            elif key.endswith("Ref") and isinstance(value, dict) and set(value) == {"name"}:
                # A sibling custom resource: controllerRef -> Controller, accountingRef -> Accounting.
                yield Reference(key[: -len("Ref")].capitalize(), namespace, value["name"], where=f"{here} ({group})")
            elif key == "configFileRefs":
                yield from (Reference("ConfigMap", namespace, ref["name"], where=here) for ref in value)
            elif isinstance(value, str) and (re.search(r"Secret\w*Name$", key) or path.endswith(".secrets")):
                # soperator's sssdConfSecretRefName, secrets.sshdKeysName
                yield Reference("Secret", namespace, value, where=here)
            elif key == "volumeSourceName":
                if value not in volume_sources:
                    yield Reference("volumeSources entry", namespace, value, where=here)
            elif key.endswith("FilterName") and isinstance(value, str):
                if value not in node_filters:
                    yield Reference("k8sNodeFilters entry", namespace, value, where=here)
            elif key == "volumeMounts":
                for mount in value:
                    if "subPath" in mount:
                        yield from sub_path_reference(mount, volumes, f"{here}[{mount['name']}]")
            yield from walk(value, here, volumes)

    def sub_path_reference(mount: dict[str, Any], volumes: dict[str, dict[str, Any]], where: str) -> Iterator[Reference]:
        volume = volumes.get(mount["name"])
        if volume is None:
            yield Reference("volume of this pod", namespace, mount["name"], where=where)
            return
        sources = [s for s in (volume.get("projected") or {}).get("sources") or [volume]]
        exposed: list[str] = []
        for source in sources:
            for kind, field in (("ConfigMap", "configMap"), ("Secret", "secret")):
                if field in source:
                    listed = source_keys(source[field])
                    exposed += list(listed) if listed is not None else [f"{kind}:{source[field].get('name') or source[field].get('secretName')}"]
        first = mount["subPath"].split("/")[0]
        if first in exposed:
            return
        # No items: the subPath is a data key of the (single) ConfigMap or Secret.
        whole = [e for e in exposed if ":" in e]
        if len(whole) == 1:
            kind, name = whole[0].split(":", 1)
            yield Reference(kind, namespace, name, (first,), where)
        else:
            yield Reference(f"file {first!r} in volume {mount['name']!r}", namespace, str(exposed), where=where)

    yield from walk(manifest, manifest["kind"], {})


def pod_templates(node: Any) -> Iterator[tuple[dict[str, str], Any]]:
    """(labels, spec) of every pod template: a dict with metadata.labels and a spec with containers."""
    if isinstance(node, list):
        for item in node:
            yield from pod_templates(item)
    elif isinstance(node, dict):
        labels = (node.get("metadata") or {}).get("labels")
        if labels and isinstance(node.get("spec"), dict) and "containers" in node["spec"]:
            yield labels, node["spec"]
        for value in node.values():
            yield from pod_templates(value)


def unresolved(stack: str, run: Run) -> list[str]:
    config = parse_config(stack_config(stack))
    operator_objects, operator_pods = made_by_the_operator(config)
    objects = {**existing_outside(config), **operator_objects, **{key: None for key in BUILT_IN}, **declared(run)}
    manifests = [{"kind": r.type.rsplit(":", 1)[1], "apiVersion": r.type.split(":")[1], **r.inputs} for r in run.kubernetes_objects()]
    problems = []
    for manifest in manifests:
        for ref in references(manifest):
            key = (ref.kind, ref.namespace, ref.name)
            if key not in objects:
                problems.append(f"{ref.where}: {ref.kind} {ref.namespace}/{ref.name} is not declared")
            elif (have := objects[key]) is not None and (missing := set(ref.keys) - have):
                problems.append(f"{ref.where}: {ref.kind} {ref.namespace}/{ref.name} has no key {sorted(missing)} (it has {sorted(have)})")
    templates = [(m["metadata"].get("namespace", ""), labels) for m in manifests for labels, _ in pod_templates(m)]
    for manifest in manifests:
        selector = (manifest.get("spec") or {}).get("selector") if manifest["kind"] == "Service" else None
        if not selector:
            continue
        namespace = manifest["metadata"]["namespace"]
        ours = any(ns == namespace and selector.items() <= labels.items() for ns, labels in templates)
        if not ours and not any(selector.items() <= pod.items() for pod in operator_pods):
            problems.append(f"Service {namespace}/{manifest['metadata']['name']}: selector {selector} matches no pod template")
    return problems


@pytest.fixture(scope="module", params=example_stacks())
def stack_run(request):
    return request.param, run_stack(request.param)


def test_every_reference_of_every_example_stack_resolves(stack_run):
    stack, run = stack_run
    assert not unresolved(stack, run)


def test_the_walk_finds_the_references_each_stack_makes(stack_run):
    """It sees references of every sort it checks, so the test above has something to check."""
    stack, run = stack_run
    kinds = {
        ref.kind
        for r in run.kubernetes_objects()
        for ref in references({"kind": r.type.rsplit(":", 1)[1], "apiVersion": r.type.split(":")[1], **r.inputs})
    }
    config = parse_config(stack_config(stack))
    expected = {"Secret", "ConfigMap"} if config.ldap.enabled else {"Secret"}
    if config.storage.submounts or config.uses_jail or (config.slurm.ack and config.slurm.ack.home):
        expected.add("PersistentVolumeClaim")
    assert expected <= kinds, kinds


def test_a_missing_key_or_object_is_reported():
    """staging-hangzhou as it was: nslcd.conf mounted from the ldap-client-config ConfigMap, which only holds ldap.conf."""
    run = run_stack("staging-hangzhou")
    cluster = next(r for r in run.kubernetes_objects() if r.type.endswith(":SlurmCluster"))
    template = cluster.inputs["spec"]["slurmctld"]["template"]["spec"]
    nslcd = next(v for v in template["volumes"] if v.get("secret", {}).get("secretName") == NSLCD_SECRET)
    nslcd.pop("secret")
    nslcd["configMap"] = {"name": CLIENT_CONFIGMAP}
    assert any(f"ConfigMap slurm/{CLIENT_CONFIGMAP} has no key ['nslcd.conf']" in p for p in unresolved("staging-hangzhou", run))
    template["serviceAccountName"] = "nobody-made-me"
    assert any("ServiceAccount slurm/nobody-made-me is not declared" in p for p in unresolved("staging-hangzhou", run))


def test_ack_pods_read_nslcd_conf_from_its_secret():
    config = parse_config(stack_config("staging-hangzhou"))
    pod_volumes, mounts = ack.volumes(config, with_slurmdbd_conf=False)
    nslcd = next(m for m in mounts if m["mountPath"] == "/etc/nslcd.conf")
    volume = next(v for v in pod_volumes if v["name"] == nslcd["name"])
    assert volume["secret"]["secretName"] == NSLCD_SECRET and nslcd["subPath"] == "nslcd.conf"
    # nslcd refuses a world-readable config holding bindpw.
    assert volume["secret"]["defaultMode"] == 0o600


# --- what an object needs exists first --------------------------------------------------------


def waits_for(run: Run, resource: Any) -> set[str]:
    """Every URN the resource waits for: its dependencies, theirs, and its parents' (a component's registration waits for its own)."""
    by_urn = {r.urn: r for r in run.resources}
    seen: set[str] = set()
    todo = [resource]
    while todo:
        current = todo.pop()
        for urn in [*current.dependencies, *([current.parent] if current.parent in by_urn else [])]:
            if urn in by_urn and urn not in seen:
                seen.add(urn)
                todo.append(by_urn[urn])
    return seen


def created_before_their_namespace(run: Run) -> tuple[list[str], int]:
    """(objects the engine may create before the namespace they live in, which the stack declares; how many objects
    in such namespaces the walk found). The API server refuses an object in a namespace not there yet: a first `up`
    that fails depending on which call the engine happens to make first. A pod's missing ConfigMap, Secret or claim
    only holds the pod until it comes; the CRDs are test_components.py's, the Slurm clients' cluster their own tests'."""
    namespaces = {r.inputs["metadata"]["name"]: r.urn for r in run.kubernetes_objects() if r.type == "kubernetes:core/v1:Namespace"}
    problems, found = [], 0
    for resource in run.kubernetes_objects():
        namespace = (resource.inputs.get("metadata") or {}).get("namespace", "")
        if namespace in namespaces:
            found += 1
            if namespaces[namespace] not in waits_for(run, resource):
                problems.append(f"{resource.name} may be created before its namespace {namespace}")
    return problems, found


def test_every_object_waits_for_the_namespace_it_lives_in(stack_run):
    _, run = stack_run
    problems, found = created_before_their_namespace(run)
    assert found, "the walk found no object in a namespace the stack declares"
    assert not problems, "\n".join(problems)

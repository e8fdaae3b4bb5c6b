"""The privilege map (issue 17): for every pod template of every example stack and every
operator, its ServiceAccount, whether a token is mounted, what that account may do (from
the Roles, ClusterRoles and bindings the stack declares), which Secrets it mounts, and its
priority class. The rules the map must keep:

- no pod a Slurm user can log into (login, head, worker) holds a token that may write;
- a pod template we write has `automountServiceAccountToken: false` unless its account
  has rules (it needs the token);
- no Role reads Secrets without naming them, nor names a Secret the stack declares;
- the munge key is mounted only into containers that run munged;
- the LDAP seed reaches the LDAP server only, and the admin password the server and the directory
  reconciler Job (its one key, from the environment);
- every Slurm pod outranks every tenant PriorityClass, and each class the stack declares
  is admitted (ValidatingAdmissionPolicy) only in the namespaces it is for.
"""

from __future__ import annotations

import copy
import json
import re
import shlex
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Optional

import pytest

from components.config import parse_config
from components.identity.names import PASSWORD_KEY, SECRET_NAME, SEED_SECRET
from components.operator_charts import chart_releases
from components.platform import build_platform
from components.render.munge import munge_secret_name
from components.slurm import ack, operator_module, resolve
from components.slurm.common import operator_priority_class_name
from components.tenancy import POD_PRIORITY, TENANT_ROLE
from tests.harness import Run, example_stacks, run_under_mocks, stack_config

WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection", "escalate", "bind", "impersonate", "*"}
READ_VERBS = {"get", "list", "watch", "*"}
TENANT_CLASSES = {f"slurm-{level}" for level in POD_PRIORITY}
# munged started as a command (not merely named, as in "waiting for munged").
STARTS_MUNGED = re.compile(r"(^|[;&|]\s*|\s--\s+|exec\s+|\")munged(\s|\"|$)", re.MULTILINE)


def variants() -> dict[str, dict[str, Any]]:
    """Every example stack, plus what no example shows: ACK's 2024-06 API, and tenants on ACK and Slinky."""
    found = {stack: stack_config(stack) for stack in example_stacks()}
    old_ack = copy.deepcopy(found["staging-hangzhou"])
    old_ack["operators"]["ackSlurmOperator"] = {**old_ack["operators"].get("ackSlurmOperator", {}), "apiGeneration": "2024-06"}
    found["staging-hangzhou@2024-06"] = old_ack
    tenants = [t for stack in example_stacks() for t in stack_config(stack).get("tenants", [])]
    assert tenants, "no example stack has tenants to borrow"
    for stack in ("staging-hangzhou", "prod-hcm"):
        raw = copy.deepcopy(found[stack])
        pool = next(p for p in parse_config(raw).gpu_pools)
        raw["tenants"] = [
            {
                "name": "team-a",
                "users": ["alice"],
                "priorities": ["prod", "test", "oppo"],
                "namespace": True,
                "cells": [{"pool": pool.name, "gpusPerCell": pool.gpus_per_node, "cells": 1}],
            }
        ]
        found[f"{stack}+tenants"] = raw
    return found


VARIANTS = variants()


@cache
def stack_run(variant: str) -> Run:
    raw = VARIANTS[variant]
    config = parse_config(raw)
    return run_under_mocks(lambda: build_platform(config), raw, stack=variant.split("@")[0].split("+")[0])


@dataclass
class Pod:
    """One pod template as the map sees it."""

    variant: str
    where: str  # resource name and path inside it
    namespace: str
    login: bool  # a Slurm user can log into it (login, head, worker)
    slurm: bool  # one of Slurm's own pods
    spec: Optional[dict[str, Any]]  # the PodSpec we write; None where the operator builds the pod
    service_account: str
    priority_class: Optional[str]
    secrets: set[str] = field(default_factory=set)

    @property
    def token(self) -> bool:
        """Whether a token is mounted: an operator-built pod is assumed to have one."""
        return self.spec is None or self.spec.get("automountServiceAccountToken") is not False


def secrets_in(spec: dict[str, Any]) -> set[str]:
    """Secrets a PodSpec mounts or reads into the environment."""
    names = set()
    for volume in spec.get("volumes") or []:
        if "secret" in volume:
            names.add(volume["secret"]["secretName"])
        for source in (volume.get("projected") or {}).get("sources") or []:
            if "secret" in source:
                names.add(source["secret"]["name"])
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        for env in container.get("env") or []:
            if ref := (env.get("valueFrom") or {}).get("secretKeyRef"):
                names.add(ref["name"])
        for source in container.get("envFrom") or []:
            if "secretRef" in source:
                names.add(source["secretRef"]["name"])
    return names


def operator_secret_refs(spec: Any) -> set[str]:
    """Secrets a custom resource hands its operator to mount (`...KeyRef`, `sssdConfRef`, `...SecretRefName`)."""
    found: set[str] = set()
    if isinstance(spec, dict):
        for key, value in spec.items():
            if re.search(r"(KeyRef|ConfRef)$", key) and isinstance(value, dict) and "name" in value:
                found.add(value["name"])
            elif key.endswith("SecretRefName") and isinstance(value, str):
                found.add(value)
            else:
                found |= operator_secret_refs(value)
    elif isinstance(spec, list):
        for item in spec:
            found |= operator_secret_refs(item)
    return found


def template_pod(variant: str, where: str, namespace: str, template: dict[str, Any], login: bool, slurm: bool, extra: set[str]) -> Pod:
    spec = template.get("spec") or {}
    return Pod(
        variant,
        where,
        namespace,
        login,
        slurm,
        spec,
        spec.get("serviceAccountName") or "default",
        spec.get("priorityClassName"),
        secrets_in(spec) | extra,
    )


SOPERATOR_NODES = {"controller": False, "worker": True, "login": True, "accounting": False, "exporter": False, "rest": False}
ACK_TEMPLATES = {"headGroupSpec": True, "slurmctld": True, "slurmdbd": False, "slurmrestd": False}
SLINKY_LOGIN = {"Controller": False, "NodeSet": True, "LoginSet": True, "Accounting": False, "RestApi": False}
WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "Job", "ReplicaSet"}


def pods_of(variant: str, name: str, manifest: dict[str, Any]) -> Iterator[Pod]:
    """The pod templates of one declared object; an object with pods of a kind not listed here fails."""
    kind, group = manifest["kind"], manifest["apiVersion"].rpartition("/")[0]
    namespace = manifest["metadata"].get("namespace", "")
    spec = manifest.get("spec") or {}
    if kind in WORKLOADS:
        # ACK's login Deployment (ours): users log into it, and it is a Slurm pod.
        ack_login = (spec["template"].get("metadata") or {}).get("labels", {}).get("app.kubernetes.io/name") == ack.LOGIN_APP
        yield template_pod(variant, f"{name}.spec.template", namespace, spec["template"], ack_login, ack_login, set())
    elif kind == "CronJob":
        yield template_pod(variant, f"{name}.spec.jobTemplate", namespace, spec["jobTemplate"]["spec"]["template"], False, False, set())
    elif group == "kai.alibabacloud.com" and kind == "SlurmCluster":
        for key, login in ACK_TEMPLATES.items():
            if key in spec:
                yield template_pod(variant, f"{name}.spec.{key}", namespace, spec[key]["template"], login, True, set())
        for i, group_spec in enumerate(spec.get("workerGroupSpecs") or []):
            yield template_pod(variant, f"{name}.spec.workerGroupSpecs[{i}]", namespace, group_spec["template"], True, True, set())
    elif group == "slinky.slurm.net" and kind in SLINKY_LOGIN:
        refs = operator_secret_refs(spec)
        yield template_pod(variant, f"{name}.spec.template", namespace, spec.get("template") or {}, SLINKY_LOGIN[kind], True, refs)
    elif group == "slurm.nebius.ai" and kind == "SlurmCluster":
        # soperator builds these pods itself: only the account and the class are ours to set.
        nodes = spec.get("slurmNodes") or {}
        for node_name, login in SOPERATOR_NODES.items():
            if node_name in nodes and nodes[node_name].get("enabled", True) is not False:
                node = nodes[node_name]
                refs = operator_secret_refs(node)
                account = node.get("serviceAccountName") or "default"
                yield Pod(variant, f"{name}.spec.slurmNodes.{node_name}", namespace, login, True, None, account, node.get("priorityClass"), refs)
        if "sConfigController" in spec:
            sconfig = spec["sConfigController"]
            account = sconfig.get("serviceAccountName") or "default"
            yield Pod(variant, f"{name}.spec.sConfigController", namespace, False, True, None, account, sconfig["node"].get("priorityClass"))
        if spec.get("crVersion", "").startswith("4."):
            populate = spec["populateJail"]
            yield Pod(variant, f"{name}.spec.populateJail", namespace, False, True, None, "default", populate.get("priorityClass"))
    elif group == "slurm.nebius.ai" and kind == "NodeSet":
        yield Pod(variant, f"{name}.spec", namespace, True, True, None, "default", spec.get("priorityClass"), operator_secret_refs(spec))
    elif has_pods(manifest) and kind not in ("MariaDB",):
        raise AssertionError(f"{variant}: {name} ({manifest['apiVersion']} {kind}) has pods the privilege map does not know")


def has_pods(value: Any) -> bool:
    if isinstance(value, dict):
        return "containers" in value or any(has_pods(v) for v in value.values())
    if isinstance(value, list):
        return any(has_pods(v) for v in value)
    return False


@dataclass
class StackMap:
    pods: list[Pod]
    rules: dict[tuple[str, str], list[dict[str, Any]]]  # (namespace, account) -> rules
    all_rules: list[tuple[str, dict[str, Any]]]  # (role, rule)
    secrets: set[tuple[str, str]]  # declared Secrets (namespace, name)
    priority_classes: dict[str, int]
    policies: list[dict[str, Any]]

    def may_write(self, pod: Pod) -> list[dict[str, Any]]:
        return [rule for rule in self.rules.get((pod.namespace, pod.service_account), []) if WRITE_VERBS & set(rule["verbs"])]


@cache
def privilege_map(variant: str) -> StackMap:
    run = stack_run(variant)
    objects = [(r.name, r.inputs) for r in run.kubernetes_objects() if not r.type.startswith("kubernetes:helm.sh")]
    pods = [pod for name, manifest in objects for pod in pods_of(variant, name, manifest)]
    roles = {
        (m["kind"], m["metadata"].get("namespace", ""), m["metadata"]["name"]): m.get("rules") or []
        for _, m in objects
        if m["kind"] in ("Role", "ClusterRole")
    }
    rules: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for _, m in objects:
        if m["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        ref = m["roleRef"]
        role_key = (ref["kind"], m["metadata"].get("namespace", "") if ref["kind"] == "Role" else "", ref["name"])
        assert role_key in roles, f"{variant}: {m['metadata']['name']} binds {role_key}, which the stack does not declare"
        for subject in m.get("subjects") or []:
            if subject["kind"] == "ServiceAccount":
                rules.setdefault((subject["namespace"], subject["name"]), []).extend(roles[role_key])
    return StackMap(
        pods=pods,
        rules=rules,
        all_rules=[(f"{kind} {ns}/{name}", rule) for (kind, ns, name), role_rules in roles.items() for rule in role_rules],
        secrets={(m["metadata"]["namespace"], m["metadata"]["name"]) for _, m in objects if m["kind"] == "Secret"},
        priority_classes={m["metadata"]["name"]: m["value"] for _, m in objects if m["kind"] == "PriorityClass"},
        policies=[m for _, m in objects if m["kind"] == "ValidatingAdmissionPolicy"],
    )


def describe(pod: Pod, stack_map: StackMap) -> str:
    return (
        f"{pod.variant} {pod.where}: account {pod.namespace}/{pod.service_account}, token {'yes' if pod.token else 'no'}, "
        f"may {sorted({v for r in stack_map.rules.get((pod.namespace, pod.service_account), []) for v in r['verbs']})}, "
        f"secrets {sorted(pod.secrets)}, priority {pod.priority_class}"
    )


def test_the_map_covers_every_operator_and_every_kind_of_login_pod():
    operators = {operator_module(parse_config(raw)).OPERATOR for raw in VARIANTS.values()}
    assert operators == {"soperator 1.14.10", "soperator 4.1.7", ack.OPERATOR, "Slinky slurm-operator 1.2.1"}
    pods = [pod for variant in VARIANTS for pod in privilege_map(variant).pods]
    logins = {pod.where.split(".", 1)[1] for pod in pods if pod.login}
    for where in (
        "spec.slurmNodes.login",
        "spec.slurmNodes.worker",
        "spec",
        "spec.slurmctld",
        "spec.headGroupSpec",
        "spec.workerGroupSpecs[0]",
        "spec.template",
    ):
        assert where in logins, f"no login pod at {where}: {sorted(logins)}"
    assert any(pod.spec is not None and pod.spec.get("serviceAccountName") for pod in pods), "no pod with its own account: the map proves nothing"
    ack_logins = [pod for pod in pods if pod.login and pod.variant.startswith("staging-hangzhou") and pod.where.endswith("login.spec.template")]
    assert len(ack_logins) == len([v for v in VARIANTS if v.startswith("staging-hangzhou")]), "ACK's login Deployment is not in the map"


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_no_pod_users_log_into_holds_a_token_that_may_write(variant):
    stack_map = privilege_map(variant)
    logins = [pod for pod in stack_map.pods if pod.login]
    assert logins, f"{variant}: no login pod found"
    offenders = [describe(pod, stack_map) for pod in logins if pod.token and stack_map.may_write(pod)]
    assert offenders == []


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_pods_we_write_mount_a_token_only_when_their_account_has_rules(variant):
    stack_map = privilege_map(variant)
    ours = [pod for pod in stack_map.pods if pod.spec is not None]
    assert ours, f"{variant}: no pod template of ours"
    for pod in ours:
        needs = bool(stack_map.rules.get((pod.namespace, pod.service_account)))
        got = (pod.spec or {}).get("automountServiceAccountToken")
        assert got is needs, describe(pod, stack_map)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_no_role_reads_secrets_it_does_not_name_or_that_the_stack_declares(variant):
    stack_map = privilege_map(variant)
    declared = {name for _, name in stack_map.secrets}
    holding = {namespace for namespace, _ in stack_map.secrets}
    # A tenant's own Role manages the tenant's own Secrets, in a namespace that holds none of ours.
    tenants_own = {f"Role {t.name}/{TENANT_ROLE}" for t in parse_config(VARIANTS[variant]).tenants if t.namespace and t.name not in holding}
    for role, rule in stack_map.all_rules:
        if not ({"secrets", "*"} & set(rule["resources"]) and READ_VERBS & set(rule["verbs"])) or role in tenants_own:
            continue
        assert rule.get("resourceNames"), f"{variant}: {role} reads every Secret of its namespace"
        assert not declared & set(rule["resourceNames"]), f"{variant}: {role} reads {declared & set(rule['resourceNames'])}"


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_ldap_admin_secrets_reach_the_ldap_server_only(variant):
    stack_map = privilege_map(variant)
    holders = {pod.where for pod in stack_map.pods if {SECRET_NAME, SEED_SECRET} & pod.secrets}
    config = parse_config(VARIANTS[variant])
    if not config.ldap.enabled:
        assert holders == set()
        return
    reconciler = "ldap-reconcile.spec.template"
    assert holders == {"ldap-server.spec.template", *([reconciler] if config.tenants else [])}, variant
    for pod in stack_map.pods:
        if pod.where == reconciler:
            assert pod.spec is not None and pod.secrets & {SECRET_NAME, SEED_SECRET} == {SECRET_NAME}
            # The password alone, as an environment variable: no volume of the Secret (its other keys).
            refs = [e["valueFrom"]["secretKeyRef"] for c in pod.spec["containers"] for e in c.get("env", []) if "valueFrom" in e]
            assert refs == [{"name": SECRET_NAME, "key": PASSWORD_KEY}]
            assert not [v for v in pod.spec["volumes"] if (v.get("secret") or {}).get("secretName") == SECRET_NAME]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_munge_key_is_mounted_only_where_munged_runs(variant):
    config = parse_config(VARIANTS[variant])
    key = munge_secret_name(config.cluster.name)
    stack_map = privilege_map(variant)
    checked = 0
    for pod in stack_map.pods:
        if pod.spec is None or key not in pod.secrets:
            continue
        volumes = {v["name"] for v in pod.spec["volumes"] if (v.get("secret") or {}).get("secretName") == key}
        volumes |= {
            v["name"]
            for v in pod.spec["volumes"]
            if any((s.get("secret") or {}).get("name") == key for s in (v.get("projected") or {}).get("sources") or [])
        }
        for container in pod.spec["containers"] + pod.spec.get("initContainers", []):
            if not {m["name"] for m in container.get("volumeMounts") or []} & volumes:
                continue
            # ACK's operator starts munged in every pod it runs (its init script); elsewhere the command
            # or the script it runs says so.
            runs = json.dumps(container.get("command") or []) + json.dumps(container.get("args") or []) + stack_script(variant, pod, container)
            runs_munged = pod.where.startswith("slurm-cluster.spec.") or STARTS_MUNGED.search(runs) is not None
            assert runs_munged, f"{variant} {pod.where} container {container['name']} has the munge key but runs no munged"
            checked += 1
    if operator_module(config).USES_MUNGE and (config.slurm_operator == "ack" or config.tenants):
        assert checked, f"{variant}: no container with the munge key found"


def stack_script(variant: str, pod: Pod, container: dict[str, Any]) -> str:
    """The script a container runs from a ConfigMap of the stack (`bash /dir/file`)."""
    command = container.get("command") or []
    mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts") or []}
    volumes = {v["name"]: v for v in (pod.spec or {}).get("volumes") or []}
    for word in command:
        for path, volume_name in mounts.items():
            if word.startswith(path + "/") and "configMap" in volumes[volume_name]:
                config_map = volumes[volume_name]["configMap"]["name"]
                run = stack_run(variant)
                (data,) = [r.inputs["data"] for r in run.of_type("kubernetes:core/v1:ConfigMap") if r.inputs["metadata"]["name"] == config_map]
                return data[word[len(path) + 1 :]]
    return ""


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_slurm_pods_outrank_every_tenant_class_and_classes_stay_in_their_namespaces(variant):
    config = parse_config(VARIANTS[variant])
    stack_map = privilege_map(variant)
    slurm_pods = [pod for pod in stack_map.pods if pod.slurm]
    assert slurm_pods, variant
    tenant_values = [value for name, value in stack_map.priority_classes.items() if name in TENANT_CLASSES]
    if config.slurm_operator == "soperator" and config.operators.soperator.version == "1.14.10":
        # No priority field on 1.14.10, and no tenants either (config refuses them).
        assert tenant_values == [] and not config.tenants
        return
    for pod in slurm_pods:
        assert pod.priority_class in stack_map.priority_classes, describe(pod, stack_map)
        assert all(stack_map.priority_classes[pod.priority_class] > value for value in tenant_values), describe(pod, stack_map)
    # Each class is admitted only where it belongs: Slurm's in the cluster's namespace, the tenants' in theirs.
    # (The policies scoped to namespaces, what a tenant or the cluster's namespace admits, are run in tests/test_kube_operators.py.)
    everywhere = [policy for policy in stack_map.policies if "namespaceSelector" not in policy["spec"]["matchConstraints"]]
    labels = {
        r.inputs["metadata"]["name"]: r.inputs["metadata"].get("labels", {}) for r in stack_run(variant).of_type("kubernetes:core/v1:Namespace")
    }
    admitted = dict(kv for policy in everywhere for kv in admitted_namespaces(policy, labels).items())
    assert set(admitted) == set(stack_map.priority_classes), variant
    tenant_namespaces = sorted(t.name for t in config.tenants if t.namespace)
    # The operators' class, in the namespaces of the charts whose pods name it.
    operators = operator_priority_class_name(config)
    chart_namespaces = sorted({r.namespace for r in chart_releases(config, resolve(config)) if operators in json.dumps(r.values)})
    for name, namespaces in admitted.items():
        expected = tenant_namespaces if name in TENANT_CLASSES else chart_namespaces if name == operators else [config.cluster.namespace]
        assert namespaces == expected, (variant, name)


def admitted_namespaces(policy: dict[str, Any], namespace_labels: dict[str, dict[str, str]]) -> dict[str, list[str]]:
    """{class: namespaces} from a policy's expression, which names them or reads one label, here of the stack's
    Namespaces (`namespace_labels`, by name). tests/test_kube_operators.py runs it in a real API server."""
    (validation,) = policy["spec"]["validations"]
    found = re.search(r"priorityClassName in (\[[^\]]*\])\) \|\| (.*)$", validation["expression"])
    assert found, validation["expression"]
    classes, condition = json.loads(found.group(1)), found.group(2)
    named = re.fullmatch(r"namespaceObject\.metadata\.name in (\[[^\]]*\])", condition)
    labelled = re.fullmatch(
        r'has\(namespaceObject\.metadata\.labels\) && ("[^"]+") in namespaceObject\.metadata\.labels'
        r' && namespaceObject\.metadata\.labels\[\1\] == ("[^"]+")',
        condition,
    )
    assert named or labelled, condition
    if named:
        namespaces = json.loads(named.group(1))
    else:
        assert labelled
        key, value = json.loads(labelled.group(1)), json.loads(labelled.group(2))
        namespaces = [name for name, labels in namespace_labels.items() if labels.get(key) == value]
    return {name: sorted(namespaces) for name in classes}


def test_the_copilot_resumes_each_node_once_per_power_up(tmp_path):
    """The copilot's loop, in bash with a fake sinfo: a node still POWERING_UP is not resumed again
    (the copilot's resume adds a replica per call), a failing sinfo forgets nothing, and a node
    that powers up a second time is resumed again."""
    states = tmp_path / "states"
    calls = tmp_path / "calls"
    (tmp_path / "sinfo").write_text(f"#!/bin/bash\n[ -e {tmp_path}/broken ] && exit 1\ncat {states}\n")
    (tmp_path / "resume").write_text(f'#!/bin/bash\necho "$1" >> {calls}\n')
    for tool in ("sinfo", "resume"):
        (tmp_path / tool).chmod(0o755)
    rounds = [("w-0\nw-1", False), ("w-1\nw-0", False), ("", True), ("w-1", False), ("", False), ("w-1", False)]
    script = [ack.copilot_step_function()]
    for listed, broken in rounds:
        script.append(
            f"printf '%s\\n' {shlex.quote(listed)} > {states}; {'touch' if broken else 'rm -f'} {tmp_path}/broken; step POWERING_UP {tmp_path}/resume"
        )
    subprocess.run(["bash", "-c", "\n".join(script)], check=True, env={"PATH": f"{tmp_path}:/usr/bin:/bin"}, capture_output=True)
    assert calls.read_text().split() == ["w-0", "w-1", "w-1"]

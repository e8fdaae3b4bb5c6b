"""CI's preview account (ci/preview-access.yaml, docs/ci.md) on a real API server.

scripts/kube-local.sh's kube-apiserver 1.33.3 runs the file as an admin applies it, and
the account's own token (the Secret the file asks the token controller for) makes every
request: server-side dry runs pass, a real write of every kind the role names is refused
(by the policy, or by RBAC where the role may only read), the policy's own binding
cannot be patched (no admission policy runs on it), no role or binding is written, not
even as a dry run (no escalate, no bind), no Secret is reached,
and RBAC grants no subresource (exec, attach, port-forward, eviction, tokens, scale,
status, node proxy). With cluster-admin bound to the account the policy alone still
refuses tokens, scale, status writes and evictions; with the policy's old
`resources: ["*"]` the same requests go through. `pulumi preview` of the kwok stack with
that account still succeeds and shows the diff of the kinds it may not dry-run.
"""

from __future__ import annotations

import base64
import copy
import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.engine import Workspace
from tests.harness import ROOT
from tests.kube import CHARTS_DIR, KWOK_STACK, LocalCluster, wait_until

ACCESS = ROOT / "ci" / "preview-access.yaml"
DRY_RUN_ONLY = "the pulumi-preview account may only dry-run"
# A namespace such as a stack's (not the kwok stack's own, which the last test deploys).
STACK_NAMESPACE = "preview-probe"
PREVIEW_USER = "system:serviceaccount:ci:pulumi-preview"

Kubectl = Callable[..., subprocess.CompletedProcess]


def access_manifests() -> list[dict]:
    return [document for document in yaml.safe_load_all(ACCESS.read_text()) if document]


@pytest.fixture(scope="module")
def token(cluster: LocalCluster) -> str:
    """The preview account's token, once the file is applied as an admin applies it."""
    cluster.apply(access_manifests())
    encoded = wait_until(
        "the token controller to fill pulumi-preview-token",
        lambda: ((cluster.get("secret", "pulumi-preview-token", "ci") or {}).get("data") or {}).get("token"),
    )
    return base64.b64decode(encoded).decode()


@pytest.fixture(scope="module")
def preview(cluster: LocalCluster, token: str) -> Kubectl:
    """kubectl with the preview account's token, once the policy refuses its first real write."""
    cluster.kubectl("create", "namespace", STACK_NAMESPACE)
    cluster.kubectl("create", "deployment", "web", "-n", STACK_NAMESPACE, "--image=busybox", "--replicas=1")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe", "namespace": STACK_NAMESPACE},
        "spec": {"containers": [{"name": "probe", "image": "busybox"}]},
    }
    cluster.kubectl("create", "-f", "-", stdin=json.dumps(pod))
    wait_until(f"ServiceAccount {STACK_NAMESPACE}/default", lambda: cluster.get("serviceaccount", "default", STACK_NAMESPACE))

    def as_preview(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return cluster.kubectl(f"--token={token}", *args, check=False, stdin=stdin)

    # A policy takes effect shortly after it is created.
    wait_until("the dry-run-only policy", lambda: DRY_RUN_ONLY in as_preview("create", "configmap", "probe", "-n", STACK_NAMESPACE).stderr)
    return as_preview


def refused_by_policy(result: subprocess.CompletedProcess) -> bool:
    return result.returncode != 0 and DRY_RUN_ONLY in result.stderr and "ValidatingAdmissionPolicy" in result.stderr


def forbidden_by_rbac(result: subprocess.CompletedProcess) -> bool:
    return result.returncode != 0 and f'forbidden: User "{PREVIEW_USER}" cannot ' in result.stderr and DRY_RUN_ONLY not in result.stderr


def eviction(pod: str) -> str:
    return json.dumps({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": STACK_NAMESPACE}})


def test_the_preview_account_dry_runs_and_writes_nothing(preview, cluster):
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": STACK_NAMESPACE}, "data": {"a": "1"}}
    # What pulumi preview sends: server-side apply, dry run.
    applied = preview("apply", "--server-side", "--dry-run=server", "--field-manager=pulumi-kubernetes", "-f", "-", stdin=json.dumps(config_map))
    assert applied.returncode == 0, applied.stderr
    assert preview("create", "--dry-run=server", "-f", "-", stdin=json.dumps(config_map)).returncode == 0
    written = preview("apply", "--server-side", "--field-manager=pulumi-kubernetes", "-f", "-", stdin=json.dumps(config_map))
    assert refused_by_policy(written), written.stderr
    assert cluster.get("configmap", "settings", STACK_NAMESPACE) is None
    deleted = preview("delete", "deployment", "web", "-n", STACK_NAMESPACE)
    assert deleted.returncode != 0 and cluster.get("deployment", "web", STACK_NAMESPACE) is not None


# One object of every (API group, resource) the role names, which the admin creates where the cluster has none:
# the account's real write of each (a label) must be refused: by the policy where the role has the write verbs,
# by RBAC where it may only read (admission policies and webhooks, roles and bindings, its own included).
NS = STACK_NAMESPACE
SEEDS = [
    {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "probe"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/probe"}},
    },
    {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "probe", "namespace": NS},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    },
    {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "probe", "namespace": NS}, "spec": {"hard": {"pods": "10"}}},
    {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "probe", "namespace": NS},
        "spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}}]},
    },
    {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "probe"}},
    {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "probe", "namespace": NS},
        "spec": {
            "schedule": "0 0 1 1 *",
            "suspend": True,
            "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}},
        },
    },
    {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "probe", "namespace": NS},
        "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}},
    },
    {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "probe", "namespace": NS},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"a": "probe"}},
            "template": {"metadata": {"labels": {"a": "probe"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
        },
    },
    {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "probe", "namespace": NS},
        "spec": {
            "selector": {"matchLabels": {"a": "probe"}},
            "template": {"metadata": {"labels": {"a": "probe"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
        },
    },
    {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "probe", "namespace": NS},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"a": "probe"}}},
    },
    {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "probe", "namespace": NS}, "spec": {"podSelector": {}}},
    {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "probe"}, "provisioner": "example.com/probe"},
    {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": "probe.example.com"}, "spec": {}},
    {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "probes.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "probes", "singular": "probe", "kind": "Probe"},
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {"type": "object"}}}],
        },
    },
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "probe", "namespace": NS},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}],
    },
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "probe", "namespace": NS},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "probe"},
        "subjects": [{"kind": "ServiceAccount", "name": "pulumi-preview", "namespace": "ci"}],
    },
]
# (API group, resource) -> (name, namespace) of the object the account tries to label.
TARGETS = {
    ("", "namespaces"): ("ci", None),
    ("", "configmaps"): ("kube-root-ca.crt", NS),
    ("", "services"): ("kubernetes", "default"),
    ("", "serviceaccounts"): ("default", NS),
    ("", "persistentvolumes"): ("probe", None),
    ("", "persistentvolumeclaims"): ("probe", NS),
    ("", "resourcequotas"): ("probe", NS),
    ("", "limitranges"): ("probe", NS),
    ("", "nodes"): ("probe", None),
    ("apps", "deployments"): ("web", NS),
    ("apps", "statefulsets"): ("probe", NS),
    ("apps", "daemonsets"): ("probe", NS),
    ("batch", "jobs"): ("probe", NS),
    ("batch", "cronjobs"): ("probe", NS),
    ("policy", "poddisruptionbudgets"): ("probe", NS),
    ("networking.k8s.io", "networkpolicies"): ("probe", NS),
    ("scheduling.k8s.io", "priorityclasses"): ("system-cluster-critical", None),
    ("storage.k8s.io", "storageclasses"): ("probe", None),
    ("storage.k8s.io", "csidrivers"): ("probe.example.com", None),
    ("apiextensions.k8s.io", "customresourcedefinitions"): ("probes.example.com", None),
    ("admissionregistration.k8s.io", "validatingadmissionpolicies"): ("pulumi-preview-dry-run-only", None),
    ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"): ("pulumi-preview-dry-run-only", None),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"): ("probe", None),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"): ("probe", None),
    ("rbac.authorization.k8s.io", "roles"): ("probe", NS),
    ("rbac.authorization.k8s.io", "rolebindings"): ("probe", NS),
    ("rbac.authorization.k8s.io", "clusterroles"): ("pulumi-preview", None),
    ("rbac.authorization.k8s.io", "clusterrolebindings"): ("pulumi-preview", None),
}
WEBHOOKS: list[dict] = [
    {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": "probe"}, "webhooks": []}
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
]


def role_rules() -> dict[tuple[str, str], set[str]]:
    """(API group, resource) -> verbs, for every resource the preview ClusterRole names by name."""
    (role,) = [m for m in access_manifests() if m["kind"] == "ClusterRole"]
    return {
        (group, resource): set(rule["verbs"])
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        if resource != "*"
    }


def test_every_real_write_is_refused(preview, cluster):
    rules = role_rules()
    assert set(rules) == set(TARGETS)
    cluster.apply(SEEDS + WEBHOOKS)
    outcomes = {}
    for (group, resource), (name, namespace) in TARGETS.items():
        kind = f"{resource}.{group}" if group else resource
        where = ["-n", namespace] if namespace else []
        result = preview("label", kind, name, *where, "preview-probe=written")
        refused = refused_by_policy(result) if "patch" in rules[group, resource] else forbidden_by_rbac(result)
        labels = cluster.require(kind, name, namespace)["metadata"].get("labels") or {}
        outcomes[kind] = refused and "preview-probe" not in labels or result.stderr
    assert outcomes == dict.fromkeys(outcomes, True)
    # What it may write it may dry-run: the preview of those kinds gets the server's answer.
    assert preview("label", "deployments.apps", "web", "-n", NS, "preview-probe=dry", "--dry-run=server").returncode == 0


def test_no_secret_is_reached(preview, cluster):
    """Not even in a stack's namespace: a dry-run patch answers with the whole Secret."""
    cluster.kubectl("create", "secret", "generic", "held", "-n", STACK_NAMESPACE, "--from-literal=k=v")
    secret = ["create", "secret", "generic", "probe", "--from-literal=k=v", "--dry-run=server"]
    assert forbidden_by_rbac(preview(*secret, "-n", STACK_NAMESPACE))
    assert forbidden_by_rbac(preview("get", "secret", "held", "-n", STACK_NAMESPACE))
    assert forbidden_by_rbac(preview("patch", "secret", "held", "-n", STACK_NAMESPACE, "--dry-run=server", "-p", '{"metadata":{"labels":{"a":"b"}}}'))
    # Its own token and the control plane's.
    assert forbidden_by_rbac(preview("get", "secret", "pulumi-preview-token", "-n", "ci"))
    assert forbidden_by_rbac(preview("get", "secrets", "-n", "kube-system"))
    assert forbidden_by_rbac(preview("get", "secrets", "--all-namespaces"))
    assert not can_i(cluster, "get", "", "secrets") and not can_i(cluster, "list", "", "secrets")


def test_the_policy_binding_stays_deny(preview, cluster):
    """Admission policies never run on admission policies or their bindings: only RBAC keeps the account off them."""
    (binding,) = [m for m in access_manifests() if m["kind"] == "ValidatingAdmissionPolicyBinding"]
    name = binding["metadata"]["name"]
    try:
        audit = preview("patch", "validatingadmissionpolicybinding", name, "--type=merge", "-p", '{"spec":{"validationActions":["Audit"]}}')
        assert forbidden_by_rbac(audit), audit.stderr
        assert cluster.require("validatingadmissionpolicybinding", name)["spec"]["validationActions"] == ["Deny"]
        assert forbidden_by_rbac(preview("patch", "validatingadmissionpolicy", name, "--type=merge", "-p", '{"spec":{"failurePolicy":"Ignore"}}'))
        other = {**binding, "metadata": {"name": "preview-probe"}, "spec": {**binding["spec"], "validationActions": ["Audit"]}}
        assert forbidden_by_rbac(preview("create", "--dry-run=server", "-f", "-", stdin=json.dumps(other)))
        for kind in (
            "validatingwebhookconfigurations",
            "mutatingwebhookconfigurations",
            "validatingadmissionpolicies",
            "validatingadmissionpolicybindings",
        ):
            assert not can_i(cluster, "create", "admissionregistration.k8s.io", kind) and not can_i(
                cluster, "patch", "admissionregistration.k8s.io", kind
            )
        # And the policy still refuses a real write.
        assert refused_by_policy(preview("create", "configmap", "after-the-patch", "-n", STACK_NAMESPACE))
    finally:
        cluster.apply([binding], force=True)


def test_no_role_binding_escalate_or_bind(preview, cluster):
    """cluster-admin is not the account's to grant, not even in a dry run: a real grant never rests on the policy alone."""
    for verb in ("create", "update", "patch", "escalate", "bind"):
        for resource in ("roles", "rolebindings", "clusterroles", "clusterrolebindings"):
            assert not can_i(cluster, verb, "rbac.authorization.k8s.io", resource), (verb, resource)
    binding = ["rolebinding", "as-admin", "-n", STACK_NAMESPACE, "--clusterrole=cluster-admin", "--serviceaccount=ci:pulumi-preview"]
    assert forbidden_by_rbac(preview("create", *binding, "--dry-run=server"))
    assert forbidden_by_rbac(preview("create", *binding))
    assert forbidden_by_rbac(preview("create", "clusterrolebinding", "as-admin", "--clusterrole=cluster-admin", "--serviceaccount=ci:pulumi-preview"))
    assert forbidden_by_rbac(preview("create", "clusterrole", "everything", "--verb=*", "--resource=*.*", "--dry-run=server"))
    assert forbidden_by_rbac(preview("create", "role", "reader", "-n", STACK_NAMESPACE, "--verb=get", "--resource=configmaps", "--dry-run=server"))
    assert cluster.get("rolebinding", "as-admin", STACK_NAMESPACE) is None and cluster.get("clusterrolebinding", "as-admin") is None


# (verb, API group, resource, subresource) that take over a pod, a node or another account.
SUBRESOURCES = [
    ("create", "", "pods", "exec"),
    ("get", "", "pods", "exec"),  # exec over WebSockets is a GET
    ("create", "", "pods", "attach"),
    ("create", "", "pods", "portforward"),
    ("create", "", "pods", "eviction"),
    ("create", "", "serviceaccounts", "token"),
    ("update", "apps", "deployments", "scale"),
    ("patch", "apps", "deployments", "status"),
    ("get", "", "nodes", "proxy"),
]


def can_i(cluster: LocalCluster, verb: str, group: str, resource: str, subresource: str = "") -> bool:
    """RBAC's answer for the account, asked by the admin (a review the account created would be a write the policy refuses)."""
    attributes = {"namespace": STACK_NAMESPACE, "verb": verb, "group": group, "resource": resource, "subresource": subresource}
    groups = ["system:serviceaccounts", "system:serviceaccounts:ci", "system:authenticated"]
    spec = {"user": PREVIEW_USER, "groups": groups, "resourceAttributes": attributes}
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
    answer = json.loads(cluster.kubectl("create", "-o", "json", "-f", "-", stdin=json.dumps(review)).stdout)
    return bool(answer["status"].get("allowed"))


def test_the_preview_role_grants_no_subresource(preview, cluster):
    assert can_i(cluster, "patch", "apps", "deployments") and can_i(cluster, "create", "", "configmaps")
    granted = [case for case in SUBRESOURCES if can_i(cluster, *case)]
    assert granted == []
    assert forbidden_by_rbac(preview("create", "token", "default", "-n", STACK_NAMESPACE))
    assert forbidden_by_rbac(preview("scale", "deployment", "web", "--replicas=0", "-n", STACK_NAMESPACE, "--dry-run=server"))
    assert forbidden_by_rbac(
        preview("create", "--raw", f"/api/v1/namespaces/{STACK_NAMESPACE}/pods/probe/eviction", "-f", "-", stdin=eviction("probe"))
    )


def subresource_writes(preview: Kubectl) -> dict[str, subprocess.CompletedProcess]:
    """The writes the review got through the old policy: a token for another account, scale, a status write, an eviction."""
    return {
        "token": preview("create", "token", "default", "-n", STACK_NAMESPACE),
        "scale": preview("scale", "deployment", "web", "--replicas=0", "-n", STACK_NAMESPACE),
        "status": preview(
            "patch", "deployment", "web", "-n", STACK_NAMESPACE, "--subresource=status", "--type=merge", "-p", '{"status":{"observedGeneration":7}}'
        ),
        "eviction": preview("create", "--raw", f"/api/v1/namespaces/{STACK_NAMESPACE}/pods/probe/eviction", "-f", "-", stdin=eviction("probe")),
    }


def test_the_policy_alone_refuses_subresource_writes_rbac_would_allow(preview, cluster):
    cluster.kubectl("create", "clusterrolebinding", "preview-as-admin", "--clusterrole=cluster-admin", "--serviceaccount=ci:pulumi-preview")
    (policy,) = [m for m in access_manifests() if m["kind"] == "ValidatingAdmissionPolicy"]
    try:
        wait_until("RBAC to grant cluster-admin", lambda: can_i(cluster, "create", "", "serviceaccounts", "token"))
        writes = subresource_writes(preview)
        assert {name: refused_by_policy(result) for name, result in writes.items()} == dict.fromkeys(writes, True), {
            name: result.stderr for name, result in writes.items()
        }
        assert preview("scale", "deployment", "web", "--replicas=0", "-n", STACK_NAMESPACE, "--dry-run=server").returncode == 0
        assert cluster.require("deployment", "web", STACK_NAMESPACE)["spec"]["replicas"] == 1
        assert cluster.get("pod", "probe", STACK_NAMESPACE) is not None

        # The policy as docs/ci.md once had it: "*" matches no subresource, and every one of them goes through.
        old = copy.deepcopy(policy)
        old["spec"]["matchConstraints"]["resourceRules"][0]["resources"] = ["*"]
        cluster.apply([old], force=True)
        wait_until("the old policy to let a token through", lambda: preview("create", "token", "default", "-n", STACK_NAMESPACE).returncode == 0)
        through = subresource_writes(preview)
        assert {name: result.returncode for name, result in through.items()} == dict.fromkeys(through, 0), {
            name: result.stderr for name, result in through.items()
        }
    finally:
        cluster.apply([policy], force=True)
        cluster.kubectl("delete", "clusterrolebinding", "preview-as-admin", "--ignore-not-found")


# A tenant with its namespace (tenants need soperator 4.1.7's partitions): the kinds the account may not dry-run
# (admission policies and their bindings, a Role granting and a RoleBinding to what it does not hold, Secrets).
TENANT = {
    "operators.soperator.version": "4.1.7",
    "operators.soperator.repository": "./.kwok/charts/soperator-4.1.7",
    "operators.certManager.install": "false",  # kwok has no chart for it
    "tenants[0].name": "vision",
    "tenants[0].namespace": "true",
    "tenants[0].kubernetesGroups[0]": "vision-researchers",
    "tenants[0].cells[0].pool": "gpu",
    "tenants[0].cells[0].gpusPerCell": "8",
    "tenants[0].cells[0].cells": "1",
}
CREATED = {
    "kubernetes:rbac.authorization.k8s.io/v1:Role",
    "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding",
    "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy",
    "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding",
    "kubernetes:core/v1:Secret",
}


def preview_steps(ws: Workspace, kubeconfig: Path, stack: str, values: dict[str, str]) -> set[tuple[str, str]]:
    """(operation, type::name) of each step of `pulumi preview` of `stack` with `kubeconfig`, its config set to
    `values` for it."""
    config_file = ws.project / f"Pulumi.{stack}.yaml"
    original = config_file.read_text()
    pairs = [arg for path, value in values.items() for arg in ("--plaintext", f"slurm-platform:{path}={value}")]
    admin = ws.env["KUBECONFIG"]
    try:
        ws.pulumi("config", "set-all", "--path", *pairs, stack=stack)
        ws.env["KUBECONFIG"] = str(kubeconfig)
        result = ws.pulumi("preview", "--json", stack=stack)
    finally:
        ws.env["KUBECONFIG"] = admin
        config_file.write_text(original)
    return {(step["op"], step["urn"].split("$")[-1]) for step in json.loads(result.stdout)["steps"]}


def kinds_of(steps: set[tuple[str, str]], op: str, kinds: set[str]) -> set[str]:
    return {kind for kind in kinds if any(o == op and urn.startswith(kind) for o, urn in steps)}


def test_a_preview_with_the_account_shows_the_diff_of_what_it_may_not_dry_run(ws, cluster, token, preview):
    """CI's preview with the preview account's kubeconfig: where RBAC refuses the read before an update, or the
    dry run of a create (Forbidden), pulumi-kubernetes previews from the inputs instead of failing."""
    kubeconfig = cluster.kubeconfig_with(token, ws.root / "preview.kubeconfig")
    # Deployed by its own account, then a new munge key previewed: a Secret the account cannot touch replaced (the
    # provider replaces a Secret whose data changes).
    ws.pulumi("up", "--yes", "--skip-preview", stack=KWOK_STACK)
    rotated = preview_steps(ws, kubeconfig, KWOK_STACK, {"slurm.mungeKeyRotation": "1"})
    assert ("replace", "kubernetes:core/v1:Secret::munge-secret") in rotated, sorted(rotated)

    # A new stack beside it, with a tenant: every object a create. 4.1.7's CRDs first, as the upgrade's first up
    # installs them (the account may create none for real).
    crds = ws.project / CHARTS_DIR / "soperator-4.1.7" / "helm-soperator-crds" / "crds"
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(crds))
    ws.pulumi("stack", "init", "kwok-tenant", "--copy-config-from", KWOK_STACK, stack=None)
    # 4.1.7 sizes workers per pool and refuses 1.14.10's slurm.worker.size (components/config/operator_keys.py).
    ws.pulumi("config", "rm", "--path", "slurm-platform:slurm.worker.size", stack="kwok-tenant")
    created = preview_steps(ws, kubeconfig, "kwok-tenant", TENANT)
    assert kinds_of(created, "create", CREATED) == CREATED, sorted(created)
    assert [urn for op, urn in created if op == "create" and urn.startswith("kubernetes:core/v1:Namespace::") and "vision" in urn]
    assert cluster.get("namespace", "vision") is None

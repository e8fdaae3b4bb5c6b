"""CI's preview account (ci/preview-access.yaml, docs/ci.md) on a real API server.

scripts/kube-local.sh's kube-apiserver 1.33.3 runs the file as an admin applies it, and
the account's own token (the Secret the file asks the token controller for) makes every
request: server-side dry runs pass, real writes are refused by the policy, Secrets are
reached only in a namespace bound for them, and RBAC grants no subresource (exec,
attach, port-forward, eviction, tokens, scale, status, node proxy). With cluster-admin
bound to the account the policy alone still refuses tokens, scale, status writes and
evictions; with the policy's old `resources: ["*"]` the same requests go through.
"""

from __future__ import annotations

import base64
import copy
import json
import subprocess
from collections.abc import Callable

import pytest
import yaml

from tests.harness import ROOT
from tests.kube import LocalCluster, wait_until

ACCESS = ROOT / "ci" / "preview-access.yaml"
DRY_RUN_ONLY = "the pulumi-preview account may only dry-run"
# A stack's namespace, its Secrets bound to the account as the one-time setup does.
STACK_NAMESPACE = "fpt-hpc"
PREVIEW_USER = "system:serviceaccount:ci:pulumi-preview"

Kubectl = Callable[..., subprocess.CompletedProcess]


def access_manifests() -> list[dict]:
    return [document for document in yaml.safe_load_all(ACCESS.read_text()) if document]


@pytest.fixture(scope="module")
def preview(cluster: LocalCluster) -> Kubectl:
    """kubectl with the preview account's token, once the policy refuses its first real write."""
    cluster.apply(access_manifests())
    encoded = wait_until(
        "the token controller to fill pulumi-preview-token",
        lambda: ((cluster.get("secret", "pulumi-preview-token", "ci") or {}).get("data") or {}).get("token"),
    )
    token = base64.b64decode(encoded).decode()
    cluster.kubectl("create", "namespace", STACK_NAMESPACE)
    cluster.kubectl(
        "create", "rolebinding", "pulumi-preview-secrets", "-n", STACK_NAMESPACE,
        "--clusterrole=pulumi-preview-secrets", "--serviceaccount=ci:pulumi-preview",
    )  # fmt: skip
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


def test_secrets_are_reached_only_in_a_bound_namespace(preview):
    secret = ["create", "secret", "generic", "probe", "--from-literal=k=v"]
    assert preview(*secret, "-n", STACK_NAMESPACE, "--dry-run=server").returncode == 0
    assert forbidden_by_rbac(preview(*secret, "-n", "default", "--dry-run=server"))
    # Its own token and the control plane's: a dry-run patch would answer with the whole Secret.
    assert forbidden_by_rbac(preview("get", "secret", "pulumi-preview-token", "-n", "ci"))
    assert forbidden_by_rbac(preview("get", "secrets", "-n", "kube-system"))
    assert forbidden_by_rbac(preview("get", "secrets", "--all-namespaces"))


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

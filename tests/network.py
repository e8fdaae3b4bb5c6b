"""The pods each example stack runs, with the labels they carry, for the network policy tests.

Written from the operators' own code, not from components/slurm's PodRoles (which the policies
are built on), so a wrong selector there fails here:
- soperator 1.14.10 / 4.1.7: render/common RenderLabels (name slurmcluster, instance <cluster>,
  component from consts.ComponentType*, part-of and managed-by slurm-operator); 4.1.7's workers
  are NodeSet pods (component nodeset); the MariaDB it asks for is `<cluster>-acct-db`;
- Slinky 1.2.1: internal/builder/labels (name slurmctld|slurmd|login|slurmdbd|slurmrestd, instance
  the custom resource's name, component, and slinky.slurm.net/cluster on NodeSet pods);
- the MariaDB operator: name mariadb, instance <MariaDB name> (WithMariaDBSelectorLabels);
- ACK, LDAP, the tenants Job: the pod templates we render (the operator copies ACK's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from components import tenancy
from components.config import PlatformConfig
from components.identity import reconciler, server
from components.slurm import ack, operator_module, slinky

SOPERATOR_CONTROLLER_NAMESPACE = "soperator-system"


@dataclass(frozen=True)
class Pod:
    role: str  # what the tests call it
    namespace: str
    labels: dict[str, str] = field(hash=False)


def soperator_labels(config: PlatformConfig, component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "slurmcluster",
        "app.kubernetes.io/instance": config.cluster.name,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/part-of": "slurm-operator",
        "app.kubernetes.io/managed-by": "slurm-operator",
    }


def mariadb_labels(name: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "mariadb", "app.kubernetes.io/instance": name}


def template_labels(manifest: dict[str, Any]) -> dict[str, str]:
    return dict(manifest["spec"]["template"]["metadata"]["labels"])


def slurm_pods(config: PlatformConfig) -> list[Pod]:
    """The operator's pods in the cluster's namespace: roles controller, worker, login, slurmdbd, slurmrestd,
    mariadb, and the helpers (exporter, copilot, ...) as `other-<what>`."""
    namespace, cluster = config.cluster.namespace, config.cluster.name
    accounting = config.slurm.accounting
    pods: list[Pod] = []
    if config.slurm_operator == "soperator":
        four = config.operators.soperator.version.startswith("4.")
        components = {"controller": "controller", "worker": "nodeset" if four else "worker", "login": "login"}
        if accounting.enabled:
            components["slurmdbd"] = "accounting"
        pods += [Pod(role, namespace, soperator_labels(config, component)) for role, component in components.items()]
        helpers = ["exporter", "populate-jail"] + (["sconfigcontroller", "soperatorchecks"] if four else ["nccl-benchmark"])
        pods += [Pod(f"other-{helper}", namespace, soperator_labels(config, helper)) for helper in helpers]
        if accounting.enabled and accounting.database == "mariadbOperator":
            pods.append(Pod("mariadb", namespace, mariadb_labels(f"{cluster}-acct-db")))
    elif config.slurm_operator == "slinky":
        n = slinky.names(config)

        def app(name: str, instance: str, component: str) -> dict[str, str]:
            return {"app.kubernetes.io/name": name, "app.kubernetes.io/instance": instance, "app.kubernetes.io/component": component}

        pods.append(Pod("controller", namespace, app("slurmctld", n["controller"], "controller")))
        for pool in config.gpu_pools:
            labels = {**app("slurmd", slinky.nodeset_name(pool), "worker"), "slinky.slurm.net/cluster": n["controller"]}
            pods.append(Pod("worker", namespace, labels))
        pods.append(Pod("login", namespace, app("login", n["login"], "login")))
        if accounting.enabled:
            pods.append(Pod("slurmdbd", namespace, app("slurmdbd", n["accounting"], "accounting")))
            if accounting.database == "mariadbOperator":
                pods.append(Pod("mariadb", namespace, mariadb_labels(n["mariadb"])))
        if config.slurm.slinky.rest_api:
            pods.append(Pod("slurmrestd", namespace, app("slurmrestd", n["restapi"], "restapi")))
    else:
        cluster_cr = ack.slurm_cluster_manifest(config)["spec"]
        head = cluster_cr.get("slurmctld") or cluster_cr["headGroupSpec"]
        # The head runs slurmctld (and slurmdbd in the 2024-06 API); users SSH into our login Deployment's pods.
        pods.append(Pod("controller", namespace, dict(head["template"]["metadata"]["labels"])))
        pods.append(Pod("login", namespace, template_labels(ack.login_deployment(config))))
        pods += [Pod("worker", namespace, dict(group["template"]["metadata"]["labels"])) for group in cluster_cr["workerGroupSpecs"]]
        if "slurmdbd" in cluster_cr:
            pods.append(Pod("slurmdbd", namespace, dict(cluster_cr["slurmdbd"]["template"]["metadata"]["labels"])))
        pods.append(Pod("other-copilot", namespace, template_labels(ack.copilot_deployment(config))))
    return pods


def platform_pods(config: PlatformConfig) -> list[Pod]:
    """Every pod of ours in the cluster's namespace: the operator's, LDAP's, the tenants Job's."""
    namespace = config.cluster.namespace
    pods = slurm_pods(config)
    if config.ldap.enabled:
        pods.append(Pod("ldap", namespace, template_labels(server.ldap_statefulset(config.ldap, namespace))))
        if reconciler.declared(config.tenants):
            pods.append(Pod("other-ldap-reconciler", namespace, template_labels(reconciler.reconciler_job(config.ldap, namespace, config.tenants))))
    if config.tenants:
        client = operator_module(config).accounting_client(config)
        pods.append(Pod("other-tenants-job", namespace, template_labels(tenancy.sacctmgr_job(config, client))))
    return pods


def matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A LabelSelector against a pod's labels (the empty selector matches every pod)."""
    if any(labels.get(key) != value for key, value in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
        present = key in labels
        held = {
            "In": present and labels[key] in values,
            "NotIn": not present or labels[key] not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }[operator]
        if not held:
            return False
    return True

"""The network policies as plain data (the `NetworkPolicies` component declares them): see components/network_policies.py."""

from __future__ import annotations

import ipaddress
from typing import Any, Optional

from ..config import PlatformConfig
from ..config.network import is_address, nfs_servers
from ..identity import reconciler
from ..identity.names import APP_LABELS, CONTAINER_LDAP_PORT, CONTAINER_LDAPS_PORT
from ..names import MARIADB_PORT, SLURMCTLD_PORT, SLURMDBD_PORT, SLURMRESTD_PORT, SSHD_PORT
from ..rendered import Rendered, namespace_key
from ..slurm import PodRoles, Selector
from ..slurm.common import NAMESPACE_NAME_LABEL, namespaces_named

LABELS = {"app.kubernetes.io/managed-by": "slurm-platform", "app.kubernetes.io/component": "network-policies"}


DNS_PORT = 53


# The kube-dns pods (CoreDNS keeps the label) in kube-system.
KUBE_DNS = {
    "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: "kube-system"}},
    "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
}


# Instance metadata: credentials of the node's role. 169.254.169.254 serves them on every cloud we name
# (FPT's OpenStack, AWS, GCP, Azure); Alibaba's is 100.100.100.200 (RAM-role credentials), AWS's IPv6
# one fd00:ec2::254, and Azure's WireServer 168.63.129.16 hands out the VM's extension settings.
METADATA_ADDRESSES = ("169.254.169.254/32",)


CLOUD_METADATA_ADDRESSES = {"alibaba": ("100.100.100.200/32",), "aws": ("fd00:ec2::254/128",), "azure": ("168.63.129.16/32",)}


# Pods that only answer: no egress beyond the cluster (app.kubernetes.io/name of LDAP and the MariaDB operator's pods).
DATA_STORES = (APP_LABELS["app.kubernetes.io/name"], "mariadb")


EVERY_POD: Selector = {}


# Every other pod, as two selectors: NotIn alone also matches pods without the label by the API's
# definition, but not in every implementation (cyclonus reads it otherwise), so no reading is left open.
NAME = "app.kubernetes.io/name"


SLURM_PODS: tuple[Selector, ...] = (
    {"matchExpressions": [{"key": NAME, "operator": "Exists"}, {"key": NAME, "operator": "NotIn", "values": list(DATA_STORES)}]},
    {"matchExpressions": [{"key": NAME, "operator": "DoesNotExist"}]},
)


def tcp(*ports: int) -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": port} for port in ports]


def every_port_but(port: int) -> list[dict[str, Any]]:
    """Every TCP and UDP port but `port` (ranges: a NetworkPolicy has no "except")."""
    ranges = [(1, port - 1), (port + 1, 65535)]
    return [
        {"protocol": protocol, "port": low, **({"endPort": high} if high > low else {})}
        for protocol in ("TCP", "UDP")
        for low, high in ranges
        if low <= high
    ]


def policy(
    name: str,
    namespace: str,
    pods: Selector,
    ingress: Optional[list[dict[str, Any]]] = None,
    egress: Optional[list[dict[str, Any]]] = None,
) -> dict[str, Any]:
    """A NetworkPolicy over `pods` for each direction given rules; an empty list denies that direction."""
    spec: dict[str, Any] = {"podSelector": pods, "policyTypes": []}
    for direction, rules in (("Ingress", ingress), ("Egress", egress)):
        if rules is not None:
            spec["policyTypes"].append(direction)
            if rules:
                spec[direction.lower()] = rules
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace, "labels": LABELS},
        "spec": spec,
    }


def denied_destinations(config: PlatformConfig) -> list[str]:
    """CIDRs no pod may reach: the metadata endpoints and the NFS servers, each once, as networks."""
    addresses = [*METADATA_ADDRESSES, *CLOUD_METADATA_ADDRESSES.get(config.cloud, ())]
    addresses += [host for _, host in nfs_servers(config) if is_address(host)]
    addresses += config.network_policies.storage_cidrs
    networks = [str(ipaddress.ip_network(address, strict=False)) for address in addresses]
    return list(dict.fromkeys(networks))


def beyond_the_cluster(config: PlatformConfig) -> list[dict[str, Any]]:
    """Egress peers: every IPv4 and IPv6 address but the denied ones."""
    denied = denied_destinations(config)
    peers = []
    for everything in ("0.0.0.0/0", "::/0"):
        version = ipaddress.ip_network(everything).version
        excepted = [cidr for cidr in denied if ipaddress.ip_network(cidr).version == version]
        peers.append({"ipBlock": {"cidr": everything, **({"except": excepted} if excepted else {})}})
    return peers


def dns_egress(config: PlatformConfig) -> list[dict[str, Any]]:
    extra = [{"ipBlock": {"cidr": cidr}} for cidr in config.network_policies.dns_cidrs]
    return [{"to": [KUBE_DNS, *extra], "ports": [{"protocol": "UDP", "port": DNS_PORT}, {"protocol": "TCP", "port": DNS_PORT}]}]


def namespace_baseline(config: PlatformConfig, namespace: str, outside: tuple[Selector, ...]) -> list[dict[str, Any]]:
    """Deny everything, then DNS and the namespace's own pods for every pod, and beyond the cluster for `outside`."""
    beyond = [{"to": beyond_the_cluster(config)}]
    return [
        policy("default-deny", namespace, EVERY_POD, ingress=[], egress=[]),
        policy("allow-dns", namespace, EVERY_POD, egress=dns_egress(config)),
        policy("allow-egress-in-namespace", namespace, EVERY_POD, egress=[{"to": [{"podSelector": EVERY_POD}]}]),
        *[
            policy("allow-egress-beyond-cluster" + ("" if index == 0 else f"-{index + 1}"), namespace, pods, egress=beyond)
            for index, pods in enumerate(outside)
        ],
    ]


def in_namespaces(namespaces: tuple[str, ...]) -> dict[str, Any]:
    return {"namespaceSelector": namespaces_named(list(namespaces))}


def slurm_policies(config: PlatformConfig, roles: PodRoles) -> list[dict[str, Any]]:
    namespace = config.cluster.namespace
    slurm_pods = [{"podSelector": pods} for pods in SLURM_PODS]
    launchers = [{"podSelector": roles.controller}, {"podSelector": roles.login}]
    policies = [
        policy("allow-slurmctld", namespace, roles.controller, ingress=[{"from": slurm_pods, "ports": tcp(SLURMCTLD_PORT)}]),
        # slurmd's 6818 and every job port: the peers are the ones that run or launch jobs; no SSH from the launchers.
        policy(
            "allow-workers",
            namespace,
            roles.workers,
            ingress=[{"from": [{"podSelector": roles.workers}]}, {"from": launchers, "ports": every_port_but(SSHD_PORT)}],
        ),
        policy(
            "allow-login",
            namespace,
            roles.login,
            ingress=[{"ports": tcp(SSHD_PORT)}, {"from": [{"podSelector": roles.controller}, {"podSelector": roles.workers}]}],
        ),
    ]
    if roles.accounting is not None:
        policies.append(policy("allow-slurmdbd", namespace, roles.accounting, ingress=[{"from": slurm_pods, "ports": tcp(SLURMDBD_PORT)}]))
    if roles.rest is not None:
        clients = [*slurm_pods, *([in_namespaces(roles.rest_client_namespaces)] if roles.rest_client_namespaces else [])]
        policies.append(policy("allow-slurmrestd", namespace, roles.rest, ingress=[{"from": clients, "ports": tcp(SLURMRESTD_PORT)}]))
    if roles.database is not None and roles.accounting is not None:
        database_clients = [{"podSelector": roles.accounting}, in_namespaces((config.operators.mariadb_operator.namespace,))]
        policies.append(policy("allow-mariadb", namespace, roles.database, ingress=[{"from": database_clients, "ports": tcp(MARIADB_PORT)}]))
    return policies


def ldap_ports(config: PlatformConfig) -> list[dict[str, Any]]:
    """The server pod's ports (the Service maps 389 and 636 onto them)."""
    return tcp(CONTAINER_LDAP_PORT, *([CONTAINER_LDAPS_PORT] if config.ldap.tls.enabled else []))


def ldap_policy(config: PlatformConfig, roles: PodRoles) -> dict[str, Any]:
    """sssd and nslcd run in the login pods and workers, and slurmctld resolves users and groups too; the
    reconciler Job (where there are tenants) writes the config's researchers."""
    clients = [{"podSelector": roles.controller}, {"podSelector": roles.workers}, {"podSelector": roles.login}]
    if reconciler.declared(config.tenants):
        clients.append({"podSelector": {"matchLabels": reconciler.LABELS}})
    return policy("allow-ldap", config.cluster.namespace, {"matchLabels": APP_LABELS}, ingress=[{"from": clients, "ports": ldap_ports(config)}])


def tenant_policies(config: PlatformConfig, namespace: str) -> list[dict[str, Any]]:
    """A tenant's pods talk to one another (distributed training) and beyond the cluster; nothing else reaches them."""
    same_namespace = [{"podSelector": EVERY_POD}]
    return [
        *namespace_baseline(config, namespace, (EVERY_POD,)),
        policy("allow-ingress-in-namespace", namespace, EVERY_POD, ingress=[{"from": same_namespace}]),
    ]


def cluster_policies(config: PlatformConfig, roles: PodRoles) -> list[dict[str, Any]]:
    """The cluster namespace's, over the pods the operator runs (`roles`: SlurmPlan.pod_roles)."""
    policies = [*namespace_baseline(config, config.cluster.namespace, SLURM_PODS), *slurm_policies(config, roles)]
    if config.ldap.enabled:
        policies.append(ldap_policy(config, roles))
    return policies


def render(config: PlatformConfig, roles: PodRoles) -> list[Rendered]:
    """Every policy: the cluster namespace's (the platform stack's), then each of the stack's tenant namespaces' (roles `tenant-<name>-...`)."""
    cluster = (namespace_key(config.cluster.namespace),)
    rendered = [Rendered(p["metadata"]["name"], p, after=cluster) for p in cluster_policies(config, roles)] if config.role == "platform" else []
    for namespace in [t.name for t in config.own_tenants if t.namespace]:
        rendered += [
            Rendered(f"tenant-{namespace}-{p['metadata']['name']}", p, after=(namespace_key(namespace),)) for p in tenant_policies(config, namespace)
        ]
    return rendered


def unknown_cni_warning(config: PlatformConfig) -> Optional[str]:
    if config.network_policies.cni != "unknown":
        return None
    return (
        "networkPolicies.cni is not set: the NetworkPolicies are declared, but only a CNI that enforces egress rules "
        "and ipBlock except makes them hold (flannel enforces none); name the cluster's CNI in networkPolicies.cni"
    )

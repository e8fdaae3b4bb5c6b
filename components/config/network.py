"""The network policies: on or off, the CNI that must enforce them, and the addresses that config alone cannot give."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal

from pydantic import Field
from slurm_rules import kube_rules

from .fields import Cidr, Model, Problem
from .storage import declared_storage_classes, storage_classes_in_use

if TYPE_CHECKING:
    from .platform import PlatformConfig

# CNIs that enforce NetworkPolicy with egress rules and ipBlock `except`, and those known to enforce none.
ENFORCING_CNIS = ("calico", "cilium", "terway", "antrea", "kube-router")
NON_ENFORCING_CNIS = ("flannel",)
Cni = Literal["unknown", "calico", "cilium", "terway", "antrea", "kube-router", "flannel"]


class NetworkPoliciesConfig(Model):
    """Default-deny NetworkPolicies with allow-lists, and what the CNI must enforce for them to hold."""

    enabled: bool = Field(
        True,
        description="Declare default-deny NetworkPolicies (ingress and egress) in the cluster's namespace and every tenant "
        "namespace the stack owns, with allow-lists for what Slurm, sssd/nslcd, slurmdbd and the operators need.",
    )
    cni: Cni = Field(
        "unknown",
        description="The cluster's CNI. It must enforce NetworkPolicy egress rules and ipBlock except "
        f"({', '.join(ENFORCING_CNIS)} do; on ACK, Terway with NetworkPolicy support). flannel enforces none and is refused.",
    )
    storage_cidrs: list[Cidr] = Field(
        default_factory=list,
        description="Addresses of NFS/NAS servers that config names by DNS (Alibaba NAS mount targets) or not at all "
        "(an existing StorageClass): pods' egress to them is denied like an IP-named server's.",
    )
    dns_cidrs: list[Cidr] = Field(
        default_factory=list,
        description="DNS servers pods query besides kube-system's kube-dns pods, e.g. NodeLocal DNSCache's 169.254.20.10/32.",
    )


def nfs_servers(config: PlatformConfig) -> list[tuple[tuple[object, ...], str]]:
    """(key path, host) of every NFS or NAS server the config names."""
    storage = config.storage
    servers: list[tuple[tuple[object, ...], str]] = []
    if storage.storage_class.nfs is not None:
        servers.append((("storage", "storageClass", "nfs", "server"), storage.storage_class.nfs.server))
    if storage.storage_class.alibaba_nas is not None:
        host = storage.storage_class.alibaba_nas.server.split(":", 1)[0]
        servers.append((("storage", "storageClass", "alibabaNas", "server"), host))
    if storage.jail.static_nfs is not None:
        servers.append((("storage", "jail", "staticNfs", "server"), storage.jail.static_nfs.server))
    for index, sub in enumerate(storage.submounts):
        if sub.static_nfs is not None:
            servers.append((("storage", "submounts", index, "staticNfs", "server"), sub.static_nfs.server))
    ack = config.slurm.ack
    if config.slurm_operator == "ack" and ack is not None and ack.home is not None:
        servers.append((("slurm", "ack", "home", "server"), ack.home.server))
    return servers


def is_address(host: str) -> bool:
    try:
        kube_rules.parse_ip(host)
    except ValueError:
        return False
    return True


def network_policy_problems(config: PlatformConfig) -> Iterator[Problem]:
    policies = config.network_policies
    if not policies.enabled:
        return
    if policies.cni in NON_ENFORCING_CNIS:
        yield Problem(
            ("networkPolicies", "cni"),
            f"{policies.cni} enforces no NetworkPolicy, so the default-deny and the metadata and NFS denials would hold "
            f"nothing; use a CNI that enforces egress rules and ipBlock except ({', '.join(ENFORCING_CNIS)}), or set "
            "networkPolicies.enabled: false and say what stands in for them",
            policies.cni,
        )
    if config.environment == "prod" and policies.cni == "unknown":
        yield Problem(
            ("networkPolicies", "cni"),
            "must name the cluster's CNI in production: the policies hold only where it enforces egress rules and ipBlock "
            "except, and on some CNIs the 0.0.0.0/0 a pod may reach also matches the nodes' addresses and the kubelet; "
            "name it (kubectl -n kube-system get daemonsets shows it)",
            policies.cni,
            fix=ENFORCING_CNIS,
        )
    if config.environment == "prod" and not policies.storage_cidrs:
        yield from _undeclared_class_problems(config)
    for index, cidr in enumerate(policies.storage_cidrs):
        if kube_rules.parse_cidr(cidr).prefixlen == 0:
            yield Problem(
                ("networkPolicies", "storageCidrs", index),
                "would deny pods every address, the internet and the API server included; list the NFS servers' addresses or subnet",
                cidr,
            )
    if not policies.storage_cidrs:
        for path, host in nfs_servers(config):
            if not is_address(host):
                yield Problem(
                    path,
                    "is a DNS name, and a NetworkPolicy denies addresses, not names: list the server's address or subnet "
                    "in networkPolicies.storageCidrs (e.g. 10.0.3.7/32) so pods cannot reach it",
                    host,
                )
    prometheus = config.monitoring.prometheus
    covered = {config.cluster.namespace, *(tenant.name for tenant in config.tenants if tenant.namespace)}
    if config.monitoring.enabled and prometheus.namespace in covered:
        yield Problem(
            ("monitoring", "prometheus", "namespace"),
            "is a namespace the stack's default-deny NetworkPolicies cover (the cluster's or a tenant's): they would cut "
            "Prometheus off from what it scrapes, and let whatever runs there pass for it; give Prometheus a namespace of its own",
            prometheus.namespace,
            (type(prometheus).model_fields["namespace"].default,),
        )
    operators = config.operators
    for name, field in type(operators).model_fields.items():
        chart = getattr(operators, name)
        if chart.namespace == config.cluster.namespace:
            yield Problem(
                ("operators", field.alias or name, "namespace"),
                "is the cluster's namespace, whose default-deny NetworkPolicies would cut the operator off from the API "
                "server and its webhooks; give the operator a namespace of its own",
                chart.namespace,
            )


def _undeclared_class_problems(config: PlatformConfig) -> Iterator[Problem]:
    """A class the stack uses but does not declare has NFS/NAS servers config cannot name: no policy would deny
    them to jobs and tenant pods, whose own NFS client may claim any uid (AUTH_SYS)."""
    declared = declared_storage_classes(config)
    for path, name in storage_classes_in_use(config):
        if name in declared:
            continue
        which = f"StorageClass {name}" if name else "the cluster's default StorageClass (unset)"
        yield Problem(
            path,
            f"puts the stack's data on {which}, which this stack does not declare (storage.storageClass): its NFS/NAS "
            "servers are unknown here, so no NetworkPolicy keeps jobs and tenant pods off them (a pod's own NFS client "
            "may claim any uid); in production list their addresses or subnet in networkPolicies.storageCidrs "
            "(e.g. 10.20.0.0/28), or use the declared class",
            name,
        )

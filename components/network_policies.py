"""A network that says no: default-deny NetworkPolicies (ingress and egress) in the cluster's namespace
and in every tenant namespace the stack owns, and allow-lists for what talks.

In the cluster's namespace (pods selected through the operator's own labels, `PodRoles`):
- every pod: DNS to kube-system's kube-dns, and egress to the namespace's pods (their ingress decides);
- every pod but the data stores (LDAP, MariaDB): egress beyond the cluster's pods, to
  any address but the cloud's metadata endpoints and the NFS servers (the kubelet mounts NFS from
  the node; a pod's own NFS client could claim uid 0 against a no_root_squash export). That is the
  internet for jobs, the API server for pods with a token, an external accounting database;
- slurmctld 6817, slurmdbd 6819 and slurmrestd 6820 from the Slurm pods of the namespace (every
  holder of the cluster's key: workers, login, slurmctld, slurmdbd, the tenants Job, the exporters);
- workers: every port from workers (the job traffic that has no fixed port: srun's step I/O, PMI, MPI and
  NCCL between workers; no SrunPortRange is rendered), and every port but SSH's 22 from slurmctld and login
  (slurmd's 6818, sbcast, sattach): a login pod reaches no worker's sshd, whose PAM stack (pam_slurm_adopt
  or none) is the image's, not ours;
- login: SSH 22 from anywhere (the LoadBalancer's source ranges and the cloud's firewall restrict who),
  and every port from slurmctld and workers (srun's and salloc's callback ports are ephemeral);
- LDAP (1389/1636 in the pod, 389/636 on its Service) from the pods that run sssd or nslcd;
- MariaDB 3306 from slurmdbd and the MariaDB operator's namespace.
In a tenant namespace: DNS, its own pods both ways, and the same egress beyond the cluster.
"""

from __future__ import annotations

from typing import Optional

import pulumi

from .config import PlatformConfig
from .declare import declare_each
from .render.network_policies import (
    render,
    unknown_cni_warning,
)
from .rendered import namespace_key
from .resources import warn
from .slurm import PodRoles


class NetworkPolicies(pulumi.ComponentResource):
    """Declares `render(config, roles)`. A policy waits for its namespace where the stack declares it (`namespaces`, by name)."""

    def __init__(
        self,
        name: str,
        config: PlatformConfig,
        roles: PodRoles,
        namespaces: dict[str, pulumi.Resource],
        opts: Optional[pulumi.ResourceOptions] = None,
    ):
        super().__init__("slurm-platform:network_policies:NetworkPolicies", name, None, opts)
        warn(unknown_cni_warning(config))
        policies = render(config, roles)
        declare_each(name, policies, self, opts, {namespace_key(n): [namespace] for n, namespace in namespaces.items()})
        self.names = [f"{p.manifest['metadata']['namespace']}/{p.manifest['metadata']['name']}" for p in policies]
        self.register_outputs({"networkPolicies": self.names})

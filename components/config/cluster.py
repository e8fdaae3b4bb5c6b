"""Cluster-wide identity and the Kubernetes connection."""

from __future__ import annotations

from typing import Optional

from pydantic import Field

from .fields import CLUSTER_NAME_MAX, ClusterName, DnsLabel, Model

# ---------------------------------------------------------------------------
# Cluster-wide identity


class ClusterConfig(Model):
    """The Slurm cluster's name and namespace."""

    name: ClusterName = Field(
        "fpt-hpc",
        description="SlurmCluster name (Slurm's ClusterName; do not change after creation): a DNS-1035 label of at most "
        f"{CLUSTER_NAME_MAX} characters (room for the -login-svc / -login-ssh Services).",
    )
    namespace: DnsLabel = Field("fpt-hpc", description="Namespace for the Slurm cluster, its volumes, secrets and LDAP.")
    create_namespace: bool = Field(True, description="Declare the namespace; false when it already exists.")


class KubernetesConfig(Model):
    """How the program reaches Kubernetes: a kubeconfig context, or no cluster at all."""

    context: Optional[str] = Field(None, description="kubeconfig context to use; the ambient default when unset.")
    render_yaml_to_directory: Optional[str] = Field(None, description="Write manifests to this directory instead of talking to a cluster.")

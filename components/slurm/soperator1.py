"""soperator 1.14.10, the release behind FPT's `helm-slurm-cluster` chart: one
`SlurmCluster` (`slurm.nebius.ai/v1`) holding every Slurm node kind, workers
included, plus our restricted SSH Service when source ranges are configured.

Each part of the spec has its own pure builder (config in, plain dict out), in
the spirit of soperator's own render package.
"""

from __future__ import annotations

from typing import Any

from ..config import PlatformConfig
from ..operators import SOPERATOR, SOPERATOR_CRDS, ChartRelease, chart_source, deep_merge, uses_mariadb_operator

# The renderers live with the SlurmCluster component (its live readiness and login
# are soperator 1.14.10's); soperator 4.x builds on them.
from ..slurm_cluster import (  # noqa: F401  (re-exported for soperator4)
    API_VERSION,
    KIND,
    accounting_node,
    controller_node,
    exporter_node,
    jail_sub_mounts,
    login_node,
    login_service_name,
    restricted_login_service,
    slurm_cluster_manifest,
    volume_sources,
    worker_node_names,
)
from . import KeySecret, Rendered
from .common import ssh_command_for, ssh_endpoint


def login_endpoint(config: PlatformConfig) -> str:
    return ssh_endpoint(config, login_service_name(config), node_port=uses_node_port(config))


def ssh_command(config: PlatformConfig) -> str:
    return ssh_command_for(config, login_service_name(config), node_port=uses_node_port(config))


def uses_node_port(config: PlatformConfig) -> bool:
    """Users reach soperator's own NodePort Service (no restricted LoadBalancer of ours)."""
    login = config.slurm.login
    return login.service_type == "NodePort" and not login.allowed_source_ranges


# --- the module interface -------------------------------------------------------

OPERATOR = "soperator 1.14.10"
USES_MUNGE = True
GHOST_NODES_ON_SCALE_DOWN = True
CRD_RELEASES = (SOPERATOR_CRDS,)


def operator_values(config: PlatformConfig) -> dict[str, Any]:
    # The operator registers the MariaDB scheme (and reconciles MariaDB CRs) only when told the CRDs exist.
    mariadb = "true" if uses_mariadb_operator(config) else "false"
    return {"controllerManager": {"manager": {"env": {"isMariadbCrdInstalled": mariadb}}}}


def soperator_releases(config: PlatformConfig, values: dict[str, Any], after: tuple[str, ...]) -> list[ChartRelease]:
    """The CRDs chart, then the operator chart (shared by every soperator release)."""
    sop = config.operators.soperator
    if not sop.install:
        return []
    crds_chart, crds_repo = chart_source(sop.repository, "helm-soperator-crds")
    chart, repo = chart_source(sop.repository, "helm-soperator")
    return [
        ChartRelease(SOPERATOR_CRDS, crds_chart, sop.version, sop.namespace, repo=crds_repo),
        ChartRelease(
            SOPERATOR,
            chart,
            sop.version,
            sop.namespace,
            deep_merge(values, sop.values),
            repo=repo,
            # The operator chart also carries the CRD in crds/; the CRDs chart owns it.
            skip_crds=True,
            # It watches MariaDB CRs from start-up when told they exist.
            depends_on=(SOPERATOR_CRDS, *after),
        ),
    ]


def chart_releases(config: PlatformConfig, after: tuple[str, ...] = ()) -> list[ChartRelease]:
    return soperator_releases(config, operator_values(config), after)


def needs_cert_manager(config: PlatformConfig) -> bool:
    return False  # 1.14.10 registers no webhooks


def render(config: PlatformConfig) -> list[Rendered]:
    rendered = [Rendered("cluster", slurm_cluster_manifest(config))]
    service = restricted_login_service(config)
    if service is not None:
        rendered.append(Rendered("login-ssh", service))
    return rendered


def key_secrets(config: PlatformConfig) -> list[KeySecret]:
    return []  # the munge key is the platform's


def worker_nodes(config: PlatformConfig) -> list[str]:
    return worker_node_names(config.slurm.worker.size)

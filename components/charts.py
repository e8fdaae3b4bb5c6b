"""Helm charts as data, the building block of every operator's install (components/operator_charts.py
installs them; each Slurm operator's module in components/slurm/ says which charts it needs)."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional

from .config import PlatformConfig

# Release keys, also the suffix of each Chart resource's name.
CERT_MANAGER = "cert-manager"
GPU_OPERATOR = "gpu-operator"
NETWORK_OPERATOR = "network-operator"
SOPERATOR_CRDS = "soperator-crds"
SOPERATOR = "soperator"
MARIADB_CRDS = "mariadb-operator-crds"
MARIADB_OPERATOR = "mariadb-operator"
KUEUE = "kueue"
PROMETHEUS_STACK = "kube-prometheus-stack"


# helm.v4.Chart renders a chart like `helm template` and never runs its hooks
# (nor keeps a Helm release object). What each chart we install uses hooks for,
# read from the pinned chart sources, and how this program makes up for it.
HELM_HOOKS: dict[str, str] = {
    GPU_OPERATOR: "v26.7.0: pre-upgrade Job applying the CRDs (operator.upgradeCRD, off here: the CRDs in the chart's crds/ "
    "are Pulumi resources, updated with the chart); pre-delete CRD cleanup (operator.cleanupCRD, off by default); pre-delete "
    "Job deleting the chart's GPUCluster (rendered only with gpuCluster.deployCR, off here: nothing to delete); NFD's "
    "post-delete Job pruning node labels (not run: after removing the chart, NFD's labels stay on the nodes)",
    NETWORK_OPERATOR: "24.10.1: pre-install/pre-upgrade Job applying the CRDs (upgradeCRDs, off here: Pulumi applies crds/); "
    "pre-install/pre-upgrade keep-ncp Job protecting a NicClusterPolicy a pre-24.10 chart made (not needed: this program "
    "declares the NicClusterPolicy itself); SR-IOV pre-delete webhook cleanup (SR-IOV is off)",
    SOPERATOR_CRDS: "1.14.10: no hooks; the CRD is a template, so it is updated with the chart",
    SOPERATOR: "1.14.10: no hooks. 4.1.7: its kruise 1.8.0 subchart (kruise.installOperator, on here) has pre-delete hooks: a "
    "ClusterRole, ClusterRoleBinding and ServiceAccount kruise-helm-hook and the Job kruise-finalizer, which lists CloneSets, "
    "Advanced DaemonSets and Advanced StatefulSets and fails the uninstall while any exist (never run here: when the chart "
    "goes, Pulumi deletes kruise's CRDs, templates with crds.managed, and the API server deletes every Advanced StatefulSet "
    "with them, soperator's workers and login included; the data volumes are the platform's protected claims and stay)",
    MARIADB_CRDS: "no hooks (26.6.0)",
    MARIADB_OPERATOR: "0.29.0 and 26.6.0: no hooks; webhook certificates come from its own cert-controller",
    CERT_MANAGER: "v1.16.2: post-install startupapicheck Job (startupapicheck.enabled, off here: it only polls the webhook; "
    "Pulumi awaits the webhook Deployment instead)",
    PROMETHEUS_STACK: "88.5.3: the Prometheus Operator's admission webhook certificate Jobs (prometheusOperator.admissionWebhooks.patch, "
    "pre-install/post-install: create the webhook's Secret, patch its caBundle; off here with the webhooks themselves and the operator's "
    "TLS, which serves them: a PrometheusRule is checked by promtool in the tests instead); the CRD upgrade Job (crds.upgradeJob, off by "
    "default: the CRDs in the crds subchart's crds/ are Pulumi resources, updated with the chart)",
    KUEUE: "0.19.2: no hooks (the autoKueue post-install Job came to the chart after 0.19.2); CRDs are templates, updated "
    "with the chart; webhook certificates come from Kueue's own internal cert rotator",
}


@dataclass(frozen=True)
class Apis:
    """One API group of a chart's objects, there while the chart value `when` (a dotted path) is true:
    `default` when the values leave it unset; always when `when` is None."""

    group: str
    when: Optional[str] = None
    default: bool = True
    # In the chart's crds/ (skip_crds leaves it out), not a template.
    crds_dir: bool = False


@dataclass(frozen=True)
class ChartApis:
    """What a chart brings CRDs for (`installs`) and the custom resources of groups it does not
    install that its templates render (`renders`), read from the chart at `source`."""

    source: str
    installs: tuple[Apis, ...] = ()
    renders: tuple[Apis, ...] = ()


CERT_MANAGER_GROUP = "cert-manager.io"
PROMETHEUS_GROUP = "monitoring.coreos.com"
# Read from each chart's templates, crds/ and subcharts at the pinned version (`chart@version` where
# versions differ, the chart's name for every version otherwise). A custom resource waits for the release
# that installs its group's CRDs (`crd_providers`): its own objects, a release that renders it, the
# platform's. A chart not listed installs nothing and renders no custom resource of another group.
CHART_APIS: dict[str, ChartApis] = {
    "cert-manager": ChartApis(
        "cert-manager/cert-manager deploy/charts/cert-manager@v1.16.2",
        installs=(Apis(CERT_MANAGER_GROUP, "crds.enabled", False), Apis("acme.cert-manager.io", "crds.enabled", False)),
        renders=(Apis(PROMETHEUS_GROUP, "prometheus.servicemonitor.enabled", False), Apis(PROMETHEUS_GROUP, "prometheus.podmonitor.enabled", False)),
    ),
    "gpu-operator": ChartApis(
        "NVIDIA/gpu-operator deployments/gpu-operator@v26.7.0 (subchart node-feature-discovery 0.19.0)",
        installs=(
            Apis("nvidia.com", crds_dir=True),
            Apis("resource.nvidia.com", crds_dir=True),
            Apis("nfd.k8s-sigs.io", "nfd.enabled", True, crds_dir=True),
        ),
        renders=(Apis("nfd.k8s-sigs.io", "nfd.nodefeaturerules", False),),
    ),
    "network-operator": ChartApis(
        "Mellanox/network-operator deployment/network-operator@v24.10.1 (subcharts node-feature-discovery, "
        "sriov-network-operator); templates/nodefeaturerules.yaml renders NodeFeatureRule nvidia-nics-rules",
        installs=(
            Apis("mellanox.com", crds_dir=True),
            Apis("k8s.cni.cncf.io", crds_dir=True),
            Apis("nfd.k8s-sigs.io", "nfd.enabled", True, crds_dir=True),
            Apis("sriovnetwork.openshift.io", "sriovNetworkOperator.enabled", False, crds_dir=True),
        ),
        renders=(Apis("nfd.k8s-sigs.io", "nfd.deployNodeFeatureRules", True),),
    ),
    "helm-soperator-crds": ChartApis("nebius/soperator helm/soperator-crds@1.14.10 and 4.1.7", installs=(Apis("slurm.nebius.ai"),)),
    "helm-soperator": ChartApis(
        "nebius/soperator helm/soperator@1.14.10 and 4.1.7 (4.1.7: subchart kruise 1.8.0, CRDs as templates)",
        installs=(Apis("slurm.nebius.ai", crds_dir=True), Apis("apps.kruise.io", "kruise.installOperator", False)),
        renders=(Apis(CERT_MANAGER_GROUP, "certManager.enabled", False),),
    ),
    "mariadb-operator-crds": ChartApis("mariadb-operator deploy/charts/mariadb-operator-crds@26.6.0", installs=(Apis("k8s.mariadb.com"),)),
    "mariadb-operator@0.29.0": ChartApis(
        "mariadb-operator deploy/charts/mariadb-operator@helm-chart-0.29.0", installs=(Apis("k8s.mariadb.com", crds_dir=True),)
    ),
    "mariadb-operator": ChartApis(
        "mariadb-operator deploy/charts/mariadb-operator@26.6.0",
        installs=(Apis("k8s.mariadb.com", "crds.enabled", False),),
        renders=(Apis(CERT_MANAGER_GROUP, "certManager.enabled", False),),
    ),
    "kueue": ChartApis(
        "kubernetes-sigs/kueue charts/kueue@v0.19.2",
        installs=(Apis("kueue.x-k8s.io"),),
        renders=(Apis(CERT_MANAGER_GROUP, "enableCertManager", False),),
    ),
    "kube-prometheus-stack": ChartApis(
        "prometheus-community/helm-charts charts/kube-prometheus-stack@kube-prometheus-stack-88.5.3 (subchart crds: the "
        "Prometheus Operator v0.93.1's CRDs in its crds/)",
        installs=(Apis(PROMETHEUS_GROUP, "crds.enabled", True, crds_dir=True),),
    ),
    "slurm-operator-crds": ChartApis("SlinkyProject/slurm-operator helm/slurm-operator-crds@v1.2.1", installs=(Apis("slinky.slurm.net"),)),
    "slurm-operator": ChartApis(
        "SlinkyProject/slurm-operator helm/slurm-operator@v1.2.1",
        installs=(Apis("slinky.slurm.net", "crds.enabled", False),),
        renders=(Apis(CERT_MANAGER_GROUP, "certManager.enabled", False),),
    ),
    "ack-slurm-operator": ChartApis(
        "AliyunContainerService/ai-models-on-ack framework/slurm", installs=(Apis("kai.alibabacloud.com", crds_dir=True),)
    ),
}


@dataclass(frozen=True)
class ChartRelease:
    """One Helm release, as data: what `helm install` would be told."""

    key: str
    chart: str
    version: str
    namespace: str
    values: dict[str, Any] = field(default_factory=dict)
    repo: Optional[str] = None
    depends_on: tuple[str, ...] = ()
    skip_crds: bool = False


def chart_source(repository: str, chart: str) -> tuple[str, Optional[str]]:
    """(chart, repo) for helm: OCI and local charts by reference, repo charts by URL + name."""
    if repository.startswith(("http://", "https://")):
        return chart, repository
    return f"{repository.rstrip('/')}/{chart}", None


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Config `values` win over ours, key by key."""
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def uses_mariadb_operator(config: PlatformConfig) -> bool:
    accounting = config.slurm.accounting
    return accounting.enabled and accounting.database == "mariadbOperator"


def api_group(api_version: str) -> str:
    """The API group of `apiVersion` ("" for the core group)."""
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def chart_apis(release: ChartRelease) -> ChartApis:
    name = release.chart.rstrip("/").rsplit("/", 1)[-1]
    return CHART_APIS.get(f"{name}@{release.version}") or CHART_APIS.get(name) or ChartApis("")


def _is_on(values: dict[str, Any], apis: Apis) -> bool:
    if apis.when is None:
        return True
    value: Any = values
    for key in apis.when.split("."):
        if not isinstance(value, dict) or key not in value:
            return apis.default
        value = value[key]
    return bool(value)


def installed_groups(release: ChartRelease) -> set[str]:
    """The API groups whose CRDs the release installs, with its values."""
    return {a.group for a in chart_apis(release).installs if _is_on(release.values, a) and not (a.crds_dir and release.skip_crds)}


def rendered_groups(release: ChartRelease) -> set[str]:
    """The API groups of the custom resources the release renders that it does not install itself."""
    return {a.group for a in chart_apis(release).renders if _is_on(release.values, a)} - installed_groups(release)


def crd_providers(releases: list[ChartRelease]) -> dict[str, str]:
    """API group -> the release installing its CRDs (the first one, in install order)."""
    providers: dict[str, str] = {}
    for release in releases:
        for group in sorted(installed_groups(release)):
            providers.setdefault(group, release.key)
    return providers


def with_crd_dependencies(releases: list[ChartRelease]) -> list[ChartRelease]:
    """Each release also waits for the releases installing the CRDs of what it renders, which come
    before it (a first up on an empty cluster must not depend on which chart the engine reaches first)."""
    providers = crd_providers(releases)
    ordered: list[str] = []
    result = []
    for release in releases:
        needs = tuple(providers[g] for g in sorted(rendered_groups(release)) if g in providers and providers[g] != release.key)
        late = [key for key in needs if key not in ordered]
        if late:
            raise ValueError(f"release {release.key} renders custom resources of {late}, installed after it")
        result.append(dataclasses.replace(release, depends_on=tuple(dict.fromkeys((*release.depends_on, *needs)))))
        ordered.append(release.key)
    return result

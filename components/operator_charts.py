"""Operators as pinned Helm charts: NVIDIA GPU and Network operators, the chosen
Slurm operator (its module in components/slurm/ says which charts), MariaDB
operator, and cert-manager when asked or when the Slurm operator's webhooks
need it; plus the NicClusterPolicy the network operator chart no longer
creates itself (since 24.10).

`chart_releases()` decides what to install, in which order, with which values,
as plain data; `Operators` turns each release into a `helm.v4.Chart`.
The charts as data (`ChartRelease`) live in components/charts.py, below both this module and the
Slurm operators' modules.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from .charts import (
    CERT_MANAGER,
    GPU_OPERATOR,
    KUEUE,
    MARIADB_CRDS,
    MARIADB_OPERATOR,
    NETWORK_OPERATOR,
    PROMETHEUS_STACK,
    ChartRelease,
    api_group,
    chart_source,
    crd_providers,
    deep_merge,
    uses_mariadb_operator,
    with_crd_dependencies,
)
from .config import NodePoolConfig, PlatformConfig
from .config.charts import GPU_TOOLKIT_ENV
from .declare import declare
from .monitoring import series
from .monitoring.monitors import cert_manager_values
from .resources import child_opts, secret_if
from .slurm import SlurmPlan, installs_cert_manager
from .slurm.common import (
    namespaces_in,
    operator_priority_class,
    operator_priority_class_name,
    priority_class_policy,
    tenant_namespaces_selector,
)
from .slurm.gpu_jobs import MAPPING_DIR, maps_gpu_jobs

# startupapicheck is a post-install hook (see HELM_HOOKS).
CERT_MANAGER_VALUES: dict[str, Any] = {"crds": {"enabled": True}, "startupapicheck": {"enabled": False}}


def gpu_operator_values(config: PlatformConfig) -> dict[str, Any]:
    gpu = config.operators.gpu_operator
    driver: dict[str, Any] = {"enabled": gpu.driver_enabled}
    if gpu.driver_version:
        driver["version"] = gpu.driver_version
    values = {
        "operator": {"upgradeCRD": False},  # a Helm hook (see HELM_HOOKS)
        "driver": driver,
        # GPUs reach a container as the device plugin's CDI list, and the toolkit ignores NVIDIA_VISIBLE_DEVICES
        # from unprivileged containers (GpuOperatorConfig checks `values` keep both).
        "cdi": {"enabled": True},
        "toolkit": {"enabled": gpu.toolkit_enabled, "env": GPU_TOOLKIT_ENV},
        "devicePlugin": {"enabled": gpu.device_plugin_enabled},
        "dcgmExporter": dcgm_exporter_values(config),
        "mig": {"strategy": gpu.mig_strategy},
        "nfd": {"enabled": gpu.node_feature_discovery},
    }
    return deep_merge(values, gpu.values)


def dcgm_exporter_values(config: PlatformConfig) -> dict[str, Any]:
    """With monitoring, the operator's ServiceMonitor for dcgm-exporter, selected by our Prometheus, and the HPC job
    mapping our Slurm Prolog writes (components/slurm/gpu_jobs.py). Its Kubernetes mapping (pod, namespace and
    container labels on a GPU a pod holds: a Kueue workload's) is on in every dcgm-exporter the operator runs."""
    values: dict[str, Any] = {"enabled": config.operators.gpu_operator.dcgm_exporter_enabled}
    if maps_gpu_jobs(config):
        monitoring = config.monitoring
        values["serviceMonitor"] = {
            "enabled": True,
            "interval": monitoring.scrape_interval,
            "additionalLabels": dict(monitoring.prometheus.selector_labels),
        }
        values["hpcJobMapping"] = {"enabled": True, "directory": MAPPING_DIR}
    return values


def network_operator_values(config: PlatformConfig) -> dict[str, Any]:
    network = config.operators.network_operator
    values = {
        "upgradeCRDs": False,  # a Helm hook (see HELM_HOOKS)
        # The chart's NodeFeatureRule (nvidia-nics-rules) is served by the NFD this stack runs, whose release
        # installs its CRD and which the network operator then waits for (with_crd_dependencies); with none
        # here nothing would serve it, and its CRD may be missing: off (networkOperator.values turns it on).
        "nfd": {"enabled": network.node_feature_discovery, "deployNodeFeatureRules": runs_node_feature_discovery(config)},
        "sriovNetworkOperator": {"enabled": False},
    }
    return deep_merge(values, network.values)


def runs_node_feature_discovery(config: PlatformConfig) -> bool:
    ops = config.operators
    gpu_nfd = ops.gpu_operator.install and ops.gpu_operator.node_feature_discovery
    return gpu_nfd or (ops.network_operator.install and ops.network_operator.node_feature_discovery)


# Kueue 0.19.2's chart default for managerConfig.controllerManagerConfigYaml (a YAML string: a value
# replaces all of it), to which kueue_values adds what it manages.
KUEUE_DEFAULT_CONFIGURATION: dict[str, Any] = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta2",
    "kind": "Configuration",
    "health": {"healthProbeBindAddress": ":8081"},
    "metrics": {"bindAddress": ":8443"},
    "webhook": {"port": 9443},
    "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
    "controller": {
        "groupKindConcurrency": {
            "Job.batch": 5,
            "Pod": 5,
            "Workload.kueue.x-k8s.io": 10,
            "LocalQueue.kueue.x-k8s.io": 5,
            "ClusterQueue.kueue.x-k8s.io": 5,
            "ResourceFlavor.kueue.x-k8s.io": 1,
        }
    },
    "clientConnection": {"qps": 300, "burst": 500},
    "integrations": {
        "frameworks": [
            "batch/job",
            "kubeflow.org/mpijob",
            "ray.io/rayjob",
            "ray.io/rayservice",
            "ray.io/raycluster",
            "jobset.x-k8s.io/jobset",
            "workload.codeflare.dev/appwrapper",
            "trainer.kubeflow.org/trainjob",
            "pod",
            "deployment",
            "statefulset",
            "leaderworkerset.x-k8s.io/leaderworkerset",
        ]
    },
}


def kueue_configuration(config: PlatformConfig) -> dict[str, Any]:
    """Kueue manages every workload of a tenant namespace, with or without a queue name (one without
    stays suspended: it cannot bypass the tenants' quotas), and nothing elsewhere without one."""
    return {
        **KUEUE_DEFAULT_CONFIGURATION,
        "manageJobsWithoutQueueName": True,
        "managedJobsNamespaceSelector": tenant_namespaces_selector(config),
        # The per-ClusterQueue usage, quota and pending-GPU series the tenants' recording rules read
        # (components/monitoring/rules.py) exist only with this on.
        **({"metrics": {"bindAddress": ":8443", "enableClusterQueueResources": True}} if config.monitoring.enabled else {}),
    }


def kueue_values(config: PlatformConfig) -> dict[str, Any]:
    # JSON is YAML: the chart puts the string into Kueue's ConfigMap as it is.
    values = {
        "managerConfig": {"controllerManagerConfigYaml": json.dumps(kueue_configuration(config), indent=2)},
        "controllerManager": {"manager": {"priorityClassName": operator_priority_class_name(config)}},
    }
    return deep_merge(values, config.operators.kueue.values)


def prometheus_stack_values(config: PlatformConfig) -> dict[str, Any]:
    """The Prometheus selects the monitors and rules that carry the selector labels, in every namespace, and nothing
    else (the chart's NilUsesHelmValues would narrow it to its own release's); its pods carry the labels the
    NetworkPolicies let in; Grafana loads the dashboards' ConfigMaps from its own namespace only, where ours are."""
    prometheus = config.monitoring.prometheus
    selector = {"matchLabels": dict(prometheus.selector_labels)}
    spec = {
        f"{kind}{suffix}": value
        for kind in ("serviceMonitor", "podMonitor", "rule")
        for suffix, value in (("Selector", selector), ("SelectorNilUsesHelmValues", False))
    }
    values = {
        # The operator's admission webhook needs certificates from Helm hooks, which never run here (charts.HELM_HOOKS).
        "prometheusOperator": {
            "admissionWebhooks": {"enabled": False},
            "tls": {"enabled": False},
            "priorityClassName": operator_priority_class_name(config),
        },
        # Above every tenant class, like the other operators: a tenant's burst must not evict what shows it.
        "prometheus": {
            "prometheusSpec": {
                **spec,
                "podMetadata": {"labels": dict(prometheus.pod_labels)},
                "priorityClassName": operator_priority_class_name(config),
            }
        },
        "alertmanager": {"alertmanagerSpec": {"priorityClassName": operator_priority_class_name(config)}},
        "grafana": {
            "sidecar": {
                # Only our dashboards' namespace: a tenant may create ConfigMaps in its own, which must not become dashboards.
                "dashboards": {
                    "enabled": True,
                    "label": series.DASHBOARD_LABEL,
                    "labelValue": series.DASHBOARD_LABEL_VALUE,
                    "searchNamespace": prometheus.namespace,
                }
            }
        },
    }
    return deep_merge(values, prometheus.values)


def chart_releases(config: PlatformConfig, plan: SlurmPlan) -> list[ChartRelease]:
    """Every release to install, CRD charts before the charts and CRs that need them; the Slurm operator's
    (`plan`, slurm.resolve) last."""
    ops = config.operators
    cert_manager = installs_cert_manager(ops.cert_manager, plan.needs_cert_manager)
    releases: list[ChartRelease] = []
    # First: the charts below render monitors, whose CRDs it installs.
    monitoring = config.monitoring
    # The MariaDB operator looks for the ServiceMonitor kind before it makes the database's monitor.
    monitored: tuple[str, ...] = ()
    if monitoring.enabled and monitoring.prometheus.install:
        prometheus = monitoring.prometheus
        chart, repo = chart_source(prometheus.repository, "kube-prometheus-stack")
        releases.append(ChartRelease(PROMETHEUS_STACK, chart, prometheus.version, prometheus.namespace, prometheus_stack_values(config), repo=repo))
        monitored = (PROMETHEUS_STACK,)
    if cert_manager:
        cm = ops.cert_manager
        chart, repo = chart_source(cm.repository, "cert-manager")
        values = deep_merge(
            CERT_MANAGER_VALUES, {"global": {"priorityClassName": operator_priority_class_name(config)}, **cert_manager_values(config)}
        )
        releases.append(ChartRelease(CERT_MANAGER, chart, cm.version, cm.namespace, deep_merge(values, cm.values), repo=repo))
    if ops.gpu_operator.install:
        gpu = ops.gpu_operator
        chart, repo = chart_source(gpu.repository, "gpu-operator")
        releases.append(ChartRelease(GPU_OPERATOR, chart, gpu.version, gpu.namespace, gpu_operator_values(config), repo=repo))
    if ops.network_operator.install:
        net = ops.network_operator
        chart, repo = chart_source(net.repository, "network-operator")
        releases.append(ChartRelease(NETWORK_OPERATOR, chart, net.version, net.namespace, network_operator_values(config), repo=repo))
    mariadb_keys: tuple[str, ...] = ()
    if ops.mariadb_operator.install and uses_mariadb_operator(config):
        maria = ops.mariadb_operator
        operator_values = maria.values
        if maria.crds_chart:
            chart, repo = chart_source(maria.repository, "mariadb-operator-crds")
            releases.append(ChartRelease(MARIADB_CRDS, chart, maria.version, maria.namespace, repo=repo))
            operator_values = deep_merge({"crds": {"enabled": False}}, maria.values)
            mariadb_keys += (MARIADB_CRDS,)
        chart, repo = chart_source(maria.repository, "mariadb-operator")
        waits_for = (*mariadb_keys, *monitored)
        releases.append(ChartRelease(MARIADB_OPERATOR, chart, maria.version, maria.namespace, operator_values, repo=repo, depends_on=waits_for))
        mariadb_keys += (MARIADB_OPERATOR,)
    if ops.kueue.enabled and ops.kueue.install:
        kueue = ops.kueue
        chart, repo = chart_source(kueue.repository, "kueue")
        releases.append(ChartRelease(KUEUE, chart, kueue.version, kueue.namespace, kueue_values(config), repo=repo))
    # Webhook certificates come from cert-manager: the Slurm operator starts after it.
    after = (*mariadb_keys, *((CERT_MANAGER,) if cert_manager else ()))
    releases += plan.module.chart_releases(config, after)
    return with_crd_dependencies(releases)


def installed_charts(releases: list[ChartRelease]) -> dict[str, dict[str, str]]:
    """Release -> chart reference, pinned version and namespace, as `helm list` would show them."""
    return {
        release.key: {
            "chart": f"{release.repo}/{release.chart}" if release.repo else release.chart,
            "version": release.version,
            "namespace": release.namespace,
        }
        for release in releases
    }


def operator_namespaces(config: PlatformConfig, releases: list[ChartRelease]) -> list[str]:
    """The namespaces to declare for the releases, each once, and never the Slurm
    cluster's: the platform declares that one, protected, because deleting it
    would delete the data volumes inside."""
    return list(dict.fromkeys(r.namespace for r in releases if r.namespace != config.cluster.namespace))


def operator_priority(config: PlatformConfig, releases: list[ChartRelease]) -> tuple[list[str], list[tuple[str, dict[str, Any]]]]:
    """The releases whose values name the operators' priority class, and (role, manifest) of that class and of
    the policy admitting it only in those releases' namespaces (as Slurm's class only in the cluster's); none
    when no release names it."""
    class_name = operator_priority_class_name(config)
    named = [release.key for release in releases if class_name in json.dumps(release.values)]
    if not named:
        return [], []
    priority_class = operator_priority_class(config)
    namespaces = sorted({release.namespace for release in releases if release.key in named})
    policy, binding = priority_class_policy(class_name, [class_name], namespaces_in(namespaces), priority_class["metadata"]["labels"])
    return named, [("priority-class", priority_class), ("priority-policy", policy), ("priority-policy-binding", binding)]


def rdma_pools(pools: list[NodePoolConfig]) -> list[NodePoolConfig]:
    return [pool for pool in pools if pool.rdma]


def nic_cluster_policy(config: PlatformConfig) -> Optional[dict[str, Any]]:
    """`NicClusterPolicy` with the RDMA shared device plugin, when a pool has RDMA and we
    install the network operator (a cloud portal that installs it owns its policy too)."""
    pools = rdma_pools(config.node_pools)
    if not pools or not config.operators.network_operator.install:
        return None
    net = config.operators.network_operator
    selectors: dict[str, Any] = {"vendors": ["15b3"]}  # Mellanox
    if net.rdma_if_names:
        selectors["ifNames"] = list(net.rdma_if_names)
    plugin_config = {"configList": [{"resourceName": net.rdma_resource_name, "rdmaHcaMax": net.rdma_hca_max, "selectors": selectors}]}
    node_terms = [{"matchExpressions": [{"key": k, "operator": "In", "values": [v]} for k, v in sorted(pool.selector.items())]} for pool in pools]
    repository, image = net.rdma_shared_device_plugin_image.rsplit("/", 1)
    spec = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": node_terms}},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "rdmaSharedDevicePlugin": {
            "image": image,
            "repository": repository,
            "version": net.rdma_shared_device_plugin_version,
            "config": json.dumps(plugin_config, sort_keys=True),
        },
    }
    if net.doca_driver_version:
        spec["ofedDriver"] = {
            "image": "doca-driver",
            "repository": "nvcr.io/nvidia/mellanox",
            "version": net.doca_driver_version,
            "upgradePolicy": {"autoUpgrade": True, "maxParallelUpgrades": 1, "drain": {"enable": True, "force": True, "timeoutSeconds": 300}},
        }
    return {"apiVersion": "mellanox.com/v1alpha1", "kind": "NicClusterPolicy", "metadata": {"name": "nic-cluster-policy"}, "spec": spec}


class Operators(pulumi.ComponentResource):
    """Helm releases of the operators the Slurm cluster runs on."""

    charts: dict[str, k8s.helm.v4.Chart]
    versions: pulumi.Output[dict]
    installed: pulumi.Output[dict]

    def __init__(self, name: str, config: PlatformConfig, plan: SlurmPlan, opts: Optional[pulumi.ResourceOptions] = None):
        # The type token keeps the module's former name: it is part of every chart's URN.
        super().__init__("slurm-platform:operators:Operators", name, None, opts)
        self.charts = {}
        releases = chart_releases(config, plan)
        self.crd_providers = crd_providers(releases)
        # The charts' namespaces the stack creates, by name: what else lives there waits for its own.
        self.namespaces: dict[str, pulumi.Resource] = {
            namespace: k8s.core.v1.Namespace(
                f"{name}-{namespace}-ns", metadata=k8s.meta.v1.ObjectMetaArgs(name=namespace), opts=child_opts(self, opts)
            )
            for namespace in operator_namespaces(config, releases)
        }
        # The operators' class first: the charts whose pods name it wait for it.
        named, priority_objects = operator_priority(config, releases)
        priority = [declare(f"{name}-{role}", manifest, child_opts(self, opts)) for role, manifest in priority_objects]
        for release in releases:
            own_namespace = [self.namespaces[release.namespace]] if release.namespace in self.namespaces else []
            waits_for = [*own_namespace, *(priority if release.key in named else []), *(self.charts[key] for key in release.depends_on)]
            self.charts[release.key] = k8s.helm.v4.Chart(
                f"{name}-{release.key}",
                chart=release.chart,
                version=release.version,
                namespace=release.namespace,
                name=release.key,
                # User values may carry credentials: secret when the operators key is.
                values=secret_if(config, "operators", release.values),
                skip_crds=release.skip_crds,
                repository_opts=k8s.helm.v4.RepositoryOptsArgs(repo=release.repo) if release.repo else None,
                opts=child_opts(self, opts, depends_on=waits_for),
            )
        policy = nic_cluster_policy(config)
        if policy is not None:
            declare(f"{name}-nic-cluster-policy", policy, child_opts(self, opts, depends_on=self.waits_for_crds([policy])))
        self.versions = pulumi.Output.from_input({release.key: release.version for release in releases})
        self.installed = pulumi.Output.from_input(installed_charts(releases))
        self.register_outputs({"versions": self.versions, "installed": self.installed})

    def waits_for_crds(self, manifests: Iterable[dict[str, Any]]) -> list[pulumi.Resource]:
        """The charts installing the CRDs of these objects' custom kinds (none for built-in kinds and for
        CRDs the cluster has without this stack)."""
        keys = dict.fromkeys(self.crd_providers[g] for g in sorted({api_group(m["apiVersion"]) for m in manifests}) if g in self.crd_providers)
        return [self.charts[key] for key in keys]

"""The Helm charts of the cluster's operators (the Slurm operators' own settings live in soperator.py, ack.py, slinky.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any, Literal, Optional

from pydantic import AfterValidator, Field

from .ack import AckSlurmOperatorConfig
from .fields import (
    NVIDIA_HELM_REPO,
    ChartConfig,
    ChartRepository,
    DnsLabel,
    ExactVersion,
    ImageTag,
    InterfaceName,
    Model,
    Problem,
    _check_image_repository_path,
    _check_rdma_resource_name,
    _leading_v,
    chart_namespace,
    chart_repository,
)
from .slinky import SlinkyOperatorConfig
from .soperator import SoperatorConfig

if TYPE_CHECKING:
    from .platform import PlatformConfig

# ---------------------------------------------------------------------------
# Operators

# The first GPU operator whose container toolkit is 1.17.8 (deployments/gpu-operator/values.yaml toolkit.version):
# older toolkits let a container's image run its hook environment as root on the node (CVE-2025-23266).
FIXED_TOOLKIT_GPU_OPERATOR = "v25.3.1"
# The toolkit takes the GPUs a container may see from the device plugin only: NVIDIA_VISIBLE_DEVICES (which a pod,
# or its image, sets itself) is ignored for unprivileged containers. The operator's own operands are privileged.
GPU_TOOLKIT_ENV = [{"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", "value": "false"}]


class GpuOperatorConfig(ChartConfig):
    namespace: DnsLabel = chart_namespace("gpu-operator")
    version: Annotated[
        ExactVersion,
        _leading_v(True),
        Field(description="Chart version with a leading v; v25.3.1 or later (container toolkit 1.17.8: CVE-2025-23266)."),
    ] = "v26.7.0"
    repository: ChartRepository = chart_repository(NVIDIA_HELM_REPO)
    driver_enabled: bool = Field(True, description="Install the NVIDIA driver (false when nodes ship one).")
    driver_version: Optional[ImageTag] = Field(None, description="Driver version; the chart's default when unset.")
    toolkit_enabled: bool = Field(True, description="Install the NVIDIA container toolkit (false when nodes ship one).")
    device_plugin_enabled: bool = Field(True, description="Run the device plugin that advertises nvidia.com/gpu.")
    dcgm_exporter_enabled: bool = Field(True, description="Run DCGM exporter (GPU metrics for Prometheus).")
    mig_strategy: Literal["none", "single", "mixed"] = Field("single", description="How MIG slices are advertised (the chart's mig.strategy).")
    node_feature_discovery: bool = Field(True, description="Deploy NFD; only one NFD may run in the cluster.")


class NetworkOperatorConfig(ChartConfig):
    namespace: DnsLabel = chart_namespace("nvidia-network-operator")
    version: Annotated[ExactVersion, _leading_v(False), Field(description="Chart version without a leading v.")] = "24.10.1"
    repository: ChartRepository = chart_repository(NVIDIA_HELM_REPO)
    node_feature_discovery: bool = Field(False, description="Deploy NFD; off because the GPU operator runs one.")
    rdma_shared_device_plugin_image: Annotated[str, AfterValidator(_check_image_repository_path)] = Field(
        "ghcr.io/mellanox/k8s-rdma-shared-dev-plugin",
        description="<registry>/<repository>/<image> without a tag (the tag is rdmaSharedDevicePluginVersion).",
    )
    rdma_shared_device_plugin_version: ImageTag = Field("v1.5.2", description="Tag of the RDMA shared device plugin image.")
    rdma_resource_name: Annotated[str, AfterValidator(_check_rdma_resource_name)] = Field(
        "rdma_shared_device_a", description="Resource exposed as rdma/<name>."
    )
    rdma_hca_max: int = Field(63, ge=1, description="Pods that may share one RDMA device (the plugin's rdmaHcaMax).")
    rdma_if_names: list[InterfaceName] = Field(default_factory=list, description="NIC names for the RDMA selector (all Mellanox NICs when empty).")
    doca_driver_version: Optional[ImageTag] = Field(
        None, description="Deploy NVIDIA's DOCA/OFED driver container at this version (e.g. 24.10-0.7.0.0-0); unset: host MOFED."
    )


class MariadbOperatorConfig(ChartConfig):
    namespace: DnsLabel = chart_namespace("mariadb-operator")
    version: Annotated[ExactVersion, _leading_v(False)] = Field(
        "0.29.0", description="0.29.0 serves the k8s.mariadb.com/v1alpha1 API soperator 1.14.10 is built against."
    )
    repository: ChartRepository = Field(
        "https://helm.mariadb.com/mariadb-operator",
        description="Helm repo URL, OCI prefix (oci://ghcr.io/mariadb-operator/charts publishes 26.6.0 and later) or local directory.",
    )
    crds_chart: bool = Field(
        False, description="Install the separate mariadb-operator-crds chart first (charts 0.31+); 0.29 ships its CRDs in the main chart."
    )


class CertManagerConfig(ChartConfig):
    install: bool = Field(
        False,
        description="Installed on its own when the Slurm operator's chart has webhooks (soperator 4.x, Slinky) unless set "
        "to false here (it is already there); soperator 1.14.10 and ACK need none. Set true for your own Certificates.",
    )
    namespace: DnsLabel = chart_namespace("cert-manager")
    version: Annotated[ExactVersion, _leading_v(True)] = Field("v1.16.2", description="Chart version with a leading v.")
    repository: ChartRepository = chart_repository("https://charts.jetstack.io")


class KueueConfig(ChartConfig):
    """Kueue beside Slurm for Kubernetes-native GPU jobs: the tenants' kueueCells become ClusterQueue quotas."""

    enabled: bool = Field(
        False,
        description="Render Kueue's queues from the tenants: a ResourceFlavor and Topology per GPU pool, a ClusterQueue per "
        "tenant in one cohort, a LocalQueue in each tenant namespace, WorkloadPriorityClasses slurm-prod/test/oppo.",
    )
    install: bool = Field(True, description="With enabled: declare the Helm release; false when Kueue is already installed.")
    namespace: DnsLabel = chart_namespace("kueue-system")
    version: Annotated[ExactVersion, _leading_v(False)] = Field("0.19.2", description="Chart version without a leading v.")
    repository: ChartRepository = chart_repository("oci://registry.k8s.io/kueue/charts")


class OperatorsConfig(Model):
    """The Helm charts of the operators, each pinned, each installed by this stack or (install: false) by someone else."""

    gpu_operator: GpuOperatorConfig = Field(
        GpuOperatorConfig(), description="NVIDIA GPU operator: driver, toolkit, device plugin, DCGM exporter, NFD."
    )
    network_operator: NetworkOperatorConfig = Field(
        NetworkOperatorConfig(), description="NVIDIA Network operator and its NicClusterPolicy (RDMA shared device plugin)."
    )
    soperator: SoperatorConfig = Field(SoperatorConfig(), description="Nebius soperator and its CRDs chart (slurmOperator: soperator).")
    mariadb_operator: MariadbOperatorConfig = Field(MariadbOperatorConfig(), description="MariaDB operator, installed only when accounting uses it.")
    cert_manager: CertManagerConfig = Field(CertManagerConfig(), description="cert-manager, for the webhooks of soperator 4.x and Slinky.")
    ack_slurm_operator: AckSlurmOperatorConfig = AckSlurmOperatorConfig()
    slinky: SlinkyOperatorConfig = SlinkyOperatorConfig()
    kueue: KueueConfig = KueueConfig()


def release_number(version: str) -> tuple[int, ...]:
    """The numbers of an exact chart version (v25.3.1 -> (25, 3, 1)), pre-release and build ignored."""
    core = version.lstrip("v").split("-", 1)[0].split("+", 1)[0]
    return tuple(int(part) for part in core.split("."))


def gpu_device_problems(gpu: GpuOperatorConfig) -> Iterator[Problem]:
    """The GPU operator hands a container the GPUs the device plugin allocated and no others: a toolkit with
    CVE-2025-23266 fixed, the device plugin's list by CDI, and NVIDIA_VISIBLE_DEVICES ignored from unprivileged
    containers; `values` may not undo either (the chart's lists are replaced, not merged)."""
    if release_number(gpu.version) < release_number(FIXED_TOOLKIT_GPU_OPERATOR):
        yield Problem(
            ("operators", "gpuOperator", "version"),
            f"ships a container toolkit older than 1.17.8, with which a container becomes root on its node (CVE-2025-23266); "
            f"{FIXED_TOOLKIT_GPU_OPERATOR} is the first with 1.17.8 (NVIDIA upgrades one major release at a time: "
            f"docs/operations.md)",
            gpu.version,
            (GpuOperatorConfig.model_fields["version"].default,),
        )
    values = gpu.values

    def section(key: str) -> dict[str, Any]:
        return values[key] if isinstance(values.get(key), dict) else {}

    if section("cdi").get("enabled") is False:
        yield Problem(
            ("operators", "gpuOperator", "values", "cdi", "enabled"),
            "is false: the device plugin would pass GPUs by NVIDIA_VISIBLE_DEVICES, which a pod can set itself",
            False,
            (True,),
        )
    toolkit_env = section("toolkit").get("env")
    kept = toolkit_env if isinstance(toolkit_env, list) else []
    if toolkit_env is not None and not all(entry in kept for entry in GPU_TOOLKIT_ENV):
        yield Problem(
            ("operators", "gpuOperator", "values", "toolkit", "env"),
            f"replaces the program's toolkit env without {GPU_TOOLKIT_ENV[0]['name']}=false: a pod's "
            f"NVIDIA_VISIBLE_DEVICES=all would reach every GPU on its node",
            toolkit_env,
            ([*kept, *GPU_TOOLKIT_ENV],),
        )
    plugin_env = section("devicePlugin").get("env")
    plugin_env = plugin_env if isinstance(plugin_env, list) else []
    if any(isinstance(entry, dict) and entry.get("name") == "DEVICE_LIST_STRATEGY" for entry in plugin_env):
        yield Problem(
            ("operators", "gpuOperator", "values", "devicePlugin", "env"),
            "sets DEVICE_LIST_STRATEGY, which replaces the CDI lists the operator configures (cdi-annotations,cdi-cri): "
            "envvar lets a pod pick GPUs, volume-mounts leaves GPU pods without GPUs (nvidia is not the default runtime)",
            plugin_env,
            ([entry for entry in plugin_env if not (isinstance(entry, dict) and entry.get("name") == "DEVICE_LIST_STRATEGY")],),
        )


def chart_problems(config: PlatformConfig) -> Iterator[Problem]:
    ops = config.operators
    if ops.gpu_operator.install:
        yield from gpu_device_problems(ops.gpu_operator)
    if (
        ops.gpu_operator.install
        and ops.network_operator.install
        and ops.gpu_operator.node_feature_discovery
        and ops.network_operator.node_feature_discovery
    ):
        yield Problem(
            ("operators", "networkOperator", "nodeFeatureDiscovery"),
            "is true while gpuOperator.nodeFeatureDiscovery is true too; only one Node Feature Discovery may run in the cluster",
            True,
        )

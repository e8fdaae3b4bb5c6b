"""Node pools: the machines, their GPUs and labels."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any, Literal, Optional

from pydantic import Field

from .fields import DnsLabel, DnsSubdomain, GpuProduct, GpuType, LabelValue, Model, NodeCpu, NodeMemory, Problem, QualifiedName, duplicates, matching

if TYPE_CHECKING:
    from .platform import PlatformConfig

# ---------------------------------------------------------------------------
# Node pools


class Taint(Model):
    key: QualifiedName = Field(..., description="Taint key: a qualified name such as nvidia.com/gpu.")
    value: Optional[LabelValue] = Field(None, description="Taint value; none when unset.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = Field(
        "NoSchedule", description="What the taint does to pods that do not tolerate it."
    )


CapacityType = Literal["on-demand", "spot", "reserved"]


class KarpenterConfig(Model):
    """A Karpenter `karpenter.sh/v1` NodePool provisioning this pool's nodes."""

    node_class_group: DnsSubdomain = Field("karpenter.k8s.aws", description="nodeClassRef.group")
    node_class_kind: Annotated[
        str, matching(r"^[A-Z][A-Za-z0-9]*$", "a Kubernetes kind: an upper-case letter, then letters and digits, e.g. EC2NodeClass")
    ] = Field("EC2NodeClass", description="nodeClassRef.kind")
    node_class_name: DnsSubdomain = Field("default", description="nodeClassRef.name")
    instance_types: list[LabelValue] = Field(default_factory=list, description="node.kubernetes.io/instance-type values.")
    capacity_types: list[CapacityType] = Field(
        default_factory=lambda: list[CapacityType](["on-demand"]), description="karpenter.sh/capacity-type values the NodePool may launch."
    )


class NodePoolConfig(Model):
    name: DnsLabel = Field(..., description="The pool's name: its Slurm partition, NodeSet or worker group, and cells name it.")
    selector: dict[QualifiedName, LabelValue] = Field(
        ...,
        min_length=1,
        description="Node labels that select this pool, e.g. {worker.fptcloud/pool: h100}: each pair of pools must select a "
        "label key both name with different values (or differ in gpuProduct where one selects nvidia.com/gpu.product), "
        "so that no node matches two pools.",
    )
    gpu_product: Optional[GpuProduct] = Field(None, description="nvidia.com/gpu.product label value, e.g. NVIDIA-H100-80GB-HBM3.")
    gpu_type: Optional[GpuType] = Field(
        None,
        description="Slurm GRES type of the pool's GPUs (users ask --gres=gpu:<type>:<n>): a lower-case part of one word of "
        "gpuProduct, since Slurm's AutoDetect keeps a configured type only when it is a substring of the name it detects "
        "(NVIDIA H100 80GB HBM3 -> nvidia_h100_80gb_hbm3) and drains a node whose type matches none. Default: the model "
        "word of gpuProduct (NVIDIA-H100-80GB-HBM3 -> h100); without gpuProduct the GPUs are untyped (gpu:<n>).",
    )
    gpus_per_node: int = Field(0, ge=0, le=16, description="GPUs per node; 0 makes this a no-gpu (system) pool.")
    cpu_per_node: NodeCpu = Field(..., description="Allocatable CPU per node.")
    memory_per_node: NodeMemory = Field(..., description="Allocatable memory per node.")
    node_count: int = Field(..., ge=0, description="Nodes in the pool (capacity used by policies).")
    rdma: bool = Field(False, description="Nodes have RDMA/InfiniBand NICs (enables the NicClusterPolicy).")
    topology_labels: list[QualifiedName] = Field(
        default_factory=list,
        description="Node labels of the pool's network topology, outermost first (e.g. a block, then a rack label); "
        "Kueue's Topology adds kubernetes.io/hostname below them.",
    )
    taints: list[Taint] = Field(default_factory=list, description="Taints the pool's nodes carry.")
    label_existing_nodes: list[DnsSubdomain] = Field(
        default_factory=list, description="Existing node names to label with `selector` (NodePatch, labels only)."
    )
    karpenter: Optional[KarpenterConfig] = Field(None, description="Provision the pool with a Karpenter NodePool.")
    kueue_node_labels: dict[QualifiedName, LabelValue] = Field(
        default_factory=dict,
        description="Labels on the pool's Kueue nodes (its nodeCount - slurmWorkers nodes that are not Slurm workers, e.g. a node "
        "group of their own) and on none of its Slurm nodes, e.g. {worker.fptcloud/scheduler: kueue}: Kueue's ResourceFlavor "
        "selects only those nodes and the Slurm workers never go there. Needed where a pool holds both Slurm workers and kueueCells.",
    )
    slurm_workers: Optional[int] = Field(
        None,
        ge=0,
        description="Slurm workers on this GPU pool (soperator 4.x NodeSet, ACK worker group or Slinky NodeSet replicas); "
        "default: nodeCount. soperator 1.14.10 has one worker group: slurm.worker.size.",
    )

    @property
    def has_gpu(self) -> bool:
        return self.gpus_per_node > 0

    @property
    def slurm_gpu_type(self) -> Optional[str]:
        """The GRES type Slurm's node lines give the pool's GPUs: gpuType, else derived from gpuProduct; None: untyped."""
        if self.gpu_type or not self.gpu_product:
            return self.gpu_type
        return default_gpu_type(self.gpu_product)

    @property
    def worker_replicas(self) -> int:
        return self.node_count if self.slurm_workers is None else self.slurm_workers

    @property
    def kueue_node_count(self) -> int:
        """Its nodes that are not Slurm workers: Kueue's."""
        return self.node_count - self.worker_replicas


# Words of an nvidia.com/gpu.product value that name the maker or a product line, not the model.
GPU_VENDOR_WORDS = ("nvidia", "tesla", "geforce", "quadro", "rtx", "shared")


def gpu_product_words(product: str) -> list[str]:
    """The model words of a gpu.product label value, lower case: NVIDIA-H100-80GB-HBM3 -> h100, 80gb, hbm3. The label
    joins the words of NVML's model name with '-' (spaces and dashes alike), and Slurm's AutoDetect name lower-cases
    that model name with spaces as '_' (nvidia_h100_80gb_hbm3): a part of one word is a substring of it either way."""
    return [word for word in product.lower().split("-") if word and word not in GPU_VENDOR_WORDS]


def default_gpu_type(product: str) -> Optional[str]:
    """The model word of a gpu.product value (its first word with a digit): NVIDIA-H100-80GB-HBM3 -> h100, NVIDIA-L40S -> l40s."""
    words = [word for word in gpu_product_words(product) if word.isascii() and word.isalnum()]
    return next((word for word in words if any(c.isdigit() for c in word)), words[0] if words else None)


def default_pools() -> list[NodePoolConfig]:
    return [
        NodePoolConfig(
            name="gpu",
            selector={"worker.fptcloud/pool": "gpu"},
            gpu_product="NVIDIA-H100-80GB-HBM3",
            gpus_per_node=8,
            cpu_per_node="112",
            memory_per_node="1250Gi",
            node_count=8,
            rdma=True,
            taints=[Taint(key="nvidia.com/gpu", effect="NoSchedule")],
        ),
        NodePoolConfig(name="system", selector={"worker.fptcloud/pool": "system"}, cpu_per_node="16", memory_per_node="64Gi", node_count=3),
    ]


def node_pool_problems(config: PlatformConfig) -> Iterator[Problem]:
    for index, name in duplicates([pool.name for pool in config.node_pools]):
        yield Problem(("nodePools", index, "name"), "must be unique among nodePools", name)
    nodes = [(i, j, node) for i, pool in enumerate(config.node_pools) for j, node in enumerate(pool.label_existing_nodes)]
    seen: set[str] = set()
    for i, j, node in nodes:
        if node in seen:
            yield Problem(("nodePools", i, "labelExistingNodes", j), "names a node another entry already labels", node)
        seen.add(node)
    if not config.gpu_pools:
        yield Problem(("nodePools",), "at least one pool needs gpusPerNode > 0 to host Slurm workers")
    for index, pool in enumerate(config.node_pools):
        yield from _gpu_type_problems(("nodePools", index, "gpuType"), pool)
    yield from _overlap_problems(config.node_pools)


GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"


def known_labels(pool: NodePoolConfig) -> dict[str, str]:
    """The labels every node of `pool` carries: its selector, and the GPU product label NVIDIA's feature
    discovery puts on each GPU node (gpuProduct), which a selector of another pool may name."""
    return {**({GPU_PRODUCT_LABEL: pool.gpu_product} if pool.gpu_product else {}), **pool.selector}


def separate(first: dict[str, str], second: dict[str, str]) -> bool:
    """Whether no node can carry both label sets: a key both name with different values (selectors are equality maps)."""
    return any(key in second and second[key] != value for key, value in first.items())


def _overlap_problems(pools: list[NodePoolConfig]) -> Iterator[Problem]:
    """Every thing that schedules onto a pool (its Slurm workers, Kueue's ResourceFlavor, the system pods) selects
    within the pool's selector, and nodeCount counts its nodes: two pools that can match one node let each take the
    other's nodes and count them twice."""
    for j, later in enumerate(pools):
        for i, earlier in enumerate(pools[:j]):
            first, second = known_labels(earlier), known_labels(later)
            if separate(first, second):
                continue
            # A key of one pool, set on the other with another value, separates them (its nodes labelled to match);
            # never the GPU product label, whose value is the GPU's, not ours to choose.
            only_later = [key for key in later.selector if key not in first and key != GPU_PRODUCT_LABEL]
            only_earlier = [key for key in earlier.selector if key not in second and key != GPU_PRODUCT_LABEL]
            if only_later:
                index, pool, key = i, earlier, only_later[0]
            elif only_earlier:
                index, pool, key = j, later, only_earlier[0]
            else:
                index, pool = j, later
                key = next((key for key in later.selector if key != GPU_PRODUCT_LABEL), next(iter(later.selector)))
            other = second if index == i else first
            value = pool.name if pool.name != other.get(key) else f"{pool.name}-nodes"
            yield Problem(
                ("nodePools", index, "selector", key),
                f"nodePools[{i}] ({earlier.name}, nodes labelled {_labels(first)}) and nodePools[{j}] ({later.name}, "
                f"nodes labelled {_labels(second)}) can match the same node: no label key is in both with different values, "
                "so the Slurm workers or Kueue's flavor of one can take the other's nodes, and nodeCount counts them twice; "
                f"label {pool.name}'s nodes {key}={value} and select them by it",
                fix=(value,),
            )


def _labels(labels: dict[str, str]) -> str:
    return ", ".join(f"{key}={value}" for key, value in labels.items())


def _gpu_type_problems(path: tuple[Any, ...], pool: NodePoolConfig) -> Iterator[Problem]:
    """A configured GRES type must be one Slurm's AutoDetect keeps: a substring of the name it detects."""
    if pool.gpu_type is None:
        return
    if not pool.has_gpu:
        yield Problem(path, "is for GPU pools (gpusPerNode > 0)", pool.gpu_type)
    elif not pool.gpu_product:
        yield Problem(path, "needs gpuProduct (the nodes' nvidia.com/gpu.product label value) to be checked against", pool.gpu_type)
    elif not any(pool.gpu_type in word for word in gpu_product_words(pool.gpu_product)):
        detected = "nvidia_" + "_".join(gpu_product_words(pool.gpu_product))
        yield Problem(
            path,
            f"is not part of one word of gpuProduct {pool.gpu_product} ({', '.join(gpu_product_words(pool.gpu_product))}): Slurm's "
            f"AutoDetect keeps a type only when it is a substring of the name it detects (here about {detected}) and "
            "drains a node whose type matches none; use one of those words, or leave gpuType unset for the default "
            f"{default_gpu_type(pool.gpu_product)}",
            pool.gpu_type,
        )

"""The whole stack: one model over every concern."""

from __future__ import annotations

from typing import Annotated, Literal, Optional

from pydantic import Field, PrivateAttr
from slurm_rules.slurm_release import SlurmRelease, release_in_image_tag

from .charts import OperatorsConfig
from .cloud import DEFAULT_CLOUD, Cloud
from .cluster import ClusterConfig, KubernetesConfig
from .fields import Model, matching
from .ldap import LdapConfig
from .monitoring import MonitoringConfig
from .network import NetworkPoliciesConfig
from .pools import NodePoolConfig, default_pools
from .quota import RegionQuotaConfig
from .slurm import PartitionConfig, SlurmConfig, SlurmOperatorKind
from .slurm_operators import SLURM_OPERATORS, settings_of
from .storage import StorageConfig
from .tenants import TenantConfig

# ---------------------------------------------------------------------------
# The whole stack


STACK_NAME_MAX = 30  # a tenant stack's name goes into its tenants Job's name (63 characters at most)


class TenantStackConfig(Model):
    platform: Annotated[str, matching(r"^[A-Za-z0-9_.-]+$", "a stack name: letters, digits, '_', '.' and '-', e.g. prod-hanoi")] = Field(
        description="The platform stack, whose Pulumi.<stack>.yaml lies beside this stack's."
    )


class PlatformConfig(Model):
    tenant_stack: Optional[TenantStackConfig] = Field(
        None,
        description="Set only in a tenant stack (docs/tenants.md, Platform and tenant stacks), whose file sets nothing but this, "
        "`tenants` and `kubernetes`: its tenants' namespaces, queues and Slurm accounts, beside the platform stack that deploys "
        "the rest, whose file it reads. Unset: a platform stack (or a stack on its own). Every stack of a cluster validates the "
        "whole cluster, every stack's tenants together, before it registers anything.",
    )
    environment: Literal["local", "dev", "staging", "prod"] = Field("dev", description="Environment tier.")
    slurm_operator: SlurmOperatorKind = Field(
        "soperator",
        description="The Slurm operator: soperator (version: operators.soperator.version), ack (Alibaba ack-slurm-operator, "
        "API: operators.ackSlurmOperator.apiGeneration) or slinky (SchedMD slurm-operator, operators.slinky.version).",
    )
    region: Annotated[str, matching(r"^[a-z0-9-]+$", "lower-case letters, digits and -, e.g. hanoi or cn-hangzhou")] = Field(
        "local", description="Cloud region, e.g. hanoi, hcm, cn-hangzhou."
    )
    cloud: Cloud = Field(
        DEFAULT_CLOUD,
        description="The cloud whose load balancers serve the stack: its private-LB annotation is the one that counts "
        "(fpt: OpenStack's openstack-internal-load-balancer; alibaba: alibaba-cloud-loadbalancer-address-type). "
        "Unset: inferred where the config leaves no doubt (slurmOperator ack, storage kind alibabaNas, a region "
        "such as cn-hangzhou or hanoi, a cloud's own load-balancer annotation), else fpt.",
    )
    region_quota: Optional[RegionQuotaConfig] = Field(
        None,
        description="The cloud account's quota in `region`, from the cloud console: `make schema` writes it into the policy "
        "pack's config (policies/config/<stack>.json), whose slurm-region-quota compares what the stack asks with it. "
        "Required in prod; unset elsewhere, the policy reports that no quota is declared.",
    )
    cluster: ClusterConfig = ClusterConfig()
    kubernetes: KubernetesConfig = KubernetesConfig()
    node_pools: list[NodePoolConfig] = Field(
        default_factory=default_pools,
        min_length=1,
        description="The cluster's node pools: GPU pools for Slurm workers (and Kueue), and no-GPU system pools.",
    )
    operators: OperatorsConfig = OperatorsConfig()
    storage: StorageConfig = StorageConfig()
    ldap: LdapConfig = LdapConfig()
    network_policies: NetworkPoliciesConfig = NetworkPoliciesConfig()
    monitoring: MonitoringConfig = MonitoringConfig()
    slurm: SlurmConfig = SlurmConfig()
    tenants: list[TenantConfig] = Field(
        default_factory=list,
        description="Teams sharing the GPU pools with guarantees, priorities and preemption (soperator 4.1.7, ack or slinky; needs accounting).",
    )

    @property
    def gpu_pools(self) -> list[NodePoolConfig]:
        return [pool for pool in self.node_pools if pool.has_gpu]

    @property
    def partitions(self) -> list[PartitionConfig]:
        """The Slurm partitions to render: slurm.partitions, and with tenants but the default
        partitions, one more per GPU pool (named after it) so jobs can ask for the pool of a cell."""
        declared = list(self.slurm.partitions)
        if not self.tenants or "partitions" in self.slurm.model_fields_set:
            return declared
        taken = {p.name for p in declared}
        return declared + [PartitionConfig(name=pool.name, pools=[pool.name]) for pool in self.gpu_pools if pool.name not in taken]

    @property
    def slurm_gpus(self) -> int:
        """The GPUs of every Slurm worker: what tenants' cells and borrowing share."""
        return sum(pool.gpus_per_node * pool.worker_replicas for pool in self.gpu_pools)

    @property
    def slurm_release(self) -> SlurmRelease:
        """The Slurm release of the images the stack deploys: from the tag soperator or Slinky pins (or the
        one configured), or ACK's slurm.ack.slurmRelease (bring-your-own images)."""
        _, text = settings_of(self).slurm_release_source(self)
        return release_in_image_tag(text)

    @property
    def has_rdma(self) -> bool:
        return any(pool.rdma for pool in self.gpu_pools)

    @property
    def uses_jail(self) -> bool:
        """jail-pvc and controller-spool-pvc are soperator's; ACK and Slinky pods have their own root FS."""
        return bool(settings_of(self).USES_JAIL)

    @property
    def switched_from(self) -> Optional[SlurmOperatorKind]:
        """The operator an acknowledged switch left, whose data the stack keeps (slurm.operatorSwitch)."""
        switch = self.slurm.operator_switch
        return switch.from_operator if switch and switch.acknowledged and switch.from_operator != self.slurm_operator else None

    @property
    def keeps_jail(self) -> bool:
        """The jail and spool claims are declared: the operator mounts them, or they are kept from the one before."""
        return self.uses_jail or bool(self.switched_from and SLURM_OPERATORS[self.switched_from].USES_JAIL)

    @property
    def jail_is_static(self) -> bool:
        return self.storage.jail.static_nfs is not None

    _secret_keys: frozenset[str] = PrivateAttr(default_factory=frozenset)
    # The tenant stack of each tenant a tenant stack lists (components/config/stacks.py); the platform's own are not here.
    _tenant_stacks: dict[str, str] = PrivateAttr(default_factory=dict)
    _stack: str = PrivateAttr(default="")

    def stack_of(self, tenant: str) -> Optional[str]:
        """The tenant stack that lists `tenant`; None for the platform stack's own."""
        return self._tenant_stacks.get(tenant)

    @property
    def role(self) -> Literal["platform", "tenants"]:
        return "tenants" if self.tenant_stack else "platform"

    @property
    def platform_stack(self) -> Optional[str]:
        return self.tenant_stack.platform if self.tenant_stack else None

    @property
    def own_tenants(self) -> list[TenantConfig]:
        """The tenants whose namespace objects, queues and accounts this stack declares; `tenants` is the whole cluster's."""
        mine = self._stack if self.role == "tenants" else None
        return [t for t in self.tenants if self.stack_of(t.name) == mine]

    @property
    def shares_tenants(self) -> bool:
        """Tenant stacks declare some of the cluster's tenants (this one among them, or beside this platform stack)."""
        return self.role == "tenants" or bool(self._tenant_stacks)

    @property
    def stack(self) -> str:
        """The stack this config was loaded for (a tenant stack's objects are named apart by it)."""
        return self._stack

    _cloud_origin: str = PrivateAttr(default="set")

    @property
    def cloud_origin(self) -> str:
        """Where `cloud` came from: set, inferred from <keys>, or default (components/config/cloud.py)."""
        return self._cloud_origin

    @property
    def render_only(self) -> bool:
        """Manifests go to a directory: there is no cluster to read, await or import from."""
        return self.kubernetes.render_yaml_to_directory is not None

    @property
    def adopted_objects(self) -> list[str]:
        """Config keys of the objects this stack imports instead of creating."""
        storage = self.storage
        adopted = [
            key for key, on in (("storage.jail.adopt", storage.jail.adopt), ("storage.controllerSpool.adopt", storage.controller_spool.adopt)) if on
        ]
        adopted += [f"storage.submounts[{i}].adopt" for i, sub in enumerate(storage.submounts) if sub.adopt]
        if self.slurm.adopt_munge_secret:
            adopted.append("slurm.adoptMungeSecret")
        return adopted

    @property
    def worker_rdma(self) -> int:
        """RDMA devices each worker asks for: explicit, else 1 exactly when a GPU pool has RDMA."""
        rdma = self.slurm.worker.slurmd.rdma
        return (1 if self.has_rdma else 0) if rdma is None else rdma

    @property
    def secret_keys(self) -> frozenset[str]:
        """Top-level keys set with `pulumi config set --secret` (everything under them is secret)."""
        return self._secret_keys

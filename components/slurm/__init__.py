"""The Slurm operators, one module of pure renderers each, all of the same shape:

    soperator1  soperator 1.14.10 (FPT's chart): workers inside the SlurmCluster
    soperator4  soperator 4.1.7: SlurmCluster + one NodeSet per GPU pool
    (soperator  what both soperator releases share: neither imports the other)
    ack         Alibaba ack-slurm-operator (both SlurmCluster API generations)
    slinky      SchedMD slurm-operator (Slinky) 1.2.1

Each module is config in, plain manifests out (see `SlurmOperator`). `resolve`
chooses the module once per program and renders it once (`SlurmPlan`); the
platform hands each component its part: the `SlurmCluster` component
(components/slurm_cluster.py) declares whatever the chosen module renders,
`Operators` installs its charts, monitoring and the network policies take its pod
roles and accounting client. A fifth operator is one more module here plus its
entry in `operator_module`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional, Protocol

from ..config import NodePoolConfig, PlatformConfig
from ..config.charts import CertManagerConfig
from ..rendered import ReadyWhen as ReadyWhen  # re-exported: the operator modules name it beside Rendered
from ..rendered import Rendered


@dataclass(frozen=True)
class KeySecret:
    """A Secret holding one random key (munge.py's `generated_key`), e.g. Slinky's auth keys."""

    role: str
    name: str
    namespace: str
    key: str
    length: int
    # The key's keeper: bump it to replace the key (the munge rotation for auth keys).
    rotation: int = 0
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class AccountingClient:
    """How a pod beside the cluster reaches slurmdbd and slurmctld as a Slurm client (the tenants'
    Job: sacctmgr for accounts, scontrol for the reservations of their cells)."""

    image: str  # a Slurm image of this operator's with sacctmgr and scontrol (and munged for munge auth)
    slurmdbd_host: str  # the Service the operator gives slurmdbd
    slurmctld_host: str  # ... and slurmctld
    auth: str  # slurm.conf AuthType: auth/munge, or auth/slurm with the cluster's slurm.key
    key_secret: str  # the Secret holding the munge key or slurm.key
    key: str
    # slurm.conf's SlurmUser and its UID in `image`: PrivateData hides nothing from it (the Slurm exporter runs as it),
    # and a client restricts the credential of some RPCs (scontrol ping) to it, so a client's slurm.conf names it.
    slurm_user: str
    slurm_uid: int
    # The Slurm node feature each GPU pool's workers carry, by pool (None: every node is the pool's): what a
    # reservation of the pool's nodes names (`Features=`).
    node_features: tuple[tuple[str, Optional[str]], ...]
    # munged's own image, run beside sacctmgr, where the Slurm image has no munged (soperator's).
    munge_image: Optional[str] = None

    def node_feature(self, pool: str) -> Optional[str]:
        return dict(self.node_features)[pool]


def node_features(config: PlatformConfig, feature: Callable[[NodePoolConfig], Optional[str]]) -> tuple[tuple[str, Optional[str]], ...]:
    """`AccountingClient.node_features` from an operator's `pool_feature`."""
    return tuple((pool.name, feature(pool)) for pool in config.gpu_pools)


Selector = dict[str, Any]  # a Kubernetes LabelSelector: matchLabels and/or matchExpressions


@dataclass(frozen=True)
class PodRoles:
    """The pods the operator runs, by what they do: LabelSelectors over the labels the operator puts on
    them (or ours, in templates it copies). The network policies' allow-lists are built on these."""

    controller: Selector  # slurmctld
    workers: Selector  # slurmd, every worker group
    login: Selector  # sshd: users' srun, sbatch, salloc
    accounting: Optional[Selector] = None  # slurmdbd (None: no accounting)
    rest: Optional[Selector] = None  # slurmrestd (None: not run)
    database: Optional[Selector] = None  # the MariaDB operator's accounting database (None: external or none)
    exporter: Optional[Selector] = None  # the operator's own Slurm exporter (None: not run)
    # Namespaces whose operator controller calls slurmrestd.
    rest_client_namespaces: tuple[str, ...] = ()


class SlurmOperator(Protocol):
    """What every operator module provides (module-level names)."""

    OPERATOR: str  # name and version, for humans
    # The platform's munge Secret `<cluster>-munge` (key munge.key) is mounted/used.
    USES_MUNGE: bool
    # soperator 1.14.10 leaves removed workers in slurmctld: warn on scale-down (removed_workers_warning).
    GHOST_NODES_ON_SCALE_DOWN: bool

    def chart_releases(self, config: PlatformConfig, after: tuple[str, ...]) -> list[Any]: ...
    def needs_cert_manager(self, config: PlatformConfig) -> bool: ...
    def render(self, config: PlatformConfig) -> list[Rendered]: ...
    def key_secrets(self, config: PlatformConfig) -> list[KeySecret]: ...
    def worker_nodes(self, config: PlatformConfig) -> list[str]: ...
    def removed_workers_warning(self, config: PlatformConfig, previous_workers: Optional[list[str]]) -> Optional[str]: ...
    def login_service_name(self, config: PlatformConfig) -> str: ...
    # The Service whose live state gives the login address (declared, or the operator's read back); None: config gives it.
    def live_login_service(self, config: PlatformConfig) -> Optional[str]: ...
    def login_endpoint(self, config: PlatformConfig, live_service: Optional[dict[str, Any]]) -> Optional[str]: ...
    # Root's (the administrators', sshRootPublicKeys); user_ssh_command: a researcher's, as themselves (None: no researchers' logins).
    def ssh_command(self, config: PlatformConfig, live_service: Optional[dict[str, Any]]) -> str: ...
    def user_ssh_command(self, config: PlatformConfig, live_service: Optional[dict[str, Any]]) -> Optional[str]: ...
    def service_names(self, config: PlatformConfig) -> dict[str, str]: ...
    # The operator's own words when its cluster resource is not ready; None when it is (or has no status).
    def not_ready_message(self, config: PlatformConfig, status: Optional[dict[str, Any]]) -> Optional[str]: ...
    def accounting_client(self, config: PlatformConfig) -> AccountingClient: ...
    # The Slurm node feature the workers of a GPU pool carry (None: one worker group, every node).
    def pool_feature(self, config: PlatformConfig, pool: NodePoolConfig) -> Optional[str]: ...
    def pod_roles(self, config: PlatformConfig) -> PodRoles: ...


def operator_module(config: PlatformConfig) -> SlurmOperator:
    """The module the stack config chooses: `resolve`'s one call (tests and tools may ask it directly)."""
    from . import ack, slinky, soperator1, soperator4

    if config.slurm_operator == "soperator":
        return {"1.14.10": soperator1, "4.1.7": soperator4}[config.operators.soperator.version]
    return {"ack": ack, "slinky": slinky}[config.slurm_operator]


@dataclass(frozen=True)
class SlurmPlan:
    """What the chosen operator produces for one config, resolved once (`resolve`): the platform hands each
    component the part it reads (the pod roles, the accounting client, the rendered objects) instead of each
    choosing the operator and rendering again. `module` answers what needs live state (the login endpoint)."""

    module: SlurmOperator
    rendered: tuple[Rendered, ...]
    key_secrets: tuple[KeySecret, ...]
    pod_roles: PodRoles
    accounting_client: AccountingClient
    # Its webhooks take cert-manager's certificates (installs_cert_manager).
    needs_cert_manager: bool
    # The namespaces of the operator's own chart releases (its webhooks' certificates live there).
    chart_namespaces: tuple[str, ...]

    @property
    def priority_class_names(self) -> tuple[str, ...]:
        """The PriorityClasses it renders (the Slurm pods'), in order; none for soperator 1.14.10."""
        return tuple(r.manifest["metadata"]["name"] for r in self.rendered if r.manifest["kind"] == "PriorityClass")


def resolve(config: PlatformConfig) -> SlurmPlan:
    """The operator the config chooses, and all it renders for that config: once per program."""
    module = operator_module(config)
    return SlurmPlan(
        module=module,
        rendered=tuple(module.render(config)),
        key_secrets=tuple(module.key_secrets(config)),
        pod_roles=module.pod_roles(config),
        accounting_client=module.accounting_client(config),
        needs_cert_manager=module.needs_cert_manager(config),
        chart_namespaces=tuple(dict.fromkeys(release.namespace for release in module.chart_releases(config, ()))),
    )


def installs_cert_manager(cert_manager: CertManagerConfig, needed: bool) -> bool:
    """Asked for (`cert_manager`, operators.certManager), or `needed` by the Slurm operator's webhooks
    (SlurmPlan.needs_cert_manager) and not declared present (install: false)."""
    if "install" in cert_manager.model_fields_set:
        return cert_manager.install
    return needed


def manifest_of(rendered: list[Rendered], kind: str, role: Optional[str] = None) -> list[dict[str, Any]]:
    """The manifests of one kind (and role), for tests and policies."""
    return [r.manifest for r in rendered if r.manifest["kind"] == kind and (role is None or r.role == role)]


def uses_munge(operator: Optional[str]) -> bool:
    """Whether any release of the named operator mounts the platform's munge Secret (None: no operator)."""
    from . import ack, slinky, soperator1, soperator4

    modules = {"soperator": (soperator1, soperator4), "ack": (ack,), "slinky": (slinky,)}
    return any(module.USES_MUNGE for module in modules.get(operator or "", ()))

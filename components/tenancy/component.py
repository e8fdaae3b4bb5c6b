"""The `Tenants` component: declares `objects.render`, each object after exactly what it needs."""

from __future__ import annotations

from typing import Optional

import pulumi

from ..config import PlatformConfig
from ..declare import declare_each, secret_fields
from ..rendered import RUNNING_SLURM, namespace_key
from ..slurm import AccountingClient
from .objects import render, summary


class Tenants(pulumi.ComponentResource):
    """Declares `render(config, client)` (`client`: how the accounts Job reaches the operator's Slurm) with
    declare_each: each object waits for exactly what its `after` names (a namespace's quotas, limit range and Role
    for the namespace, the Job for its script and for `slurm`, the custom resources running the slurmdbd it talks to).
    Nothing waits for every tenant: the cost of a preview grows with the tenants, not their square."""

    def __init__(
        self,
        name: str,
        config: PlatformConfig,
        client: AccountingClient,
        slurm: list[pulumi.Resource],
        opts: Optional[pulumi.ResourceOptions] = None,
    ):
        super().__init__("slurm-platform:tenancy:Tenants", name, None, opts)
        objects = render(config, client)
        # Built from the tenants and the cluster's Slurm config: secret when either key is.
        declared = declare_each(
            name, objects, self, opts, {RUNNING_SLURM: slurm}, lambda manifest: secret_fields(config, manifest, ("tenants", "slurm"))
        )
        # Each tenant's namespace, for what other components declare in it (its LocalQueue, its NetworkPolicies).
        self.namespaces: dict[str, pulumi.Resource] = {
            tenant.name: declared[namespace_key(tenant.name)] for tenant in config.own_tenants if tenant.namespace
        }
        self.summary = pulumi.Output.from_input(summary(config))
        self.register_outputs({"tenants": self.summary})

"""The `Tenants` component: declares `objects.render`, each object after exactly what it needs."""

from __future__ import annotations

from typing import Optional

import pulumi

from ..config import PlatformConfig
from ..declare import declare, secret_fields
from ..resources import child_opts
from ..slurm import AccountingClient
from .job import script_name
from .objects import render, summary


class Tenants(pulumi.ComponentResource):
    """Declares `render(config, client)` (`client`: how the accounts Job reaches the operator's Slurm). Each object waits for exactly what it needs first: a namespace's quotas, limit
    range and Role for the namespace, the Job for its script and for `slurm` (the custom resources running the
    slurmdbd it talks to). Nothing waits for every tenant: the cost of a preview grows with the tenants, not their square."""

    def __init__(
        self,
        name: str,
        config: PlatformConfig,
        client: AccountingClient,
        slurm: list[pulumi.Resource],
        opts: Optional[pulumi.ResourceOptions] = None,
    ):
        super().__init__("slurm-platform:tenancy:Tenants", name, None, opts)
        declared: dict[tuple[str, str], pulumi.Resource] = {}
        for rendered in render(config, client):
            manifest = rendered.manifest
            in_namespace = ("Namespace", manifest["metadata"].get("namespace", ""))
            needs = {
                "ResourceQuota": in_namespace,
                "LimitRange": in_namespace,
                "Role": in_namespace,
                "RoleBinding": in_namespace,
                "Job": ("ConfigMap", script_name(config)),
            }
            after = declared.get(needs.get(manifest["kind"], ("", "")))
            waits_for = [*([after] if after else []), *(slurm if manifest["kind"] == "Job" else [])]
            keep = {"protect": True, "retain_on_delete": True} if rendered.keep else {}
            # Built from the tenants and the cluster's Slurm config: secret when either key is.
            fields = secret_fields(config, manifest, ("tenants", "slurm"))
            resource = declare(f"{name}-{rendered.role}", fields, child_opts(self, opts, depends_on=waits_for or None, **keep))
            declared[(manifest["kind"], manifest["metadata"]["name"])] = resource
        # Each tenant's namespace, for what other components declare in it (its LocalQueue, its NetworkPolicies).
        self.namespaces: dict[str, pulumi.Resource] = {
            tenant.name: declared[("Namespace", tenant.name)] for tenant in config.own_tenants if tenant.namespace
        }
        self.summary = pulumi.Output.from_input(summary(config))
        self.register_outputs({"tenants": self.summary})

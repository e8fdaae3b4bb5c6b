"""Rules across fields, each reported at the exact key path it is about; each concern's own rules live beside its models."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from slurm_rules import slurm_options
from slurm_rules.slurm_release import unknown_release

from .charts import chart_problems
from .fields import Problem, gib_text, plain_number, quantity_value
from .identity import identity_problems
from .network import network_policy_problems
from .platform import PlatformConfig
from .pools import node_pool_problems
from .quota import quota_problems
from .slurm import login_problems, partition_problems
from .slurm_operators import settings_of
from .storage import storage_problems
from .tenants import tenant_problems

# ---------------------------------------------------------------------------
# Rules across fields, each reported at the exact key path it is about.


def cross_field_problems(config: PlatformConfig) -> Iterator[Problem]:
    yield from node_pool_problems(config)
    yield from chart_problems(config)
    yield from settings_of(config).problems(config)
    yield from _slurm_release_problems(config)
    yield from partition_problems(config)
    yield from storage_problems(config)
    yield from _scheduling_problems(config)
    yield from _system_pod_problems(config)
    yield from _adoption_problems(config)
    yield from login_problems(config)
    yield from tenant_problems(config)
    yield from identity_problems(config)
    yield from network_policy_problems(config)
    yield from quota_problems(config)
    ldap = config.ldap
    seeded = {user for tenant in config.tenants for user in tenant.user_names}
    for user in sorted(set(ldap.display_names) - seeded):
        known = ", ".join(sorted(seeded)) or "none: no tenant lists users"
        yield Problem(("ldap", "displayNames", user), f"names a user no tenant lists (tenants[].users: {known}); add it to a tenant's users", user)
    if ldap.enabled and ldap.tls.enabled and not ldap.tls.secret_name:
        yield Problem(("ldap", "tls", "secretName"), "required when tls.enabled is true (a kubernetes.io/tls Secret with ca.crt)")
    if ldap.enabled and config.environment == "prod" and not ldap.tls.enabled:
        # sssd and nslcd send the read-only bind password on every connection.
        yield Problem(
            ("ldap", "tls", "enabled"),
            "must be true in production: the clients' bind password would cross the pod network in clear; "
            "set ldap.tls.enabled: true and ldap.tls.secretName (a kubernetes.io/tls Secret with ca.crt)",
            False,
        )
    accounting = config.slurm.accounting
    if accounting.enabled and accounting.database == "external" and accounting.external is None:
        yield Problem(("slurm", "accounting", "external"), "required when database is 'external' (host, passwordSecretName)")
    populate = config.slurm.populate_jail
    if populate.overwrite and config.jail_is_static and not populate.wipe_existing_jail_intended:
        yield Problem(
            ("slurm", "populateJail", "overwrite"),
            "is true while storage.jail.staticNfs binds an existing jail: the populate job would erase it; "
            "set slurm.populateJail.wipeExistingJailIntended: true if that is intended",
            True,
        )


def _slurm_release_problems(config: PlatformConfig) -> Iterator[Problem]:
    """The Slurm release of the images must be one the program renders for (slurm_rules/slurm_release.py), and
    the free-form slurm.conf lines of the config (slurm.ack.extraSlurmConf, slurm.partitions[].config) ones it takes."""
    path, text = settings_of(config).slurm_release_source(config)
    try:
        release = config.slurm_release
    except ValueError as error:
        yield Problem(path, f"{error}; use the image's upstream tag", text)
        return
    if reason := unknown_release(release):
        yield Problem(path, reason, text)
        return
    lines: list[tuple[tuple[Any, ...], str, str]] = [
        (("slurm", "partitions", index, "config"), f"PartitionName={partition.name} {partition.config}", partition.config)
        for index, partition in enumerate(config.slurm.partitions)
    ]
    if config.slurm_operator == "ack" and config.slurm.ack is not None:
        lines += [(("slurm", "ack", "extraSlurmConf", index), line, line) for index, line in enumerate(config.slurm.ack.extra_slurm_conf)]
    release_key = ".".join(map(str, path))
    for key_path, line, value in lines:
        if reason := slurm_options.line_objection(release, "slurm.conf", line):
            yield Problem(key_path, f"{reason} [the images' Slurm release, from {release_key}: {text}]", value)


def _adoption_problems(config: PlatformConfig) -> Iterator[Problem]:
    adopted = config.adopted_objects
    if not adopted:
        return
    first = tuple(int(p) if p.isdigit() else p for p in re.findall(r"[^.\[\]]+", adopted[0]))
    if config.render_only:
        yield Problem(
            first,
            "adoption imports live objects, but kubernetes.renderYamlToDirectory makes this a render-only stack "
            f"with no cluster to import from (adopted: {', '.join(adopted)})",
        )
    if config.cluster.create_namespace:
        yield Problem(
            first,
            "adopted objects live in an existing namespace; set cluster.createNamespace: false "
            f"(namespace {config.cluster.namespace!r}; adopted: {', '.join(adopted)})",
        )
    if config.slurm.adopt_munge_secret and config.slurm.munge_key_rotation:
        yield Problem(
            ("slurm", "mungeKeyRotation"),
            "slurm.adoptMungeSecret keeps the existing key, so slurm.mungeKeyRotation cannot rotate it; "
            "set adoptMungeSecret: false to let Pulumi write (and rotate) the key",
            config.slurm.munge_key_rotation,
        )


def _scheduling_problems(config: PlatformConfig) -> Iterator[Problem]:
    """Workers that could never be scheduled: checked in every environment."""
    worker = config.slurm.worker
    slurmd = ("slurm", "worker", "slurmd")
    if not config.gpu_pools:
        return
    most_gpus = max(pool.gpus_per_node for pool in config.gpu_pools)
    if worker.slurmd.gpu > most_gpus:
        yield Problem((*slurmd, "gpu"), f"is more than any GPU pool has per node ({most_gpus})", worker.slurmd.gpu)
        return
    if worker.slurmd.rdma and not config.has_rdma:
        yield Problem((*slurmd, "rdma"), "asks for RDMA devices but no GPU pool has rdma: true; set it to 0", worker.slurmd.rdma)
    cpu = quantity_value(worker.slurmd.cpu) + quantity_value(worker.munge.cpu)
    memory = quantity_value(worker.slurmd.memory) + quantity_value(worker.munge.memory)
    with_gpus = [pool for pool in config.gpu_pools if pool.gpus_per_node >= worker.slurmd.gpu]
    largest_cpu = max(quantity_value(pool.cpu_per_node) for pool in with_gpus)
    largest_memory = max(quantity_value(pool.memory_per_node) for pool in with_gpus)
    if cpu > largest_cpu:
        yield Problem(
            (*slurmd, "cpu"),
            f"plus the worker's munge container asks {plain_number(cpu)} CPU, more than any GPU pool allocates per node ({plain_number(largest_cpu)})",
            worker.slurmd.cpu,
        )
    if memory > largest_memory:
        yield Problem(
            (*slurmd, "memory"),
            f"plus the worker's munge container asks {gib_text(memory)}, more than any GPU pool allocates per node ({gib_text(largest_memory)})",
            worker.slurmd.memory,
        )
    fitting = [pool for pool in with_gpus if quantity_value(pool.cpu_per_node) >= cpu and quantity_value(pool.memory_per_node) >= memory]
    capacity = sum(pool.node_count for pool in fitting)
    # Only soperator 1.14.10 sizes workers with slurm.worker.size; the others size them per pool.
    workers_in_cr = settings_of(config).workers_sized_by_worker_size(config)
    if fitting and workers_in_cr and worker.size > capacity:
        pools = ", ".join(f"{pool.name}: {pool.node_count}" for pool in fitting)
        yield Problem(
            ("slurm", "worker", "size"),
            f"is more than the {capacity} GPU node(s) that can host a worker ({pools}); soperator runs one worker per node",
            worker.size,
        )


def _system_pod_problems(config: PlatformConfig) -> Iterator[Problem]:
    """Controller, login, accounting and exporter pods run on the no-gpu pools (the GPU pools when there are none)."""
    slurm = config.slurm
    pools = [pool for pool in config.node_pools if not pool.has_gpu] or config.gpu_pools
    if not pools:
        return
    largest_cpu = max(quantity_value(pool.cpu_per_node) for pool in pools)
    largest_memory = max(quantity_value(pool.memory_per_node) for pool in pools)
    pods = [("controller", "slurmctld", slurm.controller.slurmctld, slurm.controller.munge), ("login", "sshd", slurm.login.sshd, slurm.login.munge)]
    if slurm.accounting.enabled:
        pods.append(("accounting", "slurmdbd", slurm.accounting.slurmdbd, slurm.accounting.munge))
    if slurm.exporter.enabled:
        pods.append(("exporter", "resources", slurm.exporter.resources, slurm.exporter.munge))
    for kind, container, main, munge in pods:
        cpu = quantity_value(main.cpu) + quantity_value(munge.cpu)
        memory = quantity_value(main.memory) + quantity_value(munge.memory)
        if cpu > largest_cpu:
            yield Problem(
                ("slurm", kind, container, "cpu"),
                f"plus its munge container asks {plain_number(cpu)} CPU, more than any node of the pools it runs on allocates ({plain_number(largest_cpu)})",
                main.cpu,
            )
        if memory > largest_memory:
            yield Problem(
                ("slurm", kind, container, "memory"),
                f"plus its munge container asks {gib_text(memory)}, more than any node of the pools it runs on allocates ({gib_text(largest_memory)})",
                main.memory,
            )

"""Names and numbers the program uses in more than one place, defined once: Slurm's ports, and the objects one
component declares and another finds by name. Pure, and the bottom of the program: it imports nothing of it."""

from __future__ import annotations

from typing import Optional

from slurm_rules.kube_rules import LABEL_VALUE_MAX

# Slurm's daemons (their upstream defaults, which every operator keeps), sshd and MariaDB.
SLURMCTLD_PORT = 6817
SLURMD_PORT = 6818
SLURMDBD_PORT = 6819
SLURMRESTD_PORT = 6820
SSHD_PORT = 22
MARIADB_PORT = 3306

# soperator's own login Service, and ours that only `slurm.login.allowedSourceRanges` reach (it replaces it for users).
SOPERATOR_LOGIN_SERVICE_SUFFIX = "-login-svc"
RESTRICTED_LOGIN_SERVICE_SUFFIX = "-login-ssh"
LOGIN_SERVICE_SUFFIXES = (SOPERATOR_LOGIN_SERVICE_SUFFIX, RESTRICTED_LOGIN_SERVICE_SUFFIX)


def soperator_login_service_name(cluster: str) -> str:
    return cluster + SOPERATOR_LOGIN_SERVICE_SUFFIX


def restricted_login_service_name(cluster: str) -> str:
    return cluster + RESTRICTED_LOGIN_SERVICE_SUFFIX


# The tenants' reservations are named `cells.<pool>.<tenant>` (a pool name has no dot), a tenant stack's
# `cells.<stack>.<pool>.<tenant>`: each stack's Job keeps (and deletes) its own alone.
RESERVATION_PREFIX = "cells."


def reservation_prefix(stack: Optional[str]) -> str:
    """`cells.`, and `cells.<stack>.` for a tenant stack's tenants."""
    return RESERVATION_PREFIX + (f"{stack}." if stack else "")


def reservation_name(stack: Optional[str], pool: str, tenant: str) -> str:
    return f"{reservation_prefix(stack)}{pool}.{tenant}"


def tenants_config_map(cluster: str, tenant_stack: Optional[str]) -> str:
    """The tenants Job's ConfigMap: `<cluster>-tenants`, a tenant stack's `<cluster>-tenants-<stack>` (each stack runs its own)."""
    return f"{cluster}-tenants" + (f"-{tenant_stack}" if tenant_stack else "")


def tenants_job(cluster: str, tenant_stack: Optional[str], tenants_hash: str) -> str:
    """`<cluster>-tenants[-<stack>]-<hash>`, the cluster part cut to fit: a Job's name is its pods' `job-name` label."""
    suffix = tenants_config_map("", tenant_stack) + f"-{tenants_hash}"
    return cluster[: LABEL_VALUE_MAX - len(suffix)].rstrip("-") + suffix

"""A corpus of realistic wrong stack configs, one mistake each, run the way
`pulumi up` runs them: the stack config in PULUMI_CONFIG (structured keys as
JSON text), read by the real `__main__.py` under mocks. Each must end in a
clear error naming the key path, with nothing registered and no traceback;
the example stacks must go through the same path cleanly.
"""

from __future__ import annotations

import copy
import json
import re
import runpy
from typing import Any, Optional

import pulumi
import pytest

from components.config import CLUSTER_NAME_MAX, ConfigError, parse_config, quantity_value
from tests.harness import ROOT, example_stacks, run_under_mocks, stack_config

PROJECT = "slurm-platform"
BASE = "dev"  # a valid stack every mistake is made in
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHke7B5+kGXx/Dwr76NI5KxfAAEkqcxbh6/8SV7tnpUP x@example.com"
EXTERNAL_DB = {"host": "db.example.internal", "passwordSecretName": "slurm-db"}


def _set(tree: Any, dotted: str, value: Any) -> None:
    """Set `a.b[0].c` in nested dicts/lists, creating dicts on the way."""
    parts = [int(p) if p.isdigit() else p for p in re.findall(r"[^.\[\]]+", dotted)]
    for part, following in zip(parts, parts[1:], strict=False):
        tree = tree[part] if isinstance(part, int) else tree.setdefault(part, [] if isinstance(following, int) else {})
    tree[parts[-1]] = value


def mistake(changes: dict[str, Any], base: str = BASE) -> dict[str, Any]:
    raw = copy.deepcopy(stack_config(base))
    for dotted, value in changes.items():
        _set(raw, dotted, value)
    return raw


def tenants(*entries: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """Tenants on soperator 4.1.7 (1.14.10, the base's, cannot carry them), plus further changes."""
    return {"operators.soperator.version": "4.1.7", "tenants": list(entries), **changes}


def tenant(name: str = "team-a", **fields: Any) -> dict[str, Any]:
    return {"name": name, "users": ["alice"], "cells": [{"pool": "gpu", "gpusPerCell": 8, "cells": 1}], **fields}


def submounts(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"storage.submounts": list(entries)}


def pool(**fields: Any) -> dict[str, Any]:
    base = {
        "name": "gpu",
        "selector": {"worker.fptcloud/pool": "gpu"},
        "gpusPerNode": 8,
        "cpuPerNode": "112",
        "memoryPerNode": "1250Gi",
        "nodeCount": 2,
        "rdma": True,
    }
    return {**base, **fields}


# (id, changes to the base stack, the key path the error must name)
CORPUS: list[tuple[str, dict[str, Any], str]] = [
    # structured keys set as plain text (`pulumi config set storage '{jail: ...}'`)
    ("storage-not-json", {"storage": "{jail: {size: 100Gi}}"}, "storage"),
    ("node-pools-not-json", {"nodePools": "gpu,system"}, "nodePools"),
    ("slurm-broken-json", {"slurm": '{"worker": {"size": 2}'}, "slurm"),
    ("operators-json-scalar", {"operators": "42"}, "operators"),
    ("cluster-json-list", {"cluster": '["fpt-hpc"]'}, "cluster"),
    # Kubernetes name rules for everything that becomes a name, label or selector
    ("cluster-name-uppercase", {"cluster.name": "Fpt-HPC"}, "cluster.name"),
    ("cluster-name-starts-with-digit", {"cluster.name": "1hpc"}, "cluster.name"),
    ("cluster-name-too-long-for-login-svc", {"cluster.name": "a" * (CLUSTER_NAME_MAX + 1)}, "cluster.name"),
    ("cluster-name-trailing-dash", {"cluster.name": "hpc-"}, "cluster.name"),
    ("cluster-name-confusable", {"cluster.name": "f\u0440t-hpc"}, "cluster.name"),
    ("namespace-underscore", {"cluster.namespace": "fpt_hpc"}, "cluster.namespace"),
    ("namespace-too-long", {"cluster.namespace": "n" * 64}, "cluster.namespace"),
    ("pool-name-uppercase", {"nodePools[0].name": "GPU"}, "nodePools[0].name"),
    (
        "selector-key-two-slashes",
        {"nodePools[0].selector": {"worker.fptcloud/pool/x": "gpu"}},
        'nodePools[0].selector["worker.fptcloud/pool/x"] (the key)',
    ),
    ("selector-key-leading-dash", {"nodePools[0].selector": {"-pool": "gpu"}}, "nodePools[0].selector.-pool (the key)"),
    ("selector-value-space", {"nodePools[0].selector": {"worker.fptcloud/pool": "gpu h100"}}, 'nodePools[0].selector["worker.fptcloud/pool"]'),
    ("selector-value-too-long", {"nodePools[0].selector": {"pool": "g" * 64}}, "nodePools[0].selector.pool"),
    ("selector-empty", {"nodePools[0].selector": {}}, "nodePools[0].selector"),
    ("taint-key-empty", {"nodePools[0].taints[0].key": ""}, "nodePools[0].taints[0].key"),
    ("taint-key-empty-name", {"nodePools[0].taints[0].key": "nvidia.com/"}, "nodePools[0].taints[0].key"),
    ("taint-value-space", {"nodePools[0].taints[0].value": "a b"}, "nodePools[0].taints[0].value"),
    ("taint-effect", {"nodePools[0].taints[0].effect": "NoScheduleX"}, "nodePools[0].taints[0].effect"),
    ("gpu-product-space", {"nodePools[0].gpuProduct": "NVIDIA H100"}, "nodePools[0].gpuProduct"),
    ("node-name-underscore", {"nodePools[1].labelExistingNodes": ["system_0"]}, "nodePools[1].labelExistingNodes[0]"),
    (
        "node-labelled-twice",
        {"nodePools[0].labelExistingNodes": ["n1"], "nodePools[1].labelExistingNodes": ["n1"]},
        "nodePools[1].labelExistingNodes[0]",
    ),
    ("karpenter-instance-type", {"nodePools[0].karpenter": {"instanceTypes": ["p5 48xlarge"]}}, "nodePools[0].karpenter.instanceTypes[0]"),
    ("storage-class-name", {"storage.storageClass.name": "Slurm_NFS"}, "storage.storageClass.name"),
    ("ldap-tls-secret-name", {"ldap.tls": {"enabled": True, "secretName": "LDAP TLS"}}, "ldap.tls.secretName"),
    (
        "db-secret-name",
        {"slurm.accounting": {"database": "external", "external": {**EXTERNAL_DB, "passwordSecretName": "db_secret"}}},
        "slurm.accounting.external.passwordSecretName",
    ),
    (
        "db-secret-key",
        {"slurm.accounting": {"database": "external", "external": {**EXTERNAL_DB, "passwordSecretKey": "../pw"}}},
        "slurm.accounting.external.passwordSecretKey",
    ),
    ("annotation-key-space", {"slurm.login.serviceAnnotations": {"bad key": "x"}}, 'slurm.login.serviceAnnotations["bad key"] (the key)'),
    ("submount-name-uppercase", submounts({"name": "Data", "mountPath": "/mnt/data"}), "storage.submounts[0].name"),
    ("rdma-resource-name", {"operators.networkOperator.rdmaResourceName": "rdma/a"}, "operators.networkOperator.rdmaResourceName"),
    ("operator-namespace", {"operators.gpuOperator.namespace": "GPU"}, "operators.gpuOperator.namespace"),
    # image references the code splits or composes
    (
        "rdma-image-no-registry",
        {"operators.networkOperator.rdmaSharedDevicePluginImage": "k8s-rdma-shared-dev-plugin"},
        "operators.networkOperator.rdmaSharedDevicePluginImage",
    ),
    (
        "rdma-image-with-tag",
        {"operators.networkOperator.rdmaSharedDevicePluginImage": "ghcr.io/mellanox/k8s-rdma-shared-dev-plugin:v1.5.2"},
        "operators.networkOperator.rdmaSharedDevicePluginImage",
    ),
    ("image-registry-with-tag", {"slurm.images.registry": "cr.example.com/soperator:1.0"}, "slurm.images.registry"),
    ("image-tag-space", {"slurm.images.tag": "1.14.10 jammy"}, "slurm.images.tag"),
    ("mariadb-image-untagged", {"slurm.images.mariadb": "mariadb"}, "slurm.images.mariadb"),
    ("ldap-image-uppercase", {"ldap.image": "docker.io/Bitnami/openldap:2.6.10"}, "ldap.image"),
    ("ldap-image-latest", {"ldap.image": "docker.io/bitnamilegacy/openldap:latest"}, "ldap.image"),
    # quantities
    ("jail-too-small", {"storage.jail.size": "20Gi"}, "storage.jail.size"),
    ("spool-zero", {"storage.controllerSpool.size": "0"}, "storage.controllerSpool.size"),
    ("spool-negative", {"storage.controllerSpool.size": "-5Gi"}, "storage.controllerSpool.size"),
    ("submount-size-gb", submounts({"name": "data", "mountPath": "/mnt/data", "size": "100GB"}), "storage.submounts[0].size"),
    ("ldap-size-space", {"ldap.storageSize": "8 Gi"}, "ldap.storageSize"),
    ("worker-spool-exponent", {"slurm.worker.spoolSize": "1e"}, "slurm.worker.spoolSize"),
    ("pool-cpu-words", {"nodePools[0].cpuPerNode": "112 cores"}, "nodePools[0].cpuPerNode"),
    ("pool-memory-bool", {"nodePools[0].memoryPerNode": True}, "nodePools[0].memoryPerNode"),
    ("slurmd-cpu-nan", {"slurm.worker.slurmd.cpu": "NaN"}, "slurm.worker.slurmd.cpu"),
    ("accounting-size-zero", {"slurm.accounting.storageSize": "0Gi"}, "slurm.accounting.storageSize"),
    ("shm-lowercase-suffix", {"slurm.worker.sharedMemorySize": "64gi"}, "slurm.worker.sharedMemorySize"),
    ("login-cpu-kilo-uppercase", {"slurm.login.sshd.cpu": "1K"}, "slurm.login.sshd.cpu"),
    # network values
    ("range-octet-300", {"slurm.login.allowedSourceRanges": ["300.1.2.3/24"]}, "slurm.login.allowedSourceRanges[0]"),
    ("range-ipv6-129", {"slurm.login.allowedSourceRanges": ["2001:db8::/129"]}, "slurm.login.allowedSourceRanges[0]"),
    ("range-hostname", {"slurm.login.allowedSourceRanges": ["office.example.com/24"]}, "slurm.login.allowedSourceRanges[0]"),
    ("range-without-prefix", {"slurm.login.allowedSourceRanges": ["10.0.0.1"]}, "slurm.login.allowedSourceRanges[0]"),
    ("range-whole-internet-host-bits", {"slurm.login.allowedSourceRanges": ["1.2.3.4/0"]}, "slurm.login.allowedSourceRanges"),
    ("range-whole-internet-halves", {"slurm.login.allowedSourceRanges": ["0.0.0.0/1", "128.0.0.0/1"]}, "slurm.login.allowedSourceRanges"),
    ("range-whole-ipv6-long-form", {"slurm.login.allowedSourceRanges": ["0:0:0:0:0:0:0:0/0"]}, "slurm.login.allowedSourceRanges"),
    ("lb-ip-hostname", {"slurm.login": {"serviceType": "LoadBalancer", "loadBalancerIp": "lb.example.com"}}, "slurm.login.loadBalancerIp"),
    ("lb-ip-with-node-port", {"slurm.login.loadBalancerIp": "203.0.113.7"}, "slurm.login.loadBalancerIp"),
    (
        "nfs-server-space",
        {"storage.storageClass": {"kind": "nfs", "name": "nfs", "nfs": {"server": "nfs server", "share": "/x"}}},
        "storage.storageClass.nfs.server",
    ),
    (
        "nfs-share-relative",
        {"storage.storageClass": {"kind": "nfs", "name": "nfs", "nfs": {"server": "10.0.0.5", "share": "export"}}},
        "storage.storageClass.nfs.share",
    ),
    (
        "db-host-space",
        {"slurm.accounting": {"database": "external", "external": {**EXTERNAL_DB, "host": "db host"}}},
        "slurm.accounting.external.host",
    ),
    # jail submounts
    ("submount-named-jail", submounts({"name": "jail", "mountPath": "/mnt/jail"}), "storage.submounts[0].name"),
    (
        "submount-mount-named-spool",
        submounts({"name": "data", "mountName": "controller-spool", "mountPath": "/mnt/d"}),
        "storage.submounts[0].mountName",
    ),
    (
        "submount-mount-names-repeat",
        submounts({"name": "a", "mountName": "data", "mountPath": "/mnt/a"}, {"name": "b", "mountName": "data", "mountPath": "/mnt/b"}),
        "storage.submounts[1].mountName",
    ),
    (
        "submount-paths-trailing-slash",
        submounts({"name": "a", "mountPath": "/mnt/data"}, {"name": "b", "mountPath": "/mnt/data/"}),
        "storage.submounts[1].mountPath",
    ),
    (
        "submount-paths-dot-dot",
        submounts({"name": "a", "mountPath": "/mnt/data"}, {"name": "b", "mountPath": "/mnt/x/../data"}),
        "storage.submounts[1].mountPath",
    ),
    ("submount-root", submounts({"name": "a", "mountPath": "/"}), "storage.submounts[0].mountPath"),
    ("submount-etc", submounts({"name": "a", "mountPath": "/etc/slurm"}), "storage.submounts[0].mountPath"),
    ("submount-proc", submounts({"name": "a", "mountPath": "/proc"}), "storage.submounts[0].mountPath"),
    ("submount-var-run", submounts({"name": "a", "mountPath": "/var/run/data"}), "storage.submounts[0].mountPath"),
    ("submount-escapes-to-usr", submounts({"name": "a", "mountPath": "/mnt/../usr/lib"}), "storage.submounts[0].mountPath"),
    ("submount-invisible-char", submounts({"name": "a", "mountPath": "/mnt/data\u200b"}), "storage.submounts[0].mountPath"),
    # scheduling that can never happen
    (
        "rdma-without-rdma-pool",
        {"nodePools[0].rdma": False, "slurm.worker.slurmd": {"cpu": "100", "memory": "1000Gi", "ephemeralStorage": "55Gi", "rdma": 1}},
        "slurm.worker.slurmd.rdma",
    ),
    ("more-workers-than-gpu-nodes", {"slurm.worker.size": 3}, "slurm.worker.size"),
    (
        "slurmd-cpu-above-allocatable",
        {"slurm.worker.slurmd": {"cpu": "120", "memory": "1000Gi", "ephemeralStorage": "55Gi"}},
        "slurm.worker.slurmd.cpu",
    ),
    (
        "slurmd-memory-above-allocatable",
        {"slurm.worker.slurmd": {"cpu": "100", "memory": "1300Gi", "ephemeralStorage": "55Gi"}},
        "slurm.worker.slurmd.memory",
    ),
    (
        "slurmd-more-gpus-than-nodes",
        {"slurm.worker.slurmd": {"cpu": "100", "memory": "1000Gi", "ephemeralStorage": "55Gi", "gpu": 16}},
        "slurm.worker.slurmd.gpu",
    ),
    (
        "no-gpu-pool",
        {"nodePools": [{"name": "cpu", "selector": {"a": "b"}, "cpuPerNode": "8", "memoryPerNode": "32Gi", "nodeCount": 1}]},
        "nodePools",
    ),
    ("pool-names-repeat", {"nodePools": [pool(), pool(rdma=False)]}, "nodePools[1].name"),
    # pinning
    ("gpu-operator-latest", {"operators.gpuOperator.version": "latest"}, "operators.gpuOperator.version"),
    ("network-operator-empty", {"operators.networkOperator.version": ""}, "operators.networkOperator.version"),
    ("network-operator-caret", {"operators.networkOperator.version": "^24.10.1"}, "operators.networkOperator.version"),
    ("mariadb-operator-range", {"operators.mariadbOperator.version": "0.x"}, "operators.mariadbOperator.version"),
    ("mariadb-operator-no-repo", {"operators.mariadbOperator.repository": ""}, "operators.mariadbOperator.repository"),
    ("cert-manager-repo-no-scheme", {"operators.certManager.repository": "charts.jetstack.io"}, "operators.certManager.repository"),
    ("soperator-repo-blank", {"operators.soperator.repository": "   "}, "operators.soperator.repository"),
    ("gpu-operator-two-parts", {"operators.gpuOperator.version": "v24.9"}, "operators.gpuOperator.version"),
    # GPUs only by the device plugin: a toolkit with CVE-2025-23266 fixed, CDI, NVIDIA_VISIBLE_DEVICES ignored unprivileged
    ("gpu-operator-cve-toolkit", {"operators.gpuOperator": {"install": True, "version": "v24.9.2"}}, "operators.gpuOperator.version"),
    (
        "gpu-operator-cdi-off",
        {"operators.gpuOperator": {"install": True, "values": {"cdi": {"enabled": False}}}},
        "operators.gpuOperator.values.cdi.enabled",
    ),
    (
        "gpu-operator-toolkit-env-replaced",
        {"operators.gpuOperator": {"install": True, "values": {"toolkit": {"env": [{"name": "CONTAINERD_SET_AS_DEFAULT", "value": "true"}]}}}},
        "operators.gpuOperator.values.toolkit.env",
    ),
    (
        "gpu-operator-envvar-device-list",
        {"operators.gpuOperator": {"install": True, "values": {"devicePlugin": {"env": [{"name": "DEVICE_LIST_STRATEGY", "value": "envvar"}]}}}},
        "operators.gpuOperator.values.devicePlugin.env",
    ),
    # exposure
    ("prod-open-load-balancer", {"environment": "prod", "slurm.login.serviceType": "LoadBalancer"}, "slurm.login.serviceType"),
    (
        "prod-internet-address-type",
        {
            "environment": "prod",
            "slurm.login": {
                "serviceType": "LoadBalancer",
                "serviceAnnotations": {"service.beta.kubernetes.io/alibaba-cloud-loadbalancer-address-type": "internet"},
            },
        },
        "slurm.login.serviceType",
    ),
    ("node-port-22", {"slurm.login.nodePort": 22}, "slurm.login.nodePort"),
    ("ssh-key-truncated", {"slurm.login.sshRootPublicKeys": ["ssh-rsa"]}, "slurm.login.sshRootPublicKeys[0]"),
    # cross-field and enums
    (
        "both-nfd",
        {"operators.gpuOperator.install": True, "operators.networkOperator": {"install": True, "nodeFeatureDiscovery": True}},
        "operators.networkOperator.nodeFeatureDiscovery",
    ),
    (
        "overwrite-static-jail",
        {"storage.jail.staticNfs": {"server": "10.0.0.5", "path": "/jail"}, "slurm.populateJail.overwrite": True},
        "slurm.populateJail.overwrite",
    ),
    ("nfs-kind-without-block", {"storage.storageClass.kind": "nfs"}, "storage.storageClass.nfs"),
    ("nfs-block-without-kind", {"storage.storageClass.nfs": {"server": "10.0.0.5", "share": "/x"}}, "storage.storageClass.nfs"),
    ("tls-without-secret", {"ldap.tls.enabled": True}, "ldap.tls.secretName"),
    ("ldap-base-dn-ldif-injection", {"ldap.baseDn": "dc=example,dc=org\ndn: cn=evil,dc=example,dc=org"}, "ldap.baseDn"),
    ("ldap-organisation-newline", {"ldap.organisation": "Example\nuserPassword: x"}, "ldap.organisation"),
    ("external-db-without-block", {"slurm.accounting.database": "external"}, "slurm.accounting.external"),
    ("environment-production", {"environment": "production"}, "environment"),
    ("region-uppercase", {"region": "Hanoi"}, "region"),
    ("nested-typo", {"storage.jial": {"size": "100Gi"}}, "storage.jial"),
    ("schedule-words", {"slurm.ncclBenchmark.schedule": "every 3h"}, "slurm.ncclBenchmark.schedule"),
    ("schedule-minute-60", {"slurm.ncclBenchmark.schedule": "60 */3 * * *"}, "slurm.ncclBenchmark.schedule"),
    ("login-above-system-pool", {"nodePools[1].cpuPerNode": "2"}, "slurm.login.sshd.cpu"),
    (
        "controller-memory-above-system-pool",
        {"slurm.controller.slurmctld": {"cpu": "1", "memory": "200Gi", "ephemeralStorage": "20Gi"}},
        "slurm.controller.slurmctld.memory",
    ),
    ("login-size-zero", {"slurm.login.size": 0}, "slurm.login.size"),
    ("cgroup-v3", {"slurm.worker.cgroupVersion": "v3"}, "slurm.worker.cgroupVersion"),
    # tenants: the HiveD lab's virtual clusters
    ("tenants-on-soperator-1", {"tenants": [tenant()]}, "tenants"),
    ("tenants-without-accounting", tenants(tenant(), **{"slurm.accounting.enabled": False}), "slurm.accounting.enabled"),
    ("tenant-name-twice", tenants(tenant(), tenant()), "tenants[1].name"),
    ("tenant-name-uppercase", tenants(tenant("Team-A")), "tenants[0].name"),
    ("tenant-name-is-an-oppo-account", tenants(tenant(), tenant("team-a-oppo")), "tenants[1].name"),
    ("tenant-unknown-pool", tenants(tenant(cells=[{"pool": "a100", "gpusPerCell": 8, "cells": 1}])), "tenants[0].cells[0].pool"),
    ("tenant-cpu-pool", tenants(tenant(cells=[{"pool": "system", "gpusPerCell": 1, "cells": 1}])), "tenants[0].cells[0].pool"),
    (
        "tenant-cell-above-node-not-whole-nodes",
        tenants(tenant(cells=[{"pool": "gpu", "gpusPerCell": 12, "cells": 1}])),
        "tenants[0].cells[0].gpusPerCell",
    ),
    ("tenant-cells-zero", tenants(tenant(cells=[{"pool": "gpu", "gpusPerCell": 8, "cells": 0}])), "tenants[0].cells[0].cells"),
    ("tenant-over-commits-pool", tenants(tenant(), tenant("team-b", cells=[{"pool": "gpu", "gpusPerCell": 4, "cells": 3}])), "tenants"),
    ("tenant-unknown-priority", tenants(tenant(priorities=["crit"])), "tenants[0].priorities[0]"),
    ("tenant-oppo-only", tenants(tenant(priorities=["oppo"])), "tenants[0].priorities"),
    ("tenant-user-twice", tenants(tenant(users=["alice", "bob", "alice"])), "tenants[0].users[2]"),
    ("kueue-without-tenants", {"operators.kueue.enabled": True}, "operators.kueue.enabled"),
    ("tenant-kueue-cells-without-kueue", tenants(tenant(kueueCells=[{"pool": "gpu", "gpusPerCell": 8, "cells": 1}])), "tenants[0].kueueCells"),
    ("tenant-borrows-more-than-exists", tenants(tenant(borrowingCap=100000)), "tenants[0].borrowingCap"),
    ("tenant-name-too-long-for-its-group", tenants(tenant("team-" + "a" * 30), **{"ldap.enabled": True}), "tenants[0].name"),
    ("tenant-name-not-a-group-name", tenants(tenant("1team"), **{"ldap.enabled": True}), "tenants[0].name"),
    (
        "tenant-partition-sets-its-own-accounts",
        tenants(tenant(), **{"slurm.partitions": [{"name": "main", "default": True, "config": "State=UP allowaccounts=team-a"}]}),
        "slurm.partitions[0].config",
    ),
    ("tenant-cap-without-oppo", tenants(tenant(priorities=["prod"], borrowingCap=8)), "tenants[0].borrowingCap"),
    ("tenant-user-uppercase", tenants(tenant(users=["Alice"])), "tenants[0].users[0]"),
    ("tenant-user-name-uppercase", tenants(tenant(users=[{"name": "Alice"}])), "tenants[0].users[0].name"),
    (
        "tenant-user-key-short-rsa",
        tenants(tenant(users=[{"name": "alice", "sshPublicKeys": [KEY, "ssh-rsa AAAAB3NzaC1yc2E x"]}])),
        "tenants[0].users[0].sshPublicKeys[1]",
    ),
    ("tenant-user-key-field-typo", tenants(tenant(users=[{"name": "alice", "sshPublicKey": [KEY]}])), "tenants[0].users[0].sshPublicKey"),
    ("tenant-user-in-two-tenants", tenants(tenant(), tenant("team-b")), "tenants[1].users[0]"),
    ("tenant-user-uid-system", tenants(tenant(users=[{"name": "alice", "uidNumber": 999}])), "tenants[0].users[0].uidNumber"),
    (
        "tenant-user-uid-twice",
        tenants(tenant(users=[{"name": "alice", "uidNumber": 5000}, {"name": "bob", "uidNumber": 5000}])),
        "tenants[0].users[1].uidNumber",
    ),
    ("tenant-gid-nobody", tenants(tenant(gidNumber=65534)), "tenants[0].gidNumber"),
    ("tenant-namespace-is-cluster", tenants(tenant("fpt-hpc", namespace=True)), "tenants[0].namespace"),
    ("tenant-namespace-kube-system", tenants(tenant("kube-system", namespace=True)), "tenants[0].namespace"),
    ("tenant-namespace-default", tenants(tenant("default", namespace=True)), "tenants[0].namespace"),
    ("tenant-namespace-is-an-operators", tenants(tenant("gpu-operator", namespace=True)), "tenants[0].namespace"),
    ("tenant-is-slurm-root-account", tenants(tenant("root")), "tenants[0].name"),
    ("tenant-user-is-slurm", tenants(tenant(users=["slurm"])), "tenants[0].users[0]"),
    ("tenant-group-is-sudo", tenants(tenant(ldapGroup="sudo")), "tenants[0].ldapGroup"),
    ("tenant-name-is-a-system-group", tenants(tenant("staff")), "tenants[0].name"),
    # strings that land in scripts, slurm.conf or commands users paste
    ("ssh-address-injection", {"slurm.login.sshAddress": "login;reboot"}, "slurm.login.sshAddress"),
    ("nccl-schedule-two-lines", {"slurm.ncclBenchmark.schedule": "0 */3 * * *\n"}, "slurm.ncclBenchmark.schedule"),
]

# Top-level keys nobody declared: only the stack's own key list reveals them.
UNKNOWN_TOP_LEVEL = [
    ("top-level-typo", {"clusterr": {"name": "x"}}, "clusterr"),
    ("top-level-invisible", {"clu\u200bster": {"name": "x"}}, "clu\\u200bster"),
    ("top-level-lower-case", {"nodepools": [{"name": "gpu"}]}, "nodepools"),
    ("top-level-zero-width-space", {"stor\u200bage": {"jail": {"size": "100Gi"}}}, "stor\\u200bage"),
]


def test_keys_of_other_namespaces_are_not_ours_and_pass(monkeypatch):
    foreign = {"kubernetes:context": "fpt-hanoi", "pulumi:tags": '{"team": "hpc"}', "random:nodepools": "x", "slurm-platformx:nodePools": "[]"}
    error, run = run_main(stack_config(BASE), monkeypatch, other_namespaces=foreign)
    assert error is None, str(error)
    assert run.resources


@pytest.mark.parametrize(
    "changes,line",
    [
        ({"nodepools": []}, "slurm-platform:nodepools: unknown key; did you mean nodePools?"),
        ({"stor\u200bage": {}}, "slurm-platform:stor\\u200bage: unknown key; did you mean storage?"),
        ({"Cluster": {}}, "slurm-platform:Cluster: unknown key; did you mean cluster?"),
        ({"storage.jial": {}}, "slurm-platform:storage.jial: unknown key; did you mean jail?"),
        ({"ldap.tls.enabeld": True}, "slurm-platform:ldap.tls.enabeld: unknown key; did you mean enabled?"),
        ({"nodePools[0].gpusPerNod": 8}, "slurm-platform:nodePools[0].gpusPerNod: unknown key; did you mean gpusPerNode?"),
        (
            {"zzz": 1},
            "slurm-platform:zzz: unknown key (allowed: cloud, cluster, environment, kubernetes, ldap, monitoring, networkPolicies, nodePools, operators, region, regionQuota, slurm,",
        ),
    ],
)
def test_an_unknown_key_names_the_closest_known_one_or_every_allowed_one(changes, line, monkeypatch):
    error, run = run_main(mistake(changes), monkeypatch)
    assert isinstance(error, pulumi.RunError)
    assert f"\n  {line}" in str(error), str(error)
    assert run.resources == []


def run_main(raw: dict[str, Any], monkeypatch, secret_keys: tuple[str, ...] = (), other_namespaces: Optional[dict[str, str]] = None):
    """`pulumi up` in miniature: the engine's PULUMI_CONFIG, then the real __main__.py under mocks.

    `other_namespaces` adds keys that are not ours (`kubernetes:context`, ...), as the engine passes them.
    Returns (the error the program raised or None, what it registered).
    """
    engine_config = {f"{PROJECT}:{k}": v if isinstance(v, str) else json.dumps(v) for k, v in raw.items()} | (other_namespaces or {})
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps(engine_config))
    monkeypatch.setenv("PULUMI_CONFIG_SECRET_KEYS", json.dumps([f"{PROJECT}:{k}" for k in secret_keys]))
    raised: list[BaseException] = []

    def program():
        # What the Python language host does before it runs the program.
        pulumi.runtime.set_all_config(pulumi.runtime.get_config_env(), pulumi.runtime.get_config_secret_keys_env())
        try:
            runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__")
        except pulumi.RunError as error:  # how __main__ reports a ConfigError: no traceback
            raised.append(error)

    run = run_under_mocks(program, {})
    return (raised[0] if raised else None), run


def test_the_corpus_is_large_and_covers_every_key_class():
    assert len(CORPUS) + len(UNKNOWN_TOP_LEVEL) >= 60
    covered = {path.split(".")[0].split("[")[0] for _, _, path in CORPUS}
    assert {"cluster", "nodePools", "operators", "storage", "ldap", "slurm", "environment", "region"} <= covered


@pytest.mark.parametrize("changes,path", [(c, p) for _, c, p in CORPUS + UNKNOWN_TOP_LEVEL], ids=[i for i, _, _ in CORPUS + UNKNOWN_TOP_LEVEL])
def test_each_mistake_is_refused_by_key_path_before_anything_is_registered(changes, path, monkeypatch):
    error, run = run_main(mistake(changes), monkeypatch)
    assert isinstance(error, pulumi.RunError), "accepted a wrong config"
    message = str(error)
    assert message.startswith("invalid stack config (")
    assert f"\n  {PROJECT}:{path}:" in message, message
    # ...and says what is wrong in words, not a placeholder.
    detail = message.split(f"\n  {PROJECT}:{path}:", 1)[1].splitlines()[0].split("; got ")[0].strip()
    assert len(detail) > 12 and not detail.startswith("None") and "XX" not in detail and not detail.isupper(), detail
    assert run.resources == [], [r.name for r in run.resources]
    assert "Traceback" not in message


# Lines a person wrote that the rendered file refuses where the program adds them (slurm_rules/config_files.py):
# (id, base stack, changes, the key path the error must name, what it must say).
RENDER_MISTAKES = [
    (
        "ack-extra-line-repeats-prolog-flags",
        "staging-hangzhou",
        {"slurm.ack.extraSlurmConf": ["MaxJobCount=5000", "prologflags=X11"]},
        "slurm.ack.extraSlurmConf[1]",
        "already has PrologFlags=Contain",
    ),
    (
        "ack-extra-line-repeats-scheduler",
        "staging-hangzhou",
        {"slurm.ack.extraSlurmConf": ["SchedulerType=sched/builtin"]},
        "slurm.ack.extraSlurmConf[0]",
        "already has SchedulerType=sched/backfill",
    ),
    (
        "ack-extra-line-repeats-a-partition",
        "staging-hangzhou",
        {"slurm.ack.extraSlurmConf": ["PartitionName=gpu Nodes=ALL"], "slurm.partitions": [{"name": "gpu", "default": True}]},
        "slurm.ack.extraSlurmConf[0]",
        "already has PartitionName=gpu",
    ),
]


@pytest.mark.parametrize("base,changes,path,said", [m[1:] for m in RENDER_MISTAKES], ids=[m[0] for m in RENDER_MISTAKES])
def test_a_line_the_rendered_file_refuses_is_a_config_error_before_anything_is_registered(base, changes, path, said, monkeypatch):
    error, run = run_main(mistake(changes, base), monkeypatch)
    assert isinstance(error, pulumi.RunError), "accepted a wrong config"
    line = next((line for line in str(error).splitlines() if line.strip().startswith(f"{PROJECT}:{path}:")), "")
    assert said in line, str(error)
    assert run.resources == [], [r.name for r in run.resources]
    assert "Traceback" not in str(error)


@pytest.mark.parametrize("stack", example_stacks())
def test_example_stacks_pass_the_same_path(stack, monkeypatch):
    error, run = run_main(stack_config(stack), monkeypatch)
    assert error is None, str(error)
    # The operator's cluster CR (soperator/ACK SlurmCluster, Slinky Controller) got as far as registration.
    clusters = [r for r in run.resources if r.type.startswith("kubernetes:") and r.type.endswith((":SlurmCluster", ":Controller"))]
    assert len(clusters) == 1, [r.type for r in run.resources]


# --- what the messages show ----------------------------------------------------------------


def error_of(raw: dict[str, Any], secret_keys: frozenset[str] = frozenset()) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(raw, secret_keys)
    return str(caught.value)


def test_long_values_are_cut_to_a_readable_length():
    message = error_of({"cluster": {"namespace": "x" * 500}})
    line = message.splitlines()[1]
    assert len(line) < 600 and "x" * 100 not in line and "(502 characters)" in line


def test_invisible_and_confusable_characters_are_shown_escaped():
    message = error_of({"cluster": {"name": "f\u0440t-hpc\u200b"}})
    assert 'got "f\\u0440t-hpc\\u200b"' in message
    assert message.isascii()
    assert 'slurm-platform:storage["ji\\u200bal"]: unknown key' in error_of({"storage": {"ji\u200bal": {}}})


def test_secret_keys_never_show_their_values():
    message = error_of({"operators": {"gpuOperator": {"version": "hunter2-latest"}}}, frozenset({"operators"}))
    assert "hunter2" not in message and "got [secret]" in message


def test_a_plain_string_for_a_structured_key_says_how_to_set_it(monkeypatch):
    error, _ = run_main({**stack_config(BASE), "storage": "{jail: {size: 100Gi}}"}, monkeypatch)
    assert "is a plain string that is not a JSON object" in str(error)
    assert "pulumi config set --stack test --path" in str(error)  # the stack under mocks: nested keys are set on it


def test_every_problem_is_reported_at_once():
    message = error_of(mistake({"cluster.name": "X", "storage.controllerSpool.size": "0", "region": "Hanoi"}))
    assert message.startswith("invalid stack config (3 problems)")


# --- one quantity parser ---------------------------------------------------------------------


QUANTITIES = [
    "100Gi",
    "1500m",
    "8",
    8,
    0.5,
    "1e3",
    "1E3",
    "+1",
    ".5",
    "5.",
    "1n",
    "1u",
    "1k",
    "1M",
    "1Ei",
    "1K",
    "1ki",
    "nan",
    "NaN",
    "Infinity",
    " 1",
    "1 ",
    "1_000",
    "1e",
    "1.2.3",
    "",
    "Gi",
    True,
    None,
    "1Gi\n",
]


@pytest.mark.parametrize("value", QUANTITIES, ids=[repr(v) for v in QUANTITIES])
def test_config_and_policies_agree_on_every_quantity(value):
    sys_path_policies = str(ROOT / "policies")
    import sys

    if sys_path_policies not in sys.path:
        sys.path.insert(0, sys_path_policies)
    from slurm_policies import quantity as policy_quantity

    try:
        expected: Any = float(quantity_value(value))
    except ValueError:
        expected = ValueError
    try:
        got: Any = policy_quantity(value)
    except ValueError:
        got = ValueError
    assert got == expected


def test_bare_yaml_numbers_are_quantities():
    raw = mistake({"nodePools[0].cpuPerNode": 112, "slurm.worker.slurmd": {"cpu": 100, "memory": "1000Gi", "ephemeralStorage": "55Gi"}})
    config = parse_config(raw)
    assert config.node_pools[0].cpu_per_node == "112" and config.slurm.worker.slurmd.cpu == "100"

"""Stack configuration: one pydantic model tree, the single source of truth.

Every key lives under the `slurm-platform:` namespace in `Pulumi.<stack>.yaml`
as a structured object (camelCase keys). Defaults follow FPT Cloud's
"Slurm on Managed GPU Cluster" guide (soperator / helm-slurm-cluster 1.14.10).

One module per concern, each with its models and the rules about them:
`fields` (types and checks), `cluster`, `pools`, `charts` (the operators' Helm
charts), `soperator`, `ack`, `slinky` (each Slurm operator's own settings and
rules), `storage`, `ldap`, `slurm`, `tenants`, and `platform` (the whole stack).
`rules` runs the rules across concerns; `parse` turns every problem into a
message naming the key path (`slurm-platform:storage.jail.size`), the bad value
and what is allowed; components/stack_config.py reads the stack from Pulumi; `schema` exports the
JSON Schema. `load_config()` validates everything before a single resource is
registered.
"""

from .ack import AckClusterConfig
from .charts import OperatorsConfig
from .fields import CLUSTER_NAME_MAX, PROJECT, PodResources, quantity_value
from .ldap import LdapConfig
from .parse import ConfigError, parse_config, refusal
from .platform import PlatformConfig
from .pools import NodePoolConfig
from .schema import json_schema
from .slurm import PartitionConfig, login_lb_annotations
from .storage import StaticNfsVolume, StorageClassConfig, platform_storage_classes
from .tenants import POSIX_NAME_PATTERN, RESERVED_POSIX_NAMES, TenantConfig, reserved_namespaces

__all__ = [
    "PROJECT",
    "CLUSTER_NAME_MAX",
    "POSIX_NAME_PATTERN",
    "RESERVED_POSIX_NAMES",
    "AckClusterConfig",
    "ConfigError",
    "LdapConfig",
    "NodePoolConfig",
    "OperatorsConfig",
    "PartitionConfig",
    "PlatformConfig",
    "PodResources",
    "StaticNfsVolume",
    "StorageClassConfig",
    "TenantConfig",
    "json_schema",
    "login_lb_annotations",
    "parse_config",
    "platform_storage_classes",
    "quantity_value",
    "refusal",
    "reserved_namespaces",
]

"""slurm-platform: Slurm on Kubernetes on a managed GPU cluster.

Thin on purpose: load and validate the stack config (nothing is registered if
it is invalid), then declare the platform and export its outputs.
"""

import pulumi

from components.config import ConfigError, load_config
from components.platform import build_platform

try:
    config = load_config()
except ConfigError as error:
    raise pulumi.RunError(str(error)) from None

for output_name, value in build_platform(config).items():
    pulumi.export(output_name, value)

"""slurm-platform: Slurm on Kubernetes on a managed GPU cluster.

Thin on purpose: load and validate the stack config (nothing is registered if
it is invalid, nor when it asks for an operator move the live stack cannot
make), then declare the platform and export its outputs.
"""

import pulumi

from components.config import ConfigError
from components.platform import build_platform
from components.stack_config import load_config
from components.stack_traces import keep_program_frames

keep_program_frames()
try:
    # build_platform also refuses an operator move the live stack cannot make (operator_moves.py).
    outputs = build_platform(load_config())
except ConfigError as error:
    raise pulumi.RunError(str(error)) from None

for output_name, value in outputs.items():
    pulumi.export(output_name, value)

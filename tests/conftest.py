import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Tests import the program's packages (components/, policies/) from the repo root,
# and the policy pack's rules as the pack itself does (`slurm_policies`, `kube_rules`).
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "policies"))

import sys
from pathlib import Path

# Tests import the program's packages (components/, policies/) from the repo root.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

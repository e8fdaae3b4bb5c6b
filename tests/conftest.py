import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Tests import the program's packages (components/, policies/) from the repo root,
# and the policy pack's rules as the pack itself does (`slurm_policies`, `kube_rules`).
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "policies"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, request):
    """A real control plane (scripts/kube-local.sh) for one kube test module, stopped by PID pass or fail."""
    from tests.kube import ClusterError, LocalCluster

    cluster = LocalCluster(tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1]))
    # Registered before starting: a half-started control plane is stopped too.
    request.addfinalizer(cluster.stop)
    try:
        cluster.start()
    except ClusterError as error:
        pytest.fail(str(error))
    return cluster

"""Shared by every tier: the import paths, the tier markers and the kube fixtures.

Tiers, by file name (`make test` runs all; `make test-fast` the unit tier):
- unit: pure builders, config, policies, the program under `pulumi.runtime.set_mocks`;
- engine: the Pulumi engine on the `local` stack (test_engine*.py; the toolchain);
- kube: the engine and CRDs against a real API server (test_kube_*.py; scripts/kube-local.sh);
- services: real Slurm, munge and OpenLDAP daemons (test_services_*.py; Debian packages).
"""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Tests import the program's packages (components/, policies/) from the repo root,
# and the policy pack's rules as the pack itself does (`slurm_policies`, `slurm_rules`).
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "policies"))


@pytest.fixture(scope="module")
def directory():
    """The dev-lab directory on a real slapd, seeded and ACL'd as rendered (tests/test_services_ldap.py start_directory):
    one per services module that asks for it."""
    import shutil

    from tests.services import require_packages
    from tests.test_services_ldap import start_directory

    require_packages()
    lab, config = start_directory("dev-lab", {})
    try:
        yield lab, config
    finally:
        lab.close()
        shutil.rmtree(lab.root)


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


TIERS = (("test_engine", "engine"), ("test_kube_", "kube"), ("test_services_", "services"))


def tier_of(module_name: str) -> str:
    return next((tier for prefix, tier in TIERS if module_name.startswith(prefix)), "unit")


def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(tier_of(item.path.name))


@pytest.fixture(scope="module")
def ws(cluster, tmp_path_factory, request):
    """The project as a workspace on the kwok stack against `cluster`, with kwok nodes shaped like its pools."""
    from tests.engine import ToolchainError
    from tests.kube import KWOK_STACK, ClusterError, kwok_workspace

    try:
        workspace = kwok_workspace(tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1]), cluster)
    except (ToolchainError, ClusterError) as error:
        pytest.fail(str(error))
    cluster.add_nodes(workspace.project / f"Pulumi.{KWOK_STACK}.yaml")
    return workspace

"""HiveD's topology guarantee on real Slurm, each operator's cluster on the newest generation of its pair
(tests/services.py, EXPERIMENTS in tests/test_services_slurm.py): two tenants each hold one
4-GPU cell on a pool of two 4-GPU nodes, so each cell is a whole node. The tenants Job reserves
a node for each (components/tenancy.py `reservations`); the other tenant's guaranteed jobs
cannot fragment it, oppo jobs borrow it and are preempted, and a new layout moves the reservations."""

from __future__ import annotations

import pytest

from components.config import parse_config
from tests.harness import stack_config
from tests.services import as_operator, operator_lab, scontrol_fields, tenants_job, wait_for
from tests.test_services_slurm import EXPERIMENTS

NODES = {"gpu-c-0": ("gpu-c", 4), "gpu-c-1": ("gpu-c", 4), "gpu-d-0": ("gpu-d", 1)}
CELL = [{"pool": "gpu-c", "gpusPerCell": 4, "cells": 1}]


def layout(**cells) -> dict:
    """dev-lab's config document with pool gpu-c as two 4-GPU nodes, and each tenant's cells as given."""
    config = stack_config("dev-lab")
    config["nodePools"] = [{**config["nodePools"][0], "gpusPerNode": 4, "nodeCount": 2}, *config["nodePools"][1:]]
    config["tenants"] = [{**t, "cells": cells[t["name"]]} for t in config["tenants"] if t["name"] in cells]
    return config


SHARED = layout(default=CELL, vc1=CELL)


def lab_config(lab, document: dict):
    """A layout as the lab's operator deploys it."""
    return parse_config(as_operator(document, lab.operator, lab.release))


@pytest.fixture(scope="module", params=EXPERIMENTS)
def lab(request):
    """Each operator's cluster on the newest generation of its pair, the tenants' first layout applied."""
    operator, release = request.param
    shared = parse_config(as_operator(SHARED, operator, release))
    # alice is in tenant default, carol in vc1 (dev-lab).
    with operator_lab(operator, shared, NODES, ["alice", "carol"], release) as started:
        applied = tenants_job(started, shared, "shared")
        assert applied.returncode == 0, applied.stdout[-2000:] + applied.stderr[-2000:]
        yield started


@pytest.fixture
def queue(lab):
    yield
    lab.run("scancel", "-u", "alice", check=False)
    lab.run("scancel", "-u", "carol", check=False)
    wait_for(lambda: not lab.run("squeue", "-h").stdout.strip(), "an empty queue", 30)


def held(lab) -> dict[str, str]:
    return {f["ReservationName"]: f["Nodes"] for f in map(scontrol_fields, lab.run("scontrol", "-o", "show", "reservation").stdout.splitlines())}


def submit(lab, user, *args) -> str:
    return lab.sbatch(user, *args).stdout.strip()


def state(lab, job) -> str:
    return lab.squeue(job)


def test_each_tenant_holds_a_whole_node_of_its_own(lab):
    reservations = held(lab)
    assert set(reservations) == {"cells.gpu-c.default", "cells.gpu-c.vc1"}
    assert sorted(reservations.values()) == ["gpu-c-0", "gpu-c-1"], reservations


def test_four_one_gpu_jobs_of_one_tenant_never_keep_the_others_four_gpu_cell_from_starting(lab, queue):
    reservations = held(lab)
    nodes = [reservations["cells.gpu-c.vc1"], reservations["cells.gpu-c.default"]] * 2
    # vc1 asks for both nodes in turn, as fragmentation over time would spread it.
    spread = [submit(lab, "carol", "-A", "vc1", "-q", "prod", "-w", node, "--gres=gpu:1", "--wrap", "sleep 300") for node in nodes]
    wait_for(lambda: [state(lab, job) for job in spread[::2]] == ["RUNNING None"] * 2, "vc1's jobs on its own node", 20)
    cell = submit(lab, "alice", "-A", "default", "-q", "prod", "--gres=gpu:4", "--wrap", "sleep 300")
    wait_for(lambda: state(lab, cell) == "RUNNING None", "default's 4-GPU job", 20)
    assert lab.squeue(cell, "%N %v") == f"{reservations['cells.gpu-c.default']} cells.gpu-c.default"
    # vc1's jobs asked onto default's node wait: that node is reserved for default (and oppo).
    assert [state(lab, job).split()[0] for job in spread[1::2]] == ["PENDING"] * 2


def test_a_tenants_jobs_without_a_node_pack_onto_its_own_node(lab, queue):
    own = held(lab)["cells.gpu-c.vc1"]
    jobs = [submit(lab, "carol", "-A", "vc1", "--gres=gpu:1", "--wrap", "sleep 300") for _ in range(4)]
    wait_for(lambda: [state(lab, job) for job in jobs] == ["RUNNING None"] * 4, "vc1's four jobs", 20)
    assert {lab.squeue(job, "%N %v") for job in jobs} == {f"{own} cells.gpu-c.vc1"}


def test_oppo_borrows_a_reserved_node_and_gives_it_back(lab, queue):
    reservations = held(lab)
    # vc1-oppo takes default's whole node while default is idle ...
    oppo = submit(lab, "carol", "-A", "vc1-oppo", "-q", "oppo", "-w", reservations["cells.gpu-c.default"], "--gres=gpu:4", "--wrap", "sleep 300")
    wait_for(lambda: state(lab, oppo) == "RUNNING None", "vc1-oppo on default's idle node", 20)
    # ... and default's cell-sized prod job requeues it at once.
    cell = submit(lab, "alice", "-A", "default", "-q", "prod", "--gres=gpu:4", "--wrap", "sleep 300")
    wait_for(lambda: state(lab, cell) == "RUNNING None", "default's 4-GPU job", 30)
    assert state(lab, oppo).startswith("PENDING")
    history = lab.run("sacct", "-n", "-X", "-D", "-P", "-j", oppo, "-o", "State").stdout.split()
    assert history[0] in ("PREEMPTED", "REQUEUED"), history


def test_the_guarantee_still_caps_a_tenant_inside_its_reservation(lab, queue):
    first = submit(lab, "alice", "-A", "default", "-q", "test", "--gres=gpu:3", "--wrap", "sleep 300")
    wait_for(lambda: state(lab, first) == "RUNNING None", "default's 3-GPU job", 20)
    # On its pool's partition: a job on every partition shows the reason of the last one checked.
    second = submit(lab, "alice", "-A", "default", "-q", "prod", "-p", "gpu-c", "--gres=gpu:2", "--wrap", "sleep 300")
    # Between scheduler passes the reason reads None, and the backfill pass may name the full node first.
    wait_for(lambda: state(lab, second) == "PENDING AssocGrpGRES", "default's 2-GPU job held by its account's GPU limit", 20)


def test_a_new_layout_moves_the_reservations_and_waits_for_a_retired_ones_jobs(lab, queue):
    """default's cell becomes two nodes (8 GPUs) and vc1 loses its cell: vc1's reservation goes first
    (once the job running in it ends), then default's grows; the first layout comes back the same way."""
    running = submit(lab, "carol", "-A", "vc1", "--gres=gpu:1", "--wrap", "sleep 12")
    wait_for(lambda: state(lab, running) == "RUNNING None", "a job in vc1's reservation", 20)
    grown = lab_config(lab, layout(default=[{"pool": "gpu-c", "gpusPerCell": 8, "cells": 1}], vc1=[{"pool": "gpu-d", "gpusPerCell": 1, "cells": 1}]))
    try:
        moved = tenants_job(lab, grown, "grown")
        assert moved.returncode == 0, moved.stdout[-2000:] + moved.stderr[-2000:]
        assert "Requested reservation is in use" in moved.stdout  # it waited for vc1's job, retrying
        assert held(lab) == {"cells.gpu-c.default": "gpu-c-[0-1]", "cells.gpu-d.vc1": "gpu-d-0"}
        whole = submit(lab, "alice", "-A", "default", "-N", "2", "--gres=gpu:4", "--wrap", "sleep 300")
        wait_for(lambda: state(lab, whole) == "RUNNING None", "default's 8-GPU cell on two nodes", 20)
    finally:
        lab.run("scancel", "-u", "alice", check=False)
        restored = tenants_job(lab, lab.config, "shared-again")
        assert restored.returncode == 0, restored.stdout[-2000:] + restored.stderr[-2000:]
    assert set(held(lab)) == {"cells.gpu-c.default", "cells.gpu-c.vc1"}

"""The preflight's pure parts: what a stack needs, read from the program under mocks, the checks on plain
objects through a fake cluster, and every way of not reaching a cluster (a FAIL line, never a traceback).
tests/test_kube_preflight.py runs every check on a real API server."""

from __future__ import annotations

import base64
import copy
import socket
from pathlib import Path
from typing import Any, Optional

import pytest
import yaml

from components.config import parse_config
from tests.harness import ROOT, stack_config
from tools.preflight import (
    CHECK_NAMES,
    Check,
    Declared,
    connect,
    guess_resource,
    kueue_node_checks,
    main,
    needs,
    node_checks,
    pool_overlap_checks,
    private_data_missing,
    read_secrets,
    run_checks,
    server_minor,
    stack_needs,
    summary_line,
    version_checks,
)
from tools.program_mocks import run_under_mocks


def needs_of(raw: dict[str, Any], stack: str) -> list[Declared]:
    return stack_needs(parse_config(raw), raw, stack).objects


def kinds(objects: list[Declared], from_chart: bool) -> set[str]:
    return {o.kind for o in objects if o.crd_from_chart == from_chart and "." in o.api_version.split("/")[0]}


def test_custom_objects_waiting_for_a_chart_of_the_stack_need_no_crd_beforehand():
    raw = stack_config("prod-hoalac")
    objects = needs_of(raw, "prod-hoalac")
    assert {"SlurmCluster", "NodeSet", "ClusterQueue", "ResourceFlavor", "Topology", "NicClusterPolicy"} <= kinds(objects, True)
    # Kueue portal-installed: the same objects now need Kueue's CRDs in the cluster.
    portal = copy.deepcopy(raw)
    portal["operators"]["kueue"]["install"] = False
    without_chart = needs_of(portal, "prod-hoalac")
    assert {"ClusterQueue", "LocalQueue", "ResourceFlavor", "Topology", "WorkloadPriorityClass"} <= kinds(without_chart, False)
    assert "SlurmCluster" in kinds(without_chart, True)


def test_acks_slurm_cluster_comes_from_no_chart_and_the_ldap_tls_secret_is_only_mounted():
    """The program reads no Secret (its keys would sit in the state); secret_checks still checks ldap-tls's keys."""
    config = parse_config(stack_config("staging-hangzhou"))
    objects = needs_of(stack_config("staging-hangzhou"), "staging-hangzhou")
    assert "SlurmCluster" in kinds(objects, False)
    assert [o for o in objects if o.read] == []
    assert [(s.namespace, s.name) for s in read_secrets(config)][:1] == [("slurm", "ldap-tls")]


def test_charts_and_adopted_claims():
    raw = copy.deepcopy(stack_config("prod-hanoi"))
    raw["storage"]["jail"]["adopt"] = True
    raw["cluster"]["createNamespace"] = False  # adopted objects live in a namespace made by hand
    config = parse_config(raw)
    found = stack_needs(config, raw, "prod-hanoi")
    assert {(r.name, r.namespace) for r in found.releases} >= {("soperator", "soperator-system"), ("gpu-operator", "gpu-operator")}
    adopted = [o.ref() for o in found.objects if o.adopted]
    assert "PersistentVolumeClaim fpt-hpc/jail-pvc" in adopted
    # Node label patches are not objects of ours.
    assert not [o for o in found.objects if o.kind == "NodePatch"]


def test_needs_skips_what_is_not_a_kubernetes_object():
    run = run_under_mocks(lambda: None)
    assert needs(run.resources).objects == []


@pytest.mark.parametrize(
    ("kind", "resource"), [("ClusterQueue", "clusterqueues"), ("Gateway", "gateways"), ("Policy", "policies"), ("Status", "statuses")]
)
def test_the_plural_is_kubernetes_own_guess(kind, resource):
    # apimachinery's UnsafeGuessKindToResource: -s takes -es, -y becomes -ies (whatever precedes it).
    expected = {"Gateway": "gatewaies"}.get(kind, resource)
    assert guess_resource(kind) == expected


def node(name: str, labels: dict[str, str], cpu: str, memory: str, gpus: str | None = None) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": memory, **({"nvidia.com/gpu": gpus} if gpus else {})}
    return {"metadata": {"name": name, "labels": labels}, "status": {"allocatable": allocatable}}


def test_node_checks_count_selected_nodes_and_their_allocatable():
    config = parse_config(stack_config("kwok"))  # gpu: 4 nodes of 8 GPUs, 112 CPU, 1250Gi; system: 2 nodes
    gpu = {"worker.fptcloud/pool": "gpu"}
    system = {"worker.fptcloud/pool": "system"}
    nodes = [node(f"g{i}", gpu, "112", "1250Gi", "8") for i in range(4)] + [node(f"s{i}", system, "32", "128Gi") for i in range(2)]
    assert all(c.passed for c in node_checks(config, nodes))

    short = copy.deepcopy(nodes)
    short[2]["status"]["allocatable"]["nvidia.com/gpu"] = "7"
    short[3]["status"]["allocatable"]["memory"] = "1000Gi"
    (gpu_check,) = [c for c in node_checks(config, short) if not c.passed]
    assert gpu_check.subject == "node pool gpu"
    assert gpu_check.problem == "nodes have less allocatable than nodePools[0] declares (g2: nvidia.com/gpu 7 < 8; g3: memory 1000Gi < 1250Gi)"

    (missing,) = [c for c in node_checks(config, nodes[1:]) if not c.passed]
    assert missing.problem == "3 nodes labelled worker.fptcloud/pool=gpu, nodePools[0].nodeCount is 4"
    assert "kubectl label node <name> worker.fptcloud/pool=gpu" in missing.fix


def test_node_checks_look_up_named_nodes():
    raw = copy.deepcopy(stack_config("kwok"))
    raw["nodePools"][1]["labelExistingNodes"] = ["s0", "s9"]
    checks = node_checks(parse_config(raw), [node("s0", {}, "32", "128Gi")])
    problems = {c.subject: c.problem for c in checks if not c.passed}
    assert problems["node pool system"] == "nodePools[1].labelExistingNodes names nodes that do not exist: s9"


# --- reaching the cluster --------------------------------------------------------------------------------


def kubeconfig(path: Path, server: str, contexts: tuple[str, ...] = ("lab",), current: str = "lab") -> Path:
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "lab", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
        "users": [{"name": "admin", "user": {"token": "abc"}}],
        "contexts": [{"name": name, "context": {"cluster": "lab", "user": "admin"}} for name in contexts],
        "current-context": current,
    }
    path.write_text(yaml.safe_dump(document))
    return path


def closed_port() -> int:
    """A local port nothing listens on: connections to it are refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_main(monkeypatch, capsys, *args: str) -> tuple[int, str]:
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    code = main(["--stack", "kwok", *args])
    out = capsys.readouterr()
    return code, out.out + out.err


def test_a_missing_kubeconfig_is_a_fail_line_naming_the_path(tmp_path, monkeypatch, capsys):
    code, out = run_main(monkeypatch, capsys, "--kubeconfig", str(tmp_path / "absent"))
    assert code == 1
    assert f"FAIL  [api-server] API server: no kubeconfig file at {tmp_path / 'absent'}; fix: pass --kubeconfig" in out
    assert "/etc/kubernetes/admin.conf" in out and "Traceback" not in out


def test_the_kubeconfig_defaults_to_kubeconfig_then_home(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'a'}:{tmp_path / 'b'}")
    _, check = connect(None, None, "kwok")
    assert check.problem == f"no kubeconfig file at {tmp_path / 'a'} or {tmp_path / 'b'}"
    monkeypatch.delenv("KUBECONFIG")
    monkeypatch.setenv("HOME", str(tmp_path))
    _, check = connect(None, None, "kwok")
    assert check.problem == f"no kubeconfig file at {tmp_path / '.kube/config'}"


def test_a_context_the_kubeconfig_lacks_is_a_fail_line_naming_what_it_has(tmp_path, monkeypatch, capsys):
    path = kubeconfig(tmp_path / "config", f"https://127.0.0.1:{closed_port()}", contexts=("lab", "prod"))
    # The kwok stack's kubernetes.context is kwok.
    code, out = run_main(monkeypatch, capsys, "--kubeconfig", str(path))
    assert code == 1 and "Traceback" not in out
    assert (
        f"FAIL  [api-server] API server: context 'kwok' (--context, else the stack's kubernetes.context) is not in kubeconfig {path}; it has lab, prod"
        in out
    )
    assert "`pulumi config set --path kubernetes.context <name> --stack kwok`" in out
    code, out = run_main(monkeypatch, capsys, "--kubeconfig", str(path), "--context", "staging")
    assert code == 1 and f"context 'staging' (--context, else the stack's kubernetes.context) is not in kubeconfig {path}" in out


def test_a_current_context_naming_no_context_is_a_fail_line(tmp_path):
    path = kubeconfig(tmp_path / "config", "https://127.0.0.1:6443", current="gone")
    cluster, check = connect(str(path), None, "dev")
    assert cluster is None and not check.passed
    assert check.problem == f"its current-context 'gone' is not in kubeconfig {path}; it has lab"
    assert "kubectl config use-context <name>" in check.fix


def test_no_context_anywhere_or_an_unreadable_kubeconfig_is_a_fail_line(tmp_path):
    path = kubeconfig(tmp_path / "config", "https://127.0.0.1:6443", current="")
    _, check = connect(str(path), None, "dev")
    assert (
        check.problem
        == f"no context to use: no --context, no kubernetes.context in the stack and no current-context in kubeconfig {path}; it has lab"
    )
    broken = tmp_path / "broken"
    broken.write_text("clusters: [\n  - name: lab\n")
    _, check = connect(str(broken), "lab", "dev")
    assert check.problem.startswith(f"kubeconfig {broken} could not be read: while parsing") and "\n" not in check.problem


def test_a_server_refusing_connections_is_a_fail_line_naming_it(tmp_path, monkeypatch, capsys):
    port = closed_port()
    path = kubeconfig(tmp_path / "config", f"https://127.0.0.1:{port}", contexts=("kwok",), current="kwok")
    code, out = run_main(monkeypatch, capsys, "--kubeconfig", str(path))
    assert code == 1 and "Traceback" not in out
    assert f"FAIL  [api-server] API server: could not reach the API server https://127.0.0.1:{port} (context 'kwok', kubeconfig {path})" in out
    assert "Connection refused" in out and "get --raw /version" in out
    assert out.rstrip().endswith("preflight kwok: 1 checks, 1 failing")


def test_an_unknown_check_to_ignore_is_an_error_listing_the_names(monkeypatch, capsys):
    with pytest.raises(SystemExit) as exit_:
        run_main(monkeypatch, capsys, "--ignore", "nodes", "--ignore", "nodez")
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"--ignore nodez: no such check; the checks are {', '.join(CHECK_NAMES)}" in err


# --- the checks, on a fake cluster ---------------------------------------------------------------------------


class FakeCluster:
    """Everything served and allowed; the nodes, Secrets and version a test gives."""

    def __init__(self, nodes: list[dict[str, Any]], secrets: dict[str, dict[str, str]], version: str = "1.31"):
        self._nodes, self._version = nodes, version
        self._secrets = {name: {"data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}} for name, data in secrets.items()}

    def nodes(self) -> list[dict[str, Any]]:
        return self._nodes

    def storage_class(self, name: str) -> Optional[dict[str, Any]]:
        return {}

    def csi_drivers(self) -> set[str]:
        return {"nfs.csi.k8s.io", "nasplugin.csi.alibabacloud.com"}

    def crds(self) -> list[dict[str, Any]]:
        return []

    def resource(self, api_version: str, kind: str) -> Optional[tuple[str, bool]]:
        return guess_resource(kind), True

    def get(self, obj: Declared) -> Optional[dict[str, Any]]:
        return self._secrets.get(obj.name) if obj.kind == "Secret" else None

    def helm_releases(self, namespace: str) -> set[str]:
        return set()

    def allowed(self, verb: str, group: str, resource: str, namespace: Optional[str]) -> tuple[bool, str]:
        return True, ""

    def version(self) -> dict[str, str]:
        major, minor = self._version.split(".")
        return {"major": major, "minor": minor, "gitVersion": f"v{self._version}.0"}


def failures(checks: list[Check]) -> dict[str, str]:
    return {c.name: f"{c.subject}: {c.problem}; fix: {c.fix}" for c in checks if c.failing}


def ack_nodes(config) -> list[dict[str, Any]]:
    return [
        node(f"{pool.name}-{i}", dict(pool.selector), "256", "4000Gi", str(pool.gpus_per_node) if pool.has_gpu else None)
        for pool in config.node_pools
        for i in range(pool.node_count)
    ]


PRIVATE = "PrivateData=accounts,jobs,reservations,usage,users"
TLS = {"tls.crt": "cert", "tls.key": "key", "ca.crt": "ca"}


def ack_run(secrets: dict[str, dict[str, str]], version: str = "1.31", ignore: tuple[str, ...] = ()) -> list[Check]:
    raw = stack_config("staging-hangzhou")  # ACK with tenants, LDAP over TLS and accounting from slurm-slurmdbd-conf
    config = parse_config(raw)
    return run_checks(config, stack_needs(config, raw, "staging-hangzhou"), FakeCluster(ack_nodes(config), secrets, version), ignore)


def test_the_secrets_the_stack_reads_hold_their_keys():
    complete = {"ldap-tls": TLS, "slurm-slurmdbd-conf": {"slurmdbd.conf": f"StorageHost=db\n{PRIVATE}\n"}}
    checks = ack_run(complete)
    assert failures(checks) == {}
    assert {c.subject for c in checks if c.name == "secrets"} == {
        "Secret slurm/ldap-tls (ldap.tls.secretName)",
        "Secret slurm/slurm-slurmdbd-conf (slurm.ack.slurmdbdConfSecretName)",
    }
    # The TLS Secret is checked with its keys, not once more as a bare reference.
    assert not [c for c in checks if c.name == "references" and "ldap-tls" in c.subject]

    no_ca = failures(ack_run({**complete, "ldap-tls": {"tls.crt": "cert", "tls.key": "key"}}))
    assert no_ca["secrets"].startswith("Secret slurm/ldap-tls (ldap.tls.secretName): has no ca.crt (it holds tls.crt, tls.key)")
    assert "--from-file=ca.crt" in no_ca["secrets"]

    missing = failures(ack_run({"ldap-tls": TLS}))
    assert missing["secrets"] == (
        "Secret slurm/slurm-slurmdbd-conf (slurm.ack.slurmdbdConfSecretName): does not exist; read by slurmdbd; fix: create it "
        "with keys slurmdbd.conf in namespace slurm, or name an existing one in slurm.ack.slurmdbdConfSecretName"
    )


def test_soperators_external_database_password_secret_holds_its_key():
    raw = stack_config("prod-hangzhou")  # soperator on ACK, accounting on RDS: passwordSecretName slurm-accounting-db
    config = parse_config(raw)
    cluster = FakeCluster(ack_nodes(config), {"ldap-tls": TLS, "slurm-accounting-db": {"username": "slurm"}})
    found = failures(run_checks(config, stack_needs(config, raw, "prod-hangzhou"), cluster))
    namespace = config.cluster.namespace
    assert found["secrets"].startswith(
        f"Secret {namespace}/slurm-accounting-db (slurm.accounting.external.passwordSecretName): has no password (it holds username); read by slurmdbd"
    )


def test_acks_slurmdbd_conf_must_keep_the_tenants_records_private():
    without = {"ldap-tls": TLS, "slurm-slurmdbd-conf": {"slurmdbd.conf": "StorageHost=db\n# PrivateData=jobs\nPrivateData=jobs,usage\n"}}
    found = failures(ack_run(without))
    assert found["sacct-privacy"] == (
        "PrivateData in slurmdbd.conf of Secret slurm/slurm-slurmdbd-conf: lacks accounts, reservations, users: with tenants, "
        "sacct and sacctmgr show each tenant the others' accounts, reservations, users; fix: add the line "
        "`PrivateData=accounts,jobs,reservations,usage,users` to slurmdbd.conf in Secret slurm/slurm-slurmdbd-conf and restart slurmdbd"
    )
    assert private_data_missing("privatedata = Users,accounts,jobs,reservations,usage") == []

    # Accepted: reported as IGNORED, named in the summary, not counted.
    checks = ack_run(without, ignore=("sacct-privacy",))
    assert failures(checks) == {}
    (ignored,) = [c for c in checks if c.ignored]
    assert ignored.line().startswith("IGNORED  [sacct-privacy] PrivateData in slurmdbd.conf")
    assert summary_line("staging-hangzhou", checks).endswith(" checks, 0 failing, 1 ignored (--ignore sacct-privacy)")


def test_the_server_version_against_what_the_stack_declares():
    secrets = {"ldap-tls": TLS, "slurm-slurmdbd-conf": {"slurmdbd.conf": PRIVATE}}
    found = failures(ack_run(secrets, version="1.29"))
    assert found["kubernetes-version"].startswith(
        "Kubernetes v1.29.0: older than 1.30 for its ValidatingAdmissionPolicy objects (admissionregistration.k8s.io/v1 is GA in 1.30)"
    )
    assert "upgrade the control plane to 1.30 or later (kubeadm: `kubeadm upgrade plan`" in found["kubernetes-version"]
    # soperator 4.1.7 (1.29), native sidecars (1.29) and admission policies (1.30), each named.
    raw = stack_config("prod-hoalac")
    config = parse_config(raw)
    objects = stack_needs(config, raw, "prod-hoalac").objects
    (old,) = version_checks(config, objects, {"major": "1", "minor": "28+", "gitVersion": "v1.28.9-eks-1"})
    assert (
        "1.29 for native sidecars in CronJob fpt-hpc/fpt-hpc-usage-report, Deployment fpt-hpc/fpt-hpc-slurm-exporter, Job fpt-hpc/fpt-hpc-tenants-"
        in old.problem
    )
    assert "1.29 for soperator 4.1.7" in old.problem
    (current,) = version_checks(config, objects, {"major": "1", "minor": "30+", "gitVersion": "v1.30.2"})
    assert current.passed and current.detail.startswith("at least 1.30 for its ValidatingAdmissionPolicy")
    assert server_minor({"major": "1", "minor": "31+"}) == (1, 31)
    # Without admission policies or sidecars, soperator 1.14.10's own floor (docs/limitations.md: >= 1.28).
    kwok = parse_config(stack_config("kwok"))
    (floor,) = version_checks(kwok, [], {"major": "1", "minor": "27", "gitVersion": "v1.27.3"})
    assert floor.problem == "older than 1.28 for soperator 1.14.10"


def test_a_node_two_pools_take_fails():
    raw = copy.deepcopy(stack_config("kwok"))
    raw["nodePools"][1]["labelExistingNodes"] = ["s0", "g0"]  # a GPU node named for the system pool
    config = parse_config(raw)
    gpu = {"worker.fptcloud/pool": "gpu"}
    nodes = [node("g0", gpu, "112", "1250Gi", "8"), node("g1", gpu, "112", "1250Gi", "8"), node("s0", {}, "32", "128Gi")]
    (check,) = pool_overlap_checks(config, nodes)
    assert check.problem == (
        "nodes match more than one pool: g0 is in gpu (nodePools[0].selector worker.fptcloud/pool=gpu) and system (nodePools[1].labelExistingNodes)"
    )
    assert "name each node in one pool's labelExistingNodes only" in check.fix
    (apart,) = pool_overlap_checks(config, nodes[1:])
    assert apart.passed and apart.detail == "each of the 2 nodes is in one pool at most"


def test_exactly_node_count_minus_slurm_workers_nodes_carry_the_kueue_labels():
    raw = copy.deepcopy(stack_config("prod-hoalac"))  # h100: 5 nodes, 4 Slurm workers, kueueNodeLabels worker.fptcloud/scheduler=kueue
    config = parse_config(raw)
    pool = {"worker.fptcloud/pool": "gpu-h100"}
    kueue = {**pool, "worker.fptcloud/scheduler": "kueue"}
    nodes = [node(f"h{i}", kueue if i >= 3 else pool, "112", "1250Gi", "8") for i in range(5)]
    (two,) = kueue_node_checks(config, nodes)
    assert two.problem == (
        "2 of its nodes carry nodePools[0].kueueNodeLabels worker.fptcloud/scheduler=kueue (h3, h4), where nodeCount - slurmWorkers is 5 - 4 = 1"
    )
    assert two.fix.startswith("remove the labels from 1 of them (`kubectl label node <name> worker.fptcloud/scheduler-`)")
    (none,) = kueue_node_checks(config, [node(f"h{i}", pool, "112", "1250Gi", "8") for i in range(5)])
    assert none.fix.startswith("label 1 more of the pool's nodes (`kubectl label node <name> worker.fptcloud/scheduler=kueue`)")
    (one,) = kueue_node_checks(config, nodes[:4])
    assert one.passed and one.detail == "1 of its nodes carry worker.fptcloud/scheduler=kueue"


def test_an_ignored_check_does_not_fail_the_command_and_the_summary_names_it(tmp_path, monkeypatch, capsys):
    raw = stack_config("staging-hangzhou")
    cluster = FakeCluster(ack_nodes(parse_config(raw)), {"ldap-tls": TLS, "slurm-slurmdbd-conf": {"slurmdbd.conf": "StorageHost=db"}})
    reached = Check("API server", "https://lab:6443 serves v1.31.0", name="api-server")
    monkeypatch.setattr("tools.preflight.connect", lambda kubeconfig, context, stack: (cluster, reached))
    monkeypatch.chdir(ROOT)
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))

    assert main(["--stack", "staging-hangzhou"]) == 1
    assert "  FAIL  [sacct-privacy] PrivateData in slurmdbd.conf of Secret slurm/slurm-slurmdbd-conf: lacks " in capsys.readouterr().out

    assert main(["--stack", "staging-hangzhou", "--ignore", "sacct-privacy"]) == 0
    out = capsys.readouterr().out
    assert "  IGNORED  [sacct-privacy] PrivateData in slurmdbd.conf" in out
    assert out.rstrip().endswith(", 0 failing, 1 ignored (--ignore sacct-privacy)")
    written = summary.read_text().split("### ")[2]
    assert written.startswith("Preflight of `staging-hangzhou`: all ") and " pass, 1 ignored (--ignore sacct-privacy)" in written
    assert "IGNORED  [sacct-privacy]" in written


def test_an_invalid_stack_is_refused_with_fix_lines_for_that_stack(tmp_path, monkeypatch, capsys):
    """The preflight reads Pulumi.<stack>.yaml itself: its fix lines must name that stack, not a placeholder."""
    (tmp_path / "Pulumi.lab.yaml").write_text("config:\n  slurm-platform:storage:\n    jail:\n      size: '500'\n")
    monkeypatch.chdir(tmp_path)
    assert main(["--stack", "lab"]) == 1
    err = capsys.readouterr().err
    assert "the stack config is invalid, nothing was checked" in err
    assert "--stack lab" in err and "<stack>" not in err

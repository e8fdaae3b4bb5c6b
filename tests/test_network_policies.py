"""components/network_policies.py: which pods each policy selects (over the labels each operator puts on
its pods, tests/network.py), that the ports are the ones the renders use, that every broad egress
excepts the metadata endpoints and the NFS servers, and the config that refuses what cannot hold.
What the policies let through, pod to pod, is simulated in tests/test_kube_network_policies.py."""

from __future__ import annotations

import copy
import ipaddress
import re
from typing import Any

import pytest

from components.config import ConfigError, parse_config
from components.identity import names, reconciler, server
from components.names import MARIADB_PORT, SLURMCTLD_PORT, SLURMD_PORT, SLURMDBD_PORT, SLURMRESTD_PORT, SSHD_PORT
from components.platform import build_platform
from components.render import network_policies
from components.slurm import ack, resolve, slinky, soperator1, soperator4
from tests.harness import run_under_mocks, stack_config
from tests.network import matches, platform_pods

# One stack per operator (and ACK's older API), each with LDAP; prod-hoalac has tenant namespaces.
OPERATOR_STACKS: dict[str, tuple[str, dict[str, Any]]] = {
    "soperator-1.14.10": ("prod-hanoi", {}),
    "soperator-4.1.7": ("prod-hoalac", {}),
    "ack-2024-12": ("staging-hangzhou", {}),
    "ack-2024-06": ("staging-hangzhou", {"operators": {"ackSlurmOperator": {"apiGeneration": "2024-06"}}}),
    "slinky-1.2.1": ("prod-hcm", {"slurm": {"slinky": {"restApi": True}}}),
}
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"


def merged(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in override.items():
        out[key] = merged(out.get(key, {}), value) if isinstance(value, dict) else value
    return out


def operator_config(operator: str):
    stack, overrides = OPERATOR_STACKS[operator]
    return parse_config(merged(stack_config(stack), overrides))


def policies_of(config) -> list[dict[str, Any]]:
    return [r.manifest for r in network_policies.render(config, resolve(config).pod_roles)]


def selecting(policies: list[dict[str, Any]], namespace: str, labels: dict[str, str], direction: str) -> list[dict[str, Any]]:
    return [
        p
        for p in policies
        if p["metadata"]["namespace"] == namespace and direction in p["spec"]["policyTypes"] and matches(p["spec"]["podSelector"], labels)
    ]


def ports_allowed_to(policies: list[dict[str, Any]], namespace: str, labels: dict[str, str]) -> set[Any]:
    """The TCP ports some ingress rule opens to the pod ("all" for a rule without ports)."""
    found: set[Any] = set()
    for p in selecting(policies, namespace, labels, "Ingress"):
        for rule in p["spec"].get("ingress", []):
            found |= {port["port"] for port in rule["ports"]} if "ports" in rule else {"all"}
    return found


@pytest.mark.parametrize("operator", list(OPERATOR_STACKS))
def test_every_pod_is_isolated_both_ways_and_each_slurm_daemon_is_open_on_its_port(operator):
    config = operator_config(operator)
    policies, namespace = policies_of(config), config.cluster.namespace
    pods = platform_pods(config)
    roles = {pod.role for pod in pods}
    assert {"controller", "worker", "ldap"} <= roles, roles
    for pod in pods:
        for direction in ("Ingress", "Egress"):
            deny = [p for p in selecting(policies, namespace, pod.labels, direction) if p["metadata"]["name"] == "default-deny"]
            assert deny, (operator, pod.role, direction)
    expected: dict[str, set[Any]] = {
        "controller": {SLURMCTLD_PORT},
        "worker": {"all"},
        "login": {SSHD_PORT},
        "slurmdbd": {SLURMDBD_PORT},
        "slurmrestd": {SLURMRESTD_PORT},
        "mariadb": {MARIADB_PORT},
        "ldap": {names.CONTAINER_LDAP_PORT, names.CONTAINER_LDAPS_PORT},
    }
    if config.slurm_operator == "ack":
        # The head pod runs slurmdbd too in the 2024-06 API; SSH reaches the login Deployment, not the head.
        expected["controller"] |= {SLURMDBD_PORT} if "slurmdbd" not in roles else set()
        assert SSHD_PORT not in ports_allowed_to(policies, namespace, next(p for p in pods if p.role == "controller").labels)
    checked = 0
    for pod in pods:
        if pod.role in expected:
            assert expected[pod.role] <= ports_allowed_to(policies, namespace, pod.labels), (operator, pod.role, pod.labels)
            checked += 1
        else:
            # Helpers (exporters, the copilot, the tenants Job) answer nobody.
            assert ports_allowed_to(policies, namespace, pod.labels) == set(), (operator, pod.role)
    assert checked >= 3


def ingress_allows(policies: list[dict[str, Any]], source: Any, destination: Any, port: int, protocol: str = "TCP") -> bool:
    """Some ingress rule selecting `destination` admits `source` (a pod of the same namespace) on `port`: a rule
    without `from` admits every peer, one without `ports` every port; a port with endPort is a range."""
    for p in selecting(policies, destination.namespace, destination.labels, "Ingress"):
        for rule in p["spec"].get("ingress", []):
            peers = rule.get("from")
            admitted = peers is None or any(
                "podSelector" in peer and "namespaceSelector" not in peer and matches(peer["podSelector"], source.labels) for peer in peers
            )
            ports = rule.get("ports")
            opened = ports is None or any(
                entry.get("protocol", "TCP") == protocol and entry["port"] <= port <= entry.get("endPort", entry["port"]) for entry in ports
            )
            if admitted and opened:
                return True
    return False


@pytest.mark.parametrize("operator", list(OPERATOR_STACKS))
def test_no_login_pod_reaches_a_workers_sshd(operator):
    """Users on a login pod cannot SSH to a worker: its sshd's PAM stack (pam_slurm_adopt or none) is the image's,
    not ours, so nothing of theirs would confine the session to their own job. Every other port stays open (srun)."""
    config = operator_config(operator)
    policies = policies_of(config)
    pods = platform_pods(config)
    logins = [pod for pod in pods if pod.role == "login"] or [pod for pod in pods if pod.role == "controller"]  # ACK: the head
    workers = [pod for pod in pods if pod.role == "worker"]
    controllers = [pod for pod in pods if pod.role == "controller"]
    assert logins and workers
    for source in [*logins, *controllers]:
        for worker in workers:
            assert not ingress_allows(policies, source, worker, SSHD_PORT), (operator, source.role, worker.labels)
            assert not ingress_allows(policies, source, worker, SSHD_PORT, "UDP"), (operator, source.role)
            for port in (SLURMD_PORT, SSHD_PORT - 1, SSHD_PORT + 1, 45000, 65535):
                assert ingress_allows(policies, source, worker, port), (operator, source.role, port)
    # Workers reach one another on every port (MPI, NCCL, a job's own SSH between its nodes).
    assert ingress_allows(policies, workers[0], workers[-1], SSHD_PORT)
    # The check itself: the rule as it was (every port from login) would fail it.
    opened = copy.deepcopy(policies)
    for p in opened:
        if p["metadata"]["name"] == "allow-workers":
            p["spec"]["ingress"] = [{"from": [{"podSelector": rule["podSelector"]} for r in p["spec"]["ingress"] for rule in r["from"]]}]
    assert ingress_allows(opened, logins[0], workers[0], SSHD_PORT)


@pytest.mark.parametrize("operator", list(OPERATOR_STACKS))
def test_every_allow_policy_selects_some_pod_of_the_stack(operator):
    """A selector that matches no pod the operator runs is a policy that protects nothing (a label guessed wrong)."""
    config = operator_config(operator)
    pods = platform_pods(config)
    cluster_policies = [p for p in policies_of(config) if p["metadata"]["namespace"] == config.cluster.namespace]
    assert len(cluster_policies) >= 8
    # The second half of "every pod but the data stores" (pods without app.kubernetes.io/name) may be empty.
    unnamed = network_policies.SLURM_PODS[1]
    for p in cluster_policies:
        if p["spec"]["podSelector"] != unnamed:
            assert any(matches(p["spec"]["podSelector"], pod.labels) for pod in pods), (operator, p["metadata"]["name"])
        for rule in p["spec"].get("ingress", []):
            for peer in rule.get("from", []):
                if "podSelector" in peer and "namespaceSelector" not in peer and peer["podSelector"] != unnamed:
                    assert any(matches(peer["podSelector"], pod.labels) for pod in pods), (operator, p["metadata"]["name"], peer)


def test_data_stores_get_no_egress_beyond_the_cluster_and_the_rest_do():
    config = operator_config("soperator-1.14.10")
    policies, namespace = policies_of(config), config.cluster.namespace
    beyond = [p for p in policies if p["metadata"]["name"].startswith("allow-egress-beyond-cluster") and p["metadata"]["namespace"] == namespace]
    assert len(beyond) == 2
    by_role = {pod.role: pod for pod in platform_pods(config)}
    assert {"ldap", "mariadb"} <= set(by_role)
    for role, pod in by_role.items():
        stays_inside = role in ("ldap", "mariadb")
        selected_by = [p for p in beyond if matches(p["spec"]["podSelector"], pod.labels)]
        # No pod is left to a reading of NotIn over a missing label: at most one of the two selects it.
        assert len(selected_by) == (0 if stays_inside else 1), role
    unnamed = {"app.kubernetes.io/component": "tenants"}
    assert [p["metadata"]["name"] for p in beyond if matches(p["spec"]["podSelector"], unnamed)] == ["allow-egress-beyond-cluster-2"]


def test_the_ports_are_the_ones_the_operators_render():
    # ACK: our slurm.conf and the pod templates' container ports.
    config = operator_config("ack-2024-12")
    conf = ack.slurm_conf_config_map(config)["data"]["slurm.conf"]
    assert re.search(rf"^SlurmctldPort={SLURMCTLD_PORT}$", conf, re.MULTILINE)
    assert re.search(rf"^SlurmdPort={SLURMD_PORT}$", conf, re.MULTILINE)
    assert re.search(rf"^AccountingStoragePort={SLURMDBD_PORT}$", conf, re.MULTILINE)
    spec = ack.slurm_cluster_manifest(config)["spec"]

    def container_ports(template: dict[str, Any]) -> set[int]:
        return {port["containerPort"] for c in template["spec"]["containers"] for port in c.get("ports", [])}

    assert container_ports(spec["slurmctld"]["template"]) == {SLURMCTLD_PORT}
    assert container_ports(ack.login_deployment(config)["spec"]["template"]) == {SSHD_PORT}
    assert container_ports(spec["slurmdbd"]["template"]) == {SLURMDBD_PORT}
    assert [container_ports(group["template"]) for group in spec["workerGroupSpecs"]] == [{SLURMD_PORT}] * len(config.gpu_pools)
    assert ack.login_service(config)["spec"]["ports"][0]["targetPort"] == SSHD_PORT
    # soperator: the ports the SlurmCluster asks for, and our restricted SSH Service's target.
    config = operator_config("soperator-1.14.10")
    nodes = soperator1.slurm_cluster_manifest(config)["spec"]["slurmNodes"]
    assert nodes["controller"]["slurmctld"]["port"] == SLURMCTLD_PORT
    assert nodes["accounting"]["slurmdbd"]["port"] == SLURMDBD_PORT
    assert nodes["login"]["sshd"]["port"] == SSHD_PORT == SSHD_PORT
    restricted = soperator1.restricted_login_service(config)
    assert restricted is not None and restricted["spec"]["ports"][0]["targetPort"] == SSHD_PORT
    assert soperator4.rest_node(operator_config("soperator-4.1.7"))["enabled"] is False
    # Slinky: the accounting database port we render (its daemons' ports are the operator's
    # constants, internal/builder/common/const.go and restapibuilder: 6817, 6818, 6819, 6820).
    assert slinky.storage_config(operator_config("slinky-1.2.1"))["port"] == MARIADB_PORT
    # LDAP: the server pod's ports, which the Service maps 389 and 636 onto.
    config = operator_config("soperator-1.14.10")
    statefulset = server.ldap_statefulset(config.ldap, config.cluster.namespace)
    pod_ports = {p["containerPort"] for p in statefulset["spec"]["template"]["spec"]["containers"][0]["ports"]}
    assert pod_ports == {port["port"] for port in network_policies.ldap_ports(config)} == {1389, 1636}
    service = server.ldap_service(config.ldap, config.cluster.namespace)
    assert {p["port"] for p in service["spec"]["ports"]} == {389, 636}


def within(inner: str, outer: str) -> bool:
    a, b = ipaddress.ip_network(inner), ipaddress.ip_network(outer)
    return a.version == b.version and int(a.network_address) >= int(b.network_address) and int(a.broadcast_address) <= int(b.broadcast_address)


def broad_blocks(policy: dict[str, Any]) -> list[dict[str, Any]]:
    return [peer["ipBlock"] for rule in policy["spec"].get("egress", []) for peer in rule.get("to", []) if "ipBlock" in peer]


@pytest.mark.parametrize("stack", ["prod-hanoi", "prod-hoalac", "prod-hangzhou", "staging-hangzhou", "prod-hcm", "dev", "kwok"])
def test_no_ip_block_reaches_a_metadata_endpoint_or_an_nfs_server(stack):
    config = parse_config(stack_config(stack))
    denied = network_policies.denied_destinations(config)
    assert "169.254.169.254/32" in denied
    if config.cloud == "alibaba":
        assert "100.100.100.200/32" in denied
    for cidr in config.network_policies.storage_cidrs:
        assert cidr in denied
    blocks = [block for p in policies_of(config) for block in broad_blocks(p)]
    assert blocks
    for block in blocks:
        for cidr in denied:
            if within(cidr, block["cidr"]):
                assert any(within(cidr, excepted) for excepted in block.get("except", [])), (stack, block, cidr)


def test_the_nfs_servers_named_by_address_are_denied():
    config = parse_config(stack_config("prod-hanoi"))
    denied = network_policies.denied_destinations(config)
    # The class's server and the static jail's (the same address, once).
    assert denied.count("10.20.0.10/32") == 1
    raw = stack_config("prod-hoalac")
    raw["storage"]["submounts"][0]["staticNfs"] = {"server": "2001:db8::7", "path": "/export/data"}
    denied = network_policies.denied_destinations(parse_config(raw))
    assert {"10.40.1.10/32", "2001:db8::7/128"} <= set(denied)
    six = next(b for p in policies_of(parse_config(raw)) for b in broad_blocks(p) if b["cidr"] == "::/0")
    assert six["except"] == ["2001:db8::7/128"]


def test_tenant_namespaces_the_stack_owns_are_denied_by_default_and_no_other():
    config = parse_config(stack_config("prod-hoalac"))
    owned = [t.name for t in config.tenants if t.namespace]
    not_owned = [t.name for t in config.tenants if not t.namespace]
    assert owned and not_owned
    policies = policies_of(config)
    for namespace in owned:
        names = {p["metadata"]["name"] for p in policies if p["metadata"]["namespace"] == namespace}
        assert names == {"default-deny", "allow-dns", "allow-egress-in-namespace", "allow-egress-beyond-cluster", "allow-ingress-in-namespace"}
    assert not [p for p in policies if p["metadata"]["namespace"] in not_owned]


# --- config: what cannot hold is refused, naming the key -------------------------------------


def refusal(raw: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as error:
        parse_config(raw)
    return str(error.value)


def test_a_cni_that_enforces_no_policy_is_refused():
    raw = merged(stack_config("prod-hanoi"), {"networkPolicies": {"cni": "flannel"}})
    message = refusal(raw)
    assert "slurm-platform:networkPolicies.cni: flannel enforces no NetworkPolicy" in message
    assert "calico, cilium, terway" in message and 'got "flannel"' in message
    # Off, the CNI is nobody's business here.
    parse_config(merged(raw, {"networkPolicies": {"enabled": False}}))
    parse_config(merged(stack_config("prod-hanoi"), {"networkPolicies": {"cni": "calico"}}))


def test_production_names_its_cni():
    raw = stack_config("prod-hanoi")
    del raw["networkPolicies"]["cni"]
    message = refusal(raw)
    assert "slurm-platform:networkPolicies.cni: must name the cluster's CNI in production" in message and 'got "unknown"' in message
    assert "0.0.0.0/0" in message and "networkPolicies.cni calico` or" in message
    # The fix line, pasted, fixes it; outside production the same config passes (with a warning).
    parse_config(merged(raw, {"networkPolicies": {"cni": "calico"}}))
    parse_config(merged(raw, {"environment": "staging"}))
    # Off, there is no policy for a CNI to enforce.
    parse_config(merged(raw, {"networkPolicies": {"enabled": False}}))


# Every key that puts prod-* data on a class: (stack, key path, its class in the example).
UNDECLARED_CLASSES = [
    ("prod-hanoi", "ldap.storageClassName", "xplat-nfs"),
    ("prod-hanoi", "slurm.accounting.storageClassName", "xplat-nfs"),
    ("prod-hanoi", "slurm.worker.spoolStorageClassName", "xplat-nfs"),
    ("prod-hcm", "ldap.storageClassName", "xplat-nfs"),
    ("prod-hcm", "slurm.accounting.storageClassName", "xplat-nfs"),
    ("prod-hcm", "slurm.slinky.controllerStorageClassName", "xplat-nfs"),
    ("prod-hoalac", "ldap.storageClassName", "xplat-nfs"),
    ("prod-hoalac", "slurm.accounting.storageClassName", "xplat-nfs"),
    ("prod-hoalac", "slurm.worker.spoolStorageClassName", "xplat-nfs"),
]


@pytest.mark.parametrize("stack", sorted({stack for stack, _, _ in UNDECLARED_CLASSES}))
def test_production_data_on_a_class_it_does_not_declare_needs_its_servers_addresses(stack):
    raw = stack_config(stack)
    cidrs = raw["networkPolicies"].pop("storageCidrs")
    config_with = parse_config(stack_config(stack))
    # The example's servers of xplat-nfs are denied to every pod.
    assert set(cidrs) <= set(network_policies.denied_destinations(config_with))
    lines = [line.strip() for line in refusal(raw).splitlines()[1:]]
    expected = [(path, name) for s, path, name in UNDECLARED_CLASSES if s == stack]
    for path, name in expected:
        (line,) = [line for line in lines if line.startswith(f"slurm-platform:{path}: ")]
        assert f"StorageClass {name}, which this stack does not declare" in line and "networkPolicies.storageCidrs" in line, line
        assert f'got "{name}"' in line
    assert len(lines) == len(expected), lines
    # The declared class needs nothing more: its server is config's (slurm-nfs at an address).
    declared = copy.deepcopy(raw)
    for path, _ in expected:
        *parents, key = path.split(".")
        node = declared
        for part in parents:
            node = node[part]
        node[key] = raw["storage"]["storageClass"]["name"]
    parse_config(declared)
    # Outside production nothing is refused.
    parse_config(merged(raw, {"environment": "staging"}))


def test_the_cluster_default_class_is_a_class_not_declared():
    raw = stack_config("prod-hcm")
    del raw["networkPolicies"]["storageCidrs"]
    for path in (("ldap", "storageClassName"), ("slurm", "slinky", "controllerStorageClassName")):
        node = raw
        for part in path[:-1]:
            node = node[part]
        del node[path[-1]]
    message = refusal(raw)
    assert "slurm-platform:ldap.storageClassName: puts the stack's data on the cluster's default StorageClass (unset)" in message
    assert "slurm-platform:slurm.slinky.controllerStorageClassName: puts the stack's data on the cluster's default StorageClass" in message
    # An existing RWX class is one this stack does not declare either, and so is a class of ACK's slurmctld state.
    raw = merged(stack_config("dev"), {"environment": "prod"})
    assert "slurm-platform:storage.storageClass.name: puts the stack's data on StorageClass default," in refusal(raw)
    raw = merged(stack_config("staging-hangzhou"), {"environment": "prod", "slurm": {"ack": {"stateStorageClassName": "alicloud-disk-essd"}}})
    del raw["networkPolicies"]["storageCidrs"]
    assert "slurm-platform:slurm.ack.stateStorageClassName: puts the stack's data on StorageClass alicloud-disk-essd," in refusal(raw)


def test_an_nfs_server_named_by_dns_needs_its_address():
    raw = stack_config("staging-hangzhou")
    del raw["networkPolicies"]["storageCidrs"]
    message = refusal(raw)
    assert "slurm-platform:storage.storageClass.alibabaNas.server: is a DNS name" in message
    assert "slurm-platform:slurm.ack.home.server: is a DNS name" in message
    assert "networkPolicies.storageCidrs" in message and 'got "0a1b2c3d4e-abc12.cn-hangzhou.nas.aliyuncs.com"' in message
    raw = stack_config("prod-hanoi")
    raw["storage"]["jail"]["staticNfs"]["server"] = "nfs.hanoi.example"
    del raw["networkPolicies"]["storageCidrs"]
    assert "slurm-platform:storage.jail.staticNfs.server: is a DNS name" in refusal(raw)
    raw["networkPolicies"]["storageCidrs"] = ["10.20.0.11/32"]
    assert "10.20.0.11/32" in network_policies.denied_destinations(parse_config(raw))


def test_an_operator_in_the_cluster_namespace_is_refused():
    raw = merged(stack_config("prod-hanoi"), {"operators": {"mariadbOperator": {"namespace": "fpt-hpc"}}})
    message = refusal(raw)
    assert "slurm-platform:operators.mariadbOperator.namespace: is the cluster's namespace" in message and 'got "fpt-hpc"' in message


def test_storage_cidrs_cannot_be_everything():
    raw = merged(stack_config("prod-hanoi"), {"networkPolicies": {"storageCidrs": ["10.20.0.0/24", "::/0"]}})
    message = refusal(raw)
    assert "slurm-platform:networkPolicies.storageCidrs[1]: would deny pods every address" in message and 'got "::/0"' in message
    assert "storageCidrs[0]" not in message


def test_storage_and_dns_cidrs_must_be_cidrs():
    raw = merged(stack_config("prod-hanoi"), {"networkPolicies": {"storageCidrs": ["nfs.example"], "dnsCidrs": ["169.254.20.10"]}})
    message = refusal(raw)
    assert "slurm-platform:networkPolicies.storageCidrs[0]: must be a CIDR block" in message
    assert "slurm-platform:networkPolicies.dnsCidrs[0]: must be a CIDR block" in message


# --- the program ---------------------------------------------------------------------------------


def test_the_program_declares_the_policies_under_their_component_and_tenant_ones_after_the_tenants():
    raw = stack_config("prod-hoalac")
    run = run_under_mocks(lambda: build_platform(parse_config(raw)), raw)
    (component,) = run.of_type("slurm-platform:network_policies:NetworkPolicies")
    (monitoring,) = run.of_type("slurm-platform:monitoring:Monitoring")
    # Every policy but Prometheus' way to the metrics ports (the Monitoring component's: test_monitoring.py).
    declared = [p for p in run.of_type(NETWORK_POLICY) if p.parent != monitoring.urn]
    config = parse_config(raw)
    assert len(declared) == len(network_policies.render(config, resolve(config).pod_roles))
    (vision,) = [n for n in run.of_type("kubernetes:core/v1:Namespace") if n.inputs["metadata"]["name"] == "vision"]
    for policy in declared:
        assert policy.parent == component.urn
        in_tenant_namespace = policy.inputs["metadata"]["namespace"] == "vision"
        # The cluster namespace's policies come first, before any pod of the cluster.
        assert (vision.urn in policy.dependencies) is in_tenant_namespace, policy.name
    assert {p.name for p in declared} >= {"network-policies-default-deny", "network-policies-tenant-vision-default-deny"}
    # Outside production an unnamed CNI only warns (in production it is refused: test_production_names_its_cni).
    raw = stack_config("staging-hanoi")
    assert parse_config(raw).network_policies.cni == "unknown"
    run = run_under_mocks(lambda: build_platform(parse_config(raw)), raw)
    assert any("networkPolicies.cni is not set" in w for w in run.warnings)


def test_off_declares_no_policy_and_a_named_cni_no_warning():
    raw = merged(stack_config("prod-hanoi"), {"networkPolicies": {"enabled": False}})
    run = run_under_mocks(lambda: build_platform(parse_config(raw)), raw)
    assert run.resources and not run.of_type(NETWORK_POLICY)
    assert not run.of_type("slurm-platform:network_policies:NetworkPolicies")
    raw = stack_config("prod-hangzhou")
    run = run_under_mocks(lambda: build_platform(parse_config(raw)), raw)
    assert run.of_type(NETWORK_POLICY)
    assert not [w for w in run.warnings if "networkPolicies" in w]


def test_the_directory_reconciler_reaches_the_ldap_server_and_answers_nobody():
    config = operator_config("soperator-4.1.7")
    assert config.tenants and config.ldap.tls.enabled
    policies, namespace = policies_of(config), config.cluster.namespace
    pods = {pod.role: pod for pod in platform_pods(config)}
    reconciler_pod, ldap_pod = pods["other-ldap-reconciler"], pods["ldap"]
    (allow,) = [p for p in selecting(policies, namespace, ldap_pod.labels, "Ingress") if p["metadata"]["name"] == "allow-ldap"]
    (rule,) = allow["spec"]["ingress"]
    assert any(matches(peer["podSelector"], reconciler_pod.labels) for peer in rule["from"])
    assert {port["port"] for port in rule["ports"]} == {names.CONTAINER_LDAP_PORT, names.CONTAINER_LDAPS_PORT}
    assert ports_allowed_to(policies, namespace, reconciler_pod.labels) == set()
    # Without tenants there is no reconciler, and no rule for one.
    bare = parse_config(merged(stack_config("prod-hoalac"), {"tenants": [], "operators": {"kueue": {"enabled": False}}}))
    (bare_allow,) = [p for p in policies_of(bare) if p["metadata"]["name"] == "allow-ldap"]
    assert all(peer["podSelector"] != {"matchLabels": reconciler.LABELS} for peer in bare_allow["spec"]["ingress"][0]["from"])

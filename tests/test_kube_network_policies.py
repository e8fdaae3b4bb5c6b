"""The NetworkPolicies of every operator's stack, on a real API server and in a simulator.

- Objects: each stack's policies are created on scripts/kube-local.sh's kube-apiserver with strict
  field validation (nothing pruned or changed), then for real, and an invalid ipBlock is refused.
- Effect: this machine has no CNI, so no packet proves them here. cyclonus (scripts/policy-simulator.sh;
  the engine SIG Network's policy-assistant grew from) evaluates them as the NetworkPolicy API
  specifies, for flows between pods that carry the labels each operator gives its pods
  (tests/network.py). The spec leaves open whether an ipBlock matches pod IPs (Calico: yes;
  Cilium: no), so the flows inside the cluster are asked twice: as the policies are, and with every
  ipBlock peer removed; both answers must be the expected ones.
What only a CNI proves: that it enforces all this (docs/security.md "A network that says no").
"""

from __future__ import annotations

import copy
import ipaddress
import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pytest
import yaml

from components.config import PlatformConfig, parse_config
from components.monitoring import monitors, network, series
from components.names import MARIADB_PORT, SLURMCTLD_PORT, SLURMD_PORT, SLURMDBD_PORT, SLURMRESTD_PORT, SSHD_PORT
from components.render import network_policies
from components.slurm import operator_module, resolve
from components.slurm.gpu_jobs import maps_gpu_jobs
from tests.harness import ROOT
from tests.kube import LocalCluster, assert_stored_as_sent, contains
from tests.network import Pod, platform_pods
from tests.test_network_policies import OPERATOR_STACKS, merged, stack_config

SIMULATOR = ROOT / "scripts" / "policy-simulator.sh"
INTERNET, API_SERVER = "198.51.100.7", "192.168.0.1"


def operator_config(operator: str) -> PlatformConfig:
    stack, overrides = OPERATOR_STACKS[operator]
    return parse_config(merged(stack_config(stack), overrides))


def policies_of(config: PlatformConfig) -> list[dict[str, Any]]:
    return [r.manifest for r in network_policies.render(config, resolve(config).pod_roles)]


# --- the objects on a real API server -----------------------------------------------------------


@pytest.mark.parametrize("operator", list(OPERATOR_STACKS))
def test_every_policy_is_accepted_by_the_api_server_as_sent(cluster: LocalCluster, operator):
    manifests = policies_of(operator_config(operator))
    assert len(manifests) >= 8
    assert_stored_as_sent(cluster, operator, manifests)
    cluster.apply(manifests)
    try:
        for manifest in manifests:
            stored = cluster.require("networkpolicy", manifest["metadata"]["name"], manifest["metadata"]["namespace"])
            assert contains(stored["spec"], manifest["spec"]), (operator, manifest["metadata"]["name"])
    finally:
        # The next stack may share the namespace (prod-hanoi and prod-hoalac: fpt-hpc).
        for manifest in manifests:
            cluster.kubectl("delete", "networkpolicy", manifest["metadata"]["name"], "-n", manifest["metadata"]["namespace"], "--ignore-not-found")


def test_the_api_server_refuses_an_except_outside_its_block(cluster: LocalCluster):
    """The validation above is live: an except the block does not contain is refused."""
    config = operator_config("soperator-1.14.10")
    manifest = copy.deepcopy(next(m for m in policies_of(config) if m["metadata"]["name"] == "allow-egress-beyond-cluster"))
    manifest["spec"]["egress"][0]["to"][0]["ipBlock"] = {"cidr": "10.0.0.0/8", "except": ["169.254.169.254/32"]}
    if cluster.get("namespace", config.cluster.namespace) is None:
        cluster.kubectl("create", "namespace", config.cluster.namespace)
    result = cluster.kubectl("create", "--dry-run=server", "--validate=strict", "-f", "-", check=False, stdin=json.dumps(manifest))
    assert result.returncode != 0 and "must be a strict subset of `cidr`" in result.stderr, result.stderr


# --- their effect, simulated -----------------------------------------------------------------------


@dataclass(frozen=True)
class Flow:
    source: Any  # a Pod, or an address outside the cluster
    destination: Any
    port: int
    allowed: bool
    protocol: str = "TCP"

    def __str__(self) -> str:
        def name(end: Any) -> str:
            return f"{end.namespace}/{end.role}" if isinstance(end, Pod) else str(end)

        return f"{name(self.source)} -> {name(self.destination)}:{self.port}/{self.protocol} {'allowed' if self.allowed else 'denied'}"


def simulate(policies: list[dict[str, Any]], flows: list[Flow], addresses: dict[int, str], workdir: Path) -> list[bool]:
    """cyclonus's answer for each flow, in order."""
    binary = subprocess.run([str(SIMULATOR), "build"], capture_output=True, text=True, timeout=1800)
    assert binary.returncode == 0, binary.stderr
    policy_dir = workdir / "policies"
    policy_dir.mkdir(parents=True)
    for index, policy in enumerate(policies):
        (policy_dir / f"{index:03d}.yaml").write_text(yaml.safe_dump(policy))

    def peer(end: Any) -> dict[str, Any]:
        if not isinstance(end, Pod):
            return {"IP": end}
        internal = {"PodLabels": end.labels, "NamespaceLabels": {"kubernetes.io/metadata.name": end.namespace}, "Namespace": end.namespace}
        return {"Internal": internal, "IP": addresses[id(end)]}

    traffic = [{"Source": peer(f.source), "Destination": peer(f.destination), "Protocol": f.protocol, "ResolvedPort": f.port} for f in flows]
    (workdir / "traffic.json").write_text(json.dumps(traffic))
    result = subprocess.run(
        [
            binary.stdout.strip(),
            "analyze",
            "--mode",
            "query-traffic",
            "--policy-path",
            str(policy_dir),
            "--traffic-path",
            str(workdir / "traffic.json"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    answers = re.findall(r"^\| IS ALLOWED\? \| +(TRUE|FALSE) ", result.stdout, re.MULTILINE)
    assert len(answers) == len(flows), result.stdout[-4000:]
    return [answer == "TRUE" for answer in answers]


def without_ip_blocks(policy: dict[str, Any]) -> dict[str, Any]:
    """The policy as a CNI whose ipBlock never matches a pod reads it for traffic between pods."""
    stripped = copy.deepcopy(policy)
    for rule in stripped["spec"].get("egress", []):
        if "to" in rule:
            rule["to"] = [peer for peer in rule["to"] if "ipBlock" not in peer]
    stripped["spec"]["egress"] = [rule for rule in stripped["spec"].get("egress", []) if rule.get("to", [None])]
    if not stripped["spec"]["egress"]:
        del stripped["spec"]["egress"]
    return stripped


class World:
    """The stack's pods, DNS, an operator's pod, a tenant's pod, a stranger's pod, and addresses for all."""

    def __init__(self, config: PlatformConfig):
        self.config = config
        self.pods = platform_pods(config)
        self.dns = Pod("kube-dns", "kube-system", {"k8s-app": "kube-dns"})
        owned = [t.name for t in config.tenants if t.namespace]
        self.tenant_namespace = owned[0] if owned else None
        self.tenant = Pod("tenant", self.tenant_namespace or "team-x", {"app": "train"})
        self.tenant_peer = Pod("tenant-peer", self.tenant.namespace, {"app": "train"})
        self.stranger = Pod("stranger", "elsewhere", {"app": "x"})
        self.mariadb_operator = Pod("mariadb-operator", config.operators.mariadb_operator.namespace, {"app.kubernetes.io/name": "mariadb-operator"})
        self.operator = Pod("operator", self.operator_namespace(), {"control-plane": "controller-manager"})
        everyone = [*self.pods, self.dns, self.tenant, self.tenant_peer, self.stranger, self.mariadb_operator, self.operator]
        self.addresses = {id(pod): f"10.244.{index // 250}.{index % 250 + 1}" for index, pod in enumerate(everyone)}

    def operator_namespace(self) -> str:
        if self.config.slurm_operator == "slinky":
            return self.config.operators.slinky.namespace
        if self.config.slurm_operator == "ack":
            return self.config.operators.ack_slurm_operator.namespace
        return self.config.operators.soperator.namespace

    def get(self, role: str) -> Optional[Pod]:
        return next((pod for pod in self.pods if pod.role == role), None)

    def ours(self) -> list[Pod]:
        return self.pods


def expected_flows(world: World) -> list[Flow]:
    config, get = world.config, world.get
    p = network_policies
    controller, worker, login = get("controller"), get("worker"), get("login")
    slurmdbd, slurmrestd, mariadb = get("slurmdbd") or (controller if config.slurm.accounting.enabled else None), get("slurmrestd"), get("mariadb")
    ldap_pod, tenants_job = get("ldap"), get("other-tenants-job")
    helper = next((pod for pod in world.pods if pod.role.startswith("other-")), None)
    assert controller and worker and login and ldap_pod
    tenant, stranger = world.tenant, world.stranger
    flows = [
        # Slurm's own traffic.
        Flow(worker, controller, SLURMCTLD_PORT, True),
        Flow(login, controller, SLURMCTLD_PORT, True),
        Flow(controller, worker, SLURMD_PORT, True),
        Flow(worker, worker, SLURMD_PORT, True),
        Flow(worker, worker, 40000, True),  # job traffic: MPI, NCCL, srun's step I/O
        Flow(login, worker, 45000, True),
        # No SSH from login (nor slurmctld) to a worker's sshd: only the ports on either side of it.
        Flow(login, worker, SSHD_PORT, False),
        Flow(controller, worker, SSHD_PORT, False),
        Flow(login, worker, SSHD_PORT - 1, True),
        Flow(login, worker, SSHD_PORT + 1, True),
        Flow(worker, login, 45000, True),  # srun's callback ports on the login pod
        Flow(controller, login, 45000, True),
        Flow(INTERNET, login, SSHD_PORT, True),
        # What stays out.
        Flow(INTERNET, controller, SLURMCTLD_PORT, False),
        # SSH reaches the login pods only (ACK's head took it before it had a login of its own).
        Flow(INTERNET, controller, SSHD_PORT, False),
        Flow(INTERNET, worker, SLURMD_PORT, False),
        Flow(tenant, controller, SLURMCTLD_PORT, False),
        Flow(tenant, worker, SLURMD_PORT, False),
        Flow(stranger, worker, 40000, False),
        Flow(tenant, ldap_pod, network_policies.ldap_ports(config)[0]["port"], False),
        Flow(stranger, ldap_pod, network_policies.ldap_ports(config)[-1]["port"], False),
        # Directory clients.
        *[Flow(client, ldap_pod, port["port"], True) for client in (worker, login, controller) for port in network_policies.ldap_ports(config)],
        Flow(worker, ldap_pod, 8080, False),
        # DNS for everyone, the internet for the Slurm pods and the tenants, none for the data stores.
        *[Flow(pod, world.dns, p.DNS_PORT, True, "UDP") for pod in [*world.pods, tenant]],
        Flow(worker, INTERNET, 443, True),
        Flow(login, INTERNET, 443, True),
        Flow(ldap_pod, INTERNET, 443, False),
        # The metadata endpoints and the NFS servers: from no pod of ours or of the tenants.
        *[Flow(pod, address, port, False) for pod in (worker, login, controller, ldap_pod) for address, port in denied(config)],
    ]
    if helper is not None:
        flows += [Flow(helper, API_SERVER, 6443, True), Flow(helper, worker, SLURMD_PORT, False)]
    reconciler_job = get("other-ldap-reconciler")
    if reconciler_job is not None:
        # The directory's reconciler writes the config's researchers, as the admin.
        flows += [Flow(reconciler_job, ldap_pod, port["port"], True) for port in network_policies.ldap_ports(config)]
    if slurmdbd is not None:
        flows += [Flow(client, slurmdbd, SLURMDBD_PORT, True) for client in (controller, worker, login)]
        flows += [Flow(tenant, slurmdbd, SLURMDBD_PORT, False)]
        if slurmdbd is not controller:
            flows += [Flow(slurmdbd, controller, SLURMCTLD_PORT, True), Flow(slurmdbd, worker, SLURMD_PORT, False)]
    if mariadb is not None and slurmdbd is not None:
        flows += [Flow(slurmdbd, mariadb, MARIADB_PORT, True), Flow(world.mariadb_operator, mariadb, MARIADB_PORT, True)]
        flows += [Flow(source, mariadb, MARIADB_PORT, False) for source in (worker, login, controller, ldap_pod, tenant, stranger)]
        flows += [Flow(mariadb, INTERNET, 443, False)]
    if slurmrestd is not None:
        flows += [Flow(world.operator, slurmrestd, SLURMRESTD_PORT, True), Flow(worker, slurmrestd, SLURMRESTD_PORT, True)]
        flows += [Flow(tenant, slurmrestd, SLURMRESTD_PORT, False), Flow(stranger, slurmrestd, SLURMRESTD_PORT, False)]
    if tenants_job is not None:
        flows += [Flow(tenants_job, controller, SLURMCTLD_PORT, True)]
        flows += [Flow(tenants_job, slurmdbd, SLURMDBD_PORT, True)] if slurmdbd is not None else []
    if world.tenant_namespace:
        # A tenant namespace the stack owns: its pods talk to one another and the internet, and nobody else reaches them.
        flows += [Flow(tenant, world.tenant_peer, 8080, True), Flow(tenant, INTERNET, 443, True)]
        flows += [Flow(tenant, address, port, False) for address, port in denied(config)]
        flows += [Flow(source, tenant, 8080, False) for source in (stranger, worker, login, INTERNET)]
    return flows


def denied(config: PlatformConfig) -> list[tuple[str, int]]:
    """An address in each denied block (its last, for a subnet of storage servers) with the port a thief would use:
    80 for metadata, 2049 for NFS."""
    metadata = {*network_policies.METADATA_ADDRESSES, *network_policies.CLOUD_METADATA_ADDRESSES.get(config.cloud, ())}
    blocks = [ipaddress.ip_network(cidr) for cidr in network_policies.denied_destinations(config) if ":" not in cidr]
    return [(str(block[-1]), 80 if str(block) in metadata else 2049) for block in blocks]


@pytest.mark.parametrize("operator", list(OPERATOR_STACKS))
def test_the_policies_let_through_what_slurm_needs_and_nothing_of_what_an_attacker_wants(operator, tmp_path):
    config = operator_config(operator)
    world = World(config)
    flows = expected_flows(world)
    assert len(flows) >= 40 and any(f.allowed for f in flows) and any(not f.allowed for f in flows)
    # In production the servers of every class the data sits on are asked for, those config names and the
    # storageCidrs behind the classes it only uses (FPT's xplat-nfs).
    if config.environment == "prod":
        servers = {str(ipaddress.ip_network(cidr)[-1]) for cidr in config.network_policies.storage_cidrs}
        assert servers and servers <= {f.destination for f in flows if not f.allowed and f.port == 2049}, operator
    policies = policies_of(config)
    answers = simulate(policies, flows, world.addresses, tmp_path / "as-is")
    wrong = [str(flow) for flow, answer in zip(flows, answers, strict=True) if answer != flow.allowed]
    assert wrong == [], f"{operator}: {len(wrong)} flows answered otherwise:\n" + "\n".join(wrong)
    # Between pods, the same answers where no ipBlock matches a pod.
    inside = [f for f in flows if isinstance(f.source, Pod) and isinstance(f.destination, Pod)]
    answers = simulate([without_ip_blocks(p) for p in policies], inside, world.addresses, tmp_path / "no-ipblock")
    wrong = [str(flow) for flow, answer in zip(inside, answers, strict=True) if answer != flow.allowed]
    assert wrong == [], f"{operator} (ipBlock matching no pod): {len(wrong)} flows answered otherwise:\n" + "\n".join(wrong)


def test_the_simulator_tells_allowed_from_denied(tmp_path):
    """The simulation above is live: with no policy every flow passes, and the default-deny alone stops them."""
    config = operator_config("soperator-4.1.7")
    world = World(config)
    flows = [f for f in expected_flows(world) if isinstance(f.source, Pod) and f.source.namespace == config.cluster.namespace][:10]
    assert len(flows) == 10
    deny = next(p for p in policies_of(config) if p["metadata"]["name"] == "default-deny" and p["metadata"]["namespace"] == config.cluster.namespace)
    assert simulate([], flows, world.addresses, tmp_path / "none") == [True] * 10
    assert simulate([deny], flows, world.addresses, tmp_path / "deny") == [False] * 10


# --- Prometheus to the metrics ports ---------------------------------------------------------------


def metrics_flows(config: PlatformConfig) -> tuple[list[Flow], dict[int, str]]:
    """Prometheus to each metrics port of the cluster's namespace, and who else may not: a tenant pod, another pod
    of the Prometheus namespace, a pod with Prometheus' labels elsewhere, the Slurm pods; with addresses for all."""
    namespace, prometheus = config.cluster.namespace, config.monitoring.prometheus
    roles = operator_module(config).pod_roles(config)
    targets = [(Pod("slurm-exporter", namespace, network.SLURM_EXPORTER["matchLabels"]), series.EXPORTER_PORT)]
    if roles.exporter is not None:
        targets.append((Pod("soperator-exporter", namespace, roles.exporter["matchLabels"]), monitors.SOPERATOR_EXPORTER_PORT))
    database = Pod("mariadb", namespace, roles.database["matchLabels"]) if roles.database is not None else None
    database_exporter = None
    if roles.database is not None:
        database_exporter = Pod("database-exporter", namespace, monitors.database_exporter(roles.database)["matchLabels"])
        targets.append((database_exporter, monitors.DATABASE_EXPORTER_PORT))
    scraper = Pod("prometheus", prometheus.namespace, dict(prometheus.pod_labels))
    world = World(config)
    neighbour = Pod("grafana", prometheus.namespace, {"app.kubernetes.io/name": "grafana"})
    impostor = Pod("impostor", world.tenant.namespace, dict(prometheus.pod_labels))
    outsiders = [world.tenant, neighbour, impostor, *(pod for pod in (world.get("worker"), world.get("login")) if pod)]
    flows = [Flow(scraper, pod, port, True) for pod, port in targets]
    flows += [Flow(outsider, pod, port, False) for pod, port in targets for outsider in outsiders]
    # Only the metrics port: not another port of the same pod, nor slurmctld.
    flows += [Flow(scraper, pod, port + 1, False) for pod, port in targets]
    flows += [Flow(scraper, world.get("controller"), SLURMCTLD_PORT, False)]
    if database is not None and database_exporter is not None:
        flows += [Flow(database_exporter, database, MARIADB_PORT, True)]
    stack_flows, stack_pods = prometheus_stack_flows(config, scraper, neighbour, [world.tenant, impostor])
    flows += stack_flows
    pods = [*world.pods, world.tenant, scraper, neighbour, impostor, *(pod for pod, _ in targets), *([database] if database else []), *stack_pods]
    addresses = {id(pod): f"10.245.{index // 250}.{index % 250 + 1}" for index, pod in enumerate(pods)}
    return flows, addresses


def prometheus_stack_flows(config: PlatformConfig, prometheus: Pod, grafana: Pod, outsiders: list[Pod]) -> tuple[list[Flow], list[Pod]]:
    """kube-prometheus-stack's own traffic (Grafana to Prometheus and Alertmanager, Prometheus to each of the chart's
    targets and to dcgm-exporter where this stack installs it) and none from `outsiders` to any of those ports; with
    the pods it adds. The labels and ports are the chart's (88.5.3 and its subcharts), written out here."""
    namespace = config.monitoring.prometheus.namespace
    alertmanager = Pod("alertmanager", namespace, {"app.kubernetes.io/name": "alertmanager", "alertmanager": "main"})
    kube_state_metrics = Pod("kube-state-metrics", namespace, {"app.kubernetes.io/name": "kube-state-metrics"})
    operator = Pod("prometheus-operator", namespace, {"app": "kube-prometheus-stack-operator", "app.kubernetes.io/component": "prometheus-operator"})
    # A part the chart's values may turn on that no policy names: the namespace's default-deny covers it.
    thanos_ruler = Pod("thanos-ruler", namespace, {"app.kubernetes.io/name": "thanos-ruler"})
    dcgm = Pod("dcgm-exporter", config.operators.gpu_operator.namespace, {"app": series.DCGM_EXPORTER_APP})
    # Prometheus 9090 and its config reloader 8080, Alertmanager 9093, Grafana 3000, kube-state-metrics 8080, the operator 8080.
    scraped = [(prometheus, 9090), (prometheus, 8080), (alertmanager, 9093), (grafana, 3000), (kube_state_metrics, 8080), (operator, 8080)]
    scraped += [(dcgm, series.DCGM_EXPORTER_PORT)] if maps_gpu_jobs(config) else []
    flows = [Flow(prometheus, pod, port, True) for pod, port in scraped]
    flows += [Flow(grafana, prometheus, 9090, True), Flow(grafana, alertmanager, 9093, True), Flow(alertmanager, alertmanager, 9094, True)]
    flows += [Flow(outsider, pod, port, False) for outsider in outsiders for pod, port in [*scraped, (thanos_ruler, 10902)]]
    # Grafana reads Prometheus and Alertmanager only, and only Prometheus reads anything else.
    flows += [Flow(grafana, kube_state_metrics, 8080, False), Flow(kube_state_metrics, prometheus, 9090, False)]
    if maps_gpu_jobs(config):
        flows += [Flow(grafana, dcgm, series.DCGM_EXPORTER_PORT, False), Flow(alertmanager, dcgm, series.DCGM_EXPORTER_PORT, False)]
    return flows, [alertmanager, kube_state_metrics, operator, thanos_ruler, dcgm]


@pytest.mark.parametrize("operator", list(OPERATOR_STACKS))
def test_prometheus_reaches_each_metrics_port_and_a_tenant_pod_none(operator, tmp_path):
    """With monitoring on, the stack's policies and Prometheus' let exactly Prometheus to exactly the metrics ports;
    without Prometheus' policies the default-deny stops it (so a missing one fails here)."""
    stack, overrides = OPERATOR_STACKS[operator]
    config = parse_config(merged(stack_config(stack), {**overrides, "monitoring": {"enabled": True}}))
    flows, addresses = metrics_flows(config)
    assert any(f.allowed for f in flows) and len(flows) >= 8
    stack_policies, prometheus_policies = policies_of(config), network.render(config, resolve(config).pod_roles)
    answers = simulate([*stack_policies, *prometheus_policies], flows, addresses, tmp_path / "with")
    wrong = [str(flow) for flow, answer in zip(flows, answers, strict=True) if answer != flow.allowed]
    assert wrong == [], f"{operator}: {len(wrong)} flows answered otherwise:\n" + "\n".join(wrong)
    # Each of Prometheus' policies is needed: without it, a flow is answered otherwise (an allow's flow denied,
    # or, without the Prometheus namespace's default-deny, a tenant let into a part no allow names).
    expected = [flow.allowed for flow in flows]
    names = {p["metadata"]["name"] for p in prometheus_policies}
    assert "monitoring-default-deny-ingress" in names and ("allow-prometheus-dcgm-exporter" in names) == maps_gpu_jobs(config)
    for policy in prometheus_policies:
        rest = [p for p in prometheus_policies if p is not policy]
        name = f"{policy['metadata']['namespace']}-{policy['metadata']['name']}"
        assert simulate([*stack_policies, *rest], flows, addresses, tmp_path / name) != expected, name

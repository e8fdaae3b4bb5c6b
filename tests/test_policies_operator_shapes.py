"""The policy pack on the other operators' resources, with constructed policy
args: soperator 4.x NodeSets, ACK SlurmClusters, Slinky CRs."""

import copy

import pytest

from components.config import parse_config
from components.slurm import ack, operator_module, slinky, soperator4
from slurm_policies.quota import stack_demand  # noqa: E402  (tests.test_policies put policies/ on the path)
from tests.harness import stack_config
from tests.test_policies import (
    ACK_SLURM_CLUSTER,
    CONFIG_MAP,
    PVC,
    SERVICE,
    SLINKY_CONTROLLER,
    SLINKY_NODESET,
    SLURM_CLUSTER,
    SOPERATOR_NODESET,
    as_policy_resource,
    check,
    mocked_run,
    one,
    resource,
)

SECRET = "kubernetes:core/v1:Secret"
SLINKY_LOGINSET = "kubernetes:slinky.slurm.net/v1beta1:LoginSet"
SLINKY_ACCOUNTING = "kubernetes:slinky.slurm.net/v1beta1:Accounting"


def as_resources(rendered, kinds):
    """Our rendered manifests as policy resources (data volumes protected, as the component declares them)."""
    types = {
        ("slurm.nebius.ai/v1", "SlurmCluster"): SLURM_CLUSTER,
        ("slurm.nebius.ai/v1alpha1", "NodeSet"): SOPERATOR_NODESET,
        ("kai.alibabacloud.com/v1", "SlurmCluster"): ACK_SLURM_CLUSTER,
        ("slinky.slurm.net/v1beta1", "Controller"): SLINKY_CONTROLLER,
        ("slinky.slurm.net/v1beta1", "NodeSet"): SLINKY_NODESET,
        ("slinky.slurm.net/v1beta1", "LoginSet"): SLINKY_LOGINSET,
        ("slinky.slurm.net/v1beta1", "Accounting"): SLINKY_ACCOUNTING,
        ("v1", "ConfigMap"): CONFIG_MAP,
        ("v1", "PersistentVolumeClaim"): PVC,
        ("v1", "Service"): SERVICE,
    }
    return [
        resource(types[(r.manifest["apiVersion"], r.manifest["kind"])], r.manifest, protect=r.keep)
        for r in rendered
        if (r.manifest["apiVersion"], r.manifest["kind"]) in types and r.manifest["kind"] in kinds
    ]


# ---------------------------------------------------------------------------
# soperator 4.x


@pytest.fixture
def soperator4_resources():
    config = parse_config(stack_config("staging-hanoi"))
    return as_resources(soperator4.render(config), {"SlurmCluster", "NodeSet"})


def test_nodesets_pass_and_orphans_fail(soperator4_resources):
    assert check("soperator-nodesets", *soperator4_resources) == []
    cluster = next(r for r in soperator4_resources if r.resource_type == SLURM_CLUSTER)
    nodeset = copy.deepcopy(dict(next(r for r in soperator4_resources if r.resource_type == SOPERATOR_NODESET).props))
    nodeset["metadata"]["annotations"] = {"slurm.nebius.ai/parental-cluster-ref": "other"}
    nodeset["spec"]["slurmd"]["volumes"]["jail"]["persistentVolumeClaim"]["claimName"] = "my-jail"
    nodeset["spec"]["slurmd"]["volumes"]["jailSubMounts"] = []
    messages = check("soperator-nodesets", cluster, resource(SOPERATOR_NODESET, nodeset))
    assert len(messages) == 2
    assert "parental-cluster-ref='other'" in messages[0] and "'my-jail', not 'jail-pvc'" in messages[1]
    nodeset["metadata"]["annotations"] = {"slurm.nebius.ai/parental-cluster-ref": "fpt-hpc"}
    messages = check("soperator-nodesets", cluster, resource(SOPERATOR_NODESET, nodeset))
    assert any("jailSubMounts [] differ from the login nodes'" in m for m in messages)


def test_nodeset_workers_must_fit_their_pool(soperator4_resources):
    config = {
        "nodePools": {"h100": {"cpu": 112, "memoryGi": 1250, "gpus": 8, "nodes": 2}, "h200": {"cpu": 112, "memoryGi": 1850, "gpus": 8, "nodes": 1}}
    }
    nodesets = [r for r in soperator4_resources if r.resource_type == SOPERATOR_NODESET]
    assert check("slurm-worker-node-fit", *nodesets, config=config) == []
    one(
        check("slurm-worker-node-fit", *nodesets, config={"nodePools": {**config["nodePools"], "h100": {**config["nodePools"]["h100"], "nodes": 1}}}),
        "NodeSet fpt-hpc/h100: 2 workers exceed the 1 node(s) of GPU pool h100",
    )
    one(
        check("slurm-worker-node-fit", *nodesets, config={"nodePools": {**config["nodePools"], "h200": {**config["nodePools"]["h200"], "cpu": 100}}}),
        "NodeSet fpt-hpc/h200: a worker pod asks 111.2 CPU",
    )  # slurmd 109 + munge 2 + sssd 0.2


def test_quota_counts_nodesets():
    run = mocked_run("staging-hanoi")
    demand = stack_demand([as_policy_resource(r) for r in run.resources])
    assert demand.totals["gpus"] == 24  # 2 x h100 + 1 x h200, 8 GPUs each
    assert any(part.startswith("NodeSet fpt-hpc/h100: 2 x") for part in demand.largest("gpus"))


# ---------------------------------------------------------------------------
# ACK


@pytest.fixture
def ack_config():
    return parse_config(stack_config("staging-hangzhou"))


@pytest.fixture
def ack_resources(ack_config):
    return as_resources(ack.render(ack_config), {"SlurmCluster", "ConfigMap", "PersistentVolumeClaim", "Service"})


def test_ack_config_rule_passes_our_rendering(ack_resources):
    assert check("ack-slurm-config", *ack_resources) == []


def test_ack_config_rule_catches_each_inconsistency(ack_resources):
    others = [r for r in ack_resources if r.resource_type != ACK_SLURM_CLUSTER]
    cluster = copy.deepcopy(dict(next(r for r in ack_resources if r.resource_type == ACK_SLURM_CLUSTER).props))
    cluster["spec"]["slurmConfPath"] = "/etc/slurm-elsewhere"
    cluster["spec"]["mungeConfPath"] = "/etc/munge/munge.key"
    worker = cluster["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    worker["volumes"] = [v for v in worker["volumes"] if v["name"] != "home"]
    messages = check("ack-slurm-config", resource(ACK_SLURM_CLUSTER, cluster), *others)
    assert sum("slurmConfPath /etc/slurm-elsewhere" in m for m in messages) == 3  # slurmctld, slurmdbd, a10
    assert sum("mungeConfPath /etc/munge/munge.key is not inside a mounted Secret" in m for m in messages) == 3
    assert sum("workerGroupSpecs[a10]: /home is not a claim" in m for m in messages) == 1
    # A slurm.conf for another cluster, and an unprotected /home.
    config_map = copy.deepcopy(dict(next(r for r in others if r.resource_type == CONFIG_MAP).props))
    config_map["data"]["slurm.conf"] = config_map["data"]["slurm.conf"].replace("ClusterName=ack-slurm-cluster-1", "ClusterName=other")
    home = next(r for r in others if r.resource_type == PVC)
    rendered_cluster = next(r for r in ack_resources if r.resource_type == ACK_SLURM_CLUSTER)
    messages = check("ack-slurm-config", rendered_cluster, resource(CONFIG_MAP, config_map), resource(PVC, dict(home.props), protect=False))
    assert sum("does not say ClusterName=ack-slurm-cluster-1" in m for m in messages) == 3
    assert sum("/home claim slurm-home-pvc is not protected" in m for m in messages) == 3


def test_ack_worker_groups_count_and_fit(ack_resources):
    cluster = next(r for r in ack_resources if r.resource_type == ACK_SLURM_CLUSTER)
    pools = {"a10": {"cpu": 30, "memoryGi": 110, "gpus": 1, "nodes": 4}}
    assert check("slurm-worker-node-fit", cluster, config={"nodePools": pools}) == []
    one(
        check("slurm-worker-node-fit", cluster, config={"nodePools": {"a10": {**pools["a10"], "nodes": 1}}}),
        "workerGroupSpecs[a10]: 2 workers exceed the 1 node(s)",
    )
    demand = stack_demand([cluster])
    assert demand.totals["gpus"] == 2 and demand.totals["vcpu"] == pytest.approx(2 * 28 + 2 + 1)


def test_ack_login_service_is_seen_by_the_exposure_rule(ack_resources):
    service = copy.deepcopy(dict(next(r for r in ack_resources if r.resource_type == SERVICE).props))
    alibaba = {"cloud": "alibaba", "nodePortsFirewalled": True}
    assert check("restricted-load-balancers", resource(SERVICE, service), config=alibaba) == []
    # The intranet default is Alibaba's own annotation: on another cloud's stack it is a contradiction.
    assert "is an annotation of alibaba" in check("restricted-load-balancers", resource(SERVICE, service), config={"nodePortsFirewalled": True})[0]
    service["metadata"]["annotations"] = {}
    service["spec"]["loadBalancerSourceRanges"] = ["0.0.0.0/0"]
    one(check("restricted-load-balancers", resource(SERVICE, service), config=alibaba), "Service slurm/ack-slurm-cluster-1-login is a LoadBalancer")


# ---------------------------------------------------------------------------
# Slinky


@pytest.fixture
def slinky_run():
    return mocked_run("prod-hcm")


def slinky_resources(run):
    return [as_policy_resource(r) for r in run.resources]


def test_slinky_references_pass_and_missing_keys_fail(slinky_run):
    resources = slinky_resources(slinky_run)
    assert check("slinky-references", *resources) == []
    without_keys = [
        r for r in resources if not (r.resource_type == SECRET and r.name in ("slurm-slurm-key", "slurm-sssd-config", "ldap-sssd-config"))
    ]
    messages = check("slinky-references", *without_keys)
    assert sum("slurmKeyRef names Secret 'slinky-hpc-auth-slurm'" in m for m in messages) == 2  # Controller, Accounting
    assert sum("sssdConfRef names Secret 'sssd-config'" in m for m in messages) == 1
    orphan = copy.deepcopy(next(r for r in slinky_run.resources if r.type == SLINKY_NODESET).inputs)
    orphan["spec"]["controllerRef"]["name"] = "elsewhere"
    one(
        check("slinky-references", *[r for r in resources if r.resource_type != SLINKY_NODESET], resource(SLINKY_NODESET, orphan)),
        "points at Controller 'elsewhere'",
    )


def test_slinky_loginset_exposure(slinky_run):
    loginset = copy.deepcopy(next(r for r in slinky_run.resources if r.type == SLINKY_LOGINSET).inputs)
    firewalled = {"nodePortsFirewalled": True}
    assert check("restricted-load-balancers", resource(SLINKY_LOGINSET, loginset), config=firewalled) == []
    one(
        check("restricted-load-balancers", resource(SLINKY_LOGINSET, loginset)),
        "LoginSet slinky-hpc/slinky-hpc-login is a LoadBalancer with node ports",
    )
    del loginset["spec"]["service"]["spec"]["loadBalancerSourceRanges"]
    one(
        check("restricted-load-balancers", resource(SLINKY_LOGINSET, loginset), config=firewalled), "LoginSet slinky-hpc/slinky-hpc-login exposes SSH"
    )
    loginset["spec"]["service"]["metadata"] = {"annotations": {"service.beta.kubernetes.io/aws-load-balancer-internal": "true"}}
    assert check("restricted-load-balancers", resource(SLINKY_LOGINSET, loginset), config={**firewalled, "cloud": "aws"}) == []


def test_slinky_demand_counts_every_cr(slinky_run):
    demand = stack_demand(slinky_resources(slinky_run))
    assert demand.totals["gpus"] == 32 and demand.totals["loadBalancers"] == 1
    labels = " ".join(part for parts in demand.parts.values() for _, part in parts)
    for kind in ("Controller", "NodeSet", "LoginSet", "Accounting", "RestApi", "MariaDB"):
        assert kind in labels, kind


# ---------------------------------------------------------------------------
# job-confinement


def test_job_confinement_passes_every_operators_rendering(ack_resources):
    assert check("job-confinement", *ack_resources) == []
    for stack in ("prod-hcm", "staging-hanoi", "dev-lab"):
        config = parse_config(stack_config(stack))
        rendered = operator_module(config).render(config)
        resources = as_resources(rendered, {"Controller", "SlurmCluster", "ConfigMap"})
        assert {r.resource_type for r in resources} & {SLINKY_CONTROLLER, SLURM_CLUSTER}, stack
        assert check("job-confinement", *resources) == [], stack


def test_job_confinement_flags_acks_and_slinkys_renders_of_before(ack_resources):
    cluster = next(r for r in ack_resources if r.resource_type == ACK_SLURM_CLUSTER)
    config_map = copy.deepcopy(dict(next(r for r in ack_resources if r.resource_type == CONFIG_MAP and "slurm.conf" in r.props["data"]).props))
    before = config_map["data"]["slurm.conf"].replace(
        "ProctrackType=proctrack/cgroup\nTaskPlugin=task/cgroup,task/affinity", "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none"
    )
    config_map["data"] = {"slurm.conf": before, "gres.conf": config_map["data"]["gres.conf"]}
    message = one(check("job-confinement", cluster, resource(CONFIG_MAP, config_map)), "SlurmCluster slurm/ack-slurm-cluster-1 workerGroupSpecs[a10]")
    assert "ProctrackType=proctrack/linuxproc: ProctrackType must stay proctrack/cgroup" in message
    assert "TaskPlugin=task/none: TaskPlugin must include task/cgroup" in message and "no cgroup.conf of this stack" in message

    config = parse_config(stack_config("prod-hcm"))
    resources = as_resources(slinky.render(config), {"Controller", "ConfigMap"})
    controller = copy.deepcopy(dict(next(r for r in resources if r.resource_type == SLINKY_CONTROLLER).props))
    controller["spec"]["extraConf"] = "GresTypes=gpu"
    files = copy.deepcopy(dict(next(r for r in resources if r.resource_type == CONFIG_MAP).props))
    files["data"]["cgroup.conf"] = "CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\nConstrainDevices=no\n"
    message = one(check("job-confinement", resource(SLINKY_CONTROLLER, controller), resource(CONFIG_MAP, files)), "Controller slinky-hpc/slinky-hpc")
    assert "no ProctrackType" in message and "no TaskPlugin" in message
    assert "ConstrainCores is not yes; ConstrainDevices is not yes; ConstrainRAMSpace is not yes" in message


def test_job_confinement_flags_soperator_custom_config_that_undoes_its_own():
    config = parse_config(stack_config("staging-hanoi"))
    cluster = copy.deepcopy(soperator4.slurm_cluster_manifest(config))
    cluster["spec"]["customSlurmConfig"] = "MaxJobCount=5000\nTaskPlugin=task/affinity"
    cluster["spec"]["customCgroupConfig"] = "ConstrainDevices=no\nAllowedRAMSpace=100"
    message = one(check("job-confinement", resource(SLURM_CLUSTER, cluster)), "SlurmCluster")
    assert "TaskPlugin=task/affinity: TaskPlugin must include task/cgroup" in message and "ConstrainDevices is not yes" in message
    # Keys customCgroupConfig leaves to the operator keep its own yes.
    assert "ConstrainCores is not yes" not in message

"""The policy pack (policies/): every rule against compliant and violating inputs,
and the whole mocked program of every example stack against its policy config.

Inputs are wrapped in the SDK's unknown-checking proxies, so the rules see the
same read-only Mapping/Sequence objects the policy engine hands them.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import sys
from typing import Any, Optional

import jsonschema
import pytest
from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import unknown_checking_proxy

from components.config import ConfigError, PlatformConfig, parse_config
from components.identity.clients import ldap_conf, nslcd_conf, sssd_conf
from components.identity.server import ldap_statefulset
from components.platform import build_platform
from components.render.storage import claim_manifest, data_volumes, static_volume_manifest
from components.slurm.soperator1 import restricted_login_service, slurm_cluster_manifest
from tests.harness import ROOT, example_stacks, run_under_mocks, stack_config
from tools import policy_configs as generated_policy_configs

sys.path.insert(0, str(ROOT / "policies"))

from slurm_rules import kube_rules  # noqa: E402

from slurm_policies import ALL_POLICIES, quantity  # noqa: E402
from slurm_policies.quota import stack_demand  # noqa: E402

POLICIES = {policy.name: policy for policy in ALL_POLICIES}
CONFIG_DIR = ROOT / "policies" / "config"

PVC = "kubernetes:core/v1:PersistentVolumeClaim"
PV = "kubernetes:core/v1:PersistentVolume"
SERVICE = "kubernetes:core/v1:Service"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
SECRET = "kubernetes:core/v1:Secret"
STATEFUL_SET = "kubernetes:apps/v1:StatefulSet"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
CRON_JOB = "kubernetes:batch/v1:CronJob"
SLURM_CLUSTER = "kubernetes:slurm.nebius.ai/v1:SlurmCluster"
SOPERATOR_NODESET = "kubernetes:slurm.nebius.ai/v1alpha1:NodeSet"
ACK_SLURM_CLUSTER = "kubernetes:kai.alibabacloud.com/v1:SlurmCluster"
SLINKY_CONTROLLER = "kubernetes:slinky.slurm.net/v1beta1:Controller"
SLINKY_NODESET = "kubernetes:slinky.slurm.net/v1beta1:NodeSet"
CHART = "kubernetes:helm.sh/v4:Chart"
RELEASE = "kubernetes:helm.sh/v3:Release"
GI = 2**30


# ---------------------------------------------------------------------------
# Harness: build what the engine would pass, collect what the rules report.


def options(protect: bool = False) -> PolicyResourceOptions:
    return PolicyResourceOptions(protect, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], None)


def resource(type_: str, props: dict[str, Any], name: Optional[str] = None, protect: bool = False) -> PolicyResource:
    name = name or props.get("metadata", {}).get("name") or type_.rsplit(":", 1)[-1].lower()
    return PolicyResource(
        type_,
        unknown_checking_proxy(copy.deepcopy(props)),
        f"urn:pulumi:test::slurm-platform::{type_}::{name}",
        name,
        options(protect),
        None,
        None,
        [],
        {},
    )


def check(policy_name: str, *resources: PolicyResource, config: Optional[dict[str, Any]] = None) -> list[str]:
    """Run one policy like the engine does; return the violation messages."""
    policy = POLICIES[policy_name]
    messages: list[str] = []

    def report(message: str, urn: Optional[str] = None) -> None:
        assert message and "Fix: " in message, f"{policy_name}: message without remediation: {message!r}"
        messages.append(message)

    if isinstance(policy, StackValidationPolicy):
        policy.validate(StackValidationArgs(list(resources), config or {}), report)
    else:
        assert isinstance(policy, ResourceValidationPolicy)
        for r in resources:
            policy.validate(ResourceValidationArgs(r.resource_type, r.props, r.urn, r.name, r.opts, None, config or {}), report)
    return messages


def one(messages: list[str], *fragments: str) -> str:
    assert len(messages) == 1, messages
    for fragment in fragments:
        assert fragment in messages[0], (fragment, messages[0])
    return messages[0]


def policy_configs(env: str) -> dict[str, Any]:
    return json.loads((CONFIG_DIR / f"{env}.json").read_text())


def config_for(env: str, policy_name: str) -> dict[str, Any]:
    value = policy_configs(env).get(policy_name, {})
    return {k: v for k, v in value.items() if k != "enforcementLevel"} if isinstance(value, dict) else {}


# ---------------------------------------------------------------------------
# Fixtures: the manifests our components build for prod-hanoi.


@pytest.fixture(scope="module")
def hanoi():
    return parse_config(stack_config("prod-hanoi"))


@pytest.fixture
def cluster(hanoi):
    return slurm_cluster_manifest(hanoi)


@pytest.fixture
def claims(hanoi):
    return {v.claim_name: claim_manifest(v, hanoi.cluster.namespace, hanoi.storage.storage_class.name) for v in data_volumes(hanoi)}


def stack(cluster: dict[str, Any], claims: dict[str, dict[str, Any]], *extra: PolicyResource) -> list[PolicyResource]:
    return [resource(SLURM_CLUSTER, cluster), *(resource(PVC, c, protect=True) for c in claims.values()), *extra]


def source(cluster: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in cluster["spec"]["volumeSources"] if s["name"] == name)


def nodes(cluster: dict[str, Any]) -> dict[str, Any]:
    return cluster["spec"]["slurmNodes"]


OPENSTACK_INTERNAL = "service.beta.kubernetes.io/openstack-internal-load-balancer"
ALIBABA_ADDRESS_TYPE = "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-address-type"


@pytest.mark.parametrize(
    "stack, login, top, refused_expected",
    [
        ("prod-hanoi", {}, {}, False),
        ("prod-hanoi", {"allowedSourceRanges": ["0.0.0.0/1"]}, {}, True),
        ("prod-hanoi", {"allowedSourceRanges": ["2000::/3"]}, {}, True),
        ("prod-hanoi", {"allowedSourceRanges": ["11.0.0.0/8", "12.0.0.0/8"]}, {}, True),
        ("prod-hanoi", {"allowedSourceRanges": ["0.0.0.0/1"], "allowBroadSourceRanges": True}, {}, False),
        ("prod-hanoi", {"nodePortsFirewalled": False}, {}, True),
        ("prod-hangzhou", {}, {}, False),
        ("prod-hangzhou", {"serviceAnnotations": {OPENSTACK_INTERNAL: "true"}}, {}, True),
        ("prod-hangzhou", {"serviceAnnotations": {ALIBABA_ADDRESS_TYPE: "internet"}}, {}, True),
        ("prod-hangzhou", {"serviceAnnotations": {ALIBABA_ADDRESS_TYPE: "intranet"}}, {"cloud": "fpt"}, True),
        ("prod-hcm", {}, {}, False),
        ("prod-hcm", {"allowedSourceRanges": ["0.0.0.0/1"]}, {}, True),
        ("prod-hcm", {"nodePortsFirewalled": False}, {}, True),
        (
            "prod-hcm",
            {
                "allowedSourceRanges": [],
                "serviceAnnotations": {OPENSTACK_INTERNAL: "false", "service.beta.kubernetes.io/aws-load-balancer-internal": "true"},
            },
            {},
            True,
        ),
        ("staging-hangzhou", {"allowedSourceRanges": [], "serviceAnnotations": {ALIBABA_ADDRESS_TYPE: "internet"}}, {"environment": "prod"}, True),
        ("staging-hangzhou", {"allowedSourceRanges": []}, {"environment": "prod"}, False),  # ACK's intranet default
    ],
)
def test_config_and_policy_agree_on_exposure(stack, login, top, refused_expected):
    """The stack config refuses a production login exposure exactly when the pack, configured like the stack, does."""
    raw = copy.deepcopy(stack_config(stack))
    raw["slurm"]["login"] = {**raw["slurm"]["login"], **login}
    raw.update(top)
    try:
        parse_config(raw)
        refused: list[str] = []
    except ConfigError as error:
        refused = str(error).splitlines()[1:]
        assert all(line.strip().startswith(("slurm-platform:slurm.login.", "slurm-platform:cloud:")) for line in refused), refused
    # The same stack with the rules across fields skipped, so it renders what the config would have refused.
    config = PlatformConfig.model_validate(raw)
    run = run_under_mocks(lambda: build_platform(config), raw, stack=stack)
    mirrored = {
        "cloud": config.cloud,
        "allowBroadSourceRanges": config.slurm.login.allow_broad_source_ranges,
        "nodePortsFirewalled": config.slurm.login.node_ports_firewalled,
    }
    violations = check("restricted-load-balancers", *(as_policy_resource(r) for r in run.resources), config=mirrored)
    assert bool(refused) == refused_expected, refused
    assert bool(refused) == bool(violations), (refused, violations)


# ---------------------------------------------------------------------------
# ldap-requires-tls


def test_ldap_requires_tls_on_the_client_config_and_the_server():
    plain = parse_config(stack_config("dev")).ldap
    tls = parse_config(stack_config("prod-hanoi")).ldap
    for ldap, found in ((plain, 1), (tls, 0)):
        config_map = {"metadata": {"name": "ldap-client-config", "namespace": "fpt-hpc"}, "data": {"ldap.conf": ldap_conf(ldap, "fpt-hpc")}}
        messages = check("ldap-requires-tls", resource(CONFIG_MAP, config_map))
        assert len(messages) == found, messages
    one(
        check(
            "ldap-requires-tls",
            resource(CONFIG_MAP, {"metadata": {"name": "c"}, "data": {"ldap.conf": "BASE\tdc=x\nURI\tldap://ldap-service:389\n"}}),
        ),
        "ConfigMap c points the LDAP clients at ldap://ldap-service:389: binds and lookups cross the network unencrypted",
    )
    # The server: with TLS, TLS required; without TLS there is nothing to require.
    assert check("ldap-requires-tls", resource(STATEFUL_SET, ldap_statefulset(tls, "fpt-hpc"))) == []
    assert check("ldap-requires-tls", resource(STATEFUL_SET, ldap_statefulset(plain, "fpt-hpc"))) == []
    lenient = ldap_statefulset(tls, "fpt-hpc")
    container = lenient["spec"]["template"]["spec"]["containers"][0]
    required = [e for e in container["env"] if e["name"] == "LDAP_REQUIRE_TLS"]
    assert required == [{"name": "LDAP_REQUIRE_TLS", "value": "yes"}]
    for value in ("no", None):
        container["env"] = [e for e in container["env"] if e["name"] != "LDAP_REQUIRE_TLS"] + (
            [{"name": "LDAP_REQUIRE_TLS", "value": value}] if value else []
        )
        one(
            check("ldap-requires-tls", resource(STATEFUL_SET, lenient)),
            "fpt-hpc/ldap serves LDAP with TLS but does not require it (spec.template.spec container openldap, LDAP_REQUIRE_TLS is not yes)",
        )


@pytest.mark.parametrize("stack", ["prod-hanoi", "prod-hcm", "prod-hoalac", "prod-hangzhou"])
@pytest.mark.parametrize("tls", [True, False])
def test_config_and_policy_agree_on_ldap_tls(stack, tls):
    raw = copy.deepcopy(stack_config(stack))
    raw["ldap"] = {**raw.get("ldap", {}), "tls": raw["ldap"]["tls"] if tls else {"enabled": False}}
    try:
        parse_config(raw)
        refused: list[str] = []
    except ConfigError as error:
        refused = str(error).splitlines()[1:]
        assert all(line.strip().startswith("slurm-platform:ldap.") for line in refused), refused
    assert bool(refused) == (not tls)
    config = PlatformConfig.model_validate(raw)
    run = run_under_mocks(lambda: build_platform(config), raw, stack=stack)
    violations = check("ldap-requires-tls", *(as_policy_resource(r) for r in run.resources))
    if tls:
        assert violations == []
    else:
        # The clients' ConfigMap points at ldap://: the read-only bind would cross the network in clear.
        assert violations and all("binds and lookups cross the network unencrypted" in v for v in violations)
        assert any("points the LDAP clients at ldap://" in v for v in violations), violations


# ---------------------------------------------------------------------------
# The pack itself


def test_every_policy_is_named_described_and_has_a_default_level():
    assert len(POLICIES) == len(ALL_POLICIES) == 18
    for policy in ALL_POLICIES:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", policy.name), policy.name
        assert policy.description.endswith(".")
        assert policy.enforcement_level == EnforcementLevel.MANDATORY


def test_pack_entry_point_is_thin_and_named():
    main = (ROOT / "policies" / "__main__.py").read_text()
    assert 'name="slurm-platform-guardrails"' in main and "policies=ALL_POLICIES" in main
    assert "def " not in main
    manifest = (ROOT / "policies" / "PulumiPolicy.yaml").read_text()
    assert "name: python" in manifest and "virtualenv: venv" in manifest


@pytest.mark.parametrize(
    "text, expected",
    [
        ("40Gi", 40 * GI),
        ("2Ti", 2 * 2**40),
        ("512Mi", 512 * 2**20),
        ("1Ki", 1024),
        ("110000m", 110.0),
        ("500m", 0.5),
        ("1.5", 1.5),
        ("8", 8.0),
        (8, 8.0),
        ("500M", 5e8),
        ("1k", 1000.0),
        ("2G", 2e9),
        ("1T", 1e12),
        ("1e3", 1000.0),
    ],
)
def test_quantity(text, expected):
    assert quantity(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["", "abc", "10GB", "Gi", "1.2.3", True])
def test_quantity_rejects_garbage(text):
    with pytest.raises(ValueError):
        quantity(text)


@pytest.mark.parametrize(
    "text, binary, written_back",
    [
        # Go's Quantity.String() (apimachinery quantity_test.go's canonical forms).
        ("112000m", False, "112"),
        ("1500m", False, "1500m"),
        ("0.5", False, "500m"),
        ("1000", False, "1k"),
        ("1e3", False, "1k"),
        ("8", False, "8"),
        ("0", True, "0"),
        ("1280000Mi", True, "1250Gi"),
        ("1.5Gi", True, "1536Mi"),
        ("160000Mi", True, "160000Mi"),
        ("1024", True, "1Ki"),
        ("512", True, "512"),  # under 1024: decimal SI
        ("1536", True, "1536"),
        ("1.0001Ki", True, "1024102400u"),  # not whole bytes: decimal SI
    ],
)
def test_canonical_quantity_is_what_kubernetes_writes_back(text, binary, written_back):
    value = kube_rules.parse_quantity(text)
    assert kube_rules.canonical_quantity(value, binary) == written_back
    assert kube_rules.parse_quantity(written_back) == value


def test_canonical_quantity_rounds_up_below_nano_as_parse_quantity_does():
    assert kube_rules.canonical_quantity(kube_rules.parse_quantity("1e-10")) == "1n"


# ---------------------------------------------------------------------------
# slurm-volume-claim-names


def test_claim_names_accept_our_cluster(cluster):
    assert check("slurm-volume-claim-names", resource(SLURM_CLUSTER, cluster)) == []


def test_claim_names_reject_a_renamed_jail(cluster):
    source(cluster, "jail")["persistentVolumeClaim"]["claimName"] = "my-jail"
    one(
        check("slurm-volume-claim-names", resource(SLURM_CLUSTER, cluster)),
        "volumeSource 'jail' claims 'my-jail', but soperator and the FPT guide expect 'jail-pvc'",
        "Fix: name the PersistentVolumeClaim 'jail-pvc'",
    )


def test_claim_names_reject_a_renamed_spool(cluster):
    source(cluster, "controller-spool")["persistentVolumeClaim"]["claimName"] = "spool"
    one(
        check("slurm-volume-claim-names", resource(SLURM_CLUSTER, cluster)),
        "volumeSource 'controller-spool' claims 'spool'",
        "'controller-spool-pvc'",
    )


def test_claim_names_reject_a_submount_off_pattern(cluster):
    source(cluster, "mlperf-sd")["persistentVolumeClaim"]["claimName"] = "mlperf-data"
    one(
        check("slurm-volume-claim-names", resource(SLURM_CLUSTER, cluster)),
        "volumeSource 'mlperf-sd' claims 'mlperf-data', but submount claims are named 'jail-submount-mlperf-sd-pvc'",
    )


def test_claim_names_submount_pattern_is_configurable(cluster):
    source(cluster, "mlperf-sd")["persistentVolumeClaim"]["claimName"] = "data-mlperf-sd"
    config = {"submountClaimPattern": "data-{name}"}
    assert check("slurm-volume-claim-names", resource(SLURM_CLUSTER, cluster), config=config) == []
    assert check("slurm-volume-claim-names", resource(SLURM_CLUSTER, cluster))


def test_claim_names_need_a_jail_source(cluster):
    cluster["spec"]["volumeSources"] = [s for s in cluster["spec"]["volumeSources"] if s["name"] != "jail"]
    one(check("slurm-volume-claim-names", resource(SLURM_CLUSTER, cluster)), "has no volumeSource named 'jail'", "claimName: jail-pvc")


def test_claim_names_need_the_jail_on_a_claim(cluster):
    source(cluster, "jail").pop("persistentVolumeClaim")
    source(cluster, "jail")["hostPath"] = {"path": "/srv/jail"}
    one(check("slurm-volume-claim-names", resource(SLURM_CLUSTER, cluster)), "volumeSource 'jail' is not a persistentVolumeClaim")


# ---------------------------------------------------------------------------
# slurm-data-volume-shape


def test_data_volume_shape_accepts_our_claims(cluster, claims):
    assert check("slurm-data-volume-shape", *stack(cluster, claims)) == []


def test_data_volume_shape_rejects_a_read_write_once_jail(cluster, claims):
    claims["jail-pvc"]["spec"]["accessModes"] = ["ReadWriteOnce"]
    one(
        check("slurm-data-volume-shape", *stack(cluster, claims)),
        "PersistentVolumeClaim fpt-hpc/jail-pvc (Slurm volume 'jail') has accessModes ['ReadWriteOnce']",
        "must be ReadWriteMany",
    )


def test_data_volume_shape_rejects_read_write_once_spool_and_submount(cluster, claims):
    claims["controller-spool-pvc"]["spec"]["accessModes"] = ["ReadWriteOnce"]
    claims["jail-submount-mlperf-sd-pvc"]["spec"]["accessModes"] = ["ReadOnlyMany"]
    messages = check("slurm-data-volume-shape", *stack(cluster, claims))
    assert len(messages) == 2
    assert "controller-spool-pvc (Slurm volume 'controller-spool')" in messages[0]
    assert "jail-submount-mlperf-sd-pvc (Slurm volume 'mlperf-sd') has accessModes ['ReadOnlyMany']" in messages[1]


def test_data_volume_shape_rejects_a_small_jail(cluster, claims):
    claims["jail-pvc"]["spec"]["resources"]["requests"]["storage"] = "20Gi"
    one(
        check("slurm-data-volume-shape", *stack(cluster, claims)),
        "fpt-hpc/jail-pvc (the jail) requests 20Gi (20Gi), less than 40Gi",
        "Fix: request at least 40Gi",
    )


def test_data_volume_shape_minimum_is_configurable(cluster, claims):
    assert check("slurm-data-volume-shape", *stack(cluster, claims), config={"minJailSize": "2Ti"}) == []
    one(check("slurm-data-volume-shape", *stack(cluster, claims), config={"minJailSize": "3Ti"}), "requests 2Ti (2048Gi), less than 3Ti")


def test_data_volume_shape_rejects_an_unreadable_jail_size(cluster, claims):
    claims["jail-pvc"]["spec"]["resources"]["requests"]["storage"] = "lots"
    one(check("slurm-data-volume-shape", *stack(cluster, claims)), "requests storage 'lots', not a Kubernetes quantity")


def test_data_volume_shape_follows_the_jail_source_whatever_its_claim_is_called(cluster, claims):
    source(cluster, "jail")["persistentVolumeClaim"]["claimName"] = "custom-jail"
    claims["jail-pvc"]["metadata"]["name"] = "custom-jail"
    claims["jail-pvc"]["spec"]["resources"]["requests"]["storage"] = "10Gi"
    one(check("slurm-data-volume-shape", *stack(cluster, claims)), "fpt-hpc/custom-jail (the jail) requests 10Gi")


def test_data_volume_shape_checks_data_claims_by_name_without_a_cluster(claims):
    claims["jail-submount-mlperf-sd-pvc"]["spec"]["accessModes"] = ["ReadWriteOnce"]
    other = {"metadata": {"name": "ldap-data", "namespace": "fpt-hpc"}, "spec": {"accessModes": ["ReadWriteOnce"]}}
    messages = check("slurm-data-volume-shape", *(resource(PVC, c) for c in claims.values()), resource(PVC, other))
    one(messages, "jail-submount-mlperf-sd-pvc (Slurm volume 'data')")


# ---------------------------------------------------------------------------
# slurm-volume-references


def test_volume_references_accept_our_stack(cluster, claims):
    assert check("slurm-volume-references", *stack(cluster, claims)) == []


def test_volume_references_reject_an_unknown_submount_source(cluster, claims):
    nodes(cluster)["worker"]["volumes"]["jailSubMounts"][0]["volumeSourceName"] = "datasets"
    one(
        check("slurm-volume-references", *stack(cluster, claims)),
        "spec.slurmNodes.worker.volumes.jailSubMounts[0] refers to volumeSource 'datasets', which spec.volumeSources "
        "does not define (defined: controller-spool, jail, mlperf-sd)",
        "Fix: add a spec.volumeSources entry named 'datasets'",
    )


def test_volume_references_reject_a_missing_spool_source(cluster, claims):
    cluster["spec"]["volumeSources"] = [s for s in cluster["spec"]["volumeSources"] if s["name"] != "controller-spool"]
    del claims["controller-spool-pvc"]
    one(
        check("slurm-volume-references", *stack(cluster, claims)),
        "spec.slurmNodes.controller.volumes.spool refers to volumeSource 'controller-spool'",
    )


def test_volume_references_reject_an_undeclared_claim(cluster, claims):
    del claims["jail-submount-mlperf-sd-pvc"]
    one(
        check("slurm-volume-references", *stack(cluster, claims)),
        "volumeSource 'mlperf-sd' claims 'fpt-hpc/jail-submount-mlperf-sd-pvc', which this stack does not declare",
        "preExistingClaims",
    )


@pytest.mark.parametrize("listed", ["jail-submount-mlperf-sd-pvc", "fpt-hpc/jail-submount-mlperf-sd-pvc"])
def test_volume_references_accept_pre_existing_claims(cluster, claims, listed):
    del claims["jail-submount-mlperf-sd-pvc"]
    assert check("slurm-volume-references", *stack(cluster, claims), config={"preExistingClaims": [listed]}) == []


def test_volume_references_ignore_a_claim_in_another_namespace(cluster, claims):
    claims["jail-pvc"]["metadata"]["namespace"] = "elsewhere"
    one(check("slurm-volume-references", *stack(cluster, claims)), "claims 'fpt-hpc/jail-pvc'")


# ---------------------------------------------------------------------------
# slurm-jail-submounts-consistent


def test_submounts_consistent_accept_our_cluster(cluster):
    assert check("slurm-jail-submounts-consistent", resource(SLURM_CLUSTER, cluster)) == []


def test_submounts_consistent_reject_a_worker_only_submount(cluster):
    nodes(cluster)["login"]["volumes"]["jailSubMounts"] = []
    one(
        check("slurm-jail-submounts-consistent", resource(SLURM_CLUSTER, cluster)),
        "jailSubMount 'mlcommons-sd-bench-data' (/mnt/data-hps) is mounted on worker but not on login",
    )


def test_submounts_consistent_reject_different_paths(cluster):
    nodes(cluster)["login"]["volumes"]["jailSubMounts"][0]["mountPath"] = "/data"
    one(
        check("slurm-jail-submounts-consistent", resource(SLURM_CLUSTER, cluster)),
        "jailSubMount 'mlcommons-sd-bench-data' is mounted at /mnt/data-hps on worker but /data on login",
    )


def test_submounts_consistent_reject_different_sources(cluster):
    nodes(cluster)["worker"]["volumes"]["jailSubMounts"][0]["volumeSourceName"] = "jail"
    one(
        check("slurm-jail-submounts-consistent", resource(SLURM_CLUSTER, cluster)),
        "uses volumeSource 'jail' on worker but 'mlperf-sd' on login",
    )


# ---------------------------------------------------------------------------
# slurm-region-quota

HANOI_QUOTA = {"vcpu": 1440, "memoryGi": 17784, "gpus": 96, "storageGi": 6144, "loadBalancers": 2, "pvcs": 24}


def quota_config(**quota):
    return {"region": "hanoi", "quotas": {"hanoi": {**HANOI_QUOTA, **quota}}}


def test_quota_accepts_the_cluster_within_quota(cluster, claims):
    assert check("slurm-region-quota", *stack(cluster, claims), config=quota_config()) == []


def test_quota_reports_every_exceeded_dimension_in_one_message(cluster, claims):
    message = one(
        check("slurm-region-quota", *stack(cluster, claims), config=quota_config(vcpu=1000, gpus=64)),
        "exceeds the 'hanoi' quota for 2 dimension(s)",
        # controller 2 + worker 12 x 112 + login 2 x 3.5 + exporter 1.25 + slurmdbd/munge 2 + mariadb 1
        "vcpu: asked 1357.25 > allowed 1000",
        "gpus: asked 96 > allowed 64",
        "SlurmCluster fpt-hpc/fpt-hpc worker: 12 x (112 CPU, 1224Gi, 8 GPUs)",
        "Fix: ",
        "raise the 'hanoi' quota (slurm-platform:regionQuota, then make schema)",
    )
    assert "memoryGi" not in message


def test_quota_counts_memory_storage_and_claims(cluster, claims):
    # storage: jail 2048 + spool 10 + submount 500 + 12 worker spools x 120 + mariadb 50 = 4048Gi in 16 claims
    message = one(
        check("slurm-region-quota", *stack(cluster, claims), config=quota_config(memoryGi=14000, storageGi=4000, pvcs=15)),
        "memoryGi: asked 14717.23 > allowed 14000",
        "storageGi: asked 4048 > allowed 4000",
        "pvcs: asked 16 > allowed 15",
        "SlurmCluster fpt-hpc/fpt-hpc worker spool volumes: 12 x 120Gi",
    )
    assert "vcpu" not in message


def test_quota_counts_load_balancers(cluster, claims):
    nodes(cluster)["login"]["sshdServiceType"] = "LoadBalancer"
    lb = {"metadata": {"name": "ssh", "namespace": "fpt-hpc"}, "spec": {"type": "LoadBalancer"}}
    internal = {"metadata": {"name": "ldap", "namespace": "fpt-hpc"}, "spec": {"type": "ClusterIP"}}
    one(
        check(
            "slurm-region-quota", *stack(cluster, claims, resource(SERVICE, lb), resource(SERVICE, internal)), config=quota_config(loadBalancers=1)
        ),
        "loadBalancers: asked 2 > allowed 1",
        "login sshdServiceType LoadBalancer",
        "Service fpt-hpc/ssh",
    )


def test_quota_counts_workloads_replicas_and_claim_templates():
    statefulset = {
        "metadata": {"name": "db", "namespace": "x"},
        "spec": {
            "replicas": 3,
            "template": {
                "spec": {
                    "containers": [
                        {"name": "db", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}}},
                        {"name": "sidecar", "resources": {"limits": {"cpu": "1", "memory": "512Mi"}}},
                    ]
                }
            },
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"resources": {"requests": {"storage": "100Gi"}}}}],
        },
    }
    deployment = {
        "metadata": {"name": "trainer"},
        "spec": {"template": {"spec": {"containers": [{"name": "t", "resources": {"limits": {"nvidia.com/gpu": 2, "cpu": "4"}}}]}}},
    }
    demand = stack_demand([resource(STATEFUL_SET, statefulset), resource(DEPLOYMENT, deployment)])
    assert demand.totals["vcpu"] == pytest.approx(3 * 1.5 + 4)
    assert demand.totals["memoryGi"] == pytest.approx(3 * 1.5)
    assert demand.totals["gpus"] == 2
    assert demand.totals["storageGi"] == 300 and demand.totals["pvcs"] == 3
    one(
        check("slurm-region-quota", resource(STATEFUL_SET, statefulset), config={"region": "r", "quotas": {"r": {"storageGi": 250}}}),
        "storageGi: asked 300 > allowed 250",
        "StatefulSet x/db volumeClaimTemplate: 3 x 100Gi",
    )


def test_quota_skips_disabled_accounting_and_exporter(cluster, claims):
    full = stack_demand(stack(cluster, claims)).totals["vcpu"]
    nodes(cluster)["accounting"]["enabled"] = False
    del nodes(cluster)["exporter"]["enabled"]  # the CRD default is false
    assert stack_demand(stack(cluster, claims)).totals["vcpu"] == pytest.approx(full - 2 - 1 - 1.25)


def test_quota_counts_mariadb_replicas_and_storage_size(cluster, claims):
    mariadb = nodes(cluster)["accounting"]["mariadbOperator"]
    mariadb["replicas"] = 3
    mariadb["storage"]["size"] = "100Gi"  # supersedes the template's 50Gi
    demand = stack_demand(stack(cluster, claims))
    assert demand.totals["vcpu"] == pytest.approx(1357.25 + 2)
    assert demand.totals["storageGi"] == pytest.approx(4048 - 50 + 300)


def test_quota_without_quotas_or_region_is_silent(cluster, claims):
    assert check("slurm-region-quota", *stack(cluster, claims)) == []


def test_quota_reports_a_region_with_no_quota_declared(cluster, claims):
    # What make schema writes for a stack without slurm-platform:regionQuota: its region, no quota.
    one(
        check("slurm-region-quota", *stack(cluster, claims), config={"region": "hcm", "quotas": {}}),
        "no quota is declared for region 'hcm'",
        "Fix: declare the account's quota in the stack config (slurm-platform:regionQuota) and run make schema",
    )


def test_quota_needs_a_quota_for_the_selected_region(cluster, claims):
    one(
        check("slurm-region-quota", *stack(cluster, claims), config={"region": "hcm", "quotas": {"hanoi": HANOI_QUOTA}}),
        "no quota for region 'hcm' (quotas exist for hanoi)",
        "or add quotas.hcm",
    )


def test_quota_needs_a_region_when_several_are_configured(cluster, claims):
    one(
        check("slurm-region-quota", *stack(cluster, claims), config={"quotas": {"hanoi": HANOI_QUOTA, "hcm": HANOI_QUOTA}}),
        "quotas are set for hanoi, hcm but no region is selected",
    )
    assert check("slurm-region-quota", *stack(cluster, claims), config={"quotas": {"hanoi": HANOI_QUOTA}}) == []


# ---------------------------------------------------------------------------
# slurm-worker-node-fit

HANOI_POOLS = {
    "h100": {"cpu": 112, "memoryGi": 1250, "gpus": 8, "nodes": 8},
    "h200": {"cpu": 112, "memoryGi": 1850, "gpus": 8, "nodes": 4},
    "system": {"cpu": 32, "memoryGi": 128, "gpus": 0, "nodes": 3},
}


def fit(cluster, pools=HANOI_POOLS):
    return check("slurm-worker-node-fit", resource(SLURM_CLUSTER, cluster), config={"nodePools": pools})


def test_worker_fit_accepts_twelve_workers_on_twelve_gpu_nodes(cluster):
    assert fit(cluster) == []


def test_worker_fit_rejects_a_worker_larger_than_any_node(cluster):
    nodes(cluster)["worker"]["slurmd"]["resources"]["cpu"] = "120"
    one(
        fit(cluster),
        "a worker pod asks 122 CPU, 1224Gi, 8 GPUs (slurmd + munge), more than the largest GPU node allocatable, "
        "pool 'h200' (112 CPU, 1850Gi, 8 GPUs per node)",
        "Fix: lower slurm.worker.slurmd",
    )


def test_worker_fit_rejects_more_gpus_than_a_node_has(cluster):
    nodes(cluster)["worker"]["slurmd"]["resources"]["nvidia.com/gpu"] = "16"
    one(fit(cluster), "16 GPUs (slurmd + munge), more than the largest GPU node")


def test_worker_fit_rejects_more_workers_than_gpu_nodes(cluster):
    nodes(cluster)["worker"]["size"] = 13
    one(
        fit(cluster),
        "worker size 13 exceeds the 12 GPU node(s) that can host a worker (h100: 8, h200: 4)",
        "Fix: set slurm.worker.size to at most 12",
    )


def test_worker_fit_counts_only_pools_the_worker_fits(cluster):
    nodes(cluster)["worker"]["slurmd"]["resources"]["memory"] = "1300Gi"
    one(fit(cluster), "worker size 12 exceeds the 4 GPU node(s) that can host a worker (h200: 4; pools too small for a worker: h100)")


def test_worker_fit_needs_a_gpu_pool(cluster):
    one(fit(cluster, {"system": HANOI_POOLS["system"]}), "nodePools has no GPU pool")


def test_worker_fit_without_pools_is_silent(cluster):
    nodes(cluster)["worker"]["size"] = 100
    assert check("slurm-worker-node-fit", resource(SLURM_CLUSTER, cluster)) == []


# ---------------------------------------------------------------------------
# restricted-load-balancers


FIREWALLED = {"nodePortsFirewalled": True}


def lb_service(spec=None, annotations=None, name="ssh"):
    return resource(
        SERVICE,
        {
            "metadata": {"name": name, "namespace": "fpt-hpc", "annotations": annotations or {}},
            "spec": {"type": "LoadBalancer", "selector": {"app.kubernetes.io/component": "login"}, **(spec or {})},
        },
    )


def test_load_balancers_accept_our_restricted_login_service(hanoi, cluster):
    service = restricted_login_service(hanoi)
    assert service is not None
    assert service["spec"]["type"] == "LoadBalancer" and nodes(cluster)["login"]["sshdServiceType"] == "NodePort"
    assert check("restricted-load-balancers", resource(SLURM_CLUSTER, cluster), resource(SERVICE, service), config=FIREWALLED) == []


def test_load_balancers_reject_an_open_service():
    one(
        check("restricted-load-balancers", lb_service()),
        "Service fpt-hpc/ssh is a LoadBalancer reachable from the internet: it has no loadBalancerSourceRanges and no private-LB annotation",
        "Fix: set spec.loadBalancerSourceRanges",
    )


def test_load_balancers_reject_an_open_source_range():
    one(
        check("restricted-load-balancers", lb_service({"loadBalancerSourceRanges": ["10.0.0.0/8", "0.0.0.0/0"]})),
        "loadBalancerSourceRanges ['10.0.0.0/8', '0.0.0.0/0'] together cover the whole IPv4 internet",
    )


@pytest.mark.parametrize(
    "cloud,annotations",
    [
        ("alibaba", {"service.beta.kubernetes.io/alibaba-cloud-loadbalancer-address-type": "intranet"}),
        ("fpt", {"service.beta.kubernetes.io/openstack-internal-load-balancer": "true"}),
        ("gcp", {"networking.gke.io/load-balancer-type": "Internal"}),
        ("azure", {"service.beta.kubernetes.io/azure-load-balancer-internal": "true"}),
        ("aws", {"service.beta.kubernetes.io/aws-load-balancer-scheme": "internal"}),
        ("fpt", {"service.beta.kubernetes.io/load-balancer-source-ranges": "203.0.113.0/24"}),
    ],
)
def test_load_balancers_accept_private_annotations(cloud, annotations):
    assert check("restricted-load-balancers", lb_service(annotations=annotations), config={**FIREWALLED, "cloud": cloud}) == []


@pytest.mark.parametrize(
    "ranges,family",
    [
        (["1.2.3.4/0"], "IPv4"),  # host bits do not narrow a /0
        (["0:0:0:0:0:0:0:0/0"], "IPv6"),
        (["0.0.0.0/1", "128.0.0.0/1"], "IPv4"),  # together: everything
        (["::ffff:0.0.0.0/96"], "IPv4"),  # every IPv4 host, IPv4-mapped
        (["10.0.0.0/8", "0000::/0"], "IPv6"),
    ],
)
def test_load_balancers_judge_ranges_by_what_they_cover(ranges, family):
    one(
        check("restricted-load-balancers", lb_service({"loadBalancerSourceRanges": ranges})),
        f"together cover the whole {family} internet",
    )


def test_load_balancers_accept_narrow_ranges_however_spelled():
    narrow = ["11.0.0.0/8", "203.0.113.0/24", "2001:db8::/33", "2400:cb00::/32"]
    assert check("restricted-load-balancers", lb_service({"loadBalancerSourceRanges": narrow}), config=FIREWALLED) == []


@pytest.mark.parametrize(
    "ranges,limit",
    [(["0.0.0.0/1"], "a /8 (IPv4)"), (["2000::/3"], "a /32 (IPv6)"), (["11.0.0.0/8", "12.0.0.0/8"], "a /8 (IPv4)")],
)
def test_load_balancers_reject_broad_ranges_unless_allowed(ranges, limit):
    one(
        check("restricted-load-balancers", lb_service({"loadBalancerSourceRanges": ranges}), config=FIREWALLED),
        f"loadBalancerSourceRanges {ranges} together reach more public addresses than {limit}, nearly the whole internet",
    )
    allowed = {**FIREWALLED, "allowBroadSourceRanges": True}
    assert check("restricted-load-balancers", lb_service({"loadBalancerSourceRanges": ranges}), config=allowed) == []


def test_load_balancers_an_internet_address_type_is_public():
    one(
        check(
            "restricted-load-balancers",
            lb_service(annotations={"service.beta.kubernetes.io/alibaba-cloud-loadbalancer-address-type": "internet"}),
            config={"cloud": "alibaba"},
        ),
        "no private-LB annotation",
    )


def test_load_balancers_reject_a_wrong_annotation_value():
    one(
        check(
            "restricted-load-balancers",
            lb_service(annotations={"service.beta.kubernetes.io/aws-load-balancer-scheme": "internet-facing"}),
            config={"cloud": "aws"},
        ),
        "no private-LB annotation",
    )


def test_load_balancers_count_only_the_clouds_own_private_annotation():
    openstack = {"service.beta.kubernetes.io/openstack-internal-load-balancer": "true"}
    assert check("restricted-load-balancers", lb_service(annotations=openstack), config=FIREWALLED) == []
    # The finding: OpenStack's key says public, an AWS key says private, on an FPT stack.
    conflicting = {
        "service.beta.kubernetes.io/openstack-internal-load-balancer": "false",
        "service.beta.kubernetes.io/aws-load-balancer-internal": "true",
    }
    found = check("restricted-load-balancers", lb_service(annotations=conflicting), config=FIREWALLED)
    assert len(found) == 2, found
    assert "has load-balancer annotations that contradict: service.beta.kubernetes.io/aws-load-balancer-internal is an annotation of aws" in found[0]
    assert "Service fpt-hpc/ssh is a LoadBalancer reachable from the internet" in found[1]
    found = check("restricted-load-balancers", lb_service(annotations=openstack), config={"cloud": "alibaba", "nodePortsFirewalled": True})
    assert len(found) == 2 and "is an annotation of fpt; this stack's cloud is alibaba" in found[0], found
    assert "no private-LB annotation" in found[1]


def test_load_balancers_node_ports_are_closed_or_firewalled(hanoi, cluster):
    restricted = restricted_login_service(hanoi)
    assert restricted is not None
    found = check("restricted-load-balancers", resource(SLURM_CLUSTER, cluster), resource(SERVICE, restricted))
    assert len(found) == 2, found
    assert "Service fpt-hpc/fpt-hpc-login-ssh is a LoadBalancer with node ports, open on every node" in found[0]
    assert "SlurmCluster fpt-hpc/fpt-hpc keeps its login Service fpt-hpc-login-svc on NodePort 30022 beside the restricted" in found[1]
    assert check("restricted-load-balancers", resource(SLURM_CLUSTER, cluster), resource(SERVICE, restricted), config=FIREWALLED) == []
    eni = {"service.beta.kubernetes.io/backend-type": "eni"}
    ranges = {"loadBalancerSourceRanges": ["203.0.113.0/24"]}
    one(
        check("restricted-load-balancers", lb_service(ranges, annotations=eni), config={"cloud": "alibaba"}),
        "Fix: set spec.allocateLoadBalancerNodePorts: false",
    )
    closed = lb_service({**ranges, "allocateLoadBalancerNodePorts": False}, annotations=eni)
    assert check("restricted-load-balancers", closed, config={"cloud": "alibaba"}) == []
    # soperator's own LoadBalancer cannot drop them: only the firewall covers it.
    nodes(cluster)["login"].update(
        sshdServiceType="LoadBalancer",
        sshdServiceAnnotations={"service.beta.kubernetes.io/alibaba-cloud-loadbalancer-address-type": "intranet", **eni},
    )
    one(check("restricted-load-balancers", resource(SLURM_CLUSTER, cluster), config={"cloud": "alibaba"}), "make sure the nodes' firewall admits")


def test_load_balancers_ignore_cluster_ip_services():
    internal = {"metadata": {"name": "ldap-service"}, "spec": {"type": "ClusterIP"}}
    assert check("restricted-load-balancers", resource(SERVICE, internal)) == []


def test_load_balancers_reject_a_public_slurm_login(cluster):
    nodes(cluster)["login"]["sshdServiceType"] = "LoadBalancer"
    one(
        check("restricted-load-balancers", resource(SLURM_CLUSTER, cluster)),
        "SlurmCluster fpt-hpc/fpt-hpc has sshdServiceType LoadBalancer: soperator creates Service fpt-hpc-login-svc with no source ranges",
        "Fix: set slurm.login.allowedSourceRanges",
    )


def test_load_balancers_accept_a_private_slurm_login():
    hangzhou = slurm_cluster_manifest(parse_config(stack_config("prod-hangzhou")))
    login = nodes(hangzhou)["login"]
    assert login["sshdServiceType"] == "LoadBalancer" and login["sshdServiceAnnotations"]
    assert check("restricted-load-balancers", resource(SLURM_CLUSTER, hangzhou), config={**FIREWALLED, "cloud": "alibaba"}) == []
    one(
        check("restricted-load-balancers", resource(SLURM_CLUSTER, hangzhou), config={"cloud": "alibaba"}),
        "SlurmCluster slurm/ack-hpc's login Service ack-hpc-login-svc is a LoadBalancer with node ports",
    )


def test_load_balancers_companion_service_passes_only_when_configured(cluster):
    nodes(cluster)["login"]["sshdServiceType"] = "LoadBalancer"
    companion = lb_service({"loadBalancerSourceRanges": ["203.0.113.0/24"]})
    resources = [resource(SLURM_CLUSTER, cluster), companion]
    one(check("restricted-load-balancers", *resources, config=FIREWALLED), "has sshdServiceType LoadBalancer")
    accept = {**FIREWALLED, "acceptCompanionService": True}
    assert check("restricted-load-balancers", *resources, config=accept) == []
    open_companion = lb_service({"loadBalancerSourceRanges": ["0.0.0.0/0"]})
    assert len(check("restricted-load-balancers", resource(SLURM_CLUSTER, cluster), open_companion, config=accept)) == 2


# ---------------------------------------------------------------------------
# protect-slurm-data-volumes


def protection(type_, props, protect):
    return check("protect-slurm-data-volumes", resource(type_, props, protect=protect))


def test_protection_accepts_protected_data_claims(claims):
    for claim in claims.values():
        assert protection(PVC, claim, protect=True) == []


@pytest.mark.parametrize("name", ["jail-pvc", "controller-spool-pvc", "jail-submount-mlperf-sd-pvc"])
def test_protection_rejects_unprotected_data_claims(claims, name):
    one(protection(PVC, claims[name], protect=False), f"PersistentVolumeClaim fpt-hpc/{name} holds Slurm data", "protect=True")


def test_protection_ignores_other_claims():
    assert protection(PVC, {"metadata": {"name": "scratch"}, "spec": {}}, protect=False) == []


def test_protection_of_static_volumes(hanoi):
    (jail,) = [v for v in data_volumes(hanoi) if v.static_nfs]
    pv = static_volume_manifest(jail, "fpt-hpc")
    assert protection(PV, pv, protect=True) == []
    one(protection(PV, pv, protect=False), "PersistentVolume jail-pvc-nfs is bound to Slurm data claim jail-pvc but is not protected")
    pv["spec"]["persistentVolumeReclaimPolicy"] = "Delete"
    one(protection(PV, pv, protect=True), "persistentVolumeReclaimPolicy Delete", "Fix: set spec.persistentVolumeReclaimPolicy: Retain")
    assert len(protection(PV, pv, protect=False)) == 2
    pv["spec"]["claimRef"]["name"] = "scratch"
    assert protection(PV, pv, protect=False) == []


# ---------------------------------------------------------------------------
# no-secrets-in-plain-config


def config_map(data, name="cm"):
    return resource(CONFIG_MAP, {"metadata": {"name": name, "namespace": "fpt-hpc"}, "data": data})


def test_secrets_accept_our_ldap_client_config(hanoi):
    assert check("no-secrets-in-plain-config", config_map({"ldap.conf": "BASE dc=x\n"})) == []


def test_secrets_reject_nslcd_conf_in_a_config_map(hanoi):
    one(
        check("no-secrets-in-plain-config", config_map({"nslcd.conf": nslcd_conf(hanoi.ldap, "fpt-hpc", "hunter2")})),
        "the value of data key 'nslcd.conf' contains secret material (matches '\\bbindpw\\b')",
    )


@pytest.mark.parametrize("key", ["munge.key", "LDAP_ADMIN_PASSWORD", "api-token", "tls-private-key", "db_passwd"])
def test_secrets_reject_secret_keys(key):
    one(
        check("no-secrets-in-plain-config", config_map({key: "x"})),
        f"ConfigMap fpt-hpc/cm: data key '{key}' looks like a secret",
        "Fix: move it into a Secret",
    )


def test_secrets_reject_sssd_conf_in_a_config_map(hanoi):
    one(
        check("no-secrets-in-plain-config", config_map({"sssd.conf": sssd_conf(hanoi.ldap, "fpt-hpc", "hunter2")})),
        "the value of data key 'sssd.conf' contains secret material (matches 'ldap_default_authtok')",
    )


@pytest.mark.parametrize(
    "value, marker",
    [
        ("uri ldap://x\nbindpw s3cret\n", "bindpw"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIE\n", "PRIVATE KEY"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----\n", "PRIVATE KEY"),
    ],
)
def test_secrets_reject_secret_values(value, marker):
    one(check("no-secrets-in-plain-config", config_map({"conf": value})), "contains secret material", marker)


# Credentials from the stack config: the engine hands the pack the stack config in PULUMI_CONFIG.
HELM_PASSWORD = "Zq8-helm-db-password"
STACK_CONFIG = {
    "slurm-platform:operators": json.dumps({"gpuOperator": {"values": {"db": {"password": HELM_PASSWORD}}}}),
    "slurm-platform:slurm": json.dumps({"accounting": {"external": {"passwordSecretName": "slurm-accounting-db"}}}),
}


@pytest.fixture
def stack_config_env(monkeypatch):
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps(STACK_CONFIG))


def secret_object(data, secret_outputs=()):
    props = {"metadata": {"name": "db", "namespace": "fpt-hpc"}, "stringData": data}
    opts = PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), list(secret_outputs), None)
    return PolicyResource(SECRET, unknown_checking_proxy(props), "urn:pulumi:test::slurm-platform::secret::db", "db", opts, None, None, [], {})


def test_config_credentials_are_credential_leaves_not_references():
    from slurm_policies.credentials import config_credentials

    assert config_credentials(STACK_CONFIG) == {HELM_PASSWORD: "slurm-platform:operators.gpuOperator.values.db.password"}


def test_secrets_reject_a_config_credential_in_a_config_map(stack_config_env):
    one(
        check("no-secrets-in-plain-config", config_map({"app.ini": f"[db]\nuser = x\npass = {HELM_PASSWORD}\n"})),
        "ConfigMap fpt-hpc/cm: data key 'app.ini' carries the credential from stack config "
        "slurm-platform:operators.gpuOperator.values.db.password in plain text",
    )


def test_secrets_reject_a_config_credential_in_an_env_literal(stack_config_env):
    pod = {"containers": [{"name": "app", "env": [{"name": "DB_URL", "value": f"mysql://u:{HELM_PASSWORD}@db/x"}]}]}
    deployment = {"metadata": {"name": "d"}, "spec": {"template": {"spec": pod}}}
    one(check("no-secrets-in-plain-config", resource(DEPLOYMENT, deployment)), "env DB_URL carries the credential from stack config")


def test_secrets_reject_a_config_credential_in_a_plain_secret(stack_config_env):
    one(
        check("no-secrets-in-plain-config", secret_object({"password": HELM_PASSWORD})),
        "Secret fpt-hpc/db: stringData key 'password' carries the credential from stack config",
        "is not marked secret",
    )
    encoded = {"metadata": {"name": "db"}, "data": {"password": base64.b64encode(HELM_PASSWORD.encode()).decode()}}
    one(check("no-secrets-in-plain-config", resource(SECRET, encoded)), "data key 'password' carries the credential")
    assert check("no-secrets-in-plain-config", secret_object({"password": HELM_PASSWORD}, ["data", "stringData"])) == []


def test_secrets_ignore_credentials_without_stack_config(monkeypatch):
    monkeypatch.delenv("PULUMI_CONFIG", raising=False)
    assert check("no-secrets-in-plain-config", secret_object({"password": HELM_PASSWORD})) == []


def test_secrets_accept_certificates_in_config_maps():
    assert check("no-secrets-in-plain-config", config_map({"ca.crt": "-----BEGIN CERTIFICATE-----\nMIIB\n"})) == []


def test_secrets_accept_our_ldap_workloads(hanoi):
    server = ldap_statefulset(hanoi.ldap, "fpt-hpc")
    assert check("no-secrets-in-plain-config", resource(STATEFUL_SET, server)) == []


def test_secrets_reject_a_literal_password_env(hanoi):
    server = ldap_statefulset(hanoi.ldap, "fpt-hpc")
    env = server["spec"]["template"]["spec"]["containers"][0]["env"]
    (password,) = [e for e in env if e["name"] == "LDAP_ADMIN_PASSWORD"]
    password.pop("valueFrom")
    password["value"] = "hunter2"
    one(
        check("no-secrets-in-plain-config", resource(STATEFUL_SET, server)),
        "StatefulSet fpt-hpc/ldap: spec.template.spec.containers[openldap] env LDAP_ADMIN_PASSWORD carries a literal value",
        "Fix: use env[].valueFrom.secretKeyRef",
    )


def test_secrets_reject_literals_in_init_containers_and_cron_jobs():
    pod = {"initContainers": [{"name": "init", "env": [{"name": "GITHUB_TOKEN", "value": "ghp_x"}]}], "containers": []}
    deployment = {"metadata": {"name": "d"}, "spec": {"template": {"spec": pod}}}
    one(check("no-secrets-in-plain-config", resource(DEPLOYMENT, deployment)), "initContainers[init] env GITHUB_TOKEN")
    cron = {
        "metadata": {"name": "c"},
        "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "job", "env": [{"name": "MUNGE_KEY", "value": "abc"}]}]}}}}},
    }
    one(check("no-secrets-in-plain-config", resource(CRON_JOB, cron)), "spec.jobTemplate.spec.template.spec.containers[job] env MUNGE_KEY")


def test_secrets_allow_references_and_configured_names():
    pod = {
        "containers": [
            {
                "name": "c",
                "env": [
                    {"name": "DB_PASSWORD_FILE", "value": "/run/secrets/db"},
                    {"name": "SECRET_NAME", "value": "ldap-secret"},
                    {"name": "TOKEN_TTL", "value": "3600"},
                    {"name": "API_TOKEN", "value": ""},
                ],
            }
        ]
    }
    deployment = resource(DEPLOYMENT, {"metadata": {"name": "d"}, "spec": {"template": {"spec": pod}}})
    one(check("no-secrets-in-plain-config", deployment), "env TOKEN_TTL")
    assert check("no-secrets-in-plain-config", deployment, config={"allowedNames": ["TOKEN_TTL"]}) == []


# ---------------------------------------------------------------------------
# pinned-chart-versions


def chart(version=None, chart_ref="oci://cr.eu-north1.nebius.cloud/soperator/helm-soperator", type_=CHART):
    props = {"chart": chart_ref, "namespace": "soperator-system"}
    if version is not None:
        props["version"] = version
    return resource(type_, props, name="operators-soperator")


@pytest.mark.parametrize("version", ["1.14.10", "v24.9.2", "24.10.1", "0.29.0", "1.0.0-rc.1"])
def test_charts_accept_exact_versions(version):
    assert check("pinned-chart-versions", chart(version)) == []


def test_charts_reject_a_missing_version():
    one(
        check("pinned-chart-versions", chart()),
        "Helm Chart operators-soperator (chart oci://cr.eu-north1.nebius.cloud/soperator/helm-soperator) has no version",
        "Fix: pin an exact chart version",
    )
    one(check("pinned-chart-versions", chart("")), "has no version")


@pytest.mark.parametrize("version", ["latest", "*", "^1.14.0", "~1.14", ">=1.0.0", "1.x", "1.14.X", "1.14", ">1.0 <2.0"])
def test_charts_reject_floating_versions(version):
    one(check("pinned-chart-versions", chart(version)), f"has version '{version}', a floating tag or range")


def test_charts_check_helm_v3_releases_too():
    one(check("pinned-chart-versions", chart("latest", chart_ref="gpu-operator", type_=RELEASE)), "Helm Release")
    assert check("pinned-chart-versions", chart("v24.9.2", chart_ref="gpu-operator", type_=RELEASE)) == []


def stack_outputs(outputs):
    return resource("pulumi:pulumi:Stack", outputs, name="slurm-platform-prod-hanoi")


def test_charts_read_the_versions_the_program_exports():
    # Under the engine a helm.sh/v4 Chart is a component without visible inputs; the stack output carries the versions.
    opaque = resource(CHART, {}, name="operators-soperator")
    pinned = {"chartVersions": {"soperator": "1.14.10", "gpu-operator": "v24.9.2"}}
    assert check("pinned-chart-versions", opaque, stack_outputs(pinned)) == []
    one(
        check("pinned-chart-versions", opaque, stack_outputs({"chartVersions": {"soperator": "1.14.10", "gpu-operator": "latest"}})),
        "Helm release gpu-operator (stack output chartVersions) has version 'latest'",
        "Fix: pin an exact chart version",
    )
    one(check("pinned-chart-versions", stack_outputs({"versions": {"x": "~1.0"}}), config={"versionsOutput": "versions"}), "'~1.0'")
    assert check("pinned-chart-versions", stack_outputs({"chartVersions": {"x": "*"}}), config={"exemptCharts": ["x"]}) == []


def test_charts_skip_local_charts_exempt_charts_and_opaque_components():
    assert check("pinned-chart-versions", chart(None, chart_ref="./charts/soperator")) == []
    assert check("pinned-chart-versions", chart(None, chart_ref="/mirror/gpu-operator")) == []
    assert check("pinned-chart-versions", chart("latest", chart_ref="dev-chart"), config={"exemptCharts": ["dev-chart"]}) == []
    assert check("pinned-chart-versions", resource(CHART, {}, name="operators-x")) == []


# ---------------------------------------------------------------------------
# configmap-secret-size

SIZE_POLICY = "configmap-secret-size"
MIB = 2**20


def sized_config_map(data=None, binary_data=None, labels=None) -> PolicyResource:
    props: dict[str, Any] = {"metadata": {"name": "big", "namespace": "fpt-hpc", "labels": labels or {}}}
    props.update({k: v for k, v in (("data", data), ("binaryData", binary_data)) if v is not None})
    return resource(CONFIG_MAP, props)


def sized_secret(data=None, string_data=None) -> PolicyResource:
    props: dict[str, Any] = {"metadata": {"name": "big", "namespace": "fpt-hpc"}}
    props.update({k: v for k, v in (("data", data), ("stringData", string_data)) if v is not None})
    return resource(SECRET, props)


def base64_of(size: int) -> str:
    return base64.b64encode(b"x" * size).decode()


def test_a_config_map_at_the_limit_passes_and_one_byte_over_is_refused():
    # data and binaryData values count together (binaryData decoded); long keys do not count.
    half = MIB // 2
    assert check(SIZE_POLICY, sized_config_map({"k" * 253: "x" * half}, {"bin": base64_of(MIB - half)})) == []
    one(
        check(SIZE_POLICY, sized_config_map({"k" * 253: "x" * half}, {"bin": base64_of(MIB - half + 1)})),
        "ConfigMap fpt-hpc/big holds 1,048,577 bytes of data",
        f"(the largest, binaryData.bin: {MIB - half + 1:,})",
        "over the 1,048,576 bytes (1 MiB) the API server accepts",
        "Fix: split the data over several ConfigMaps or Secrets",
    )


def test_a_config_map_counts_utf8_bytes_not_characters():
    assert check(SIZE_POLICY, sized_config_map({"text": "é" * (MIB // 2)})) == []
    one(check(SIZE_POLICY, sized_config_map({"text": "é" * (MIB // 2) + "x"})), "holds 1,048,577 bytes")


def test_a_secret_is_measured_decoded():
    # 1 MiB of data is 1.33 MiB of base64: accepted; one decoded byte more is refused.
    assert len(base64_of(MIB)) > MIB
    assert check(SIZE_POLICY, sized_secret({"key": base64_of(MIB)})) == []
    one(check(SIZE_POLICY, sized_secret({"key": base64_of(MIB + 1)})), "Secret fpt-hpc/big holds 1,048,577 bytes", "data.key")
    one(check(SIZE_POLICY, sized_secret({"a": base64_of(MIB)}, {"b": "x"})), "Secret fpt-hpc/big holds 1,048,577 bytes")


def test_a_secret_counts_string_data_over_the_data_of_its_key():
    # The API server writes stringData over data's entry of the same key before it measures.
    assert check(SIZE_POLICY, sized_secret({"key": base64_of(MIB)}, {"key": "x"})) == []
    one(check(SIZE_POLICY, sized_secret({"key": "eA=="}, {"key": "x" * (MIB + 1)})), "stringData.key: 1,048,577")


def test_the_tenants_config_map_over_the_limit_asks_for_fewer_tenants_per_stack():
    tenants = sized_config_map({"sacctmgr.sh": "x" * (MIB + 1)}, labels={"app.kubernetes.io/component": "tenants"})
    one(check(SIZE_POLICY, tenants), "data.sacctmgr.sh", "Fix: put fewer tenants in this stack")


def test_other_objects_are_not_measured():
    assert check(SIZE_POLICY, resource(DEPLOYMENT, {"metadata": {"name": "big"}, "data": {"k": "x" * (MIB + 1)}})) == []


# ---------------------------------------------------------------------------
# Per-environment policy config files


ENVIRONMENTS = example_stacks()  # every Pulumi.<stack>.yaml has policies/config/<stack>.json


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_config_file_matches_the_schemas(env):
    document = policy_configs(env)
    levels = {level.value for level in EnforcementLevel}
    assert document.get("all") in levels
    for name, value in document.items():
        if name == "all":
            continue
        assert name in POLICIES, f"{env}.json configures unknown policy {name}"
        if isinstance(value, str):
            assert value in levels
            continue
        assert value.get("enforcementLevel", "advisory") in levels
        properties = {k: v for k, v in value.items() if k != "enforcementLevel"}
        schema = POLICIES[name].config_schema
        assert schema is not None or not properties, f"{name} takes no config"
        if schema is not None:
            jsonschema.validate(properties, {"type": "object", "properties": schema.properties, "required": schema.required or []})


def test_production_is_mandatory_and_dev_is_advisory_where_it_should_be():
    def level(env, name):
        document = policy_configs(env)
        value = document.get(name, document["all"])
        return value if isinstance(value, str) else value.get("enforcementLevel", document["all"])

    for env in ("prod-hanoi", "prod-hangzhou"):
        assert {level(env, name) for name in POLICIES} == {"mandatory"}
    for name in ("restricted-load-balancers", "slurm-region-quota", "protect-slurm-data-volumes", "pinned-chart-versions"):
        assert level("dev", name) == "advisory"
    for name in ("no-secrets-in-plain-config", "slurm-volume-claim-names", "slurm-volume-references"):
        assert level("dev", name) == "mandatory"


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_the_committed_policy_config_is_what_make_schema_generates_from_the_stack_file(env):
    settings = json.loads((ROOT / generated_policy_configs.SETTINGS_DIR / f"{env}.json").read_text())
    # The stack's facts come from Pulumi.<stack>.yaml only: the settings never hold them.
    facts = generated_policy_configs.stack_facts(parse_config(stack_config(env)))
    assert facts and all(set(fields).isdisjoint(settings.get(name) or {}) for name, fields in facts.items() if isinstance(settings.get(name), dict))
    assert (CONFIG_DIR / f"{env}.json").read_text() == generated_policy_configs.render(ROOT, env)


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_node_pools_and_region_match_the_stack_config(env):
    config = parse_config(stack_config(env))
    pools = config_for(env, "slurm-worker-node-fit")["nodePools"]
    assert pools == {
        pool.name: {
            "cpu": quantity(pool.cpu_per_node),
            "memoryGi": quantity(pool.memory_per_node) / GI,
            "gpus": pool.gpus_per_node,
            "nodes": pool.node_count,
        }
        for pool in config.node_pools
    }
    assert config_for(env, "slurm-region-quota")["region"] == config.region


# ---------------------------------------------------------------------------
# The whole program, mocked, against every policy with its environment's config


def mocked_run(stack_name: str):
    raw = stack_config(stack_name)
    config = parse_config(raw)
    return run_under_mocks(lambda: build_platform(config), raw, stack=stack_name)


def as_policy_resource(registered, props=None, protect=None) -> PolicyResource:
    """What the engine passes for a registered resource: its inputs and options."""
    return PolicyResource(
        registered.type,
        unknown_checking_proxy(copy.deepcopy(registered.inputs if props is None else props)),
        registered.urn,
        registered.name,
        options(registered.protect if protect is None else protect),
        None,
        None,
        [],
        {},
    )


@pytest.fixture(scope="module")
def mocked_runs():
    return {name: mocked_run(name) for name in example_stacks()}


def stack_resource(run) -> PolicyResource:
    """The root Stack as the engine shows it to stack policies: its outputs as props."""
    return PolicyResource(
        "pulumi:pulumi:Stack",
        unknown_checking_proxy(copy.deepcopy(run.outputs)),
        "urn:pulumi:test::slurm-platform::pulumi:pulumi:Stack::root",
        "root",
        options(),
        None,
        None,
        [],
        {},
    )


@pytest.fixture(scope="module")
def mocked_stacks(mocked_runs):
    return {name: [*(as_policy_resource(r) for r in run.resources), stack_resource(run)] for name, run in mocked_runs.items()}


def run_pack(resources: list[PolicyResource], env: str) -> dict[str, list[str]]:
    """Every policy the stack's config does not disable (the engine skips those), with its config."""
    enabled = [name for name in POLICIES if (policy_configs(env).get(name) or {}).get("enforcementLevel") != "disabled"]
    assert enabled
    return {name: check(name, *resources, config=config_for(env, name)) for name in enabled}


@pytest.mark.parametrize("stack_name", ENVIRONMENTS)
def test_every_example_stack_passes_its_policy_config(mocked_stacks, stack_name):
    resources = mocked_stacks[stack_name]
    types = {r.resource_type for r in resources}
    operator_types = {SLURM_CLUSTER, ACK_SLURM_CLUSTER, SLINKY_CONTROLLER, SLINKY_NODESET, SOPERATOR_NODESET}
    assert types & operator_types and {PVC, STATEFUL_SET, CONFIG_MAP} <= types
    violations = {name: messages for name, messages in run_pack(resources, stack_name).items() if messages}
    assert violations == {}


def test_prod_hanoi_demand_and_quota(mocked_stacks):
    resources = mocked_stacks["prod-hanoi"]
    assert {CHART, PV, SERVICE, STATEFUL_SET} <= {r.resource_type for r in resources}
    totals = stack_demand(resources).totals
    # SlurmCluster 1357.25 (see above) + LDAP 0.1 + the Slurm exporter 0.11 (its munged sidecar, an init container
    # that runs for the pod's life, included: 50m + collect 50m + serve 10m)
    assert totals["vcpu"] == pytest.approx(1357.46)
    exporter_gi = (64 + 64 + 32) / 1024
    assert totals["memoryGi"] == pytest.approx(4 + 12 * 1224 + 2 * (9 + 500 / 1024) + 1.25 + 4 + 1 + 0.25 + exporter_gi)
    assert totals["gpus"] == 96
    assert totals["storageGi"] == pytest.approx(2048 + 10 + 500 + 12 * 120 + 50 + 8)
    assert totals["pvcs"] == 3 + 12 + 1 + 1 and totals["loadBalancers"] == 1
    quota = config_for("prod-hanoi", "slurm-region-quota")["quotas"]["hanoi"]
    assert all(totals[dimension] <= allowed for dimension, allowed in quota.items())
    tight = {"region": "hanoi", "quotas": {"hanoi": {**quota, "vcpu": 1300, "gpus": 88}}}
    one(check("slurm-region-quota", *resources, config=tight), "vcpu: asked 1357.46 > allowed 1300", "gpus: asked 96 > allowed 88")


def test_the_mocked_program_trips_the_pack_when_it_goes_wrong(mocked_runs):
    """The zero-violation runs above are not vacuous: break the same resources and the pack reports it."""
    broken = []
    for r in mocked_runs["prod-hanoi"].resources:
        if r.type == PVC:
            broken.append(as_policy_resource(r, protect=False))
        elif r.type == SLURM_CLUSTER:
            props = copy.deepcopy(r.inputs)
            props["spec"]["slurmNodes"]["login"]["sshdServiceType"] = "LoadBalancer"
            props["spec"]["slurmNodes"]["worker"]["size"] = 20
            broken.append(as_policy_resource(r, props=props))
        elif r.type == CHART and r.name == "operators-soperator":
            broken.append(as_policy_resource(r, props={**r.inputs, "version": ">=1.14.0"}))
        else:
            broken.append(as_policy_resource(r))
    run = mocked_runs["prod-hanoi"]
    outputs = {**run.outputs, "chartVersions": {**run.outputs["chartVersions"], "gpu-operator": "latest"}}
    broken.append(stack_resource(type("Run", (), {"outputs": outputs})))
    violations = {name: messages for name, messages in run_pack(broken, "prod-hanoi").items() if messages}
    assert set(violations) == {
        "protect-slurm-data-volumes",
        "restricted-load-balancers",
        "slurm-worker-node-fit",
        "slurm-region-quota",
        "pinned-chart-versions",
    }
    assert len(violations["protect-slurm-data-volumes"]) == 3
    assert len(violations["pinned-chart-versions"]) == 2

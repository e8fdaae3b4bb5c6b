"""The three other Slurm operators, each against the issue's checklist:
soperator 4.1.7 (and the upgrade from 1.14.10), ACK ack-slurm-operator in both
API generations, and SchedMD's Slinky."""

import copy
import re
import subprocess
import sys
from pathlib import Path

import pytest
from slurm_rules import confinement
from slurm_rules.config_files import RENDERED_BY, RefusedProperty

from components.config import ConfigError, parse_config
from components.operator_charts import chart_releases
from components.slurm import ack, manifest_of, operator_module, resolve, slinky, soperator1, soperator4
from components.slurm.common import WAIT_FOR_ANNOTATION, worker_shape
from tests.contracts import contract_errors, status_schema
from tests.harness import ROOT, body, stack_config
from tests.test_program import run_stack

PVC = "kubernetes:core/v1:PersistentVolumeClaim"
SECRET = "kubernetes:core/v1:Secret"


WAITS_DOC = ROOT / "docs" / "operations.md"


def with_overrides(stack, **raw):
    return parse_config({**stack_config(stack), **raw})


# ---------------------------------------------------------------------------
# Readiness: what `pulumi up` awaits is in the operator's status


@pytest.mark.parametrize(
    "stack,raw",
    [
        ("prod-hanoi", {}),
        ("staging-hanoi", {}),
        ("staging-hangzhou", {}),
        ("staging-hangzhou", {"operators": {"ackSlurmOperator": {"apiGeneration": "2024-06"}}}),
        ("prod-hcm", {}),
    ],
    ids=["soperator-1.14.10", "soperator-4.1.7", "ack-2024-12", "ack-2024-06", "slinky"],
)
def test_every_awaited_field_is_in_the_operators_status_and_can_hold_the_awaited_value(stack, raw):
    config = with_overrides(stack, **raw) if raw else parse_config(stack_config(stack))
    awaited = [r.manifest for r in operator_module(config).render(config) if WAIT_FOR_ANNOTATION in (r.manifest["metadata"].get("annotations") or {})]
    custom = [m for m in awaited if m["kind"] != "Service"]  # Services await their address (test_slurm_operators' login tests)
    assert custom, f"{stack}: nothing awaits Slurm's readiness"
    for manifest in custom:
        expression = manifest["metadata"]["annotations"][WAIT_FOR_ANNOTATION]
        match = re.fullmatch(r"jsonpath=\{\.status\.([A-Za-z.]+)\}=(\w+)", expression)
        assert match is not None, expression
        schema = status_schema(manifest)
        for field in match.group(1).split("."):
            schema = schema["properties"][field]
        value = match.group(2)
        if schema["type"] == "integer":
            assert value.isdigit() and int(value) > 0, expression
        else:
            assert schema["type"] == "string" and value in schema.get("enum", [value]), expression
        # The operations guide says what each operator's wait is.
        assert f"`{re.sub(r'=[0-9]+$', '=<its replicas>', expression)}`" in WAITS_DOC.read_text(), expression


# ---------------------------------------------------------------------------
# Choosing the operator


def test_the_config_key_chooses_the_module():
    assert operator_module(parse_config({})).OPERATOR == soperator1.OPERATOR  # absent key: today's default
    assert operator_module(parse_config(stack_config("staging-hanoi"))).OPERATOR == soperator4.OPERATOR
    assert operator_module(parse_config(stack_config("staging-hangzhou"))).OPERATOR == ack.OPERATOR
    assert operator_module(parse_config(stack_config("prod-hcm"))).OPERATOR == slinky.OPERATOR


GPU_POOL = {"name": "gpu", "selector": {"a": "b"}, "gpusPerNode": 8, "cpuPerNode": "8", "memoryPerNode": "8Gi", "nodeCount": 2}
ACK_IMAGE = {"image": "x/slurm:1"}


@pytest.mark.parametrize(
    "raw, path, expected",
    [
        ({"slurmOperator": "ack"}, "slurm.ack", "required when slurmOperator is ack"),
        ({"slurmOperator": "ack", "slurm": {"ack": ACK_IMAGE}}, "slurm.accounting.database", "must be 'external' with slurmOperator ack"),
        ({"slurmOperator": "ack", "slurm": {"ack": ACK_IMAGE}}, "slurm.ack.slurmdbdConfSecretName", "required when accounting is enabled"),
        ({"slurmOperator": "slinky", "ldap": {"enabled": False}}, "ldap.enabled", "must be true when slurmOperator is slinky"),
        (
            {"slurmOperator": "ack", "slurm": {"ack": ACK_IMAGE, "accounting": {"enabled": False}, "controller": {"size": 2}}},
            "slurm.controller.size",
            "must be 1 with slurmOperator ack",
        ),
        (
            {
                "slurmOperator": "ack",
                "nodePools": [{**GPU_POOL, "slurmWorkers": 5}],
                "slurm": {"ack": {**ACK_IMAGE, "autoscaling": {"enabled": True, "maxNodesPerGroup": 4}}, "accounting": {"enabled": False}},
            },
            "nodePools[0].slurmWorkers",
            "is more than slurm.ack.autoscaling.maxNodesPerGroup (4)",
        ),
        ({"slurmOperator": "pbs"}, "slurmOperator", "Input should be 'soperator', 'ack' or 'slinky'"),
        (
            {"operators": {"soperator": {"version": "4.1.7"}}, "slurm": {"partitions": [{"name": "p", "pools": ["nope"]}]}},
            "slurm.partitions[0].pools",
            "nope is not a GPU pool",
        ),
        (
            {"operators": {"soperator": {"version": "4.1.7"}}, "slurm": {"partitions": [{"name": "p"}, {"name": "p"}]}},
            "slurm.partitions[1].name",
            "must be unique among partitions",
        ),
        ({"operators": {"ackSlurmOperator": {"install": True}}}, "operators.ackSlurmOperator", "install: true needs version and repository"),
        ({"operators": {"soperator": {"version": "3.0.0"}}}, "operators.soperator.version", "Input should be '1.14.10' or '4.1.7'"),
        ({"slurm": {"partitions": [{"name": "gpu"}]}}, "slurm.partitions", "soperator 1.14.10 has one implicit partition"),
        (
            {"operators": {"soperator": {"version": "4.1.7"}}, "slurm": {"controller": {"size": 2}}},
            "slurm.controller.size",
            "runs a single slurmctld",
        ),
        (
            {
                "operators": {"soperator": {"version": "4.1.7"}},
                "slurm": {"partitions": [{"name": "a", "default": True}, {"name": "b", "default": True}]},
            },
            "slurm.partitions[1].default",
            "at most one partition can be the default",
        ),
        ({"nodePools": [{**GPU_POOL, "slurmWorkers": 1}]}, "nodePools[0].slurmWorkers", "needs per-pool workers"),
        *(
            (
                {
                    "slurmOperator": "ack",
                    "slurm": {"ack": {**ACK_IMAGE, "extraSlurmConf": ["MaxJobCount=5000", line]}, "accounting": {"enabled": False}},
                },
                "slurm.ack.extraSlurmConf[1]",
                f"would undo the jobs' confinement ({reason}",
            )
            for line, reason in (
                ("TaskPlugin=task/affinity", "TaskPlugin must include task/cgroup"),
                ("taskplugin=task/none", "TaskPlugin must include task/cgroup"),
                ("ProctrackType=proctrack/linuxproc", "ProctrackType must stay proctrack/cgroup"),
            )
        ),
    ],
)
def test_bad_operator_config_is_a_clear_error(raw, path, expected):
    with pytest.raises(ConfigError) as error:
        parse_config(raw)
    line = next((line for line in str(error.value).splitlines() if line.strip().startswith(f"slurm-platform:{path}:")), None)
    assert line is not None, str(error.value)
    assert expected in line, line


# ---------------------------------------------------------------------------
# soperator 4.1.7


@pytest.fixture(scope="module")
def staging_hanoi():
    return parse_config(stack_config("staging-hanoi"))


def test_soperator4_cluster_has_no_workers_and_one_nodeset_per_gpu_pool(staging_hanoi):
    rendered = soperator4.render(staging_hanoi)
    (cluster,) = manifest_of(rendered, "SlurmCluster")
    assert "worker" not in cluster["spec"]["slurmNodes"] and cluster["spec"]["crVersion"] == "4.1.7"
    nodesets = manifest_of(rendered, "NodeSet")
    assert [n["metadata"]["name"] for n in nodesets] == ["h100", "h200"]
    for nodeset, pool in zip(nodesets, staging_hanoi.gpu_pools, strict=True):
        assert nodeset["apiVersion"] == "slurm.nebius.ai/v1alpha1"
        assert nodeset["metadata"]["namespace"] == cluster["metadata"]["namespace"]
        assert nodeset["metadata"]["annotations"] == {"slurm.nebius.ai/parental-cluster-ref": "fpt-hpc"}
        assert nodeset["spec"]["replicas"] == pool.node_count and nodeset["spec"]["nodeSelector"] == pool.selector
        assert nodeset["spec"]["slurmd"]["resources"]["nvidia.com/gpu"] == "8"
        assert nodeset["spec"]["slurmd"]["volumes"]["jail"] == {"persistentVolumeClaim": {"claimName": "jail-pvc"}}
        assert contract_errors(nodeset) == []
    assert contract_errors(cluster) == []


def test_soperator4_partitions_are_structured_by_nodeset(staging_hanoi):
    partitions = soperator4.slurm_cluster_manifest(staging_hanoi)["spec"]["partitionConfiguration"]
    assert partitions == {
        "configType": "structured",
        "partitions": [
            {"name": "main", "isAll": True, "config": "Default=YES MaxTime=INFINITE State=UP"},
            {"name": "h200", "nodeSetRefs": ["h200"], "config": "Default=NO MaxTime=24:00:00 State=UP"},
        ],
    }


def test_soperator4_charts_bring_cert_manager_for_the_webhooks(staging_hanoi):
    releases = {r.key: r for r in chart_releases(staging_hanoi, resolve(staging_hanoi))}
    assert releases["soperator-crds"].version == releases["soperator"].version == "4.1.7"
    assert releases["soperator"].values["certManager"] == {"enabled": True}
    assert "cert-manager" in releases and "cert-manager" in releases["soperator"].depends_on
    present = with_overrides("staging-hanoi", operators={**stack_config("staging-hanoi")["operators"], "certManager": {"install": False}})
    assert "cert-manager" not in {r.key for r in chart_releases(present, resolve(present))}
    # 1.14.10 registers no webhooks: no cert-manager unless asked.
    hanoi = parse_config(stack_config("prod-hanoi"))
    assert "cert-manager" not in {r.key for r in chart_releases(hanoi, resolve(hanoi))}


def test_soperator4_uses_ldap_through_sssd(staging_hanoi):
    """With the directory's CA from ldap.tls.caConfigMapName: the sidecar mounts it at /mnt/ldapCA, where sssd.conf points."""
    rendered = soperator4.render(staging_hanoi)
    (cluster,) = manifest_of(rendered, "SlurmCluster")
    nodes = [cluster["spec"]["slurmNodes"]["login"], *(n["spec"] for n in manifest_of(rendered, "NodeSet"))]
    assert len(nodes) > 1
    assert all(n["sssdConfSecretRefName"] == "sssd-config" and n["sssdLdapCAConfigMapRefName"] == "ldap-ca" for n in nodes)


def test_soperator4_with_ldap_tls_needs_the_ca_config_map():
    raw = stack_config("staging-hanoi")
    del raw["ldap"]["tls"]["caConfigMapName"]
    with pytest.raises(ConfigError) as error:
        parse_config(raw)
    assert "slurm-platform:ldap.tls.caConfigMapName: required with soperator 4.1.7 and tls.enabled" in str(error.value)


# --- the upgrade path -----------------------------------------------------------------


DATA = ("storage-jail-pvc", "storage-controller-spool-pvc", "storage-jail-submount-mlperf-sd-pvc", "storage-jail-pvc-nfs")


def identity(resource):
    return (resource.urn, resource.inputs, resource.protect, resource.retain_on_delete, sorted(resource.dependencies))


def test_upgrading_1_14_10_to_4_1_7_keeps_the_data_and_the_munge_key():
    before = run_stack("prod-hanoi")
    operators = copy.deepcopy(stack_config("prod-hanoi")["operators"])
    operators["soperator"]["version"] = "4.1.7"
    # 4.1.7 sizes workers per pool (nodePools[].slurmWorkers, default nodeCount) and refuses slurm.worker.size.
    slurm = copy.deepcopy(stack_config("prod-hanoi")["slurm"])
    del slurm["worker"]["size"]
    ldap = copy.deepcopy(stack_config("prod-hanoi")["ldap"])
    ldap["tls"]["caConfigMapName"] = "ldap-ca"  # 4.1.7's sssd sidecars take the CA from a ConfigMap
    after = run_stack("prod-hanoi", operators=operators, slurm=slurm, ldap=ldap)
    kept = [*DATA, "munge-secret", *(r.name for r in before.resources if r.name.startswith("munge-key"))]
    assert len(kept) >= len(DATA) + 2
    for name in kept:
        assert identity(after.named(name)) == identity(before.named(name)), name
    # The SlurmCluster is the same resource (same URN, apiVersion, kind, name): an update, not a replacement.
    cluster_before, cluster_after = before.named("slurm-cluster"), after.named("slurm-cluster")
    assert cluster_before.urn == cluster_after.urn
    for field in ("apiVersion", "kind", "metadata"):
        assert cluster_before.inputs[field] == cluster_after.inputs[field]
    assert cluster_after.inputs["spec"]["crVersion"] == "4.1.7"
    # The charts are updated in place, the NodeSets are new.
    assert before.named("operators-soperator").urn == after.named("operators-soperator").urn
    assert {r.name for r in after.resources} - {r.name for r in before.resources} >= {"slurm-nodeset-h100", "slurm-nodeset-h200"}


# ---------------------------------------------------------------------------
# Alibaba ack-slurm-operator


@pytest.fixture(scope="module", params=["2024-12", "2024-06"])
def ack_config(request):
    raw = copy.deepcopy(stack_config("staging-hangzhou"))
    raw["operators"]["ackSlurmOperator"]["apiGeneration"] = request.param
    return parse_config(raw)


def ack_templates(cluster):
    spec = cluster["spec"]
    heads = [spec[role]["template"] for role in ("headGroupSpec", "slurmctld", "slurmdbd") if role in spec]
    return heads + [group["template"] for group in spec["workerGroupSpecs"]]


def test_ack_cluster_in_both_api_generations(ack_config):
    cluster = ack.slurm_cluster_manifest(ack_config)
    spec = cluster["spec"]
    assert cluster["apiVersion"] == "kai.alibabacloud.com/v1"
    if ack_config.operators.ack_slurm_operator.api_generation == "2024-12":
        assert "headGroupSpec" not in spec and spec["slurmctld"]["replicas"] == 1 and "slurmdbd" in spec
    else:
        assert "slurmctld" not in spec and "headGroupSpec" in spec
    assert [(g["groupName"], g["replicas"]) for g in spec["workerGroupSpecs"]] == [("a10", 2)]
    assert "workerCount" not in str(spec)
    assert contract_errors(cluster) == []


def test_ack_config_map_and_munge_key_are_mounted_where_the_cr_says(ack_config):
    cluster = ack.slurm_cluster_manifest(ack_config)
    spec = cluster["spec"]
    assert spec["slurmConfPath"] == "/var/slurm" and spec["mungeConfPath"] == "/var/munge/munge.key"
    for template in ack_templates(cluster):
        (container,) = template["spec"]["containers"]
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in template["spec"]["volumes"]}
        conf = volumes[mounts["/var/slurm"]]["projected"]["sources"]
        assert {"configMap": {"name": "ack-slurm-cluster-1-slurm-conf"}} in conf
        assert volumes[mounts["/var/munge"]]["secret"]["secretName"] == "ack-slurm-cluster-1-munge"
        assert volumes[mounts["/home"]] == {"name": "home", "persistentVolumeClaim": {"claimName": "slurm-home-pvc"}}
        # nslcd.conf holds the bind password: from its Secret; ldap.conf from the client ConfigMap.
        assert volumes[mounts["/etc/nslcd.conf"]]["secret"]["secretName"] == "nslcd-config"
        assert volumes[mounts["/etc/ldap/ldap.conf"]]["configMap"]["name"] == "ldap-client-config"
        # The DB password (slurmdbd.conf) reaches only where slurmdbd runs.
        has_dbd_conf = any("secret" in source for source in conf)
        assert has_dbd_conf == (container["name"] == "slurmdbd" or (container["name"] == "slurmctld" and "headGroupSpec" in spec))


def test_acks_slurmctld_keeps_its_state_on_a_claim_of_its_own(ack_config):
    """The operator gives the head no volume: StateSaveLocation (every queued job) is on our claim, mounted in the
    slurmctld container alone, on the stack's class unless slurm.ack.stateStorageClassName says otherwise."""
    state = ack.state_claim(ack_config)
    assert state.keep and state.manifest["kind"] == "PersistentVolumeClaim"
    assert state.manifest["metadata"]["name"] == "ack-slurm-cluster-1-slurmctld-state"
    assert state.manifest["spec"]["storageClassName"] == ack_config.storage.storage_class.name == "alibaba-nas-rwx"
    assert state.manifest["spec"]["resources"]["requests"]["storage"] == "10Gi"
    (location,) = [line.split("=", 1)[1] for line in ack.slurm_conf(ack_config).splitlines() if line.startswith("StateSaveLocation=")]
    cluster = ack.slurm_cluster_manifest(ack_config)
    mounting = []
    for template in ack_templates(cluster):
        volumes = {v["name"]: v for v in template["spec"]["volumes"]}
        for container in template["spec"]["containers"] + template["spec"].get("initContainers", []):
            for mount in container["volumeMounts"]:
                if volumes[mount["name"]].get("persistentVolumeClaim", {}).get("claimName") == state.manifest["metadata"]["name"]:
                    assert mount["mountPath"] == location and not mount.get("readOnly")
                    mounting.append(container["name"])
    assert mounting == ["slurmctld", "state-owner"]
    head = ack_templates(cluster)[0]["spec"]
    (owner,) = head["initContainers"]
    assert owner["image"] == head["containers"][0]["image"] and "chown slurm:slurm ." in owner["command"][-1]
    assert contract_errors(cluster) == []
    raw = copy.deepcopy(stack_config("staging-hangzhou"))
    raw["slurm"]["ack"].update(stateStorageClassName="alicloud-disk-essd", stateSize="20Gi")
    spec = ack.state_claim(parse_config(raw)).manifest["spec"]
    assert spec["storageClassName"] == "alicloud-disk-essd" and spec["resources"]["requests"]["storage"] == "20Gi"


def test_ack_slurm_conf_is_generated_from_config(ack_config):
    text = ack.slurm_conf(ack_config)
    lines = text.splitlines()
    assert lines[:3] == [f"# {RENDERED_BY}", "ClusterName=ack-slurm-cluster-1", "SlurmctldHost=ack-slurm-cluster-1-head"]
    assert "GresTypes=gpu" in lines and "AuthType=auth/munge" in lines
    assert "AccountingStorageType=accounting_storage/slurmdbd" in lines
    dbd_host = "ack-slurm-cluster-1-slurmdbd" if ack.new_api(ack_config) else "ack-slurm-cluster-1-head"
    assert f"AccountingStorageHost={dbd_host}" in lines
    assert "NodeSet=a10 Feature=a10" in lines
    assert "NodeName=ack-slurm-cluster-1-worker-a10-[0-3] CPUs=28 RealMemory=102400 Gres=gpu:a10:1 Feature=a10,cloud State=CLOUD" in lines
    # The stack's one tenant, nlp, may use the partition (its cells are on its only pool), with its oppo account.
    assert "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP AllowAccounts=nlp,nlp-oppo" in lines
    for setting in (
        # slurmctld's programs do nothing: the copilot pod resumes and suspends (no token in the head).
        "SuspendProgram=/bin/true",
        "ResumeProgram=/bin/true",
        "SuspendTime=600",
        "ResumeRate=1",
        "CommunicationParameters=NoAddrCache",
        "ReconfigFlags=KeepPowerSaveSettings",
    ):
        assert setting in lines
    quiet = with_overrides(
        "staging-hangzhou", slurm={**stack_config("staging-hangzhou")["slurm"], "ack": {"image": "x/slurm:1", "slurmdbdConfSecretName": "s"}}
    )
    assert "State=CLOUD" not in ack.slurm_conf(quiet) and "SuspendProgram" not in ack.slurm_conf(quiet)


def test_acks_jobs_get_their_cores_share_of_a_workers_memory_not_all_of_it(ack_config):
    """Memory is consumable (CR_Core_Memory): without a default, a job that asks for none takes the whole worker,
    and a second tenant's job on its other GPUs waits (tests/test_services_topology.py saw it on 24.11)."""
    lines = ack.slurm_conf(ack_config).splitlines()
    cpus, memory = worker_shape(ack_config)
    assert (cpus, memory) == (28, 102400)  # the CLOUD lines' CPUs and RealMemory
    assert "SelectTypeParameters=CR_Core_Memory" in lines and f"DefMemPerCPU={memory // cpus}" in lines


@pytest.mark.parametrize("stack", ["staging-hanoi", "prod-hcm", "staging-hangzhou"])
def test_every_operators_slurm_conf_gives_a_job_its_cores_share_of_memory(stack):
    """soperator's and ACK's CR_Core_Memory and Slinky's default alike: tests/test_services_topology.py packs four
    1-GPU jobs on a node only with it."""
    config = parse_config(stack_config(stack))
    if config.slurm_operator == "soperator":
        text = manifest_of(soperator4.render(config), "SlurmCluster")[0]["spec"]["customSlurmConfig"]
    elif config.slurm_operator == "slinky":
        text = slinky.controller(config)["spec"]["extraConf"]
    else:
        text = ack.slurm_conf(config)
    cpus, memory = worker_shape(config)
    assert [line for line in text.splitlines() if line.startswith("DefMem")] == [f"DefMemPerCPU={memory // cpus}"]


def tenants_as(operator: str, release: str = "24.11"):
    """dev-lab (its tenants default and vc1) as `operator` deploys it (tests/services.py as_operator)."""
    from tests.services import as_operator

    return parse_config(as_operator(stack_config("dev-lab"), operator, release))


def rendered_slurm_conf(config) -> str:
    """The slurm.conf text we render for the operator (soperator 4.1.7: customSlurmConfig; Slinky: extraConf)."""
    if config.slurm_operator == "soperator":
        return manifest_of(soperator4.render(config), "SlurmCluster")[0]["spec"]["customSlurmConfig"]
    if config.slurm_operator == "slinky":
        return slinky.controller(config)["spec"]["extraConf"]
    return ack.slurm_conf(config)


PRIVATE = "PrivateData=accounts,jobs,reservations,usage,users"


@pytest.mark.parametrize("operator", ["soperator 4.1.7", "slinky", "ack"])
def test_with_tenants_every_operator_hides_a_tenants_jobs_and_records_from_the_others(operator):
    """One PrivateData line in slurm.conf (slurmctld: squeue, scontrol, sshare) and the same value in slurmdbd.conf
    where we write it (slurmdbd: sacct, sacctmgr); ACK's slurmdbd.conf is the stack's own Secret."""
    config = tenants_as(operator)
    lines = rendered_slurm_conf(config).splitlines()
    assert [line for line in lines if line.lower().startswith("privatedata")] == [PRIVATE]
    if operator == "soperator 4.1.7":
        nodes = manifest_of(soperator4.render(config), "SlurmCluster")[0]["spec"]["slurmNodes"]
        assert nodes["accounting"]["slurmdbdConfig"] == {"privateData": PRIVATE.partition("=")[2]}
        # Slurm 25.11 answers 401 on its OpenMetrics endpoint with PrivateData: the operator's scrape is off.
        assert nodes["controller"]["openMetrics"] == {"enabled": False}
    elif operator == "slinky":
        assert slinky.accounting(config)["spec"]["extraConf"] == PRIVATE
    # Without tenants: nothing hidden, nothing turned off.
    plain = parse_config(
        {**stack_config({"soperator 4.1.7": "staging-hanoi", "slinky": "prod-hcm", "ack": "staging-hangzhou"}[operator]), "tenants": []}
    )
    assert not plain.tenants and "PrivateData" not in rendered_slurm_conf(plain)
    if operator == "soperator 4.1.7":
        nodes = manifest_of(soperator4.render(plain), "SlurmCluster")[0]["spec"]["slurmNodes"]
        assert "slurmdbdConfig" not in nodes["accounting"] and "openMetrics" not in nodes["controller"]
    elif operator == "slinky":
        assert "extraConf" not in slinky.accounting(plain)["spec"]
    else:
        # ACK's free-form lines cannot set it a second time (test_bad_config: refused before anything is registered).
        from tests.services import as_operator

        document = as_operator(stack_config("dev-lab"), "ack", "24.11")
        document["slurm"]["ack"]["extraSlurmConf"] = ["PrivateData=jobs"]
        with pytest.raises(RefusedProperty, match="already has PrivateData=accounts,jobs,reservations,usage,users") as refused:
            ack.slurm_conf(parse_config(document))
        assert refused.value.origin == ("slurm", "ack", "extraSlurmConf", 0)


@pytest.mark.parametrize("stack", ["prod-hcm", "staging-hangzhou"])
def test_ack_and_slinky_contain_every_job_in_an_extern_step(stack):
    """PrologFlags=Contain (what pam_slurm_adopt adopts an SSH session into, where the image has it), once;
    soperator writes its own slurm.conf and gets none from us."""
    for config in (parse_config(stack_config(stack)), tenants_as(parse_config(stack_config(stack)).slurm_operator, "22.05")):
        lines = rendered_slurm_conf(config).splitlines()
        assert [line for line in lines if line.lower().startswith("prologflags")] == ["PrologFlags=Contain"]
        assert "ProctrackType=proctrack/cgroup" in lines  # Contain's extern step needs it (slurmctld says so otherwise)
    assert "PrologFlags" not in rendered_slurm_conf(tenants_as("soperator 4.1.7"))


def test_private_data_and_prolog_flags_go_through_the_release_table():
    """An unknown value is refused as an unknown option is: Slurm's PrivateData parser ignores a word it does not
    know (a misspelt `jobs` would hide nothing), and PrologFlags' is fatal."""
    from slurm_rules import slurm_options
    from slurm_rules.slurm_release import SlurmRelease

    for release in map(SlurmRelease.parse, ("22.05", "23.02", "24.11", "25.11", "26.05")):
        assert slurm_options.line_objection(release, "slurm.conf", PRIVATE) is None
        assert slurm_options.line_objection(release, "slurm.conf", "PrologFlags=Contain") is None
    newest = SlurmRelease.parse("26.05")
    assert "PrivateData=job is not a value" in str(slurm_options.line_objection(newest, "slurm.conf", "PrivateData=job,usage"))
    assert "PrologFlags=contained is not a value" in str(slurm_options.line_objection(newest, "slurm.conf", "PrologFlags=Contained"))
    assert "does not know PrivateData=cloud (since 23.02)" in str(slurm_options.line_objection(newest, "slurm.conf", "PrivateData=cloud"))
    assert "new in 24.05" in str(slurm_options.line_objection(SlurmRelease.parse("23.11"), "slurm.conf", "PrologFlags=RunInJob"))
    with pytest.raises(ValueError, match="usrs is no PrivateData value"):
        slurm_options.rendered(newest, "slurm.conf", ["PrivateData=jobs,usrs"])


def test_ack_gres_conf_lists_cloud_gpus_by_device_file_and_autodetects_otherwise(ack_config):
    # AutoDetect on a CLOUD node is fatal in slurmctld up to 23.11.3 (the services tier starts it on this text).
    assert body(ack.gres_conf(ack_config)) == "NodeName=ack-slurm-cluster-1-worker-a10-[0-3] Name=gpu Type=a10 File=/dev/nvidia0\n"
    raw = copy.deepcopy(stack_config("staging-hangzhou"))
    raw["nodePools"][0]["gpusPerNode"] = 8
    assert body(ack.gres_conf(parse_config(raw))) == "NodeName=ack-slurm-cluster-1-worker-a10-[0-3] Name=gpu Type=a10 File=/dev/nvidia[0-7]\n"
    raw["slurm"]["ack"]["autoscaling"] = {"enabled": False}
    assert body(ack.gres_conf(parse_config(raw))) == "AutoDetect=nvml\n"


def test_ack_login_is_a_private_clb_selecting_the_login_pods_not_the_head(ack_config):
    service = ack.login_service(ack_config)
    labels = {"app.kubernetes.io/name": "slurm-login", "app.kubernetes.io/instance": "ack-slurm-cluster-1"}
    assert service["metadata"]["labels"] == service["spec"]["selector"] == labels
    assert service["metadata"]["annotations"]["service.beta.kubernetes.io/alibaba-cloud-loadbalancer-address-type"] == "intranet"
    assert service["spec"]["type"] == "LoadBalancer" and service["spec"]["loadBalancerSourceRanges"] == ["10.0.0.0/8"]
    login = ack.login_deployment(ack_config)
    assert login["metadata"]["name"] == service["metadata"]["name"] == "ack-slurm-cluster-1-login"
    assert login["spec"]["template"]["metadata"]["labels"] == login["spec"]["selector"]["matchLabels"] == labels
    head = ack_templates(ack.slurm_cluster_manifest(ack_config))[0]
    assert not labels.items() <= head["metadata"]["labels"].items()
    assert ack.pod_roles(ack_config).login == {"matchLabels": labels} != ack.pod_roles(ack_config).controller


ACK_INTERNET = {"service.beta.kubernetes.io/alibaba-cloud-loadbalancer-address-type": "internet"}


def ack_prod(login):
    raw = copy.deepcopy(stack_config("staging-hangzhou"))
    raw["environment"] = "prod"
    raw["ldap"] = {**raw.get("ldap", {}), "tls": {"enabled": True, "secretName": "ldap-tls"}}
    raw["slurm"]["login"] = login
    return raw


@pytest.mark.parametrize(
    "login, path, expected",
    [
        # serviceType defaults to NodePort, yet ACK always declares a LoadBalancer, and the user's
        # address-type: internet overrides the intranet default: the prod rule must still run.
        (
            {"serviceAnnotations": ACK_INTERNET, "nodePortsFirewalled": True},
            "slurm.login.allowedSourceRanges",
            "ACK's login is always a LoadBalancer (serviceAnnotations override its intranet default), and a production one "
            "needs allowedSourceRanges or alibaba's private-LB annotation in serviceAnnotations",
        ),
        ({}, "slurm.login.nodePortsFirewalled", "alibaba's load balancer reaches the login pods through node ports"),
        (
            {"serviceAnnotations": {"service.beta.kubernetes.io/openstack-internal-load-balancer": "true"}, "nodePortsFirewalled": True},
            "slurm.login.serviceAnnotations",
            "is an annotation of fpt; this stack's cloud is alibaba",
        ),
    ],
)
def test_ack_login_falls_under_the_production_exposure_rules(login, path, expected):
    with pytest.raises(ConfigError) as error:
        parse_config(ack_prod(login))
    line = next((line for line in str(error.value).splitlines() if line.strip().startswith(f"slurm-platform:{path}:")), None)
    assert line is not None, str(error.value)
    assert expected in line, line


def test_ack_prod_login_passes_private_or_with_pod_backends():
    assert ack.login_service(parse_config(ack_prod({"nodePortsFirewalled": True})))["metadata"]["annotations"] == {
        "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-address-type": "intranet",
        # Ready when the cloud gives it an address (docs/operations.md "Waiting until Slurm is up").
        "pulumi.com/waitFor": "jsonpath={.status.loadBalancer.ingress}",
    }
    eni = parse_config(ack_prod({"serviceAnnotations": {"service.beta.kubernetes.io/backend-type": "eni"}}))
    assert ack.login_service(eni)["spec"]["allocateLoadBalancerNodePorts"] is False


@pytest.mark.parametrize(
    "stack, cloud, annotations, service",
    [
        ("prod-hanoi", "aws", {"service.beta.kubernetes.io/aws-load-balancer-nlb-target-type": "ip"}, soperator1.restricted_login_service),
        ("prod-hoalac", "alibaba", {"service.beta.kubernetes.io/backend-type": "eni"}, soperator1.restricted_login_service),
        (
            "prod-hcm",
            "alibaba",
            {"service.beta.kubernetes.io/backend-type": "eni"},
            lambda c: {"spec": slinky.loginset(c)["spec"]["service"]["spec"]},
        ),
        ("staging-hangzhou", "alibaba", {"service.beta.kubernetes.io/backend-type": "eni"}, ack.login_service),
    ],
)
def test_load_balancers_drop_node_ports_where_the_cloud_reaches_pods(stack, cloud, annotations, service):
    raw = copy.deepcopy(stack_config(stack))
    assert "allocateLoadBalancerNodePorts" not in service(parse_config(raw))["spec"]  # onto nodes: the ports are needed
    raw["cloud"] = cloud
    raw["region"] = {"aws": "us-east-1", "alibaba": "cn-hangzhou"}[cloud]  # not the FPT region it was: that would contradict the cloud
    raw["slurm"]["login"]["serviceAnnotations"] = annotations
    assert service(parse_config(raw))["spec"]["allocateLoadBalancerNodePorts"] is False


def test_ldap_ca_reaches_the_clients_where_their_config_points():
    """sssd.conf / nslcd.conf name the CA file; every pod that reads them has it: ca.crt of the TLS Secret, mounted by
    reference (the program never reads that Secret, whose tls.key would otherwise sit in the state)."""
    hcm = parse_config(stack_config("prod-hcm"))
    ca_volume = {"name": "ldap-ca", "secret": {"secretName": "ldap-tls", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}
    ca_mount = {"name": "ldap-ca", "mountPath": "/mnt/ldapCA/ca.crt", "subPath": "ca.crt", "readOnly": True}
    login = slinky.loginset(hcm)["spec"]
    assert ca_volume in login["template"]["spec"]["volumes"] and ca_mount in login["login"]["volumeMounts"]
    nodesets = [r.manifest for r in slinky.render(hcm) if r.manifest["kind"] == "NodeSet"]
    assert nodesets
    for nodeset in nodesets:
        assert ca_volume in nodeset["spec"]["template"]["spec"]["volumes"] and ca_mount in nodeset["spec"]["slurmd"]["volumeMounts"]
    raw = ack_prod({"nodePortsFirewalled": True})
    templates = ack_templates(ack.slurm_cluster_manifest(parse_config(raw)))
    assert templates
    for template in templates:
        spec = template["spec"]
        assert {"name": "ldap-ca", "secret": {"secretName": "ldap-tls", "items": [{"key": "ca.crt", "path": "ca.crt"}]}} in spec["volumes"]
        assert {"name": "ldap-ca", "mountPath": "/etc/ldap-ca.crt", "subPath": "ca.crt", "readOnly": True} in spec["containers"][0]["volumeMounts"]
    raw["ldap"] = {}
    raw["environment"] = "staging"
    assert all("ldap-ca" not in str(t) for t in ack_templates(ack.slurm_cluster_manifest(parse_config(raw))))


def test_ack_autoscaling_rbac_and_ignored_fields(ack_config):
    rendered = {r.role: r for r in ack.render(ack_config)}
    (rule,) = rendered["copilot-role"].manifest["rules"]
    assert rule == {
        "apiGroups": ["kai.alibabacloud.com"],
        "resources": ["slurmclusters"],
        "verbs": ["get", "watch", "list", "update", "patch"],
        "resourceNames": ["ack-slurm-cluster-1"],
    }
    assert rendered["copilot-binding"].manifest["subjects"][0]["name"] == rendered["copilot-sa"].manifest["metadata"]["name"]
    # The copilot runs in its own pod under that account; the head (SSH) has no token at all.
    copilot = rendered["copilot"].manifest["spec"]["template"]["spec"]
    assert copilot["serviceAccountName"] == "ack-slurm-cluster-1-slurmctld-copilot" and copilot["automountServiceAccountToken"] is True
    for template in ack_templates(rendered["cluster"].manifest):
        assert "serviceAccountName" not in template["spec"] and template["spec"]["automountServiceAccountToken"] is False
    script = rendered["copilot-script"].manifest["data"]["copilot.sh"]
    assert "\nRESUME_PROGRAM=/slurm-resume.sh\nSUSPEND_PROGRAM=/slurm-suspend.sh\n" in script
    assert 'step POWERING_UP "$RESUME_PROGRAM"' in script and 'step POWERING_DOWN "$SUSPEND_PROGRAM"' in script
    assert rendered["cluster"].ignore_changes == (
        "spec.workerGroupSpecs[*].replicas",
        "spec.workerGroupSpecs[*].podsToBeCreated",
        "spec.workerGroupSpecs[*].podsToBeDeleted",
    )


def test_ack_stack_under_mocks():
    run = run_stack("staging-hangzhou")
    (cluster,) = run.of_type("kubernetes:kai.alibabacloud.com/v1:SlurmCluster")
    assert cluster.parent.endswith("SlurmCluster::slurm")
    names = {r.name for r in run.resources}
    assert {"slurm-slurm-conf", "munge-secret", "slurm-home-pv", "slurm-home-pvc", "slurm-login-ssh", "slurm-copilot-role"} <= names
    munge = run.named("munge-secret")
    assert set(munge.inputs["data"]) == {"munge.key"} and "data" in munge.secret_inputs
    for name in ("slurm-home-pv", "slurm-home-pvc", "slurm-slurmctld-state"):
        assert run.named(name).protect and run.named(name).retain_on_delete
    # No jail on ACK: its pods carry their own root file system.
    assert not [r for r in run.of_type(PVC) if r.inputs["metadata"]["name"] in ("jail-pvc", "controller-spool-pvc")]
    assert not run.of_type("kubernetes:helm.sh/v4:Chart")  # install: false, as the guide (marketplace)


def test_ack_operator_chart_when_installed_by_us():
    operators = copy.deepcopy(stack_config("staging-hangzhou")["operators"])
    operators["ackSlurmOperator"].update(install=True, version="1.2.0", repository="oci://registry.example.cn/charts")
    config = with_overrides("staging-hangzhou", operators=operators)
    (release,) = [r for r in chart_releases(config, resolve(config)) if r.key == "ack-slurm-operator"]
    assert release.chart == "oci://registry.example.cn/charts/ack-slurm-operator" and release.version == "1.2.0"


# ---------------------------------------------------------------------------
# SchedMD Slinky


@pytest.fixture(scope="module")
def hcm():
    return parse_config(stack_config("prod-hcm"))


def test_slinky_controller_references_random_key_secrets(hcm):
    (controller,) = manifest_of(slinky.render(hcm), "Controller")
    assert controller["spec"]["slurmKeyRef"] == {"name": "slinky-hpc-auth-slurm", "key": "slurm.key"}
    assert controller["spec"]["jwtKeyRef"] == {"name": "slinky-hpc-auth-jwt", "key": "jwt.key"}
    run = run_stack("prod-hcm")
    for secret_name, key in (("slurm-slurm-key", "slurm.key"), ("slurm-jwt-key", "jwt.key")):
        secret = run.named(secret_name)
        assert set(secret.inputs["data"]) == {key} and "data" in secret.secret_inputs
        password = run.named(f"{secret_name}-random")
        assert password.type == "random:index/randomPassword:RandomPassword" and password.inputs["length"] == 1024
        assert password.inputs["keepers"] == {"rotation": "0"}
    # The custom resources wait for the keys they name.
    waits = {run.by_urn(u).name for u in run.named("slurm-controller").dependencies}
    assert {"slurm-slurm-key", "slurm-jwt-key"} <= waits
    # Generated keys' ids are "none": no RandomBytes/RandomId/RandomString (their ids carry the value).
    assert not [r for r in run.resources if r.type.split(":")[-1] in ("RandomBytes", "RandomId", "RandomString")]
    assert "munge-secret" not in {r.name for r in run.resources}  # auth/slurm: no munge


def test_slinky_nodesets_loginset_accounting_restapi(hcm):
    rendered = slinky.render(hcm)
    (nodeset,) = manifest_of(rendered, "NodeSet")
    assert nodeset["spec"]["controllerRef"] == {"name": "slinky-hpc"} and nodeset["spec"]["replicas"] == 4
    assert nodeset["spec"]["template"]["spec"]["nodeSelector"] == {"worker.fptcloud/pool": "gpu-h100"}
    assert nodeset["spec"]["slurmd"]["resources"]["limits"]["nvidia.com/gpu"] == "8"
    (loginset,) = manifest_of(rendered, "LoginSet")
    assert loginset["spec"]["sssdConfRef"] == {"name": "sssd-config", "key": "sssd.conf"}
    assert loginset["spec"]["service"]["spec"]["loadBalancerSourceRanges"] == ["203.0.113.0/24"]
    (accounting,) = manifest_of(rendered, "Accounting")
    assert accounting["spec"]["storageConfig"]["host"] == "slinky-hpc-mariadb.slinky-hpc.svc.cluster.local"
    assert accounting["spec"]["storageConfig"]["passwordKeyRef"] == {"name": "slinky-hpc-mariadb-password", "key": "password"}
    (mariadb,) = manifest_of(rendered, "MariaDB")
    assert mariadb["spec"]["passwordSecretKeyRef"] == accounting["spec"]["storageConfig"]["passwordKeyRef"]
    assert manifest_of(rendered, "RestApi")
    (controller,) = manifest_of(rendered, "Controller")
    assert controller["spec"]["accountingRef"] == {"name": "slinky-hpc"}
    assert "PartitionName=main Nodes=h100 Default=YES MaxTime=INFINITE State=UP" in controller["spec"]["extraConf"]
    for manifest in rendered:
        if manifest.manifest["apiVersion"].startswith("slinky"):
            assert contract_errors(manifest.manifest) == [], manifest.role


def test_slinky_external_accounting_and_no_restapi(hcm):
    slurm = copy.deepcopy(stack_config("prod-hcm")["slurm"])
    slurm["accounting"] = {"database": "external", "external": {"host": "db.example.vn", "passwordSecretName": "acct-db"}}
    slurm["slinky"]["restApi"] = False
    config = with_overrides("prod-hcm", slurm=slurm)
    rendered = slinky.render(config)
    assert not manifest_of(rendered, "MariaDB") and not manifest_of(rendered, "RestApi")
    (accounting,) = manifest_of(rendered, "Accounting")
    assert accounting["spec"]["storageConfig"]["host"] == "db.example.vn"
    assert {s.role for s in slinky.key_secrets(config)} == {"slurm-key", "jwt-key"}


def test_slinky_charts(hcm):
    releases = {r.key: r for r in chart_releases(hcm, resolve(hcm))}
    assert releases["slurm-operator-crds"].version == releases["slurm-operator"].version == "1.2.1"
    assert releases["slurm-operator"].chart == "oci://ghcr.io/slinkyproject/charts/slurm-operator"
    assert releases["slurm-operator"].values["crds"] == {"enabled": False}
    assert {"slurm-operator-crds", "cert-manager", "mariadb-operator"} <= set(releases["slurm-operator"].depends_on)


# ---------------------------------------------------------------------------
# Jobs are confined to what they asked for, on every operator


def test_ack_confines_jobs_through_its_config_map_and_privileged_slurmd(ack_config):
    lines = ack.slurm_conf(ack_config).splitlines()
    for line in confinement.SLURM_CONF_LINES:
        assert lines.count(line) == 1, line
    assert confinement.slurm_conf_gaps(ack.slurm_conf(ack_config)) == []
    data = ack.slurm_conf_config_map(ack_config)["data"]
    assert body(data["cgroup.conf"]).splitlines() == [
        "CgroupPlugin=cgroup/v2",
        "IgnoreSystemd=yes",
        "EnableControllers=yes",
        "ConstrainCores=yes",
        "ConstrainDevices=yes",
        "ConstrainRAMSpace=yes",
    ]
    # Only slurmd confines jobs: it alone runs privileged.
    containers = [t["spec"]["containers"][0] for t in ack_templates(ack.slurm_cluster_manifest(ack_config))]
    assert {c["name"]: c.get("securityContext") for c in containers} == {
        **{c["name"]: None for c in containers if c["name"] != "slurmd"},
        "slurmd": {"privileged": True},
    }
    # An extra line that keeps task/cgroup still repeats a key the file sets: refused where it is added, with its key path.
    slurm = {**stack_config("staging-hangzhou")["slurm"]}
    slurm["ack"] = {**slurm["ack"], "extraSlurmConf": ["TaskPlugin=task/cgroup"]}
    with pytest.raises(RefusedProperty, match="already has TaskPlugin=task/cgroup,task/affinity") as refused:
        ack.slurm_conf(with_overrides("staging-hangzhou", slurm=slurm))
    assert refused.value.origin == ("slurm", "ack", "extraSlurmConf", 0)


def test_slinky_confines_jobs_through_extra_conf_and_config_file_refs(hcm):
    rendered = slinky.render(hcm)
    (controller,) = manifest_of(rendered, "Controller")
    assert confinement.slurm_conf_gaps(controller["spec"]["extraConf"]) == []
    # The operator mounts each configFileRefs ConfigMap into slurmctld's /etc/slurm; configless slurmd fetch cgroup.conf from there.
    (files,) = [m for m in manifest_of(rendered, "ConfigMap") if {"name": m["metadata"]["name"]} in controller["spec"]["configFileRefs"]]
    assert confinement.cgroup_conf_gaps(files["data"]["cgroup.conf"]) == []
    assert "CgroupPlugin=cgroup/v2" in files["data"]["cgroup.conf"].splitlines()


def test_cgroup_v1_nodes_get_the_v1_plugin_and_no_v2_lines(hcm):
    v1 = parse_config({**stack_config("prod-hcm"), "slurm": {**stack_config("prod-hcm")["slurm"], "worker": {"cgroupVersion": "v1"}}})
    text = slinky.config_files(v1)["data"]["cgroup.conf"]
    assert body(text).splitlines() == ["CgroupPlugin=cgroup/v1", "ConstrainCores=yes", "ConstrainDevices=yes", "ConstrainRAMSpace=yes"]


@pytest.mark.parametrize("stack", ["staging-hanoi", "dev-lab", "dev"])
def test_soperator_keeps_its_own_confinement(stack):
    """soperator writes ProctrackType=proctrack/cgroup, TaskPlugin=task/cgroup,task/affinity and a cgroup.conf with
    ConstrainCores/Devices/RAMSpace=yes itself (1.14.10 and 4.1.7, internal/render/common/configmap.go; CgroupPlugin
    from cgroupVersion). 4.1.7 includes customSlurmConfig after its lines and lets customCgroupConfig replace its
    cgroup.conf keys: ours must override none of them, and 1.14.10 has neither field."""
    config = parse_config(stack_config(stack))
    (cluster,) = manifest_of(operator_module(config).render(config), "SlurmCluster")
    spec = cluster["spec"]
    assert "customCgroupConfig" not in spec
    assert spec.get("cgroupVersion", spec.get("slurmNodes", {}).get("worker", {}).get("cgroupVersion")) == config.slurm.worker.cgroup_version
    custom = [line.partition("=") for line in spec.get("customSlurmConfig", "").splitlines()]
    assert {key.lower() for key, _, _ in custom} & {"proctracktype", "taskplugin"} == set()
    # 4.1.7 always carries the default memory per CPU (and the tenants' lines where there are some); 1.14.10 has no field.
    assert bool(custom) == (config.operators.soperator.version == "4.1.7"), "the lines are checked where there are some"


# ---------------------------------------------------------------------------
# Contracts catch mistakes in every operator's shape


@pytest.mark.parametrize(
    "stack, kind, path",
    [
        ("staging-hanoi", "NodeSet", ("spec", "workerCount")),
        ("staging-hanoi", "SlurmCluster", ("spec", "slurmNodes", "worker")),
        ("staging-hangzhou", "SlurmCluster", ("spec", "workerCount")),
        ("prod-hcm", "Controller", ("spec", "mungeKeyRef")),
        ("prod-hcm", "LoginSet", ("spec", "sssd")),
    ],
)
def test_contracts_reject_unknown_fields(stack, kind, path):
    config = parse_config(stack_config(stack))
    manifest = copy.deepcopy(next(r.manifest for r in operator_module(config).render(config) if r.manifest["kind"] == kind))
    target = manifest
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = {"size": 2} if path[-1] == "worker" else 3
    errors = contract_errors(manifest)
    assert any(path[-1] in e for e in errors), errors


@pytest.mark.parametrize("script", ["login", "copilot"])
def test_acks_rendered_scripts_are_bash_and_pass_shellcheck(script, ack_config, tmp_path):
    """The data ack.py renders above the steps of ack-login.sh and ack-copilot.sh, checked whole."""
    path = tmp_path / f"{script}.sh"
    text = ack.login_script(ack_config) if script == "login" else ack.copilot_script(ack_config)
    path.write_text(text)
    assert text.endswith(ack.LOGIN_STEPS if script == "login" else ack.COPILOT_STEPS)
    assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0
    checked = subprocess.run([str(Path(sys.executable).parent / "shellcheck"), "--shell=bash", str(path)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout

"""Per-component tests under mocks: objects, names, namespaces, options."""

import base64

import pulumi
import pytest

from components.charts import CHART_APIS, HELM_HOOKS, ChartRelease, api_group, installed_groups, rendered_groups, with_crd_dependencies
from components.config import parse_config
from components.identity.directory import LdapDirectory
from components.identity.server import ldap_statefulset, require_tls_script
from components.munge import MungeKey
from components.node_pools import NodePools
from components.operator_charts import Operators, chart_releases
from components.render.munge import munge_workloads, rotation_warning
from components.slurm import resolve
from components.slurm_cluster import SlurmCluster
from components.storage import Storage
from tests.harness import example_stacks, run_under_mocks, stack_config


def only(run, type_):
    (resource,) = run.of_type(type_)
    return resource


# --- munge -------------------------------------------------------------------


def test_munge_key_is_1024_random_characters_in_the_cluster_secret():
    run = run_under_mocks(lambda: {"name": MungeKey("munge", "fpt-hpc", "fpt-hpc").secret_name})
    # RandomPassword: its id is "none", where RandomBytes' id is the key itself.
    key = only(run, "random:index/randomPassword:RandomPassword")
    assert key.inputs["length"] == 1024 and key.inputs["special"] is False
    assert key.inputs["keepers"] == {"rotation": "0"}
    assert not run.of_type("random:index/randomBytes:RandomBytes")
    secret = only(run, "kubernetes:core/v1:Secret")
    assert secret.inputs["metadata"]["name"] == "fpt-hpc-munge"
    assert secret.inputs["metadata"]["namespace"] == "fpt-hpc"
    assert secret.inputs["data"] == {"munge.key": base64.b64encode(b"p" * 1024).decode()}
    assert "data" in secret.secret_inputs and "data" in secret.additional_secret_outputs
    assert run.outputs["name"] == "fpt-hpc-munge"


def test_secret_data_passes_on_a_key_a_targeted_up_skipped():
    from components.munge import secret_data

    def program():
        skipped: pulumi.Output[str] = pulumi.Output.from_input(None)  # type: ignore[arg-type]  # what the engine hands us
        return {"skipped": secret_data(skipped), "key": secret_data(pulumi.Output.from_input("k"))}

    run = run_under_mocks(program)
    assert run.outputs == {"skipped": None, "key": base64.b64encode(b"k").decode()}


def test_munge_rotation_is_a_keeper():
    run = run_under_mocks(lambda: MungeKey("munge", "c", "ns", rotation=3) and None)
    assert only(run, "random:index/randomPassword:RandomPassword").inputs["keepers"] == {"rotation": "3"}


def test_rotation_restarts_only_the_munge_carrying_workloads_that_exist():
    assert munge_workloads(parse_config({})) == (
        ["statefulset/controller", "statefulset/worker", "statefulset/login", "deployment/accounting"],
        ["deployment/exporter"],
    )
    lean = parse_config({"slurm": {"accounting": {"enabled": False}, "exporter": {"enabled": False}}})
    assert munge_workloads(lean) == (["statefulset/controller", "statefulset/worker", "statefulset/login"], [])
    warning = rotation_warning(parse_config({"slurm": {"mungeKeyRotation": 2, "exporter": {"enabled": False}}}), 1.0)
    assert warning is not None and "munge key rotation 1 -> 2" in warning and "exporter" not in warning
    assert rotation_warning(parse_config({"slurm": {"mungeKeyRotation": 2}}), 2.0) is None


def test_children_are_named_after_and_parented_to_the_component():
    run = run_under_mocks(lambda: MungeKey("renamed", "c", "ns") and None)
    component = only(run, "slurm-platform:munge:MungeKey")
    children = run.of_type("random:index/randomPassword:RandomPassword") + run.of_type("kubernetes:core/v1:Secret")
    assert len(children) == 2
    for child in children:
        assert child.name.startswith("renamed-") and child.parent == component.urn


# --- storage -----------------------------------------------------------------


def storage_run(stack):
    config = parse_config(stack_config(stack))
    return run_under_mocks(lambda: {"claims": Storage("storage", config).claim_names})


def test_storage_dev_uses_the_existing_class():
    run = storage_run("dev")
    assert not run.of_type("kubernetes:storage.k8s.io/v1:StorageClass")
    claims = {r.inputs["metadata"]["name"]: r for r in run.of_type("kubernetes:core/v1:PersistentVolumeClaim")}
    assert set(claims) == {"jail-pvc", "controller-spool-pvc"}
    jail = claims["jail-pvc"].inputs
    assert jail["metadata"]["namespace"] == "fpt-hpc"
    assert jail["spec"] == {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "100Gi"}}, "storageClassName": "default"}
    assert claims["controller-spool-pvc"].inputs["spec"]["resources"]["requests"]["storage"] == "10Gi"
    assert run.outputs["claims"] == {"jail": "jail-pvc", "controller-spool": "controller-spool-pvc"}


def test_storage_prod_static_jail_nfs_class_and_submount():
    run = storage_run("prod-hanoi")
    storage_class = only(run, "kubernetes:storage.k8s.io/v1:StorageClass")
    assert storage_class.inputs["provisioner"] == "nfs.csi.k8s.io"
    assert storage_class.inputs["parameters"] == {"server": "10.20.0.10", "share": "/export/slurm"}
    assert storage_class.inputs["reclaimPolicy"] == "Retain"
    volume = only(run, "kubernetes:core/v1:PersistentVolume")
    assert volume.inputs["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert volume.inputs["spec"]["claimRef"] == {"namespace": "fpt-hpc", "name": "jail-pvc"}
    assert volume.protect and volume.retain_on_delete
    claims = {r.inputs["metadata"]["name"]: r for r in run.of_type("kubernetes:core/v1:PersistentVolumeClaim")}
    assert set(claims) == {"jail-pvc", "controller-spool-pvc", "jail-submount-mlperf-sd-pvc"}
    assert claims["jail-pvc"].inputs["spec"]["volumeName"] == "jail-pvc-nfs"
    assert claims["jail-pvc"].inputs["spec"]["storageClassName"] == ""
    assert volume.urn in claims["jail-pvc"].dependencies
    assert claims["jail-submount-mlperf-sd-pvc"].inputs["spec"]["storageClassName"] == "slurm-nfs"


def test_storage_alibaba_nas_class():
    run = storage_run("prod-hangzhou")
    storage_class = only(run, "kubernetes:storage.k8s.io/v1:StorageClass")
    assert storage_class.inputs["provisioner"] == "nasplugin.csi.alibabacloud.com"
    assert storage_class.inputs["parameters"]["volumeAs"] == "subpath"


def test_every_data_volume_is_protected():
    run = storage_run("prod-hanoi")
    volumes = run.of_type("kubernetes:core/v1:PersistentVolumeClaim") + run.of_type("kubernetes:core/v1:PersistentVolume")
    assert volumes
    for resource in volumes:
        assert resource.protect and resource.retain_on_delete, resource.name


# --- node pools --------------------------------------------------------------


def test_node_pools_label_existing_nodes_only_with_labels():
    config = parse_config(stack_config("prod-hanoi"))
    run = run_under_mocks(lambda: {"filters": NodePools("pools", config.node_pools).node_filters})
    patches = run.of_type("kubernetes:core/v1:NodePatch")
    assert sorted(p.inputs["metadata"]["name"] for p in patches) == [f"fke-prod-hanoi-system-{i}" for i in range(3)]
    for patch in patches:
        assert set(patch.inputs) == {"apiVersion", "kind", "metadata"}
        assert patch.inputs["metadata"]["labels"] == {"worker.fptcloud/pool": "system"}
    gpu, no_gpu = run.outputs["filters"]
    assert gpu["name"] == "gpu" and len(gpu["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]) == 2
    assert no_gpu == {"name": "no-gpu", "nodeSelector": {"worker.fptcloud/pool": "system"}}


def test_node_pools_karpenter():
    raw = stack_config("dev")
    raw["nodePools"][0]["karpenter"] = {"instanceTypes": ["p5.48xlarge"]}
    config = parse_config(raw)
    run = run_under_mocks(lambda: NodePools("pools", config.node_pools) and None)
    pool = only(run, "kubernetes:karpenter.sh/v1:NodePool")
    spec = pool.inputs["spec"]
    assert spec["template"]["metadata"]["labels"] == {"worker.fptcloud/pool": "gpu-h100"}
    assert spec["template"]["spec"]["nodeClassRef"] == {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    assert spec["template"]["spec"]["taints"] == [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    assert spec["limits"]["nvidia.com/gpu"] == "16"


# --- operators ---------------------------------------------------------------


def operators_run(stack, **overrides):
    config = parse_config({**stack_config(stack), **overrides})
    return run_under_mocks(lambda: {"versions": Operators("operators", config, resolve(config)).versions})


def test_operators_charts_are_pinned_with_repos():
    run = operators_run("prod-hanoi")
    charts = {r.name.removeprefix("operators-"): r.inputs for r in run.of_type("kubernetes:helm.sh/v4:Chart")}
    gpu = charts["gpu-operator"]
    assert gpu["chart"] == "gpu-operator" and gpu["version"] == "v26.7.0"
    assert gpu["repositoryOpts"]["repo"] == "https://helm.ngc.nvidia.com/nvidia"
    assert gpu["values"]["nfd"] == {"enabled": True} and gpu["values"]["mig"] == {"strategy": "single"}
    net = charts["network-operator"]
    assert net["version"] == "24.10.1" and net["values"]["nfd"] == {"enabled": False, "deployNodeFeatureRules": True}
    assert charts["soperator"]["chart"] == "oci://cr.eu-north1.nebius.cloud/soperator/helm-soperator"
    assert charts["soperator-crds"]["version"] == "1.14.10"
    assert charts["soperator"]["skipCrds"] is True
    assert charts["soperator"]["values"]["controllerManager"]["manager"]["env"]["isMariadbCrdInstalled"] == "true"
    maria = charts["mariadb-operator"]
    assert (maria["chart"], maria["version"], maria["repositoryOpts"]["repo"]) == (
        "mariadb-operator",
        "0.29.0",
        "https://helm.mariadb.com/mariadb-operator",
    )
    assert all(chart["version"] for chart in charts.values())
    assert run.outputs["versions"]["gpu-operator"] == "v26.7.0"


def test_operator_order_crds_first():
    run = operators_run("prod-hanoi")
    charts = {r.name: r for r in run.of_type("kubernetes:helm.sh/v4:Chart")}

    def depends(name):
        return {run.by_urn(u).name for u in charts[name].dependencies}

    assert {"operators-soperator-crds", "operators-mariadb-operator"} <= depends("operators-soperator")
    assert not depends("operators-gpu-operator") & set(charts)


def test_separate_mariadb_crds_chart_from_oci():
    raw = stack_config("prod-hanoi")
    raw["operators"]["mariadbOperator"] = {"version": "26.6.0", "repository": "oci://ghcr.io/mariadb-operator/charts", "crdsChart": True}
    run = operators_run("prod-hanoi", operators=raw["operators"])
    charts = {r.name.removeprefix("operators-"): r for r in run.of_type("kubernetes:helm.sh/v4:Chart")}
    assert charts["mariadb-operator-crds"].inputs["chart"] == "oci://ghcr.io/mariadb-operator/charts/mariadb-operator-crds"
    assert charts["mariadb-operator"].inputs["values"]["crds"] == {"enabled": False}
    assert charts["mariadb-operator-crds"].urn in charts["mariadb-operator"].dependencies


def test_cert_manager_only_on_request():
    assert "operators-cert-manager" not in {r.name for r in operators_run("prod-hanoi").of_type("kubernetes:helm.sh/v4:Chart")}
    raw = stack_config("prod-hanoi")
    raw["operators"]["certManager"] = {"install": True}
    cm = operators_run("prod-hanoi", operators=raw["operators"]).named("operators-cert-manager")
    assert cm.inputs["values"]["crds"] == {"enabled": True} and cm.inputs["version"] == "v1.16.2"
    assert cm.inputs["values"]["startupapicheck"] == {"enabled": False}


def test_nic_cluster_policy_with_rdma_shared_device_plugin():
    run = operators_run("prod-hanoi")
    policy = only(run, "kubernetes:mellanox.com/v1alpha1:NicClusterPolicy")
    assert policy.inputs["metadata"]["name"] == "nic-cluster-policy"
    plugin = policy.inputs["spec"]["rdmaSharedDevicePlugin"]
    assert '"resourceName": "rdma_shared_device_a"' in plugin["config"] and '"ibs1"' in plugin["config"]
    assert {run.by_urn(u).name for u in policy.dependencies} >= {"operators-network-operator"}


def test_no_nic_cluster_policy_without_rdma():
    assert not operators_run("prod-hangzhou").of_type("kubernetes:mellanox.com/v1alpha1:NicClusterPolicy")


def test_install_false_declares_nothing():
    run = operators_run("dev")
    assert not run.of_type("kubernetes:helm.sh/v4:Chart")
    assert run.outputs["versions"] == {}


def test_external_accounting_needs_no_mariadb_operator():
    charts = {r.name for r in operators_run("prod-hangzhou").of_type("kubernetes:helm.sh/v4:Chart")}
    assert "operators-mariadb-operator" not in charts and "operators-gpu-operator" in charts


# --- LDAP --------------------------------------------------------------------


@pytest.fixture(scope="module")
def ldap_run():
    config = parse_config(stack_config("prod-hanoi"))
    return run_under_mocks(lambda: {"uri": LdapDirectory("ldap", config.ldap, "fpt-hpc").uri})


def test_ldap_server_service_and_secret(ldap_run):
    server = only(ldap_run, "kubernetes:apps/v1:StatefulSet")
    container = server.inputs["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"] and container["livenessProbe"] and container["resources"]["requests"]
    env = {e["name"]: e for e in container["env"]}
    assert env["LDAP_ROOT"]["value"] == "dc=hpc,dc=example,dc=vn"
    assert env["LDAP_ADMIN_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "ldap-secret", "key": "LDAP_ADMIN_PASSWORD"}
    assert server.inputs["spec"]["volumeClaimTemplates"][0]["spec"]["storageClassName"] == "xplat-nfs"
    services = {s.inputs["metadata"]["name"]: s for s in ldap_run.of_type("kubernetes:core/v1:Service")}
    assert services["ldap-service"].inputs["spec"]["ports"] == [
        {"name": "ldap", "port": 389, "targetPort": "ldap"},
        {"name": "ldaps", "port": 636, "targetPort": "ldaps"},
    ]
    assert env["LDAP_ENABLE_TLS"]["value"] == "yes"
    assert set(services) == {"ldap-service"}
    assert ldap_run.of_type("kubernetes:apps/v1:Deployment") == []
    secrets = {s.inputs["metadata"]["name"]: s for s in ldap_run.of_type("kubernetes:core/v1:Secret") if not s.read}
    assert set(secrets) == {"ldap-secret", "sssd-config", "nslcd-config", "ldap-seed"}
    for secret in secrets.values():
        assert "stringData" in secret.secret_inputs and "stringData" in secret.additional_secret_outputs
    assert ldap_run.outputs["uri"] == "ldaps://ldap-service.fpt-hpc.svc.cluster.local:636"


def test_ldap_client_config_has_no_password(ldap_run):
    configs = {c.inputs["metadata"]["name"]: c.inputs["data"] for c in ldap_run.of_type("kubernetes:core/v1:ConfigMap")}
    assert set(configs["ldap-client-config"]) == {"ldap.conf"}
    assert "BASE\tdc=hpc,dc=example,dc=vn" in configs["ldap-client-config"]["ldap.conf"]
    assert "p" * 32 not in str(configs)


READONLY_DN = "cn=slurm-readonly,ou=services,dc=hpc,dc=example,dc=vn"


def test_ldap_clients_bind_with_the_read_only_account_never_the_admin(ldap_run):
    readonly = ldap_run.named("ldap-readonly-password")
    assert readonly.type == "random:index/randomPassword:RandomPassword" and readonly.inputs["length"] >= 32
    sssd = ldap_run.named("ldap-sssd-config").inputs["stringData"]["sssd.conf"]
    assert f"ldap_default_bind_dn = {READONLY_DN}\n" in sssd
    assert "ldap_default_authtok = " + "p" * 32 in sssd
    nslcd = ldap_run.named("ldap-nslcd-config").inputs["stringData"]["nslcd.conf"]
    assert f"binddn {READONLY_DN}\n" in nslcd and "bindpw " + "p" * 32 in nslcd
    assert "uri ldaps://ldap-service.fpt-hpc.svc.cluster.local:636" in nslcd
    for conf in (sssd, nslcd):
        assert "cn=admin" not in conf
    # Both client files carry the read-only password: Pulumi secrets, never plain state.
    for name in ("ldap-sssd-config", "ldap-nslcd-config"):
        assert "stringData" in ldap_run.named(name).secret_inputs


def test_ldap_clients_trust_the_ca_of_the_tls_secret_which_the_program_never_reads(ldap_run):
    """The pods mount the CA (components/slurm/common.py ldap_ca_files, soperator 4.1.7's CA ConfigMap): a read of the
    TLS Secret would put its tls.key in the state, for whoever holds the passphrase, and fail a preview that may read no Secret."""
    assert not [s for s in ldap_run.resources if s.read]
    sssd = ldap_run.named("ldap-sssd-config").inputs["stringData"]
    nslcd = ldap_run.named("ldap-nslcd-config").inputs["stringData"]
    assert set(sssd) == {"sssd.conf"} and set(nslcd) == {"nslcd.conf"}
    assert "ldap_tls_cacert = /mnt/ldapCA/ca.crt\n" in sssd["sssd.conf"]
    assert "tls_cacertfile /etc/ldap-ca.crt\n" in nslcd["nslcd.conf"]
    assert "/etc/ssl/certs/ca-certificates.crt" not in sssd["sssd.conf"] + nslcd["nslcd.conf"]


def test_every_stack_with_ldap_tls_requires_it_of_every_connection():
    """LDAP_REQUIRE_TLS wherever TLS is on, and the init container that sets the same on a directory the
    image initialised before (tests/test_services_ldap.py proves both on slapd)."""
    with_tls = []
    for stack in example_stacks():
        config = parse_config(stack_config(stack))
        pod = ldap_statefulset(config.ldap, "ns")["spec"]["template"]["spec"]
        env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
        if config.ldap.tls.enabled:
            with_tls.append(stack)
            assert env["LDAP_ENABLE_TLS"] == env["LDAP_REQUIRE_TLS"] == "yes", stack
            (_, init) = pod["initContainers"]
            assert init["image"] == config.ldap.image and init["command"] == ["bash", "-c", require_tls_script()]
            assert {"name": "data", "mountPath": "/bitnami/openldap"} in init["volumeMounts"] and init["resources"]["limits"]
        else:
            assert "LDAP_REQUIRE_TLS" not in env and [c["name"] for c in pod["initContainers"]] == ["openssh-lpk-schema"], stack
    assert {"prod-hanoi", "staging-hanoi", "staging-hangzhou"} <= set(with_tls)


def test_ldap_seed_creates_the_read_only_account_with_a_hashed_password(ldap_run):
    from components.identity.entries import ssha512

    seed = ldap_run.named("ldap-seed").inputs["stringData"]["00-base.ldif"]
    assert "o: Example HPC Hanoi" in seed
    entry = seed.split(f"dn: {READONLY_DN}\n", 1)[1]
    assert "objectClass: simpleSecurityObject" in entry
    assert f"userPassword: {ssha512('p' * 32, 'p' * 16)}" in entry and "p" * 32 not in seed
    assert "stringData" in ldap_run.named("ldap-seed").secret_inputs


def test_ldap_acl_lets_the_account_read_and_nothing_else(ldap_run):
    script = ldap_run.named("ldap-init").inputs["data"]["10-readonly-acl.sh"]
    assert script.startswith("#!/bin/bash\n")
    assert f'olcAccess: {{2}}to * by dn.exact="{READONLY_DN}" read by self read by * none' in script
    assert "olcAccess: {1}to attrs=userPassword,shadowLastChange by self write by anonymous auth by * none" in script
    # The read-only account's password (on every node) is bind-only: it cannot change it.
    assert f'olcAccess: {{0}}to dn.exact="{READONLY_DN}" attrs=userPassword by anonymous auth by * none' in script
    assert "write" not in script.split("{2}to *", 1)[1]
    server = only(ldap_run, "kubernetes:apps/v1:StatefulSet")
    container = server.inputs["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "LDAP_ALLOW_ANON_BINDING", "value": "no"} in container["env"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["init"] == "/docker-entrypoint-initdb.d" and mounts["seed"] == "/ldifs"
    volumes = {v["name"]: v for v in server.inputs["spec"]["template"]["spec"]["volumes"]}
    assert volumes["seed"]["secret"]["secretName"] == "ldap-seed"


def test_ssha512_is_what_openldap_checks():
    import base64
    import hashlib

    from components.identity.entries import ssha512

    hashed = ssha512("secret", "saltsalt")
    raw = base64.b64decode(hashed.removeprefix("{SSHA512}"))
    assert hashed.startswith("{SSHA512}") and raw[64:] == b"saltsalt"
    assert raw[:64] == hashlib.sha512(b"secretsaltsalt").digest()


def test_ldap_tls_opens_636():
    raw = {"ldap": {"tls": {"enabled": True, "secretName": "ldap-tls"}}}
    config = parse_config(raw)
    run = run_under_mocks(lambda: {"uri": LdapDirectory("ldap", config.ldap, "ns").uri})
    service = run.named("ldap-service")
    assert [p["port"] for p in service.inputs["spec"]["ports"]] == [389, 636]
    assert run.outputs["uri"] == "ldaps://ldap-service.ns.svc.cluster.local:636"


# --- Slurm cluster -----------------------------------------------------------


SLURM_CLUSTER = "kubernetes:slurm.nebius.ai/v1:SlurmCluster"
SERVICE = "kubernetes:core/v1:Service"
AVAILABLE = {"status": {"phase": "Available", "conditions": [{"type": "LoginAvailable", "status": "True", "message": "ok"}]}}


def slurm_run(config, live=None):
    def program():
        slurm = SlurmCluster("slurm", config, resolve(config), [])
        return {"ssh": slurm.ssh_command, "endpoint": slurm.login_endpoint, "phase": slurm.phase}

    return run_under_mocks(program, live=live)


def test_slurm_cluster_component_declares_the_cr_and_restricted_login():
    config = parse_config(stack_config("prod-hanoi"))
    live = {SLURM_CLUSTER: AVAILABLE, SERVICE: {"status": {"loadBalancer": {"ingress": [{"ip": "198.51.100.20"}]}}}}
    run = slurm_run(config, live)
    cluster = only(run, SLURM_CLUSTER)
    assert cluster.inputs["metadata"]["name"] == "fpt-hpc" and cluster.inputs["metadata"]["namespace"] == "fpt-hpc"
    assert "status" not in cluster.inputs
    assert cluster.custom_timeouts == {"create": "40m", "update": "40m"}
    login = run.named("slurm-login-ssh")
    assert login.inputs["spec"]["loadBalancerSourceRanges"] == ["203.0.113.0/24", "198.51.100.16/28"]
    assert cluster.urn in login.dependencies  # its endpoints are the login pods of an Available cluster
    assert not [r for r in run.resources if r.read]
    assert run.outputs == {"ssh": "ssh root@198.51.100.20", "endpoint": "198.51.100.20:22", "phase": "Available"}


def test_operator_login_service_is_read_after_the_cluster():
    config = parse_config(stack_config("prod-hangzhou"))
    live = {
        SLURM_CLUSTER: AVAILABLE,
        SERVICE: {
            "spec": {"type": "LoadBalancer", "ports": [{"port": 22}]},
            "status": {"loadBalancer": {"ingress": [{"hostname": "slb.example.cn"}]}},
        },
    }
    run = slurm_run(config, live)
    (read,) = [r for r in run.resources if r.read]
    assert read.type == SERVICE and read.import_id == "slurm/ack-hpc-login-svc"
    assert run.outputs["ssh"] == "ssh root@slb.example.cn"


def test_render_only_stack_reads_and_awaits_nothing():
    run = slurm_run(parse_config(stack_config("local")))
    assert not [r for r in run.resources if r.read]
    assert only(run, SLURM_CLUSTER).custom_timeouts == {}
    assert run.outputs["ssh"] == "ssh -p 30022 root@<any-node-ip>"
    assert run.outputs["phase"] is None and run.outputs["endpoint"] is None


def test_a_cluster_that_is_not_available_warns_with_its_conditions():
    config = parse_config(stack_config("prod-hanoi"))
    status = {
        "phase": "Not available",
        "conditions": [{"type": "WorkersAvailable", "status": "False", "message": "Slurm workers are not available yet"}],
    }
    run = slurm_run(config, {SLURM_CLUSTER: {"status": status}})
    (warning,) = [w for w in run.warnings if "SlurmCluster" in w]
    assert "WorkersAvailable=False: Slurm workers are not available yet" in warning


def test_soperator4_cluster_is_awaited_and_reports_its_phase_like_1_14_10():
    config = parse_config(stack_config("staging-hanoi"))
    status = {"phase": "Not available", "conditions": [{"type": "WorkersAvailable", "status": "False", "message": "no NodeSet ready"}]}
    run = slurm_run(config, {SLURM_CLUSTER: {"status": status}})
    cluster = only(run, SLURM_CLUSTER)
    assert cluster.inputs["metadata"]["annotations"]["pulumi.com/waitFor"] == "jsonpath={.status.phase}=Available"
    assert cluster.custom_timeouts == {"create": "40m", "update": "40m"}
    assert "status" not in cluster.inputs
    assert run.outputs["phase"] == "Not available"
    (warning,) = [w for w in run.warnings if "SlurmCluster" in w]
    assert "WorkersAvailable=False: no NodeSet ready" in warning
    # Only the awaited CR gets the readiness timeout; its NodeSets are declared as they are.
    nodesets = run.of_type("kubernetes:slurm.nebius.ai/v1alpha1:NodeSet")
    assert nodesets and all(n.custom_timeouts == {} for n in nodesets)


def test_unmet_conditions_are_an_output():
    status = {"phase": "Not available", "conditions": [{"type": "LoginAvailable", "status": "Unknown", "message": "Reconciling Slurm Login"}]}

    def program():
        config = parse_config(stack_config("prod-hanoi"))
        return {"unmet": SlurmCluster("slurm", config, resolve(config), []).unmet_conditions}

    assert run_under_mocks(program, live={SLURM_CLUSTER: {"status": status}}).outputs["unmet"] == ["LoginAvailable=Unknown: Reconciling Slurm Login"]
    assert run_under_mocks(program, live={SLURM_CLUSTER: AVAILABLE}).outputs["unmet"] == []


ACK_CLUSTER = "kubernetes:kai.alibabacloud.com/v1:SlurmCluster"
SLINKY_NODESET = "kubernetes:slinky.slurm.net/v1beta1:NodeSet"


def test_ack_cluster_is_awaited_until_the_operator_reports_it_ready():
    config = parse_config(stack_config("staging-hangzhou"))
    status = {"state": "progressing", "reason": "waiting for slurmctld pod", "observedGeneration": 1}
    run = slurm_run(config, {ACK_CLUSTER: {"status": status}})
    cluster = only(run, ACK_CLUSTER)
    assert cluster.inputs["metadata"]["annotations"] == {"pulumi.com/waitFor": "jsonpath={.status.state}=ready"}
    assert cluster.custom_timeouts == {"create": "40m", "update": "40m"}
    assert "status" not in cluster.inputs
    (warning,) = [w for w in run.warnings if "SlurmCluster" in w]
    where = f"{config.cluster.namespace}/{config.cluster.name}"
    assert warning.startswith(f"SlurmCluster {where} is 'progressing', not ready: waiting for slurmctld pod. Inspect: kubectl")
    assert not [w for w in slurm_run(config, {ACK_CLUSTER: {"status": {"state": "ready"}}}).warnings if "SlurmCluster" in w]
    raw = stack_config("staging-hangzhou")
    off = parse_config({**raw, "slurm": {**raw["slurm"], "readiness": {"awaitAvailable": False}}})
    unawaited = only(slurm_run(off), ACK_CLUSTER)
    assert "annotations" not in unawaited.inputs["metadata"] and unawaited.custom_timeouts == {}


@pytest.mark.parametrize(
    ("stack", "kind", "not_ready", "ready", "phases"),
    [
        ("prod-hanoi", SLURM_CLUSTER, {"phase": "Not available"}, {"phase": "Available"}, ("Not available", "Available")),
        ("staging-hangzhou", ACK_CLUSTER, {"state": "progressing"}, {"state": "ready"}, ("progressing", "ready")),
        ("prod-hcm", SLINKY_NODESET, {"readyReplicas": 0}, None, (None, None)),
    ],
)
def test_slurm_ready_is_each_operators_own_answer_awaited_or_not(stack, kind, not_ready, ready, phases):
    """slurmReady, the deploy's last check, reads what each operator reports (soperator's phase, ACK's state,
    every Slinky NodeSet's ready replicas), also where the stack does not await it."""
    raw = stack_config(stack)
    unawaited = parse_config({**raw, "slurm": {**raw["slurm"], "readiness": {"awaitAvailable": False}}})
    for config in (parse_config(raw), unawaited):
        if ready is None:  # Slinky: every NodeSet at its replicas (one pool here, so one status serves)
            (pool,) = config.gpu_pools
            ready = {"readyReplicas": pool.worker_replicas}

        def program(config=config):
            slurm = SlurmCluster("slurm", config, resolve(config), [])
            return {"ready": slurm.ready, "phase": slurm.phase}

        assert run_under_mocks(program, live={kind: {"status": not_ready}}).outputs == {"ready": False, "phase": phases[0]}
        assert run_under_mocks(program, live={kind: {"status": ready}}).outputs == {"ready": True, "phase": phases[1]}


def test_a_render_only_stack_has_no_readiness_to_report():
    def program():
        config = parse_config(stack_config("local"))
        return {"ready": SlurmCluster("slurm", config, resolve(config), []).ready}

    assert run_under_mocks(program).outputs == {"ready": None}


def test_slinky_nodesets_are_awaited_until_every_worker_is_ready():
    config = parse_config(stack_config("prod-hcm"))
    # A NodeSet's conditions (a scheduled update's reservation) are not the cluster's: never reported as unmet.
    nodeset_status = {"readyReplicas": 1, "conditions": [{"type": "ReservationCreated", "status": "False", "message": "gone"}]}

    def program():
        slurm = SlurmCluster("slurm", config, resolve(config), [])
        return {"phase": slurm.phase, "unmet": slurm.unmet_conditions}

    run = run_under_mocks(program, live={SLINKY_NODESET: {"status": nodeset_status}})
    nodesets = run.of_type(SLINKY_NODESET)
    replicas = {pool.name: pool.worker_replicas for pool in config.gpu_pools}
    assert len(nodesets) == len(replicas) and all(replicas.values())
    for nodeset in nodesets:
        pool = nodeset.inputs["metadata"]["name"].removeprefix("slinky-")
        expected = f"jsonpath={{.status.readyReplicas}}={int(nodeset.inputs['spec']['replicas'])}"
        assert nodeset.inputs["metadata"]["annotations"] == {"pulumi.com/waitFor": expected}, pool
        assert nodeset.custom_timeouts == {"create": "40m", "update": "40m"}
    # The Controller and LoginSet report no readiness in 1.2.1: declared as they are.
    for kind in ("Controller", "LoginSet"):
        (resource,) = run.of_type(f"kubernetes:slinky.slurm.net/v1beta1:{kind}")
        assert "annotations" not in resource.inputs["metadata"] and resource.custom_timeouts == {}
    assert run.outputs == {"phase": None, "unmet": []}
    raw = stack_config("prod-hcm")
    off = parse_config({**raw, "slurm": {**raw["slurm"], "readiness": {"awaitAvailable": False}}})
    assert all("annotations" not in n.inputs["metadata"] and n.custom_timeouts == {} for n in slurm_run(off).of_type(SLINKY_NODESET))


# --- adoption ------------------------------------------------------------------


def adopted_config(**storage):
    raw = stack_config("dev")
    raw["cluster"] = {**raw["cluster"], "createNamespace": False}
    raw["storage"] = {**raw["storage"], "jail": {"size": "100Gi", "adopt": True}, "controllerSpool": {"size": "10Gi", "adopt": True}, **storage}
    raw["slurm"] = {**raw["slurm"], "adoptMungeSecret": True}
    return parse_config(raw)


def test_adopted_claims_are_imported_exactly_as_the_fpt_guide_makes_them():
    config = adopted_config()
    run = run_under_mocks(lambda: Storage("storage", config) and None)
    claims = {r.inputs["metadata"]["name"]: r for r in run.of_type("kubernetes:core/v1:PersistentVolumeClaim")}
    assert {name: claim.import_id for name, claim in claims.items()} == {
        "jail-pvc": "fpt-hpc/jail-pvc",
        "controller-spool-pvc": "fpt-hpc/controller-spool-pvc",
    }
    # The guide's jail-pvc.yaml, field for field: no label of ours that would change the object.
    jail = claims["jail-pvc"].inputs
    assert jail["metadata"] == {"name": "jail-pvc", "namespace": "fpt-hpc"}
    assert jail["spec"] == {"storageClassName": "default", "accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "100Gi"}}}
    for claim in claims.values():
        assert claim.protect and claim.retain_on_delete


def test_only_adopted_volumes_are_imported():
    raw = stack_config("prod-hanoi")
    raw["cluster"] = {**raw["cluster"], "createNamespace": False}
    raw["storage"]["jail"] = {**raw["storage"]["jail"], "adopt": True}
    config = parse_config(raw)
    run = run_under_mocks(lambda: Storage("storage", config) and None)
    imports = {r.name: r.import_id for r in run.kubernetes_objects() if r.import_id}
    assert imports == {"storage-jail-pvc-nfs": "jail-pvc-nfs", "storage-jail-pvc": "fpt-hpc/jail-pvc"}
    submount = run.named("storage-jail-submount-mlperf-sd-pvc")
    assert submount.inputs["metadata"]["labels"] == {"slurm-platform/volume": "mlperf-sd"}


def test_an_adopted_munge_secret_keeps_its_key():
    run = run_under_mocks(lambda: {"name": MungeKey("munge", "fpt-hpc", "fpt-hpc", adopt=True).secret_name})
    assert not run.of_type("random:index/randomBytes:RandomBytes")
    secret = only(run, "kubernetes:core/v1:Secret")
    assert secret.import_id == "fpt-hpc/fpt-hpc-munge"
    assert "data" not in secret.inputs and set(secret.ignore_changes) == {"data", "stringData"}
    assert secret.inputs["metadata"] == {"name": "fpt-hpc-munge", "namespace": "fpt-hpc"}
    assert run.outputs["name"] == "fpt-hpc-munge"


def test_nothing_is_imported_without_adopt():
    config = parse_config(stack_config("prod-hanoi"))
    run = run_under_mocks(lambda: Storage("storage", config) and MungeKey("munge", "c", "ns") and None)
    assert not [r.name for r in run.resources if r.import_id]


# --- operator opt-outs ---------------------------------------------------------


def test_a_portal_owned_network_operator_gets_no_nic_cluster_policy():
    raw = stack_config("prod-hanoi")
    raw["operators"]["networkOperator"] = {**raw["operators"]["networkOperator"], "install": False}
    run = operators_run("prod-hanoi", operators=raw["operators"])
    assert not run.of_type("kubernetes:mellanox.com/v1alpha1:NicClusterPolicy")
    assert "operators-network-operator" not in {r.name for r in run.of_type("kubernetes:helm.sh/v4:Chart")}
    # dev: the FPT portal installs every operator, although its pool has RDMA.
    dev = operators_run("dev")
    assert parse_config(stack_config("dev")).has_rdma
    assert not [r for r in dev.resources if r.custom]


# --- Helm hooks ------------------------------------------------------------------


def test_every_chart_we_can_install_has_its_hooks_accounted_for():
    raw = stack_config("prod-hanoi")
    raw["operators"]["certManager"] = {"install": True}
    raw["operators"]["mariadbOperator"] = {"version": "26.6.0", "repository": "oci://ghcr.io/mariadb-operator/charts", "crdsChart": True}
    configs = parse_config(raw), parse_config(stack_config("prod-hoalac"))  # Kueue beside Slurm
    releases = [release for config in configs for release in chart_releases(config, resolve(config))]
    assert {r.key for r in releases} == set(HELM_HOOKS)


def test_hook_only_features_are_off_because_helm_v4_chart_skips_hooks():
    charts = {r.name.removeprefix("operators-"): r.inputs for r in operators_run("prod-hanoi").of_type("kubernetes:helm.sh/v4:Chart")}
    assert charts["gpu-operator"]["values"]["operator"] == {"upgradeCRD": False}
    assert charts["network-operator"]["values"]["upgradeCRDs"] is False
    # The CRDs those hook Jobs would apply come from the charts' crds/ as Pulumi resources instead.
    assert not charts["gpu-operator"]["skipCrds"] and not charts["network-operator"]["skipCrds"]


# --- custom resources wait for the release installing their CRDs ----------------


def full_stacks() -> dict[str, dict]:
    """Every example stack, plus prod-hanoi with every chart the program can install beside its Slurm operator."""
    stacks = {stack: stack_config(stack) for stack in example_stacks()}
    full = stack_config("prod-hoalac")  # soperator 4.1.7 (cert-manager, kruise), Kueue, both NVIDIA operators
    mariadb = {"version": "26.6.0", "repository": "oci://ghcr.io/mariadb-operator/charts", "crdsChart": True}
    full["operators"] = {**full["operators"], "certManager": {"install": True}, "mariadbOperator": mariadb}
    stacks["prod-hoalac+all-charts"] = full
    return stacks


def custom_group(type_token: str) -> str | None:
    """`kubernetes:<group>/<version>:<Kind>` -> group, for the kinds no typed resource covers."""
    from components.declare import BUILTIN_KINDS

    module = type_token.split(":")[1]
    builtin_groups = {api_group(api_version) for api_version, _ in BUILTIN_KINDS} | {"core", "apps", "helm.sh", "storage.k8s.io"}
    group = module.rsplit("/", 1)[0] if "/" in module else ""
    return None if group in builtin_groups or "." not in group else group


def waits_for(run, resource) -> set[str]:
    """Every URN the resource waits for, through dependencies of dependencies and parents' dependencies."""
    seen: set[str] = set()
    todo = [resource]
    while todo:
        current = todo.pop()
        for urn in [*current.dependencies, *([current.parent] if current.parent else [])]:
            if urn not in seen and any(r.urn == urn for r in run.resources):
                seen.add(urn)
                todo.append(run.by_urn(urn))
    return seen


@pytest.mark.parametrize("stack", list(full_stacks()))
def test_every_custom_resource_waits_for_the_release_installing_its_crd(stack):
    """Derived, not listed: what each release installs and renders (with its values) and every object
    the program declares. A first up on an empty cluster never depends on which chart comes first."""
    from components.platform import build_platform

    raw = full_stacks()[stack]
    config = parse_config(raw)
    run = run_under_mocks(lambda: build_platform(config), raw, stack=stack.split("+")[0])
    releases = chart_releases(config, resolve(config))
    installs = {release.key: installed_groups(release) for release in releases}
    chart_urns = {r.name.removeprefix("operators-"): r.urn for r in run.of_type("kubernetes:helm.sh/v4:Chart")}
    checked = set()
    for resource in run.kubernetes_objects():
        group = custom_group(resource.type)
        providers = [key for key, groups in installs.items() if group in groups]
        if group and providers:
            assert chart_urns[providers[0]] in waits_for(run, resource), f"{resource.name} ({group}) does not wait for {providers[0]}"
            checked.add((group, providers[0]))
    for release in releases:
        for group in rendered_groups(release):
            providers = [key for key, groups in installs.items() if group in groups]
            if providers:
                chart = run.by_urn(chart_urns[release.key])
                assert chart_urns[providers[0]] in waits_for(run, chart), f"release {release.key} renders {group} before {providers[0]}"
                checked.add((group, providers[0]))
    CHECKED[stack] = checked


CHECKED: dict[str, set[tuple[str, str]]] = {}


def test_the_crd_dependency_check_covered_every_operator_kind():
    # Runs after the parametrized test above (file order): the loop found what it must have found.
    covered = set().union(*CHECKED.values())
    # network-operator's NodeFeatureRule waits for the GPU operator's NFD CRD.
    assert ("nfd.k8s-sigs.io", "gpu-operator") in covered
    groups = {"mellanox.com", "kueue.x-k8s.io", "slurm.nebius.ai", "slinky.slurm.net", "k8s.mariadb.com", "cert-manager.io"}
    assert groups <= {group for group, _ in covered}, covered


def test_what_a_chart_installs_matches_the_crds_carried_in_the_repo():
    """CHART_APIS against real CRDs: the contracts' (file `<group>_<plural>.json`) and the kwok stand-in charts' crds/."""
    import json as json_module
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parent.parent
    provenance = json_module.loads((root / "contracts" / "provenance.json").read_text())
    provided = set().union(
        *(installed_groups(r) for config in map(parse_config, full_stacks().values()) for r in chart_releases(config, resolve(config)))
    )
    contract_groups = {
        path.name.split("_")[0] for folder in ("soperator", "slinky", "kueue") for path in (root / "contracts" / folder).rglob("*_*.json")
    }
    assert provenance and contract_groups == {"slurm.nebius.ai", "slinky.slurm.net", "kueue.x-k8s.io"}
    assert contract_groups <= provided
    stand_ins = list((root / "scripts" / "kube" / "charts").glob("*/crds/*.yaml"))
    assert stand_ins
    for crd_file in stand_ins:
        chart = crd_file.parent.parent.name
        group = yaml.safe_load(crd_file.read_text())["spec"]["group"]
        assert group in {a.group for a in CHART_APIS[chart].installs}, (chart, group)


def test_the_network_operators_node_feature_rule_follows_the_nfd_the_stack_runs():
    raw = stack_config("prod-hanoi")
    config = parse_config(raw)
    releases = {r.key: r for r in chart_releases(config, resolve(config))}
    network = releases["network-operator"]
    assert network.values["nfd"]["deployNodeFeatureRules"] is True and "gpu-operator" in network.depends_on
    # No NFD in the stack: nothing would serve the rule, whose CRD may not exist.
    raw["operators"] = {**raw["operators"], "gpuOperator": {"nodeFeatureDiscovery": False}}
    config = parse_config(raw)
    releases = {r.key: r for r in chart_releases(config, resolve(config))}
    assert releases["network-operator"].values["nfd"]["deployNodeFeatureRules"] is False
    assert "gpu-operator" not in releases["network-operator"].depends_on


def test_a_release_rendering_kinds_of_a_later_release_is_refused():
    renders_nfd = ChartRelease("network-operator", "network-operator", "24.10.1", "n", {"nfd": {"enabled": False}})
    provides_nfd = ChartRelease("gpu-operator", "gpu-operator", "v24.9.2", "g")
    with pytest.raises(ValueError, match=r"release network-operator renders custom resources of \['gpu-operator'\], installed after it"):
        with_crd_dependencies([renders_nfd, provides_nfd])
    assert with_crd_dependencies([provides_nfd, renders_nfd])[1].depends_on == ("gpu-operator",)

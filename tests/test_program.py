"""Whole-program tests under mocks: every example stack, end to end."""

import pytest

from components.config import ConfigError, parse_config
from components.platform import build_platform
from components.slurm import operator_module, resolve
from tests.harness import example_stacks, run_under_mocks, stack_config

PVC = "kubernetes:core/v1:PersistentVolumeClaim"
SLURM_CLUSTER = "kubernetes:slurm.nebius.ai/v1:SlurmCluster"
CHART = "kubernetes:helm.sh/v4:Chart"


def run_stack(stack, previous_outputs=None, **overrides):
    raw = {**stack_config(stack), **overrides}
    config = parse_config(raw)
    return run_under_mocks(lambda: build_platform(config), raw, stack=stack, previous_outputs=previous_outputs)


@pytest.fixture(scope="module", params=example_stacks())
def stack_run(request):
    return request.param, run_stack(request.param)


def test_one_slurm_cluster_with_fixed_claims(stack_run):
    stack, run = stack_run
    config = parse_config(stack_config(stack))
    claims = {r.inputs["metadata"]["name"] for r in run.of_type(PVC)}
    if not config.uses_jail:
        # ACK and Slinky pods have their own root file system: only shared submounts (and ACK's /home and slurmctld's state).
        ack_claims = set()
        if config.slurm.ack is not None and config.slurm_operator == "ack":
            home = [config.slurm.ack.home.claim_name] if config.slurm.ack.home else []
            ack_claims = {f"{config.cluster.name}-slurmctld-state", *home}
        assert claims == {sub.claim_name for sub in config.storage.submounts} | ack_claims
        assert not run.of_type(SLURM_CLUSTER)
        return
    (cluster,) = run.of_type(SLURM_CLUSTER)
    assert {"jail-pvc", "controller-spool-pvc"} <= claims
    sources = {s["persistentVolumeClaim"]["claimName"] for s in cluster.inputs["spec"]["volumeSources"]}
    assert sources == claims


def test_data_volumes_are_protected_and_retained(stack_run):
    _, run = stack_run
    volumes = run.of_type(PVC) + run.of_type("kubernetes:core/v1:PersistentVolume")
    assert volumes
    for resource in volumes:
        assert resource.protect and resource.retain_on_delete, resource.name


def test_every_kubernetes_object_uses_the_stack_provider(stack_run):
    _, run = stack_run
    objects = run.kubernetes_objects()
    assert objects
    for resource in objects:
        assert resource.provider.split("::")[-2:] == ["k8s", "k8s-id"], resource.name


def test_secrets_are_pulumi_secrets(stack_run):
    _, run = stack_run
    # Secrets read from the cluster (ldap.tls.secretName) hold nothing the program sends.
    secrets = [secret for secret in run.of_type("kubernetes:core/v1:Secret") if not secret.read]
    assert secrets
    for secret in secrets:
        held = {"data", "stringData"} & set(secret.inputs)
        assert held and held <= set(secret.secret_inputs), secret.name


def test_no_secret_in_config_maps(stack_run):
    _, run = stack_run
    secret_values = {"p" * 32}  # the mocked LDAP password
    config_maps = run.of_type("kubernetes:core/v1:ConfigMap")
    assert config_maps
    for config_map in config_maps:
        text = str(config_map.inputs.get("data"))
        assert not any(value in text for value in secret_values), config_map.name


def test_outputs(stack_run):
    stack, run = stack_run
    config = parse_config(stack_config(stack))
    outputs = run.outputs
    assert outputs["namespace"] == config.cluster.namespace
    assert outputs["clusterName"] == config.cluster.name
    module = operator_module(config)
    if config.uses_jail:
        assert outputs["pvcNames"]["jail"] == "jail-pvc" and outputs["pvcNames"]["controller-spool"] == "controller-spool-pvc"
    assert outputs["pvcNames"] == {sub.name: sub.claim_name for sub in config.storage.submounts} | outputs["pvcNames"]
    assert outputs["mungeSecretName"] == (f"{config.cluster.name}-munge" if module.USES_MUNGE else None)
    assert outputs["sshCommand"].startswith("ssh ")
    assert outputs["workerNodes"] == module.worker_nodes(config) and outputs["workerNodes"]
    # Production (and staging, rehearsing it) directories speak TLS only.
    assert config.ldap.tls.enabled == (config.environment in ("prod", "staging"))
    assert outputs["ldapUri"].startswith("ldaps://ldap-service." if config.ldap.tls.enabled else "ldap://ldap-service.")
    assert set(outputs["chartVersions"]) == {r.name.removeprefix("operators-") for r in run.of_type(CHART)}
    assert set(outputs["installedCharts"]) == set(outputs["chartVersions"])
    if module.OPERATOR == "soperator 1.14.10":
        assert outputs["slurmServices"]["controller"] == f"{config.cluster.name}-controller-svc"
        assert outputs["slurmServices"]["login"] == f"{config.cluster.name}-login-svc"
    else:
        assert outputs["slurmServices"] == {"ssh": module.login_service_name(config)}
    assert outputs["mungeKeyRotation"] == config.slurm.munge_key_rotation


def test_installed_charts_name_chart_version_and_namespace():
    installed = run_stack("prod-hanoi").outputs["installedCharts"]
    assert installed["soperator"] == {
        "chart": "oci://cr.eu-north1.nebius.cloud/soperator/helm-soperator",
        "version": "1.14.10",
        "namespace": "soperator-system",
    }
    assert installed["gpu-operator"]["chart"] == "https://helm.ngc.nvidia.com/nvidia/gpu-operator"


def test_munge_key_rotation_warns_at_preview_with_what_restarts():
    run = run_stack("prod-hanoi", previous_outputs={"mungeKeyRotation": 0}, slurm={**stack_config("prod-hanoi")["slurm"], "mungeKeyRotation": 1})
    (warning,) = [w for w in run.warnings if "munge key rotation" in w]
    assert warning.startswith("munge key rotation 0 -> 1: Secret fpt-hpc-munge gets a new key")
    workloads = "statefulset/controller statefulset/worker statefulset/login deployment/accounting deployment/exporter"
    assert f"These pods will restart: {workloads} (namespace fpt-hpc)" in warning
    assert (
        "run: kubectl -n soperator-system rollout restart deployment -l app.kubernetes.io/name=helm-soperator"
        " && kubectl -n fpt-hpc rollout restart deployment/exporter"
        f" && kubectl -n fpt-hpc rollout status {workloads} "
    ) in warning
    # Same rotation, or a first deployment: nothing restarts.
    assert not [w for w in run_stack("prod-hanoi", previous_outputs={"mungeKeyRotation": 0}).warnings if "munge" in w]
    assert not [w for w in run_stack("prod-hanoi").warnings if "munge" in w]


def test_slurm_cluster_waits_for_crds_volumes_and_munge():
    run = run_stack("prod-hanoi")
    (cluster,) = run.of_type(SLURM_CLUSTER)
    waits_for = {run.by_urn(urn).name for urn in cluster.dependencies}
    assert {"operators-soperator-crds", "storage-jail-pvc", "storage-controller-spool-pvc", "munge-secret"} <= waits_for
    assert not waits_for & {"operators-gpu-operator", "operators-network-operator", "operators-soperator"}


def test_prod_hanoi_declares_the_operators():
    run = run_stack("prod-hanoi")
    charts = {r.name for r in run.of_type(CHART)}
    assert charts == {
        "operators-gpu-operator",
        "operators-network-operator",
        "operators-soperator-crds",
        "operators-soperator",
        "operators-mariadb-operator",
        "operators-kube-prometheus-stack",
    }
    assert run.of_type("kubernetes:mellanox.com/v1alpha1:NicClusterPolicy")
    assert run.of_type("kubernetes:core/v1:PersistentVolume")
    assert len(run.of_type("kubernetes:core/v1:NodePatch")) == 3


def test_dev_declares_no_charts():
    run = run_stack("dev")
    assert not run.of_type(CHART)


def test_scale_down_warns_with_node_names():
    run = run_stack("dev", previous_outputs={"workerNodes": ["worker-0", "worker-1", "worker-2", "worker-3"]})
    (warning,) = [w for w in run.warnings if "scontrol delete" in w]
    assert "worker-2, worker-3" in warning
    assert "scontrol delete nodeName=worker-2,worker-3" in warning


def test_scale_up_and_first_deploy_do_not_warn():
    assert not [w for w in run_stack("dev", previous_outputs={"workerNodes": ["worker-0"]}).warnings if "scontrol" in w]
    assert not [w for w in run_stack("dev").warnings if "scontrol" in w]


# --- moves between Slurm operators on a live stack (components/operator_moves.py) ------------------------


def refused_run(stack, previous_outputs, **overrides):
    """The program's refusal (or None) and every resource it registered before it."""
    raw = {**stack_config(stack), **overrides}
    config = parse_config(raw)
    refusal = []

    def program():
        try:
            return build_platform(config)
        except ConfigError as error:
            refusal.append(str(error))
            return None

    run = run_under_mocks(program, raw, stack=stack, previous_outputs=previous_outputs)
    return (refusal[0] if refusal else None), run


def test_switching_operators_on_a_live_stack_is_refused_before_anything_is_registered():
    refused = 0
    for stack in example_stacks():
        running = parse_config(stack_config(stack)).slurm_operator
        for before in sorted({"soperator", "ack", "slinky"} - {running}):
            # The last update's own output, and a stack that predates it (read from installedCharts).
            release = {"soperator": "soperator", "slinky": "slurm-operator", "ack": "ack-slurm-operator"}[before]
            for outputs in ({"slurmOperator": {"name": before, "version": "1"}}, {"installedCharts": {release: {"version": "1"}}}):
                message, run = refused_run(stack, outputs)
                assert message is not None, (stack, before, outputs)
                assert f"slurm-platform:slurm.operatorSwitch: this stack runs {before} 1 and slurmOperator is now {running}" in message
                assert f"set slurm.operatorSwitch: {{from: {before}, acknowledged: true}}" in message
                # The stack's own StackReference (a read) is all that was registered.
                assert [r.type for r in run.resources] == ["pulumi:pulumi:StackReference"], (stack, [r.name for r in run.resources])
                refused += 1
    assert refused == 4 * len(example_stacks())


def test_an_acknowledged_switch_keeps_the_old_operators_data_volumes_and_munge_key():
    switch = {**stack_config("prod-hcm")["slurm"], "operatorSwitch": {"from": "soperator", "acknowledged": True}}
    before = {"slurmOperator": {"name": "soperator", "version": "1.14.10"}}
    message, run = refused_run("prod-hcm", before, slurm=switch)
    assert message is None
    claims = {r.inputs["metadata"]["name"]: r for r in run.of_type(PVC)}
    for claim in ("jail-pvc", "controller-spool-pvc"):
        assert claims[claim].protect and claims[claim].retain_on_delete, claim
    # Same resource names as under soperator: the same URNs, so nothing is replaced or deleted.
    assert {"storage-jail-pvc", "storage-controller-spool-pvc", "munge-secret"} <= {r.name for r in run.resources}
    assert run.outputs["slurmOperator"] == {"name": "slinky", "version": "1.2.1"}
    # Slinky mounts none of them: they are kept, not used.
    assert not any("jail-pvc" in str(r.inputs) for r in run.resources if r.type.startswith("kubernetes:slinky.slurm.net"))
    # Not acknowledged, or acknowledging another operator: refused.
    for wrong in ({"from": "soperator", "acknowledged": False}, {"from": "ack", "acknowledged": True}):
        message, _ = refused_run("prod-hcm", before, slurm={**switch, "operatorSwitch": wrong})
        assert message and "slurm.operatorSwitch" in message, wrong


def test_soperator_goes_forward_to_4_1_7_and_never_back():
    message, run = refused_run("prod-hanoi", {"slurmOperator": {"name": "soperator", "version": "4.1.7"}})
    assert message == (
        "invalid stack config (1 problem):\n  slurm-platform:operators.soperator.version: this stack runs soperator 4.1.7 and "
        "soperator has no way back to 1.14.10: 4.1.7's SlurmCluster has no spec.slurmNodes.worker, which 1.14.10's CRD "
        'requires, and its workers are NodeSets, a kind 1.14.10 does not know; keep operators.soperator.version: 4.1.7; got "1.14.10"'
    )
    assert [r.type for r in run.resources] == ["pulumi:pulumi:StackReference"]
    message, run = refused_run("staging-hanoi", {"slurmOperator": {"name": "soperator", "version": "1.14.10"}})
    assert message is None and run.of_type(SLURM_CLUSTER)
    # A first up (no outputs yet) runs whatever the config says.
    assert refused_run("prod-hcm", None)[0] is None


def test_the_upgrade_moves_the_crds_chart_first_and_only_then():
    from components.operator_charts import chart_releases

    raw = stack_config("prod-hanoi")
    raw["operators"] = {**raw["operators"], "soperator": {"crdsVersion": "4.1.7"}}
    config = parse_config(raw)
    versions = {r.key: r.version for r in chart_releases(config, resolve(config))}
    assert (versions["soperator-crds"], versions["soperator"]) == ("4.1.7", "1.14.10")
    raw["operators"]["soperator"] = {"crdsVersion": "4.1.7", "version": "4.1.7"}
    with pytest.raises(ConfigError, match=r"slurm-platform:operators.soperator.crdsVersion: only the first step .* remove it; got \"4.1.7\""):
        parse_config(raw)


def test_recover_finds_each_pending_create_as_kubectl_names_it():
    from tools.recover import kubernetes_object

    claim = {"type": "kubernetes:core/v1:PersistentVolumeClaim", "inputs": {"metadata": {"name": "jail-pvc", "namespace": "fpt-hpc"}}}
    assert kubernetes_object(claim) == ("persistentvolumeclaim.v1.", "jail-pvc", "fpt-hpc")
    crd = {"type": "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition", "inputs": {"metadata": {"name": "nodesets.slurm.nebius.ai"}}}
    assert kubernetes_object(crd) == ("customresourcedefinition.v1.apiextensions.k8s.io", "nodesets.slurm.nebius.ai", "")
    # Not objects of the cluster: cleared, and the next up creates them.
    assert kubernetes_object({"type": "random:index/randomPassword:RandomPassword", "inputs": {}}) is None
    assert kubernetes_object({"type": "kubernetes:helm.sh/v4:Chart", "inputs": {}}) is None

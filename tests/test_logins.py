"""Researchers log in as themselves: sssd's ssh responder hands sshd the keys the directory holds, and each
operator's login runs sshd with the settings that take them (components/identity/clients.py sshd_settings).
The services tier runs the same text with a real slapd, sssd and sshd (tests/test_services_login.py)."""

from __future__ import annotations

import copy
from typing import Any

from components.config import parse_config
from components.identity import clients, names
from components.names import SSHD_PORT
from components.slurm import ack, manifest_of, slinky, soperator1, soperator4
from components.slurm.common import system_placement
from tests.harness import stack_config


def config_of(stack: str, **overrides: Any):
    return parse_config({**copy.deepcopy(stack_config(stack)), **overrides})


def keywords(text: str) -> dict[str, str]:
    """sshd's view of a config's global section: the first value of each keyword, up to the first Match."""
    seen: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        keyword, _, value = line.strip().partition(" ")
        if keyword == "Match":
            break
        seen.setdefault(keyword.lower(), value)
    return seen


def test_sssd_conf_serves_keys_and_refuses_a_locked_account():
    config = config_of("dev-lab")
    conf = clients.sssd_conf(config.ldap, config.cluster.namespace, "pw")
    lines = conf.splitlines()
    assert "services = nss, pam, ssh" in lines
    for line in (
        "ldap_user_ssh_public_key = sshPublicKey",
        "access_provider = ldap",
        "ldap_access_order = expire",
        "ldap_account_expire_policy = shadow",
    ):
        assert line in lines, line
    # In the domain, which is where sssd reads them.
    assert conf.index("[domain/LDAP]") < conf.index("access_provider")


def test_sshd_settings_take_the_directorys_keys_and_nothing_but_keys():
    settings = keywords("\n".join(clients.sshd_settings()))
    assert settings == {
        "authorizedkeyscommand": "/usr/bin/sss_ssh_authorizedkeys %u",
        "authorizedkeyscommanduser": "nobody",
        "pubkeyauthentication": "yes",
        "passwordauthentication": "no",
        "kbdinteractiveauthentication": "no",
        "usepam": "yes",
    }
    # Root's own keys file stays sshd's default (the administrators' sshRootPublicKeys).
    assert "authorizedkeysfile" not in settings


def test_soperator4_login_runs_our_sshd_config_with_the_operators_own_lines():
    config = config_of("staging-hanoi")
    assert config.ldap.enabled
    rendered = soperator4.render(config)
    (config_map,) = manifest_of(rendered, "ConfigMap", "login-sshd-config")
    (cluster,) = manifest_of(rendered, "SlurmCluster")
    login = cluster["spec"]["slurmNodes"]["login"]
    assert login["sshdConfigMapRefName"] == config_map["metadata"]["name"] == f"{config.cluster.name}-login-sshd-config"
    assert config_map["metadata"]["namespace"] == config.cluster.namespace
    # Declared before the cluster whose login mounts it.
    roles = [r.role for r in rendered]
    assert roles.index("login-sshd-config") < roles.index("cluster")
    text = config_map["data"][soperator4.SSHD_CONFIG_KEY]
    effective = keywords(text)
    for line in clients.sshd_settings():
        keyword, _, value = line.partition(" ")
        assert effective[keyword.lower()] == value, line
    # What soperator's own sshd_config keeps: its port, the sshdKeysName host keys, the jail, root's keys.
    assert effective["port"] == str(SSHD_PORT) == str(login["sshd"]["port"])
    assert [line for line in text.splitlines() if line.startswith("HostKey ")] == [
        f"HostKey /etc/ssh/sshd_keys/{key}" for key in ("ssh_host_rsa_key", "ssh_host_ecdsa_key", "ssh_host_ed25519_key")
    ]
    assert effective["chrootdirectory"] == "/mnt/jail" and effective["permitrootlogin"] == "yes"
    assert text.rstrip().endswith("Match User root\n    AuthorizedKeysFile /root/.ssh/authorized_keys /mnt/jail/root/.ssh/authorized_keys")
    assert "challengeresponseauthentication" not in effective and effective["loglevel"] == "INFO"


def test_soperator4_without_ldap_keeps_the_operators_sshd_config():
    raw = copy.deepcopy(stack_config("staging-hanoi"))
    raw["ldap"] = {**raw.get("ldap", {}), "enabled": False}
    raw.pop("tenants", None)
    config = parse_config(raw)
    rendered = soperator4.render(config)
    assert manifest_of(rendered, "ConfigMap", "login-sshd-config") == []
    (cluster,) = manifest_of(rendered, "SlurmCluster")
    assert "sshdConfigMapRefName" not in cluster["spec"]["slurmNodes"]["login"]
    assert soperator4.user_ssh_command(config) is None


def test_slinky_loginset_appends_the_settings_to_its_sshd_config():
    config = config_of("prod-hcm")
    (loginset,) = manifest_of(slinky.render(config), "LoginSet")
    assert loginset["spec"]["extraSshdConfig"] == "\n".join(clients.sshd_settings()) + "\n"
    assert loginset["spec"]["sssdConfRef"] == {"name": names.SSSD_SECRET, "key": "sssd.conf"}


def test_ack_login_pods_are_not_the_head_and_hold_no_token_off_the_gpu_nodes():
    config = config_of("staging-hangzhou")
    rendered = ack.render(config)
    (deployment,) = [m for m in manifest_of(rendered, "Deployment") if m["metadata"]["name"] == ack.names(config)["login"]]
    pod = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == config.slurm.login.size
    assert pod["automountServiceAccountToken"] is False and "serviceAccountName" not in pod
    (container,) = pod["containers"]
    assert container["image"] == config.slurm.ack.image
    assert not container.get("securityContext", {}).get("privileged")
    # The head's files: slurm.conf, the munge key, /home; sssd-config, not nslcd's.
    mounted = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert mounted["slurm-conf"]["mountPath"] == config.slurm.ack.slurm_conf_path
    assert volumes["munge-key"]["secret"]["secretName"] == f"{config.cluster.name}-munge"
    assert volumes["sssd-conf"]["secret"]["secretName"] == names.SSSD_SECRET and mounted["sssd-conf"]["mountPath"] == "/etc/sssd/sssd.conf"
    assert "nslcd-conf" not in volumes
    if config.ldap.tls.enabled:
        assert mounted["ldap-ca"]["mountPath"] == names.SSSD_CA_FILE and volumes["ldap-ca"]["secret"]["secretName"] == config.ldap.tls.secret_name
    if config.slurm.ack.home is not None:
        assert mounted["home"]["mountPath"] == "/home"
    # The head no longer takes SSH; the Service selects the login pods.
    head = (ack.slurm_cluster_manifest(config)["spec"]["slurmctld"])["template"]
    assert SSHD_PORT not in {p["containerPort"] for c in head["spec"]["containers"] for p in c["ports"]}
    (service,) = manifest_of(rendered, "Service", "login-ssh")
    assert service["spec"]["selector"] == deployment["spec"]["template"]["metadata"]["labels"] != head["metadata"]["labels"]
    # Its script and sshd_config: the settings, munged, sssd, home made at the first login.
    (files,) = manifest_of(rendered, "ConfigMap", "login-files")
    assert keywords(files["data"]["sshd_config"])["authorizedkeyscommand"] == "/usr/bin/sss_ssh_authorizedkeys %u"
    assert keywords(files["data"]["sshd_config"])["permitrootlogin"] == "prohibit-password"
    script = files["data"][ack.LOGIN_SCRIPT]
    for needed in ("runuser -u munge -- munged", "sssd -D", clients.MKHOMEDIR_SESSION, "exec /usr/sbin/sshd -D -e"):
        assert needed in script, needed
    assert files["data"]["authorized_keys"] == "".join(f"{k}\n" for k in config.slurm.login.ssh_root_public_keys)


def test_ack_login_runs_where_the_head_runs_never_on_a_gpu_node():
    config = config_of("staging-hangzhou")
    pod = ack.login_deployment(config)["spec"]["template"]["spec"]
    placement = system_placement(config)
    assert placement and all(pod[key] == value for key, value in placement.items())
    head = ack.slurm_cluster_manifest(config)["spec"]["slurmctld"]["template"]["spec"]
    assert all(head[key] == value for key, value in placement.items())
    assert "nvidia.com/gpu" not in str(pod["containers"][0]["resources"])
    # The system pools are the no-GPU ones wherever the stack has any.
    assert any(not p.has_gpu for p in config.node_pools)
    selected = str(placement)
    assert all(p.name not in selected or not p.has_gpu for p in config.node_pools), placement


def test_every_operator_gives_root_and_researchers_their_ssh_lines():
    for stack, module in (("staging-hanoi", soperator4), ("prod-hcm", slinky), ("staging-hangzhou", ack)):
        config = config_of(stack)
        root, user = module.ssh_command(config, None), module.user_ssh_command(config, None)
        assert "root@" in root and user is not None and "$USER@" in user and "root@" not in user, (stack, root, user)
        assert user.replace("$USER@", "root@") == root
    config = config_of("prod-hanoi")
    assert soperator1.user_ssh_command(config, None) is None

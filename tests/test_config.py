"""The stack config model: defaults, example stacks, errors, JSON Schema."""

import json

import jsonschema
import pytest
import yaml
from pydantic import ValidationError

from components.config import ConfigError, PlatformConfig, json_schema, parse_config, quantity_value
from tests.harness import ROOT, example_stacks, stack_config
from tools.schema import stack_file_schema, write_atomically


def test_defaults_follow_the_fpt_guide():
    config = parse_config({})
    assert config.cluster.name == "fpt-hpc" and config.cluster.namespace == "fpt-hpc"
    assert config.storage.jail.size == "100Gi"
    assert config.storage.controller_spool.size == "10Gi"
    assert config.slurm.worker.size == 8 and config.slurm.worker.slurmd.gpu == 8
    assert config.slurm.login.size == 2 and config.slurm.login.node_port == 30022
    assert config.slurm.accounting.enabled is True
    assert config.slurm.populate_jail.overwrite is False


@pytest.mark.parametrize("stack", example_stacks())
def test_every_example_stack_is_valid(stack):
    parse_config(stack_config(stack))


def test_there_are_production_example_stacks():
    assert "dev" in example_stacks()
    assert len([s for s in example_stacks() if s.startswith("prod-")]) >= 2


def test_json_schema_is_committed_and_in_sync():
    committed = json.loads((ROOT / "config.schema.json").read_text())
    assert committed == json_schema(), "run `make schema` and commit config.schema.json"
    committed_stack = json.loads((ROOT / "stack.schema.json").read_text())
    assert committed_stack == stack_file_schema(), "run `make schema` and commit stack.schema.json"


def stack_file_errors(document):
    validator = jsonschema.Draft202012Validator(stack_file_schema())
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]


@pytest.mark.parametrize("stack", example_stacks())
def test_every_stack_file_validates_and_names_its_schema_for_editors(stack):
    text = (ROOT / f"Pulumi.{stack}.yaml").read_text()
    assert text.splitlines()[0] == "# yaml-language-server: $schema=./stack.schema.json"
    assert stack_file_errors(yaml.safe_load(text)) == []


def test_the_stack_file_schema_flags_what_a_user_gets_wrong():
    document = yaml.safe_load((ROOT / "Pulumi.prod-hanoi.yaml").read_text())
    document["config"]["slurm-platform:storge"] = {"jail": {"size": "1Ti"}}
    document["config"]["slurm-platform:slurm"]["login"]["nodeport"] = 30022
    document["config"]["slurm-platform:slurm"]["worker"]["cgroupVersion"] = "v3"
    document["encryptionSalt"] = "v1:x"
    errors = "\n".join(stack_file_errors(document))
    assert "config: 'slurm-platform:storge' does not match any of the regexes" in errors
    assert "config.slurm-platform:slurm.login: Additional properties are not allowed ('nodeport' was unexpected)" in errors
    assert "config.slurm-platform:slurm.worker.cgroupVersion" in errors
    assert "'encryptionSalt' was unexpected" in errors


def test_the_stack_file_schema_accepts_other_namespaces_bare_keys_and_secrets():
    document = {
        "secretsprovider": "passphrase",
        "config": {
            "kubernetes:context": "fke",
            "pulumi:tags": {"team": "hpc"},
            "environment": "dev",
            "slurm-platform:ldap": {"organisation": {"secure": "v1:abc"}},
        },
    }
    assert stack_file_errors(document) == []
    assert stack_file_errors({"config": {"environment": "qa"}})


def test_make_schema_leaves_the_committed_file_when_it_fails(tmp_path):
    target = tmp_path / "config.schema.json"
    target.write_text('{"committed": true}\n')

    def broken() -> str:
        raise RuntimeError("generation failed")

    with pytest.raises(RuntimeError, match="generation failed"):
        write_atomically(target, broken)
    assert target.read_text() == '{"committed": true}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["config.schema.json"]
    write_atomically(target, lambda: "{}\n")
    assert target.read_text() == "{}\n"


def test_quantities():
    assert quantity_value("40Gi") == 40 * 2**30
    assert quantity_value("1500m") == 1.5
    assert quantity_value("8") == 8
    with pytest.raises(ValueError):
        quantity_value("lots")


ADOPT_JAIL = {"storage": {"jail": {"adopt": True}}}

INVALID = [
    (
        {**ADOPT_JAIL, "kubernetes": {"renderYamlToDirectory": "out"}},
        "slurm-platform:storage.jail.adopt: adoption imports live objects, but kubernetes.renderYamlToDirectory",
    ),
    (ADOPT_JAIL, "slurm-platform:storage.jail.adopt: adopted objects live in an existing namespace; set cluster.createNamespace: false"),
    (
        {"cluster": {"createNamespace": False}, "slurm": {"adoptMungeSecret": True, "mungeKeyRotation": 1}},
        "slurm-platform:slurm.mungeKeyRotation: slurm.adoptMungeSecret keeps the existing key, so slurm.mungeKeyRotation cannot rotate it",
    ),
    ({"slurm": {"readiness": {"timeoutMinutes": 1}}}, "slurm-platform:slurm.readiness.timeoutMinutes: Input should be greater than or equal to 5"),
    (
        {"storage": {"jail": {"size": "20Gi"}}},
        'slurm-platform:storage.jail.size: is less than a jail (a whole OS root filesystem) can be: at least 40Gi; got "20Gi"',
    ),
    ({"storage": {"jail": {"size": "big"}}}, "slurm-platform:storage.jail.size: must be an amount with a byte unit"),
    ({"cluster": {"name": "FPT_HPC"}}, "slurm-platform:cluster.name: a DNS-1035 label must consist of lower case alphanumeric characters"),
    ({"slurm": {"worker": {"size": -1}}}, "slurm-platform:slurm.worker.size: Input should be greater than or equal to 0"),
    ({"slurm": {"worker": {"cgroupVersion": "v3"}}}, "slurm-platform:slurm.worker.cgroupVersion: Input should be 'v1' or 'v2'"),
    ({"slurm": {"login": {"serviceType": "ClusterIP"}}}, "slurm-platform:slurm.login.serviceType: Input should be 'NodePort' or 'LoadBalancer'"),
    ({"slurm": {"login": {"nodePort": 22}}}, "slurm-platform:slurm.login.nodePort: Input should be greater than or equal to 30000"),
    ({"slurm": {"login": {"allowedSourceRanges": ["everyone"]}}}, "slurm-platform:slurm.login.allowedSourceRanges[0]: must be a CIDR block"),
    (
        {"slurm": {"login": {"sshRootPublicKeys": ["not a key"]}}},
        "slurm-platform:slurm.login.sshRootPublicKeys[0]: must be one OpenSSH public key line",
    ),
    ({"storage": {"jial": {}}}, "slurm-platform:storage.jial: unknown key"),
    ({"clusterr": {}}, "slurm-platform:clusterr: unknown key"),
    ({"operators": {"gpuOperator": {"version": "24.9.2"}}}, "slurm-platform:operators.gpuOperator.version: this chart's versions start with v"),
    (
        {"operators": {"networkOperator": {"version": "v24.10.1"}}},
        "slurm-platform:operators.networkOperator.version: this chart's versions have no leading v",
    ),
    ({"operators": {"soperator": {"version": "1.15.0"}}}, "slurm-platform:operators.soperator.version: Input should be '1.14.10'"),
    (
        {"operators": {"networkOperator": {"nodeFeatureDiscovery": True}}},
        "only one Node Feature Discovery may run in the cluster",
    ),
    ({"nodePools": []}, "slurm-platform:nodePools: List should have at least 1 item"),
    (
        {"nodePools": [{"name": "cpu", "selector": {"a": "b"}, "cpuPerNode": "8", "memoryPerNode": "32Gi", "nodeCount": 1}]},
        "at least one pool needs gpusPerNode > 0",
    ),
    ({"nodePools": [{"name": "gpu"}]}, "slurm-platform:nodePools[0].selector: required but not set"),
    ({"storage": {"storageClass": {"kind": "nfs"}}}, "slurm-platform:storage.storageClass.nfs: required when kind is 'nfs'"),
    ({"storage": {"storageClass": {"kind": "ceph"}}}, "slurm-platform:storage.storageClass.kind: Input should be 'existing', 'nfs' or 'alibabaNas'"),
    (
        {"storage": {"submounts": [{"name": "data", "mountPath": "/a"}, {"name": "data", "mountPath": "/b"}]}},
        'slurm-platform:storage.submounts[1].name: must be unique among submounts; got "data"',
    ),
    (
        {"storage": {"submounts": [{"name": "data", "mountPath": "relative"}]}},
        "slurm-platform:storage.submounts[0].mountPath: must be an absolute path",
    ),
    (
        {
            "storage": {"jail": {"staticNfs": {"server": "10.0.0.5", "path": "/jail"}}},
            "slurm": {"populateJail": {"overwrite": True}},
        },
        "the populate job would erase it; set slurm.populateJail.wipeExistingJailIntended: true",
    ),
    ({"slurm": {"accounting": {"database": "external"}}}, "slurm-platform:slurm.accounting.external: required when database is 'external'"),
    ({"ldap": {"tls": {"enabled": True}}}, "slurm-platform:ldap.tls.secretName: required when tls.enabled is true"),
    (
        {"environment": "prod"},
        "slurm-platform:ldap.tls.enabled: must be true in production: the clients' bind password would cross the pod network in clear",
    ),
    (
        {"ldap": {"phpLdapAdmin": True}},
        "slurm-platform:ldap.phpLdapAdmin: phpLDAPadmin is no longer deployed (an unmaintained 2020 image holding the LDAP "
        "server's TLS key); remove the key. Users and groups come from `tenants`",
    ),
    (
        {"ldap": {"phpLdapAdminImage": "docker.io/osixia/phpldapadmin:0.9.0"}},
        "slurm-platform:ldap.phpLdapAdminImage: phpLDAPadmin is no longer deployed",
    ),
    ({"ldap": {"baseDn": "example.org"}}, "slurm-platform:ldap.baseDn: must be a base DN of dc=, o= or ou= parts"),
    ({"environment": "qa"}, "slurm-platform:environment: Input should be 'local', 'dev', 'staging' or 'prod'"),
    (
        {"environment": "prod", "slurm": {"login": {"serviceType": "LoadBalancer"}}},
        "slurm-platform:slurm.login.serviceType: a production LoadBalancer needs allowedSourceRanges or fpt's private-LB annotation "
        'in serviceAnnotations (service.beta.kubernetes.io/openstack-internal-load-balancer: "true")',
    ),
    # Broad ranges: a bounded share of the public address space, whatever the environment.
    (
        {"slurm": {"login": {"allowedSourceRanges": ["0.0.0.0/1"]}}},
        "slurm-platform:slurm.login.allowedSourceRanges: together reach more public addresses than a /8 (IPv4), nearly the whole "
        'internet; list the office/VPN ranges, or set slurm.login.allowBroadSourceRanges: true if that many addresses are meant; got ["0.0.0.0/1"]',
    ),
    ({"slurm": {"login": {"allowedSourceRanges": ["2000::/3"]}}}, "together reach more public addresses than a /32 (IPv6)"),
    # The private-LB annotation must be the stack's cloud's, and annotations must not contradict each other.
    (
        {
            "slurm": {
                "login": {
                    "serviceAnnotations": {
                        "service.beta.kubernetes.io/openstack-internal-load-balancer": "false",
                        "service.beta.kubernetes.io/aws-load-balancer-internal": "true",
                    }
                }
            }
        },
        "slurm-platform:slurm.login.serviceAnnotations: service.beta.kubernetes.io/aws-load-balancer-internal is an annotation of aws; "
        "this stack's cloud is fpt",
    ),
    (
        {
            "cloud": "aws",
            "slurm": {
                "login": {
                    "serviceAnnotations": {
                        "service.beta.kubernetes.io/aws-load-balancer-scheme": "internet-facing",
                        "service.beta.kubernetes.io/aws-load-balancer-internal": "true",
                    }
                }
            },
        },
        "slurm-platform:slurm.login.serviceAnnotations: conflicting annotations: service.beta.kubernetes.io/aws-load-balancer-internal: 'true' (private)",
    ),
    ({"cloud": "openstack"}, "slurm-platform:cloud: Input should be 'fpt', 'alibaba', 'aws', 'gcp' or 'azure'"),
    # soperator's own LoadBalancer keeps its node ports whatever its annotations say.
    (
        {
            "environment": "prod",
            "cloud": "alibaba",
            "ldap": {"enabled": False},
            "slurm": {
                "login": {
                    "serviceType": "LoadBalancer",
                    "serviceAnnotations": {
                        "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-address-type": "intranet",
                        "service.beta.kubernetes.io/backend-type": "eni",
                    },
                }
            },
        },
        "slurm-platform:slurm.login.nodePortsFirewalled: soperator's login LoadBalancer keeps node ports (its CRD cannot turn them off)",
    ),
    # Node ports beside a restricted LoadBalancer are not covered by its source ranges.
    (
        {"environment": "prod", "slurm": {"login": {"allowedSourceRanges": ["203.0.113.0/24"]}}},
        "slurm-platform:slurm.login.nodePortsFirewalled: soperator keeps its login Service on NodePort 30022 beside the restricted "
        "LoadBalancer, open on every node and not covered by loadBalancerSourceRanges",
    ),
    (
        {"slurm": {"worker": {"slurmd": {"cpu": "1", "memory": "1Gi", "ephemeralStorage": "1Gi", "gpu": 16}}}},
        "slurm-platform:slurm.worker.slurmd.gpu: is more than any GPU pool has per node (8); got 16",
    ),
]


@pytest.mark.parametrize("raw,expected", INVALID, ids=[e[:50] for _, e in INVALID])
def test_invalid_config_names_key_value_and_allowed(raw, expected):
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    assert expected in str(caught.value)


def test_bad_value_is_shown():
    with pytest.raises(ConfigError) as caught:
        parse_config({"slurm": {"worker": {"cgroupVersion": "v3"}}})
    assert 'got "v3"' in str(caught.value)


def test_several_errors_are_reported_together():
    with pytest.raises(ConfigError) as caught:
        parse_config({"cluster": {"name": "Bad_Name"}, "storage": {"controllerSpool": {"size": "x"}}, "environment": "qa"})
    message = str(caught.value)
    assert message.startswith("invalid stack config (3 problems)")
    for key in ("cluster.name", "storage.controllerSpool.size", "environment"):
        assert f"slurm-platform:{key}" in message


def test_model_is_frozen():
    with pytest.raises(ValidationError, match="frozen"):
        PlatformConfig().environment = "prod"  # type: ignore[misc]  # the point: frozen models refuse it


def test_config_is_read_from_the_stack(monkeypatch):
    from pulumi.runtime import config as runtime_config

    from components.stack_config import load_config

    monkeypatch.setattr(
        runtime_config,
        "CONFIG",
        type(runtime_config.CONFIG)("test_config", default={}),
    )
    runtime_config.set_all_config(
        {
            "slurm-platform:environment": "staging",
            "slurm-platform:region": "",
            "slurm-platform:storage": '{"jail": {"size": "200Gi"}}',
            "kubernetes:context": "ignored: another namespace",
        }
    )
    with pytest.raises(ConfigError) as caught:
        load_config()
    assert "slurm-platform:region: must be lower-case letters, digits and -" in str(caught.value)
    runtime_config.set_all_config({"slurm-platform:environment": "staging", "slurm-platform:storage": '{"jail": {"size": "200Gi"}}'})
    config = load_config()
    assert config.environment == "staging" and config.storage.jail.size == "200Gi"

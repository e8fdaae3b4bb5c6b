"""policies/slurm_rules/kube_rules.py against the cases apimachinery's own validation tests
use (k8s.io/apimachinery/pkg/util/validation/validation_test.go), plus the
range, version and image rules."""

from __future__ import annotations

import pytest
from slurm_rules import kube_rules as rules

DNS1123_LABEL_GOOD = ["a", "ab", "abc", "a1", "a-1", "a--1--2--b", "0", "01", "012", "1a", "1-a", "1--a--b--2", "a" * 63]
DNS1123_LABEL_BAD = [
    "",
    "A",
    "ABC",
    "aBc",
    "A1",
    "A-1",
    "1-A",
    "-",
    "a-",
    "-a",
    "1-",
    "-1",
    "_",
    "a_",
    "_a",
    "a_b",
    "1_",
    "_1",
    "1_2",
    ".",
    "a.",
    ".a",
    "a.b",
    "1.",
    ".1",
    "1.2",
    " ",
    "a ",
    " a",
    "a b",
    "1 ",
    " 1",
    "1 2",
    "a" * 64,
    "a\n",
    "\u0430",
]
QUALIFIED_GOOD = [
    "simple",
    "now-with-dashes",
    "1-starts-with-num",
    "1234",
    "simple/simple",
    "now-with-dashes/simple",
    "now-with-dashes/now-with-dashes",
    "now.with.dots/simple",
    "now-with.dashes-and.dots/simple",
    "1-num.2-num/3-num",
    "1234/5678",
    "1.2.3.4/5678",
    "Uppercase_Is_OK_123",
    "example.com/Uppercase_Is_OK_123",
    "requests.storage-foo",
    "a" * 63,
    "a" * 253 + "/" + "b" * 63,
]
QUALIFIED_BAD = [
    "nospecialchars%^=@",
    "cantendwithadash-",
    "-cantstartwithadash-",
    "only/one/slash",
    "Example.com/abc",
    "example_com/abc",
    "example.com/",
    "/simple",
    "a" * 64,
    "a" * 254 + "/abc",
    "",
    "nvidia.com/gpu\n",
]
LABEL_VALUE_GOOD = ["simple", "now-with-dashes", "1-starts-with-num", "end-with-num-1", "1234", "a" * 63, ""]
LABEL_VALUE_BAD = [
    "nospecialchars%^=@",
    "Tama-nui-te-r\u0101.is.M\u0101ori.sun",
    "\\backslashes\\are\\bad",
    "-starts-with-dash",
    "ends-with-dash-",
    ".starts.with.dot",
    "ends.with.dot.",
    "a" * 64,
]


@pytest.mark.parametrize("value", DNS1123_LABEL_GOOD)
def test_dns1123_label_good(value):
    assert rules.is_dns1123_label(value) == []


@pytest.mark.parametrize("value", DNS1123_LABEL_BAD)
def test_dns1123_label_bad(value):
    assert rules.is_dns1123_label(value)


def test_dns1123_subdomain_and_dns1035_label():
    assert rules.is_dns1123_subdomain("a.b.c-d") == [] and rules.is_dns1123_subdomain("a" * 253) == []
    for bad in ("a..b", ".a", "a.", "A.b", "a" * 254, "a_b"):
        assert rules.is_dns1123_subdomain(bad), bad
    assert rules.is_dns1035_label("a1-b") == []
    for bad in ("1a", "-a", "a-", "A", "a" * 64, ""):
        assert rules.is_dns1035_label(bad), bad
    assert rules.is_dns1035_label("a" * 64) == ["must be no more than 63 characters"]


@pytest.mark.parametrize("value", QUALIFIED_GOOD)
def test_qualified_name_good(value):
    assert rules.is_qualified_name(value) == []


@pytest.mark.parametrize("value", QUALIFIED_BAD)
def test_qualified_name_bad(value):
    assert rules.is_qualified_name(value)


@pytest.mark.parametrize("value", LABEL_VALUE_GOOD)
def test_label_value_good(value):
    assert rules.is_valid_label_value(value) == []


@pytest.mark.parametrize("value", LABEL_VALUE_BAD)
def test_label_value_bad(value):
    assert rules.is_valid_label_value(value)


def test_config_map_keys():
    for good in ("a", "a.b", "A_B-c", ".dotfile"):
        assert rules.is_config_map_key(good) == [], good
    for bad in (".", "..", "..a", "a/b", "a b", ""):
        assert rules.is_config_map_key(bad), bad


@pytest.mark.parametrize(
    "ranges,families",
    [
        (["0.0.0.0/0"], ["IPv4"]),
        (["1.2.3.4/0"], ["IPv4"]),
        (["0.0.0.0/1", "128.0.0.0/1"], ["IPv4"]),
        (["::/0"], ["IPv6"]),
        (["0:0:0:0:0:0:0:0/0"], ["IPv6"]),
        (["::ffff:0:0/96"], ["IPv4"]),
        (["0.0.0.0/0", "::/1", "8000::/1"], ["IPv4", "IPv6"]),
        (["0.0.0.0/1"], []),
        (["10.0.0.0/8", "203.0.113.0/24"], []),
        (["not-a-range", "0.0.0.0/32"], []),
    ],
)
def test_open_families_by_coverage(ranges, families):
    assert rules.open_families(ranges) == families


def test_cidrs_and_ips_as_kubernetes_parses_them():
    assert str(rules.parse_cidr("10.1.2.3/8")) == "10.0.0.0/8"
    for bad in ("300.1.1.1/8", "::/129", "10.0.0.1", "host.example/24", "010.0.0.0/8", " 10.0.0.0/8", "fe80::%eth0/64"):
        with pytest.raises(ValueError):
            rules.parse_cidr(bad)
    assert str(rules.parse_ip("2001:db8::1")) == "2001:db8::1"
    for bad in ("lb.example.com", "1.2.3", "10.0.0.1/32"):
        with pytest.raises(ValueError):
            rules.parse_ip(bad)


@pytest.mark.parametrize("version", ["1.2.3", "v24.9.2", "0.29.0", "1.0.0-rc.1", "1.0.0+build.5", "26.6.0"])
def test_exact_versions(version):
    assert rules.is_exact_version(version)


@pytest.mark.parametrize("version", ["", "latest", "1.2", "^1.2.3", "~1.2.3", ">=1.2.3", "1.x", "1.2.*", "01.2.3", "1.2.3 ", "1.2.3\n"])
def test_not_exact_versions(version):
    assert not rules.is_exact_version(version)


def test_image_references():
    for good in (
        "docker.io/bitnamilegacy/openldap:2.6.10",
        "registry:5000/a/b:1",
        "[::1]:5000/a:b",
        "ghcr.io/x/y@sha256:" + "a" * 64,
        "mariadb:11.4.3",
    ):
        assert rules.image_reference_errors(good) == [], good
    for bad in ("Docker.io/Bitnami/x:1", "x:latest", "x", "a b:1", "x:" + "t" * 129, ""):
        assert rules.image_reference_errors(bad), bad
    assert rules.image_reference_errors("x", pinned=False) == []
    assert rules.image_repository_errors("ghcr.io/mellanox/plugin") == []
    assert rules.image_repository_errors("ghcr.io/mellanox/plugin:v1")


def test_private_load_balancer_annotations_are_the_clouds_own():
    alibaba = "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-address-type"
    openstack = "service.beta.kubernetes.io/openstack-internal-load-balancer"
    aws_internal = "service.beta.kubernetes.io/aws-load-balancer-internal"
    aws_scheme = "service.beta.kubernetes.io/aws-load-balancer-scheme"
    assert rules.private_lb_annotation({alibaba: "intranet"}, "alibaba") == alibaba
    assert rules.private_lb_annotation({alibaba: "Intranet "}, "alibaba") == alibaba
    assert rules.private_lb_annotation({alibaba: "internet"}, "alibaba") is None
    assert rules.private_lb_annotation({openstack: "true"}, "fpt") == openstack
    # Another cloud's key is ignored by this cloud's controller, and an error.
    assert rules.private_lb_annotation({alibaba: "intranet"}, "fpt") is None
    # The finding: OpenStack says public, an AWS key says private, on an FPT stack.
    conflicting = {openstack: "false", aws_internal: "true"}
    assert rules.private_lb_annotation(conflicting, "fpt") is None
    assert rules.lb_annotation_problems(conflicting, "fpt") == [
        f"{aws_internal} is an annotation of aws; this stack's cloud is fpt, whose load balancers ignore it "
        f'(its private-LB annotation: {openstack}: "true")'
    ]
    # Two keys of the same cloud that disagree.
    disagree = {aws_scheme: "internet-facing", aws_internal: "true"}
    assert rules.private_lb_annotation(disagree, "aws") is None
    assert rules.lb_annotation_problems(disagree, "aws") == [
        f"conflicting annotations: {aws_internal}: 'true' (private), {aws_scheme}: 'internet-facing' (public)"
    ]
    assert rules.lb_annotation_problems({aws_scheme: "internal", aws_internal: "true"}, "aws") == []
    assert rules.private_lb_annotation({"example.com/internal": "true"}, "fpt") is None
    assert rules.private_lb_annotation(None, "fpt") is None
    assert set(rules.CLOUDS) == {"fpt", "alibaba", "aws", "gcp", "azure"}
    assert rules.pod_backends({"service.beta.kubernetes.io/backend-type": "ENI"}, "alibaba")
    assert not rules.pod_backends({"service.beta.kubernetes.io/backend-type": "eni"}, "fpt")


@pytest.mark.parametrize(
    "ranges,broad",
    [
        (["0.0.0.0/1"], ["IPv4"]),  # half the internet was "restricted" before
        (["2000::/3"], ["IPv6"]),  # all of global unicast
        (["11.0.0.0/8", "12.0.0.0/8"], ["IPv4"]),  # the share is of all ranges together
        (["::ffff:0.0.0.0/97"], ["IPv4"]),  # IPv4-mapped: the same hosts as 0.0.0.0/1
        (["4.0.0.0/7", "2001:db8::/33", "2c00::/31"], ["IPv4", "IPv6"]),
        (["11.0.0.0/8"], []),  # exactly the limit
        (["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10"], []),  # private space is not public
        (["fc00::/7", "2001:db8::/32"], []),  # unique local and documentation
        (["2400:cb00::/32", "203.0.113.0/24", "198.51.100.16/28"], []),
    ],
)
def test_broad_source_ranges_are_judged_by_the_public_addresses_they_reach(ranges, broad):
    assert rules.broad_families(ranges) == broad
    assert rules.MAX_PUBLIC_ADDRESSES == {4: 2**24, 6: 2**96}

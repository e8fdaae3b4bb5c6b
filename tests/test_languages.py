"""Users' languages: text people read (ldap.organisation, ldap.displayNames) in any script, encoded
where it lands (RFC 2849 LDIF, RFC 4514 DNs), while identifiers stay strict. The LDIF and DN
encoders against the RFCs' own examples; the seed LDIF decoded back to the very text of the config."""

from __future__ import annotations

import base64
import re

import pytest

from components.config import ConfigError, parse_config
from components.identity import entries, ldif
from tests.harness import stack_config

VIETNAMESE_ORG = "Công ty Cổ phần FPT Smart Cloud, Inc."
CHINESE_ORG = "阿里云计算有限公司"
VIETNAMESE_NAME = "Nguyễn Văn An"
LAB = "dev-lab"


def decoded(ldif: str) -> list[list[tuple[str, str]]]:
    """The entries of an LDIF text, each as (attribute, value) pairs, base64 values decoded (RFC 2849)."""
    entries = []
    for block in ldif.strip().split("\n\n"):
        entry = []
        for line in block.splitlines():
            match = re.fullmatch(r"([A-Za-z][A-Za-z0-9-]*)(::?)(?: (.*))?", line)
            assert match, f"not an LDIF attribute line: {line!r}"
            attribute, separator, value = match.group(1), match.group(2), match.group(3) or ""
            entry.append((attribute, base64.b64decode(value, validate=True).decode() if separator == "::" else value))
        entries.append(entry)
    return entries


# --- the encoders --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "line"),
    [
        # RFC 2849 example 1 and 2: SAFE-STRINGs go as they are, commas and '=' included.
        ("cn=Barbara Jensen, ou=Product Development, dc=airius, dc=com", "dn: cn=Barbara Jensen, ou=Product Development, dc=airius, dc=com"),
        ("Babs Jensen", "dn: Babs Jensen"),
        # RFC 2849 example 3: a value starting with a space goes base64.
        (" begins with a space", "dn:: IGJlZ2lucyB3aXRoIGEgc3BhY2U="),
        # RFC 2849 example 5: UTF-8 goes base64 (the example's DN: ou=営業部,o=Airius).
        ("ou=営業部,o=Airius", "dn:: b3U95Za25qWt6YOoLG89QWlyaXVz"),
        (":colon first", "dn:: OmNvbG9uIGZpcnN0"),
        ("<less-than first", "dn:: PGxlc3MtdGhhbiBmaXJzdA=="),
        ("ends with a space ", "dn:: ZW5kcyB3aXRoIGEgc3BhY2Ug"),
        ("two\nlines", "dn:: dHdvCmxpbmVz"),
        ("colon: inside and # = , are safe", "dn: colon: inside and # = , are safe"),
        ("", "dn:"),
    ],
)
def test_ldif_line_writes_safe_strings_plain_and_everything_else_base64(value, line):
    assert ldif.ldif_line("dn", value) == line
    assert decoded(line) == [[("dn", value)]]


@pytest.mark.parametrize(
    ("value", "escaped"),
    [
        # RFC 4514 section 4 examples (the values of their RDNs).
        ("Sales, Inc.", "Sales\\, Inc."),  # CN=Sales\, Inc.
        ('James "Jim" Smith, III', 'James \\"Jim\\" Smith\\, III'),
        ("Before\rAfter", "Before\rAfter"),  # a CR needs no escape in the string form
        ("Lučić", "Lučić"),  # UTF-8 as it is
        # section 2.4: every special, a leading space or '#', a trailing space, NUL.
        ("a+b;c<d>e=f\\g", "a\\+b\\;c\\<d\\>e\\=f\\\\g"),
        ("#hash first", "\\#hash first"),
        (" space first", "\\ space first"),
        ("space last ", "space last\\ "),
        (" ", "\\ "),
        ("a\\ ", "a\\\\\\ "),
        ("nul\0", "nul\\00"),
        ("not # inside", "not # inside"),
        (VIETNAMESE_ORG, "Công ty Cổ phần FPT Smart Cloud\\, Inc."),
    ],
)
def test_dn_value_escapes_as_rfc_4514_says(value, escaped):
    assert ldif.dn_value(value) == escaped
    assert ldif.dn("o", value, "dc=example,dc=org") == f"o={escaped},dc=example,dc=org"


def _unescaped(text: str) -> str:
    """An RFC 4514 value back to the value: the inverse the server applies."""
    return re.sub(r"\\([0-9a-fA-F]{2}|.)", lambda m: chr(int(m.group(1), 16)) if len(m.group(1)) == 2 else m.group(1), text, flags=re.S)


@pytest.mark.parametrize("value", [VIETNAMESE_ORG, CHINESE_ORG, ' ,+"\\<>;=# ', "#", "a  ", "x\0y"])
def test_dn_value_round_trips(value):
    assert _unescaped(ldif.dn_value(value)) == value


# --- the config -------------------------------------------------------------------------------------


def lab(**ldap_keys) -> dict:
    raw = stack_config(LAB)
    return {**raw, "ldap": {**raw.get("ldap", {}), **ldap_keys}}


@pytest.mark.parametrize("organisation", [VIETNAMESE_ORG, CHINESE_ORG, "Key: value = 1, #2; <3>", "Ōkubo & Söhne GmbH"])
def test_an_organisation_in_any_language_lands_in_the_seed_as_written(organisation):
    config = parse_config(lab(organisation=organisation))
    seed = entries.seed_ldif(config.ldap, "{SSHA512}x", config.tenants)
    root = decoded(seed)[0]
    assert ("o", organisation) in root
    assert f"o: {organisation}" not in seed or organisation.isascii()


def test_a_user_s_display_name_is_its_cn_and_display_name():
    raw = lab(displayNames={"alice": VIETNAMESE_NAME, "bob": "王小明"})
    config = parse_config(raw)
    by_dn = {dict(entry)["dn"]: entry for entry in decoded(entries.seed_ldif(config.ldap, "{SSHA512}x", config.tenants))}
    users = {uid: by_dn[f"uid={uid},ou=users,{config.ldap.base_dn}"] for uid in ("alice", "bob", "carol")}
    assert ("cn", VIETNAMESE_NAME) in users["alice"] and ("displayName", VIETNAMESE_NAME) in users["alice"]
    assert ("cn", "王小明") in users["bob"]
    # Without a display name, the cn is the user name, and no displayName.
    assert ("cn", "carol") in users["carol"] and not [a for a, _ in users["carol"] if a == "displayName"]
    assert all(("uid", uid) in entry for uid, entry in users.items())


def test_display_names_written_with_combining_accents_are_stored_composed():
    import unicodedata

    typed = unicodedata.normalize("NFD", VIETNAMESE_NAME)
    assert typed != VIETNAMESE_NAME
    assert parse_config(lab(displayNames={"alice": typed})).ldap.display_names["alice"] == VIETNAMESE_NAME


@pytest.mark.parametrize(
    ("keys", "path", "said"),
    [
        ({"organisation": "Example\nuserPassword: x"}, "ldap.organisation", "one line"),
        ({"organisation": "Example\u2028Org"}, "ldap.organisation", "one line"),
        ({"organisation": "Zero\u200bwidth"}, "ldap.organisation", "invisible"),
        ({"organisation": "   "}, "ldap.organisation", "must not be empty"),
        ({"organisation": "x" * 257}, "ldap.organisation", "at most 256"),
        ({"displayNames": {"alice": "An\tTab"}}, "ldap.displayNames.alice", "one line"),
        # The keys are user names: identifiers stay strict.
        ({"displayNames": {"Nguyễn": VIETNAMESE_NAME}}, "ldap.displayNames", "(the key)"),
        ({"displayNames": {"dave": "Dave"}}, "ldap.displayNames.dave", "no tenant lists"),
        # The base DN stays an identifier.
        ({"baseDn": "o=Công ty,dc=example"}, "ldap.baseDn", "a name in another script goes in ldap.organisation"),
    ],
)
def test_text_that_no_target_carries_and_identifiers_are_refused_by_key_path(keys, path, said):
    with pytest.raises(ConfigError) as error:
        parse_config(lab(**keys))
    (line,) = [line for line in str(error.value).splitlines() if f"slurm-platform:{path}" in line]
    assert said in line


def test_tenant_user_and_group_names_stay_posix_names():
    raw = stack_config(LAB)
    tenants = [{**raw["tenants"][0], "users": ["nguyễn"]}]
    with pytest.raises(ConfigError, match=r"tenants\[0\]\.users\[0\]"):
        parse_config({**raw, "tenants": tenants})

"""LDIF (RFC 2849) and DN (RFC 4514) encoding: every value the directory gets goes through here."""

from __future__ import annotations

import base64
import re

# RFC 2849: a value goes as is only as a SAFE-STRING (ASCII without NUL, LF, CR; not starting with
# space, ':' or '<'); and one ending in a space SHOULD be base64 too. Anything else goes base64 after '::'.
_LDIF_SAFE = re.compile(r"[\x01-\x09\x0b\x0c\x0e-\x1f\x21-\x39\x3b\x3d-\x7f][\x01-\x09\x0b\x0c\x0e-\x7f]*")


def ldif_line(attribute: str, value: str) -> str:
    """One LDIF attribute line (`dn` included): every value the seed and the ACL carry goes through here."""
    if value == "":
        return f"{attribute}:"
    if _LDIF_SAFE.fullmatch(value) and not value.endswith(" "):
        return f"{attribute}: {value}"
    return f"{attribute}:: {base64.b64encode(value.encode()).decode()}"


def ldif_entry(entry_dn: str, *attributes: tuple[str, str]) -> list[str]:
    """An entry's lines: its dn, then `(attribute, value)` pairs, each encoded by ldif_line."""
    return [ldif_line("dn", entry_dn), *(ldif_line(attribute, value) for attribute, value in attributes)]


# RFC 4514 2.4: in an attribute value of a DN, these are escaped with a backslash, as are a leading
# space or '#', a trailing space, and NUL (\00); UTF-8 stays as it is.
_DN_SPECIAL = frozenset(',+"\\<>;=')


def dn_value(value: str) -> str:
    """`value` escaped for the value of an RDN (RFC 4514)."""
    escaped = ["\\00" if c == "\0" else "\\" + c if c in _DN_SPECIAL else c for c in value]
    if value[:1] in (" ", "#"):
        escaped[0] = "\\" + escaped[0]
    if len(value) > 1 and value.endswith(" "):
        escaped[-1] = "\\ "
    return "".join(escaped)


def dn(attribute: str, value: str, parent: str) -> str:
    """The DN `attribute=value,parent`, the value escaped: every DN the program builds under the base."""
    return f"{attribute}={dn_value(value)},{parent}"

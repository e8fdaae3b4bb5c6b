"""Every link in README.md and docs/*.md leads somewhere: a relative link names a file or
folder of the checkout, an `#anchor` a heading of the page it points to (GitHub's slugs),
and an external link is a well-formed http(s) URL (never fetched: the tests run offline)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

from tests.harness import ROOT

FENCE = re.compile(r"^(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
# [text](target "title") and ![alt](target): what is inside the parentheses, a title dropped.
INLINE_LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(([^)]*)\)")
TITLE = re.compile(r"\s+(\"[^\"]*\"|'[^']*')\s*$")
REFERENCE_DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)+$")


def pages(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, where Markdown links and headings live."""
    lines, fenced = [], None
    for number, line in enumerate(text.splitlines(), 1):
        marker = FENCE.match(line.lstrip())
        if marker and (fenced is None or marker.group(1) == fenced):
            fenced = marker.group(1) if fenced is None else None
            continue
        if fenced is None:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text without Markdown, lowercased, punctuation dropped
    (letters, digits, `-`, `_` and spaces kept), each space a `-`."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"(?<![A-Za-z0-9])_+|_+(?![A-Za-z0-9])", "", text)  # _emphasis_, not snake_case
    text = "".join(ch for ch in text.lower() if ch.isalnum() or ch in " -_")
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading's anchor; a repeated heading gets `-1`, `-2`, ... as GitHub numbers them."""
    seen: dict[str, int] = {}
    found = set()
    for _, line in prose_lines(text):
        heading = HEADING.match(line)
        if not heading:
            continue
        base = slug(heading.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(text: str) -> list[tuple[int, str]]:
    found = []
    for number, line in prose_lines(text):
        line = CODE_SPAN.sub("", line)
        found += [(number, TITLE.sub("", target).strip().strip("<>")) for target in INLINE_LINK.findall(line)]
        definition = REFERENCE_DEFINITION.match(line)
        if definition:
            found.append((number, definition.group(1)))
    return found


def external_problem(target: str) -> str | None:
    parts = urlsplit(target)
    host = parts.hostname or ""
    if parts.scheme not in ("http", "https") or not HOST.match(host) or " " in target:
        return "not a well-formed http(s) URL"
    return None


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """Each link of `page` that leads nowhere, as `page:line: target: why`."""
    problems = []
    name = page.relative_to(root).as_posix()
    for number, target in links(page.read_text()):
        where = f"{name}:{number}: {target}"
        if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", target):
            problem = external_problem(target) if not target.startswith("mailto:") else None
            if problem:
                problems.append(f"{where}: {problem}")
            continue
        path_part, _, fragment = target.partition("#")
        destination = (page.parent / unquote(path_part)).resolve() if path_part else page.resolve()
        if not destination.exists():
            problems.append(f"{where}: no such file")
            continue
        if root.resolve() not in (destination, *destination.parents):
            problems.append(f"{where}: outside the repository")
            continue
        if fragment:
            if destination.suffix != ".md" or destination.is_dir():
                problems.append(f"{where}: an anchor into a file that is not Markdown")
            elif unquote(fragment) not in anchors(destination.read_text()):
                problems.append(f"{where}: no heading with anchor #{fragment} in {destination.relative_to(root.resolve()).as_posix()}")
    return problems


def test_every_link_and_anchor_of_the_docs_resolves():
    checked = [page for page in pages() if page.exists()]
    assert len(checked) >= 9, checked  # the README and the docs pages
    assert sum(len(links(page.read_text())) for page in checked) > 40
    assert [problem for page in checked for problem in broken_links(page)] == []


def test_slugs_follow_githubs_rules():
    assert slug("Security model: what holds, against whom") == "security-model-what-holds-against-whom"
    assert slug("The lab's experiments on `dev-lab`") == "the-labs-experiments-on-dev-lab"
    assert slug("Upgrading soperator 1.14.10 to 4.1.7") == "upgrading-soperator-11410-to-417"
    assert slug("`pulumi new`: a stack from this repository") == "pulumi-new-a-stack-from-this-repository"
    assert slug("snake_case and _emphasis_") == "snake_case-and-emphasis"
    assert anchors("# A\n\n## A\n\n```\n# not a heading\n```\n### A\n") == {"a", "a-1", "a-2"}


def test_the_checker_finds_each_kind_of_broken_link(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "other.md").write_text("# Other\n\n## Real heading\n")
    page = tmp_path / "README.md"
    page.write_text(
        "# Top\n\n## Twice\n\n## Twice\n\n"
        "[ok](docs/other.md#real-heading) [ok](#twice-1) [ok](#top) [ok](https://example.org/a?b=c#d)\n"
        "[file](docs/missing.md) [anchor](docs/other.md#no-such) [local](#twice-2)\n"
        "[url](https://exa mple.org) [scheme](htps://example.org) [up](../outside.md)\n"
        "`[in code](nowhere.md)`\n\n```\n[in a fence](nowhere.md)\n```\n"
    )
    (tmp_path.parent / "outside.md").write_text("# x\n")
    assert broken_links(page, tmp_path) == [
        "README.md:8: docs/missing.md: no such file",
        "README.md:8: docs/other.md#no-such: no heading with anchor #no-such in docs/other.md",
        "README.md:8: #twice-2: no heading with anchor #twice-2 in README.md",
        "README.md:9: https://exa mple.org: not a well-formed http(s) URL",
        "README.md:9: htps://example.org: not a well-formed http(s) URL",
        "README.md:9: ../outside.md: outside the repository",
    ]

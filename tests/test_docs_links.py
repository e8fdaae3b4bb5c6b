"""Every link in README.md and docs/*.md leads somewhere: a relative link names a file or
folder of the checkout, an `#anchor` a heading of the page it points to (GitHub's slugs),
and an external link is a well-formed http(s) URL (never fetched: the tests run offline).
What the pages name is still there: each path in a code span, the virtualenvs the project
files set, and every example stack in getting-started's list."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import yaml

from tests.harness import ROOT, example_stacks

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


# --- paths and settings named in code spans -------------------------------------------


def top_level_folders(root: Path) -> list[str]:
    return sorted(path.name for path in root.iterdir() if path.is_dir() and not path.name.startswith(".git") and path.name != "__pycache__")


def named_paths(text: str, folders: list[str]) -> list[tuple[int, str]]:
    """(line, path) for each code span of the prose that is a path under one of the repository's folders."""
    path = re.compile(rf"^(?:{'|'.join(map(re.escape, folders))})/[A-Za-z0-9_./-]*$")
    found = []
    for number, line in prose_lines(text):
        for span in CODE_SPAN.finditer(line):
            token = span.group(0).strip("`").strip()
            if path.match(token):
                found.append((number, token))
    return found


def missing_paths(page: Path, root: Path = ROOT) -> list[str]:
    """Each path a page names in a code span that the checkout lacks (a `module.name` counts as module.py)."""
    problems = []
    for number, token in named_paths(page.read_text(), top_level_folders(root)):
        target = root / token.rstrip("/")
        module = root / (token.split(".", 1)[0] + ".py")
        if not target.exists() and not ("." in Path(token).name and module.is_file()):
            problems.append(f"{page.relative_to(root).as_posix()}:{number}: {token}: no such path")
    return problems


def test_every_path_the_docs_name_exists():
    checked = [*pages(), ROOT / "policies" / "README.md"]
    assert sum(len(named_paths(page.read_text(), top_level_folders(ROOT))) for page in checked) > 40
    assert [problem for page in checked for problem in missing_paths(page)] == []


def test_the_path_check_finds_a_moved_module(tmp_path):
    (tmp_path / "components" / "identity").mkdir(parents=True)
    (tmp_path / "components" / "identity" / "ldif.py").write_text("")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "harness.py").write_text("")
    page = tmp_path / "README.md"
    page.write_text(
        "(`ldif_line` in `components/ldap.py`), `components/identity/ldif.py`, `components/identity/`,\n"
        "`tests/harness.run_under_mocks`, `ci/pulumi-preview`, `x/y`\n\n```\ncomponents/gone.py\n```\n"
    )
    assert missing_paths(page, tmp_path) == ["README.md:1: components/ldap.py: no such path"]


def test_the_policy_packs_readme_names_the_packs_own_virtualenv():
    """PulumiPolicy.yaml's `virtualenv`, as policies/README.md says it, and Pulumi.yaml's, as the docs say it."""
    for readme, project in ((ROOT / "policies" / "README.md", ROOT / "policies" / "PulumiPolicy.yaml"), (ROOT / "README.md", ROOT / "Pulumi.yaml")):
        virtualenv = yaml.safe_load(project.read_text())["runtime"]["options"]["virtualenv"]
        pages_of = [readme] if readme.parent.name == "policies" else pages()
        said = {match for page in pages_of for match in re.findall(r"`virtualenv: ([^`]+)`", page.read_text())}
        assert said <= {virtualenv}, f"{readme.relative_to(ROOT)}: says virtualenv {sorted(said)}, {project.name} has {virtualenv}"
    assert "`virtualenv: venv`" in (ROOT / "policies" / "README.md").read_text()


def stacks_not_listed(page_text: str, stacks: list[str]) -> list[str]:
    """The example stacks that getting-started's "Example stacks" section does not name as Pulumi.<stack>.yaml."""
    section = page_text[page_text.index("## Example stacks") :]
    section = section[: section.index("\n## ", 1)]
    return [stack for stack in stacks if f"`Pulumi.{stack}.yaml`" not in section]


def test_getting_started_lists_every_example_stack():
    stacks = example_stacks()
    assert len(stacks) >= 10 and {"local", "kwok", "dev-lab", "prod-hoalac"} <= set(stacks)
    assert stacks_not_listed((ROOT / "docs" / "getting-started.md").read_text(), stacks) == []


def test_the_stack_list_check_finds_an_omitted_stack():
    page = "## Example stacks\n\n`Pulumi.local.yaml`, `Pulumi.dev.yaml`.\n\n## Next\n\n`Pulumi.dev-lab.yaml`\n"
    assert stacks_not_listed(page, ["local", "dev", "dev-lab"]) == ["dev-lab"]

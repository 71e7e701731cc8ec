"""Every relative link of the README, the contributor guide, benchmarks/README.md and docs/ leads
somewhere: the file or folder exists, and a `#anchor` into a markdown file names one of its
headings as GitHub spells the heading's anchor. Links to the web (http, https, mailto) are not
followed."""

import re
import unicodedata
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = sorted(
    [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "benchmarks" / "README.md"]
    + list((ROOT / "docs").rglob("*.md"))
)
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    lines, fence = [], None
    for line in text.splitlines():
        marker = re.match(r"^\s{0,3}(`{3,}|~{3,})", line)
        if marker and (fence is None or marker.group(1)[0] == fence[0]):
            fence = marker.group(1) if fence is None else None
            continue
        if fence is None:
            lines.append(line)
    return lines


def links(document: Path) -> list[str]:
    """The targets of the document's inline, image and reference links."""
    found = []
    for line in prose_lines(document.read_text()):
        line = re.sub(r"(`+)(?:(?!\1).)+?\1", "``", line)  # inline code is no link
        found += INLINE_LINK.findall(line)
        if match := REFERENCE_LINK.match(line):
            found.append(match.group(1))
    return found


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: its text as rendered (a link's text, no emphasis marks or
    backticks), lowercased, every character but letters, digits, spaces, `-` and `_` dropped,
    each space a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())  # a link: its text
    kept = "".join(
        ch for ch in text.lower() if ch in " -_" or unicodedata.category(ch)[0] in "LM"
        or unicodedata.category(ch) == "Nd"
    )  # fmt: skip
    return kept.replace(" ", "-")


def anchors(document: Path) -> set[str]:
    """The anchors of every heading of a markdown file; a repeated heading gets -1, -2, ..."""
    seen: dict[str, int] = {}
    found = set()
    for line in prose_lines(document.read_text()):
        heading = re.match(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not heading:
            continue
        base = slug(heading.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(document: Path) -> list[str]:
    """Each relative link of `document` that leads nowhere, with why."""
    broken = []
    for target in links(document):
        if SCHEME.match(target):
            continue  # http(s), mailto: not followed
        path_part, _, anchor = target.partition("#")
        path = (document.parent / unquote(path_part)).resolve() if path_part else document
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and unquote(anchor).lower() not in anchors(path):
            broken.append(f"{target}: no such heading in {path.name}")
    return broken


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda d: str(d.relative_to(ROOT)))
def test_every_relative_link_resolves(document):
    assert broken_links(document) == []


def test_anchors_are_spelled_as_github_spells_them():
    assert slug("`make demo`'s stages") == "make-demos-stages"
    assert slug("Share of the machine's peak (`perf/mfu`)") == "share-of-the-machines-peak-perfmfu"
    assert slug("5. The tic-tac-toe recipe on the tiny model") == (
        "5-the-tic-tac-toe-recipe-on-the-tiny-model"
    )
    assert slug("A [linked](x.md) name_with_underscore") == "a-linked-name_with_underscore"
    assert slug("Before — after: 1 × 2") == "before--after-1--2"


def test_links_and_headings_are_read_as_markdown(tmp_path):
    (tmp_path / "there.md").write_text("# Title\n\n## Notes\n\n## Notes\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n[ok](there.md#notes-1) [web](https://example.com/x) ![img](missing.png)\n"
        "`[not a link](nowhere.md)`\n\n```\n[in code](nowhere.md)\n```\n"
        "[bad anchor](there.md#notes-2) [self](#page) [self, wrong](#pages)\n"
        "[ref]: there.md#title\n[ref2]: gone.md\n"
    )
    assert broken_links(page) == [
        "missing.png: no such file",
        "there.md#notes-2: no such heading in there.md",
        "#pages: no such heading in page.md",
        "gone.md: no such file",
    ]

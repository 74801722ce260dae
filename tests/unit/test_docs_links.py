"""Every relative link in the docs resolves: the file it names exists and, when it names
a heading (``file.md#anchor``), that heading exists there. Records move between
``docs/benchmarks.md``, ``docs/history/`` and ``docs/adr/``; a moved section must not
leave a dead link behind."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])

_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"`+[^`]*`+")
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _prose_lines(text: str) -> list[str]:
    """The page's lines outside fenced code blocks, code spans removed."""
    lines: list[str] = []
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(_CODE_SPAN.sub("", line))
    return lines


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else _HEADING.match(line)
        if match is None:
            continue
        slug = _slug(match.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def relative_links(page: Path) -> list[str]:
    links: list[str] = []
    for line in _prose_lines(page.read_text(encoding="utf-8")):
        for target in _LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            links.append(target)
    return links


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken: list[str] = []
    for target in relative_links(page):
        path_part, _, anchor = target.partition("#")
        destination = (page.parent / path_part).resolve() if path_part else page
        if not destination.exists():
            broken.append(f"{target}: no such file")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{target}: no heading #{anchor} in {destination.name}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_slugs_follow_github() -> None:
    assert _slug("Ingest throughput") == "ingest-throughput"
    assert _slug("Searches and writes go through an alias; `hsearch reindex` swaps it") == (
        "searches-and-writes-go-through-an-alias-hsearch-reindex-swaps-it"
    )
    assert _slug("(c) on a cache miss at 10 M and 100 M") == "c-on-a-cache-miss-at-10-m-and-100-m"

"""The pages of the docs that tests hold to the code: README.md, CONTRIBUTING.md and the Markdown pages
under docs/, read by name, and their sections by heading (headings inside code blocks do not count)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"


def page(name: str) -> str:
    """A page by its path from the repository root: `README.md`, `docs/runbooks.md`."""
    return (REPO / name).read_text()


def all_pages() -> dict[str, str]:
    """README.md, CONTRIBUTING.md and every Markdown page under docs/, by path."""
    paths = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted(DOCS.rglob("*.md"))]
    return {str(p.relative_to(REPO)): p.read_text() for p in paths}


def headings(text: str) -> list[tuple[int, str, int, int]]:
    """(level, title, start of the heading line, end of it) of every heading outside code blocks."""
    found, fence, offset = [], False, 0
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            fence = not fence
        elif not fence and (match := re.match(r"^(#+) (.*)$", line.rstrip("\n"))):
            found.append((len(match.group(1)), match.group(2).strip(), offset, offset + len(line)))
        offset += len(line)
    return found


def section(text: str, heading: str) -> str:
    """The text under a Markdown heading, up to the next heading of the same or a higher level."""
    marks = headings(text)
    index = next((i for i, (_level, title, _s, _e) in enumerate(marks) if title == heading), None)
    assert index is not None, f"no heading {heading!r}"
    level, _title, _start, end = marks[index]
    after = [start for lvl, _t, start, _e in marks[index + 1 :] if lvl <= level]
    return text[end : after[0]] if after else text[end:]


# Pages whose text is reference data of another kind: generated from the registry, or benchmark records
# with other tools' command lines.
NOT_GUIDES = {"docs/findings.md", "docs/benchmarks.md"}


def guide_pages() -> dict[str, str]:
    """README.md, CONTRIBUTING.md and the guides and runbooks under docs/, by path."""
    return {path: text for path, text in all_pages().items() if path not in NOT_GUIDES}

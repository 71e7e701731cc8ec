"""A local full-text index over pages (SQLite FTS5, BM25 ranking; nothing is downloaded).

Pages come from the generated encyclopedia (`corpus.generate_pages`) or from any collection of
rows with `id`, `title` and `content` columns: a `datasets.Dataset`, a list of dicts, or a JSON
lines file. A user page's content is split into sections at Markdown headings (`#`, `##`, ...);
text before the first heading is the section "Introduction".
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rlve.envs.wiki.corpus import Page, Section

_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*$", re.MULTILINE)
_WORD = re.compile(r"\w+")


def load_rows(source: Iterable[Mapping[str, Any]] | str | Path) -> list[Mapping[str, Any]]:
    """The rows of a JSON lines file (given by its path), or of any iterable of dicts."""
    if isinstance(source, str | Path):
        with open(source, encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]
    return list(source)


def pages_from_rows(rows: Iterable[Mapping[str, Any]] | str | Path) -> list[Page]:
    """Pages from rows with id/title/content (or the path of a JSON lines file of them)."""
    pages = []
    for i, row in enumerate(load_rows(rows)):
        missing = [key for key in ("id", "title", "content") if key not in row]
        if missing:
            raise ValueError(f"corpus row {i} lacks {missing}; it has {sorted(row)}")
        pages.append(Page(str(row["id"]), str(row["title"]), split_sections(str(row["content"]))))
    if len({p.page_id for p in pages}) != len(pages):
        raise ValueError("corpus page ids must be unique")
    return pages


def split_sections(content: str) -> list[Section]:
    """Sections at Markdown headings; text before the first heading is "Introduction"."""
    matches = list(_HEADING.finditer(content))
    sections = []
    intro = content[: matches[0].start()] if matches else content
    if intro.strip():
        sections.append(Section("Introduction", intro.strip()))
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(content)
        sections.append(Section(match.group(1), content[match.end() : end].strip()))
    return sections or [Section("Introduction", "")]


def fts_query(text: str) -> str:
    """The words of a free-text query as an FTS5 OR-query (quotes and operators cannot leak)."""
    words = _WORD.findall(text.lower())[:32]
    return " OR ".join(f'"{w}"' for w in words)


class WikiIndex:
    """Search, list sections and read sections of a page collection; safe across threads."""

    def __init__(self, pages: list[Page]):
        if not pages:
            raise ValueError("a wiki index needs at least one page")
        self.pages = {p.page_id: p for p in pages}
        self._lock = threading.Lock()
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.execute("CREATE VIRTUAL TABLE pages USING fts5(page_id UNINDEXED, title, body)")
        self._db.executemany(
            "INSERT INTO pages VALUES (?, ?, ?)",
            [(p.page_id, p.title, " ".join(s.text for s in p.sections)) for p in pages],
        )

    def search(self, query: str, limit: int = 5) -> list[tuple[str, str]]:
        """(page_id, title) of the best matches by BM25, best first (title hits weigh 5x)."""
        match = fts_query(query)
        if not match:
            return []
        with self._lock:
            rows = self._db.execute(
                "SELECT page_id, title FROM pages WHERE pages MATCH ? "
                "ORDER BY bm25(pages, 0.0, 5.0, 1.0) LIMIT ?",
                (match, limit),
            ).fetchall()
        return [(page_id, title) for page_id, title in rows]

    def page(self, page_id: str) -> Page:
        if page_id not in self.pages:
            raise ValueError(f"no page {page_id!r}; search_pages gives page ids")
        return self.pages[page_id]

    def section(self, section_id: str) -> tuple[Page, Section]:
        """The section `<page_id>#<n>` (n counts from 0)."""
        page_id, _, number = section_id.rpartition("#")
        page = self.page(page_id) if page_id else None
        if page is None or not number.isdigit() or int(number) >= len(page.sections):
            raise ValueError(f"no section {section_id!r}; view_sections gives section ids")
        return page, page.sections[int(number)]

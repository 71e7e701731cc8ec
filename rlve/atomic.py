"""Writing a file so that a reader, or a crash mid-write, never sees half of it."""

from __future__ import annotations

from pathlib import Path


def write_text_atomically(path: str | Path, text: str) -> Path:
    """Write `text` to a sibling `.tmp` file, then rename it over `path`; returns `path`."""
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return path

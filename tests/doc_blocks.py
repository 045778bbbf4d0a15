"""A generated block of a page in docs/: the files its marker names and the text between the
marker and its end line, which a test compares with what the marker's command prints."""

from __future__ import annotations

from pathlib import Path


def generated_block(page: Path, begin: str, end: str) -> tuple[list[str], str]:
    """The files named after ``begin`` (up to " (tests/"), and the block's text up to ``end``."""
    text = page.read_text(encoding="utf-8")
    start = text.index(begin)
    files = text[start + len(begin):text.index(" (tests/", start)].split()
    body = text.index("-->\n", start) + len("-->\n")
    return files, text[body:text.index(end, body)]

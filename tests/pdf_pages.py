"""Real PDFs' extracted pages, read once per test session.

Extracting a 50-page filing takes tens of seconds, and several test modules read the same real
PDFs (the chunk invariants, the answerability gate, the concise extractor); extraction itself is
tested in ``tests/core/test_pdf.py`` and by every ingestion test. ``Page`` is frozen, so sharing
the pages between tests cannot leak a change from one to another."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ragaudit.ingest.pdf import Page, extract_pages


@lru_cache(maxsize=None)
def _pages(path: str) -> tuple[Page, ...]:
    return tuple(extract_pages(Path(path).read_bytes()))


def pages(path: str | Path) -> list[Page]:
    """``extract_pages`` of the PDF at ``path`` (a new list of the shared, frozen pages)."""
    return list(_pages(str(Path(path).resolve())))

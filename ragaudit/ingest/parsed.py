"""Pages extracted ahead of their run, in this process.

The serving process's ingestion queue (``ragaudit.ingest.queue``) extracts the text of the next
waiting document in a bounded child process while the current one is embedded; the document's
run then takes those pages (``ragaudit.ingest.documents.load_pages``) instead of parsing again.
Entries are keyed by document id AND content version (the sha256 the run builds), so a run only
ever takes the pages of exactly the bytes it ingests; a newer upload makes the entry useless and
it is dropped when seen.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from ragaudit.ingest.pdf import Page

_PARSING = object()  # an entry whose extraction is under way


class ParsedPages:
    """``begin`` / ``finish`` an extraction ahead of a run; ``take`` its result. Thread-safe."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._entries: dict[str, tuple[str, Any]] = {}  # document id -> (sha256, pages | exception | _PARSING)

    def begin(self, document_id: str, sha: str) -> bool:
        """Claim the extraction of ``(document_id, sha)``; False when an entry for it exists."""
        with self._cv:
            cur = self._entries.get(document_id)
            if cur is not None and cur[0] == sha:
                return False
            self._entries[document_id] = (sha, _PARSING)
            return True

    def finish(self, document_id: str, sha: str, result: list[Page] | BaseException) -> None:
        """Store the pages (or the ``PDFError`` the extraction raised) and wake a waiting ``take``."""
        with self._cv:
            cur = self._entries.get(document_id)
            if cur is not None and cur[0] == sha:
                self._entries[document_id] = (sha, result)
            self._cv.notify_all()

    def take(self, document_id: str, sha: str, wait_s: float) -> list[Page] | None:
        """The pages extracted ahead for ``(document_id, sha)`` (the entry is removed), waiting up
        to ``wait_s`` s for an extraction under way; None when there are none (or they are of
        other bytes). Raises the exception the extraction ahead raised (a refused PDF)."""
        deadline = time.monotonic() + wait_s
        with self._cv:
            while True:
                cur = self._entries.get(document_id)
                if cur is None:
                    return None
                if cur[0] != sha:
                    del self._entries[document_id]
                    return None
                if cur[1] is not _PARSING:
                    del self._entries[document_id]
                    if isinstance(cur[1], BaseException):
                        raise cur[1]
                    return cur[1]
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cv.wait(left)

    def discard(self, document_id: str) -> None:
        """Forget what was extracted ahead for the document (its run ended elsewhere, or it went)."""
        with self._cv:
            self._entries.pop(document_id, None)
            self._cv.notify_all()

    def __contains__(self, document_id: str) -> bool:
        with self._cv:
            return document_id in self._entries


PARSED = ParsedPages()

"""Answer and retrieval cache (in-process ``cachetools.TTLCache``).

Key: ``(kind, normalised question, scope, mode, top_k, strategy, model, index version)``.
The index version is ``index_state.version`` in the database: every insert/update/delete of a
``documents`` row bumps it in the same transaction (``ragaudit/platform/db.py``), and ingestion bumps it once
more after retiring old Qdrant points, so every process sharing the database stops serving
stale entries as soon as the index changes. If the version cannot be read (database down),
the cache is bypassed (no get, no put) rather than risk a stale answer.

Normalisation: Unicode NFKC, case-folded, runs of whitespace collapsed, ends stripped.
"""

from __future__ import annotations

import copy
import json
import logging
import re
import threading
import unicodedata
from typing import Any

from cachetools import TTLCache
from sqlalchemy import select

from ragaudit.platform.db import IndexState

log = logging.getLogger(__name__)


def normalize_question(question: str) -> str:
    """NFKC, casefold, collapse whitespace: ``"  What IS  x? "`` -> ``"what is x?"``."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", question).casefold()).strip()


def index_version(sessions: Any) -> int:
    """Current ``index_state.version``; raises SQLAlchemy errors if the database is unavailable."""
    with sessions() as s:
        return int(s.scalar(select(IndexState.version).where(IndexState.id == 1)) or 0)


class AnswerCache:
    """Thread-safe TTL cache of answers (``kind="answer"``) and retrievals (``kind="search"``).

    ``sessions``: sessionmaker or zero-arg callable returning one (read for the index version).
    ``ttl_s`` seconds (> 0), ``max_entries`` (LRU beyond). Values are deep-copied in and out.
    """

    def __init__(self, sessions: Any, ttl_s: float, max_entries: int = 1024):
        self._sessions = sessions
        self._cache: TTLCache = TTLCache(maxsize=max_entries, ttl=ttl_s)
        self._lock = threading.Lock()

    @classmethod
    def from_services(cls, svc: Any) -> "AnswerCache | None":
        """The cache configured by ``cache_ttl_s`` / ``cache_max_entries``; ``None`` when ttl is 0."""
        s = svc.settings
        return cls(lambda: svc.sessions, s.cache_ttl_s, s.cache_max_entries) if s.cache_ttl_s > 0 else None

    def key(
        self,
        kind: str,
        question: str,
        scope: dict[str, Any],
        mode: str,
        top_k: int,
        strategy: str | None,
        model: str | None,
    ) -> tuple | None:
        """The cache key, or ``None`` (do not cache) when the index version cannot be read."""
        sm = self._sessions if hasattr(self._sessions, "begin") else self._sessions()
        try:
            version = index_version(sm)
        except Exception as e:
            log.warning("answer cache bypassed: index version unavailable (%s)", type(e).__name__)
            return None
        return (
            kind,
            normalize_question(question),
            json.dumps(scope, sort_keys=True, default=str),
            mode,
            int(top_k),
            strategy,
            model,
            version,
        )

    def get(self, key: tuple | None) -> Any | None:
        """A deep copy of the cached value, or ``None`` (miss, expired, or ``key`` is ``None``)."""
        if key is None:
            return None
        with self._lock:
            v = self._cache.get(key)
        return copy.deepcopy(v) if v is not None else None

    def put(self, key: tuple | None, value: Any) -> None:
        """Store a deep copy of ``value`` under ``key`` (no-op when ``key`` is ``None``)."""
        if key is None:
            return
        v = copy.deepcopy(value)
        with self._lock:
            self._cache[key] = v

    def __len__(self) -> int:
        with self._lock:
            return len(self._cache)

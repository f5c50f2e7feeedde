"""Per-request telemetry: one ``query_logs`` row per /query, /query/stream and /search request.

``TelemetryWriter.record(...)`` is the one call any route or service makes. It never raises and
never blocks on the database: in background mode (the API) rows go into a bounded in-memory
queue that a daemon thread writes in batches. When the database is unavailable the thread keeps
the batch and retries with exponential backoff (tenacity) for up to ``retry_max_s`` seconds;
rows that cannot be kept are *counted*, never lost silently:

* queue full (``queue_size`` rows already waiting) -> the new row is dropped, ``dropped`` += 1;
* a batch still failing after ``retry_max_s``, or failing with a non-transient error -> its rows
  are dropped and counted;
* rows still queued when ``close(timeout)`` gives up -> counted as dropped.

So at any time ``written + dropped + pending == recorded`` (see ``stats()``); /metrics and
/health report these counts. Synchronous mode (``background=False``, used by the CLI and by
``QueryService`` when no writer is given) writes inline with the same accounting.

Secrets never enter a row: only the question (or, with ``store_question=False``, only its
sha256), scope, mode, model name, label, timings, tokens, cost, chunk ids, the trace id and the
*type name* of an error are stored; error messages are not (they can echo request data). A
question longer than ``QUESTION_MAX_CHARS`` (one refused as too long) is stored cut to that
length, with a marker giving its real length (``clip_text``); its sha256 is of the whole text.

Example for a route (e.g. ``/query/stream``, after the stream ends)::

    telemetry.record(endpoint="stream", question=q, scope=scope.as_dict(), mode="hybrid",
                     top_k=5, model="gpt-4o-mini", label="answered",
                     timings_ms={"embed": 12.0, "generation": 820.0, "ttft": 140.0, "total": 900.0},
                     prompt_tokens=900, completion_tokens=80, cost_usd=0.00021,
                     retrieved_ids=[...], cited_ids=[...])
"""

from __future__ import annotations

import hashlib
import logging
import queue
import threading
import time
from datetime import datetime
from typing import Any, Callable

from sqlalchemy import exc as sa_exc
from sqlalchemy import insert
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_exponential

from ragaudit.platform.db import QueryLog, new_id, utcnow
from ragaudit.types import QUESTION_MAX_CHARS

log = logging.getLogger(__name__)

#: stage name -> query_logs column (all in ms)
STAGE_COLUMNS: dict[str, str] = {
    "embed": "embed_ms",
    "vector": "vector_ms",
    "bm25": "bm25_ms",
    "fusion": "fusion_ms",
    "rerank": "rerank_ms",
    "document": "document_ms",
    "multilingual": "multilingual_ms",
    "neighbors": "neighbors_ms",
    "gate": "gate_ms",
    "generation": "generation_ms",
    "ttft": "ttft_ms",
    "total": "total_ms",
}


def clip_text(text: str, limit: int) -> str:
    """``text`` when it has at most ``limit`` characters, else its first ``limit`` followed by
    ``"… [cut: N characters in all]"``: what is stored or echoed of a value that may be huge."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [cut: {len(text):,} characters in all]"


def question_hash(question: str) -> str:
    """sha256 hex digest (64 chars) of the question's UTF-8 bytes."""
    return hashlib.sha256(question.encode("utf-8")).hexdigest()


def is_transient(e: BaseException) -> bool:
    """True for database errors worth retrying: connection refused/lost, pool timeout."""
    if isinstance(e, (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.TimeoutError)):
        return True
    return isinstance(e, sa_exc.DBAPIError) and bool(e.connection_invalidated)


def without_nul(value: Any) -> Any:
    """``value`` (a row: str, dict, list, or a scalar) with U+0000 in its strings replaced by U+FFFD:
    PostgreSQL refuses U+0000 in text and JSON, and one such row would fail the batch it is in."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {without_nul(k): without_nul(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [without_nul(v) for v in value]
    return value


class TelemetryWriter:
    """Writes ``query_logs`` rows off the request path; see the module docstring.

    ``sessions``: a SQLAlchemy ``sessionmaker`` or a zero-argument callable returning one (so the
    engine is created lazily). ``observer``: optional callable receiving each row dict as it is
    recorded (the Prometheus metrics use it). Raises nothing from ``record``.
    """

    POLL_S = 0.1  # the background thread looks for queued rows this often (s)

    def __init__(
        self,
        sessions: Any,
        *,
        store_question: bool = True,
        queue_size: int = 10000,
        batch_size: int = 200,
        retry_max_s: float = 300.0,
        background: bool = True,
        observer: Callable[[dict[str, Any]], None] | None = None,
    ):
        self._sessions = sessions
        self.store_question = store_question
        self.batch_size = batch_size
        self.retry_max_s = retry_max_s
        self.background = background
        self.observer = observer
        self._queue: queue.Queue[dict[str, Any]] = queue.Queue(maxsize=queue_size)
        self._lock = threading.Lock()
        self._recorded = self._written = self._dropped = self._pending = 0
        self._failing = False
        self._last_error: str | None = None
        self._closing_deadline: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if background:
            self._thread = threading.Thread(target=self._run, name="ragaudit-telemetry", daemon=True)
            self._thread.start()

    @classmethod
    def from_services(
        cls, svc: Any, *, background: bool = True, observer: Callable[[dict[str, Any]], None] | None = None
    ) -> "TelemetryWriter":
        """A writer configured from ``svc.settings`` (``telemetry_*`` settings) on ``svc``'s database."""
        s = svc.settings
        return cls(
            lambda: svc.sessions,
            store_question=s.telemetry_store_question,
            queue_size=s.telemetry_queue_size,
            batch_size=s.telemetry_batch_size,
            retry_max_s=s.telemetry_retry_max_s,
            background=background,
            observer=observer,
        )

    # ------------------------------------------------------------------ public API
    def record(
        self,
        *,
        endpoint: str,
        question: str,
        mode: str,
        top_k: int,
        scope: dict | None = None,
        strategy: str | None = None,
        model: str | None = None,
        label: str | None = None,
        cache_hit: bool = False,
        cache_source_id: str | None = None,
        timings_ms: dict[str, float | None] | None = None,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        cost_usd: float | None = 0.0,
        retrieved_ids: list[str] | None = None,
        cited_ids: list[str] | None = None,
        error_kind: str | None = None,
        query_id: str | None = None,
        created_at: datetime | None = None,
        trace_id: str | None = None,
        rules: list[dict[str, Any]] | None = None,
    ) -> str:
        """Record one request; returns its ``query_logs.id`` (``query_id`` if given, else a new one).

        ``endpoint``: the door: "query" | "stream" (/query/stream) | "search" | "chat" | "chat_stream"
        (/v1/chat/completions) | "mcp_ask" | "mcp_search". ``timings_ms``: stage -> ms, keys from
        ``STAGE_COLUMNS`` (embed, vector, bm25, fusion, rerank, generation, ttft, total); unknown
        keys are ignored. ``cost_usd`` in USD (0 for the offline answerer; ``None`` = unknown, a
        model without a price in litellm's map: stored as NULL, never as 0; name the model anyway).
        ``error_kind``: exception class name for failed requests (``None`` = success). ``trace_id``:
        the request's OpenTelemetry trace id (32 hex digits; ``None`` when tracing is off). ``rules``:
        the rules that fired (``Fired.to_json()``: rule, stage, effect, reason). Never raises;
        never blocks (background mode).
        """
        t = timings_ms or {}
        row: dict[str, Any] = {
            "id": query_id or new_id(),
            "created_at": created_at or utcnow(),
            "endpoint": endpoint,
            "question": clip_text(question, QUESTION_MAX_CHARS) if self.store_question else None,
            "question_hash": question_hash(question),
            "scope": scope or None,
            "mode": mode,
            "top_k": int(top_k),
            "strategy": strategy,
            "model": model,
            "label": label,
            "cache_hit": bool(cache_hit),
            "cache_source_id": cache_source_id,
            "prompt_tokens": int(prompt_tokens or 0),
            "completion_tokens": int(completion_tokens or 0),
            "cost_usd": None if cost_usd is None else float(cost_usd),
            "retrieved_ids": retrieved_ids,
            "cited_ids": cited_ids,
            "error_kind": error_kind,
            "trace_id": trace_id,
            "rules": rules or None,
        }
        for stage, col in STAGE_COLUMNS.items():
            v = t.get(stage)
            row[col] = float(v) if v is not None else None
        row = without_nul(row)
        with self._lock:
            self._recorded += 1
        if self.observer is not None:
            try:
                self.observer(row)
            except Exception as e:  # metrics must never fail a request
                log.warning("telemetry observer failed: %s", type(e).__name__)
        if not self.background:
            self._write_once(row)
        else:
            with self._lock:
                self._pending += 1
            try:
                self._queue.put_nowait(row)
            except queue.Full:
                with self._lock:
                    self._pending -= 1
                self._count_dropped(1, "queue_full")
        return row["id"]

    def stats(self) -> dict[str, Any]:
        """Counts since start: ``{recorded, written, dropped, pending, failing, last_error, alive}``;
        ``recorded == written + dropped + pending``. ``last_error`` is an exception type name."""
        with self._lock:
            return {
                "recorded": self._recorded,
                "written": self._written,
                "dropped": self._dropped,
                "pending": self._pending,
                "failing": self._failing,
                "last_error": self._last_error,
                "alive": (self._thread.is_alive() if self._thread else True),
            }

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every recorded row is written or counted as dropped; False on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.stats()["pending"] == 0:
                return True
            time.sleep(0.01)
        return self.stats()["pending"] == 0

    def close(self, timeout: float = 10.0) -> None:
        """Stop the thread after writing what is queued (retrying at most ``timeout`` s);
        rows still pending then are counted as dropped."""
        if self._thread is None:
            return
        self._closing_deadline = time.monotonic() + timeout
        self._stop.set()
        self._thread.join(timeout + 1.0)
        self._thread = None
        left = 0
        while True:
            try:
                self._queue.get_nowait()
                left += 1
            except queue.Empty:
                break
        if left:
            with self._lock:
                self._pending -= left
            self._count_dropped(left, "shutdown")

    # ------------------------------------------------------------------ internals
    def _sessionmaker(self):
        s = self._sessions
        return s if hasattr(s, "begin") else s()

    def _insert(self, rows: list[dict[str, Any]]) -> None:
        with self._sessionmaker().begin() as s:
            s.execute(insert(QueryLog), rows)

    def _count_dropped(self, n: int, why: str) -> None:
        with self._lock:
            self._dropped += n
        log.warning("telemetry: %d query_logs row(s) dropped (%s)", n, why)

    def _write_once(self, row: dict[str, Any]) -> None:
        try:
            self._insert([row])
            with self._lock:
                self._written += 1
        except Exception as e:
            with self._lock:
                self._last_error = type(e).__name__
            self._count_dropped(1, type(e).__name__)

    def _closing(self, _retry_state: Any = None) -> bool:
        return self._closing_deadline is not None and time.monotonic() > self._closing_deadline

    def _write_batch(self, batch: list[dict[str, Any]]) -> None:
        def before_sleep(rs: Any) -> None:
            with self._lock:
                self._failing = True
                self._last_error = type(rs.outcome.exception()).__name__
            if rs.attempt_number == 1:
                log.warning("telemetry: database unavailable (%s); buffering and retrying", self._last_error)

        retrying = Retrying(
            retry=retry_if_exception(is_transient),
            wait=wait_exponential(multiplier=0.05, max=2.0),
            stop=stop_after_delay(self.retry_max_s) | self._closing,
            before_sleep=before_sleep,
            reraise=True,
        )
        try:
            retrying(self._insert, batch)
        except Exception as e:
            if not is_transient(e) and len(batch) > 1:
                # a row the database refuses (not an outage) must not take the batch with it
                for row in batch:
                    self._write_once(row)
            else:
                with self._lock:
                    self._last_error = type(e).__name__
                self._count_dropped(len(batch), type(e).__name__)
            with self._lock:
                self._failing = False
                self._pending -= len(batch)
            return
        with self._lock:
            self._written += len(batch)
            self._pending -= len(batch)
            self._failing = False

    def _run(self) -> None:
        # polls instead of blocking in ``get``: a thread blocked there is woken by every ``put``,
        # and that wake-up hands the GIL over in the middle of a request. Measured at 50k chunks
        # (bench/gil_per_request.py, py-spy --gil): telemetry's GIL-held time per /search 0.91 ->
        # 0.25 ms with 1 client, 0.47 -> 0.30 ms with 8. Rows wait at most POLL_S longer and go
        # out in bigger batches; close() still writes what is queued.
        while True:
            try:
                first = self._queue.get_nowait()
            except queue.Empty:
                if self._stop.is_set():
                    return
                self._stop.wait(self.POLL_S)
                continue
            batch = [first]
            while len(batch) < self.batch_size:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            self._write_batch(batch)

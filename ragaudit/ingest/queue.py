"""The serving process's ingestion queue: uploads return at once, a worker thread runs them.

One worker thread executes queued documents one at a time (``ragaudit.ingest.documents.run_queued``): the
embedded Qdrant store admits one writer, and the embedding model already uses every core. The
queue's truth is SQL (``documents.status = 'queued'``), not memory: on start the worker re-queues
every document left queued or half-run by a stopped process, so a restart loses no upload.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any, Callable

from ragaudit.ingest.documents import IngestOutcome, Runner, active_documents, queued_documents, run_queued
from ragaudit.services import Services

log = logging.getLogger(__name__)
RUN_PREFIX = "run:"  # queue items that are Dagster runs handed over by the run launcher


class IngestQueue:
    """FIFO of document ids run by one daemon thread.

    ``start()`` recovers queued documents from SQL and starts the worker; ``submit(id)`` adds one;
    ``submit_run(run_id)`` adds a Dagster run handed over by the run launcher (executed by
    ``run_executor(svc, run_id)``, in the same single line as uploads).
    ``stop(timeout)`` lets the current run finish (up to ``timeout`` s) and stops. ``on_done``
    (optional) is called with each ``IngestOutcome`` (for logs and tests). With ``poll_s`` the
    worker also picks up documents other processes put in status ``queued`` (the landing-folder
    sensor and the re-ingestion schedule in the embedded mode, where only this process may write
    the store), checking SQL every ``poll_s`` seconds when idle.
    """

    def __init__(
        self,
        svc: Services,
        runner: Runner,
        on_done: Callable[[str, IngestOutcome | None], None] | None = None,
        poll_s: float | None = None,
        run_executor: Callable[[Services, str], Any] | None = None,
    ):
        self.poll_s = poll_s
        self.run_executor = run_executor
        self.svc = svc
        self.runner = runner
        self.on_done = on_done
        self._q: queue.Queue[str | None] = queue.Queue()
        self._queued: set[str] = set()  # waiting, not yet taken by the worker
        self._running: str | None = None
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._idle = threading.Event()
        self._idle.set()
        self._stopping = threading.Event()

    def start(self) -> int:
        """Re-queue documents left by a previous process and start the worker; returns how many."""
        ids = active_documents(self.svc)
        for i in ids:
            self.submit(i)
        self._stopping.clear()
        self._thread = threading.Thread(target=self._work, name="ragaudit-ingest", daemon=True)
        self._thread.start()
        if ids:
            log.info("re-queued %d document(s) left by a previous run", len(ids))
        return len(ids)

    def submit(self, document_id: str) -> None:
        """Queue a document (in status ``queued``); a document already waiting is not queued twice."""
        with self._lock:
            if document_id in self._queued:
                return
            self._queued.add(document_id)
            self._idle.clear()
        self._q.put(document_id)

    def submit_run(self, run_id: str) -> None:
        """Queue the execution of a Dagster run handed over by the run launcher (``run_executor``)."""
        if self.run_executor is None:
            raise RuntimeError("this queue executes no Dagster runs")
        self.submit(RUN_PREFIX + run_id)

    def pending(self) -> int:
        """Documents waiting or running."""
        with self._lock:
            return len(self._queued) + (self._running is not None)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until nothing is waiting or running; False on timeout."""
        return self._idle.wait(timeout)

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop after the current run: documents still waiting stay ``queued`` in SQL (the next
        start runs them), none is started now. Waits up to ``timeout`` s for the worker to end;
        returns False when a run was still going (the worker ends when it finishes; a run cut
        short by the process exiting is re-queued by the next start)."""
        if self._thread is None:
            return True
        self._stopping.set()
        self._q.put(None)
        self._thread.join(timeout)
        ended = not self._thread.is_alive()
        if not ended:
            log.warning(
                "ingestion worker still running %s after %.0f s; it stops when that run ends", self._running, timeout
            )
        self._thread = None
        return ended

    def _next(self) -> str | None:
        while True:
            if self._stopping.is_set():
                return None
            try:
                item = self._q.get(timeout=self.poll_s)
                return None if self._stopping.is_set() else item
            except queue.Empty:
                if self._stopping.is_set():
                    return None
                try:
                    for i in queued_documents(self.svc):
                        self.submit(i)
                except Exception:  # the database is down: try again at the next poll
                    log.exception("could not read queued documents")

    def _work(self) -> None:
        while True:
            doc_id = self._next()
            if doc_id is None:
                return
            with self._lock:  # from now on a new upload of this document is queued again
                self._queued.discard(doc_id)
                self._running = doc_id
            out = None
            try:
                if doc_id.startswith(RUN_PREFIX):
                    self.run_executor(self.svc, doc_id[len(RUN_PREFIX) :])
                else:
                    out = run_queued(self.svc, doc_id, self.runner)
            except Exception:  # the worker must survive anything a run throws
                log.exception("ingestion of %s crashed", doc_id)
            finally:
                with self._lock:
                    self._running = None
                    if not self._queued:
                        self._idle.set()
            if self.on_done is not None:
                try:
                    self.on_done(doc_id, out)
                except Exception:
                    log.exception("on_done callback failed")

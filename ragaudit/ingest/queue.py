"""The serving process's ingestion queue: uploads return at once, worker threads run them.

Two lanes and a parser, all threads of the serving process:

- the **main lane** runs waiting items in order, one at a time (``run_queued`` under
  ``INGEST_LOCK``): documents, and Dagster runs handed over by the run launcher;
- the **express lane** (``queue_express_pages`` > 0) runs, beside it, the oldest waiting document
  of at most that many pages (the count validation found at upload), so a small upload does not
  wait for a long ingestion: its stages interleave with the long one's (the embedding model takes
  its callers a batch at a time, the store a write at a time), and at most one long document is
  in memory at once;
- the **parser** (``queue_parse_ahead``) extracts the text of the next waiting long document in a
  bounded child process while the main lane embeds the current one (as ``ragaudit ingest`` does,
  ``ragaudit.ingest.bulk``); its run takes those pages (``ragaudit.ingest.parsed``), and the
  document's ``pages`` progress moves as they are extracted.

The queue's truth is SQL (``documents.status = 'queued'``), not memory: on start every document
left queued or half-run by a stopped process is queued again, so a restart loses no upload.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

from sqlalchemy import select

from ragaudit.index.embedding import cores_busy
from ragaudit.ingest.documents import (
    IngestOutcome,
    Runner,
    active_documents,
    file_path,
    queued_documents,
    run_queued,
    set_parse_progress,
    target_version,
)
from ragaudit.ingest.guard import extract_pages_bounded
from ragaudit.ingest.parsed import PARSED
from ragaudit.platform.db import Document
from ragaudit.services import Services

log = logging.getLogger(__name__)
RUN_PREFIX = "run:"  # queue items that are Dagster runs handed over by the run launcher
MAIN, EXPRESS = "main", "express"
PARSE_AHEAD = 1  # long documents extracted ahead and not yet taken by the main lane, at most


class IngestQueue:
    """Waiting items (document ids, ``run:<id>``) run by the lanes described in the module docstring.

    ``start()`` recovers queued documents from SQL and starts the threads; ``submit(id)`` adds a
    document; ``submit_run(run_id)`` adds a Dagster run handed over by the run launcher (executed
    by ``run_executor(svc, run_id)`` in the main lane, in line with uploads). ``stop(timeout)``
    lets the runs under way finish (up to ``timeout`` s) and stops. ``on_done(item, outcome)``
    (optional) is called as each item ends (for logs and tests). With ``poll_s`` the main lane
    also picks up documents other processes put in status ``queued`` (the landing-folder sensor
    and the re-ingestion schedule in the embedded mode, where only this process may write the
    store), checking SQL every ``poll_s`` seconds. ``express_pages`` / ``parse_ahead``: default
    the settings ``queue_express_pages`` / ``queue_parse_ahead``. ``express_runner``: the runner of
    the express lane (default ``runner``); it must be safe to run beside ``runner`` in this
    process (the serving process gives ``ragaudit.pipelines.runner.RecordedRunner``: two Dagster
    runs at once in one process deadlock).
    """

    def __init__(
        self,
        svc: Services,
        runner: Runner,
        on_done: Callable[[str, IngestOutcome | None], None] | None = None,
        poll_s: float | None = None,
        run_executor: Callable[[Services, str], Any] | None = None,
        express_pages: int | None = None,
        parse_ahead: bool | None = None,
        express_runner: Runner | None = None,
    ):
        self.svc = svc
        self.runner = runner
        self.express_runner = express_runner or runner
        self.on_done = on_done
        self.poll_s = poll_s
        self.run_executor = run_executor
        self.express_pages = svc.settings.queue_express_pages if express_pages is None else express_pages
        self.parse_ahead = svc.settings.queue_parse_ahead if parse_ahead is None else parse_ahead
        self._cv = threading.Condition()
        self._waiting: list[str] = []  # items not yet taken by a lane, oldest first
        self._pages: dict[str, int] = {}  # document id -> page count of the queued version (0 = unknown)
        self._running: dict[str, str] = {}  # lane -> the item it runs
        self._ahead: set[str] = set()  # waiting documents whose pages were extracted ahead (or are being)
        self._threads: list[threading.Thread] = []
        self._idle = threading.Event()
        self._idle.set()
        self._stopping = threading.Event()

    # ------------------------------------------------------------------ control
    def start(self) -> int:
        """Re-queue documents left by a previous process and start the threads; returns how many."""
        ids = active_documents(self.svc)
        for i in ids:
            self.submit(i)
        self._stopping.clear()
        targets = [("ragaudit-ingest", self._lane, (MAIN,))]
        if self.express_pages > 0:
            targets.append(("ragaudit-ingest-express", self._lane, (EXPRESS,)))
        if self.parse_ahead:
            targets.append(("ragaudit-ingest-parse", self._parser, ()))
        self._threads = [threading.Thread(target=fn, args=a, name=n, daemon=True) for n, fn, a in targets]
        for th in self._threads:
            th.start()
        if ids:
            log.info("re-queued %d document(s) left by a previous run", len(ids))
        return len(ids)

    def submit(self, document_id: str) -> None:
        """Queue a document (in status ``queued``); a document already waiting is not queued twice."""
        pages = 0 if document_id.startswith(RUN_PREFIX) else self._page_count(document_id)
        with self._cv:
            if document_id in self._waiting:
                return
            self._waiting.append(document_id)
            self._pages[document_id] = pages
            self._idle.clear()
            self._cv.notify_all()

    def submit_run(self, run_id: str) -> None:
        """Queue the execution of a Dagster run handed over by the run launcher (``run_executor``)."""
        if self.run_executor is None:
            raise RuntimeError("this queue executes no Dagster runs")
        self.submit(RUN_PREFIX + run_id)

    def pending(self) -> int:
        """Items waiting or running."""
        with self._cv:
            return len(self._waiting) + len(self._running)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until nothing is waiting or running; False on timeout."""
        return self._idle.wait(timeout)

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop after the runs under way: documents still waiting stay ``queued`` in SQL (the next
        start runs them), none is started now. Waits up to ``timeout`` s for the threads to end;
        returns False when a run was still going (its lane ends when it finishes; a run cut short
        by the process exiting is re-queued by the next start)."""
        if not self._threads:
            return True
        self._stopping.set()
        with self._cv:
            self._cv.notify_all()
        deadline = time.monotonic() + timeout
        for th in self._threads:
            th.join(max(0.0, deadline - time.monotonic()))
        ended = not any(th.is_alive() for th in self._threads)
        if not ended:
            with self._cv:
                running = sorted(self._running.values())
            log.warning("ingestion still running %s after %.0f s; it stops when that run ends", running, timeout)
        self._threads = []
        return ended

    # ------------------------------------------------------------------ lanes
    def _page_count(self, document_id: str) -> int:
        """Pages of the version a document's run will build: the count validation found at upload
        (``pages_total`` while queued), else its current version's; 0 when unknown."""
        try:
            with self.svc.sessions() as s:
                row = s.execute(select(Document.pages_total, Document.pages).where(Document.id == document_id)).first()
        except Exception:  # the database is down: the run itself will report it
            return 0
        return (row[0] or row[1] or 0) if row else 0

    def _eligible(self, item: str, lane: str) -> bool:
        """Whether ``lane`` may take ``item`` now (called under the lock). A Dagster run handed over
        by the launcher may touch any document (a Materialize click, the checks' "Execute checks",
        which undoes a version it finds staged): it runs alone, in its turn, once the express lane
        is idle; no document waiting behind it is taken before it, and the express lane takes
        nothing while one runs."""
        if item in self._running.values():
            return False  # queued again while it runs: taken when that run ends (then a no-op or its next version)
        if item.startswith(RUN_PREFIX):
            return lane == MAIN and EXPRESS not in self._running
        if any(i.startswith(RUN_PREFIX) for i in self._waiting[: self._waiting.index(item)]):
            return False
        if lane == MAIN:
            return True
        if any(i.startswith(RUN_PREFIX) for i in self._running.values()):
            return False
        return 0 < self._pages.get(item, 0) <= self.express_pages

    def _next(self, lane: str) -> str | None:
        """The next item for ``lane`` (blocks); None when stopping. The main lane polls SQL for
        documents queued by other processes every ``poll_s`` seconds."""
        last_poll = time.monotonic()
        while True:
            with self._cv:
                while True:
                    if self._stopping.is_set():
                        return None
                    item = next((i for i in self._waiting if self._eligible(i, lane)), None)
                    if item is not None:
                        self._waiting.remove(item)
                        self._ahead.discard(item)
                        self._running[lane] = item
                        self._cv.notify_all()  # the parser waits for the main lane to be busy
                        return item
                    if lane == MAIN and self.poll_s:
                        left = self.poll_s - (time.monotonic() - last_poll)
                        if left <= 0:
                            break
                        self._cv.wait(left)
                    else:
                        self._cv.wait()
            last_poll = time.monotonic()
            try:
                for i in queued_documents(self.svc):
                    self.submit(i)
            except Exception:  # the database is down: try again at the next poll
                log.exception("could not read queued documents")

    def _lane(self, lane: str) -> None:
        while True:
            item = self._next(lane)
            if item is None:
                return
            out = None
            try:
                if item.startswith(RUN_PREFIX):
                    self.run_executor(self.svc, item[len(RUN_PREFIX) :])
                else:
                    runner = self.runner if lane == MAIN else self.express_runner
                    out = run_queued(self.svc, item, runner, exclusive=lane == MAIN)
            except Exception:  # a lane must survive anything a run throws
                log.exception("ingestion of %s crashed", item)
            finally:
                if not item.startswith(RUN_PREFIX):
                    PARSED.discard(item)  # taken by its run, or the run did not happen here
                with self._cv:
                    self._running.pop(lane, None)
                    if item not in self._waiting:
                        self._pages.pop(item, None)
                    if not self._waiting and not self._running:
                        self._idle.set()
                    self._cv.notify_all()
            if self.on_done is not None:
                try:
                    self.on_done(item, out)
                except Exception:
                    log.exception("on_done callback failed")

    # ------------------------------------------------------------------ parser
    def _to_parse(self) -> str | None:
        """The oldest waiting long document not extracted yet, while the main lane is busy and
        fewer than ``PARSE_AHEAD`` are extracted ahead (called under the lock)."""
        if MAIN not in self._running or len(self._ahead) >= PARSE_AHEAD:
            return None
        for i in self._waiting:
            if (
                not i.startswith(RUN_PREFIX)
                and i not in self._ahead
                and i not in self._running.values()
                and not (0 < self._pages.get(i, 0) <= self.express_pages)
            ):
                return i
        return None

    def _parser(self) -> None:
        while True:
            with self._cv:
                while not self._stopping.is_set() and (doc_id := self._to_parse()) is None:
                    self._cv.wait()
                if self._stopping.is_set():
                    return
                self._ahead.add(doc_id)
            try:
                self._parse(doc_id)
            except Exception:  # the run extracts the pages itself
                log.exception("extracting %s ahead of its run failed", doc_id)

    def _parse(self, document_id: str) -> None:
        """Extract the pages of a waiting document's queued version into ``PARSED`` (its run takes
        them), writing its ``pages`` progress as they come."""
        with self.svc.sessions() as s:
            doc = s.get(Document, document_id)
            if doc is None or doc.status != "queued":
                return
            sha, queued_at = target_version(doc), doc.queued_at
        if not PARSED.begin(document_id, sha):
            return
        result: Any = None
        try:
            data = file_path(self.svc, sha).read_bytes()
            with cores_busy():  # the child takes a core: the model in this process uses one fewer
                result = extract_pages_bounded(
                    data,
                    self.svc.settings,
                    on_page=lambda done, total: set_parse_progress(self.svc, document_id, queued_at, done, total),
                )
        except Exception as e:  # a refusal (PDFError) or an unreadable file: the run reports it
            result = e
        finally:
            PARSED.finish(document_id, sha, result)
        if isinstance(result, list):
            set_parse_progress(self.svc, document_id, queued_at, len(result), len(result))

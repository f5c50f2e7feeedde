"""Bulk ingestion of many PDFs (``ragaudit ingest``, the bench): PDF parsing overlapped with embedding.

Per file, in the given order:

1. **parse** — validation (page limit, ``inspect_pdf``) and text extraction (``extract_pages``)
   in one bounded child process (``ragaudit.ingest.guard.parse_pdf_bounded``): the bytes are read and
   sent once, one fork pays for both, and the text is exactly what the per-document job
   extracts. A background thread keeps up to ``lookahead`` files parsed ahead, so the child
   process parses file *i + 1* on one core while this process chunks and embeds file *i* (the
   model's matrix products release the GIL) with one thread fewer (``cores_busy``); a second
   parser runs only while the embedding side has nothing to do (``_ParseAhead``).
2. **register** (``ragaudit.ingest.documents.register`` with the validation result: not parsed again).
3. **stages** in this process (``ragaudit.ingest.documents.run_stages`` with the extracted pages): chunk,
   embed + stage, count check, publish, gold pairs; a failure rolls back that document only
   (its previous version stays searchable) and the batch goes on.

Bad input is refused per file exactly as ``ingest_bytes`` refuses it (nothing stored). The
whole batch is one Dagster run when started through ``ragaudit.pipelines.runner.run_bulk``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from ragaudit.index.embedding import cores_busy
from ragaudit.ingest.documents import (
    DEFAULT_KB,
    INGEST_LOCK,
    AfterPublish,
    DocumentBusyError,
    IngestOutcome,
    duplicates_of,
    get_document,
    notify,
    register,
    rollback,
    run_stages,
)
from ragaudit.ingest.guard import parse_pdf_bounded
from ragaudit.ingest.pdf import PDFError
from ragaudit.services import Services
from ragaudit.text.docnames import InvalidNameError
from ragaudit.types import DEFAULT_STRATEGY, Strategy


@dataclass(frozen=True)
class BulkFile:
    """One file to ingest: where its bytes are and the document name it gets."""

    path: Path
    name: str


class _ParseAhead:
    """Parses ``files`` in bounded child processes ahead of the consumer, results handed out in order.

    One worker thread parses file after file, at most ``lookahead`` files past the one the
    consumer is on. A second worker parses only while the consumer is starving (waiting for a
    file that is not parsed yet and has nothing else to do): then both cores parse instead of one
    sitting idle (at the start of a batch, and when a long document follows short ones). While a
    child runs, its core is declared busy (``ragaudit.index.embedding.cores_busy``) so the model in this
    process uses one thread fewer instead of contending with it."""

    def __init__(self, svc: Services, files: list[BulkFile], lookahead: int, workers: int = 2):
        self.svc, self.files, self.lookahead = svc, files, max(1, lookahead)
        self.cond = threading.Condition()
        self.next = 0  # next file index to claim
        self.wanted = 0  # the index the consumer needs next
        self.waiting = False  # the consumer is blocked in get()
        self.results: dict[int, tuple] = {}
        self.stopped = False
        self.threads = [
            threading.Thread(target=self._work, args=(k,), name=f"ragaudit-parse-ahead-{k}", daemon=True)
            for k in range(max(1, workers))
        ]

    def start(self) -> "_ParseAhead":
        for th in self.threads:
            th.start()
        return self

    def _may_claim(self, worker: int) -> bool:
        if self.next >= len(self.files) or self.next > self.wanted + self.lookahead:
            return False
        return worker == 0 or (self.waiting and self.wanted not in self.results)

    def _work(self, worker: int) -> None:
        while True:
            with self.cond:
                while not self.stopped and self.next < len(self.files) and not self._may_claim(worker):
                    self.cond.wait(0.5)
                if self.stopped or self.next >= len(self.files):
                    return
                i = self.next
                self.next += 1
            f = self.files[i]
            notify(None, {"file": f.name, "index": i, "total": len(self.files), "status": "parsing"})
            t = time.perf_counter()
            data: bytes | None = None
            try:
                data = f.path.read_bytes()
                with cores_busy():
                    res: Any = parse_pdf_bounded(data, self.svc.settings)
            except Exception as e:  # PDFError (refusal), OSError (unreadable file), a child crash
                res = e
            with self.cond:
                self.results[i] = (i, data, res, time.perf_counter() - t)
                self.cond.notify_all()

    def get(self, i: int) -> tuple:
        """``(index, data | None, result | exception, seconds)`` of file ``i`` (blocks until parsed)."""
        with self.cond:
            self.wanted = i
            self.cond.notify_all()
            while i not in self.results:
                self.waiting = True
                self.cond.notify_all()
                self.cond.wait(0.5)
            self.waiting = False
            self.cond.notify_all()
            return self.results.pop(i)

    def stop(self) -> None:
        with self.cond:
            self.stopped = True
            self.cond.notify_all()
        for th in self.threads:
            th.join(timeout=5)


def ingest_files(
    svc: Services,
    files: Iterable[BulkFile],
    knowledge_base: str = DEFAULT_KB,
    strategy: Strategy | str = DEFAULT_STRATEGY,
    *,
    lookahead: int = 2,
    on_outcome: Callable[[int, IngestOutcome], None] | None = None,
    timings: dict[str, float] | None = None,
    after_publish: AfterPublish | None = None,
) -> list[IngestOutcome]:
    """Ingest ``files`` in order with parsing overlapped (see the module docstring); returns one
    ``IngestOutcome`` per file, in order (``ingested`` | ``unchanged`` | ``refused`` | ``failed``,
    as ``ragaudit.ingest.documents.ingest_bytes`` reports them). ``on_outcome(index, outcome)`` is called as
    each file ends. ``timings`` (optional) receives seconds per stage: ``validate`` and
    ``extract`` (measured in the child, overlapped with the other stages), ``wait for parsing``
    (this thread idle until the next file was parsed), ``register``, ``run_stages``' stages,
    ``bulk wall`` (the whole call), and ``parse child peak rss mb`` (the largest parse child's peak).
    ``after_publish``: run after each document's version is published (``run_stages``).
    Never raises for bad input."""
    files = list(files)
    t = {} if timings is None else timings
    try:
        strategy = Strategy.parse(strategy)
    except ValueError as e:
        return [IngestOutcome(f.name, "refused", str(e), error_code="invalid_request") for f in files]
    parser = _ParseAhead(svc, files, lookahead).start()
    outcomes: list[IngestOutcome] = []
    t_start = time.perf_counter()
    try:
        for k in range(len(files)):
            t0 = time.perf_counter()
            i, data, res, parse_s = parser.get(k)
            t["wait for parsing"] = t.get("wait for parsing", 0.0) + (time.perf_counter() - t0)
            out = _ingest_one(
                svc, files[i], data, res, parse_s, knowledge_base, strategy, t, i, len(files), after_publish
            )
            outcomes.append(out)
            if on_outcome is not None:
                on_outcome(i, out)
    finally:
        parser.stop()
        t["bulk wall"] = t.get("bulk wall", 0.0) + (time.perf_counter() - t_start)
    return outcomes


def _ingest_one(
    svc: Services,
    f: BulkFile,
    data: bytes | None,
    res: Any,
    parse_s: float,
    knowledge_base: str,
    strategy: Strategy,
    t: dict[str, float],
    index: int,
    total: int,
    after_publish: AfterPublish | None,
) -> IngestOutcome:
    t0 = time.perf_counter()
    if isinstance(res, PDFError):
        return IngestOutcome(f.name, "refused", str(res), error_code=res.code, seconds=parse_s)
    if isinstance(res, OSError):
        return IngestOutcome(
            f.name, "refused", f"cannot read the file: {res.strerror or res}", error_code="unreadable", seconds=parse_s
        )
    if isinstance(res, Exception):
        return IngestOutcome(
            f.name, "failed", f"{type(res).__name__}: {res}", error_code="ingest_failed", seconds=parse_s
        )
    info, pages, child = res
    for k in ("validate", "extract"):
        t[k] = t.get(k, 0.0) + child.get(k, 0.0)
    t["parse child peak rss mb"] = max(t.get("parse child peak rss mb", 0.0), child.get("peak_rss_mb", 0.0))
    with INGEST_LOCK:
        try:
            doc, needs_run = register(svc, data, f.name, knowledge_base, strategy, info=info, claim=True)
        except InvalidNameError as e:
            return IngestOutcome(f.name, "refused", str(e), error_code="invalid_name", seconds=parse_s)
        except DocumentBusyError as e:
            return IngestOutcome(f.name, "refused", str(e), error_code="busy", seconds=parse_s)
        except ValueError as e:
            return IngestOutcome(f.name, "refused", str(e), error_code="invalid_request", seconds=parse_s)
        t["register"] = t.get("register", 0.0) + (time.perf_counter() - t0)
        notify(doc.id, {"file": f.name, "index": index, "total": total, "status": "registered", "needs_run": needs_run})
        if not needs_run:
            return IngestOutcome(
                doc.doc_name,
                "unchanged",
                "same content already ingested; nothing changed",
                document=doc.as_dict(),
                seconds=parse_s + time.perf_counter() - t0,
            )
        try:
            report = run_stages(svc, doc.id, strategy, pages=pages, timings=t, after_publish=after_publish)
        except Exception as e:  # the run failed in some stage: undo and report
            rollback(svc, doc.id, str(e))
            status = "refused" if isinstance(e, PDFError) else "failed"
            return IngestOutcome(
                doc.doc_name,
                status,
                str(e),
                error_code=getattr(e, "code", "ingest_failed"),
                seconds=parse_s + time.perf_counter() - t0,
            )
    doc = get_document(svc, doc.id)
    dups = duplicates_of(svc, doc.id, doc.sha256)
    return IngestOutcome(
        doc.doc_name,
        "ingested",
        f"{doc.pages} pages, {doc.chunk_count} chunks",
        document=doc.as_dict(),
        seconds=parse_s + time.perf_counter() - t0,
        extra={"duplicate_of": dups} if dups else {},
        stages=report,
    )

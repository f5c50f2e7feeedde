"""Bulk ingestion of many PDFs (``ragaudit ingest``, the bench): PDF parsing overlapped with embedding.

Per file, in the given order:

1. **parse** — validation (page limit, ``inspect_pdf``) and text extraction (``extract_pages``)
   in one bounded child process (``core.pdfguard.parse_pdf_bounded``): the bytes are read and
   sent once, one fork pays for both, and the text is exactly what the per-document job
   extracts. A background thread keeps up to ``lookahead`` files parsed ahead, so the child
   process parses file *i + 1* on one core while this process chunks and embeds file *i* (the
   model's matrix products release the GIL).
2. **register** (``core.ingest.register`` with the validation result: not parsed again).
3. **stages** in this process (``core.ingest.run_stages`` with the extracted pages): chunk,
   embed + stage, count check, publish, gold pairs; a failure rolls back that document only
   (its previous version stays searchable) and the batch goes on.

Bad input is refused per file exactly as ``ingest_bytes`` refuses it (nothing stored). The
whole batch is one Dagster run when started through ``pipelines.runner.run_bulk``.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from .chunking import Strategy
from .ingest import (DEFAULT_KB, DEFAULT_STRATEGY, INGEST_LOCK, DocumentBusyError, IngestOutcome, duplicates_of, get_document, notify, register, rollback, run_stages)
from .names import InvalidNameError
from .pdf import PDFError
from .pdfguard import parse_pdf_bounded
from .services import Services


@dataclass(frozen=True)
class BulkFile:
    """One file to ingest: where its bytes are and the document name it gets."""

    path: Path
    name: str


def _parse_ahead(svc: Services, files: list[BulkFile], lookahead: int, out: "queue.Queue[tuple]",
                 stop: threading.Event) -> None:
    """Producer thread: ``(index, data | None, result | exception, seconds)`` per file, in order,
    at most ``lookahead`` ahead of the consumer (the queue's bound)."""
    for i, f in enumerate(files):
        if stop.is_set():
            return
        notify(None, {"file": f.name, "index": i, "total": len(files), "status": "parsing"})
        t = time.perf_counter()
        data: bytes | None = None
        try:
            data = f.path.read_bytes()
            res: Any = parse_pdf_bounded(data, svc.settings)
        except Exception as e:  # PDFError (refusal), OSError (unreadable file), a child crash
            res = e
        item = (i, data, res, time.perf_counter() - t)
        while not stop.is_set():
            try:
                out.put(item, timeout=0.5)
                break
            except queue.Full:
                continue


def ingest_files(svc: Services, files: Iterable[BulkFile], knowledge_base: str = DEFAULT_KB,
                 strategy: str = DEFAULT_STRATEGY, *, lookahead: int = 2,
                 on_outcome: Callable[[int, IngestOutcome], None] | None = None,
                 timings: dict[str, float] | None = None) -> list[IngestOutcome]:
    """Ingest ``files`` in order with parsing overlapped (see the module docstring); returns one
    ``IngestOutcome`` per file, in order (``ingested`` | ``unchanged`` | ``refused`` | ``failed``,
    as ``core.ingest.ingest_bytes`` reports them). ``on_outcome(index, outcome)`` is called as
    each file ends. ``timings`` (optional) receives seconds per stage: ``validate`` and
    ``extract`` (measured in the child, overlapped with the other stages), ``wait for parsing``
    (this thread idle until the next file was parsed), ``register``, ``run_stages``' stages,
    ``bulk wall`` (the whole call), and ``parse child peak rss mb`` (the largest parse child's peak).
    Never raises for bad input."""
    files = list(files)
    t = {} if timings is None else timings
    try:
        strategy = Strategy.parse(strategy).value
    except ValueError as e:
        return [IngestOutcome(f.name, "refused", str(e), error_code="invalid_request") for f in files]
    results: queue.Queue[tuple] = queue.Queue(maxsize=max(1, lookahead))
    stop = threading.Event()
    producer = threading.Thread(target=_parse_ahead, args=(svc, files, lookahead, results, stop),
                                name="ragaudit-parse-ahead", daemon=True)
    producer.start()
    outcomes: list[IngestOutcome] = []
    t_start = time.perf_counter()
    try:
        for _ in files:
            t0 = time.perf_counter()
            i, data, res, parse_s = results.get()
            t["wait for parsing"] = t.get("wait for parsing", 0.0) + (time.perf_counter() - t0)
            out = _ingest_one(svc, files[i], data, res, parse_s, knowledge_base, strategy, t, i, len(files))
            outcomes.append(out)
            if on_outcome is not None:
                on_outcome(i, out)
    finally:
        stop.set()
        producer.join(timeout=5)
        t["bulk wall"] = t.get("bulk wall", 0.0) + (time.perf_counter() - t_start)
    return outcomes


def _ingest_one(svc: Services, f: BulkFile, data: bytes | None, res: Any, parse_s: float, knowledge_base: str,
                strategy: str, t: dict[str, float], index: int, total: int) -> IngestOutcome:
    t0 = time.perf_counter()
    if isinstance(res, PDFError):
        return IngestOutcome(f.name, "refused", str(res), error_code=res.code, seconds=parse_s)
    if isinstance(res, OSError):
        return IngestOutcome(f.name, "refused", f"cannot read the file: {res.strerror or res}",
                             error_code="unreadable", seconds=parse_s)
    if isinstance(res, Exception):
        return IngestOutcome(f.name, "failed", f"{type(res).__name__}: {res}", error_code="ingest_failed",
                             seconds=parse_s)
    info, pages, child = res
    for k in ("validate", "extract"):
        t[k] = t.get(k, 0.0) + child.get(k, 0.0)
    t["parse child peak rss mb"] = max(t.get("parse child peak rss mb", 0.0), child.get("peak_rss_mb", 0.0))
    with INGEST_LOCK:
        try:
            doc, needs_run = register(svc, data, f.name, knowledge_base, strategy, info=info)
        except InvalidNameError as e:
            return IngestOutcome(f.name, "refused", str(e), error_code="invalid_name", seconds=parse_s)
        except DocumentBusyError as e:
            return IngestOutcome(f.name, "refused", str(e), error_code="busy", seconds=parse_s)
        except ValueError as e:
            return IngestOutcome(f.name, "refused", str(e), error_code="invalid_request", seconds=parse_s)
        t["register"] = t.get("register", 0.0) + (time.perf_counter() - t0)
        notify(doc.id, {"file": f.name, "index": index, "total": total, "status": "registered",
                        "needs_run": needs_run})
        if not needs_run:
            return IngestOutcome(doc.doc_name, "unchanged", "same content already ingested; nothing changed",
                                 document=doc.as_dict(), seconds=parse_s + time.perf_counter() - t0)
        try:
            run_stages(svc, doc.id, strategy, pages=pages, timings=t)
        except Exception as e:  # the run failed in some stage: undo and report
            rollback(svc, doc.id, str(e))
            status = "refused" if isinstance(e, PDFError) else "failed"
            return IngestOutcome(doc.doc_name, status, str(e), error_code=getattr(e, "code", "ingest_failed"),
                                 seconds=parse_s + time.perf_counter() - t0)
    doc = get_document(svc, doc.id)
    dups = duplicates_of(svc, doc.id, doc.sha256)
    return IngestOutcome(doc.doc_name, "ingested", f"{doc.pages} pages, {doc.chunk_count} chunks",
                         document=doc.as_dict(), seconds=parse_s + time.perf_counter() - t0,
                         extra={"duplicate_of": dups} if dups else {})


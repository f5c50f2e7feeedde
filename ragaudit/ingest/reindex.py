"""Re-ingestion and the landing folder: which documents need a new version, and why.

A document needs re-ingestion when its bytes changed (landing-folder documents: the file on
disk differs from the live version), when what it was built with changed (``built_with`` /
``build_fingerprint`` of its live version against ``ragaudit.ingest.documents.build_info`` under the current
settings: strategy, embedding model, chunk and index settings), when it has no build record
(ingested before the record existed), or when its last ingestion failed. ``--all`` re-ingests
every document. Unchanged documents are skipped and counted.

A re-ingestion is an ordinary run of the document (``ragaudit.ingest.documents``): the new version is staged
and published only after the count check, so a failure keeps the previous version searchable;
``gold_qa_pairs`` replaces the document's pairs.

Used by ``ragaudit reindex``, the Dagster schedule ``reindex_schedule`` (``ragaudit.pipelines.schedules``:
it plans, its job ``reindex_changed`` queues) and the landing-folder sensor (``ragaudit.pipelines.sensors``).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from sqlalchemy import func, select

from ragaudit.ingest import documents as ingest
from ragaudit.platform.db import ChunkRow, Document, utcnow
from ragaudit.services import Services
from ragaudit.text.docnames import folder_names, name_key
from ragaudit.types import DEFAULT_STRATEGY, Strategy

log = logging.getLogger(__name__)


@dataclass
class Decision:
    """One document to re-ingest: ``reasons`` (human-readable), ``data`` = new bytes read from
    its source file (None = rebuild the live bytes)."""

    document_id: str
    doc_name: str
    knowledge_base: str
    strategy: Strategy
    reasons: list[str]
    data: bytes | None = None
    source_path: str | None = None


@dataclass
class Plan:
    """``todo``: documents to re-ingest; ``unchanged``: how many were checked and are current;
    ``skipped``: ``{doc_name: why}`` (already queued or running, source file gone)."""

    todo: list[Decision] = field(default_factory=list)
    unchanged: int = 0
    skipped: dict[str, str] = field(default_factory=dict)

    def summary(self) -> str:
        """How many are unchanged and skipped (the first five with why), for a log line or tick."""
        out = f"{self.unchanged} unchanged"
        if self.skipped:
            out += (
                f", {len(self.skipped)} skipped ({'; '.join(f'{k}: {v}' for k, v in list(self.skipped.items())[:5])})"
            )
        return out


def _changed_settings(built: dict[str, Any] | None, now: dict[str, Any]) -> list[str]:
    if not built:
        return ["no build record (ingested before builds were recorded)"]
    # keys of both: a setting recorded only when not at its default (chunk_atomic_units,
    # embedding_precision) is a change when it is dropped again, too
    return [
        f"{k}: {built.get(k)!r} -> {now.get(k)!r}" for k in sorted(set(now) | set(built)) if built.get(k) != now.get(k)
    ]


def plan(
    svc: Services,
    *,
    all_docs: bool = False,
    names: list[str] | None = None,
    knowledge_base: str | None = None,
    verify_index: bool = True,
    force: bool = False,
) -> Plan:
    """Decide, for every document (or those named in ``names``, matched by NFC key, optionally of
    one knowledge base), whether it needs re-ingestion. ``verify_index`` also compares its live
    chunk rows with its live points (a lost point makes it incomplete: rebuilt); it opens the
    vector store, so a process that does not own the embedded store passes False. ``force`` (with
    ``names``): the named documents are rebuilt even when nothing is found changed (an operator
    repairing a document by name: ``ragaudit reindex --doc NAME``). Raises ``KeyError`` for a
    name that matches no document. Reads only (SQL, source files, point counts): changes nothing,
    so a schedule may call it while it is evaluated (``enqueue`` does the queueing)."""
    out = Plan()
    with svc.sessions() as s:
        q = select(Document).order_by(Document.knowledge_base, Document.doc_name)
        if knowledge_base:
            q = q.where(Document.knowledge_base == knowledge_base)
        if names:
            q = q.where(Document.name_key.in_([name_key(n) for n in names]))
        docs = list(s.scalars(q))
    if names:
        found = {d.name_key for d in docs}
        missing = [n for n in names if name_key(n) not in found]
        if missing:
            raise KeyError(f"no document named {', '.join(missing)}")
    for d in docs:
        if d.status in ingest.ACTIVE:
            out.skipped[d.doc_name] = f"already {d.status}"
            continue
        reasons: list[str] = []
        data = None
        if d.source_path:
            p = Path(d.source_path)
            if not p.is_file():
                out.skipped[d.doc_name] = f"source file {d.source_path} is gone (document kept)"
                continue
            raw = p.read_bytes()
            if ingest.sha256_hex(raw) != d.sha256:
                reasons.append("bytes changed")
                data = raw
        if d.ingest_version == 0:
            reasons.append("never published (last ingestion failed)")
        elif d.status == "failed":
            reasons.append("last re-ingestion failed")
        reasons += _changed_settings(d.built_with, ingest.build_info(svc, d.strategy))
        if verify_index and d.ingest_version > 0:  # the index lost points (or rows): the version must be rebuilt
            n_rows, n_points = _live_counts(svc, d.id)
            if n_rows != n_points or n_rows == 0:
                reasons.append(f"index incomplete: {n_rows} chunk rows, {n_points} points")
        if all_docs and not reasons:
            reasons.append("--all")
        if force and names and not reasons:
            reasons.append("named with --doc")
        if reasons:
            strategy = Strategy.parse(d.strategy)
            out.todo.append(Decision(d.id, d.doc_name, d.knowledge_base, strategy, reasons, data, d.source_path))
        else:
            out.unchanged += 1
    return out


def _live_counts(svc: Services, document_id: str) -> tuple[int, int]:

    with svc.sessions() as s:
        n = s.scalar(
            select(func.count())
            .select_from(ChunkRow)
            .where(ChunkRow.document_id == document_id, ChunkRow.live.is_(True))
        )
    return n, svc.store.count(document_id, live=True)


def enqueue(svc: Services, dec: Decision) -> bool:
    """Put a planned document in status ``queued`` (storing new bytes first when its source
    changed). Returns False when nothing needs to run after all (it changed meanwhile)."""
    if dec.data is not None:
        _, needs = ingest.register(
            svc, dec.data, dec.doc_name, dec.knowledge_base, dec.strategy, source_path=dec.source_path
        )
        return needs
    return requeue(svc, dec.document_id)


def requeue(svc: Services, document_id: str) -> bool:
    """Queue a rebuild of a document's current bytes with its own strategy. False when it is gone
    or already queued/running."""
    with ingest.REGISTER_LOCK, svc.sessions.begin() as s:
        d = s.get(Document, document_id)
        if d is None or d.status in ingest.ACTIVE:
            return False
        d.status, d.error, d.queued_at = "queued", None, utcnow()
        d.pending_strategy = d.strategy
        d.pages_done = d.pages_total = d.chunks_done = d.chunks_total = 0
        return True


def run(
    svc: Services,
    runner: ingest.Runner,
    *,
    all_docs: bool = False,
    names: list[str] | None = None,
    knowledge_base: str | None = None,
    force: bool = False,
    on_result: Callable[[Decision, ingest.IngestOutcome | None], None] | None = None,
) -> dict[str, Any]:
    """Plan and run re-ingestions one by one in this process (blocking; CLI). Returns ``{checked,
    reingested, failed, unchanged, skipped}`` (``reingested``/``failed``: lists of ``{doc_name,
    reasons, message}``; ``unchanged``: a count). ``force``: see ``plan``."""
    p = plan(svc, all_docs=all_docs, names=names, knowledge_base=knowledge_base, force=force)
    done, failed = [], []
    for dec in p.todo:
        out = ingest.run_queued(svc, dec.document_id, runner) if enqueue(svc, dec) else None
        item = {
            "doc_name": dec.doc_name,
            "knowledge_base": dec.knowledge_base,
            "reasons": dec.reasons,
            "message": out.message if out else "nothing to do",
        }
        (done if out is None or out.ok else failed).append(item)
        if on_result is not None:
            on_result(dec, out)
    return {
        "checked": len(p.todo) + p.unchanged + len(p.skipped),
        "reingested": done,
        "failed": failed,
        "unchanged": p.unchanged,
        "skipped": p.skipped,
    }


def run_via_queue(
    svc: Services,
    *,
    all_docs: bool = False,
    names: list[str] | None = None,
    knowledge_base: str | None = None,
    force: bool = False,
    poll_s: float = 0.5,
    timeout_s: float | None = None,
    on_result: Callable[[Decision, ingest.IngestOutcome | None], None] | None = None,
) -> dict[str, Any]:
    """``run`` for a process that may not open the embedded store (``ragaudit serve`` holds it):
    the documents to re-ingest are put in status ``queued`` in SQL, the serving process's worker
    (which polls for them) runs them as Dagster runs, and this waits until each is ``ready`` or
    ``failed`` (``timeout_s``: at most that long; documents still waiting stay queued and are
    reported in ``skipped``). Lost points cannot be detected without the store (``verify_index``
    off): ``force`` with ``names`` rebuilds the named documents anyway. Same result shape as ``run``."""
    p = plan(svc, all_docs=all_docs, names=names, knowledge_base=knowledge_base, verify_index=False, force=force)
    waiting = [d for d in p.todo if enqueue(svc, d)]
    done: list[dict[str, Any]] = [
        {"doc_name": d.doc_name, "knowledge_base": d.knowledge_base, "reasons": d.reasons, "message": "nothing to do"}
        for d in p.todo
        if d not in waiting
    ]
    failed: list[dict[str, Any]] = []
    t0 = time.monotonic()
    while waiting and (timeout_s is None or time.monotonic() - t0 < timeout_s):
        time.sleep(poll_s)
        for dec in list(waiting):
            doc = ingest.get_document(svc, dec.document_id) if ingest.document_exists(svc, dec.document_id) else None
            if doc is not None and doc.status in ingest.ACTIVE:
                continue
            waiting.remove(dec)
            ok = doc is not None and doc.status == "ready"
            msg = (
                f"{doc.pages} pages, {doc.chunk_count} chunks"
                if ok
                else doc.error or doc.status
                if doc is not None
                else "the document was deleted meanwhile"
            )
            out = ingest.IngestOutcome(
                dec.doc_name,
                "ingested" if ok else "failed",
                msg or "",
                document=doc.as_dict() if doc is not None else None,
                seconds=time.monotonic() - t0,
            )
            (done if ok else failed).append(
                {
                    "doc_name": dec.doc_name,
                    "knowledge_base": dec.knowledge_base,
                    "reasons": dec.reasons,
                    "message": out.message,
                }
            )
            if on_result is not None:
                on_result(dec, out)
    skipped = dict(p.skipped)
    skipped.update({d.doc_name: "still queued for the serving process" for d in waiting})
    return {
        "checked": len(p.todo) + p.unchanged + len(p.skipped),
        "reingested": done,
        "failed": failed,
        "unchanged": p.unchanged,
        "skipped": skipped,
    }


# --- landing folder -----------------------------------------------------------------------------


@dataclass
class LandingFile:
    path: str
    name: str
    size: int
    mtime_ns: int


def scan_landing(root: Path) -> list[LandingFile]:
    """Every ``*.pdf`` (any case) below ``root``, recursively, named by its path below ``root``
    (``ragaudit.text.docnames.folder_names``: ``branch_alder/report.pdf``). Hidden files and folders and
    partial uploads (``.part``/``.tmp``) are ignored. ``[]`` when ``root`` does not exist."""
    if not root.is_dir():
        return []
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        found += [Path(dirpath) / f for f in sorted(filenames) if f.lower().endswith(".pdf") and not f.startswith(".")]
    names = folder_names([(str(f), str(root)) for f in found])
    out = []
    for f, n in zip(found, names):
        try:
            st = f.stat()
        except FileNotFoundError:  # removed while scanning
            continue
        out.append(LandingFile(str(f), n, st.st_size, st.st_mtime_ns))
    return out


def register_landing(
    svc: Services, files: list[LandingFile], knowledge_base: str | None = None, settle_s: float = 2.0
) -> tuple[list[tuple[str, LandingFile]], dict[str, str], list[LandingFile]]:
    """Register landing files as documents (new or changed bytes -> status ``queued``).

    Returns ``(queued, refused, deferred)``: ``[(document id, file)]`` to run; ``{name: reason}``
    for files that are not valid PDFs or names (nothing stored for them); files to look at again
    at the next scan (modified less than ``settle_s`` ago: still being copied; or their document
    is being ingested right now)."""
    kb = knowledge_base or svc.settings.landing_knowledge_base
    queued, refused, deferred = [], {}, []
    now = time.time_ns()
    for f in files:
        if now - f.mtime_ns < settle_s * 1e9:
            deferred.append(f)
            continue
        try:
            data = Path(f.path).read_bytes()
            doc, needs = ingest.register(svc, data, f.name, kb, DEFAULT_STRATEGY, source_path=f.path)
        except FileNotFoundError:
            continue
        except ingest.DocumentBusyError:
            deferred.append(f)
            continue
        except (ValueError, ingest.PDFError) as e:
            refused[f.name] = str(e)
            continue
        if needs:
            queued.append((doc.id, f))
    return queued, refused, deferred

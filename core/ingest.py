"""Ingestion steps (used by the Dagster assets) and the ingest entry point used by CLI and API.

Versioning: a document is ``(knowledge_base, doc_name)``; its content version is the sha256
of the bytes. A changed file is written as new points/rows first; the old version's points
and rows are deleted only after that, so a failed run leaves the previous version fully
queryable and (after ``rollback``) no partial chunks behind.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from sqlalchemy import delete, select

from .chunking import DEFAULT_STRATEGY as _DEFAULT_STRATEGY
from .chunking import Chunk, Strategy, chunk_document, document_title, window_spans
from .db import ChunkRow, Document, bump_index_version, utcnow
from .pdf import Page, PDFError, extract_pages, inspect_pdf
from .services import Services
from .sparse import bm25_document_vector
from .store import point_id

log = logging.getLogger(__name__)

DEFAULT_KB = "default"
DEFAULT_STRATEGY = _DEFAULT_STRATEGY.value

# One ingestion at a time per process: Qdrant local mode has a single writer, and runs are short.
INGEST_LOCK = threading.Lock()


class IngestError(RuntimeError):
    """Ingestion of a valid PDF failed in a pipeline stage; ``stage`` names it."""

    def __init__(self, message: str, stage: str = "unknown"):
        super().__init__(message)
        self.stage = stage


@dataclass
class IngestOutcome:
    """Result of ingesting one file. ``status``: ingested | unchanged | refused | failed."""

    doc_name: str
    status: str
    message: str = ""
    document: dict[str, Any] | None = None
    error_code: str | None = None
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status in ("ingested", "unchanged")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def store_file(svc: Services, data: bytes, sha: str) -> str:
    """Write ``data`` content-addressed to ``files/<sha256>.pdf`` (atomic); returns the path."""
    d = svc.settings.files_dir
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{sha}.pdf"
    if not path.exists():
        fd, tmp = tempfile.mkstemp(dir=d, suffix=".part")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    return str(path)


def register(svc: Services, data: bytes, doc_name: str, knowledge_base: str = DEFAULT_KB,
             strategy: str = DEFAULT_STRATEGY) -> tuple[Document, bool]:
    """Validate and register an upload. Returns ``(document, needs_run)``.

    ``needs_run`` is False when the same bytes are already ingested (nothing changes).
    Raises ``PDFError`` (nothing stored) for bad input and ``ValueError`` for a bad name.
    """
    doc_name = os.path.basename(doc_name.strip())
    if not doc_name:
        raise ValueError("document name is empty")
    inspect_pdf(data, svc.settings.min_text_chars)
    sha = sha256_hex(data)
    store_file(svc, data, sha)
    with svc.sessions.begin() as s:
        doc = s.scalar(select(Document).where(Document.knowledge_base == knowledge_base,
                                              Document.doc_name == doc_name))
        if doc is not None and doc.sha256 == sha and doc.status == "ready" and doc.strategy == strategy:
            return doc, False  # same bytes, same primary strategy: nothing to do
        if doc is None:
            doc = Document(doc_name=doc_name, knowledge_base=knowledge_base, sha256=sha, size_bytes=len(data),
                           status="pending", strategy=strategy)
            s.add(doc)
        else:
            doc.pending_sha256 = sha
            doc.error = None
        s.flush()
        return doc, True


def target_version(doc: Document) -> str:
    """The sha256 the current run ingests (the pending one, else the current one)."""
    return doc.pending_sha256 or doc.sha256


def get_document(svc: Services, document_id: str) -> Document:
    with svc.sessions() as s:
        doc = s.get(Document, document_id)
    if doc is None:
        raise KeyError(f"document {document_id} not found")
    return doc


def document_exists(svc: Services, document_id: str) -> bool:
    with svc.sessions() as s:
        return s.get(Document, document_id) is not None


def load_pages(svc: Services, document_id: str) -> tuple[Document, list[Page]]:
    """Stage 1: the pages of the version being ingested. Raises ``PDFError`` or ``KeyError``."""
    doc = get_document(svc, document_id)
    path = svc.settings.files_dir / f"{target_version(doc)}.pdf"
    return doc, extract_pages(path.read_bytes())


def build_chunks(svc: Services, doc: Document, pages: list[Page], strategy: str | None = None) -> list[Chunk]:
    """Stage 2: chunks of the document with ``strategy`` (default: the document's; see ``core.chunking``)."""
    s = svc.settings
    title = document_title(doc.doc_name, pages)
    chunks = chunk_document(pages, svc.embedder, title, strategy or doc.strategy, s.chunk_max_tokens,
                            s.chunk_overlap_sentences, embedder=svc.embedder,
                            overlap_fraction=s.chunk_overlap_fraction)
    if not chunks:
        raise IngestError(f"{doc.doc_name}: no text to index", stage="chunks")
    return chunks


def _unit(v: np.ndarray) -> np.ndarray:
    n = float(np.linalg.norm(v))
    return v / n if n > 0 else v


def embed_windows(svc: Services, chunks: list[Chunk]) -> list[list[Any]]:
    """Per chunk, the embeddings of its sentence windows (``window_spans`` of at most
    ``dense_window_tokens`` word pieces), each prefixed with the chunk's context header, so
    dense retrieval can match one fact in a long chunk (MaxSim). Shape: chunks x windows x dim."""
    texts: list[str] = []
    owners: list[int] = []
    for i, c in enumerate(chunks):
        for a, b in window_spans(c.text, svc.embedder, svc.settings.dense_window_tokens):
            texts.append(f"{c.header}\n{c.text[a:b]}" if c.header else c.text[a:b])
            owners.append(i)
    vectors = svc.embedder.embed(texts)
    out: list[list[Any]] = [[] for _ in chunks]
    for i, v in zip(owners, vectors):
        out[i].append(v)
    return out


def index_chunks(svc: Services, document_id: str, chunks: list[Chunk], pages: int, extractor: str,
                 strategy: str | None = None) -> dict[str, Any]:
    """Stage 3: embed + BM25, upsert into Qdrant, write chunk rows, then retire the old version.

    Chunks of other strategies of the same version stay (for comparison); ``strategy`` becomes
    the document's primary strategy (searched by default).

    Returns counts and timings (ms). On failure the new version's points are removed again
    and the previous version stays as it was; raises ``IngestError``.
    """
    st = svc.settings
    doc = get_document(svc, document_id)
    sha = target_version(doc)
    strategy = strategy or doc.strategy
    t0 = time.perf_counter()
    texts = [c.indexed_text for c in chunks]
    try:
        svc.store.ensure_collection(svc.embedder.dim)
        if st.dense_window_tokens and svc.store.has_windows():
            # the per-chunk vector (used only with dense_window_tokens=0) is the normalised mean of
            # the chunk's window vectors: embedding every chunk whole again would double the cost.
            # A collection from before windows gets real chunk vectors, like the rest of it.
            windows = embed_windows(svc, chunks)
            dense = [_unit(np.mean(np.asarray(w), axis=0)) for w in windows]
        else:
            windows, dense = None, svc.embedder.embed(texts)
        t_embed = (time.perf_counter() - t0) * 1000
        sparse = [bm25_document_vector(t, st.bm25_k1, st.bm25_b, st.bm25_avgdl) for t in texts]
        ids = [point_id(sha, strategy, c.index) for c in chunks]
        version = doc.ingest_version + 1
        payloads = [{
            "document_id": doc.id, "doc_name": doc.doc_name, "knowledge_base": doc.knowledge_base,
            "doc_sha256": sha, "strategy": strategy, "chunk_index": c.index,
            "page_start": c.page_start, "page_end": c.page_end, "page_breaks": [list(b) for b in c.page_breaks],
            "char_start": c.char_start, "char_end": c.char_end, "section": c.section,
            "header": c.header, "text": c.text, "token_count": c.token_count, "ingest_version": version,
            "primary": True,
        } for c in chunks]
        t1 = time.perf_counter()
        svc.store.upsert(ids, dense, sparse, payloads, windows=windows)
        t_upsert = (time.perf_counter() - t1) * 1000
        with svc.sessions.begin() as s:
            s.execute(delete(ChunkRow).where(ChunkRow.document_id == doc.id,
                                             (ChunkRow.strategy == strategy) | (ChunkRow.doc_sha256 != sha)))
            s.add_all(ChunkRow(id=i, document_id=doc.id, index=c.index, strategy=strategy, page_start=c.page_start,
                               page_end=c.page_end, char_start=c.char_start, char_end=c.char_end, section=c.section,
                               text=c.text, token_count=c.token_count, doc_sha256=sha)
                      for i, c in zip(ids, chunks))
            d = s.get(Document, doc.id)
            d.sha256, d.pending_sha256 = sha, None
            d.pages, d.chunk_count, d.extractor = pages, len(chunks), extractor
            d.title = chunks[0].header[:512]
            d.status, d.error, d.ingest_version, d.ingested_at = "ready", None, version, utcnow()
            d.strategy = strategy
        # only now retire the previous version's points (all strategies) and leftovers of this one
        svc.store.delete_document(doc.id, keep_sha256=sha)
        svc.store.delete_stale(doc.id, sha, strategy, len(chunks))
        svc.store.set_primary(doc.id, strategy)
        with svc.sessions.begin() as s:  # cached answers may have seen both versions: invalidate again
            bump_index_version(s.connection())
    except Exception as e:
        if doc.sha256 != sha or doc.status != "ready":
            svc.store.delete_document(doc.id, only_sha256=sha)
        raise IngestError(f"{doc.doc_name}: indexing failed: {type(e).__name__}: {e}", stage="chunk_points") from e
    return {"chunks": len(chunks), "points": len(ids), "embed_ms": round(t_embed, 1),
            "upsert_ms": round(t_upsert, 1), "max_tokens": max(c.token_count for c in chunks)}


def rollback(svc: Services, document_id: str, error: str) -> None:
    """Undo a failed run: a new document disappears entirely; an existing one keeps its
    previous version (points and rows) and records the error."""
    with svc.sessions.begin() as s:
        doc = s.get(Document, document_id)
        if doc is None:
            return
        sha = target_version(doc)
        if doc.status != "ready":
            svc.store.delete_document(doc.id)
            s.execute(delete(ChunkRow).where(ChunkRow.document_id == doc.id))
            s.delete(doc)
        else:
            if doc.pending_sha256 and doc.pending_sha256 != doc.sha256:
                svc.store.delete_document(doc.id, only_sha256=sha)
            doc.pending_sha256 = None
            doc.error = error[:2000]


def delete_document(svc: Services, document_id: str) -> dict[str, Any]:
    """Remove a document: its Qdrant points, chunk rows, Q&A pairs and row. ``KeyError`` if unknown."""
    with svc.sessions.begin() as s:
        doc = s.get(Document, document_id)
        if doc is None:
            raise KeyError(f"document {document_id} not found")
        info = doc.as_dict()
        svc.store.delete_document(doc.id)
        s.execute(delete(ChunkRow).where(ChunkRow.document_id == doc.id))
        from .db import QAPair

        s.execute(delete(QAPair).where(QAPair.document_id == doc.id))
        s.delete(doc)
    return info


Runner = Callable[[Services, str, str], None]


def ingest_bytes(svc: Services, data: bytes, doc_name: str, runner: Runner, knowledge_base: str = DEFAULT_KB,
                 strategy: str = DEFAULT_STRATEGY) -> IngestOutcome:
    """Validate, register and ingest one PDF through ``runner`` (the Dagster asset job).

    Never raises for bad input: returns ``status="refused"`` with the reason (nothing stored in
    SQL or Qdrant), or ``"failed"`` with the stage error (previous version kept).
    """
    t = time.perf_counter()
    try:
        strategy = Strategy.parse(strategy).value
    except ValueError as e:
        return IngestOutcome(doc_name, "refused", str(e), error_code="invalid_request")
    with INGEST_LOCK:
        try:
            doc, needs_run = register(svc, data, doc_name, knowledge_base, strategy)
        except PDFError as e:
            return IngestOutcome(doc_name, "refused", str(e), error_code=e.code, seconds=time.perf_counter() - t)
        except ValueError as e:
            return IngestOutcome(doc_name, "refused", str(e), error_code="invalid_request",
                                 seconds=time.perf_counter() - t)
        if not needs_run:
            return IngestOutcome(doc.doc_name, "unchanged", "same content already ingested; nothing changed",
                                 document=doc.as_dict(), seconds=time.perf_counter() - t)
        try:
            runner(svc, doc.id, strategy)
        except Exception as e:  # the run failed in some stage: undo and report
            msg = str(e)
            code = e.code if isinstance(e, PDFError) else "ingest_failed"
            rollback(svc, doc.id, msg)
            forget = getattr(runner, "forget", None)
            if forget is not None and not document_exists(svc, doc.id):
                forget(svc, doc.id)
            status = "refused" if isinstance(e, PDFError) else "failed"
            return IngestOutcome(doc.doc_name, status, msg, error_code=code, seconds=time.perf_counter() - t)
        doc = get_document(svc, doc.id)
        return IngestOutcome(doc.doc_name, "ingested", f"{doc.pages} pages, {doc.chunk_count} chunks",
                             document=doc.as_dict(), seconds=time.perf_counter() - t)

"""Ingestion steps (used by the Dagster assets) and the ingest entry point used by CLI and API.

Identity: a document is ``(knowledge_base, name)``, the name matched by its NFC key
(``ragaudit.text.docnames``); its content version is the sha256 of the bytes. Identical bytes under another
name or in another knowledge base are a separate document with points and rows of its own
(ids include the document id), reported as a duplicate of the others.

Versions: a run writes its chunks as version ``ingest_version + 1`` with ``live: false`` (Qdrant)
/ ``live=False`` (SQL), invisible to every search (``stage_chunks``); the asset check compares
SQL rows with Qdrant points per document; only then ``publish`` makes the new version live and
deletes what it replaces. A failed run (``rollback``) deletes its staged points and rows and
leaves the previous version exactly as it was. Stored files (``files/<sha256>.pdf``) are deleted
when no document version refers to them any more.

Progress: every stage writes ``documents.status`` (queued -> extracting -> chunking -> embedding ->
indexing -> ready | failed) and its counters (pages / chunks done of total) with ``set_progress``,
so the API (``GET /documents/{id}``, ``/events``) shows them whichever process runs the stages.
Provenance: a published version records what it was built with (``build_info``) and the sha256 of
that (``fingerprint``); re-ingestion (``ragaudit.ingest.reindex``) compares them with the current settings.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.exc import IntegrityError

from ragaudit.index.multilingual import DIM as MULTILINGUAL_DIM
from ragaudit.index.multilingual import REVISION as MULTILINGUAL_REVISION
from ragaudit.index.multilingual import passage_vectors
from ragaudit.index.multilingual import unavailable as multilingual_unavailable
from ragaudit.index.sparse import LANGUAGE_STEMS_REVISION, ROW_LABELS_REVISION, bm25_document_vector, text_language
from ragaudit.index.store import point_id
from ragaudit.ingest.chunking import ATOMIC_UNITS_REVISION, chunk_document, document_title
from ragaudit.ingest.guard import extract_pages_bounded, inspect_pdf_bounded
from ragaudit.ingest.parsed import PARSED
from ragaudit.ingest.pdf import LAYOUT_REVISION, Page, PDFError, PDFInfo
from ragaudit.ingest.removal import extraction_report
from ragaudit.platform import tracing
from ragaudit.platform.db import ChunkRow, Document, QAPair, bump_index_version, utcnow
from ragaudit.services import Services
from ragaudit.text.docnames import InvalidNameError, name_key, validate_knowledge_base, validate_name
from ragaudit.text.injection import scan
from ragaudit.text.language import non_english
from ragaudit.text.sentences import sentence_spans, window_spans
from ragaudit.types import DEFAULT_STRATEGY, Chunk, ChunkPayload, Strategy

log = logging.getLogger(__name__)

DEFAULT_KB = "default"

# One ingestion at a time per process: Qdrant local mode has a single writer. Reentrant: a Dagster
# run the serving process executes under it may ingest a queued document in one of its ops.
INGEST_LOCK = threading.RLock()
# Short critical sections on a document row: registering an upload, a run claiming a queued
# document, deleting a stored file nothing refers to. Never held during a run, so uploads never
# wait for one. Reentrant: a route holding it may delete a document (which deletes its file).
REGISTER_LOCK = threading.RLock()

RUNNING = ("extracting", "chunking", "embedding", "indexing")
ACTIVE = ("queued", *RUNNING)
PROGRESS_INTERVAL_S = 0.25  # counters are written at most this often (stage changes always)
EMBED_PROGRESS_BATCH = 256  # texts embedded per call, so progress moves and a failure stops early
# chunks embedded, indexed and written per step of stage_chunks (~100 KB of text, ~300 windows):
# what a document holds in memory at once beyond its pages and chunks
STAGE_BATCH_CHUNKS = 96


class DocumentBusyError(RuntimeError):
    """A new version was uploaded while the document is being ingested (HTTP 409)."""


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
    # what each stage did, when the stages ran outside the Dagster asset job (``run_stages``'s
    # report): the batch jobs and the queue's express lane record it in Dagster
    stages: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.status in ("ingested", "unchanged")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


_LAST_PROGRESS: dict[str, float] = {}
# Process-local observers of progress writes (``ragaudit ingest`` draws its progress from them):
# each is called as ``listener(document_id, values)`` after ``set_progress`` writes ``values``.
_LISTENERS: list[Callable[[str | None, dict[str, Any]], None]] = []


def add_progress_listener(listener: Callable[[str | None, dict[str, Any]], None]) -> None:
    """Call ``listener(document_id, values)`` after every progress write in this process (and for
    ``notify`` events, e.g. ``ragaudit.ingest.bulk``'s per-file ``parsing``). A listener that raises is
    logged and ignored: progress display never fails an ingestion."""
    _LISTENERS.append(listener)


def remove_progress_listener(listener: Callable[[str | None, dict[str, Any]], None]) -> None:
    """Stop calling ``listener`` (no error when it is not registered)."""
    try:
        _LISTENERS.remove(listener)
    except ValueError:
        pass


def notify(document_id: str | None, values: dict[str, Any]) -> None:
    """Hand a progress event to the listeners (``add_progress_listener``)."""
    for fn in list(_LISTENERS):
        try:
            fn(document_id, values)
        except Exception:
            log.exception("progress listener failed")


def set_progress(svc: Services, document_id: str, *, force: bool = False, **values: Any) -> None:
    """Write ``status`` / ``error`` / progress counters of a document (``pages_done``, ``pages_total``,
    ``chunks_done``, ``chunks_total``). Counter-only updates are throttled to one per
    ``PROGRESS_INTERVAL_S`` per document unless ``force``; a ``status`` change is always written.

    A bulk UPDATE, not an ORM flush: progress is not a change of the index, so it does not bump
    ``index_state`` (the answer cache stays valid)."""
    now = time.monotonic()
    if not force and "status" not in values and now - _LAST_PROGRESS.get(document_id, 0.0) < PROGRESS_INTERVAL_S:
        return
    _LAST_PROGRESS[document_id] = now
    with svc.sessions.begin() as s:
        s.execute(
            update(Document)
            .where(Document.id == document_id)
            .values(**values)
            .execution_options(synchronize_session=False)
        )
    if _LISTENERS:
        notify(document_id, values)


def build_info(svc: Services, strategy: Strategy) -> dict[str, Any]:
    """What a version is built with: chunking strategy, embedding model, chunk and index settings
    (every setting that changes the points). Compared by re-ingestion through ``fingerprint``."""
    st = svc.settings
    return {
        "strategy": Strategy.parse(strategy).value,
        "embedding_model": st.embedding_model,
        "chunk_max_tokens": st.chunk_max_tokens,
        "chunk_overlap_sentences": st.chunk_overlap_sentences,
        "chunk_overlap_fraction": st.chunk_overlap_fraction,
        "dense_window_tokens": st.dense_window_tokens,
        "bm25_k1": st.bm25_k1,
        "bm25_b": st.bm25_b,
        "bm25_avgdl": st.bm25_avgdl,
        "collection": st.collection,
        "pdf_layout": LAYOUT_REVISION,  # reading order and headings (a new revision re-extracts)
        # only when on: versions built before the setting existed keep their fingerprint; on, the
        # chunker's revision (a version built by an earlier one, recorded as True, is re-chunked)
        **({"chunk_atomic_units": ATOMIC_UNITS_REVISION} if st.chunk_atomic_units else {}),
        **({"bm25_row_labels": ROW_LABELS_REVISION} if st.bm25_row_labels else {}),
        **({"bm25_language_stems": LANGUAGE_STEMS_REVISION} if st.bm25_language_stems else {}),
        **({"multilingual_vectors": MULTILINGUAL_REVISION} if st.multilingual_vectors else {}),
    }


def fingerprint(info: dict[str, Any]) -> str:
    """sha256 (hex) of ``info`` as canonical JSON (sorted keys)."""
    return hashlib.sha256(json.dumps(info, sort_keys=True, default=str).encode()).hexdigest()


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


def file_path(svc: Services, sha: str):
    """Where the bytes of content version ``sha`` are stored."""
    return svc.settings.files_dir / f"{sha}.pdf"


def remove_file_if_unreferenced(svc: Services, sha: str | None) -> bool:
    """Delete ``files/<sha>.pdf`` when no document refers to that content (as its live or its
    pending version). Returns True when a file was deleted.

    Holds ``REGISTER_LOCK``, under which ``register`` makes sure the file of the version it
    records exists: an upload of the same bytes at the same moment either is recorded first (the
    file is kept) or stores the file again."""
    if not sha:
        return False
    with REGISTER_LOCK:
        with svc.sessions() as s:
            used = s.scalar(
                select(func.count())
                .select_from(Document)
                .where(or_(Document.sha256 == sha, Document.pending_sha256 == sha))
            )
        path = file_path(svc, sha)
        if used or not path.exists():
            return False
        path.unlink(missing_ok=True)
        return True


def duplicates_of(svc: Services, document_id: str, sha: str) -> list[dict[str, str]]:
    """Other documents whose live or pending version has the same bytes: ``[{id, knowledge_base,
    doc_name}]`` (reported to the user; each stays a document of its own)."""
    with svc.sessions() as s:
        rows = s.execute(
            select(Document.id, Document.knowledge_base, Document.doc_name)
            .where(Document.id != document_id, or_(Document.sha256 == sha, Document.pending_sha256 == sha))
            .order_by(Document.knowledge_base, Document.doc_name)
        ).all()
    return [{"id": i, "knowledge_base": kb, "doc_name": n} for i, kb, n in rows]


def register(
    svc: Services,
    data: bytes,
    doc_name: str,
    knowledge_base: str = DEFAULT_KB,
    strategy: Strategy = DEFAULT_STRATEGY,
    source_path: str | None = None,
    info: PDFInfo | None = None,
    claim: bool = False,
) -> tuple[Document, bool]:
    """Validate and register an upload. Returns ``(document, needs_run)``.

    ``doc_name`` is the document's name as given (a path such as ``branch_alder/report.pdf``
    is kept: folder ingestion names documents by their path below the folder); it is matched by
    its NFC key. ``needs_run`` is False when the same bytes are already ingested with the same
    strategy (nothing changes: no version bump, no cache invalidation).
    A document that needs a run is left in status ``queued`` (progress reset). ``source_path``
    records the file a landing-folder document comes from. ``info``: the result of validating
    these very bytes already (``ragaudit.ingest.guard.parse_pdf_bounded``): they are not parsed again.
    ``claim``: the caller runs the ingestion at once, in this thread: a document that needs a run
    is left in status ``extracting`` instead (claimed in the same transaction), so no queue
    (of this process or another) takes it meanwhile.
    Raises ``InvalidNameError`` (a ``ValueError``) for a name or knowledge base that cannot be
    stored and ``PDFError`` for bad input; in both cases nothing is stored (the PDF is validated
    before its bytes are written). Raises ``DocumentBusyError`` when a new version arrives while
    the document's run is past ``queued`` (a queued run simply builds the newest bytes).
    """
    doc_name = validate_name(doc_name)
    knowledge_base = validate_knowledge_base(knowledge_base)
    key = name_key(doc_name)
    if info is None:
        info = inspect_pdf_bounded(data, svc.settings)  # page limit; time/memory bounds (child process)
    sha = sha256_hex(data)
    store_file(svc, data, sha)
    replaced: set[str | None] = set()  # content versions this upload supersedes (their files may go)
    try:
        return _register_row(
            svc, data, sha, doc_name, key, knowledge_base, strategy, source_path, replaced, info.pages, claim
        )
    finally:
        for old in replaced - {sha}:
            remove_file_if_unreferenced(svc, old)


def _register_row(
    svc: Services,
    data: bytes,
    sha: str,
    doc_name: str,
    key: str,
    knowledge_base: str,
    strategy: Strategy,
    source_path: str | None,
    replaced: set[str | None],
    pages: int = 0,
    claim: bool = False,
) -> tuple[Document, bool]:
    """``register``'s row update (under ``REGISTER_LOCK``); adds to ``replaced`` the content
    versions the document stops referring to (a never-published or queued version superseded).
    ``pages``: the page count validation found (the progress total while queued and extracting);
    ``claim``: see ``register``."""
    for attempt in range(2):
        try:
            with REGISTER_LOCK, svc.sessions.begin() as s:
                if not file_path(svc, sha).exists():  # deleted meanwhile as unreferenced: store it again
                    store_file(svc, data, sha)
                doc = s.scalar(
                    select(Document).where(Document.knowledge_base == knowledge_base, Document.name_key == key)
                )
                if doc is not None and doc.status in RUNNING:
                    same = target_version(doc) == sha and requested_strategy(doc) is strategy
                    if same:
                        return doc, False  # this very version is being built: nothing new to do
                    raise DocumentBusyError(
                        f"{doc.doc_name}: a version is being ingested (status {doc.status}); "
                        "upload again when it is ready or failed"
                    )
                if (
                    doc is not None
                    and doc.sha256 == sha
                    and doc.ingest_version > 0
                    and doc.strategy == strategy.value
                    and doc.status != "queued"
                ):
                    if doc.status != "ready" or doc.pending_sha256:  # a failed newer version: the live one stays
                        doc.status, doc.error, doc.pending_sha256 = "ready", None, None
                    if source_path:
                        doc.source_path = source_path
                    return doc, False  # same bytes, same primary strategy: nothing to do
                if (
                    doc is not None
                    and doc.status == "queued"
                    and target_version(doc) == sha
                    and requested_strategy(doc) is strategy
                ):
                    return doc, False  # already queued with these bytes
                progress = dict(
                    status="extracting" if claim else "queued",
                    error=None,
                    pending_strategy=strategy.value,
                    queued_at=utcnow(),
                    pages_done=0,
                    pages_total=pages,
                    chunks_done=0,
                    chunks_total=0,
                )
                if doc is None:
                    doc = Document(
                        doc_name=doc_name,
                        name_key=key,
                        knowledge_base=knowledge_base,
                        sha256=sha,
                        size_bytes=len(data),
                        strategy=strategy.value,
                        source_path=source_path,
                        **progress,
                    )
                    s.add(doc)
                else:
                    replaced.update(
                        {doc.pending_sha256} if doc.ingest_version > 0 else {doc.sha256, doc.pending_sha256}
                    )
                    doc.pending_sha256 = sha if (doc.ingest_version > 0 or sha != doc.sha256) else None
                    if doc.ingest_version == 0:  # never published: the new bytes are the document
                        doc.sha256, doc.size_bytes, doc.pending_sha256 = sha, len(data), None
                    for k, v in progress.items():
                        setattr(doc, k, v)
                    if source_path:
                        doc.source_path = source_path
                s.flush()
                return doc, True
        except IntegrityError:  # another process registered the same name meanwhile: take its row
            if attempt:
                raise
    raise AssertionError("unreachable")


def replaced_version(doc: Document) -> dict[str, Any] | None:
    """What a just-registered upload of ``doc`` replaces: ``{"ingest_version", "sha256"}`` of its
    published version when the new bytes differ from it (a new version under the same name:
    it replaces the published one once indexed), else None (a new document, same bytes with
    another strategy, or a never-published one). Call it right after ``register``."""
    if doc.ingest_version > 0 and doc.pending_sha256 and doc.pending_sha256 != doc.sha256:
        return {"ingest_version": doc.ingest_version, "sha256": doc.sha256}
    return None


def replaced_note(doc_name: str, replaces: dict[str, Any]) -> str:
    """The sentence an upload's reply adds when it replaces a published version (never silent:
    two different files with one name, e.g. two folders' ``report.pdf``, keep only the last)."""
    return (
        f"new content for {doc_name}: replaces version {replaces['ingest_version']} (sha256 "
        f"{replaces['sha256'][:12]}...) once indexed; to keep both, upload it under another name"
    )


def target_version(doc: Document) -> str:
    """The sha256 the current run ingests (the pending one, else the current one)."""
    return doc.pending_sha256 or doc.sha256


def requested_strategy(doc: Document) -> Strategy:
    """The chunking strategy a run of ``doc`` builds: the one it was queued with (its upload's,
    ``pending_strategy``), else the one its live version is built with. Read once where a run is
    launched (``run_queued``, the sensor and schedule, a run started without config in the
    Dagster UI); the run then carries it in its config down to the chunker."""
    return Strategy.parse(doc.pending_strategy or doc.strategy)


def get_document(svc: Services, document_id: str) -> Document:
    with svc.sessions() as s:
        doc = s.get(Document, document_id)
    if doc is None:
        raise KeyError(f"document {document_id} not found")
    return doc


def document_exists(svc: Services, document_id: str) -> bool:
    with svc.sessions() as s:
        return s.get(Document, document_id) is not None


@tracing.traced("ingest.extract")
def load_pages(svc: Services, document_id: str, pages: list[Page] | None = None) -> tuple[Document, list[Page]]:
    """Stage 1: the pages of the version being ingested (status ``extracting``, pages done of
    total as they are extracted). ``pages``: already extracted from these bytes (``ragaudit.ingest.bulk``
    parses ahead of the run): only the progress is written. Pages the ingestion queue extracted
    ahead of the run (``ragaudit.ingest.parsed``) are taken, waiting for an extraction still under
    way. Raises ``PDFError`` or ``KeyError``."""
    doc = get_document(svc, document_id)
    sha = target_version(doc)
    set_progress(svc, document_id, status="extracting", chunks_done=0, chunks_total=0)
    if pages is None:
        pages = PARSED.take(document_id, sha, wait_s=max(svc.settings.pdf_parse_timeout_s, 0) + 10)
    if pages is None:
        set_progress(svc, document_id, force=True, pages_done=0)
        # in a child process under time/memory bounds (ragaudit.ingest.guard), pages reported as extracted
        pages = extract_pages_bounded(
            file_path(svc, sha).read_bytes(),
            svc.settings,
            on_page=lambda done, total: set_progress(svc, document_id, pages_done=done, pages_total=total),
        )
    set_progress(svc, document_id, force=True, pages_done=len(pages), pages_total=len(pages))
    tracing.annotate(**{"ragaudit.document_id": document_id, "ragaudit.pages": len(pages)})
    return doc, pages


def set_parse_progress(svc: Services, document_id: str, queued_at: Any, done: int, total: int) -> None:
    """Pages extracted ahead of a run (``ragaudit.ingest.queue``): written only while the document
    is still the upload registered at ``queued_at`` and waiting for (or starting) its run, so a
    newer upload's counters are never overwritten. Throttled like ``set_progress``."""
    now = time.monotonic()
    if done < total and now - _LAST_PROGRESS.get(document_id, 0.0) < PROGRESS_INTERVAL_S:
        return
    _LAST_PROGRESS[document_id] = now
    with svc.sessions.begin() as s:
        n = s.execute(
            update(Document)
            .where(
                Document.id == document_id,
                Document.queued_at == queued_at,
                Document.status.in_(("queued", "extracting")),
            )
            .values(pages_done=done, pages_total=total)
            .execution_options(synchronize_session=False)
        ).rowcount
    if n and _LISTENERS:
        notify(document_id, {"pages_done": done, "pages_total": total})


def pages_metadata(doc: Document, pages: list[Page]) -> dict[str, Any]:
    """What extraction gave for ``doc`` (the ``pdf_pages`` asset's metadata, whichever path ran
    the stage): ``doc_name``, ``pages``, ``chars``, ``blank_pages``, ``extractor``,
    ``running_lines_removed``, ``hidden_chars_removed``, ``extraction_report`` (JSON)."""
    report = extraction_report(pages)
    return {
        "doc_name": doc.doc_name,
        "knowledge_base": doc.knowledge_base,
        "pages": len(pages),
        "chars": sum(len(p.text) for p in pages),
        "blank_pages": sum(1 for p in pages if not p.text.strip()),
        "extractor": pages[0].extractor if pages else "none",
        "running_lines_removed": report["running_lines"]["removed"],
        "hidden_chars_removed": report["hidden_text"]["chars"],
        "extraction_report": report,
    }


def chunks_metadata(svc: Services, chunks: list[Chunk], strategy: Strategy) -> dict[str, Any]:
    """What chunking gave (the ``chunks`` asset's metadata): ``chunks``, ``max_tokens``,
    ``mean_tokens``, ``model_limit`` (word pieces), ``strategy``."""
    tokens = [c.token_count for c in chunks] or [0]
    return {
        "chunks": len(chunks),
        "max_tokens": max(tokens),
        "mean_tokens": round(sum(tokens) / len(tokens), 1),
        "model_limit": svc.embedder.max_content_tokens,
        "strategy": Strategy.parse(strategy).value,
    }


@tracing.traced("ingest.chunk")
def build_chunks(svc: Services, doc: Document, pages: list[Page], strategy: Strategy) -> list[Chunk]:
    """Stage 2: chunks of the document with ``strategy`` (see ``ragaudit.ingest.chunking``)."""
    s = svc.settings
    set_progress(svc, doc.id, status="chunking")
    title = document_title(doc.doc_name, pages)
    chunks = chunk_document(
        pages,
        svc.embedder,
        title,
        strategy,
        s.chunk_max_tokens,
        s.chunk_overlap_sentences,
        embedder=svc.embedder,
        overlap_fraction=s.chunk_overlap_fraction,
        atomic_units=s.chunk_atomic_units,
    )
    if not chunks:
        raise IngestError(f"{doc.doc_name}: no text to index", stage="chunks")
    tracing.annotate(
        **{
            "ragaudit.document_id": doc.id,
            "ragaudit.chunks": len(chunks),
            "ragaudit.strategy": strategy or doc.strategy,
        }
    )
    return chunks


def _unit(v: np.ndarray) -> np.ndarray:
    n = float(np.linalg.norm(v))
    return v / n if n > 0 else v


def embed_batched(
    svc: Services,
    texts: list[str],
    owners: list[int] | None = None,
    document_id: str | None = None,
    chunks_before: int = 0,
) -> np.ndarray:
    """Embed ``texts`` in slices of ``EMBED_PROGRESS_BATCH`` (one ``encode`` call each, which
    sorts its texts by length so its padded batches are uniform); after each slice,
    ``chunks_done`` of ``document_id`` becomes ``chunks_before`` plus the number of chunks whose
    texts are all embedded (``owners[i]`` is the chunk of text i; None = one text per chunk;
    ``chunks_before``: chunks of the document embedded by earlier calls). Returns (n, dim) in the
    order of ``texts``. Slices are large (256 texts, the model's batches are 32: each call pads about
    as little as one call for the whole document would) yet progress still moves and a failure
    stops early."""
    if not texts:
        return svc.embedder.embed(texts)
    owners = list(range(len(texts))) if owners is None else owners
    order = list(range(len(texts)))
    left: dict[int, int] = {}
    for o in owners:
        left[o] = left.get(o, 0) + 1
    n_owners, done = len(left), 0
    out = np.zeros((len(texts), svc.embedder.dim), dtype=np.float32)
    for a in range(0, len(order), EMBED_PROGRESS_BATCH):
        idx = order[a : a + EMBED_PROGRESS_BATCH]
        out[idx] = svc.embedder.embed([texts[i] for i in idx])
        for i in idx:
            left[owners[i]] -= 1
            done += left[owners[i]] == 0
        if document_id:
            set_progress(svc, document_id, force=done == n_owners, chunks_done=chunks_before + done)
    return out


def embed_windows(
    svc: Services,
    chunks: list[Chunk],
    document_id: str | None = None,
    spans_out: list[dict[str, Any]] | None = None,
    chunks_before: int = 0,
) -> list[list[Any]]:
    """Per chunk, the embeddings of its sentence windows (``window_spans`` of at most
    ``dense_window_tokens`` word pieces), each prefixed with the chunk's context header, so
    dense retrieval can match one fact in a long chunk (MaxSim). Shape: chunks x windows x dim.
    ``spans_out``: when given, gets per chunk ``{"window_spans": [[start, end], ...] (one per
    vector), "sentence_spans": [[start, end], ...]}`` (character offsets in ``chunk.text``; stored
    in the payload, so the answerer neither embeds nor segments a source per question).
    ``document_id`` / ``chunks_before``: progress as in ``embed_batched``."""
    texts: list[str] = []
    owners: list[int] = []
    for i, c in enumerate(chunks):
        sentences = sentence_spans(c.text)
        spans = window_spans(c.text, svc.embedder, svc.settings.dense_window_tokens, sentences)
        if spans_out is not None:
            spans_out.append(
                {"window_spans": [[a, b] for a, b in spans], "sentence_spans": [[a, b] for a, b in sentences]}
            )
        for a, b in spans:
            texts.append(f"{c.header}\n{c.text[a:b]}" if c.header else c.text[a:b])
            owners.append(i)
    vectors = embed_batched(svc, texts, owners, document_id, chunks_before)
    out: list[list[Any]] = [[] for _ in chunks]
    for i, v in zip(owners, vectors):
        out[i].append(v)
    return out


def staged_version(doc: Document) -> int:
    """The ingest version a run of ``doc`` builds (published versions + 1)."""
    return doc.ingest_version + 1


def staged_points(svc: Services, doc: Document) -> int:
    """Points staged for the version a run of ``doc`` builds (``staged_version``): what ``publish``
    would make live; 0 when no run has staged that version (``chunk_points`` not run)."""
    return svc.store.count(doc.id, version=staged_version(doc))


def _discard_staged(svc: Services, document_id: str) -> None:
    """Delete the document's unpublished points and rows (of this or an interrupted run)."""
    svc.store.delete_document(document_id, live=False)
    with svc.sessions.begin() as s:
        s.execute(delete(ChunkRow).where(ChunkRow.document_id == document_id, ChunkRow.live.is_(False)))


@tracing.traced("ingest.embed_index")
def stage_chunks(svc: Services, document_id: str, chunks: list[Chunk], strategy: Strategy) -> dict[str, Any]:
    """Stage 3: embed + BM25, write the chunks as points (Qdrant) and rows (SQL) of the version
    being built, not yet searchable (``live`` false). Leftovers of an interrupted run of this
    document are removed first; nothing of any other document is touched.

    Streams: ``STAGE_BATCH_CHUNKS`` chunks at a time are embedded, BM25-weighted, upserted and
    written as rows (one SQL transaction per batch, all rows staged) before the next batch is
    embedded, so the window texts, vectors, payloads and ORM rows held at once are one batch's,
    whatever the document's length (a 615-page PDF has ~2,700 chunks and ~8,000 windows).

    Each chunk is scanned for passages that read as instructions to an assistant
    (``ragaudit.text.injection.scan``): payload ``instruction_like`` / ``instruction_score`` /
    ``instruction_spans`` and row ``instruction_like`` / ``instruction_score`` record the result.

    A document not in English (``ragaudit.text.language.non_english`` of its opening chunks) also
    gets a multilingual vector per chunk and ``language`` in each payload
    (``ragaudit.index.multilingual``; ``Settings.multilingual_vectors``).

    Returns counts and timings (ms). On failure this run's points and rows are removed again
    and the previous version stays as it was; raises ``IngestError`` (stage ``chunk_points``).
    """
    st = svc.settings
    doc = get_document(svc, document_id)
    sha = target_version(doc)
    strategy = Strategy.parse(strategy)
    version = staged_version(doc)
    t_embed = t_upsert = 0.0
    ids: list[str] = []
    set_progress(svc, doc.id, status="embedding", chunks_done=0, chunks_total=len(chunks))
    # the document's language, read from its opening text: its BM25 terms get that language's stems
    opening = " ".join(c.text for c in chunks[:20])
    language = text_language(opening) if st.bm25_language_stems else None
    # a document not in English also gets multilingual vectors (ragaudit.index.multilingual)
    doc_language = non_english(opening)
    multilingual = st.multilingual_vectors and doc_language is not None
    if multilingual and (why := multilingual_unavailable()):
        log.warning("%s: %s; its chunks get no multilingual vector", doc.doc_name, why)
        multilingual = False
    t_multi = 0.0
    try:
        svc.store.ensure_collection(svc.embedder.dim, multilingual=MULTILINGUAL_DIM if st.multilingual_vectors else 0)
        multilingual = multilingual and svc.store.has_multilingual()
        _discard_staged(svc, doc.id)
        use_windows = bool(st.dense_window_tokens) and svc.store.has_windows()
        for a in range(0, len(chunks), STAGE_BATCH_CHUNKS):
            part = chunks[a : a + STAGE_BATCH_CHUNKS]
            t0 = time.perf_counter()
            texts = [c.indexed_text for c in part]
            if use_windows:
                # the per-chunk vector (used only with dense_window_tokens=0) is the normalised mean of
                # the chunk's window vectors: embedding every chunk whole again would double the cost.
                # A collection from before windows gets real chunk vectors, like the rest of it.
                spans: list[dict[str, Any]] = []
                # progress moves within the step too (per slice of EMBED_PROGRESS_BATCH texts): a
                # document of fewer than STAGE_BATCH_CHUNKS chunks would otherwise show 0 until done
                windows = embed_windows(svc, part, doc.id, spans, chunks_before=a)
                dense = [_unit(np.mean(np.asarray(w), axis=0)) for w in windows]
            else:
                spans, windows, dense = [], None, embed_batched(svc, texts, None, doc.id, chunks_before=a)
            t_embed += time.perf_counter() - t0  # progress: written by embed_batched per slice
            sparse = [
                bm25_document_vector(
                    t,
                    st.bm25_k1,
                    st.bm25_b,
                    st.bm25_avgdl,
                    rows=c.text if st.bm25_row_labels else None,
                    language=language,
                )
                for t, c in zip(texts, part)
            ]
            part_ids = [point_id(doc.id, version, strategy.value, c.index) for c in part]
            # passages that read as instructions to an assistant (ragaudit.text.injection): flagged, never obeyed
            scans = [
                scan(c.text, spans[k]["sentence_spans"] if spans else sentence_spans(c.text))
                for k, c in enumerate(part)
            ]
            payloads: list[ChunkPayload] = [
                {
                    "document_id": doc.id,
                    "doc_name": doc.doc_name,
                    "doc_key": doc.name_key,
                    "knowledge_base": doc.knowledge_base,
                    "doc_sha256": sha,
                    "strategy": strategy.value,
                    "chunk_index": c.index,
                    "page_start": c.page_start,
                    "page_end": c.page_end,
                    "page_breaks": [list(b) for b in c.page_breaks],
                    "char_start": c.char_start,
                    "char_end": c.char_end,
                    "section": c.section,
                    "header": c.header,
                    "text": c.text,
                    "token_count": c.token_count,
                    "ingest_version": version,
                    "primary": True,
                    "live": False,
                    "instruction_like": scans[k].flagged,
                    "instruction_score": scans[k].score,
                    "instruction_spans": [list(s) for s in scans[k].spans],
                    **({"language": doc_language} if multilingual else {}),
                    # the window vectors' and sentences' spans: the extractive answerer scores sentences
                    # with them (no embedding or sentence segmentation per question)
                    **(spans[k] if spans else {}),
                }
                for k, c in enumerate(part)
            ]
            multi = None
            if multilingual:
                t2 = time.perf_counter()
                # the passage alone: the header line (the document's title and section) outweighs
                # the passage in e5's vector (measured: the answering article ranked lower)
                multi = list(passage_vectors([c.text for c in part]))
                t_multi += time.perf_counter() - t2
            t1 = time.perf_counter()
            svc.store.upsert(part_ids, dense, sparse, payloads, windows=windows, multilingual=multi)
            t_upsert += time.perf_counter() - t1
            with svc.sessions.begin() as s:
                s.add_all(
                    ChunkRow(
                        id=i,
                        document_id=doc.id,
                        index=c.index,
                        strategy=strategy.value,
                        page_start=c.page_start,
                        page_end=c.page_end,
                        char_start=c.char_start,
                        char_end=c.char_end,
                        section=c.section,
                        text=c.text,
                        token_count=c.token_count,
                        doc_sha256=sha,
                        ingest_version=version,
                        live=False,
                        instruction_like=sc.flagged,
                        instruction_score=sc.score,
                    )
                    for i, c, sc in zip(part_ids, part, scans)
                )
            ids += part_ids
            del windows, dense, sparse, payloads, spans, scans
        set_progress(svc, doc.id, status="indexing", chunks_done=len(chunks))
    except Exception as e:
        try:
            _discard_staged(svc, doc.id)
        except Exception:  # the store is down: the next run of this document removes the leftovers
            log.exception("could not remove the staged chunks of %s", doc.id)
        raise IngestError(f"{doc.doc_name}: indexing failed: {type(e).__name__}: {e}", stage="chunk_points") from e
    return {
        "chunks": len(chunks),
        "points": len(ids),
        "ingest_version": version,
        "embed_ms": round(t_embed * 1000, 1),
        "upsert_ms": round(t_upsert * 1000, 1),
        "max_tokens": max(c.token_count for c in chunks),
        # chunks of a document not in English also got multilingual vectors, in this time
        "multilingual_vectors": multilingual,
        "multilingual_ms": round(t_multi * 1000, 1),
    }


@tracing.traced("ingest.count_check")
def count_check(svc: Services, document_id: str) -> dict[str, Any]:
    """Chunk rows in SQL against points in Qdrant for one document, in total and for the
    version being staged: ``{sql, qdrant, staged_sql, staged_qdrant, passed}``. ``passed``
    compares the staged counts while a version is staged, else the totals."""
    with svc.sessions() as s:
        n_sql = s.scalar(select(func.count()).select_from(ChunkRow).where(ChunkRow.document_id == document_id))
        staged_sql = s.scalar(
            select(func.count())
            .select_from(ChunkRow)
            .where(ChunkRow.document_id == document_id, ChunkRow.live.is_(False))
        )
    n_q = svc.store.count(document_id)
    staged_q = svc.store.count(document_id, live=False)
    # during a run the staged version decides (the live one is about to be replaced, and may be
    # the damaged version being repaired); outside a run, the totals
    passed = staged_sql == staged_q if staged_sql or staged_q else n_sql == n_q
    return {"sql": n_sql, "qdrant": n_q, "staged_sql": staged_sql, "staged_qdrant": staged_q, "passed": passed}


def page_coverage(svc: Services, document_id: str, pages: list[tuple[int, str]] | None = None) -> dict[str, Any]:
    """Pages with text (``pages``: ``[(number, text)]``, text not blank) that no live chunk of the
    document's primary strategy spans: ``{pages_with_text, covered, uncovered: [page numbers,
    at most 50], recorded: True}``. Without ``pages`` the pages with text are read from the
    document's stored extraction report (its page count less its ``blank_pages``); a document
    stored before the report listed them gives ``{recorded: False}``."""
    with svc.sessions() as s:
        doc = s.get(Document, document_id)
        spans = s.execute(
            select(ChunkRow.page_start, ChunkRow.page_end).where(
                ChunkRow.document_id == document_id,
                ChunkRow.live.is_(True),
                ChunkRow.strategy == (doc.strategy if doc else ChunkRow.strategy),
            )
        ).all()
    if pages is None:
        report = (doc.extraction_report if doc else None) or {}
        if "blank_pages" not in report:
            return {"recorded": False, "pages_with_text": 0, "covered": 0, "uncovered": []}
        blank = set(report["blank_pages"])
        with_text = [n for n in range(1, int(report.get("pages", doc.pages)) + 1) if n not in blank]
    else:
        with_text = [n for n, t in pages if t.strip()]
    covered = set()
    for a, b in spans:
        covered.update(range(a, b + 1))
    missing = [n for n in with_text if n not in covered]
    return {
        "pages_with_text": len(with_text),
        "covered": len(with_text) - len(missing),
        "uncovered": missing[:50],
        "recorded": True,
    }


def live_document_rows(svc: Services) -> list[Document]:
    """Every document with a published version, in knowledge base and name order: what a check of
    the whole live index goes through."""
    with svc.sessions() as s:
        return list(
            s.scalars(
                select(Document)
                .where(Document.ingest_version > 0)
                .order_by(Document.knowledge_base, Document.doc_name, Document.id)
            )
        )


def orphans(svc: Services) -> dict[str, Any]:
    """Points without a chunk row or whose document is gone, and chunk rows without a point
    (whole index): ``{points, rows, orphan_points, orphan_rows, examples}``. The staged (not yet
    live) points and rows of a document whose run is under way are left out: another run
    writes them batch by batch beside this check (points first, then their rows)."""
    with svc.sessions() as s:
        running = set(s.scalars(select(Document.id).where(Document.status.in_(RUNNING))))
        rows = set(s.scalars(select(ChunkRow.id)))
        staged_rows = set(
            s.scalars(select(ChunkRow.id).where(ChunkRow.live.is_(False), ChunkRow.document_id.in_(running)))
        )
        docs = set(s.scalars(select(Document.id)))
    points = {}
    staged_points = set()
    for pid, payload in svc.store.iter_payloads():
        points[pid] = payload.get("document_id")
        if payload.get("live") is False and points[pid] in running:
            staged_points.add(pid)
    orphan_points = [p for p, d in points.items() if (p not in rows or d not in docs) and p not in staged_points]
    orphan_rows = [r for r in rows if r not in points and r not in staged_rows]
    return {
        "points": len(points),
        "rows": len(rows),
        "orphan_points": len(orphan_points),
        "orphan_rows": len(orphan_rows),
        "examples": (orphan_points + orphan_rows)[:10],
    }


@tracing.traced("ingest.publish")
def publish(
    svc: Services,
    document_id: str,
    *,
    strategy: Strategy,
    pages: int,
    extractor: str,
    title: str,
    extraction: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Stage 4: make the staged version the document's searchable one (after the count check).

    Order: staged points turn live; one SQL transaction deletes the replaced rows (other content
    versions, and this strategy's older versions), makes the staged rows live and updates the
    document; then the replaced points are deleted, ``strategy`` becomes primary, and the old
    content's file is deleted if nothing refers to it. If the SQL step fails the points are
    turned back to staged, so the previous version is all that is searched. Raises
    ``IngestError`` (stage ``live_index``) when nothing is staged, or when the staged points and
    rows differ in number: the count check is repeated here, so a run whose asset checks were
    left out (Dagster lets a launch deselect them) still publishes no version with a lost point.
    ``extraction``: the version's extraction report (``removal.extraction_report``), stored with it.
    """
    doc = get_document(svc, document_id)
    sha = target_version(doc)
    old_sha = doc.sha256
    strategy = Strategy.parse(strategy)
    version = staged_version(doc)
    n = staged_points(svc, doc)
    if not n:
        raise IngestError(f"{doc.doc_name}: no staged chunks of version {version} to publish", stage="live_index")
    counts = count_check(svc, doc.id)  # the blocking asset check's comparison, over the staged version
    if not counts["passed"]:
        raise IngestError(
            f"{doc.doc_name}: version {version} has {counts['staged_sql']} chunk rows and "
            f"{counts['staged_qdrant']} points; not published",
            stage="live_index",
        )
    svc.store.set_live(doc.id, version, True)
    try:
        with svc.sessions.begin() as s:
            s.execute(
                delete(ChunkRow).where(
                    ChunkRow.document_id == doc.id,
                    ChunkRow.live.is_(True),
                    (ChunkRow.strategy == strategy.value) | (ChunkRow.doc_sha256 != sha),
                )
            )
            s.execute(
                update(ChunkRow)
                .where(ChunkRow.document_id == doc.id, ChunkRow.ingest_version == version)
                .values(live=True)
            )
            d = s.get(Document, doc.id)
            d.sha256, d.pending_sha256 = sha, None
            d.pages, d.chunk_count, d.extractor = pages, n, extractor
            d.title = title[:512]
            d.status, d.error, d.ingest_version, d.ingested_at = "ready", None, version, utcnow()
            d.strategy, d.pending_strategy = strategy.value, None
            d.built_with = build_info(svc, strategy)
            d.build_fingerprint = fingerprint(d.built_with)
            d.extraction_report = extraction
            path = file_path(svc, sha)
            if path.exists():
                d.size_bytes = path.stat().st_size
    except Exception as e:
        svc.store.set_live(doc.id, version, False)
        raise IngestError(f"{doc.doc_name}: publishing failed: {type(e).__name__}: {e}", stage="live_index") from e
    svc.store.delete_replaced(doc.id, version, sha, strategy.value)
    with svc.sessions.begin() as s:  # cached answers may have seen both versions: invalidate again
        bump_index_version(s.connection())
    if old_sha != sha:
        remove_file_if_unreferenced(svc, old_sha)
    return {"chunks": n, "ingest_version": version, "replaced_sha256": old_sha if old_sha != sha else None}


def settle_unpublished(svc: Services, document_id: str) -> str | None:
    """End a run that builds some stages of a document but does not publish it (a Dagster UI
    materialization of ``pdf_pages`` or ``chunks`` alone, or with a ``live_index`` that found
    nothing staged): the document leaves its running status
    for ``ready`` when its live version is what it holds, or ``queued`` when a new version (new
    bytes or strategy) or its first one still waits to be built; staged points and rows are left
    for a later run to replace. Returns the status set, or None when the document is gone or not
    in a running status. A document left in a running status would refuse uploads and
    re-ingestion of it as busy."""
    with svc.sessions.begin() as s:
        d = s.get(Document, document_id)
        if d is None or d.status not in RUNNING:
            return None
        waiting = d.ingest_version == 0 or d.pending_sha256 is not None or d.pending_strategy is not None
        d.status = "queued" if waiting else "ready"
        status = d.status
    _LAST_PROGRESS.pop(document_id, None)
    return status


def rollback(svc: Services, document_id: str, error: str, keep_failed: bool = False) -> None:
    """Undo a failed run: its staged points and rows are deleted; an existing document keeps its
    previous version, points and rows untouched, and records the error (status ``failed``: its
    previous version, ``ingest_version`` > 0, stays searchable). A never-published document
    disappears entirely (and its file, unless another document has the same bytes), or, with
    ``keep_failed`` (asynchronous uploads, whose client must be able to read why), stays as a row
    in status ``failed`` with the error and no points."""
    with svc.sessions() as s:
        doc = s.get(Document, document_id)
    if doc is None:
        return
    _discard_staged(svc, doc.id)
    pending = target_version(doc)
    with svc.sessions.begin() as s:
        d = s.get(Document, document_id)
        if d.ingest_version == 0 and not keep_failed:
            svc.store.delete_document(d.id)
            s.execute(delete(ChunkRow).where(ChunkRow.document_id == d.id))
            s.delete(d)
        else:
            if d.ingest_version > 0:
                d.pending_sha256 = None
            d.pending_strategy = None
            d.status, d.error = "failed", error[:2000]
    _LAST_PROGRESS.pop(document_id, None)
    remove_file_if_unreferenced(svc, pending)


def delete_document(svc: Services, document_id: str, refuse_running: bool = False) -> dict[str, Any]:
    """Remove a document: its Qdrant points, chunk rows, Q&A pairs, row and (when no other
    document has the same bytes) its stored file. ``KeyError`` if unknown; with
    ``refuse_running``, ``DocumentBusyError`` while its run is under way (hold ``REGISTER_LOCK``
    so no run claims it meanwhile)."""
    with svc.sessions.begin() as s:
        doc = s.get(Document, document_id)
        if doc is None:
            raise KeyError(f"document {document_id} not found")
        if refuse_running and doc.status in RUNNING:
            raise DocumentBusyError(
                f"{doc.doc_name}: being ingested (status {doc.status}); delete it when the run is done"
            )
        info = doc.as_dict()
        shas = {doc.sha256, doc.pending_sha256}
        svc.store.delete_document(doc.id)
        s.execute(delete(ChunkRow).where(ChunkRow.document_id == doc.id))
        s.execute(delete(QAPair).where(QAPair.document_id == doc.id))
        s.delete(doc)
    for sha in shas:
        remove_file_if_unreferenced(svc, sha)
    return info


# runs the stages of one document with a strategy: the Dagster asset job (ragaudit.pipelines.runner.DagsterRunner)
Runner = Callable[[Services, str, Strategy], None]


def ingest_bytes(
    svc: Services,
    data: bytes,
    doc_name: str,
    runner: Runner,
    knowledge_base: str = DEFAULT_KB,
    strategy: Strategy | str = DEFAULT_STRATEGY,
) -> IngestOutcome:
    """Validate, register and ingest one PDF through ``runner`` (the Dagster asset job).

    Never raises for bad input: returns ``status="refused"`` with the reason (nothing stored in
    SQL or Qdrant), or ``"failed"`` with the stage error (previous version kept).
    """
    t = time.perf_counter()
    try:
        strategy = Strategy.parse(strategy)
    except ValueError as e:
        return IngestOutcome(doc_name, "refused", str(e), error_code="invalid_request")
    with INGEST_LOCK:
        try:
            doc, needs_run = register(svc, data, doc_name, knowledge_base, strategy, claim=True)
        except PDFError as e:
            return IngestOutcome(doc_name, "refused", str(e), error_code=e.code, seconds=time.perf_counter() - t)
        except InvalidNameError as e:
            return IngestOutcome(
                doc_name, "refused", str(e), error_code="invalid_name", seconds=time.perf_counter() - t
            )
        except DocumentBusyError as e:
            return IngestOutcome(doc_name, "refused", str(e), error_code="busy", seconds=time.perf_counter() - t)
        except ValueError as e:
            return IngestOutcome(
                doc_name, "refused", str(e), error_code="invalid_request", seconds=time.perf_counter() - t
            )
        if not needs_run:
            return IngestOutcome(
                doc.doc_name,
                "unchanged",
                "same content already ingested; nothing changed",
                document=doc.as_dict(),
                seconds=time.perf_counter() - t,
            )
        replaces = replaced_version(doc)
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
        dups = duplicates_of(svc, doc.id, doc.sha256)
        message = f"{doc.pages} pages, {doc.chunk_count} chunks"
        if replaces:
            message += f"; version {doc.ingest_version}: {replaced_note(doc.doc_name, replaces)}"
        extra: dict[str, Any] = {"duplicate_of": dups} if dups else {}
        if replaces:
            extra["replaces"] = replaces
        return IngestOutcome(
            doc.doc_name, "ingested", message, document=doc.as_dict(), seconds=time.perf_counter() - t, extra=extra
        )


def run_queued(svc: Services, document_id: str, runner: Runner, exclusive: bool = True) -> IngestOutcome | None:
    """Run the ingestion of a document in status ``queued`` (the background queue's unit of work).

    Claims the document (``queued`` -> ``extracting``) under ``REGISTER_LOCK`` so a concurrent
    upload of a newer version either lands before the claim (and is what gets built) or gets a
    409; then runs ``runner``, under ``INGEST_LOCK`` when ``exclusive`` (the queue's express lane
    runs small documents beside it, ``ragaudit.ingest.queue``). A failure rolls back with
    ``keep_failed``: the row stays, status ``failed`` with the reason, any previous version
    searchable. Returns None when the document is gone or no longer queued (nothing to do).
    """
    t = time.perf_counter()
    with INGEST_LOCK if exclusive else contextlib.nullcontext():
        with REGISTER_LOCK, svc.sessions.begin() as s:
            doc = s.get(Document, document_id)
            if doc is None or doc.status != "queued":
                return None
            strategy = requested_strategy(doc)
            name = doc.doc_name
            # atomic claim: another process (a second API, the Dagster daemon) may claim it too
            claimed = s.execute(
                update(Document)
                .where(Document.id == document_id, Document.status == "queued")
                .values(status="extracting")
                .execution_options(synchronize_session=False)
            )
            if claimed.rowcount != 1:
                return None
        try:
            report = runner(svc, document_id, strategy)
        except Exception as e:
            log.warning("ingestion of %s failed: %s", document_id, e)
            rollback(svc, document_id, str(e), keep_failed=True)
            code = e.code if isinstance(e, PDFError) else "ingest_failed"
            return IngestOutcome(name, "failed", str(e), error_code=code, seconds=time.perf_counter() - t)
    doc = get_document(svc, document_id)
    return IngestOutcome(
        doc.doc_name,
        "ingested",
        f"{doc.pages} pages, {doc.chunk_count} chunks",
        document=doc.as_dict(),
        seconds=time.perf_counter() - t,
        stages=report if isinstance(report, dict) else None,
    )


def active_documents(svc: Services) -> list[str]:
    """Ids of documents left ``queued`` or in a run stage (e.g. by a stopped server), oldest first.
    The ones in a run stage are set back to ``queued`` (their staged leftovers are discarded by
    the next run), so a restart loses no upload."""
    with REGISTER_LOCK, svc.sessions.begin() as s:
        docs = list(
            s.scalars(
                select(Document).where(Document.status.in_(ACTIVE)).order_by(Document.queued_at, Document.created_at)
            )
        )
        for d in docs:
            if d.status != "queued":
                s.execute(
                    update(Document)
                    .where(Document.id == d.id)
                    .values(status="queued")
                    .execution_options(synchronize_session=False)
                )
        return [d.id for d in docs]


def queued_documents(svc: Services) -> list[str]:
    """Ids of documents in status ``queued``, oldest first."""
    with svc.sessions() as s:
        return list(
            s.scalars(
                select(Document.id).where(Document.status == "queued").order_by(Document.queued_at, Document.created_at)
            )
        )


# What runs once a version is published: ``(services, document id, chunks, strategy) -> counts``
# (``kept``). The gold Q&A pairs (ragaudit.evaluate.goldgen), handed in by ragaudit.pipelines, which
# sits above both stages.
AfterPublish = Callable[[Services, str, list[Chunk], Strategy], dict[str, Any]]


def run_stages(
    svc: Services,
    document_id: str,
    strategy: Strategy,
    pages: list[Page] | None = None,
    timings: dict[str, float] | None = None,
    after_publish: AfterPublish | None = None,
) -> dict[str, Any]:
    """All stages of one document in this process, without Dagster: extract, chunk, stage, count
    check, publish, page coverage, then ``after_publish`` (the gold pairs; a ``Runner`` with it
    bound: the batch jobs run documents with it so one Dagster run covers many, and record its
    report there). ``pages``: already extracted from the document's bytes (not parsed again).
    ``timings``: seconds are added per stage (``chunk``, ``embed``, ``upsert``, ``sql`` = staging
    rows, count check and publishing, ``gold pairs``).

    Returns the report of each stage, as the Dagster assets and checks give theirs:
    ``{"pdf_pages": pages_metadata, "chunks": chunks_metadata, "chunk_points": stage_chunks',
    "live_index": publish's, "gold_qa_pairs": after_publish's (None without it), "checks":
    {"chunk_counts_match": count_check's, "pages_have_chunks": page_coverage's}}`` (each check's
    dict with ``passed``). Raises like the stages; ``IngestError`` (stage ``chunk_counts_match``)
    when the count check fails (nothing published)."""
    t = {} if timings is None else timings
    t0, given = time.perf_counter(), pages
    doc, pages = load_pages(svc, document_id, pages)
    t1 = time.perf_counter()
    key = "extract" if given is None else "sql"  # pages given: only their progress was written
    t[key] = t.get(key, 0.0) + (t1 - t0)
    chunks = build_chunks(svc, doc, pages, strategy)
    t2 = time.perf_counter()
    t["chunk"] = t.get("chunk", 0.0) + (t2 - t1)
    stats = stage_chunks(svc, document_id, chunks, strategy=strategy)
    check = count_check(svc, document_id)
    if not check["passed"]:
        failed = {k: v for k, v in check.items() if k != "passed"}
        raise IngestError(
            f"asset check chunk_counts_match failed: {failed}; the previous version stays searchable",
            stage="chunk_counts_match",
        )
    pub = publish(
        svc,
        document_id,
        strategy=strategy,
        pages=len(pages),
        extractor=pages[0].extractor if pages else "none",
        title=chunks[0].header if chunks else "",
        extraction=extraction_report(pages),
    )
    t3 = time.perf_counter()
    embed_s, upsert_s = stats["embed_ms"] / 1000, stats["upsert_ms"] / 1000
    t["embed"] = t.get("embed", 0.0) + embed_s
    t["upsert"] = t.get("upsert", 0.0) + upsert_s
    t["sql"] = t.get("sql", 0.0) + max(0.0, (t3 - t2) - embed_s - upsert_s)
    gold: dict[str, Any] | None = None
    if after_publish is not None:
        gold = after_publish(svc, document_id, chunks, strategy)
        t["gold pairs"] = t.get("gold pairs", 0.0) + (time.perf_counter() - t3)
    coverage = page_coverage(svc, document_id, [(p.number, p.text) for p in pages])
    return {
        "pdf_pages": pages_metadata(doc, pages),
        "chunks": chunks_metadata(svc, chunks, strategy),
        "chunk_points": stats,
        "live_index": {k: v for k, v in pub.items() if v is not None},
        "gold_qa_pairs": gold,
        "checks": {
            "chunk_counts_match": check,
            "pages_have_chunks": {**coverage, "passed": not coverage["uncovered"]},
        },
    }

"""SQL schema (SQLAlchemy 2 ORM) and database access.

SQLite file by default, PostgreSQL (psycopg 3) in production; the schema is created and
upgraded by the Alembic migrations in ``sql/migrations`` (``migrate(engine)``), run at start-up.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from filelock import FileLock
from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    and_,
    create_engine,
    event,
    false,
    not_,
    or_,
    text,
    true,
    update,
)
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, sessionmaker
from sqlalchemy.types import TypeDecorator

from ragaudit import sql
from ragaudit.types import AnyOf, Condition, Match, Not, Range, Scope


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class UTCDateTime(TypeDecorator):
    """``DateTime(timezone=True)`` that always reads back timezone-aware UTC datetimes.

    PostgreSQL's ``timestamptz`` returns aware values; SQLite stores the text without an offset
    and returns naive ones, so the same row was ``...T10:00:00+00:00`` in production and
    ``...T10:00:00`` (no zone) in the embedded mode. Aware values are stored converted to UTC;
    naive ones are taken as UTC. Same DDL as ``DateTime(timezone=True)`` (no migration)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is not None:
            value = value.astimezone(timezone.utc)
        return value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value


def new_id() -> str:
    return uuid.uuid4().hex


class Base(DeclarativeBase):
    pass


class Document(Base):
    """One document of a knowledge base; ``(knowledge_base, name_key)`` is unique.

    ``doc_name`` is the name as given (shown); ``name_key`` its NFC form (matched, see
    ``ragaudit.text.docnames``). ``sha256`` is the ingested version; ``pending_sha256`` a new version being
    ingested (the old one stays queryable until it is replaced). ``ingest_version`` counts
    published versions (chunk and point ids include it).

    ``status`` follows a run: queued -> extracting -> chunking -> embedding -> indexing -> ready,
    or failed (``error`` says why). While a new version of a ready document is built, the previous
    one stays searchable whatever ``status`` shows (searches never read ``status``). Progress:
    ``pages_done``/``pages_total`` (extraction), ``chunks_done``/``chunks_total`` (embedding).
    ``pending_strategy``: the chunking strategy a queued run builds. ``built_with``: what the live
    version was built with (strategy, embedding model, chunk and index settings), and
    ``build_fingerprint`` its sha256, compared by re-ingestion. ``source_path``: the file a
    landing-folder document comes from (re-ingestion rereads it). ``extraction_report``: what
    extraction left out of the live version's text (running headers and footers, hidden text),
    counted with examples (``ragaudit.ingest.removal.extraction_report``). ``gold_report``: the
    last gold-pair generation (``ragaudit.evaluate.goldgen.generate_for_document``): generator,
    pairs generated and stored, rejections per reason.
    """

    __tablename__ = "documents"
    __table_args__ = (UniqueConstraint("knowledge_base", "name_key", name="uq_documents_kb_name_key"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    doc_name: Mapped[str] = mapped_column(String(512), index=True)
    name_key: Mapped[str] = mapped_column(String(512))
    knowledge_base: Mapped[str] = mapped_column(String(128), default="default", index=True)
    sha256: Mapped[str] = mapped_column(String(64))
    pending_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    size_bytes: Mapped[int] = mapped_column(Integer, default=0)
    pages: Mapped[int] = mapped_column(Integer, default=0)
    chunk_count: Mapped[int] = mapped_column(Integer, default=0)
    strategy: Mapped[str] = mapped_column(String(32), default="sentence")
    extractor: Mapped[str | None] = mapped_column(String(32), nullable=True)
    title: Mapped[str | None] = mapped_column(String(512), nullable=True)
    status: Mapped[str] = mapped_column(String(16), default="queued", index=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    ingest_version: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    ingested_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    pages_done: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    pages_total: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    chunks_done: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    chunks_total: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    pending_strategy: Mapped[str | None] = mapped_column(String(32), nullable=True)
    queued_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    built_with: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    build_fingerprint: Mapped[str | None] = mapped_column(String(64), nullable=True)
    source_path: Mapped[str | None] = mapped_column(Text, nullable=True)
    extraction_report: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    gold_report: Mapped[dict | None] = mapped_column(JSON, nullable=True)

    def progress(self) -> dict[str, Any]:
        """``{status, error, pages: {done, total}, chunks: {done, total}}`` (GET /documents/{id}/events)."""
        return {
            "id": self.id,
            "status": self.status,
            "error": self.error,
            "pages": {"done": self.pages_done or 0, "total": self.pages_total or 0},
            "chunks": {"done": self.chunks_done or 0, "total": self.chunks_total or 0},
        }

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "doc_name": self.doc_name,
            "knowledge_base": self.knowledge_base,
            "sha256": self.sha256,
            "size_bytes": self.size_bytes,
            "pages": self.pages,
            "chunk_count": self.chunk_count,
            "strategy": self.strategy,
            "extractor": self.extractor,
            "title": self.title,
            "status": self.status,
            "error": self.error,
            "ingest_version": self.ingest_version,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "ingested_at": self.ingested_at.isoformat() if self.ingested_at else None,
            "progress": {
                "pages": {"done": self.pages_done or 0, "total": self.pages_total or 0},
                "chunks": {"done": self.chunks_done or 0, "total": self.chunks_total or 0},
            },
            "built_with": self.built_with,
            "source_path": self.source_path,
            "extraction_report": self.extraction_report,
            "gold_report": self.gold_report,
        }


class ChunkRow(Base):
    """A chunk as stored in SQL; ``id`` equals its Qdrant point id.

    Rows of a run are written with ``live=False`` and ``ingest_version`` = the version being
    built; publishing the version flips them to live and deletes the replaced rows.
    ``instruction_like`` / ``instruction_score``: the chunk holds a passage that reads as an
    instruction to an assistant (``ragaudit.text.injection``; score NULL: not scanned)."""

    __tablename__ = "chunks"
    __table_args__ = (Index("ix_chunks_document_strategy", "document_id", "strategy"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    document_id: Mapped[str] = mapped_column(ForeignKey("documents.id", ondelete="CASCADE"))
    index: Mapped[int] = mapped_column(Integer)
    strategy: Mapped[str] = mapped_column(String(32), default="sentence")
    page_start: Mapped[int] = mapped_column(Integer)
    page_end: Mapped[int] = mapped_column(Integer)
    char_start: Mapped[int] = mapped_column(Integer, default=0)
    char_end: Mapped[int] = mapped_column(Integer, default=0)
    section: Mapped[str | None] = mapped_column(String(512), nullable=True)
    text: Mapped[str] = mapped_column(Text)
    token_count: Mapped[int] = mapped_column(Integer)
    doc_sha256: Mapped[str] = mapped_column(String(64))
    ingest_version: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    live: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    instruction_like: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    instruction_score: Mapped[float | None] = mapped_column(Float, nullable=True)


def _scope_column(key: str) -> Any:
    """The SQL expression of a chunk payload field (``ragaudit.types.ChunkPayload``) over
    ``chunks JOIN documents``: identity fields come from the document row, the chunk's own from
    its row; ``primary`` is "the chunk's strategy is the document's" (``documents.strategy`` is
    the strategy of the searched version, the one ``publish`` marks primary in Qdrant)."""
    columns = {
        "live": ChunkRow.live,
        "primary": ChunkRow.strategy == Document.strategy,
        "doc_key": Document.name_key,
        "doc_name": Document.doc_name,
        "knowledge_base": Document.knowledge_base,
        "document_id": ChunkRow.document_id,
        "strategy": ChunkRow.strategy,
        "page_start": ChunkRow.page_start,
        "page_end": ChunkRow.page_end,
    }
    if key not in columns:
        raise TypeError(f"no SQL column for the scope field {key!r}")
    return columns[key]


def _scope_sql(cond: Condition) -> Any:
    if isinstance(cond, Match):
        col = _scope_column(cond.key)
        if all(isinstance(v, bool) for v in cond.values):
            return or_(*(col.is_(v) for v in cond.values))
        return col.in_(cond.values)
    if isinstance(cond, Range):
        col = _scope_column(cond.key)
        parts = ([col >= cond.gte] if cond.gte is not None else []) + (
            [col <= cond.lte] if cond.lte is not None else []
        )
        return and_(true(), *parts)
    if isinstance(cond, AnyOf):
        return or_(*(_scope_sql(c) for c in cond.conditions))
    if isinstance(cond, Not):
        return not_(_scope_sql(cond.condition))
    raise TypeError(f"no SQL for the scope condition {cond!r}")


def scope_clause(scope: Scope) -> Any:
    """The WHERE clause selecting the chunk rows inside ``scope``, derived from
    ``Scope.conditions`` (``ragaudit.types``) as the Qdrant filter is; for a query over
    ``chunks`` joined to ``documents`` (``select(ChunkRow...).join(Document, Document.id ==
    ChunkRow.document_id).where(scope_clause(scope))``)."""
    return and_(*(_scope_sql(c) for c in scope.conditions()))


class QAPair(Base):
    """A gold question/answer pair generated from a chunk, with a verbatim evidence span.

    ``generator``: rules | llm (``manual`` for a pair written in the admin); ``kind``: where the
    question comes from (labelled_value | table_cell | vote_table | sentence | llm); ``answer_type``:
    date | amount | percent | count | person | organisation | identifier | text; ``paraphrase``: the
    question is phrased with other words than its evidence."""

    __tablename__ = "qa_pairs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    document_id: Mapped[str] = mapped_column(ForeignKey("documents.id", ondelete="CASCADE"), index=True)
    chunk_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    page: Mapped[int | None] = mapped_column(Integer, nullable=True)
    question: Mapped[str] = mapped_column(Text)
    answer: Mapped[str] = mapped_column(Text)
    evidence: Mapped[str] = mapped_column(Text)
    generator: Mapped[str] = mapped_column(String(32))
    model: Mapped[str | None] = mapped_column(String(128), nullable=True)
    kind: Mapped[str | None] = mapped_column(String(32), nullable=True)
    answer_type: Mapped[str | None] = mapped_column(String(32), nullable=True)
    paraphrase: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class EvalDataset(Base):
    """An imported gold question set (JSONL in the dev-set format); ``name`` is unique."""

    __tablename__ = "eval_datasets"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(256), unique=True)
    source: Mapped[str] = mapped_column(String(32), default="upload")
    n_questions: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "source": self.source,
            "n_questions": self.n_questions,
            "created_at": self.created_at.isoformat() if self.created_at else None,
        }


class EvalQuestion(Base):
    """One record of an imported dataset, kept as its JSON (``position`` keeps file order)."""

    __tablename__ = "eval_questions"
    __table_args__ = (Index("ix_eval_questions_dataset_position", "dataset_id", "position"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    dataset_id: Mapped[str] = mapped_column(ForeignKey("eval_datasets.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    record: Mapped[dict] = mapped_column(JSON)


class EvalRun(Base):
    """An evaluation run. ``status``: queued | running | done | failed; ``progress_done`` of
    ``progress_total`` steps; ``results`` is the results JSON (see ``ragaudit.evaluate.evaluation``)."""

    __tablename__ = "eval_runs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    dataset: Mapped[str] = mapped_column(String(512))
    params: Mapped[dict] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16), default="queued", index=True)
    progress_done: Mapped[int] = mapped_column(Integer, default=0)
    progress_total: Mapped[int] = mapped_column(Integer, default=0)
    results: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, index=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)

    def as_dict(self, with_results: bool = True) -> dict[str, Any]:
        d = {
            "id": self.id,
            "dataset": self.dataset,
            "params": self.params,
            "status": self.status,
            "progress": {"done": self.progress_done, "total": self.progress_total},
            "error": self.error,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
        }
        if with_results:
            d["results"] = self.results
        return d


class QueryLog(Base):
    """One telemetry row per query request; timings in ms, cost in USD."""

    __tablename__ = "query_logs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, index=True)
    endpoint: Mapped[str] = mapped_column(String(32), default="query")
    question: Mapped[str | None] = mapped_column(Text, nullable=True)
    question_hash: Mapped[str] = mapped_column(String(64))
    scope: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    mode: Mapped[str] = mapped_column(String(16), default="hybrid")
    top_k: Mapped[int] = mapped_column(Integer, default=5)
    strategy: Mapped[str | None] = mapped_column(String(32), nullable=True)
    model: Mapped[str | None] = mapped_column(String(128), nullable=True)
    label: Mapped[str | None] = mapped_column(String(16), nullable=True)
    cache_hit: Mapped[bool] = mapped_column(Boolean, default=False)
    embed_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    vector_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    bm25_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    fusion_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    rerank_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    document_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    multilingual_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    neighbors_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    gate_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    generation_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    ttft_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    total_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cost_usd: Mapped[float | None] = mapped_column(
        Float, nullable=True
    )  # NULL = unknown price (no ORM default: None must stay None)
    retrieved_ids: Mapped[list | None] = mapped_column(JSON, nullable=True)
    cited_ids: Mapped[list | None] = mapped_column(JSON, nullable=True)
    error_kind: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # for cache hits: the query_logs id of the request whose answer was served (its cost is that row's cost_usd)
    cache_source_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    # the request's OpenTelemetry trace id (32 hex digits); NULL when tracing is off
    trace_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    # the rules of the answer path that fired (ragaudit.platform.rules.Fired.to_json(): rule, stage, effect, reason)
    rules: Mapped[list | None] = mapped_column(JSON, nullable=True)


class IndexState(Base):
    """One row (id=1): ``version`` is bumped by every change to ``documents`` (ingestion, re-ingestion,
    deletion), in the same transaction, so every process sharing the database sees it. The answer
    cache keys on it."""

    __tablename__ = "index_state"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[int] = mapped_column(Integer, default=0)


def bump_index_version(conn: Any) -> None:
    """Increment ``index_state.version`` on ``conn`` (a SQLAlchemy ``Connection``, inside its transaction)."""
    conn.execute(update(IndexState).where(IndexState.id == 1).values(version=IndexState.version + 1))


def _bump_on_document_change(mapper: Any, connection: Any, target: Any) -> None:
    bump_index_version(connection)


for _evt in ("after_insert", "after_update", "after_delete"):
    event.listen(Document, _evt, _bump_on_document_change)


def make_engine(url: str) -> Engine:
    """Create an engine; SQLite gets foreign keys on and its folder created."""
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @event.listens_for(engine, "connect")
        def _fk(dbapi_conn, _):  # pragma: no cover - trivial
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA journal_mode=WAL")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True)


_MIGRATION_LOCK_KEY = 0x7261676175646974  # "ragaudit": PostgreSQL advisory lock id for migrations


def migrate(engine: Engine) -> None:
    """Apply the Alembic migrations in ``sql/migrations`` up to head (idempotent).

    Several processes start at once against one database (the API, the Dagster webserver and
    daemon, a CLI): they migrate one at a time — a PostgreSQL advisory lock held for the
    migration transaction, or a file lock beside the SQLite file (``filelock``) — so two of
    them never upgrade a fresh database together (that left two rows in ``alembic_version``).
    """

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(sql.__file__).parent / "migrations"))
    url = engine.url
    lock = None
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        lock = FileLock(str(url.database) + ".migrate.lock", timeout=300)
        lock.acquire()
    try:
        with engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK_KEY})
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
    finally:
        if lock is not None:
            lock.release()


def make_sessionmaker(engine: Engine) -> sessionmaker:
    return sessionmaker(engine, expire_on_commit=False)

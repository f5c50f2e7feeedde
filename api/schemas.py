"""Request and response models of the HTTP API (they define the OpenAPI schema)."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from ragaudit.types import QUESTION_MAX_CHARS, Mode, Scope, Strategy

# C0 and C1 control characters other than tab, newline and carriage return (and DEL)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


# a document name is at most 255 characters (uploads refuse longer ones), and so is what a scope
# names; a scope names at most this many documents: a longer value names nothing that can exist
NAME_MAX_CHARS = 255
SCOPE_MAX_ITEMS = 500


class ScopeIn(BaseModel):
    """Where to search. All given fields must match; several doc_names / document_ids are OR-ed.
    ``page_min`` may not be after ``page_max`` (422). A field the API does not know is refused
    (422 ``extra_forbidden``): a misspelt one (``page_start`` for ``page_min``) would otherwise
    widen the search without a word."""

    model_config = ConfigDict(extra="forbid")

    doc_names: list[Annotated[str, Field(max_length=NAME_MAX_CHARS)]] = Field(
        default_factory=list, max_length=SCOPE_MAX_ITEMS, description="Restrict to these document names"
    )
    doc_name: str | None = Field(default=None, max_length=NAME_MAX_CHARS, description="Shorthand for one document name")
    knowledge_base: str | None = Field(default=None, max_length=NAME_MAX_CHARS)
    document_ids: list[Annotated[str, Field(max_length=NAME_MAX_CHARS)]] = Field(
        default_factory=list, max_length=SCOPE_MAX_ITEMS
    )
    page_min: int | None = Field(default=None, ge=1)
    page_max: int | None = Field(default=None, ge=1)
    strategy: Strategy | None = Field(
        default=None, description="fixed | sentence | heading | semantic (default: each document's primary one)"
    )

    @field_validator("page_max")
    @classmethod
    def _page_range(cls, v: int | None, info: ValidationInfo) -> int | None:
        page_min = info.data.get("page_min")
        if v is not None and page_min is not None and page_min > v:
            raise ValueError(f"page_max ({v}) is before page_min ({page_min}): no page is in that range")
        return v

    def to_scope(self) -> Scope:
        names = list(self.doc_names) + ([self.doc_name] if self.doc_name else [])
        return Scope(
            doc_names=names,
            knowledge_base=self.knowledge_base,
            document_ids=list(self.document_ids),
            page_min=self.page_min,
            page_max=self.page_max,
            strategy=self.strategy,
        )


class QueryIn(ScopeIn):
    """A question and where/how to search. ``strategy`` picks one chunking strategy (default:
    each document's primary one)."""

    question: str = Field(
        min_length=1,
        max_length=QUESTION_MAX_CHARS,
        description=f"At most {QUESTION_MAX_CHARS:,} characters, not only whitespace; no control characters "
        "other than tab and newline",
    )
    top_k: int | None = Field(default=None, ge=1, le=100)
    mode: Mode = Mode.hybrid

    @field_validator("question")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("question is blank (only whitespace): send the question's text")
        return v

    @field_validator("question")
    @classmethod
    def _no_control_chars(cls, v: str) -> str:
        bad = _CONTROL.search(v)
        if bad:
            raise ValueError(
                f"question contains a control character (U+{ord(bad.group()):04X} at offset "
                f"{bad.start()}); send plain text"
            )
        return v


class Ranks(BaseModel):
    vector: int | None
    bm25: int | None
    multilingual: int | None = Field(
        default=None,
        description="rank in the multilingual leg's list (a chunk of a document not in English; its vector rank "
        "is then null); absent when that leg did not run",
    )
    fused: int | None = Field(
        default=None,
        description="position in the fused (RRF) list when passage ranking re-ordered it (hybrid mode; "
        "``rank`` is then the final position); absent otherwise",
    )


class RetrievedOut(BaseModel):
    rank: int
    chunk_id: str
    document_id: str | None = None
    doc_name: str
    page_start: int
    page_end: int
    header: str = Field(
        default="",
        description="Context header indexed with the passage: document title, "
        "section path, table caption and header row",
    )
    text: str
    score: float
    ranks: Ranks
    scores: dict[str, float | None] = Field(
        default_factory=dict, description="vector (cosine), bm25, rrf, passage_rank and rerank scores"
    )
    section: str = ""
    strategy: str | None = None
    neighbor_of: str | None = Field(
        default=None,
        description="Set for a neighbouring chunk added to the context "
        "because this retrieved chunk was cut from a longer list or table",
    )
    instruction_like: bool = Field(
        default=False,
        description="The chunk holds a passage that reads as an instruction to an assistant (flagged at "
        "ingestion, ragaudit.text.injection): it is never quoted as evidence",
    )


class Usage(BaseModel):
    model: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None = Field(description="USD; null = unknown (the model has no price in litellm's map)")


class CacheOut(BaseModel):
    hit: bool
    original_query_id: str | None = Field(default=None, description="query_id of the request whose reply was reused")
    original_cost_usd: float | None = Field(default=None, description="what the reused reply cost (this one: 0)")
    original_timings_ms: dict[str, float] | None = None


class CitationOut(BaseModel):
    """``ragaudit.answer.answerers.Citation.to_json()``: the domain dataclass with its derived ``pages`` (a
    response model of the dataclass itself would drop that property: a quote across a page break
    was cited with page 1 only)."""

    n: int = Field(description="the [n] of the source it cites (1-based)")
    doc_name: str
    page: int = Field(description="page of the quote's first character (1-based)")
    pages: list[int] = Field(description="every page the quote is on: one, or two for a sentence across a page break")
    page_end: int | None = Field(default=None, description="last page when the quote runs across a page break")
    chunk_id: str
    quote: str
    claim: str = ""
    verified: bool = Field(description="the quote occurs (whitespace-normalised) in the cited chunk")
    supports: bool = Field(description="the quote supports the claim (its numbers, dates and names are in it)")
    reason: str


class FiredRuleOut(BaseModel):
    """``ragaudit.platform.rules.Fired.to_json()``: a rule of the answer path that fired."""

    rule: str = Field(description="<stage>.<name>, e.g. gate.period_end_not_reported (`ragaudit rules` lists them)")
    stage: str = Field(description="retrieval | gate | answer | concise")
    effect: str = Field(description="what it did: reordered, added, filtered, refused, clarifying, extracted, withheld")
    reason: str
    details: dict[str, Any] | None = None


class ConciseOut(BaseModel):
    """``ragaudit.answer.concise.Concise.to_json()``."""

    text: str
    type: str = Field(description="the kind of value: number, money, percent, date, name, identifier, table_cell, ...")
    rule: str = Field(description="the extractor that found it, e.g. concise.table_cell")
    confidence: float = Field(description="calibrated probability that it is right (0..1)")
    reason: str
    sentence: str = Field(description="the quoted sentence it is a span of")
    features: dict[str, float] = Field(default_factory=dict, description="what the confidence was computed from")


class AnswerOut(BaseModel):
    query_id: str
    question: str
    answer: str
    concise_answer: str = Field(
        default="",
        description="The span of the answer that answers the question (a number, date, name, "
        "identifier, table cell, ...) when the system is confident of it; empty when none is "
        "(the quoted sentences stand alone), when refused or clarifying",
    )
    concise: ConciseOut | None = Field(
        default=None, description="The concise answer with its type, extractor and confidence; null when withheld"
    )
    rules: list[FiredRuleOut] = Field(
        default_factory=list,
        description="Every rule of the answer path that fired (retrieval re-orderings, the answerability "
        "gate's decision, the concise answer's extractor or why it was withheld), in order",
    )
    label: str = Field(
        description="answered | refused | clarifying | uncited (a sentence cites nothing or a "
        "[n] names no source) | unsupported (a citation's quote is not in its chunk or does "
        "not support its claim: see each citation's verified, supports and reason)"
    )
    citations: list[CitationOut]
    citation_check: dict[str, Any] = Field(default_factory=dict)
    retrieved: list[RetrievedOut]
    mode: str
    notes: list[str] = Field(
        default_factory=list,
        description="What retrieval did differently and why, e.g. the vector leg skipped for a CJK question; "
        "what the answer path found in its sources, e.g. text that reads as an instruction to an assistant",
    )
    scope: dict[str, Any]
    timings_ms: dict[str, float] = Field(
        description="embed, vector, bm25, fusion, rerank, (document, neighbors,) gate (the answerability "
        "gate), generation, total (ms)"
    )
    usage: Usage
    cache: CacheOut | None = None
    trace_id: str | None = Field(
        default=None,
        description="OpenTelemetry trace id of this request (32 hex digits); null when tracing is off "
        "(OTEL_EXPORTER_OTLP_ENDPOINT unset)",
    )
    trace_url: str | None = Field(default=None, description="The trace in the tracing UI (RAGAUDIT_TRACE_URL_TEMPLATE)")


class SearchOut(BaseModel):
    query_id: str | None = None
    question: str
    mode: str
    retrieved: list[RetrievedOut]
    notes: list[str] = Field(
        default_factory=list,
        description="What retrieval did differently and why, e.g. the vector leg skipped for a CJK question",
    )
    timings_ms: dict[str, float]
    cache: CacheOut | None = None
    trace_id: str | None = Field(default=None, description="OpenTelemetry trace id; null when tracing is off")
    trace_url: str | None = None


class Count(BaseModel):
    done: int = 0
    total: int = 0


class Progress(BaseModel):
    pages: Count = Field(default_factory=Count)
    chunks: Count = Field(default_factory=Count)


class DocumentOut(BaseModel):
    id: str
    doc_name: str
    knowledge_base: str
    sha256: str
    size_bytes: int
    pages: int
    chunk_count: int
    strategy: str
    extractor: str | None
    title: str | None
    status: str
    error: str | None
    ingest_version: int
    created_at: str | None
    ingested_at: str | None
    progress: Progress = Field(
        default_factory=lambda: Progress(),
        description="Pages extracted and chunks embedded of the run in progress (or of the last run)",
    )
    built_with: dict[str, Any] | None = Field(
        default=None,
        description="What the live version was built with: strategy, embedding model, chunk and index settings",
    )
    source_path: str | None = Field(default=None, description="Landing-folder file the document comes from")
    extraction_report: dict[str, Any] | None = Field(
        default=None,
        description="What extraction left out of the live version's text, counted with examples: running "
        "headers and footers ({removed, headers, footers, pages, examples}) and hidden text ({chars, lines, "
        "by_reason, examples, ocr_layer_chars, unchecked_pages}); see ragaudit.ingest.removal",
    )


class IngestOut(BaseModel):
    status: str = Field(
        description="queued (202: runs in the background; follow GET /documents/{id}/events) | "
        "ingested (?wait=true) | unchanged"
    )
    message: str
    seconds: float
    document: DocumentOut
    duplicate_of: list[dict[str, str]] = Field(
        default_factory=list,
        description="Other documents with identical bytes ({id, knowledge_base, doc_name}); "
        "each is a separate document, searchable on its own",
    )
    replaces: dict[str, Any] | None = Field(
        default=None,
        description="When the upload is new content under an existing name: the published version "
        "it replaces once indexed ({ingest_version, sha256}); the message says so too. Upload under another name "
        "to keep both",
    )


class ErrorOut(BaseModel):
    """An error: ``detail`` says what is wrong; for a request that fails validation (422) it is
    FastAPI's list of ``{type, loc, msg, input}`` items."""

    detail: str | list[dict[str, Any]]
    code: str | None = None


class OpenAIErrorDetail(BaseModel):
    message: str
    type: str = Field(description="invalid_request_error (4xx) | server_error (5xx)")
    code: str | None = Field(default=None, description="e.g. model_not_found, invalid_api_key")
    param: str | None = None


class OpenAIErrorOut(BaseModel):
    """OpenAI's error object, sent for every error under /v1/."""

    error: OpenAIErrorDetail


class ChatMessageOut(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: str = Field(description="The answer with its [n] citation markers")
    refusal: str | None = None
    citations: list[CitationOut] = Field(description="The answer's citations, audited as in /query")
    label: str = Field(description="answered | refused | clarifying | uncited | unsupported (as /query)")


class ChatChoiceOut(BaseModel):
    model_config = ConfigDict(extra="allow")
    index: int
    message: ChatMessageOut
    finish_reason: str


class ChatUsageOut(BaseModel):
    model_config = ConfigDict(extra="allow")
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cost_usd: float | None = Field(description="USD; null = unknown price")


class ChatCompletionOut(BaseModel):
    """OpenAI's ``chat.completion`` object; ``ragaudit`` is the /query answer JSON."""

    model_config = ConfigDict(extra="allow")
    id: str
    object: str
    created: int
    model: str
    choices: list[ChatChoiceOut]
    usage: ChatUsageOut
    ragaudit: AnswerOut


class ModelOut(BaseModel):
    id: str = Field(description="ragaudit | ragaudit:KB | ragaudit:KB:MODE")
    object: str
    created: int
    owned_by: str


class ModelListOut(BaseModel):
    object: str
    data: list[ModelOut]

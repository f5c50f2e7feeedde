"""Types shared by every stage: the choice enums, a chunk and its stored payload, the scope of a
search, a retrieved chunk, a citation and an answer.

The scope rule is written once, here (``Scope.conditions``): a conjunction of conditions on a
chunk's payload fields. Everything that selects chunks by scope derives from it:

- the Qdrant filter, ``ragaudit.index.store.scope_filter``;
- the in-process check of a chunk already fetched, ``Scope.admits`` (used by
  ``ragaudit.retrieve.scope.enforce_scope``);
- the SQL clause over chunk rows, ``ragaudit.platform.db.scope_clause``.

Only this module and ``ragaudit.text`` sit below every stage; nothing here imports a stage.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TypedDict

from ragaudit.text.docnames import name_key

#: the longest question asked (characters): the API refuses longer ones (422) and a query_logs row
#: keeps at most this much of any question (``ragaudit.platform.telemetry.clip_text``)
QUESTION_MAX_CHARS = 4000


class ChoiceEnum(str, Enum):
    """A ``str`` Enum; ``parse`` raises ``ValueError`` naming the valid values.

    Subclasses define ``kind()`` (e.g. "retrieval mode") for the message.
    """

    @classmethod
    def kind(cls) -> str:
        return cls.__name__.lower()

    @classmethod
    def parse(cls, value):
        """The member for ``value`` (a member or its string value)."""
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"unknown {cls.kind()} {value!r}; valid: {cls.valid()}") from None

    @classmethod
    def valid(cls) -> str:
        """The valid values, comma-separated (for error messages and help texts)."""
        return ", ".join(m.value for m in cls)

    def __str__(self) -> str:
        return self.value


class Strategy(ChoiceEnum):
    """Chunking strategy (``ragaudit.ingest.chunking``); ``ValueError`` from ``parse`` lists the valid values."""

    fixed = "fixed"
    sentence = "sentence"
    heading = "heading"
    semantic = "semantic"

    @classmethod
    def kind(cls) -> str:
        return "chunking strategy"


DEFAULT_STRATEGY = Strategy.sentence


class Mode(ChoiceEnum):
    """Retrieval mode. ``hybrid_rerank`` needs a cross-encoder (``RAGAUDIT_RERANKER_MODEL``)."""

    vector = "vector"
    bm25 = "bm25"
    hybrid = "hybrid"
    hybrid_rerank = "hybrid_rerank"

    @classmethod
    def kind(cls) -> str:
        return "retrieval mode"


@dataclass
class Chunk:
    """A passage of a document (the chunker's output, ``ragaudit.ingest.chunking``).

    ``text`` is the passage (a slice of the document text, offsets ``char_start:char_end``);
    ``header`` is the context header prepended for embedding and BM25 (title, section path,
    table caption/header rows); ``page_breaks`` lists ``(page, offset_in_text)`` where each
    page's part begins; ``section`` is the heading path (``"A > B"``).
    ``token_count`` counts word pieces of ``header + "\\n" + text``.
    """

    index: int
    text: str
    header: str
    page_start: int
    page_end: int
    char_start: int
    char_end: int
    token_count: int
    page_breaks: list[tuple[int, int]] = field(default_factory=list)
    section: str = ""

    @property
    def indexed_text(self) -> str:
        """What is embedded and BM25-indexed: header line(s) + passage."""
        return f"{self.header}\n{self.text}" if self.header else self.text

    def page_at(self, offset: int) -> int:
        """1-based page of the character at ``offset`` in ``text``."""
        starts = [o for _, o in self.page_breaks]
        i = bisect_right(starts, offset) - 1
        return self.page_breaks[max(i, 0)][0] if self.page_breaks else self.page_start


class ChunkPayload(TypedDict, total=False):
    """The payload of a chunk's Qdrant point (written by ``ragaudit.ingest.documents.stage_chunks``).

    Identity: ``document_id``, ``doc_name`` (as given), ``doc_key`` (its NFC key),
    ``knowledge_base``, ``doc_sha256`` (content version), ``strategy`` (a ``Strategy`` value),
    ``chunk_index``, ``ingest_version``. Pages: ``page_start``/``page_end`` (1-based, inclusive),
    ``page_breaks`` (``[[page, offset in text], ...]``). Text: ``text``, ``header``, ``section``,
    ``char_start``/``char_end`` (offsets in the document text), ``token_count`` (word pieces).
    Visibility: ``live`` (false while a run's version is staged), ``primary`` (the document's
    searched strategy). Answering: ``window_spans``/``sentence_spans`` (``[[start, end], ...]``
    in ``text``). Untrusted content: ``instruction_like``/``instruction_score``/``instruction_spans``
    (``ragaudit.text.injection``: passages that read as instructions). ``clipped_pages`` (``[first, last]``) is set on a copy cut to a page range.
    Untrusted text: ``instruction_like``, ``instruction_score`` (0..1) and ``instruction_spans``
    (``[[start, end], ...]`` in ``text``) of the sentences that read as instructions to an
    assistant (``ragaudit.text.injection``). Language: ``language`` (ISO 639-1, from
    ``ragaudit.text.language.detect_language``) only on chunks of a document not in English, which
    also have the multilingual vector (``ragaudit.index.multilingual``).
    """

    document_id: str
    doc_name: str
    doc_key: str
    knowledge_base: str
    doc_sha256: str
    strategy: str
    chunk_index: int
    page_start: int
    page_end: int
    page_breaks: list[list[int]]
    char_start: int
    char_end: int
    section: str
    header: str
    text: str
    token_count: int
    ingest_version: int
    primary: bool
    live: bool
    window_spans: list[list[int]]
    sentence_spans: list[list[int]]
    instruction_like: bool
    instruction_score: float
    instruction_spans: list[list[int]]
    language: str
    clipped_pages: list[int]
    instruction_like: bool
    instruction_score: float
    instruction_spans: list[list[int]]


# ---------------------------------------------------------------------------------------- scope
@dataclass(frozen=True)
class Match:
    """Payload field ``key`` equals one of ``values`` (a point without the field never matches)."""

    key: str
    values: tuple[Any, ...]


@dataclass(frozen=True)
class Range:
    """Payload field ``key`` (an integer) is ``>= gte`` and/or ``<= lte`` (inclusive bounds)."""

    key: str
    gte: int | None = None
    lte: int | None = None


@dataclass(frozen=True)
class AnyOf:
    """At least one of ``conditions`` holds."""

    conditions: tuple[Match | Range, ...]


@dataclass(frozen=True)
class Not:
    """``condition`` does not hold (a point without the field is not excluded)."""

    condition: Match


Condition = Match | Range | AnyOf | Not


def _equal(a: Any, b: Any) -> bool:
    """``==`` that keeps booleans apart from integers (``False == 0`` in Python, not in Qdrant or SQL)."""
    return a == b and isinstance(a, bool) == isinstance(b, bool)


def holds(cond: Condition, payload: dict[str, Any]) -> bool:
    """Whether ``cond`` holds for a chunk ``payload`` (the in-process reading of a condition)."""
    if isinstance(cond, Match):
        if cond.key not in payload:
            return False
        v = payload[cond.key]
        return any(_equal(v, x) for x in cond.values)
    if isinstance(cond, Range):
        v = payload.get(cond.key)
        if v is None or isinstance(v, bool):
            return False
        return (cond.gte is None or int(v) >= cond.gte) and (cond.lte is None or int(v) <= cond.lte)
    if isinstance(cond, AnyOf):
        return any(holds(c, payload) for c in cond.conditions)
    if isinstance(cond, Not):
        return not holds(cond.condition, payload)
    raise TypeError(f"unknown scope condition {cond!r}")


@dataclass
class Scope:
    """Restricts retrieval; all set fields must match (AND), values inside one field are OR.

    ``doc_names`` are matched by their NFC key (``ragaudit.text.docnames``). ``page_min``/
    ``page_max`` are inclusive 1-based page bounds: a chunk is in scope when its page span
    ``[page_start, page_end]`` overlaps them (and is cut to them where its text is shown,
    ``ragaudit.retrieve.scope.clip_to_pages``). ``strategy`` selects chunks of one chunking
    strategy; unset, each document's primary strategy (the one it was last ingested with) is
    searched. Chunks of a version being built (``live`` false) are never in scope.
    """

    doc_names: list[str] = field(default_factory=list)
    knowledge_base: str | None = None
    document_ids: list[str] = field(default_factory=list)
    strategy: Strategy | None = None
    page_min: int | None = None
    page_max: int | None = None

    def __post_init__(self) -> None:
        if self.strategy is not None and self.strategy != "":
            self.strategy = Strategy.parse(self.strategy)  # ValueError listing the valid values
        else:
            self.strategy = None

    def conditions(self) -> list[Condition]:
        """The scope as conditions on payload fields, all of which must hold: the one definition
        the Qdrant filter, the in-process check and the SQL clause are derived from."""
        out: list[Condition] = [Not(Match("live", (False,)))]  # a run's staged chunks: never searched
        if self.doc_names:  # by the NFC key; points written before the key existed by their name
            keys = tuple(sorted({name_key(n) for n in self.doc_names}))
            names = tuple(sorted(set(self.doc_names) | set(keys)))
            out.append(AnyOf((Match("doc_key", keys), Match("doc_name", names))))
        if self.knowledge_base:
            out.append(Match("knowledge_base", (self.knowledge_base,)))
        if self.document_ids:
            out.append(Match("document_id", tuple(self.document_ids)))
        if self.strategy:
            out.append(Match("strategy", (self.strategy.value,)))
        else:  # each document's primary strategy only (others coexist for comparison)
            out.append(Not(Match("primary", (False,))))
        if self.page_min is not None:  # overlap: the span ends on or after page_min ...
            out.append(Range("page_end", gte=self.page_min))
        if self.page_max is not None:  # ... and starts on or before page_max
            out.append(Range("page_start", lte=self.page_max))
        return out

    def admits(self, payload: dict[str, Any]) -> bool:
        """True when a chunk with ``payload`` is inside the scope (every condition holds)."""
        return all(holds(c, payload) for c in self.conditions())

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if v not in (None, [], "")}
        if self.strategy:
            out["strategy"] = self.strategy.value
        return out


# ---------------------------------------------------------------------------- retrieval, answers
@dataclass
class RetrievedChunk:
    """One retrieved chunk. ``rank`` is 1-based in the final list; ``ranks``/``scores`` per retriever
    (``None`` when the chunk was not in that retriever's top-N)."""

    rank: int
    chunk_id: str
    score: float
    payload: ChunkPayload
    ranks: dict[str, int | None] = field(default_factory=dict)
    scores: dict[str, float | None] = field(default_factory=dict)
    neighbor_of: str | None = None

    @property
    def text(self) -> str:
        return self.payload.get("text", "")

    @property
    def doc_name(self) -> str:
        return self.payload.get("doc_name", "")

    @property
    def page_start(self) -> int:
        return int(self.payload.get("page_start", 0))

    @property
    def page_end(self) -> int:
        return int(self.payload.get("page_end", 0))

    def page_at(self, offset: int) -> int:
        """1-based page of character ``offset`` of ``text`` (from the stored page breaks)."""
        page = self.page_start
        for p, off in self.payload.get("page_breaks", []) or []:
            if off <= offset:
                page = p
        return page

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "chunk_id": self.chunk_id,
            "document_id": self.payload.get("document_id"),
            "doc_name": self.doc_name,
            "page_start": self.page_start,
            "page_end": self.page_end,
            "header": self.payload.get("header") or "",
            "text": self.text,
            "score": self.score,
            "ranks": {
                "vector": self.ranks.get("vector"),
                "bm25": self.ranks.get("bm25"),
                **({"multilingual": self.ranks["multilingual"]} if "multilingual" in self.ranks else {}),
                **({"fused": self.ranks["fused"]} if "fused" in self.ranks else {}),
            },
            "scores": dict(self.scores),
            "section": self.payload.get("section") or "",
            "strategy": self.payload.get("strategy"),
            "neighbor_of": self.neighbor_of,
            "instruction_like": bool(self.payload.get("instruction_like", False)),
        }


@dataclass
class Citation:
    """A citation of source ``n`` (chunk ``chunk_id``, ``page`` of the quoted sentence).

    ``claim``: the answer text (citations stripped) that carries it; ``verified``: ``quote``
    occurs (whitespace-normalised) in the cited chunk's text; ``supports``: the quote supports the
    claim (``citations.claim_support``: its numbers, dates and names are in the quote), ``reason``
    says why or what is missing. Set by ``audit_answer``; a citation not yet audited is neither.
    """

    n: int
    doc_name: str
    page: int
    chunk_id: str
    quote: str
    claim: str = ""
    verified: bool = False
    supports: bool = False
    reason: str = "not audited"
    page_end: int | None = None  # last page of a quote that runs across a page break

    @property
    def pages(self) -> list[int]:
        """Every page the quote is on (1-based): one, or two for a sentence across a page break."""
        return list(range(self.page, max(self.page, self.page_end or self.page) + 1))

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "doc_name": self.doc_name,
            "page": self.page,
            "pages": self.pages,
            "page_end": self.page_end,
            "chunk_id": self.chunk_id,
            "quote": self.quote,
            "claim": self.claim,
            "verified": self.verified,
            "supports": self.supports,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Fired:
    """One rule's verdict on one request: ``effect`` is what it did (``refused``,
    ``clarifying``, ``reordered``, ``filtered``, ``extracted``, ``withheld`` …), ``reason`` why, in words built
    from the question and the sources only; ``details`` holds small JSON values (names, ranks)."""

    rule: str
    effect: str
    reason: str
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def stage(self) -> str:
        return self.rule.split(".", 1)[0]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rule": self.rule, "stage": self.stage, "effect": self.effect, "reason": self.reason}
        if self.details:
            out["details"] = self.details
        return out


@dataclass(frozen=True)
class Concise:
    """A concise answer and why it is one: ``text`` (a span of ``sentence``, a sentence the
    answer quotes), ``type`` (what kind of value it is: a question type of ``question_type`` such
    as ``number`` or ``date``, or ``table_cell``), ``rule`` (the extractor of ``CONCISE`` that found it), ``reason`` (in
    words, for the X-ray), ``confidence`` (the calibrated probability that it is right,
    ``confidence``), ``features`` (what the confidence was computed from)."""

    text: str
    type: str
    rule: str
    reason: str
    sentence: str
    confidence: float = 0.0
    features: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "type": self.type,
            "rule": self.rule,
            "confidence": round(self.confidence, 3),
            "reason": self.reason,
            "sentence": self.sentence,
            "features": {k: round(v, 4) for k, v in self.features.items()},
        }


@dataclass
class AnswerResult:
    """Answer text with citations; usage in tokens and USD; ``label`` is answered | refused |
    clarifying | uncited | unsupported (see ``citations.answer_label``); ``notes``: what the
    answer path found about its sources that the reader should know (shown with the answer)."""

    answer: str
    citations: list[Citation]
    label: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0  # None = unknown (model not in litellm's price map)
    citation_check: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    concise: Concise | None = None  # the span answering the question (ragaudit.answer.concise); None = withheld
    rules: list[Fired] = field(default_factory=list)  # the concise-answer rules that decided

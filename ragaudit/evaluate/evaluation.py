"""Evaluation over gold question sets (JSONL in the format of the shared dev set, or the gold
pairs generated at ingestion), shared by ``POST /evaluate`` and ``ragaudit eval``.

``evaluate(svc, questions, params)`` returns the results JSON (``schema_version`` 1), the
document the evaluation dashboard reads::

    {"schema_version": 1, "dataset": {"name", "n_questions", "n_answerable", "n_unanswerable", "n_refuse"},
     "params": {...},
     "judge": "deterministic" | <litellm model>, "answerer": "extractive" | <model>,
     "modes":   {<mode>: {"hit@1", "hit@5", "hit@10", "mrr", "ndcg@10", "evidence_recall@5",
                          "evidence_recall@10", "n"}},                       # retrieval, no LLM
     "answers": {<mode>: {"n", "exact_match", "f1", "concise_coverage", "concise_precision",
                          "exact_match_gold_guided", "f1_gold_guided",
                          "f1_full", "refusal_accuracy",
                          "citation_validity", "answered_cited", "citation_support",
                          "faithfulness", "context_relevance",
                          "answer_relevance", "labels": {label: count},
                          "latency_ms": {"mean", "p50", "p95", "total"},
                          "cost_usd": {"mean", "total"}, "counts": {metric: n}}},
     "comparisons": {"<a>_vs_<b>": {"hit@5" | "f1" | "refusal_accuracy" | "citation_validity":
                                        {"a", "b", "diff", "ci95": [lo, hi], "n", "method", "resamples", "seed"}}},
     "judge_control": {"judge", "n", "failed", "all_failed", "pairs": [...]},
     "skipped_modes": {<mode>: reason}, "totals": {"questions", "seconds", "latency_ms", "cost_usd"},
     "index": {"version", "documents", "chunks", "changed_during_run"},      # ``index_snapshot``
     "questions": [{"id", "kind", "question", "gold": {...}, "ranks": {<mode>: rank | null},
                    "retrieval": {<mode>: {"rank", "list_ranks": {"vector", "bm25", "fused"},
                                           "retrieved_chunk_ids", "metrics": {...}}},
                    "answers": {<mode>: {"answer", "concise_answer", "concise_answer_gold_guided",
                                         "label", "citations",
                                         "metrics": {<name>: {"value", "reason"}}, "claims",
                                         "retrieved_chunk_ids", "latency_ms", "cost_usd"}},
                    "generator"?, "source_kind"?, "answer_type"?, "paraphrase"?}]}
     (the last four for generated gold pairs: ``ragaudit.evaluate.goldgen``)

EM / F1 are computed on the answerer's own ``concise_answer`` (the span answering the question's
type, ``ragaudit.answer.concise``; no gold guidance); ``*_gold_guided`` on the span of the whole answer that
best matches the gold answer (``metrics.concise_answer``), an upper bound. A withheld concise
answer scores 0 there; ``concise_coverage`` (a concise answer shown, over questions with a gold
answer) and ``concise_precision`` (right when shown: token F1 at least ``CONCISE_RIGHT_F1``, over
the shown ones) tell withheld from wrong, as ``bench/answer_quality.py`` does.
``dataset`` counts the questions: ``n_questions`` (all), ``n_answerable`` (every kind but
``refuse``) and ``n_unanswerable`` (``refuse``: must be refused; ``n_refuse`` is the same count).
Retrieval metrics are means over the answerable questions (each mode's ``n`` = ``n_answerable``);
answer metrics over the questions they apply to (refusal accuracy: all questions, as ``answers``'
``n``; EM/F1/citation validity: questions with a gold answer; faithfulness and relevance:
answers that were not refused; citation support: answers with a cited claim);
``counts`` says how many. Undefined means are
``null``. Only ``latency_ms``, ``seconds``, ``cost_usd`` of a paid model and the run id / time
stamps differ between two runs on the same inputs.

Matching: a retrieved chunk is a hit when it contains the evidence string (whitespace-normalised;
``multipage`` needs every part; ``also_found_in`` places count for the citation check).
Metric definitions and sources: ``ragaudit.evaluate.metrics``; judges: ``ragaudit.evaluate.judge``.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Callable, Iterable, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError
from sqlalchemy import distinct, func, select

from ragaudit.answer.citations import normalize_ws, strip_citations
from ragaudit.evaluate import metrics
from ragaudit.evaluate.judge import build_judge, judge_control
from ragaudit.platform.cache import index_version
from ragaudit.platform.db import ChunkRow
from ragaudit.platform.llmcall import failure_reason, is_llm_failure
from ragaudit.platform.settings import NO_RERANKER
from ragaudit.query import QueryService
from ragaudit.retrieve.retriever import NO_RERANKER_ERROR, Retriever
from ragaudit.types import QUESTION_MAX_CHARS, Mode, Scope

#: a 1-based page number: an integer (strict: not 2.0, "2", true, NaN or 1e400)
Page = Annotated[int, Field(strict=True, ge=1, le=1_000_000)]


class EvidencePart(BaseModel):
    """One more evidence string a ``multipage`` answer needs (``extra_evidence`` item)."""

    model_config = ConfigDict(extra="allow", strict=True)
    evidence: str = Field(min_length=1)
    page: Page | None = None


class GoldPlace(BaseModel):
    """Another place where the answer may be cited (``also_found_in`` item)."""

    model_config = ConfigDict(extra="allow", strict=True)
    doc_name: str | None = None
    page: Page | None = None


#: the kinds of question a gold set record may have (docs/evaluation.md, "Gold sets")
GOLD_KINDS = ("fact", "identifier", "table", "paraphrase", "multipage", "scoped", "refuse")


class GoldRecord(BaseModel):
    """One line of a gold set in the dev-set format (JSONL; other fields, e.g. ``note`` or
    ``source``, are kept as they are). Types are strict: a number is not a string, ``2.0`` or
    ``true`` is not a page.

    ``question``: non-empty, at most 4,000 characters (the API's limit); ``id``: a string or an
    integer (default ``q<line>``); ``answer``, ``evidence``: strings (``null`` = none);
    ``kind``: one of ``GOLD_KINDS``, ``fact`` by default (``refuse`` = should be refused, ``scoped``
    = asked of ``doc_name`` only, ``multipage`` = all of ``evidence`` + ``extra_evidence`` needed);
    ``page``: 1-based page of ``doc_name``."""

    model_config = ConfigDict(extra="allow", strict=True)
    id: str | int | None = None
    question: str = Field(min_length=1, max_length=QUESTION_MAX_CHARS)
    answer: str | None = None
    kind: str = Field(default="fact", min_length=1, max_length=64)
    doc_name: str | None = None
    page: Page | None = None
    evidence: str | None = None
    extra_evidence: list[EvidencePart] = Field(default_factory=list)
    also_found_in: list[GoldPlace] = Field(default_factory=list)

    @field_validator("question")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be blank")
        return v

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, v: str) -> str:
        if v not in GOLD_KINDS:
            raise PydanticCustomError(
                "gold_kind", "unknown kind '{kind}': one of {kinds}", {"kind": v[:64], "kinds": ", ".join(GOLD_KINDS)}
            )
        return v

    @model_validator(mode="after")
    def _finite_extras(self) -> "GoldRecord":
        where = _non_finite_extra(self.model_extra or {})
        if where is not None:
            raise PydanticCustomError(
                "finite_number", "{field}: NaN and infinities are not JSON numbers", {"field": ".".join(where)}
            )
        return self


def _non_finite_extra(extra: dict[str, Any]) -> tuple[str, ...] | None:
    """Location of the first NaN or infinity in the fields ``GoldRecord`` does not declare."""
    for key, value in extra.items():
        if key not in GoldRecord.model_fields:
            where = _non_finite(value, (key,))
            if where is not None:
                return where
    return None


def _non_finite(value: Any, loc: tuple[str, ...]) -> tuple[str, ...] | None:
    """Location of the first NaN or infinity inside ``value`` (dicts and lists walked), else None."""
    if isinstance(value, float) and not math.isfinite(value):
        return loc
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        found = _non_finite(v, (*loc, str(k)))
        if found is not None:
            return found
    return None


class DatasetError(ValueError):
    """A gold set that cannot be used. ``errors``: FastAPI-style items
    ``{"type", "loc": [line, field...], "msg", "input"}`` (``loc`` without a field when the line is
    not a JSON object); ``str()`` lists them."""

    def __init__(self, source: str, errors: list[dict[str, Any]]):
        self.source, self.errors = source, errors
        shown = "; ".join(e["msg"] for e in errors[:10])
        more = f"; and {len(errors) - 10} more" if len(errors) > 10 else ""
        super().__init__(f"{source}: {shown}{more}")


def _shown(value: Any, limit: int = 80) -> Any:
    """An input echoed in an error: scalars as they are, long or nested ones as a short repr."""
    if isinstance(value, (bool, int)) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    r = value if isinstance(value, str) else repr(value)
    return r if len(r) <= limit else r[:limit] + "…"


def record_errors(d: Any, line: int) -> list[dict[str, Any]]:
    """Problems of one parsed line (``[]`` when it is a valid ``GoldRecord``), each naming the
    line and the field."""
    if not isinstance(d, dict):
        return [{"type": "dict_type", "loc": [line], "msg": f"line {line}: must be a JSON object", "input": _shown(d)}]
    try:
        GoldRecord.model_validate(d)
    except ValidationError as e:
        errs = e.errors(include_url=False)
        if all(err["type"] != "finite_number" for err in errs):  # the check after the fields did not run
            where = _non_finite_extra(d)
            if where is not None:
                errs.append({"type": "finite_number", "loc": (), "ctx": {"field": ".".join(where)}, "input": None})
        out = []
        for err in errs:
            loc = [str(x) for x in err["loc"]]
            value = err.get("input")
            if err["type"] == "finite_number":
                loc = err["ctx"]["field"].split(".")
                msg, value = "NaN and infinities are not JSON numbers", None
            else:
                msg = err["msg"]
            out.append(
                {
                    "type": err["type"],
                    "loc": [line, *loc],
                    "msg": f"line {line}: {'.'.join(loc) or 'record'}: {msg}",
                    "input": _shown(value),
                }
            )
        return out
    return []


@dataclass
class GoldQuestion:
    id: str
    question: str
    answer: str
    kind: str
    doc_name: str | None
    page: int | None
    evidence: str
    extra_evidence: list[dict[str, Any]] = field(default_factory=list)
    also_found_in: list[dict[str, Any]] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def is_refusal(self) -> bool:
        return self.kind == "refuse"

    def gold_places(self) -> list[tuple[str, int]]:
        """(doc_name, page) places where the answer may be cited: the gold page, the pages of
        ``extra_evidence`` and the ``also_found_in`` places."""
        if not self.doc_name or self.page is None:
            return []
        out = [(self.doc_name, int(self.page))]
        out += [(self.doc_name, int(x["page"])) for x in self.extra_evidence if x.get("page") is not None]
        out += [
            (x.get("doc_name") or self.doc_name, int(x["page"]))
            for x in self.also_found_in
            if x.get("page") is not None
        ]
        return out

    @classmethod
    def from_record(cls, d: dict[str, Any], i: int = 0, source: str = "dataset") -> "GoldQuestion":
        """Build from one dev-set record (line ``i``). Raises ``DatasetError`` naming the line and
        the fields when it is not a valid ``GoldRecord``."""
        errors = record_errors(d, i)
        if errors:
            raise DatasetError(source, errors)
        return cls(
            id=str(d["id"]) if d.get("id") is not None else f"q{i}",
            question=d["question"],
            answer=d.get("answer") or "",
            kind=d.get("kind", "fact"),
            doc_name=d.get("doc_name"),
            page=d.get("page"),
            evidence=d.get("evidence") or "",
            extra_evidence=d.get("extra_evidence") or [],
            also_found_in=d.get("also_found_in") or [],
            raw=d,
        )

    def scope(self) -> Scope:
        """``scoped`` questions are asked of their own document; all others of the whole corpus."""
        return Scope(doc_names=[self.doc_name]) if self.kind == "scoped" and self.doc_name else Scope()


def judge_failure(e: BaseException) -> str:
    """Why the judge failed, as a run's results show it: an LLM failure's kind and why
    (``failure_reason``, never the provider's message), else ``"<Class>: <message>"`` cut to 200
    characters (ragaudit's own, e.g. invalid judge output)."""
    return failure_reason(e) if is_llm_failure(e) else f"{type(e).__name__}: {str(e)[:200]}"


def parse_jsonl(text: str, source: str = "dataset") -> list[GoldQuestion]:
    """Parse JSONL text in the dev-set format (``GoldRecord`` per line; blank lines skipped; a
    leading UTF-8 byte-order mark ignored). Every line is checked: raises ``DatasetError`` listing
    each bad line with its fields (malformed JSON, not an object, wrong types or values), or
    when there is no record, or when ids repeat (both lines named)."""
    text = text.removeprefix("\ufeff")
    out: list[GoldQuestion] = []
    errors: list[dict[str, Any]] = []
    first_line: dict[str, int] = {}
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as e:
            errors.append(
                {"type": "json_invalid", "loc": [i], "msg": f"line {i}: malformed JSON ({e})", "input": _shown(line)}
            )
            continue
        found = record_errors(d, i)
        if found:
            errors += found
            continue
        q = GoldQuestion.from_record(d, i, source)
        if q.id in first_line:
            errors.append(
                {
                    "type": "duplicate_id",
                    "loc": [i, "id"],
                    "msg": f"line {i}: id: {q.id!r} repeats the id of line {first_line[q.id]}",
                    "input": _shown(q.id),
                }
            )
            continue
        first_line[q.id] = i
        out.append(q)
    if errors:
        raise DatasetError(source, errors)
    if not out:
        raise DatasetError(source, [{"type": "missing", "loc": [], "msg": "no questions", "input": None}])
    return out


def load_dataset(path: str | Path) -> list[GoldQuestion]:
    """Read a JSONL gold set (UTF-8, with or without a byte-order mark). Raises ``DatasetError``
    (a ``ValueError``) naming each bad line and field."""
    return parse_jsonl(Path(path).read_text(encoding="utf-8-sig"), str(path))


def evidence_parts(q: GoldQuestion) -> list[str]:
    """Normalised evidence strings that must all be retrieved."""
    parts = [q.evidence] + [x.get("evidence", "") for x in q.extra_evidence]
    return [normalize_ws(p) for p in parts if p and p.strip()]


def evidence_ranks(q: GoldQuestion, texts: list[str]) -> list[int | None]:
    """1-based rank of the first chunk containing each evidence part (None if absent)."""
    out = []
    for ev in evidence_parts(q):
        out.append(next((i for i, t in enumerate(texts, start=1) if metrics.contains_evidence(t, ev)), None))
    return out


def hit_rank(q: GoldQuestion, texts: list[str]) -> int | None:
    """Rank at which all evidence parts have been retrieved (max over parts), or None."""
    ranks = evidence_ranks(q, texts)
    if not ranks or any(r is None for r in ranks):
        return None
    return max(ranks)  # type: ignore[arg-type]


RETRIEVAL_KEYS = ("hit@1", "hit@5", "hit@10", "mrr", "ndcg@10", "evidence_recall@5", "evidence_recall@10")
# a shown concise answer is right when its token F1 against the gold answer is at least this
CONCISE_RIGHT_F1 = 0.5
ANSWER_KEYS = (
    "exact_match",
    "f1",
    "concise_coverage",
    "concise_precision",
    "exact_match_gold_guided",
    "f1_gold_guided",
    "f1_full",
    "refusal_accuracy",
    "citation_validity",
    "answered_cited",
    "citation_support",
    "faithfulness",
    "context_relevance",
    "answer_relevance",
)
SCHEMA_VERSION = 1


def question_scope(q: GoldQuestion, base: Scope | None = None) -> Scope:
    """The scope ``q`` is asked in: ``base`` (run scope: knowledge base, strategy, ...) narrowed
    to the question's document for ``scoped`` questions."""
    b = base or Scope()
    own = q.scope()
    return Scope(
        doc_names=own.doc_names or list(b.doc_names),
        knowledge_base=b.knowledge_base,
        document_ids=list(b.document_ids),
        strategy=b.strategy,
        page_min=b.page_min,
        page_max=b.page_max,
    )


def _list_ranks(q: GoldQuestion, chunks: list[Any]) -> dict[str, int | None]:
    """Where the evidence ranked in each list: fused (final) rank and rank in the vector and BM25
    candidate lists (max over evidence parts of the best chunk containing the part; None when a
    part is not in that list, as far as the returned chunks show)."""
    out: dict[str, int | None] = {}
    parts = evidence_parts(q)
    for name in ("fused", "vector", "bm25"):
        per_part = []
        for ev in parts:
            rs = [
                (c.rank if name == "fused" else c.ranks.get(name))
                for c in chunks
                if metrics.contains_evidence(c.text, ev)
            ]
            rs = [r for r in rs if r is not None]
            per_part.append(min(rs) if rs else None)
        out[name] = max(per_part) if per_part and all(r is not None for r in per_part) else None  # type: ignore
    return out


def _retrieval_record(q: GoldQuestion, retriever: Retriever, scope: Scope, mode: Mode, k_max: int) -> dict[str, Any]:
    depth = max(k_max, retriever.candidates)
    res = retriever.retrieve(q.question, scope, depth, mode)
    top = res.chunks[:k_max]
    texts = [c.text for c in top]
    ref = evidence_parts(q)
    m = {f"hit@{k}": metrics.hit_at_k(texts, ref, k).value for k in (1, 5, 10)}
    m["mrr"] = metrics.reciprocal_rank(texts, ref).value
    m["ndcg@10"] = metrics.ndcg_at_k(texts, ref, 10).value
    m["evidence_recall@5"] = metrics.evidence_recall_at_k(texts, ref, 5).value
    m["evidence_recall@10"] = metrics.evidence_recall_at_k(texts, ref, 10).value
    rec = {
        "rank": hit_rank(q, texts),
        "list_ranks": _list_ranks(q, res.chunks),
        "retrieved_chunk_ids": [c.chunk_id for c in top],
        "metrics": m,
    }
    if q.kind == "scoped":
        rec["scope_violations"] = sum(1 for c in top if c.doc_name != q.doc_name)
    return rec


def _mean(values: Iterable[float | None]) -> float | None:
    v = [float(x) for x in values if x is not None and not (isinstance(x, float) and math.isnan(x))]
    return round(float(np.mean(v)), 6) if v else None


def retrieval_eval(
    retriever: Retriever,
    questions: Iterable[GoldQuestion],
    modes: list[Mode | str],
    k_max: int = 10,
    scope: Scope | None = None,
) -> dict[str, Any]:
    """Retrieval metrics per mode over the non-refusal questions, plus a per-question list.

    Returns ``{"modes": {mode: {"hit@1", "hit@5", "hit@10", "mrr", "ndcg@10", "evidence_recall@5",
    "evidence_recall@10", "n"}}, "questions": [{"id", "kind", "question", "ranks": {mode: rank},
    "retrieval": {mode: {...}}}]}``. Raises ``ValueError`` for an unknown mode.
    """
    qs = [q for q in questions if not q.is_refusal]
    result: dict[str, Any] = {"modes": {}, "questions": []}
    per_q = {q.id: {"id": q.id, "kind": q.kind, "question": q.question, "ranks": {}, "retrieval": {}} for q in qs}
    for m in modes:
        mode = Mode.parse(m)
        for q in qs:
            rec = _retrieval_record(q, retriever, question_scope(q, scope), mode, k_max)
            per_q[q.id]["ranks"][mode.value] = rec["rank"]
            per_q[q.id]["retrieval"][mode.value] = rec
            if "scope_violations" in rec:
                per_q[q.id].setdefault("scope_violations", {})[mode.value] = rec["scope_violations"]
        result["modes"][mode.value] = _aggregate_retrieval(per_q.values(), mode.value)
    result["questions"] = list(per_q.values())
    return result


def _aggregate_retrieval(per_q: Iterable[dict[str, Any]], mode: str) -> dict[str, Any]:
    recs = [p["retrieval"][mode] for p in per_q if mode in p.get("retrieval", {})]
    out: dict[str, Any] = {k: (_mean(r["metrics"][k] for r in recs) if recs else 0.0) for k in RETRIEVAL_KEYS}
    out["n"] = len(recs)
    return out


def question_counts(questions: Sequence[GoldQuestion]) -> dict[str, int]:
    """``{"n_questions", "n_answerable", "n_unanswerable"}``: all questions, those with evidence to
    retrieve (every kind but ``refuse``; what retrieval metrics average over) and the must-refuse
    ones (``refuse``; left out of retrieval metrics, scored by refusal accuracy with the others)."""
    refuse = sum(1 for q in questions if q.is_refusal)
    return {"n_questions": len(questions), "n_answerable": len(questions) - refuse, "n_unanswerable": refuse}


def describe_question_counts(n_questions: int, n_unanswerable: int, answers: bool) -> str:
    """The question counts in words, as ``ragaudit eval`` and the evaluation dashboard show them:
    ``"12 questions: 11 answerable (retrieval metrics), 1 must-refuse (refusal accuracy covers all
    12)"``. ``answers``: whether the run scored answers (without them nothing scores refusals)."""
    noun = "question" if n_questions == 1 else "questions"
    every = f"all {n_questions}" if n_questions != 1 else "it"
    refusals = f"refusal accuracy covers {every}" if answers else "not scored: retrieval-only run"
    return (
        f"{n_questions} {noun}: {n_questions - n_unanswerable} answerable (retrieval metrics), "
        f"{n_unanswerable} must-refuse ({refusals})"
    )


@dataclass
class EvalParams:
    """Inputs of an evaluation run.

    ``modes``: retrieval modes to compare (None = every mode the settings can run,
    ``Settings.available_modes``: no ``hybrid_rerank`` without a reranker); ``top_k``: sources given to the answerer (None =
    settings.top_k); ``k_max``: retrieval depth scored (hit@10 needs 10); ``answers``: also
    generate and score answers (False = retrieval only); ``strategy`` / ``knowledge_base`` /
    ``doc_names``: run scope; ``seed``, ``resamples``: paired bootstrap; ``judge_controls``: how
    many mismatched answer/context pairs to judge (None = settings).
    """

    modes: list[str] | None = None
    top_k: int | None = None
    k_max: int = 10
    answers: bool = True
    strategy: str | None = None
    knowledge_base: str | None = None
    doc_names: list[str] = field(default_factory=list)
    seed: int | None = None
    resamples: int | None = None
    judge_controls: int | None = None

    def scope(self) -> Scope:
        return Scope(doc_names=list(self.doc_names), knowledge_base=self.knowledge_base, strategy=self.strategy)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "EvalParams":
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


def paired_bootstrap_ci(
    a: Sequence[float], b: Sequence[float], *, resamples: int = 2000, seed: int = 0, confidence: float = 0.95
) -> dict[str, Any]:
    """Paired bootstrap confidence interval of mean(a) - mean(b) over the same questions.

    Uses ``scipy.stats.bootstrap(paired=True, method="percentile")`` (Efron & Tibshirani, "An
    Introduction to the Bootstrap", 1993, ch. 13) with a seeded generator, so the interval is
    reproducible. Returns ``{"a", "b", "diff", "ci95": [lo, hi] | None, "n", "method",
    "resamples", "seed"}``; ``ci95`` is None (with ``note``) for fewer than 2 pairs.
    ``ValueError`` when ``a`` and ``b`` differ in length.
    """
    from scipy.stats import bootstrap  # deferred: scipy.stats (seconds to import), only for bootstrap intervals

    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError("paired samples must have the same length")
    out: dict[str, Any] = {
        "a": _mean(x),
        "b": _mean(y),
        "diff": round(float(np.mean(x - y)), 6) if len(x) else None,
        "ci95": None,
        "n": int(len(x)),
        "method": "paired bootstrap, percentile",
        "resamples": resamples,
        "seed": seed,
    }
    if len(x) < 2:
        out["note"] = "fewer than 2 paired values"
        return out
    if np.all(x - y == (x - y)[0]):  # no variation in the differences: the interval is the point
        d = float((x - y)[0])
        out["ci95"] = [round(d, 6), round(d, 6)]
        return out
    res = bootstrap(
        (x, y),
        lambda u, v, axis: np.mean(u, axis=axis) - np.mean(v, axis=axis),
        paired=True,
        vectorized=True,
        n_resamples=resamples,
        confidence_level=confidence,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    out["ci95"] = [round(float(res.confidence_interval.low), 6), round(float(res.confidence_interval.high), 6)]
    return out


COMPARISONS = [("hybrid", "vector"), ("hybrid", "bm25"), ("bm25", "vector"), ("hybrid_rerank", "hybrid")]
# answer metrics compared between modes question by question (paired bootstrap), beside hit@5
COMPARED_ANSWER_METRICS = ("f1", "refusal_accuracy", "citation_validity")


def _number(x: Any) -> bool:
    """A metric value that counts: a number, not None or NaN (no gold page, a refusal)."""
    return isinstance(x, (int, float)) and not math.isnan(x)


def _answer_record(q: GoldQuestion, out: dict[str, Any], judge: Any) -> dict[str, Any]:
    label = out["label"]
    answer = out["answer"]
    contexts = [r["text"] for r in out["retrieved"]]
    m: dict[str, Any] = {}
    refused = label in metrics.REFUSAL_LABELS
    m["refusal_accuracy"] = metrics.refusal_correct(label, q.is_refusal).to_json()
    concise = "" if refused else (out.get("concise_answer") or "")
    guided = ""
    if not q.is_refusal and q.answer:
        # EM / F1 of the answerer's own concise answer (no gold guidance); the gold-guided span
        # (the best-matching span of the whole answer) is kept as an upper bound
        guided = metrics.concise_answer(answer, q.answer) if not refused else ""
        m["exact_match"] = metrics.exact_match(concise, q.answer).to_json()
        m["f1"] = metrics.token_f1(concise, q.answer).to_json()
        # a withheld concise answer scores 0 above; coverage and precision tell withheld from wrong
        m["concise_coverage"] = {
            "value": float(bool(concise)),
            "reason": "a concise answer is shown" if concise else "no concise answer (withheld or none found)",
        }
        if concise:
            f1 = float(m["f1"]["value"])
            m["concise_precision"] = {
                "value": float(f1 >= CONCISE_RIGHT_F1),
                "reason": f"token F1 {f1:.2f} against the gold answer (right at {CONCISE_RIGHT_F1} or more)",
            }
        m["exact_match_gold_guided"] = metrics.exact_match(guided, q.answer).to_json()
        m["f1_gold_guided"] = metrics.token_f1(guided, q.answer).to_json()
        m["f1_full"] = metrics.token_f1("" if refused else strip_citations(answer), q.answer).to_json()
    places = q.gold_places()
    if places:
        m["citation_validity"] = metrics.citation_validity(
            out["citations"], (out.get("citation_check") or {}).get("invalid_numbers", []), places
        ).to_json()
        if not q.is_refusal:
            ok = label == "answered" and m["citation_validity"]["value"] == 1.0
            m["answered_cited"] = {"value": float(ok), "reason": f"label {label!r}; {m['citation_validity']['reason']}"}
    if not refused and (out.get("citation_check") or {}).get("claims"):
        m["citation_support"] = metrics.citation_support(out["citation_check"]).to_json()
    claims: list[dict[str, Any]] = []
    cost = float(out["usage"].get("cost_usd") or 0.0)
    if not refused:
        try:
            j = judge.judge(q.question, answer, contexts)
            m["faithfulness"] = j.faithfulness.to_json()
            m["context_relevance"] = j.context_relevance.to_json()
            m["answer_relevance"] = j.answer_relevance.to_json()
            claims = j.claims
            cost += j.cost_usd
        except Exception as e:  # a judge API error or invalid judge output: recorded, run goes on
            for k in ("faithfulness", "context_relevance", "answer_relevance"):
                m[k] = {"value": None, "reason": f"judge failed: {judge_failure(e)}"}
    return {
        "answer": answer,
        "concise_answer": concise,
        "concise_answer_gold_guided": guided,
        "label": label,
        "citations": [
            {
                "n": c["n"],
                "doc_name": c["doc_name"],
                "page": c["page"],
                "chunk_id": c["chunk_id"],
                "verified": c.get("verified"),
                "supports": c.get("supports"),
            }
            for c in out["citations"]
        ],
        "metrics": m,
        "claims": claims,
        "retrieved_chunk_ids": [r["chunk_id"] for r in out["retrieved"]],
        "latency_ms": out["timings_ms"].get("total"),
        "cost_usd": round(cost, 8),
    }


def _aggregate_answers(per_q: list[dict[str, Any]], mode: str) -> dict[str, Any]:
    recs = [p["answers"][mode] for p in per_q if mode in p.get("answers", {})]
    out: dict[str, Any] = {"n": len(recs)}
    counts = {}
    for k in ANSWER_KEYS:
        vals = [r["metrics"][k]["value"] for r in recs if k in r["metrics"] and r["metrics"][k]["value"] is not None]
        out[k] = _mean(vals)
        counts[k] = len(vals)
    labels: dict[str, int] = {}
    for r in recs:
        labels[r["label"]] = labels.get(r["label"], 0) + 1
    lat = [r["latency_ms"] for r in recs if r["latency_ms"] is not None]
    cost = [r["cost_usd"] for r in recs]
    out["labels"] = labels
    out["latency_ms"] = (
        {
            "mean": round(float(np.mean(lat)), 2),
            "p50": round(float(np.percentile(lat, 50)), 2),
            "p95": round(float(np.percentile(lat, 95)), 2),
            "total": round(float(np.sum(lat)), 2),
        }
        if lat
        else None
    )
    out["cost_usd"] = {"mean": round(float(np.mean(cost)), 8) if cost else 0.0, "total": round(float(np.sum(cost)), 8)}
    out["counts"] = counts
    return out


_PAIR_FIELDS = ("generator", "source_kind", "answer_type", "paraphrase")


def index_snapshot(svc: Any) -> dict[str, int]:
    """The knowledge base an evaluation ran on: ``{version, documents, chunks}``. ``version`` is
    ``index_state.version``, bumped by every ingestion, re-ingestion and deletion; ``documents``
    and ``chunks`` count the live chunks and the documents they belong to. Two runs on different
    versions searched different collections (other candidates, other BM25 statistics), so a
    comparison of them does not isolate their settings."""
    with svc.sessions() as s:
        chunks, documents = s.execute(
            select(func.count(), func.count(distinct(ChunkRow.document_id))).where(ChunkRow.live.is_(True))
        ).one()
    return {"version": index_version(svc.sessions), "documents": int(documents), "chunks": int(chunks)}


def evaluate(
    svc: Any,
    questions: list[GoldQuestion],
    params: EvalParams | None = None,
    *,
    dataset_name: str = "",
    progress: Callable[[int, int], None] | None = None,
    query_service: Any = None,
) -> dict[str, Any]:
    """Run an evaluation: retrieval metrics per mode, and (``params.answers``) answers through
    ``QueryService.ask`` scored for EM/F1, refusal, citations, faithfulness and relevance, with
    a judge control and paired bootstrap CIs between modes. Returns the results JSON described
    in the module docstring. ``progress(done, total)`` is called after every question x mode.

    ``hybrid_rerank`` is skipped (listed in ``skipped_modes``) when it is asked for and no reranker
    is configured; ``params.modes`` None = ``Settings.available_modes``. Raises ``ValueError`` for an
    unknown mode, an empty question list, or when no mode is left to run (``hybrid_rerank`` alone
    without a reranker, an empty ``modes``).
    """

    p = params or EvalParams()
    if not questions:
        raise ValueError("the dataset has no questions")
    index = index_snapshot(svc)
    t0 = time.perf_counter()
    s = svc.settings
    qs = query_service or QueryService(svc)
    modes, skipped = [], {}
    for m in s.available_modes if p.modes is None else p.modes:
        mode = Mode.parse(m)
        if mode is Mode.hybrid_rerank and qs.retriever.reranker is None:
            skipped[mode.value] = NO_RERANKER
        elif mode.value not in modes:
            modes.append(mode.value)
    if not modes:  # nothing to run (hybrid_rerank alone without a reranker, or no mode named)
        raise ValueError(NO_RERANKER_ERROR if skipped else "modes: name at least one retrieval mode")
    top_k = p.top_k or s.top_k
    seed = s.eval_seed if p.seed is None else p.seed
    resamples = p.resamples or s.eval_bootstrap_resamples
    base = p.scope()
    judge = build_judge(svc) if p.answers else None
    per_q: list[dict[str, Any]] = []
    for q in questions:
        rec: dict[str, Any] = {
            "id": q.id,
            "kind": q.kind,
            "question": q.question,
            "gold": {
                "answer": q.answer,
                "doc_name": q.doc_name,
                "page": q.page,
                "evidence": evidence_parts(q),
                "places": q.gold_places(),
            },
            "ranks": {},
            "retrieval": {},
        }
        # a generated pair's provenance, for filtering a run's questions by them
        rec.update({k: q.raw[k] for k in _PAIR_FIELDS if k in q.raw})
        if p.answers:
            rec["answers"] = {}
        per_q.append(rec)
    total = len(questions) * len(modes)
    done = 0
    raw_answers: dict[str, dict[str, dict[str, Any]]] = {m: {} for m in modes}
    answerer = None
    for mode in modes:
        for q, rec in zip(questions, per_q):
            scope = question_scope(q, base)
            if not q.is_refusal:
                r = _retrieval_record(q, qs.retriever, scope, Mode(mode), p.k_max)
                rec["ranks"][mode] = r["rank"]
                rec["retrieval"][mode] = r
            if p.answers:
                out = qs.ask(q.question, scope, top_k, mode, log_query=False)
                answerer = out["usage"].get("model")
                raw_answers[mode][q.id] = out
                rec["answers"][mode] = _answer_record(q, out, judge)
            done += 1
            if progress:
                progress(done, total)
    counts = question_counts(questions)
    result: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "dataset": {"name": dataset_name, **counts, "n_refuse": counts["n_unanswerable"]},
        "params": {
            **p.to_json(),
            "modes": modes,
            "top_k": top_k,
            "seed": seed,
            "resamples": resamples,
            "judge_controls": p.judge_controls if p.judge_controls is not None else s.eval_judge_controls,
        },
        "judge": judge.name if judge else None,
        "answerer": answerer,
        "modes": {m: _aggregate_retrieval(per_q, m) for m in modes},
        "skipped_modes": skipped,
        "index": {**index, "changed_during_run": index_snapshot(svc)["version"] != index["version"]},
    }
    if p.answers:
        result["answers"] = {m: _aggregate_answers(per_q, m) for m in modes}
    comps: dict[str, Any] = {}
    for a, b in COMPARISONS:
        if a in modes and b in modes:
            c: dict[str, Any] = {}
            ids = [r for r in per_q if a in r["retrieval"] and b in r["retrieval"]]
            c["hit@5"] = paired_bootstrap_ci(
                [r["retrieval"][a]["metrics"]["hit@5"] for r in ids],
                [r["retrieval"][b]["metrics"]["hit@5"] for r in ids],
                resamples=resamples,
                seed=seed,
            )
            if p.answers:
                # the concise answer's F1 (0 when withheld), and what an offline answerer is judged
                # by besides: refusing what it must, citing a gold page
                for metric in COMPARED_ANSWER_METRICS:
                    pairs = [
                        (
                            r["answers"][a]["metrics"].get(metric, {}).get("value"),
                            r["answers"][b]["metrics"].get(metric, {}).get("value"),
                        )
                        for r in per_q
                    ]
                    pairs = [x for x in pairs if _number(x[0]) and _number(x[1])]
                    if pairs:
                        c[metric] = paired_bootstrap_ci(
                            [x[0] for x in pairs], [x[1] for x in pairs], resamples=resamples, seed=seed
                        )
            comps[f"{a}_vs_{b}"] = c
    result["comparisons"] = comps
    n_controls = result["params"]["judge_controls"]
    if p.answers and judge is not None and n_controls:
        ctl_mode = "hybrid" if "hybrid" in modes else modes[0]
        result["judge_control"] = judge_control(per_q, raw_answers[ctl_mode], judge, n_controls)
        result["judge_control"]["mode"] = ctl_mode
    lat = [a["latency_ms"] for r in per_q for a in r.get("answers", {}).values() if a["latency_ms"] is not None]
    cost = sum(a["cost_usd"] for r in per_q for a in r.get("answers", {}).values())
    result["totals"] = {
        "questions": len(questions),
        "question_mode_pairs": total,
        "seconds": round(time.perf_counter() - t0, 3),
        "latency_ms": round(float(np.sum(lat)), 2) if lat else 0.0,
        "cost_usd": round(cost, 8),
    }
    result["questions"] = per_q
    return clean_json(result)


def clean_json(obj: Any) -> Any:
    """Replace NaN/inf floats by None and tuples by lists (JSON columns and strict parsers)."""
    if isinstance(obj, float):
        return None if math.isnan(obj) or math.isinf(obj) else obj
    if isinstance(obj, dict):
        return {k: clean_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean_json(v) for v in obj]
    if isinstance(obj, np.generic):
        return clean_json(obj.item())
    return obj

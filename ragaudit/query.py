"""Question answering: retrieve, gate, answer with citations, log one telemetry row.

``QueryService.ask`` returns the answer JSON of the API and ``ragaudit ask --json``:
``{query_id, answer, label, citations[], retrieved[], timings_ms{}, usage{}, citation_check{}}``;
``label`` is answered | refused | clarifying | uncited | unsupported (``citations.answer_label``),
with timings in ms and cost in USD. Every citation carries ``verified`` (its quote occurs in the
cited chunk) and ``supports`` (the quote supports the claim that cites it) with a ``reason``.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np
from cachetools import LRUCache
from sqlalchemy import select

from ragaudit.answer.answerability import GATE, QUESTION_RULES, assess
from ragaudit.answer.answerers import (
    REFUSAL_TEXT,
    ExtractiveAnswerer,
    LLMAnswerer,
    _citation,
    audit_answer,
    other_identifier,
)
from ragaudit.answer.citations import escape_markers, normalize_ws
from ragaudit.index.embedding import cores_busy
from ragaudit.index.sparse import CJK_CHAR, tokenize
from ragaudit.platform import tracing
from ragaudit.platform.cache import AnswerCache
from ragaudit.platform.db import ChunkRow, Document, new_id, scope_clause
from ragaudit.platform.llmcall import CLIENT_DISCONNECTED, Cancellation, failure_reason, litellm_kwargs
from ragaudit.platform.rules import Fired, check_names
from ragaudit.platform.telemetry import TelemetryWriter, question_hash
from ragaudit.platform.tracing import RequestTrace
from ragaudit.retrieve.retriever import RetrievalResult, Retriever, empty_note, token_set
from ragaudit.retrieve.scope import page_range_span
from ragaudit.services import Services
from ragaudit.text.function_words import STOP_WORDS
from ragaudit.text.language import non_english
from ragaudit.text.sentences import quoted
from ragaudit.types import AnswerResult, Mode, RetrievedChunk, Scope

log = logging.getLogger(__name__)


_IN_FLIGHT = 0
_IN_FLIGHT_LOCK = threading.Lock()
_IN_FLIGHT_BUSY: Any = None  # the cores_busy() declaration held while requests overlap


def other_documents_note(question: str, sources: list[RetrievedChunk], ans: AnswerResult) -> str | None:
    """A note when the question may be about another document than the one the answer quotes:
    every content word of the question (BM25 tokens, stop words out) is held by the retrieved
    passages of two or more documents among the sources, the cited ones among them ("What was the
    probable cause of the accident?" over three accident reports). The answer is not changed: the
    note names the documents, so the user can name one or scope the question. None when the
    answer is a refusal, cites nothing, or the question's words single out one document."""
    if ans.label in ("refused", "clarifying") or not ans.citations:
        return None
    terms = {t for t in tokenize(question) if t not in STOP_WORDS and len(t) > 1}
    if not terms:
        return None
    held: dict[str, set[str]] = {}
    for c in sources:
        if c.neighbor_of is None:
            # the string retrieval's named-document check tokenized: its cached terms are reused
            held.setdefault(c.doc_name, set()).update(terms & token_set(f"{c.payload.get('header', '')}\n{c.text}"))
    cited = {c.doc_name for c in ans.citations}
    full = sorted(d for d, ts in held.items() if ts == terms)
    if len(full) < 2 or not cited <= set(full):
        return None
    return (
        f"{len(full)} documents among the sources hold every word of the question ({', '.join(full)}); "
        f"the answer quotes {', '.join(sorted(cited))}: name the document, or scope the question to it, "
        "to be sure which one it is about"
    )


@contextmanager
def request_in_flight() -> Iterator[None]:
    """Count a request (retrieval and answering) as running; while two or more run at once, one
    core is declared busy (``embedding.cores_busy``), so the model's query batches run with one
    intra-op thread fewer. The other requests' Python and store work (which holds the GIL, about
    one core) runs beside the model: a 2-thread matrix product sharing 2 cores with it waits at
    every op for its displaced thread (measured with ``bench.concurrency_compare``: see
    docs/benchmarks.md). A lone request keeps every thread."""
    global _IN_FLIGHT, _IN_FLIGHT_BUSY
    with _IN_FLIGHT_LOCK:
        _IN_FLIGHT += 1
        if _IN_FLIGHT == 2:
            _IN_FLIGHT_BUSY = cores_busy()
            _IN_FLIGHT_BUSY.__enter__()
    try:
        yield
    finally:
        with _IN_FLIGHT_LOCK:
            _IN_FLIGHT -= 1
            if _IN_FLIGHT == 1 and _IN_FLIGHT_BUSY is not None:
                _IN_FLIGHT_BUSY.__exit__(None, None, None)
                _IN_FLIGHT_BUSY = None


def requests_in_flight() -> int:
    """Requests inside ``request_in_flight`` right now (0 when idle)."""
    return _IN_FLIGHT


def build_answerer(svc: Services) -> ExtractiveAnswerer | LLMAnswerer:
    """The LLM answerer when ``llm_model`` is set, else the offline extractive one (scoring
    sentences with the store's window vectors, ``ExtractiveAnswerer``)."""
    s = svc.settings
    if s.llm_model:
        return LLMAnswerer(
            s.llm_model,
            api_base=s.llm_api_base or None,
            api_key=s.llm_api_key.get_secret_value() if s.llm_api_key else None,
            temperature=s.llm_temperature,
            max_tokens=s.llm_max_tokens,
            concise_min_confidence=s.concise_min_confidence,
            disabled_rules=check_names(s.disabled_rules),
            **litellm_kwargs(s),
        )
    return ExtractiveAnswerer(
        svc.embedder,
        store=svc.store,
        window_tokens=s.dense_window_tokens,
        concise_min_confidence=s.concise_min_confidence,
        disabled_rules=check_names(s.disabled_rules),
    )


@dataclass
class Prepared:
    """Everything decided before generation: retrieval, the numbered sources, and a gate answer
    (``clarifying`` / ``refused``) when the question cannot be answered from the sources."""

    query_id: str
    question: str
    scope: Scope
    mode: Mode
    top_k: int
    retrieval: RetrievalResult
    sources: list[RetrievedChunk]
    gate: AnswerResult | None
    t0: float
    aliases: dict[str, str] = field(default_factory=dict)  # the gate's places: {"Seoul": "Republic of Korea"}
    rules: list[Fired] = field(default_factory=list)  # the rules that fired so far: retrieval's, then the gate's
    gate_ms: float = 0.0  # the answerability gate's time (the searched documents' texts included)

    @property
    def answer_question(self) -> str:
        """The question as the offline answerer reads it: with the country each city it names is
        found as ("... live in Seoul (Republic of Korea) ..."), so the sentence that says it wins."""
        q = self.question
        for city, country in self.aliases.items():
            q = re.sub(rf"\b{re.escape(city)}\b", f"{city} ({country})", q, count=1)
        return q

    def sources_json(self) -> list[dict[str, Any]]:
        return [c.to_json() for c in self.sources]


CLARIFY_TEXT = (
    "Your question is too vague to answer from the documents: what document, topic or item do you "
    'mean? Please name it, e.g. "What does the DMCA say about ...?"'
)


class QueryService:
    """Answers questions over the knowledge base of ``svc``.

    Flow: retrieve (``mode``) -> add neighbouring chunks of cut lists/tables -> gate (vague ->
    ``clarifying``; question anchors absent from the source documents -> ``refused``, with the
    closest passage quoted so a false premise is corrected) -> answer with citations.
    """

    def __init__(
        self,
        svc: Services,
        answerer: Any = None,
        reranker: Any = None,
        telemetry: TelemetryWriter | None = None,
        cache: AnswerCache | None = None,
        gate_every_rule: bool = False,
    ):
        """``telemetry``: where query_logs rows go (default: written synchronously on ``svc``'s database);
        ``cache``: optional answer/retrieval cache (``None`` = no caching); ``gate_every_rule``: run
        every gate rule on each question and list each verdict in ``rules`` (the first still
        decides), for the ablation of each rule (``bench/rule_ablation.py``)."""
        self.gate_every_rule = gate_every_rule
        self.svc = svc
        s = svc.settings
        self.disabled = check_names(s.disabled_rules)  # ValueError listing the valid names for a typo
        self.retriever = Retriever(
            svc.store,
            svc.embedder,
            rrf_k=s.rrf_k,
            candidates=s.candidates,
            reranker=reranker if reranker is not None else svc.reranker,
            rerank_candidates=s.rerank_candidates,
            dense_skip_scripts=s.dense_skip_scripts,
            dense_windows=s.dense_window_tokens > 0,
            fusion=s.fusion,
            dense_prefetch=s.dense_prefetch,
            named_document_leg=s.named_document_leg,
            named_subset=s.named_document_subset,
            table_vote=s.table_vote,
            passage_rank=s.passage_rank,
            language_stems=s.bm25_language_stems,
            multilingual=s.multilingual_vectors,
            disabled=self.disabled,
        )
        self.answerer = answerer or build_answerer(svc)

        # rebuilt document texts per (document, version, strategy): bounded, since every
        # re-ingestion adds a version and a server runs for months
        self._doc_texts: LRUCache = LRUCache(maxsize=256)
        self._doc_texts_lock = threading.Lock()
        self._word_vecs: LRUCache = LRUCache(maxsize=100_000)  # word -> embedding, for paraphrase checks
        self.telemetry = telemetry or TelemetryWriter.from_services(svc, background=False)
        self.cache = cache

    def search(
        self, question: str, scope: Scope | None = None, top_k: int | None = None, mode: Mode | str = Mode.hybrid
    ) -> RetrievalResult:
        """Retrieval only. See ``Retriever.retrieve``."""
        return self.retriever.retrieve(question, scope, top_k or self.svc.settings.top_k, mode)

    def _document_texts(self, chunks: list[RetrievedChunk], scope: Scope | None = None) -> list[str]:
        """Full text of each document the chunks come from, rebuilt from its live chunks of the same
        strategy without the overlaps (cached per version, strategy and page range), plus the chunk
        headers. With a page range in ``scope`` only the searched pages count: the chunks the scope
        selects (``scope_clause``: page spans overlapping the range, as in the Qdrant filter), each
        cut to its pages inside the range (``page_range_span``, as retrieved chunks are). A name
        found only on a page outside the range is then missing, and the question is refused ("the
        searched documents do not mention ...") instead of answered from in-range pages about
        something else."""
        pmin = scope.page_min if scope is not None else None
        pmax = scope.page_max if scope is not None else None
        out = []
        keys = {
            (c.payload.get("document_id"), c.payload.get("doc_sha256"), c.payload.get("strategy"), pmin, pmax)
            for c in chunks
        }
        for key in keys:
            with self._doc_texts_lock:
                text = self._doc_texts.get(key)
            if text is None:
                text = self._document_text(*key)
                with self._doc_texts_lock:
                    self._doc_texts[key] = text
            out.append(text)
        out.extend(c.payload.get("header", "") for c in chunks)
        return out

    def _document_text(
        self, document_id: str, sha256: str, strategy: str | None, pmin: int | None, pmax: int | None
    ) -> str:
        """The text of one document version's chunks of ``strategy`` on pages ``pmin..pmax``, in
        order, overlaps dropped (see ``_document_texts``)."""
        scope = Scope(document_ids=[document_id], strategy=strategy, page_min=pmin, page_max=pmax)
        with self.svc.sessions() as s:
            rows = s.execute(
                select(
                    ChunkRow.id,
                    ChunkRow.page_start,
                    ChunkRow.page_end,
                    ChunkRow.char_start,
                    ChunkRow.char_end,
                    ChunkRow.text,
                )
                .join(Document, Document.id == ChunkRow.document_id)
                .where(scope_clause(scope), ChunkRow.doc_sha256 == sha256)
                .order_by(ChunkRow.char_start)
            ).all()
        # a chunk across an edge of the range is cut to its pages inside, from its stored page breaks
        edge = {
            r.id for r in rows if (pmin is not None and r.page_start < pmin) or (pmax is not None and r.page_end > pmax)
        }
        spans = {pid: page_range_span(p, pmin, pmax) for pid, p in self.svc.store.get_payloads(sorted(edge))}
        parts, end = [], 0
        for pid, _ps, _pe, cs, ce, chunk_text in rows:
            if pid in edge:
                span = spans.get(pid)
                if span is None:  # no text on the searched pages (or its point is gone)
                    continue
                a, b = span
                cs, ce, chunk_text = cs + a, cs + b, chunk_text[a:b]
            if ce <= end:
                continue
            parts.append(chunk_text[max(0, end - cs) :])
            end = ce
        return " ".join(parts)

    def _closest_word(self, term: str, passages: list[str]) -> tuple[str | None, float]:
        """The word of ``passages`` whose embedding is closest to ``term``'s, with the cosine
        (word vectors cached); ``(None, 0.0)`` when the passages have no word of 4+ letters."""

        words = sorted({w.lower() for p in passages for w in re.findall(r"[^\W\d_]{4,}", p)} - {term.lower()})
        if not words:
            return None, 0.0
        missing = [w for w in [term.lower(), *words] if w not in self._word_vecs]
        if missing:
            for w, v in zip(missing, self.svc.embedder.embed(missing)):
                self._word_vecs[w] = v
        sims = np.stack([self._word_vecs[w] for w in words]) @ self._word_vecs[term.lower()]
        i = int(np.argmax(sims))
        return words[i], float(sims[i])

    def prepare(
        self,
        question: str,
        scope: Scope | None = None,
        top_k: int | None = None,
        mode: Mode | str = Mode.hybrid,
        t0: float | None = None,
    ) -> Prepared:
        """Retrieve and decide whether to answer. ``t0``: the ``time.perf_counter()`` the request's
        total is measured from (default: now). Raises ``ValueError`` for bad input."""
        t0 = time.perf_counter() if t0 is None else t0
        top_k = top_k or self.svc.settings.top_k
        mode = Mode.parse(mode)
        scope = scope or Scope()
        res = self.retriever.retrieve(question, scope, top_k, mode, neighbors=self.svc.settings.neighbor_chunks)
        sources = list(res.chunks)  # in scope: the retriever enforces it on every chunk, neighbours included
        rules = list(res.rules)
        translated = False
        if (
            "answer.passage_language" not in self.disabled
            and sources
            and (lang := sources[0].payload.get("language"))
            and non_english(question) is None
        ):
            # the English model cannot tell which sentence of a German passage answers an English
            # question, so it would quote the English passages ranked below it
            translated = True
            kept = [c for c in sources if c.payload.get("language") == lang]
            if len(kept) < len(sources):
                note = (
                    f"the best passage is in another language than the question ({lang}): the answer reads "
                    f"its {len(kept)} passage(s) in that language, not the {len(sources) - len(kept)} others"
                )
                rules.append(Fired("answer.passage_language", "filtered", note, {"language": lang}))
            sources = kept
        gate = None
        aliases: dict[str, str] = {}
        model = getattr(self.answerer, "name", "extractive")
        t_gate = time.perf_counter()
        # the rules that read the question alone decide first, whatever was retrieved
        asked = assess(question, [], None, disabled=self.disabled | (set(GATE.names()) - QUESTION_RULES))
        if asked.label == "clarifying":
            rules += asked.fired
            gate = AnswerResult(
                CLARIFY_TEXT
                if asked.rule == "gate.vague_question"
                else f"{asked.reason[:1].upper()}{asked.reason[1:]}."
                if asked.rule == "gate.instruction_not_question"
                else f"Your question does not say what it is about ({asked.reason}): which document, item or "
                "period do you mean?",
                [],
                "clarifying",
                model,
            )
        elif res.scope_empty:  # not "nothing matches the question": nothing was searched ("dmca.PDF")
            # no "the documents do not contain the answer": no document was read
            gate = AnswerResult(f"Not answered. Nothing was searched: {empty_note(scope)}.", [], "refused", model)
        elif not sources:
            gate = AnswerResult(REFUSAL_TEXT + " Nothing in the searched documents matches it.", [], "refused", model)
        else:
            passages = [f"{c.payload.get('header', '')}\n{c.text}" for c in sources]
            verdict = assess(
                question,
                self._document_texts(sources, scope),
                passages,
                self._closest_word,
                disabled=self.disabled | QUESTION_RULES,
                every_rule=self.gate_every_rule,
                # the passages' language writes the question's common words and names in its own words
                translated=translated,
                closest=max((v for c in sources if (v := c.scores.get("vector")) is not None), default=None),
                min_closest=self.svc.settings.gate_min_similarity,
                closest_foreign=max(
                    (v for c in sources if (v := c.scores.get("multilingual")) is not None), default=None
                ),
                min_closest_foreign=self.svc.settings.gate_min_foreign_similarity,
            )
            rules += verdict.fired
            if verdict.label == "refused":
                gate = self._refusal(question, sources, verdict.reason, model, res.query_vector)
            aliases = verdict.aliases
        gate_ms = (time.perf_counter() - t_gate) * 1000
        return Prepared(new_id(), question, scope, mode, top_k, res, sources, gate, t0, aliases, rules, gate_ms)

    def _refusal(
        self, question: str, sources: list[RetrievedChunk], reason: str, model: str, query_vector: Any = None
    ) -> AnswerResult:
        """The refusal answer: ``REFUSAL_TEXT``, the gate's reason (``Verdict.reason``: what the
        searched documents lack, e.g. "The searched documents do not mention “Seoul”.") and,
        offline, the closest passage's best sentence, cited, when it shares a term of three or more
        characters (a CJK bigram) with the question (``tokenize``: stemmed, stop words out; "de" in
        "Tour de France" is no subject; a question or a passage not in English is not held to it). A sentence sharing
        none is about something else
        ("Who won the 2019 Tour de France?" over a copyright law): quoting it would present noise as
        the closest thing the documents say, so the reply says that no retrieved passage shares its words
        (a word of the question may still occur elsewhere in the documents, as the gate's reason says)."""
        text = f"{REFUSAL_TEXT} {reason[:1].upper()}{reason[1:]}."
        cites = []
        if isinstance(self.answerer, ExtractiveAnswerer):
            scored = self.answerer.score_sentences(question, sources, query_vector)
            asked = {t for t in tokenize(question) if len(t) >= 3 or (len(t) == 2 and CJK_CHAR.search(t))}
            across = non_english(question) is not None  # words are not shared across languages

            def related(s: Any) -> bool:
                return across or bool(s.chunk.payload.get("language")) or bool(asked & set(tokenize(s.text)))

            best = next((s for _, s in scored if related(s)), None)
            if best is not None:
                cites = [_citation(best)]
                text += f" The closest passage says: {escape_markers(quoted(normalize_ws(best.text)))} [{best.n}]"
            elif scored:
                text += " None of the passages retrieved for it shares a word with the question."
        return AnswerResult(text, cites, "refused", model)

    def answer(self, prep: Prepared) -> AnswerResult:
        """The gate answer, or the answerer's answer over the numbered sources, with its citations
        audited (``answer.audit_answer``: verified, supports, label)."""
        if prep.gate is not None:
            return audit_answer(prep.gate, prep.sources)
        if isinstance(self.answerer, ExtractiveAnswerer):  # the question's vector from retrieval, not again
            qvec = prep.retrieval.query_vector if not prep.aliases else None  # the question read with its places
            return self.on_target(
                audit_answer(self.answerer.answer(prep.answer_question, prep.sources, qvec), prep.sources), prep
            )
        return self.on_target(audit_answer(self.answerer.answer(prep.question, prep.sources), prep.sources), prep)

    def on_target(self, ans: AnswerResult, prep: Prepared) -> AnswerResult:
        """``ans`` after the answer stage's audit of what it is about (``answer.other_identifier``,
        unless switched off): an answer naming another item of the series the question names is
        ``unsupported``, the rule listed in its ``rules``. An answer quoting one document where
        other documents among the sources hold the question's words as fully gets a note saying so
        (``other_documents_note``)."""
        if "answer.other_identifier" not in self.disabled:
            fired = other_identifier(ans, prep.question)
            if fired is not None:
                ans.rules.append(fired)
        if note := other_documents_note(prep.question, prep.sources, ans):
            ans.notes.append(note)
        return ans

    def result_json(
        self, prep: Prepared, ans: AnswerResult, gen_ms: float, ttft_ms: float | None = None
    ) -> dict[str, Any]:
        total = (time.perf_counter() - prep.t0) * 1000
        timings = {k: round(v, 2) for k, v in prep.retrieval.timings_ms.items()}
        timings.update(gate=round(prep.gate_ms, 2), generation=round(gen_ms, 2), total=round(total, 2))
        if ttft_ms is not None:
            timings["ttft"] = round(ttft_ms, 2)
        return {
            "query_id": prep.query_id,
            "question": prep.question,
            "answer": ans.answer,
            "concise_answer": "" if ans.label in ("refused", "clarifying") or ans.concise is None else ans.concise.text,
            "concise": None if ans.label in ("refused", "clarifying") or ans.concise is None else ans.concise.to_json(),
            "rules": [f.to_json() for f in [*prep.rules, *ans.rules]],
            "label": ans.label,
            "citations": [c.to_json() for c in ans.citations],
            "citation_check": ans.citation_check,
            "retrieved": prep.sources_json(),
            "mode": prep.mode.value,
            "notes": [*prep.retrieval.notes, *ans.notes],
            "scope": prep.scope.as_dict(),
            "timings_ms": timings,
            "usage": {
                "model": ans.model,
                "prompt_tokens": ans.prompt_tokens,
                "completion_tokens": ans.completion_tokens,
                "cost_usd": ans.cost_usd,
            },
        }

    def _trace_fields(self, trace_id: str | None) -> dict[str, str | None]:
        """``trace_id`` (32 hex digits, ``None`` when tracing is off) and ``trace_url``: the trace in
        the tracing UI when ``RAGAUDIT_TRACE_URL_TEMPLATE`` is set (``{trace_id}`` filled in)."""
        template = self.svc.settings.trace_url_template
        return {
            "trace_id": trace_id,
            "trace_url": template.replace("{trace_id}", trace_id) if template and trace_id else None,
        }

    def _start_trace(
        self, endpoint: str, t0: float, question: str, scope: Scope, mode: Any, top_k: int
    ) -> RequestTrace | None:
        """The request's trace (``None`` when tracing is off): root span ``ragaudit.<endpoint>``
        starting at ``t0``; the question is an attribute only when telemetry stores questions."""
        store_q = self.svc.settings.telemetry_store_question
        return tracing.start_request(
            f"ragaudit.{endpoint}",
            t0,
            **{
                "ragaudit.endpoint": endpoint,
                "ragaudit.question": question if store_q else None,
                "ragaudit.question_sha256": question_hash(question),
                "ragaudit.mode": str(getattr(mode, "value", mode)),
                "ragaudit.top_k": int(top_k),
                "ragaudit.scope": json.dumps(scope.as_dict(), ensure_ascii=False, sort_keys=True),
            },
        )

    def _finish_trace(
        self,
        trace: RequestTrace | None,
        qid: str,
        timings_ms: dict[str, Any],
        starts: dict[str, float] | None,
        ans: AnswerResult | None,
        error_kind: str | None,
        usage: tuple[int, int, float | None] | None = None,
        **attributes: Any,
    ) -> str | None:
        """End ``trace`` with one span per stage of ``starts`` whose duration is ``timings_ms``'s
        number, the same dict the query_logs row is written from; ``usage`` (prompt tokens,
        completion tokens, cost USD) as in the row. Returns the trace id (``None`` when tracing is
        off or failed: tracing never fails a request)."""
        if trace is None:
            return None
        if usage is None and ans is not None:
            usage = (ans.prompt_tokens, ans.completion_tokens, ans.cost_usd)
        try:
            model = ans.model if ans else self._model_name()
            trace.set(
                **{
                    "ragaudit.query_id": qid,
                    "ragaudit.label": ans.label if ans else None,
                    "gen_ai.request.model": model,
                    **attributes,
                }
            )
            generation = {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": model,
                "gen_ai.usage.input_tokens": usage[0] if usage else None,
                "gen_ai.usage.output_tokens": usage[1] if usage else None,
                "ragaudit.cost_usd": usage[2] if usage else None,  # absent = unknown price
                "ragaudit.label": ans.label if ans else None,
            }
            return trace.finish(timings_ms, starts or {}, error_kind, generation)
        except Exception as e:
            log.warning("could not finish the trace: %s", type(e).__name__)
            return None

    @staticmethod
    def _starts(prep: Prepared, gen_t0: float | None = None) -> dict[str, float]:
        """Stage -> ``perf_counter()`` at its start: retrieval's stages, then generation."""
        out = dict(prep.retrieval.started)
        if gen_t0 is not None:
            out["generation"] = gen_t0
        return out

    def ask(
        self,
        question: str,
        scope: Scope | None = None,
        top_k: int | None = None,
        mode: Mode | str = Mode.hybrid,
        log_query: bool = True,
        endpoint: str = "query",
    ) -> dict[str, Any]:
        """Answer ``question`` from the top-``top_k`` chunks within ``scope``.

        Returns the answer JSON (timings in ms, cost in USD; ``trace_id`` when tracing is on).
        ``endpoint`` names the door in the query_logs row and the trace ("query", "chat",
        "mcp_ask"). Raises ``ValueError`` for an empty question or an unknown mode; API errors of
        the LLM propagate (and are logged with their error kind).
        """
        t0 = time.perf_counter()
        scope = scope or Scope()
        mode_v = Mode.parse(mode)
        k = top_k or self.svc.settings.top_k
        tr = self._start_trace(endpoint, t0, question, scope, mode_v, k) if log_query else None
        ckey = self._cache_key("answer", question, scope, mode_v, k, self._model_name()) if log_query else None
        hit = self.cache.get(ckey) if ckey else None
        if hit is not None:
            return self._serve_cached(hit, new_id(), question, scope, mode_v, k, t0, endpoint, tr)
        prep = None
        t = t0
        try:
            with request_in_flight(), tr.active() if tr else nullcontext():
                prep = self.prepare(question, scope, top_k, mode_v, t0=t0)
                t = time.perf_counter()
                ans = self.answer(prep)
                gen_ms = (time.perf_counter() - t) * 1000
        except Exception as e:
            if log_query:
                if prep is None:  # retrieval failed: nothing to show but the time spent
                    self._log(
                        new_id(),
                        question,
                        scope,
                        mode_v,
                        k,
                        None,
                        None,
                        (time.perf_counter() - t0) * 1000,
                        error_kind=type(e).__name__,
                        endpoint=endpoint,
                        trace=tr,
                    )
                else:  # the answerer failed: the row keeps what retrieval did and how long generation ran
                    self._log(
                        prep.query_id,
                        question,
                        prep.scope,
                        prep.mode,
                        prep.top_k,
                        self._partial(prep, t),
                        None,
                        (time.perf_counter() - t0) * 1000,
                        error_kind=type(e).__name__,
                        endpoint=endpoint,
                        usage=getattr(e, "usage", None),  # a reply with no text still cost its prompt
                        trace=tr,
                        starts=self._starts(prep, t),
                    )
            raise
        out = self.result_json(prep, ans, gen_ms)
        trace_id = None
        if log_query:
            trace_id = self._log(
                prep.query_id,
                question,
                prep.scope,
                prep.mode,
                prep.top_k,
                out,
                ans,
                out["timings_ms"]["total"],
                endpoint=endpoint,
                trace=tr,
                starts=self._starts(prep, t),
            )
        out.update(self._trace_fields(trace_id))
        if log_query:
            out["cache"] = {"hit": False}
            if ckey:
                self.cache.put(ckey, out)
        return out

    def stream(
        self,
        question: str,
        scope: Scope | None = None,
        top_k: int | None = None,
        mode: Mode | str = Mode.hybrid,
        log_query: bool = True,
        cancel: Cancellation | None = None,
        endpoint: str = "stream",
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Yield ``(event, data)``: ``sources`` (numbered chunks, ``trace_id``) first, then ``token``
        events (``{"text": delta}``), then ``done`` (label, citations, timings incl. ``ttft`` ms,
        usage, ``trace_id``). ``endpoint`` names the door in the row and the trace.

        Errors after the first event are yielded as ``error`` events (and logged): ``{query_id,
        error: exception class, detail: failure_reason, stage: "generation", timings_ms: retrieval
        stages, generation up to the failure and total (ms), usage: what was spent}``. ``cancel``
        (fired when the client goes away) closes the upstream LLM request; a generator cancelled
        or closed before ``done`` logs its row with ``error_kind`` ``ClientDisconnected``.
        """
        t0 = time.perf_counter()
        k = top_k or self.svc.settings.top_k
        tr = self._start_trace(endpoint, t0, question, scope or Scope(), mode, k) if log_query else None
        try:
            with request_in_flight(), tr.active() if tr else nullcontext():
                prep = self.prepare(question, scope, top_k, mode, t0=t0)
        except Exception as e:
            if log_query:
                self._log(
                    new_id(),
                    question,
                    scope or Scope(),
                    mode if isinstance(mode, Mode) else Mode.hybrid,
                    k,
                    None,
                    None,
                    (time.perf_counter() - t0) * 1000,
                    error_kind=type(e).__name__,
                    endpoint=endpoint,
                    trace=tr,
                )
            raise
        trace_fields = self._trace_fields(tr.trace_id if tr else None)
        t = time.perf_counter()
        try:
            yield (
                "sources",
                {
                    "query_id": prep.query_id,
                    "sources": [{"n": i, **c} for i, c in enumerate(prep.sources_json(), start=1)],
                    "notes": list(prep.retrieval.notes),
                    **trace_fields,
                },
            )
        except GeneratorExit:  # closed before generation began: the client left before its first byte
            if log_query:
                self._log(
                    prep.query_id,
                    question,
                    prep.scope,
                    prep.mode,
                    prep.top_k,
                    self._partial(prep, t),
                    None,
                    (time.perf_counter() - prep.t0) * 1000,
                    error_kind=CLIENT_DISCONNECTED,
                    endpoint=endpoint,
                    trace=tr,
                    starts=self._starts(prep),
                )
            raise
        t = time.perf_counter()
        ttft = None
        gen = None
        ans = None
        received: list[str] = []  # text the model streamed so far (what a cut-short row is charged for)
        try:
            if prep.gate is not None or not hasattr(self.answerer, "stream"):
                ans = self.answer(prep)
                for piece in re.findall(r"\S+\s*", ans.answer):
                    if ttft is None:
                        ttft = (time.perf_counter() - t) * 1000
                    yield "token", {"text": piece}
            else:
                gen = (
                    self.answerer.stream(prep.question, prep.sources, cancel=cancel)
                    if cancel is not None
                    else self.answerer.stream(prep.question, prep.sources)
                )
                while True:
                    try:
                        piece = next(gen)
                    except StopIteration as stop:
                        ans = self.on_target(audit_answer(stop.value, prep.sources), prep)
                        break
                    received.append(piece)
                    if ttft is None:
                        ttft = (time.perf_counter() - t) * 1000
                    yield "token", {"text": piece}
        except GeneratorExit:  # closed by the route: the client went away between two events
            if gen is not None:
                gen.close()
            if log_query:
                self._log(
                    prep.query_id,
                    question,
                    prep.scope,
                    prep.mode,
                    prep.top_k,
                    self._partial(prep, t, ttft),
                    None,
                    (time.perf_counter() - prep.t0) * 1000,
                    error_kind=CLIENT_DISCONNECTED,
                    endpoint=endpoint,
                    usage=self._spent(prep, ans, gen, received, True),
                    trace=tr,
                    starts=self._starts(prep, t),
                )
            raise
        except Exception as e:
            kind = CLIENT_DISCONNECTED if cancel is not None and cancel.cancelled else type(e).__name__
            partial = self._partial(prep, t, ttft)
            total_ms = (time.perf_counter() - prep.t0) * 1000
            left = kind == CLIENT_DISCONNECTED
            # counting what a cut-short stream spent tokenizes its text: only for a row or a listener
            spent = self._spent(prep, ans, gen, received, left, e) if log_query or not left else None
            if log_query:
                self._log(
                    prep.query_id,
                    question,
                    prep.scope,
                    prep.mode,
                    prep.top_k,
                    partial,
                    None,
                    total_ms,
                    error_kind=kind,
                    endpoint=endpoint,
                    usage=spent,
                    trace=tr,
                    starts=self._starts(prep, t),
                )
            if left:
                return  # nobody is listening
            timings = {**partial["timings_ms"], "total": round(total_ms, 2)}
            prompt_tokens, completion_tokens, cost = spent or (0, 0, 0.0)
            usage = {
                "model": self._model_name(),
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "cost_usd": cost,
            }
            yield (
                "error",
                {
                    "query_id": prep.query_id,
                    "error": type(e).__name__,
                    "detail": failure_reason(e),
                    "stage": "generation",
                    "timings_ms": timings,
                    "usage": usage,
                },
            )
            return
        out = self.result_json(prep, ans, (time.perf_counter() - t) * 1000, ttft)
        if log_query:
            self._log(
                prep.query_id,
                question,
                prep.scope,
                prep.mode,
                prep.top_k,
                out,
                ans,
                out["timings_ms"]["total"],
                endpoint=endpoint,
                trace=tr,
                starts=self._starts(prep, t),
            )
        done = {
            k: out[k]
            for k in (
                "query_id",
                "answer",
                "concise_answer",
                "concise",
                "rules",
                "label",
                "citations",
                "citation_check",
                "notes",
                "timings_ms",
                "usage",
            )
        }
        yield "done", {**done, **trace_fields}

    def _spent(
        self,
        prep: Prepared,
        ans: AnswerResult | None,
        gen: Any,
        received: list[str],
        client_left: bool,
        error: BaseException | None = None,
    ) -> tuple[int, int, float | None] | None:
        """``(prompt_tokens, completion_tokens, cost_usd)`` a stream that did not finish still cost,
        or ``None`` (nothing spent): the whole answer's usage when it was generated before being
        sent as tokens; for a model stream cut short, the prompt and the text received so far
        (``partial_usage``: the provider sends no usage then) — when text was received, or when the
        client left after the request went upstream (the provider read the prompt); for a reply
        that held no text (``error`` an ``LLMEmptyReply``), the provider's usage. A provider error
        before any text costs nothing."""
        if ans is not None:
            return ans.prompt_tokens, ans.completion_tokens, ans.cost_usd
        if error is not None and getattr(error, "usage", None) is not None:
            return error.usage  # the provider's own count of a reply that held no text
        if gen is None or not hasattr(self.answerer, "partial_usage") or not (received or client_left):
            return None
        try:
            return self.answerer.partial_usage(prep.question, prep.sources, "".join(received))
        except Exception as e:  # counting must never keep the row from being written
            log.warning("could not count the tokens of a cut-short stream (%s)", type(e).__name__)
            return None

    @staticmethod
    def _partial(prep: Prepared, gen_t0: float, ttft_ms: float | None = None) -> dict[str, Any]:
        """What a request that failed (or lost its client) after retrieval still logs: the retrieval
        stage timings (ms), the generation time up to the failure (ms), ttft when a token was sent,
        and the retrieved chunk ids, so a failed row says which stage failed and after how long."""
        timings = {k: round(v, 2) for k, v in prep.retrieval.timings_ms.items()}
        timings["generation"] = round((time.perf_counter() - gen_t0) * 1000, 2)
        if ttft_ms is not None:
            timings["ttft"] = round(ttft_ms, 2)
        return {"timings_ms": timings, "retrieved": prep.sources_json(), "citations": []}

    def _log(
        self,
        qid: str,
        question: str,
        scope: Scope,
        mode: Mode,
        top_k: int,
        out: dict | None,
        ans: AnswerResult | None,
        total_ms: float,
        error_kind: str | None = None,
        endpoint: str = "query",
        usage: tuple[int, int, float | None] | None = None,
        trace: RequestTrace | None = None,
        starts: dict[str, float] | None = None,
    ) -> str | None:
        """Write the request's query_logs row and end its trace, both from one timings dict
        (stage -> ms, ``total`` = ``total_ms``). ``usage``: ``(prompt_tokens, completion_tokens,
        cost_usd)`` spent by a request without an answer (a stream cut short); else taken from
        ``ans`` (0 without one). Returns the trace id (``None`` when tracing is off)."""
        t = dict((out or {}).get("timings_ms", {}))
        t["total"] = total_ms
        if usage is None:
            usage = (ans.prompt_tokens, ans.completion_tokens, ans.cost_usd) if ans else (0, 0, 0.0)
        trace_id = self._finish_trace(trace, qid, t, starts, ans, error_kind, usage=usage)
        self.telemetry.record(
            query_id=qid,
            endpoint=endpoint,
            question=question,
            scope=scope.as_dict(),
            mode=mode.value,
            top_k=top_k,
            strategy=scope.strategy.value if scope.strategy else None,
            model=ans.model if ans else self._model_name(),
            label=ans.label if ans else None,
            timings_ms=t,
            prompt_tokens=usage[0],
            completion_tokens=usage[1],
            cost_usd=usage[2],  # None = unknown price
            retrieved_ids=[r["chunk_id"] for r in out["retrieved"]] if out else None,
            cited_ids=[c["chunk_id"] for c in out["citations"]] if out else None,
            error_kind=error_kind,
            trace_id=trace_id,
            rules=out.get("rules") if out else None,
        )
        return trace_id

    # --- answer/retrieval cache and /search telemetry (telemetry branch) ---
    def _model_name(self) -> str:
        return getattr(self.answerer, "name", None) or getattr(self.answerer, "model", None) or "unknown"

    def _cache_key(self, kind: str, question: str, scope: Scope, mode: Mode, top_k: int, model: str):
        return (
            self.cache.key(kind, question, scope.as_dict(), mode.value, top_k, scope.as_dict().get("strategy"), model)
            if self.cache is not None
            else None
        )

    def _serve_cached(
        self,
        hit: dict,
        qid: str,
        question: str,
        scope: Scope,
        mode: Mode,
        top_k: int,
        t0: float,
        endpoint: str = "query",
        trace: RequestTrace | None = None,
    ) -> dict[str, Any]:
        """A cached answer as a new request: new query_id, cost 0, original id/cost under ``cache``;
        its trace is the root span alone (no stage ran)."""
        orig_id, usage = hit["query_id"], hit["usage"]
        total = (time.perf_counter() - t0) * 1000
        trace_id = self._finish_trace(
            trace,
            qid,
            {"total": total},
            None,
            None,
            None,
            **{
                "ragaudit.label": hit["label"],
                "ragaudit.cache_hit": True,
                "ragaudit.cache_source_id": orig_id,
                "gen_ai.request.model": usage["model"],
            },
        )
        hit.update(
            query_id=qid,
            question=question,
            timings_ms={"total": round(total, 2)},
            cache={
                "hit": True,
                "original_query_id": orig_id,
                "original_cost_usd": usage["cost_usd"],
                "original_timings_ms": hit["timings_ms"],
            },
            usage={**usage, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0},
            **self._trace_fields(trace_id),
        )
        self.telemetry.record(
            query_id=qid,
            endpoint=endpoint,
            question=question,
            scope=scope.as_dict(),
            mode=mode.value,
            top_k=top_k,
            strategy=scope.strategy.value if scope.strategy else None,
            model=usage["model"],
            label=hit["label"],
            cache_hit=True,
            cache_source_id=orig_id,
            timings_ms={"total": total},
            retrieved_ids=[r["chunk_id"] for r in hit["retrieved"]],
            cited_ids=[c["chunk_id"] for c in hit["citations"]],
            trace_id=trace_id,
        )
        return hit

    def search_logged(
        self,
        question: str,
        scope: Scope | None = None,
        top_k: int | None = None,
        mode: Mode | str = Mode.hybrid,
        endpoint: str = "search",
    ) -> dict[str, Any]:
        """Retrieval for the /search endpoint, cached and logged (one query_logs row, endpoint
        ``endpoint``: "search", "mcp_search") and traced like ``ask``.

        Returns ``{query_id, question, mode, retrieved[], timings_ms{}, cache{hit, original_query_id?},
        trace_id}`` (ms). The model named in the row is the embedding model (local: cost 0). Raises
        ``ValueError`` like ``Retriever.retrieve`` (the failure is logged with its error kind first).
        """
        t0 = time.perf_counter()
        top_k = top_k or self.svc.settings.top_k
        scope = scope or Scope()
        qid = new_id()
        model = self.svc.settings.embedding_model
        tr = self._start_trace(endpoint, t0, question, scope, mode, top_k)
        row = dict(
            query_id=qid,
            endpoint=endpoint,
            question=question,
            scope=scope.as_dict(),
            top_k=top_k,
            strategy=scope.strategy.value if scope.strategy else None,
            model=model,
        )

        def finish(timings: dict[str, Any], starts: dict[str, float] | None, error_kind: str | None = None, **kw):
            return self._finish_trace(
                tr, qid, timings, starts, None, error_kind, **{"gen_ai.request.model": None, **kw}
            )

        hit = None
        try:
            mode = Mode.parse(mode)
            ckey = self._cache_key("search", question, scope, mode, top_k, model)
            hit = self.cache.get(ckey) if ckey else None
            if hit is None:
                with request_in_flight(), tr.active() if tr else nullcontext():
                    res = self.retriever.retrieve(question, scope, top_k, mode)
        except Exception as e:
            timings = {"total": (time.perf_counter() - t0) * 1000}
            self.telemetry.record(
                **row,
                mode=str(getattr(mode, "value", mode))[:16],
                timings_ms=timings,
                error_kind=type(e).__name__,
                trace_id=finish(timings, None, type(e).__name__),
            )
            raise
        total = (time.perf_counter() - t0) * 1000
        if hit is not None:
            orig = hit["query_id"]
            trace_id = finish({"total": total}, None, **{"ragaudit.cache_hit": True, "ragaudit.cache_source_id": orig})
            hit.update(
                query_id=qid,
                question=question,
                timings_ms={"total": round(total, 2)},
                cache={
                    "hit": True,
                    "original_query_id": orig,
                    "original_cost_usd": 0.0,
                    "original_timings_ms": hit["timings_ms"],
                },
                **self._trace_fields(trace_id),
            )
            self.telemetry.record(
                **row,
                mode=mode.value,
                cache_hit=True,
                cache_source_id=orig,
                timings_ms={"total": total},
                retrieved_ids=[r["chunk_id"] for r in hit["retrieved"]],
                trace_id=trace_id,
            )
            return hit
        row_timings = {**res.timings_ms, "total": total}
        trace_id = finish(row_timings, res.started)
        timings = {k: round(v, 2) for k, v in res.timings_ms.items()}
        timings["total"] = round(total, 2)
        out = {
            "query_id": qid,
            "question": question,
            "mode": res.mode.value,
            "retrieved": [c.to_json() for c in res.chunks],
            "notes": list(res.notes),
            "timings_ms": timings,
            "cache": {"hit": False},
            **self._trace_fields(trace_id),
        }
        self.telemetry.record(
            **row,
            mode=mode.value,
            timings_ms=row_timings,
            retrieved_ids=[c.chunk_id for c in res.chunks],
            trace_id=trace_id,
        )
        if ckey:
            self.cache.put(ckey, out)
        return out

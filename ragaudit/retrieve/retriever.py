"""Hybrid retrieval: dense top-N and BM25 top-N under the same filter, fused with RRF.

Reciprocal Rank Fusion: score(d) = sum over lists L containing d of 1 / (k + rank_L(d)),
rank 1-based, k = 60 by default (Cormack, Clarke & Buettcher, "Reciprocal Rank Fusion
outperforms Condorcet and individual Rank Learning Methods", SIGIR 2009). Fusion runs in our
code, not Qdrant's, so every result reports its rank and score in each list.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import numpy as np

from ragaudit.index.embedding import Embedder
from ragaudit.index.multilingual import passage_vectors as multilingual_passage_vectors
from ragaudit.index.multilingual import query_vector as multilingual_query_vector
from ragaudit.index.multilingual import unavailable as multilingual_unavailable
from ragaudit.index.sparse import (
    CJK_CHAR,
    ROW_LABEL_MAX_WORDS,
    ROW_LABEL_MIN_WORDS,
    bm25_query_vector,
    label_words,
    question_row_terms,
    row_label,
    row_label_terms,
    tokenize,
)
from ragaudit.index.store import PointHit, VectorStore, point_id, scope_filter
from ragaudit.platform.rules import Fired, Registry, Rule
from ragaudit.retrieve import passage_rank
from ragaudit.retrieve.scope import enforce_scope
from ragaudit.text.anchors import question_anchors
from ragaudit.text.authorship import asks_authorship
from ragaudit.text.dates import MONTH_NAME, WEEKDAY
from ragaudit.text.function_words import STOP_WORDS
from ragaudit.text.language import non_english
from ragaudit.text.lines import ends_mid_list, ends_with_lead_in, is_row
from ragaudit.types import ChoiceEnum, Mode, RetrievedChunk, Scope


@dataclass
class RetrievalResult:
    chunks: list[RetrievedChunk]
    timings_ms: dict[str, float]
    mode: Mode
    candidates: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    query_vector: np.ndarray | None = None  # the question's embedding when the dense leg ran (dim,)
    scope_empty: bool = False  # no chunk at all is in the scope (a misspelt name, an empty knowledge base)
    # stage -> time.perf_counter() at its start, for the stages that ran (the trace's span starts;
    # their durations are timings_ms)
    started: dict[str, float] = field(default_factory=dict)
    rules: list[Fired] = field(default_factory=list)  # the retrieval rules that changed the ranking (RETRIEVAL)


# the refusal of mode hybrid_rerank on a server without a cross-encoder (/query, /search, /evaluate)
NO_RERANKER_ERROR = "mode hybrid_rerank needs a cross-encoder: set RAGAUDIT_RERANKER_MODEL to a local folder"
# why a scoped search found nothing when the scope itself holds no chunk (notes and the refusal say it)
EMPTY_SCOPE_NOTE = (
    "no indexed chunk is in the scope: check the document names (matched exactly, case "
    "included), knowledge base, ids and page range; GET /documents lists them"
)
# the same when no scope was given and the whole index is empty (a fresh install, a wrong data folder)
EMPTY_INDEX_NOTE = (
    "the index holds no document yet: ingest PDFs first (`ragaudit ingest FOLDER`, "
    "POST /documents or the Upload page), and check that this process uses the data folder "
    "or Qdrant URL they were ingested into"
)


def empty_note(scope: Scope) -> str:
    """Why nothing was searched: ``EMPTY_SCOPE_NOTE`` when the question had a scope (naming its
    chunking strategy as a cause when it names one: documents chunked only otherwise hold no chunk
    of it), else ``EMPTY_INDEX_NOTE`` (the whole index holds no chunk)."""
    if not scope.as_dict():
        return EMPTY_INDEX_NOTE
    if scope.strategy:
        return (
            f"{EMPTY_SCOPE_NOTE}; the scope also asks for chunking strategy '{scope.strategy.value}': "
            "the documents in scope may not have been chunked with it (each document's strategy is in "
            "GET /documents; leave strategy out to search each one's own)"
        )
    return EMPTY_SCOPE_NOTE


def query_script(question: str) -> str:
    """``"cjk"`` when most letters of ``question`` are Chinese/Japanese/Korean, else ``"latin"``."""
    letters = [ch for ch in question if ch.isalpha()]
    cjk = sum(1 for ch in letters if CJK_CHAR.match(ch))
    return "cjk" if letters and cjk / len(letters) >= 0.5 else "latin"


# a month or a day of the week: a time a question names, not a document's subject
_CALENDAR = re.compile(rf"(?i){MONTH_NAME}|{WEEKDAY}")


def reciprocal_rank_fusion(
    lists: dict[str, list[str]], k: int = 60, *, fill_missing: bool = False, tiebreak: dict[str, tuple] | None = None
) -> list[tuple[str, float]]:
    """Fuse ranked id lists with RRF (Cormack et al., SIGIR 2009).

    ``lists`` maps retriever name -> ids best first. Returns ``(id, score)`` sorted by score
    descending. ``k`` must be positive (``ValueError``).

    ``fill_missing``: an id absent from a list counts as ranked just below that list's end
    (rank ``len(list) + 1``) instead of contributing nothing, so one retriever's clear hit that
    the other did not return at all is not outranked by every id both returned far down.
    ``tiebreak``: id -> a tuple compared (descending) between ids of exactly equal score; ids
    without one, and remaining ties, fall back to the id string, so the order is deterministic.
    """
    if k <= 0:
        raise ValueError("RRF k must be positive")
    scores: dict[str, float] = {}
    for ids in lists.values():
        for r, pid in enumerate(ids, start=1):
            scores[pid] = scores.get(pid, 0.0) + 1.0 / (k + r)
    if fill_missing:
        for ids in lists.values():
            present = set(ids)
            for pid in scores:
                if pid not in present:
                    scores[pid] += 1.0 / (k + len(ids) + 1)
    tb = tiebreak or {}
    return sorted(scores.items(), key=lambda kv: (-round(kv[1], 12), tuple(-x for x in tb.get(kv[0], ())), kv[0]))


def distribution_score_fusion(scores: dict[str, dict[str, float]]) -> list[tuple[str, float]]:
    """Distribution-based score fusion (DBSF, as in Qdrant): each list's scores are scaled to
    [0, 1] over mean +- 3 standard deviations of that list, clipped, and summed; an id absent
    from a list adds 0. ``scores``: retriever name -> {id: raw score}. Ties by id."""
    fused: dict[str, float] = {}
    for per in scores.values():
        if not per:
            continue
        v = np.array(list(per.values()), dtype=float)
        mu, sd = float(v.mean()), float(v.std())
        lo, hi = mu - 3 * sd, mu + 3 * sd
        for pid, x in per.items():
            z = 0.5 if hi <= lo else min(max((x - lo) / (hi - lo), 0.0), 1.0)
            fused[pid] = fused.get(pid, 0.0) + z
    return sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))


TABLE_ROW_SHARE = 0.5  # a chunk at least this share of whose lines are table rows is a table chunk
# a question asking for a reason ("What drove the increase in merchandise inventories?") is answered
# by prose, not by the row that names its subject (Li & Roth's DESC:reason)
_REASON_Q = re.compile(r"(?i)\s*(?:why\b|what (?:drove|drives|caused|causes|led to|explains?)\b)")


def is_table_chunk(text: str) -> bool:
    """True when at least ``TABLE_ROW_SHARE`` of the non-empty lines of ``text`` are table rows
    (``ragaudit.text.lines.is_row``)."""

    lines = [ln for ln in text.splitlines() if ln.strip()]
    rows = sum(1 for ln in lines if is_row(ln))
    return bool(lines) and rows / len(lines) >= TABLE_ROW_SHARE


def table_vote_rows(question: str) -> set[str]:
    """The row labels (``sparse.question_row_terms``) a table vote can be given for: none for a
    question asking for a reason."""

    return set() if _REASON_Q.match(question) else question_row_terms(question)


def table_votes(question: str, bm25_ids: list[str], texts: dict[str, str]) -> dict[str, int]:
    """``{id: BM25 rank}`` of the BM25 candidates that are table chunks (``is_table_chunk``) holding
    a row whose whole label the question names (``sparse.row_label_terms``), unless the question
    asks for a reason. ``texts``: id -> chunk text.

    The dense leg cannot read such a chunk: a sentence embedding of a column of numbers under
    short labels is close to no question (the income statement holding "Gross margin 40,215" is
    dense rank 56 for "What was the reported gross margin for Microsoft?", BM25 rank 5). RRF then
    lets prose that both legs rank in the middle outvote it. For these chunks the dense leg
    abstains and BM25's rank stands for both (``Retriever._fuse``): rank imputation for a missing
    judgement, not a weight on either leg."""
    q_rows = table_vote_rows(question)
    if not q_rows:
        return {}
    return {
        pid: r
        for r, pid in enumerate(bm25_ids, start=1)
        if q_rows & _row_terms(texts.get(pid, "")) and is_table_chunk(texts.get(pid, ""))
    }


@lru_cache(maxsize=8192)
def _row_terms(text: str) -> frozenset[str]:
    """``sparse.row_label_terms(text)`` as a set, with each row's leading label too, cached per
    chunk text (it never changes). A row that prints a code or a unit between its label and its
    numbers ("Alligator Creek 132 QALH 0.9649 0.9560": location, voltage, code, two factors) has
    the words before its first number as its leading label ("Alligator Creek"): the label a
    question names it by."""
    out = set(row_label_terms(text))
    for line in text.splitlines():
        if row_label(line) is None:
            continue
        lead = re.split(r"\s(?=\(?[$€£]?\d)", line, maxsplit=1)[0]
        words = label_words(lead)
        if ROW_LABEL_MIN_WORDS <= len(words) <= ROW_LABEL_MAX_WORDS:
            out.add("row:" + " ".join(words))
    return frozenset(out)


def as_written(question: str, terms: list[str]) -> list[str]:
    """The words of ``question`` that give the BM25 ``terms`` (stems: "util", "wire"), in the
    question's order ("utility", "wires"), for notes a user reads; a term no word gives stays as it is."""
    out: list[str] = []
    left = set(terms)
    for w in re.findall(r"[^\W_][\w'’.-]*[^\W_]|[^\W_]", question):
        hit = left & set(tokenize(w))
        if hit and w not in out:
            out.append(w)
        left -= hit
    return out + sorted(left)


@lru_cache(maxsize=8192)
def token_set(text: str) -> frozenset[str]:
    """``set(tokenize(text))``, cached: a chunk's text never changes, and tokenizing one costs
    milliseconds (stemming)."""
    return frozenset(tokenize(text))


class Fusion(ChoiceEnum):
    """How the dense and BM25 lists are fused: ``rrf`` (Cormack et al. 2009), ``rrf_fill`` (RRF,
    an id missing from a list ranked just below its end), ``dbsf`` (distribution-based score
    fusion). Exact ties are broken by BM25 score, then dense score."""

    rrf = "rrf"
    rrf_fill = "rrf_fill"
    dbsf = "dbsf"

    @classmethod
    def kind(cls) -> str:
        return "fusion method"


RETRIEVAL = Registry(
    "retrieval",
    [
        Rule(
            "retrieval.named_document",
            "when one candidate document alone holds a term of the question, its chunks are also ranked "
            "within it (a third RRF list): identifying facts are printed once per document",
            lambda *a: None,
        ),
        Rule(
            "retrieval.named_documents",
            "when the question's names (proper names, acronyms, identifiers) are held by some candidate "
            "documents only, their passages rank first",
            lambda *a: None,
        ),
        Rule(
            "retrieval.multilingual",
            "chunks of documents not in English get their dense vote from a multilingual model (its "
            "own RRF list) for a question in another language, or within the non-English documents "
            "the two legs found: the bundled model reads English only",
            lambda *a: None,
        ),
        Rule(
            "retrieval.cross_lingual",
            "an English question whose best passage in a document not in English reads closer to it "
            "than the English candidates' best (both scored by the multilingual model) gets that "
            "model's rank as its lexical vote too: BM25 cannot match words across languages",
            lambda *a: None,
        ),
        Rule(
            "retrieval.table_vote",
            "a table chunk holding a row the question names gets BM25's rank as its dense rank too: the "
            "dense leg cannot read a column of numbers",
            lambda *a: None,
        ),
        Rule(
            "retrieval.passage_rank",
            "the fused candidates are re-ordered by where the question's words sit in each passage "
            "(its best two-line window, terms weighted by how few candidates hold them, a value of the "
            "asked type nearby) with the fused position: both legs score a chunk as a whole, so within "
            "one document they prefer the passage repeating the question's general words",
            lambda *a: None,
        ),
        Rule(
            "retrieval.title_block",
            "a question asking who wrote a document reads its title block: the opening passage of the "
            "best-ranked document, where a paper, report or judgment prints its authors, comes first",
            lambda *a: None,
        ),
        Rule(
            "retrieval.neighbours",
            "a retrieved chunk cut from a longer list or table, or ending in a lead-in, brings the next chunk",
            lambda *a: None,
        ),
    ],
)


# the English passage compared by the multilingual model is read up to this many words (its encoding
# takes ~1.3 ms a word here; on the tuning sets the first 100 words decided as the whole passage did)
CROSS_LINGUAL_WORDS = 100


class Retriever:
    """Scoped dense / BM25 / hybrid (RRF) retrieval over the chunk collection.

    The dense leg scores a chunk by its best sentence window (``dense_windows``, Qdrant
    multivector with MaxSim as in ColBERT, Khattab & Zaharia, SIGIR 2020 -- here one vector per
    window of ~64 word pieces): one vector per 200-token chunk blurs the single fact a question asks for.
    ``dense_prefetch`` > 0: MaxSim re-scores only the top ``dense_prefetch`` chunks by their single
    chunk vector (two stages, ``VectorStore.search_dense``) instead of scanning every window.

    ``table_vote``: a table chunk holding a row the question names gets BM25's rank as its dense
    rank too in RRF (``table_votes``; the dense leg cannot read a column of numbers); the chunk's
    ``scores["table_vote"]`` says so.

    ``reranker``: optional object with ``predict(list[tuple[str, str]]) -> scores``
    (a sentence-transformers ``CrossEncoder``).
    """

    def __init__(
        self,
        store: VectorStore,
        embedder: Embedder,
        *,
        rrf_k: int = 60,
        candidates: int = 20,
        reranker: Any = None,
        rerank_candidates: int = 30,
        dense_skip_scripts: str = "",
        dense_windows: bool = True,
        fusion: "Fusion | str" = "rrf",
        dense_prefetch: int = 0,
        named_document_leg: bool = False,
        named_subset: int = 3,
        table_vote: bool = False,
        passage_rank: bool = False,
        language_stems: bool = False,
        multilingual: bool = False,
        disabled: frozenset[str] = frozenset(),
    ):
        self.store = store
        self.embedder = embedder
        self.rrf_k = rrf_k
        self.candidates = candidates
        self.reranker = reranker
        self.rerank_candidates = rerank_candidates
        self.dense_skip_scripts = {x.strip() for x in dense_skip_scripts.split(",") if x.strip()}
        self.dense_windows = dense_windows
        self.fusion = Fusion.parse(fusion)
        self.dense_prefetch = dense_prefetch
        # rules of RETRIEVAL switched off by name (ragaudit.platform.rules) turn their settings off
        self.disabled = frozenset(disabled)
        on = {name: name not in self.disabled for name in RETRIEVAL.names()}
        self.named_document_leg = named_document_leg and (
            on["retrieval.named_document"] or on["retrieval.named_documents"]
        )
        self.named_by_term = on["retrieval.named_document"]
        # most documents the question's names may select to rank first (0 = off)
        self.named_subset = named_subset if on["retrieval.named_documents"] else 0
        self.table_vote = table_vote and on["retrieval.table_vote"]  # table chunks naming the question's row
        # hybrid: the fused candidates re-ordered by passage features (ragaudit.retrieve.passage_rank)
        self.passage_rank = passage_rank and on["retrieval.passage_rank"]
        self.neighbours_on = on["retrieval.neighbours"]
        self.title_block_on = on["retrieval.title_block"]
        self.language_stems = language_stems  # a question in another language also gets its stems
        # chunks of documents not in English also ranked by their multilingual vectors (a third list)
        self.multilingual = multilingual and on["retrieval.multilingual"]
        self.cross_lingual = on["retrieval.cross_lingual"]  # needs the multilingual model too

    def retrieve(
        self,
        question: str,
        scope: Scope | None = None,
        top_k: int = 5,
        mode: Mode | str = Mode.hybrid,
        neighbors: int | None = None,
    ) -> RetrievalResult:
        """Top-``top_k`` chunks for ``question`` within ``scope``, followed by up to ``neighbors``
        neighbouring chunks (``Retriever.neighbors``; ``None`` = none, no timing).

        Every chunk returned passes ``scope.enforce_scope`` (the one scope check of every path:
        fused, reranked and neighbour chunks alike; chunks straddling the page range are cut to
        it). Timings (ms): embed, vector, bm25, fusion, rerank (, neighbors). Raises
        ``ValueError`` for an empty question, ``top_k < 1`` or ``hybrid_rerank`` without a reranker.
        """
        mode = Mode.parse(mode)
        if not question or not question.strip():
            raise ValueError("question is empty")
        if top_k < 1:
            raise ValueError("top_k must be >= 1")
        if mode is Mode.hybrid_rerank and self.reranker is None:
            raise ValueError(NO_RERANKER_ERROR)
        scope = scope or Scope()
        flt = scope_filter(scope)
        n = max(self.candidates, top_k)
        # only the stages that ran: a stage that did not (the dense leg of a BM25 query, the reranker
        # without a cross-encoder) has no time, so telemetry and P50/P95 per stage leave it out
        timings: dict[str, float] = {}
        started: dict[str, float] = {}
        hits: dict[str, dict[str, PointHit]] = {}
        by_names = False  # the question's names selected some documents: their passages first
        if not self.store.exists():  # nothing ever indexed here: say so rather than "nothing matches"
            note = f"scope {scope.as_dict()}: {empty_note(scope)}" if scope.as_dict() else EMPTY_INDEX_NOTE
            return RetrievalResult([], timings, mode, notes=[note], scope_empty=True)
        notes: list[str] = []
        fired: list[Fired] = []
        use_dense = mode in (Mode.vector, Mode.hybrid, Mode.hybrid_rerank)
        script = query_script(question)
        if mode is not Mode.vector and script in self.dense_skip_scripts:
            use_dense = False
            notes.append(
                f"vector leg skipped: the question is in {script} script, which the embedding model "
                "does not cover (RAGAUDIT_DENSE_SKIP_SCRIPTS); BM25 only"
            )
        # the legs return ids and scores only; payloads are fetched for the chunks kept (one call),
        # not converted for every candidate of both lists (the reranker reads its whole pool)
        lazy = mode is not Mode.hybrid_rerank
        if use_dense:
            t = started["embed"] = time.perf_counter()
            qvec = self.embedder.embed_query(question)
            timings["embed"] = (time.perf_counter() - t) * 1000
            t = started["vector"] = time.perf_counter()
            windows = self.dense_windows and self.store.has_windows()
            if self.dense_windows and not windows:
                notes.append(
                    "vector leg: this collection has one vector per chunk (created before sentence "
                    "windows); re-ingest into a new collection for window-level (MaxSim) dense retrieval"
                )
            hits["vector"] = self._by_position(
                self.store.search_dense(
                    qvec, flt, n, windows=windows, prefetch=self.dense_prefetch, with_payload=not lazy
                )
            )
            timings["vector"] = (time.perf_counter() - t) * 1000
        if mode in (Mode.bm25, Mode.hybrid, Mode.hybrid_rerank):
            t = started["bm25"] = time.perf_counter()
            hits["bm25"] = self._by_position(
                self.store.search_sparse(
                    bm25_query_vector(question, self.language_stems), flt, n, with_payload=not lazy
                )
            )
            timings["bm25"] = (time.perf_counter() - t) * 1000
        if self.named_document_leg and len(hits) == 2 and Fusion.parse(self.fusion) is not Fusion.dbsf:
            t = started["document"] = time.perf_counter()
            named = self._named_document(question, hits, scope)
            if named is not None and named[2] and self._top_already_in(question, hits, named[0], top_k):
                named = None  # within the named documents the two legs already agree
            if named is not None:
                doc_ids, terms, _ = named
                sub = scope_filter(replace(scope, document_ids=doc_ids))
                dense_doc = self._by_position(
                    self.store.search_dense(
                        qvec, sub, n, windows=windows, prefetch=self.dense_prefetch, with_payload=not lazy
                    )
                )
                bm25_doc = self._by_position(
                    self.store.search_sparse(
                        bm25_query_vector(question, self.language_stems), sub, n, with_payload=not lazy
                    )
                )
                # fused like the two legs (exact ties by BM25, dense score, position)
                both, _ = self._fuse(
                    question,
                    {"vector": dense_doc, "bm25": bm25_doc},
                    {"vector": list(dense_doc), "bm25": list(bm25_doc)},
                )
                merged = {**bm25_doc, **dense_doc}
                scoped = {pid: merged[pid] for pid, _ in both}
                if by_names := named[2]:
                    # the documents the question's names select come first, in the order of the two
                    # legs run within them; the other documents' passages follow
                    first_docs = list(both)
                    names_note = (
                        f"the question's {', '.join(terms)} "
                        + ("is" if len(terms) == 1 else "are")
                        + f" held by {len(doc_ids)} of the "
                        "candidate documents only: their passages, ranked by both legs within them, "
                        "come first ('document')"
                    )
                else:
                    hits["document"] = scoped
                    note = (
                        "one candidate document alone holds the question's "
                        + ("word " if len(terms) == 1 else "words ")
                        + ", ".join(f"“{w}”" for w in as_written(question, terms))
                        + ": its "
                        "chunks were also ranked within it (a third RRF list, 'document')"
                    )
                    notes.append(note)
                    fired.append(Fired("retrieval.named_document", "reordered", note, {"terms": terms}))
            timings["document"] = (time.perf_counter() - t) * 1000
        ml_vector: list[np.ndarray] = []  # the question's multilingual vector, embedded once

        def ml_query() -> np.ndarray:
            if not ml_vector:
                ml_vector.append(multilingual_query_vector(question))
            return ml_vector[0]

        if self.multilingual and mode is not Mode.bm25 and hits and self.store.has_multilingual():
            if off := multilingual_unavailable():
                notes.append(f"{off}: chunks of documents not in English are ranked by the English legs only")
        if self.multilingual and mode is not Mode.bm25 and hits and not multilingual_unavailable():
            t = started["multilingual"] = time.perf_counter()
            multi = self._multilingual_leg(question, script, hits, scope, flt, n, lazy, ml_query)
            if multi is not None:
                hits["multilingual"], why = multi
                note = (
                    f"chunks of documents not in English were ranked by the multilingual model ({why}): "
                    "its list ('multilingual') replaces the English model's vote for them in RRF"
                )
                notes.append(note)
                fired.append(Fired("retrieval.multilingual", "reordered", note, {"chunks": len(multi[0])}))
            timings["multilingual"] = (time.perf_counter() - t) * 1000
        t = started["fusion"] = time.perf_counter()
        ranked_ids = {name: list(h) for name, h in hits.items()}
        if "multilingual" in hits and "vector" in hits:
            # a chunk not in English gets its dense vote from the model that reads it, not from the
            # English one (whose rank of it is noise)
            self._fill_payloads(hits, ranked_ids["vector"])
            ranked_ids["vector"] = [
                pid for pid in ranked_ids["vector"] if not hits["vector"][pid].payload.get("language")
            ]
        votes: dict[str, int] = {}
        # a model reading across languages ranked candidates in another language than the question's:
        # their words are not the question's
        across_languages = "multilingual" in hits and non_english(question) is None
        if len(hits) == 1:
            ((name, only),) = hits.items()
            fused = [(pid, h.score) for pid, h in only.items()]
        else:
            fused, votes = self._fuse(question, hits, ranked_ids)
            if by_names:
                named_first = self._names_first(hits, fused, scoped, doc_ids, first_docs)
            # both English legs rank the answer's first passage first: two votes at rank 1, which the
            # cross-lingual vote (two at best) cannot pass, so the multilingual model is not asked
            first = (named_first if by_names else fused)[0][0] if fused else None
            agreed = first is not None and all(ranked_ids.get(leg, [None])[:1] == [first] for leg in ("vector", "bm25"))
            if (
                not agreed
                and self.multilingual
                and self.cross_lingual
                and "vector" in hits
                and script != "cjk"
                and non_english(question) is None
                and self.store.has_multilingual()
                and not multilingual_unavailable()
            ):
                started.setdefault("multilingual", time.perf_counter())
                t_cross = time.perf_counter()
                # compared with the English passage the answer would come from
                crossed = self._cross_lingual(
                    ml_query(), hits, ranked_ids, named_first if by_names else fused, flt, n, lazy
                )
                # the multilingual model's time, with its leg's (query_logs.multilingual_ms)
                timings["multilingual"] = timings.get("multilingual", 0.0) + (time.perf_counter() - t_cross) * 1000
                if crossed is not None:
                    across_languages = True
                    ranked_ids, note, foreign_doc = crossed
                    fused, votes = self._fuse(question, hits, ranked_ids)
                    if by_names and foreign_doc not in doc_ids:
                        # names are matched word for word, which a document in another language
                        # cannot do: the cross-lingual evidence decides
                        by_names = False
                        note += f"; the documents holding the question's {', '.join(terms)} do not come first"
                    elif by_names:
                        named_first = self._names_first(hits, fused, scoped, doc_ids, first_docs)
                    notes.append(note)
                    fired.append(Fired("retrieval.cross_lingual", "reordered", note))
            if by_names:
                fused = named_first
                hits["document"] = scoped  # their payloads; not a list of the fusion
                notes.append(names_note)
                fired.append(Fired("retrieval.named_documents", "reordered", names_note, {"names": terms}))
            if votes:
                fired.append(
                    Fired(
                        "retrieval.table_vote",
                        "reordered",
                        f"{len(votes)} table chunk(s) holding a row the question names took BM25's rank as "
                        "their dense rank too",
                        {"chunks": len(votes)},
                    )
                )
        rank_of = {name: {pid: r for r, pid in enumerate(ids, start=1)} for name, ids in ranked_ids.items()}
        out: list[RetrievedChunk] = []
        # passage ranking reads every fused candidate; otherwise only the top_k kept are fetched
        # (not when a model reading across languages ranked candidates for an English question: a
        # passage in another language holds none of its words, which is why that model was asked)
        rank_passages = (
            self.passage_rank and mode is Mode.hybrid and len(hits) > 1 and len(fused) > 1 and not across_languages
        )
        if lazy:
            if not rank_passages:
                fused = fused[:top_k]
            self._fill_payloads(hits, [pid for pid, _ in fused])
        for pid, score in fused:
            src = next(h[pid] for h in hits.values() if pid in h)
            if lazy and not src.payload:  # deleted between the query and the fetch
                continue
            out.append(
                RetrievedChunk(
                    rank=0,
                    chunk_id=pid,
                    score=float(score),
                    payload=src.payload,
                    ranks={
                        name: rank_of.get(name, {}).get(pid)
                        for name in ("vector", "bm25", *(["multilingual"] if "multilingual" in hits else []))
                    },
                    scores={
                        name: (hits[name][pid].score if name in hits and pid in hits[name] else None)
                        for name in ("vector", "bm25", *(["multilingual"] if "multilingual" in hits else []))
                    },
                )
            )
            if len(hits) > 1:
                out[-1].scores["rrf"] = float(score)
                if pid in votes:  # a table chunk: the dense leg abstained, BM25's rank voted for both
                    out[-1].scores["table_vote"] = float(votes[pid])
        timings["fusion"] = (time.perf_counter() - t) * 1000
        if rank_passages and len(out) > 1:
            t = started["rerank"] = time.perf_counter()
            out, note = self._passage_rank(question, out, top_k)
            if note:
                notes.append(note)
                fired.append(Fired("retrieval.passage_rank", "reordered", note))
            timings["rerank"] = (time.perf_counter() - t) * 1000
        if mode is Mode.hybrid_rerank and out:
            t = started["rerank"] = time.perf_counter()
            pool = out[: self.rerank_candidates]
            scores = self.reranker.predict([(question, c.text) for c in pool])
            for c, s in zip(pool, scores):
                c.scores["rerank"] = float(s)
                c.score = float(s)
            out = sorted(pool, key=lambda c: -c.score)
            timings["rerank"] = (time.perf_counter() - t) * 1000
        out = out[:top_k]
        if self.title_block_on and out and asks_authorship(question):
            out, note = self._title_block(out, top_k, rank_of)
            if note:
                notes.append(note)
                fired.append(Fired("retrieval.title_block", "reordered", note, {"doc_name": out[0].doc_name}))
        for i, c in enumerate(out, start=1):
            c.rank = i
        if neighbors is not None and self.neighbours_on:
            t = started["neighbors"] = time.perf_counter()
            added = self.neighbors(out, neighbors)
            out += added
            timings["neighbors"] = (time.perf_counter() - t) * 1000
            if added:
                fired.append(
                    Fired(
                        "retrieval.neighbours",
                        "added",
                        f"{len(added)} chunk(s) continuing a retrieved list, table or lead-in were added",
                    )
                )
        out, scope_notes = enforce_scope(scope, out)
        empty = not out and not self.store.count_matching(scope_filter(scope))
        if empty:
            scope_notes.append(f"scope {scope.as_dict()}: {empty_note(scope)}" if scope.as_dict() else EMPTY_INDEX_NOTE)
        return RetrievalResult(
            out,
            timings,
            mode,
            ranked_ids,
            notes + scope_notes,
            qvec if use_dense else None,
            scope_empty=empty,
            started=started,
            rules=fired,
        )

    @staticmethod
    def _passage_rank(question: str, out: list[RetrievedChunk], top_k: int) -> tuple[list[RetrievedChunk], str | None]:
        """``out`` (the fused candidates, best first) re-ordered by ``passage_rank.order``, each
        chunk's ``score`` and ``scores["passage_rank"]`` set to its passage-rank score (the RRF
        score stays in ``scores["rrf"]``, its fused position in ``ranks["fused"]``); and a note
        when the top ``top_k`` changed (which passage came first and from which fused position),
        else None."""
        cands = [passage_rank.Candidate(c.text, c.doc_name, i) for i, c in enumerate(out, start=1)]
        idx, score = passage_rank.order(question, cands)
        for position, (c, s) in enumerate(zip(out, score), start=1):
            c.ranks["fused"] = position  # where fusion put it: the X-ray shows both orders
            c.scores["passage_rank"] = round(float(s), 4)
            c.score = float(s)  # the final order's score, as the cross-encoder's in hybrid_rerank
        ranked = [out[i] for i in idx]
        if [c.chunk_id for c in ranked[:top_k]] == [c.chunk_id for c in out[:top_k]]:
            return ranked, None
        first = idx[0] + 1
        moved = sum(1 for i in idx[:top_k] if i >= top_k)
        note = (
            f"passages re-ordered by where the question's words sit in them: the first passage was "
            f"fused #{first}"
            + (f", and {moved} passage(s) from below the fused top {top_k} entered it" if moved else "")
            + " (scores.passage_rank)"
        )
        return ranked, note

    def _multilingual_leg(
        self,
        question: str,
        script: str,
        hits: dict[str, dict[str, PointHit]],
        scope: Scope,
        flt: Any,
        n: int,
        lazy: bool,
        ml_query: Any,
    ) -> tuple[dict[str, PointHit], str] | None:
        """``({id: hit} best first, why)``: the top ``n`` chunks by their multilingual vector
        (``ragaudit.index.multilingual``; only chunks of documents not in English have one), or
        None when the leg does not apply.

        - a question in another language than English (``non_english``) or mostly in CJK
          script: every such chunk in ``scope``;
        - an English question: the chunks of the non-English documents among the candidates
          (their payload's ``language``) that BM25 found or that hold a word of the question: an
          English question that names a German document's subject ("Bundestag", "Argentina")
          brings that document in, but neither English leg can tell which of its passages
          answers. A candidate the English dense leg alone found without such a word does not
          count (its rank of a German passage is noise: "What is the capital of Australia?" would
          bring in a German statute), unless the question is scoped to documents and every
          candidate of both legs is from one not in English (then only such documents are
          searched).

        None when the collection has no multilingual vectors or no such candidate is found.
        ``ml_query()``: the question's multilingual vector (``multilingual.query_vector``, computed
        once per retrieval)."""
        if not self.store.has_multilingual():
            return None
        if script == "cjk" or non_english(question) is not None:
            sub, why = flt, "the question is not in English"
        else:
            ids = list(dict.fromkeys(pid for hs in hits.values() for pid in hs))
            self._fill_payloads(hits, ids)
            every = [h for hs in hits.values() for h in hs.values()]
            foreign = [h for h in every if h.payload.get("language") and h.payload.get("document_id")]
            only_foreign = bool(scope.doc_names or scope.document_ids) and len(foreign) == len(every)
            words = {t for t in tokenize(question) if t not in STOP_WORDS and len(t) > 2 and not t.isdigit()}
            found_by = (
                foreign
                if only_foreign
                else [
                    h
                    for h in foreign
                    if h.id in hits.get("bm25", {})
                    or words & token_set(f"{h.payload.get('header', '')}\n{h.payload.get('text', '')}")
                ]
            )
            docs = sorted({h.payload["document_id"] for h in found_by})
            if not docs:
                return None
            if scope.document_ids:
                docs = [d for d in docs if d in scope.document_ids]
            if not docs:
                return None
            sub = scope_filter(replace(scope, document_ids=docs))
            why = f"{len(docs)} candidate document(s) not in English"
        found = self.store.search_multilingual(ml_query(), sub, n, with_payload=not lazy)
        if not found:
            return None
        return self._by_position(found), why

    def _names_first(
        self,
        hits: dict[str, dict[str, PointHit]],
        fused: list[tuple[str, float]],
        scoped: dict[str, PointHit],
        doc_ids: list[str],
        first_docs: list[tuple[str, float]],
    ) -> list[tuple[str, float]]:
        """``fused`` with the named documents' passages first: theirs in the fused order, then those
        only the legs run within them found (``first_docs``), then the other documents' passages."""
        self._fill_payloads(hits, [pid for pid, _ in fused])  # lazily fetched legs have none
        own = set(scoped)
        for hs in hits.values():
            own |= {pid for pid, h in hs.items() if h.payload.get("document_id") in doc_ids}
        kept = [(pid, sc) for pid, sc in fused if pid in own]
        seen = {pid for pid, _ in kept}
        kept += [(pid, sc) for pid, sc in first_docs if pid not in seen]
        ahead = {pid for pid, _ in kept}
        return kept + [(pid, sc) for pid, sc in fused if pid not in ahead]

    def _cross_lingual(
        self,
        qv: np.ndarray,
        hits: dict[str, dict[str, PointHit]],
        ranked_ids: dict[str, list[str]],
        fused: list[tuple[str, float]],
        flt: Any,
        n: int,
        lazy: bool,
    ) -> tuple[dict[str, list[str]], str, str | None] | None:
        """``(ranked_ids, note, document id of the best foreign passage)`` with a cross-lingual list
        added, or None when the check fails. ``qv``: the question's multilingual vector.

        An English question about a passage in another language gets no BM25 vote (no word in
        common) and, from the English legs, ranks below English passages that share its words. The
        multilingual model reads both languages: its best passage among the chunks not in English
        within ``flt`` (top ``n``, cosine of e5 vectors) is compared with the same model's score of
        the best English passage of the fusion ``fused`` (its first ``CROSS_LINGUAL_WORDS`` words
        embedded at query time, ~0.13 s here). Only when the foreign passage scores higher do the chunks not in
        English get that list's ranks twice in RRF, as their dense and as their lexical vote
        (``ranked_ids["multilingual"]`` replaced, ``ranked_ids["cross_lingual"]`` added; the
        English model's ranks of them dropped). Both scores are in the note. Not called when both
        English legs rank the first passage first (the vote could not pass it): on the tuning sets
        every answer was the same without those calls, and a question took ~0.05-0.1 s less."""
        found = self.store.search_multilingual(qv, flt, n, with_payload=not lazy)
        if not found:
            return None
        head = [pid for pid, _ in fused[:10]]
        self._fill_payloads(hits, head)
        top_english = next(
            (
                h
                for h in (next(hs[pid] for hs in hits.values() if pid in hs) for pid in head)
                if not h.payload.get("language") and h.payload.get("text")
            ),
            None,
        )
        if top_english is None:
            return None
        head_words = " ".join(top_english.payload["text"].split()[:CROSS_LINGUAL_WORDS])
        english = float(multilingual_passage_vectors([head_words])[0] @ qv)
        foreign = max(float(h.score) for h in found)
        if foreign <= english:
            return None
        listed = self._by_position(found)
        first = next(iter(listed))
        self._fill_payloads({"multilingual": listed}, [first])
        foreign_doc = listed[first].payload.get("document_id")
        hits["multilingual"] = {**listed, **{k: v for k, v in hits.get("multilingual", {}).items() if k not in listed}}
        ids = list(listed)
        self._fill_payloads(hits, ranked_ids.get("vector", []))
        out = {name: list(v) for name, v in ranked_ids.items()}
        if "vector" in out:
            out["vector"] = [pid for pid in out["vector"] if not hits["vector"][pid].payload.get("language")]
        out["multilingual"] = ids
        out["cross_lingual"] = ids
        note = (
            f"the best passage not in English reads closer to the question than the best English one "
            f"(multilingual model: {foreign:.3f} against {english:.3f}): passages not in English were ranked "
            "by that model in place of word matching too, which cannot match across languages ('cross_lingual')"
        )
        return out, note, foreign_doc

    def _top_already_in(
        self, question: str, hits: dict[str, dict[str, PointHit]], doc_ids: list[str], top_k: int
    ) -> bool:
        """True when the ``top_k`` passages of the two legs' fusion all come from ``doc_ids`` (the
        documents the question's names select): they then need no re-ranking within them. Fused as
        the final list is (``_fuse``: exact ties by BM25, dense score, position); with
        ties broken by point id, which embeds the random document id, the answer flipped between
        two fresh ingestions of the same files (Apple's R&D asked among five companies' 10-Qs)."""
        fused, _ = self._fuse(question, hits, {k: list(v) for k, v in hits.items()})
        first = [next(h[pid] for h in hits.values() if pid in h) for pid, _ in fused[:top_k]]
        return all(h.payload.get("document_id") in doc_ids for h in first)

    def _named_document(
        self, question: str, hits: dict[str, dict[str, PointHit]], scope: Scope
    ) -> tuple[list[str], list[str], bool] | None:
        """``(document ids, naming terms, by_names)`` for the documents the question names among those
        its dense and BM25 candidates come from, or None.

        - **By the question's names** (``by_names`` True; ``named_subset`` > 0): the documents whose
          candidate chunks (header and text) hold the most of the question's names (proper names,
          acronyms, identifiers of 3+ characters; not months or days), when that is some but not
          all candidate documents and at most ``named_subset`` of them. A filing names its company
          throughout and another company's filing rarely does ("Intel's effective tax rate" among
          four companies' 10-Qs); "NTSB" and "Tallahassee" pick the Tallahassee report, not a paper
          that mentions "Florida" or another NTSB report.
        - **By one term** (``by_names`` False): the one document whose candidate chunks hold some
          content term of the question (BM25 tokens, stop words out) that no other candidate
          document's hold, when it is the only such document, holds as many of the question's names
          as any candidate document (NVIDIA's filing alone holding "spend" is not the document
          "How much did Apple spend ...?" identifies), is not outside the names' choice, and is
          not the one document the names select (then its passages come first, as above).
          Identifying facts are often printed once per document (an accident report's location
          and registration on page 1), so the chunks holding what the question asks (the pilot's
          age on page 2) do not repeat them and rank below other documents' chunks.

        None when neither applies, or the scope already names one document."""
        if len(scope.document_ids) == 1 or len(scope.doc_names) == 1:
            return None

        q_terms = {t for t in tokenize(question) if t not in STOP_WORDS and len(t) > 1}
        if not q_terms:
            return None
        ids = list(dict.fromkeys(pid for hs in hits.values() for pid in hs))
        self._fill_payloads(hits, ids)
        per_doc: dict[str, set[str]] = {}
        for pid in ids:
            h = next(hs[pid] for hs in hits.values() if pid in hs)
            doc = h.payload.get("document_id")
            if doc:
                text = f"{h.payload.get('header', '')}\n{h.payload.get('text', '')}"
                per_doc.setdefault(doc, set()).update(q_terms & token_set(text))
        if len(per_doc) < 2:
            return None
        in_scope = (lambda d: d in scope.document_ids) if scope.document_ids else (lambda d: True)
        held = self._names_held(question, per_doc)
        most = max(len(v) for v in held.values())
        by_names = self._named_by_names(held) if self.named_subset else None
        naming = {d: sorted(ts - set().union(*(o for e, o in per_doc.items() if e != d))) for d, ts in per_doc.items()}
        named = [(d, ts) for d, ts in naming.items() if ts]
        if (
            self.named_by_term
            and len(named) == 1
            and in_scope(named[0][0])
            and len(held[named[0][0]]) == most
            and (by_names is None or named[0][0] in by_names[0])
            and not (by_names is not None and by_names[0] == [named[0][0]])
        ):
            return [named[0][0]], named[0][1], False
        if by_names is None:
            return None
        docs = [d for d in by_names[0] if in_scope(d)]
        return (docs, by_names[1], True) if docs else None

    @staticmethod
    def _names_held(question: str, per_doc: dict[str, set[str]]) -> dict[str, list[str]]:
        """Document id -> the question's names (proper names, acronyms, identifiers of 3+
        characters; not dates, months or days) whose every term its candidate chunks hold
        (``per_doc``: document id -> the question's terms its candidate chunks hold)."""
        count: dict[str, list[str]] = {d: [] for d in per_doc}
        for a in question_anchors(question):
            if a.kind == "date" or _CALENDAR.fullmatch(a.text) or len(re.sub(r"\W", "", a.text)) < 3:
                continue  # "December": a time; "HP", "FL": a unit or an abbreviation as often as a name
            toks = {t for t in tokenize(a.text) if t not in STOP_WORDS and len(t) > 1}
            for d, ts in per_doc.items():
                if toks and toks <= ts:
                    count[d].append(a.text)
        return count

    def _named_by_names(self, count: dict[str, list[str]]) -> tuple[list[str], list[str]] | None:
        """``(document ids, names)``: the candidate documents holding the most of the question's
        names (``count``: document id -> the names it holds, from ``_names_held``), when they are
        some but not all and at most ``named_subset``; else None (see ``_named_document``)."""
        most = max(len(v) for v in count.values())
        docs = sorted(d for d, v in count.items() if most and len(v) == most)
        if not docs or len(docs) >= len(count) or len(docs) > self.named_subset:
            return None
        return docs, sorted({n for d in docs for n in count[d]})

    def _by_position(self, leg: list[PointHit]) -> dict[str, PointHit]:
        """One leg's hits as ``{id: hit}`` best first, hits of exactly equal score ordered by where
        their chunk is (document name, chunk index) rather than as the store returns them (by point
        id, which embeds the random document id). Two overlapping chunks share a sentence window and
        so their dense MaxSim score: two fresh ingestions of the same PDFs ranked them in opposite
        orders and one answer quoted another sentence. Payloads are fetched only for tied hits."""
        scores = [round(h.score, 9) for h in leg]
        if len(set(scores)) == len(scores):
            return {h.id: h for h in leg}
        tied = {h.id: h for h, sc in zip(leg, scores) if scores.count(sc) > 1}
        self._fill_payloads({"leg": tied}, list(tied))

        def where(h: PointHit) -> tuple:
            p = h.payload or {}
            return (str(p.get("doc_name", "")), int(p.get("chunk_index", 0) or 0), h.id)

        return {h.id: h for h in sorted(leg, key=lambda h: (-round(h.score, 9), where(h) if h.id in tied else ()))}

    def _fill_payloads(self, hits: dict[str, dict[str, PointHit]], ids: list[str]) -> None:
        """Give every hit of ``ids`` its payload: one a hit of the same id in another leg already
        holds (legs are fetched apart: ``_by_position`` fills only one leg's ties), else fetched
        for all the others in one ``get_payloads`` call."""
        ids = list(dict.fromkeys(ids))
        have: dict[str, dict] = {}
        for hs in hits.values():
            for pid in ids:
                if pid in hs and hs[pid].payload and pid not in have:
                    have[pid] = hs[pid].payload
        want = [pid for pid in ids if pid not in have]
        if want:
            have.update(dict(self.store.get_payloads(want)))
        for hs in hits.values():
            for pid in ids:
                if pid in hs and not hs[pid].payload and pid in have:
                    hs[pid].payload = have[pid]

    def _fuse(
        self, question: str, hits: dict[str, dict[str, PointHit]], ranked_ids: dict[str, list[str]]
    ) -> tuple[list[tuple[str, float]], dict[str, int]]:
        """Fused ``(id, score)`` list of the dense and BM25 hits (``self.fusion``) and ``{id: BM25
        rank}`` of the table chunks whose dense vote was BM25's (``table_votes``, with
        ``self.table_vote`` and RRF). Exact ties go to the higher BM25, then dense score, then the
        chunk's place (document name, chunk index)."""
        fusion = Fusion.parse(self.fusion)
        votes: dict[str, int] = {}
        if fusion is Fusion.dbsf:
            fused = distribution_score_fusion({n: {pid: h.score for pid, h in hs.items()} for n, hs in hits.items()})
        else:
            fused = reciprocal_rank_fusion(ranked_ids, self.rrf_k, fill_missing=fusion is Fusion.rrf_fill)
            if self.table_vote and "vector" in ranked_ids and ranked_ids.get("bm25") and table_vote_rows(question):
                self._fill_payloads(hits, ranked_ids["bm25"])  # only when a vote can be given
                votes = table_votes(
                    question,
                    ranked_ids["bm25"],
                    {pid: hits["bm25"][pid].payload.get("text", "") for pid in ranked_ids["bm25"]},
                )
            if votes:
                dense_rank = {pid: r for r, pid in enumerate(ranked_ids["vector"], start=1)}
                k = self.rrf_k
                # the dense leg's 1 / (k + rank) (or what rrf_fill gave a missing id) becomes BM25's
                old_dense = {
                    pid: (
                        1.0 / (k + dense_rank[pid])
                        if pid in dense_rank
                        else 1.0 / (k + len(ranked_ids["vector"]) + 1)
                        if fusion is Fusion.rrf_fill
                        else 0.0
                    )
                    for pid in votes
                }
                fused = sorted(
                    (
                        (pid, sc + (1.0 / (k + votes[pid]) - old_dense[pid] if pid in votes else 0.0))
                        for pid, sc in fused
                    ),
                    key=lambda kv: -round(kv[1], 12),
                )
        groups: dict[float, list[str]] = {}
        for pid, sc in fused:
            groups.setdefault(round(sc, 12), []).append(pid)
        if all(len(g) == 1 for g in groups.values()):
            return fused, votes
        tb, where = {}, {}
        self._fill_payloads(hits, [pid for g in groups.values() if len(g) > 1 for pid in g])
        for g in groups.values():
            if len(g) < 2:
                continue
            for pid in g:
                h = next(hs[pid] for hs in hits.values() if pid in hs)
                tb[pid] = (
                    hits.get("bm25", {}).get(pid).score if pid in hits.get("bm25", {}) else 0.0,
                    hits.get("vector", {}).get(pid).score if pid in hits.get("vector", {}) else 0.0,
                )
                # then where the chunk is, not its id: point ids embed the random document id, so an
                # id order would flip between two ingestions of the same files
                where[pid] = (str(h.payload.get("doc_name", "")), int(h.payload.get("chunk_index", 0) or 0))
        return (
            sorted(
                fused,
                key=lambda kv: (
                    -round(kv[1], 12),
                    tuple(-x for x in tb.get(kv[0], ())),
                    where.get(kv[0], ("", 0)),
                    kv[0],
                ),
            ),
            votes,
        )

    def _title_block(
        self, out: list[RetrievedChunk], top_k: int, rank_of: dict[str, dict[str, int]]
    ) -> tuple[list[RetrievedChunk], str | None]:
        """``out`` with the opening chunk (index 0) of its first chunk's document (same version
        and strategy) moved or fetched to rank 1, cut to ``top_k``, and the note saying so; ``out``
        and None when that chunk already leads or the document has none. A paper, report or judgment
        prints who wrote it in its title block, which shares no word with "Who are the authors?"."""
        p = out[0].payload
        if not p.get("document_id"):
            return out, None
        tid = point_id(p["document_id"], int(p.get("ingest_version") or 0), p.get("strategy", "sentence"), 0)
        if out[0].chunk_id == tid:
            return out, None
        opening = next((c for c in out if c.chunk_id == tid), None)
        if opening is None:
            payload = dict(self.store.get_payloads([tid])).get(tid)
            if not payload:
                return out, None
            legs = ("vector", "bm25", *(["multilingual"] if "multilingual" in rank_of else []))
            opening = RetrievedChunk(
                rank=0,
                chunk_id=tid,
                score=0.0,
                payload=payload,
                ranks={name: rank_of.get(name, {}).get(tid) for name in legs},
                scores={},
            )
        rest = [c for c in out if c.chunk_id != tid]
        opening.score = max(opening.score, out[0].score)  # the answerer weighs a source by its score
        note = (
            f"the question asks who wrote a document: the opening passage of {opening.doc_name}, whose title "
            "block prints its authors, comes first"
        )
        return [opening, *rest][:top_k], note

    def neighbors(self, chunks: list[RetrievedChunk], limit: int = 2) -> list[RetrievedChunk]:
        """Chunks that continue a retrieved chunk cut from a longer list or table.

        For each retrieved chunk (best first) whose passage ends in a table row or list item, the
        next chunk of the same document, version, strategy and section is added (at most
        ``limit``), unless it is already retrieved; for a passage that ends with a lead-in ("...
        the probable cause(s) of this accident to be:", ``chunking.ends_with_lead_in``), the next
        chunk whatever its section (what is introduced may sit under the next heading). Returned
        with ``neighbor_of`` set.
        """
        if limit <= 0 or not chunks:
            return []

        have = {c.chunk_id for c in chunks}
        want: list[tuple[str, RetrievedChunk]] = []
        for c in chunks:
            p = c.payload
            if not (ends_mid_list(c.text) or ends_with_lead_in(c.text)):
                continue
            if not p.get("document_id") or p.get("chunk_index") is None:
                continue
            nid = point_id(
                p["document_id"],
                int(p.get("ingest_version") or 0),
                p.get("strategy", "sentence"),
                int(p["chunk_index"]) + 1,
            )
            if nid not in have:
                have.add(nid)
                want.append((nid, c))
            if len(want) >= limit:
                break
        if not want:
            return []
        got = {pid: payload for pid, payload in self.store.get_payloads([n for n, _ in want])}
        out = []
        for nid, src in want:
            payload = got.get(nid)
            if payload and (
                (payload.get("section") or "") == (src.payload.get("section") or "") or ends_with_lead_in(src.text)
            ):
                out.append(
                    RetrievedChunk(
                        rank=len(chunks) + len(out) + 1,
                        chunk_id=nid,
                        score=0.0,
                        payload=payload,
                        ranks={"vector": None, "bm25": None},
                        scores={},
                        neighbor_of=src.chunk_id,
                    )
                )
        return out

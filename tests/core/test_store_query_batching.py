"""Coalesced Edge queries (``ragaudit.index.store._QueryBatcher``): concurrent two-stage dense queries run as
one ``query_batch`` call and every request still gets exactly the results of its own plain query.

On the real ingested sample PDFs (``kb``: the Dagster pipeline, the bundled model, Qdrant Edge).
Batching is made deterministic without timing: the test takes the batcher's turn itself, so every
request's dense query queues, then hands the turn to the first queued one, as a finishing call
does; that one then runs all of them in one ``query_batch``."""

from __future__ import annotations

import threading
import time

import pytest

from ragaudit.index.store import DENSE, WINDOWS, scope_filter
from ragaudit.types import Scope
from tests.conftest import DMCA_QUESTION

QUESTIONS = [
    (DMCA_QUESTION, None),
    ("What was the probable cause of the accident?", None),
    ("Where did the airplane land?", None),
    ("What injuries did the pilot sustain?", None),
    ("Which exemptions and limitations does Title I list?", Scope(doc_names=["dmca.pdf"])),
    ("What does the act say about circumvention of technological measures?", Scope(doc_names=["dmca.pdf"])),
    ("What was the weather at the time of the accident?", Scope(doc_names=["20071229X02007.pdf"])),
    (
        "How many hours of flight experience did the pilot have?",
        Scope(doc_names=["20071229X02007.pdf", "20080102X00002.pdf"]),
    ),
]


def _wait_for(pred, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.005)


class CachedEmbedder:
    """The real model's query vectors, computed once one by one. Concurrent ``embed_query`` calls
    are batched by the embedder itself, and a batched vector can differ from a lone one in its last
    bits; that is not what these tests compare."""

    def __init__(self, embedder):
        self.embedder = embedder
        self.vectors = {}

    def embed_query(self, text: str):
        if text not in self.vectors:
            self.vectors[text] = self.embedder.embed_query(text)
        return self.vectors[text]


def result_of(res) -> dict:
    """Everything a /search response carries about the hits, plus both legs' full candidate lists."""
    return {"retrieved": [c.to_json() for c in res.chunks], "candidates": res.candidates}


@pytest.fixture()
def retriever(kb):
    from ragaudit.query import QueryService

    r = QueryService(kb).retriever
    assert r.dense_prefetch > r.candidates  # the two-stage dense query is the one coalesced
    # the named-document leg (on by default) runs a second, scoped dense query after the first when
    # it fires, through the same batcher: these tests count and compare the first leg's batching
    r.named_document_leg = False
    r.embedder = CachedEmbedder(kb.embedder)
    return r


def run_coalesced(store, fn, n: int) -> tuple[dict, dict]:
    """Run ``fn(i)`` for i < n in threads whose dense queries all queue behind a turn held by this
    thread; returns (results, errors) by index once the first queued query led them in one call."""
    b = store._h.batcher
    results, errors = {}, {}

    def worker(i: int) -> None:
        try:
            results[i] = fn(i)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors[i] = e

    with b._lock:
        assert not b._busy
        b._busy = True  # this thread holds the turn: every query that comes now queues
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    try:
        _wait_for(lambda: len(b._pending) == n)
    finally:
        with b._lock:
            first = b._pending[0] if b._pending else None
            if first is None:
                b._busy = False
        if first is not None:
            first.event.set()  # the turn passes to the first queued query
    for t in threads:
        t.join(120)
    return results, errors


def test_coalesced_dense_queries_return_the_plain_results(kb, retriever, monkeypatch):
    """Fails if a request served by a shared ``query_batch`` call gets another request's hits, loses
    or gains a hit, has a hit reordered, or sees a score change (fused, dense or BM25) -- in any
    of the retrieved chunks or in either leg's full candidate list -- scoped or unscoped; and fails
    if the queries were not actually run as one batch."""
    store = kb.store
    monkeypatch.setattr(store, "batch_queries", False)
    plain = [result_of(retriever.retrieve(q, scope, 5, "hybrid")) for q, scope in QUESTIONS]
    assert all(p["retrieved"] for p in plain)
    assert len({tuple(c["chunk_id"] for c in p["retrieved"]) for p in plain}) == len(QUESTIONS)  # distinct hits
    monkeypatch.setattr(store, "batch_queries", True)
    b = store._h.batcher
    calls, queries = b.calls, b.queries
    got, errors = run_coalesced(
        store, lambda i: result_of(retriever.retrieve(QUESTIONS[i][0], QUESTIONS[i][1], 5, "hybrid")), len(QUESTIONS)
    )
    assert not errors
    assert (b.calls - calls, b.queries - queries) == (1, len(QUESTIONS))  # one Edge call served them all
    for i, (q, _) in enumerate(QUESTIONS):
        assert got[i] == plain[i], q


def test_coalesced_store_queries_equal_plain_ones_at_every_depth(kb, retriever, monkeypatch):
    """``search_dense`` (two stages: chunk-vector prefetch, window MaxSim) at the retriever's and at
    larger depths: fails if a coalesced query's hit list (ids, scores, order) differs from the
    same query run alone."""
    store = kb.store
    flt = scope_filter(Scope())
    cases = [
        (retriever.embedder.embed_query(q), limit, pre)
        for q, _ in QUESTIONS[:4]
        for limit, pre in ((20, retriever.dense_prefetch), (60, 300))
    ]

    def hits(i):
        vec, limit, pre = cases[i]
        return [
            (h.id, h.score) for h in store.search_dense(vec, flt, limit, windows=True, prefetch=pre, with_payload=False)
        ]

    monkeypatch.setattr(store, "batch_queries", False)
    plain = [hits(i) for i in range(len(cases))]
    monkeypatch.setattr(store, "batch_queries", True)
    got, errors = run_coalesced(store, hits, len(cases))
    assert not errors
    for i in range(len(cases)):
        assert len(got[i]) == len(plain[i]) > 0
        assert got[i] == plain[i], i


def test_a_failing_query_fails_alone_in_a_batch(kb, retriever):
    """A query Edge rejects (a vector of the wrong size) shares a batch with valid ones: fails if
    the valid queries fail with it, get no or other hits, or if the bad one does not raise."""
    import qdrant_edge as qe

    store = kb.store
    vecs = [list(map(float, retriever.embedder.embed_query(q))) for q, _ in QUESTIONS[:3]]
    bad = vecs[0][:7]

    def request(v):  # 30 hits of which 10 are compared, so that a tie at the 10th is kept whole
        return qe.QueryRequest(
            limit=30,
            query=qe.Query.Nearest([v], using=WINDOWS),
            with_payload=False,
            prefetches=[qe.Prefetch(limit=50, query=qe.Query.Nearest(v, using=DENSE))],
        )

    def ranked(points):  # exact ties in any order (search_dense orders them by id)
        return sorted(((str(p.id), p.score) for p in points), key=lambda t: (-t[1], t[0]))[:10]

    plain = [ranked(store.shard.query(request(v))) for v in vecs]
    reqs = [request(vecs[0]), request(bad), request(vecs[1]), request(vecs[2])]
    got, errors = run_coalesced(store, lambda i: ranked(store._h.batcher.query(store.shard, reqs[i])), len(reqs))
    assert set(errors) == {1}
    assert [got[0], got[2], got[3]] == plain

"""Qdrant Edge: the unscoped filter (not staged, primary strategy) is left out of a query only
while it excludes nothing, and the results are those of the filtered query (a real Edge shard)."""

from __future__ import annotations

import numpy as np
import pytest

import ragaudit.index.store as store_mod
from ragaudit.index.sparse import SparseVector
from ragaudit.index.store import open_store, scope_filter
from ragaudit.types import Scope

DIM = 8


def unit(*xs: float) -> list[float]:
    v = np.zeros(DIM)
    v[: len(xs)] = xs
    return (v / np.linalg.norm(v)).tolist()


def payload(doc: str, live: bool = True, primary: bool = True) -> dict:
    return {
        "document_id": doc,
        "doc_name": doc,
        "text": doc,
        "live": live,
        "primary": primary,
        "strategy": "sentence",
        "ingest_version": 1,
        "page_start": 1,
        "page_end": 1,
    }


@pytest.fixture()
def edge(tmp_path, monkeypatch):
    s = open_store("chunks", backend="edge", path=str(tmp_path / "edge"))
    s.ensure_collection(DIM)
    monkeypatch.setattr(s, "RECOUNT_S", 0.0)  # recount after every write (the default waits 0.5 s between counts)
    yield s
    s.close()


class FilterSpy:
    """Counts translations of a query's filter into Edge's classes (only a filtered query makes
    one; the count of excluded points, a filter of ``should`` conditions only, is not counted)."""

    def __init__(self, monkeypatch):
        self.calls = 0
        real = store_mod.edge_filter

        def spy(flt):
            if flt is not None and flt.must_not:
                self.calls += 1
            return real(flt)

        monkeypatch.setattr(store_mod, "edge_filter", spy)


def ids(hits) -> list[str]:
    return [h.payload["doc_name"] for h in hits]


def search(s, flt):
    dense = s.search_dense(unit(1, 0.1), flt, 10, windows=True, prefetch=50)
    sparse = s.search_sparse(SparseVector([1], [1.0]), flt, 10)
    return ids(dense), ids(sparse)


def upsert(s, n: int, doc: str, vec: list[float], **kw):
    s.upsert(
        [store_mod.point_id(doc, 1, "sentence", n)],
        [vec],
        [SparseVector([1], [1.0 + n])],
        [payload(doc, **kw)],
        windows=[[vec]],
    )


def test_unscoped_filter_is_left_out_only_while_it_excludes_nothing(edge, monkeypatch):
    """Fails if a staged or non-primary point is ever returned unscoped (the filter left out
    while it excludes something), or if the filter is still sent while every point passes it."""
    unscoped = scope_filter(Scope())
    upsert(edge, 0, "a.pdf", unit(1, 0))
    upsert(edge, 1, "b.pdf", unit(0, 1))
    spy = FilterSpy(monkeypatch)
    assert edge.all_searchable()
    assert search(edge, unscoped) == (["a.pdf", "b.pdf"], ["b.pdf", "a.pdf"])
    assert spy.calls == 0  # neither leg sent the filter
    upsert(edge, 2, "staged.pdf", unit(1, 0.1), live=False)  # the best match, not yet published
    assert not edge.all_searchable()
    assert search(edge, unscoped) == (["a.pdf", "b.pdf"], ["b.pdf", "a.pdf"])
    assert spy.calls > 0
    edge.set_live("staged.pdf", 1, True)
    spy.calls = 0
    assert search(edge, unscoped) == (["staged.pdf", "a.pdf", "b.pdf"], ["staged.pdf", "b.pdf", "a.pdf"])
    assert spy.calls == 0
    edge.set_primary("b.pdf", "fixed")  # b.pdf's only chunks are now of a non-primary strategy
    assert search(edge, unscoped) == (["staged.pdf", "a.pdf"], ["staged.pdf", "a.pdf"])
    assert spy.calls > 0
    spy.calls = 0
    assert ids(edge.search_dense(unit(1, 0.1), scope_filter(Scope(doc_names=["a.pdf"])), 10)) == ["a.pdf"]
    assert spy.calls == 1  # a scoped query always carries its filter


def test_a_write_during_an_unfiltered_query_reruns_it_with_the_filter(edge, monkeypatch):
    """Fails if a query that ran without the filter while a write began (the write generation
    moved) is returned as it is: it may hold a point the filter excludes."""
    upsert(edge, 0, "a.pdf", unit(1, 0))
    assert edge.all_searchable()
    spy = FilterSpy(monkeypatch)
    h = edge._h
    real = h.shard

    class WriteDuringQuery:  # the shard, with a concurrent writer staging a point during the first query
        def __init__(self):
            self.queries = 0

        def query(self, req):
            self.queries += 1
            out = real.query(req)
            if self.queries == 1:
                h.shard = real
                upsert(edge, 1, "staged.pdf", unit(1, 0), live=False)
                h.shard = self
            return out

        def __getattr__(self, name):
            return getattr(real, name)

    proxy = WriteDuringQuery()
    h.shard = proxy
    try:
        hits = edge.search_dense(unit(1, 0), scope_filter(Scope()), 10)
    finally:
        h.shard = real
    assert proxy.queries == 2 and spy.calls == 1  # run again, with the filter
    assert ids(hits) == ["a.pdf"]

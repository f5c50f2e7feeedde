"""One scope rule, three readings: the Qdrant filter (``scope_filter``, on a real Qdrant Edge
store), the in-process check (``Scope.admits``) and the SQL clause (``scope_clause``) select the
same chunks, for random scopes over the chunks of real PDFs.

The chunks are those of the session knowledge base (the sample PDFs ingested by the Dagster
job), copied into a store and a database of this module's own and varied so every scope field
has something to tell apart: documents in two knowledge bases, one name in both, a second
(non-primary) strategy of one document, a document whose primary strategy is another one, and a
staged version that nothing may select.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from ragaudit.index.sparse import SparseVector
from ragaudit.index.store import open_store, point_id, scope_filter
from ragaudit.platform.db import ChunkRow, Document, make_engine, make_sessionmaker, migrate, scope_clause
from ragaudit.query import QueryService
from ragaudit.retrieve.scope import clip_to_pages
from ragaudit.types import Scope, Strategy

DIM = 8


class Corpus:
    """The varied copy: ``payloads`` by point id, the Edge store and the SQL sessions."""

    def __init__(self, store, sessions, payloads, names, ids, pages):
        self.store, self.sessions, self.payloads = store, sessions, payloads
        self.names, self.ids, self.max_page = names, ids, pages

    def qdrant(self, scope: Scope) -> set[str]:
        flt = scope_filter(scope)
        got = {pid for pid, _ in self.store.iter_payloads(flt, batch=97)}
        assert self.store.count_matching(flt) == len(got)
        return got

    def in_process(self, scope: Scope) -> set[str]:
        return {pid for pid, p in self.payloads.items() if scope.admits(p)}

    def sql(self, scope: Scope) -> set[str]:
        with self.sessions() as s:
            q = select(ChunkRow.id).join(Document, Document.id == ChunkRow.document_id).where(scope_clause(scope))
            return set(s.scalars(q))


@pytest.fixture(scope="module")
def corpus(kb, tmp_path_factory):
    base = tmp_path_factory.mktemp("scope_agreement")
    live = {pid: p for pid, p in kb.store.iter_payloads(scope_filter(Scope()))}
    by_doc: dict[str, list[dict]] = {}
    for p in live.values():
        by_doc.setdefault(p["document_id"], []).append(p)
    assert len(by_doc) >= 3, "the session knowledge base holds the three sample PDFs"
    d1, d2, d3 = sorted(by_doc, key=lambda d: by_doc[d][0]["doc_name"])[:3]
    docs: dict[str, dict] = {}  # document id -> Document row values
    points: list[dict] = []

    def add_doc(doc_id: str, src: str, kb_name: str, strategy: str) -> None:
        first = by_doc[src][0]
        docs[doc_id] = dict(
            id=doc_id,
            doc_name=first["doc_name"],
            name_key=first["doc_key"],
            knowledge_base=kb_name,
            sha256=first["doc_sha256"],
            strategy=strategy,
            status="ready",
            ingest_version=1,
        )

    def add_points(doc_id: str, src: str, *, strategy: str, primary: bool, live: bool = True, version: int = 1):
        for p in by_doc[src]:
            q = copy.deepcopy(p)
            q.update(
                document_id=doc_id,
                knowledge_base=docs[doc_id]["knowledge_base"],
                strategy=strategy,
                primary=primary,
                live=live,
                ingest_version=version,
            )
            points.append(q)

    add_doc("d1", d1, "default", "sentence")  # a second, non-primary strategy beside its primary one
    add_points("d1", d1, strategy="sentence", primary=True)
    add_points("d1", d1, strategy="fixed", primary=False)
    add_doc("d2", d2, "law", "sentence")  # another knowledge base, with a staged version (never selected)
    add_points("d2", d2, strategy="sentence", primary=True)
    add_points("d2", d2, strategy="sentence", primary=True, live=False, version=2)
    add_doc("d3", d3, "default", "heading")  # its primary strategy is not the default one
    add_points("d3", d3, strategy="heading", primary=True)
    add_points("d3", d3, strategy="sentence", primary=False)
    add_doc("d4", d1, "law", "sentence")  # the same name as d1, in the other knowledge base
    add_points("d4", d1, strategy="sentence", primary=True)

    ids = [point_id(p["document_id"], p["ingest_version"], p["strategy"], p["chunk_index"]) for p in points]
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(len(points), DIM))
    store = open_store("chunks", backend="edge", path=str(base / "edge"))
    store.ensure_collection(DIM, windows=False)
    store.upsert(
        ids,
        (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).tolist(),
        [SparseVector([1], [1.0]) for _ in ids],
        points,
    )
    engine = make_engine(f"sqlite:///{base / 'db.sqlite'}")
    migrate(engine)
    sessions = make_sessionmaker(engine)
    with sessions.begin() as s:
        s.add_all(Document(**d) for d in docs.values())
        s.flush()
        s.add_all(
            ChunkRow(
                id=i,
                document_id=p["document_id"],
                index=p["chunk_index"],
                strategy=p["strategy"],
                page_start=p["page_start"],
                page_end=p["page_end"],
                char_start=p["char_start"],
                char_end=p["char_end"],
                text=p["text"],
                token_count=p["token_count"],
                doc_sha256=p["doc_sha256"],
                ingest_version=p["ingest_version"],
                live=p["live"],
            )
            for i, p in zip(ids, points)
        )
    names = sorted({d["doc_name"] for d in docs.values()})
    yield Corpus(store, sessions, dict(zip(ids, points)), names, sorted(docs), max(p["page_end"] for p in points))
    store.close()
    engine.dispose()


@st.composite
def scopes(draw, corpus: Corpus) -> Scope:
    pages = st.none() | st.integers(1, corpus.max_page + 2)
    return Scope(
        doc_names=draw(st.lists(st.sampled_from([*corpus.names, "missing.pdf"]), max_size=2, unique=True)),
        knowledge_base=draw(st.sampled_from([None, "default", "law", "nowhere"])),
        document_ids=draw(st.lists(st.sampled_from([*corpus.ids, "d9"]), max_size=2, unique=True)),
        strategy=draw(st.none() | st.sampled_from(list(Strategy))),
        page_min=draw(pages),
        page_max=draw(pages),
    )


def test_qdrant_filter_in_process_check_and_sql_select_the_same_chunks(corpus):
    """Fails if the Qdrant filter, ``Scope.admits`` or the SQL clause disagree on any random scope
    (document names, knowledge base, document ids, strategy, page range): a condition dropped,
    inverted or read with another semantics in one of them (e.g. page ranges by containment in
    SQL and by overlap in Qdrant), a staged chunk or a non-primary strategy let through."""
    straddling = next(p for p in corpus.payloads.values() if p["page_end"] > p["page_start"] and p["live"])
    edge = Scope(page_min=straddling["page_end"], page_max=straddling["page_end"])

    @settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(scopes(corpus))
    @example(Scope())
    @example(edge)
    @example(Scope(strategy=Strategy.fixed, knowledge_base="default"))
    @example(Scope(doc_names=[corpus.names[0]], knowledge_base="law"))
    def agree(scope: Scope) -> None:
        want = corpus.in_process(scope)
        assert corpus.qdrant(scope) == want, scope
        assert corpus.sql(scope) == want, scope

    agree()
    # overlap, not containment: a chunk across pages n-1..n is in the scope of page n alone
    sid = next(pid for pid, p in corpus.payloads.items() if p is straddling)
    assert sid in corpus.sql(edge) and sid in corpus.qdrant(edge)
    # the three see every kind of chunk the corpus holds: staged never, non-primary only by name
    assert not any(corpus.payloads[i]["live"] is False for i in corpus.qdrant(Scope()))
    assert {corpus.payloads[i]["strategy"] for i in corpus.sql(Scope(knowledge_base="default"))} == {
        "sentence",
        "heading",
    }
    assert {corpus.payloads[i]["strategy"] for i in corpus.sql(Scope(strategy=Strategy.fixed))} == {"fixed"}


def test_document_text_of_a_page_range_keeps_only_its_pages(kb):
    """The answerability gate's document text for a page range holds the in-range part of a chunk
    that crosses the range's edge (the SQL selects by overlap, as the Qdrant filter does) and none
    of its text on the page outside. Fails if the edge chunk is left out (containment) or taken
    whole (not cut to the range). Compared with whitespace normalised, as the gate reads it: where
    two chunks join, the rebuilt text may keep a line's trailing space."""
    live = [p for _, p in kb.store.iter_payloads(scope_filter(Scope()))]

    def parts(p):  # (text on its last page, text on its first page) of a chunk across two pages
        inside, outside = clip_to_pages(p, p["page_end"], None), clip_to_pages(p, None, p["page_start"])
        return (inside["text"].strip(), outside["text"].strip()) if inside and outside else ("", "")

    p = next(p for p in live if p["page_end"] == p["page_start"] + 1 and min(map(len, parts(p))) > 40)
    inside, outside = parts(p)
    qs = QueryService(kb)
    text = qs._document_text(p["document_id"], p["doc_sha256"], p["strategy"], p["page_end"], p["page_end"])

    def flat(t: str) -> str:
        return " ".join(t.split())

    assert flat(inside[:200]) in flat(text)
    assert flat(outside) not in flat(text)

"""The vector store's operations, on each embedded backend (Qdrant Edge, qdrant-client local mode).

The Qdrant server path shares every high-level method with local mode (same ``qdrant-client``
calls); it is not available here, so it runs only where ``RAGAUDIT_QDRANT_URL`` points at one.
Vectors are small hand-made ones so the expected scores can be computed independently.
"""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
import unicodedata
from pathlib import Path

import numpy as np
import pytest

from ragaudit.index.sparse import SparseVector
from ragaudit.index.store import BACKENDS, StoreInUseError, open_store, point_id, scope_filter
from ragaudit.retrieve.scope import admits
from ragaudit.types import Scope

ROOT = Path(__file__).resolve().parents[2]
DIM = 8


def unit(*xs: float) -> list[float]:
    v = np.zeros(DIM)
    v[: len(xs)] = xs
    return (v / np.linalg.norm(v)).tolist()


@pytest.fixture(params=BACKENDS)
def store(request, tmp_path):
    s = open_store("chunks", backend=request.param, path=str(tmp_path / request.param))
    s.ensure_collection(DIM)
    yield s
    s.close()


def add(
    store,
    doc: str,
    n: int,
    *,
    version: int = 1,
    live: bool = True,
    primary: bool = True,
    strategy: str = "sentence",
    sha: str = "sha-a",
    kb: str = "default",
    name: str | None = None,
    terms: list[list[int]] | None = None,
    start_page: int = 1,
) -> list[str]:
    """``n`` points of document ``doc`` (chunk i on page start_page + i); returns their ids."""
    ids = [point_id(doc, version, strategy, i) for i in range(n)]
    name = name or f"{doc}.pdf"
    payloads = [
        {
            "document_id": doc,
            "doc_name": name,
            "doc_key": unicodedata.normalize("NFC", name),
            "knowledge_base": kb,
            "strategy": strategy,
            "doc_sha256": sha,
            "ingest_version": version,
            "chunk_index": i,
            "page_start": start_page + i,
            "page_end": start_page + i,
            "live": live,
            "primary": primary,
            "text": f"{doc} chunk {i}",
        }
        for i in range(n)
    ]
    dense = [unit(1.0, 0.1 * (i + 1), hash(doc) % 7 / 10) for i in range(n)]
    sparse = [SparseVector(*zip(*[(t, 1.0) for t in (terms[i] if terms else [1, 100 + i])])) for i in range(n)]
    sparse = [SparseVector(list(s.indices), list(s.values)) for s in sparse]
    windows = [[unit(1.0, 0.1 * (i + 1)), unit(0.2, 1.0)] for i in range(n)]
    store.upsert(ids, dense, sparse, payloads, windows=windows)
    return ids


def searched(store, scope: Scope, limit: int = 100) -> set[str]:
    return {h.id for h in store.search_dense(unit(1.0), scope_filter(scope), limit)}


def test_staged_points_are_searched_only_after_publish(store):
    """A run stages its points with ``live: false``; nothing searches them until ``set_live``,
    and ``delete_replaced`` then removes the previous version. Fails if a staged point is
    searchable (the live filter dropped or mistranslated, as qdrant-edge-py's boolean match would
    be), if ``set_live`` does not publish, or if ``delete_replaced`` keeps the old version or
    touches another document."""
    old = add(store, "a", 3, version=1, sha="sha-1")
    other = add(store, "b", 2)
    new = add(store, "a", 4, version=2, sha="sha-2", live=False)
    assert searched(store, Scope()) == set(old) | set(other)
    assert {h.id for h in store.search_sparse(SparseVector([1], [1.0]), scope_filter(Scope()), 100)} == set(old) | set(
        other
    )
    assert store.count("a", live=False) == 4 and store.count("a", live=True) == 3 and store.count("a", version=2) == 4
    store.set_live("a", 2, True)
    assert searched(store, Scope()) == set(old) | set(new) | set(other)
    store.delete_replaced("a", 2, "sha-2", "sentence")
    assert searched(store, Scope()) == set(new) | set(other)
    assert store.count("a") == 4 and store.count("b") == 2 and store.count() == 6
    assert store.count("a", sha256="sha-1") == 0 and store.count("a", sha256="sha-2") == 4


def test_scope_filters_match_the_scope_rules(store):
    """Every scope field, alone and combined, selects exactly the points ``ragaudit.retrieve.scope.admits``
    admits (the independent mirror of the filter). Fails if any condition (doc names by NFC key,
    knowledge base, document ids, strategy, primary, page range, live) is dropped or translated
    wrongly on a backend."""
    add(store, "a", 4, name="Cafe\u0301.pdf")  # decomposed name: matched by its NFC key
    add(store, "b", 3, kb="legal", start_page=5)
    add(store, "b", 3, strategy="fixed", primary=False, kb="legal", start_page=5)
    add(store, "c", 2, live=False)
    payloads = dict(store.iter_payloads(batch=3))  # paging through several batches
    assert len(payloads) == 12
    scopes = [
        Scope(),
        Scope(doc_names=["Caf\u00e9.pdf"]),
        Scope(doc_names=["b.pdf", "c.pdf"]),
        Scope(knowledge_base="legal"),
        Scope(document_ids=["a"]),
        Scope(strategy="fixed"),
        Scope(page_min=2, page_max=3),
        Scope(page_min=6),
        Scope(page_max=1),
        Scope(knowledge_base="legal", strategy="fixed", page_min=6, page_max=6),
        Scope(doc_names=["a.pdf"]),
    ]
    for scope in scopes:
        want = {pid for pid, pl in payloads.items() if admits(scope, pl)}
        assert searched(store, scope) == want, scope
        assert {h.id for h in store.search_sparse(SparseVector([1], [1.0]), scope_filter(scope), 100)} == want, scope
    assert searched(store, Scope(doc_names=["Caf\u00e9.pdf"])) and not searched(store, Scope(doc_names=["a.pdf"]))


def test_bm25_leg_weights_terms_by_idf(store):
    """Sparse scores are dot products with Qdrant's IDF modifier,
    idf(t) = ln(1 + (N - n_t + 0.5) / (n_t + 0.5)) over the points holding t. Fails if the IDF
    modifier is missing on a backend (a common term would weigh as much as a rare one)."""
    add(store, "a", 4, terms=[[1, 2], [1], [1], [1]])
    hits = store.search_sparse(SparseVector([1, 2], [1.0, 1.0]), scope_filter(Scope()), 10)
    idf = lambda n: math.log(1 + (4 - n + 0.5) / (n + 0.5))  # noqa: E731
    assert hits[0].payload["chunk_index"] == 0
    assert hits[0].score == pytest.approx(idf(4) + idf(1), rel=1e-4)
    assert hits[1].score == pytest.approx(idf(4), rel=1e-4)
    assert store.search_sparse(SparseVector([], []), None, 10) == []


def test_dense_windows_score_by_maxsim(store):
    """The windows multivector scores a point by its best window's cosine (MaxSim); the chunk
    vector by its own cosine. Fails if the multivector comparator or the vector name is wrong."""
    (pid,) = add(store, "a", 1)
    q = unit(0.3, 1.0)
    vec = store.get_vectors([pid], ["dense", "dense_windows"])[pid]
    wins = np.asarray(vec["dense_windows"])
    assert wins.shape == (2, DIM)
    assert store.search_dense(q, None, 1, windows=True)[0].score == pytest.approx(float(np.max(wins @ q)), abs=1e-5)
    assert store.search_dense(q, None, 1)[0].score == pytest.approx(float(np.dot(vec["dense"], q)), abs=1e-5)


def test_two_stage_dense_rescores_only_the_prefetched_chunks(store):
    """``search_dense(windows=True, prefetch=M)``: MaxSim is computed over the top-M chunks by their
    single chunk vector, under the scope filter, and scored exactly as the one-stage query. Fails if
    the prefetch is ignored (a chunk outside the first stage wins on its window), if the prefetch
    stage drops the filter (another document's or a staged point comes back), or if the scores
    differ from the exact MaxSim scan."""
    a_ids = add(store, "a", 4)
    staged = add(store, "c", 2, live=False)
    # chunk "b"/0: a chunk vector far from the query, but one window exactly on it
    pid = point_id("b", 1, "sentence", 0)
    store.upsert(
        [pid],
        [unit(0.0, 0.0, 0.0, 1.0)],
        [SparseVector([1], [1.0])],
        [
            {
                "document_id": "b",
                "doc_name": "b.pdf",
                "doc_key": "b.pdf",
                "knowledge_base": "default",
                "strategy": "sentence",
                "doc_sha256": "s",
                "ingest_version": 1,
                "chunk_index": 0,
                "page_start": 1,
                "page_end": 1,
                "live": True,
                "primary": True,
                "text": "b",
            }
        ],
        windows=[[unit(0.0, 0.0, 0.0, 1.0), unit(0.0, 0.0, 0.0, 0.0, 1.0)]],
    )
    q = unit(0.1, 0.0, 0.0, 0.0, 1.0)  # no exact ties between the other chunks' best windows
    flt = scope_filter(Scope())
    exact = store.search_dense(q, flt, 3, windows=True)
    assert exact[0].id == pid and exact[0].score == pytest.approx(float(np.dot(q, unit(0, 0, 0, 0, 1.0))), abs=1e-5)
    everything = store.search_dense(q, flt, 3, windows=True, prefetch=50)  # first stage covers all
    assert [(h.id, round(h.score, 5)) for h in everything] == [(h.id, round(h.score, 5)) for h in exact]
    q2 = unit(0.6, 0.0, 0.0, 0.0, 1.0)  # "b" wins on its window, loses on its chunk vector
    assert store.search_dense(q2, flt, 2, windows=True)[0].id == pid
    narrow = store.search_dense(q2, flt, 2, windows=True, prefetch=3)
    assert pid not in {h.id for h in narrow} and len(narrow) == 2  # "b" is not in the chunk-vector top 3
    scoped = store.search_dense(q, scope_filter(Scope(doc_names=["a.pdf"])), 10, windows=True, prefetch=20)
    assert {h.id for h in scoped} == set(a_ids)
    assert not ({h.id for h in store.search_dense(q, flt, 10, windows=True, prefetch=20)} & set(staged))


def test_delete_by_document_and_by_id(store):
    """Deleting a document removes its points only (``keep_sha256`` spares one content version);
    ``delete_points`` removes exactly the ids given; ``get_payloads`` skips missing ids. Fails if
    a delete filter is broader than the document or a payload comes back with adapter fields."""
    a1 = add(store, "a", 2, sha="s1")
    a2 = add(store, "a", 2, sha="s2", version=2)
    b = add(store, "b", 2)
    store.delete_document("a", keep_sha256="s2")
    assert {p for p, _ in store.iter_payloads()} == set(a2) | set(b)
    store.delete_points([b[0]])
    got = store.get_payloads([b[0], b[1], a1[0]])
    assert [p for p, _ in got] == [b[1]]
    assert set(got[0][1]) == {
        "document_id",
        "doc_name",
        "doc_key",
        "knowledge_base",
        "strategy",
        "doc_sha256",
        "ingest_version",
        "chunk_index",
        "page_start",
        "page_end",
        "live",
        "primary",
        "text",
    }
    store.delete_document("a")
    assert store.count("a") == 0 and store.count() == 1


def test_reopen_keeps_points_and_checks_the_dimension(store, tmp_path):
    """A closed store reopens with its points, window multivector and flags; a model of another
    dimension is refused. Fails if the collection's shape is not persisted."""
    add(store, "a", 3, live=False)
    backend = "edge" if store.backend == "edge" else "local"
    path = str(tmp_path / backend)
    store.close()
    again = open_store("chunks", backend=backend, path=path)
    try:
        assert again.exists() and again.has_windows() and again.count("a", live=False) == 3
        with pytest.raises(ValueError, match="dense size 8"):
            again.ensure_collection(DIM * 2)
    finally:
        again.close()
    store.__init__("chunks", path=path)  # the fixture closes it again


HOLDER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {root!r})
    from ragaudit.index.sparse import SparseVector
    from ragaudit.index.store import open_store
    s = open_store("chunks", backend={backend!r}, path={path!r})
    s.ensure_collection(8)
    print("ready", flush=True)
    sys.stdin.readline()  # the parent tried to open the folder meanwhile
    s.upsert(["00000000-0000-0000-0000-000000000001"], [[1.0] + [0.0] * 7], [SparseVector([1], [1.0])],
             [{{"document_id": "x", "live": True}}])
    print("count", s.count("x"), flush=True)
    s.close()
""")


@pytest.mark.parametrize("backend", BACKENDS)
def test_second_process_is_refused_and_the_holder_keeps_writing(backend, tmp_path):
    """One process per embedded folder: a second open fails with an error naming the cause
    ("already accessed", which the CLI turns into one line), and the holder still writes after
    the refused attempt (Qdrant Edge's own refusal damages the live writer: our file lock is
    taken before Edge opens the folder). Fails if the lock is missing or taken after opening."""
    path = str(tmp_path / backend)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER.format(root=str(ROOT), backend=backend, path=path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(RuntimeError, match="already accessed") as err:
            open_store("chunks", backend=backend, path=path)
        if backend == "edge":
            assert isinstance(err.value, StoreInUseError)
        holder.stdin.write("go\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "count 1"
        assert holder.wait(60) == 0
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    reopened = open_store("chunks", backend=backend, path=path)  # the lock is released at close
    try:
        assert reopened.count("x") == 1
    finally:
        reopened.close()


def test_unknown_backend_and_untranslatable_filter_are_refused(tmp_path):
    """Fails if a typo in the backend setting silently picks a store, or if the Edge adapter
    drops a filter condition it cannot translate (that would widen a scoped search)."""
    from qdrant_client import models

    from ragaudit.index.store import edge_filter

    with pytest.raises(ValueError, match="unknown store backend"):
        open_store("chunks", backend="sqlite", path=str(tmp_path))
    with pytest.raises(TypeError, match="no Qdrant Edge translation"):
        edge_filter(models.Filter(must=[models.FieldCondition(key="text", match=models.MatchText(text="x"))]))
    with pytest.raises(TypeError, match="no Qdrant Edge translation"):
        edge_filter(models.Filter(must=[models.HasIdCondition(has_id=[1])]))


def test_a_local_mode_store_is_imported_into_edge_once(tmp_path):
    """A data folder from before Qdrant Edge (local mode in data_dir/qdrant) keeps its index: the
    first Edge open copies every point (payloads, chunk, window and sparse vectors, staged flags)
    and searches return the same ids and scores. Fails if the import is skipped or drops a vector
    or a flag (a staged point would become searchable)."""
    from ragaudit.services import get_services, release_services
    from tests.conftest import make_settings

    settings = make_settings(tmp_path / "data", store_backend="edge")
    old = open_store(settings.collection, backend="local", path=str(tmp_path / "data" / "qdrant"))
    old.ensure_collection(DIM)
    ids = add(old, "a", 5) + add(old, "b", 3, live=False)
    q = unit(0.5, 1.0)
    want = sorted((h.id, round(h.score, 5)) for h in old.search_dense(q, scope_filter(Scope()), 10, windows=True))
    want_sparse = sorted((h.id, round(h.score, 5)) for h in old.search_sparse(SparseVector([1], [1.0]), None, 10))
    old.close()
    svc = get_services(settings)
    try:
        store = svc.store
        assert store.backend == "edge" and store.count() == len(ids) and store.count("b", live=False) == 3
        assert (
            sorted((h.id, round(h.score, 5)) for h in store.search_dense(q, scope_filter(Scope()), 10, windows=True))
            == want
        )
        assert (
            sorted((h.id, round(h.score, 5)) for h in store.search_sparse(SparseVector([1], [1.0]), None, 10))
            == want_sparse
        )
        assert len(want) == 5 and len(want_sparse) == 8
    finally:
        release_services(settings)


def test_multilingual_vector_only_on_the_points_that_have_one(tmp_path):
    """Fails if a collection created with the multilingual vector does not say so after reopening,
    if a point without that vector is scored by ``search_multilingual``, if the scope filter is not
    applied to it, or if a collection without it returns anything."""
    for backend in BACKENDS:
        path = str(tmp_path / backend)
        s = open_store("chunks", backend=backend, path=path)
        s.ensure_collection(DIM, multilingual=4)
        assert s.has_multilingual()
        ids = [point_id(d, 1, "sentence", i) for d in ("de", "en") for i in range(2)]
        payloads = [
            {"document_id": d, "doc_name": f"{d}.pdf", "doc_key": f"{d}.pdf", "knowledge_base": "default"}
            | {"strategy": "sentence", "chunk_index": i, "page_start": 1, "page_end": 1, "live": True, "primary": True}
            for d in ("de", "en")
            for i in range(2)
        ]
        multi = [[1.0, 0.0, 0.0, 0.0], [0.6, 0.8, 0.0, 0.0], None, None]  # the English points have none
        s.upsert(
            ids,
            [unit(1.0, 0.1 * k) for k in range(4)],
            [SparseVector([1], [1.0])] * 4,
            payloads,
            multilingual=multi,
        )
        hits = s.search_multilingual([0.0, 1.0, 0.0, 0.0], scope_filter(Scope()), 10)
        assert [h.id for h in hits] == [ids[1], ids[0]]
        assert hits[0].score == pytest.approx(0.8, abs=1e-5) and hits[1].score == pytest.approx(0.0, abs=1e-5)
        assert s.search_multilingual([0.0, 1.0, 0.0, 0.0], scope_filter(Scope(doc_names=["en.pdf"])), 10) == []
        assert len(s.search_dense(unit(1.0), scope_filter(Scope()), 10)) == 4  # every point keeps its dense vector
        s.close()
        again = open_store("chunks", backend=backend, path=path)
        assert again.has_multilingual()
        again.close()
        plain = open_store("plain", backend=backend, path=path + "-plain")
        plain.ensure_collection(DIM)
        assert not plain.has_multilingual()
        assert plain.search_multilingual([0.0, 1.0, 0.0, 0.0], None, 10) == []
        plain.close()

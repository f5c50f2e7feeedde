"""The extractive answerer ranks sentences with the window vectors stored at ingestion and
embeds only the best few: not every sentence of every source per question (real PDFs, the real
Qdrant Edge store, the bundled model)."""

from __future__ import annotations

import copy
import threading

import numpy as np
import pytest

from ragaudit.answer.answerers import ExtractiveAnswerer, source_sentence_spans
from ragaudit.index.embedding import busy_cores
from ragaudit.index.store import DENSE, SPARSE, WINDOWS
from ragaudit.query import QueryService, request_in_flight, requests_in_flight
from ragaudit.text.sentences import sentence_spans, window_spans
from ragaudit.types import Mode, RetrievedChunk
from tests.conftest import DMCA_QUESTION, SAMPLES


class EmbedSpy:
    """Records every list of texts given to ``Embedder.embed`` (query embeddings included)."""

    def __init__(self, embedder, monkeypatch):
        self.texts: list[str] = []
        real = embedder.embed

        def embed(texts):
            self.texts.extend(texts)
            return real(texts)

        monkeypatch.setattr(embedder, "embed", embed)

    def sentences(self) -> list[str]:
        """Embedded texts of more than one word (a question or a source sentence; the
        answerability check embeds single words)."""
        return [t for t in self.texts if len(t.split()) > 1]


def test_query_embeds_only_the_few_best_sentences(kb, monkeypatch):
    """Fails if /query's answerer embeds the sources' sentences again (main did: every sentence of
    every source, 51% of the 8-client bench's samples) instead of ranking them with the window
    vectors stored at ingestion and embedding only the best few (at most ``refine`` per round),
    or embeds the question a second time."""
    from ragaudit.answer.answerers import _sentences

    qs = QueryService(kb)
    spy = EmbedSpy(kb.embedder, monkeypatch)
    out = qs.ask(DMCA_QUESTION, mode=Mode.hybrid, log_query=False)
    assert out["label"] == "answered" and out["citations"]
    assert "October 28, 1998" in out["answer"]
    assert all(c["verified"] for c in out["citations"])
    embedded = spy.sentences()
    assert embedded.count(DMCA_QUESTION) == 1
    sentences = [s.text for s in _sentences(qs.prepare(DMCA_QUESTION, mode=Mode.hybrid).sources)]
    rest = [t for t in embedded if t != DMCA_QUESTION]
    assert set(rest) <= set(sentences)
    limit = ExtractiveAnswerer.refine * ExtractiveAnswerer.refine_rounds
    assert 0 < len(rest) <= limit < len(sentences)  # main embedded all len(sentences) of them


def test_stored_spans_are_the_windows_and_sentences_of_the_text(kb):
    """Fails if ingestion stops writing ``window_spans`` / ``sentence_spans`` into the payload, or
    writes spans that are not those of the stored window vectors (one span per vector, as
    ``window_spans`` cuts them) and of ``sentence_spans``."""
    store = kb.store
    rows = list(store.iter_payloads())
    assert rows
    vecs = store.get_vectors([pid for pid, _ in rows], (WINDOWS,))
    for pid, p in rows:
        assert p["sentence_spans"] == [list(s) for s in sentence_spans(p["text"])]
        spans = window_spans(p["text"], kb.embedder, kb.settings.dense_window_tokens)
        assert p["window_spans"] == [list(s) for s in spans]
        assert len(vecs[pid][WINDOWS]) == len(spans)


def _sources(kb, question=DMCA_QUESTION):
    return QueryService(kb).prepare(question, mode=Mode.hybrid).sources


def test_window_score_is_the_cosine_of_the_stored_window_holding_the_sentence(kb):
    """Fails if a sentence is scored with another window than the one holding it, or with
    anything but the stored vector's cosine to the question."""
    sources = _sources(kb)
    ans = ExtractiveAnswerer(kb.embedder, store=kb.store, window_tokens=kb.settings.dense_window_tokens)
    stored = ans.stored_windows(sources)
    assert set(stored) == {c.chunk_id for c in sources}
    q = kb.embedder.embed_query(DMCA_QUESTION)
    c = next(c for c in sources if len(stored[c.chunk_id][0]) > 1)  # a chunk of several windows
    spans, vectors = stored[c.chunk_id]
    raw = kb.store.get_vectors([c.chunk_id], (WINDOWS,))[c.chunk_id][WINDOWS]
    np.testing.assert_allclose(vectors, np.asarray(raw, dtype=np.float32))
    from ragaudit.answer.answerers import _sentences

    sents = [s for s in _sentences(sources) if s.chunk is c]
    scores, exact = ans._dense_scores(q, sents, sources)
    assert not exact.any()
    for s, score in zip(sents, scores):
        k = next(i for i, (a, b) in enumerate(spans) if a <= s.start < b)
        assert score == pytest.approx(float(vectors[k] @ q), abs=1e-6)
        assert c.text[spans[k][0] : spans[k][1]].find(s.text) >= 0


def test_points_stored_before_the_spans_recompute_them_and_embed_nothing(fresh_services, monkeypatch):
    """A collection written before payloads carried the spans still ranks sentences with its
    window vectors (spans recomputed from the text, checked against the number of stored
    windows), with the same answer as with stored spans. Fails if such points fall back to
    embedding every sentence, or if the recomputed spans give another answer."""
    from ragaudit.ingest.documents import ingest_bytes
    from ragaudit.pipelines.runner import DagsterRunner

    svc = fresh_services
    assert ingest_bytes(svc, (SAMPLES / "dmca.pdf").read_bytes(), "dmca.pdf", DagsterRunner()).status == "ingested"
    before = QueryService(svc).ask(DMCA_QUESTION, log_query=False)
    store = svc.store
    rows = list(store.iter_payloads())
    vecs = store.get_vectors([pid for pid, _ in rows], (DENSE, SPARSE, WINDOWS))
    old = [{k: v for k, v in p.items() if k not in ("window_spans", "sentence_spans")} for _, p in rows]
    store.delete_points([pid for pid, _ in rows])  # rewritten as an older ingestion wrote them
    store.upsert(
        [pid for pid, _ in rows],
        [vecs[pid][DENSE] for pid, _ in rows],
        [vecs[pid][SPARSE] for pid, _ in rows],
        old,
        windows=[vecs[pid][WINDOWS] for pid, _ in rows],
    )
    assert not any("window_spans" in p for _, p in store.iter_payloads())
    spy = EmbedSpy(svc.embedder, monkeypatch)
    after = QueryService(svc).ask(DMCA_QUESTION, log_query=False)
    assert 1 < len(spy.sentences()) <= 1 + ExtractiveAnswerer.refine * ExtractiveAnswerer.refine_rounds
    assert after["answer"] == before["answer"] and after["label"] == "answered"


def test_chunks_without_usable_windows_are_embedded(kb, monkeypatch):
    """The fallback: a chunk cut to a page range (its text is not the stored one), an answerer
    without a store, and a collection without window vectors embed the sentences. Fails if
    such a chunk were scored with stored windows that do not belong to its text."""
    sources = _sources(kb)
    clipped = copy.copy(sources[0])
    clipped.payload = {**sources[0].payload, "clipped_pages": [1, 1]}
    ans = ExtractiveAnswerer(kb.embedder, store=kb.store, window_tokens=kb.settings.dense_window_tokens)
    assert clipped.chunk_id not in ans.stored_windows([clipped])
    spy = EmbedSpy(kb.embedder, monkeypatch)
    res = ans.answer(DMCA_QUESTION, [clipped])
    assert res.label == "answered"
    assert len(spy.sentences()) > 1  # the question and the clipped chunk's sentences
    spy.texts.clear()
    assert ExtractiveAnswerer(kb.embedder).answer(DMCA_QUESTION, sources).label == "answered"
    assert len(spy.sentences()) > 1

    class NoWindows:
        def has_windows(self):
            return False

    assert ExtractiveAnswerer(kb.embedder, store=NoWindows()).stored_windows(sources) == {}


def test_payload_sentence_spans_are_used_unless_the_chunk_was_clipped():
    """Fails if a clipped chunk (text cut, payload copied) used the stored spans of its old text."""
    text = "First sentence here. Second one follows."
    c = RetrievedChunk(1, "x", 1.0, {"text": text, "sentence_spans": [[0, 5]]})
    assert source_sentence_spans(c) == [(0, 5)]
    c.payload["clipped_pages"] = [1, 1]
    assert source_sentence_spans(c) == sentence_spans(text)


def test_overlapping_requests_run_the_model_with_one_thread_fewer():
    """Fails if two requests in flight at once do not declare a core busy (the model then runs
    2 intra-op threads on 2 cores beside the other request's work), or if a lone request, or the
    end of the overlap, leaves one declared."""
    assert busy_cores() == 0
    first_in, second_done, release = threading.Event(), threading.Event(), threading.Event()
    seen = []

    def first():
        with request_in_flight():
            seen.append(busy_cores())
            first_in.set()
            release.wait(10)
        seen.append(busy_cores())

    t = threading.Thread(target=first)
    t.start()
    assert first_in.wait(10)
    with request_in_flight():
        seen.append((requests_in_flight(), busy_cores()))
    second_done.set()
    seen.append(busy_cores())
    release.set()
    t.join(10)
    assert seen[:3] == [0, (2, 1), 0] and seen[3] == 0 and busy_cores() == 0


def test_search_and_query_count_as_requests_in_flight(kb, monkeypatch):
    """Fails if /search or /query run their retrieval outside ``request_in_flight``."""
    qs = QueryService(kb)
    counts = []
    real = qs.retriever.retrieve

    def retrieve(*a, **kw):
        counts.append(requests_in_flight())
        return real(*a, **kw)

    monkeypatch.setattr(qs.retriever, "retrieve", retrieve)
    qs.search_logged(DMCA_QUESTION)
    qs.ask(DMCA_QUESTION, log_query=False)
    assert counts == [1, 1] and requests_in_flight() == 0

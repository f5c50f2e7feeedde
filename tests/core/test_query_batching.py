"""Micro-batching of concurrent query embeddings (``Embedder.embed_query``), on the real bundled model.

The tests make batching deterministic without timing: they hold the model (``_model_turn``) so the
first caller (the leader) blocks inside ``encode`` while the others queue, then release it."""

from __future__ import annotations

import threading
import time

import numpy as np

QUESTIONS = [
    "What was the probable cause of the accident?",
    "What was Apple's net sales in the third quarter?",
    "Which retriever does DPR use?",
    "When was the DMCA signed into law?",
    "How many pages does the form have?",
    "What is the total revenue of NVIDIA?",
    "Who is the auditor of Ulta Beauty?",
    "Where did the airplane land?",
]


def _wait_for(pred, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.005)


def _run_queued(embedder, texts: list[str]):
    """Start one ``embed_query`` thread per text while the model lock is held; release it once all
    but the leader are queued. Returns (results by index, errors by index, embed call sizes)."""
    results: dict[int, np.ndarray] = {}
    errors: dict[int, BaseException] = {}

    def worker(i: int) -> None:
        try:
            results[i] = embedder.embed_query(texts[i])
        except BaseException as e:  # noqa: BLE001 -- the test checks who got which error
            errors[i] = e

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(texts))]
    with embedder._model_turn(urgent=False):
        threads[0].start()
        _wait_for(lambda: embedder._query_leader)  # the leader is inside encode, blocked on the lock
        for t in threads[1:]:
            t.start()
        _wait_for(lambda: len(embedder._queries) == len(texts) - 1)
    for t in threads:
        t.join(60)
        assert not t.is_alive(), "an embed_query caller never returned"
    return results, errors


def test_concurrent_queries_share_one_encode_and_get_their_own_vectors(embedder, monkeypatch):
    """Fails if each caller is encoded alone (8 encode calls instead of 2), or if a caller gets
    another caller's row (rows handed out in the wrong order)."""
    alone = {q: embedder.embed([q])[0] for q in QUESTIONS}
    sizes: list[int] = []
    real = embedder.embed

    def counting(texts):
        sizes.append(len(texts))
        return real(texts)

    monkeypatch.setattr(embedder, "embed", counting)
    results, errors = _run_queued(embedder, QUESTIONS)
    assert not errors
    assert sizes == [1, len(QUESTIONS) - 1]  # the leader alone, then everyone who queued meanwhile
    for i, q in enumerate(QUESTIONS):
        assert results[i].shape == (embedder.dim,) and results[i].dtype == np.float32
        # padding in a batch changes the last float digits only; any other question is far away
        assert np.allclose(results[i], alone[q], atol=1e-4), q
        others = [float(results[i] @ alone[o]) for o in QUESTIONS if o != q]
        assert max(others) < float(results[i] @ alone[q]) - 0.05


def test_error_reaches_only_the_caller_whose_text_failed(embedder, monkeypatch):
    """Fails if one bad text fails the whole batch (every caller gets the error), if the error is
    swallowed (the bad caller gets a vector), or if a follower is left waiting."""
    real = embedder.embed

    def picky(texts):
        if any("POISON" in t for t in texts):
            raise ValueError("cannot embed POISON")
        return real(texts)

    monkeypatch.setattr(embedder, "embed", picky)
    texts = QUESTIONS[:3] + ["POISON question"] + QUESTIONS[3:5]
    results, errors = _run_queued(embedder, texts)
    assert set(errors) == {3} and isinstance(errors[3], ValueError) and "POISON" in str(errors[3])
    assert set(results) == set(range(len(texts))) - {3}
    for i in results:
        assert np.allclose(results[i], real([texts[i]])[0], atol=1e-4)


def test_single_caller_is_encoded_at_once_and_no_thread_is_left(embedder):
    """Fails if embed_query differs from embed for a lone caller, if it leaves queued state
    behind, or if batching starts a thread of its own that outlives the calls (a leaked worker)."""
    before = set(threading.enumerate())
    v = embedder.embed_query(QUESTIONS[0])
    assert np.allclose(v, embedder.embed([QUESTIONS[0]])[0], atol=1e-6)
    results, errors = _run_queued(embedder, QUESTIONS[:4])
    assert not errors and len(results) == 4
    assert not embedder._queries and not embedder._query_leader
    assert {t for t in threading.enumerate() if t.is_alive()} - before == set()


def test_interrupted_leader_releases_its_followers(embedder, monkeypatch):
    """Fails if a BaseException in the leader's encode (not an Exception: no per-text retry) leaves
    the followers of its batch waiting forever instead of failing them."""
    calls = {"n": 0}
    real = embedder.embed

    def dies_once(texts):
        calls["n"] += 1
        if calls["n"] == 2:  # the combined batch of the followers
            raise KeyboardInterrupt
        return real(texts)

    monkeypatch.setattr(embedder, "embed", dies_once)
    results, errors = _run_queued(embedder, QUESTIONS[:4])
    assert 0 in results  # the first leader's own batch succeeded
    assert len(errors) == 3
    assert sum(isinstance(e, KeyboardInterrupt) for e in errors.values()) == 1  # the new leader's own
    assert sum(isinstance(e, RuntimeError) and "interrupted" in str(e) for e in errors.values()) == 2


def test_a_query_runs_between_the_slices_of_a_long_embed(embedder, monkeypatch):
    """A long ``embed`` (ingestion, an answer's sentences) takes the model one ``batch_size`` slice
    at a time; a query arriving meanwhile is encoded before the next slice. Fails if the long list
    holds the model for its whole length (the question waits behind every slice), or if slicing
    changes the vectors (another order or padding than one ``encode`` call)."""
    texts = [f"sentence number {i} " + "word " * (i % 17) for i in range(3 * embedder.batch_size)]
    whole = embedder.model.encode(
        texts, batch_size=embedder.batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )
    calls: list[int] = []
    real = embedder._encode
    got: dict[str, np.ndarray] = {}
    query = threading.Thread(target=lambda: got.setdefault("q", embedder.embed_query(QUESTIONS[0])))

    def encode(batch):
        calls.append(len(batch))
        if len(calls) == 1:  # the first slice is running: a question arrives and waits
            query.start()
            _wait_for(lambda: embedder._urgent_waiting == 1)
        return real(batch)

    monkeypatch.setattr(embedder, "_encode", encode)
    vecs = embedder.embed(texts)
    query.join(60)
    b = embedder.batch_size
    assert calls == [b, 1, b, b]
    assert np.allclose(vecs, whole, atol=1e-6)
    assert np.allclose(got["q"], real([QUESTIONS[0]])[0], atol=1e-4)

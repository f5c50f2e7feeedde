"""The embedder gives CPU cores back and forth with bulk ingestion's parse children
(``ragaudit.index.embedding.cores_busy``) without changing a single vector's meaning."""

from __future__ import annotations

import threading

import numpy as np

from ragaudit.index.embedding import busy_cores, cores_busy


def test_vectors_are_the_same_with_cores_busy_and_threads_are_restored(embedder):
    """Texts of mixed lengths embedded while a core is declared busy (the model runs with one
    thread fewer, in length-sorted groups) equal the plain ``encode`` of the same texts, row by
    row, and the model's thread count is back to its default afterwards.
    Fails if the grouped path puts a vector on the wrong row (inverse permutation), drops texts,
    or leaves torch at the reduced thread count."""
    import torch

    texts = [("alpha beta gamma " * n).strip() for n in (1, 30, 4, 60, 2, 17, 9, 45)] * 20  # 160 texts
    texts = [f"{i}: {t}" for i, t in enumerate(texts)]
    plain = embedder.embed(texts)
    assert busy_cores() == 0
    with cores_busy():
        assert busy_cores() == 1
        shared = embedder.embed(texts)
    assert busy_cores() == 0
    assert shared.shape == plain.shape == (len(texts), embedder.dim)
    assert np.allclose(shared, plain, atol=1e-5), float(np.abs(shared - plain).max())
    assert torch.get_num_threads() == embedder.threads


def test_cores_busy_counts_nested_and_concurrent_declarations():
    """Two parse workers declaring a core each count 2, and the count returns to 0 after an
    exception inside the block. Fails if the counter is not decremented on error or is not
    shared between threads."""
    seen: list[int] = []
    inside = threading.Barrier(3)

    def worker() -> None:
        with cores_busy():
            inside.wait()
            inside.wait()

    ths = [threading.Thread(target=worker) for _ in range(2)]
    for th in ths:
        th.start()
    inside.wait()
    seen.append(busy_cores())
    inside.wait()
    for th in ths:
        th.join()
    try:
        with cores_busy():
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert seen == [2] and busy_cores() == 0


def test_large_encodes_give_freed_heap_back_and_queries_do_not_pay(embedder, monkeypatch):
    """An ``embed`` of at least ``TRIM_AFTER_TEXTS`` texts ends with glibc's ``malloc_trim`` (the
    freed activations go back to the OS: RSS 955 -> 550 MB on the bench's windows), a one-text
    query embed does not call it, and on this Linux machine the trim is the real libc function.
    Fails if the trim is dropped from large calls, added to every query, or silently a no-op here."""
    import sys

    from ragaudit.index import embedding

    if sys.platform.startswith("linux"):
        assert embedding._malloc_trim().__name__ == "trim"  # the libc binding, not the no-op fallback
    calls: list[int] = []
    real = embedder._trim
    monkeypatch.setattr(embedder, "_trim", lambda: (calls.append(1), real())[1])
    embedder.embed(["one question?"])
    assert calls == []
    embedder.embed([f"sentence number {i} of a document" for i in range(embedding.TRIM_AFTER_TEXTS)])
    assert calls == [1]

"""The embedder gives CPU cores back and forth with bulk ingestion's parse children
(``core.embedding.cores_busy``) without changing a single vector's meaning."""

from __future__ import annotations

import threading

import numpy as np

from core.embedding import busy_cores, cores_busy


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

"""Ingestion memory is bounded by a batch, not by the document: ``ragaudit.ingest.documents.stage_chunks``
embeds, upserts and writes rows ``STAGE_BATCH_CHUNKS`` chunks at a time, and the embedder
splits long texts into smaller model batches (``Embedder._batches``) so one call's attention
matrices stay under a budget."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import func, select

from ragaudit.ingest import documents as ingest
from ragaudit.pipelines.runner import DagsterRunner
from ragaudit.platform.db import ChunkRow
from ragaudit.text.sentences import window_spans
from tests.conftest import SAMPLES


@pytest.fixture()
def svc(fresh_services):
    """An empty knowledge base of its own (``conftest.fresh_services``)."""
    return fresh_services


def test_a_long_document_is_embedded_and_upserted_in_bounded_interleaved_batches(svc, monkeypatch):
    """dmca.pdf (dozens of chunks) ingested with ``STAGE_BATCH_CHUNKS`` = 5: every upsert carries
    at most 5 points, every embedding call holds the windows of at most 5 chunks, the first
    upsert happens before the last embedding call (batches are written as they are embedded),
    and the published document has as many points and rows as chunks, with the same chunk
    texts as a run in one batch. Fails if ``stage_chunks`` embeds or holds the whole document
    before writing (one upsert of all points, or all embedding calls before the first upsert),
    or loses or duplicates a batch."""
    monkeypatch.setattr(ingest, "STAGE_BATCH_CHUNKS", 5)
    events: list[tuple[str, int]] = []
    real_upsert, real_embed = svc.store.upsert, svc.embedder.embed

    def upsert(ids, *a, **kw):
        events.append(("upsert", len(ids)))
        return real_upsert(ids, *a, **kw)

    def embed(texts):
        events.append(("embed", len(texts)))
        return real_embed(texts)

    monkeypatch.setattr(svc.store, "upsert", upsert)
    monkeypatch.setattr(svc.embedder, "embed", embed)
    data = (SAMPLES / "dmca.pdf").read_bytes()
    out = ingest.ingest_bytes(svc, data, "dmca.pdf", DagsterRunner())
    assert out.status == "ingested", out.message
    n = out.document["chunk_count"]
    ups = [k for e, k in events if e == "upsert"]
    embeds = [i for i, (e, _) in enumerate(events) if e == "embed"]
    assert n > 20 and sum(ups) == n and len(ups) == -(-n // 5) and max(ups) <= 5, (n, ups)
    first_upsert = next(i for i, (e, _) in enumerate(events) if e == "upsert")
    assert first_upsert < embeds[-1], events
    doc_id = out.document["id"]
    with svc.sessions() as s:
        rows = s.scalar(select(func.count()).select_from(ChunkRow).where(ChunkRow.document_id == doc_id))
        texts = list(s.scalars(select(ChunkRow.text).where(ChunkRow.document_id == doc_id).order_by(ChunkRow.index)))
    assert rows == n == svc.store.count(doc_id)
    # each embedding call is exactly the windows of one batch of 5 consecutive chunks
    windows = [len(window_spans(t, svc.embedder, svc.settings.dense_window_tokens)) for t in texts]
    assert [k for e, k in events if e == "embed"] == [sum(windows[a : a + 5]) for a in range(0, n, 5)], events

    monkeypatch.setattr(ingest, "STAGE_BATCH_CHUNKS", 10_000)
    one = ingest.ingest_bytes(svc, data, "dmca.pdf", DagsterRunner(), knowledge_base="other")
    with svc.sessions() as s:
        again = list(
            s.scalars(select(ChunkRow.text).where(ChunkRow.document_id == one.document["id"]).order_by(ChunkRow.index))
        )
    assert again == texts


def test_long_texts_go_to_the_model_in_smaller_batches_with_the_same_vectors(embedder):
    """Texts longer than the model's 256-piece limit and short ones, embedded together: every
    model batch respects ``attention_budget`` (texts x padded length² <= budget) and
    ``batch_size``, short texts still share batches of ``batch_size``, the batches cover each
    text once, and the vectors equal each text embedded alone. Fails if long texts go 32 at a
    time (the 259 MB peak per call measured before), if a text is dropped or repeated, or if a
    vector lands on another text's row."""
    words = "revenue quarter fiscal million table column note total".split()
    long = [" ".join(words[(i + j) % len(words)] for j in range(300)) + f" {i}" for i in range(40)]
    short = [" ".join(words[(i + j) % len(words)] for j in range(12)) + f" {i}" for i in range(70)]
    texts = [t for pair in zip(long, short) for t in pair] + short[40:]
    order = np.argsort([-len(t) for t in texts], kind="stable")
    batches = embedder._batches(texts, order)
    assert sorted(int(j) for b in batches for j in b) == list(range(len(texts)))
    for b in batches:
        longest = min(max(n + 2 for n in embedder.count_tokens([texts[j] for j in b])), embedder.max_seq_length)
        assert len(b) <= embedder.batch_size
        assert len(b) == 1 or len(b) * longest**2 <= embedder.attention_budget, (len(b), longest)
    assert max(len(b) for b in batches if all(texts[j] in short for j in b)) == embedder.batch_size
    assert max(len(b) for b in batches if all(texts[j] in long for j in b)) < embedder.batch_size
    vecs = embedder.embed(texts)
    alone = np.stack([embedder.embed([t])[0] for t in texts[:6]])
    assert np.allclose(vecs[:6], alone, atol=1e-5), float(np.abs(vecs[:6] - alone).max())

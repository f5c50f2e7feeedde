"""``RAGAUDIT_EMBEDDING_PRECISION``: int8 dynamic quantization of the model's Linear layers is read
from the settings and applied at load, its vectors stay close to fp32 on real corpus text, and
it is part of the build fingerprint so re-ingestion re-embeds documents built in the other
precision (and the query side uses the same model as the stored vectors). Speed is measured in
``bench/embedding_precision.py``, not here."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from core.chunking import sentence_spans
from core.embedding import Embedder
from core.pdf import extract_pages
from core.services import shared_embedder
from tests.conftest import SAMPLES, make_settings

MODEL = "bundled:all-MiniLM-L6-v2"
MIN_COSINE = 0.9  # int8 vs fp32 per text, measured with per-channel int8: min 0.93 on these sentences, > 0.97 on the chunk vectors below


def _corpus_sentences(n: int = 40) -> list[str]:
    """Real text: the first ``n`` sentences of at least 40 characters of samples/dmca.pdf."""
    text = "\n".join(p.text for p in extract_pages((SAMPLES / "dmca.pdf").read_bytes())[:4])
    out = [text[a:b] for a, b in sentence_spans(text) if b - a >= 40]
    assert len(out) >= n
    return out[:n]


def test_precision_setting_is_read_and_quantizes_every_linear_layer(monkeypatch, tmp_path, embedder):
    """``RAGAUDIT_EMBEDDING_PRECISION=int8`` reaches ``Settings`` and the services' embedder, whose
    every ``nn.Linear`` is torch's dynamic int8 Linear (fp32 keeps plain Linears); an unknown
    precision is refused by the settings and by ``Embedder``. Fails if the setting is not read,
    not passed to the embedder (or the shared-embedder cache ignores it), or not applied at load."""
    from pydantic import ValidationError

    from core.services import get_services, release_services
    from core.settings import Settings

    monkeypatch.setenv("RAGAUDIT_EMBEDDING_PRECISION", "int8")
    assert Settings(_env_file=None).embedding_precision == "int8"
    monkeypatch.setenv("RAGAUDIT_EMBEDDING_PRECISION", "int4")
    with pytest.raises(ValidationError):
        Settings(_env_file=None)
    with pytest.raises(ValueError, match="int4"):
        Embedder(MODEL, precision="int4")

    from torch.ao.nn.quantized.dynamic import Linear as DynamicInt8Linear

    def count(model, cls) -> int:
        return sum(isinstance(m, cls) for m in model.modules())

    n32 = count(embedder.model, torch.nn.Linear)
    assert embedder.precision == "fp32" and n32 > 0 and count(embedder.model, DynamicInt8Linear) == 0
    settings = make_settings(tmp_path / "data", embedding_precision="int8")
    svc = get_services(settings)
    try:
        emb = svc.embedder  # the model only: no store or database is opened
        assert emb.precision == "int8" and emb is not embedder
        assert count(emb.model, DynamicInt8Linear) == n32 and count(emb.model, torch.nn.Linear) == 0
    finally:
        release_services(settings)


def test_int8_vectors_differ_from_fp32_but_agree_on_corpus_text(embedder):
    """On 40 real sentences of dmca.pdf (and a question), int8 vectors are unit-norm, not equal to
    fp32's, and each has cosine > MIN_COSINE with its fp32 vector; the nearest sentence of the
    question is the same. Fails if the int8 model is a no-op (identical vectors) or damages the
    embedding (a quantized layer with wrong scales gives cosines far below)."""
    int8 = shared_embedder(MODEL, 32, "int8")
    texts = _corpus_sentences()
    a, b = embedder.embed(texts), int8.embed(texts)
    assert a.shape == b.shape == (len(texts), 384)
    assert np.allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-4)
    assert float(np.abs(a - b).max()) > 1e-3
    cos = np.sum(a * b, axis=1)
    assert float(cos.min()) > MIN_COSINE, sorted(cos)[:3]
    q = "On what date was the Digital Millennium Copyright Act signed into law?"
    assert int(np.argmax(a @ embedder.embed_query(q))) == int(np.argmax(b @ int8.embed_query(q)))


def test_precision_enters_the_fingerprint_and_reindex_re_embeds(tmp_path):
    """A document ingested in fp32 is stale once the folder is opened with int8: ``reindex.plan``
    names ``embedding_precision`` as the reason, the rebuild stores int8 vectors (different from
    the fp32 ones, cosine > MIN_COSINE per chunk) and a new fingerprint, after which nothing is
    stale; back to fp32, the int8 build is stale again. Fails if the precision is left out of
    ``build_info`` (nothing rebuilt, fp32 vectors queried with an int8 model), if fp32 builds'
    fingerprints change (every existing folder re-embedded), or if a setting recorded only when
    not at its default goes unnoticed when it is dropped again."""
    from core import reindex
    from core.ingest import fingerprint, ingest_bytes
    from core.services import get_services, release_services
    from core.store import DENSE
    from pipelines.runner import DagsterRunner

    def dense_by_chunk(svc) -> dict[int, np.ndarray]:
        pts = {p: pl["chunk_index"] for p, pl in svc.store.iter_payloads() if pl.get("live")}
        vecs = svc.store.get_vectors(list(pts))
        return {pts[p]: np.asarray(v[DENSE], dtype=np.float32) for p, v in vecs.items()}

    data = tmp_path / "data"
    runner = DagsterRunner()
    fp32 = make_settings(data)
    svc = get_services(fp32)
    try:
        doc = ingest_bytes(svc, (SAMPLES / "20080102X00002.pdf").read_bytes(), "a.pdf", runner).document
        assert "embedding_precision" not in doc["built_with"]  # fp32 builds keep their fingerprint
        before = dense_by_chunk(svc)
    finally:
        release_services(fp32)

    int8 = make_settings(data, embedding_precision="int8")
    svc = get_services(int8)
    try:
        assert svc.embedder.precision == "int8"  # queries of this folder use the int8 model too
        p = reindex.plan(svc)
        assert [d.doc_name for d in p.todo] == ["a.pdf"]
        assert p.todo[0].reasons == ["embedding_precision: None -> 'int8'"]
        res = reindex.run(svc, runner)
        assert [r["doc_name"] for r in res["reingested"]] == ["a.pdf"] and res["failed"] == []
        from core.ingest import get_document

        d = get_document(svc, doc["id"])
        assert d.built_with["embedding_precision"] == "int8"
        assert d.build_fingerprint == fingerprint(d.built_with) != fingerprint(doc["built_with"])
        after = dense_by_chunk(svc)
        assert sorted(after) == sorted(before)
        cos = [float(before[i] @ after[i]) for i in before]
        assert min(cos) > MIN_COSINE and max(float(np.abs(before[i] - after[i]).max()) for i in before) > 1e-3
        assert reindex.plan(svc).todo == []
    finally:
        release_services(int8)

    svc = get_services(fp32)
    try:
        p = reindex.plan(svc)
        assert [d.reasons for d in p.todo] == [["embedding_precision: 'int8' -> None"]]
    finally:
        release_services(fp32)

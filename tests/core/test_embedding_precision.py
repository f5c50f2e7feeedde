"""The int8 embedding experiment (``bench/embedding_precision.py``, not adopted: it lost hit@5 on
both dev parts, docs/evaluation.md) measures what it says: its variants really replace the
model's Linear layers by torch's dynamic int8 ones, and their vectors differ from fp32 on real
corpus text while staying close. And re-ingestion notices a setting recorded in ``build_info``
only when not at its default once it is dropped again (found while adding such a setting for
the experiment). No timing here: speed lives in the bench."""

from __future__ import annotations

import numpy as np
import torch

from ragaudit.ingest.pdf import extract_pages
from ragaudit.text.sentences import sentence_spans
from tests.conftest import SAMPLES

MIN_COSINE = 0.9  # per text, int8 vs fp32: measured min 0.93 on these sentences (bench windows: docs/benchmarks.md)


def _corpus_sentences(n: int = 40) -> list[str]:
    """Real text: the first ``n`` sentences of at least 40 characters of samples/dmca.pdf."""
    text = "\n".join(p.text for p in extract_pages((SAMPLES / "dmca.pdf").read_bytes())[:4])
    out = [text[a:b] for a, b in sentence_spans(text) if b - a >= 40]
    assert len(out) >= n
    return out[:n]


def test_bench_int8_variants_quantize_linears_and_stay_close_to_fp32(embedder):
    """``int8`` replaces every ``nn.Linear`` by torch's dynamic int8 Linear, ``int8_no_ffn_out``
    all but the 6 FFN output projections; on 40 real dmca.pdf sentences the int8 vectors are unit
    norm, differ from fp32 (max |Δ| > 1e-3) and keep cosine > MIN_COSINE each. Fails if a variant
    is a no-op (the bench would compare fp32 with itself), quantizes the wrong layers, or damages
    the embedding far beyond what was measured."""
    from torch.ao.nn.quantized.dynamic import Linear as DynamicInt8Linear

    from bench.embedding_precision import load_variant

    def count(model, cls) -> int:
        return sum(isinstance(m, cls) for m in model.modules())

    n32 = count(embedder.model, torch.nn.Linear)
    # 6 layers x (q, k, v, attention out, ffn in, ffn out) + the BERT pooler (unused by mean pooling)
    assert n32 == 37 and count(embedder.model, DynamicInt8Linear) == 0
    int8 = load_variant("int8")
    assert count(int8.model, DynamicInt8Linear) == n32 and count(int8.model, torch.nn.Linear) == 0
    partial = load_variant("int8_no_ffn_out")
    assert count(partial.model, DynamicInt8Linear) == n32 - 6 and count(partial.model, torch.nn.Linear) == 6
    texts = _corpus_sentences()
    a, b = embedder.embed(texts), int8.embed(texts)
    assert a.shape == b.shape == (len(texts), 384)
    assert np.allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-4)
    assert float(np.abs(a - b).max()) > 1e-3
    cos = np.sum(a * b, axis=1)
    assert float(cos.min()) > MIN_COSINE, sorted(cos)[:3]


def test_reindex_notices_a_non_default_setting_dropped_again(fresh_services, monkeypatch):
    """A document built with ``chunk_atomic_units`` on (recorded in ``build_info`` only when on)
    is stale once the setting is off again: ``reindex.plan`` names it with the reason
    ``chunk_atomic_units: <revision> -> None`` (build info records the chunker's atomic-units
    revision, ``ragaudit.ingest.documents.ATOMIC_UNITS_REVISION``); with the setting still on it is unchanged. Fails if
    ``_changed_settings`` compares only the keys of the current build info (the on -> off change
    went unnoticed: chunks built with the other chunker stayed)."""
    from ragaudit.ingest import reindex
    from ragaudit.ingest.documents import ATOMIC_UNITS_REVISION, ingest_bytes
    from ragaudit.pipelines.runner import DagsterRunner

    svc = fresh_services
    off = svc.settings.model_copy(update={"chunk_atomic_units": False})  # on is the default
    monkeypatch.setattr(svc, "settings", off.model_copy(update={"chunk_atomic_units": True}))
    doc = ingest_bytes(svc, (SAMPLES / "20080102X00002.pdf").read_bytes(), "a.pdf", DagsterRunner()).document
    assert doc["built_with"]["chunk_atomic_units"] == ATOMIC_UNITS_REVISION
    assert reindex.plan(svc).todo == []
    monkeypatch.setattr(svc, "settings", off)
    p = reindex.plan(svc)
    assert [(d.doc_name, d.reasons) for d in p.todo] == [
        ("a.pdf", [f"chunk_atomic_units: {ATOMIC_UNITS_REVISION} -> None"])
    ]

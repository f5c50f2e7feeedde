"""Gold Q&A pairs generated at ingestion (offline extractive generator) on a real PDF."""

import dagster as dg
from sqlalchemy import func, select

from ragaudit.answer.citations import find_quote
from ragaudit.pipelines.resources import RagauditResource
from ragaudit.pipelines.runner import instance_for
from ragaudit.platform.db import ChunkRow, Document, QAPair
from ragaudit.services import services_key


def test_gold_pairs_have_verbatim_evidence_and_counts_in_metadata(kb):
    with kb.sessions() as s:
        doc = s.scalar(select(Document).where(Document.doc_name == "dmca.pdf"))
        rows = s.execute(
            select(QAPair, ChunkRow).join(ChunkRow, ChunkRow.id == QAPair.chunk_id).where(QAPair.document_id == doc.id)
        ).all()
        n_chunks = s.scalar(select(func.count()).select_from(ChunkRow).where(ChunkRow.document_id == doc.id))
    # about 1.5 pairs per sampled chunk; before running headers/footers left page text, 9 of 50 pairs
    # were cloze questions about them ("Copyright Office Summary December what number Page 2?")
    assert len(rows) >= 1.5 * (n_chunks // 3)
    assert not any("Copyright Office Summary" in p.evidence for p, _ in rows)
    for pair, chunk in rows:
        assert find_quote(pair.evidence, chunk.text) >= 0, pair.evidence
        assert pair.answer in pair.evidence and pair.question.endswith("?")
        assert chunk.index % 3 == 0 and chunk.page_start <= pair.page <= chunk.page_end
        assert pair.generator == "extractive" and pair.model is None
    assert any("October 28, 1998" == p.answer for p, _ in rows)

    # kept/discarded counts are asset metadata of the run the kb fixture made (Dagster instance)
    ev = instance_for(kb).get_latest_materialization_event(dg.AssetKey("gold_qa_pairs"))
    md = ev.asset_materialization.metadata
    assert {"kept", "discarded", "chunks_sampled", "generator"} <= set(md)
    assert md["generator"].value == "extractive" and md["discarded"].value == 0

    # materializing again replaces the document's pairs (no duplicates); the check passes
    from ragaudit.pipelines.assets import IngestConfig, evidence_spans_verbatim, gold_qa_pairs

    res = RagauditResource(services_key=services_key(kb.settings))
    with kb.sessions() as s:
        all_chunks = s.scalars(select(ChunkRow).where(ChunkRow.document_id == doc.id).order_by(ChunkRow.index)).all()
    from ragaudit.ingest.documents import get_document

    out = gold_qa_pairs(
        dg.build_asset_context(partition_key=doc.id),
        config=IngestConfig(),  # a run without config (the UI's Materialize): the document's strategy
        ragaudit=res,
        chunks=[_chunk_dict(c, kb) for c in all_chunks],
    )
    assert out.metadata["kept"] == len(rows) and out.metadata["discarded"] == 0
    with kb.sessions() as s:
        assert s.scalar(select(func.count()).select_from(QAPair).where(QAPair.document_id == doc.id)) == len(rows)
    check = evidence_spans_verbatim(dg.build_asset_check_context(), ragaudit=res)
    assert check.passed
    assert check.metadata["not_verbatim"].value == 0 and check.metadata["pairs"].value >= len(rows)
    assert get_document(kb, doc.id).status == "ready"


def _chunk_dict(c, svc):
    """A chunk row as the ``chunks`` asset emits it (page breaks from the Qdrant payload)."""
    payload = dict(svc.store.get_payloads([c.id])[0][1])
    return {
        "index": c.index,
        "text": c.text,
        "header": payload.get("header", ""),
        "page_start": c.page_start,
        "page_end": c.page_end,
        "char_start": c.char_start,
        "char_end": c.char_end,
        "token_count": c.token_count,
        "page_breaks": payload.get("page_breaks", []),
        "section": c.section or "",
    }

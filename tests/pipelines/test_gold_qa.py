"""Gold Q&A pairs generated at ingestion (offline rule generator) on real PDFs."""

import dagster as dg
import pytest
from sqlalchemy import func, select

from ragaudit.answer.citations import find_quote
from ragaudit.evaluate.goldcheck import REASONS, answer_in_evidence, question_problem
from ragaudit.ingest.documents import get_document
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
    # the summary states few typed facts in checkable sentences: the pairs are few, and well formed
    assert rows and n_chunks
    assert not any("Copyright Office Summary" in p.evidence for p, _ in rows)
    for pair, chunk in rows:
        assert find_quote(pair.evidence, chunk.text) >= 0, pair.evidence
        assert answer_in_evidence(pair.answer, pair.evidence) and question_problem(pair.question) is None
        assert chunk.index % 3 == 0 and chunk.page_start <= pair.page <= chunk.page_end
        assert pair.generator == "rules" and pair.model is None and pair.kind and pair.answer_type
    assert any("October 28, 1998" == p.answer and p.question.startswith("When was") for p, _ in rows)

    # generated / stored / rejected counts are asset metadata of the run the kb fixture made
    # (Dagster instance) and the document's gold report
    ev = instance_for(kb).get_latest_materialization_event(dg.AssetKey("gold_qa_pairs"))
    md = ev.asset_materialization.metadata
    assert {"kept", "generated", "stored", "discarded", "chunks_sampled", "generator"} <= set(md)
    assert {f"rejected_{r}" for r in REASONS} <= set(md)
    report = get_document(kb, doc.id).gold_report
    assert report["stored"] == len(rows) and set(report["rejected"]) == set(REASONS)
    # each reason that rejected a pair shows one, and only those reasons do
    assert set(report["rejected_examples"]) == {r for r, n in report["rejected"].items() if n}
    assert all(" -> " in x for x in report["rejected_examples"].values())
    assert report["generated"] == report["stored"] + sum(report["rejected"].values()) + report["discarded_instruction"]

    # materializing again replaces the document's pairs (no duplicates); the check passes
    from ragaudit.pipelines.assets import IngestConfig, gold_qa_pairs
    from ragaudit.pipelines.checks import evidence_spans_verbatim

    res = RagauditResource(services_key=services_key(kb.settings))
    with kb.sessions() as s:
        all_chunks = s.scalars(select(ChunkRow).where(ChunkRow.document_id == doc.id).order_by(ChunkRow.index)).all()
    out = gold_qa_pairs(
        dg.build_asset_context(partition_key=doc.id),
        config=IngestConfig(),  # a run without config (the UI's Materialize): the document's strategy
        ragaudit=res,
        chunks=[_chunk_dict(c, kb) for c in all_chunks],
    )
    assert out.metadata["kept"] == len(rows)
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


def _registered_report(svc, name: str = "20080116X00055.pdf"):
    """An NTSB report of tests/data registered as a document (no run) and its chunks:
    ``(document id, chunks)``, what ``generate_for_document`` takes at ingestion."""
    from ragaudit.ingest.chunking import chunk_document, document_title
    from ragaudit.ingest.pdf import extract_pages
    from tests.conftest import DATA

    pages = extract_pages((DATA / "ntsb" / name).read_bytes())
    chunks = chunk_document(pages, svc.embedder, document_title(name, pages), max_tokens=svc.settings.chunk_max_tokens)
    with svc.sessions.begin() as s:
        doc = Document(doc_name=name, name_key=name, sha256="0" * 64)
        s.add(doc)
        s.flush()
        return doc.id, chunks


def test_stored_gold_set_of_a_real_pdf_has_no_malformed_question(fresh_services):
    """Fails if the pairs stored for a real PDF (an NTSB report of tests/data, through the same
    generate-check-store path as ingestion) hold a malformed question, an answer missing from its
    evidence, or a question a person could not place (no qualifier naming the accident)."""
    from ragaudit.evaluate.goldgen import generate_for_document
    from ragaudit.types import Strategy

    svc = fresh_services
    doc_id, chunks = _registered_report(svc)
    md = generate_for_document(svc, doc_id, chunks, Strategy.sentence)
    with svc.sessions() as s:
        pairs = s.scalars(select(QAPair).where(QAPair.document_id == doc_id)).all()
        report = s.get(Document, doc_id).gold_report
    assert len(pairs) == md["stored"] >= 5 and report["stored"] == len(pairs)
    kinds = {p.kind for p in pairs}
    assert "labelled_value" in kinds
    for p in pairs:
        assert question_problem(p.question) is None, p.question
        assert answer_in_evidence(p.answer, p.evidence), (p.answer, p.evidence)
        assert " accident at " in p.question or " crash at " in p.question, p.question
        assert p.generator == "rules" and p.answer_type


def test_generated_questions_are_not_refused_by_the_answer_path(kb):
    """Every gold question generated from the sample PDFs, asked of the knowledge base they came
    from, passes the answerability gate. The generator qualifies a question with the accident's
    date in words ("... at Tallahassee, FL on December 8, 2007?") where the report prints
    "12/08/2007": fails if the gate refuses the system's own gold questions for "not mentioning"
    a date the document holds in another form."""
    from ragaudit.query import QueryService
    from ragaudit.types import Scope

    with kb.sessions() as s:
        questions = list(s.scalars(select(QAPair.question)))
    dated = [q for q in questions if any(m in q for m in ("December", "January"))]
    assert len(questions) >= 10 and dated, questions
    qs = QueryService(kb)
    refused = {}
    for q in questions:
        out = qs.ask(q, Scope(), 5, "hybrid")
        if out["label"] in ("refused", "clarifying"):
            refused[q] = out["answer"]
    assert not refused, refused


def test_llm_written_pairs_record_what_they_spent_and_can_be_switched_off(fresh_services):
    """Gold pairs written by an LLM at ingestion cost one call per sampled chunk. Fails if the
    document's gold report does not say how many calls, tokens and USD they took (the admin shows
    it), or if ``qa_generator=rules`` does not keep a configured LLM out of ingestion."""
    import json

    from ragaudit.evaluate.goldgen import LLMGenerator, build_generator, generate_for_document
    from ragaudit.evaluate.goldrules import RuleGenerator
    from ragaudit.platform.settings import Settings
    from ragaudit.types import Strategy

    svc = fresh_services
    doc_id, chunks = _registered_report(svc)
    reply = {"pairs": [{"question": "What is this passage about?", "answer": "x", "evidence": "x"}]}
    gen = LLMGenerator("openai/gpt-4o-mini", per_chunk=1, mock_response=json.dumps(reply))
    md = generate_for_document(svc, doc_id, chunks, Strategy.sentence, generator=gen)
    with svc.sessions() as s:
        report = s.get(Document, doc_id).gold_report
    assert report["llm_calls"] == md["llm_calls"] == md["chunks_sampled"] > 0
    assert report["prompt_tokens"] > 0 and report["completion_tokens"] > 0
    assert report["cost_usd"] > 0 and md["cost_usd"] == report["cost_usd"]

    base = svc.settings.model_dump()
    svc.settings = Settings(**{**base, "llm_model": "openai/gpt-4o-mini", "qa_generator": "rules"})
    assert isinstance(build_generator(svc), RuleGenerator)
    svc.settings = Settings(**{**base, "llm_model": "openai/gpt-4o-mini", "qa_generator": "auto"})
    assert isinstance(build_generator(svc), LLMGenerator)
    svc.settings = Settings(**{**base, "llm_model": "", "qa_generator": "llm"})
    with pytest.raises(ValueError, match="RAGAUDIT_LLM_MODEL"):
        build_generator(svc)

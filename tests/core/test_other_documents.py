"""An answer quoting one document, when other documents among the sources hold every word of the
question too, says so in its notes (``query.other_documents_note``): "What was the weather?" over
two accident reports is about either of them. Real PDFs, the real store and embedding model."""

from __future__ import annotations

from ragaudit.query import QueryService, other_documents_note
from ragaudit.types import AnswerResult, Citation, RetrievedChunk, Scope

REPORTS = ["20071229X02007.pdf", "20080102X00002.pdf"]


def test_a_question_both_reports_answer_is_noted_with_both(kb):
    out = QueryService(kb).ask("What was the weather?", log_query=False)
    assert out["label"] == "answered", out["answer"]
    notes = [n for n in out["notes"] if "hold every word of the question" in n]
    assert len(notes) == 1 and all(name in notes[0] for name in REPORTS), out["notes"]


def test_no_note_when_scoped_or_when_the_question_singles_out_a_document(kb):
    scoped = QueryService(kb).ask("What was the weather?", Scope(doc_names=[REPORTS[0]]), log_query=False)
    assert not [n for n in scoped["notes"] if "hold every word" in n], scoped["notes"]
    dmca = QueryService(kb).ask(
        "On what date was the Digital Millennium Copyright Act signed into law?", log_query=False
    )
    assert dmca["label"] == "answered" and not [n for n in dmca["notes"] if "hold every word" in n], dmca["notes"]


def _chunk(doc: str, text: str, neighbor_of: str | None = None) -> RetrievedChunk:
    return RetrievedChunk(
        rank=1, chunk_id=doc, score=1.0, payload={"doc_name": doc, "text": text}, neighbor_of=neighbor_of
    )


def test_the_note_needs_every_word_in_two_documents_and_an_answer_citing_one_of_them():
    q = "What was the wind speed?"
    a, b = _chunk("a.pdf", "Wind speed: 12 knots."), _chunk("b.pdf", "The wind speed was calm.")
    cited_a = AnswerResult(
        "Wind speed: 12 knots. [1]", [Citation(1, "a.pdf", 1, "a", "Wind speed: 12 knots.")], "answered", "x"
    )
    assert "a.pdf, b.pdf" in other_documents_note(q, [a, b], cited_a)
    # the other document lacks "speed": the question's words single out a.pdf
    assert other_documents_note(q, [a, _chunk("b.pdf", "The wind was calm.")], cited_a) is None
    # a neighbour added for context does not count as a source the question could be about
    assert other_documents_note(q, [a, _chunk("b.pdf", "The wind speed was calm.", neighbor_of="a")], cited_a) is None
    refused = AnswerResult("The documents do not contain ...", [], "refused", "x")
    assert other_documents_note(q, [a, b], refused) is None

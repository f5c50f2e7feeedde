"""A quoted line of a column is completed to its sentence. On a page set in columns every line of a
column is read as a sentence of its own, so the best-scoring unit can be a piece of a wrapped
sentence ("We propose a technique called"); the answer quotes the whole sentence, and never joins
a heading, a caption, a table's row, a lead-in or a form's field to the prose around it."""

from __future__ import annotations

from ragaudit.answer.answerers import ExtractiveAnswerer, _complete_fragment, _Sentence, source_sentence_spans
from ragaudit.ingest.chunking import chunk_document, document_title
from ragaudit.ingest.pdf import extract_pages
from ragaudit.types import RetrievedChunk
from tests.conftest import DATA

LINES = [
    "1 Background",
    "We propose a technique called",
    "Unrestricted Relation Discovery that discovers",
    "all possible relations from newspaper texts and",
    "presents them as tables to the reader.",
    "Table 3 Results by corpus and by year",
    "Corpus Tables Precision",
    "News 2,112 0.82",
    "Savings clauses",
    "Section 1201 contains two general savings clauses.",
    "The committee reviewed the",
    "draft in several long meetings held",
    "over the spring and the",
    "summer months of that year and then",
    "published it.",
    "The results of the vote were as follows:",
    "Closing balance of the reserve fund: 48,215 dollars",
    "The Harbour Lantern Cooperative keeps its reserve fund in a separate account.",
]
SENTENCE = (
    "We propose a technique called Unrestricted Relation Discovery that discovers all possible "
    "relations from newspaper texts and presents them as tables to the reader."
)


def _ws(text: str) -> str:
    return " ".join(text.split())


def _column_chunk() -> RetrievedChunk:
    """A chunk whose sentence spans are its lines, as the column reader stores them."""
    text = "\n".join(LINES)
    spans, at = [], 0
    for line in LINES:
        spans.append([at, at + len(line)])
        at += len(line) + 1
    payload = {"text": text, "doc_name": "paper.pdf", "page_start": 1, "page_end": 1, "sentence_spans": spans}
    return RetrievedChunk(rank=1, chunk_id="paper#0", score=0.03, payload=payload)


def _line(chunk: RetrievedChunk, line: str) -> _Sentence:
    a, b = next((a, b) for a, b in source_sentence_spans(chunk) if chunk.text[a:b] == line)
    return _Sentence(1, chunk, a, b, line)


def test_a_line_of_a_wrapped_sentence_is_completed_both_ways():
    c = _column_chunk()
    for piece in (LINES[1], LINES[2], LINES[3], LINES[4]):
        assert _ws(_complete_fragment(_line(c, piece)).text) == SENTENCE, piece


def test_headings_captions_rows_lead_ins_and_form_fields_are_not_joined():
    c = _column_chunk()
    for line in (LINES[0], LINES[5], LINES[6], LINES[7], LINES[8], LINES[9], LINES[15], LINES[16]):
        s = _line(c, line)
        assert _complete_fragment(s) is s, line


def test_a_sentence_running_over_more_lines_than_the_limit_stays_as_it_is():
    c = _column_chunk()
    s = _line(c, LINES[10])  # its end is four lines on: beyond FRAGMENT_LINES
    assert _complete_fragment(s) is s


def test_the_answer_quotes_the_whole_sentence_and_its_citation_holds(embedder):
    res = ExtractiveAnswerer(embedder).answer("What technique do the authors propose?", [_column_chunk()])
    assert res.label == "answered"
    assert SENTENCE in _ws(res.answer)
    assert any(_ws(c.quote) == SENTENCE and c.verified for c in res.citations)


def test_a_two_column_paper_line_is_completed(embedder):
    """On a real two-column page (the DPR paper) a chunk's lines of one sentence are read apart
    ("For" / "example, synonyms or paraphrases ..."): each is completed to the sentence."""
    pages = extract_pages((DATA / "karpukhin2020-dpr.pdf").read_bytes())
    chunks = chunk_document(pages, embedder, document_title("dpr", pages), "sentence", 200, embedder=embedder)
    pieces = []
    for c in chunks:
        rc = RetrievedChunk(rank=1, chunk_id=f"dpr#{c.index}", score=0.03, payload={"text": c.text})
        for a, b in source_sentence_spans(rc):
            if _ws(rc.text[a:b]) in ("For", "example, synonyms or paraphrases that consist of completely different"):
                pieces.append(_Sentence(1, rc, a, b, rc.text[a:b]))
            elif _ws(rc.text[a:b]).startswith("example, synonyms or paraphrases"):
                pieces.append(_Sentence(1, rc, a, b, rc.text[a:b]))
    assert pieces, "the paper's chunks no longer split this sentence into lines"
    for piece in pieces:
        assert _ws(_complete_fragment(piece).text) == (
            "For example, synonyms or paraphrases that consist of completely different tokens may still "
            "be mapped to vectors close to each other."
        ), piece.text

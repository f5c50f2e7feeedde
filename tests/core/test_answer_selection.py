"""Which sentences the offline answerer quotes, and which span its concise answer takes, on real
chunks of real PDFs (tests/data, samples/; real extraction, real chunker, the bundled embedding model).

Scores are given explicitly where a rule decides between near-tied sentences: the rules are about
what happens inside a score band, and real scores of two passages alone would not sit in it."""

from __future__ import annotations

import pytest

from ragaudit.answer.answerers import ExtractiveAnswerer, _Sentence, source_sentence_spans
from ragaudit.answer.concise import concise_answer
from ragaudit.ingest.chunking import chunk_document, document_title
from ragaudit.ingest.pdf import extract_pages
from ragaudit.types import RetrievedChunk
from tests.conftest import DATA, SAMPLES

_CHUNKS: dict[str, list] = {}


def _ws(text: str) -> str:
    return " ".join(text.split())


def _source(name: str, phrase: str, n: int, score: float, embedder) -> RetrievedChunk:
    """The chunk of ``name`` (chunker defaults, 200 word pieces) holding ``phrase``, as retrieval's
    ``n``-th source."""
    if name not in _CHUNKS:
        path = DATA / name if (DATA / name).is_file() else SAMPLES / name
        pages = extract_pages(path.read_bytes())
        _CHUNKS[name] = chunk_document(pages, embedder, document_title(name, pages), "sentence", 200, embedder=embedder)
    c = next(c for c in _CHUNKS[name] if phrase in _ws(c.text))
    return RetrievedChunk(
        rank=n,
        chunk_id=f"{name}#{c.index}",
        score=score,
        payload={
            "text": c.text,
            "doc_name": name,
            "page_start": c.page_start,
            "page_end": c.page_end,
            "page_breaks": c.page_breaks,
            "header": c.header,
        },
    )


def _sentence(src: RetrievedChunk, n: int, phrase: str) -> _Sentence:
    a, b = next((a, b) for a, b in source_sentence_spans(src) if phrase in _ws(src.text[a:b]))
    return _Sentence(n, src, a, b, src.text[a:b])


@pytest.fixture(scope="module")
def reports(embedder):
    """Source 1: the Chevroux accident's factual report (page 1); source 2: the Tallahassee
    accident's final report (page 1). Two documents of one layout, each holding its own answer."""
    first = _source("20080102X00002.pdf", "The French investigators reported", 1, 0.0328, embedder)
    other_report = _source("20071229X02007.pdf", "The pilot, age 85", 2, 0.0298, embedder)
    return first, other_report


def test_near_tied_sentences_quote_the_top_ranked_passages_document(reports, embedder):
    """Among sentences good enough to quote (at least ``relative`` x the best), the answer quotes
    the document of the highest-ranked passage, not the document of a sentence that is best by a
    hair (another accident report's sentence over the report ranked first); a sentence of the top
    passage below that band does not move the answer to its document. Fails if the document is
    always the best sentence's (``select_sentences`` not applied) or always the top passage's."""
    top, second = reports
    ans = ExtractiveAnswerer(embedder)
    best = _sentence(second, 2, "The pilot, age 85")
    accord = _sentence(top, 1, "The French investigators reported")
    other = _sentence(second, 2, "The reported weather about the time")
    picked = ans.select_sentences([(1.521, best), (1.483, accord), (1.460, other)])
    assert {s.chunk.doc_name for s in picked} == {top.doc_name}
    assert picked[0] is accord
    # the top passage's sentence far below the best (under relative x best): the best sentence's document
    picked = ans.select_sentences([(1.521, best), (1.460, other), (0.9, accord)])
    assert {s.chunk.doc_name for s in picked} == {second.doc_name} and picked[0] is best
    # good enough to quote (over relative x best) but no near tie (under document_tie x best): the top
    # passage's document does not take the answer from a clearly better sentence (an NTSB report's
    # "190 hours" at 1.72 against another report's "Flight Time: 119 hours" at rank 1, 1.28)
    assert ans.relative * 1.521 < 1.2 < ans.document_tie * 1.521
    picked = ans.select_sentences([(1.521, best), (1.460, other), (1.2, accord)])
    assert {s.chunk.doc_name for s in picked} == {second.doc_name} and picked[0] is best


def test_form_caption_labels_the_value_above_it_for_the_concise_answer(embedder):
    """On a 10-Q cover page the IRS number is printed above its caption "(I.R.S. Employer
    Identification No.)", while "Commission File Number: 001-36743" labels its value with a colon.
    The answerer quotes the value line with its caption, and the caption labels that value for the
    concise answer as a colon label would: the concise answer is 94-2404110 even when the
    Commission File Number line scores close to the caption (sentence scores from the dev run that
    lost it). Fails if the caption is not passed as the value line's label (``_concise``) or not
    counted as one (``concise._label_match``)."""
    cover = _source("2023 Q3 AAPL.pdf", "(I.R.S. Employer Identification No.)", 1, 0.0323, embedder)
    q = "What is Apple Inc.'s IRS Employer Identification Number?"
    caption = _sentence(cover, 1, "Identification No.")
    file_no = _sentence(cover, 1, "Commission File Number")
    scored = [(1.569, caption), (0.983, file_no)]
    picked = ExtractiveAnswerer._complete_captions([caption])
    assert [p.text.split()[-1] for p in picked][0] == "94-2404110"  # the value line is quoted with its caption
    chosen, _, _ = ExtractiveAnswerer(embedder, concise_min_confidence=0.0)._concise(q, scored, picked, cover.doc_name)
    assert chosen.text == "94-2404110"
    # the same sentences without the caption: the colon-labelled field wins
    pool = [(1.569, picked[0].text, ""), (1.569, caption.text, ""), (0.983, file_no.text, "")]
    assert concise_answer(q, pool) == "001-36743"
    assert concise_answer(q, [(1.569, picked[0].text, "", caption.text.strip()[1:-1]), *pool[1:]]) == "94-2404110"


def test_a_form_line_number_is_no_value(embedder):
    """On Form 1040NR, "line 22" names a place on the form: it is no identifier or number for a
    question that does not ask for a line, so the catalog number printed on the form wins over it
    even from a sentence scoring a little lower; a question asking "on which line" still gets the
    line's number. Fails if "line" is not a structure word (``concise._STRUCTURE``) or if the
    question naming it does not lift that."""
    form = _source("f1040nr.pdf", "Cat. No. 11364D", 1, 0.0328, embedder)
    exempt = _source("f1040nr.pdf", "include this exempt income on line", 3, 0.0311, embedder)
    cat = _sentence(form, 1, "Cat. No. 11364D").text
    line = _sentence(exempt, 3, "include this exempt income on line").text  # "... on line 22 of Form 1040NR)"
    q = "What is the IRS catalog number printed on the 2007 Form 1040NR?"
    assert concise_answer(q, [(1.294, line), (1.271, cat)]) == "11364D"
    assert concise_answer(q, [(1.0, line)]) is None  # its only number is a line's
    assert concise_answer("On which line of Form 1040NR is exempt income included?", [(1.0, line)]) == "22"


def test_a_lead_in_is_quoted_with_its_completion_and_is_never_the_concise_answer(embedder):
    """The NTSB report's "... determines the probable cause(s) of this accident to be:" announces the
    cause on the next line: the answer quotes both, and even with no confidence threshold the
    lead-in is not given as the concise answer (a "what was the cause" question has no typed
    span: the quoted sentences stand alone). Fails if the completion is not quoted or the lead-in
    becomes the concise answer."""
    src = _source("20071229X02007.pdf", "probable cause(s) of this accident to be:", 1, 0.033, embedder)
    out = ExtractiveAnswerer(embedder, concise_min_confidence=0.0).answer(
        "What was the probable cause of the accident?", [src]
    )
    assert "probable cause(s) of this accident to be:" in out.answer
    assert "misjudged clearance over obstacles" in out.answer
    assert out.concise is None or "to be:" not in out.concise.text


def test_a_table_row_with_a_capitalised_label_is_a_sentence_not_a_heading(embedder):
    """Apple's segment table prints "Greater China 15,758 14,604 8 % 57,475 58,730 (2)%": every word
    of its label is capitalised and it has no final punctuation, which the heading filter took for a
    title, so the answerer never saw the rows of segments, regions or products ("Data Center",
    "Intelligent Cloud") and quoted the MD&A prose instead. Fails if a value row is dropped as a
    heading again, or if a real heading is kept as a sentence."""
    from ragaudit.answer.answerers import _heading_like, _sentences

    src = _source("2023 Q3 AAPL.pdf", "Greater China 15,758 14,604", 1, 0.033, embedder)
    texts = [_ws(s.text) for s in _sentences([src])]
    assert any(t.startswith("Greater China 15,758 14,604") for t in texts), texts
    assert _heading_like("THE DIGITAL MILLENNIUM COPYRIGHT ACT OF 1998")


def test_a_sentence_two_overlapping_chunks_share_is_quoted_once(embedder):
    """Overlapping chunks of one report both hold its "Flight Time: ..." form line. Fails if the
    answer quotes that line twice (once per chunk) instead of once, from the better-ranked chunk,
    or if its other sentence is lost."""
    first = _source("20071229X02007.pdf", "Flight Time: 2319 hours", 1, 0.0328, embedder)
    text = first.text
    a = text.index("Flight Time: 2319 hours")
    # a second chunk of the same page that starts at the shared line (as the chunker's overlap does)
    second = RetrievedChunk(
        rank=2, chunk_id="20071229X02007.pdf#overlap", score=0.0301, payload={**first.payload, "text": text[a:]}
    )
    ans = ExtractiveAnswerer(embedder, concise_min_confidence=0.0)
    out = ans.answer("How many hours had the pilot flown?", [first, second])
    quotes = [c.quote for c in out.citations]
    assert sum("Flight Time: 2319 hours" in q for q in quotes) == 1, quotes
    assert out.answer.count("Flight Time: 2319 hours") == 1, out.answer
    assert next(c for c in out.citations if "Flight Time: 2319 hours" in c.quote).n == 1


def test_a_piece_of_a_quoted_sentence_is_not_quoted_beside_it(embedder):
    """A chunk that starts inside a sentence holds a piece of it. Fails if the answer quotes the
    piece and, from another chunk, the whole sentence, instead of the whole sentence once."""
    from ragaudit.answer.answerers import _distinct

    whole = _source("20071229X02007.pdf", "The pilot reported a total flight experience", 2, 0.03, embedder)
    a = whole.text.index("The pilot reported a total flight")
    cut = whole.text.index("experience", a)  # after the line break the PDF prints there
    piece_chunk = RetrievedChunk(
        rank=1, chunk_id="20071229X02007.pdf#cut", score=0.031, payload={**whole.payload, "text": whole.text[:cut]}
    )
    piece = _Sentence(1, piece_chunk, a, cut, piece_chunk.text[a:cut])
    full = _sentence(whole, 2, "The pilot reported a total flight experience")
    assert _distinct([piece, full]) == [full]  # the whole sentence takes the piece's place
    assert _distinct([full, piece]) == [full]
    other = _sentence(whole, 2, "The pilot, age 85")
    assert _distinct([piece, other, full]) == [full, other]


def _statement_chunk(text: str, page: int) -> RetrievedChunk:
    """A retrieved chunk (rank 1) of a financial statement's page: ``text`` as its whole text."""
    payload = {"text": text, "doc_name": "statement.pdf", "page_start": page, "page_end": page, "header": ""}
    return RetrievedChunk(rank=1, chunk_id="statement#0", score=0.033, payload=payload)


def test_a_tables_column_header_of_periods_is_never_quoted(embedder):
    """A header line of periods ("April 30, May 1,", "2023 2022") names the question's date and
    matches it, but holds no value: the row under it is quoted, the header is not. A single date
    ("December 31, 2022", a signature's date) is a value and stays quotable. Fails if a header
    line is quoted, or if a lone date is taken for a header."""
    from ragaudit.answer.answerers import column_header

    assert column_header("April 30, May 1,") and column_header("2023 2022")
    assert column_header("July 30, 2023 July 31, 2022") and column_header("Sept. 24, 2022 Sept. 25, 2021")
    assert not column_header("December 31, 2022") and not column_header("Net income $ 2,043 $ 1,618")
    table = _statement_chunk(
        "Condensed Consolidated Statements of Income\nThree Months Ended\nApril 30, May 1,\n2023 2022\n"
        "Revenue $ 7,192 $ 8,288\nCost of revenue 2,544 3,148\nNet income $ 2,043 $ 1,618",
        3,
    )
    ans = ExtractiveAnswerer(embedder).answer("What was revenue for the three months ended April 30, 2023?", [table])
    assert "Revenue $ 7,192 $ 8,288" in ans.answer, ans.answer
    assert "April 30, May 1," not in ans.answer and "2023 2022" not in ans.answer, ans.answer


def test_a_tables_header_block_above_its_rows_is_never_quoted(embedder):
    """The lines above a statement's rows — its caption, unit line and column headings, read as one
    sentence — name what the columns hold and state no value: the rows are quoted, the block is
    not. A prose line without a final stop above a row stays quotable when it holds a value, and
    a form field ("Location: ...") always does. Fails if the header block is quoted (it was, beside
    the right row, in an answer about net sales), or if a line with a value is taken for one."""
    from ragaudit.answer.answerers import table_header_block

    caption = (
        "CONDENSED CONSOLIDATED STATEMENTS OF OPERATIONS (Unaudited)\n"
        "(In millions, except number of shares and per share amounts)\n"
        "Three Months Ended Nine Months Ended"
    )
    text = f"{caption}\nJuly 1, June 25, July 1, June 25,\nNet sales $ 81,797 $ 82,959 $ 293,787 $ 304,182\n"
    assert table_header_block(text, 0, len(caption))
    # the next line is prose, not a row of values; or the block states a value or a field
    assert not table_header_block(f"{caption}\nThe table below shows net sales.\n", 0, len(caption))
    assert not table_header_block("Net sales were $81,797 million\nMac 6,840 7,382\n", 0, 30)
    assert not table_header_block("Location: Tallahassee, FL\nMac 6,840 7,382\n", 0, 25)
    table = _statement_chunk(
        f"{caption}\nNet sales $ 81,797 $ 82,959 $ 293,787 $ 304,182\n"
        "Cost of sales 45,384 47,074 164,997 172,130\nOperating expenses 13,415 12,809 40,706 38,409",
        4,
    )
    out = ExtractiveAnswerer(embedder).answer("What were the condensed consolidated net sales in millions?", [table])
    assert "Net sales $ 81,797" in out.answer, out.answer
    assert "STATEMENTS OF OPERATIONS" not in out.answer and "Months Ended" not in out.answer, out.answer


def test_a_heading_over_several_lines_is_never_quoted_nor_completes_a_lead_in(embedder):
    """A table whose column headings wrap over several lines ("Total Number of Approximate Dollar"
    over "Shares Value of" over ...), with a footnote marker and a group label ending in a colon
    before the first row: every heading line is part of the block above the rows, and a lead-in
    announcing the table ("... was as follows:") is completed by what comes under the headings,
    not by a heading line. A period heading's years ("2023 2022 Change") are a heading too; a
    sentence with a number is not. Fails if a heading line is quoted (it was, as the completion of
    the lead-in of a share repurchase table)."""
    from ragaudit.answer.answerers import table_header_block

    lead = "Share repurchase activity during the quarter was as follows (in thousands):"
    headings = [
        "Total Number of Approximate Dollar",
        "Shares Value of",
        "Purchased as Part Shares That May Yet Be",
        "Periods Purchased Share Programs Programs (1)",
    ]
    rows = "April 2, 2023 to May 6, 2023:\nOpen market and privately negotiated purchases 38,121 $ 165.46 38,121\n"
    text = "\n".join([lead, *headings]) + "\n" + rows
    for h in headings:
        at = text.index(h)
        assert table_header_block(text, at, at + len(h)), h
    at = text.index(lead)
    assert not table_header_block(text, at, at + len(lead))
    period = "Three Months Ended Nine Months Ended\n2023 2022 Change 2023 2022 Change\nNet sales by segment:\n"
    period += "Americas $ 35,383 $ 37,472 (6)% $ 122,445 $ 129,850 (6)%\n"
    assert table_header_block(period, 0, 36) and table_header_block(period, 37, 70)
    assert not table_header_block("The pilot was 85 years old\nMac 6,840 7,382\n", 0, 26)
    out = ExtractiveAnswerer(embedder).answer(
        "How were the shares repurchased during the quarter?", [_statement_chunk(text, 21)]
    )
    assert not any(h in out.answer for h in headings), out.answer


def _text_source(n: int, name: str, text: str, score: float) -> RetrievedChunk:
    return RetrievedChunk(
        rank=n,
        chunk_id=f"{name}#0",
        score=score,
        payload={"text": text, "doc_name": name, "page_start": 1, "page_end": 1, "page_breaks": [], "header": ""},
    )


def test_a_short_decision_in_minutes_can_be_quoted(embedder):
    """Minutes print a decision as a short line with no full stop ("Marta was elected Chair").
    Fails if such a line of three or four words with an auxiliary verb cannot be quoted (the
    answer then quotes another document's "... be elected to continue to serve ..."), or if a
    four-word line without one, a label ("Net sales by category"), becomes quotable."""
    minutes = _text_source(
        1,
        "rowing-club-minutes.pdf",
        "Committee Meeting\nHarbour Rowing Club\n14.00, Tuesday 15th March, 2016\n1 Attendance\n1.1 Opening\n"
        "Marta was elected Chair\n1.2 Attendance to be taken\nDaniel, Marta and Innes were in attendance\n"
        "2 Boats\nNet sales by category\n",
        0.0328,
    )
    report = _text_source(
        2,
        "annual-report.pdf",
        "ORDINARY BUSINESS\nThat the members of the Board Audit Committee be elected to continue to serve as "
        "members of the said Committee.\n",
        0.0161,
    )
    out = ExtractiveAnswerer(embedder).answer("Who was elected Chair of the rowing club committee?", [minutes, report])
    assert "Marta was elected Chair" in out.answer
    assert "Board Audit Committee" not in out.answer
    quotable = {
        s.text for _, s in ExtractiveAnswerer(embedder).score_sentences("What were net sales by category?", [minutes])
    }
    assert "Marta was elected Chair" in quotable and "Net sales by category" not in quotable


def test_sentences_written_without_spaces_can_be_quoted(embedder):
    """Japanese and Chinese are written without spaces between words. Fails if their sentences
    count as one word each, so that a knowledge base of Japanese minutes has nothing to quote
    and every question about it is refused with no rule named; a label of a few characters
    stays unquotable."""
    minutes = _text_source(
        1,
        "committee-minutes-ja.pdf",
        "第３回 産業交通水道委員会記録\n◯出席委員（13名）\n委員長 平山たかお議員\n◯委員会説明員\n"
        "委員長は、ただ今から委員会を開会すると宣言しました。\n水洗化の奨励金は令和７年度末で廃止されます。\n",
        0.0328,
    )
    out = ExtractiveAnswerer(embedder).answer("水洗化の奨励金はいつ廃止されますか？", [minutes])
    assert out.label == "answered" and "令和７年度末で廃止されます" in out.answer, out.answer
    quotable = {s.text for _, s in ExtractiveAnswerer(embedder).score_sentences("委員長は誰ですか？", [minutes])}
    assert "委員長は、ただ今から委員会を開会すると宣言しました。" in quotable
    assert "◯委員会説明員" not in quotable, quotable
    labels = _text_source(2, "labels.pdf", "◯委員会説明員\nAgenda\n", 0.01)
    out = ExtractiveAnswerer(embedder).answer("委員長は誰ですか？", [labels])
    assert out.label == "refused" and out.answer.endswith("No retrieved passage holds a sentence to quote.")

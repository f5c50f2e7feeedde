"""Answerers: the LLM path through litellm (mock_response: no network) and the extractive one."""

from ragaudit.answer.answerers import (
    REFUSAL_TEXT,
    ExtractiveAnswerer,
    LLMAnswerer,
    _contents_entries,
    _contents_spans,
    answer_type_bonus,
)
from ragaudit.types import RetrievedChunk


def _chunk(n, text, page=1, breaks=None):
    return RetrievedChunk(
        rank=n,
        chunk_id=f"c{n}",
        score=1.0 / n,
        payload={
            "text": text,
            "doc_name": "dmca.pdf",
            "page_start": page,
            "page_end": page,
            "page_breaks": breaks or [[page, 0]],
        },
    )


SOURCES = [
    _chunk(1, "The DMCA was signed into law by President Clinton on October 28, 1998. It has five titles."),
    _chunk(
        2,
        "Title V protects vessel hull designs.\nOnce registered, protection continues for ten years.",
        page=16,
        breaks=[[16, 0], [17, 38]],
    ),
]


def test_llm_answer_cites_and_costs_through_litellm():
    ans = LLMAnswerer(
        "gpt-4o-mini", mock_response="It was signed on October 28, 1998 [1]. Protection lasts ten years [2]."
    )
    res = ans.answer("When was it signed?", SOURCES)
    assert res.label == "answered"
    assert [c.n for c in res.citations] == [1, 2]
    assert res.citations[0].quote.startswith("The DMCA was signed into law")
    assert res.citations[1].page == 17 and res.citations[1].verified  # quote lies on the second page of chunk 2
    assert res.prompt_tokens > 0 and res.completion_tokens > 0
    assert res.cost_usd > 0  # priced from litellm's local price map


def test_llm_answer_with_bad_citation_is_uncited():
    res = LLMAnswerer("gpt-4o-mini", mock_response="Signed in 1998 [4].").answer("When?", SOURCES)
    assert res.label == "uncited" and res.citation_check["invalid_numbers"] == [4]


def test_llm_sees_and_keeps_a_sources_own_reference_numbers_escaped():
    """Fails if the prompt shows a source's "[12]" bare (the model cannot tell it from source 12),
    or if an answer that keeps it escaped is not answered with a verified citation."""
    src = [_chunk(1, "The code was compiled using GCC 5.3 with the -Ofast optimization flag [12].")]
    ans = LLMAnswerer("gpt-4o-mini", mock_response="It was compiled with the -Ofast optimization flag \\[12] [1].")
    prompt = ans.messages("Which flag?", src)
    assert "flag \\[12]." in prompt[1]["content"] and "\\[34]" in prompt[0]["content"]
    res = ans.answer("Which flag?", src)
    assert res.label == "answered" and res.citation_check["invalid_numbers"] == [], res.citation_check
    assert [c.n for c in res.citations] == [1] and res.citations[0].verified
    assert res.citations[0].quote.endswith("flag [12].")


def test_llm_refusal_is_labelled():
    res = LLMAnswerer("gpt-4o-mini", mock_response=REFUSAL_TEXT).answer("Who won the 2030 World Cup?", SOURCES)
    assert res.label == "refused" and res.citations == []


def test_extractive_answer_is_verbatim_and_cited(embedder):
    res = ExtractiveAnswerer(embedder).answer("For how long does protection continue once registered?", SOURCES)
    assert res.label == "answered"
    assert "ten years" in res.answer and "[2]" in res.answer
    c = next(c for c in res.citations if "ten years" in c.quote)
    assert c.page == 17 and c.quote in SOURCES[1].text.replace("\n", " ")


def test_a_quoted_reference_number_is_not_read_as_a_citation(embedder):
    """Fails if a paper's own "[12]" or "[2, 34]" inside a quoted sentence is left bare in the
    answer (it was read as citing source 12, so the answer was labelled uncited, and "[2, 34]"
    cited source 2 too), or if the escaped quote no longer verifies against its source."""
    src = [
        _chunk(1, "We repeated a subset of tests from [2, 34] on which NSW performed poorly."),
        _chunk(2, "The code was compiled using GCC 5.3 with the -Ofast optimization flag [12]."),
    ]
    res = ExtractiveAnswerer(embedder).answer("Which compiler flag was the code compiled with?", src)
    assert res.label == "answered", (res.answer, res.citation_check)
    assert "flag \\[12]. [2]" in res.answer, res.answer
    assert res.citation_check["invalid_numbers"] == [] and res.citation_check["ok"]
    c = next(c for c in res.citations if c.n == 2)
    assert c.quote.endswith("flag [12].") and c.verified and c.supports
    res = ExtractiveAnswerer(embedder).answer("On which tests did NSW perform poorly?", src)
    assert "from \\[2, 34] on which" in res.answer, res.answer
    assert res.label == "answered" and res.citation_check["cited"] == [1], (res.answer, res.citation_check)


def test_extractive_completes_a_lead_in_sentence(embedder):
    src = [
        _chunk(
            1,
            "Probable Cause and Findings\nThe National Transportation Safety Board determines the probable "
            "cause(s) of this accident to be:\nThe pilot's misjudged clearance over obstacles during final "
            "approach.\nFindings\nPersonnel issues",
        )
    ]
    res = ExtractiveAnswerer(embedder).answer("What was the probable cause of the accident?", src)
    assert "misjudged clearance over obstacles" in res.answer
    assert res.citation_check["ok"]


def test_answer_type_prefers_a_duration_for_how_long(embedder):
    assert answer_type_bonus("For how long am I covered?", "protection continues for ten years") == 0.3
    assert answer_type_bonus("For how long am I covered?", "hulls no longer than 200 feet") == 0.15
    assert answer_type_bonus("On what date was it signed?", "signed on October 28, 1998") == 0.3
    assert answer_type_bonus("Who signed it?", "signed on October 28, 1998") == 0.0
    # the first wh-phrase decides: a count, though a "when" clause follows
    assert answer_type_bonus("How many stores ran when the year ended?", "opened on March 1, 2022") == 0.15
    assert answer_type_bonus("When, and how many, stores opened?", "opened on March 1, 2022") == 0.3
    # "how many passages": a number of passages is the answer's type; another number is only a number
    q = "How many passages were used in the Wikipedia corpus?"
    assert answer_type_bonus(q, "which results in 21,015,324 passages in the end") == 0.3
    assert answer_type_bonus(q, "blocks of 100 words as passages, following Wang et al. (2019)") == 0.15
    assert answer_type_bonus("How many Ulta Beauty shares were voted?", "40,151,725 common shares voted for") == 0.3

    src = [
        _chunk(
            1,
            "Title V, the Vessel Hull Design Protection Act, creates a new form of protection for the design "
            "of vessel hulls.",
        ),
        _chunk(
            2,
            "Useful articles are limited to hulls of vessels no longer than 200 feet. Once registered, "
            "protection continues for ten years from the date protection begins.",
            page=17,
        ),
    ]
    res = ExtractiveAnswerer(embedder).answer(
        "If I file to protect the shape of my boat's hull, for how long am I covered?", src
    )
    assert "ten years" in res.answer and any(c.page == 17 for c in res.citations)


def test_form_caption_is_quoted_with_the_value_above_it(embedder):
    src = [
        _chunk(
            1,
            "Apple Inc.\n(Exact name of Registrant as specified in its charter)\nCalifornia 94-2404110\n"
            "(State or other jurisdiction (I.R.S. Employer Identification No.)\nOne Apple Park Way",
        )
    ]
    res = ExtractiveAnswerer(embedder).answer("What is Apple Inc.'s IRS Employer Identification Number?", src)
    assert "94-2404110" in res.answer
    assert res.answer.index("94-2404110") < res.answer.index("Identification No.")
    assert all(c.quote in src[0].text.replace("\n", " ") for c in res.citations)


def test_a_cover_line_ending_in_an_identifier_is_a_value_not_a_heading(embedder):
    """Fails if "Commission File Number 001-37845" is dropped as a heading (every word capitalised,
    no final stop): the cover page of Microsoft's 10-Q (real PDF, page 1) then answered "1)" from
    "(1) The Report fully complies ...". A capitalised title ending in a plain number stays out."""
    from pathlib import Path

    from ragaudit.answer.answerers import _heading_like
    from tests.pdf_pages import pages as extract_pages_once

    pdf = Path(__file__).resolve().parents[2] / "bench" / "probes" / "external" / "pdfs" / "2023 Q3 MSFT.pdf"
    cover = extract_pages_once(pdf)[0].text
    src = [
        _chunk(1, cover[: cover.index("Securities registered pursuant")]),
        _chunk(
            2,
            "(1) The Report fully complies with the requirements of section 13(a) or 15(d) of the "
            "Securities Exchange Act of 1934; and",
        ),
    ]
    res = ExtractiveAnswerer(embedder, concise_min_confidence=0.0).answer(
        "What is Microsoft's SEC Commission File Number?", src
    )
    assert res.concise.text == "001-37845"
    assert "Commission File Number 001-37845 [1]" in res.answer
    assert _heading_like("THE DIGITAL MILLENNIUM COPYRIGHT ACT OF 1998") and _heading_like("Item 1A. Risk Factors 44")


def test_a_table_of_contents_entry_is_not_quoted_as_an_answer(embedder):
    """A question naming a section's title matches its table-of-contents entry word for word
    ("4.1.2 SYSCALL 1 … 42"), which says on which page the section starts, not what it says.
    Fails if an entry is quoted, or if the section's own sentence is not."""
    contents = _chunk(
        1,
        "Contents\n4.1.1 SYSCALL 0 … 41\n4.1.2 SYSCALL 1 … 42\n4.1.3 SYSCALL 2 … 43\n4.1.4 SYSCALL 3 … 44",
        page=4,
    )
    section = _chunk(
        2,
        "4.1.2 SYSCALL 1\nThe program opens a file with SYSCALL 1, which returns the file descriptor in R1.",
        page=42,
    )
    res = ExtractiveAnswerer(embedder).answer("What does SYSCALL 1 do?", [contents, section])
    assert "…" not in res.answer
    assert "opens a file with SYSCALL 1" in res.answer and all(c.page == 42 for c in res.citations), res.answer


def test_a_contents_page_without_leaders_is_not_quoted_line_by_line(embedder):
    """A contents page printed without leaders is split into one sentence per line ("D. Dynamics
    Test 6"), each too short to be recognised alone. Fails if such a line is quoted for a
    question naming its section, or if the section's own sentence is not."""
    contents = _chunk(
        1,
        "Simulator v1.0 User Manual\nCONTENTS\nI. Introduction 2\nII. Simulation Tests and Their Parameters 2\n"
        "A. Exciton Diffusion Test 3\nB. Time-of-Flight Charge Transport Test 3\nC. Dynamics Test 6\n"
        "D. Steady State Charge Transport Test 7\nIII. Other Simulation Parameters 8",
        page=1,
    )
    section = _chunk(
        2,
        "D. Steady State Charge Transport Test\nThe steady state charge transport test measures the bulk "
        "charge carrier mobility at a given electric field and temperature.",
        page=7,
    )
    res = ExtractiveAnswerer(embedder).answer("What is the Steady State Charge Transport Test?", [contents, section])
    assert "Test 7" not in res.answer and "Dynamics Test 6" not in res.answer, res.answer
    assert "measures the bulk charge carrier mobility" in res.answer and all(c.page == 7 for c in res.citations)


def test_entries_under_a_contents_heading_may_hold_dates_and_wrap(embedder):
    """A filing's contents page lists its statements by title, with dates in the titles and
    titles wrapped over two lines ("... ended April 30, 2023 and May 1, 2022 3"): under a
    "TABLE OF CONTENTS" heading these lines are entries, never quoted. Fails if an entry is
    quoted for a question naming its statement, or if the statement's own row is not."""
    contents = _chunk(
        1,
        "TABLE OF CONTENTS\nPage\nPART I : FINANCIAL INFORMATION\nItem 1. Financial Statements (Unaudited)\n"
        "a) Condensed Consolidated Statements of Income for the three months ended April 30, 2023 and\n"
        "May 1, 2022 3\n"
        "b) Condensed Consolidated Balance Sheets as of April 30, 2023 and January 29, 2023 5\n"
        "c) Notes to Condensed Consolidated Financial Statements 8\n"
        "Item 2. Management's Discussion and Analysis of Financial Condition and Results of Operations 23\n"
        "WHERE YOU CAN FIND MORE INFORMATION\nInvestors should note that we announce material financial "
        "information using our investor relations website.",
        page=2,
    )
    statement = _chunk(
        2,
        "CONDENSED CONSOLIDATED STATEMENTS OF INCOME\n(In millions)\nThree Months Ended\nApril 30, May 1,\n"
        "2023 2022\nRevenue $ 7,192 $ 8,288\nCost of revenue 2,544 2,857\nGross profit 4,648 5,431",
        page=3,
    )
    spans = _contents_spans(contents.text)
    assert len(spans) == 1 and contents.text[spans[0][0] : spans[0][1]].endswith("Results of Operations 23")
    res = ExtractiveAnswerer(embedder).answer(
        "What was revenue in the three months ended April 30, 2023?", [contents, statement]
    )
    assert "Statements of Income for the three months" not in res.answer and "May 1, 2022 3" not in res.answer
    assert "7,192" in res.answer and all(c.page == 3 for c in res.citations), res.answer


def test_a_contents_heading_over_prose_or_falling_numbers_is_no_listing():
    """Fails if lines under a contents heading are taken for entries when they are prose, or when
    their last numbers fall (a table's rows, not pages)."""
    prose = "Contents\nThe package holds the device, a cable and a quick start guide.\nKeep the box for returns."
    assert _contents_spans(prose) == ()
    table = "Contents\nScrews, M3 x 8 40\nWashers 12\nNuts 8\nSpacers 4"
    assert _contents_spans(table) == ()


def test_contents_entries_without_leaders_are_recognised_by_their_rising_page_numbers():
    """Fails if a contents page printed without dot leaders ("1 Source files format 9") is not
    recognised, or if a table's rows, a form's numbered lines or a numbered list are taken for one."""
    assert _contents_entries(
        "Contents\n1 Introduction 3\n2 Source files format 9\n2.1 The .data section 11\n3 Appendix 20"
    )
    assert _contents_entries("Preface 1\nGetting Started 4\nAppendix A Glossary 112")
    assert not _contents_entries("Greater China 23,905 25,783\nJapan 14,982 13,521\nRest of Asia Pacific 7,714 8,255")
    assert not _contents_entries("Chapter 9\nSection 4\nArticle 2")  # numbers falling: not a contents page
    form = "78 Industrial royalties (patents, trademarks, etc.) 78\n79 Motion picture or T.V. copyright royalties 79\n80 Other royalties 80"
    assert not _contents_entries(form)  # a form's lines end in their own line number
    assert not _contents_entries("1 Introduction 3\nThe simulator reads the source files and runs them on a pipeline.")


def test_how_many_is_not_a_term_a_sentence_should_repeat():
    """ "How many X" asks for a number: its "many" is no term of the question for the sentence score,
    or a sentence saying "we explore how many examples are needed" outscores the count."""
    from ragaudit.answer.answerers import _asking_terms

    assert _asking_terms("How many passages were used?") == {"mani"}
    assert _asking_terms("How much did Apple spend?") == {"much"}
    assert _asking_terms("Which of the many options is the default?") == set()


def test_what_an_acronym_stands_for_is_the_sentence_that_spells_it_out():
    """ "What does DPR stand for?" expects the words whose initials spell it, before or inside
    parentheses ("Dense Passage Retriever (DPR)", "the DMCA (Digital Millennium Copyright Act)");
    a sentence that only uses the acronym, or a parenthesis whose words do not spell it, gets no
    bonus. A plain word ("What does encryption mean?") is no acronym question."""
    from ragaudit.answer.answerers import spells_out

    q = "What does DPR stand for?"
    assert answer_type_bonus(q, "the model of our Dense Passage Retriever (DPR) is strong") == 0.3
    assert answer_type_bonus(q, "DPR has also been used as an important module") == 0.0
    assert spells_out("DMCA", "the DMCA (Digital Millennium Copyright Act) was signed")
    assert spells_out("FEHB", "enrolled in the Federal Employees Health Benefits (FEHB) Program")
    assert not spells_out("NQ", "the final question (NQ)")
    assert answer_type_bonus("What is the full name of the DMCA?", "The Digital Millennium Copyright Act (DMCA)") == 0.3
    assert answer_type_bonus("What does encryption mean?", "Encryption (scrambling data) protects files") == 0.0

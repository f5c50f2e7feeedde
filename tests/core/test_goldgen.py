"""The offline gold-pair generator (one test per source kind), the check before storing (one
test per rejection reason) and the LLM path through the same check. Small texts of their own;
no model, no index."""

from __future__ import annotations

import json

import pytest

from ragaudit.evaluate.goldcheck import REASONS, PairCheck, question_problem
from ragaudit.evaluate.goldgen import LLMGenerator, check_pairs
from ragaudit.evaluate.goldrules import (
    RuleGenerator,
    document_context,
    labelled_value_pairs,
    sentence_pairs,
    table_cell_pairs,
)
from ragaudit.types import Chunk


def chunk(text: str, index: int = 0, header: str = "doc | Title", start: int = 0, section: str = "") -> Chunk:
    return Chunk(index, text, header, 1, 1, start, start + len(text), 0, [(1, 0)], section)


NTSB = """National Transportation Safety Board
Aviation Accident Final Report
Location: Lakeview, OR Accident Number: SEA09LA001
Date & Time: 03/14/2009, 1015 PST Registration: N123AB
Aircraft: Cessna 172 Aircraft Damage: Substantial
Pilot Information
Certificate: Commercial
"""

FILING = """UNITED STATES
SECURITIES AND EXCHANGE COMMISSION
FORM 10-Q
For the quarterly period ended March 31, 2024
Example Widgets Inc.
(Exact name of Registrant as specified in its charter)
CONDENSED CONSOLIDATED STATEMENTS OF OPERATIONS (Unaudited)
(In millions)
Three Months Ended
March 31, April 2,
2024 2023
Net sales:
Products $ 1,204 $ 1,100
Services 310 290
Total net sales 1,514 1,390
Net sales of products rose on higher volumes.
"""

VOTES = """FORM 8-K
Example Widgets Inc.
(Exact name of registrant as specified in its charter)
Date of Report (Date of earliest event reported): June 3, 2024
Ratification of the Appointment of Blue Ledger LLP as Auditor
The stockholders ratified the appointment. The results of the vote were as follows:
For Against Abstain Broker Non-Votes
41,220,117 315,904 12,006 2,500,310
"""

PROSE = """THE EXAMPLE HARBOUR ACT OF 2001
The Example Harbour Act was signed into law by Governor Reyes on March 2, 2001. It created a
harbour authority with broad powers over the port.
"""


def _one(pairs, kind):
    got = [p for p in pairs if p.kind == kind]
    assert got, f"no {kind} pair in {pairs}"
    return got


def test_labelled_value_is_asked_with_what_the_document_is_about():
    """Fails if a form field "Label: value" is not turned into a question naming the label, the
    entity of its section and the event the report is about, with the value as the typed answer.
    (A field after another on one line whose value ends in a capitalised word, "Private Age:",
    is read with the two last words as its label; forms here put such fields first.)"""
    c = chunk(NTSB)
    ctx = document_context("report.pdf", [c])
    pairs = _one(labelled_value_pairs(c, ctx), "labelled_value")
    by_answer = {p.answer: p for p in pairs}
    reg = by_answer["N123AB"]
    assert reg.question == "What is the registration in the accident at Lakeview, OR on March 14, 2009?"
    assert reg.answer_type == "identifier" and reg.evidence == "Date & Time: 03/14/2009, 1015 PST Registration: N123AB"
    assert (
        by_answer["Commercial"].question
        == "What is the certificate of the pilot in the accident at Lakeview, OR on March 14, 2009?"
    )
    assert "Accident Number" not in by_answer  # values are never labels: "SEA09LA001" is one
    assert (
        by_answer["SEA09LA001"].question
        == "What is the accident number for the accident at Lakeview, OR on March 14, 2009?"
    )


def test_table_cell_is_row_label_by_column_header_by_period():
    """Fails if a statement table's cell is not asked as row label (with its group) x column
    period x the filing, or its answer loses the table's unit."""
    c = chunk(FILING)
    ctx = document_context("10q.pdf", [c])
    assert ctx.subject == "Example Widgets Inc.'s Form 10-Q for the quarterly period ended March 31, 2024"
    pairs = {p.answer: p for p in _one(table_cell_pairs(c, ctx), "table_cell")}
    p = pairs["$1,204 million"]
    assert p.question == (
        "What were net sales of products for the three months ended March 31, 2024 in Example Widgets Inc.'s "
        "Form 10-Q for the quarterly period ended March 31, 2024?"
    )
    assert p.evidence == "Products $ 1,204 $ 1,100" and p.answer_type == "amount"
    assert pairs["1,514 million"].question.startswith(
        "What were total net sales for the three months ended March 31, 2024"
    )


def test_vote_table_asks_how_many_votes_on_the_proposal_above_it():
    """Fails if a vote tally without a row label is not asked about the proposal printed above the
    table, with the count under the category the question names."""
    c = chunk(VOTES)
    ctx = document_context("8k.pdf", [c])
    (p,) = _one(table_cell_pairs(c, ctx), "vote_table")
    cat = {
        "41,220,117": "cast for",
        "315,904": "cast against",
        "12,006": "abstentions",
        "2,500,310": "broker non-votes",
    }
    assert cat[p.answer] in p.question
    assert "the ratification of the Appointment of Blue Ledger LLP as Auditor" in p.question
    assert p.question.endswith("in Example Widgets Inc.'s Form 8-K dated June 3, 2024?")
    assert p.evidence == "41,220,117 315,904 12,006 2,500,310" and p.answer_type == "count"


def test_typed_sentence_becomes_a_wh_question():
    """Fails if a declarative sentence with a date adjunct is not inverted into a "When was ...?"
    question (subject-auxiliary inversion, parenthetical and date left out), or if a question
    that already names the document's subject gets the document qualifier too."""
    c = chunk(PROSE, header="act | THE EXAMPLE HARBOUR ACT OF 2001")
    ctx = document_context("act.pdf", [c])
    (p,) = _one(sentence_pairs(c, ctx), "sentence")
    assert p.question == "When was the Example Harbour Act signed into law by Governor Reyes?"
    assert p.answer == "March 2, 2001" and p.answer_type == "date"
    assert p.evidence.startswith("The Example Harbour Act was signed")


def test_typed_sentence_count_with_leading_time_adverbial_names_the_filer():
    """Fails if "During fiscal 2023, the Company opened 14 new stores." is not asked as "How many
    new stores did <issuer> open during fiscal 2023?" (the adverbial moved, "the Company" named)."""
    text = FILING.split("CONDENSED")[0] + "During fiscal 2023, the Company opened 14 new stores.\n"
    c = chunk(text)
    ctx = document_context("10q.pdf", [c])
    (p,) = _one(sentence_pairs(c, ctx), "sentence")
    assert p.question == "How many new stores did Example Widgets Inc. open during fiscal 2023?"
    assert p.answer == "14 new stores" and p.answer_type == "count"


def test_paraphrase_sample_uses_other_words_and_is_marked():
    """Fails if the paraphrased share of pairs is not marked, or a paraphrase repeats the literal question."""
    c = chunk(NTSB)
    gen = RuleGenerator(per_chunk=5, paraphrase_share=1.0)
    gen.prepare("report.pdf", [c])
    out = gen.generate(c)
    paras = [p for p in out if p.paraphrase]
    assert paras
    literal = {p.question for p in RuleGenerator(per_chunk=5, paraphrase_share=0.0).candidates(c)}
    assert all(p.question not in literal and question_problem(p.question) is None for p in paras)


GOOD = ("What is the registration in the accident at Lakeview?", "N123AB", "Registration: N123AB", "identifier")
CHUNK = "Date & Time: 03/14/2009 Registration: N123AB Aircraft: Cessna 172"


@pytest.mark.parametrize(
    "reason, pair",
    [
        (
            "not_a_question",
            ("The registration of the aircraft which name?", "N123AB", "Registration: N123AB", "identifier"),
        ),
        (
            "not_a_question",
            ("What is the registration of the aircraft", "N123AB", "Registration: N123AB", "identifier"),
        ),
        (
            "placeholder",
            ("What is the ( what number ) of the aircraft?", "N123AB", "Registration: N123AB", "identifier"),
        ),
        (
            "placeholder",
            ("What is the [registration] of the aircraft?", "N123AB", "Registration: N123AB", "identifier"),
        ),
        ("dangling_fragment", ("What is the registration of the?", "N123AB", "Registration: N123AB", "identifier")),
        ("dangling_fragment", ("Which name -Votes of the aircraft?", "N123AB", "Registration: N123AB", "identifier")),
        (
            "answer_too_short",
            ("When was the aircraft registered at Lakeview?", "03", "Date & Time: 03/14/2009", "date"),
        ),
        ("answer_too_short", ("Who registered the aircraft at Lakeview?", "Reyes", "Registration: N123AB", "person")),
        (
            "evidence_not_verbatim",
            ("What is the registration of the aircraft?", "N123AB", "Registration: N999ZZ", "identifier"),
        ),
        (
            "answer_not_in_evidence",
            ("What is the registration of the aircraft?", "N999ZZ", "Registration: N123AB", "identifier"),
        ),
    ],
)
def test_each_rejection_reason(reason, pair):
    """Fails if a pair with this defect is not rejected for this reason (and counted)."""
    chk = PairCheck()
    assert chk.check(*pair, CHUNK) == reason
    assert chk.report()[reason] == 1 and sum(chk.report().values()) == 1 and set(chk.report()) == set(REASONS)
    # the reason keeps its first rejected question and answer as the example the admin shows
    assert chk.examples == {reason: f"{pair[0]} -> {pair[1]}"}
    assert chk.check(*pair, CHUNK) == reason and chk.report()[reason] == 2
    assert chk.examples == {reason: f"{pair[0]} -> {pair[1]}"}


def test_near_duplicate_and_ambiguous_questions_are_rejected():
    """Fails if a second pair asking the same (the document qualifier aside) is stored, or if a
    question that gets two different answers in one document keeps its first pair."""
    chk = PairCheck(context=" in the accident at Lakeview")
    assert chk.check(*GOOD, CHUNK) is None
    same = (
        "What is the aircraft registration in the accident at Lakeview?",
        "N123AB",
        "Registration: N123AB",
        "identifier",
    )
    assert chk.check(*same, CHUNK) == "near_duplicate"
    other = ("What is the registration in the accident at Lakeview?", "Cessna 172", "Aircraft: Cessna 172", "text")
    assert chk.check(*other, CHUNK) == "near_duplicate" and chk.dropped == {0}
    assert chk.report()["near_duplicate"] == 3
    # a different question about the same document is no duplicate
    assert (
        chk.check(
            "What aircraft was involved in the accident at Lakeview?",
            "Cessna 172",
            "Aircraft: Cessna 172",
            "text",
            CHUNK,
        )
        is None
    )


def test_llm_pairs_go_through_the_same_check_and_quote_their_evidence():
    """Fails if the model's pairs skip the check (an invented quote or a malformed question is
    stored), or if the prompt does not delimit the passage as data and ask for the evidence quote."""
    c = chunk(NTSB)
    reply = {
        "pairs": [
            {
                "question": "Which aircraft tail number was involved at Lakeview?",
                "answer": "N123AB",
                "evidence": "Registration: N123AB",
            },
            {
                "question": "What colour was the aircraft?",
                "answer": "purple",
                "evidence": "The aircraft was painted purple.",
            },
            {
                "question": "aircraft damage which name",
                "answer": "Substantial",
                "evidence": "Aircraft Damage: Substantial",
            },
        ]
    }
    seen = {}
    gen = LLMGenerator("openai/gpt-4o-mini", per_chunk=3, mock_response=json.dumps(reply))
    import litellm

    real = litellm.completion

    def spy(**kw):
        seen.update(kw)
        return real(**kw)

    litellm.completion, restore = spy, litellm.completion
    try:
        kept, counts = check_pairs([c], gen, "report.pdf", every=1)
    finally:
        litellm.completion = restore
    assert [p.answer for _, p in kept] == ["N123AB"] and kept[0][1].kind == "llm" and kept[0][1].paraphrase
    assert counts["rejected"]["evidence_not_verbatim"] == 1 and counts["rejected"]["not_a_question"] == 1
    system, user = seen["messages"][0]["content"], seen["messages"][1]["content"]
    assert "evidence" in system and "quote you used" in system and "<source>" in system
    assert "<source " in user and "</source>" in user and "accident at Lakeview, OR" in user


def test_vote_tally_under_a_lead_in_sentence_names_its_proposal():
    """Fails if a tally printed under "With respect to the proposal to ..., the votes were cast ..."
    (no title line) is skipped or asked without the proposal it counts."""
    text = VOTES.split("Ratification")[0] + (
        "Proposal 2. With respect to the proposal to approve the 2024 Stock Plan, the votes were cast for the "
        "proposal as set forth below:\nVotes For Votes Against Abstentions Broker Non-Votes\n"
        "38,101,220 4,020,551 98,310 2,500,310\n"
    )
    c = chunk(text)
    (p,) = _one(table_cell_pairs(c, document_context("8k.pdf", [c])), "vote_table")
    assert "the proposal to approve the 2024 Stock Plan" in p.question and p.answer in text
    assert question_problem(p.question) is None


def test_empty_form_fields_do_not_lend_their_labels_as_values():
    """Fails if, on a line of two empty fields ("Instrument Rating(s): Second Pilot Present:"), a
    word of the second label is taken for the first field's value, or a field that holds a number
    gets a word."""
    text = NTSB + "Instrument Rating(s): Second Pilot Present:\nYear of Manufacture: Amateur Built: No\n"
    c = chunk(text)
    answers = {p.answer for p in labelled_value_pairs(c, document_context("report.pdf", [c]))}
    assert "Second" not in answers and "Amateur" not in answers and "N123AB" in answers


def test_sentence_case_label_with_a_number_is_a_labelled_value():
    """Fails if a line-initial label in sentence case with a numeric value ("Closing balance of the
    reserve fund: 48,215 dollars.") is not asked, or if a line of running text with a colon and no
    number is taken as a field."""
    text = "Closing balance of the reserve fund: 48,215 dollars.\nNote that: members vote in March.\n"
    c = chunk(text, header="statement | Harbour Rowing Club Statement of Accounts")
    pairs = labelled_value_pairs(c, document_context("statement.pdf", [c]))
    assert [(p.question, p.answer) for p in pairs] == [
        (
            'What is the closing balance of the reserve fund in the document "Harbour Rowing Club Statement of Accounts"?',
            "48,215 dollars",
        )
    ]


def test_a_cut_title_is_completed_from_where_it_starts_on_the_first_page():
    """Fails if the title is completed from the first line holding its first word (a running
    header "Annual Report" above it) instead of the line where the title itself starts."""
    from ragaudit.evaluate.goldrules import _full_title

    head = "Annual Report\nAnnual Performance Report for Fiscal\nYear 2020\n\nThe agency's mission is to serve."
    assert (
        _full_title("Annual Performance Report for Fiscal 202", head)
        == "Annual Performance Report for Fiscal Year 2020"
    )
    assert _full_title("Project Name: Harbour Wall Repair", head) == "Harbour Wall Repair"  # not on the page: as given

"""Answerability: refusals decided from what the question names against what the documents hold.

One test per known failure kind (issue 12, item 6): paraphrase word taken for a name, dash/case
variants, abbreviations (answerable: must not be refused), a rare lower-case term found nowhere,
a person's name found nowhere (must be refused), an underspecified question (``clarifying``).
The document texts are short real-looking passages; the QueryService test below runs the whole
gate on real PDFs.
"""

from core.answerability import assess, is_underspecified, missing_anchors, question_anchors, rare_terms

NTSB = ("On December 29, 2007, about 1330 eastern standard time, a Piper PA-22-150, N5921D, registered to and "
        "operated by the pilot, was substantially damaged during landing at a private airstrip in Tallahassee, "
        "Florida. The airplane was registered in the United States.")
FILING = ("PepsiCo, Inc. and its subsidiaries reported net revenue of $22.3 billion. At the Annual General Meeting "
          "of shareholders held on May 3, the shareholders elected twelve directors. The PC–12/47E aircraft was "
          "leased by the company.")
MEETING = "Ulta Beauty held its Annual Meeting of Stockholders on June 1, 2023, where 87.78% of shares were voted."


def test_paraphrase_compound_is_not_a_name():
    """Fails if a capitalised word joined to a lower-case one ("American-registered") is taken for
    a name the documents must contain: the question is answerable and would be refused."""
    q = "Where did the American-registered Piper land?"
    assert [a.text for a in question_anchors(q)] == ["Piper"]
    assert assess(q, [NTSB]).label is None


def test_dash_and_case_variants_match():
    """Fails if names are matched case- or dash-sensitively: "Pepsico" is the document's
    "PepsiCo", "PC-12/47E" its "PC–12/47E" (en dash)."""
    assert assess("What net revenue did Pepsico report?", [FILING]).label is None
    assert missing_anchors("Who leased the Pilatus PC-Twelve?", [FILING]) == ["Pilatus PC-Twelve"]
    assert assess("Which company leased the PC-12/47E aircraft?", [FILING]).label is None


def test_abbreviation_matches_the_spelled_out_name():
    """Fails if an acronym is only matched literally: "AGM" is the "Annual General Meeting", and
    with one inner letter left out the "Annual Meeting"; an acronym spelled by no capitalised
    phrase ("ESG") stays missing."""
    assert assess("How many directors were elected at PepsiCo's AGM?", [FILING]).label is None
    assert assess("What share of Ulta Beauty's stock was voted at the AGM?", [MEETING]).label is None
    v = assess("What did Ulta Beauty's ESG committee report?", [MEETING])
    assert v.label == "refused" and v.missing == ["ESG"] and "ESG" in v.reason


def test_rare_lower_case_term_found_nowhere_is_refused():
    """Fails if a lower-case subject word absent from every document (a drug name) does not lead
    to a refusal, or if common words absent from the documents ("hull", "covered") do."""
    assert rare_terms("What dose of semaglutide did the pilot take?") == ["semaglutide"]
    v = assess("What dose of semaglutide did the pilot take?", [NTSB])
    assert v.label == "refused" and v.missing == ["semaglutide"] and "semaglutide" in v.reason
    assert rare_terms("If I file to protect the shape of my boat's hull, for how long am I covered?") == []
    # a rare word the passages phrase otherwise is accepted when a close word is there
    v = assess("What did the monoplane hit?", [NTSB], [NTSB], similar=lambda term, ps: ("airplane", 0.8))
    assert v.label is None
    v = assess("What did the monoplane hit?", [NTSB], [NTSB], similar=lambda term, ps: ("landing", 0.2))
    assert v.label == "refused" and v.missing == ["monoplane"]


def test_person_name_found_nowhere_is_refused():
    """Fails if a person's name none of whose words occurs is tolerated because another name of
    the question (the company) is present, or if the name after a title ("Dr.") is cut."""
    v = assess("What did Apple's CFO Margaret Huang say about PepsiCo's net revenue?", [FILING])
    assert v.label == "refused" and any("Margaret Huang" in m for m in v.missing)
    assert [a.text for a in question_anchors("What did Dr. Elena Marquez find?")] == ["Elena Marquez"]
    assert assess("What did Dr. Elena Marquez find about the Piper?", [NTSB]).label == "refused"


def test_underspecified_question_asks_for_clarification():
    """Fails if a question made only of generic measures ("What was the total?") is answered or
    refused instead of ``clarifying``, or if a question naming its subject is held back."""
    for q in ("What was the total?", "What is the date?", "How much was the amount?"):
        v = assess(q, [FILING])
        assert is_underspecified(q) and v.label == "clarifying", q
        assert "does not say of what" in v.reason
    for q in ("What was the total net revenue?", "What was the total in 2023?", "What was PepsiCo's total?"):
        assert not is_underspecified(q), q


def test_question_about_another_subject_is_refused_with_the_missing_words():
    """Fails if a question whose subject words are mostly absent from the searched documents (a
    DMCA question asked of an accident report: no anchor to miss) is answered, or if the reason
    does not name the missing words; a paraphrase that keeps most subject words passes."""
    q = "If I file to protect the shape of my boat's hull, for how long am I covered?"
    v = assess(q, [NTSB])
    assert v.label == "refused" and {"boat", "hull"} <= set(v.missing) and "“hull”" in v.reason
    assert assess("How badly was the Piper damaged when it landed at the private airstrip?", [NTSB]).label is None

"""Citation checking: out-of-range numbers and uncited sentences are flagged."""

from ragaudit.answer.citations import (
    check_citations,
    cited_numbers,
    claim_parts,
    escape_markers,
    find_quote,
    split_answer_sentences,
    strip_citations,
    unescape_markers,
)


def test_out_of_range_citation_is_flagged():
    rep = check_citations("The Act was signed on October 28, 1998 [1]. It has five titles [7].", n_sources=5)
    assert rep.invalid_numbers == [7]
    assert not rep.ok


def test_uncited_sentence_is_flagged():
    rep = check_citations("The Act was signed in 1998 [1]. It also created a new hull protection right.", 3)
    assert rep.uncited_sentences == ["It also created a new hull protection right."]
    assert not rep.ok


def test_valid_answer_passes():
    rep = check_citations("Signed October 28, 1998 [1][2]. Ten years of protection [3].", 3)
    assert rep.ok and rep.cited == [1, 2, 3]


def test_parsing_helpers():
    assert cited_numbers("a [1] b [2, 3]") == [1, 2, 3]
    assert split_answer_sentences("One thing. [1] Two things [2].") == ["One thing. [1]", "Two things [2]."]
    text = "protection continues for ten\nyears from the date"
    assert find_quote("continues for ten years", text) == text.index("continues")
    assert find_quote("twelve years", text) == -1


def test_abbreviations_and_initials_do_not_end_an_answer_sentence():
    """Fails if a period inside a quoted sentence (a company suffix, initials, "e.g.", "vs.",
    "St.") splits it: the fragment would be an uncited sentence. A period before a citation, or
    where the sentence segmenter ends a sentence, still splits, so an uncited sentence after a
    cited one is still flagged."""
    quoted = (
        "The stockholders elected Michelle L. Collins, Patricia A. Little and Heidi G. Petz as "
        "directors of Ulta Beauty, Inc. at the meeting. [1] The gap is large when k is small "
        "(e.g., 78.4% vs. 59.1% for top-20 accuracy). [2] It landed at St. Kitts and Nevis. [3]"
    )
    assert len(split_answer_sentences(quoted)) == 3
    assert check_citations(quoted, 3).ok
    rep = check_citations("Apple Inc. reported net sales of $81.8 billion [1]. It also bought back shares.", 1)
    assert rep.uncited_sentences == ["It also bought back shares."]
    assert split_answer_sentences("Signed by Clinton. He was president. [1]") == [
        "Signed by Clinton.",
        "He was president. [1]",
    ]


def test_a_documents_own_bracketed_numbers_are_text_once_escaped():
    """Fails if an escaped ``\\[34]`` is read as a citation, cuts its claim in two, or is not
    given back as the document's "[34]" in the claim; or if an unescaped one stops citing."""
    quote = "as reported in [34] and [2, 7], not in [a] or \\[x]"
    answer = escape_markers(quote) + ". [1] The sweep ran twice [2]."
    assert answer.startswith("as reported in \\[34] and \\[2, 7], not in [a] or \\[x]. [1]")
    assert unescape_markers(escape_markers(quote)) == quote
    assert cited_numbers(answer) == [1, 2]
    rep = check_citations(answer, 2)
    assert rep.ok and rep.invalid_numbers == [], rep.to_json()
    assert claim_parts(answer) == [(quote + ".", [1]), ("The sweep ran twice.", [2])]
    assert strip_citations("from \\[34] on [1]") == "from [34] on"
    assert check_citations("from [34] on. [1]", 2).invalid_numbers == [34]  # unescaped, it cites


def test_a_quoted_list_items_number_stays_with_its_claim():
    """A quoted list item keeps its number in the claim ("1. An off-the-shelf toolkit ...") as it
    does in the citation the answerer wrote for it: cut after "1.", the claim lost its number,
    matched no citation and the answer was labelled unsupported though every quote was verbatim.
    A period after an ordinary word still ends a sentence."""
    answer = (
        "LayoutParser is built with the following components: [1] 1. An off-the-shelf toolkit for "
        "applying DL models for layout detection (Section 3) [3] (ii). A community platform. [2]"
    )
    assert claim_parts(answer) == [
        ("LayoutParser is built with the following components:", [1]),
        ("1. An off-the-shelf toolkit for applying DL models for layout detection (Section 3)", [3]),
        ("(ii). A community platform.", [2]),
    ]
    assert split_answer_sentences("See item a. It is law. [1]") == ["See item a.", "It is law. [1]"]
    assert split_answer_sentences("1. Check the oil. 2. Start the engine. [4]") == [
        "1. Check the oil.",
        "2. Start the engine. [4]",
    ]

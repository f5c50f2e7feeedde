"""Citation audit: ``verified`` (the quote is in the cited chunk) and ``supports`` (the quote holds
the claim's numbers, dates, names and terms), and the answer label they decide.

Each test's docstring names the mutation of ``ragaudit/answer/citations.py`` / ``ragaudit/answer/answerers.py`` it kills."""

import pytest

from ragaudit.answer.answerers import LLMAnswerer, audit_answer
from ragaudit.answer.citations import (
    CitationReport,
    CitationVerdict,
    CitedQuote,
    answer_label,
    audit_citations,
    check_citations,
    claim_parts,
    claim_support,
    verify_citation,
)
from ragaudit.types import AnswerResult, Citation, RetrievedChunk

DMCA_P1 = "The DMCA was signed into law by President Clinton on October 28, 1998. It has five titles."
HULLS = "Title V protects vessel hull designs.\nOnce registered, protection continues for ten years."


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


SOURCES = [_chunk(1, DMCA_P1), _chunk(2, HULLS, page=16, breaks=[[16, 0], [17, 38]])]


def test_bush_2005_answer_is_not_answered_nor_supported():
    """The issue's case: an LLM (litellm mock_response) claims Bush signed it in 2005 and cites the
    Clinton/1998 sentence. Fails if ``supports`` is hard-wired True, if ``answer_label`` ignores the
    verdicts (returns "answered" when report.ok), or if the number or name checks are removed."""
    res = LLMAnswerer("gpt-4o-mini", mock_response="The DMCA was signed by President Bush in 2005 [1].").answer(
        "Who signed the DMCA and when?", SOURCES
    )
    assert res.label == "unsupported"
    (c,) = res.citations
    assert c.verified is True and c.supports is False
    assert "2005" in c.reason and "Bush" in c.reason
    assert c.quote.startswith("The DMCA was signed into law by President Clinton")
    assert res.citation_check["claims"] == 1 and res.citation_check["supported_claims"] == 0
    assert res.citation_check["unsupported"][0]["claim"] == "The DMCA was signed by President Bush in 2005."


def test_true_answer_is_answered_and_supported():
    """Same question, true answer (Clinton, October 28, 1998). Fails if ``supports`` is hard-wired
    False, or the number/month/name comparison breaks on a true claim (e.g. "28," vs "28")."""
    res = LLMAnswerer(
        "gpt-4o-mini",
        mock_response="The DMCA was signed by President Clinton on October 28, 1998 [1]. "
        "Protection of a registered hull design lasts ten years [2].",
    ).answer("When?", SOURCES)
    assert res.label == "answered", res.citation_check
    assert [(c.n, c.verified, c.supports) for c in res.citations] == [(1, True, True), (2, True, True)]
    assert res.citations[1].page == 17  # the supporting sentence lies on the second page of chunk 2
    assert res.citation_check["claims"] == 2 and res.citation_check["supported_claims"] == 2


@pytest.mark.parametrize(
    "claim,missing",
    [
        ("The DMCA was signed on October 28, 2005.", "number 2005"),
        ("The DMCA was signed on November 28, 1998.", "month november"),
        ("The DMCA was signed by President Bush.", "name Bush"),
        ("The DMCA was not signed by President Clinton.", "the claim's negation"),
        ("The DMCA regulates satellite broadcasting royalties.", "terms"),
    ],
)
def test_each_key_fact_missing_from_the_quote_breaks_support(claim, missing):
    """Fails if any one check of ``claim_support`` is removed or inverted: the number check, the
    month check, the name check, the negation check or the term-recall threshold."""
    v = claim_support(claim, DMCA_P1.split(". ")[0] + ".")
    assert not v.supports and any(m.startswith(missing) for m in v.missing), v


def test_support_accepts_number_words_abbreviated_months_and_verbatim_claims():
    """Fails if number words are not mapped to digits ("ten" == "10"), "Oct." is not read as
    October, thousands separators are not removed, or a verbatim quote is not accepted."""
    assert claim_support("Protection lasts 10 years", "protection continues for ten years.").supports
    assert claim_support("It was signed on Oct. 28, 1998", DMCA_P1).supports
    assert claim_support("Revenue was 1000 dollars", "Revenue was 1,000 dollars in total.").supports
    assert claim_support("It has five titles.", "It has five titles.").reason == "the claim quotes the source verbatim"
    assert not claim_support("It has five titles.", "").supports
    # the verb "may" is not the month May; a capitalised first word is not a name
    assert claim_support("Owners may register hull designs", "Owners of hull designs can register them.").supports
    assert not claim_support("Registered in May 1999", "Registered in June 1999.").supports
    # a claim with more key facts than the quote is not supported because the quote is inside it
    assert not claim_support(
        "Clinton signed it in 1998 and Bush repealed it in 2005", "Clinton signed it in 1998"
    ).supports


def test_term_recall_threshold_is_a_half():
    """Fails if MIN_TERM_RECALL changes or the comparison becomes strict (2 of 4 terms must pass)."""
    assert claim_support("alpha beta gamma delta", "alpha beta").supports
    assert not claim_support("alpha beta gamma delta", "alpha").supports


def test_verified_is_false_when_the_quote_is_not_in_the_chunk():
    """Fails if ``verified`` is hard-wired True (the issue's surviving mutation): a quote that is
    not in the cited chunk, or a citation naming another chunk than source n, is not verified."""
    v = verify_citation("Signed in 1998.", "Signed by Clinton in 1998.", DMCA_P1)
    assert (v.verified, v.supports) == (False, False) and "does not occur" in v.reason
    assert verify_citation("Signed in 1998.", "The DMCA was signed", None).verified is False
    ans = AnswerResult(
        "It was signed in 1998 [1].",
        [Citation(1, "dmca.pdf", 1, "c2", "The DMCA was signed into law", "It was signed in 1998.")],
        "answered",
        "m",
    )
    audit_answer(ans, SOURCES)  # chunk c2 is source 2, not source 1
    assert ans.citations[0].verified is False and ans.label == "unsupported"
    ok = AnswerResult(
        "It was signed in 1998 [1].",
        [
            Citation(
                1,
                "dmca.pdf",
                1,
                "c1",
                "The DMCA was signed into law by President Clinton on October 28, 1998.",
                "It was signed in 1998.",
            )
        ],
        "answered",
        "m",
    )
    assert audit_answer(ok, SOURCES).label == "answered" and ok.citations[0].verified


def test_two_citations_can_support_a_claim_together():
    """Fails if the joint check of a claim's quotes is dropped (each quote alone lacks a fact)."""
    claim = "Clinton signed the DMCA in 1998 and hull protection lasts ten years."
    cites = [
        CitedQuote(1, "c1", "The DMCA was signed into law by President Clinton on October 28, 1998.", claim),
        CitedQuote(2, "c2", "Once registered, protection continues for ten years.", claim),
    ]
    verdicts, check, label = audit_citations(
        claim[:-1] + " [1][2].", "answered", cites, [(c.chunk_id, c.text) for c in SOURCES]
    )
    assert all(v.supports for v in verdicts) and verdicts[0].reason.startswith("together with [2]")
    assert label == "answered" and check["supported_claims"] == 1
    assert not verify_citation(claim, cites[0].quote, DMCA_P1).supports  # alone it does not


def test_answer_label_rules():
    """Fails if a branch of ``answer_label`` changes: refusals keep their label, a bad [n] or an
    uncited sentence is ``uncited``, an unverified/unsupporting citation or a claim without a
    quote is ``unsupported``, no citation at all is not ``answered``."""
    ok, bad = CitationVerdict(True, True, ""), CitationVerdict(True, False, "")
    good = CitationReport(cited=[1])
    assert answer_label("refused", CitationReport(), []) == "refused"
    assert answer_label("clarifying", CitationReport(), []) == "clarifying"
    assert answer_label("answered", CitationReport(cited=[1], invalid_numbers=[3]), [ok]) == "uncited"
    assert answer_label("answered", CitationReport(cited=[1], uncited_sentences=["x y z"]), [ok]) == "uncited"
    assert answer_label("answered", CitationReport(), [ok]) == "uncited"
    assert answer_label("answered", good, [ok, bad]) == "unsupported"
    assert answer_label("answered", good, [CitationVerdict(False, True, "")]) == "unsupported"
    assert answer_label("answered", good, []) == "unsupported"
    assert answer_label("answered", good, [ok], unsupported_claims=1) == "unsupported"
    assert answer_label("answered", good, [ok, ok]) == "answered"


def test_a_cited_claim_without_a_quote_is_unsupported_and_refusals_count_no_claims():
    """Fails if claims with no citation object are not counted as unsupported, if claims citing
    only invalid numbers are counted, or if a refusal's quote is counted as a claim."""
    src = [(c.chunk_id, c.text) for c in SOURCES]
    _, check, label = audit_citations(
        "It was signed in 1998 [1]. Hulls are protected [2].",
        "answered",
        [CitedQuote(1, "c1", DMCA_P1, "It was signed in 1998.")],
        src,
    )
    assert label == "unsupported" and check["claims"] == 2 and check["supported_claims"] == 1
    assert check["unsupported"] == [
        {"claim": "Hulls are protected.", "cites": [2], "reason": "no quote of a cited source was found"}
    ]
    _, check, label = audit_citations(
        "No answer here. The closest passage says: “It has five titles.” [1]",
        "refused",
        [CitedQuote(1, "c1", "It has five titles.", "It has five titles.")],
        src,
    )
    assert label == "refused" and check["claims"] == 0 and check["unsupported"] == []
    _, check, _ = audit_citations(
        "Signed in 1998 [1]. Made up claim here [9].",
        "answered",
        [
            CitedQuote(
                1, "c1", "The DMCA was signed into law by President Clinton on October 28, 1998.", "Signed in 1998."
            )
        ],
        src,
    )
    assert check["claims"] == 1 and check["invalid_numbers"] == [9]


def test_claim_parts_cut_after_a_citation_followed_by_text():
    """Fails if claims are not cut after an inner citation or short fragments are kept."""
    assert claim_parts("Signed in 1998 [1] and it has five titles [2]. Yes [1].") == [
        ("Signed in 1998", [1]),
        ("and it has five titles.", [2]),
    ]


def test_support_edge_rules():
    """Fails if a name must be a strict subset of the quote's terms (``<`` for ``<=``), a claim with
    no content term counts as supported (recall 1.0), an acronym opening the claim is not a name,
    a plain capitalised first word is a name (``i == 1``), "n't" is not a negation, or the
    reasons are not exact."""
    assert claim_support("It was Clinton.", "Clinton.").supports
    assert not claim_support("It is what it is", "Something else entirely.").supports
    assert claim_support("NASA launched it in 1998", "It was launched in 1998.").missing == ["name NASA"]
    assert claim_support("Reportedly, it launched in 1998", "It launched in 1998.").supports
    assert claim_support("It wasn't signed by Clinton", "Clinton signed it.").missing == ["the claim's negation"]
    assert claim_support("The DMCA was signed by President Bush in 2005", DMCA_P1).reason == (
        "not in the quote: number 2005; name Bush"
    )
    assert claim_support("x", "").reason == "no quote"
    assert claim_support("It was signed in 1998", DMCA_P1).reason.startswith("numbers, dates and names")


def test_verdicts_and_reasons_exactly():
    """Fails if a verdict field or reason of ``verify_citation`` is mutated: a missing chunk is
    neither verified nor supporting, an unsupported quote found in the chunk stays verified but not
    supporting even with another quote of the claim, and the joint reason names the others."""
    assert verify_citation("c", "q", None) == CitationVerdict(False, False, "the cited chunk is not among the sources")
    assert verify_citation("c d", "zzz", DMCA_P1) == CitationVerdict(
        False, False, "the quote does not occur in the cited chunk"
    )
    claim = "Bush signed it in 2005 and hulls get ten years."
    v = verify_citation(claim, "It has five titles.", DMCA_P1, [(2, "Once registered, protection continues.")])
    assert (v.verified, v.supports) == (True, False) and v.reason.startswith("not in the quote: ")
    j = verify_citation(
        "Clinton signed it in 1998 and protection lasts ten years.",
        "The DMCA was signed into law by President Clinton on October 28, 1998.",
        DMCA_P1,
        [(2, "Once registered, protection continues for ten years."), (3, "x")],
    )
    assert j.supports and j.reason.startswith("together with [2][3]: numbers")


def test_citation_report_and_audit_details():
    """Fails if ``check_citations`` counts a 3-word uncited sentence as a fragment (``> 3``), stops
    at the first uncited fragment (``break``), ``CitationReport.to_json`` renames a key, the audit
    stops counting claims after one citing only an invalid number, counts a clarification's claims,
    or renames the keys of an unsupported claim."""
    rep = check_citations("Yes. Three word sentence. Signed in 1998 [9].", 1)
    assert rep.uncited_sentences == ["Three word sentence."] and rep.invalid_numbers == [9]
    assert rep.to_json() == {
        "ok": False,
        "cited": [9],
        "invalid_numbers": [9],
        "uncited_sentences": ["Three word sentence."],
    }
    src = [(c.chunk_id, c.text) for c in SOURCES]
    bush = "The DMCA was signed by President Bush in 2005."
    _, check, label = audit_citations(
        "Made up claim here [9]. " + bush[:-1] + " [1].",
        "answered",
        [CitedQuote(1, "c1", DMCA_P1.split(". ")[0] + ".", bush)],
        src,
    )
    assert check["claims"] == 1 and label == "uncited"
    assert check["unsupported"] == [{"claim": bush, "cites": [1], "reason": "not in the quote: number 2005; name Bush"}]
    _, check, label = audit_citations(bush[:-1] + " [1].", "clarifying", [], src)
    assert label == "clarifying" and check["claims"] == 0


def test_find_quote_edges():
    """Fails if an empty quote is found (``return -1`` -> ``+1``) or the last occurrence is
    returned instead of the first (``find`` -> ``rfind``)."""
    from ragaudit.answer.citations import find_quote

    assert find_quote("   ", "abc") == -1 and find_quote("", "abc") == -1
    assert find_quote("ab", "ab  ab") == 0
    assert find_quote("b c", "a  b\n c") == 3

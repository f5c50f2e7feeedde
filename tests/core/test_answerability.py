"""Answerability: refusals decided from what the question names against what the documents hold.

One test per known failure kind (issue 12, item 6): paraphrase word taken for a name, dash/case
variants, abbreviations (answerable: must not be refused), a rare lower-case term found nowhere,
a person's name found nowhere (must be refused), an underspecified question (``clarifying``).
The document texts are short real-looking passages; the QueryService test below runs the whole
gate on real PDFs.
"""

from hypothesis import given
from hypothesis import strategies as st

from ragaudit.answer.answerability import assess, is_underspecified, missing_anchors
from ragaudit.text.anchors import Anchor, question_anchors
from ragaudit.text.dates import header_dates

NTSB = (
    "On December 29, 2007, about 1330 eastern standard time, a Piper PA-22-150, N5921D, registered to and "
    "operated by the pilot, was substantially damaged during landing at a private airstrip in Tallahassee, "
    "Florida. The airplane was registered in the United States."
)
FILING = (
    "PepsiCo, Inc. and its subsidiaries reported net revenue of $22.3 billion. At the Annual General Meeting "
    "of shareholders held on May 3, the shareholders elected twelve directors. The PC–12/47E aircraft was "
    "leased by the company."
)
MEETING = "Ulta Beauty held its Annual Meeting of Stockholders on June 1, 2023, where 87.78% of shares were voted."
# a retailer's year-end earnings release and its annual-meeting 8-K, written for these tests in the
# shape of such filings (the release never names a director; the 8-K never names 2022)
ULTA_OUTLOOK = (
    "Fiscal 2023 Outlook. For fiscal 2023, the Company expects net sales of $10.95 billion to $11.05 billion, "
    "comparable sales growth of 4% to 5%, and capital expenditures between $400 million and $475 million."
)
ULTA_RELEASE = (
    "Ulta Beauty Announces Fourth Quarter Fiscal 2022 Results. Net sales increased 16.2% to $3.2 billion "
    "compared to the fourth quarter of fiscal 2021. For fiscal 2022, net sales increased 18.3% to $10.2 billion "
    "and diluted earnings per share increased 31.6% to $23.17. The Company opened 47 net new stores. " + ULTA_OUTLOOK
)
ULTA_8K_VOTE = (
    "Proposal 3 - Advisory Vote on Executive Compensation. The stockholders approved, on an advisory basis, the "
    "compensation of the Company's named executive officers (say-on-pay): For 40,118,523; Against 3,247,902; "
    "Abstain 60,455; Broker Non-Votes 2,598,880."
)
ULTA_8K = (
    "Item 5.07 Submission of Matters to a Vote of Security Holders. On June 1, 2023, Ulta Beauty, Inc. held its "
    "2023 annual meeting of stockholders. The stockholders elected the Class I directors and ratified the "
    "appointment of Ernst & Young LLP as the independent registered public accounting firm. " + ULTA_8K_VOTE
)


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


def test_lower_case_subject_word_found_nowhere_is_refused():
    """Fails if a lower-case subject word absent from every document (a drug name) does not lead
    to a refusal naming it."""
    v = assess("What dose of semaglutide did the pilot take?", [NTSB])
    assert v.label == "refused" and "semaglutide" in v.missing and "semaglutide" in v.reason
    # a rare word the passages phrase otherwise is accepted when a close word is there
    v = assess("What did the monoplane hit?", [NTSB], [NTSB], similar=lambda term, ps: ("airplane", 0.8))
    assert v.label is None
    v = assess("What did the monoplane hit?", [NTSB], [NTSB], similar=lambda term, ps: ("landing", 0.2))
    assert v.label == "refused" and "monoplane" in v.missing


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


# --- rules measured on the generated refusal set (bench/answer_quality.py), on real PDFs ---


from ragaudit.answer.answerability import asked_for, subject_words  # noqa: E402
from tests.conftest import DATA, EDGE, SAMPLES  # noqa: E402
from tests.pdf_pages import pages as extract_pages_once  # noqa: E402


def _pages(path: str) -> tuple[str, ...]:
    return tuple(p.text for p in extract_pages_once(path))


def _text(path) -> str:
    return "\n".join(_pages(str(path)))


def test_chinese_question_is_split_into_subject_words():
    """Fails if CJK text is skipped when collecting subject words (then a Chinese question has
    none and is answered from any document: from an NTSB report, or from Chinese text about
    something else), or if words are matched by script rather than by word (the
    Chinese table that holds the answer must still answer it)."""
    q = "截至2023年3月末，发行人的各类授信额度总额是多少？"
    words = subject_words(q)
    assert {"发行人", "额度", "总额"} <= set(words) and "多少" not in words  # an interrogative is no subject
    table = _text(DATA / "chinese-tables.pdf")
    assert assess(q, [table], list(_pages(str(DATA / "chinese-tables.pdf")))).label is None
    ntsb = _text(SAMPLES / "20071229X02007.pdf")
    v = assess(q, [ntsb])
    assert v.label == "refused" and "发行人" in v.missing
    slides = "惠普云的模型服务自动化实践：模型部署在Amazon上，按GPU利用率自动扩缩容，监控请求数和延迟。"
    v = assess(q, [slides])
    assert v.label == "refused" and {"发行人", "额度"} <= set(v.missing), v
    # Latin glued to CJK keeps its own word
    assert subject_words("IREXの基準は何ですか")[0] == "IREX"
    # the Chinese tokenizer's dictionary loading is not logged into a CLI's output (it logs at
    # DEBUG to a stderr handler of its own)
    import logging

    assert logging.getLogger("jieba").getEffectiveLevel() >= logging.WARNING


def test_author_named_in_the_opening_is_not_a_passing_mention():
    """Fails if the authors of a paper ("Karpukhin and Oğuz", named only in its author block)
    are taken for a passing mention that the retrieved passage must repeat: a question about
    the paper's own method would be refused. A name that is neither in a document's opening nor
    in a passage with the question's other words is still refused, and the reason says the paper
    prints it only in passing (not that it never mentions it)."""
    path = DATA / "karpukhin2020-dpr.pdf"
    doc, pages = _text(path), _pages(str(path))
    passage = next(p for p in pages if "using FAISS" in " ".join(p.split()))
    assert "Karpukhin" not in passage and "Oğuz" not in passage
    q = "Which library did Karpukhin and Oğuz use to index the passage embeddings offline?"
    assert missing_anchors(q, [doc], [passage]) == []
    assert assess(q, [doc], [passage]).label is None
    # "Robertson" (cited in the introduction) is named in the paper's body, not its opening, and not in the passage
    assert "Robertson" in doc and "Robertson" not in doc[:600] and "Robertson" not in passage
    q2 = "Which library did Robertson use to index the passage embeddings offline?"
    assert missing_anchors(q2, [doc], [passage]) == ["Robertson"]
    # the reason says the paper prints the name, but no retrieved passage names it with the question's words
    verdict = assess(q2, [doc], [passage])
    assert verdict.label == "refused" and "do not mention" not in verdict.reason, verdict.reason
    assert "mention “Robertson” only in passing" in verdict.reason, verdict.reason
    # a name printed nowhere is said to be absent
    q3 = "Which library did Zyxwvutson use to index the passage embeddings offline?"
    assert assess(q3, [doc + " Zyxwvutsons"], [passage]).reason.startswith("the searched documents do not mention")
    assert assess(q3, [doc], [passage]).reason.startswith("the searched documents do not mention “Zyxwvutson”")


def test_a_missing_acronym_or_rare_name_is_not_outweighed_by_common_names():
    """Fails if a missing acronym ("DMCA") or rare one-word name ("CuratedTREC") lets the
    question through because its commoner names ("Public Law", "Statutes", "Table") occur: a
    DMCA question asked of an NTSB report, a DPR-paper question asked of another paper."""
    ntsb = _text(SAMPLES / "20071229X02007.pdf") + " This Public Law applies to Statutes at Large."
    v = assess("What is the Public Law number and Statutes at Large citation of the DMCA?", [ntsb])
    assert v.label == "refused" and v.missing == ["DMCA"]
    dmca = _text(SAMPLES / "dmca.pdf")
    assert missing_anchors("What is the Public Law number and Statutes at Large citation of the DMCA?", [dmca]) == []
    paper = _text(EDGE / "copy-protected.pdf")  # the LayoutParser paper's first pages
    q = "How many test questions does the CuratedTREC dataset have according to Table 1 of the DPR paper?"
    assert "CuratedTREC" in missing_anchors(q, [paper])


def test_two_letter_acronyms_and_initials_belong_to_names():
    """Fails if "HP" (two letters) is not an anchor, or if a middle initial ends a person's name
    ("Michelle L. Collins" became "Michelle", and the initial "L" was then found in any text):
    a question about a director's votes was answered from an earnings release that never names her."""
    assert [a.text for a in question_anchors("Which public cloud provider is HP's internal cloud built on?")] == ["HP"]
    q = (
        "Whom did Ulta Beauty's stockholders elect as Class I directors in 2023, and how many votes for did "
        "Michelle L. Collins receive?"
    )
    assert "Michelle L. Collins" in [a.text for a in question_anchors(q)]
    release = ULTA_RELEASE
    assert "Collins" not in release
    v = assess(q, [release])
    assert v.label == "refused" and any("Collins" in m for m in v.missing), v
    vote = (
        "At the Annual Meeting, Ulta Beauty's stockholders elected the Class I directors: Michelle L. Collins "
        "received 41,262,102 votes for, 2,101,004 against."
    )
    assert assess(q, [vote], [vote]).label is None


def test_acronym_is_matched_as_a_whole_word_in_the_passages():
    """Fails if the passing-mention check finds an acronym inside a longer one: "DPR" in the DMCA
    summary's "(DPRA)" made a DPR-paper question answerable from it."""
    dmca = _text(SAMPLES / "dmca.pdf")
    passage = next(p for p in _pages(str(SAMPLES / "dmca.pdf")) if "(DPRA)" in p)
    q = "Which library does DPR use to index the passage embeddings offline?"
    assert missing_anchors(q, [dmca], [passage]) == ["DPR"]


def test_a_plural_acronym_is_found_where_the_text_writes_its_singular():
    """Fails if "How many SYSCALLs ..." is refused because the manual writes "SYSCALL 0",
    "SYSCALL 1": the plural of an acronym is not a word the passages must contain verbatim."""
    manual = "The simulator supports SYSCALL 0 (exit), SYSCALL 1 (open) and SYSCALL 5 (printf)."
    assert missing_anchors("How many SYSCALLs does the simulator support?", [manual], [manual]) == []
    assert missing_anchors("How many TPUs does the simulator support?", [manual], [manual]) == ["TPUs"]


def test_modifiers_of_what_the_question_asks_for_must_be_in_the_best_passages():
    """Fails if "What capital expenditure range ..." is answered from passages that mention
    neither "capital" nor "expenditure" (an 8-K's signature and exhibit pages, found by the
    company's name), or if the answer type itself (the head noun "range", "library", "date") is
    required: the passage gives the value, not the type's name."""
    assert asked_for("What capital expenditure range did Ulta Beauty guide to for fiscal 2023?") == [
        "capital",
        "expenditure",
    ]
    assert asked_for("Which library does DPR use to index the passage embeddings offline?") == []
    assert asked_for("On what calendar date does the ban take effect?") == []
    assert asked_for("What is the capital of Australia?") == []
    q = "What capital expenditure range did Ulta Beauty guide to for fiscal 2023?"
    release, guidance = ULTA_RELEASE, ULTA_OUTLOOK
    assert assess(q, [release], [guidance]).label is None
    signatures = (
        "SIGNATURES Pursuant to the requirements of the Securities Exchange Act of 1934, the registrant has "
        "duly caused this report to be signed on its behalf by Ulta Beauty, Inc. for fiscal 2023."
    )
    v = assess(q, [release + " " + signatures], [signatures])
    assert v.label == "refused" and set(v.missing) == {"capital", "expenditure"} and "asks for" in v.reason


def test_a_year_the_documents_pair_only_with_other_years_is_refused():
    """Fails if a question about the 2022 annual meeting is answered from the 8-K of the 2023
    annual meeting (the earnings release among the searched documents says "fiscal 2022", so the
    year alone is found), if a year found in no document is tolerated, or if the
    2023 meeting's own question (the year next to "annual meeting") or a date the document
    prints with the day between month and year ("July 2023" vs "July 30, 2023") is refused."""
    from ragaudit.answer.answerability import missing_years

    eight_k, release = ULTA_8K, ULTA_RELEASE
    assert "2022" not in eight_k and "fiscal 2022" in release.lower() and "2023 annual meeting" in eight_k
    passage = ULTA_8K_VOTE
    q = "How many votes were cast against Ulta Beauty's say-on-pay proposal at its 2022 annual meeting?"
    assert missing_years(q, [eight_k, release], [passage]) == ["2022"]
    v = assess(q, [eight_k, release], [passage])
    assert v.label == "refused" and v.missing == ["2022"] and "2022" in v.reason
    # the reason says why: the year is printed (the release's "fiscal 2022"), never with "annual"
    assert "do not report 2022: “annual” appears there only with other years" in v.reason, v.reason
    assert missing_years(q.replace("2022", "2019"), [eight_k], [passage]) == ["2019"]  # in no document
    assert "do not mention 2019" in assess(q.replace("2022", "2019"), [eight_k], [passage]).reason
    ok = q.replace("2022", "2023")
    assert (
        missing_years(ok, [eight_k, release], [passage]) == []
        and assess(ok, [eight_k, release], [passage]).label is None
    )
    nvda = _text(DATA / "2023 Q2 NVDA.pdf")
    assert (
        missing_years(
            "In NVIDIA's quarter ended July 2023, how much of total sales came from a single "
            "reseller of data-center products?",
            [nvda],
            [nvda[:3000]],
        )
        == []
    )


def test_what_the_question_asks_for_must_be_in_the_document_naming_its_subject():
    """Fails if "What probable cause ... for the Global 5000 accident at Vance W. Amory Airport"
    is answered because another accident's final report among the passages gives a probable
    cause (the St. Kitts report is factual only), or if the same question about the
    accident that report covers (named by its place) is refused."""
    from ragaudit.answer.answerability import subject_passages

    factual = _pages(str(DATA / "ntsb" / "20080117X00064.pdf"))
    final = _pages(str(DATA / "ntsb" / "20080116X00055.pdf"))
    docs = ["\n".join(factual), "\n".join(final)]
    assert "probable" not in docs[0].lower() and "probable cause" in docs[1].lower()
    passages = [factual[0], next(p for p in final if "probable cause" in p.lower())]
    q = "What probable cause did the NTSB determine for the Global 5000 accident at Vance W. Amory Airport, St. Kitts?"
    assert subject_passages(q, docs, passages) == [passages[0]]
    v = assess(q, docs, passages)
    assert v.label == "refused" and v.missing == ["probable"] and "name what the question is about" in v.reason
    q2 = "What probable cause did the NTSB determine for the Air Tractor accident near Soledad, California?"
    assert subject_passages(q2, docs, passages) == [passages[1]]
    assert assess(q2, docs, passages).label is None


def test_the_verb_a_who_question_asks_about_is_not_a_missing_subject_word():
    """ "Who wrote LayoutParser?" against the LayoutParser paper's first pages (a real PDF): a paper
    names its authors and never says "wrote", so counting the verb as a subject word refused the
    question (1 of its 2 subject words missing). Only the verb right after a question-initial
    Who/What/Which is the relation asked about; a verb describing the subject ("the pilot who
    clipped trees") still counts, and a question about something the paper lacks is refused."""
    from pathlib import Path

    from ragaudit.answer.answerability import subject_words

    pages = [p.text for p in extract_pages_once(Path(EDGE, "copy-protected.pdf"))]
    opening = pages[0][:1500]
    for q in ("Who wrote LayoutParser?", "Who developed LayoutParser?"):
        assert assess(q, pages, [opening]).label is None, q
    off = assess("Who founded the bakery cooperative?", pages, [opening])
    assert off.label == "refused" and off.missing == ["bakery", "cooperative"], off
    assert "clipped" in subject_words("How old was the pilot who clipped trees while coming in to land?")
    assert "acquired" in subject_words("Which company acquired Mellanox?")
    assert "lines" in subject_words("Who lines the runway?")  # a noun reading too: not only a verb


def test_the_role_a_who_was_the_x_of_y_question_asks_for_must_be_in_the_best_passages():
    """ "Who was the co-pilot of the Cessna Skyhawk at Wausau?" was answered with the
    report's form line: every subject word is in the report, but nothing says "co-pilot". What a
    "Who/What was the X of Y?" question asks for is X (``asked_for``), which the best passages must
    hold; the report's own roles and fields still pass. A real NTSB report (samples/)."""
    from pathlib import Path

    from ragaudit.answer.answerability import asked_for

    assert asked_for("Who was the co-pilot of the Cessna Skyhawk at Wausau?") == ["co-pilot"]
    assert asked_for("What was the probable cause of the Beech A23 accident?") == ["probable"]
    pages = [p.text for p in extract_pages_once(Path(SAMPLES, "20071229X02007.pdf"))]
    best = [pages[0][:1500]]
    off = assess("Who was the co-pilot of the Piper PA-22-150 at Tallahassee?", pages, best)
    assert off.label == "refused" and off.missing == ["co-pilot"], off
    for q in (
        "Who was the pilot of the Piper PA-22-150 at Tallahassee?",
        "What was the probable cause of the Piper PA-22-150 accident at Tallahassee?",
    ):
        assert assess(q, pages, best).label is None, q


def test_a_reporting_period_no_searched_filing_covers_is_refused():
    """A first-quarter 10-Q heads its columns "Three Months Ended" only: "What was NVIDIA's revenue
    for the first nine months?" asked of it was answered with the quarter's figure (the external
    set's sibling case: Intel's nine-month tax rate asked of Intel's Q1 filing). The second-quarter
    filing reports six months, so a six-month question passes there; digits and words are one."""
    from pathlib import Path

    from ragaudit.answer.answerability import missing_periods

    def text(name: str) -> str:
        return " ".join(p.text for p in extract_pages_once(Path(DATA, name)))

    q1, q2 = text("2023 Q1 NVDA.pdf"), text("2023 Q2 NVDA.pdf")
    nine = "What was NVIDIA's revenue for the first nine months of fiscal 2024?"
    assert missing_periods(nine, q1) == ["nine months"]
    assert missing_periods("What was NVIDIA's revenue for the first 6 months of fiscal 2024?", q2) == []
    assert missing_periods("What was NVIDIA's revenue for the first 6 months of fiscal 2024?", q1) == ["six months"]
    assert missing_periods("What was NVIDIA's revenue in the quarter?", q1) == []
    v = assess(nine, [q1], [q1[:1500]])
    assert v.label == "refused" and v.missing == ["nine months"] and "period" in v.reason, v


def test_an_owner_the_documents_never_name_is_not_outweighed_by_field_names():
    """Fails if a name written as an owner ("Apple's") counts like any other name: another
    company's filing names "Commission File Number" and "Form 10-Q" too, so two of the three names
    are found, and Intel's file number would be given as Apple's. The same question asked of
    Apple's own cover page is answerable, and a non-possessive name may still be outweighed."""
    intel = (
        "UNITED STATES SECURITIES AND EXCHANGE COMMISSION FORM 10-Q Commission File Number: 000-06217 "
        "INTEL CORPORATION (Exact name of registrant as specified in its charter)"
    )
    apple = (
        "UNITED STATES SECURITIES AND EXCHANGE COMMISSION FORM 10-Q Commission File Number: 001-36743 "
        "Apple Inc. (Exact name of Registrant as specified in its charter)"
    )
    q = "What is Apple's Commission File Number on its Form 10-Q?"
    assert missing_anchors(q, [intel]) == ["Apple"]
    assert assess(q, [intel]).label == "refused"
    assert missing_anchors(q, [apple]) == []
    assert missing_anchors("What is the Commission File Number of Apple on its Form 10-Q?", [intel]) == []


def test_a_city_is_covered_by_a_document_that_names_only_its_country():
    """A question such as "I'm married and live in Seoul. Which filing-status box applies to me?" against
    Form 1040NR (a real PDF), whose box 4 reads "Married resident of the Republic of Korea (South
    Korea)". The form names countries, never cities, so the city the asker lives in is covered by
    its country (GeoNames + ISO 3166 names, ``place_covered``). Fails if "Seoul" is still a missing
    anchor there, or if the rule lets a city pass where the documents name another city of the
    same country (they speak of a different place) or do not name its country at all."""
    from pathlib import Path

    from ragaudit.answer.answerability import place_covered

    pages = [p.text for p in extract_pages_once(Path(DATA, "f1040nr.pdf"))]
    q = (
        "I'm a non-resident filing a 2007 U.S. return; I'm married and live in Seoul. "
        "Which filing-status box applies to me?"
    )
    box = next(p for p in pages if "Republic of Korea" in p)
    assert missing_anchors(q, pages) == []
    assert assess(q, pages, [box]).label is None
    assert missing_anchors(q, ["The plant in Busan, Republic of Korea, filed a 2007 U.S. return."]) == ["Seoul"]
    assert "Seoul" in missing_anchors(q, [NTSB])  # no Korea at all
    # an accident report naming its own US city does not cover another US city
    assert missing_anchors("Did the Piper land in Wausau?", [NTSB]) == ["Wausau"]
    assert not place_covered("Florida", "Colombia")  # a US state, not the Colombian town
    assert not place_covered("Mexico", "Mexico")  # a country is not a city
    assert place_covered("Paris", "Sales in France rose.")  # the most populous Paris


def test_a_period_end_the_filing_never_reports_as_ended_is_refused():
    """A question such as "What was Microsoft's total revenue for the quarter ended December 31, 2023?"
    against Microsoft's 10-Q for the quarter ended September 30, 2023 (a real PDF of the external
    probe set) was answered with the September quarter's revenue: the date occurs in the filing,
    but only over a forward-looking table ("Three Months Ending / December 31, 2023"). Fails if a
    period end the documents never report as *ended* is not refused, or if a reported one is: in a
    statement header ("Three Months Ended / December 31, December 25, / 2022 2021": both dates), in
    prose, with an abbreviated month ("Jul 1, 2023"), or asked as a period *ending* the date."""
    from pathlib import Path

    from ragaudit.answer.answerability import missing_period_ends

    ext = Path(__file__).resolve().parents[2] / "bench" / "probes" / "external" / "pdfs"
    msft = "\n".join(p.text for p in extract_pages_once(ext / "2023 Q3 MSFT.pdf"))
    q = "What was Microsoft's total revenue for the quarter ended December 31, 2023?"
    assert missing_period_ends(q, msft) == ["December 31, 2023"]
    v = assess(q, [msft])
    assert v.label == "refused" and v.missing == ["December 31, 2023"], v
    assert (
        missing_period_ends("What was Microsoft's revenue for the three months ended September 30, 2023?", msft) == []
    )
    assert missing_period_ends("What revenue is expected for the three months ending December 31, 2023?", msft) == []
    header = "Three Months Ended\nDecember 31, December 25,\n2022 2021\nNet sales $ 117,154 $ 123,945"
    for d in ("December 31, 2022", "December 25, 2021"):
        assert missing_period_ends(f"What were net sales for the quarter ended {d}?", header) == [], d
    assert missing_period_ends("What were net sales for the quarter ended March 25, 2022?", header) == [
        "March 25, 2022"
    ]
    intel = "Three Months Ended Six Months Ended\n(In Millions) Jul 1, 2023 Jul 2, 2022 Jul 1, 2023 Jul 2, 2022"
    assert missing_period_ends("What was the operating income for the three months ended July 1, 2023?", intel) == []


@given(st.lists(st.text(alphabet=" \t\n\u00a0ab.1", max_size=12), max_size=5))
def test_joined_norm_is_normalize_ws_of_the_join(texts):
    """Fails if the per-document cache of whitespace-normalised texts joins them into anything else
    than the normalisation of the joined texts (an empty or blank text, a text ending in a space)."""
    from ragaudit.answer.answerability import joined_norm
    from ragaudit.answer.citations import normalize_ws

    assert joined_norm(texts) == normalize_ws(" ".join(texts))
    assert joined_norm(texts, lower=True) == normalize_ws(" ".join(texts)).lower()


def test_a_file_name_in_the_question_is_not_an_anchor():
    """Fails if a question naming the PDF to look in ("... according to 20071229X02007.pdf?") is refused
    because the file name is not in the document's text, or if an identifier beside the file
    name stops being an anchor."""
    q = "Where was the airplane registered, according to 20071229X02007.pdf?"
    assert [a.text for a in question_anchors(q)] == []
    assert assess(q, [NTSB]).label is None
    q2 = "What was the registration of N5921D in report-7.PDF?"
    assert [a.text for a in question_anchors(q2)] == ["N5921D"]


def test_a_date_the_document_prints_in_another_form_is_found():
    """A full date in the question is found where the documents print the same calendar date in
    another form: a form's numeric "12/08/2007", ISO "2007-12-08", "8 Dec. 2007". Fails if the
    gate refuses a question for "not mentioning" a date the document holds (gold questions are
    written with the date in words), or if another date (a day later, or day and month swapped)
    passes for it."""
    form = "Aircraft Registration: N6024M. Date & Time: 12/08/2007, 1730 EST. Location: Tallahassee, FL."
    asked = "What is the registration of the aircraft in the accident on December 8, 2007?"
    for text in (form, form.replace("12/08/2007", "2007-12-08"), form.replace("12/08/2007", "8 Dec. 2007")):
        assert missing_anchors(asked, [text]) == [], text
    for other in ("12/09/2007", "08/12/2007", "12/08/2008"):
        missing = missing_anchors(asked, [form.replace("12/08/2007", other)])
        assert missing == ["December 8, 2007"], (other, missing)


STATEMENT = """Orchard Corp.
CONDENSED CONSOLIDATED STATEMENTS OF OPERATIONS (Unaudited)
(In millions)
Three Months Ended Nine Months Ended
March 28, March 29, March 28, March 29,
2025 2024 2025 2024
Net sales:
Northern region $ 1,905 $ 1,783 $ 5,210 $ 4,977
Total net sales $ 4,154 $ 3,945 $ 11,300 $ 10,802
"""


def test_a_date_a_column_header_prints_over_two_lines_is_found():
    """A financial statement heads its columns "March 28, March 29," over "2025 2024" and prints
    the prior period's end nowhere else whole: the date in the question is found there, the i-th
    day with the i-th year. Fails if such a question is refused for "not mentioning" the date, or
    if a date the header does not print (another day, or the current period's day with the prior
    year) passes for it."""
    asked = "What were Orchard's Northern region net sales in the quarter ended March 29, 2024?"
    assert missing_anchors(asked, [STATEMENT]) == []
    assert header_dates(STATEMENT) == {"March 28, 2025", "March 29, 2024"}
    for other in ("March 30, 2024", "March 28, 2024"):
        assert missing_anchors(asked.replace("March 29, 2024", other), [STATEMENT]) == [other], other
    # a line of days over a line with another count of years pairs nothing
    assert header_dates("Ended March 28, March 29,\n2025 results\n") == frozenset()


def test_an_identifier_is_one_anchor_and_a_slash_list_is_found_item_by_item():
    """A product name with a version ("Simulon64") is one identifier: its letters are no second
    anchor, a name the gate would look for as a whole word and not find ("Simulon" is not a word of
    "Simulon64"). Markers listed with slashes ("K12/PSX/ABC-7") are found where a text names them
    one by one. Fails if the letters become a name of their own, if such a question is refused,
    or if a list with one marker the text lacks passes."""
    assert question_anchors("Which option starts Simulon64 in debug mode?") == [Anchor("Simulon64", "id")]
    manual = "Simulon64 User Manual. The Debug frame shows the log of internal activities of Simulon64."
    assert missing_anchors("Which option starts Simulon64 in debug mode?", [manual], [manual]) == []
    paper = "We assess the diagnostic impact of prostate-specific antigen (PSX), K12 and ABC-7 in 40 tissue blocks."
    asked = "How many tissue blocks did the K12/PSX/ABC-7 study examine?"
    assert question_anchors(asked) == [Anchor("K12/PSX/ABC-7", "id")]
    assert missing_anchors(asked, [paper]) == []
    assert missing_anchors(asked.replace("ABC-7", "ABC-8"), [paper]) == ["K12/PSX/ABC-8"]


W9_PAGE = (
    "Form W-9 (Rev. March 2024). Request for Taxpayer Identification Number and Certification. Backup "
    "withholding: persons making certain payments to you must withhold and pay to the IRS 24% of such payments."
)
NR_PAGE = (
    "Form 1040-NR. Backup withholding applies to payments reported on Form W-95 and Form W-2; payers withhold "
    "24% when a taxpayer identification number is missing. The E2Es figure counts entries."
)


def test_short_identifier_is_an_anchor():
    """Fails if a short identifier starting with a letter ("W-9", "E2E", "EC2") is not an anchor the
    documents must hold, if a fiscal period ("Q4", "H1") or a letter with one digit ("v2") becomes one,
    or if the short identifier is matched inside a longer one ("W-95", "E2Es"): a question about Form
    W-9 asked of another form's pages must be refused, and answered from the W-9's own page."""
    assert [a.text for a in question_anchors("How many references are in the E2E test set?")] == ["E2E"]
    assert "EC2" in [a.text for a in question_anchors("Which EC2 instance type runs the GPU group?")]
    for q in ("What was revenue in Q4 of fiscal 2023?", "What changed in v2?", "What did H1 sales do?"):
        assert all(a.kind != "id" for a in question_anchors(q)), q
    q = "At what rate must payers withhold under backup withholding, according to Form W-9?"
    assert missing_anchors(q, [NR_PAGE]) == ["W-9"]
    assert assess(q, [NR_PAGE]).label == "refused"
    assert assess(q, [W9_PAGE]).label is None
    assert missing_anchors("How many references are in the E2E test set?", [NR_PAGE]) == ["E2E"]


GG_PAGE = (
    "Artikel 38. Die Abgeordneten des Deutschen Bundestages werden in allgemeiner, unmittelbarer, freier, "
    "gleicher und geheimer Wahl gewählt. Wahlberechtigt ist, wer das achtzehnte Lebensjahr vollendet hat."
)


def test_capitalised_nouns_of_a_german_question_are_not_names():
    """Fails if a German question's capitalised nouns ("Mindestalter", "Wahl") are read as names the
    documents must contain (German capitalises every noun: the question would be refused because
    the article says "Lebensjahr"), if an acronym in it ("EU") stops being one, or if names with
    Latin-1 letters ("Zürich", "Nación Argentina") are cut at the accented letter or an opening "¿"
    makes the first word a name."""
    q = "Welches Mindestalter braucht man für die Wahl zum Bundestag?"
    assert question_anchors(q) == []
    assert missing_anchors(q, [GG_PAGE]) == []
    assert [a.text for a in question_anchors("Was regelt Artikel 23 über die EU?")] == ["EU"]
    assert [a.text for a in question_anchors("Who owns the Zürich office of Müller AG?")] == ["Zürich", "Müller AG"]
    spanish = [a.text for a in question_anchors("¿Cuánto dura el mandato del Presidente de la Nación Argentina?")]
    assert spanish == ["Presidente", "Nación Argentina"]


def test_a_hyphenated_compound_is_found_written_apart():
    """Fails if a word the question hyphenates ("12-month") is not found where the passage writes it
    apart ("12 months"): the question asks for it and would be refused."""
    cpi = "The index for beef and veal rose 11.3 percent over the last 12 months, not seasonally adjusted."
    q = "What was the 12-month percent change in the beef and veal index?"
    assert assess(q, [cpi], [cpi]).label is None
    assert assess("What was the 12-month change in the pork index?", [cpi], [cpi]).label == "refused"


# the Argentine constitution (public domain): Articles 45 and 48
CONSTITUCION = (
    "Constitución de la Nación Argentina. Capítulo primero. De la Cámara de Diputados. Artículo 45.- La Cámara de Diputados se compondrá de "
    "representantes elegidos directamente por el pueblo de las provincias, de la ciudad de Buenos Aires, y de "
    "la Capital en caso de traslado, que se consideran a este fin como distritos electorales de un solo Estado "
    "y a simple pluralidad de sufragios. Artículo 48.- Para ser diputado se requiere haber cumplido la edad de "
    "veinticinco años, y tener cuatro años de ciudadanía en ejercicio, y ser natural de la provincia que lo "
    "elija, o con dos años de residencia inmediata en ella."
)


def test_an_english_question_over_documents_in_another_language():
    """Fails if the gate asks a Spanish text for the English words of a name ("Chamber of
    Deputies") or for the question's English subject words (then every English question about
    it is refused), if it stops asking for a name's rare word ("Bundestag") or a year, or if it
    relaxes for an English document or a question in the documents' own language."""
    from ragaudit.answer.answerability import cross_lingual

    q = "How old do you have to be to sit in Argentina's Chamber of Deputies?"
    assert cross_lingual(q, [CONSTITUCION])
    assert assess(q, [CONSTITUCION], [CONSTITUCION]).label is None
    # the rare word of a name and a year are still looked for
    v = assess("From what age can people vote in German Bundestag elections?", [CONSTITUCION], [CONSTITUCION])
    assert v.label == "refused" and v.missing == ["Bundestag"]
    v = assess("How old did a deputy have to be in Argentina's Chamber of Deputies in 2015?", [CONSTITUCION])
    assert v.label == "refused" and "2015" in v.reason
    # an English document, or a Spanish question, is read word for word as before
    english = "The House of Representatives is composed of members chosen every second year by the people."
    assert not cross_lingual(q, [english]) and assess(q, [english], [english]).label == "refused"
    es = "¿Qué edad se requiere para ser senador de la Nación?"
    assert not cross_lingual(es, [CONSTITUCION])
    # a question sharing none of its words with the text in another language is still refused
    v = assess("What is the annual rainfall of the desert?", [CONSTITUCION], [CONSTITUCION])
    assert v.label == "refused" and v.rule == "gate.subject_words_absent", v
    assert v.reason.startswith("the searched documents are in another language"), v.reason
    # when only the best passage is in another language, the reason says so, not that every
    # searched document is (the others may be English)
    v = assess("What is the annual rainfall of the desert?", [CONSTITUCION], [CONSTITUCION], translated=True)
    assert v.reason.startswith("the best passages are in another language"), v.reason
    # and a place the text never names is missing (its own rule: test_a_place_is_asked_for_...)
    v = assess("What is the population of Australia?", [CONSTITUCION], [CONSTITUCION])
    assert v.label == "refused" and v.missing == ["Australia"], v


def test_a_question_whose_best_passage_is_in_another_language_is_read_as_translated():
    """An English question whose best passage is Spanish, among documents of which one is English:
    the documents are not all in another language, so only ``translated`` (the best passage's
    language, set by the caller) can tell the gate. Fails if the Spanish passage is asked for the
    English words of "Chamber of Deputies" when ``translated``, or if it is not when not (the
    English document and a question over it are read word for word), or if a rare name's word is
    no longer looked for."""
    english = "The House of Representatives is composed of members chosen every second year by the people."
    q = "How old do you have to be to sit in Argentina's Chamber of Deputies?"
    docs = [CONSTITUCION, english]
    assert assess(q, docs, [CONSTITUCION], translated=True).label is None
    plain = assess(q, docs, [CONSTITUCION])
    assert plain.label == "refused" and "Chamber of Deputies" in plain.reason, plain
    v = assess("From what age can people vote in German Bundestag elections?", docs, [CONSTITUCION], translated=True)
    assert v.label == "refused" and v.missing == ["Bundestag"], v


def test_a_place_is_asked_for_in_the_language_of_the_documents():
    """A question read as translated still names a place, which a document in another language
    prints in its own way. Fails if a country or city the Spanish text never names is not missing
    ("Norway", "Tokyo": the question would be answered from a constitution), or if a country it
    names in Spanish ("Noruega" for "Norway") or as written ("Argentina") is taken as missing."""
    q = "What is the minimum wage in Norway?"
    v = assess(q, [CONSTITUCION], [CONSTITUCION], translated=True)
    assert v.label == "refused" and v.missing == ["Norway"], v
    v = assess("How many people live in Tokyo?", [CONSTITUCION], [CONSTITUCION], translated=True)
    assert v.label == "refused" and v.missing == ["Tokyo"], v
    from ragaudit.answer.answerability import missing_anchors

    noruega = CONSTITUCION + " Los ciudadanos de Noruega residentes en la provincia votan."
    assert missing_anchors(q, [noruega], [noruega], translated=True) == []
    assert missing_anchors(q, [CONSTITUCION], [CONSTITUCION], translated=True) == ["Norway"]
    assert (
        missing_anchors("How old must a deputy of Argentina be?", [CONSTITUCION], [CONSTITUCION], translated=True) == []
    )


def test_a_refusal_names_a_missing_year_as_well_as_a_missing_place():
    """Fails if a refusal decided by a missing name does not also say that the documents do not
    speak of the year the question names, or if that second rule is taken for the one that
    decided."""
    report = (
        "Location: Chevroux, France. Date: December 1, 2007. The airplane collided with the ground in "
        "bad weather conditions. The pilot held a private pilot certificate issued in 2005."
    )
    v = assess("What was the weather at Grenchen in 2015?", [report], [report])
    assert v.label == "refused" and v.rule == "gate.missing_anchors"
    assert "Grenchen" in v.reason and "2015" in v.reason, v.reason
    assert v.missing == ["Grenchen", "2015"]
    assert [f.rule for f in v.fired] == ["gate.missing_anchors", "gate.year_not_reported"]
    # a year the documents do speak of is not named
    v = assess("What was the weather at Grenchen in 2007?", [report], [report])
    assert v.label == "refused" and "2007" not in v.reason and v.missing == ["Grenchen"]


def test_a_maximum_asked_for_is_found_where_the_passage_prints_a_bound():
    """Fails if "What is the maximum term ...?" is refused for want of the word "maximum" when the
    best passage says "up to five years", or if a passage printing no bound is accepted."""
    q = "What is the maximum term of imprisonment for a first offense under the anti-circumvention rules?"
    assert asked_for(q) == ["maximum"]
    passage = (
        "Penalties range up to a $500,000 fine or up to five years imprisonment for a first offense under the "
        "anti-circumvention rules."
    )
    assert assess(q, [passage], [passage]).label is None
    plain = "Penalties for a first offense under the anti-circumvention rules include fines and imprisonment."
    v = assess(q, [plain], [plain])
    assert v.label == "refused" and v.missing == ["maximum"], v


def test_an_author_asked_for_is_found_where_the_passage_prints_a_byline():
    """A title page names its author as "by <name>", not with the word "author". Fails if "Who
    is the author of the user manual?" is refused when the best passage prints a byline, or if a
    passage with no byline (only "by" and a date or a lower-case word) is accepted."""
    q = "Who is the author of the EduMIPS64 user manual?"
    assert asked_for(q) == ["author"]
    title = "EduMIPS64 User Manual by Andrea Spadaccini and the EduMIPS64 Team, version 1.3, June 5, 2007."
    assert assess(q, [title], [title]).label is None
    dated = "The EduMIPS64 user manual was revised by June 5, 2007 and is updated by hand."
    v = assess(q, [dated], [dated])
    assert v.label == "refused" and v.missing == ["author"], v


def test_a_names_words_must_occur_together_not_scattered_over_a_filing():
    """Fails if a name of several words passes because its words occur apart: a filing that
    mentions NVIDIA, AI, products and agreements in separate sections does not name the "NVIDIA AI
    Product Agreement" (a licence the knowledge base lacks), while the agreement's own text, which
    prints the name once among other words, does; a code name's pieces ("PyMuPDF Document.save")
    need not be printed together."""
    filler = " ".join(["The company reported results for the period."] * 8)
    filing = (
        f"NVIDIA designs accelerated computing platforms. {filler} Our AI products include data center GPUs. "
        f"{filler} Each product ships under standard terms. {filler} The agreement with the supplier was amended."
    )
    q = "Which jurisdiction's law governs the NVIDIA AI Product Agreement?"
    assert missing_anchors(q, [filing]) == ["NVIDIA AI Product Agreement"]
    licence = f"{filler} This NVIDIA AI Product Agreement is governed by the laws of Delaware. {filler}"
    assert missing_anchors(q, [licence]) == []
    # words of a name printed in the opposite order, still together, are found
    assert missing_anchors(q, [f"{filler} the AI Product Agreement of NVIDIA applies. {filler}"]) == []
    docs = f"PyMuPDF is a Python binding. {filler} Call Document.save(filename) to write the file."
    assert missing_anchors("What does PyMuPDF Document.save do?", [docs]) == []


def test_the_word_a_how_question_asks_with_is_not_a_subject_word():
    """Fails if "large" of "How large ...?" must sit beside the name in a passage: a protocol
    specification printing "TCP MODBUS ADU = 253 bytes + MBAP (7 bytes) = 260 bytes." answers how
    large the ADU can be without the word "large", and its stacked acronyms are in another order."""
    from ragaudit.answer.answerability import content_terms, degree_words, subject_words

    q = "How large can a MODBUS TCP ADU be?"
    assert degree_words(q) == {"large"}
    assert "large" not in subject_words(q) and "larg" not in content_terms(q)
    assert degree_words("How does the server report an error?") == set()
    spec = (
        "The MODBUS protocol defines a simple protocol data unit (PDU). The size of the MODBUS PDU is limited by "
        "the size constraint inherited from the first MODBUS implementation on Serial Line network. "
        "RS232 / RS485 ADU = 253 bytes + Server address (1 byte) + CRC (2 bytes) = 256 bytes. "
        "TCP MODBUS ADU = 253 bytes + MBAP (7 bytes) = 260 bytes."
    )
    passage = "TCP MODBUS ADU = 253 bytes + MBAP (7 bytes) = 260 bytes."
    assert missing_anchors(q, [spec], [passage]) == []
    assert assess(q, [spec], [passage]).label is None
    # a name the documents do not print is still missing
    assert missing_anchors("How large can a PROFIBUS DP telegram be?", [spec], [passage]) != []


def test_acronym_names_joined_by_and_are_two_anchors():
    """Fails if "OpenCL and CUDA" is one name that must be printed as such: a paper writes "OpenCL
    1.2" and "CUDA 9.1" apart, and the question about their versions was refused. "Procter and
    Gamble" stays one name."""
    q = "Which OpenCL and CUDA versions were used to time the kernels?"
    assert [a.text for a in question_anchors(q)] == ["OpenCL", "CUDA"]
    assert [a.text for a in question_anchors("Did Procter and Gamble report sales?")] == ["Procter and Gamble"]
    paper = (
        "We recorded kernel execution time exclusive of data transfer on an NVIDIA Tesla P100. The kernels were "
        "compiled with OpenCL 1.2 on the CPU and with CUDA 9.1 on the GPU."
    )
    assert missing_anchors(q, [paper], [paper]) == []
    assert missing_anchors("Which OpenCL and ROCm versions were used?", [paper], [paper]) == ["ROCm"]


def test_a_question_in_another_language_is_read_with_that_languages_words():
    """Fails if a Swedish question's "Hur mycket" ("how much") counts as words naming its subject,
    or if "uppvärmningen" is missing from a report printing "Uppvärmning": a housing association's
    annual report answers what its heating cost. A subject the report never names is still refused."""
    from ragaudit.answer.answerability import subject_words

    report = (
        "Förvaltningsberättelse för Brf Doktor Lindh. Föreningens driftkostnader 2019: Uppvärmning 245 310 kr, "
        "El 31 200 kr, Vatten 48 900 kr. Föreningen äger fastigheten och upplåter lägenheter med bostadsrätt."
    )
    q = "Hur mycket kostade uppvärmningen föreningen 2019?"
    assert "Hur" not in subject_words(q) and "mycket" not in subject_words(q)
    assert assess(q, [report], [report]).label is None
    v = assess("Hur mycket kostade hissreparationen föreningen 2019?", [report], [report])
    assert v.label == "refused" and "hissreparationen" in v.missing, v


def test_a_question_in_a_language_wordfreq_cannot_read_keeps_its_subject_words():
    """Fails if a Korean or Estonian question raises: wordfreq has no word list for Estonian and
    reads Korean only with MeCab, which is not installed; their words are then kept."""
    from ragaudit.answer.answerability import subject_words

    assert subject_words("엔비디아 NVIDIA 매출은 얼마입니까?") == ["NVIDIA"]
    assert "küte" in subject_words("Kui palju maksis küte 2019?")

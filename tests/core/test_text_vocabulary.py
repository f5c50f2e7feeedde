"""The shared vocabularies of ``ragaudit.text``: month names, reporting periods, auxiliary verbs,
each written once and read the same way by every stage."""

import re

from ragaudit.answer.answerability import missing_period_ends, missing_periods
from ragaudit.answer.citations import claim_support
from ragaudit.answer.concise import TYPES, head_noun, table_cell
from ragaudit.ingest.chunking import _header_row
from ragaudit.text.dates import MONTH_PREFIX, MONTH_WORDS, MONTHS, month_of
from ragaudit.text.periods import asked_period, header_periods, months_periods, period_name


def test_a_month_is_a_month_name_or_its_abbreviation_not_a_word_that_starts_like_one():
    """Fails if a word that only begins like a month ("margin", "markets", "declare") reads as a
    month for ``month_of``, or if a printed abbreviation ("Sept.", "Dec") does not; or if
    chunking stops reading a line of dates or of years as a column header."""
    assert month_of("Sept.") == "september"
    assert month_of("Dec") == "december"
    assert month_of("May") == "may"
    assert month_of("margin") is None and month_of("markets") is None and month_of("declare") is None
    assert _header_row("December 31, December 25,")
    assert _header_row("Sept. 30, Dec. 31,")
    assert _header_row("2023 2022")
    assert not _header_row("Net sales 12 15")


def test_month_prefix_reads_what_the_date_and_header_patterns_read():
    """``MONTH_PREFIX`` is the month of the concise answer's dates and of chunking's header rows:
    fails if it stops taking a full name, an abbreviation with its period, or any word that
    begins as a month's abbreviation does (those patterns read such words so)."""
    pat = re.compile(rf"(?i)^{MONTH_PREFIX}$")
    for word in ("December", "dec", "Sept.", "Sep", "May", "Marketing"):
        assert pat.match(word), word
    assert not pat.match("Revenue")
    assert TYPES["date"].search("signed on Sept. 30, 2023") is not None
    assert {w for w in MONTH_WORDS} == {m.lower() for m in MONTHS} and "sept" not in MONTH_WORDS


def test_readers_of_printed_months_accept_the_same_abbreviations():
    """A claim dated "Sept. 30" is supported by a quote dated "September 30" (citations), and a
    question asking for the quarter ended "September 30, 2023" is answered by documents that
    print the period's end abbreviated ("Sept. 30, 2023", "Sep 30, 2023") but not by a forecast
    ("Three Months Ending"). Fails if one reader accepts an abbreviation the other does not."""
    assert claim_support("Revenue was $5 million on Sept. 30, 2023.", "Revenue was $5 million on September 30, 2023.")
    q = "What was revenue for the quarter ended September 30, 2023?"
    assert missing_period_ends(q, "Three Months Ending / September 30, / 2023 / Revenue 12")
    for printed in ("Sept. 30,", "Sep 30,", "September 30,"):
        assert missing_period_ends(q, f"Three Months Ended / {printed} / 2023 / Revenue 12") == [], printed


def test_reporting_periods_are_one_vocabulary_for_the_gate_and_the_concise_answer():
    """Fails if "9-month" and "nine months" are different periods (the gate's period rule), if a
    column header's periods in words are not read in order, if a question naming two periods is
    answered for another than the first of nine, six, twelve, three it names, or if the concise
    answer stops taking the cell under the period and year asked."""
    assert months_periods("the 9-month period and the first six months") == {"nine", "six"}
    assert missing_periods("revenue for the 9-month period", "Nine Months Ended September 30") == []
    assert missing_periods("revenue for the 9-month period", "Three Months Ended September 30") == ["nine months"]
    assert header_periods("Three Months Ended Nine Months Ended") == ["three", "nine"]
    assert period_name("13 Weeks Ended") == "13 weeks"
    assert asked_period("revenue for the trailing twelve months and the first nine months") == "nine"
    assert asked_period("the first half of 2023") == "six"
    assert asked_period("the third quarter") == "three"
    ctx = "Three Months Ended Nine Months Ended\nSeptember 30, September 30,\n2022 2023 2022 2023\n(in millions)\n"
    row = "Net sales $ 27,720 $ 32,137 $ 83,544 $ 90,957"
    assert table_cell("What were net sales for the nine months ended September 30, 2023?", row, ctx) == "$ 90,957"


def test_a_question_closed_by_shall_names_what_it_asks_for():
    """ "shall" is an auxiliary verb like "must": fails if the noun a "What X shall ..." question
    asks for is not found."""
    assert head_noun("What penalty shall apply to a late filer?") == "penalty"
    assert head_noun("What penalty must apply to a late filer?") == "penalty"

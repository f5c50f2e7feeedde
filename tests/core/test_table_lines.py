"""Which lines of a table an answer may quote, and what a row is read with.

A statement that prints one column ("Total Expenses -21,805.37") has capitalised labels: such a
line states a value and is quotable, while a title ("THE DIGITAL MILLENNIUM COPYRIGHT ACT OF
1998") is not. A report's period line ("August 2023 through January 2024") names the period of
its columns and states no value, so it is never quoted on its own. A row is read with the labels
above its table ("SALARY" over "Hour*Rate Hours Total" over "$30.00 120 $3,600.00"): the row alone
does not say what it budgets."""

from __future__ import annotations

from types import SimpleNamespace

from ragaudit.answer.answerers import ExtractiveAnswerer, _heading_like, _row_group, column_header
from ragaudit.types import RetrievedChunk


def _chunk(text: str, n: int = 0, page: int = 1, doc: str = "report.pdf") -> RetrievedChunk:
    payload = {"text": text, "doc_name": doc, "page_start": page, "page_end": page}
    return RetrievedChunk(rank=n + 1, chunk_id=f"{doc}#{n}", score=0.03 - 0.001 * n, payload=payload)


def _row(text: str, row: str) -> str:
    start = text.index(row)
    return _row_group(SimpleNamespace(text=row, start=start, chunk=SimpleNamespace(text=text)))


def test_a_line_ending_in_an_amount_is_a_value_not_a_heading():
    for line in ("Total Expenses -21,805.37", "Total Revenue Receipted 18,487.83", "Operating Margin 12.5%"):
        assert not _heading_like(line), line
    for line in ("THE DIGITAL MILLENNIUM COPYRIGHT ACT OF 1998", "Annual Report 2023", "Technical Brief Version 1.0"):
        assert _heading_like(line), line


def test_a_period_line_of_months_and_years_is_a_column_header():
    for line in (
        "August 2023 through January 2024",
        "July 2024 to June 2025",
        "June 2022 – May 2023",
        "Q1 2022 Q1 2023",
        "Q1 2023 vs. Q1 2022",
    ):
        assert column_header(line), line
    for line in ("October 28, 1998", "In June 2022 to May 2023", "Total 2,300 2,100"):
        assert not column_header(line), line


def test_a_row_is_read_with_its_tables_labels():
    text = (
        "He was a teaching assistant for freshmen astronomy classes.\n\n"
        "Materials and Budget\nSALARY\nHour*Rate Hours Total\n$30.00 120 $3,600.00"
    )
    assert _row(text, "$30.00 120 $3,600.00") == "Hour*Rate Hours Total SALARY Materials and Budget"
    # a group label ending in a colon belongs to its rows only: the walk stops there
    text = "Total assets $ 1,000 $ 900\nCurrent liabilities:\nAccounts payable $ 62,611 $ 64,115"
    assert _row(text, "Accounts payable $ 62,611 $ 64,115") == "Current liabilities:"
    # a heading of periods is passed over; a sentence ends the walk
    text = "This is a sentence about results.\nThree Months Ended\nJuly 1, 2023 June 25, 2022\niPhone $ 39,669 $ 40,665"
    assert _row(text, "iPhone $ 39,669 $ 40,665") == "Three Months Ended"
    assert _row(text, "This is a sentence about results.") == ""


def test_the_answer_quotes_the_statement_line_not_the_reports_title(embedder):
    title = _chunk(
        "Alliance for Cancer Care\n2023 Annual report\n\nThe year 2023 was a foundational year for the alliance.",
        0,
    )
    statement = _chunk(
        "Every dollar you give helps provide critical care.\nINCOME STATEMENT DECEMBER 31 2023\n"
        "Donations (2023 opening balance) 5,602.36\nTotal Revenue Receipted 18,487.83\n"
        "Total Expenses -21,805.37\nEnding Balance January 4 2023 4,269.70",
        1,
        page=7,
    )
    res = ExtractiveAnswerer(embedder).answer(
        "What were the alliance's total expenses in the year covered by this annual report?", [title, statement]
    )
    assert "Total Expenses -21,805.37" in res.answer


def test_the_answer_quotes_the_row_under_the_budget_label_not_the_biography(embedder):
    bio = _chunk(
        "Currently, he is searching for clues to the structure of our galaxy for his thesis, while spending "
        "his sixth quarter as a teaching assistant for freshmen astronomy classes.\n\n"
        "Materials and Budget\nSALARY\nHour*Rate Hours Total\n$30.00 120 $3,600.00",
        0,
        page=9,
    )
    course = _chunk("Astronomy is the study of the night sky, the Universe, and ultimately ourselves.", 1, page=7)
    res = ExtractiveAnswerer(embedder).answer(
        "What instructor salary does the astronomy proposal budget?", [bio, course]
    )
    assert res.answer.startswith("$30.00 120 $3,600.00")


def test_the_answer_to_a_period_question_quotes_the_row_not_the_period_line(embedder):
    report = _chunk(
        "Falls Creek Ranch Association\nAugust 2023 through January 2024\n"
        "Operating Fund Capital Reserve Fund Total\n8020 · Road Improvements 0.00 268,266.00 268,266.00\n"
        "8021 · Zircon 0.00 6,263.38 6,263.38",
        0,
        page=3,
    )
    res = ExtractiveAnswerer(embedder).answer(
        "How much did the association spend on road improvements in August 2023 through January 2024?", [report]
    )
    assert "Road Improvements 0.00 268,266.00" in res.answer
    assert not res.answer.startswith("August 2023 through January 2024")

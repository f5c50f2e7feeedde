"""Tables read across chunk and page boundaries, on small PDFs made here with fpdf2: rows packed
into a later chunk than their table's header, and rows of a table continued on the next page
without its header, keep the header lines in their chunk's context header (embedded and
BM25-indexed with the chunk), so a question naming a row and a column's period finds them."""

from __future__ import annotations

from fpdf import FPDF

from ragaudit.index.sparse import bm25_document_vector, term_id, tokenize
from ragaudit.ingest.chunking import chunk_document, document_title
from ragaudit.ingest.pdf import extract_pages

# a statement table: label column, then four amount columns under a period line, a date line and
# a year line (as a 10-Q prints them)
COLUMNS = [330.0, 400.0, 470.0, 540.0]  # right edges of the four value columns
PERIODS = [("Three Months Ended", 0, 1), ("Nine Months Ended", 2, 3)]
DATES = ["June 25,", "June 26,", "June 25,", "June 26,"]
YEARS = ["2022", "2021", "2022", "2021"]
ROWS = [
    ("iPhone", ["40,665", "39,570", "162,863", "153,105"]),
    ("Mac", ["7,382", "8,235", "28,669", "26,012"]),
    ("iPad", ["7,224", "7,368", "22,118", "23,610"]),
    ("Wearables and Accessories", ["8,084", "8,775", "31,591", "29,582"]),
    ("Home products", ["1,204", "1,175", "3,981", "3,862"]),
    ("Cloud storage", ["2,215", "2,007", "6,630", "5,905"]),
    ("Music subscriptions", ["1,518", "1,452", "4,610", "4,388"]),
    ("Video subscriptions", ["1,077", "1,020", "3,240", "3,008"]),
    ("Advertising", ["2,403", "2,281", "7,219", "6,690"]),
    ("Payment services", ["1,851", "1,532", "5,403", "4,475"]),
]
CONTINUED = [
    ("Services", ["19,604", "17,486", "58,941", "50,148"]),
    ("Licensing", ["1,012", "998", "3,050", "2,941"]),
    ("Maintenance contracts", ["2,310", "2,104", "6,870", "6,215"]),
    ("Training services", ["415", "398", "1,262", "1,170"]),
    ("Consulting", ["1,133", "1,021", "3,388", "3,002"]),
    ("Hardware repairs", ["702", "689", "2,095", "2,011"]),
    ("Extended warranties", ["981", "944", "2,910", "2,804"]),
    ("Gift cards", ["1,640", "1,512", "4,880", "4,470"]),
    ("Other services", ["377", "352", "1,120", "1,049"]),
    ("Total net sales", ["82,959", "81,434", "304,182", "282,457"]),
]
PROSE = [
    "The Company reports net sales by category for the three- and nine-month periods below.",
    "Each category includes the products and services described in the notes that follow.",
]


def _right(pdf: FPDF, x_right: float, y: float, text: str) -> None:
    pdf.text(x_right - pdf.get_string_width(text), y, text)


def _center(pdf: FPDF, x_mid: float, y: float, text: str) -> None:
    pdf.text(x_mid - pdf.get_string_width(text) / 2, y, text)


def _period_header(pdf: FPDF, y: float) -> float:
    """Draw the statement's three header lines (periods, dates, years) at ``y``; the next line's y."""
    pdf.set_font("Helvetica", "B", 8)
    width = COLUMNS[1] - COLUMNS[0]
    for name, a, b in PERIODS:
        _center(pdf, (COLUMNS[a] + COLUMNS[b]) / 2 - width / 2 + 8, y, name)
    for i, d in enumerate(DATES):
        _center(pdf, COLUMNS[i] - 15, y + 11, d)
    for i, yr in enumerate(YEARS):
        _center(pdf, COLUMNS[i] - 15, y + 22, yr)
    pdf.set_font("Helvetica", size=9)
    return y + 36


def _table_pdf(rows_page1, rows_page2, header_on_page2: bool = False) -> bytes:
    pdf = FPDF(unit="pt", format=(612, 792))
    pdf.set_auto_page_break(False)

    def header(y: float) -> float:
        return _period_header(pdf, y)

    def rows(items, y: float) -> float:
        for label, values in items:
            pdf.text(40, y, label)
            for x, v in zip(COLUMNS, values):
                _right(pdf, x, y, v)
            y += 12
        return y

    pdf.add_page()
    pdf.set_font("Helvetica", size=9)
    y = 60
    for ln in PROSE:
        pdf.text(40, y, ln)
        y += 12
    pdf.text(40, y, "Net sales by category were as follows (in millions):")
    y = rows(rows_page1, header(y + 16))
    pdf.add_page()
    pdf.set_font("Helvetica", size=9)
    y = 60
    if header_on_page2:
        y = header(y)
    y = rows(rows_page2, y) + 10
    for i in range(24):  # a closing discussion long enough to fill the document's last chunk
        pdf.text(40, y, f"Note {i + 1}: the category discussed here grew in the period, as the notes explain.")
        y += 12
    return bytes(pdf.output())


PERIOD_HEADER = "Three Months Ended Nine Months Ended | June 25, June 26, June 25, June 26, | 2022 2021 2022 2021"


def _indexes(chunk, words: str) -> bool:
    """The chunk's BM25 vector (text and context header, as indexed) holds every term of ``words``."""
    return {term_id(t) for t in tokenize(words)} <= set(bm25_document_vector(chunk.indexed_text).indices)


def test_rows_in_a_later_chunk_than_their_header_keep_it(embedder):
    """Fails if rows packed into a later chunk than their table's header lose it: the later
    chunk's context header must hold the table's header lines, and its BM25 terms the periods."""
    pages = extract_pages(_table_pdf(ROWS + CONTINUED, []))
    chunks = chunk_document(pages, embedder, "sales", "sentence", max_tokens=80)
    later = [c for c in chunks if "Licensing" in c.text and "Three Months Ended" not in c.text]
    assert later, "the table should spill over into a chunk without its header lines"
    for c in later:
        assert PERIOD_HEADER in c.header, c.header
        assert _indexes(c, "nine months ended June 25 2022")


def test_rows_of_a_table_continued_on_the_next_page_carry_its_header(embedder):
    """Fails if a table continued on the next page without its header is indexed without it: the
    chunks holding only the continued rows must carry the first page's header lines in their
    context header; a table that repeats its header on the next page keeps its own."""
    pages = extract_pages(_table_pdf(ROWS, CONTINUED))
    chunks = chunk_document(pages, embedder, document_title("sales.pdf", pages), "sentence", max_tokens=100)
    second = [c for c in chunks if c.page_start == 2 and any(label in c.text for label, _ in CONTINUED)]
    assert second and all("Three Months Ended" not in c.text for c in second)
    for c in second:
        assert PERIOD_HEADER in c.header, c.header
        assert _indexes(c, "nine months ended June 25 2022")
    # prose after the table on the second page is no row: its chunks carry no table header
    notes = [c for c in chunks if c.text.lstrip().startswith("Note") and not any(lab in c.text for lab, _ in CONTINUED)]
    assert notes and all(PERIOD_HEADER not in c.header for c in notes)
    repeated = extract_pages(_table_pdf(ROWS, CONTINUED, header_on_page2=True))
    again = chunk_document(repeated, embedder, "sales", "sentence", max_tokens=100)
    assert any(PERIOD_HEADER in c.header for c in again if c.page_start == 2 and "Consulting" in c.text)


def test_a_table_on_the_next_page_with_other_columns_is_not_a_continuation(embedder):
    """Fails if a headerless table at the top of a page takes the previous page's header when its
    rows have another number of cells (another table, not the same one continued)."""
    other = [(label, values[:2]) for label, values in CONTINUED]
    pages = extract_pages(_table_pdf(ROWS, other))
    chunks = chunk_document(pages, embedder, "sales", "sentence", max_tokens=100)
    second = [c for c in chunks if c.page_start == 2 and any(label in c.text for label, _ in other)]
    assert second and all(PERIOD_HEADER not in c.header for c in second)


def _grouped_pdf(between: str) -> bytes:
    """One page: the statement header, the first half of ``ROWS``, a line ``between`` and the rest."""
    pdf = FPDF(unit="pt", format=(612, 792))
    pdf.set_auto_page_break(False)
    pdf.add_page()
    y = _period_header(pdf, 60)
    for k, (label, values) in enumerate(ROWS):
        if k == 5:
            pdf.text(40, y, between)
            y += 12
        pdf.text(40, y, label)
        for x, v in zip(COLUMNS, values):
            _right(pdf, x, y, v)
        y += 12
    return bytes(pdf.output())


def _row_context(pages, label: str) -> str:
    from ragaudit.ingest.chunking import page_tables

    text = pages[0].text
    rows, tables = page_tables(text)
    found = [tables[t] for s, e, t in rows if text[s:e].startswith(label)]
    assert found, f"{label!r} should read as a table row"
    return found[0].header


def test_rows_after_a_group_label_on_the_same_page_keep_the_header():
    """Fails if the rows below a group label ("Cost of sales:") inside a table lose the table's
    column header: a label ending in a colon ends the row block, and the rows after it must be
    read as the same table continued, not as a table without header."""
    pages = extract_pages(_grouped_pdf("Cost of sales:"))
    assert _row_context(pages, "Cloud storage") == PERIOD_HEADER
    assert _row_context(pages, "iPhone") == PERIOD_HEADER


def test_a_sentence_between_two_tables_on_a_page_ends_the_first():
    """Fails if a table below a full sentence takes the header of the table above it: only group
    labels, wrapped cells and rows may stand between two parts of one table."""
    pages = extract_pages(_grouped_pdf("The remaining categories are reported under a separate agreement."))
    assert _row_context(pages, "iPhone") == PERIOD_HEADER
    assert _row_context(pages, "Cloud storage") != PERIOD_HEADER


DATASHEET_PAGE = """Table 4. Characteristics of the bus lines
Symbol Parameter Conditions Standar Fast-mode Fast-mode Plus Unit
d-mode
Min Max Min Max Min Max
fSCL clock frequency 0 100 0 400 0 1000 kHz
tHD;STA hold time START After this period, the first 4.0 - 0.6 - 0.26 - us
condition clock pulse is generated.
tLOW LOW period of the clock 4.7 - 1.3 - 0.5 - us
tHD;DAT data hold time [1] 5.0 - - - - - us
Cb capacitive load for each bus line - 400 - 400 - 550 pF
[1] Notes under the table."""


def test_a_datasheet_table_reads_dash_cells_and_a_wrapped_header_cell():
    """Fails if a dash printed for an empty min/max cell is not read as a cell (the capacitive-load
    row would be prose), if a header cell wrapped onto a line of its own ("Standar" / "d-mode")
    ends the header, or if rows below a wrapped condition lose the caption and header."""
    from ragaudit.ingest.chunking import page_tables
    from ragaudit.text.lines import cells, is_row

    assert cells("Cb capacitive load for each bus line - 400 - 400 - 550 pF") == 6
    assert is_row("Cb capacitive load for each bus line - 400 - 400 - 550 pF")
    assert cells("tHD;DAT data hold time [1] 5.0 - - - - - us") == 6  # "[1]" is a footnote mark, not a cell
    assert cells("July 2025, 1-month analysis table — Continued") == 2  # a dash between words is no cell
    assert not is_row("Section 4 - 2 of the notes - a summary of the changes made in this revision")
    rows, tables = page_tables(DATASHEET_PAGE)
    by_label = {DATASHEET_PAGE[s:e].split()[0]: tables[t] for s, e, t in rows}
    assert set(by_label) == {"fSCL", "tLOW", "tHD;DAT", "Cb"}
    for t in by_label.values():
        assert t.caption == "Table 4. Characteristics of the bus lines"
        assert (
            t.header
            == "Symbol Parameter Conditions Standar Fast-mode Fast-mode Plus Unit | d-mode | Min Max Min Max Min Max"
        )


SEGMENT_PAGE = """Information on reportable segments is as follows (in millions):
Three Months Ended Nine Months Ended
March 31, March 31,
2024 2025 2024 2025
Net sales $ 61,210 $ 66,075 $ 180,440 $ 191,337
Operating income (loss) $ (512) $ 3,104 $ (1,907) $ 7,215
Outside segments:
Net sales $ 20,114 $ 24,507 $ 61,003 $ 70,118
Operating loss $ (1,366) $ (72) $ (3,411) $ (1,093)"""


def test_a_statement_row_with_currency_signs_set_apart_is_a_row():
    """Fails if a statement row printing "$ " apart from each amount is not read as a row (its
    words would outnumber its cells): it would end the table or, worse, become the header of the
    rows below it, which then name the wrong columns."""
    from ragaudit.ingest.chunking import page_tables
    from ragaudit.text.lines import is_row

    assert is_row("Operating income (loss) $ (512) $ 3,104 $ (1,907) $ 7,215")
    assert not is_row("We paid $ 5 to the vendor and $ 7 to the agent for the services.")
    rows, tables = page_tables(SEGMENT_PAGE)
    header = "Three Months Ended Nine Months Ended | March 31, March 31, | 2024 2025 2024 2025"
    got = {SEGMENT_PAGE[s:e]: tables[t].header for s, e, t in rows}
    assert len(got) == 4 and set(got.values()) == {header}, got

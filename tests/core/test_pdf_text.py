"""Page text a reader would agree with: each kind on a small PDF made here with fpdf2 (or a real
one from the corpus), run through ``ragaudit.ingest.pdf.extract_pages``."""

from __future__ import annotations

import io
import re

from fpdf import FPDF

from ragaudit.ingest.pdf import extract_pages
from tests.conftest import CASES, DATA

LOREM_LEFT = [
    "alpha one the left column starts here and",
    "alpha two it keeps talking about the left",
    "alpha three more words of the left column",
    "alpha four the left column is read before",
    "alpha five a reader finishes this column",
    "alpha six and here the left column ends",
]
LOREM_RIGHT = [
    "bravo one the right column begins at the",
    "bravo two with words of its own about it",
    "bravo three a line set beside the left one",
    "bravo four the columns share baselines",
    "bravo five so a line reader mixes them",
    "bravo six and the right column ends here",
]


def _pdf(width: float = 612, height: float = 792) -> FPDF:
    pdf = FPDF(unit="pt", format=(width, height))
    pdf.set_auto_page_break(False)
    pdf.set_font("Helvetica", size=10)
    return pdf


def _two_columns() -> FPDF:
    """A page with the two columns of prose ``LOREM_LEFT`` and ``LOREM_RIGHT`` side by side."""
    pdf = _pdf()
    pdf.add_page()
    for i, (a, b) in enumerate(zip(LOREM_LEFT, LOREM_RIGHT)):
        pdf.text(72, 100 + 14 * i, a)
        pdf.text(320, 100 + 14 * i, b)
    return pdf


def _pages(pdf: FPDF):
    return extract_pages(bytes(pdf.output()))


def _flat(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


def test_two_column_page_is_read_column_by_column():
    """fails if column_regions is bypassed (pdfplumber's line order interleaves the columns) or
    if a full-width title is cut into two columns."""
    pdf = _two_columns()
    pdf.text(72, 60, "A Title That Spans The Whole Width Of The Page For Both Columns")
    text = _pages(pdf)[0].text
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    assert lines[0] == "A Title That Spans The Whole Width Of The Page For Both Columns"
    assert lines[1:] == LOREM_LEFT + LOREM_RIGHT


def test_a_table_across_both_columns_keeps_its_rows():
    """fails if a two-column page's full-width table is read as two columns (label column, then
    number column), which cuts every row in half."""
    pdf = _two_columns()
    rows = [
        ("Model BM25", "59.1 66.9 55.0", "70.9 68.8 73.7"),
        ("Model DPR", "78.4 79.4 73.2", "79.8 63.2 85.4"),
        ("Model Both", "76.6 79.8 71.0", "85.2 71.5 83.8"),
    ]
    for i, (label, left, right) in enumerate(rows):
        y = 300 + 14 * i
        pdf.text(72, y, label)
        pdf.text(200, y, left)
        pdf.text(380, y, right)
    text = _pages(pdf)[0].text
    for label, left, right in rows:
        assert f"{label} {left} {right}" in text
    assert "alpha six and here the left column ends\nbravo one" in text


def test_real_two_column_paper_keeps_column_lines_adjacent():
    """DPR paper: of the consecutive line pairs inside a column, pdfplumber's order keeps ~14%
    adjacent; fails if column reading order regresses below 70%."""
    import pdfplumber

    data = (DATA / "karpukhin2020-dpr.pdf").read_bytes()
    texts = [p.text for p in extract_pages(data)]
    adjacent = pairs = 0
    with pdfplumber.open(io.BytesIO(data)) as pdf:
        for page, text in zip(pdf.pages, texts):
            flat = re.sub(r"\s+", "", text)
            for x0, x1 in ((0, page.width / 2), (page.width / 2, page.width)):
                lines = [
                    re.sub(r"\s+", "", x)
                    for x in (page.crop((x0, 0, x1, page.height)).extract_text() or "").split("\n")
                ]
                for a, b in zip(lines, lines[1:]):
                    if len(a) >= 20 and len(b) >= 20:
                        pairs += 1
                        adjacent += a + b in flat or (a.endswith("-") and a[:-1] + b in flat)
    assert pairs > 900 and adjacent / pairs >= 0.7, (adjacent, pairs)


def test_fake_bold_overprint_counts_once():
    """fails if overprinted glyphs are not deduplicated ("QQuuaarrtteerrllyy")."""
    pdf = _pdf()
    pdf.add_page()
    pdf.set_font("Helvetica", style="B", size=16)
    for dx in (0.0, 0.4):
        pdf.text(72 + dx, 80, "Quarterly Statement of Accounts")
    pdf.set_font("Helvetica", size=10)
    for dx in (0.0, 0.3):
        pdf.text(72 + dx, 110, "Closing balance of the reserve fund: 48,215 dollars")
    text = _pages(pdf)[0].text
    assert "Quarterly Statement of Accounts" in text
    assert "Closing balance of the reserve fund: 48,215 dollars" in text
    assert "QQ" not in text and "44" not in text


def test_fake_bold_case_file():
    """The same fault in a PDF made for it (tests/data/cases/fakebold-overprint.pdf); fails as the test above."""
    path = CASES / "fakebold-overprint.pdf"
    text = extract_pages(path.read_bytes())[0].text
    assert "Quarterly Statement of Accounts" in text
    assert "Closing balance of the reserve fund: 48,215 dollars" in text


def test_hyphenated_line_ends_rejoined_but_compounds_kept():
    """fails if a line-end hyphen is left ("circumven- tion") or if every hyphen is dropped
    ("dualencoder")."""
    pdf = _pdf()
    pdf.add_page()
    lines = [
        "The statute forbids the circumven-",
        "tion of technological measures that protect",
        "works, and the paper trains a dual-",
        "encoder model on question and passage pairs.",
        "It is a well-",
        "known result that nobody disputes.",
    ]
    for i, ln in enumerate(lines):
        pdf.text(72, 100 + 14 * i, ln)
    text = _flat(_pages(pdf)[0].text)
    assert "the circumvention of technological measures" in text
    assert "a dual-encoder model" in text
    assert "a well-known result" in text
    assert "circumven-" not in text and "dualencoder" not in text


def test_running_header_and_footer_removed_and_sentence_reads_across_the_page_break():
    """fails if running headers (after their first page) or footers stay in the page text (a
    footer splits the sentence that runs from page 1 onto page 2)."""
    pdf = _pdf()
    body = [
        [
            "The members shall meet every quarter to review the accounts.",
            "Standard measures must be available to anyone on",
        ],
        ["reasonable nondiscriminatory terms, as the rules say.", "The second page has its own closing sentence."],
        ["A third page repeats nothing but the running lines.", "It ends here."],
    ]
    for n, lines in enumerate(body, start=1):
        pdf.add_page()
        pdf.text(72, 40, "The Harbour Lantern Cooperative Handbook")
        for i, ln in enumerate(lines):
            pdf.text(72, 100 + 14 * i, ln)
        pdf.text(72, 760, f"Cooperative Summary December 1998 Page {n}")
    pages = _pages(pdf)
    # the running header stays once, where it first appears (a title); footers go everywhere
    assert pages[0].text.startswith("The Harbour Lantern Cooperative Handbook\n")
    for p in pages[1:]:
        assert "Harbour Lantern Cooperative Handbook" not in p.text
    for p in pages:
        assert "Cooperative Summary" not in p.text
    assert pages[0].text.rstrip().endswith("available to anyone on")
    assert pages[1].text.startswith("reasonable nondiscriminatory terms")


def test_dmca_case_footer_not_between_the_halves_of_a_sentence():
    """cases/dmca-pages-9-10.pdf; fails if the footer "Copyright Office Summary" stays in page text."""
    path = CASES / "dmca-pages-9-10.pdf"
    p1, p2 = extract_pages(path.read_bytes())
    assert "Copyright Office Summary" not in p1.text + p2.text
    assert p1.text.rstrip().endswith("are available to anyone on")
    assert p2.text.startswith("reasonable nondiscriminatory terms")


def test_spacing_accents_are_composed():
    """fails if an accent drawn as its own glyph over a letter stays separate ("Sa¨ckinger")."""
    pdf = _pdf()
    pdf.add_page()
    x = 72
    pdf.text(x, 100, "S")
    x += pdf.get_string_width("S")
    pdf.text(x, 100, "a")
    pdf.text(x + 0.6, 99, "\u00a8")  # a TeX-style accent: a glyph of its own over the letter
    pdf.text(x + pdf.get_string_width("a"), 100, "ckinger and K")
    x2 = x + pdf.get_string_width("a") + pdf.get_string_width("ckinger and K")
    pdf.text(x2 + 0.4, 99, "\u00a8")
    pdf.text(x2, 100, "u")
    pdf.text(x2 + pdf.get_string_width("u"), 100, "ttler wrote it.")
    text = _pages(pdf)[0].text
    assert "Säckinger and Küttler wrote it." in text
    assert "\u00a8" not in text


def test_real_paper_accents_and_no_cid_codes():
    """DPR: accented author names are composed (NFC) and math glyphs without a Unicode map do not
    leave ``(cid:NN)`` codes; fails if either regresses."""
    pages = extract_pages((DATA / "karpukhin2020-dpr.pdf").read_bytes())
    text = "\n".join(p.text for p in pages)
    assert "Oğuz" in text and "Küttler" in text and "Rocktäschel" in text
    assert "(cid:" not in text
    import unicodedata

    assert text == unicodedata.normalize("NFC", text)


def test_text_drawn_in_another_orientation_reads_in_its_own_order():
    """fails if a sidebar turned 90 degrees comes out reversed (".epyt ro tnirp esaelP") or one
    word per line."""
    pdf = _pdf(400, 300)
    pdf.add_page()
    pdf.text(60, 50, "Upright text on the form.")
    with pdf.rotation(90, 30, 250):
        pdf.text(30, 250, "Please print or type")
    with pdf.rotation(-90, 370, 50):
        pdf.text(370, 50, "Attach Forms here")
    text = _pages(pdf)[0].text
    assert "Upright text on the form." in text
    assert "Please print or type" in text and "Attach Forms here" in text


def test_a_ruled_table_across_both_columns_is_read_row_by_row_as_records():
    """A table drawn with ruling lines across a two-column page, whose cells hold words and wrap
    over two lines, as a regulation's annex does: each row must come out as one line, its cells
    left to right and a cell's lines joined ("the annual arithmetic mean by gas chromatography").
    Fails if its rows are read as prose and cut at the gutter (label and value in one column,
    method in the other), if a wrapped cell splits its row, or if the prose columns above the
    table stop being read column by column."""
    pdf = _two_columns()
    rows = [
        ("Benzene annual 2", ["the annual arithmetic mean by", "gas chromatography"]),
        ("Sulphur dioxide 24 hours 250", ["not to be exceeded more than", "seven times a year"]),
        ("Nitrogen dioxide 1 hour 200", ["not to be exceeded more than twice in a year"]),
        ("Ozone 8 hours 100", ["the moving arithmetic mean over eight hours"]),
        ("Lead monthly 1.5", ["the monthly arithmetic mean in", "the particulate matter"]),
    ]
    top, height = 300, 30
    for i, (left, right) in enumerate(rows):
        y = top + height * i
        pdf.text(76, y + 12, left)
        for j, part in enumerate(right):
            pdf.text(300, y + 12 + 12 * j, part)
        pdf.line(72, y, 540, y)
    bottom = top + height * len(rows)
    pdf.line(72, bottom, 540, bottom)
    for x in (72, 290, 540):
        pdf.line(x, top, x, bottom)
    text = _pages(pdf)[0].text
    lines = [ln.strip() for ln in text.splitlines()]
    for left, right in rows:
        assert f"{left} {' '.join(right)}" in lines, text
    assert "alpha six and here the left column ends\nbravo one" in text


def _grid(pdf: FPDF, top: float, xs: tuple[float, ...], rows: list[list[list[str]]], height: float) -> None:
    """Draw a ruled table at ``top``: column edges ``xs``, each row ``height`` pt, each cell's lines."""
    for i, row in enumerate(rows):
        y = top + height * i
        pdf.line(xs[0], y, xs[-1], y)
        for x, cell in zip(xs, row):
            for j, part in enumerate(cell):
                pdf.text(x + 4, y + 12 + 12 * j, part)
    bottom = top + height * len(rows)
    pdf.line(xs[0], bottom, xs[-1], bottom)
    for x in xs:
        pdf.line(x, top, x, bottom)


def test_a_ruled_table_whose_word_cells_wrap_unevenly_is_read_row_by_row():
    """On a one-column page, a ruled table whose cells of words wrap over different numbers of
    lines (a term beside a longer definition and its use): fails if its lines interleave the cells
    ("Acquisition-related Amortization of acquired ... We exclude amortization ...") instead of
    giving one line per row, each cell whole."""
    pdf = _pdf()
    pdf.add_page()
    pdf.text(72, 80, "The adjustments below are made to the results we report under GAAP.")
    rows = [
        [["Adjustment"], ["Definition"], ["Why it is excluded"]],
        [
            ["Acquisition-related", "adjustments"],
            ["amortization of acquired", "intangible assets such as", "brands and technology"],
            ["the charges vary with", "the timing of acquisitions"],
        ],
        [
            ["Restructuring", "charges"],
            ["severance and benefit", "arrangements of a formal plan"],
            ["these costs do not", "reflect the core business", "and its ongoing operations"],
        ],
    ]
    _grid(pdf, 120, (72, 200, 380, 560), rows, 52)
    pdf.text(72, 300, "Totals are shown in the reconciliation that follows on the next page.")
    lines = [ln.strip() for ln in _pages(pdf)[0].text.splitlines()]
    for row in rows[1:]:
        assert " ".join(" ".join(cell) for cell in row) in lines, lines
    assert lines[0].startswith("The adjustments below") and lines[-1].startswith("Totals are shown")


def test_a_ruled_table_of_stacked_records_is_read_line_by_line():
    """A table ruled only around its cells whose cells stack one record per line (dates, names,
    places of several events): fails if it is read cell by cell, which puts every date before
    every name instead of one event per line."""
    pdf = _pdf()
    pdf.add_page()
    rows = [
        [["Date"], ["Storm"], ["Landfall"]],
        [
            ["2005-09-23", "2005-10-02", "2005-11-18"],
            ["Katrina", "Longwang", "Gamma"],
            ["New Orleans", "Taiwan", "Florida"],
        ],
    ]
    _grid(pdf, 120, (72, 200, 330, 480), rows, 44)
    text = _pages(pdf)[0].text
    for date, storm, place in [("2005-09-23", "Katrina", "New Orleans"), ("2005-10-02", "Longwang", "Taiwan")]:
        assert f"{date} {storm} {place}" in text, text


def test_a_sentence_running_across_a_grid_keeps_its_words_in_order():
    """A table whose rules run on behind a footnote, so the footnote's lines cross the cells'
    edges: fails if the table is read cell by cell, which cuts the footnote's sentences at every
    edge and joins the pieces out of order."""
    pdf = _pdf()
    pdf.add_page()
    rows = [
        [["Adjustment"], ["Definition"], ["Why it is excluded"]],
        [
            ["Acquisition-related", "adjustments"],
            ["amortization of acquired", "intangible assets such as", "brands and technology"],
            ["the charges vary with", "the timing of acquisitions"],
        ],
    ]
    _grid(pdf, 120, (72, 200, 380, 560), rows, 52)
    note = [
        "Note: the segment acquired on November 2, 2020 is left out of the rate until the first quarter",
        "of 2022, and the business divested on June 1, 2023 is left out from the second quarter of 2023.",
    ]
    top = 120 + 52 * len(rows)
    for j, part in enumerate(note):
        pdf.text(76, top + 12 + 12 * j, part)
    pdf.line(72, top + 30, 560, top + 30)
    for x in (72, 200, 380, 560):
        pdf.line(x, top, x, top + 30)
    text = _flat(_pages(pdf)[0].text)
    assert _flat(" ".join(note)) in text, text

"""Running header and footer removal removes only headers and footers (``ragaudit.ingest.removal``):
small PDFs made here with fpdf2, run through ``extract_pages``; a hypothesis property test over
generated documents; the extraction report's counts."""

from __future__ import annotations

import re

from fpdf import FPDF
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragaudit.ingest.pdf import extract_pages
from ragaudit.ingest.removal import extraction_report

W, H = 612, 792


def _pdf() -> FPDF:
    pdf = FPDF(unit="pt", format=(W, H))
    pdf.set_auto_page_break(False)
    pdf.set_font("Helvetica", size=10)
    return pdf


def _flat(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


METER = [4127, 3986, 4410, 4583, 4391, 4012]


def meter_log() -> bytes:
    """Six pages, each holding one line: the month's reading of meter 7."""
    pdf = _pdf()
    for month, kwh in enumerate(METER, start=1):
        pdf.add_page()
        pdf.text(72, 60, f"Meter 7 reading for month {month}: {kwh} kWh")
    return bytes(pdf.output())


def test_meter_log_keeps_every_reading():
    """Fails if a line repeated across pages with other numbers is removed as a running line (the
    rule that ignored digits kept only the first month's reading of a six-page meter log)."""
    pages = extract_pages(meter_log())
    assert [p.text.strip() for p in pages] == [
        f"Meter 7 reading for month {m}: {kwh} kWh" for m, kwh in enumerate(METER, 1)
    ]
    assert all(p.removed == () for p in pages)
    assert extraction_report(pages)["running_lines"]["removed"] == 0


def test_one_line_pages_are_content():
    """Fails if the only line of a page is removed as a running line (40 one-line ledger pages,
    whose lines differ only by numbers, became one page of text)."""
    pdf = _pdf()
    for n in range(1, 41):
        pdf.add_page()
        pdf.text(72, 760, f"Ledger entry {n}")
    pages = extract_pages(bytes(pdf.output()))
    assert [p.text.strip() for p in pages] == [f"Ledger entry {n}" for n in range(1, 41)]


def test_repeated_body_line_is_content():
    """Fails if a line repeated on every page in the body (not in a margin band) is removed: it
    was among the page's first two lines, which the rule took for a header."""
    pdf = _pdf()
    for n in range(1, 5):
        pdf.add_page()
        pdf.text(72, 300, f"Inspection of pump station number {n * 7} was completed on time.")
        pdf.text(72, 314, "Valves were closed and the log was signed by the duty engineer.")
        pdf.text(72, 328, f"The next visit is planned after {n + 2} weeks.")
    pages = extract_pages(bytes(pdf.output()))
    for p in pages:
        assert "Valves were closed and the log was signed by the duty engineer." in p.text


def test_margin_line_differing_by_more_than_a_page_number_is_content():
    """Fails if a line in the top band whose number is not a page number (a tank level that goes
    down) is removed as a running header."""
    pdf = _pdf()
    levels = [80, 65, 51, 38]
    for n, level in enumerate(levels, start=1):
        pdf.add_page()
        pdf.text(72, 50, f"Tank level at opening: {level} percent")
        pdf.text(72, 300, f"Day {n} of the drawdown went as planned.")
    pages = extract_pages(bytes(pdf.output()))
    for p, level in zip(pages, levels):
        assert f"Tank level at opening: {level} percent" in p.text


def test_headers_and_footers_are_removed_and_reported():
    """Fails if a real running header (after its first page) or a footer with a page number stays
    in the page text, or if the extraction report does not count and show them."""
    pdf = _pdf()
    for n in range(1, 5):
        pdf.add_page()
        pdf.text(72, 40, "Harbour Lantern Cooperative Annual Report")
        for y in range(130, 400, 14):
            pdf.text(72, y, f"Paragraph line {y} of page {n} tells the members about the year.")
        pdf.text(72, 765, f"Cooperative Summary December 1998 Page {n}")
    pages = extract_pages(bytes(pdf.output()))
    assert pages[0].text.startswith("Harbour Lantern Cooperative Annual Report\n")
    for p in pages:
        assert "Cooperative Summary" not in p.text
    for p in pages[1:]:
        assert "Harbour Lantern" not in p.text
    assert pages[1].removed == (
        ("header", "Harbour Lantern Cooperative Annual Report"),
        ("footer", "Cooperative Summary December 1998 Page 2"),
    )
    rep = extraction_report(pages)["running_lines"]
    assert (rep["headers"], rep["footers"], rep["removed"], rep["pages"]) == (3, 4, 7, 4)
    assert {
        "text": "Harbour Lantern Cooperative Annual Report",
        "where": "header",
        "count": 3,
        "pages": [2, 3, 4],
    } in rep["examples"]
    # the numbered footer is one example, not one per page, its page number shown as "#"
    assert {
        "text": "Cooperative Summary December 1998 Page #",
        "where": "footer",
        "count": 4,
        "pages": [1, 2, 3, 4],
    } in rep["examples"]
    assert len(rep["examples"]) == 2


def test_page_numbers_under_the_text_are_removed():
    """Fails if the page number printed right under the text of pages that end where their text
    ends (filings printed from HTML: the number is the page's last line, mid-page, set apart)
    stays in the page text."""
    pdf = _pdf()
    for n, end in enumerate([420, 380, 460, 400], start=1):
        pdf.add_page()
        for y in range(100, end, 14):
            pdf.text(72, y, f"Paragraph line {y} of page {n} tells the members about the year.")
        pdf.text(300, end + 40, f"{n + 2}")
    pages = extract_pages(bytes(pdf.output()))
    for n, p in enumerate(pages, start=1):
        assert not re.search(r"(?m)^\d+$", p.text), p.text[-80:]
        assert p.removed == (("footer", str(n + 2)),)
    # the report shows the page number as a number, not as the first page's value
    assert extraction_report(pages)["running_lines"]["examples"] == [
        {"text": "#", "where": "footer", "count": 4, "pages": [1, 2, 3, 4]}
    ]


def test_page_n_of_m_lines_are_removed():
    """Fails if a running line that numbers its page before the page count ("Harbour Lantern 3
    (5)", as Nordic annual reports do, or "www.harbourlantern.org 3/5") stays in the page text, or
    if a margin line of the same shape whose number does not advance with the pages (a score out
    of 10 that goes down) is removed."""
    pdf = _pdf()
    scores = [9, 7, 6, 4, 3]
    for n, score in enumerate(scores, start=1):
        pdf.add_page()
        pdf.text(72, 40, f"Harbour Lantern Cooperative {n} (5)")
        pdf.text(72, 60, f"Inspection score {score} (10)")
        for y in range(130, 400, 14):
            pdf.text(72, y, f"Paragraph line {y} of page {n} tells the members about the year.")
        pdf.text(72, 765, f"April 26, 2012 www.harbourlantern.org {n}/5")
    pages = extract_pages(bytes(pdf.output()))
    for n, (p, score) in enumerate(zip(pages, scores), start=1):
        assert "Harbour Lantern Cooperative" not in p.text
        assert "www.harbourlantern.org" not in p.text
        assert f"Inspection score {score} (10)" in p.text
        assert p.removed == (
            ("header", f"Harbour Lantern Cooperative {n} (5)"),
            ("footer", f"April 26, 2012 www.harbourlantern.org {n}/5"),
        )
    # only the number that changes from page to page is shown as "#"
    shown = {e["text"] for e in extraction_report(pages)["running_lines"]["examples"]}
    assert shown == {"Harbour Lantern Cooperative # (5)", "April 26, 2012 www.harbourlantern.org #/5"}


def test_a_footer_set_in_parts_loses_its_page_number_in_the_middle():
    """Fails if a footer set in three parts (title left, page number centred, code right, read as
    one line "Harbour Lantern Annual Report 3 HLC-24") stays in the page text, or if a heading in
    the top band that numbers its principle in the middle of running words ("Principle 3 for good
    harbour keeping:", one per page, advancing like a page number) is removed."""
    pdf = _pdf()
    for n in range(1, 6):
        pdf.add_page()
        pdf.text(72, 60, f"Principle {n} for good harbour keeping:")
        for y in range(130, 400, 14):
            pdf.text(72, y, f"Paragraph line {y} of page {n} tells the members about the year.")
        pdf.text(72, 765, "Harbour Lantern Annual Report")
        pdf.text(300, 765, str(n))
        pdf.text(480, 765, "HLC-24")
    pages = extract_pages(bytes(pdf.output()))
    for n, p in enumerate(pages, start=1):
        assert f"Principle {n} for good harbour keeping:" in p.text
        assert "Harbour Lantern Annual Report" not in p.text and "HLC-24" not in p.text
        assert p.removed == (("footer", f"Harbour Lantern Annual Report {n} HLC-24"),)


def test_a_speaker_label_at_the_top_of_every_page_is_content():
    """Fails if a speaker's label in minutes that opens every page in the top band ("CHAIR (Ms
    Lantern):") is removed as a running header: it is said more often in the body, so each
    occurrence is a turn of speech (removing it gave the chair's words to the previous speaker)."""
    pdf = _pdf()
    for n in range(1, 5):
        pdf.add_page()
        pdf.text(72, 60, "CHAIR (Ms Lantern):")
        pdf.text(72, 74, f"Thank you. We move to item {n} of the agenda.")
        for k, y in enumerate(range(130, 400, 42)):
            pdf.text(72, y, f"MEMBER {k} (Mr Harbour):")
            pdf.text(72, y + 14, f"On item {n}, the basin levels rose by {k + n} centimetres.")
            pdf.text(72, y + 28, "CHAIR (Ms Lantern):")
    pages = extract_pages(bytes(pdf.output()))
    for p in pages:
        assert p.text.split("\n").count("CHAIR (Ms Lantern):") == 8, p.text
        assert p.removed == ()


# --------------------------------------------------------------------------- property test

WORDS = "river stone lantern harbour meadow signal copper orchard basin ledger valve summit".split()
body_line = st.lists(st.sampled_from(WORDS), min_size=3, max_size=8).map(lambda ws: " ".join(ws).capitalize())


@st.composite
def documents(draw):
    """A document: 2-6 pages; each page a body block of 1-6 lines (10 pt, 14 pt apart) starting
    between 130 and 300 pt from the top (below the top margin band), drawn from lines that repeat on several pages (the same
    text, or with a number that changes) and lines of its own; optionally a header in the top
    band and a footer with the page number in the bottom band."""
    n = draw(st.integers(2, 6))
    shared = draw(st.lists(body_line, min_size=1, max_size=3, unique=True))
    header = draw(st.one_of(st.none(), body_line))
    footer = draw(st.one_of(st.none(), body_line))
    pages = []
    for _ in range(n):
        k = draw(st.integers(1, 6))
        lines = []
        for _ in range(k):
            kind = draw(st.sampled_from(["shared", "numbered", "own"]))
            if kind == "shared":
                lines.append(draw(st.sampled_from(shared)))
            elif kind == "numbered":
                lines.append(f"{draw(st.sampled_from(shared))} {draw(st.integers(0, 9999))}")
            else:
                lines.append(draw(body_line))
        pages.append((draw(st.integers(130, 300)), lines))
    return n, header, footer, pages


def _render(doc) -> bytes:
    n, header, footer, pages = doc
    pdf = _pdf()
    for i, (top, lines) in enumerate(pages, start=1):
        pdf.add_page()
        if header:
            pdf.text(72, 45, header)
        for k, ln in enumerate(lines):
            pdf.text(72, top + 14 * k, ln)
        if footer:
            pdf.text(72, 770, f"{footer} {i}")
    return bytes(pdf.output())


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents())
def test_no_body_line_is_lost(doc):
    """Fails if any body line of a generated document (repeated on other pages or not) is missing
    from its page's text, or if a header or footer repeated on every page stays after page 1."""
    n, header, footer, pages = doc
    got = extract_pages(_render(doc))
    for (_, lines), page in zip(pages, got):
        text = page.text.split("\n")
        for ln in lines:
            assert ln in text, (ln, page.text)
    for page in got[1:]:
        if header and header not in {ln for _, lines in pages for ln in lines}:
            assert header not in page.text.split("\n")
        if footer:
            assert not any(t.startswith(f"{footer} ") and t[len(footer) + 1 :].isdigit() for t in page.text.split("\n"))

"""Document structure read from layout, each on a small PDF made here with fpdf2: pages of three
columns read column by column, identifiers broken at a line end rejoined, and section titles
taken from font size, never from a byline or a table's header cells."""

from __future__ import annotations

from fpdf import FPDF

from ragaudit.ingest.chunking import chunk_document, document_title
from ragaudit.ingest.pdf import author_names, extract_pages

COLUMN_TEXT = {
    name: [f"{name} {i} words of this column run on here" for i in range(1, 13)]
    for name in ("alpha", "bravo", "charlie")
}


def test_three_column_page_is_read_column_by_column():
    """Fails if a page set in three columns is read line by line across the columns, or as two
    columns (the first, then the other two interleaved), or if the full-width running head is cut
    at a gutter."""
    pdf = FPDF(unit="pt", format=(612, 792))
    pdf.set_auto_page_break(False)
    pdf.set_font("Helvetica", size=9)
    pdf.add_page()
    head = "Federal Register / Vol. 88, No. 120 / Friday, June 23, 2023 / Rules and Regulations"
    pdf.text(40, 50, head)
    for c, lines in enumerate(COLUMN_TEXT.values()):
        for i, ln in enumerate(lines):
            pdf.text(40 + 190 * c, 80 + 11 * i, ln)
    text = extract_pages(bytes(pdf.output()))[0].text
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    assert lines == [head, *COLUMN_TEXT["alpha"], *COLUMN_TEXT["bravo"], *COLUMN_TEXT["charlie"]]


def test_identifiers_broken_at_a_line_end_are_rejoined():
    """Fails if a docket number or a phone number broken after a hyphen at a line end stays in two
    pieces, or if a dash standing alone at a line end is glued to the number that follows."""
    pdf = FPDF(unit="pt", format=(612, 792))
    pdf.set_auto_page_break(False)
    pdf.set_font("Helvetica", size=10)
    pdf.add_page()
    lines = [
        "Comments must identify Docket No. FAA-2023-",
        "1234 and be received by the agency on time.",
        "For questions call the program office at (202) 267-",
        "4231 during business hours. Fees rose by a range of 5 -",
        "12 percent over the year.",
    ]
    for i, ln in enumerate(lines):
        pdf.text(72, 80 + 14 * i, ln)
    text = extract_pages(bytes(pdf.output()))[0].text
    assert "Docket No. FAA-2023-1234" in text
    assert "(202) 267-4231" in text
    assert "range of 5 -\n12 percent" in text


def _heading_pdf() -> bytes:
    pdf = FPDF(unit="pt", format=(612, 792))
    pdf.set_auto_page_break(False)
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 20)
    pdf.text(72, 80, "Security Posture of Computing Clusters")
    pdf.set_font("Helvetica", size=13)
    y = 110
    for name, unit in [("Catherine Hinton", "Computer Security Division"), ("Yang Guo", "Applied Cybersecurity")]:
        pdf.set_font("Helvetica", size=13)
        pdf.text(72, y, name)
        pdf.set_font("Helvetica", size=10)
        pdf.text(72, y + 13, unit)
        y += 32
    pdf.set_font("Helvetica", size=13)
    pdf.text(72, y, "Karen Wetzel, Gary Howarth and Rick Gregg")
    # a table whose header cells are set large: cells, not a title
    pdf.text(72, y + 30, "Zone")
    pdf.text(250, y + 30, "Nodes")
    pdf.text(400, y + 30, "Users")
    pdf.set_font("Helvetica", size=10)
    pdf.text(72, y + 44, "Access zone")
    pdf.text(250, y + 44, "12")
    pdf.text(400, y + 44, "300")
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 14)
    pdf.text(72, 80, "Function Zones")
    pdf.set_font("Helvetica", size=10)
    for i in range(40):
        pdf.text(72, 100 + 13 * i, f"the system has four function zones, as line {i} says.")
    return bytes(pdf.output())


def test_section_titles_come_from_layout_not_from_a_byline_or_a_table(embedder):
    """Fails if a line set larger than the body is taken as a section title when it is an author
    (one name per line with an affiliation under each, or a list of names) or a table's header
    cells, or if the larger bold line that opens a section is not its title; the document's
    title must be its title line, not its author list."""
    pages = extract_pages(_heading_pdf())
    titles = [h[2] for p in pages for h in p.headings]
    assert titles == ["Security Posture of Computing Clusters", "Function Zones"]
    assert document_title("hpc.pdf", pages) == "hpc | Security Posture of Computing Clusters"
    chunks = chunk_document(pages, embedder, document_title("hpc.pdf", pages), "sentence", max_tokens=120)
    opening = [c for c in chunks if c.section.endswith("Function Zones")]
    assert opening and "four function zones" in opening[0].text
    assert not any("Hinton" in c.section or "Wetzel" in c.section for c in chunks)


def test_author_names_reads_bylines_only():
    """Fails if a byline of names (with footnote marks) is not counted as people, or if a title
    of capitalised words separated by commas is."""
    assert author_names("Vladimir Karpukhin∗, Barlas Oguz∗, Sewon Min† and Patrick Lewis") == 4
    assert author_names("Catherine Hinton") == 1
    # affiliation numbers glued to the names or set apart from them
    assert author_names("Aderonke C. Ogunlayi1, Victor O. Ekundina1, Adedapo O. Kehinde2*,") == 3
    assert author_names("Aderonke C. Ogunlayi 1, Victor O. Ekundina 1, Adedapo O. Kehinde 2*,") == 3
    assert author_names("Linus A. Enye 3, Adegoke O. Aremu 1") == 2
    assert author_names("Section 3, Part 2") == 0
    assert author_names("Updated April 2024") == 0
    assert author_names("Property, Plant and Equipment") == 0
    assert author_names("Dense Passage Retrieval for Open-Domain Question Answering") == 0

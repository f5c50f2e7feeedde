"""The extraction speed-ups in ``ragaudit.ingest.pdf`` give exactly what the pdfplumber calls they replace
give: ``dedupe_chars`` vs pdfplumber's ``dedupe_chars``, the text
map built from ``column_regions``' words vs ``chars_to_textmap``; and ``extract_pages`` on three
corpus PDFs still produces the text, headings and extractor recorded from main before the
speed-ups (``tests/data/extraction_pins.json``; after an intended change of the extracted text,
regenerate it as its ``how`` field says)."""

from __future__ import annotations

import hashlib
import io
import json
import re

import pdfplumber
import pytest
from pdfminer.fontmetrics import FONT_METRICS

from ragaudit.ingest.pdf import (
    _column_regions,
    _dedupe_chars_clustered,
    _Line,
    _text_options,
    _textmap,
    dedupe_chars,
    extract_pages,
    read_unmapped,
)
from ragaudit.ingest.removal import extraction_report
from tests.conftest import DATA
from tests.hostile.pdfs import one_page_pdf, pdf_file

# two-column paper (rotated arXiv stamp, (cid:NN) glyphs, a form XObject), a sampled IBM Redbook
# (overprinted duplicates, rotated text, many form XObjects, garbled pages), a CJK page
PDFS = [DATA / "karpukhin2020-dpr.pdf", DATA / "redp5110_sampled.pdf", DATA / "chinese-tables.pdf"]


def _pages(path):
    with pdfplumber.open(path, password="") as pdf:
        for p in pdf.pages:
            yield p
            p.close()


def _items(chars):
    return [list(c.items()) for c in chars]


@pytest.mark.parametrize("path", PDFS, ids=lambda p: p.name)
def test_dedupe_chars_equals_pdfplumber(path):
    """fails if the numpy ``dedupe_chars`` keeps or drops a different character than pdfplumber's
    clustering (its own ``utils.dedupe_chars`` and the per-group ``cluster_objects`` version), or
    changes the page order."""
    dropped = 0
    for p in _pages(path):
        chars = p.chars
        for tol in (1.0, 3.0):
            fast = dedupe_chars(chars, tol)
            ref = _dedupe_chars_clustered(chars, tol)
            assert [id(c) for c in fast] == [id(c) for c in ref], f"page {p.page_number} tolerance {tol}"
        if p.page_number <= 3:  # pdfplumber's own version is quadratic: a few pages only
            assert dedupe_chars(chars) == pdfplumber.utils.dedupe_chars(chars), f"page {p.page_number}"
        dropped += len(chars) - len(dedupe_chars(chars))
    if path.name == "redp5110_sampled.pdf":
        assert dropped > 0  # the corpus file with overprinted glyphs: the test exercises dropping


def test_dedupe_chars_chained_clusters():
    """fails if clustering is not chained like pdfplumber's (values 0.8 pt apart chain into one
    cluster although the ends are 1.6 pt apart) or the kept char is not the first by (doctop, x0)."""

    def ch(x0, doctop, text="e"):
        return {"upright": True, "text": text, "fontname": "F", "size": 10.0, "x0": x0, "doctop": doctop}

    chars = [
        ch(10.0, 100.0),
        ch(10.5, 100.8),
        ch(10.2, 101.6),
        ch(50.0, 100.0),
        ch(10.0, 100.0, "f"),
        ch(9.9, 101.6),
        ch(10.0, 100.0),
    ]
    assert dedupe_chars(chars) == _dedupe_chars_clustered(chars, 1.0) == pdfplumber.utils.dedupe_chars(chars)
    assert [c["x0"] for c in dedupe_chars(chars)] == [10.0, 50.0, 10.0]


@pytest.mark.parametrize("path", PDFS, ids=lambda p: p.name)
def test_textmap_from_column_words_equals_chars_to_textmap(path):
    """fails if reusing ``column_regions``' words gives a text map (text or line chars) other than
    ``pdfplumber.utils.chars_to_textmap`` on the same characters."""
    reused = split = 0
    for p in _pages(path):
        chars = [c for c in dedupe_chars(p.chars) if c.get("upright", True)]
        if not chars:
            continue
        opts = _text_options(chars)
        regions, words = _column_regions(chars, float(p.width), opts)
        if words is None:
            split += len(regions) > 1
            continue
        reused += 1
        a, b = _textmap(chars, opts, words), pdfplumber.utils.chars_to_textmap(chars, **opts)
        assert a.as_string == b.as_string, f"page {p.page_number}"
        la, lb = a.extract_text_lines(return_chars=True), b.extract_text_lines(return_chars=True)
        assert [(x["text"], x["top"], [id(c) for c in x["chars"]]) for x in la] == [
            (x["text"], x["top"], [id(c) for c in x["chars"]]) for x in lb
        ]
    # the two-column paper is read column by column (its regions are re-extracted, nothing reused)
    assert split > 0 if path.name == "karpukhin2020-dpr.pdf" else reused > 0


PINS = json.loads((DATA / "extraction_pins.json").read_text())


@pytest.mark.parametrize("name", sorted(PINS["files"]))
def test_extract_pages_matches_pins(name):
    """fails if ``extract_pages`` changes any page's text, headings or extractor on these files
    from what main produced before the speed-ups (sha256 of each, per page)."""
    path = next(p for p in [*PDFS, DATA / "ntsb" / name] if p.name == name)
    pages = extract_pages(path.read_bytes())
    got = [
        {
            "text": hashlib.sha256(pg.text.encode()).hexdigest(),
            "extractor": pg.extractor,
            "headings": hashlib.sha256(json.dumps([list(h) for h in pg.headings]).encode()).hexdigest(),
        }
        for pg in pages
    ]
    want = PINS["files"][name]
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want), 1):
        assert g == {k: w[k] for k in g}, f"page {i}: {w['start']!r}"


def _lines(*texts: str) -> list[list[_Line]]:
    return [[_Line(text=t, size=10.0, n=len(t), top=0.0, bottom=0.0) for t in texts]]


def test_a_glyph_without_unicode_value_reads_as_the_ligature_that_makes_a_word():
    """Fails if a glyph pdfminer gives as a control character is kept (PostgreSQL refuses U+0000),
    if one inside a word is not read as the ligature that makes a word (the document's own
    spelling first, then English word frequency), or if one with fewer than two letters beside it
    (a symbol font's bullet) is read as a ligature instead of U+FFFD; each is listed for the
    extraction report."""
    pages, notes = read_unmapped(
        _lines(
            "several practical di\x00culties for", "an e\x00cient \x00nal layout", "r\x01 Database", "x \ufffe\x05 y"
        )
    )
    assert [ln.text for ln in pages[0]] == [
        "several practical difficulties for",
        "an efficient final layout",
        "r\ufffd Database",
        "x \ufffd\ufffd y",
    ]
    assert notes[0][:3] == [("ligature", "difficulties"), ("ligature", "efficient"), ("ligature", "final")]
    assert [k for k, _ in notes[0][3:]] == ["unknown"] * 3
    # the document's own spelling decides over English frequency ("staff" is the more frequent)
    pages, _ = read_unmapped(_lines("gli sta\x00 membri", "gli stati membri"))
    assert pages[0][0].text == "gli stati membri"
    pages, _ = read_unmapped(_lines("lo sta\x00 della sede"))
    assert pages[0][0].text == "lo staff della sede"
    # a symbol a font gives for its "ff" inside a word: read when a ligature makes a word, else kept
    pages, notes = read_unmapped(_lines("these e\u21b5orts differ", "E\uf05bl \uf02b1\uf05d and x\u2192y"))
    assert [ln.text for ln in pages[0]] == ["these efforts differ", "E\uf05bl \uf02b1\uf05d and x\u2192y"]
    assert notes[0] == [("ligature", "efforts")]
    # the font draws "ff" with that glyph throughout: beside one letter it is "ff" too
    pages, notes = read_unmapped(_lines("an o\u21b5-the-shelf toolkit", "these e\u21b5orts differ"))
    assert pages[0][0].text == "an off-the-shelf toolkit" and ("ligature", "off") in notes[0]
    # a symbol read as two different ligatures maps to neither where the word cannot tell
    pages, _ = read_unmapped(_lines("an o\u21b5-the-shelf toolkit", "e\u21b5orts and con\u21b5gure"))
    assert pages[0][0].text == "an o\u21b5-the-shelf toolkit"


def test_the_extraction_report_counts_glyphs_without_unicode_value():
    """Fails if the extraction report of the paper whose "ffi" has no Unicode value (and whose "ff"
    is given as an arrow) does not say how many glyphs were read as ligatures, with the words, or
    if any control character stays in its text."""
    pages = extract_pages((DATA / "edge" / "copy-protected.pdf").read_bytes())
    report = extraction_report(pages)["unmapped_glyphs"]
    assert report["ligatures"] == 8 and report["unknown"] == 0  # "off" twice
    assert {e["text"] for e in report["examples"]} == {
        "difficulties",
        "difficult",
        "efficient",
        "different",
        "efforts",
        "off",
    }
    assert "off-the-shelf" in " ".join(p.text for p in pages)  # "o↵-the-shelf": the font's "ff" glyph
    assert not any(re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f]", p.text) for p in pages)
    assert "different levels" in " ".join(pages[1].text.split())  # its "ff" glyph is given as U+21B5


# a Type 1 font whose encoding names codes 11-13 with glyph names that have no Unicode value (as a
# TeX font draws "ff", "fi" and "fl" there), without a ToUnicode map: pdfminer gives each such glyph
# as ``(cid:NN)``, pypdfium2 as the control character of its code
UNMAPPED_FONT = (
    b"<< /Type /Font /Subtype /Type1 /BaseFont /CMR10 /FirstChar 11 /LastChar 126 /Widths ["
    + b" ".join([b"556"] * 116)
    + b"] /Encoding << /Type /Encoding /Differences [11 /g11 /g12 /g13] >> >>"
)


def _stream(content: bytes) -> bytes:
    return b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream"


def _pdf_with_control_code_ligatures(lines: list[bytes]) -> bytes:
    """A one-page PDF set in ``UNMAPPED_FONT``."""
    content = b"BT /F1 10 Tf 72 740 Td 12 TL " + b" ".join(b"(" + ln + b") '" for ln in lines) + b" ET"
    return one_page_pdf(_stream(content), UNMAPPED_FONT)


@pytest.mark.parametrize(
    "lines, extractor",
    [
        # 5 of 80 glyphs unmapped: read glyph by glyph, each from PDFium's reading at its place
        (
            [b"The \x0crst \x0cle was \x0dat and the e\x0bect was clear.", b"The display will \x0dash when saved."],
            "pdfplumber",
        ),
        # 8 of 63: a tenth or more, the page comes from pypdfium2 whole
        (
            [b"\x0cle \x0dat \x0crst e\x0bect sta\x0b a\x0bair \x0dag.", b"The display will \x0dash when saved."],
            "pypdfium2",
        ),
    ],
    ids=["glyph-by-glyph", "pypdfium2-page"],
)
def test_ligatures_drawn_at_control_codes_are_read_not_dropped(lines, extractor):
    """Fails if a ligature a font draws at a control code ("fi" at 12, "fl" at 13, "ff" at 11) is
    dropped ("rst" for "first"), read twice ("effffect"), breaks the line (a carriage return:
    "display will" / "ash"), or stays U+FFFD where the ligature makes a word, on a page read
    glyph by glyph or from pypdfium2 whole; each is reported."""
    (page,) = extract_pages(_pdf_with_control_code_ligatures(lines))
    assert page.extractor == extractor
    want = [ln.replace(b"\x0c", b"fi").replace(b"\x0d", b"fl").replace(b"\x0b", b"ff").decode() for ln in lines]
    assert page.text.split("\n")[:2] == want
    assert not re.search(r"[\x00-\x1f\ufffd]", page.text.replace("\n", ""))
    # every word read with a ligature, in order
    read = [
        w.strip(".") for ln, raw in zip(want, lines) for w, r in zip(ln.split(" "), raw.split(b" ")) if r != w.encode()
    ]
    assert [w for k, w in page.unmapped] == read
    assert {k for k, _ in page.unmapped} == {"ligature"}


def _report_with_a_stamp(pages: int) -> bytes:
    """A PDF of ``pages`` US Letter pages in Helvetica: a running header, 16 body lines and a
    footer with the page number, and across the top of each page a stamp of 24 glyphs drawn in
    ``UNMAPPED_FONT``, about 2% of each page's glyphs."""
    stamp = b"(" + b"\x0b\x0c\x0d" * 8 + b") Tj"
    # objects: 1 catalog, 2 page tree, 3 Helvetica, 4 the unmapped font, then each page and its content
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>", b"", b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    objs.append(UNMAPPED_FONT)
    kids = []
    for n in range(1, pages + 1):
        body = b" ".join(
            b"(Paragraph line %d of page %d tells the members about the harbour year.) '" % (k, n) for k in range(16)
        )
        content = (
            b"BT /F2 10 Tf 72 770 Td " + stamp + b" ET "
            b"BT /F1 10 Tf 72 745 Td (Harbour Lantern Cooperative Annual Report) Tj ET "
            b"BT /F1 10 Tf 72 640 Td 14 TL " + body + b" ET "
            b"BT /F1 10 Tf 300 40 Td (%d) Tj ET" % n
        )
        page_id = len(objs) + 1
        objs.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
            b"/Resources << /Font << /F1 3 0 R /F2 4 0 R >> >> >>" % (page_id + 1)
        )
        objs.append(_stream(content))
        kids.append(b"%d 0 R" % page_id)
    objs[1] = b"<< /Type /Pages /Kids [" + b" ".join(kids) + b"] /Count %d >>" % pages
    return pdf_file(objs)


def test_a_stamp_of_unmapped_glyphs_does_not_send_its_pages_to_pypdfium2():
    """Fails if a page whose only glyphs without a Unicode map are a stamp across its top (2% of its
    glyphs) is read by pypdfium2 whole: its running header and footer then stay in the text, and
    the stamp with them as a line of U+FFFD. Read glyph by glyph, the page keeps its lines, the
    header and page numbers are removed, and so is the stamp (U+FFFD, counted in the report), a
    running header like them, after its first page. (A page
    whose unmapped glyphs are a fifth of it, the Redpaper's page 3, still comes from pypdfium2:
    ``tests/core/test_pdf.py``.)"""
    pages = extract_pages(_report_with_a_stamp(4))
    assert [p.extractor for p in pages] == ["pdfplumber"] * 4
    for n, p in enumerate(pages, start=1):
        lines = p.text.split("\n")
        assert lines[-16:] == [
            f"Paragraph line {k} of page {n} tells the members about the harbour year." for k in range(16)
        ]
        assert not re.search(r"[\x00-\x09\x0b-\x1f]", p.text), p.text[:200]
        assert ("footer", str(n)) in p.removed
        if n > 1:
            assert "Harbour Lantern Cooperative" not in p.text and "\ufffd" not in p.text
            assert ("header", "\ufffd" * 24) in p.removed


def _datasheet_with_symbol_glyphs() -> bytes:
    """A one-page datasheet line set in Helvetica, with its degree signs, micro sign, "≤" and
    "Ω" set in the standard Symbol font (not embedded, no ToUnicode map), as datasheets print
    units: codes 0xB0 ("°"), "m" ("μ"), 0xA3 ("≤") and "W" ("Ω") of the Symbol encoding."""
    content = (
        b"BT /F1 10 Tf 72 740 Td (Operating range T = -40) Tj /F2 10 Tf (\\260) Tj /F1 10 Tf (C to +85) Tj "
        b"/F2 10 Tf (\\260) Tj /F1 10 Tf (C, standby current 6 ) Tj /F2 10 Tf (m) Tj /F1 10 Tf (A) Tj ET "
        b"BT /F1 10 Tf 72 720 Td (Pull-up resistor 1.3 k) Tj /F2 10 Tf (W) Tj /F1 10 Tf ( for VCC ) Tj "
        b"/F2 10 Tf (\\243) Tj /F1 10 Tf ( 5.5 V) Tj ET "
        # a unit placed glyph by glyph: the micro sign, then the "A" one micro sign's width (5.76 pt) on
        b"BT /F1 10 Tf 72 700 Td (Supply current 6.0) Tj ET BT /F2 10 Tf 200 700 Td (m) Tj ET "
        b"BT /F1 10 Tf 205.76 700 Td (A) Tj ET"
    )
    return _two_font_page(content, b"<< /Type /Font /Subtype /Type1 /BaseFont /Symbol >>")


def _two_font_page(content: bytes, second: bytes, *more: bytes) -> bytes:
    """A one-page PDF drawing ``content`` with Helvetica as ``/F1`` and the font ``second`` as
    ``/F2`` (objects ``more`` follow it, from object 7)."""
    return pdf_file(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
            b"/Resources << /Font << /F1 5 0 R /F2 6 0 R >> >> >>",
            _stream(content),
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
            second,
            *more,
        ]
    )


def test_glyphs_of_the_symbol_font_read_by_its_encoding():
    """Fails if a glyph of the standard Symbol font is dropped (a degree sign pdfminer gives as
    "(cid:176)") or read by its code as a Latin letter ("6 mA" for "6 μA", "1.3 kW" for
    "1.3 kΩ", "£" for "≤"), or if a glyph the PDF gives no width reads as a word of its own
    ("6.0 μ A"): units in a datasheet change meaning."""
    data = _datasheet_with_symbol_glyphs()
    with pdfplumber.open(io.BytesIO(data)) as pdf:  # what pdfminer alone reads
        raw = pdf.pages[0].extract_text()
    assert "(cid:176)" in raw and "6 mA" in raw
    (page,) = extract_pages(data)
    assert page.extractor == "pdfplumber"
    assert page.text.split("\n")[:3] == [
        "Operating range T = -40°C to +85°C, standby current 6 μA",
        "Pull-up resistor 1.3 kΩ for VCC ≤ 5.5 V",
        "Supply current 6.0 μA",
    ]


def test_glyphs_of_another_font_on_the_same_baseline_stay_on_the_line():
    """A TeX ligature taken from a second font, or a small-caps title's capitals, sits on the
    line's baseline but has another top (its font's descent differs), and pdfplumber groups
    lines by top. Fails if such glyphs get a line of their own ("ff" above "di erential"); a line
    drawn on another baseline stays a line of its own."""
    tall = (
        b"<< /Type /Font /Subtype /Type1 /BaseFont /TallLigatures /FirstChar 32 /LastChar 126 /Widths ["
        + b" ".join([b"600"] * 95)
        + b"] /FontDescriptor 7 0 R >>"
    )
    descriptor = (
        b"<< /Type /FontDescriptor /FontName /TallLigatures /Flags 32 /FontBBox [0 -600 1000 1000] "
        b"/ItalicAngle 0 /Ascent 1000 /Descent -600 /CapHeight 700 /StemV 80 >>"
    )
    content = (
        b"BT /F1 10 Tf 72 740 Td (Will cover solving di) Tj /F2 10 Tf (ff) Tj /F1 10 Tf (erential systems) Tj ET "
        b"BT /F1 10 Tf 72 726 Td (The committee met on Tuesday.) Tj ET"
    )
    data = _two_font_page(content, tall, descriptor)
    with pdfplumber.open(io.BytesIO(data)) as pdf:  # what pdfplumber alone reads
        assert pdf.pages[0].extract_text().split("\n")[:2] == ["Will cover solving di erential systems", "ff"]
    (page,) = extract_pages(data)
    assert page.text.split("\n") == ["Will cover solving differential systems", "The committee met on Tuesday."]


def _set_in_runs(y: float, runs: list[tuple[float, float, str]]) -> bytes:
    """One line of Helvetica text at ``y`` from ``72``, drawn as ``runs`` of ``(size, rise, text)``,
    each run placed by its own text position (``Td``, as NXP's and most word processors' PDFs
    place a super- or subscript), not by a text rise (``Ts``)."""
    widths = FONT_METRICS["Helvetica"][1]
    out, x = [b"BT"], 72.0
    for size, rise, text in runs:
        out.append(b"1 0 0 1 %.2f %.2f Tm /F1 %.1f Tf (%s) Tj" % (x, y + rise, size, text.encode()))
        x += sum(widths[ch] for ch in text) * size / 1000
    return b" ".join(out + [b"ET"])


def test_super_and_subscripts_stay_in_their_line():
    """A superscript's top is above its line's by more than pdfplumber's line tolerance (a 7.5 pt
    "2" raised 5 pt in a 10 pt line), so it got a line of its own: "I C-bus" under a "2". Fails
    if a super- or subscript set right against a letter ("I²C", "SO₂", "m³", a footnote's number
    before its text) leaves its line, if a footnote mark after a word or a number is glued to it
    ("Act3" is not "Act" to a search), or if smaller text on a line of its own is pulled into the
    line above it."""
    content = b" ".join(
        [
            _set_in_runs(700, [(10, 0, "The I"), (7.5, 5.2, "2"), (10, 0, "C-bus carries data.")]),
            _set_in_runs(
                680, [(10, 0, "Limit for SO"), (7, -2.5, "2"), (10, 0, " is 250 per m"), (7, 4, "3"), (10, 0, ".")]
            ),
            _set_in_runs(
                660,
                [(10, 0, "Signed in 1998"), (7.5, 5.2, "12"), (10, 0, ", the Act"), (7.5, 5.2, "3"), (10, 0, " ends.")],
            ),
            _set_in_runs(640, [(7, 4, "12"), (9, 0, "See the summary of the Act.")]),
            _set_in_runs(631, [(7, 0, "Figure 1: small caption set on its own line")]),
        ]
    )
    data = _two_font_page(content, b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold >>")
    with pdfplumber.open(io.BytesIO(data)) as pdf:  # what pdfplumber alone reads
        assert pdf.pages[0].extract_text().split("\n")[:2] == ["2", "The I C-bus carries data."]
    (page,) = extract_pages(data)
    assert page.text.split("\n") == [
        "The I2C-bus carries data.",
        "Limit for SO2 is 250 per m3.",
        "Signed in 1998 12, the Act 3 ends.",
        "12See the summary of the Act.",
        "Figure 1: small caption set on its own line",
    ]

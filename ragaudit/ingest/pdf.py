"""PDF validation and page-text extraction.

``inspect_pdf`` refuses bad input quickly (pypdfium2, ~44x faster than pdfplumber);
``extract_pages`` gives the text of each page with exact 1-based page numbers (pdfplumber,
the extractor the gold evidence was written against), falling back to pypdfium2 for files
pdfminer cannot parse (e.g. a broken colour space) and saying so in ``Page.extractor``.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import logging
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from operator import itemgetter
from typing import Callable

import numpy as np
import pdfplumber
import pypdf
import pypdfium2 as pdfium
from pdfplumber.utils import cluster_objects
from pdfplumber.utils.text import TEXTMAP_KWARGS, WordMap
from wordfreq import zipf_frequency

from ragaudit.index.sparse import CJK_CHAR
from ragaudit.ingest.removal import hidden_chars, page_transform, placed_box, running_lines
from ragaudit.text.dates import MONTH_PREFIX

log = logging.getLogger(__name__)

_PDF_MAGIC = b"%PDF-"


# what ``extract_pages`` reads from a page's layout (reading order, headings, identifiers broken at a
# line end); recorded in each version's build info so that re-ingestion rebuilds versions extracted
# by an earlier revision (2 did not rejoin identifiers; 3 removed a Type 3 font's glyphs as text
# under 1 pt; 5 reads a table drawn with ruling lines across a column gutter row by row; 6 also one
# whose cells of words wrap unevenly; 7 reads a glyph without a Unicode value as a ligature or U+FFFD
# instead of keeping its control character; 8 also a symbol inside a word that a ligature makes a word of;
# 9 such a symbol as the ligature it reads elsewhere in the document where the letters beside it cannot tell;
# 10 also a glyph pypdfium2 reads as a control code, as a TeX font's "fi" at 12, on every page;
# 11 removes a running line numbered "N of M", "N/M" or "N (M)" with the page count last, or in the
# middle of a line set in parts apart, keeps a line that its pages repeat outside the band, and
# reads a page with a few glyphs without a Unicode map glyph by glyph instead of from pypdfium2;
# 12 reads the glyphs of the standard Symbol font, not embedded, by its encoding: "°", "μ", "≤", and
# keeps glyphs of another font drawn on a line's baseline on that line: a ligature, small capitals;
# 13 keeps a super- or subscript set against a glyph in that glyph's line: "I2C", "SO2", "VCC",
# and sets a footnote mark after a word apart from it: "cereal 1", not "cereal1")
LAYOUT_REVISION = 13


class PDFError(ValueError):
    """A PDF that cannot be ingested. ``code`` is machine-readable, ``str(e)`` says what is wrong."""

    code = "invalid_pdf"


class EmptyFileError(PDFError):
    code = "empty_file"


class NotAPDFError(PDFError):
    code = "not_a_pdf"


class EncryptedPDFError(PDFError):
    code = "encrypted"


class CorruptPDFError(PDFError):
    code = "corrupt"


class NoTextError(PDFError):
    code = "no_text"


@dataclass(frozen=True)
class Page:
    """Text of one page. ``number`` is 1-based; ``extractor`` names the library that produced it.

    ``headings``: ``(offset in text, level, heading text, font size pt)`` for lines set in a font
    larger than the document's body text (level 1 = largest), in page order.
    ``removed``: ``(kind, text)`` of what was left out of ``text`` (``ragaudit.ingest.removal``):
    kind ``header`` / ``footer`` (a running line) or ``hidden:<reason>`` (a line of hidden text);
    ``ocr_layer_chars``: invisible characters kept because an image lies under them.
    ``unmapped``: ``(kind, word)`` for each glyph without a Unicode value (``read_unmapped``): kind
    ``ligature`` (the word as read) or ``unknown`` (the word with U+FFFD in its place).
    """

    number: int
    text: str
    extractor: str = "pdfplumber"
    headings: tuple = ()
    removed: tuple = ()
    ocr_layer_chars: int = 0
    unmapped: tuple = ()


@dataclass(frozen=True)
class PDFInfo:
    pages: int
    text_chars: int
    encrypted: bool


def _open_pdfium(data: bytes) -> pdfium.PdfDocument:
    if len(data) == 0:
        raise EmptyFileError("empty file: the upload has 0 bytes")
    if _PDF_MAGIC not in data[:1024]:
        raise NotAPDFError(
            "not a PDF: the file does not start with a %PDF- header (check the file type, not the extension)"
        )
    try:
        return pdfium.PdfDocument(data, password=None)
    except pdfium.PdfiumError as e:
        msg = str(e)
        if "password" in msg.lower():
            raise EncryptedPDFError(
                "password-protected PDF: it is encrypted with a user password; remove the password and upload again"
            ) from e
        raise CorruptPDFError(f"corrupt or truncated PDF: it cannot be parsed ({msg})") from e


def inspect_pdf(data: bytes, min_text_chars: int = 40) -> PDFInfo:
    """Check that ``data`` is an ingestible PDF; cheap (pypdfium2), run before anything is stored.

    PDFs encrypted with an empty user password (permissions-only) open normally.

    Returns page count and number of non-whitespace text characters.
    Raises ``EmptyFileError``, ``NotAPDFError``, ``EncryptedPDFError``, ``CorruptPDFError`` or
    ``NoTextError`` (fewer than ``min_text_chars`` characters: image-only scan, no OCR yet).
    """
    doc = _open_pdfium(data)
    try:
        n = len(doc)
        if n == 0:
            raise CorruptPDFError("corrupt PDF: it has no pages")
        chars = 0
        for i in range(n):
            page = doc[i]
            tp = page.get_textpage()
            chars += sum(1 for c in tp.get_text_range() if not c.isspace())
            tp.close()
            page.close()
        encrypted = False
        try:
            encrypted = pypdf.PdfReader(io.BytesIO(data), strict=False).is_encrypted
        except Exception:  # pypdf is only used to report the flag
            pass
    finally:
        doc.close()
    if chars < min_text_chars:
        what = "no extractable text" if chars == 0 else f"almost no extractable text ({chars} characters)"
        raise NoTextError(
            f"{what}: the PDF has {n} page(s) but no text layer, e.g. a scanned or image-only document; "
            "OCR is not supported yet"
        )
    return PDFInfo(pages=n, text_chars=chars, encrypted=encrypted)


def _pdfium_pages(data: bytes) -> list[Page]:
    """Every page's text as pypdfium2 reads it, glyphs without a Unicode value read as
    ``read_unmapped`` reads them (a ligature where that makes a word, else U+FFFD, counted in
    ``Page.unmapped``)."""
    doc = _open_pdfium(data)
    try:
        texts = []
        for i in range(len(doc)):
            tp = doc[i].get_textpage()
            # PDFium gives a hyphen it marks as such (FPDFText_IsHyphen) as U+FFFE, a noncharacter
            # ("Scope 2 (market\ufffebased)"): it is the hyphen printed there
            text = tp.get_text_range().replace("\r\n", "\n").replace("\ufffe", "-")
            # it ends a line with CR LF: a carriage return alone is a glyph read as its code (a TeX
            # font's "fl" is code 13, as its "fi" is 12), so no control character reaches the index
            texts.append(text.replace("\r", "\ufffd"))
    finally:
        doc.close()
    lines, unmapped = read_unmapped([[_Line(t, 0.0, len(t), 0.0, 0.0) for t in text.split("\n")] for text in texts])
    return [
        Page(
            number=i + 1,
            text=collapse_leaders("\n".join(ln.text for ln in ls)),
            extractor="pypdfium2",
            unmapped=tuple(unmapped[i]),
        )
        for i, ls in enumerate(lines)
    ]


def extract_pages(data: bytes, on_page: Callable[[int, int], None] | None = None) -> list[Page]:
    """Extract the text of every page, 1-based, in order (blank pages give ``text == ""``).

    pdfplumber characters, assembled into lines by pdfplumber's own text map, with these
    departures from ``page.extract_text()`` defaults (each measured on the shared corpus with
    ``bench/extraction_quality.py``; every dev-set evidence string still occurs on its page):

    - the gap that separates words scales with the font size (``x_tolerance_ratio`` 0.15) instead
      of a fixed 3 pt, which glued tightly set words together ("effectivestrategyforlearning");
      CJK-heavy pages, which have no spaces between words, keep the default;
    - overprinted "fake bold" glyphs (each drawn twice, slightly offset) count once
      (``page.dedupe_chars()``);
    - glyphs drawn one after another on one baseline stay on one line although their fonts give
      them different tops (a ligature from a second font, small capitals; ``_share_baselines``),
      and so does a super- or subscript set against a glyph ("I²C", "SO₂", "V_CC";
      ``_attach_scripts``), which pdfplumber put on a line of its own ("I C-bus" under a "2"); a
      footnote mark after a word joins it as a word of its own ("cereal 1", not "cereal1");
    - reading order: a page set in two columns is read column by column (``column_regions``);
      text drawn in another orientation (a form's vertical sidebar) is read in its own direction,
      after the page's upright text;
    - a spacing accent drawn over a letter ("a" + "¨") is composed with it ("ä"), and the text is
      Unicode NFC; ``(cid:NN)`` codes (glyphs without a Unicode map) become the letter pypdfium2
      reads at that place, or nothing; a page of which they are a tenth or more
      (``CID_PAGE_SHARE``) is taken from pypdfium2 whole; glyphs of the standard Symbol font, not
      embedded, are read by its encoding ("°", "μ", "≤"; ``_symbol_read``);
    - running headers and footers (``removal.running_lines``: repeated lines in the page's
      margin bands that differ at most by a page number) are removed, so chunks and quotes never
      hold them and a sentence broken by a page footer reads on across the page break;
    - hidden text (``removal.hidden_chars``: white on white, under 1 pt, outside the crop box,
      drawn invisible with no image under it) is left out;
    - what was removed is listed in ``Page.removed`` (the extraction report, ``removal.extraction_report``);
    - a word hyphenated at a line end is rejoined ("circumven-" / "tion" -> "circumvention"),
      while a compound keeps its hyphen ("dual-" / "encoder" -> "dual-encoder"), see ``dehyphenate``;
    - table-of-contents dot leaders are collapsed (``collapse_leaders``).

    Quotes are taken from this text, so it keeps the document's own characters (dashes,
    ligatures, full-width forms); matching folds them (``ragaudit.index.sparse.fold``).
    If pdfminer cannot parse the file at all, the whole document falls back to pypdfium2.
    ``on_page(done, total)`` is called after each page (progress).
    Raises the ``PDFError`` subclasses of ``inspect_pdf`` when neither can read it.
    """
    doc = _open_pdfium(data)  # uniform errors for empty / non-PDF / encrypted / truncated input
    page_lines: list[list[_Line] | None] = []
    boxes: list[tuple[float, float]] = []
    hidden: list[list[tuple[str, str]]] = []
    ocr_chars: list[int] = []
    try:
        with pdfplumber.open(io.BytesIO(data), password="") as pdf:
            for i, p in enumerate(pdf.pages):
                if on_page is not None and i:
                    on_page(i, len(pdf.pages))
                try:
                    chars, box, gone, ocr = _visible_chars(p, lambda i=i: doc[i])
                    boxes.append(box)
                    page_lines.append(_page_lines(p, _text_options(chars), lambda i=i: doc[i], chars))
                    hidden.append(gone if page_lines[-1] is not None else [])
                    ocr_chars.append(ocr if page_lines[-1] is not None else 0)
                finally:
                    p.close()  # pdfplumber keeps a page's parsed objects until then (615 pages: 4.7 GB)
    except Exception as e:  # pdfminer raises many exception types on malformed content
        log.warning("pdfplumber failed (%s: %s); falling back to pypdfium2", type(e).__name__, e)
        doc.close()
        return _pdfium_pages(data)
    doc.close()
    extractors = ["pdfplumber"] * len(page_lines)
    garbled = [i for i, ls in enumerate(page_lines) if ls is None]
    fallback = _pdfium_pages(data) if garbled else []
    for i in garbled:
        extractors[i] = "pypdfium2"
    running = running_lines([ls or [] for ls in page_lines], boxes)
    lines = [[ln for k, ln in enumerate(ls or []) if k not in running[i]] for i, ls in enumerate(page_lines)]
    removed = [
        [(running[i][k], (ls or [])[k].text) for k in sorted(running[i])] + hidden[i] for i, ls in enumerate(page_lines)
    ]
    lines, unmapped = read_unmapped(lines)
    lines = rejoin_identifiers(dehyphenate(lines))
    texts = []
    for i, ls in enumerate(lines):
        if page_lines[i] is None:
            texts.append(fallback[i].text)
            unmapped[i] = list(fallback[i].unmapped)
        else:
            texts.append(collapse_leaders("\n".join(ln.text for ln in ls)))
    sized = [[(collapse_leaders(ln.text), ln.size, ln.n, ln.gaps) for ln in ls] for ls in lines]
    headings = _find_headings(texts, sized)
    return [
        Page(
            number=i + 1,
            text=t,
            headings=tuple(h),
            extractor=x,
            removed=tuple(removed[i]),
            ocr_layer_chars=ocr_chars[i],
            unmapped=tuple(unmapped[i]),
        )
        for i, (t, h, x) in enumerate(zip(texts, headings, extractors))
    ]


# a glyph of a Type 3 font whose size pdfminer gives under this many points while its advance
# width is at least as many is sized by its font matrix, not tiny (``_type3_sized``)
TYPE3_MIN_SIZE = 1.0
# the share of an em a glyph's advance width is taken for when no normal character shares its line
TYPE3_EM_SHARE = 0.5


def _type3_sized(chars: list[dict]) -> list[dict]:
    """``chars`` with the glyphs of Type 3 fonts given their drawn size. A Type 3 font scales its
    glyphs by its own font matrix, which pdfminer leaves out of a character's size: LaTeX's
    small capitals in "4.1.1 SYSCALL 0" come out at 0.12 pt, 0.12 pt tall and flipped (a
    negative vertical scale, so not "upright"), though each is 9.5 pt wide and plainly visible;
    as a size under 1 pt they would be removed as hidden text. Such a glyph (size under
    ``TYPE3_MIN_SIZE``, advance width at least that, drawn horizontally left to right) takes the
    median size and box of the normal characters whose box holds its baseline (the heading it is
    part of), else a size of its advance width over ``TYPE3_EM_SHARE`` and a box drawn upright
    from its baseline. Text hidden by a tiny size keeps a tiny width and is still removed."""
    small = [
        i
        for i, c in enumerate(chars)
        if float(c.get("size", 10.0)) < TYPE3_MIN_SIZE
        and float(c["x1"]) - float(c["x0"]) >= TYPE3_MIN_SIZE
        and (m := c.get("matrix")) is not None
        and m[0] > 0
        and abs(m[1]) < 1e-6
        and abs(m[2]) < 1e-6
    ]
    if not small:
        return chars
    normal = [c for c in chars if float(c.get("size", 10.0)) >= TYPE3_MIN_SIZE and c.get("upright", True)]
    tops = np.fromiter((float(c["top"]) for c in normal), dtype=np.float64, count=len(normal))
    bottoms = np.fromiter((float(c["bottom"]) for c in normal), dtype=np.float64, count=len(normal))
    sizes = np.fromiter((float(c["size"]) for c in normal), dtype=np.float64, count=len(normal))
    out = list(chars)
    for i in small:
        c = chars[i]
        base = float(c["bottom"])
        near = (tops <= base) & (bottoms >= base)
        if near.any():  # the line's own box, so that the glyph is read in its line
            size = float(np.median(sizes[near]))
            top, bottom = float(np.median(tops[near])), float(np.median(bottoms[near]))
        else:  # ascent and descent as a text face's typical 0.75 / 0.25 em
            size = (float(c["x1"]) - float(c["x0"])) / TYPE3_EM_SHARE
            top, bottom = base - 0.75 * size, base + 0.25 * size
        out[i] = {**c, "size": size, "top": top, "bottom": bottom, "height": bottom - top, "upright": True}
    return out


def _visible_chars(page, pdfium_page) -> tuple[list[dict], tuple[float, float], list[tuple[str, str]], int]:
    """The characters of pdfplumber ``page`` a reader can see (``removal.hidden_chars``; a Type 3
    font's glyphs sized first, ``_type3_sized``), the crop box's ``(top, bottom)`` as characters
    are placed, the ``("hidden:<reason>", line)`` entries of the hidden ones, and the number of
    invisible characters kept as an OCR layer."""
    chars = _type3_sized(page.chars)
    crop = placed_box(page_transform(page), page.page_obj.cropbox)
    visible, gone, ocr = hidden_chars(page, chars, pdfium_page)
    entries = []
    for why, cs in gone.items():
        opts = _text_options(cs)
        lines = _lines_of([c for c in cs if c.get("upright", True)], opts)
        for group in _turn_upright(
            [c for c in cs if not c.get("upright", True)], float(page.width), float(page.height)
        ):
            lines += _lines_of(group, opts)
        entries += [(f"hidden:{why}", ln.text) for ln in lines]
    return visible, (crop[1], crop[3]), entries, ocr


@dataclass
class _Line:
    """One extracted line: text, median font size pt, characters, vertical position (pt from the
    page top; -1 for text in another orientation), and how many gaps wider than ``CELL_GAP_EMS``
    font sizes part its words (table cells set apart; ``cell_gaps``)."""

    text: str
    size: float
    n: int
    top: float
    bottom: float
    gaps: int = 0


# spacing accents (as TeX and many PDF producers draw them: a separate glyph over the letter)
# -> the combining character that NFC composes with the letter
_ACCENTS = {
    "\u00a8": "\u0308",
    "\u00b4": "\u0301",
    "\u02c6": "\u0302",
    "\u02dc": "\u0303",
    "\u00b8": "\u0327",
    "\u02d8": "\u0306",
    "\u02c7": "\u030c",
    "\u02da": "\u030a",
    "\u00af": "\u0304",
    "\u02d9": "\u0307",
    "\u02dd": "\u030b",
    "\u02db": "\u0328",
}
_CID_CHAR = re.compile(r"^\(cid:\d+\)$")
# a page whose glyphs without a Unicode map are this share of its glyphs or more is read by pypdfium2
# whole: a font without a map set in a sidebar beside the body garbles every line it shares. Fewer
# (a stamp across the top of every page, a logo's letters) are read glyph by glyph, so the page keeps
# its reading order and its running lines are still found
CID_PAGE_SHARE = 0.10


def _page_lines(page, opts: dict, pdfium_page, chars: list[dict] | None = None) -> list[_Line] | None:
    """Lines of one pdfplumber page in reading order, or ``None`` when ``CID_PAGE_SHARE`` of its
    glyphs or more have no Unicode map (the caller takes the page from pypdfium2). ``pdfium_page()`` opens the same page
    in pypdfium2 (used only to read ``(cid:NN)`` glyphs). ``chars``: ``page.chars`` if already
    read."""
    chars = _attach_scripts(
        _share_baselines([_symbol_read(c) for c in dedupe_chars(page.chars if chars is None else chars)])
    )
    cids = sum(1 for c in chars if _CID_CHAR.match(c.get("text", "")))
    if cids >= 3 and cids >= CID_PAGE_SHARE * len(chars):
        return None
    if cids:
        chars = _read_cid_chars(chars, pdfium_page())
    chars = _compose_accents(chars)
    upright = [c for c in chars if c.get("upright", True)]
    rotated = [c for c in chars if not c.get("upright", True)]
    out: list[_Line] = []
    found: list[list[RuledTable]] = []

    def tables() -> list[RuledTable]:
        if not found:
            found.append(ruled_tables(page))
        return found[0]

    regions, words = _column_regions(upright, float(page.width), opts, tables)
    for region in regions:
        if region is upright and (page.objects.get("line") or page.objects.get("rect")):
            tx, ty = _mids(rotated)
            mx, my = _mids(region)
            wrapped = [t for t in tables() if not _in_box(t.bbox, tx, ty).any() and _wrapped_records(t, region, mx, my)]
            if wrapped:
                out.extend(_with_tables(region, wrapped, opts))
                continue
        table = _table_of_region(region, found[0]) if found and region is not upright else None
        out.extend(
            _table_lines(region, table, opts)
            if table
            else _lines_of(region, opts, words if region is upright else None)
        )
    for group in _turn_upright(rotated, float(page.width), float(page.height)):
        for ln in _lines_of(group, opts):
            ln.top = ln.bottom = -1.0  # no place among the page's upright lines
            out.append(ln)
    return out


def _cell_lines(chars: list[dict], mx: np.ndarray, my: np.ndarray, box: tuple[float, float, float, float]) -> list[str]:
    """The text lines of the characters whose middles (``mx``, ``my``) lie in ``box``, top to
    bottom (a new line where a character's top is more than half its size below the line's first)."""
    idx = np.nonzero(_in_box(box, mx, my))[0]
    inner = sorted((chars[i] for i in idx), key=lambda c: (c["top"], c["x0"]))
    lines: list[list[dict]] = []
    for c in inner:
        if not lines or float(c["top"]) - float(lines[-1][0]["top"]) > 0.5 * float(c.get("size") or 1.0):
            lines.append([])
        lines[-1].append(c)
    return ["".join(ch.get("text", "") for ch in sorted(ln, key=lambda ch: ch["x0"])) for ln in lines]


def _text_crosses_cells(table: RuledTable, chars: list[dict], mx: np.ndarray, my: np.ndarray) -> bool:
    """A line of text runs on from one cell into the next (two characters of one line on either
    side of a cell's edge, closer than a third of their size): the rules do not part the text
    there, as when a table's grid runs on behind a footnote."""
    for row in table.rows:
        boxes = sorted((b for b in row if b is not None), key=lambda b: b[0])
        for left, right in zip(boxes, boxes[1:]):
            edge = left[2]
            lo, hi = max(left[1], right[1]), min(left[3], right[3])
            near = [chars[i] for i in np.nonzero((my >= lo) & (my <= hi) & (np.abs(mx - edge) < 12))[0]]
            before = [c for c in near if float(c["x1"]) <= edge]
            after = [c for c in near if float(c["x0"]) >= edge]
            if not before or not after:
                continue
            a_top = np.array([float(c["top"]) for c in before])[:, None]
            a_x1 = np.array([float(c["x1"]) for c in before])[:, None]
            a_size = np.array([float(c.get("size") or 1.0) for c in before])[:, None]
            b_top = np.array([float(c["top"]) for c in after])[None, :]
            b_x0 = np.array([float(c["x0"]) for c in after])[None, :]
            if np.any((np.abs(a_top - b_top) < 1.0) & (b_x0 - a_x1 < a_size / 3)):
                return True
    return False


def _wrapped_records(table: RuledTable, chars: list[dict], mx: np.ndarray, my: np.ndarray) -> bool:
    """A ruled table whose line-by-line reading would interleave its cells: below its first row, a
    row with two or more cells of words wrapped over different numbers of lines ("Acquisition-related
    / adjustments" beside a six-line definition). Cells that wrap alike hold stacked records (a
    table ruled only at its border: one record per line across the cells), which lines read right;
    a table holding turned text is a form, and one whose text runs across its cells' edges
    (``_text_crosses_cells``) no grid of cells: both are read as lines. ``chars``: the page's
    upright characters; ``mx``, ``my``: their middles (``_mids``)."""
    if len(table.rows) < 2 or not chars:
        return False
    if _text_crosses_cells(table, chars, mx, my):
        return False
    for row in table.rows[1:]:
        counts = []
        for box in row:
            if box is None:
                continue
            lines = _cell_lines(chars, mx, my, box)
            if len(lines) >= 2 and len(re.findall(r"[^\W\d_]{2,}", " ".join(lines))) >= 3:
                counts.append(len(lines))
        if len(counts) >= 2 and len(set(counts)) > 1:
            return True
    return False


def _with_tables(chars: list[dict], tables: list[RuledTable], opts: dict) -> list[_Line]:
    """The lines of a one-region page with ``tables`` read row by row (``_table_lines``) and the
    rest as lines, in order of their tops."""
    taken: set[int] = set()
    rows: list[_Line] = []
    for t in tables:
        inner = [c for c in chars if id(c) not in taken and _inside(t.bbox, *_mid(c))]
        taken.update(id(c) for c in inner)
        rows += _table_lines(inner, t, opts)
    rest = _lines_of([c for c in chars if id(c) not in taken], opts)
    return sorted(rest + rows, key=lambda ln: ln.top)


def _table_of_region(region: list[dict], tables: list[RuledTable]) -> RuledTable | None:
    """The ruled table holding (nine in ten of) the region's characters in two or more rows with
    text in two or more cells (as ``_record_tables`` asks), or None; not one whose text runs
    across its cells' edges (``_text_crosses_cells``)."""
    mx, my = _mids(region)
    for t in tables:
        if 10 * int(_in_box(t.bbox, mx, my).sum()) < 9 * len(region):
            continue
        if _text_crosses_cells(t, region, mx, my):
            continue
        if _record_rows(t, mx, my) >= 2:
            return t
    return None


def dedupe_chars(chars: list[dict], tolerance: float = 1.0) -> list[dict]:
    """Drop overprinted duplicates: characters with the same text, font, size and orientation
    drawn within ``tolerance`` pt of another ("fake bold"), keeping the first in drawing order.

    The grouping is pdfplumber's ``utils.dedupe_chars``: per group, ``cluster_objects`` on
    ``doctop``, then on ``x0`` (chains of sorted values, each ``<= previous + tolerance``), keeping
    each cluster's first char by ``(doctop, x0)``. This version keeps the page order and runs the
    chaining as numpy sorts over the whole page (pdfplumber re-sorts with ``list.index``,
    quadratic: 1 s per page of a paper; its per-object dicts cost 5x the CPU of this).
    """
    n = len(chars)
    if n < 2:
        return list(chars)
    gid: dict[tuple, int] = {}
    g = np.fromiter(
        (gid.setdefault((c.get("upright"), c.get("text"), c.get("fontname"), c.get("size")), len(gid)) for c in chars),
        dtype=np.int64,
        count=n,
    )
    if len(gid) == n:
        return list(chars)
    y = np.fromiter((c["doctop"] for c in chars), dtype=np.float64, count=n)
    x = np.fromiter((c["x0"] for c in chars), dtype=np.float64, count=n)
    if np.isnan(y).any() or np.isnan(x).any():  # NaN sorts differently in numpy: pdfplumber's own clustering
        return _dedupe_chars_clustered(chars, tolerance)
    idx = np.arange(n)
    # chains of doctop within each group
    o = np.lexsort((idx, y, g))
    brk = np.empty(n, dtype=bool)
    brk[0] = True
    brk[1:] = (g[o][1:] != g[o][:-1]) | (y[o][1:] > y[o][:-1] + tolerance)
    yc = np.empty(n, dtype=np.int64)
    yc[o] = np.cumsum(brk)
    # chains of x0 within each doctop chain
    o = np.lexsort((idx, x, yc))
    brk[1:] = (yc[o][1:] != yc[o][:-1]) | (x[o][1:] > x[o][:-1] + tolerance)
    xc = np.empty(n, dtype=np.int64)
    xc[o] = np.cumsum(brk)
    # per x0 chain: the first char by (doctop, x0), ties to the first drawn
    o = np.lexsort((idx, x, y, xc))
    first = np.empty(n, dtype=bool)
    first[0] = True
    first[1:] = xc[o][1:] != xc[o][:-1]
    return [chars[i] for i in np.sort(o[first]).tolist()]


def _dedupe_chars_clustered(chars: list[dict], tolerance: float) -> list[dict]:
    """``dedupe_chars`` with pdfplumber's ``cluster_objects`` (the reference; used for NaN positions)."""

    groups: dict[tuple, list[int]] = {}
    for i, c in enumerate(chars):
        groups.setdefault((c.get("upright"), c.get("text"), c.get("fontname"), c.get("size")), []).append(i)
    keep: set[int] = set()
    for idx in groups.values():
        if len(idx) == 1:
            keep.add(idx[0])
            continue
        objs = [{"doctop": chars[i]["doctop"], "x0": chars[i]["x0"], "i": i} for i in idx]
        for ycl in cluster_objects(objs, itemgetter("doctop"), tolerance):
            for xcl in cluster_objects(ycl, itemgetter("x0"), tolerance):
                keep.add(min(xcl, key=lambda o: (o["doctop"], o["x0"]))["i"])
    return [c for i, c in enumerate(chars) if i in keep]


def _textmap(chars: list[dict], opts: dict, words: list | None = None):
    """``pdfplumber.utils.chars_to_textmap(chars, **opts)``; ``words``: the ``(word, chars)`` tuples
    of ``WordExtractor(**opts).iter_extract_tuples(chars)`` when already built (by ``column_regions``
    on the same characters), so the page's words are not extracted twice."""

    if words is None:
        return pdfplumber.utils.chars_to_textmap(chars, **opts)
    # the body of chars_to_textmap (pdfplumber 0.11) after its word extraction
    kwargs = {
        **opts,
        "presorted": True,
        "layout_bbox": opts.get("layout_bbox") or pdfplumber.utils.objects_to_bbox(chars),
    }
    return WordMap(words).to_textmap(**{k: kwargs[k] for k in TEXTMAP_KWARGS if k in kwargs})


def _lines_of(chars: list[dict], opts: dict, words: list | None = None) -> list[_Line]:
    if not chars:
        return []
    tm = _textmap(chars, opts, words)
    out = []
    for ln in tm.extract_text_lines(strip=True, return_chars=True):
        sizes = sorted(round(float(c.get("size", 0.0)), 1) for c in ln["chars"])
        text = unicodedata.normalize("NFC", ln["text"])
        if text.strip():
            size = sizes[len(sizes) // 2] if sizes else 0.0
            out.append(
                _Line(text, size, len(sizes), float(ln["top"]), float(ln["bottom"]), cell_gaps(ln["chars"], size))
            )
    return out


CELL_GAP_EMS = 1.5  # a gap this many font sizes wide between two glyphs of a line parts table cells


_ENUMERATOR = re.compile(
    r"(?i)^(?:(?:item|part|note|section|chapter|article|appendix|step)\s*)?(?:\d+(?:\.\d+)*|[A-Z]|[IVXLC]+)[.:)]?$"
)


def cell_gaps(chars: list[dict], size: float) -> int:
    """How many horizontal gaps wider than ``CELL_GAP_EMS`` x ``size`` lie between the visible
    glyphs of one line (``chars``: pdfplumber character objects), not counting one right after a
    leading enumerator ("Item 2.", "3.1", "A."; "Item 2.   Management's Discussion" is a title):
    a table's cells are set apart by such gaps, words of a sentence or a title are not."""
    glyphs = sorted(
        (c for c in chars if (c.get("text") or "").strip() and c.get("upright", True)), key=lambda c: float(c["x0"])
    )
    wide = CELL_GAP_EMS * max(size, 1.0)
    cuts = [k for k in range(1, len(glyphs)) if float(glyphs[k]["x0"]) - float(glyphs[k - 1]["x1"]) > wide]
    if cuts and _ENUMERATOR.match("".join(c["text"] for c in glyphs[: cuts[0]])):
        cuts = cuts[1:]
    return len(cuts)


# pdfplumber's line tolerance: glyphs whose tops differ by more start another line
LINE_Y_TOLERANCE = 3.0


def _share_baselines(chars: list[dict]) -> list[dict]:
    """``chars`` with the glyphs of one run on one baseline given one top and bottom, when their
    own differ by more than ``LINE_Y_TOLERANCE``. A run is glyphs drawn one after another, each
    starting where the previous ends (within 0.3 of the font size) on the same baseline (the text
    matrix's y, within 0.05 of the size); its top and bottom become the medians of its glyphs'.

    pdfplumber groups glyphs into lines by their tops, and pdfminer puts a glyph's box from the
    baseline plus the font's descent up by the font size: a glyph of another font on the same
    baseline (a TeX ligature "ﬀ" from a second font, a small-caps title's capitals) would get a
    line of its own ("di erential" under "ﬀ"). Sub- and superscripts sit on baselines of their
    own and are left as they are; so is every run whose tops already agree, which is nearly
    every run of every page."""
    out = list(chars)
    n, i = len(out), 0
    while i < n:
        j = i + 1
        while j < n and _continues_run(out[j - 1], out[j]):
            j += 1
        if j - i > 1:
            tops = sorted(c["top"] for c in out[i:j])
            if tops[-1] - tops[0] > LINE_Y_TOLERANCE:
                top, bottom = float(np.median(tops)), float(np.median([c["bottom"] for c in out[i:j]]))
                for k in range(i, j):
                    out[k] = _moved(out[k], top, bottom)
        i = j
    return out


# a glyph between SCRIPT_SIZES of its neighbour's size, raised or lowered from its baseline by at
# most SCRIPT_SHIFT of that size, is a super- or subscript of it (TeX sets them at 0.5-0.7, word
# processors at about 0.6; a line of text beside a brace drawn across several lines is smaller still)
SCRIPT_SIZES = (0.4, 0.85)
SCRIPT_SHIFT = 0.6


def _attach_scripts(chars: list[dict]) -> list[dict]:
    """``chars`` with each super- or subscript given the top and bottom of the glyph it is set
    against, so that it stays in that glyph's line ("I²C", "SO₂", "m²", a footnote mark "Act¹").

    A script is a run of glyphs of one size and baseline, drawn right after (or right before) a
    larger glyph (its size within ``SCRIPT_SIZES`` of that glyph's) whose baseline differs by
    less than ``SCRIPT_SHIFT`` of its size and whose box its box overlaps. pdfplumber groups lines by top,
    and a superscript's top is higher than its line's by more than ``LINE_Y_TOLERANCE`` (NXP sets
    the "2" of "I²C" at 7.5 pt, 5 pt above a 10 pt line): it got a line of its own and the name
    read "I C" with a "2" above it. Text in a smaller font set apart by a space, or on a line of
    its own, is not a script and keeps its place. A footnote mark (``_footnote_mark``) joins the
    line as a word of its own: a zero-width space goes before it ("the Act 3 ends")."""
    out = list(chars)
    n = len(out)
    spaces: list[tuple[int, dict]] = []
    i = 0
    while i < n:
        j = i + 1
        while j < n and _same_script_run(out[j - 1], out[j]):
            j += 1
        base, mark = None, False
        if i > 0 and _scripted(out[i - 1], out[i], after=True):
            base, mark = out[i - 1], _footnote_mark(out, i, j)
        elif j < n and _scripted(out[j], out[j - 1], after=False):
            base = out[j]
        if base is not None:
            for k in range(i, j):
                out[k] = _moved(out[k], base["top"], base["bottom"])
            if mark:  # a word break before it: a zero-width space where the mark starts
                spaces.append((i, {**out[i], "text": " ", "x1": out[i]["x0"], "width": 0.0}))
        i = j
    for k, space in reversed(spaces):
        out.insert(k, space)
    return out


def _moved(c: dict, top: float, bottom: float) -> dict:
    """Glyph ``c`` given ``top`` and ``bottom`` (its other vertical coordinates shifted alike)."""
    up, down = top - c["top"], bottom - c["bottom"]
    moved = {"top": top, "bottom": bottom}
    for key, shift in (("doctop", up), ("y1", -up), ("y0", -down)):
        if key in c:
            moved[key] = c[key] + shift
    return {**c, **moved}


# a footnote mark: digits or reference signs ("¹²", "*", "†"), or one small letter (a table note "ᵃ")
_MARK = re.compile(r"[\d*†‡§¶,]+|[a-z]")


def _footnote_mark(chars: list[dict], i: int, j: int) -> bool:
    """Whether the raised run ``chars[i:j]`` is a footnote mark (``_MARK``): raised after a word
    of three letters or more ("operations¹:", "Act¹²"), after punctuation ("(DMCA)¹"), or after a
    number other than 10 ("in 1998¹²"). Glued to the word it would change it ("operations1" is
    not "operations" to a search), so it is kept apart; an exponent after a unit, a symbol or 10
    ("m³", "x²", "10¹²") and letters raised after a number ("1st") stay scripts."""
    text = "".join(c.get("text", "") for c in chars[i:j])
    if not _MARK.fullmatch(text) or chars[i]["matrix"][5] <= chars[i - 1]["matrix"][5]:
        return False
    before = chars[i - 1].get("text", "")
    if before.isdigit():  # a power of ten ("10¹²") is an exponent; after any other number, a mark
        number = "".join(c.get("text", "") for c in chars[max(0, i - 3) : i])
        return not re.search(r"(?<![\d.,])10$", number)
    if not before.isalpha():
        return not before.isalnum()
    # the letters of the word it follows: glyphs drawn one right after another ("ARTICULO Nº" is
    # one letter, "N", when no space glyph is drawn between the words)
    letters, k = 1, i - 1
    while k > 0 and letters < 3 and chars[k - 1].get("text", "").isalpha() and _touches(chars[k - 1], chars[k]):
        letters, k = letters + 1, k - 1
    return letters >= 3


def _touches(prev: dict, c: dict) -> bool:
    """Whether glyph ``c`` starts where ``prev`` ends with no word space between them (within 0.15
    of the size), on the same baseline."""
    return _continues_run(prev, c, max_gap=0.15)


def _same_script_run(prev: dict, c: dict) -> bool:
    """Whether ``c`` continues ``prev``'s run: the same size and baseline, right after it."""
    size = float(prev.get("size") or 0)
    return abs(float(c.get("size") or 0) - size) <= 0.01 * size and _continues_run(prev, c)


def _scripted(base: dict, c: dict, after: bool) -> bool:
    """Whether ``c`` is a super- or subscript set against ``base``: right after it (``after``) or
    right before it, smaller, on a baseline shifted by less than ``SCRIPT_SHIFT`` of its size,
    its box overlapping ``base``'s."""
    if not (base.get("upright", True) and c.get("upright", True)) or "matrix" not in base or "matrix" not in c:
        return False
    if not (base.get("text") or "").strip() or not (c.get("text") or "").strip():
        return False
    size, small = float(base.get("size") or 0), float(c.get("size") or 0)
    if size <= 0 or not SCRIPT_SIZES[0] * size <= small <= SCRIPT_SIZES[1] * size:
        return False
    shift = abs(c["matrix"][5] - base["matrix"][5])
    if not 0.05 * size < shift < SCRIPT_SHIFT * size:
        return False
    gap = c["x0"] - base["x1"] if after else base["x0"] - c["x1"]
    return -0.1 * size <= gap <= 0.3 * size and c["top"] < base["bottom"] and c["bottom"] > base["top"]


def _continues_run(prev: dict, c: dict, max_gap: float = 0.3) -> bool:
    """Whether glyph ``c`` is drawn on ``prev``'s baseline, starting where ``prev`` ends (within
    ``max_gap`` of the font size)."""
    if not (prev.get("upright", True) and c.get("upright", True)) or "matrix" not in prev or "matrix" not in c:
        return False
    size = max(float(prev.get("size") or 0), float(c.get("size") or 0)) or 1.0
    return (
        abs(c["matrix"][5] - prev["matrix"][5]) <= 0.05 * size and -0.1 * size <= c["x0"] - prev["x1"] <= max_gap * size
    )


def _symbol_read(c: dict) -> dict:
    """Glyph ``c`` with the character the Symbol font's built-in encoding gives its code, when it
    is set in the standard Symbol font and the PDF does not embed it (font name "Symbol", without
    a subset prefix). pdfminer does not apply that encoding: a degree sign comes out as
    "(cid:176)", a micro sign as "m" and "≤" as "£". An embedded Symbol font carries its own
    encoding, which pdfminer reads (a Type 1 font) or which differs (a TrueType "SymbolMT" that
    draws a bullet at the code of "¥"), so its glyphs are left as they are. ``c`` itself also when
    the encoding leaves the code undefined."""
    if c.get("fontname") != "Symbol":
        return c
    ch = _symbol_text(c.get("text", ""))
    if ch is None:
        return c
    out = {**c, "text": ch}
    width = _symbol_widths().get(ch)
    if width is not None and c.get("x1", 0) - c.get("x0", 0) < 0.01:
        # a code the PDF gives no width has a box of none: its advance (the gap to the next glyph)
        # would read as a space ("6.0 μ A"); the box takes the font's width for it (Symbol.afm)
        out["x1"] = c["x0"] + width * float(c.get("size") or 0) / 1000
        if "width" in c:
            out["width"] = out["x1"] - c["x0"]
    return out


@functools.cache
def _symbol_widths() -> dict[str, float]:
    """The Symbol font's glyph widths (thousandths of the font size) by character, from the
    metrics pdfminer carries (Symbol.afm), also under each character's NFKC form ("μ" for "µ")."""
    from pdfminer.fontmetrics import FONT_METRICS

    widths = FONT_METRICS["Symbol"][1]
    return {**{unicodedata.normalize("NFKC", k): v for k, v in widths.items()}, **widths}


# Unicode categories of a character that is text: letters, marks, numbers, punctuation and symbols
# ("°", "≤", "±", "•"); not a control or private-use code point
_TEXT_CATEGORIES = frozenset("LMNPS")


def _symbol_text(text: str) -> str | None:
    """The character the Symbol font's built-in encoding gives the code pdfminer read as ``text``
    ("(cid:176)" -> "°", "m" -> "μ", "£" -> "≤", "W" -> "Ω"); ``None`` for a code it leaves
    undefined or a ``text`` that is not one code. The table is the Adobe Symbol encoding as pypdf
    carries it (from Symbol.afm and the Adobe Glyph List)."""
    from pypdf._codecs import charset_encoding

    m = re.fullmatch(r"\(cid:(\d+)\)", text)
    code = int(m.group(1)) if m else (ord(text) if len(text) == 1 else 256)
    if code > 255:
        return None
    ch = charset_encoding["/Symbol"][code]
    return ch if unicodedata.category(ch)[0] in _TEXT_CATEGORIES or ch == " " else None


def _read_cid_chars(chars: list[dict], pdfium_page) -> list[dict]:
    """Replace each ``(cid:NN)`` glyph by the letter or digit pypdfium2 reads at its place (it
    also uses glyph names), U+FFFD where it reads a control code (``read_unmapped`` reads it
    later), or drop it: a dingbat font's arrows and bullets, which pypdfium2 reads by their codes
    as other symbols (an IRS form's arrow as "©")."""
    tp = pdfium_page.get_textpage()
    height = pdfium_page.get_height()
    out = []
    try:
        for c in chars:
            if not _CID_CHAR.match(c.get("text", "")):
                out.append(c)
                continue
            x, y = (c["x0"] + c["x1"]) / 2, height - (c["top"] + c["bottom"]) / 2
            i = tp.get_index(x, y, 1.0, 1.0)
            if i is None or i < 0:
                # PDFium gives a glyph it has no Unicode value for a box of no height on the baseline
                i = tp.get_index(x, height - c["bottom"], 1.0, 1.0)
            ch = tp.get_text_range(i, 1) if i is not None and i >= 0 else ""
            if len(ch) == 1 and ch.isalnum():
                out.append({**c, "text": ch})
            elif len(ch) == 1 and unicodedata.category(ch) == "Cc":
                # a control code is a glyph the font draws at that code: a TeX font's "fi" at 12,
                # "fl" at 13; kept as unmapped, so ``read_unmapped`` reads it as the ligature that
                # makes a word, or U+FFFD counted in the report, never dropped
                out.append({**c, "text": "\ufffd"})
    finally:
        tp.close()
        pdfium_page.close()
    return out


def _compose_accents(chars: list[dict]) -> list[dict]:
    """Compose spacing accents with the letter they are drawn over ("a" + "¨" -> "ä", NFC)."""
    accents = [k for k, c in enumerate(chars) if c.get("text") in _ACCENTS]
    if not accents:
        return chars
    merged: dict[int, str] = {}
    drop = set()
    for k in accents:
        a = chars[k]
        cx = (a["x0"] + a["x1"]) / 2
        best, dist = None, None
        for j in range(max(0, k - 4), min(len(chars), k + 5)):
            b = chars[j]
            t = merged.get(j, b.get("text", ""))
            if j == k or not t or not t[0].isalpha() or abs(b["top"] - a["top"]) > max(float(b.get("size", 10)), 4):
                continue
            if b["x0"] - 1 <= cx <= b["x1"] + 1:
                d = abs((b["x0"] + b["x1"]) / 2 - cx)
                if dist is None or d < dist:
                    best, dist = j, d
        if best is None:
            continue
        base = merged.get(best, chars[best]["text"])
        if base == "\u0131":  # dotless i under an accent (TeX \\i)
            base = "i"
        merged[best] = unicodedata.normalize("NFC", base + _ACCENTS[a["text"]])
        drop.add(k)
    return [({**c, "text": merged[j]} if j in merged else c) for j, c in enumerate(chars) if j not in drop]


def _turn_upright(chars: list[dict], width: float, height: float) -> list[list[dict]]:
    """Non-upright characters as upright ones, by direction: text turned 90 degrees anticlockwise
    (read bottom to top) or clockwise (top to bottom) is mapped into a frame where it reads left
    to right, so pdfplumber's line and word building reads it in its own order."""
    up, down = [], []
    for c in chars:
        m = c.get("matrix") or (1, 0, 0, 1)
        if m[1] > 0:  # baseline points up the page
            x0, x1, top, bottom = height - c["bottom"], height - c["top"], c["x0"], c["x1"]
            up.append(
                {
                    **c,
                    "x0": x0,
                    "x1": x1,
                    "top": top,
                    "bottom": bottom,
                    "doctop": top,
                    "upright": True,
                    "width": x1 - x0,
                    "height": bottom - top,
                }
            )
        else:
            x0, x1, top, bottom = c["top"], c["bottom"], width - c["x1"], width - c["x0"]
            down.append(
                {
                    **c,
                    "x0": x0,
                    "x1": x1,
                    "top": top,
                    "bottom": bottom,
                    "doctop": top,
                    "upright": True,
                    "width": x1 - x0,
                    "height": bottom - top,
                }
            )
    return [sorted(g, key=lambda c: (round(c["top"]), c["x0"])) for g in (up, down) if g]


_NUMBER_WORD = re.compile(r"^[-+(]?[$€£]?\d[\d,.]*%?\)?$")


@dataclasses.dataclass
class RuledTable:
    """A table drawn with ruling lines: its bounding box ``(x0, top, x1, bottom)`` in pt and its
    rows' cells (each a bounding box, or None where a merged cell spans it), from pdfplumber's
    ``find_tables``."""

    bbox: tuple[float, float, float, float]
    rows: list[list[tuple[float, float, float, float] | None]]


def ruled_tables(page) -> list[RuledTable]:
    """The tables ``page`` draws with ruling lines (pdfplumber's ``find_tables``, its default
    "lines" strategy); ``[]`` when finding them fails. A few ms per page; asked for a page the
    column reader splits and for a one-column page that draws lines or rectangles."""
    try:
        return [
            RuledTable(tuple(map(float, t.bbox)), [[c and tuple(map(float, c)) for c in r.cells] for r in t.rows])
            for t in page.find_tables()
        ]
    except Exception:  # a malformed drawing must not cost the page its text
        return []


def _inside(box: tuple[float, float, float, float], x: float, y: float) -> bool:
    return box[0] <= x <= box[2] and box[1] <= y <= box[3]


def _mid(o: dict) -> tuple[float, float]:
    """The middle ``(x, y)`` in pt of a character or word."""
    return (o["x0"] + o["x1"]) / 2, (o["top"] + o["bottom"]) / 2


def _mids(objs: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """The middles of ``objs`` as two arrays, x and y."""
    return (
        np.fromiter(((o["x0"] + o["x1"]) / 2 for o in objs), float, len(objs)),
        np.fromiter(((o["top"] + o["bottom"]) / 2 for o in objs), float, len(objs)),
    )


def _in_box(box: tuple[float, float, float, float], mx: np.ndarray, my: np.ndarray) -> np.ndarray:
    """Which of the middles ``mx``, ``my`` lie in ``box``."""
    return (mx >= box[0]) & (mx <= box[2]) & (my >= box[1]) & (my <= box[3])


def _record_rows(table: RuledTable, mx: np.ndarray, my: np.ndarray) -> int:
    """How many of ``table``'s rows hold text (middles ``mx``, ``my``) in two or more cells."""
    return sum(1 for r in table.rows if sum(1 for c in r if c is not None and _in_box(c, mx, my).any()) >= 2)


def _record_tables(words: list[dict], gutters: list[tuple[float, float]], tables: list[RuledTable]) -> list[RuledTable]:
    """The ruled tables that run across one of ``gutters`` (left edge before it, right edge after
    it) and hold records: two or more rows with words in two or more cells. A figure's frame or a
    box around two captions holds no such rows."""
    mx, my = _mids(words)
    return [
        t
        for t in tables
        if any(t.bbox[0] < g0 and t.bbox[2] > g1 for g0, g1 in gutters) and _record_rows(t, mx, my) >= 2
    ]


def _table_index(words: list[dict], line: list[int], tables: list[RuledTable]) -> int | None:
    """Index in ``tables`` of the table whose box holds the line's vertical middle, or None."""
    mid = sum((words[k]["top"] + words[k]["bottom"]) / 2 for k in line) / len(line)
    lo = min(words[k]["x0"] for k in line)
    return next((i for i, t in enumerate(tables) if t.bbox[1] <= mid <= t.bbox[3] and lo >= t.bbox[0] - 2), None)


def _table_lines(chars: list[dict], table: RuledTable, opts: dict) -> list[_Line]:
    """One line per row of ``table``: its cells' text left to right, a cell's own lines joined
    by spaces (``"Fluorescencia ultravioleta (Método automático)"``), so a row reads as one record
    whatever its cells' line breaks. Characters in no cell are read as lines of their own after."""
    placed: set[int] = set()
    out: list[_Line] = []
    for row in table.rows:
        cells, sizes, n = [], [], 0
        for box in row:
            if box is None:
                continue
            inner = [
                c for c in chars if id(c) not in placed and _inside(box, *_mid(c))
            ]  # a character once, where a drawing's cells overlap
            placed.update(id(c) for c in inner)
            text = ""
            for ln in _lines_of(inner, opts):  # a word hyphenated at the cell's line end stays one
                part = ln.text.strip()
                glued = re.search(r"[^\W\d_]-$", text) or (
                    text and CJK_CHAR.match(text[-1]) and CJK_CHAR.match(part[:1])
                )  # Chinese or Japanese text wraps without a space
                text += part if glued else (" " + part if text else part)
            if text:
                cells.append(text)
                sizes += [round(float(c.get("size", 0.0)), 1) for c in inner]
                n += len(inner)
        if cells:
            boxes = [b for b in row if b is not None]
            top, bottom = min(b[1] for b in boxes), max(b[3] for b in boxes)
            sizes.sort()
            out.append(_Line(" ".join(cells), sizes[len(sizes) // 2], n, top, bottom, len(cells) - 1))
    return out + _lines_of([c for c in chars if id(c) not in placed], opts)


def column_regions(
    chars: list[dict], width: float, opts: dict | None = None, tables: Callable[[], list] | None = None
) -> list[list[dict]]:
    """Split a page's upright characters into regions in reading order: a two-column page is read
    column by column, band by band.

    The gutter is the vertical strip in the middle of the page that the fewest words cross. A
    page is two-column when at least 5 lines on each side of it are prose (4+ words filling
    60% of their column, mostly lower-case words). Then, top to bottom: lines that cross the gutter
    (title, full-width figures and captions) are read whole; so is a table that spans both
    columns (a run of lines with no prose side holding at least two lines with numbers on both
    sides: its rows stay rows); every other run of lines is read left column first, then right.
    A table drawn with ruling lines across the gutter (``tables()``: its bounding boxes, asked for
    only when the page has columns; ``ruled_tables``) is read whole too, also when its cells hold
    words ("Anual 2 Media aritmética anual Cromatografía de gases"), which the rule above reads
    as prose. Any other page is one region. Returns lists of the input characters (page order
    kept within each).
    """
    return _column_regions(chars, width, opts, tables)[0]


def _column_regions(
    chars: list[dict], width: float, opts: dict | None = None, tables: Callable[[], list] | None = None
) -> tuple[list[list[dict]], list | None]:
    """``column_regions`` and the ``(word, chars)`` tuples of all ``chars`` if it built them (else
    ``None``); a one-region page returns ``chars`` itself as its region."""
    if len(chars) < 200:
        return [chars], None
    tuples = list(pdfplumber.utils.text.WordExtractor(**(opts or {})).iter_extract_tuples(chars))
    words = [{**w, "chars": wc} for w, wc in tuples]  # = pdfplumber.utils.extract_words(chars, return_chars=True)
    if len(words) < 60:
        return [chars], tuples
    x0 = np.array([w["x0"] for w in words])
    x1 = np.array([w["x1"] for w in words])
    xs = np.arange(0.3 * width, 0.7 * width, 1.0)
    cross = ((x0[None, :] < xs[:, None]) & (x1[None, :] > xs[:, None])).sum(axis=1)
    # physical lines: words whose vertical middles are within 2 pt
    order = sorted(range(len(words)), key=lambda k: (words[k]["top"] + words[k]["bottom"]) / 2)
    lines: list[list[int]] = []
    last = None
    for k in order:
        mid = (words[k]["top"] + words[k]["bottom"]) / 2
        if last is None or mid - last > 2.0:
            lines.append([])
        lines[-1].append(k)
        last = mid
    multi = multi_column_regions(chars, words, lines, tables)
    if multi is not None:
        return multi, None
    if cross.min() > 0.1 * len(lines):
        return [chars], tuples
    # the gutter: the widest strip crossed by (almost) the fewest words -- a figure's tick labels
    # may stand in it
    low = list(cross <= cross.min() + max(1.0, 0.03 * len(lines))) + [False]
    runs, start = [], None
    for i, v in enumerate(low):
        if v and start is None:
            start = i
        elif not v and start is not None:
            runs.append((start, i - 1))
            start = None
    a, b = max(runs, key=lambda r: r[1] - r[0])
    g0, g1 = float(xs[a]), float(xs[b]) + 1.0
    gutter = (g0 + g1) / 2
    min_gap = max(g1 - g0, 4.0) * 0.5
    left_edge, right_edge = float(x0.min()), float(x1.max())

    def prose(ws: list[dict], lo: float, hi: float) -> bool:
        if len(ws) < 4:
            return False
        lower = sum(1 for w in ws if w["text"][:1].islower() or CJK_CHAR.match(w["text"][:1]))
        return max(w["x1"] for w in ws) - min(w["x0"] for w in ws) >= 0.6 * (hi - lo) and lower >= 0.5 * len(ws)

    kinds = []  # per line: "span" | "prose" | "row" (numbers on both sides) | "other"
    sides = [0, 0]  # lines with prose on the left, on the right
    for line in lines:
        lw = [words[k] for k in line if words[k]["x1"] <= gutter]
        rw = [words[k] for k in line if words[k]["x0"] >= gutter]
        if len(lw) + len(rw) < len(line) or (
            lw and rw and min(w["x0"] for w in rw) - max(w["x1"] for w in lw) < min_gap
        ):
            kinds.append("span")
            continue
        lp, rp = prose(lw, left_edge, g0), prose(rw, g1, right_edge)
        sides[0] += lp
        sides[1] += rp
        if lp or rp:
            kinds.append("prose")
        elif lw and rw and all(sum(1 for w in side if _NUMBER_WORD.match(w["text"])) >= 1 for side in (lw, rw)):
            kinds.append("row")
        else:
            kinds.append("other")
    if min(sides) < 5:
        return [chars], tuples
    records = _record_tables(words, [(g0, g1)], tables()) if tables else []
    in_table = [_table_index(words, line, records) for line in lines] if records else None
    column = {k: int(words[k]["x0"] >= gutter) for line in lines for k in line}
    return _read_regions(chars, words, lines, kinds, column, 2, in_table), None


MIN_COLUMN_PROSE_LINES = 5  # prose lines each column of a page of three or more columns must hold


def _is_prose(ws: list[dict], lo: float, hi: float) -> bool:
    """A line's words in a column ``lo..hi`` read as prose: 4+ words filling 60% of the column,
    mostly lower-case (or CJK)."""
    if len(ws) < 4:
        return False
    lower = sum(1 for w in ws if w["text"][:1].islower() or CJK_CHAR.match(w["text"][:1]))
    return max(w["x1"] for w in ws) - min(w["x0"] for w in ws) >= 0.6 * (hi - lo) and lower >= 0.5 * len(ws)


def multi_column_regions(
    chars: list[dict], words: list[dict], lines: list[list[int]], tables: Callable[[], list] | None = None
) -> list[list[dict]] | None:
    """Regions in reading order of a page set in three or more columns (a Federal Register page,
    a newsletter), or None for any other page.

    Gutters are vertical strips at least 4 pt wide, inside the text's horizontal extent, that
    (almost) no word crosses: at most 1 + 10% of the page's lines, the lines that run across
    columns (a title, a running header). The page has three or more columns when at least two
    gutters cut the text into columns each at least 12% of its width and each holding
    ``MIN_COLUMN_PROSE_LINES`` lines of prose (``_is_prose``). Then, top to bottom: a line with a
    word across a gutter is read whole, as is a table set across the columns (a run of non-prose
    lines holding two or more lines with numbers in two or more columns: its rows stay rows);
    every other run of lines is read column by column, left to right; a table drawn with ruling
    lines across a gutter (``tables()``, ``ruled_tables``) is read whole. ``words``: the page's
    words with their ``chars``; ``lines``: word indices of each physical line, top to bottom.
    """
    if len(lines) < MIN_COLUMN_PROSE_LINES:
        return None
    x0 = np.array([w["x0"] for w in words])
    x1 = np.array([w["x1"] for w in words])
    left, right = float(np.percentile(x0, 1)), float(np.percentile(x1, 99))
    if right - left < 100:
        return None
    xs = np.arange(left + 0.05 * (right - left), right - 0.05 * (right - left), 1.0)
    cross = ((x0[None, :] < xs[:, None]) & (x1[None, :] > xs[:, None])).sum(axis=1)
    low = list(cross <= 1 + 0.1 * len(lines)) + [False]
    gutters, start = [], None
    for i, v in enumerate(low):
        if v and start is None:
            start = i
        elif not v and start is not None:
            if i - start >= 4:
                gutters.append((float(xs[start]), float(xs[i - 1]) + 1.0))
            start = None
    if len(gutters) < 2:
        return None
    bounds = [left] + [(a + b) / 2 for a, b in gutters] + [right]
    if min(b - a for a, b in zip(bounds, bounds[1:])) < 0.12 * (right - left):
        return None
    ncol = len(bounds) - 1

    def column(w: dict) -> int:
        mid = (w["x0"] + w["x1"]) / 2
        return min(max(int(np.searchsorted(bounds, mid)) - 1, 0), ncol - 1)

    def runs_across(line: list[int]) -> bool:
        """A word crosses a gutter, or words stand on both sides of one closer than half its width."""
        for g0, g1 in gutters:
            mid = (g0 + g1) / 2
            lw = [words[k]["x1"] for k in line if words[k]["x1"] <= mid]
            rw = [words[k]["x0"] for k in line if words[k]["x0"] >= mid]
            if len(lw) + len(rw) < len(line) or (lw and rw and min(rw) - max(lw) < 0.5 * (g1 - g0)):
                return True
        return False

    kinds, cols = [], []
    prose_lines = [0] * ncol
    for line in lines:
        where = [column(words[k]) for k in line]
        cols.append(where)
        if runs_across(line):
            kinds.append("span")
            continue
        parts = [[words[k] for k, c in zip(line, where) if c == j] for j in range(ncol)]
        prose = [_is_prose(ws, bounds[j], bounds[j + 1]) for j, ws in enumerate(parts)]
        for j, p in enumerate(prose):
            prose_lines[j] += p
        if any(prose):
            kinds.append("prose")
        elif sum(1 for ws in parts if any(_NUMBER_WORD.match(w["text"]) for w in ws)) >= 2:
            kinds.append("row")
        else:
            kinds.append("other")
    if min(prose_lines) < MIN_COLUMN_PROSE_LINES:
        return None
    records = _record_tables(words, gutters, tables()) if tables else []
    in_table = [_table_index(words, line, records) for line in lines] if records else None
    column = {k: c for line, where in zip(lines, cols) for k, c in zip(line, where)}
    return _read_regions(chars, words, lines, kinds, column, ncol, in_table)


def _read_regions(
    chars: list[dict],
    words: list[dict],
    lines: list[list[int]],
    kinds: list[str],
    column: dict[int, int],
    ncol: int,
    in_table: list[int | None] | None = None,
) -> list[list[dict]]:
    """The characters of a page set in ``ncol`` columns as regions in reading order, top to bottom:
    a line running across the columns (kind ``span``) and a table set across them (a maximal run
    of ``row`` / ``other`` lines holding two or more ``row`` lines: its rows stay rows) are read
    whole; every other run of lines column by column, left to right. ``lines``: word indices of
    each physical line; ``kinds``: each line's kind; ``column``: each word's column (0-based);
    ``in_table``: per line, the ruled table (an index) it lies in, or None: a table's lines are
    one region of their own, read whole."""
    full = [k == "span" or bool(in_table and in_table[t] is not None) for t, k in enumerate(kinds)]
    group = in_table or [None] * len(lines)
    i = 0
    while i < len(lines):
        if kinds[i] in ("row", "other"):
            j = i
            while j < len(lines) and kinds[j] in ("row", "other"):
                j += 1
            if sum(1 for k in kinds[i:j] if k == "row") >= 2:
                for t in range(i, j):
                    full[t] = True
            i = j
        else:
            i += 1
    word_region: dict[int, int] = {}
    region = 0
    i = 0
    while i < len(lines):
        j = i
        while j < len(lines) and full[j] == full[i] and group[j] == group[i]:
            j += 1
        for line in lines[i:j]:
            for k in line:
                word_region[k] = region + (0 if full[i] else column[k])
        region += 1 if full[i] else ncol
        i = j
    char_region: dict[int, int] = {}
    for k, w in enumerate(words):
        for c in w["chars"]:
            char_region[id(c)] = word_region[k]
    out: list[list[dict]] = [[] for _ in range(region)]
    for c in chars:
        r = char_region.get(id(c))
        if r is not None:
            out[r].append(c)
    return [r for r in out if r]


_HYPHEN_END = re.compile(r"(?<![^\W\d_])([^\W\d_]+)-$")
_WORD_START = re.compile(r"^([^\W\d_]+)([^\s]*)\s*")


# a glyph drawn without a Unicode value: a C0 control (U+0000 for a TeX font's "ffi" with no map),
# a noncharacter, or the replacement character a producer wrote for it
_UNMAPPED = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffd\ufffe\uffff]")
# a symbol, private-use or unassigned character set between letters (no space): a ligature glyph that
# a font maps to the wrong code ("e\u21b5orts" from a TeX font's "ff"); read as a ligature only when
# that makes a word, else kept as printed
_GLYPH_IN_WORD = re.compile(r"(?<=[^\W\d_])[^\w\s\x00-\x7f](?=[^\W\d_]|-)")
_SYMBOL_CATEGORIES = frozenset({"So", "Co", "Cn"})
# the ligatures a font draws as one glyph, longest first
LIGATURES = ("ffi", "ffl", "ff", "fi", "fl", "ft", "fj", "st", "tt", "ti")
# a word read with a ligature is kept when the document spells it elsewhere or its Zipf frequency
# in English is at least this (about once in 10 million words)
LIGATURE_MIN_ZIPF = 2.0
_LETTERS_BEFORE = re.compile(r"[^\W\d_]*$")
_LETTERS_AFTER = re.compile(r"[^\W\d_]*")


def read_unmapped(pages: list[list[_Line]]) -> tuple[list[list[_Line]], list[list[tuple[str, str]]]]:
    """Read glyphs that have no Unicode value (``_UNMAPPED``; pdfminer gives a TeX font's "ffi" as
    U+0000; a symbol set inside a word is one too, ``_GLYPH_IN_WORD``: a TeX font's "ff" as "↵"). One
    inside a word becomes the ligature of ``LIGATURES`` that makes a word the document spells
    elsewhere, else (two letters or more beside it) the most frequent English word (``wordfreq``)
    when it is frequent enough (``LIGATURE_MIN_ZIPF``): "di\\x00culties" -> "difficulties"; a symbol
    read as one ligature wherever that makes a word is that ligature also where the letters beside
    it cannot tell (a font draws a ligature with one glyph: "o↵-the-shelf" in a paper that prints
    "e↵orts"). Any other becomes U+FFFD,
    so no control character reaches the index or the database (PostgreSQL refuses U+0000); a
    symbol that makes no word stays as printed.

    Returns the pages' lines and, per page, ``(kind, word)`` for ``Page.unmapped``: ``ligature``
    with the word as read, ``unknown`` with the word as printed, U+FFFD in the glyph's place."""

    def glyphs(text: str) -> list[re.Match]:
        """The glyphs of ``text`` to read: every ``_UNMAPPED`` one, and a symbol inside a word."""
        found = list(_UNMAPPED.finditer(text))
        at = {m.start() for m in found}  # U+FFFD inside a word is both: read it once ("effffect")
        found += [
            m
            for m in _GLYPH_IN_WORD.finditer(text)
            if unicodedata.category(m.group(0)) in _SYMBOL_CATEGORIES and m.start() not in at
        ]
        return sorted(found, key=lambda m: m.start())

    words: set[str] = set()
    for ls in pages:
        for ln in ls:
            if not glyphs(ln.text):
                words.update(w.lower() for w in re.findall(r"[^\W\d_]+", ln.text))

    def reading(text: str, m: re.Match) -> tuple[str, str, str | None]:
        """``(head, tail, ligature)``: the letters beside the glyph and the ligature that makes a
        word of them (None: none does)."""
        head = _LETTERS_BEFORE.search(text, 0, m.start()).group(0)
        tail = _LETTERS_AFTER.match(text, m.end()).group(0)
        scored = [
            ((head + lig + tail).lower() in words, zipf_frequency((head + lig + tail).lower(), "en"), lig)
            for lig in (LIGATURES if head or tail else ())
        ]
        # beside one letter only ("o" of "off-the-shelf"), the document must spell the word
        known = [c for c in scored if c[0] or (c[1] >= LIGATURE_MIN_ZIPF and len(head) + len(tail) >= 2)]
        return head, tail, (max(known, key=lambda c: (c[0], c[1]))[2] if known else None)

    # a font draws a ligature with one glyph throughout: a symbol read as one ligature wherever it
    # makes a word ("e↵orts", "di↵erent": "ff") is that ligature where the word alone cannot tell
    # ("o↵-the-shelf")
    seen: dict[str, set[str]] = {}
    for ls in pages:
        for ln in ls:
            for m in glyphs(ln.text):
                if _UNMAPPED.fullmatch(m.group(0)) is None and (lig := reading(ln.text, m)[2]) is not None:
                    seen.setdefault(m.group(0), set()).add(lig)
    font_map = {g: next(iter(ligs)) for g, ligs in seen.items() if len(ligs) == 1}
    out: list[list[_Line]] = []
    notes: list[list[tuple[str, str]]] = []
    for ls in pages:
        page_notes: list[tuple[str, str]] = []
        fixed = []
        for ln in ls:
            text = ln.text
            found = glyphs(text)
            if not found:
                fixed.append(ln)
                continue
            parts: list[str] = []
            last = 0
            for m in found:
                head, tail, lig = reading(text, m)
                unmapped = _UNMAPPED.fullmatch(m.group(0)) is not None
                if lig is None and not unmapped:
                    lig = font_map.get(m.group(0)) if head or tail else None
                    if lig is None:
                        continue  # a symbol that makes no word with any ligature stays as printed
                read = lig if lig is not None else "\ufffd"
                parts += [text[last : m.start()], read]
                last = m.end()
                kind = "unknown" if read == "\ufffd" else "ligature"
                page_notes.append((kind, head + read + tail))
            parts.append(text[last:])
            fixed.append(dataclasses.replace(ln, text="".join(parts)))
        out.append(fixed)
        notes.append(page_notes)
    return out, notes


def dehyphenate(pages: list[list[_Line]]) -> list[list[_Line]]:
    """Rejoin words hyphenated at a line end: the fragment on the next line moves up.

    ``circumven-`` / ``tion`` becomes ``circumvention`` while ``dual-`` / ``encoder`` stays
    ``dual-encoder``. The hyphen is dropped when the document itself spells the joined word
    without it elsewhere, kept when it spells the hyphenated form elsewhere, and otherwise
    dropped when the joined word is at least as frequent in English as the hyphenated pair
    (``wordfreq`` Zipf frequencies; Speer et al., wordfreq 3, 2022) -- a fragment like
    "circumven" is no word, so its pair has frequency 0. Only a lower-case continuation is joined.
    """

    words: set[str] = set()
    for ls in pages:
        for ln in ls:
            words.update(w.lower() for w in re.findall(r"[^\W\d_]+(?:-[^\W\d_]+)*", ln.text))
    out = []
    for ls in pages:
        ls = [dataclasses.replace(ln) for ln in ls]
        for a, b in zip(ls, ls[1:]):
            m = _HYPHEN_END.search(a.text)
            n = _WORD_START.match(b.text)
            if not m or not n or not n.group(1)[0].islower() or len(b.text.split()) < 1:
                continue
            head, tail = m.group(1), n.group(1)
            joined, compound = (head + tail).lower(), f"{head}-{tail}".lower()
            if joined in words:
                keep = False
            elif compound in words:
                keep = True
            else:
                keep = zipf_frequency(joined, "en") < zipf_frequency(compound, "en")
            piece = n.group(1) + n.group(2)
            a.text = (a.text if keep else a.text[:-1]) + piece
            b.text = b.text[n.end() :]
        out.append([ln for ln in ls if ln.text.strip()])
    return out


_LEADERS = re.compile(r"(?:[ \t]?\.){4,}")


# the end of a line broken inside an identifier: a fragment with a digit, or of capitals, that ends in
# a hyphen ("FAA-2023-", "(202) 267-", "COVID-", "RIN 2120-"); and the start of the next line it
# continues with: a digit or capital first ("1234", "AL54", "19")
_ID_HEAD = re.compile(r"(?<!\S)[(\[]?(?=[\w()\-./]*\d|[A-Z]{2,})[A-Za-z0-9()./]+(?:-[A-Za-z0-9()./]+)*-$")
_ID_TAIL = re.compile(r"^(?:[0-9]|[A-Z][A-Z0-9]*\d|[A-Z]{2,}\b)[A-Za-z0-9]*(?:[-./][A-Za-z0-9]+)*[),.;:]?(?=\s|$)")
# an identifier that ends a line, and a line that starts with the rest of it after a hyphen ("FAA-2023" /
# "-1234 ...")
_ID_END = re.compile(r"(?<!\S)[A-Za-z0-9]+(?:-[A-Za-z0-9]+)+$")
_ID_REST = re.compile(r"^-[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*[),.;:]?(?=\s|$)")


def rejoin_identifiers(pages: list[list[_Line]]) -> list[list[_Line]]:
    """Rejoin identifiers broken at a line end (a docket number, a phone number, a date): a line
    ending in a fragment with a digit or of capitals and a hyphen ("FAA-2023-", "(202) 267-")
    takes the next line's first word when it starts with a digit or capitals ("1234") -- the
    hyphen stays, as it is the identifier's own; so does a line ending in a hyphenated identifier
    ("FAA-2023") whose next line starts with a hyphen and the rest ("-1234"). A word in capitals
    hyphenated at the line end ("LO-" / "CATION") loses the hyphen when the document spells the
    joined word or it is at least as frequent in English as the hyphenated pair (as
    ``dehyphenate`` decides). Page order is reading order, so this also rejoins an identifier
    broken at the foot of a column. Lower-case words broken by a hyphen are ``dehyphenate``'s."""
    words: set[str] | None = None
    out = []
    for ls in pages:
        ls = [dataclasses.replace(ln) for ln in ls]
        for a, b in zip(ls, ls[1:]):
            head, rest = a.text.rstrip(), b.text.lstrip()
            h = _ID_HEAD.search(head)
            m = (h and _ID_TAIL.match(rest)) or (_ID_END.search(head) and _ID_REST.match(rest))
            if not m:
                continue
            piece = m.group(0)
            left = re.search(r"([^\W\d_]+)-$", head)
            right = re.match(r"[^\W\d_]+", piece)
            if h and left and right and right.end() == len(piece.rstrip("),.;:")):
                # a word in capitals hyphenated at the line end ("LO-" / "CATION"): as dehyphenate decides
                if words is None:
                    words = {w.lower() for p in pages for ln in p for w in re.findall(r"[^\W\d_]+", ln.text)}
                joined = (left.group(1) + right.group(0)).lower()
                compound = f"{left.group(1)}-{right.group(0)}".lower()
                if joined in words or zipf_frequency(joined, "en") >= zipf_frequency(compound, "en"):
                    head = head[:-1]
            a.text = head + piece
            b.text = rest[m.end() :].lstrip()
        out.append([ln for ln in ls if ln.text.strip()])
    return out


_LEADERS = re.compile(r"(?:[ \t]?\.){4,}")


def collapse_leaders(text: str) -> str:
    """Dot leaders of a table of contents (``Notices . . . . . . vii``) become one ``…``: 60 dots
    were 60 word pieces of every TOC chunk, crowding out its titles and drawing dense matches."""
    return _LEADERS.sub(" …", text)


def _text_options(chars: list[dict]) -> dict:
    """pdfplumber text options for a page's characters: a font-relative word gap, except on CJK pages."""
    cjk = sum(1 for c in chars[:2000] if CJK_CHAR.match(c.get("text", "")))
    if chars and cjk >= 0.2 * min(len(chars), 2000):
        return {}
    return {"x_tolerance_ratio": 0.15}


_PAGE_FURNITURE = re.compile(r"(?i)^(?:page\s+)?\d+(?:\s*(?:of|/)\s*\d+)?$|^[-–—]\s*\d+\s*[-–—]$")
_DATE_ONLY = re.compile(
    rf"(?i)^(?:{MONTH_PREFIX}\s+(?:\d{{1,2}},?\s+)?(?:19|20)\d\d|\d{{1,2}}\s+{MONTH_PREFIX}\s+(?:19|20)\d\d)$"
)
_NAME_PARTICLES = frozenset("de da di du del der den van von la le bin al dos das ter ten".split())
_AUTHOR_SEPARATORS = re.compile(r",|;|&|·|•|\||\s{2,}|\band\b")
# footnote marks and affiliation numbers after a name: glued ("Ogunlayi1"), or set apart, one or
# two digits before a separator ("Enye 3, Adegoke O. Aremu 1"; not the year of "Updated April 2024")
_AUTHOR_MARKS = re.compile(r"[*∗†‡§¶#✉]|(?<=[^\W\d_])\d+|(?<=[^\W\d_])\s\d{1,2}(?=\s*(?:[,;&*∗†‡§¶]|and\b|$))|\(\d+\)")


def _name_like(piece: str) -> bool:
    """A person's name as bylines print it: 2-4 words, each capitalised ("McKie", "O'Brien",
    "Jean-Luc") or an initial ("J.", "J.R."), particles ("de", "van") inside only."""
    words = piece.split()
    if not 2 <= len(words) <= 4 or words[0].lower() in _NAME_PARTICLES or words[-1].lower() in _NAME_PARTICLES:
        return False
    for w in words:
        if w.lower() in _NAME_PARTICLES:
            continue
        if re.fullmatch(r"(?:[^\W\d_]\.-?)+", w) and w[0].isupper():
            continue  # an initial
        core = w.replace("-", "").replace("'", "").replace("’", "")
        if not (core.isalpha() and w[0].isupper() and any(ch.islower() for ch in core)):
            return False
    return not re.fullmatch(r"(?:[^\W\d_]\.-?)+", words[-1])


def author_names(line: str) -> int:
    """How many people a line names when it reads as a byline: every piece between separators
    (commas, "and", "&", middle dots, wide gaps) is ``_name_like`` once footnote marks and
    affiliation digits are dropped ("Vladimir Karpukhin∗, Barlas Oğuz∗ and Sewon Min†" -> 3);
    0 when any piece is not a name."""
    pieces = [p.strip() for p in _AUTHOR_SEPARATORS.split(_AUTHOR_MARKS.sub(" ", line)) if p.strip()]
    if not pieces or not all(_name_like(p) for p in pieces):
        return 0
    return len(pieces)


BYLINE_PAGES = 3  # bylines are looked for on a document's first pages (its title pages)


def _drop_bylines(lines: list[str], sizes: list[float], cand: list[bool]) -> None:
    """Unmark the heading candidates of a title page that are bylines (``_find_headings``): set
    below the page's largest candidate (its title), naming two or more people, or naming one among
    other such lines of its size with no prose between them. ``sizes``: each line's font size pt."""
    top = max((sizes[k] for k in range(len(lines)) if cand[k]), default=0.0)
    small = [cand[k] and sizes[k] < top for k in range(len(lines))]
    for k, ln in enumerate(lines):
        if small[k] and author_names(ln) >= 2:
            cand[k] = False
    named = [k for k, ln in enumerate(lines) if small[k] and author_names(ln) == 1]
    prose = [len(ln.split()) >= 6 or bool(re.search(r"[.!?]$", ln.strip())) for ln in lines]
    byline: set[int] = set()
    for a, b in zip(named, named[1:]):
        same = abs(sizes[a] - sizes[b]) < 0.3
        if same and not any(prose[a + 1 : b]) and not any(cand[a + 1 : b]):
            byline.update((a, b))
    for k in byline:
        cand[k] = False


def _find_headings(texts: list[str], lines: list[list[tuple[str, float, int, int]]]) -> list[list[tuple]]:
    """Section titles of each page: ``(offset in text, level, title, font size pt)``.

    A heading is a short line with letters (2-100 characters, at most 12 words, not ending in
    ".", ",", ";", ":") set >= 1.5 pt above the body size (the size most characters are set in),
    that is none of these:

    - a row of a table's cells: words set apart by gaps wider than ``CELL_GAP_EMS`` font sizes
      (column heads: "Zone    Nodes    Users", ``cell_gaps``), or numbers only ("$11.7B 34.2%
      38.4%"); a table's title over it ("Consolidated Balance Sheets") is a heading;
    - a page number ("Page 1 of 4") or a date alone;
    - a byline, on the first ``BYLINE_PAGES`` pages, set smaller than the page's title (its
      largest heading): a line naming two or more people (``author_names``), or a name-like line
      among other such lines of its size with no prose between them (``_drop_bylines``).

    ``lines``: per page, ``(line text, median font size pt, characters, cell gaps)`` in page order.
    Consecutive heading lines of one size are merged (a two-line title is one heading).
    Levels rank the distinct heading sizes, largest = 1 (at most 4 levels).
    """

    weight: Counter = Counter()
    for page_lines in lines:
        for _, size, n, _ in page_lines:
            weight[size] += n
    if not weight:
        return [[] for _ in texts]
    body = weight.most_common(1)[0][0]
    found: list[list[list]] = []
    for text, page_lines in zip(texts, lines):
        cand = [_heading_line(ln, size, gaps, body) for ln, size, _, gaps in page_lines]
        if len(found) < BYLINE_PAGES:
            _drop_bylines([ln for ln, *_ in page_lines], [size for _, size, *_ in page_lines], cand)
        page_h: list[list] = []
        pos = 0
        prev_heading = False
        for k, (ln, size, _, _) in enumerate(page_lines):
            off = text.find(ln, pos)
            if off < 0:
                prev_heading = False
                continue
            pos = off + len(ln)
            is_h = cand[k]
            if is_h and prev_heading and page_h and page_h[-1][3] == size and len(page_h[-1][2]) + len(ln) <= 150:
                page_h[-1][2] = f"{page_h[-1][2]} {ln.strip()}"
            elif is_h:
                page_h.append([off, 0, ln.strip(), size])
            prev_heading = is_h
        found.append(page_h)
    sizes = sorted({h[3] for ph in found for h in ph}, reverse=True)
    level = {s: min(i + 1, 4) for i, s in enumerate(sizes)}
    return [[(h[0], level[h[3]], h[2], h[3]) for h in ph] for ph in found]


def _heading_line(line: str, size: float, gaps: int, body: float) -> bool:
    """A line set in ``size`` pt with ``gaps`` wide gaps (``cell_gaps``) is a heading by itself
    (``_find_headings``; bylines are dropped after)."""
    ln = line.strip()
    if not (
        size >= body + 1.5
        and 2 <= len(ln) <= 100
        and len(ln.split()) <= 12
        and sum(ch.isalpha() for ch in ln) >= 2
        and not ln.endswith((".", ",", ";", ":"))
    ):
        return False
    return not (gaps or _PAGE_FURNITURE.match(ln) or _DATE_ONLY.match(ln) or _cells_only(ln))


def _cells_only(line: str) -> bool:
    """Two or more numbers and at most one word: a row of table cells ("$12.9B 35.8% 39.8%")."""
    tokens = [t for t in line.split() if t not in ("$", "€", "£", "%", "-", "–", "—")]
    numbers = sum(1 for t in tokens if re.fullmatch(r"[-+$€£(]*\d[\d.,]*[%)BMK]*", t))
    return numbers >= 2 and len(tokens) - numbers <= 1

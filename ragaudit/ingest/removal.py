"""What page extraction leaves out of the text, why, and the extraction report that counts it.

Two kinds of text never reach a chunk:

- **Running headers and footers** (``running_lines``). A line is one only when all of these hold:
  it sits in the page's top or bottom margin band (the top or bottom 15% of the crop box, or, for
  pages that end where their text ends, as filings printed from HTML do, the page's last line when
  it stands in the lower half at least one font size (a blank line) below the text above it); the
  same line is in that band on at least a third of the pages (and two), and on those pages most
  of its occurrences as a line are there (a speaker's label in minutes sits in the top band of a
  page and in its body again: content); its text is the same on every page, or differs only by a page number
  (one number, at the start or end of the line, after "page", before the page count that ends
  the line as in "3 of 13", "3/13" or "3 (13)", or anywhere in a line set in parts apart, as a
  footer with the page number centred between a title and a code; not a label's number such as
  "Exhibit 3"; that advances at least as fast as the pages do, on most of the pages where the
  line is in the band); and the page has other text (a page whose every line looks running keeps
  them all: a one-line page is content). A header stays where it first appears (often the
  document's title on page 1); footers go everywhere (a page-1 footer would split a sentence that
  runs onto page 2). Everything else is content, however often it repeats.
- **Hidden text** (``hidden_chars``): characters a reader of the page cannot see. Decision: they
  are kept out of the page text, so out of chunks, quotes and answers, and every one is counted
  and shown in the document's extraction report. A document's visible text is what its reader
  agreed to; text hidden in it is the classic carrier of instructions aimed at a model ("white
  text" prompt injection) and of keyword stuffing, and keeping it searchable while flagging it
  would still let it be retrieved, quoted and cited. The report makes the removal visible, so
  nothing is dropped silently. A character is hidden when:

  - its fill colour equals the background's (every RGB channel within 0.05): the colour of every
    filled shape (rectangle or curve) under it, else the white page; where shapes of another
    colour or an image lie under it, the background cannot be told and the character is kept;
  - its font size is under 1 pt;
  - it lies wholly outside the page's crop box (the part of the page a viewer shows);
  - it is drawn in text rendering mode 3 (invisible) or 7 (clip only), read from PDFium's text
    objects, unless an image lies under it: that is the OCR text layer of a scanned page and
    stays (counted as ``ocr_layer_chars``).

  Pages taken from pypdfium2 (``Page.extractor``) are not checked; the report lists them.

``extraction_report(pages)`` is the JSON stored with each document version (``documents.
extraction_report``), shown by the API (``GET /documents/{id}``), the admin document view and
the Dagster materialization metadata of ``pdf_pages``.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import Any, Sequence

import numpy as np
import pypdfium2.raw as pdfium_c

# the margin bands: this share of the crop box's height at its top and at its bottom
MARGIN_BAND = 0.15
# a page's last line below its middle, at least this many of its font sizes below the text above (a blank line),
# is in the bottom band (page footers of documents whose pages end where their text ends)
FLOW_FOOTER_GAP = 1.0
HEADER, FOOTER = "header", "footer"

# hidden text
HIDDEN_REASONS = ("background_colour", "font_size_under_1pt", "outside_crop_box", "invisible_render_mode")
COLOUR_TOLERANCE = 0.05
MIN_FONT_SIZE = 1.0
EXAMPLES = 10


# --------------------------------------------------------------------------- running lines


def _key(text: str) -> str:
    """A line compared across pages: spaces removed (extraction spaces the same line differently
    from page to page, "F orm 1040NR"), lower-cased."""
    return re.sub(r"\s+", "", text).lower()


_DIGITS = re.compile(r"\d{1,6}")
_ROMAN = re.compile(r"^(?=[ivxlcdm]+$)m{0,3}(cm|cd|d?c{0,3})(xc|xl|l?x{0,3})(ix|iv|v?i{0,3})$")
_ROMAN_VALUE = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100, "d": 500, "m": 1000}


def _roman(s: str) -> int:
    total = 0
    for a, b in zip(s, s[1:] + " "):
        v = _ROMAN_VALUE[a]
        total += -v if b != " " and _ROMAN_VALUE[b] > v else v
    return total


_AFTER_PAGE = re.compile(r"page#(?:$|\W|of\d)")
# "N of M" ending the line: the page number N followed by the page count M ("3 of 13", "3/13",
# "3 (13)", and the words for "of" of the languages read here: "3 von 13", "3 de 13", "3 sur 13",
# "3 van 13", "3 av 13"); keys have no spaces ("3(13)")
_OF_TOTAL = re.compile(r"(?:of|von|de|sur|van|av|/|\()\d{1,6}\)?\W*$")
# a number right after one of these words labels a thing ("Exhibit 3", "Table 2", "Month 4"), not a page
_LABEL = re.compile(
    r"(?:exhibit|table|figure|fig\.?|chapter|section|sec\.?|appendix|annex|schedule|note|item|part|article|"
    r"step|example|question|claim|volume|vol\.?|no\.?|number|day|week|month|quarter|year|meter|unit)$"
)


def _page_number_variants(key: str, anywhere: bool = False) -> list[tuple[str, int]]:
    """``(key with one number as "#", its value)`` for each number of ``key`` that sits where a
    running line prints its page number: at the start or the end of the line (punctuation aside)
    or as "page N" ending the line or followed by punctuation or "of M" ("page#of4nyc08ca055",
    "#rowandcolumn...", "appleinc.|q32022form10-q|#"), or followed only by the page count ending
    the line ("brfdoktorlindh#(13)", "www.modbus.org#/50": ``_OF_TOTAL``), and not right after a
    word that makes it a label ("Exhibit 3", "Table 2", "Month 4": ``_LABEL``); a line that is
    only a roman numeral ("vii") counts too. ``anywhere``: the line is set in parts apart (wide
    gaps between its words, as a footer with a title on the left, the page number in the middle
    and a code on the right: "STATISTICS SOUTH AFRICA 3 P0141"), so a number anywhere in it can
    be its page number; a line of running words ("Prinzip 3 für digitaltaugliche Gesetzgebung")
    is not."""
    if _ROMAN.match(key):
        return [("#", _roman(key))]
    out = []
    for m in _DIGITS.finditer(key):
        before, after = key[: m.start()], key[m.end() :]
        if (before and before[-1].isdigit()) or (after and after[0].isdigit()) or _LABEL.search(before):
            continue
        masked = f"{before}#{after}"
        at_start, at_end = not re.search(r"\w", before), not re.search(r"\w", after)
        if (
            anywhere
            or at_start
            or at_end
            or _AFTER_PAGE.match(masked, max(0, len(before) - 4))
            or _OF_TOTAL.match(after)
        ):
            out.append((masked, int(m.group(0))))
    return out


def _bands(lines: Sequence[Any], box: tuple[float, float]) -> list[str | None]:
    """Per line: ``"top"`` / ``"bottom"`` when it sits in the page's top or bottom margin band,
    else None. ``box``: the crop box's ``(top, bottom)`` in pdfplumber coordinates; lines with
    ``top < 0`` (text in another orientation) have no place on the page."""
    top, bottom = box
    h = max(bottom - top, 1.0)
    out: list[str | None] = []
    for ln in lines:
        if ln.top < 0:
            out.append(None)
        elif ln.top <= top + MARGIN_BAND * h:
            out.append("top")
        elif ln.bottom >= bottom - MARGIN_BAND * h:
            out.append("bottom")
        else:
            out.append(None)
    placed = sorted((k for k in range(len(lines)) if lines[k].top >= 0), key=lambda k: lines[k].top)
    if len(placed) >= 2:
        last = placed[-1]
        ln = lines[last]
        gap = ln.top - max(lines[k].bottom for k in placed[:-1])
        if out[last] is None and ln.top >= top + h / 2 and gap >= FLOW_FOOTER_GAP * max(ln.size, 1.0):
            out[last] = "bottom"
    return out


def running_lines(pages: Sequence[Sequence[Any]], boxes: Sequence[tuple[float, float]]) -> list[dict[int, str]]:
    """The running headers and footers of a document (the rule is the module docstring's).

    ``pages``: per page, its lines in reading order, each with ``text``, ``top``, ``bottom``
    (pt from the page top, pdfplumber coordinates) and ``size`` (font size pt); ``boxes``: per
    page, the crop box's ``(top, bottom)``. Returns per page ``{line index: "header" | "footer"}``
    of the lines to remove."""
    n = len(pages)
    out: list[dict[int, str]] = [{} for _ in range(n)]
    if n < 2:
        return out
    need = max(2, -(-n // 3))
    bands = [_bands(ls, box) for ls, box in zip(pages, boxes)]
    keys = [[_key(ln.text) for ln in ls] for ls in pages]
    # how often each text occurs as a line on each page (the "most" denominator of a text that
    # repeats as is: a speaker's label in minutes sits in the top band of a page and in its body
    # again; a running header is on its page once)
    on_page: Counter[tuple[int, str]] = Counter()
    exact: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)  # (side, key) -> [(page, line)]
    numbered: dict[tuple[str, str], list[tuple[int, int, int]]] = defaultdict(list)  # -> [(page, value, line)]
    for i in range(n):
        for k, key in enumerate(keys[i]):
            on_page[(i, key)] += 1
            side = bands[i][k]
            if not side:
                continue
            exact[(side, key)].append((i, k))
            # the page-number readings of a line in a band only (a table row has many numbers)
            for masked, value in _page_number_variants(key, anywhere=getattr(pages[i][k], "gaps", 0) > 0):
                numbered[(side, masked)].append((i, value, k))
    marks: dict[tuple[int, int], tuple[str, bool]] = {}  # (page, line) -> (side, exact text)
    for (side, key), occ in exact.items():
        pages_in = {i for i, _ in occ}
        if len(pages_in) >= need and 2 * len(occ) > sum(on_page[(i, key)] for i in pages_in):
            for i, k in occ:
                marks[(i, k)] = (side, True)
    for (side, _masked), occ in numbered.items():
        occ.sort()
        ok = _advancing(occ)
        # a bare page number also matches numbers alone on a line of a table: "most pages" counts
        # the pages where the line is in this band at all, of which most must number their page
        pages_in = {i for (i, _, _), good in zip(occ, ok) if good}
        if len(pages_in) >= need and 2 * len(pages_in) > len({i for i, _, _ in occ}):
            for (i, _, k), good in zip(occ, ok):
                if good:
                    marks.setdefault((i, k), (side, False))
    first_header: dict[str, int] = {}
    for i in range(n):
        placed = [k for k in range(len(pages[i])) if (i, k) in marks]
        if len(placed) == len(pages[i]):  # nothing else on the page: its lines are its content
            continue
        for k in placed:
            side, same_text = marks[(i, k)]
            if side == "top" and same_text and first_header.setdefault(keys[i][k], i) == i:
                continue  # a header stays where it first appears (the document's title)
            out[i][k] = HEADER if side == "top" else FOOTER
    return out


def _advancing(occ: list[tuple[int, int, int]]) -> list[bool]:
    """For occurrences ``(page, number, line)`` sorted by page: whether each one's number reads as
    a page number, i.e. it belongs to a run of at least two in which each number exceeds the
    previous one by at least the pages between them (a document of excerpts skips pages; a new
    part may start its numbering again). One occurrence per page (the first) takes part."""
    seen: set[int] = set()
    idx = []
    for j, (p, _, _) in enumerate(occ):
        if p not in seen:
            seen.add(p)
            idx.append(j)
    ok = [False] * len(occ)
    run = [idx[0]] if idx else []
    for a, b in zip(idx, idx[1:]):
        (pa, va, _), (pb, vb, _) = occ[a], occ[b]
        if vb - va >= pb - pa:
            run.append(b)
            continue
        if len(run) >= 2:
            for j in run:
                ok[j] = True
        run = [b]
    if len(run) >= 2:
        for j in run:
            ok[j] = True
    return ok


# --------------------------------------------------------------------------- hidden text


def _rgb(colour: Any, space: str | None = None) -> tuple[float, float, float] | None:
    """An RGB triple (0..1) for a pdfplumber colour tuple, or None when it cannot be told (a
    pattern, a spot colour, an indexed or unknown colour space)."""
    if space and not any(
        s in space for s in ("DeviceGray", "DeviceRGB", "DeviceCMYK", "ICCBased", "CalGray", "CalRGB")
    ):
        return None
    if not isinstance(colour, (tuple, list)) or not all(isinstance(v, (int, float)) for v in colour):
        return None
    v = [min(1.0, max(0.0, float(x))) for x in colour]
    if len(v) == 1:
        return (v[0], v[0], v[0])
    if len(v) == 3:
        return (v[0], v[1], v[2])
    if len(v) == 4:
        c, m, y, k = v
        return ((1 - c) * (1 - k), (1 - m) * (1 - k), (1 - y) * (1 - k))
    return None


def _same_colour(a: tuple[float, float, float], b: tuple[float, float, float]) -> bool:
    return max(abs(p - q) for p, q in zip(a, b)) <= COLOUR_TOLERANCE


def page_transform(page: Any):
    """``f(x, y) -> (x, top)``: a point in the PDF user space of pdfplumber ``page`` placed as
    pdfplumber places characters (pdfminer's page matrix for the page's rotation and media box,
    then pdfplumber's top-left origin)."""
    po = page.page_obj
    x0, y0, x1, y1 = po.mediabox
    a, b, c, d, e, f = {
        90: (0, -1, 1, 0, -y0, x1),
        180: (-1, 0, 0, -1, x1, y1),
        270: (0, 1, -1, 0, y1, -x0),
    }.get(po.rotate, (1, 0, 0, 1, -x0, -y0))
    mb_x0, mb_top, height = float(page.mediabox[0]), float(page.mediabox[1]), float(page.height)

    def place(x: float, y: float) -> tuple[float, float]:
        dx, dy = a * x + c * y + e, b * x + d * y + f
        return dx + mb_x0, height - dy + mb_top

    return place


def placed_box(place, box: Sequence[float]) -> tuple[float, float, float, float]:
    """``(x0, top, x1, bottom)`` of a PDF user-space box ``(left, bottom, right, top)``."""
    pts = [place(box[0], box[1]), place(box[2], box[3]), place(box[0], box[3]), place(box[2], box[1])]
    xs, ts = [p[0] for p in pts], [p[1] for p in pts]
    return min(xs), min(ts), max(xs), max(ts)


def invisible_text_boxes(page: Any, pdfium_page: Any) -> list[tuple[tuple[float, float, float, float], int]]:
    """``((x0, top, x1, bottom), mode)`` of the text objects of a page drawn invisibly (text
    rendering mode 3, or 7: clip only) or stroke-only (1, 5; their visible colour is the stroke),
    in pdfplumber coordinates of ``page``. Read with PDFium (pdfminer does not expose the mode),
    form XObjects included. ``pdfium_page``: the same page in pypdfium2 (closed here)."""

    place = page_transform(page)
    out = []
    try:
        for obj in pdfium_page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_TEXT], max_depth=8):
            mode = pdfium_c.FPDFTextObj_GetTextRenderMode(obj.raw)
            if mode in (1, 3, 5, 7):
                out.append((placed_box(place, obj.get_bounds()), int(mode)))
    finally:
        pdfium_page.close()
    return out


def hidden_chars(page: Any, chars: list[dict], pdfium_page: Any) -> tuple[list[dict], dict[str, list[dict]], int]:
    """Split the characters of pdfplumber ``page`` into the visible ones (in their order) and the
    hidden ones by reason (``HIDDEN_REASONS``, the rules of the module docstring); also returns the
    number of invisible characters kept because an image lies under them (an OCR text layer).
    ``pdfium_page``: a callable giving the page in pypdfium2 (for text rendering modes)."""
    if not chars:
        return chars, {}, 0
    n = len(chars)
    cx = np.fromiter(((c["x0"] + c["x1"]) / 2 for c in chars), dtype=np.float64, count=n)
    cy = np.fromiter(((c["top"] + c["bottom"]) / 2 for c in chars), dtype=np.float64, count=n)
    x0 = np.fromiter((c["x0"] for c in chars), dtype=np.float64, count=n)
    x1 = np.fromiter((c["x1"] for c in chars), dtype=np.float64, count=n)
    t0 = np.fromiter((c["top"] for c in chars), dtype=np.float64, count=n)
    t1 = np.fromiter((c["bottom"] for c in chars), dtype=np.float64, count=n)
    size = np.fromiter((float(c.get("size", 10.0)) for c in chars), dtype=np.float64, count=n)

    def inside(boxes: list[Sequence[float]]) -> np.ndarray:
        """(chars, boxes) bool: the char's centre lies in the box."""
        if not boxes:
            return np.zeros((n, 0), dtype=bool)
        b = np.asarray(boxes, dtype=np.float64)
        return (
            (cx[:, None] >= b[None, :, 0])
            & (cx[:, None] <= b[None, :, 2])
            & (cy[:, None] >= b[None, :, 1])
            & (cy[:, None] <= b[None, :, 3])
        )

    over_image = inside([(im["x0"], im["top"], im["x1"], im["bottom"]) for im in page.images]).any(axis=1)
    # the crop box, placed as the characters are
    crop = placed_box(page_transform(page), page.page_obj.cropbox)
    outside = (x1 <= crop[0]) | (x0 >= crop[2]) | (t1 <= crop[1]) | (t0 >= crop[3])
    modes = np.zeros(n, dtype=np.int64)
    boxes = invisible_text_boxes(page, pdfium_page())
    if boxes:
        hit = inside([b for b, _ in boxes])
        for j, (_, mode) in enumerate(boxes):
            modes[hit[:, j]] = mode
    invisible = np.isin(modes, (3, 7))
    ocr = sum(1 for i in np.flatnonzero(invisible & over_image) if not chars[i].get("text", " ").isspace())
    tiny = size < MIN_FONT_SIZE
    outside &= ~tiny
    unseen = invisible & ~over_image & ~tiny & ~outside
    # colour: the ink (fill, or stroke for stroke-only text) of the characters judged by it, in RGB
    # (NaN: cannot be told), converted once per distinct colour
    judged = ~(tiny | outside | invisible | over_image)
    cache: dict[tuple, tuple[float, float, float] | None] = {}
    ink = np.full((n, 3), np.nan)
    for i in np.flatnonzero(judged):
        c = chars[i]
        stroke = modes[i] in (1, 5)
        colour = c.get("stroking_color") if stroke else c.get("non_stroking_color")
        key = (stroke, colour if isinstance(colour, tuple) else repr(colour), c.get("ncs"))
        if key not in cache:
            cache[key] = _rgb(colour, None if stroke else c.get("ncs"))
        if cache[key] is not None:
            ink[i] = cache[key]
    # backgrounds: the filled shapes under each character (pdfplumber does not give the drawing
    # order across rectangles and curves, so all of them), else the white page
    shapes = [s for s in (*page.rects, *page.curves) if s.get("fill")]
    under = inside([(s["x0"], s["top"], s["x1"], s["bottom"]) for s in shapes])
    bare = ~under.any(axis=1)
    with np.errstate(invalid="ignore"):
        same_as_page = np.all(np.abs(ink - 1.0) <= COLOUR_TOLERANCE, axis=1)
    background = judged & bare & same_as_page
    shape_rgb = [_rgb(s.get("non_stroking_color")) for s in shapes]
    for i in np.flatnonzero(judged & ~bare & ~np.isnan(ink[:, 0])):
        below = [shape_rgb[j] for j in np.flatnonzero(under[i])]
        background[i] = all(bg is not None and _same_colour(tuple(ink[i]), bg) for bg in below)
    found = {
        "font_size_under_1pt": tiny,
        "outside_crop_box": outside,
        "invisible_render_mode": unseen,
        "background_colour": background,
    }
    if not any(m.any() for m in found.values()):
        return chars, {}, ocr
    hidden = {why: [chars[i] for i in np.flatnonzero(m)] for why, m in found.items() if m.any()}
    gone = tiny | outside | unseen | background
    return [c for c, g in zip(chars, gone.tolist()) if not g], hidden, ocr


# --------------------------------------------------------------------------- the report


def _common_numbers(shown: str, text: str) -> str:
    """``shown`` with each number that differs in ``text`` (the same line with other numbers) as
    "#": "Page 3 of 13" and "Page 4 of 13" give "Page # of 13"."""
    a, b = re.split(r"(\d+|#)", shown), re.split(r"(\d+|#)", text)
    if len(a) != len(b):
        return shown
    return "".join(x if x == y or i % 2 == 0 else "#" for i, (x, y) in enumerate(zip(a, b)))


def extraction_report(pages: Sequence[Any]) -> dict[str, Any]:
    """The extraction report of a document from its pages (``Page`` objects or their dicts):
    what was left out of its text and why, and what was read in place of glyphs without a Unicode
    value (``Page.unmapped``), with examples.

    Shape::

        {"pages": int, "blank_pages": [int],
         "running_lines": {"removed": int, "headers": int, "footers": int, "pages": int,
                           "examples": [{"text", "where": "header"|"footer", "count", "pages": [int]}]},
         "hidden_text": {"chars": int, "lines": int, "by_reason": {reason: chars},
                         "examples": [{"text", "reason", "page"}], "ocr_layer_chars": int,
                         "unchecked_pages": [int]},
         "unmapped_glyphs": {"ligatures": int, "unknown": int,
                             "examples": [{"text", "kind": "ligature"|"unknown", "page"}]}}

    ``examples`` hold at most ``EXAMPLES`` entries (running lines: the most frequent texts first,
    each with up to 10 of its pages; lines that differ only in their numbers, as "Page 3 of 13"
    and "Page 4 of 13", are one example, its text with each number that varies shown as "#":
    "Page # of 13", or "#" for a bare page number); ``unchecked_pages`` (at most 50) are pages taken from
    pypdfium2, whose characters were not checked for hidden text; ``blank_pages`` are the pages
    without text (every one: the ``pages_have_chunks`` check reads the pages with text from it)."""

    def get(p: Any, name: str, default: Any) -> Any:
        return p.get(name, default) if isinstance(p, dict) else getattr(p, name, default)

    kinds: Counter = Counter()
    texts: dict[tuple[str, str], list[int]] = defaultdict(list)
    shown: dict[tuple[str, str], str] = {}
    hidden_chars_by: Counter = Counter()
    hidden_examples: list[dict[str, Any]] = []
    hidden_lines = 0
    pages_with_running: set[int] = set()
    ocr = 0
    unchecked = []
    unmapped: Counter = Counter()
    unmapped_examples: list[dict[str, Any]] = []
    for p in pages:
        number = int(get(p, "number", 0))
        ocr += int(get(p, "ocr_layer_chars", 0) or 0)
        if get(p, "extractor", "pdfplumber") != "pdfplumber":
            unchecked.append(number)
        for kind, word in get(p, "unmapped", ()) or ():
            unmapped[kind] += 1
            if len(unmapped_examples) < EXAMPLES:
                unmapped_examples.append({"text": word[:100], "kind": kind, "page": number})
        for kind, text in get(p, "removed", ()) or ():
            if kind in (HEADER, FOOTER):
                kinds[kind] += 1
                # lines that differ only in their numbers ("Page 3 of 13") are one example
                key = (kind, re.sub(r"\d+", "0", text))
                shown[key] = _common_numbers(shown[key], text) if key in shown else text
                texts[key].append(number)
                pages_with_running.add(number)
            elif kind.startswith("hidden:"):
                why = kind.split(":", 1)[1]
                hidden_chars_by[why] += sum(1 for ch in text if not ch.isspace())
                hidden_lines += 1
                if len(hidden_examples) < EXAMPLES:
                    hidden_examples.append({"text": text[:300], "reason": why, "page": number})
    examples = sorted(texts.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))[:EXAMPLES]
    return {
        "pages": len(pages),
        "blank_pages": [int(get(p, "number", 0)) for p in pages if not str(get(p, "text", "") or "").strip()],
        "running_lines": {
            "removed": sum(kinds.values()),
            "headers": kinds[HEADER],
            "footers": kinds[FOOTER],
            "pages": len(pages_with_running),
            "examples": [
                {"text": shown[key][:300], "where": key[0], "count": len(ps), "pages": ps[:10]} for key, ps in examples
            ],
        },
        "hidden_text": {
            "chars": sum(hidden_chars_by.values()),
            "lines": hidden_lines,
            "by_reason": {r: hidden_chars_by[r] for r in HIDDEN_REASONS if hidden_chars_by[r]},
            "examples": hidden_examples,
            "ocr_layer_chars": ocr,
            "unchecked_pages": unchecked[:50],
        },
        "unmapped_glyphs": {
            "ligatures": unmapped["ligature"],
            "unknown": unmapped["unknown"],
            "examples": unmapped_examples,
        },
    }

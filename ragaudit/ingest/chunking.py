"""Chunking strategies: ``fixed``, ``sentence`` (default), ``heading`` and ``semantic``.

Budgets are counted in the embedding model's own word pieces, and every chunk, context header
included, stays under the model's ``max_seq_length``: nothing is silently truncated when it
is embedded. Offsets are character offsets into the document text (the page texts joined
with ``PAGE_SEPARATOR``); every chunk keeps its 1-based page span, the page boundaries inside
it (so a quote maps back to its exact page), and the heading path of its section.

- ``fixed``: a sliding window of word pieces with overlap (the naive baseline).
- ``sentence``: whole sentences (pysbd, rule-based sentence boundary disambiguation,
  Sadvilkar & Neumann 2020, over paragraphs rebuilt from PDF lines) packed up to the budget,
  with whole-sentence overlap. Table rows are units of their own; chunks holding rows of a
  table repeat its caption and header rows in their context header. With ``atomic_units`` (on
  by default; off packs sentences and rows only, see ``Settings.chunk_atomic_units``)
  a SQL statement and a list item are one unit while they fit in a chunk (a longer
  statement is cut between clauses only, a longer item at sentence ends only), and a document's
  last chunk is its last full window, up to the model's limit.
- ``heading``: like ``sentence`` but a new chunk starts at every heading (headings come from
  font sizes, see ``ragaudit.ingest.pdf``); long sections are packed as in ``sentence``.
- ``semantic``: sentences are embedded and a chunk ends where the cosine similarity of
  neighbouring sentences falls below the document's 20th percentile (the percentile
  breakpoint method popularised by G. Kamradt, "5 Levels of Text Splitting", 2023), or at the
  budget.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass

import numpy as np

from ragaudit.ingest.pdf import Page
from ragaudit.text.dates import MONTH_PREFIX
from ragaudit.text.lines import (
    BULLET,
    NUMERIC,
    TERMINAL,
    cells,
    continues,
    is_row,
)
from ragaudit.text.sentences import TokenCounter, paragraph_text, sentence_spans
from ragaudit.types import DEFAULT_STRATEGY, Chunk, Strategy

PAGE_SEPARATOR = "\n\n"

_GROUP_LABEL = re.compile(r"^\s*[A-Z][^\d:]{0,40}:\s*$")  # a row group's label: "Revenue:", "Current liabilities:"
_CAPTION = re.compile(r"^\s*(Table|TABLE|Tab\.)\s+\d+[.:]?")
_SENTENCE_END = re.compile(r"[.!?]['\")\]”’]*\s*$")


DEFAULT_ATOMIC_UNITS = (
    True  # as settings.chunk_atomic_units; on: SQL statements and list items kept whole, the last chunk a full window
)
# what ``atomic_units`` builds, recorded in a version's build info: 2 = statements, clauses and list
# items whole + the last chunk as the document's last full window (1, recorded as ``True``, had no
# last-window rule; 2 took no table header above a group label such as "Revenue:" and at most three
# header lines; 3 did not carry a table's header onto its continuation on the next page; 4 read no
# dash as an empty cell, stopped a header at a wrapped one-word cell and did not carry a header past
# a group label or a wrapped row on the same page), so versions built by an earlier revision are
# re-chunked by reindex
ATOMIC_UNITS_REVISION = 5


@dataclass(frozen=True)
class Unit:
    """A sentence, table row or heading (or a piece of an over-long sentence): document offsets,
    page, word pieces, kind (text | row | table | code | heading), table id and section path;
    ``table`` is a whole small table (header lines and rows) kept as one unit, ``code`` a SQL
    statement or one of its clauses."""

    start: int
    end: int
    page: int
    tokens: int
    kind: str = "text"
    table: int | None = None
    section: tuple[str, ...] = ()


@dataclass
class Table:
    """A table found in page text: caption line, header line(s) joined by `` | ``, and the page
    offsets ``(start, end)`` of its header and rows."""

    caption: str = ""
    header: str = ""
    extent: tuple[int, int] = (0, 0)


def document_text(pages: list[Page]) -> tuple[str, list[int]]:
    """Join page texts with ``PAGE_SEPARATOR``; returns the text and each page's start offset."""
    starts, parts, pos = [], [], 0
    for p in pages:
        starts.append(pos)
        parts.append(p.text)
        pos += len(p.text) + len(PAGE_SEPARATOR)
    return PAGE_SEPARATOR.join(parts), starts


def document_title(doc_name: str, pages: list[Page]) -> str:
    """A short title for context headers: the file stem plus the most prominent heading of
    page 1 (font size x length), else its first line."""
    stem = re.sub(r"\.pdf$", "", doc_name, flags=re.I).replace("_", " ").strip()
    best = ""
    if pages and pages[0].headings:
        best = max(pages[0].headings, key=lambda h: h[3] * min(len(h[2]), 80))[2]
    if not best:
        best = next((ln.strip() for p in pages[:1] for ln in p.text.splitlines() if ln.strip()), "")
    best = best.split("\n")[0].strip()[:100]
    if best and best.lower() != stem.lower():
        return f"{stem} | {best}"
    return stem


_YEAR = re.compile(r"^\(?(?:19|20)\d\d\)?[,.]?$")
_MONTH_WORD = re.compile(rf"\b{MONTH_PREFIX}(?!\w)", re.I)


def _header_row(line: str) -> bool:
    """A column-header line that looks numeric: its numbers are only years, or days of a month
    it names ("September 24, 2022 September 25, 2021", "2023 2022", "Q1 FY24")."""
    nums = [n.strip("()$,.") for n in NUMERIC.findall(line)]
    if not nums:
        return False
    month = _MONTH_WORD.search(line) is not None
    return all(_YEAR.match(n) or (month and len(n) <= 2) for n in nums)


def _tables(page_text: str) -> tuple[list[tuple[int, int, int]], list[Table]]:
    """Row line spans ``(start, end, table id)`` and tables of a page.

    A table is a block of row lines (``_is_row``), allowing up to two short label lines between
    rows ("Current liabilities:", a name wrapped onto the next line). Its header is the run of
    up to four lines right above the first row (or above the group label of the first rows,
    "Revenue:") that are neither sentences nor captions (a numeric line of years or dates counts
    as header, not as a row: "Three Months Ended Nine Months Ended | October 29, October 30, ... |
    2023 2022 2023 2022 | (In millions)"); a single row makes a table
    only with such a header (a vote tally under "For Against Abstain"). A one-word line within the
    header is a header cell's wrapped end ("Standar" / "d-mode"), and the caption is looked for up
    to three lines above the header. A table with neither header nor caption whose rows go on
    from the table above it past a group label or a wrapped cell takes that table's header and
    caption (``_continue_in_page``). ``Table.extent`` spans header and rows (page offsets), which
    chunking keeps whole when the table is small.
    """
    lines, pos = [], 0
    for ln in page_text.split("\n"):
        lines.append((pos, pos + len(ln), ln))
        pos += len(ln) + 1
    rows: list[tuple[int, int, int]] = []
    tables: list[Table] = []
    taken = -1  # last line index that belongs to a table already found
    i = 0

    def is_data_row(k: int) -> bool:
        return is_row(lines[k][2]) and not _header_row(lines[k][2])

    while i < len(lines):
        if not is_data_row(i):
            i += 1
            continue
        j, gap = i, 0
        block = []
        while j < len(lines) and gap <= 2:
            ln = lines[j][2]
            if is_data_row(j):
                block.append(j)
                gap = 0
            elif ln.strip() and not TERMINAL.search(ln) and len(ln.split()) <= 6 and not _CAPTION.match(ln):
                gap += 1
            else:
                break
            j += 1
        head: list[int] = []
        k = i - 1
        if k > taken and _GROUP_LABEL.match(lines[k][2]) and k - 1 > taken and lines[k - 1][2].strip():
            k -= 1  # the first rows' group label ("Revenue:") sits between the header and the rows

        def header_line(k: int) -> bool:
            ln = lines[k][2]
            return not (not ln.strip() or TERMINAL.search(ln) or _CAPTION.match(ln) or len(ln) > 160 or is_data_row(k))

        while k > taken and len(head) < 4 and header_line(k):
            if len(lines[k][2].split()) < 2 and not _header_row(lines[k][2]):
                # one word: a header cell's wrapped end ("Standar" / "d-mode") when a header line of
                # two or more words is right above it; else not a header
                if not (k - 1 > taken and len(head) < 3 and header_line(k - 1) and len(lines[k - 1][2].split()) >= 2):
                    break
            head.insert(0, k)
            k -= 1
        if len(block) < 2 and not head:
            i += 1
            continue
        t = Table()
        t.header = " | ".join(lines[k][2].strip() for k in head)
        top = head[0] if head else i
        near = list(range(max(0, top - 3), i)) + list(range(block[-1] + 1, min(len(lines), block[-1] + 4)))
        cap = next((lines[k][2].strip() for k in near if _CAPTION.match(lines[k][2])), "")
        t.caption = cap[:160]
        t.extent = (lines[head[0] if head else i][0], lines[block[-1]][1])
        tid = len(tables)
        tables.append(t)
        rows.extend((lines[k][0], lines[k][1], tid) for k in block)
        taken = block[-1]
        i = block[-1] + 1
    _continue_in_page(page_text, rows, tables)
    return rows, tables


def _between_rows(text: str) -> bool:
    """At most three non-empty lines, none a caption, each a line of two or more cells or of twelve
    words or fewer and not a sentence of eight words or more: what may stand between two parts of
    one table on a page (a group label such as "Cost of sales:", a row with a long label, a row
    label's or a condition's wrapped end)."""
    lines = [ln for ln in text.split("\n") if ln.strip()]
    return (
        len(lines) <= 3
        and all(
            not _CAPTION.match(ln)
            and (
                cells(ln) >= 2  # a row whose long label keeps it from reading as one
                or (
                    len(ln.split()) <= 12
                    and not (_SENTENCE_END.search(ln) and ln.lstrip()[:1].isupper() and len(ln.split()) >= 8)
                )
            )
            for ln in lines
        )
    )


def _continue_in_page(page_text: str, rows: list[tuple[int, int, int]], tables: list[Table]) -> None:
    """A table found with neither header nor caption right below another table of the page (only
    ``_between_rows`` lines between them) whose rows have as many cells is that table continued
    past a group label or a wrapped cell: it takes its header and caption, as ``_continue_table``
    does across a page break, so its rows' chunks carry the column headers."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for s, e, t in rows:
        first.setdefault(t, s)
        last[t] = e
    for t in range(1, len(tables)):
        prev, cur = tables[t - 1], tables[t]
        if cur.header or cur.caption or not (prev.header or prev.caption) or t not in first:
            continue
        if not _between_rows(page_text[last[t - 1] : first[t]]):
            continue
        if _cells_per_row(page_text, rows, t) == _cells_per_row(page_text, rows, t - 1):
            cur.header, cur.caption = prev.header, prev.caption


def _cells_per_row(page_text: str, rows: list[tuple[int, int, int]], tid: int) -> int:
    """The most common number of cells in the rows of table ``tid`` (``cells``)."""
    counts = Counter(cells(page_text[s:e]) for s, e, t in rows if t == tid)
    return counts.most_common(1)[0][0] if counts else 0


def _short_lines(text: str) -> bool:
    """At most two non-empty lines, each of six words or fewer and none a sentence: what may
    stand between a table and a page break (a group label, "(continued)") without ending it."""
    lines = [ln for ln in text.split("\n") if ln.strip()]
    return len(lines) <= 2 and all(len(ln.split()) <= 6 and not TERMINAL.search(ln) for ln in lines)


def _table_at_end(page_text: str, rows: list[tuple[int, int, int]], tables: list[Table]) -> tuple[Table, int] | None:
    """The page's last table and its cells per row when nothing but short lines follows its last
    row: a table the next page may continue. None otherwise."""
    if not rows:
        return None
    s, e, tid = rows[-1]
    if not _short_lines(page_text[e:]):
        return None
    return tables[tid], _cells_per_row(page_text, rows, tid)


def _continue_table(
    page_text: str, rows: list[tuple[int, int, int]], tables: list[Table], last: tuple[Table, int] | None
) -> None:
    """A table that opens a page without a header or caption of its own (nothing but short lines
    above its first row) and whose rows have as many number cells as those of the table ending
    the previous page (``last``) is that table continued: it takes its header and caption, so its
    rows' chunks carry the column headers in their context header."""
    if last is None or not rows:
        return
    first = tables[rows[0][2]]
    prev, cells = last
    if first.header or first.caption or not (prev.header or prev.caption):
        return
    if not _short_lines(page_text[: rows[0][0]]) or _cells_per_row(page_text, rows, rows[0][2]) != cells:
        return
    first.header, first.caption = prev.header, prev.caption


def page_tables(page_text: str) -> tuple[list[tuple[int, int, int]], list[Table]]:
    """Row line spans ``(start, end, table id)`` and tables of a page, as chunking finds them
    (for readers of table structure outside chunking, e.g. gold-pair generation)."""
    return _tables(page_text)


def _close_run(
    out: list[tuple],
    out_n: list[int],
    raw: list[tuple],
    counts: list[int],
    i: int,
    j: int,
    kind: str | None,
    limit: int,
) -> None:
    """Append the run ``raw[i:j]`` (units with word-piece ``counts``) to ``out`` / ``out_n``: as one
    unit of ``kind`` (first unit's start and page, last unit's end) when ``kind`` is given, the run
    has more than one unit and totals at most ``limit`` word pieces; else unit by unit, unchanged.
    Shared by the merges of small tables and of atomic units (statements, clauses, list items)."""
    n = sum(counts[i:j])
    if kind is not None and j - i > 1 and n <= limit:
        out.append((raw[i][0], raw[j - 1][1], raw[i][2], kind, None))
        out_n.append(n)
    else:
        out.extend(raw[i:j])
        out_n.extend(counts[i:j])


def _whole_small_tables(
    raw: list[tuple], counts: list[int], extents: list[tuple[int, int]], limit: int
) -> tuple[list[tuple], list[int]]:
    """Merge the units of each table (header lines, rows, wrapped labels) into one unit of kind
    ``table`` when they total at most ``limit`` word pieces, so a small table is never cut;
    a longer table stays one unit per row (its chunks repeat caption and header)."""
    if not extents:
        return raw, counts
    which = []
    for s, *_ in raw:
        which.append(next((t for t, (a, b) in enumerate(extents) if a <= s < b), None))
    out, out_n = [], []
    i = 0
    while i < len(raw):
        t = which[i]
        j = i + 1
        while t is not None and j < len(raw) and which[j] == t:
            j += 1
        _close_run(out, out_n, raw, counts, i, j, "table" if t is not None else None, limit)
        i = j
    return out, out_n


_SQL_START = re.compile(
    r"^\s*(?:CREATE|ALTER|SELECT|INSERT|UPDATE|DELETE|DROP|GRANT|REVOKE|DECLARE|SET|CALL|WITH|"
    r"MERGE|COMMENT|BEGIN)\b"
)
_PROSE = re.compile(r"(?:\b[a-z]{2,}\b[ ,]+){4}")
_SQL_COMMENT = re.compile(r"^\s*(?:/\*.*\*/|--.*)\s*$")
_CLAUSE_CONT = re.compile(r"^\s*(?:THEN|AND|OR|NOT|IN|IS|[(),=<>+*/|-])")


def _lines(page_text: str) -> list[tuple[int, int, str]]:
    """``(start, end, line)`` for each line of ``page_text`` (page offsets)."""
    out, pos = [], 0
    for ln in page_text.split("\n"):
        out.append((pos, pos + len(ln), ln))
        pos += len(ln) + 1
    return out


def _upper_share(line: str) -> float:
    letters = [ch for ch in line if ch.isalpha()]
    return sum(ch.isupper() for ch in letters) / len(letters) if letters else 0.0


def code_statements(page_text: str) -> list[tuple[int, int]]:
    """Page offsets ``(start, end)`` of SQL statements set as code: from a line starting with an
    upper-case statement keyword (``CREATE``, ``SELECT``, ``ALTER`` ...; the line mostly upper
    case) to the first line ending in ``;`` (at most 60 lines), every line in between code-like
    (mostly upper case or punctuation, or a ``--`` comment; no run of four lower-case prose words).
    Comment lines (``/* ... */``, ``-- ...``) right above the keyword line are part of the statement.
    A keyword line never closed by ``;`` is not taken as a statement."""
    lines = _lines(page_text)
    out: list[tuple[int, int]] = []
    i, last = 0, -1
    while i < len(lines):
        ln = lines[i][2]
        if not (_SQL_START.match(ln) and _upper_share(ln) >= 0.7):
            i += 1
            continue
        end = None
        for j in range(i, min(len(lines), i + 60)):
            cur = lines[j][2].strip()
            if j > i and cur and not cur.startswith("--") and (_PROSE.search(cur) or _upper_share(cur) < 0.5):
                break
            if cur.endswith(";"):
                end = j
                break
        if end is None:
            i += 1
            continue
        first = i
        while first - 1 > last and _SQL_COMMENT.match(lines[first - 1][2]):
            first -= 1  # comment lines right above a statement document it: they are part of it
        out.append((lines[first][0] + len(lines[first][2]) - len(lines[first][2].lstrip()), lines[end][1]))
        last = end
        i = end + 1
    return out


def code_clauses(page_text: str, statements: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Clauses of the ``statements`` (page offsets): a line plus the lines that continue it (a
    line starting with ``THEN``/``AND``/``OR``/an operator or bracket, or any line while a
    bracket is open), so a statement too long for one chunk is cut between clauses and a
    ``WHEN ... THEN ( 'XXX-XX-' CONCAT ... )`` arm stays whole."""
    out = []
    for a, b in statements:
        cur, depth = None, 0
        for s, e, ln in _lines(page_text[a:b]):
            if not ln.strip():
                continue
            s, e = a + s + len(ln) - len(ln.lstrip()), a + s + len(ln.rstrip())
            if cur is not None and (depth > 0 or _CLAUSE_CONT.match(ln)):
                cur = (cur[0], e)
            else:
                if cur is not None:
                    out.append(cur)
                cur = (s, e)
            depth = max(0, depth + ln.count("(") - ln.count(")"))
        if cur is not None:
            out.append(cur)
    return out


def _code_lines(
    page_text: str, spans: list[tuple[int, int]], statements: list[tuple[int, int]]
) -> list[tuple[int, int]]:
    """``spans`` (sentences) with the spans overlapping a code statement replaced by the
    statement's lines: sentence rules cut code at "C ." or "1." inside an expression and run one
    clause into the next; the parts of such a span outside the statement stay units of their own."""
    if not statements:
        return spans
    out: list[tuple[int, int]] = []
    done: set[tuple[int, int]] = set()
    for s, e in spans:
        st = next(((a, b) for a, b in statements if s < b and e > a), None)
        if st is None:
            out.append((s, e))
            continue
        a, b = st
        if s < a and page_text[s:a].strip():
            out.append((s, s + len(page_text[s:a].rstrip())))
        if st not in done:
            done.add(st)
            for ls, _le, ln in _lines(page_text[a:b]):
                if ln.strip():
                    out.append((a + ls + len(ln) - len(ln.lstrip()), a + ls + len(ln.rstrip())))
        if e > b and page_text[b:e].strip():
            rest = page_text[b:e]
            out.append((b + len(rest) - len(rest.lstrip()), e))
    return out


def list_items(page_text: str) -> list[tuple[int, int]]:
    """Page offsets ``(start, end)`` of list items: a paragraph (soft line breaks joined, see
    ``_paragraph_text``) that starts with a bullet or an item number ("- ", "• ", "1. ", "(a) "),
    all its sentences. An item ends where the next item, a sentence-final line break or a short
    line starts a new paragraph."""
    prepared = paragraph_text(page_text)
    out = []
    for m in re.finditer(r"[^\n]+", prepared):
        seg = m.group(0)
        if not BULLET.match(seg):
            continue
        a = m.start() + len(seg) - len(seg.lstrip())
        b = m.start() + len(seg.rstrip())
        if b > a:
            out.append((a, b))
    return out


def document_list_items(pages: list[Page]) -> list[tuple[int, int]]:
    """Document offsets ``(start, end)`` of the list items of ``pages`` (``list_items``, see
    ``document_text`` for offsets). An item that ends a page and runs on over the page break (the
    next page starts in lower case and the item does not end a sentence, see ``continues``) ends
    with the next page's first paragraph."""
    _, starts = document_text(pages)
    out: list[tuple[int, int]] = []
    for n, (page, start) in enumerate(zip(pages, starts)):
        for a, b in list_items(page.text):
            end = start + b
            if not page.text[b:].strip() and n + 1 < len(pages):
                nxt = pages[n + 1].text
                m = re.search(r"[^\n]+", paragraph_text(nxt))
                if m and m.group(0).strip() and continues(page.text[a:b], m.group(0)):
                    end = starts[n + 1] + len(m.group(0).rstrip())
            out.append((start + a, end))
    return out


def _merge_spans(
    raw: list[tuple], counts: list[int], spans: list[tuple[int, int]], limit: int, kind: str, protect: set[int]
) -> tuple[list[tuple], list[int]]:
    """Merge each run of consecutive units overlapping one of ``spans`` (document offsets, sorted)
    into one unit of ``kind`` when the run totals at most ``limit`` word pieces, so the span (a
    SQL statement or clause, a list item) is never cut; a longer run stays as it was. Units
    holding table rows or whole tables are never merged, nor is a unit starting at an offset in
    ``protect`` (a heading) merged into the unit before it."""
    if not spans:
        return raw, counts
    starts = [a for a, _ in spans]
    out, out_n = [], []
    i = 0
    while i < len(raw):
        s0, e0 = raw[i][0], raw[i][1]
        k = bisect_right(starts, e0 - 1) - 1
        ext = spans[k] if k >= 0 and spans[k][1] > s0 else None
        j = i + 1
        while (
            ext is not None and j < len(raw) and raw[j][0] < ext[1] and raw[j][0] not in protect and raw[j][3] == "text"
        ):
            j += 1
        _close_run(out, out_n, raw, counts, i, j, kind if ext is not None and raw[i][3] == "text" else None, limit)
        i = j
    return out, out_n


def document_units(
    pages: list[Page], counter: TokenCounter, budget: int, atomic_units: bool = DEFAULT_ATOMIC_UNITS
) -> tuple[str, list[Unit], list[Table]]:
    """Document text, its units (each at most ``budget`` word pieces, in order) and its tables.

    ``atomic_units`` (on by default, see ``chunk_document``): a SQL statement (else each of its
    clauses) and a list item are one unit while they fit in ``budget``; off, the earlier units
    (sentences, rows, small tables)."""
    text, starts = document_text(pages)
    raw: list[tuple[int, int, int, str, int | None]] = []
    all_tables: list[Table] = []
    heading_at: dict[int, tuple[int, str]] = {}
    extents: list[tuple[int, int]] = []  # document offsets of each table's header + rows
    code: list[tuple[int, int]] = []  # SQL statements
    clauses: list[tuple[int, int]] = []  # their clauses (a statement longer than a chunk is cut between them)
    last: tuple[Table, int] | None = None  # the previous page's table that ends it, and its cells per row
    for page, start in zip(pages, starts):
        rows, tables = _tables(page.text)
        _continue_table(page.text, rows, tables, last)
        last = _table_at_end(page.text, rows, tables)
        stmts = code_statements(page.text)
        code.extend((start + a, start + b) for a, b in stmts)
        clauses.extend((start + a, start + b) for a, b in code_clauses(page.text, stmts))
        base_t = len(all_tables)
        all_tables.extend(tables)
        extents.extend((start + t.extent[0], start + t.extent[1]) for t in tables)
        row_at = {s: t + base_t for s, _, t in rows}
        for off, level, htext, *_ in page.headings:
            heading_at[start + off] = (int(level), str(htext))
        first = True
        spans = sentence_spans(page.text)
        for s, e in _code_lines(page.text, spans, stmts) if atomic_units else spans:
            kind, tid = "text", None
            if s in row_at:
                kind, tid = "row", row_at[s]
            if (
                first
                and raw
                and kind == "text"
                and raw[-1][3] == "text"
                and raw[-1][2] == page.number - 1
                and continues(text[raw[-1][0] : raw[-1][1]], page.text[s:e])
            ):
                # a sentence broken by the page break is one unit over both pages
                raw[-1] = (raw[-1][0], start + e, raw[-1][2], "text", None)
            else:
                raw.append((start + s, start + e, page.number, kind, tid))
            first = False
    items = document_list_items(pages)
    counts = counter.count_tokens([text[s:e] for s, e, *_ in raw])
    raw, counts = _whole_small_tables(raw, counts, extents, int(0.8 * budget))
    # a SQL statement, else each of its clauses, and a list item are one unit while they fit in a
    # chunk; longer ones stay cut between clauses or at sentence ends
    if atomic_units:
        protect = set(heading_at)
        raw, counts = _merge_spans(raw, counts, code, budget, "code", protect)
        raw, counts = _merge_spans(raw, counts, clauses, budget, "code", protect)
        raw, counts = _merge_spans(raw, counts, items, budget, "text", protect)
    units: list[Unit] = []
    stack: list[tuple[int, str]] = []
    for (s, e, pno, kind, tid), n in zip(raw, counts):
        h = heading_at.get(s)
        if h is not None:
            level, htext = h
            stack = [x for x in stack if x[0] < level] + [(level, htext)]
            kind = "heading"
        section = tuple(x[1] for x in stack)
        if n <= budget:
            units.append(Unit(s, e, pno, n, kind, tid, section))
            continue
        offsets = counter.token_offsets(text[s:e])
        for i in range(0, len(offsets), budget):
            piece = offsets[i : i + budget]
            units.append(Unit(s + piece[0][0], s + piece[-1][1], pno, len(piece), kind, tid, section))
    return text, units, all_tables


class _Headers:
    """Context headers and their word-piece counts (cached)."""

    def __init__(self, counter: TokenCounter, title: str, tables: list[Table], use_sections: bool = True):
        self.counter, self.title, self.tables, self.use_sections = counter, title.strip(), tables, use_sections
        self._cache: dict[str, int] = {}

    def build(self, units: list[Unit], limit: int | None = None) -> str:
        """Header for a chunk of ``units``; drops the section path, then table context, while
        ``header + units`` would exceed ``limit`` word pieces."""
        title = self.title
        section = ""
        if self.use_sections and units and units[0].section:
            names = [x for x in units[0].section if x.lower() not in title.lower()]
            section = " > ".join(names[-3:])
        extras = []
        seen = set()
        for u in units:
            if u.table is not None and u.table not in seen:
                seen.add(u.table)
                t = self.tables[u.table]
                ctx = " | ".join(x for x in (t.caption, t.header) if x)
                if ctx and ctx not in extras:  # the parts of a table continued on the page share theirs
                    extras.append(ctx)
        body = sum(u.tokens for u in units)
        while True:
            first = f"{title} > {section}" if title and section else (title or section)
            header = "\n".join([x for x in [first, *extras] if x])
            if limit is None or self.tokens(header) + body <= limit or (not extras and not section):
                return header
            if section:  # a table's caption and header row say more about its rows than the section path
                section = ""
            else:
                extras.pop()

    def tokens(self, header: str) -> int:
        if not header:
            return 0
        n = self._cache.get(header)
        if n is None:
            n = self._cache[header] = self.counter.count_tokens([header])[0] + 1  # + the newline
        return n


def _make_chunk(
    index: int, text: str, page_starts: list[int], units: list[Unit], header: str, header_tokens: int
) -> Chunk:
    cs, ce = units[0].start, units[-1].end
    # pages from offsets: a unit (a sentence broken by a page break) may span two pages
    p0 = bisect_right(page_starts, cs)
    p1 = bisect_right(page_starts, max(ce - 1, cs))
    breaks = [(p0, 0)] + [(p, page_starts[p - 1] - cs) for p in range(p0 + 1, p1 + 1)]
    section = " > ".join(units[0].section)
    return Chunk(
        index=index,
        text=text[cs:ce],
        header=header,
        page_start=p0,
        page_end=p1,
        char_start=cs,
        char_end=ce,
        token_count=header_tokens + sum(u.tokens for u in units),
        page_breaks=breaks,
        section=section[:500],
    )


def _pack(
    text: str,
    page_starts: list[int],
    units: list[Unit],
    headers: _Headers,
    max_tokens: int,
    overlap: int,
    breaks_before: set[int] | None = None,
    overlap_fraction: float = 0.0,
    hard_max: int | None = None,
    full_tail: bool = False,
) -> list[Chunk]:
    """Greedy packing of units into chunks of at most ``max_tokens`` (header included).

    The next chunk repeats the last ``overlap`` sentences, and more while the repeated part stays
    within ``overlap_fraction * max_tokens`` word pieces. A document's tail shorter than a third
    of the budget joins the last chunk if the result stays within ``hard_max`` (the model's limit),
    so the last chunk alone may exceed ``max_tokens``, never ``hard_max``; otherwise a short tail is
    filled backwards to 70% of ``max_tokens``. With ``full_tail`` every last chunk is filled
    backwards to ``hard_max`` (the document's last full window, independent of earlier packing;
    its context header kept whole) and chunks before it whose units it all holds are dropped."""
    chunks: list[Chunk] = []
    current: list[Unit] = []
    breaks_before = breaks_before or set()

    def cost(us: list[Unit]) -> int:  # with the full header: close a chunk rather than drop its table context
        return headers.tokens(headers.build(us)) + sum(u.tokens for u in us)

    def emit(us: list[Unit], limit: int = max_tokens) -> None:
        h = headers.build(us, limit)
        chunks.append(_make_chunk(len(chunks), text, page_starts, us, h, headers.tokens(h)))

    for i, u in enumerate(units):
        if current and (i in breaks_before or cost(current + [u]) > max_tokens):
            emit(current)
            keep = current[-overlap:] if overlap and i not in breaks_before else []
            if keep:
                j = len(current) - len(keep)
                while j > 1 and sum(k.tokens for k in current[j - 1 :]) <= overlap_fraction * max_tokens:
                    j -= 1
                keep = current[j:]
            while keep and (sum(k.tokens for k in keep) > (max_tokens // 2) or cost(keep + [u]) > max_tokens):
                keep = keep[1:]
            current = list(keep)
        current.append(u)
    if current:
        # the last chunk: a document's last lines (a back cover's publication number, a signature)
        # join the previous chunk when they are few (under a third of the budget) and that stays
        # under the model's hard limit; otherwise the tail is filled backwards with the units before
        # it, up to 70% of the budget (``full_tail``: every last chunk, up to the model's limit, so it
        # is the document's last full window: its start depends on the document's end only, not on
        # where greedy packing upstream stopped -- a statement kept whole pages earlier moves every
        # later boundary -- and the closing lines keep the text that says what they belong to; a
        # chunk before it left with nothing of its own is dropped)
        if chunks and breaks_before is not None and (full_tail or cost(current) < max_tokens // 3):
            first = next(i for i, u in enumerate(units) if u is current[0])
            prev = chunks[-1]
            prev_units = [u for u in units[:first] if u.start >= prev.char_start]
            fresh = [u for u in current if u.start >= prev.char_end]
            if (
                cost(current) < max_tokens // 3
                and hard_max
                and prev_units
                and fresh
                and first not in breaks_before
                and cost(prev_units + fresh) <= hard_max
            ):
                chunks.pop()
                current = prev_units + fresh
            else:
                j = first
                fill = (hard_max or max_tokens) if full_tail else 0.7 * max_tokens
                while j > 0 and (j not in breaks_before) and cost(units[j - 1 : first] + current) <= fill:
                    j -= 1
                current = units[j:first] + current
                while full_tail and chunks:  # a chunk whose own units all sit in the last one repeats it
                    prev = chunks[-1]
                    before = chunks[-2].char_end if len(chunks) > 1 else -1
                    own = [
                        u
                        for u in units[:first]
                        if prev.char_start <= u.start and u.end <= prev.char_end and u.start >= before
                    ]
                    if own and own[0].start < current[0].start:
                        break
                    chunks.pop()
        emit(current, hard_max if full_tail and hard_max else max_tokens)
    return chunks


def _fixed(pages: list[Page], counter: TokenCounter, title: str, max_tokens: int, overlap_tokens: int) -> list[Chunk]:
    text, page_starts = document_text(pages)
    headers = _Headers(counter, title, [], use_sections=False)
    h = headers.build([])
    ht = headers.tokens(h)
    size = max_tokens - ht
    step = max(1, size - overlap_tokens)
    offsets = counter.token_offsets(text)
    chunks: list[Chunk] = []
    for i in range(0, len(offsets), step):
        piece = offsets[i : i + size]
        if not piece:
            break
        s, e = piece[0][0], piece[-1][1]
        p0 = bisect_right(page_starts, s)
        p1 = bisect_right(page_starts, max(e - 1, s))
        breaks = [(p0, 0)] + [(p, page_starts[p - 1] - s) for p in range(p0 + 1, p1 + 1)]
        chunks.append(
            Chunk(
                index=len(chunks),
                text=text[s:e],
                header=h,
                page_start=p0,
                page_end=p1,
                char_start=s,
                char_end=e,
                token_count=ht + len(piece),
                page_breaks=breaks,
            )
        )
        if i + size >= len(offsets):
            break
    return chunks


def _semantic_breaks(units: list[Unit], text: str, embedder, percentile: float = 20.0) -> set[int]:
    """Indices ``i`` where a chunk should start: similarity(unit i-1, unit i) below the percentile."""
    if len(units) < 3 or embedder is None:
        return set()
    vecs = embedder.embed([text[u.start : u.end] for u in units])
    sims = np.sum(vecs[1:] * vecs[:-1], axis=1)
    threshold = float(np.percentile(sims, percentile))
    return {i + 1 for i, s in enumerate(sims) if s < threshold}


def chunk_document(
    pages: list[Page],
    counter: TokenCounter,
    title: str,
    strategy: Strategy | str = DEFAULT_STRATEGY,
    max_tokens: int = 200,
    overlap_sentences: int = 1,
    embedder=None,
    overlap_fraction: float = 0.0,
    atomic_units: bool = DEFAULT_ATOMIC_UNITS,
) -> list[Chunk]:
    """Chunk a document with ``strategy``; chunks have ``index`` 0..n-1 in document order.

    ``max_tokens`` (word pieces, header included) is capped at the model's ``max_content_tokens``.
    ``atomic_units`` (on by default) keeps SQL statements and list items whole (see ``document_units``)
    and makes the last chunk the document's last full window (see ``_pack``); off gives the earlier
    chunker's chunks byte for byte. ``embedder`` is needed by ``semantic``. Raises ``ValueError``
    for an unknown strategy or when the header alone leaves no room for text.
    """
    strategy = Strategy.parse(strategy)
    max_tokens = min(max_tokens, counter.max_content_tokens)
    if strategy is Strategy.fixed:
        return _fixed(pages, counter, title, max_tokens, overlap_tokens=max_tokens // 8)
    budget = max_tokens - counter.count_tokens([title])[0] - 8
    if budget < 16:
        raise ValueError(f"chunk budget too small: the title header leaves {budget} of {max_tokens} tokens")
    text, units, tables = document_units(pages, counter, budget, atomic_units)
    _, page_starts = document_text(pages)
    headers = _Headers(counter, title, tables, use_sections=strategy is not Strategy.fixed)
    breaks: set[int] = set()
    overlap = overlap_sentences
    if strategy is Strategy.heading:
        breaks = {i for i, u in enumerate(units) if u.kind == "heading" and i > 0}
    elif strategy is Strategy.semantic:
        breaks = _semantic_breaks(units, text, embedder if embedder is not None else counter)
        overlap = 0
    return _pack(
        text,
        page_starts,
        units,
        headers,
        max_tokens,
        overlap,
        breaks,
        overlap_fraction if overlap else 0.0,
        hard_max=counter.max_content_tokens,
        full_tail=atomic_units,
    )


def chunk_sentences(
    pages: list[Page], counter: TokenCounter, title: str, max_tokens: int = 200, overlap_sentences: int = 1
) -> list[Chunk]:
    """The ``sentence`` strategy (see ``chunk_document``)."""
    return chunk_document(pages, counter, title, Strategy.sentence, max_tokens, overlap_sentences)

"""What a line of extracted PDF text is: a table row of values, a list item, a sentence's end,
a lead-in to what follows. Read by the chunker (``ragaudit.ingest.chunking``), retrieval's
neighbour expansion and table vote (``ragaudit.retrieve.retriever``) and the answerer.
"""

from __future__ import annotations

import re

# a line that ends a sentence or a clause (Latin and CJK punctuation, closing quotes and brackets)
TERMINAL = re.compile(r"[.!?:;。！？；：]['\")\]”’]*\s*$")
# a list item: a bullet, "1." / "(a)" / "A." numbering
BULLET = re.compile(r"^\s*(?:[!•\-\*–·●▪■◦]\s|\(?\d{1,2}[.)]\s|\(?[a-z][.)]\s|[A-Z]\.\s)")
# a number cell: amounts, percentages, parenthesised negatives, currency signs
NUMERIC = re.compile(r"(?<![\w.])[-+(]?[$€£]?\d[\d,.]*%?\)?(?![\w])")
# an empty cell printed as a dash ("tLOW LOW period of the SCL clock 4.7 - 1.3 - 0.5 - μs")
_DASHES = frozenset("-–—")
_DETACHED_CURRENCY = re.compile(r"[$€£]\s+(?=\(?\d)")
FOOTNOTE_REF = re.compile(r"(?<![\w.])\[\d{1,2}\](?![\w])")


def cells(line: str) -> int:
    """Number cells of ``line`` (``NUMERIC``, not the footnote marks in brackets: "[7]") plus the
    dashes standing alone for empty cells in a line holding a number (a datasheet's min/max
    columns: "5.0 - - - - -"; a statement's "Net income — — 656")."""
    nums = len(NUMERIC.findall(line)) - len(FOOTNOTE_REF.findall(line))
    if nums < 1:
        return 0
    words = line.split()

    def cell(w: str) -> bool:
        return w in _DASHES or NUMERIC.fullmatch(w) is not None

    # a dash beside a number or another dash, or ending the line; not one starting a list item
    # or one between words ("table — Continued")
    dashes = sum(
        1
        for j, w in enumerate(words)
        if w in _DASHES and j > 0 and (j == len(words) - 1 or cell(words[j - 1]) or cell(words[j + 1]))
    )
    return nums + dashes


def is_row(line: str) -> bool:
    """True when ``line`` reads as a table row of values: two or more words, at least two number
    cells, its cells (``cells``: numbers, and dashes for empty cells) making up 40% of its words
    (a currency sign set apart from its amount is no word: "Operating income $ 6,518 $ 5,123" is a
    label and two cells, as statement tables print amounts), and not a sentence with fewer than
    three numbers.

    This decides whether a line *is* a row, for chunking, sentence spans, retrieval and the
    answerer. Two readers answer other questions about rows and keep their own cell patterns:
    ``ragaudit.index.sparse.row_label`` takes the label of any line ending in numeric cells (the
    BM25 ``row:`` terms, whatever share of the line the numbers are), and
    ``ragaudit.evaluate.goldrules`` splits a row chunking already found into its label and cells
    ("N/A" and dashes counted as cells, footnote marks not)."""
    words = _DETACHED_CURRENCY.sub("", line).split()  # "$ 4,307" is one cell, as statements print it
    if len(words) < 2:
        return False
    nums = len(NUMERIC.findall(line))
    return nums >= 2 and cells(line) / len(words) >= 0.4 and not (TERMINAL.search(line) and nums < 3)


def ends_mid_list(text: str) -> bool:
    """True when the last non-empty line of ``text`` is a table row or a list item, i.e. a
    passage that was probably cut from a longer table or list."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return bool(lines) and (is_row(lines[-1]) or BULLET.match(lines[-1]) is not None)


def ends_with_lead_in(text: str) -> bool:
    """True when the last non-empty line of ``text`` introduces what follows (it ends in ":",
    "... the probable cause(s) of this accident to be:"): the passage was cut before it."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return bool(lines) and lines[-1].rstrip().endswith(":")


def continues(before: str, after: str) -> bool:
    """True when ``after`` (the first sentence of a page) continues ``before`` (the last one of
    the previous page): ``before`` does not end a sentence and ``after`` starts in lower case."""
    b, a = before.rstrip(), after.lstrip()
    return bool(b and a) and TERMINAL.search(b) is None and a[0].islower() and not is_row(b.splitlines()[-1])

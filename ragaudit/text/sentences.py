"""Sentences of extracted PDF text: sentence spans (pysbd, with the soft line breaks of a
paragraph joined and abbreviations before a number kept whole; CJK sentence ends split) and
windows of whole sentences under a word-piece budget. Shared by the chunker, the answerer, the
citation checks and the evaluation (gold generation, the judge).
"""

from __future__ import annotations

import re
from typing import Protocol

import pysbd

from ragaudit.text.lines import BULLET, TERMINAL, continues, is_row


class TokenCounter(Protocol):
    max_content_tokens: int

    def count_tokens(self, texts: list[str]) -> list[int]: ...

    def token_offsets(self, text: str) -> list[tuple[int, int]]: ...


def paragraph_text(page_text: str) -> str:
    """Replace soft line breaks (inside a paragraph) by spaces, keeping offsets unchanged.

    A line break stays when the line ends a sentence, the next line is a list item, or the
    line is short or tabular (headings, table rows).
    """
    lines = page_text.split("\n")
    if len(lines) < 2:
        return page_text
    width = max((len(ln) for ln in lines), default=0)
    out = []
    for i, ln in enumerate(lines):
        out.append(ln)
        if i == len(lines) - 1:
            break
        nxt = lines[i + 1]
        if not nxt.strip():
            # blank lines (a page break inside a chunk): soft when the text runs on across them
            after = next((x for x in lines[i + 1 :] if x.strip()), "")
            hard = not (ln.strip() and after and continues(ln, after) and not BULLET.match(after))
        elif not ln.strip():
            prev = next((x for x in reversed(lines[:i]) if x.strip()), "")
            hard = not (prev and continues(prev, nxt) and not BULLET.match(nxt))
        else:
            hard = (
                TERMINAL.search(ln) is not None
                or BULLET.match(nxt) is not None
                or len(ln.strip()) < 0.6 * width
                or is_row(ln)
                or is_row(nxt)
            )
        out.append("\n" if hard else " ")
    return "".join(out)


_SEGMENTER = pysbd.Segmenter(language="en", clean=False, char_span=True)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Sentence spans ``(start, end)`` of ``text`` (whitespace trimmed, empties dropped)."""
    prepared = paragraph_text(text)
    spans = []
    for block_m in re.finditer(r"[^\n]+", prepared):
        base = block_m.start()
        block = block_m.group(0)
        try:
            pieces = [(s.start, s.end) for s in _SEGMENTER.segment(block)]
        except Exception:  # pysbd has rare regex edge cases; a block is still a valid unit
            pieces = [(0, len(block))]
        if not pieces:
            pieces = [(0, len(block))]
        for s, e in pieces:
            seg = block[s:e]
            ls = len(seg) - len(seg.lstrip())
            rs = len(seg.rstrip())
            if rs > ls:
                spans.append((base + s + ls, base + s + rs))
    spans = _join_abbreviations(text, spans)
    # CJK sentences end in 。！？ without a following space: split them too
    out = []
    for s, e in spans:
        cut = s
        for m in re.finditer(r"[。！？]", text[s:e]):
            end = s + m.end()
            if end < e:
                out.append((cut, end))
                cut = end
        out.append((cut, e))
    return out


_ABBR_END = re.compile(r"(?<![\w.])[A-Z][a-z]{0,3}\.$")
_NUMBER_START = re.compile(r"(?:\d|[A-Z][a-z]{0,3}\.\s*\d)")


def _join_abbreviations(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Undo a sentence split after an abbreviation that introduces a number on the same line
    ("Cat. | No. 11364D", "Fig. | 3", "Sec. | 512"): pysbd ends a sentence at a capitalised
    short word with a period; a following number (or another such abbreviation and a number)
    shows the period was an abbreviation's."""
    out: list[tuple[int, int]] = []
    for s, e in spans:
        if (
            out
            and _ABBR_END.search(text[out[-1][0] : out[-1][1]])
            and "\n" not in text[out[-1][1] : s]
            and _NUMBER_START.match(text, s)
        ):
            out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def window_spans(
    text: str, counter: TokenCounter, max_tokens: int, sentences: list[tuple[int, int]] | None = None
) -> list[tuple[int, int]]:
    """Character spans of ``text`` cut into windows of whole sentences of at most ``max_tokens``
    word pieces (a longer sentence is a window of its own), in order, covering every sentence.
    An empty or sentence-less text gives one window over all of it. ``sentences``: the text's
    ``sentence_spans`` when the caller already has them."""
    spans = sentence_spans(text) if sentences is None else sentences
    if not spans:
        return [(0, len(text))]
    counts = counter.count_tokens([text[s:e] for s, e in spans])
    out: list[tuple[int, int]] = []
    start, used, prev_end = None, 0, 0
    for (s, e), n in zip(spans, counts):
        if start is not None and used + n > max_tokens:
            out.append((start, prev_end))
            start, used = None, 0
        if start is None:
            start = s
        used += n
        prev_end = e
    out.append((start, prev_end))
    return out


_PAIRS = {'"': '"', "“": "”", "„": "”", "«": "»", "‘": "’", "'": "'"}


def quoted(text: str) -> str:
    """``text`` between typographic double quotes, for a message that cites it ("The closest
    passage says: “…”"). Quote marks enclosing it are the source's own and are dropped first, and
    so is an opening or closing double mark whose partner lies outside the span, so a quoted
    sentence or term is not shown as “"…"”. Paired marks inside and apostrophes are kept."""
    inner = text.strip()
    while len(inner) >= 2 and _PAIRS.get(inner[0]) == inner[-1] and inner[-1] not in inner[1:-1]:
        inner = inner[1:-1].strip()
    if inner[:1] in '"“„«' and _PAIRS[inner[0]] not in inner[1:]:
        inner = inner[1:].lstrip()
    if inner[-1:] in '"”»' and not any(o in inner[:-1] for o, c in _PAIRS.items() if c == inner[-1]):
        inner = inner[:-1].rstrip()
    return f"“{inner}”"

"""Chunking: whole sentences packed up to a token budget, with sentence overlap.

Budgets are counted in the embedding model's own word pieces and every chunk (context
header included) stays under the model's ``max_seq_length``, so nothing is silently
truncated at embedding time. Sentences come from pysbd (rule-based sentence boundary
disambiguation, Sadvilkar & Neumann 2020) run over paragraphs rebuilt from PDF lines;
a sentence longer than the budget is cut at word-piece boundaries.

Offsets are character offsets into the document text, which is the page texts joined
with ``PAGE_SEPARATOR``; every chunk keeps its 1-based page span and the page boundaries
inside it, so a quote can be mapped back to its exact page.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Protocol

import pysbd

from .pdf import Page

PAGE_SEPARATOR = "\n\n"

_TERMINAL = re.compile(r"[.!?:;。！？；：]['\")\]”’]*\s*$")
_BULLET = re.compile(r"^\s*(?:[!•\-\*–·●▪■◦]\s|\(?\d{1,2}[.)]\s|\(?[a-z][.)]\s|[A-Z]\.\s)")
_NUMERIC = re.compile(r"[\d][\d,.%$]*")


class TokenCounter(Protocol):
    max_content_tokens: int

    def count_tokens(self, texts: list[str]) -> list[int]: ...

    def token_offsets(self, text: str) -> list[tuple[int, int]]: ...


@dataclass
class Chunk:
    """A passage of a document.

    ``text`` is the passage (a slice of the document text, offsets ``char_start:char_end``);
    ``header`` is the context header prepended for embedding and BM25 (document title);
    ``page_breaks`` lists ``(page, offset_in_text)`` where each page's part begins.
    ``token_count`` counts word pieces of ``header + "\\n" + text``.
    """

    index: int
    text: str
    header: str
    page_start: int
    page_end: int
    char_start: int
    char_end: int
    token_count: int
    page_breaks: list[tuple[int, int]] = field(default_factory=list)
    section: str = ""
    strategy: str = "sentence"

    @property
    def indexed_text(self) -> str:
        """What is embedded and BM25-indexed: header line + passage."""
        return f"{self.header}\n{self.text}" if self.header else self.text

    def page_at(self, offset: int) -> int:
        """1-based page of the character at ``offset`` in ``text``."""
        starts = [o for _, o in self.page_breaks]
        i = bisect_right(starts, offset) - 1
        return self.page_breaks[max(i, 0)][0] if self.page_breaks else self.page_start


@dataclass(frozen=True)
class Unit:
    """A sentence (or a piece of an over-long one): document offsets, page and word-piece count."""

    start: int
    end: int
    page: int
    tokens: int


def document_text(pages: list[Page]) -> tuple[str, list[int]]:
    """Join page texts with ``PAGE_SEPARATOR``; returns the text and each page's start offset."""
    starts, parts, pos = [], [], 0
    for p in pages:
        starts.append(pos)
        parts.append(p.text)
        pos += len(p.text) + len(PAGE_SEPARATOR)
    return PAGE_SEPARATOR.join(parts), starts


def document_title(doc_name: str, pages: list[Page]) -> str:
    """A short title for context headers: the file stem plus the first line of page 1."""
    stem = re.sub(r"\.pdf$", "", doc_name, flags=re.I).replace("_", " ").strip()
    first = next((ln.strip() for p in pages[:1] for ln in p.text.splitlines() if ln.strip()), "")
    first = first[:80]
    if first and first.lower() != stem.lower():
        return f"{stem} | {first}"
    return stem


def _paragraph_text(page_text: str) -> str:
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
        hard = (
            _TERMINAL.search(ln) is not None
            or _BULLET.match(nxt) is not None
            or len(ln.strip()) < 0.6 * width
            or len(_NUMERIC.findall(ln)) >= 2
            or not ln.strip()
        )
        out.append("\n" if hard else " ")
    return "".join(out)


_SEGMENTER = pysbd.Segmenter(language="en", clean=False, char_span=True)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Sentence spans ``(start, end)`` of ``text`` (whitespace trimmed, empties dropped)."""
    prepared = _paragraph_text(text)
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


def sentence_units(pages: list[Page], counter: TokenCounter, budget: int) -> tuple[str, list[Unit]]:
    """Document text and its sentence units, each at most ``budget`` word pieces."""
    text, starts = document_text(pages)
    raw: list[tuple[int, int, int]] = []
    for page, start in zip(pages, starts):
        for s, e in sentence_spans(page.text):
            raw.append((start + s, start + e, page.number))
    counts = counter.count_tokens([text[s:e] for s, e, _ in raw])
    units: list[Unit] = []
    for (s, e, pno), n in zip(raw, counts):
        if n <= budget:
            units.append(Unit(s, e, pno, n))
            continue
        offsets = counter.token_offsets(text[s:e])
        for i in range(0, len(offsets), budget):
            piece = offsets[i : i + budget]
            units.append(Unit(s + piece[0][0], s + piece[-1][1], pno, len(piece)))
    return text, units


def _make_chunk(index: int, text: str, page_starts: list[int], units: list[Unit], header: str,
                header_tokens: int, strategy: str) -> Chunk:
    cs, ce = units[0].start, units[-1].end
    breaks: list[tuple[int, int]] = []
    for u in units:
        if not breaks or breaks[-1][0] != u.page:
            off = 0 if not breaks else max(page_starts[u.page - 1] - cs, 0)
            breaks.append((u.page, off))
    return Chunk(
        index=index,
        text=text[cs:ce],
        header=header,
        page_start=units[0].page,
        page_end=units[-1].page,
        char_start=cs,
        char_end=ce,
        token_count=header_tokens + 1 + sum(u.tokens for u in units),
        page_breaks=breaks,
        strategy=strategy,
    )


def chunk_sentences(
    pages: list[Page],
    counter: TokenCounter,
    title: str,
    max_tokens: int = 160,
    overlap_sentences: int = 1,
) -> list[Chunk]:
    """Pack whole sentences into chunks of at most ``max_tokens`` word pieces (header included).

    Consecutive chunks share their last/first ``overlap_sentences`` sentences. Chunks may span
    pages. ``max_tokens`` is capped at the model's ``max_content_tokens``.

    Returns chunks in document order with ``index`` 0..n-1. Raises ``ValueError`` if the header
    alone leaves no room for text.
    """
    max_tokens = min(max_tokens, counter.max_content_tokens)
    header = title.strip()
    header_tokens = counter.count_tokens([header])[0] if header else 0
    budget = max_tokens - header_tokens - 2  # the newline after the header, plus rounding slack
    if budget < 16:
        raise ValueError(f"chunk budget too small: header takes {header_tokens} of {max_tokens} tokens")
    text, units = sentence_units(pages, counter, budget)
    _, page_starts = document_text(pages)
    chunks: list[Chunk] = []
    current: list[Unit] = []
    used = 0
    i = 0
    while i < len(units):
        u = units[i]
        if current and used + u.tokens > budget:
            chunks.append(_make_chunk(len(chunks), text, page_starts, current, header, header_tokens, "sentence"))
            keep = current[-overlap_sentences:] if overlap_sentences else []
            # overlap only when it leaves room for new text
            while keep and sum(k.tokens for k in keep) > budget // 2:
                keep = keep[1:]
            current, used = list(keep), sum(k.tokens for k in keep)
        current.append(u)
        used += u.tokens
        i += 1
    if current:
        chunks.append(_make_chunk(len(chunks), text, page_starts, current, header, header_tokens, "sentence"))
    return chunks

"""Chunks never cut an atomic unit, checked on every real PDF of tests/data and samples/: a table row, a
small table (header with its rows: a vote tally, a key-value block), the real header row repeated
over each part of a long table, a SQL statement (one longer than a chunk: each clause), a list item
(one longer than a chunk: cut at sentence ends only), and no ``(cid:NN)`` codes or running footers
in chunk text."""

from __future__ import annotations

import pytest

from ragaudit.ingest.chunking import (
    DEFAULT_STRATEGY,
    _tables,
    chunk_document,
    code_clauses,
    code_statements,
    document_list_items,
    document_text,
    document_title,
)
from ragaudit.text.lines import continues
from ragaudit.text.sentences import sentence_spans
from tests.conftest import DATA, SAMPLES
from tests.pdf_pages import pages as extract_pages_once

PDFS = sorted([*DATA.glob("*.pdf"), *(DATA / "ntsb").glob("*.pdf"), *SAMPLES.glob("*.pdf")], key=lambda p: p.name)
pytestmark = pytest.mark.slow


def check_invariants(pages, chunks, counter, budget_tokens: int, atomic: bool = False) -> list[str]:
    """Violations (empty when every invariant holds). ``budget_tokens``: the unit budget the
    chunker used (tables up to 80% of it must be whole). ``atomic``: check SQL statements and
    list items too (the chunker's ``atomic_units`` option)."""
    problems = []
    text, starts = document_text(pages)
    spans = [(c.char_start, c.char_end) for c in chunks]

    def inside(a: int, b: int) -> bool:
        return any(s <= a and b <= e for s, e in spans)

    for page, start in zip(pages, starts):
        rows, tables = _tables(page.text)
        for a, b, _ in rows:
            if not inside(start + a, start + b):
                problems.append(f"p.{page.number}: row cut: {page.text[a:b][:80]!r}")
        for t in tables:
            a, b = start + t.extent[0], start + t.extent[1]
            n = counter.count_tokens([text[a:b]])[0]
            if n <= 0.8 * budget_tokens - 8 and not inside(a, b):
                problems.append(f"p.{page.number}: small table ({n} word pieces) cut: {text[a:b][:80]!r}")
            elif t.header and n > 0.8 * budget_tokens:
                for c in chunks:
                    has_row = any(
                        c.char_start <= start + ra and start + rb <= c.char_end
                        for ra, rb, tid in rows
                        if tables[tid] is t
                    )
                    if has_row and t.header not in c.header and t.header not in c.text:
                        problems.append(
                            f"p.{page.number}: chunk {c.index} has rows without the header {t.header[:60]!r}"
                        )
        if not atomic:
            continue
        # SQL: a statement that fits is whole in a chunk; a longer one is cut between clauses only
        # (a clause longer than a chunk is the documented exception)
        stmts = code_statements(page.text)
        for a, b in stmts:
            n = counter.count_tokens([page.text[a:b]])[0]
            if n <= budget_tokens and not inside(start + a, start + b):
                problems.append(f"p.{page.number}: SQL statement ({n} word pieces) cut: {page.text[a:b][:60]!r}")
            elif n > budget_tokens:
                for ca, cb in code_clauses(page.text, [(a, b)]):
                    m = counter.count_tokens([page.text[ca:cb]])[0]
                    if m <= budget_tokens and not inside(start + ca, start + cb):
                        problems.append(f"p.{page.number}: SQL clause cut: {page.text[ca:cb][:60]!r}")
    # list items: one that fits is whole in a chunk; a longer one is cut at sentence ends only (a
    # sentence longer than a chunk is the documented exception)
    sentences: list[tuple[int, int]] = []
    items = document_list_items(pages) if atomic else []  # document offsets; a sentence broken by a page break is one
    for page, start in zip(pages, starts):
        for k, (a, b) in enumerate(sentence_spans(page.text)):
            if k == 0 and sentences and continues(text[sentences[-1][0] : sentences[-1][1]], page.text[a:b]):
                sentences[-1] = (sentences[-1][0], start + b)
            else:
                sentences.append((start + a, start + b))
    sentence_ends = {b for _, b in sentences}
    long_sentences = [
        (a, b)
        for (a, b), n in zip(sentences, counter.count_tokens([text[a:b] for a, b in sentences]))
        if n > budget_tokens
    ]
    for a, b in items:
        n = counter.count_tokens([text[a:b]])[0]
        if n <= budget_tokens:
            if not inside(a, b):
                problems.append(f"list item ({n} word pieces) cut: {text[a:b][:60]!r}")
            continue
        for c in chunks:
            if (
                a < c.char_end < b
                and c.char_end not in sentence_ends
                and not any(x <= c.char_end <= y for x, y in long_sentences)
            ):
                problems.append(f"long list item cut mid-sentence: {text[c.char_end - 40 : c.char_end]!r}")
    for c in chunks:
        if "(cid:" in c.text:
            problems.append(f"chunk {c.index}: (cid:NN) in text")
    if atomic and len(chunks) > 1:
        # the last chunk is the document's last full window: no chunk before it is left with
        # nothing of its own (all its text past the chunk before it inside the last one)
        last = chunks[-1]
        for prev, c in zip([None] + chunks[:-2], chunks[:-1]):
            if not text[max(c.char_start, prev.char_end if prev else 0) : last.char_start].strip():
                problems.append(f"chunk {c.index} repeats the last chunk")
    return problems


def _chunks(path, embedder, atomic: bool | None):
    """Chunks of ``path`` with ``atomic_units`` (None: the chunker's default) and the unit budget."""
    pages = extract_pages_once(path)
    title = document_title(path.name, pages)
    max_tokens = 200
    kw = {} if atomic is None else {"atomic_units": atomic}
    chunks = chunk_document(pages, embedder, title, DEFAULT_STRATEGY, max_tokens, **kw)
    return pages, chunks, max_tokens - embedder.count_tokens([title])[0] - 8


@pytest.mark.parametrize("path", PDFS, ids=[p.name for p in PDFS])
def test_chunks_keep_rows_and_small_tables_whole(path, embedder):
    """fails if a chunk boundary falls inside a table row, splits a table small enough for one
    chunk (header from its rows), leaves rows of a long table without its header row, or keeps
    ``(cid:NN)`` codes. Checked with ``atomic_units`` off (a setting: sentence and row packing alone)."""
    pages, chunks, budget = _chunks(path, embedder, atomic=False)
    problems = check_invariants(pages, chunks, embedder, budget)
    assert not problems, "\n".join(problems[:20])


@pytest.mark.parametrize("path", PDFS, ids=[p.name for p in PDFS])
def test_atomic_units_keep_sql_statements_and_list_items_whole(path, embedder):
    """With ``atomic_units``: fails if a chunk boundary cuts a SQL statement that fits in a chunk
    (or a clause of a longer one), cuts a list item that fits (or a longer one mid-sentence),
    breaks any table invariant above, or leaves a chunk before the last with nothing of its own
    (the last chunk is the document's last full window)."""
    pages, chunks, budget = _chunks(path, embedder, atomic=True)
    problems = check_invariants(pages, chunks, embedder, budget, atomic=True)
    assert not problems, "\n".join(problems[:20])


def test_a_table_header_above_a_group_label_is_the_tables_header(embedder):
    """NVIDIA's revenue-by-market table (the external probe set's Q3 FY2024 10-Q) prints its header
    ("Three Months Ended Nine Months Ended / October 29, October 30, ... / 2023 2022 2023 2022 /
    (In millions)") over the group label "Revenue:" and then the rows. The group label stopped the
    header search, so the table had no header and its rows' chunk began at "Revenue:" with no
    period or year over its columns. Fails if the header is not found through the group label, or
    if the rows' chunk holds no header (in its text or its context header)."""
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "bench" / "probes" / "external" / "pdfs" / "2023 Q3 NVDA.pdf"
    pages = extract_pages_once(path)
    page = next(p for p in pages if "Data Center $ 14,514" in p.text)
    _, tables = _tables(page.text)
    t = next(t for t in tables if "Data Center $ 14,514" in page.text[t.extent[0] : t.extent[1]])
    assert t.header.startswith("Three Months Ended Nine Months Ended | October 29,"), t.header
    assert "2023 2022 2023 2022" in t.header and "(In millions)" in t.header, t.header
    chunks = chunk_document(pages, embedder, document_title(path.name, pages), DEFAULT_STRATEGY, 200, embedder=embedder)
    c = next(c for c in chunks if "Data Center $ 14,514" in c.text)
    assert "Nine Months Ended" in c.header + "\n" + c.text, (c.header, c.text[:200])

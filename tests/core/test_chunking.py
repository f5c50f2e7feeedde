"""The sentence chunker on a real PDF: budgets under the model limit, exact offsets and pages."""

import re

import pytest

from ragaudit.ingest.chunking import Strategy, chunk_document, chunk_sentences, document_text, document_title
from ragaudit.ingest.pdf import extract_pages
from ragaudit.text.sentences import sentence_spans, window_spans
from tests.conftest import DATA, SAMPLES


@pytest.fixture(scope="module")
def dmca_pages():
    return extract_pages((SAMPLES / "dmca.pdf").read_bytes())


def test_chunks_stay_under_model_limit_and_budget(dmca_pages, embedder):
    """Fails if a chunk passes the budget (with atomic units, the default, every chunk but the last,
    which is the document's last full window up to the model's limit; off, every chunk), or if a
    chunk's recorded token count is off by more than 2 word pieces."""
    title = document_title("dmca.pdf", dmca_pages)
    chunks = chunk_sentences(dmca_pages, embedder, title, max_tokens=160)
    real = embedder.count_tokens([c.indexed_text for c in chunks])
    assert max(real[:-1]) <= 160 <= embedder.max_content_tokens and real[-1] <= embedder.max_content_tokens
    assert all(abs(r - c.token_count) <= 2 for r, c in zip(real, chunks))
    off = chunk_document(dmca_pages, embedder, title, "sentence", 160, atomic_units=False)
    assert max(embedder.count_tokens([c.indexed_text for c in off])) <= 160
    # a budget above the model's limit is capped at the limit
    big = chunk_sentences(dmca_pages, embedder, "dmca", max_tokens=10_000)
    assert max(embedder.count_tokens([c.indexed_text for c in big])) <= embedder.max_content_tokens


def test_offsets_pages_and_header(dmca_pages, embedder):
    text, starts = document_text(dmca_pages)
    chunks = chunk_sentences(dmca_pages, embedder, "THE DMCA", max_tokens=160)
    assert [c.index for c in chunks] == list(range(len(chunks)))
    for c in chunks:
        assert text[c.char_start : c.char_end] == c.text
        assert c.page_start >= 1 and c.page_start <= c.page_end <= 18
        assert c.indexed_text.startswith("THE DMCA") and c.indexed_text.endswith(c.text)
        # every page break inside the chunk points at that page's text
        for page, off in c.page_breaks[1:]:
            assert c.char_start + off == starts[page - 1]
    assert chunks[0].page_start == 1 and chunks[-1].page_end == 18
    # the sentence split across pages 17 and 18 is in one chunk spanning both pages
    assert any(c.page_start == 17 and c.page_end == 18 for c in chunks)


def test_sentences_are_never_cut_and_overlap(dmca_pages, embedder):
    chunks = chunk_sentences(dmca_pages, embedder, "dmca", max_tokens=120, overlap_sentences=1)
    text, _ = document_text(dmca_pages)
    ends = set()
    starts = set()
    for p_start, page in zip(document_text(dmca_pages)[1], dmca_pages):
        for s, e in sentence_spans(page.text):
            starts.add(p_start + s)
            ends.add(p_start + e)
    spans = sorted(zip(sorted(starts), sorted(ends)))
    budget = 120 - embedder.count_tokens(["dmca"])[0] - 8
    for c in chunks:
        for pos, edges in ((c.char_start, starts), (c.char_end, ends)):
            if pos in edges:
                continue
            # only a sentence longer than the budget may be cut, at word-piece boundaries
            s, e = next((s, e) for s, e in spans if s <= pos <= e)
            assert embedder.count_tokens([text[s:e]])[0] > budget
    overlaps = sum(1 for a, b in zip(chunks, chunks[1:]) if b.char_start < a.char_end)
    assert overlaps >= len(chunks) // 2


def test_page_at_maps_quotes_to_pages(dmca_pages, embedder):
    chunks = chunk_sentences(dmca_pages, embedder, "dmca", max_tokens=160)
    c = next(c for c in chunks if c.page_start == 17 and c.page_end == 18)
    page18_offset = dict(c.page_breaks)[18]
    assert c.page_at(0) == 17 and c.page_at(page18_offset) == 18


def test_cjk_sentences_split(embedder):
    pages = extract_pages((DATA / "chinese-tables.pdf").read_bytes())
    spans = sentence_spans(pages[0].text)
    assert any(pages[0].text[s:e].endswith("。") for s, e in spans)
    chunks = chunk_sentences(pages, embedder, "chinese-tables", max_tokens=160)
    joined = re.sub(r"\s+", "", "".join(c.text for c in chunks))
    assert "各类授信额度总额达372.53亿元" in joined


@pytest.fixture(scope="module")
def redp_pages():
    return extract_pages((DATA / "redp5110_sampled.pdf").read_bytes())


@pytest.mark.parametrize("strategy", [s.value for s in Strategy])
def test_each_strategy_on_a_real_pdf(strategy, redp_pages, embedder):
    """Page spans, offsets, headers and the model limit hold for every strategy."""
    title = document_title("redp5110_sampled.pdf", redp_pages)
    assert "Row and Column Access Control" in title  # largest heading of page 1, not "Front cover"
    text, starts = document_text(redp_pages)
    chunks = chunk_document(redp_pages, embedder, title, strategy, max_tokens=180, embedder=embedder)
    assert chunks and [c.index for c in chunks] == list(range(len(chunks)))
    real = embedder.count_tokens([c.indexed_text for c in chunks])
    # the budget holds for every chunk but the last (a short tail may join it); the model limit for all
    assert max(real[:-1]) <= 180 <= embedder.max_content_tokens and real[-1] <= embedder.max_content_tokens
    for c, _n in zip(chunks, real):
        assert text[c.char_start : c.char_end] == c.text
        assert c.page_start >= 1 and c.page_start <= c.page_end <= len(redp_pages)
        assert starts[c.page_start - 1] <= c.char_start and c.char_end <= starts[c.page_end - 1] + len(
            redp_pages[c.page_end - 1].text
        )
        assert c.indexed_text.startswith(title)
    covered = "".join(c.text for c in chunks)
    assert "CHGFCNUSG FCNID(QIBM_DB_SECADM)" in covered
    if strategy != "fixed":
        # heading paths come from font sizes
        assert any("Security fundamentals" in c.section for c in chunks)
    if strategy == "heading":
        # a new chunk starts at each heading
        assert any(c.text.startswith("1.2 Current state of IBM i security") for c in chunks)


@pytest.mark.parametrize("atomic_units", [False, True])
def test_a_documents_last_line_joins_the_last_chunk(redp_pages, embedder, atomic_units):
    """The back cover ends with the publication number: it stays with the text that says what the
    publication is instead of starting a chunk that repeats the page before it. With atomic units
    (whole statements on page 16 move every later boundary) fails if the last chunk is not filled
    back as the document's last window (``full_tail``): REDP-5110-00 then ends a 115-word-piece
    tail without that text."""
    title = document_title("redp5110_sampled.pdf", redp_pages)
    chunks = chunk_document(redp_pages, embedder, title, "sentence", max_tokens=200, atomic_units=atomic_units)
    last = chunks[-1]
    assert last.text.rstrip().endswith("REDP-5110-00")
    assert "This IBM Redpaper" in last.text or "publication helps you" in last.text
    assert sum("REDP-5110-00" in c.text for c in chunks) == 1
    assert embedder.count_tokens([last.indexed_text])[0] <= embedder.max_content_tokens


def test_table_rows_carry_caption_and_header(embedder):
    pages = extract_pages((DATA / "karpukhin2020-dpr.pdf").read_bytes())
    chunks = chunk_document(pages, embedder, document_title("karpukhin2020-dpr.pdf", pages), "sentence", 200)
    c = next(c for c in chunks if "None BM25 59.1 66.9" in c.text)
    assert "Table 2: Top-20 & Top-100 retrieval accuracy" in c.header
    assert "NQ TriviaQA WQ TREC SQuAD" in c.header
    assert "None BM25 59.1 66.9 55.0 70.9 68.8" in c.text.replace("\n", " ")  # rows stay whole


def test_window_spans_pack_whole_sentences(dmca_pages, embedder):
    chunks = chunk_sentences(dmca_pages, embedder, "dmca", max_tokens=200)
    for c in chunks[:10]:
        spans = window_spans(c.text, embedder, 64)
        assert spans[0][0] == 0 or not c.text[: spans[0][0]].strip()
        sentences = sentence_spans(c.text)
        assert {s for s, _ in spans} <= {s for s, _ in sentences} and {e for _, e in spans} <= {e for _, e in sentences}
        for (_a, b), (a2, _) in zip(spans, spans[1:]):
            assert b <= a2
        for a, b in spans:
            n = embedder.count_tokens([c.text[a:b]])[0]
            one_sentence = sum(1 for s, e in sentences if a <= s and e <= b) == 1
            assert n <= 64 + 2 or one_sentence


def test_abbreviation_before_a_number_does_not_end_a_sentence():
    """fails if ``_join_abbreviations`` is removed: pysbd ends a sentence at "Cat." and the
    catalogue number then starts the next sentence, so a chunk boundary can fall between them."""
    text = "For the Privacy Act Notice, see page 32. Cat. No. 11364D Form 1040NR (2007)\nNext line here."
    spans = [text[s:e] for s, e in sentence_spans(text)]
    assert spans[0] == "For the Privacy Act Notice, see page 32."
    assert spans[1].startswith("Cat. No. 11364D Form 1040NR (2007)")
    # a real sentence end before a number on the next line is kept
    text2 = "The vote was held in May.\n2023 results follow."
    assert [text2[s:e] for s, e in sentence_spans(text2)][0] == "The vote was held in May."


def test_catalogue_number_of_a_real_form_stays_whole_in_a_chunk(embedder):
    """IRS Form 1040NR (2007), chunked as ingestion does. fails if a chunk
    boundary falls between "Cat." and "No. 11364D" (the abbreviation taken for a sentence end)."""
    from ragaudit.ingest.chunking import DEFAULT_STRATEGY

    path = DATA / "f1040nr.pdf"
    pages = extract_pages(path.read_bytes())
    chunks = chunk_document(pages, embedder, document_title(path.name, pages), DEFAULT_STRATEGY, 200)
    assert any("Cat. No. 11364D" in " ".join(c.text.split()) for c in chunks)
    assert not any(" ".join(c.text.split()).endswith("Cat.") for c in chunks)

"""Scope enforcement (``ragaudit/retrieve/scope.py``) on chunk payloads shaped as ingestion writes them; each test
names the mutation it kills. The end-to-end property test is ``tests/test_audit_claims.py``."""

from ragaudit.retrieve.scope import admits, clip_to_pages, enforce_scope
from ragaudit.types import RetrievedChunk, Scope


def _payload(**kw):
    p = {
        "doc_name": "dmca.pdf",
        "knowledge_base": "law",
        "document_id": "d1",
        "strategy": "sentence",
        "primary": True,
        "page_start": 4,
        "page_end": 6,
        "text": "Page four text. Page five text. Page six text.",
        "page_breaks": [[4, 0], [5, 16], [6, 32]],
    }
    p.update(kw)
    return p


def test_admits_checks_every_field():
    """Fails if any condition of ``admits`` is dropped or inverted: doc_names, knowledge_base,
    document_ids, strategy, the primary-strategy default, page_min or page_max (bounds inclusive)."""
    p = _payload()
    assert admits(Scope(), p)
    assert admits(Scope(doc_names=["x.pdf", "dmca.pdf"]), p) and not admits(Scope(doc_names=["x.pdf"]), p)
    assert admits(Scope(knowledge_base="law"), p) and not admits(Scope(knowledge_base="other"), p)
    assert admits(Scope(document_ids=["d0", "d1"]), p) and not admits(Scope(document_ids=["d2"]), p)
    assert admits(Scope(strategy="sentence"), p) and not admits(Scope(strategy="fixed"), p)
    assert not admits(Scope(), _payload(primary=False))  # unset strategy: the primary one only
    assert admits(Scope(strategy="fixed"), _payload(primary=False, strategy="fixed"))
    assert admits(Scope(), _payload(primary=None))  # chunks written before the flag existed
    assert admits(Scope(page_min=6), p) and not admits(Scope(page_min=7), p)
    assert admits(Scope(page_max=4), p) and not admits(Scope(page_max=3), p)
    assert admits(Scope(page_min=5, page_max=5), p)


def test_clip_keeps_only_the_pages_in_range():
    """Fails if clipping keeps a page outside the range, mis-rebases the page breaks, changes
    the payload it was given, or returns a copy when nothing needs cutting."""
    p = _payload()
    out = clip_to_pages(p, 5, 5)
    assert out["text"] == "Page five text. " and (out["page_start"], out["page_end"]) == (5, 5)
    assert out["page_breaks"] == [[5, 0]] and out["clipped_pages"] == [5, 5]
    assert p["text"].startswith("Page four") and p["page_start"] == 4  # the original is untouched
    out = clip_to_pages(p, 5, None)
    assert out["text"] == "Page five text. Page six text." and out["page_breaks"] == [[5, 0], [6, 16]]
    assert clip_to_pages(p, None, 4)["text"] == "Page four text. "
    assert clip_to_pages(p, 4, 6) is p and clip_to_pages(p, None, None) is p
    assert clip_to_pages(p, 7, 9) is None
    assert clip_to_pages(_payload(text="   \n  Page six text.", page_breaks=[[4, 0], [5, 1], [6, 6]]), 4, 5) is None


def test_clip_without_a_break_at_offset_zero_starts_on_page_start():
    """Fails if text before the first page break is not assigned to ``page_start``."""
    p = _payload(page_start=4, page_end=5, text="Tail of four. Page five.", page_breaks=[[5, 14]])
    assert clip_to_pages(p, 5, 5)["text"] == "Page five."
    assert clip_to_pages(p, 4, 4)["text"] == "Tail of four. "


def test_enforce_drops_clips_reranks_and_says_so():
    """Fails if ``enforce_scope`` keeps an out-of-scope chunk, skips clipping, leaves gaps in the
    ranks, or stays silent about what it changed."""
    chunks = [
        RetrievedChunk(rank=i, chunk_id=f"c{i}", score=1.0, payload=p)
        for i, p in enumerate(
            [
                _payload(doc_name="other.pdf"),
                _payload(),
                _payload(page_start=5, page_end=5, text="Five.", page_breaks=[[5, 0]]),
            ],
            start=1,
        )
    ]
    kept, notes = enforce_scope(Scope(doc_names=["dmca.pdf"], page_min=5, page_max=5), chunks)
    assert [c.chunk_id for c in kept] == ["c2", "c3"] and [c.rank for c in kept] == [1, 2]
    assert kept[0].text == "Page five text. " and kept[0].page_start == 5
    assert any("1 chunk(s) outside the scope" in n for n in notes)
    assert any("1 chunk(s) spanning pages" in n for n in notes)
    kept, notes = enforce_scope(Scope(), chunks[1:])
    assert len(kept) == 2 and notes == []


def test_enforce_counts_every_dropped_and_clipped_chunk_and_goes_on_after_one():
    """Fails if a dropped or clipped chunk is counted as ``= 1`` / ``-= 1`` / ``+= 2``, or if the loop
    stops (``break``) at the first chunk left out, or at a chunk whose in-range part is blank."""
    blank = _payload(text="   Page five text.", page_breaks=[[4, 0], [5, 3]], page_start=4, page_end=5)
    chunks = [
        RetrievedChunk(rank=i, chunk_id=f"c{i}", score=1.0, payload=p)
        for i, p in enumerate(
            [_payload(doc_name="a.pdf"), _payload(doc_name="b.pdf"), blank, _payload(), _payload()], start=1
        )
    ]
    kept, notes = enforce_scope(Scope(doc_names=["dmca.pdf"], page_min=4, page_max=4), chunks)
    assert [c.chunk_id for c in kept] == ["c4", "c5"]
    assert notes == [
        "scope: 3 chunk(s) outside the scope left out (e.g. a neighbouring chunk past page_max)",
        "scope: 2 chunk(s) spanning pages outside page_min..page_max were cut to the pages inside",
    ]


def test_clip_without_page_breaks_and_with_a_first_break_past_offset_zero():
    """Fails if a payload without ``page_breaks`` is not read as one page starting at ``page_start``
    (``if breaks or ...`` raises IndexError), or if a first break at offset 1 drops the text before it."""
    p = _payload(page_start=4, page_end=5, text="All on four.", page_breaks=[])
    assert clip_to_pages(p, 4, 4)["text"] == "All on four."
    assert clip_to_pages(p, 5, 5) is None
    q = _payload(page_start=4, page_end=5, text="xPage five.", page_breaks=[[5, 1]])
    assert clip_to_pages(q, 4, 4)["text"] == "x"

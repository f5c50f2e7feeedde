"""Scope enforcement: the one check every retrieved chunk passes before anyone sees it.

Qdrant applies the scope's filter (``ragaudit.index.store.scope_filter``) to both retrieval legs,
but chunks also arrive by other ways (neighbour expansion fetches points by id; a reranker
reorders a pool; a cache replays a reply). ``enforce_scope`` is called once, at the single exit of ``Retriever.retrieve``, which
``/query``, ``/query/stream``, ``/search``, the CLI and evaluation all go through (cached replies
are keyed on the scope and were enforced when first computed). It

- drops a chunk whose payload does not match the scope (``admits``: the conditions the Qdrant
  filter is built from, ``ragaudit.types.Scope.conditions``: doc_names, knowledge_base,
  document_ids, strategy or, unset, the document's primary strategy, page range overlapping the
  chunk's page span), and
- clips a chunk that straddles the page range to its pages inside the range (``clip_to_pages``),
  so no sentence outside the range can be shown or cited; its text, page span and page breaks
  are those of the kept pages.
"""

from __future__ import annotations

import copy
from typing import Any

from ragaudit.types import ChunkPayload, Scope


def admits(scope: Scope, payload: ChunkPayload | dict[str, Any]) -> bool:
    """True when a chunk with ``payload`` is inside ``scope``: ``Scope.admits``, read from the same
    conditions as the Qdrant filter (``ragaudit.types.Scope.conditions``). Every set field matches
    (values inside one field are OR-ed); the page span ``[page_start, page_end]`` overlaps
    ``[page_min, page_max]`` (inclusive, 1-based); staged chunks (``live`` false) never match."""
    return scope.admits(payload)


def _pages_kept(
    payload: dict[str, Any], page_min: int | None, page_max: int | None
) -> list[tuple[int, int, int]] | None:
    """The ``(page, start, end)`` text segments of ``payload`` on pages in ``[page_min, page_max]``
    (``None`` bounds are open), from its ``page_breaks``; ``None`` when no text is left."""
    lo = page_min if page_min is not None else -1
    hi = page_max if page_max is not None else 1 << 30
    start = int(payload.get("page_start") or 0)
    text = payload.get("text", "")
    breaks = sorted((int(p), int(o)) for p, o in (payload.get("page_breaks") or []))
    if not breaks or breaks[0][1] > 0:
        breaks = [(start, 0)] + breaks
    segments = []  # (page, start offset, end offset)
    for i, (p, o) in enumerate(breaks):
        e = breaks[i + 1][1] if i + 1 < len(breaks) else len(text)
        segments.append((p, o, e))
    kept = [seg for seg in segments if lo <= seg[0] <= hi and seg[2] > seg[1]]
    if not kept or not text[kept[0][1] : kept[-1][2]].strip():
        return None
    return kept


def page_range_span(payload: dict[str, Any], page_min: int | None, page_max: int | None) -> tuple[int, int] | None:
    """Character offsets ``(start, end)`` of the part of ``payload["text"]`` on the pages in
    ``[page_min, page_max]`` (the whole text when its page span lies inside), or ``None`` when
    no text is left there. ``clip_to_pages`` cuts a payload to it."""
    start, end = int(payload.get("page_start") or 0), int(payload.get("page_end") or 0)
    if (page_min is None or page_min <= start) and (page_max is None or end <= page_max):
        return 0, len(payload.get("text", ""))
    kept = _pages_kept(payload, page_min, page_max)
    return None if kept is None else (kept[0][1], kept[-1][2])


def clip_to_pages(payload: dict[str, Any], page_min: int | None, page_max: int | None) -> dict[str, Any] | None:
    """``payload`` with its text cut to the pages in ``[page_min, page_max]`` (``None`` bounds are
    open), using its ``page_breaks`` (``[[page, offset in text], ...]``). Returns the payload itself
    when nothing is cut, a modified copy when something is (``page_start``/``page_end``/``page_breaks``
    rebased, ``clipped_pages`` = ``[first, last]`` kept), or ``None`` when no text is left."""
    start, end = int(payload.get("page_start") or 0), int(payload.get("page_end") or 0)
    if (page_min is None or page_min <= start) and (page_max is None or end <= page_max):
        return payload
    kept = _pages_kept(payload, page_min, page_max)
    if kept is None:
        return None
    a, b = kept[0][1], kept[-1][2]
    out = copy.deepcopy(payload)
    out.update(
        text=payload.get("text", "")[a:b],
        page_start=kept[0][0],
        page_end=kept[-1][0],
        page_breaks=[[p, o - a] for p, o, _ in kept],
        clipped_pages=[kept[0][0], kept[-1][0]],
    )
    return out


def enforce_scope(scope: Scope, chunks: list[Any]) -> tuple[list[Any], list[str]]:
    """Keep the chunks (objects with a ``payload`` dict, e.g. ``RetrievedChunk``) inside ``scope``,
    clipped to its page range; in order, re-ranked 1..n. Returns ``(kept, notes)``: a note for
    each kind of change made."""
    kept, dropped, clipped = [], 0, 0
    for c in chunks:
        if not admits(scope, c.payload):
            dropped += 1
            continue
        p = clip_to_pages(c.payload, scope.page_min, scope.page_max)
        if p is None:
            dropped += 1
            continue
        if p is not c.payload:
            clipped += 1
            c.payload = p
        kept.append(c)
    for i, c in enumerate(kept, start=1):
        c.rank = i
    notes = []
    if dropped:
        notes.append(f"scope: {dropped} chunk(s) outside the scope left out (e.g. a neighbouring chunk past page_max)")
    if clipped:
        notes.append(
            f"scope: {clipped} chunk(s) spanning pages outside page_min..page_max were cut to the pages inside"
        )
    return kept, notes

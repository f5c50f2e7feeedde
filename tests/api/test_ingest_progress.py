"""``ragaudit ingest`` progress rendering: plain lines off a terminal, a tqdm bar on one."""

from __future__ import annotations

import io

from ragaudit.api.ingest_progress import IngestProgress


def _feed(p: IngestProgress) -> None:
    p.listener(None, {"file": "a.pdf", "index": 0, "total": 2, "status": "parsing"})
    p.listener("d1", {"file": "a.pdf", "index": 0, "total": 2, "status": "registered", "needs_run": True})
    p.listener("d1", {"status": "extracting", "pages_done": 0, "pages_total": 0})
    p.listener("d1", {"pages_done": 4, "pages_total": 4})
    p.listener("d1", {"status": "chunking"})
    p.listener("d1", {"status": "embedding", "chunks_done": 0, "chunks_total": 9})
    for k in range(1, 10):
        p.listener("d1", {"chunks_done": k})
    p.listener("d1", {"status": "indexing", "chunks_done": 9})
    p.listener("unknown-doc", {"status": "embedding"})  # another process's document: ignored
    p.result("ingested  a.pdf: 4 pages")


def test_plain_lines_when_not_a_terminal():
    """One line per stage change naming the file and its position, counter updates of the same
    stage throttled but the one that completes it (embedding 9/9), results on stdout only. Fails if
    every counter update prints a line, a stage or its completion is missing, a foreign document
    shows up, or results go to stderr."""
    err, out = io.StringIO(), io.StringIO()
    p = IngestProgress(2, stream=err, out=out, tty=False, every_s=60)
    _feed(p)
    p.close()
    assert err.getvalue().splitlines() == [
        "[1/2] a.pdf: parsing",
        "[1/2] a.pdf: extracting",
        "[1/2] a.pdf: chunking 4 pages",
        "[1/2] a.pdf: embedding 0/9 chunks",
        "[1/2] a.pdf: embedding 9/9 chunks",
        "[1/2] a.pdf: indexing 9 chunks",
    ]
    assert out.getvalue() == "ingested  a.pdf: 4 pages\n"


def test_tqdm_bar_on_a_terminal():
    """On a terminal the bar counts files and its description shows the file's stage with
    counters. Fails if no bar is drawn or the stage text is missing."""
    err, out = io.StringIO(), io.StringIO()
    p = IngestProgress(2, stream=err, out=out, tty=True)
    _feed(p)
    drawn = err.getvalue()
    p.close()
    assert "[1/2] a.pdf: embedding 9/9 chunks" in drawn and "1/2" in drawn
    assert "[1/2] a.pdf: indexing 9 chunks" in drawn
    assert out.getvalue() == "ingested  a.pdf: 4 pages\n"

"""Bulk ingestion (``ragaudit ingest``): one Dagster run for the batch, each PDF validated and
extracted once in a bounded child process ahead of the one being embedded, the same chunks as
the per-document asset job, and per-file / per-stage progress on stderr."""

from __future__ import annotations

import re

import numpy as np
import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from ragaudit.ingest import documents as ingest
from ragaudit.ingest.bulk import BulkFile
from ragaudit.pipelines.runner import DagsterRunner, instance_for, run_bulk
from ragaudit.platform.db import ChunkRow
from ragaudit.services import get_services, release_services
from tests.conftest import BAD, SAMPLES, make_settings

FILES = [SAMPLES / "20071229X02007.pdf", BAD / "zero-byte.pdf", SAMPLES / "20080102X00002.pdf"]


@pytest.fixture()
def svc(tmp_path, embedder):
    settings = make_settings(tmp_path / "bulk")
    s = get_services(settings)
    yield s
    release_services(settings)


def _chunks(svc, document_id: str) -> list[tuple]:
    with svc.sessions() as s:
        return [
            tuple(r)
            for r in s.execute(
                select(ChunkRow.index, ChunkRow.page_start, ChunkRow.page_end, ChunkRow.text)
                .where(ChunkRow.document_id == document_id, ChunkRow.live.is_(True))
                .order_by(ChunkRow.index)
            ).all()
        ]


def test_bulk_is_one_run_parses_once_ahead_and_builds_the_same_chunks(svc, tmp_path, monkeypatch):
    """Three files (one bad) in one call: outcomes in order (ingested, refused with the same
    reason ``ingest_bytes`` gives, ingested), ONE Dagster run recorded, no validation or
    extraction in this process (the child did both), file 2 parsed before file 1 finished
    embedding, and chunk texts and page spans identical to the per-document asset job's.
    Fails if the batch launches a run per document, parses a file twice, parses only after the
    previous file is done (no overlap), or extracts/chunks differently from the asset job."""
    instance = instance_for(svc)
    runs_before = len(instance.get_runs())

    def no_second_parse(*a, **kw):
        raise AssertionError("bulk ingestion parsed a PDF again in the parent")

    monkeypatch.setattr(ingest, "inspect_pdf_bounded", no_second_parse)
    monkeypatch.setattr(ingest, "extract_pages_bounded", no_second_parse)
    events: list[tuple[str | None, dict]] = []
    listener = lambda doc_id, values: events.append((doc_id, dict(values)))  # noqa: E731
    ingest.add_progress_listener(listener)
    try:
        outs = run_bulk(svc, [BulkFile(p, p.name) for p in FILES])
    finally:
        ingest.remove_progress_listener(listener)
    assert [o.status for o in outs] == ["ingested", "refused", "ingested"], [(o.status, o.message) for o in outs]
    assert outs[1].error_code == "empty_file" and "0 bytes" in outs[1].message
    assert len(instance.get_runs()) == runs_before + 1
    # overlap: the third file (index 2) started parsing before the first document was indexed
    first_id = outs[0].document["id"]
    order = [("parse", v["index"]) if d is None else (d, v.get("status")) for d, v in events]
    assert order.index(("parse", 2)) < order.index((first_id, "indexing")), order
    assert {v.get("status") for d, v in events if d == first_id} >= {
        "registered",
        "extracting",
        "chunking",
        "embedding",
        "indexing",
    }

    # the per-document asset job on the same file, in another data folder: identical chunks
    monkeypatch.undo()
    other = make_settings(tmp_path / "per-doc")
    svc2 = get_services(other)
    try:
        ref = ingest.ingest_bytes(svc2, FILES[0].read_bytes(), FILES[0].name, DagsterRunner())
        assert ref.status == "ingested"
        assert _chunks(svc, first_id) == _chunks(svc2, ref.document["id"]) != []
    finally:
        release_services(other)
    for o in (outs[0], outs[2]):
        assert ingest.count_check(svc, o.document["id"])["passed"]


def test_embed_batched_keeps_order_and_reports_progress(svc):
    """Texts embedded in slices (several slices here) come back in their own order, each row
    equal to embedding that text alone; ``chunks_done`` only grows and ends at the number of chunks.
    Fails if the inverse permutation is wrong (vectors attached to the wrong chunk) or progress
    counts a chunk before all its windows are embedded."""
    texts = [("word " * n).strip() for n in (3, 40, 1, 17, 60, 5, 2, 33)] * 80
    owners = sorted(i // 3 for i in range(len(texts)))
    done: list[int] = []
    listener = lambda doc_id, values: done.append(values["chunks_done"]) if "chunks_done" in values else None  # noqa: E731
    ingest.add_progress_listener(listener)
    from ragaudit.platform.db import Document

    with svc.sessions.begin() as s:
        d = Document(
            doc_name="x.pdf",
            name_key="x.pdf",
            knowledge_base="default",
            sha256="0" * 64,
            size_bytes=1,
            strategy="sentence",
            status="embedding",
        )
        s.add(d)
        s.flush()
        doc_id = d.id
    try:
        vecs = ingest.embed_batched(svc, texts, owners, doc_id)
    finally:
        ingest.remove_progress_listener(listener)
    alone = np.stack([svc.embedder.embed([t])[0] for t in texts[:8]])
    assert np.allclose(vecs[:8], alone, atol=1e-5)
    assert done == sorted(done) and len(done) >= 3 and done[-1] == len(set(owners)), done


def test_cli_ingest_prints_per_file_and_per_stage_progress(tmp_path, monkeypatch, embedder):
    """``ragaudit ingest`` with stderr not a terminal: stderr has plain lines naming each file
    with its position and its stages (parsing, extracting, chunking, embedding with chunk
    counts, indexing); stdout has only the result lines. Fails if progress is silent, goes to
    stdout, or lacks a stage or a file."""
    from ragaudit.api.cli import app

    monkeypatch.setenv("RAGAUDIT_DATA_DIR", str(tmp_path / "cli"))
    for var in ("RAGAUDIT_DATABASE_URL", "RAGAUDIT_QDRANT_URL", "RAGAUDIT_LLM_MODEL"):
        monkeypatch.delenv(var, raising=False)
    try:
        res = CliRunner().invoke(app, ["ingest", str(FILES[0]), str(FILES[2])])
        assert res.exit_code == 0, res.output
        out = res.stdout.splitlines()
        assert [ln.split()[0] for ln in out] == ["ingested", "ingested"], res.stdout
        err = res.stderr
        for i, f in enumerate((FILES[0], FILES[2]), start=1):
            for stage in ("parsing", "extracting", "chunking", "embedding", "indexing"):
                assert f"[{i}/2] {f.name}: {stage}" in err, (stage, err)
        # the embedding line counts the document's chunks: the number the result line reports
        n = re.search(rf"{re.escape(FILES[0].name)}: \d+ pages?, (\d+) \w+ chunks", res.stdout)
        assert n and int(n.group(1)) > 1, res.stdout
        assert re.search(rf"\[1/2\] {re.escape(FILES[0].name)}: embedding \d+/{n.group(1)} chunks", err), err
    finally:
        release_services(make_settings(tmp_path / "cli"))


def test_parse_ahead_is_bounded_in_order_and_adds_a_parser_only_when_the_consumer_starves(svc, monkeypatch):
    """``ragaudit.ingest.bulk._ParseAhead`` with lookahead 1 on four real PDFs: while nobody consumes,
    only the first worker parses and stops after files 0 and 1; results come out in file order
    with each file's own pages; once the consumer waits for a file that is not parsed, the
    second worker parses too (two files in flight at once). Fails if parsing runs unbounded
    ahead, the second parser runs while the consumer is busy, or results are handed out of order."""
    import threading
    import time

    from ragaudit.ingest import bulk
    from ragaudit.ingest.pdf import extract_pages

    files = [
        SAMPLES / "20071229X02007.pdf",
        SAMPLES / "20080102X00002.pdf",
        SAMPLES / "dmca.pdf",
        SAMPLES / "20071229X02007.pdf",
    ]
    calls: list[tuple[str, int]] = []
    real = bulk.parse_pdf_bounded

    def recording(data, settings):
        idx = next(i for i, f in enumerate(files) if f.read_bytes() == data)
        calls.append((threading.current_thread().name, idx))
        return real(data, settings)

    monkeypatch.setattr(bulk, "parse_pdf_bounded", recording)
    p = bulk._ParseAhead(svc, [BulkFile(f, f.name) for f in files], lookahead=1).start()
    try:
        deadline = time.monotonic() + 120
        while len(p.results) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # room to (wrongly) claim more
        assert sorted(p.results) == [0, 1] and p.next == 2, (sorted(p.results), p.next)
        assert {name for name, _ in calls} == {"ragaudit-parse-ahead-0"}, calls
        got = [p.get(i) for i in range(len(files))]
    finally:
        p.stop()
    assert [g[0] for g in got] == [0, 1, 2, 3]
    for (_i, data, res, _), f in zip(got, files):
        info, pages, stats = res
        assert data == f.read_bytes() and [pg.text for pg in pages] == [pg.text for pg in extract_pages(data)]
        assert info.pages == len(pages) and stats["extract"] > 0
    assert "ragaudit-parse-ahead-1" in {name for name, _ in calls}, calls


def test_embedding_progress_moves_within_a_document_of_few_chunks(svc, monkeypatch):
    """A PDF of fewer chunks than one staging step: while it is embedded, ``chunks_done`` takes
    values between 0 and the number of chunks (one per slice of embedded texts), only grows, and
    ends at the number of chunks. Fails if progress moves only once per staging step (the UI
    then shows "embedding 0/N" until the document is done)."""
    monkeypatch.setattr(ingest, "EMBED_PROGRESS_BATCH", 8)
    monkeypatch.setattr(ingest, "PROGRESS_INTERVAL_S", 0.0)
    events: list[dict] = []
    listener = lambda doc_id, values: events.append(dict(values))  # noqa: E731
    ingest.add_progress_listener(listener)
    try:
        ref = ingest.ingest_bytes(svc, FILES[0].read_bytes(), FILES[0].name, DagsterRunner())
    finally:
        ingest.remove_progress_listener(listener)
    assert ref.status == "ingested"
    total = next(e["chunks_total"] for e in events if e.get("status") == "embedding")
    assert 1 < total < ingest.STAGE_BATCH_CHUNKS, total
    start = events.index(next(e for e in events if e.get("status") == "embedding"))
    end = events.index(next(e for e in events if e.get("status") == "indexing"))
    done = [e["chunks_done"] for e in events[start:end] if "chunks_done" in e]
    assert done == sorted(done) and done[-1] == total, done
    assert any(0 < d < total for d in done), done

"""Text PostgreSQL refuses and SQLite stores: U+0000. A PDF whose font draws a ligature without a
Unicode value ingests, and a question holding U+0000 loses no query_logs row, on a real server."""

import re

import pytest
from sqlalchemy import select

from ragaudit.ingest.documents import delete_document, ingest_bytes
from ragaudit.pipelines.runner import DagsterRunner
from ragaudit.platform.db import ChunkRow, QueryLog
from ragaudit.platform.telemetry import TelemetryWriter
from ragaudit.services import get_services, release_services
from tests.conftest import EDGE, make_settings

pytestmark = pytest.mark.integration

CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")


def test_a_ligature_without_unicode_value_ingests_on_postgres(pg_url, tmp_path, embedder):
    """Fails if the paper whose "ffi" glyph pdfminer reads as U+0000 does not ingest on PostgreSQL
    (which refuses U+0000 in text), or if its words are stored with a control character instead
    of the ligature ("difficulties")."""
    settings = make_settings(tmp_path / "pg-text", database_url=pg_url)
    svc = get_services(settings)
    try:
        out = ingest_bytes(
            svc, (EDGE / "copy-protected.pdf").read_bytes(), "copy-protected.pdf", DagsterRunner(), knowledge_base="nul"
        )
        assert out.status == "ingested", out.message
        with svc.sessions() as s:
            texts = s.scalars(select(ChunkRow.text).where(ChunkRow.document_id == out.document["id"])).all()
        assert texts and not any(CONTROL.search(t) for t in texts)
        assert any("practical difficulties" in " ".join(t.split()) for t in texts)
        delete_document(svc, out.document["id"])
    finally:
        release_services(settings)


class _OneBatch(TelemetryWriter):
    POLL_S = 1.0  # every row below is queued before the writer first looks: they go out as one batch


def test_a_row_postgres_refuses_does_not_drop_its_batch(pg_url, tmp_path):
    """Fails if a question holding U+0000 is not stored (with U+FFFD in its place), or if a row the
    database refuses for its own content (a mode longer than its column) drops the other rows
    written in the same batch."""
    settings = make_settings(tmp_path / "pg-rows", database_url=pg_url)
    svc = get_services(settings)
    writer = _OneBatch(svc.sessions, background=True, batch_size=10)
    try:
        ids = [writer.record(endpoint="search", question=f"good question {i}", mode="bm25", top_k=2) for i in range(3)]
        ids.append(writer.record(endpoint="search", question="bad\x00question", mode="bm25", top_k=2))
        refused = writer.record(endpoint="search", question="too long a mode", mode="m" * 40, top_k=2)
        ids += [writer.record(endpoint="search", question=f"late question {i}", mode="bm25", top_k=2) for i in range(3)]
        assert writer.flush(30)
        st = writer.stats()
        assert st["dropped"] == 1 and st["written"] == len(ids)
        with svc.sessions() as s:
            rows = {r.id: r for r in s.scalars(select(QueryLog).where(QueryLog.id.in_([*ids, refused])))}
        assert set(rows) == set(ids)
        assert rows[ids[3]].question == "bad\ufffdquestion"
    finally:
        writer.close()
        release_services(settings)

"""The same code path on a real PostgreSQL 15 server (started by the test session)."""

import pytest
from sqlalchemy import inspect, select

from ragaudit.ingest.documents import delete_document, ingest_bytes
from ragaudit.pipelines.runner import DagsterRunner
from ragaudit.platform.db import ChunkRow, Document, QueryLog, migrate
from ragaudit.query import QueryService
from ragaudit.services import get_services, release_services
from tests.conftest import BAD, DMCA_QUESTION, SAMPLES, make_settings

pytestmark = pytest.mark.integration


def test_ingest_query_delete_on_postgres(pg_url, tmp_path, embedder):
    settings = make_settings(tmp_path / "pg", database_url=pg_url)
    svc = get_services(settings)
    try:
        assert svc.engine.dialect.name == "postgresql"
        migrate(svc.engine)  # idempotent second run
        assert {"documents", "chunks", "qa_pairs", "query_logs", "alembic_version"} <= set(
            inspect(svc.engine).get_table_names()
        )
        out = ingest_bytes(svc, (SAMPLES / "dmca.pdf").read_bytes(), "dmca.pdf", DagsterRunner())
        assert out.status == "ingested"
        bad = ingest_bytes(svc, (BAD / "truncated-2kb-dpr.pdf").read_bytes(), "truncated.pdf", DagsterRunner())
        assert bad.status == "refused"
        with svc.sessions() as s:
            assert [d.doc_name for d in s.scalars(select(Document))] == ["dmca.pdf"]
            assert len(s.scalars(select(ChunkRow.id)).all()) == svc.store.count() == out.document["chunk_count"]
        ans = QueryService(svc).ask(DMCA_QUESTION)
        assert any(c["page"] == 1 and c["doc_name"] == "dmca.pdf" for c in ans["citations"])
        with svc.sessions() as s:
            row = s.get(QueryLog, ans["query_id"])
            assert row.total_ms > 0 and row.retrieved_ids == [r["chunk_id"] for r in ans["retrieved"]]
        delete_document(svc, out.document["id"])
        with svc.sessions() as s:
            assert s.scalars(select(ChunkRow.id)).all() == []
        assert svc.store.count() == 0
    finally:
        release_services(settings)

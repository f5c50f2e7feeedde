"""PostgreSQL stops during traffic and comes back: no request fails because of telemetry, and
rows written + rows counted as dropped == requests made (a small buffer forces some drops)."""

from datetime import datetime, timedelta, timezone

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from ragaudit.api.app import create_app
from ragaudit.platform.db import QueryLog
from tests.api.test_telemetry import BASE_QUESTIONS, upload
from tests.conftest import make_settings

pytestmark = pytest.mark.integration


def test_postgres_outage_loses_no_row_silently(tmp_path, embedder):
    from ragaudit.services import release_services
    from tests.pg import PostgresServer

    server = PostgresServer()  # our own server: this test stops it
    url = server.start()
    settings = make_settings(
        tmp_path / "outage", database_url=url, telemetry_queue_size=30, telemetry_batch_size=10, cache_ttl_s=0
    )
    since = datetime.now(timezone.utc) - timedelta(seconds=1)
    made = 0
    try:
        with TestClient(create_app(settings)) as client:
            assert upload(client).status_code == 201
            telemetry = client.app.state.telemetry

            def traffic(n):
                nonlocal made
                for i in range(n):
                    r = client.post("/search", json={"question": BASE_QUESTIONS[i % 8], "mode": "bm25", "top_k": 2})
                    made += 1
                    assert r.status_code == 200, r.text  # never fails because of telemetry
                    assert r.json()["retrieved"]

            traffic(20)
            assert telemetry.flush(30)
            server.pause()
            try:
                traffic(80)  # more than queue (30) + one batch (10) can hold: some rows must be dropped
                h = client.get("/health")
                assert h.status_code == 503 and h.json()["parts"]["database"]["status"] == "down"
                assert h.json()["parts"]["telemetry"]["failing"]
            finally:
                server.resume()
            assert telemetry.flush(60)  # the buffered rows reach the database once it is back
            traffic(20)
            assert telemetry.flush(60)
            st = telemetry.stats()
            with client.app.state.services.sessions() as s:
                written = s.scalar(select(func.count()).select_from(QueryLog).where(QueryLog.created_at >= since))
            assert st["recorded"] == made == 120
            assert written == st["written"] and st["pending"] == 0
            assert written + st["dropped"] == made
            # kept during the outage: the queue (30) plus the batch being retried (1..10)
            assert 0 < st["dropped"] <= 80 - 31 and written >= 20 + 31 + 20
            m = client.get("/metrics").json()
            assert m["telemetry"]["dropped"] == st["dropped"] and m["overall"]["count"] == written
            assert client.get("/health").status_code == 200
    finally:
        release_services(settings)
        server.stop()

"""Requests rejected with 422 are logged: one query_logs row each, ``error_kind="validation_error"``."""

from fastapi.testclient import TestClient
from sqlalchemy import select

from ragaudit.api.app import create_app
from ragaudit.platform.db import QueryLog
from tests.conftest import make_settings


def test_422_on_query_search_and_stream_writes_a_query_logs_row(tmp_path, embedder):
    """Fails if the RequestValidationError handler of ``create_app`` stops recording (the README
    says failures are logged), records under the wrong endpoint, or loses the question."""
    from ragaudit.services import release_services

    settings = make_settings(tmp_path / "api422")
    with TestClient(create_app(settings)) as client:
        bad = [
            ("/query", {"question": "When was it signed?", "mode": "dense"}),
            ("/query", {"question": ""}),
            ("/search", {"question": "hull designs", "top_k": 0, "doc_name": "dmca.pdf"}),
            ("/query/stream", {"question": "x", "mode": "bogus"}),
        ]
        for path, body in bad:
            assert client.post(path, json=body).status_code == 422
        r = client.post("/query", content=b"{not json", headers={"content-type": "application/json"})
        assert r.status_code == 422 and r.json()["detail"]  # FastAPI's usual 422 body is kept
        assert client.post("/datasets", files={}).status_code == 422  # not a query endpoint: no row
        assert client.app.state.telemetry.flush(timeout=30)
        svc = client.app.state.services
        with svc.sessions() as s:
            rows = s.scalars(select(QueryLog).order_by(QueryLog.created_at)).all()
    release_services(settings)
    assert sorted((r.endpoint, r.error_kind) for r in rows) == sorted(
        [
            ("query", "validation_error"),
            ("query", "validation_error"),
            ("search", "validation_error"),
            ("stream", "validation_error"),
            ("query", "validation_error"),
        ]
    )
    by_q = {(r.endpoint, r.question): r for r in rows}
    first = by_q[("query", "When was it signed?")]
    assert first.mode == "dense" and first.label is None
    search = by_q[("search", "hull designs")]
    assert search.top_k == settings.top_k and search.scope == {"doc_name": "dmca.pdf"}
    assert ("query", "") in by_q and ("stream", "x") in by_q

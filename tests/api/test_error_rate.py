"""The error rate counts the server's failures, not requests rejected as invalid (4xx)."""

from fastapi.testclient import TestClient

from ragaudit.api.app import create_app
from tests.conftest import make_settings


def test_rejected_requests_are_counted_apart_from_errors(tmp_path, embedder):
    """Two bodies rejected with 422 and one search that ran: ``/metrics`` reports 3 requests,
    2 ``client_errors``, 0 errors and an error rate of 0, and Prometheus counts the 422s under
    status ``rejected``. Fails if a client's invalid request is counted as a server failure (a
    user's malformed requests alone had put the error rate at 57%)."""
    from ragaudit.services import release_services

    settings = make_settings(tmp_path / "data")
    with TestClient(create_app(settings)) as client:
        assert client.post("/query", json={"question": "When was it signed?", "mode": "dense"}).status_code == 422
        assert client.post("/search", json={"question": "hull designs", "top_k": 0}).status_code == 422
        assert client.post("/search", json={"question": "hull designs"}).status_code == 200
        assert client.app.state.telemetry.flush(timeout=30)
        m = client.get("/metrics").json()["overall"]
        prom = client.get("/metrics/prometheus").text
    release_services(settings)
    assert (m["count"], m["errors"], m["client_errors"], m["error_rate"]) == (3, 0, 2, 0.0), m
    assert 'status="rejected"} 1.0' in prom and 'status="error"' not in prom, prom


def test_a_blank_question_is_a_client_error_on_every_door(tmp_path, embedder):
    """A question of whitespace only is refused as invalid, as an empty one is: 422 naming
    ``question`` on /query, /query/stream and /search, OpenAI's 400 on /v1/chat/completions; each
    has its query_logs row with ``error_kind`` ``validation_error``, so ``/metrics`` counts them as
    ``client_errors`` and Prometheus under ``rejected``, never as server errors. Fails if a blank
    question reaches retrieval (a 400 logged as ``ValueError``: a server error)."""
    from sqlalchemy import select

    from ragaudit.platform.db import QueryLog
    from ragaudit.services import release_services

    settings = make_settings(tmp_path / "data")
    with TestClient(create_app(settings)) as client:
        for path in ("/query", "/query/stream", "/search"):
            for question in ("   ", "\n\t "):
                r = client.post(path, json={"question": question})
                assert r.status_code == 422, (path, r.text)
                (err,) = r.json()["detail"]
                assert err["loc"] == ["body", "question"] and "blank" in err["msg"], err
        r = client.post(
            "/v1/chat/completions", json={"model": "ragaudit", "messages": [{"role": "user", "content": " "}]}
        )
        assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error", r.text
        assert client.app.state.telemetry.flush(timeout=30)
        with client.app.state.services.sessions() as s:
            kinds = sorted((q.endpoint, q.error_kind) for q in s.scalars(select(QueryLog)))
        m = client.get("/metrics").json()["overall"]
        prom = client.get("/metrics/prometheus").text
    release_services(settings)
    assert kinds == sorted(
        [(e, "validation_error") for e in ("query", "stream", "search") for _ in range(2)]
        + [("chat", "validation_error")]
    ), kinds
    assert (m["count"], m["errors"], m["client_errors"], m["error_rate"]) == (7, 0, 7, 0.0), m
    assert 'status="error"' not in prom and 'status="rejected"' in prom, prom

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

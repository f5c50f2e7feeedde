"""API keys: write routes need a key when keys are configured; read routes when the setting says
so; the key never appears in logs, stdout/stderr, database rows, stored files or responses."""

import logging
import secrets

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import MetaData, select

from ragaudit.api.app import create_app
from ragaudit.api.deps import key_is_valid
from tests.api.test_telemetry import upload
from tests.conftest import make_settings


@pytest.fixture()
def keyed(tmp_path, embedder):
    from ragaudit.services import release_services

    key = "rk-" + secrets.token_hex(16)
    settings = make_settings(
        tmp_path / "keys", api_keys=f"other-key-1, {key}", read_requires_api_key=False, cors_origins="http://ui.example"
    )
    yield settings, key
    release_services(settings)


def test_api_key_required_for_writes_and_never_leaks(keyed, caplog, capsys):
    settings, key = keyed
    caplog.set_level(logging.DEBUG)
    responses = []

    def keep(r):
        responses.append(r)
        return r

    with TestClient(create_app(settings)) as client:
        assert keep(upload(client)).status_code == 401
        r = keep(upload(client, headers={"X-API-Key": key + "x"}))
        assert r.status_code == 401 and r.json()["detail"].startswith("missing or invalid API key")
        assert keep(upload(client, headers={"X-API-Key": key})).status_code == 201
        doc_id = keep(client.get("/documents")).json()[0]["id"]  # reads are open by default
        # the key sent on reads too (where it is not needed) is neither echoed nor stored
        keep(
            client.post(
                "/query", json={"question": "what was the probable cause?", "top_k": 2}, headers={"X-API-Key": key}
            )
        )
        keep(
            client.post(
                "/search", json={"question": "probable cause", "top_k": 2}, headers={"Authorization": f"Bearer {key}"}
            )
        )
        keep(client.get("/metrics", headers={"X-API-Key": key}))
        keep(client.get("/metrics/prometheus"))
        keep(client.get("/health"))
        r = keep(
            client.options("/query", headers={"Origin": "http://ui.example", "Access-Control-Request-Method": "POST"})
        )
        assert r.headers["access-control-allow-origin"] == "http://ui.example"
        assert keep(client.delete(f"/documents/{doc_id}")).status_code == 401
        assert (
            keep(client.delete(f"/documents/{doc_id}", headers={"Authorization": f"Bearer {key}"})).status_code == 200
        )
        client.app.state.telemetry.flush(30)
        svc = client.app.state.services
        # every row of every table
        md = MetaData()
        md.reflect(svc.engine)
        with svc.engine.connect() as c:
            dump = "\n".join(repr(row) for t in md.sorted_tables for row in c.execute(select(t)))

    out = capsys.readouterr()
    logs = "\n".join(r.getMessage() for r in caplog.records) + caplog.text
    bodies = "\n".join(r.text + repr(dict(r.headers)) for r in responses)
    files = b"".join(p.read_bytes() for p in settings.data_dir.rglob("*") if p.is_file())
    assert "what was the probable cause?" in dump and logs  # the rows and logs searched are real
    for where, text in {
        "database rows": dump,
        "logs": logs,
        "stdout": out.out,
        "stderr": out.err,
        "responses": bodies,
    }.items():
        assert text.count(key) == 0, where
    assert files.count(key.encode()) == 0  # SQLite file + WAL, Qdrant folder, stored PDFs


def test_read_routes_closed_by_setting(tmp_path, embedder):
    from ragaudit.services import release_services

    settings = make_settings(tmp_path / "closed", api_keys="k-123456", read_requires_api_key=True)
    try:
        with TestClient(create_app(settings)) as client:
            assert client.post("/search", json={"question": "x"}).status_code == 401
            assert client.get("/documents").status_code == 401
            assert client.get("/metrics").status_code == 401
            assert client.post("/search", json={"question": "x"}, headers={"X-API-Key": "k-123456"}).status_code == 200
            assert client.get("/health").status_code == 200  # probes stay open
    finally:
        release_services(settings)


def test_key_comparison():
    s = make_settings(__import__("pathlib").Path("/tmp/unused"), api_keys="a1,b2")
    assert key_is_valid("b2", s) and key_is_valid("a1", s)
    assert not key_is_valid("b", s) and not key_is_valid(None, s) and not key_is_valid("", s)
    assert "b2" not in repr(s) and "b2" not in str(s.model_dump())

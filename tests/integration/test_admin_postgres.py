"""The admin bridge on a real PostgreSQL 15 server: filters, q (ILIKE with escapes), the evidence
check and hostile values behave as on SQLite (400, never a database error)."""

import json
from urllib.parse import urlencode

import pytest
from fastapi.testclient import TestClient

from ragaudit.api.app import create_app
from tests.conftest import SAMPLES, make_settings

pytestmark = pytest.mark.integration


def _list(c, resource, flt, sort=("id", "ASC"), rng=(0, 99)):
    q = {"sort": json.dumps(list(sort)), "range": json.dumps(list(rng)), "filter": json.dumps(flt)}
    return c.get(f"/admin/api/{resource}?{urlencode(q)}")


def test_admin_bridge_on_postgres(pg_url, tmp_path, embedder):
    """fails if a filter, q search, page range or evidence check differs on PostgreSQL, or if a
    hostile value (NUL byte, huge integer, SQL fragment) reaches the database as anything but a 400."""
    from ragaudit.services import release_services

    settings = make_settings(tmp_path / "pg-admin", database_url=pg_url)
    with TestClient(create_app(settings)) as c:
        with open(SAMPLES / "dmca.pdf", "rb") as f:
            r = c.post(
                "/documents",
                params={"wait": "true"},
                files={"file": ("dmca.pdf", f, "application/pdf")},
                data={"knowledge_base": "admin-pg"},
            )
        assert r.status_code == 201, r.text
        doc = r.json()["document"]
        try:
            r = _list(c, "documents", {"knowledge_base": "admin-pg"})
            assert r.status_code == 200 and [d["id"] for d in r.json()] == [doc["id"]]
            assert r.headers["content-range"] == "documents 0-0/1"
            r = _list(
                c, "chunks", {"document_id": doc["id"], "page_start_gte": 2, "page_end_lte": 3}, sort=("index", "DESC")
            )
            assert r.status_code == 200 and r.json()
            assert all(2 <= x["page_start"] and x["page_end"] <= 3 for x in r.json())
            assert [x["index"] for x in r.json()] == sorted((x["index"] for x in r.json()), reverse=True)
            r = _list(c, "chunks", {"document_id": doc["id"], "q": "OCTOBER 28, 1998"})
            assert r.json() and all("october 28, 1998" in x["text"].lower() for x in r.json())
            assert _list(c, "chunks", {"document_id": doc["id"], "q": "_%"}).json() == []

            chunk = _list(c, "chunks", {"document_id": doc["id"]}, sort=("index", "ASC"), rng=(0, 0)).json()[0]
            ev = " ".join(chunk["text"].split()[:8])
            r = c.post(
                "/admin/api/qa_pairs", json={"question": "q?", "answer": "a", "evidence": ev, "chunk_id": chunk["id"]}
            )
            assert r.status_code == 201, r.text
            r = c.put(f"/admin/api/qa_pairs/{r.json()['id']}", json={**r.json(), "evidence": "not in the chunk"})
            assert r.status_code == 400 and "verbatim" in r.json()["message"]

            for flt in (
                {"q": "a\u0000b"},
                {"page_start": 10**30},
                {"text": "x"},
                {"index; DROP TABLE chunks": 1},
                {"document_id": "x\u0000"},
            ):
                r = _list(c, "chunks", flt)
                assert r.status_code == 400, (flt, r.status_code, r.text)
            assert _list(c, "chunks", {}, sort=("index) DESC; --", "ASC")).status_code == 400
            assert (
                _list(c, "chunks", {"document_id": doc["id"]})
                .headers["content-range"]
                .endswith(f"/{doc['chunk_count']}")
            )
        finally:
            assert c.delete(f"/admin/api/documents/{doc['id']}").status_code == 200
    release_services(settings)

"""A scope names documents and knowledge bases: values longer than any name that can exist are refused."""

from fastapi.testclient import TestClient

from ragaudit.api.app import create_app
from tests.conftest import make_settings


def test_an_over_long_scope_is_refused_small_and_not_stored_whole(tmp_path, embedder):
    """A document name of 900,000 characters, 100,000 names or a 900,000-character knowledge base
    get a short 422 on /query, /search and /query/stream, and the logged row keeps no such value.
    Fails if an accepted scope can carry megabytes into the reply and into ``query_logs`` (the
    question's own limit was reached around through the scope)."""
    from sqlalchemy import select

    from ragaudit.platform.db import QueryLog
    from ragaudit.services import release_services

    settings = make_settings(tmp_path / "data")
    huge = "x" * 900_000
    bodies = [
        {"question": "What is it?", "doc_names": [huge]},
        {"question": "What is it?", "doc_names": [f"d{i}.pdf" for i in range(100_000)]},
        {"question": "What is it?", "knowledge_base": huge},
        {"question": "What is it?", "doc_name": huge},
    ]
    with TestClient(create_app(settings)) as client:
        for path in ("/query", "/search", "/query/stream"):
            for body in bodies:
                r = client.post(path, json=body)
                assert r.status_code in (413, 422) and len(r.content) < 10_000, (path, r.status_code, len(r.content))
        ok = client.post("/search", json={"question": "What is it?", "doc_names": ["a.pdf", "b.pdf"]})
        assert ok.status_code == 200, ok.text
        assert client.app.state.telemetry.flush(timeout=30)
        with client.app.state.services.sessions() as s:
            rows = s.scalars(select(QueryLog)).all()
    release_services(settings)
    assert rows and max(len(repr(r.scope)) for r in rows) < 20_000, max(len(repr(r.scope)) for r in rows)


def test_the_chat_box_takes_as_many_characters_as_the_api():
    """The web UI's question field stops at the API's limit. Fails if one changes without the other
    (the UI would send questions the API refuses, or cut ones it takes)."""
    import re

    from ragaudit.types import QUESTION_MAX_CHARS
    from tests.conftest import ROOT

    ts = (ROOT / "frontend" / "src" / "api.ts").read_text()
    assert re.search(r"export const QUESTION_MAX_CHARS = (\d+);", ts).group(1) == str(QUESTION_MAX_CHARS)


def test_an_evaluation_whose_scope_holds_nothing_is_refused_at_once(tmp_path, embedder):
    """An evaluation scoped to a document that is not there gets 400 naming the scope, and no run
    is recorded: it would answer every question "Nothing was searched" and report scores as if it
    had measured something. Fails if such a run is started."""
    from ragaudit.services import release_services
    from tests.conftest import ROOT, SAMPLES, finished_run

    settings = make_settings(tmp_path / "data")
    with TestClient(create_app(settings)) as client:
        pdf = (SAMPLES / "dmca.pdf").read_bytes()
        up = client.post("/documents", params={"wait": "true"}, files={"file": ("dmca.pdf", pdf, "application/pdf")})
        assert up.status_code == 201, up.text
        gold = (ROOT / "tests" / "data" / "eval_small.jsonl").read_bytes()
        assert client.post("/datasets", files={"file": ("eval_small.jsonl", gold)}).status_code == 201
        run = {"dataset": "eval_small.jsonl", "modes": ["bm25"], "answers": False}
        r = client.post("/evaluate", json={**run, "doc_names": ["nope.pdf"]})
        s = client.post("/evaluate", json={**run, "doc_names": ["dmca.pdf"], "strategy": "heading"})
        assert client.get("/evaluate").json() == []
        ok = client.post("/evaluate", json={**run, "doc_names": ["dmca.pdf"]})
        assert ok.status_code == 202, ok.text
        assert finished_run(client, ok.json()["id"])["status"] == "done"
    release_services(settings)
    assert r.status_code == 400 and "nope.pdf" in r.json()["detail"] and "holds no chunk" in r.json()["detail"], r.text
    assert s.status_code == 400 and "heading" in s.json()["detail"], s.text


def test_a_field_the_api_does_not_know_is_refused_not_ignored(tmp_path, embedder):
    """``{"page_start": 3, "page_end": 3}`` (the scope's fields are ``page_min`` / ``page_max``)
    was answered with 200 from every page: the search the client asked to narrow was not. Fails if
    an unknown field of /query, /search or /query/stream is accepted, or if the 422 does not name it."""
    from ragaudit.services import release_services

    settings = make_settings(tmp_path / "data")
    with TestClient(create_app(settings)) as client:
        for path in ("/query", "/search", "/query/stream"):
            r = client.post(path, json={"question": "What is it?", "page_start": 3, "page_end": 3})
            assert r.status_code == 422, (path, r.text[:300])
            bad = {tuple(e["loc"]) for e in r.json()["detail"] if e["type"] == "extra_forbidden"}
            assert bad == {("body", "page_start"), ("body", "page_end")}, r.json()
        ok = client.post("/search", json={"question": "What is it?", "page_min": 3, "page_max": 3})
        assert ok.status_code == 200, ok.text[:300]
    release_services(settings)

"""Telemetry end to end over the real app (TestClient): query_logs rows, /metrics against a
recomputation from the raw rows on SQLite and PostgreSQL, Prometheus exposition, cache hits,
cache invalidation on deletion, /health."""

from __future__ import annotations

import statistics
from datetime import datetime, timedelta, timezone

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select

from ragaudit.api.app import create_app
from ragaudit.platform.db import QueryLog
from tests.conftest import SAMPLES, make_settings

DOC = SAMPLES / "20080102X00002.pdf"
BASE_QUESTIONS = [
    "What was the probable cause of the accident?",
    "What were the weather conditions?",
    "How badly was the aircraft damaged?",
    "Were there any injuries?",
    "What did the pilot report?",
    "What type of aircraft was involved?",
    "Where did the accident happen?",
    "What happened during the landing?",
]
MODES = ["vector", "bm25", "hybrid"]


def type7(values: list[float], q: float) -> float:
    """Independent reference: Hyndman-Fan type 7 via the standard library ('inclusive' method)."""
    if len(values) == 1:
        return values[0]
    cuts = statistics.quantiles(values, n=100, method="inclusive")  # cuts[i] = P_(i+1)
    return cuts[int(q) - 1]


def upload(client, path=DOC, headers=None):
    with open(path, "rb") as f:
        return client.post(
            "/documents?wait=true", files={"file": (path.name, f, "application/pdf")}, headers=headers or {}
        )


def run_traffic(client, n=200):
    """n requests: /search and every 10th a /query, mixed modes, repeated questions (cache hits),
    every 40th a whitespace-only question (refused as invalid, 422). Returns client-side tallies."""
    tally = {"requests": 0, "errors": 0, "hits": 0, "by_mode": {m: 0 for m in MODES}}
    for i in range(n):
        mode = MODES[i % 3]
        question = f"{BASE_QUESTIONS[i % 8]} ({i % 5})"
        if i % 40 == 39:
            question = "   "
        path = "/query" if i % 10 == 0 else "/search"
        r = client.post(path, json={"question": question, "mode": mode, "top_k": 2})
        tally["requests"] += 1
        tally["by_mode"][mode] += 1
        if r.status_code == 422:
            tally["errors"] += 1
            continue
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["query_id"]
        if body["cache"]["hit"]:
            tally["hits"] += 1
            assert body["cache"]["original_query_id"] != body["query_id"]
            if path == "/query":
                assert body["usage"]["cost_usd"] == 0.0 and body["cache"]["original_cost_usd"] == 0.0
    return tally


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.integration)])
def app_settings(request, tmp_path, embedder):
    from ragaudit.services import release_services

    kw = {"database_url": request.getfixturevalue("pg_url")} if request.param == "postgres" else {}
    settings = make_settings(tmp_path / "tele", **kw)
    yield settings
    release_services(settings)


def test_metrics_match_raw_rows_after_200_requests(app_settings):
    since = datetime.now(timezone.utc) - timedelta(seconds=1)  # the PostgreSQL database is shared by the session
    with TestClient(create_app(app_settings)) as client:
        assert upload(client).status_code == 201
        tally = run_traffic(client)
        telemetry = client.app.state.telemetry
        assert telemetry.flush(30)
        assert tally["hits"] > 20 and tally["errors"] == 5

        m = client.get("/metrics", params={"since": since.isoformat()}).json()
        svc = client.app.state.services
        with svc.sessions() as s:
            rows = s.scalars(select(QueryLog).where(QueryLog.created_at >= since)).all()

        # counts: client side == raw rows == /metrics
        assert len(rows) == tally["requests"] == m["overall"]["count"] == 200
        # the blank questions are the client's errors, not the server's
        assert sum(1 for r in rows if r.error_kind) == tally["errors"] == m["overall"]["client_errors"]
        assert {r.error_kind for r in rows if r.error_kind} == {"validation_error"}
        assert m["overall"]["errors"] == 0
        assert sum(1 for r in rows if r.cache_hit) == tally["hits"] == m["overall"]["cache_hits"]
        assert m["overall"]["cache_hit_rate"] == pytest.approx(tally["hits"] / 200)
        assert m["overall"]["error_rate"] == 0.0
        # every cache hit names the row it reused, which exists and is not a hit itself
        by_id = {r.id: r for r in rows}
        for r in rows:
            if r.cache_hit:
                assert r.cache_source_id in by_id and not by_id[r.cache_source_id].cache_hit
                assert r.cost_usd == 0.0
        assert {r.endpoint for r in rows} == {"query", "search"}
        assert {r.model for r in rows if not r.error_kind} == {"extractive", "bundled:all-MiniLM-L6-v2"}

        # a stage has a time only where it ran: a BM25 query embeds nothing and searches no vectors,
        # a vector query runs no BM25; only hybrid ranks passages (the rerank stage; no cross-encoder here)
        ran = [r for r in rows if not r.error_kind and not r.cache_hit]
        for r in ran:
            assert (r.embed_ms is None, r.vector_ms is None) == ((r.mode == "bm25",) * 2), (r.mode, r.embed_ms)
            assert (r.bm25_ms is None) == (r.mode == "vector"), (r.mode, r.bm25_ms)
            assert (r.rerank_ms is None) == (r.mode != "hybrid"), (r.mode, r.rerank_ms)
        assert {r.mode for r in ran} == set(MODES)

        # percentiles: recomputed from the raw rows with an independent type-7 implementation
        for stage, col in [
            ("total", "total_ms"),
            ("embed", "embed_ms"),
            ("bm25", "bm25_ms"),
            ("gate", "gate_ms"),
            ("generation", "generation_ms"),
        ]:
            vals = [getattr(r, col) for r in rows if getattr(r, col) is not None]
            got = m["overall"]["latency_ms"][stage]
            assert got["n"] == len(vals) > 0
            for q in (50, 95, 99):
                assert got[f"p{q}"] == pytest.approx(type7(vals, q), abs=1e-3), (stage, q)

        # grouped by mode: counts per mode as sent, P95 per group from the rows
        g = client.get("/metrics", params={"since": since.isoformat(), "group_by": "mode"}).json()
        assert {x["key"]: x["count"] for x in g["groups"]} == tally["by_mode"]
        for grp in g["groups"]:
            vals = [r.total_ms for r in rows if r.mode == grp["key"] and r.total_ms is not None]
            assert grp["latency_ms"]["total"]["p95"] == pytest.approx(type7(vals, 95), abs=1e-3)
        assert {
            x["key"]
            for x in client.get("/metrics", params={"since": since.isoformat(), "group_by": "label"}).json()["groups"]
        } >= {None}
        # window: nothing after now, nothing before the test
        later = (datetime.now(timezone.utc) + timedelta(minutes=1)).isoformat()
        assert client.get("/metrics", params={"since": later}).json()["overall"]["count"] == 0
        assert (
            client.get("/metrics", params={"since": since.isoformat(), "until": since.isoformat()}).json()["overall"][
                "count"
            ]
            == 0
        )
        assert client.get("/metrics", params={"group_by": "nope"}).status_code == 422
        assert client.get("/metrics", params={"since": "yesterday"}).status_code == 400
        assert m["telemetry"]["dropped"] == 0 and m["telemetry"]["pending"] == 0

        # Prometheus exposition parses with the client library's parser and agrees on counts
        text = client.get("/metrics/prometheus").text
        fams = {f.name: f for f in text_string_to_metric_families(text)}
        reqs = sum(s.value for s in fams["ragaudit_requests"].samples if s.name == "ragaudit_requests_total")
        by_status = {
            st: sum(
                s.value
                for s in fams["ragaudit_requests"].samples
                if s.name == "ragaudit_requests_total" and s.labels["status"] == st
            )
            for st in ("error", "rejected")
        }
        hist_count = sum(s.value for s in fams["ragaudit_request_latency_seconds"].samples if s.name.endswith("_count"))
        # a request refused in validation is counted, with no latency: it never ran
        assert reqs == 200 and hist_count == 195 and by_status == {"error": 0, "rejected": 5}
        assert sum(s.value for s in fams["ragaudit_cache_hits"].samples if s.name.endswith("_total")) == tally["hits"]
        dropped = [s.value for s in fams["ragaudit_telemetry_rows_dropped"].samples if s.name.endswith("_total")]
        written = [s.value for s in fams["ragaudit_telemetry_rows_written"].samples if s.name.endswith("_total")]
        assert dropped == [0] and written == [200]

        # the index version changes with the documents: deleting the document ends cache hits
        q = {"question": BASE_QUESTIONS[0] + " (0)", "mode": "hybrid", "top_k": 2}
        first = client.post("/search", json=q).json()
        assert client.post("/search", json=q).json()["cache"]["hit"]
        doc_id = client.get("/documents").json()[0]["id"]
        assert client.delete(f"/documents/{doc_id}").status_code == 200
        after = client.post("/search", json=q).json()
        assert after["cache"]["hit"] is False and after["retrieved"] == [] and first["retrieved"]

        h = client.get("/health")
        assert h.status_code == 200, h.text
        parts = h.json()["parts"]
        assert {"api", "database", "qdrant", "embedding_model", "llm", "telemetry"} <= set(parts)
        assert parts["embedding_model"]["loaded"] and parts["llm"]["model"] == "extractive (offline)"
        assert parts["qdrant"]["collection_exists"] and parts["telemetry"]["dropped"] == 0


def test_metrics_endpoint_names_and_window_are_checked(tmp_path, embedder):
    """Fails if ``/metrics?endpoint=`` does not match the rows the routes write under the names
    it documents (``/query/stream`` rows are ``stream``; ``query_stream`` is accepted for them
    too), if an unknown endpoint name silently matches nothing instead of a 422 listing the
    valid ones, or if ``until`` before ``since`` answers 200 instead of a 422 naming both."""
    from ragaudit.services import release_services

    settings = make_settings(tmp_path / "names")
    try:
        with TestClient(create_app(settings)) as client:
            for path in ("/query", "/query/stream", "/query/stream", "/search"):
                r = client.post(path, json={"question": "What was the probable cause?"})
                assert r.status_code == 200, r.text
            assert client.app.state.telemetry.flush(timeout=30)
            counts = {
                name: client.get("/metrics", params={"endpoint": name}).json()["overall"]["count"]
                for name in ("query", "stream", "query_stream", "search")
            }
            assert counts == {"query": 1, "stream": 2, "query_stream": 2, "search": 1}, counts
            groups = client.get("/metrics", params={"group_by": "endpoint"}).json()["groups"]
            assert {g["key"]: g["count"] for g in groups} == {"query": 1, "stream": 2, "search": 1}
            r = client.get("/metrics", params={"endpoint": "streaming"})
            assert r.status_code == 422 and "stream" in r.text, r.text
            r = client.get("/metrics", params={"since": "2024-05-02T00:00:00Z", "until": "2024-05-01"})
            assert r.status_code == 422, r.text
            assert "until" in r.text and "since" in r.text and "2024-05-01" in r.text
    finally:
        release_services(settings)


def test_rules_that_fired_are_in_the_answer_and_its_query_logs_row(tmp_path, embedder):
    """An auditor reads which rule decided: fails if a gate refusal does not name its rule in the
    ``/query`` JSON and in the request's ``query_logs`` row, if an answer does not list its
    concise-answer rule, if a rule switched off by name still fires, or if an unknown rule name in
    the settings is accepted."""
    from ragaudit.services import release_services

    q = "What dose of semaglutide did the pilot take before the accident?"
    settings = make_settings(tmp_path / "rules")
    try:
        with TestClient(create_app(settings)) as client:
            assert upload(client).status_code == 201
            out = client.post("/query", json={"question": q}).json()
            assert out["label"] == "refused", out["answer"]
            gate = [f for f in out["rules"] if f["stage"] == "gate"]
            assert gate[0]["rule"] == "gate.subject_words_absent" and "semaglutide" in gate[0]["reason"], out["rules"]
            answered = client.post("/query", json={"question": "How many hours had the pilot flown?"}).json()
            assert answered["label"] == "answered"
            assert any(f["stage"] == "concise" for f in answered["rules"]), answered["rules"]
            assert (answered["concise"] is None) == (answered["concise_answer"] == "")
            assert client.app.state.telemetry.flush(timeout=30)
            with client.app.state.services.sessions() as s:
                row = s.execute(select(QueryLog).where(QueryLog.id == out["query_id"])).scalar_one()
            assert [f["rule"] for f in row.rules] == [f["rule"] for f in out["rules"]]
    finally:
        release_services(settings)
    off = make_settings(tmp_path / "rules-off", disabled_rules=["gate.subject_words_absent"])
    try:
        with TestClient(create_app(off)) as client:
            assert upload(client).status_code == 201
            out = client.post("/query", json={"question": q}).json()
            assert all(f["rule"] != "gate.subject_words_absent" for f in out["rules"]), out["rules"]
    finally:
        release_services(off)
    bad = make_settings(tmp_path / "rules-bad", disabled_rules=["gate.subject_word_absent"])
    try:
        with pytest.raises(ValueError, match="gate.subject_words_absent"):
            with TestClient(create_app(bad)):
                pass
    finally:
        release_services(bad)

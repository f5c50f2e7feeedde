"""Requests rejected with 422 are logged: one query_logs row each, ``error_kind="validation_error"``."""

import json

import pytest
from fastapi import HTTPException
from fastapi.testclient import TestClient
from sqlalchemy import select

from ragaudit.api.app import create_app
from ragaudit.api.routes.documents import _refuse
from ragaudit.platform.db import QueryLog
from tests.conftest import make_settings


def test_422_on_query_search_and_stream_writes_a_query_logs_row(tmp_path, embedder):
    """Fails if the RequestValidationError handler of ``create_app`` stops recording (docs/operations.md
    says failures are logged), records under the wrong endpoint, or loses the question, or if a
    made-up mode becomes a /metrics group of its own (each would also be a Prometheus series)."""
    from ragaudit.services import release_services

    settings = make_settings(tmp_path / "api422")
    with TestClient(create_app(settings)) as client:
        bad = [
            ("/query", {"question": "When was it signed?", "mode": "dense"}),
            ("/query", {"question": ""}),
            ("/search", {"question": "hull designs", "top_k": 0, "doc_name": "dmca.pdf"}),
            ("/query/stream", {"question": "x", "mode": "bogus"}),
            ("/query", {"question": "hull designs", "mode": "bm25", "top_k": "many"}),
            ("/query", {"question": "y", "mode": ["a"]}),
        ]
        for path, body in bad:
            assert client.post(path, json=body).status_code == 422
        r = client.post("/query", content=b"{not json", headers={"content-type": "application/json"})
        assert r.status_code == 422 and r.json()["detail"]  # FastAPI's usual 422 body is kept
        assert client.post("/datasets", files={}).status_code == 422  # not a query endpoint: no row
        assert client.app.state.telemetry.flush(timeout=30)
        groups = client.get("/metrics", params={"group_by": "mode"}).json()["groups"]
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
            ("query", "validation_error"),
            ("query", "validation_error"),
        ]
    )
    by_q = {(r.endpoint, r.question): r for r in rows}
    first = by_q[("query", "When was it signed?")]
    assert first.mode == "invalid" and first.label is None
    assert by_q[("query", "hull designs")].mode == "bm25"  # a valid mode in a rejected body is kept
    assert by_q[("query", "y")].mode == "invalid" and by_q[("stream", "x")].mode == "invalid"
    keys = {g["key"] for g in groups}
    assert keys <= {"hybrid", "bm25", "invalid"} and "invalid" in keys, groups
    search = by_q[("search", "hull designs")]
    assert search.top_k == settings.top_k and search.scope == {"doc_name": "dmca.pdf"}
    assert ("query", "") in by_q and ("stream", "x") in by_q


GOOD_LINE = '{"id": "g1", "question": "What is the closing balance?", "answer": "48,215", "doc_name": "a.pdf", "page": 2, "evidence": "closing balance 48,215", "kind": "fact", "note": "kept"}'


def test_dataset_upload_validates_every_line_and_accepts_a_bom(tmp_path, embedder):
    """Fails if ``POST /datasets`` accepts a line whose fields have the wrong type or value (a
    number as the question, an object as evidence, a page of NaN, 1e400, -3, 2.5 or true, a
    non-finite number in any other field), if the 422 does not name the line and the field, if
    a refused upload stores anything, or if a valid file starting with a UTF-8 byte-order mark is
    refused or stored differently from the same file without it."""
    from ragaudit.services import release_services

    cases = [
        ('{"question": 42}', ["question"]),
        ('{"question": "   "}', ["question"]),
        ('{"question": "q", "evidence": {"text": "x"}}', ["evidence"]),
        ('{"question": "q", "page": NaN}', ["page"]),
        ('{"question": "q", "page": 1e400}', ["page"]),
        ('{"question": "q", "page": -3}', ["page"]),
        ('{"question": "q", "page": 2.5}', ["page"]),
        ('{"question": "q", "page": true}', ["page"]),
        ('{"question": "q", "answer": ["a"]}', ["answer"]),
        ('{"question": "q", "doc_name": 7}', ["doc_name"]),
        ('{"question": "q", "extra_evidence": [{"page": 0, "evidence": "x"}]}', ["extra_evidence", "0", "page"]),
        ('{"question": "q", "also_found_in": [{"doc_name": "b.pdf", "page": "3"}]}', ["also_found_in", "0", "page"]),
        ('{"question": "q", "note": {"score": Infinity}}', ["note", "score"]),
        ("[1, 2]", []),
        ('{"question": "q"', []),
    ]
    settings = make_settings(tmp_path / "datasets")
    with TestClient(create_app(settings)) as client:
        for bad, loc in cases:
            text = GOOD_LINE + "\n\n" + bad + "\n"
            r = client.post("/datasets", files={"file": ("bad.jsonl", text.encode(), "application/x-ndjson")})
            assert r.status_code == 422, (bad, r.status_code, r.text)
            errors = r.json()["detail"]
            assert isinstance(errors, list) and errors, r.text
            first = errors[0]
            assert first["loc"][:3] == ["body", "file", 3], (bad, first)  # line 3 (the blank line counts)
            assert [str(x) for x in first["loc"][3:]] == loc, (bad, first)
            assert first["msg"].startswith("line 3"), first
        r = client.post(
            "/datasets",
            files={"file": ("dup.jsonl", (GOOD_LINE + "\n" + GOOD_LINE).encode(), "application/x-ndjson")},
        )
        assert r.status_code == 422 and "line 2" in r.json()["detail"][0]["msg"] and "line 1" in r.text, r.text
        assert client.get("/datasets").json() == []  # nothing stored by a refused upload

        plain = (GOOD_LINE + "\n").encode()
        r = client.post("/datasets", files={"file": ("bom.jsonl", b"\xef\xbb\xbf" + plain, "application/x-ndjson")})
        assert r.status_code == 201, r.text
        assert r.json()["n_questions"] == 1
        r = client.post("/datasets", files={"file": ("plain.jsonl", plain, "application/x-ndjson")})
        assert r.status_code == 201, r.text
        from ragaudit.platform.db import EvalQuestion

        with client.app.state.services.sessions() as s:
            records = [q.record for q in s.scalars(select(EvalQuestion))]
    release_services(settings)
    assert len(records) == 2 and records[0] == records[1] and records[0]["question"] == "What is the closing balance?"


def test_a_refused_upload_names_its_file_once():
    """Fails if a refusal whose message already opens with the file's name (a version of it is
    being ingested) repeats the name ("a.pdf: a.pdf: ..."), or if a name with control characters
    is shown raw."""
    with pytest.raises(HTTPException) as e:
        _refuse("a.pdf", "failed", "busy", "a.pdf: a version is being ingested (status embedding)")
    assert e.value.status_code == 409 and e.value.detail == "a.pdf: a version is being ingested (status embedding)"
    with pytest.raises(HTTPException) as e:
        _refuse("b\x07.pdf", "refused", "encrypted", "password-protected PDF")
    assert e.value.status_code == 422 and "\x07" not in e.value.detail and "password-protected PDF" in e.value.detail
    with pytest.raises(HTTPException) as e:
        _refuse("b\x07.pdf", "failed", "busy", "b\x07.pdf: a version is being ingested")
    assert "\x07" not in e.value.detail and e.value.detail.count(".pdf") == 1


def test_a_huge_refused_question_is_neither_echoed_nor_stored_whole(tmp_path, embedder):
    """Fails if a 422 echoes more than a short prefix of a too-long question (FastAPI puts the whole
    value in ``detail[0].input``), if the 422 loses FastAPI's shape (type, loc, msg, input), if the
    query_logs row of the refused request keeps more than ``QUESTION_MAX_CHARS`` of it or does not
    say it was cut and how long it was, if the admin bridge then serves it whole, or if a JSON body
    far larger than any valid request is parsed at all instead of a 413 (chunked or not), or is
    not counted among the rejected requests."""
    from ragaudit.services import release_services

    question_max_chars = 4_000  # ragaudit.types.QUESTION_MAX_CHARS, the documented limit
    settings = make_settings(tmp_path / "huge", files_and_query_logs_open=True)
    long_q = "why " * 100_000  # 400,000 characters: under the body limit, over the question limit
    with TestClient(create_app(settings)) as client:
        r = client.post("/query", json={"question": long_q, "doc_names": ["x" * 50_000] * 3})
        assert r.status_code == 422, r.text[:500]
        assert len(r.content) < 2_000, len(r.content)
        errs = r.json()["detail"]  # the question's error, and those of the three over-long names
        (err,) = [e for e in errs if e["loc"] == ["body", "question"]]
        assert all(len(str(e["input"])) < 300 for e in errs), [len(str(e["input"])) for e in errs]
        assert err["type"] == "string_too_long" and err["msg"]
        assert err["input"].startswith("why why") and "400,000 characters" in err["input"], err["input"]
        # a body error echoes the whole body as its input: shortened as well
        r = client.post("/search", json={"question": long_q, "top_k": "many"})
        assert r.status_code == 422 and len(r.content) < 2_000, len(r.content)
        # far larger than any valid request: refused before it is parsed
        huge = {"question": "x" * 10_000_000}
        r = client.post("/query", json=huge)
        assert r.status_code == 413 and "too large" in r.json()["detail"], r.text[:300]

        def chunks():
            yield b'{"question": "'
            for _ in range(20):
                yield b"x" * 100_000
            yield b'"}'

        r = client.post("/query", content=chunks(), headers={"content-type": "application/json"})
        assert r.status_code == 413, r.text[:300]
        r = client.post(
            "/v1/chat/completions",
            json={"model": "ragaudit", "messages": [{"role": "user", "content": "x" * 2_000_000}]},
        )
        assert r.status_code == 413 and r.json()["error"]["code"] == "too_large", r.text[:300]
        assert client.app.state.telemetry.flush(timeout=30)
        with client.app.state.services.sessions() as s:
            rows = s.scalars(select(QueryLog)).all()
        # each body over the limit is counted as a rejected request, with nothing of it stored
        too_large = [r for r in rows if r.error_kind == "body_too_large"]
        assert sorted(r.endpoint for r in too_large) == ["chat", "query", "query"], [r.endpoint for r in rows]
        assert all(not r.question for r in too_large)
        overall = client.get("/metrics").json()["overall"]
        assert (overall["client_errors"], overall["errors"]) == (len(rows), 0), overall
        rows = [r for r in rows if r.error_kind != "body_too_large"]
        assert sorted(r.endpoint for r in rows) == ["query", "search"]
        for row in rows:
            assert row.error_kind == "validation_error"
            assert row.question.startswith("why why") and len(row.question) < question_max_chars + 100
            assert "cut" in row.question and "400,000 characters" in row.question, row.question[-80:]
        query_row = next(r for r in rows if r.endpoint == "query")
        assert len(str(query_row.scope)) < 2_000
        listed = client.get("/admin/api/query_logs")
        assert listed.status_code == 200 and len(listed.content) < 20_000, len(listed.content)
    release_services(settings)


def test_an_evaluation_with_no_mode_it_can_run_is_refused_at_once(tmp_path, embedder):
    """Fails if ``POST /evaluate`` with ``hybrid_rerank`` alone on a server without a reranker (or
    with no mode) is accepted as a run that then fails (it failed with ``IndexError: list index out
    of range``) instead of a 400 saying what /query says, or if ``evaluate`` itself, called with
    nothing left to run, raises anything but a ValueError saying why."""
    from ragaudit.evaluate.evaluation import EvalParams, GoldQuestion, evaluate
    from ragaudit.services import release_services

    settings = make_settings(tmp_path / "evalmodes", reranker_model="")
    with TestClient(create_app(settings)) as client:
        r = client.post("/datasets", files={"file": ("gold.jsonl", GOOD_LINE.encode(), "application/x-ndjson")})
        assert r.status_code == 201, r.text
        r = client.post("/evaluate", json={"dataset": "gold.jsonl", "modes": ["hybrid_rerank"]})
        assert r.status_code == 400, r.text
        assert "hybrid_rerank needs a cross-encoder" in r.json()["detail"], r.text
        r = client.post("/evaluate", json={"dataset": "gold.jsonl", "modes": []})
        assert r.status_code == 400 and "at least one retrieval mode" in r.json()["detail"], r.text
        assert client.get("/evaluate").json() == []  # no run was recorded
        svc = client.app.state.services
        question = GoldQuestion.from_record(json.loads(GOOD_LINE), 1)
        with pytest.raises(ValueError, match="hybrid_rerank needs a cross-encoder"):
            evaluate(svc, [question], EvalParams(modes=["hybrid_rerank"], answers=True))
    release_services(settings)


def test_a_page_range_that_ends_before_it_starts_is_refused_on_every_door(tmp_path, embedder):
    """Fails if ``page_min`` after ``page_max`` is accepted (the query was then refused as if the
    documents held nothing) on /query, /query/stream or /search instead of a 422 naming the field,
    or on the OpenAI-compatible door instead of its 400; an equal or open range stays accepted."""
    from ragaudit.services import release_services

    settings = make_settings(tmp_path / "pages")
    with TestClient(create_app(settings)) as client:
        for path in ("/query", "/query/stream", "/search"):
            r = client.post(path, json={"question": "What changed?", "page_min": 5, "page_max": 2})
            assert r.status_code == 422, (path, r.text)
            (err,) = r.json()["detail"]
            assert err["loc"] == ["body", "page_max"] and "before page_min" in err["msg"], err
        r = client.post(
            "/v1/chat/completions",
            json={
                "model": "ragaudit",
                "messages": [{"role": "user", "content": "What changed?"}],
                "page_min": 5,
                "page_max": 2,
            },
        )
        assert r.status_code == 400 and "before page_min" in r.json()["error"]["message"], r.text
        for pages in ({"page_min": 2, "page_max": 2}, {"page_min": 2}, {"page_max": 2}):
            assert client.post("/search", json={"question": "What changed?", **pages}).status_code == 200
    release_services(settings)


def test_an_empty_scope_names_a_strategy_the_documents_lack(tmp_path, embedder):
    """Fails if a question scoped to a chunking strategy its document was not chunked with gets
    only the generic "no indexed chunk is in the scope" note (names, knowledge base, ids, pages),
    not the strategy as a cause; a scope without a strategy keeps the generic note."""
    from ragaudit.services import release_services
    from tests.conftest import text_pdf

    settings = make_settings(tmp_path / "strategy")
    with TestClient(create_app(settings)) as client:
        r = client.post(
            "/documents",
            params={"wait": "true"},
            files={"file": ("ledger.pdf", text_pdf(1, "ledger"), "application/pdf")},
            data={"strategy": "sentence"},
        )
        assert r.status_code == 201, r.text
        r = client.post("/search", json={"question": "ledger", "doc_name": "ledger.pdf", "strategy": "semantic"})
        assert r.status_code == 200 and r.json()["retrieved"] == [], r.text
        notes = " ".join(r.json()["notes"])
        assert "no indexed chunk is in the scope" in notes and "strategy 'semantic'" in notes, notes
        r = client.post("/query", json={"question": "ledger", "doc_name": "ledger.pdf", "strategy": "semantic"})
        assert r.status_code == 200 and "strategy 'semantic'" in r.json()["answer"], r.json()["answer"]
        r = client.post("/search", json={"question": "ledger", "doc_name": "nope.pdf"})
        notes = " ".join(r.json()["notes"])
        assert "no indexed chunk is in the scope" in notes and "strategy" not in notes, notes
    release_services(settings)


def test_a_gold_record_of_an_unknown_kind_is_refused_naming_the_allowed_kinds(tmp_path, embedder):
    """Fails if ``POST /datasets`` accepts a record whose ``kind`` is not one docs/evaluation.md lists
    (it was stored with 201 and then scored as an ordinary fact), if the 422 does not name the line,
    the field and the allowed kinds, or if a record of any listed kind is refused."""
    from ragaudit.services import release_services

    kinds = ["fact", "identifier", "table", "paraphrase", "multipage", "scoped", "refuse"]
    settings = make_settings(tmp_path / "kinds")
    with TestClient(create_app(settings)) as client:
        bad = json.dumps({"id": "w1", "question": "What is it?", "kind": "weird"})
        text = GOOD_LINE + "\n" + bad + "\n"
        r = client.post("/datasets", files={"file": ("kinds.jsonl", text.encode(), "application/x-ndjson")})
        assert r.status_code == 422, r.text
        (err,) = r.json()["detail"]
        assert err["loc"] == ["body", "file", 2, "kind"] and err["input"] == "weird", err
        assert err["msg"].startswith("line 2: kind: ") and "weird" in err["msg"], err
        assert all(k in err["msg"] for k in kinds), err["msg"]
        assert client.get("/datasets").json() == []
        lines = [json.dumps({"id": k, "question": f"A {k} question?", "kind": k}) for k in kinds]
        r = client.post("/datasets", files={"file": ("ok.jsonl", "\n".join(lines).encode(), "application/x-ndjson")})
        assert r.status_code == 201 and r.json()["n_questions"] == len(kinds), r.text
    release_services(settings)

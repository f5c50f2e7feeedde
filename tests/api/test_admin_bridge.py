"""Contract tests of the react-admin bridge (/admin/api): the exact requests ra-data-simple-rest
5.x sends (query strings built like its ``getList``/``getMany``/``getManyReference``, the ``Range``
header, ``PUT``/``POST``/``DELETE`` bodies) against a real knowledge base, and hostile parameters."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest
from fastapi.testclient import TestClient

from ragaudit.api.app import create_app
from tests.conftest import SAMPLES, make_settings


@pytest.fixture(scope="module")
def client(tmp_path_factory, embedder):
    from ragaudit.services import release_services

    settings = make_settings(tmp_path_factory.mktemp("admin"), cors_origins=["http://ui.example"])
    with TestClient(create_app(settings)) as c:
        for name in ("dmca.pdf", "20071229X02007.pdf"):
            with open(SAMPLES / name, "rb") as f:
                r = c.post("/documents", params={"wait": "true"}, files={"file": (name, f, "application/pdf")})
            assert r.status_code == 201, r.text
        c.docs = {d["doc_name"]: d for d in c.get("/documents").json()}  # type: ignore[attr-defined]
        yield c
    release_services(settings)


def get_list(client, resource, sort=("id", "ASC"), page=1, per_page=10, flt=None, **headers):
    """What ra-data-simple-rest's getList sends: JSON sort/range/filter and a Range header."""
    start, end = (page - 1) * per_page, page * per_page - 1
    q = {"sort": json.dumps(list(sort)), "range": json.dumps([start, end]), "filter": json.dumps(flt or {})}
    return client.get(
        f"/admin/api/{resource}?{urlencode(q)}", headers={"Range": f"{resource}={start}-{end}", **headers}
    )


def total(r) -> int:
    return int(r.headers["content-range"].split("/")[-1])


def test_get_list_sort_range_filter_and_content_range(client):
    """fails if Content-Range is missing or miscounted, if sort/range are ignored, or if a filter
    on document_id / a page range / q does not restrict the rows."""
    dmca = client.docs["dmca.pdf"]
    r = get_list(client, "documents", sort=("doc_name", "ASC"))
    assert r.status_code == 200, r.text
    assert [d["doc_name"] for d in r.json()] == ["20071229X02007.pdf", "dmca.pdf"]
    assert r.headers["content-range"] == "documents 0-1/2"
    assert all("id" in d for d in r.json())
    r = get_list(client, "documents", sort=("doc_name", "DESC"), per_page=1)
    assert [d["doc_name"] for d in r.json()] == ["dmca.pdf"] and r.headers["content-range"] == "documents 0-0/2"

    r = get_list(client, "chunks", sort=("index", "ASC"), per_page=5, flt={"document_id": dmca["id"]})
    assert r.status_code == 200 and len(r.json()) == 5
    assert total(r) == dmca["chunk_count"]
    assert [c["index"] for c in r.json()] == sorted(c["index"] for c in r.json())
    assert {c["document_id"] for c in r.json()} == {dmca["id"]}
    r2 = get_list(client, "chunks", sort=("index", "ASC"), page=2, per_page=5, flt={"document_id": dmca["id"]})
    assert r2.headers["content-range"] == f"chunks 5-9/{dmca['chunk_count']}"
    assert not {c["id"] for c in r.json()} & {c["id"] for c in r2.json()}

    r = get_list(
        client, "chunks", per_page=100, flt={"document_id": dmca["id"], "page_start_gte": 2, "page_end_lte": 3}
    )
    assert r.json() and all(2 <= c["page_start"] and c["page_end"] <= 3 for c in r.json())
    assert total(r) < dmca["chunk_count"]

    r = get_list(client, "chunks", per_page=50, flt={"q": "october 28, 1998"})
    assert r.json() and all("october 28, 1998" in c["text"].lower() for c in r.json())
    # q is a substring, not a pattern: '%' and '_' match themselves
    assert total(get_list(client, "chunks", flt={"q": "%"})) == sum(
        "%" in c["text"] for c in get_list(client, "chunks", per_page=1000).json()
    )


def test_get_one_get_many_get_many_reference(client):
    """fails if getOne/getMany do not return the asked ids, or getManyReference ignores its target."""
    dmca, ntsb = client.docs["dmca.pdf"], client.docs["20071229X02007.pdf"]
    r = client.post(
        "/admin/api/qa_pairs", json={"question": "q?", "answer": "a", "evidence": "e", "chunk_id": "c", "colour": "red"}
    )
    assert r.status_code == 400 and "'colour'" in r.json()["message"]
    r = client.get(f"/admin/api/documents/{dmca['id']}")
    assert r.status_code == 200 and r.json()["doc_name"] == "dmca.pdf" and r.json()["id"] == dmca["id"]
    assert client.get("/admin/api/documents/nope").status_code == 404
    assert client.get("/admin/api/documents/nope").json()["message"]
    # getMany: filter={"id":[...]} and no sort/range
    q = urlencode({"filter": json.dumps({"id": [dmca["id"], ntsb["id"]]})})
    r = client.get(f"/admin/api/documents?{q}")
    assert r.status_code == 200 and {d["id"] for d in r.json()} == {dmca["id"], ntsb["id"]}
    # getManyReference: the chunks of one document, the target merged into the filter
    r = get_list(client, "chunks", sort=("page_start", "ASC"), per_page=25, flt={"document_id": ntsb["id"]})
    assert r.status_code == 200 and total(r) == ntsb["chunk_count"]
    assert {c["document_id"] for c in r.json()} == {ntsb["id"]}
    # pairs generated at ingestion reference their document
    r = get_list(client, "qa_pairs", sort=("created_at", "DESC"), per_page=100, flt={"document_id": dmca["id"]})
    assert r.status_code == 200 and total(r) >= 1 and {p["document_id"] for p in r.json()} == {dmca["id"]}


def _a_chunk(client, doc):
    r = get_list(client, "chunks", sort=("index", "ASC"), per_page=1, flt={"document_id": doc["id"]})
    return r.json()[0]


def test_qa_pairs_create_update_delete_keep_evidence_verbatim(client):
    """fails if a pair whose evidence is not in its chunk is stored (create or update), if a valid
    edit is not saved, or if delete does not remove and return the record."""
    doc = client.docs["dmca.pdf"]
    chunk = _a_chunk(client, doc)
    words = chunk["text"].split()
    evidence = "  ".join(words[3:12])  # verbatim up to whitespace
    r = client.post(
        "/admin/api/qa_pairs",
        json={"question": "What does it say?", "answer": words[5], "evidence": evidence, "chunk_id": chunk["id"]},
    )
    assert r.status_code == 201, r.text
    pair = r.json()
    assert pair["id"] and pair["document_id"] == doc["id"] and pair["page"] == chunk["page_start"]
    assert pair["generator"] == "manual"

    bad = {**pair, "evidence": "this sentence appears nowhere in the chunk"}
    r = client.put(f"/admin/api/qa_pairs/{pair['id']}", json=bad)
    assert r.status_code == 400 and "verbatim" in r.json()["message"]
    assert client.get(f"/admin/api/qa_pairs/{pair['id']}").json()["evidence"] == pair["evidence"]
    r = client.post("/admin/api/qa_pairs", json={**bad, "id": None})
    assert r.status_code == 400 and "verbatim" in r.json()["message"]
    r = client.post(
        "/admin/api/qa_pairs", json={"question": "q?", "answer": "a", "evidence": evidence, "chunk_id": "no-such-chunk"}
    )
    assert r.status_code == 400 and "chunk_id" in r.json()["message"]
    # a pair written here is "manual": another kind is refused, not stored as "manual" without a word
    weird = {"question": "q?", "answer": words[5], "evidence": evidence, "chunk_id": chunk["id"], "kind": "weird"}
    r = client.post("/admin/api/qa_pairs", json=weird)
    assert r.status_code == 400 and "kind" in r.json()["message"], r.text

    # react-admin's update sends the whole record back, edited fields included
    r = client.put(f"/admin/api/qa_pairs/{pair['id']}", json={**pair, "question": "Edited question?"})
    assert r.status_code == 200 and r.json()["question"] == "Edited question?" and r.json()["id"] == pair["id"]
    assert client.get(f"/admin/api/qa_pairs/{pair['id']}").json()["question"] == "Edited question?"

    r = client.delete(f"/admin/api/qa_pairs/{pair['id']}", headers={"Content-Type": "text/plain"})
    assert r.status_code == 200 and r.json()["id"] == pair["id"]
    assert client.get(f"/admin/api/qa_pairs/{pair['id']}").status_code == 404


@pytest.mark.parametrize("resource", ["chunks", "datasets", "query_logs", "eval_runs"])
def test_writes_to_read_only_resources_are_405(client, resource):
    """fails if a read-only resource accepts create, update or delete."""
    assert client.post(f"/admin/api/{resource}", json={"x": 1}).status_code == 405
    assert client.put(f"/admin/api/{resource}/1", json={"x": 1}).status_code == 405
    r = client.delete(f"/admin/api/{resource}/1")
    assert r.status_code == 405 and "read-only" in r.json()["message"]
    assert client.post("/admin/api/documents", json={"doc_name": "x"}).status_code == 405


@pytest.mark.parametrize(
    "params,word",
    [
        ({"sort": '["text; DROP TABLE chunks--","ASC"]'}, "not sortable"),
        ({"sort": '["nope","ASC"]'}, "'nope'"),
        ({"sort": '["index","ASC; DELETE FROM chunks"]'}, "ASC or DESC"),
        ({"sort": '["index"'}, "malformed JSON"),
        ({"sort": '"index"'}, "sort"),
        ({"range": "[0,"}, "malformed JSON"),
        ({"range": "[5,1]"}, "range"),
        ({"range": '[0,"10"]'}, "range"),
        ({"range": "[0,100000]"}, "range"),
        ({"filter": "{not json"}, "malformed JSON"),
        ({"filter": "[1,2]"}, "JSON object"),
        ({"filter": '{"1=1 OR text":"x"}'}, "not filterable"),
        ({"filter": '{"text":"x"}'}, "'text'"),
        ({"filter": '{"page_start":"1 OR 1=1"}'}, "number"),
        ({"filter": '{"page_start_gte":{"$gt":1}}'}, "scalar"),
        ({"filter": '{"q":["a"]}'}, "'q'"),
        ({"filter": '{"id":[{"a":1}]}'}, "scalar"),
        ({"filter": '{"page_start":100000000000000000000000000000}'}, "out of range"),
        ({"filter": '{"page_start":NaN}'}, "page_start"),
        ({"filter": '{"q":"a\\u0000b"}'}, "NUL"),
        ({"range": "[100000000000000000000000000000,100000000000000000000000000005]"}, "range"),
    ],
)
def test_hostile_parameters_are_400_naming_the_problem(client, params, word):
    """fails if a bad sort/range/filter reaches SQL (500 or rows returned) instead of a 400 that names it."""
    before = total(get_list(client, "chunks"))
    r = client.get(f"/admin/api/chunks?{urlencode(params)}")
    assert r.status_code == 400, (params, r.status_code, r.text)
    assert word in r.json()["message"], r.json()
    assert total(get_list(client, "chunks")) == before  # nothing dropped or deleted


def test_unknown_resource_and_bad_body(client):
    """fails if an unknown resource or a non-object JSON body gives anything but a clear 4xx."""
    r = get_list(client, "users")
    assert r.status_code == 404 and "unknown resource" in r.json()["message"]
    r = client.post("/admin/api/qa_pairs", content=b"[1,2", headers={"content-type": "application/json"})
    assert r.status_code == 400 and "malformed JSON" in r.json()["message"]
    r = client.post("/admin/api/qa_pairs", json=["a"])
    assert r.status_code == 400


def test_cors_exposes_content_range(client):
    """fails if a browser on another origin cannot read Content-Range (react-admin needs it for totals)."""
    r = client.options(
        "/admin/api/documents",
        headers={
            "Origin": "http://ui.example",
            "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "range",
        },
    )
    assert r.status_code == 200
    r = get_list(client, "documents", Origin="http://ui.example")
    assert "content-range" in r.headers.get("access-control-expose-headers", "").lower()
    assert r.headers["access-control-allow-origin"] == "http://ui.example"


def test_query_logs_and_eval_runs_lists(client):
    """fails if query logs are not listed/filterable after a query, or eval_runs lack their summary."""
    client.post("/search", json={"question": "signed into law", "mode": "bm25", "top_k": 2})
    client.app.state.telemetry.flush(timeout=10)
    import time

    for _ in range(50):
        r = get_list(client, "query_logs", sort=("created_at", "DESC"), flt={"endpoint": "search", "mode": "bm25"})
        if r.json():
            break
        time.sleep(0.1)
    assert r.status_code == 200 and r.json()[0]["question"] == "signed into law"
    assert r.json()[0]["mode"] == "bm25"
    r = get_list(client, "query_logs", flt={"cache_hit": "yes"})
    assert r.status_code == 400
    r = get_list(client, "eval_runs", sort=("created_at", "DESC"))
    assert r.status_code == 200 and total(r) == 0


def test_eval_run_record_says_what_its_counts_cover():
    """Fails if an evaluation run's admin record does not say, in words, which questions its
    retrieval metrics (each mode's n) count, or invents a split for a run without results."""
    from ragaudit.api.admin import _run_extra
    from ragaudit.platform.db import EvalRun

    results = {
        "dataset": {"name": "set", "n_questions": 12, "n_answerable": 11, "n_unanswerable": 1, "n_refuse": 1},
        "modes": {"hybrid": {"hit@5": 1.0, "n": 11}},
        "answers": {"hybrid": {"refusal_accuracy": 1.0, "n": 12, "labels": {"answered": 12}}},
    }
    done = _run_extra(EvalRun(results=results, progress_done=12, progress_total=12), None)
    assert done["question_split"] == (
        "12 questions: 11 answerable (retrieval metrics), 1 must-refuse (refusal accuracy covers all 12)"
    )
    assert done["n_questions"] == 12 and done["modes"]["hybrid"]["n"] == 11
    queued = _run_extra(EvalRun(results=None, progress_done=0, progress_total=12), None)
    assert queued["question_split"] is None and queued["n_questions"] is None


def test_api_key_rules(tmp_path, embedder):
    """fails if the bridge lets a write through without a key when keys are set, or closes reads
    that the API leaves open."""
    from ragaudit.services import release_services

    settings = make_settings(tmp_path / "k", api_keys="s3cret")
    with TestClient(create_app(settings)) as c:
        assert get_list(c, "documents").status_code == 200  # reads open by default
        r = c.delete("/admin/api/qa_pairs/x")
        assert r.status_code == 401 and "s3cret" not in r.text
        assert c.delete("/admin/api/qa_pairs/x", headers={"X-API-Key": "s3cret"}).status_code == 404
        assert c.post("/admin/api/qa_pairs", json={}, headers={"Authorization": "Bearer wrong"}).status_code == 401
    release_services(settings)
    settings = make_settings(tmp_path / "k2", api_keys="s3cret", read_requires_api_key=True)
    with TestClient(create_app(settings)) as c:
        assert get_list(c, "documents").status_code == 401
        assert get_list(c, "documents", **{"X-API-Key": "s3cret"}).status_code == 200
    release_services(settings)


def test_document_file_and_offline_docs(client):
    """fails if the stored PDF is not served (or served for an unknown id), or if /docs and /redoc
    point at a CDN instead of assets served by the API itself."""
    dmca = client.docs["dmca.pdf"]
    r = client.get(f"/documents/{dmca['id']}/file")
    assert r.status_code == 200 and r.headers["content-type"] == "application/pdf"
    assert r.content == (SAMPLES / "dmca.pdf").read_bytes()
    assert r.headers["content-disposition"].startswith("inline")
    assert client.get("/documents/nope/file").status_code == 404
    for page in ("/docs", "/redoc"):
        html = client.get(page).text
        assert "cdn" not in html.lower() and "/static-offline-docs/" in html
    assert client.get("/static-offline-docs/swagger-ui-bundle.js").status_code == 200
    assert client.get("/static-offline-docs/redoc.standalone.js").status_code == 200


def test_documents_reingest_and_delete(client):
    """fails if PUT with another strategy does not re-ingest the stored PDF (strategy and version
    unchanged), if another field can be changed through it, or if DELETE leaves the document or its
    chunks behind."""
    with open(SAMPLES / "20080102X00002.pdf", "rb") as f:
        doc = client.post(
            "/documents", params={"wait": "true"}, files={"file": ("20080102X00002.pdf", f, "application/pdf")}
        ).json()["document"]
    rec = client.get(f"/admin/api/documents/{doc['id']}").json()
    assert rec["strategy"] == "sentence"
    r = client.put(f"/admin/api/documents/{doc['id']}", json={**rec, "doc_name": "renamed.pdf", "strategy": "fixed"})
    assert r.status_code == 400 and "'doc_name'" in r.json()["message"]
    r = client.put(f"/admin/api/documents/{doc['id']}", json={**rec, "strategy": "nonsense"})
    assert r.status_code == 400
    r = client.put(f"/admin/api/documents/{doc['id']}", json={**rec, "strategy": "fixed"})
    assert r.status_code == 200, r.text
    assert r.json()["id"] == doc["id"] and r.json()["strategy"] == "fixed" and r.json()["status"] == "ready"
    assert r.json()["ingest_version"] > rec["ingest_version"]
    chunks = get_list(client, "chunks", per_page=100, flt={"document_id": doc["id"], "strategy": "fixed"})
    assert total(chunks) >= 1

    r = client.delete(f"/admin/api/documents/{doc['id']}")
    assert r.status_code == 200 and r.json()["id"] == doc["id"]
    assert client.get(f"/admin/api/documents/{doc['id']}").status_code == 404
    assert total(get_list(client, "chunks", flt={"document_id": doc["id"]})) == 0
    assert client.delete(f"/admin/api/documents/{doc['id']}").status_code == 404


def test_delete_of_a_document_being_ingested_is_409(client):
    """A document whose run is under way (status ``embedding``) is not deleted through the admin
    bridge: 409 naming the status, the document and its chunks stay. Fails if the bridge deletes
    under a run (the ingestion queue's lanes share no lock: the run would publish points of a
    deleted document)."""
    from sqlalchemy import update

    from ragaudit.platform.db import Document

    svc = client.app.state.services
    doc = client.docs["20071229X02007.pdf"]
    with svc.sessions.begin() as s:
        s.execute(update(Document).where(Document.id == doc["id"]).values(status="embedding"))
    try:
        r = client.delete(f"/admin/api/documents/{doc['id']}")
        assert r.status_code == 409 and "embedding" in r.json()["message"], r.text
        assert client.get(f"/admin/api/documents/{doc['id']}").status_code == 200
        assert total(get_list(client, "chunks", flt={"document_id": doc["id"]})) == doc["chunk_count"]
    finally:
        with svc.sessions.begin() as s:
            s.execute(update(Document).where(Document.id == doc["id"]).values(status="ready"))


def test_date_filters_take_iso_dates_and_refuse_others_naming_the_value(client):
    """Fails if ``created_at_gte`` / ``created_at_lte`` on documents, query_logs or eval_runs do not
    filter by ISO 8601 dates and times (offsets and ``Z`` included), if a date-only upper bound
    leaves out that day's rows, or if a value that is not a date gets anything but a 400 whose
    message names the field and the value."""
    from datetime import datetime, timezone

    from ragaudit.platform.db import EvalRun, QueryLog, new_id

    svc = client.app.state.services
    t1 = datetime(2021, 3, 1, 10, 0, tzinfo=timezone.utc)
    t2 = datetime(2021, 3, 2, 23, 30, tzinfo=timezone.utc)
    ids = {"query_logs": {}, "eval_runs": {}}
    with svc.sessions.begin() as s:
        for t in (t1, t2):
            q = QueryLog(id=new_id(), created_at=t, question="date filter", question_hash="0" * 64, endpoint="search")
            e = EvalRun(id=new_id(), created_at=t, dataset="date-filter", params={})
            s.add_all([q, e])
            ids["query_logs"][q.id], ids["eval_runs"][e.id] = t, t
    try:
        cases = [
            ({"created_at_gte": "2021-03-02"}, {t2}),
            ({"created_at_lte": "2021-03-01"}, {t1}),  # a date-only upper bound covers that whole day
            ({"created_at_gte": "2021-03-01T10:00:00Z", "created_at_lte": "2021-03-02T23:30:00+00:00"}, {t1, t2}),
            ({"created_at_gte": "2021-03-01T11:00:00+01:00"}, {t1, t2}),  # = 10:00 UTC
            ({"created_at_gte": "2021-03-01T10:00:01", "created_at_lte": "2021-03-03"}, {t2}),  # naive = UTC
            ({"created_at_lte": "2021-02-28T23:59:59Z"}, set()),
        ]
        for resource, made in ids.items():
            for flt, want in cases:
                r = get_list(client, resource, per_page=100, flt={"id": list(made), **flt})
                assert r.status_code == 200, (resource, flt, r.status_code, r.text)
                assert {made[row["id"]] for row in r.json()} == want, (resource, flt)
        n_docs = total(get_list(client, "documents"))
        assert n_docs >= 2
        assert total(get_list(client, "documents", flt={"created_at_gte": "2021-01-01"})) == n_docs
        assert total(get_list(client, "documents", flt={"created_at_lte": "2021-01-01T00:00:00Z"})) == 0
        assert total(get_list(client, "documents", flt={"created_at_gte": "2999-01-01"})) == 0
        for resource in ("documents", "query_logs", "eval_runs"):
            for bound in ("created_at_gte", "created_at_lte"):
                for bad in ("yesterday", "2021-13-01", "2021-03-01T25:00", 20210301, True):
                    r = get_list(client, resource, flt={bound: bad})
                    assert r.status_code == 400, (resource, bound, bad, r.status_code, r.text)
                    msg = r.json()["message"]
                    assert bound in msg and repr(bad) in msg, msg
    finally:
        with svc.sessions.begin() as s:
            for model, made in ((QueryLog, ids["query_logs"]), (EvalRun, ids["eval_runs"])):
                for i in made:
                    s.delete(s.get(model, i))


@pytest.mark.parametrize(
    "name,shown",
    [
        ('folder/q"uote; x=y\\z é.pdf', 'q"uote; x=y\\z é.pdf'),
        ("branch_alder/report.pdf", "report.pdf"),
    ],
)
def test_stored_file_name_is_sanitised_in_content_disposition(client, name, shown):
    """Fails if ``Content-Disposition`` of ``GET /documents/{id}/file`` carries the document name
    as given (folders included, or quotes, semicolons and backslashes that end or split the
    parameter) instead of its last path component encoded as RFC 6266 / RFC 8187 ``filename*``
    (parsed here with the standard library's RFC 2231 decoder)."""
    from email.message import Message

    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    pdf.multi_cell(0, 8, f"The register of the {shown!r} office lists eleven cabinets.")
    r = client.post(
        "/documents",
        params={"wait": "true"},
        data={"name": name},
        files={"file": ("upload.pdf", bytes(pdf.output()), "application/pdf")},
    )
    assert r.status_code == 201, r.text
    doc = r.json()["document"]
    assert doc["doc_name"] == name
    try:
        r = client.get(f"/documents/{doc['id']}/file")
        assert r.status_code == 200
        header = r.headers["content-disposition"]
        assert header.startswith("inline;") and "/" not in header, header
        parsed = Message()
        parsed["content-disposition"] = header
        assert parsed.get_content_disposition() == "inline"
        assert parsed.get_filename() == shown, header
        assert len(parsed.get_params(header="content-disposition")) == 2, header  # inline + one filename
    finally:
        client.delete(f"/documents/{doc['id']}")

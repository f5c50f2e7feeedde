"""HTTP API on a real knowledge base: upload, list, query, delete, bad input, OpenAPI."""

import time

import pytest
from fastapi.testclient import TestClient

from ragaudit.api.app import create_app
from tests.conftest import BAD, DATA, DMCA_QUESTION, SAMPLES, make_settings


@pytest.fixture()
def client(tmp_path, embedder):
    from ragaudit.services import release_services

    settings = make_settings(tmp_path / "api")
    with TestClient(create_app(settings)) as c:
        yield c
    release_services(settings)


def _upload(client, path, name=None, **form):
    with open(path, "rb") as f:
        return client.post("/documents?wait=true", files={"file": (name or path.name, f, "application/pdf")}, data=form)


def test_upload_query_delete(client):
    r = _upload(client, SAMPLES / "dmca.pdf", knowledge_base="law")
    assert r.status_code == 201, r.text
    doc = r.json()["document"]
    assert doc["status"] == "ready" and doc["pages"] == 18 and doc["knowledge_base"] == "law"
    assert _upload(client, SAMPLES / "dmca.pdf", knowledge_base="law").json()["status"] == "unchanged"
    assert [d["id"] for d in client.get("/documents").json()] == [doc["id"]]
    assert client.get(f"/documents/{doc['id']}").json()["chunk_count"] == doc["chunk_count"]

    r = client.post("/query", json={"question": DMCA_QUESTION, "knowledge_base": "law", "top_k": 3})
    assert r.status_code == 200, r.text
    body = r.json()
    assert any(
        c["doc_name"] == "dmca.pdf" and c["page"] == 1 and "October 28, 1998" in c["quote"] for c in body["citations"]
    )
    assert len(body["retrieved"]) == 3 and all("vector" in x["ranks"] for x in body["retrieved"])
    # scoped to another knowledge base: nothing retrieved, refused
    r = client.post("/query", json={"question": DMCA_QUESTION, "knowledge_base": "other"})
    assert r.json()["retrieved"] == [] and r.json()["label"] == "refused"

    r = client.post("/search", json={"question": "vessel hull protection", "mode": "bm25", "top_k": 2})
    assert r.status_code == 200 and len(r.json()["retrieved"]) == 2
    assert all(x["ranks"]["vector"] is None for x in r.json()["retrieved"])
    assert body["notes"] == [] and r.json()["notes"] == []
    # retrieval notes reach API users: a Chinese question skips the English-only vector leg
    for path in ("/query", "/search"):
        r = client.post(path, json={"question": "授信额度总额是多少？"})
        assert r.status_code == 200 and any("vector leg skipped" in n for n in r.json()["notes"]), path

    assert client.delete(f"/documents/{doc['id']}").status_code == 200
    assert client.get("/documents").json() == []
    assert client.get(f"/documents/{doc['id']}").status_code == 404
    health = client.get("/health").json()
    assert health["parts"]["qdrant"]["points"] == 0


@pytest.mark.parametrize(
    "name,code,words",
    [
        ("zero-byte.pdf", 422, "empty file"),
        ("plain-text-renamed.pdf", 415, "not a PDF"),
        ("password-example.pdf", 422, "password-protected"),
        ("truncated-half-dpr.pdf", 422, "corrupt or truncated"),
        ("image-only-3pages.pdf", 422, "no extractable text"),
    ],
)
def test_bad_uploads_refused_and_nothing_stored(client, name, code, words):
    r = _upload(client, BAD / name)
    assert r.status_code == code
    assert words in r.json()["detail"] and name in r.json()["detail"]
    assert client.get("/documents").json() == []


def test_an_unknown_upload_form_field_is_refused_naming_it(client):
    """Fails if a form field the upload does not define is ignored (``-F knowledgebase=reports``
    would file the document under ``default``) instead of a 422 naming the field
    and the allowed ones, with or without ``?wait=true``, or if anything is stored before the
    refusal; ``wait`` sent as a form field is refused too, saying it is a query parameter, and so
    are ``knowledge_base`` sent in the query string and a form field given twice (two files: one
    would be lost)."""
    for path in ("/documents", "/documents?wait=true"):
        with open(SAMPLES / "dmca.pdf", "rb") as f:
            r = client.post(path, files={"file": ("dmca.pdf", f, "application/pdf")}, data={"knowledgebase": "reports"})
        assert r.status_code == 422, (path, r.text)
        (err,) = r.json()["detail"]
        assert err["type"] == "extra_forbidden" and err["loc"] == ["body", "knowledgebase"], err
        assert all(f in err["msg"] for f in ("file", "name", "knowledge_base", "strategy")), err
        assert err["input"] == "reports"
    r = _upload(client, SAMPLES / "dmca.pdf", knowledge_base="reports", wait="true", page_start="3")
    assert r.status_code == 422, r.text
    errs = {e["loc"][1]: e["msg"] for e in r.json()["detail"]}
    assert set(errs) == {"wait", "page_start"} and "?wait=true" in errs["wait"], errs
    assert client.get("/documents").json() == []  # nothing stored
    # in the query string, knowledge_base would be dropped too
    with open(SAMPLES / "dmca.pdf", "rb") as f:
        r = client.post(
            "/documents?wait=true&knowledge_base=reports", files={"file": ("dmca.pdf", f, "application/pdf")}
        )
    assert r.status_code == 422, r.text
    (err,) = r.json()["detail"]
    assert err["loc"] == ["query", "knowledge_base"] and "form field" in err["msg"], err
    # two files in one upload (one would be lost) and a name given twice
    with open(SAMPLES / "dmca.pdf", "rb") as f1, open(SAMPLES / "20071229X02007.pdf", "rb") as f2:
        r = client.post(
            "/documents?wait=true",
            files=[("file", ("dmca.pdf", f1, "application/pdf")), ("file", ("n.pdf", f2, "application/pdf"))],
            data={"name": ["a.pdf", "b.pdf"]},
        )
    assert r.status_code == 422, r.text
    assert {(e["loc"][1], e["type"]) for e in r.json()["detail"]} == {("file", "too_many"), ("name", "too_many")}
    assert client.get("/documents").json() == []  # nothing stored
    r = _upload(client, SAMPLES / "dmca.pdf", knowledge_base="reports", name="d.pdf", strategy="fixed")
    assert r.status_code == 201 and r.json()["document"]["knowledge_base"] == "reports", r.text


def test_validation_and_openapi(client):
    """Fails if a bad mode, an empty question or an unknown chunking strategy is accepted on the
    query side (the strategy is a typed value: a 422 that lists the valid ones), or if the
    OpenAPI document or /health lose their routes."""
    assert client.post("/query", json={"question": "x", "mode": "dense"}).status_code == 422
    assert client.post("/query", json={"question": ""}).status_code == 422
    for path in ("/query", "/search", "/query/stream"):
        r = client.post(path, json={"question": "x", "strategy": "paragraph"})
        assert r.status_code == 422, (path, r.text)
        assert all(s in r.text for s in ("fixed", "sentence", "heading", "semantic")), r.text
    r = client.post("/evaluate", json={"dataset": "generated", "strategy": "paragraph"})
    assert r.status_code == 422 and "semantic" in r.text, r.text
    assert client.post("/search", json={"question": "x", "strategy": "heading"}).status_code == 200
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/documents", "/documents/{document_id}", "/query", "/search", "/health"} <= set(paths)
    assert {"post", "get"} <= set(paths["/documents"]) and "delete" in paths["/documents/{document_id}"]
    h = client.get("/health")
    assert h.status_code == 200 and h.json()["parts"]["database"]["status"] == "up"


def test_evaluate_never_opens_a_server_path(client, tmp_path):
    """Fails if ``POST /evaluate`` reads a dataset from a file path on the server: a real JSONL
    gold set on disk (which the CLI accepts), a file that is not JSONL, a directory and a path
    that does not exist must all get the same 404 naming ``POST /datasets`` and start no run (no
    existence oracle); or if a set uploaded under a name that looks like a path stops working."""
    gold = (DATA / "eval_small.jsonl").resolve()
    assert gold.is_file()
    not_jsonl = tmp_path / "notes.txt"
    not_jsonl.write_text("not json\n", encoding="utf-8")
    answers = {}
    for ref in (str(gold), str(not_jsonl), str(tmp_path), str(tmp_path / "missing.jsonl")):
        r = client.post("/evaluate", json={"dataset": ref, "modes": ["bm25"], "answers": False})
        answers[ref] = (r.status_code, r.json()["detail"].replace(repr(ref), "REF"))
    assert set(answers.values()) == {
        (
            404,
            "dataset REF not found: not the id or name of an imported dataset nor generated[:KB[/DOC]]; "
            "upload it with POST /datasets",
        )
    }, answers
    assert client.get("/evaluate").json() == []

    # the same path as the name of an uploaded set is that set, read from the database
    with open(gold, "rb") as f:
        up = client.post("/datasets", files={"file": ("x.jsonl", f, "application/x-ndjson")}, data={"name": str(gold)})
    assert up.status_code == 201, up.text
    r = client.post("/evaluate", json={"dataset": str(gold), "modes": ["bm25"], "answers": False})
    assert r.status_code == 202 and r.json()["dataset"] == str(gold), r.text
    run = r.json()
    assert run["params"]["dataset_files"] is False
    deadline = time.time() + 60
    while run["status"] in ("queued", "running") and time.time() < deadline:
        time.sleep(0.2)
        run = client.get(f"/evaluate/{run['id']}").json()
    assert run["status"] == "done", run["error"]
    assert run["results"]["dataset"]["n_questions"] == 12

"""Asynchronous uploads: POST /documents answers 202 at once, one worker ingests in the
background, GET /documents/{id} and /documents/{id}/events (SSE) show the stages and progress,
and a restart re-queues what a stopped server left."""

from __future__ import annotations

import contextlib
import json
import threading
import time
import warnings

import pytest
from fastapi.testclient import TestClient

from ragaudit.api.app import create_app
from tests.conftest import DATA, SAMPLES, make_settings

NTSB = DATA / "ntsb"
STAGES = ["queued", "extracting", "chunking", "embedding", "indexing"]


@pytest.fixture()
def settings(tmp_path, embedder):
    from ragaudit.services import release_services

    s = make_settings(tmp_path / "api")
    yield s
    release_services(s)


@contextlib.contextmanager
def _client(settings):
    """A TestClient of the app whose ingestion worker has ended before the client shuts down.

    A test that fails mid-way leaves uploads queued or running. The lifespan waits only 5 s for
    the running one; the ``settings`` fixture then released the services under it, and the run
    died with a ``KeyError`` from the services registry whose tracebacks filled the teardown and
    buried the real failure. Here the worker is stopped first: the run in progress ends (up to
    180 s), the waiting ones stay ``queued`` and are never started."""
    with TestClient(create_app(settings)) as client:
        try:
            yield client
        finally:
            if not client.app.state.ingest_queue.stop(timeout=180):
                warnings.warn("the ingestion worker was still running after 180 s", stacklevel=1)


def _events(client, doc_id: str) -> list[tuple[str, dict]]:
    """Read the SSE stream of a document to its end: ``[(event, data), ...]``."""
    out, event = [], None
    with client.stream("GET", f"/documents/{doc_id}/events", params={"interval_s": 0.05}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("event:"):
                event = line.split(":", 1)[1].strip()
            elif line.startswith("data:"):
                out.append((event, json.loads(line.split(":", 1)[1])))
    return out


def test_five_uploads_at_once_answer_202_and_all_end_ready(settings):
    """Five PDFs posted concurrently: each POST answers 202 (status queued) before its document is
    ingested (most are still waiting when the last POST returns), the SSE stream of each reports stage progress in order and ends ``ready``,
    and every document is searchable. Fails if POST waits for the ingestion (it took 5-20 s per
    file before), if stages are not written by the stage functions (the stream would jump from
    queued to ready), if runs are lost or two runs of one document interleave, or if the stream
    never ends."""
    files = [
        SAMPLES / "dmca.pdf",
        SAMPLES / "20071229X02007.pdf",
        SAMPLES / "20080102X00002.pdf",
        NTSB / "20080116X00055.pdf",
        NTSB / "20080117X00064.pdf",
    ]
    with _client(settings) as client:
        answers: dict[str, tuple[int, float, dict]] = {}

        def post(path):
            t = time.perf_counter()
            r = client.post("/documents", files={"file": (path.name, path.read_bytes(), "application/pdf")})
            answers[path.name] = (r.status_code, time.perf_counter() - t, r.json())

        threads = [threading.Thread(target=post, args=(f,)) for f in files]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert {n: a[0] for n, a in answers.items()} == {f.name: 202 for f in files}, answers
        # no clock bound (it missed under load): POST must return before the ingestion of its
        # document, so when the last POST has returned, one worker running documents one at a time
        # cannot have finished most of them; a POST that waited for its ingestion leaves all 5 ready
        waiting = [d for d in client.get("/documents").json() if d["status"] != "ready"]
        assert len(waiting) >= 3, ({n: round(a[1], 2) for n, a in answers.items()}, waiting)
        assert all(a[2]["status"] == "queued" and a[2]["document"]["status"] == "queued" for a in answers.values())

        # every document is followed at once, the waiting ones from the start: every stage appears, in order
        ids = {n: a[2]["document"]["id"] for n, a in answers.items()}
        streams: dict[str, list] = {}
        failures: dict[str, BaseException] = {}

        def follow(name: str) -> None:
            try:
                streams[name] = _events(client, ids[name])
            except BaseException as e:  # re-raised below: a lost stream must fail the test
                failures[name] = e

        readers = [threading.Thread(target=follow, args=(n,)) for n in ids]
        for th in readers:
            th.start()
        for th in readers:
            th.join()
        assert not failures, failures
        assert set(streams) == set(ids), streams.keys()
        for name, evs in streams.items():
            assert evs[-1][0] == "ready" and evs[-1][1]["status"] == "ready", (name, evs[-3:])
            seen = [d["status"] for e, d in evs if e == "progress"]
            assert seen == sorted(seen, key=STAGES.index), (name, seen)  # never goes backwards
        # at least the documents still waiting when their stream opened show all run stages
        full = [evs for evs in streams.values() if evs[0][1]["status"] == "queued"]
        assert full, streams
        for evs in full:
            assert {d["status"] for _, d in evs} >= {"extracting", "embedding", "indexing", "ready"}, evs
            embedding = [d for _, d in evs if d["status"] == "embedding"]
            assert all(d["chunks"]["total"] > 0 for d in embedding)
            final = evs[-1][1]
            assert final["pages"]["done"] == final["pages"]["total"] > 0
            assert final["chunks"]["done"] == final["chunks"]["total"] > 0
        docs = {d["doc_name"]: d for d in client.get("/documents").json()}
        assert set(docs) == set(ids) and all(d["status"] == "ready" and d["chunk_count"] > 0 for d in docs.values())
        assert docs["dmca.pdf"]["built_with"]["strategy"] == "sentence"
        r = client.post("/search", json={"question": "Digital Millennium Copyright Act signed", "doc_name": "dmca.pdf"})
        assert r.json()["retrieved"], r.text
        # the same bytes again: answered at once, nothing queued
        again = client.post("/documents", files={"file": ("dmca.pdf", files[0].read_bytes(), "application/pdf")})
        assert again.status_code == 200 and again.json()["status"] == "unchanged"
        # bad input still gets its 4xx at once, nothing stored
        bad = client.post("/documents", files={"file": ("x.pdf", b"not a pdf", "application/pdf")})
        assert bad.status_code == 415 and len(client.get("/documents").json()) == 5
        assert client.get("/documents/nope/events").status_code == 404


def test_restart_requeues_queued_and_interrupted_uploads(settings):
    """Documents left ``queued`` (accepted, never run) and half-run (status ``embedding``) by a
    stopped server are ingested by the next one. Fails if the queue lives only in memory (the
    uploads would stay queued forever) or if a half-run document is not re-queued."""
    from sqlalchemy import update

    from ragaudit.ingest import documents as ingest
    from ragaudit.platform.db import Document
    from ragaudit.services import get_services

    svc = get_services(settings)
    a, _ = ingest.register(svc, (SAMPLES / "20071229X02007.pdf").read_bytes(), "a.pdf")
    b, _ = ingest.register(svc, (SAMPLES / "20080102X00002.pdf").read_bytes(), "b.pdf")
    with svc.sessions.begin() as s:  # b was being embedded when the server stopped
        s.execute(update(Document).where(Document.id == b.id).values(status="embedding", chunks_total=9))
    with _client(settings) as client:
        assert client.app.state.ingest_queue.wait_idle(120)
        docs = {d["doc_name"]: d for d in client.get("/documents").json()}
        assert {n: d["status"] for n, d in docs.items()} == {"a.pdf": "ready", "b.pdf": "ready"}
        assert all(d["ingest_version"] == 1 for d in docs.values())
    assert svc.store.count(b.id) == docs["b.pdf"]["chunk_count"]


def test_failed_background_ingestion_is_reported_with_its_reason(settings, monkeypatch):
    """An ingestion that fails in the background leaves the document ``failed`` with the reason
    (the client can read it; nothing searchable was written); the SSE stream ends with ``failed``.
    Fails if a failed first ingestion deletes the row (the client would get a 404, not a reason)."""
    from ragaudit.services import get_services

    svc = get_services(settings)

    def boom(texts):
        raise RuntimeError("embedding backend crashed")

    with _client(settings) as client:
        monkeypatch.setattr(svc.embedder, "embed", boom)
        r = client.post(
            "/documents", files={"file": ("n.pdf", (NTSB / "20080117X00064.pdf").read_bytes(), "application/pdf")}
        )
        assert r.status_code == 202
        evs = _events(client, r.json()["document"]["id"])
        assert evs[-1][0] == "failed" and "embedding backend crashed" in evs[-1][1]["error"], evs[-1]
        doc = client.get(f"/documents/{r.json()['document']['id']}").json()
        assert doc["status"] == "failed" and doc["ingest_version"] == 0
    assert svc.store.count() == 0


def test_a_short_upload_does_not_wait_for_a_long_one(tmp_path, embedder):
    """A 30-page PDF, then a 3-page one, then an 8-page one are posted: the 3-page one (at most
    ``queue_express_pages``) is ingested beside the long one and is ``ready`` while the long one
    is still being ingested; its SSE stream shows the extraction's page counts and every stage,
    ``indexing`` included; the long one's pages are reported as they are extracted; the 8-page
    one, waiting behind the long one, has its pages extracted while the long one is embedded and
    its run does not extract them again. Fails if documents run strictly one after another (the
    short one would wait for the long one's whole ingestion), if pages are only reported when
    extraction ends, if a short stage is lost between two reads of the row, or if the next
    document is not parsed ahead."""
    from ragaudit.ingest.documents import add_progress_listener, remove_progress_listener
    from ragaudit.services import release_services
    from tests.conftest import text_pdf

    settings = make_settings(tmp_path / "api", queue_express_pages=5)
    writes: list[tuple[str, dict]] = []
    lock = threading.Lock()

    def record(doc_id, values):
        with lock:
            writes.append((doc_id, dict(values)))

    add_progress_listener(record)
    try:
        with _client(settings) as client:

            def post(name: str, pages: int, topic: str) -> str:
                r = client.post("/documents", files={"file": (name, text_pdf(pages, topic), "application/pdf")})
                assert r.status_code == 202, r.text
                assert r.json()["document"]["progress"]["pages"] == {"done": 0, "total": pages}  # known at upload
                return r.json()["document"]["id"]

            long_id = post("long.pdf", 30, "harbour")
            short_id = post("short.pdf", 3, "orchard")
            next_id = post("next.pdf", 8, "glacier")
            short = _events(client, short_id)
            long_then = client.get(f"/documents/{long_id}").json()["status"]
            assert client.app.state.ingest_queue.wait_idle(600)
            docs = {d["doc_name"]: d for d in client.get("/documents").json()}
    finally:
        remove_progress_listener(record)
        release_services(settings)

    def first(doc_id: str, status: str) -> int:  # order of the progress writes, not a sampled read
        return next((i for i, (d, v) in enumerate(writes) if d == doc_id and v.get("status") == status), len(writes))

    assert short[-1][0] == "ready", short[-3:]
    # the short one reached its last stage before the long one did: read from the order of the
    # progress writes (a status read after the short one's stream ended may find the long one ready)
    assert first(short_id, "indexing") < first(long_id, "indexing") < len(writes), (long_then, writes[-6:])
    assert all(d["status"] == "ready" for d in docs.values()), docs
    seen = [d for e, d in short if e == "progress"]
    assert [d["status"] for d in seen] == sorted((d["status"] for d in seen), key=STAGES.index)
    # every stage was written (the stream may subscribe after a 3-page extraction has ended)
    written = {v.get("status") for d, v in writes if d == short_id}
    assert {"extracting", "chunking", "embedding", "indexing"} <= written | {d["status"] for d in seen}, seen
    assert {v["pages_total"] for d, v in writes if d == short_id and "pages_total" in v} == {3}, writes

    def of(doc_id: str) -> list[dict]:
        return [v for d, v in writes if d == doc_id]

    long_pages = {v["pages_done"] for v in of(long_id) if "pages_done" in v}
    assert long_pages & set(range(1, 30)), sorted(long_pages)  # pages reported while being extracted
    nxt = of(next_id)
    claimed = next(k for k, v in enumerate(nxt) if v.get("status") == "extracting")
    assert {"pages_done": 8, "pages_total": 8} in nxt[:claimed], nxt  # extracted ahead, while queued
    assert all(v.get("pages_done") != 0 for v in nxt[claimed:]), nxt  # and not extracted again

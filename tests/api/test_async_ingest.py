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
    queued to ready), if runs are lost or not serialised, or if the stream never ends."""
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

        # the first document is followed from the start: every stage appears, in order
        ids = {n: a[2]["document"]["id"] for n, a in answers.items()}
        streams = {n: _events(client, i) for n, i in ids.items()}
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

"""Concurrent uploads of the same bytes under the same name into the same knowledge base produce
ONE document (issue 11, item 4), on SQLite and on the real PostgreSQL server: N parallel
``POST /documents`` in one API process, and N processes registering at once (an API and the
CLI, or two API workers, on one database)."""

from __future__ import annotations

import multiprocessing as mp
import threading

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from ragaudit.api.app import create_app
from ragaudit.ingest.documents import count_check
from ragaudit.platform.db import ChunkRow, Document
from ragaudit.services import get_services, release_services
from tests.conftest import SAMPLES, make_settings
from tests.test_document_identity import fresh_pg_database

PDF = SAMPLES / "20080102X00002.pdf"
N = 8


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.integration)])
def db_kw(request):
    """Extra settings: none (SQLite in the data folder) or a fresh PostgreSQL database."""
    if request.param == "postgresql":
        return {"database_url": fresh_pg_database(request.getfixturevalue("pg_url"))}
    return {}


def test_parallel_posts_of_the_same_bytes_make_one_document(tmp_path, embedder, db_kw):
    """Eight threads POST the same PDF under the same name at once: every answer is a success
    (202 queued or 200 unchanged) naming the SAME document id, one document row exists, and
    after the worker is done it is ready with SQL rows equal to Qdrant points. Fails if the
    registration check-then-insert is not atomic (two rows, or a 409/500 from the unique
    constraint), or if two runs of the one document interleave (count check mismatch)."""
    settings = make_settings(tmp_path / "data", **db_kw)
    data = PDF.read_bytes()
    try:
        with TestClient(create_app(settings)) as client:
            answers: list[tuple[int, dict]] = []
            barrier = threading.Barrier(N)

            def post() -> None:
                barrier.wait()
                r = client.post("/documents", files={"file": (PDF.name, data, "application/pdf")})
                answers.append((r.status_code, r.json()))

            threads = [threading.Thread(target=post) for _ in range(N)]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            assert len(answers) == N
            assert all(code in (200, 202) for code, _ in answers), answers
            ids = {a["document"]["id"] for _, a in answers}
            assert len(ids) == 1, answers
            svc = get_services(settings)
            assert client.app.state.ingest_queue.wait_idle(300)
            doc_id = ids.pop()
            r = client.get(f"/documents/{doc_id}")
            assert r.json()["status"] == "ready", r.json()
            with svc.sessions() as s:
                assert s.scalar(select(func.count()).select_from(Document)) == 1
                rows = s.scalar(select(func.count()).select_from(ChunkRow).where(ChunkRow.document_id == doc_id))
            assert rows == svc.store.count(doc_id) > 0
            assert count_check(svc, doc_id)["passed"]
    finally:
        release_services(settings)


def _register_in_child(settings_kw: dict, data: bytes, barrier, results) -> None:
    from ragaudit.ingest.documents import register
    from ragaudit.services import Services
    from tests.conftest import make_settings as _make

    svc = Services(_make(**settings_kw))
    try:
        barrier.wait(300)
        doc, needs_run = register(svc, data, PDF.name)
        results.put(("ok", doc.id, needs_run))
    except BaseException as e:  # reported to the parent, which fails the test with it
        results.put(("error", f"{type(e).__name__}: {e}", None))
    finally:
        svc.close()


def test_processes_registering_the_same_bytes_at_once_make_one_document(tmp_path, db_kw):
    """Four processes (each with its own engine, so no in-process lock helps) register the same
    bytes under the same name at the same moment: all succeed with the same document id, exactly
    one of them is told to run the ingestion, and one row exists. Fails if a process gets an
    IntegrityError or "database is locked" instead of the winner's row, or if two rows appear."""
    settings_kw = {"data_dir": tmp_path / "data", **db_kw}
    settings = make_settings(**settings_kw)
    svc = get_services(settings)
    _ = svc.engine  # migrated once, before the race
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(4), ctx.Queue()
    procs = [
        ctx.Process(target=_register_in_child, args=(settings_kw, PDF.read_bytes(), barrier, results)) for _ in range(4)
    ]
    try:
        for p in procs:
            p.start()
        got = [results.get(timeout=420) for _ in procs]
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
                p.join(5)
    try:
        assert all(g[0] == "ok" for g in got), got
        assert len({g[1] for g in got}) == 1, got
        assert sum(1 for g in got if g[2]) == 1, got
        with svc.sessions() as s:
            assert s.scalar(select(func.count()).select_from(Document)) == 1
    finally:
        release_services(settings)

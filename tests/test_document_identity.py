"""Document identity (issue 9): no document is ever lost or overwritten by another.

Every scenario runs on SQLite and on the real PostgreSQL server, and ends with each document
searchable on its own and SQL rows equal to Qdrant points per document, or with a clear
refusal; never a 500 and never damage to another document.
"""

from __future__ import annotations

import hashlib
import os
import time
import unicodedata
import uuid
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from ragaudit.ingest.documents import count_check, delete_document, ingest_bytes
from ragaudit.pipelines.runner import DagsterRunner
from ragaudit.platform.db import ChunkRow, Document, IndexState
from ragaudit.query import QueryService
from ragaudit.services import get_services, release_services
from ragaudit.types import Scope
from tests.conftest import CASES, SAMPLES, make_settings

SAME_NAME = CASES / "same-name"
NTSB = SAMPLES / "20080102X00002.pdf"  # "What registration did the Reims F172 M carry?" -> FBVIF
NTSB_Q = "What registration did the Reims F172 M carry?"


def fresh_pg_database(pg_url: str) -> str:
    """A new empty database on the test server (each test starts from nothing)."""
    import psycopg
    from sqlalchemy.engine import make_url

    url = make_url(pg_url)
    name = f"ident_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(host=url.host, port=url.port, user=url.username, dbname="postgres", autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name}")
    return url.set(database=name).render_as_string(hide_password=False)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.integration)])
def svc(request, tmp_path, embedder):
    """Services on an empty knowledge base, with SQLite or with the real PostgreSQL server."""
    kw = {}
    if request.param == "postgresql":
        kw["database_url"] = fresh_pg_database(request.getfixturevalue("pg_url"))
    settings = make_settings(tmp_path / "data", **kw)
    s = get_services(settings)
    assert s.engine.dialect.name == request.param
    yield s
    release_services(settings)


def assert_consistent(svc) -> None:
    """Every document: SQL rows == Qdrant points (live and staged); nothing staged is left; no
    point or row belongs to a document that does not exist."""
    with svc.sessions() as s:
        ids = set(s.scalars(select(Document.id)))
        row_docs = set(s.scalars(select(ChunkRow.document_id).distinct()))
        staged = s.scalar(select(func.count()).select_from(ChunkRow).where(ChunkRow.live.is_(False)))
    for doc_id in ids:
        st = count_check(svc, doc_id)
        assert st["passed"] and st["sql"] > 0 and st["staged_qdrant"] == 0, (doc_id, st)
    point_docs = {p.get("document_id") for _, p in svc.store.iter_payloads()} if svc.store.exists() else set()
    assert point_docs <= ids and row_docs <= ids
    assert staged == 0


def stored_files(svc) -> set[str]:
    d = svc.settings.files_dir
    return {p.name for p in d.iterdir()} if d.exists() else set()


def live_files(svc) -> set[str]:
    with svc.sessions() as s:
        return {f"{sha}.pdf" for sha in s.scalars(select(Document.sha256))}


def top_text(svc, question: str, scope: Scope | None = None, k: int = 3) -> str:
    return " ".join(c.text for c in QueryService(svc).search(question, scope, top_k=k).chunks)


def test_same_bytes_under_two_names_and_in_two_knowledge_bases(svc):
    """Fails if point/chunk ids leave out the document (the second upload overwrote the first's
    points: UNIQUE constraint failed, and the first document lost every point) or if cleanup after
    a failure deletes by content hash across documents."""
    data = NTSB.read_bytes()
    runner = DagsterRunner()
    first = ingest_bytes(svc, data, "report.pdf", runner)
    copy = ingest_bytes(svc, data, "copy.pdf", runner)
    other = ingest_bytes(svc, data, "report.pdf", runner, knowledge_base="other")
    assert [o.status for o in (first, copy, other)] == ["ingested"] * 3, (first, copy, other)
    ids = {o.document["id"] for o in (first, copy, other)}
    assert len(ids) == 3
    # reported as duplicates, each a document of its own
    assert {d["doc_name"] for d in other.extra["duplicate_of"]} == {"report.pdf", "copy.pdf"}
    assert_consistent(svc)
    for scope in (
        Scope(doc_names=["report.pdf"], knowledge_base="default"),
        Scope(doc_names=["copy.pdf"]),
        Scope(knowledge_base="other"),
    ):
        hits = QueryService(svc).search(NTSB_Q, scope, top_k=3).chunks
        assert hits and "FBVIF" in " ".join(c.text for c in hits), scope
        assert len({c.payload["document_id"] for c in hits}) == 1
    # deleting one copy leaves the others whole, and the shared bytes stay stored
    delete_document(svc, copy.document["id"])
    assert "FBVIF" in top_text(svc, NTSB_Q, Scope(doc_names=["report.pdf"], knowledge_base="default"))
    assert "FBVIF" in top_text(svc, NTSB_Q, Scope(knowledge_base="other"))
    assert_consistent(svc)
    assert stored_files(svc) == live_files(svc) == {f"{first.document['sha256']}.pdf"}


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.integration)])
def test_same_name_in_two_folders_via_cli(backend, request, tmp_path, monkeypatch, embedder):
    """``ragaudit ingest same-name`` keeps both reports (named by their path below the folder).
    Fails if names are cut to the file name (the second report silently replaced the first)."""
    import json

    from typer.testing import CliRunner

    from ragaudit.api.cli import app

    monkeypatch.setenv("RAGAUDIT_DATA_DIR", str(tmp_path / "cli"))
    for var in ("RAGAUDIT_DATABASE_URL", "RAGAUDIT_QDRANT_URL", "RAGAUDIT_LLM_MODEL"):
        monkeypatch.delenv(var, raising=False)
    db = {}
    if backend == "postgresql":
        db["database_url"] = fresh_pg_database(request.getfixturevalue("pg_url"))
        monkeypatch.setenv("RAGAUDIT_DATABASE_URL", db["database_url"])
    from ragaudit.answer import concise

    # the concise answer is shown whatever its confidence: this checks the clock time is extracted
    monkeypatch.setitem(concise.CALIBRATION, "threshold", 0.0)
    cli = CliRunner()
    try:
        res = cli.invoke(app, ["ingest", str(SAME_NAME)])
        assert res.exit_code == 0, res.output
        lines = res.stdout.strip().splitlines()  # result lines; progress goes to stderr
        assert [ln.split()[1].rstrip(":") for ln in lines] == ["branch_alder/report.pdf", "branch_birch/report.pdf"]
        docs = json.loads(cli.invoke(app, ["documents", "--json"]).stdout)
        assert sorted(d["doc_name"] for d in docs) == ["branch_alder/report.pdf", "branch_birch/report.pdf"]
        out = json.loads(cli.invoke(app, ["ask", "When does the Alder branch open on weekdays?", "--json"]).stdout)
        assert out["label"] == "answered" and "8 am" in out["answer"], out["answer"]
        assert out["concise_answer"] == "8 am", out  # "when does ... open" asks for a clock time
        assert {c["doc_name"] for c in out["citations"]} == {"branch_alder/report.pdf"}
        out = json.loads(
            cli.invoke(
                app, ["ask", "When does the branch open on weekdays?", "--doc", "branch_birch/report.pdf", "--json"]
            ).stdout
        )
        assert "10 am" in out["answer"] and {c["doc_name"] for c in out["citations"]} == {"branch_birch/report.pdf"}
    finally:
        release_services(make_settings(tmp_path / "cli", **db))


def test_same_file_name_given_twice_gets_distinct_names():
    """Two files with one name given directly on the command line are named by their folders."""
    from ragaudit.text.docnames import folder_names

    names = folder_names(
        [
            (str(SAME_NAME / "branch_alder" / "report.pdf"), None),
            (str(SAME_NAME / "branch_birch" / "report.pdf"), None),
            (str(NTSB), None),
        ]
    )
    assert names == ["branch_alder/report.pdf", "branch_birch/report.pdf", NTSB.name]
    assert folder_names([(str(SAME_NAME / "branch_alder" / "report.pdf"), str(SAME_NAME))]) == [
        "branch_alder/report.pdf"
    ]


@pytest.mark.parametrize(
    "name, why",
    [
        ("x" * 596 + ".pdf", "characters long; the limit is 255"),
        ("bad\x00name.pdf", "control character (U+0000)"),
        ("two\nlines.pdf", "control character (U+000A)"),
        ("tab\tname.pdf", "control character (U+0009)"),
        ("   ", "document name is empty"),
    ],
)
def test_names_that_cannot_be_stored_are_refused(svc, name, why):
    """A 600-character name or one with NUL/newline: a clear refusal on SQLite and PostgreSQL
    (before: varchar(512) / NUL DataError -> 500 on PostgreSQL), and nothing stored."""
    out = ingest_bytes(svc, NTSB.read_bytes(), name, DagsterRunner())
    assert out.status == "refused" and out.error_code == "invalid_name" and why in out.message, out
    assert "\n" not in out.message and "\x00" not in out.message
    with svc.sessions() as s:
        assert s.scalar(select(func.count()).select_from(Document)) == 0
    assert stored_files(svc) == set()


def test_nfd_and_nfc_names_are_one_document(svc):
    """A name typed decomposed (NFD, as macOS stores file names) matches its composed form in
    ``doc_name`` scopes and re-uploads. Fails if names are compared byte for byte."""
    nfd = unicodedata.normalize("NFD", "Säckinger-Bericht.pdf")
    nfc = unicodedata.normalize("NFC", nfd)
    assert nfd != nfc
    runner = DagsterRunner()
    first = ingest_bytes(svc, NTSB.read_bytes(), nfd, runner)
    assert first.status == "ingested" and first.document["doc_name"] == nfd  # shown as given
    again = ingest_bytes(svc, NTSB.read_bytes(), nfc, runner)
    assert again.status == "unchanged" and again.document["id"] == first.document["id"]
    for name in (nfc, nfd):
        assert "FBVIF" in top_text(svc, NTSB_Q, Scope(doc_names=[name]))
    assert_consistent(svc)


def test_api_refuses_bad_names_with_422_and_keeps_folder_names(tmp_path, embedder):
    """Through POST /documents: bad names -> 422 with the reason, never 500; a ``name`` form
    field keeps folders; the same bytes under another name -> 201 with ``duplicate_of``."""
    from ragaudit.api.app import create_app

    settings = make_settings(tmp_path / "api")
    data = (SAME_NAME / "branch_alder" / "report.pdf").read_bytes()
    try:
        with TestClient(create_app(settings)) as client:
            r = client.post(
                "/documents?wait=true",
                files={"file": ("report.pdf", data, "application/pdf")},
                data={"name": "branch_alder/report.pdf"},
            )
            assert r.status_code == 201, r.text
            assert r.json()["document"]["doc_name"] == "branch_alder/report.pdf"
            r = client.post(
                "/documents?wait=true", files={"file": ("C:\\Users\\me\\report.pdf", data, "application/pdf")}
            )
            assert r.status_code == 201 and r.json()["document"]["doc_name"] == "report.pdf"
            assert [d["doc_name"] for d in r.json()["duplicate_of"]] == ["branch_alder/report.pdf"]
            for bad in ("y" * 600, "a\x00b.pdf", "line\nbreak.pdf"):
                r = client.post(
                    "/documents?wait=true", files={"file": ("x.pdf", data, "application/pdf")}, data={"name": bad}
                )
                assert r.status_code == 422 and "document name" in r.json()["detail"], r.text
            r = client.post(
                "/documents?wait=true",
                files={"file": ("x.pdf", data, "application/pdf")},
                data={"knowledge_base": "k" * 200},
            )
            assert r.status_code == 422 and "knowledge base name" in r.json()["detail"]
            assert len(client.get("/documents").json()) == 2
    finally:
        release_services(settings)


def test_api_upload_of_new_content_under_a_taken_name_says_what_it_replaces(tmp_path, embedder):
    """Two different files both called report.pdf (what a browser sends for the two folders of the
    same-name case): the second upload is a new version of the first, and its reply says so
    (``replaces`` with the published version, and the message), with and without ``wait``; a new
    name keeps both. Fails if a different file silently replaces a document."""
    from ragaudit.api.app import create_app

    settings = make_settings(tmp_path / "api")
    alder = (SAME_NAME / "branch_alder" / "report.pdf").read_bytes()
    birch = (SAME_NAME / "branch_birch" / "report.pdf").read_bytes()
    try:
        with TestClient(create_app(settings)) as client:

            def up(data, wait=True, **form):
                return client.post(
                    f"/documents?wait={str(wait).lower()}",
                    files={"file": ("report.pdf", data, "application/pdf")},
                    data=form,
                )

            r = up(alder)
            assert r.status_code == 201 and r.json()["replaces"] is None, r.text
            assert up(alder).json()["status"] == "unchanged"
            r = up(birch)
            assert r.status_code == 201, r.text
            body = r.json()
            assert body["replaces"] == {"ingest_version": 1, "sha256": hashlib.sha256(alder).hexdigest()}
            assert body["document"]["ingest_version"] == 2
            assert "replaces version 1" in body["message"] and "another name" in body["message"]
            r = up(alder, wait=False)  # the background path says it as well, at once
            assert r.status_code == 202, r.text
            assert r.json()["replaces"]["ingest_version"] == 2 and "replaces version 2" in r.json()["message"]
            doc_id = r.json()["document"]["id"]
            for _ in range(600):  # let the worker finish before the app stops
                if client.get(f"/documents/{doc_id}").json()["status"] in ("ready", "failed"):
                    break
                time.sleep(0.1)
            assert client.get(f"/documents/{doc_id}").json()["status"] == "ready"
            r = up(birch, name="branch_birch/report.pdf")
            assert r.status_code == 201 and r.json()["replaces"] is None
            assert sorted(d["doc_name"] for d in client.get("/documents").json()) == [
                "branch_birch/report.pdf",
                "report.pdf",
            ]
    finally:
        release_services(settings)


def test_cli_escapes_control_characters(tmp_path, monkeypatch, embedder):
    """One line per file and per document: a file whose name holds a newline is refused on one
    line with the newline shown as ``\\n``."""
    from typer.testing import CliRunner

    from ragaudit.api.cli import app
    from ragaudit.text.docnames import printable

    assert printable("a\nb\tc\x00d\u2028") == "a\\nb\\tc\\x00d\\u2028"
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "two\nlines.pdf").write_bytes(NTSB.read_bytes())
    monkeypatch.setenv("RAGAUDIT_DATA_DIR", str(tmp_path / "cli"))
    for var in ("RAGAUDIT_DATABASE_URL", "RAGAUDIT_QDRANT_URL", "RAGAUDIT_LLM_MODEL"):
        monkeypatch.delenv(var, raising=False)
    try:
        res = CliRunner().invoke(app, ["ingest", str(folder)])
        assert res.exit_code == 1
        lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("refused") and "two\\nlines.pdf" in lines[0], res.stdout
    finally:
        release_services(make_settings(tmp_path / "cli"))


def test_stored_files_follow_live_versions(svc):
    """Replacing a version deletes the old bytes (after the swap); deleting a document deletes
    its bytes unless another document has the same ones; a refused upload stores nothing.
    Fails if files are never removed, removed before the swap, or written before validation."""
    from tests.conftest import BAD

    runner = DagsterRunner()
    a, b = NTSB.read_bytes(), (SAMPLES / "20071229X02007.pdf").read_bytes()
    assert ingest_bytes(svc, a, "report.pdf", runner).status == "ingested"
    assert stored_files(svc) == live_files(svc) and len(stored_files(svc)) == 1
    assert ingest_bytes(svc, (BAD / "truncated-2kb-dpr.pdf").read_bytes(), "bad.pdf", runner).status == "refused"
    assert stored_files(svc) == live_files(svc)
    from ragaudit.pipelines.partitions import document_id
    from ragaudit.pipelines.runner import instance_for

    with svc.sessions() as s:  # the refused upload left no row and no Dagster partition
        keys = instance_for(svc).get_dynamic_partitions("documents")
        assert {document_id(k) for k in keys} == set(s.scalars(select(Document.id))) and len(set(keys)) == len(keys)
    out = ingest_bytes(svc, b, "report.pdf", runner)  # new version replaces the old
    assert out.status == "ingested"
    assert stored_files(svc) == live_files(svc) == {f"{out.document['sha256']}.pdf"}
    dup = ingest_bytes(svc, b, "other.pdf", runner)
    delete_document(svc, out.document["id"])
    assert stored_files(svc) == live_files(svc) == {f"{out.document['sha256']}.pdf"}  # still used by other.pdf
    delete_document(svc, dup.document["id"])
    assert stored_files(svc) == set()
    assert_consistent(svc)


def test_superseded_unpublished_versions_leave_no_stored_file(svc, monkeypatch):
    """A document whose first ingestion failed (row kept, ``failed``, never published) uploaded
    again with new bytes, and a queued new version replaced by a newer upload before it ran:
    each superseded file is deleted, and once the runs are done only the live bytes are stored.
    Fails if ``register`` does not delete the file of the version it supersedes (the failed
    first upload's ``files/<sha>.pdf`` stayed forever), or deletes one still referred to."""
    from ragaudit.ingest import documents as ingest

    runner = DagsterRunner()
    a, b, c = (NTSB.read_bytes(), (SAMPLES / "20071229X02007.pdf").read_bytes(), (SAMPLES / "dmca.pdf").read_bytes())
    sha = {k: f"{ingest.sha256_hex(v)}.pdf" for k, v in (("a", a), ("b", b), ("c", c))}

    def embedding_down(texts):
        raise RuntimeError("embedding backend crashed")

    doc, needs = ingest.register(svc, a, "report.pdf")
    assert needs
    with monkeypatch.context() as m:  # the first ingestion fails: the row stays, never published
        m.setattr(svc.embedder, "embed", embedding_down)
        assert ingest.run_queued(svc, doc.id, runner).status == "failed"
    failed = ingest.get_document(svc, doc.id)
    assert failed.status == "failed" and failed.ingest_version == 0
    assert stored_files(svc) == {sha["a"]}  # its bytes are still its (a retry may rebuild them)

    again, needs = ingest.register(svc, b, "report.pdf")  # uploaded again with new bytes
    assert needs and again.id == doc.id
    assert stored_files(svc) == {sha["b"]}, "the failed first version's file was left behind"
    assert ingest.run_queued(svc, doc.id, runner).ok
    assert stored_files(svc) == live_files(svc) == {sha["b"]}

    ingest.register(svc, c, "report.pdf")  # a new version queued (pending), then superseded
    assert stored_files(svc) == {sha["b"], sha["c"]}
    ingest.register(svc, a, "report.pdf")
    assert stored_files(svc) == {sha["b"], sha["a"]}, "the superseded queued version's file was left behind"
    assert ingest.run_queued(svc, doc.id, runner).ok
    assert stored_files(svc) == live_files(svc) == {sha["a"]}
    assert_consistent(svc)


def test_unchanged_reingest_changes_nothing(svc):
    """Identical bytes, same name and strategy: no run, no version bump, cache not emptied.
    Fails if an unchanged re-ingest bumps ``ingest_version`` or ``index_state``."""
    runner = DagsterRunner()
    first = ingest_bytes(svc, NTSB.read_bytes(), "report.pdf", runner)
    with svc.sessions() as s:
        state = s.get(IndexState, 1).version
    ids = {p for p, _ in svc.store.iter_payloads()}
    again = ingest_bytes(svc, NTSB.read_bytes(), "report.pdf", runner)
    assert again.status == "unchanged"
    assert again.document["ingest_version"] == first.document["ingest_version"] == 1
    with svc.sessions() as s:
        assert s.get(IndexState, 1).version == state
    assert {p for p, _ in svc.store.iter_payloads()} == ids


def test_count_mismatch_fails_the_ingestion_and_keeps_the_previous_version(svc, monkeypatch):
    """An induced SQL/Qdrant mismatch (one point of the new version silently lost) makes the
    blocking ``chunk_counts_match`` check fail, the ingestion report ``failed``, and the previous
    version answer as before. Fails if the check is hard-wired to pass, or if a failed check does
    not fail the run (the version was published anyway)."""
    runner = DagsterRunner()
    old = ingest_bytes(svc, NTSB.read_bytes(), "report.pdf", runner)
    before = [c.chunk_id for c in QueryService(svc).search(NTSB_Q, top_k=5).chunks]
    real_upsert = svc.store.upsert

    def lossy(ids, dense, sparse, payloads, **kw):
        return real_upsert(
            ids[:-1],
            dense[:-1],
            sparse[:-1],
            payloads[:-1],
            **{k: (v[:-1] if k == "windows" and v is not None else v) for k, v in kw.items()},
        )

    monkeypatch.setattr(svc.store, "upsert", lossy)
    out = ingest_bytes(svc, (SAMPLES / "20071229X02007.pdf").read_bytes(), "report.pdf", runner)
    monkeypatch.setattr(svc.store, "upsert", real_upsert)
    assert out.status == "failed" and "chunk_counts_match" in out.message, out
    with svc.sessions() as s:
        doc = s.get(Document, old.document["id"])
        assert doc.status == "failed" and doc.sha256 == old.document["sha256"] and doc.ingest_version == 1
    assert [c.chunk_id for c in QueryService(svc).search(NTSB_Q, top_k=5).chunks] == before
    assert_consistent(svc)


def test_failure_after_partial_write_leaves_no_partial_chunks(svc, monkeypatch):
    """The store fails after part of the new version is written: those points are removed and
    the previous version is untouched. Fails if the cleanup of partially written points is
    removed (unlike an embedding failure, here points were really written)."""
    runner = DagsterRunner()
    old = ingest_bytes(svc, NTSB.read_bytes(), "report.pdf", runner)
    old_points = {p for p, _ in svc.store.iter_payloads()}
    real_upsert = svc.store.upsert
    written = {}

    def half_then_crash(ids, dense, sparse, payloads, **kw):
        n = max(1, len(ids) // 2)
        real_upsert(
            ids[:n],
            dense[:n],
            sparse[:n],
            payloads[:n],
            **{k: (v[:n] if k == "windows" and v is not None else v) for k, v in kw.items()},
        )
        written["n"] = svc.store.count(old.document["id"], live=False)
        raise ConnectionError("qdrant went away")

    monkeypatch.setattr(svc.store, "upsert", half_then_crash)
    out = ingest_bytes(svc, (SAMPLES / "20071229X02007.pdf").read_bytes(), "report.pdf", runner)
    monkeypatch.setattr(svc.store, "upsert", real_upsert)
    assert out.status == "failed" and "qdrant went away" in out.message
    assert written["n"] > 0  # the failure really came after writes
    assert {p for p, _ in svc.store.iter_payloads()} == old_points
    assert "FBVIF" in top_text(svc, NTSB_Q)
    assert_consistent(svc)


# --- property: any sequence of uploads, renames, duplicates, re-ingestions and deletions ---------

from hypothesis import HealthCheck  # noqa: E402
from hypothesis import settings as hsettings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule  # noqa: E402

ARCHIVES = ["Quillon", "Marrowby", "Tessaly", "Orvane"]
CODES = ["ZX-4411", "KR-7302", "PW-1958", "HT-6620"]
_PDFS: dict[int, bytes] = {}


def archive_pdf(i: int) -> bytes:
    """A one-page PDF with a fact found in no other test document (made once per content, so
    re-uploading content ``i`` sends identical bytes)."""
    if i not in _PDFS:
        from fpdf import FPDF

        pdf = FPDF()
        pdf.set_creation_date(__import__("datetime").datetime(2026, 1, 1, tzinfo=__import__("datetime").timezone.utc))
        pdf.add_page()
        pdf.set_font("helvetica", size=12)
        pdf.multi_cell(
            0,
            8,
            f"Archive register of {ARCHIVES[i]}. The vault code of the {ARCHIVES[i]} archive is "
            f"{CODES[i]}. The register is kept by the records office and checked every spring.",
        )
        _PDFS[i] = bytes(pdf.output())
    return _PDFS[i]


class DocumentLifecycle(RuleBasedStateMachine):
    """Random uploads (same bytes under other names or knowledge bases, changed bytes under a
    name = re-ingestion, names with folders), and deletions through the HTTP API; after every
    step each live document answers a question about its own content, SQL rows equal Qdrant
    points per document, nothing of a deleted document remains, and ``files/`` holds exactly the
    live versions' bytes."""

    def __init__(self):
        super().__init__()
        import tempfile

        from ragaudit.api.app import create_app

        self.tmp = tempfile.mkdtemp(prefix="lifecycle-")
        self.settings = make_settings(Path(self.tmp) / "data")
        self.client = TestClient(create_app(self.settings))
        self.client.__enter__()
        self.model: dict[tuple[str, str], tuple[str, int]] = {}  # (kb, name) -> (document id, content)
        self.deleted: set[str] = set()

    @rule(
        name=st.sampled_from(["a.pdf", "b.pdf", "dir1/a.pdf", "dir2/a.pdf"]),
        kb=st.sampled_from(["default", "other"]),
        content=st.integers(0, len(ARCHIVES) - 1),
    )
    def upload(self, name, kb, content):
        r = self.client.post(
            "/documents?wait=true",
            files={"file": (name.split("/")[-1], archive_pdf(content), "application/pdf")},
            data={"name": name, "knowledge_base": kb},
        )
        body = r.json()
        before = self.model.get((kb, name))
        expected = "unchanged" if before and before[1] == content else "ingested"
        assert r.status_code == (200 if expected == "unchanged" else 201), r.text
        assert body["status"] == expected, (before, content, body)
        if before:
            assert body["document"]["id"] == before[0]  # same document, new version
        self.model[(kb, name)] = (body["document"]["id"], content)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def delete(self, data):
        key = data.draw(st.sampled_from(sorted(self.model)))
        doc_id, _ = self.model.pop(key)
        assert self.client.delete(f"/documents/{doc_id}").status_code == 200
        self.deleted.add(doc_id)

    @invariant()
    def every_live_document_is_whole_and_findable(self):
        svc = get_services(self.settings)
        assert_consistent(svc)
        with svc.sessions() as s:
            assert set(s.scalars(select(Document.id))) == {v[0] for v in self.model.values()}
        assert not ({p.get("document_id") for _, p in svc.store.iter_payloads()} & self.deleted)
        assert stored_files(svc) == live_files(svc)
        from ragaudit.pipelines.partitions import document_id
        from ragaudit.pipelines.runner import instance_for

        keys = instance_for(svc).get_dynamic_partitions("documents")
        assert sorted(document_id(k) for k in keys) == sorted(v[0] for v in self.model.values())
        for (kb, name), (_doc_id, content) in self.model.items():
            r = self.client.post(
                "/search",
                json={
                    "question": f"What is the vault code of the {ARCHIVES[content]} archive?",
                    "doc_name": name,
                    "knowledge_base": kb,
                },
            )
            assert r.status_code == 200, r.text
            got = r.json()["retrieved"]
            assert got and all(x["doc_name"] == name for x in got)
            assert CODES[content] in got[0]["text"], (kb, name, got[0]["text"])

    def teardown(self):
        import shutil

        self.client.__exit__(None, None, None)
        release_services(self.settings)
        shutil.rmtree(self.tmp, ignore_errors=True)


TestDocumentLifecycle = DocumentLifecycle.TestCase
TestDocumentLifecycle.settings = hsettings(
    max_examples=int(os.environ.get("RAGAUDIT_LIFECYCLE_EXAMPLES", "3")),
    stateful_step_count=8,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)


def test_documents_says_where_it_looked_when_there_are_none(tmp_path, monkeypatch):
    """``ragaudit documents`` on an empty data folder says which folder it read (a relative
    ``./data`` is wherever the command runs) instead of printing nothing. Fails if it stays silent."""
    from typer.testing import CliRunner

    from ragaudit.api.cli import app
    from ragaudit.services import release_services
    from tests.conftest import make_settings

    folder = tmp_path / "empty"
    monkeypatch.setenv("RAGAUDIT_DATA_DIR", str(folder))
    r = CliRunner().invoke(app, ["documents"])
    release_services(make_settings(folder))
    assert r.exit_code == 0, r.output
    assert "no documents in" in r.output and str(folder.resolve()) in r.output, r.output

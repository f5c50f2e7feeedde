"""One truth for document state: whatever path ingested a document (``ragaudit ingest``, an upload
to the serving process, the landing-folder sensor), Dagster's instance holds its partition, named
by knowledge base and document name, with every ingestion asset materialized and its checks'
results; deleting the document removes its partition."""

from __future__ import annotations

import os
import re
import shutil
import time
import uuid

import dagster as dg
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from tests.conftest import DATA, SAMPLES

ASSETS = ["pdf_pages", "chunks", "chunk_points", "live_index", "gold_qa_pairs"]
PARTITION_CHECKS = {"chunk_counts_match", "pages_have_chunks"}


def _age(path, seconds: float = 10) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t))


def test_every_path_materializes_readable_partitions_and_deletion_removes_them(tmp_path, monkeypatch, embedder):
    """A PDF ingested by ``ragaudit ingest``, one uploaded to the API (asynchronous) and one
    dropped in the landing folder (sensor evaluation, then the serving process's queue) are all
    ``ready``; for each, the Dagster instance has a partition whose key starts with
    ``<knowledge base>/<name>``, a materialization of every ingestion asset for that partition and
    passed results of its partitioned checks; the whole-index checks have results too. After
    ``DELETE /documents/{id}`` that document's partition is gone and the others remain.
    Fails if a path records less than the asset job (the UI shows the partition as missing), if
    keys are bare ids, or if a deleted document leaves its partition."""
    from ragaudit.api.app import create_app
    from ragaudit.api.cli import app as cli
    from ragaudit.ingest.documents import get_document
    from ragaudit.pipelines.partitions import document_id, partition_key
    from ragaudit.pipelines.resources import RagauditResource
    from ragaudit.pipelines.runner import instance_for
    from ragaudit.pipelines.sensors import scan_landing_folder
    from ragaudit.platform.settings import Settings
    from ragaudit.services import get_services, release_services, services_key

    landing = tmp_path / "landing" / "field"
    landing.mkdir(parents=True)
    for k in [k for k in os.environ if k.startswith(("RAGAUDIT_", "DAGSTER_"))]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("RAGAUDIT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RAGAUDIT_LANDING_DIR", str(tmp_path / "landing"))
    settings = Settings(_env_file=None)  # what the CLI and `ragaudit serve` read from this environment
    try:
        res = CliRunner().invoke(cli, ["ingest", str(SAMPLES / "20080102X00002.pdf"), "-k", "reports"])
        assert res.exit_code == 0, res.output
        svc = get_services(settings)
        with TestClient(create_app(settings)) as client:
            r = client.post(
                "/documents",
                files={"file": ("crash.pdf", (SAMPLES / "20071229X02007.pdf").read_bytes(), "application/pdf")},
            )
            assert r.status_code == 202, r.text
            shutil.copy(DATA / "ntsb" / "20080117X00064.pdf", landing / "landed.pdf")
            _age(landing / "landed.pdf")
            ctx = dg.build_sensor_context(
                instance=instance_for(svc),
                resources={"ragaudit": RagauditResource(services_key=services_key(settings))},
            )
            out = scan_landing_folder(ctx, svc)
            assert "1 document(s) queued for the serving process" in out.skip_reason.skip_message
            deadline = time.monotonic() + 300
            while True:  # the sensor's document is picked up by the queue's poll of SQL
                docs = {d["doc_name"]: d for d in client.get("/documents").json()}
                if len(docs) == 3 and all(d["status"] == "ready" for d in docs.values()):
                    break
                assert time.monotonic() < deadline, docs
                time.sleep(0.5)
            assert client.app.state.ingest_queue.wait_idle(120)

            instance = instance_for(svc)
            keys = set(instance.get_dynamic_partitions("documents"))
            expected = {
                "20080102X00002.pdf": "reports/20080102X00002.pdf",
                "crash.pdf": "default/crash.pdf",
                "field/landed.pdf": "default/field/landed.pdf",
            }
            assert set(docs) == set(expected)
            assert keys == {f"{expected[n]} · {d['id']}" for n, d in docs.items()}, keys
            checks = [
                r.event_log_entry.dagster_event.event_specific_data
                for r in instance.get_event_records(
                    dg.EventRecordsFilter(event_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
                )
            ]
            for name, d in docs.items():
                key = partition_key(get_document(svc, d["id"]))
                assert document_id(key) == d["id"] and key.startswith(expected[name] + " · ")
                for asset in ASSETS:
                    recs = instance.fetch_materializations(
                        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[key]), limit=1
                    ).records
                    assert recs, (name, asset)
                mine = {c.check_name: c.passed for c in checks if c.partition == key}
                assert mine == dict.fromkeys(PARTITION_CHECKS, True), (name, mine)
            assert {c.check_name for c in checks if c.partition is None} >= {"no_orphans", "evidence_spans_verbatim"}

            gone = docs["crash.pdf"]["id"]
            assert client.delete(f"/documents/{gone}").status_code == 200
            left = set(instance.get_dynamic_partitions("documents"))
            assert {document_id(k) for k in left} == {d["id"] for n, d in docs.items() if n != "crash.pdf"}
    finally:
        release_services(settings)


def test_serving_process_brings_older_partitions_in_line_at_start(tmp_path, embedder):
    """A ready document built without Dagster (no partition), a partition under a bare document
    id (an older key) and a partition of a document that is gone: when the serving process
    starts, the ready document has its partition under ``<knowledge base>/<name> · <id>`` with
    a materialization of pdf_pages, chunks, chunk_points and live_index and a passed
    ``chunk_counts_match`` result, the bare-id and the orphan partitions are gone. Fails if the
    app does not reconcile the instance with the documents table as it starts (the UI would show
    the document's partitions as missing, or list keys an operator cannot recognise)."""
    from ragaudit.api.app import create_app
    from ragaudit.ingest import documents as ingest
    from ragaudit.pipelines.runner import instance_for
    from ragaudit.services import get_services, release_services
    from tests.conftest import make_settings, text_pdf

    settings = make_settings(tmp_path / "data")
    try:
        svc = get_services(settings)
        doc = ingest.register(svc, text_pdf(2, "harbour"), "older.pdf", knowledge_base="field")[0]
        assert ingest.run_queued(svc, doc.id, ingest.run_stages).ok
        instance = instance_for(svc)
        instance.add_dynamic_partitions("documents", [doc.id, "f" * 32])
        with TestClient(create_app(settings)):
            pass
        key = f"field/older.pdf · {doc.id}"
        assert instance.get_dynamic_partitions("documents") == [key]
        for asset in ASSETS[:4]:
            assert key in instance.get_materialized_partitions(dg.AssetKey(asset)), asset
        checks = [
            r.event_log_entry.dagster_event.event_specific_data
            for r in instance.get_event_records(
                dg.EventRecordsFilter(event_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
            )
        ]
        assert [(c.check_name, c.partition, c.passed) for c in checks] == [("chunk_counts_match", key, True)]
    finally:
        release_services(settings)


def test_a_published_document_stays_ready_when_dagster_cannot_record_it(tmp_path, monkeypatch, caplog, embedder):
    """The express lane's runner publishes a document, then reports its materializations to
    Dagster; when that report fails (Dagster's storage locked), the document is still ``ready``
    with its chunks, the outcome is ``ingested`` and the failure is logged. Fails if Dagster's
    bookkeeping rolls back or marks failed a version that is already searchable."""
    from sqlalchemy.exc import OperationalError

    from ragaudit.ingest import documents as ingest
    from ragaudit.pipelines import runner
    from ragaudit.services import get_services, release_services
    from tests.conftest import make_settings, text_pdf

    def locked(*a, **kw):
        raise OperationalError("INSERT INTO event_logs", {}, Exception("database is locked"))

    monkeypatch.setattr(runner, "record_ingested", locked)
    settings = make_settings(tmp_path / "data")
    try:
        svc = get_services(settings)
        doc = ingest.register(svc, text_pdf(2, "harbour"), "express.pdf")[0]
        with caplog.at_level("ERROR", logger=runner.__name__):
            out = ingest.run_queued(svc, doc.id, runner.RecordedRunner(), exclusive=False)
        assert out is not None and out.status == "ingested", out
        after = ingest.get_document(svc, doc.id)
        assert after.status == "ready" and after.error is None and after.chunk_count > 0
        assert any("could not be recorded in Dagster" in r.getMessage() for r in caplog.records)
    finally:
        release_services(settings)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.integration)])
def dagster_instance(request, tmp_path):
    """A Dagster instance on SQLite storage (the embedded mode) or on PostgreSQL storage
    (production), in a database of its own on the session's server (Dagster keeps its own
    alembic_version table) that is dropped afterwards; dagster-postgres runs on psycopg2, as in
    deploy/dagster.yaml."""
    if request.param == "sqlite":
        with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
            yield instance
        return
    import psycopg

    url = re.sub(r"^postgresql(\+\w+)?://", "postgresql://", request.getfixturevalue("pg_url"))
    name = f"dagster_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name}")
    own = re.sub(r"/[^/?]+(\?|$)", rf"/{name}\1", url.replace("postgresql://", "postgresql+psycopg2://", 1), count=1)
    try:
        with dg.instance_for_test(
            temp_dir=str(tmp_path), overrides={"storage": {"postgres": {"postgres_url": own}}}
        ) as i:
            yield i
    finally:
        with psycopg.connect(url, autocommit=True) as c:
            c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_a_new_check_result_without_a_run_replaces_the_shown_one(dagster_instance):
    """A document ingested again under the same partition reports its check results without a run
    a second time (the express lane): the latest execution of each check is the new result, on
    both storages. Fails if the second result is refused (a unique index on asset, check, run id
    "" and partition) and the UI keeps showing the first version's result."""
    from ragaudit.pipelines.partitions import report_runless

    key = f"default/harbour.pdf · {uuid.uuid4().hex}"
    dagster_instance.add_dynamic_partitions("documents", [key])
    check = dg.AssetCheckKey(dg.AssetKey("chunk_points"), "chunk_counts_match")
    for passed in (True, False, True, False):
        report_runless(
            dagster_instance,
            dg.AssetCheckEvaluation(
                asset_key=check.asset_key,
                check_name=check.name,
                passed=passed,
                partition=key,
                metadata={"v": int(passed)},
            ),
        )
        (latest,) = dagster_instance.event_log_storage.get_asset_check_execution_history(check, limit=1)
        assert latest.status.value == ("SUCCEEDED" if passed else "FAILED"), (passed, latest)


def test_a_run_holding_the_ingest_lock_can_ingest_in_its_op(tmp_path):
    """The serving process executes a handed-over Dagster run under ``INGEST_LOCK``; an op of that
    run that ingests a queued document (``ingest_batch`` launched from the UI) takes the lock again
    in the same thread. Fails, by timing out instead of hanging the suite, if the lock is not
    reentrant."""
    import threading

    from ragaudit.ingest import documents as ingest
    from ragaudit.services import get_services, release_services
    from tests.conftest import make_settings, text_pdf

    settings = make_settings(tmp_path / "data")
    try:
        svc = get_services(settings)
        doc = ingest.register(svc, text_pdf(2, "harbour"), "held.pdf")[0]
        out = []

        def op():
            with ingest.INGEST_LOCK:  # what execute_launched_run holds around the run
                out.append(ingest.run_queued(svc, doc.id, ingest.run_stages))

        t = threading.Thread(target=op, daemon=True)
        t.start()
        t.join(timeout=120)
        assert not t.is_alive(), "run_queued waited for the lock its own run holds"
        assert out and out[0].ok, out
    finally:
        release_services(settings)

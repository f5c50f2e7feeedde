"""Ingestion operations: re-ingestion (changed settings, changed bytes, lost points), the
landing-folder sensor, the batch job, the asset checks and a failure midway through embedding."""

from __future__ import annotations

import os
import shutil
import time

import dagster as dg
from sqlalchemy import func, select

from ragaudit.ingest import documents as ingest
from ragaudit.ingest import reindex
from ragaudit.ingest.documents import ingest_bytes
from ragaudit.pipelines.assets import strategy_run_config
from ragaudit.pipelines.jobs import run_requests
from ragaudit.pipelines.resources import RagauditResource
from ragaudit.pipelines.runner import DagsterRunner
from ragaudit.pipelines.sensors import scan_landing_folder
from ragaudit.platform.db import ChunkRow, Document, QAPair
from ragaudit.query import QueryService
from ragaudit.services import services_key
from ragaudit.types import Strategy
from tests.conftest import DATA, SAMPLES

NTSB_A = SAMPLES / "20080102X00002.pdf"  # Reims F172 M, registration FBVIF
NTSB_B = DATA / "ntsb" / "20080117X00064.pdf"
QUESTION = "What registration did the Reims F172 M carry?"


def _live_state(svc, doc_id: str) -> dict:
    with svc.sessions() as s:
        rows = set(s.scalars(select(ChunkRow.id).where(ChunkRow.document_id == doc_id)))
        pairs = s.scalar(select(func.count()).select_from(QAPair).where(QAPair.document_id == doc_id))
        pair_chunks = set(s.scalars(select(QAPair.chunk_id).where(QAPair.document_id == doc_id)))
        doc = s.get(Document, doc_id)
    points = {p: pl for p, pl in svc.store.iter_payloads() if pl.get("document_id") == doc_id}
    return {"rows": rows, "points": points, "pairs": pairs, "pair_chunks": pair_chunks, "doc": doc}


def _age(path, seconds: float = 10) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t))


def test_reindex_rebuilds_changed_settings_and_lost_points_and_skips_the_rest(fresh_services, monkeypatch):
    """A document is rebuilt when a chunk setting changed or a point was lost, and skipped
    (counted unchanged) otherwise; the rebuild replaces rows, points and gold pairs (no
    duplicates) and the no_orphans / counts agree after it. Fails if ``built_with`` is not
    stored or not compared (nothing rebuilt), if unchanged documents are rebuilt, if gold pairs
    accumulate across versions, or if a lost point goes unnoticed."""
    svc = fresh_services
    runner = DagsterRunner()
    a = ingest_bytes(svc, NTSB_A.read_bytes(), "a.pdf", runner).document
    ingest_bytes(svc, NTSB_B.read_bytes(), "b.pdf", runner)
    assert a["built_with"]["chunk_max_tokens"] == svc.settings.chunk_max_tokens
    p = reindex.plan(svc)
    assert p.todo == [] and p.unchanged == 2
    before = _live_state(svc, a["id"])
    assert before["pairs"] > 0

    monkeypatch.setattr(svc, "settings", svc.settings.model_copy(update={"chunk_max_tokens": 120}))
    res = reindex.run(svc, runner, names=["a.pdf"])
    assert [r["doc_name"] for r in res["reingested"]] == ["a.pdf"] and res["unchanged"] == 0
    assert "chunk_max_tokens: 200 -> 120" in res["reingested"][0]["reasons"]
    after = _live_state(svc, a["id"])
    assert after["doc"].ingest_version == 2 and after["doc"].built_with["chunk_max_tokens"] == 120
    assert set(after["points"]) == after["rows"] and not (after["rows"] & before["rows"])
    assert {pl["ingest_version"] for pl in after["points"].values()} == {2}
    assert after["pair_chunks"] <= after["rows"]  # pairs point at the new chunks only: replaced, not added
    assert after["pairs"] <= len(after["rows"]) * svc.settings.qa_pairs_per_chunk
    # b still has the old settings -> changed; a is current
    p = reindex.plan(svc)
    assert [d.doc_name for d in p.todo] == ["b.pdf"] and p.unchanged == 1

    # a point lost on purpose: no_orphans fails, the document is rebuilt, the check passes again
    victim = next(iter(_live_state(svc, a["id"])["points"]))
    svc.store.delete_points([victim])
    assert ingest.orphans(svc)["orphan_rows"] == 1
    p = reindex.plan(svc, names=["a.pdf"])
    assert p.todo[0].reasons == [f"index incomplete: {len(after['rows'])} chunk rows, {len(after['rows']) - 1} points"]
    res = reindex.run(svc, runner, names=["a.pdf"])
    assert res["failed"] == [] and len(res["reingested"]) == 1
    assert ingest.orphans(svc)["orphan_rows"] == 0 and ingest.orphans(svc)["orphan_points"] == 0


def test_landing_sensor_replaces_a_changed_pdf(fresh_services, tmp_path, monkeypatch):
    """A PDF dropped in a landing subfolder becomes document ``reports/n.pdf``; replacing the file
    with another version makes the sensor queue it again and the run replaces every old point and
    row (SQL rows = Qdrant points, none of the old version left, gold pairs not duplicated); an
    unchanged folder queues nothing. Fails if names are not the path below the landing folder, if
    a changed file is not seen, or if re-ingestion leaves old points or doubles the gold pairs."""
    svc = fresh_services
    landing = tmp_path / "landing"
    (landing / "reports").mkdir(parents=True)
    monkeypatch.setattr(svc, "settings", svc.settings.model_copy(update={"landing_dir": landing}))
    target = landing / "reports" / "n.pdf"
    shutil.copy(NTSB_A, target)
    _age(target)
    resource = RagauditResource(services_key=services_key(svc.settings))
    instance = dg.DagsterInstance.ephemeral()

    def tick(cursor):
        ctx = dg.build_sensor_context(instance=instance, cursor=cursor, resources={"ragaudit": resource})
        return scan_landing_folder(ctx, svc)

    res = tick(None)
    assert "1 document(s) queued for the serving process" in res.skip_reason.skip_message  # embedded mode
    (doc_id,) = ingest.queued_documents(svc)
    assert ingest.run_queued(svc, doc_id, DagsterRunner()).ok  # what the serving process's worker does
    first = _live_state(svc, doc_id)
    assert first["doc"].doc_name == "reports/n.pdf" and first["doc"].source_path == str(target)
    assert "FBVIF" in " ".join(c.text for c in QueryService(svc).search(QUESTION, top_k=3).chunks)

    res = tick(res.cursor)
    assert "none new or changed" in res.skip_reason.skip_message and ingest.queued_documents(svc) == []

    shutil.copy(NTSB_B, target)  # a changed version of the file
    _age(target, 5)
    res = tick(res.cursor)
    assert ingest.queued_documents(svc) == [doc_id]
    assert ingest.run_queued(svc, doc_id, DagsterRunner()).ok
    second = _live_state(svc, doc_id)
    assert second["doc"].sha256 == ingest.sha256_hex(NTSB_B.read_bytes()) and second["doc"].ingest_version == 2
    assert set(second["points"]) == second["rows"] and not (second["rows"] & first["rows"])
    assert {pl["doc_sha256"] for pl in second["points"].values()} == {second["doc"].sha256}
    assert second["pair_chunks"] <= second["rows"]
    with svc.sessions() as s:
        assert s.scalar(select(func.count()).select_from(Document)) == 1
    assert "FBVIF" not in " ".join(c.text for c in QueryService(svc).search(QUESTION, top_k=3).chunks)


def _changed_landing_document(svc, tmp_path) -> tuple[str, object]:
    """A document ingested from a source file that then changed: ``(document id, state())``,
    ``state()`` = its ``(status, ingest_version, sha256)``."""
    src = tmp_path / "n.pdf"
    shutil.copy(NTSB_A, src)
    doc_id = ingest.register(svc, src.read_bytes(), "n.pdf", source_path=str(src))[0].id
    assert ingest.run_queued(svc, doc_id, DagsterRunner()).ok
    shutil.copy(NTSB_B, src)  # the file changed

    def state():
        d = ingest.get_document(svc, doc_id)
        return d.status, d.ingest_version, d.sha256

    assert state() == ("ready", 1, ingest.sha256_hex(NTSB_A.read_bytes()))
    return doc_id, state


def _schedule_tick(svc, instance):
    from datetime import datetime, timezone

    from ragaudit.pipelines.schedules import reindex_schedule

    ctx = dg.build_schedule_context(
        instance=instance,
        scheduled_execution_time=datetime(2025, 1, 2, 3, tzinfo=timezone.utc),
        resources={"ragaudit": RagauditResource(services_key=services_key(svc.settings))},
    )
    return reindex_schedule(ctx)


def _run_requested(svc, instance, req):
    from ragaudit.pipelines.jobs import reindex_changed

    assert req.job_name in (None, reindex_changed.name)
    return reindex_changed.execute_in_process(
        run_config=req.run_config,
        tags=req.tags,
        instance=instance,
        resources={"ragaudit": RagauditResource(services_key=services_key(svc.settings))},
    )


def test_reindex_schedule_tick_changes_nothing_and_its_run_queues(fresh_services, tmp_path):
    """Evaluating reindex_schedule (what the UI's *Preview tick result* does) with a changed
    document returns a run request keyed by the scheduled time and leaves the document's status,
    version and bytes as they were; the requested reindex_changed run queues it for the serving
    process (embedded mode), whose worker then builds version 2; with nothing changed the tick is
    skipped. Fails if a tick queues or stores anything (a preview re-ingested every changed
    document), or if the run does not queue the changed document."""
    svc = fresh_services
    doc_id, state = _changed_landing_document(svc, tmp_path)
    before = state()
    instance = dg.DagsterInstance.ephemeral()

    req = _schedule_tick(svc, instance)
    assert state() == before and ingest.queued_documents(svc) == []  # the tick queued nothing
    assert isinstance(req, dg.RunRequest) and req.run_key == "reindex:2025-01-02T03:00:00+00:00"
    assert _schedule_tick(svc, instance).run_key == req.run_key and state() == before  # a second preview too

    assert _run_requested(svc, instance, req).success
    assert ingest.queued_documents(svc) == [doc_id]  # for the serving process's worker
    assert ingest.run_queued(svc, doc_id, DagsterRunner()).ok  # what that worker does
    assert state() == ("ready", 2, ingest.sha256_hex(NTSB_B.read_bytes()))

    skip = _schedule_tick(svc, instance)
    assert isinstance(skip, dg.SkipReason) and skip.skip_message == "nothing changed: 1 unchanged"
    # a run launched with nothing changed (from the Launchpad) says so plainly, not "0 of 0 ... queued"
    idle = _run_requested(svc, instance, req)
    logged = [e.user_message for e in instance.all_logs(idle.run_id) if "re-ingest" in (e.user_message or "")]
    assert any("nothing to re-ingest: 1 unchanged" in m for m in logged), logged


def test_reindex_run_ingests_itself_with_a_qdrant_server(fresh_services, tmp_path, monkeypatch):
    """With a Qdrant server (not the embedded mode: any process may write) the tick still changes
    nothing, and the reindex_changed run queues the changed document and ingests it in the run,
    recording its partition's materializations. Fails if the tick queues, or if the run leaves
    the document queued or records nothing."""
    from ragaudit.platform.settings import Settings

    svc = fresh_services
    doc_id, state = _changed_landing_document(svc, tmp_path)
    monkeypatch.setattr(Settings, "embedded", property(lambda self: False))  # the same store, as a server's
    before = state()
    instance = dg.DagsterInstance.ephemeral()

    req = _schedule_tick(svc, instance)
    assert state() == before and ingest.queued_documents(svc) == [] and isinstance(req, dg.RunRequest)
    result = _run_requested(svc, instance, req)
    assert result.success
    assert state() == ("ready", 2, ingest.sha256_hex(NTSB_B.read_bytes())) and ingest.queued_documents(svc) == []
    mats = {e.asset_key.path[-1] for e in result.all_events if e.event_type_value == "ASSET_MATERIALIZATION"}
    assert {"chunk_points", "live_index", "gold_qa_pairs"} <= mats
    assert result.output_for_node("queue_changed_documents") == {"ingested": [doc_id]}


def test_small_documents_are_batched_large_ones_run_alone(fresh_services, monkeypatch):
    """Run requests: files above landing_batch_max_bytes get one partition run each, small ones
    share ingest_batch runs of at most landing_batch_size. A partition run builds the strategy its
    document was queued with, carried in the run config. Fails if every file gets its own run
    (per-run overhead), if a batch exceeds its size, or if the strategy is not in the run config."""
    svc = fresh_services
    monkeypatch.setattr(
        svc, "settings", svc.settings.model_copy(update={"landing_batch_max_bytes": 1000, "landing_batch_size": 2})
    )
    big = ingest.register(svc, NTSB_A.read_bytes(), "big.pdf", strategy=Strategy.heading)[0].id
    reqs = run_requests(svc, [(big, 5000), ("s1", 10), ("s2", 20), ("s3", 30)], "k")
    assert [(r.job_name, r.partition_key) for r in reqs[:1]] == [("ingest_document", f"default/big.pdf · {big}")]
    assert reqs[0].run_config == strategy_run_config(Strategy.heading)
    assert {c["config"]["strategy"] for c in reqs[0].run_config["ops"].values()} == {"heading"}
    assert [r.run_config["ops"]["ingest_documents"]["config"]["document_ids"] for r in reqs[1:]] == [
        ["s1", "s2"],
        ["s3"],
    ]


def test_batch_job_ingests_queued_documents_in_one_run(fresh_services):
    """The ingest_batch job ingests several queued documents in one Dagster run, each published
    on its own, and records for each document's partition (named by knowledge base and name) the
    materialization of every ingestion asset and the results of its checks, as the asset job
    does. Fails if the batch op skips documents, publishes without the count check, or records
    less than the asset job (the UI would show the partitions as missing)."""
    from ragaudit.pipelines.jobs import ingest_batch
    from ragaudit.pipelines.partitions import partition_key

    svc = fresh_services
    ids = [ingest.register(svc, f.read_bytes(), f.name)[0].id for f in (NTSB_A, NTSB_B)]
    instance = dg.DagsterInstance.ephemeral()
    result = ingest_batch.execute_in_process(
        run_config={"ops": {"ingest_documents": {"config": {"document_ids": ids}}}},
        instance=instance,
        resources={"ragaudit": RagauditResource(services_key=services_key(svc.settings))},
    )
    assert result.success
    keys = {partition_key(ingest.get_document(svc, i)) for i in ids}
    assert keys == {f"default/{f.name} · {i}" for f, i in zip((NTSB_A, NTSB_B), ids)}
    assert set(instance.get_dynamic_partitions("documents")) == keys
    assets = ["pdf_pages", "chunks", "chunk_points", "live_index", "gold_qa_pairs"]
    mats = {
        (e.asset_key.path[-1], e.partition) for e in result.all_events if e.event_type_value == "ASSET_MATERIALIZATION"
    }
    assert mats == {(a, k) for a in assets for k in keys}
    checks = [e.event_specific_data for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"]
    assert {(c.check_name, c.partition) for c in checks if c.partition} == {
        (n, k) for n in ("chunk_counts_match", "pages_have_chunks") for k in keys
    }
    assert {c.check_name for c in checks if not c.partition} == {"no_orphans", "evidence_spans_verbatim"}
    assert all(c.passed for c in checks), [(c.check_name, c.metadata) for c in checks if not c.passed]
    for i in ids:
        st = ingest.count_check(svc, i)
        assert st["passed"] and st["sql"] > 0 and ingest.get_document(svc, i).status == "ready"


def test_failure_on_the_third_embedding_batch_keeps_the_previous_answer(fresh_services, monkeypatch):
    """A new version whose embedding fails on its third batch: the run fails, and the previous
    version answers the same question with the same answer and citations. Fails if a failed run
    publishes its partial version, deletes the previous one, or leaves staged points."""
    svc = fresh_services
    runner = DagsterRunner()
    old = ingest_bytes(svc, NTSB_A.read_bytes(), "report.pdf", runner)
    q = QueryService(svc)
    before = q.ask(QUESTION, top_k=3)
    assert before["citations"] and before["label"] == "answered"
    real = svc.embedder.embed
    calls = {"n": 0}

    def third_batch_fails(texts):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("embedding server died on batch 3")
        return real(texts)

    monkeypatch.setattr(svc.embedder, "embed", third_batch_fails)
    # slices of 32 texts, so the dmca version (~180 windows) is embedded in several calls
    monkeypatch.setattr("ragaudit.ingest.documents.EMBED_PROGRESS_BATCH", 32)
    out = ingest_bytes(svc, (SAMPLES / "dmca.pdf").read_bytes(), "report.pdf", runner)
    monkeypatch.setattr(svc.embedder, "embed", real)
    assert calls["n"] == 3 and out.status == "failed" and "batch 3" in out.message, (calls, out)
    doc = ingest.get_document(svc, old.document["id"])
    assert doc.status == "failed" and doc.ingest_version == 1 and doc.sha256 == old.document["sha256"]
    after = QueryService(svc).ask(QUESTION, top_k=3)
    assert after["answer"] == before["answer"]
    assert [(c["doc_name"], c["page"], c["quote"]) for c in after["citations"]] == [
        (c["doc_name"], c["page"], c["quote"]) for c in before["citations"]
    ]
    assert ingest.count_check(svc, doc.id)["staged_qdrant"] == 0


def test_a_run_without_its_asset_checks_still_publishes_no_version_with_a_lost_point(fresh_services, monkeypatch):
    """A launch may deselect the asset checks (Dagster allows it), so the blocking count check
    does not run: publishing repeats it. One point of the new version is lost while it is staged;
    fails if that version is published anyway instead of the run failing at ``live_index`` with
    the previous version still answering."""
    svc = fresh_services
    runner = DagsterRunner()
    old = ingest_bytes(svc, NTSB_A.read_bytes(), "report.pdf", runner)
    before = QueryService(svc).ask(QUESTION, top_k=3)
    assert before["label"] == "answered"
    monkeypatch.setattr("ragaudit.pipelines.runner.INGEST_CHECKS", [])  # no check in the run
    real = ingest.stage_chunks

    def loses_a_point(svc_, document_id, chunks, strategy):
        out = real(svc_, document_id, chunks, strategy)
        doc = ingest.get_document(svc_, document_id)
        with svc_.sessions() as s:
            victim = s.scalar(
                select(ChunkRow.id).where(
                    ChunkRow.document_id == document_id, ChunkRow.ingest_version == ingest.staged_version(doc)
                )
            )
        svc_.store.delete_points([victim])
        return out

    monkeypatch.setattr(ingest, "stage_chunks", loses_a_point)
    out = ingest_bytes(svc, (SAMPLES / "dmca.pdf").read_bytes(), "report.pdf", runner)
    assert out.status == "failed" and "not published" in out.message, (out.status, out.message)
    doc = ingest.get_document(svc, old.document["id"])
    assert doc.ingest_version == 1 and doc.sha256 == old.document["sha256"]
    after = QueryService(svc).ask(QUESTION, top_k=3)
    assert after["answer"] == before["answer"]


def test_a_failed_stage_reports_what_failed_not_where_to_read_more():
    """Fails if the message of a stage that failed on a database error is the last line of the
    error (SQLAlchemy's "(Background on this error at: ...)") or its SQL, not what the database said."""
    import traceback

    from sqlalchemy.exc import DataError

    from ragaudit.pipelines.runner import error_line

    err = DataError(
        "INSERT INTO chunks (id, text) VALUES (%(id)s, %(text)s)",
        {"id": "c1", "text": "di\x00culties"},
        ValueError("PostgreSQL text fields cannot contain NUL (0x00) bytes"),
    )
    message = "".join(traceback.format_exception_only(type(err), err))
    assert "Background on this error" in message.strip().splitlines()[-1]
    line = error_line(message)
    assert "cannot contain NUL" in line and "INSERT" not in line
    assert error_line("\n\n") == "unknown error"

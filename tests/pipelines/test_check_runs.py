"""The per-document asset checks run on their own, as the Dagster UI launches them: for one
document's partition, and without a partition (the asset's "Execute all"), on a real knowledge
base (one sample PDF ingested by the default runner, Qdrant local mode, SQLite)."""

from __future__ import annotations

import dagster as dg
import pytest
from sqlalchemy import delete, select, update

from ragaudit.ingest import documents as ingest
from ragaudit.ingest.documents import ingest_bytes
from ragaudit.pipelines.partitions import partition_key
from ragaudit.pipelines.resources import RagauditResource
from ragaudit.pipelines.runner import DagsterRunner, instance_for
from ragaudit.platform.db import ChunkRow, Document
from ragaudit.services import services_key
from tests.conftest import SAMPLES

CHECKS = {
    dg.AssetCheckKey(dg.AssetKey("live_index"), "pages_have_chunks"),
    dg.AssetCheckKey(dg.AssetKey("live_index"), "no_orphans"),
    dg.AssetCheckKey(dg.AssetKey("chunk_points"), "chunk_counts_match"),
}


@pytest.fixture()
def ingested(fresh_services):
    svc = fresh_services
    out = ingest_bytes(svc, (SAMPLES / "dmca.pdf").read_bytes(), "dmca.pdf", DagsterRunner())
    assert out.status == "ingested", out
    return svc, ingest.get_document(svc, out.document["id"])


def _run_checks(svc, partition: str | None):
    from ragaudit.pipelines.definitions import defs

    job = defs.resolve_implicit_global_asset_job_def().get_subset(asset_selection=set(), asset_check_selection=CHECKS)
    return job.execute_in_process(
        instance=instance_for(svc),
        partition_key=partition,
        resources={"ragaudit": RagauditResource(services_key=services_key(svc.settings))},
        raise_on_error=False,
    )


def _evaluations(result) -> dict[str, dg.AssetCheckEvaluation]:
    return {
        e.event_specific_data.check_name: e.event_specific_data
        for e in result.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION"
    }


def _latest(svc, check: str, key: str) -> dg.AssetCheckEvaluation:
    records = instance_for(svc).get_event_records(
        dg.EventRecordsFilter(event_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION), ascending=False, limit=50
    )
    return next(
        ev
        for r in records
        if (ev := r.event_log_entry.dagster_event.event_specific_data).check_name == check and ev.partition == key
    )


def test_checks_of_one_document_read_its_pages_from_the_stored_extraction_report(ingested):
    """Run for the document's partition, every check passes, ``pages_have_chunks`` without loading
    the extraction stage's stored output. With the chunk rows of one page gone it fails and names
    that page; for a version built before the report listed its blank pages it fails saying so.
    Fails if the page check cannot fail, or passes without knowing which pages have text."""
    svc, doc = ingested
    key = partition_key(doc)
    assert doc.extraction_report["blank_pages"] == []
    evals = _evaluations(_run_checks(svc, key))
    assert {n: e.passed for n, e in evals.items()} == {
        "pages_have_chunks": True,
        "no_orphans": True,
        "chunk_counts_match": True,
    }
    assert evals["pages_have_chunks"].metadata["pages_with_text"].value == doc.pages == 18
    # every chunk row spanning page 5 lost (rows only; the count check then fails too, as it should)
    with svc.sessions.begin() as s:
        s.execute(
            delete(ChunkRow).where(ChunkRow.document_id == doc.id, ChunkRow.page_start <= 5, ChunkRow.page_end >= 5)
        )
    covered = ingest.page_coverage(svc, doc.id)
    assert 5 in covered["uncovered"], covered
    evals = _evaluations(_run_checks(svc, key))
    assert not evals["pages_have_chunks"].passed and "5" in evals["pages_have_chunks"].metadata["uncovered"].value
    # a version whose report does not list its blank pages: not known, so not passed
    with svc.sessions.begin() as s:
        report = dict(s.scalar(select(Document.extraction_report).where(Document.id == doc.id)))
        report.pop("blank_pages")
        s.execute(update(Document).where(Document.id == doc.id).values(extraction_report=report))
    pages = _evaluations(_run_checks(svc, key))["pages_have_chunks"]
    assert not pages.passed and "reindex" in pages.metadata["why"].value


def test_checks_run_without_a_partition_check_every_document_and_say_why_the_run_fails(ingested):
    """The UI's "Execute all" on an asset's checks launches a run without a partition: the
    per-document checks then check each document, record its result on the document's partition,
    and fail the run with a description saying what was done; the whole-index check passes.
    Fails if the run ends in Dagster's "Cannot access partition_key for a non-partitioned run"
    or records nothing."""
    svc, doc = ingested
    key = partition_key(doc)
    result = _run_checks(svc, None)
    assert not result.success
    assert {n: e.passed for n, e in _evaluations(result).items()} == {"no_orphans": True}
    failures = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert len(failures) == 2
    for f in failures:
        text = f.event_specific_data.error.message
        assert "checks one document per run" in text and "partition_key" not in text, text
        assert "each of the 1 documents" in text and "0 failed" in text, text
    for check in ("pages_have_chunks", "chunk_counts_match"):
        latest = _latest(svc, check, key)
        assert latest.passed and latest.partition == key

"""Dagster definitions: load with ``dagster dev -m ragaudit.pipelines.definitions`` or
``dagster asset materialize -m ragaudit.pipelines.definitions --select '*' --partition <document id>``."""

from __future__ import annotations

import dagster as dg

from .assets import (
    chunk_counts_match,
    chunk_points,
    chunks,
    evidence_spans_verbatim,
    gold_qa_pairs,
    live_index,
    no_orphans,
    pages_have_chunks,
    pdf_pages,
)
from .bulk import ingest_files_job
from .operations import build_schedule, build_sensor, ingest_batch
from .resources import RagauditResource

INGEST_ASSETS = [pdf_pages, chunks, chunk_points, live_index, gold_qa_pairs]
INGEST_CHECKS = [chunk_counts_match, evidence_spans_verbatim, pages_have_chunks, no_orphans]

ingest_job = dg.define_asset_job(
    "ingest_document",
    selection=dg.AssetSelection.assets(*INGEST_ASSETS),  # partitioned by document (inferred from the assets)
    description="Extract, chunk, embed and index one document, then generate its gold Q&A pairs "
    "(partition = document id).",
)


def _ops_settings():
    """Schedule settings from the environment (``RAGAUDIT_REINDEX_*``); defaults if they are invalid
    (the API validates the same settings at start and refuses to start)."""
    from ragaudit.platform.settings import Settings

    try:
        s = Settings()
        return s.reindex_cron, s.reindex_schedule_enabled, s.landing_interval_s
    except Exception:
        return "0 3 * * *", True, 30


_cron, _enabled, _interval = _ops_settings()
JOBS = [ingest_job, ingest_batch, ingest_files_job]
defs = dg.Definitions(
    assets=INGEST_ASSETS,
    asset_checks=INGEST_CHECKS,
    jobs=JOBS,
    sensors=[build_sensor([ingest_job, ingest_batch], _interval)],
    schedules=[build_schedule(_cron, _enabled)],
    resources={"ragaudit": RagauditResource()},
    # One process per run: Qdrant local mode is single-process (see README).
    executor=dg.in_process_executor,
)

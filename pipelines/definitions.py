"""Dagster definitions: load with ``dagster dev -m pipelines.definitions`` or
``dagster asset materialize -m pipelines.definitions --select '*' --partition <document id>``."""

from __future__ import annotations

import dagster as dg

from .assets import (chunk_counts_match, chunk_points, chunks, documents_partitions, evidence_spans_verbatim,
                     gold_qa_pairs, live_index, pdf_pages)
from .resources import RagauditResource

INGEST_ASSETS = [pdf_pages, chunks, chunk_points, live_index, gold_qa_pairs]
INGEST_CHECKS = [chunk_counts_match, evidence_spans_verbatim]

ingest_job = dg.define_asset_job(
    "ingest_document",
    selection=dg.AssetSelection.assets(*INGEST_ASSETS),
    partitions_def=documents_partitions,
    description="Extract, chunk, embed and index one document, then generate its gold Q&A pairs "
                "(partition = document id).",
)

defs = dg.Definitions(
    assets=INGEST_ASSETS,
    asset_checks=INGEST_CHECKS,
    jobs=[ingest_job],
    resources={"ragaudit": RagauditResource()},
    # One process per run: Qdrant local mode is single-process (see README).
    executor=dg.in_process_executor,
)

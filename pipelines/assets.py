"""Ingestion assets, one dynamic partition per document: pdf_pages -> chunks -> chunk_points ->
live_index, and gold_qa_pairs (gold Q&A with verbatim evidence, after the chunks are indexed).
Their checks are in ``checks``, the jobs that run them in ``jobs``.

The assets are thin shells over ``ragaudit.ingest.documents``; each returns counts as metadata so the
Dagster UI shows what every stage did. The chunking strategy a run builds is its run config
(``IngestConfig``, ``strategy_run_config``).
"""

from contextlib import contextmanager
from dataclasses import asdict, fields

import dagster as dg
from pydantic import Field

from ragaudit.evaluate import goldgen
from ragaudit.ingest import documents as ingest
from ragaudit.ingest.pdf import Page
from ragaudit.ingest.removal import extraction_report
from ragaudit.types import Chunk, Strategy

from .partitions import document_id, documents_partitions
from .resources import RagauditResource

STRATEGY_ASSETS = ("chunks", "chunk_points", "live_index", "gold_qa_pairs")


class IngestConfig(dg.Config):
    """Run config of the assets that depend on the chunking strategy (``STRATEGY_ASSETS``)."""

    strategy: Strategy | None = Field(
        default=None,
        description="Chunking strategy to build (fixed | sentence | heading | semantic). Every run ragaudit "
        "launches (upload, CLI, sensor, schedule) sets it; left empty (a Materialize click in the UI), the "
        "run builds the strategy the document was queued with, else the one its live version has.",
    )

    def resolve(self, doc) -> Strategy:
        """The strategy of this run: the configured one, else ``ingest.requested_strategy(doc)``."""
        return self.strategy or ingest.requested_strategy(doc)


def strategy_run_config(strategy: Strategy) -> dict:
    """The ``run_config`` that makes an ingestion run build ``strategy`` (``IngestConfig`` of each
    strategy-dependent asset)."""
    value = Strategy.parse(strategy).value
    return {"ops": {name: {"config": {"strategy": value}} for name in STRATEGY_ASSETS}}


def doc_id(context) -> str:
    """The document a run or check of one partition is about (``partitions.document_id`` of its key)."""
    return document_id(context.partition_key)


LIVE_INDEX = dg.AssetKey("live_index")
BUILD_STAGES = tuple(dg.AssetKey(name) for name in ("pdf_pages", "chunks", "chunk_points"))
CHUNK_POINTS = dg.AssetKey("chunk_points")


def _materializes(context, *keys: dg.AssetKey) -> bool:
    """Whether this run materializes any of ``keys``; True for an asset called outside a run
    (tests call the stages one by one)."""
    try:
        run_keys = context.job_def.asset_layer.executable_asset_keys
    except Exception:
        return True
    return any(k in run_keys for k in keys)


def _publishes(context) -> bool:
    """Whether this run also materializes ``live_index`` (publishes the version it builds)."""
    return _materializes(context, LIVE_INDEX)


def _nothing_staged(context, svc, doc) -> dg.Failure:
    """The failure of a ``live_index`` step that finds no staged chunks of the version to publish
    (the Dagster UI materializing ``live_index`` without ``chunk_points``): nothing is published
    or rolled back, the live version stays searchable, and the document is settled
    (``ingest.settle_unpublished``) when stages of this run put it in a running status."""
    status = doc.status
    if _materializes(context, *BUILD_STAGES):
        status = ingest.settle_unpublished(svc, doc.id) or ingest.get_document(svc, doc.id).status
    version = ingest.staged_version(doc)
    live = f"version {doc.ingest_version} stays searchable" if doc.ingest_version else "it has no live version yet"
    return dg.Failure(
        description=f"{doc.doc_name}: nothing to publish: live_index makes live the chunks that chunk_points "
        f"staged, and no chunks of version {version} are staged. To build and publish the document, "
        "materialize pdf_pages, chunks, chunk_points and live_index together, or launch the ingest_document "
        f"job for this partition. Nothing was published or removed: the document's status is {status}, {live}.",
        metadata={"document_id": doc.id, "status": status, "live_version": doc.ingest_version},
        allow_retries=False,
    )


@contextmanager
def _stage(context, svc):
    """A stage of the document's run: undone when it raises (``_rollback_on_failure``); when the
    run does not publish (the Dagster UI materializing ``pdf_pages`` or ``chunks`` alone), the
    document leaves its running status afterwards (``ingest.settle_unpublished``)."""
    with _rollback_on_failure(context, svc):
        yield
    if not _publishes(context):
        settled = ingest.settle_unpublished(svc, doc_id(context))
        if settled:
            context.log.info(f"this run does not publish the document (no live_index): its status is {settled} again")


@contextmanager
def _rollback_on_failure(context, svc):
    """A stage that raises undoes its run (staged points/rows deleted, status ``failed`` with the
    reason, the previous version untouched), whoever launched the run (API, CLI, Dagster UI,
    sensor, schedule)."""
    try:
        yield
    except Exception as e:
        try:
            ingest.rollback(svc, doc_id(context), f"{type(e).__name__}: {e}", keep_failed=True)
        except Exception:  # the database or store is down: the next run cleans up
            context.log.exception("rollback failed")
        raise


@dg.asset(
    partitions_def=documents_partitions,
    group_name="ingestion",
    description="Page texts of the document (pdfplumber, 1-based pages; pypdfium2 fallback), without running "
    "headers and footers or hidden text; the metadata's extraction report counts what was removed.",
)
def pdf_pages(context: dg.AssetExecutionContext, ragaudit: RagauditResource) -> dg.Output[list[dict]]:
    svc = ragaudit.services()
    with _stage(context, svc):
        doc, pages = ingest.load_pages(svc, doc_id(context))
    meta = ingest.pages_metadata(doc, pages)
    return dg.Output(
        [asdict(p) for p in pages],
        metadata={**meta, "extraction_report": dg.MetadataValue.json(meta["extraction_report"])},
    )


@dg.asset(
    partitions_def=documents_partitions,
    group_name="ingestion",
    description="Sentence-packed chunks under the embedding model's token limit, with page spans.",
)
def chunks(
    context: dg.AssetExecutionContext, config: IngestConfig, ragaudit: RagauditResource, pdf_pages: list[dict]
) -> dg.Output[list[dict]]:
    svc = ragaudit.services()
    doc = ingest.get_document(svc, doc_id(context))
    strategy = config.resolve(doc)
    with _stage(context, svc):
        out = ingest.build_chunks(
            svc,
            doc,
            [
                Page(
                    **{
                        **p,
                        "headings": tuple(tuple(h) for h in p.get("headings", ())),
                        "removed": tuple(tuple(r) for r in p.get("removed", ())),
                        "unmapped": tuple(tuple(r) for r in p.get("unmapped", ())),
                    }
                )
                for p in pdf_pages
            ],
            strategy,
        )
    return dg.Output([asdict(c) for c in out], metadata=ingest.chunks_metadata(svc, out, strategy))


@dg.asset(
    partitions_def=documents_partitions,
    group_name="ingestion",
    description="Chunks embedded (dense windows) and BM25-weighted (sparse), written to Qdrant as points and "
    "to SQL as rows of the version being built, not yet searchable (live=false).",
)
def chunk_points(
    context: dg.AssetExecutionContext, config: IngestConfig, ragaudit: RagauditResource, chunks: list[dict]
) -> dg.MaterializeResult:
    svc = ragaudit.services()
    with _stage(context, svc):
        strategy = config.resolve(ingest.get_document(svc, doc_id(context)))
        stats = ingest.stage_chunks(svc, doc_id(context), _chunks_from(chunks), strategy)
    return dg.MaterializeResult(metadata=stats)


@dg.asset(
    partitions_def=documents_partitions,
    group_name="ingestion",
    deps=[chunk_points],
    description="The document's searchable version: the staged chunks turn live, the version they replace is "
    "deleted (points, rows, and its stored file when nothing else refers to it). Materialized without "
    "chunk_points and nothing staged, it fails saying so and leaves the document as it was.",
)
def live_index(
    context: dg.AssetExecutionContext,
    config: IngestConfig,
    ragaudit: RagauditResource,
    chunks: list[dict],
    pdf_pages: list[dict],
) -> dg.MaterializeResult:
    svc = ragaudit.services()
    doc = ingest.get_document(svc, doc_id(context))
    if not _materializes(context, CHUNK_POINTS) and not ingest.staged_points(svc, doc):
        # a run that staged chunks and found none to publish is a failed ingestion (``publish``
        # raises, the document is ``failed`` with the reason); one that never staged any is not
        raise _nothing_staged(context, svc, doc)
    with _rollback_on_failure(context, svc):
        stats = ingest.publish(
            svc,
            doc_id(context),
            strategy=config.resolve(ingest.get_document(svc, doc_id(context))),
            pages=len(pdf_pages),
            extractor=pdf_pages[0]["extractor"] if pdf_pages else "none",
            title=chunks[0]["header"] if chunks else "",
            extraction=extraction_report(pdf_pages),
        )
    return dg.MaterializeResult(metadata={k: v for k, v in stats.items() if v is not None})


def gold_pairs(svc, document_id: str, chunks: list[Chunk], strategy: Strategy) -> dict:
    """The gold Q&A pairs of a just-published version (``goldgen.generate_for_document``): the
    ``gold_qa_pairs`` asset, and what runs after publishing where the stages run in one op
    (``ingest.run_stages(after_publish=...)``: the batch jobs)."""
    return goldgen.generate_for_document(svc, document_id, chunks, strategy)


def _chunks_from(rows: list[dict]) -> list[Chunk]:
    names = {f.name for f in fields(Chunk)} - {"page_breaks"}  # a stored output may carry fields Chunk no longer has
    return [
        Chunk(**{k: v for k, v in c.items() if k in names}, page_breaks=[tuple(b) for b in c["page_breaks"]])
        for c in rows
    ]


@dg.asset(
    partitions_def=documents_partitions,
    group_name="evaluation",
    deps=[live_index],
    description="Gold question/answer pairs from every Nth chunk (LLM via litellm when configured, else "
    "the offline rule generator: labelled values, table cells, vote tallies, typed sentences), each "
    "checked before it is stored: a well-formed question, evidence verbatim in its chunk, answer in the "
    "evidence, no near-duplicate. Metadata: generated, stored, rejected_<reason>. Replaces the "
    "document's previous pairs.",
)
def gold_qa_pairs(
    context: dg.AssetExecutionContext, config: IngestConfig, ragaudit: RagauditResource, chunks: list[dict]
) -> dg.MaterializeResult:
    svc = ragaudit.services()
    strategy = config.resolve(ingest.get_document(svc, doc_id(context)))
    stats = gold_pairs(svc, doc_id(context), _chunks_from(chunks), strategy)
    return dg.MaterializeResult(metadata=stats)


INGEST_ASSETS = [pdf_pages, chunks, chunk_points, live_index, gold_qa_pairs]

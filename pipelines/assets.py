"""Ingestion assets, one dynamic partition per document: pdf_pages -> chunks -> chunk_points,
and gold_qa_pairs (gold Q&A with verbatim evidence, after the chunks are indexed).

The assets are thin shells over ``ragaudit.ingest.documents``; each returns counts as metadata so the
Dagster UI shows what every stage did.
"""

import warnings
from contextlib import contextmanager
from dataclasses import asdict, fields

import dagster as dg
from pydantic import Field

from ragaudit.ingest import documents as ingest
from ragaudit.ingest.pdf import Page
from ragaudit.ingest.removal import extraction_report
from ragaudit.types import Chunk, Strategy

from .resources import RagauditResource

# The per-document asset checks use partitioned checks, a Dagster preview feature chosen on
# purpose (a check result per document); its PreviewWarning printed twice on every CLI and server
# start, burying the real output. Only that one message is silenced.
warnings.filterwarnings(
    "ignore", message="Specifying a partitions_def on an AssetCheckSpec", category=dg.PreviewWarning
)

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


documents_partitions = dg.DynamicPartitionsDefinition(name="documents")


@contextmanager
def _rollback_on_failure(context, svc):
    """A stage that raises undoes its run (staged points/rows deleted, status ``failed`` with the
    reason, the previous version untouched), whoever launched the run (API, CLI, Dagster UI,
    sensor, schedule)."""
    try:
        yield
    except Exception as e:
        try:
            ingest.rollback(svc, context.partition_key, f"{type(e).__name__}: {e}", keep_failed=True)
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
    with _rollback_on_failure(context, svc):
        doc, pages = ingest.load_pages(svc, context.partition_key)
    chars = sum(len(p.text) for p in pages)
    report = extraction_report(pages)
    return dg.Output(
        [asdict(p) for p in pages],
        metadata={
            "doc_name": doc.doc_name,
            "pages": len(pages),
            "chars": chars,
            "blank_pages": sum(1 for p in pages if not p.text.strip()),
            "extractor": pages[0].extractor if pages else "none",
            "running_lines_removed": report["running_lines"]["removed"],
            "hidden_chars_removed": report["hidden_text"]["chars"],
            "extraction_report": dg.MetadataValue.json(report),
        },
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
    doc = ingest.get_document(svc, context.partition_key)
    strategy = config.resolve(doc)
    with _rollback_on_failure(context, svc):
        out = ingest.build_chunks(
            svc,
            doc,
            [
                Page(
                    **{
                        **p,
                        "headings": tuple(tuple(h) for h in p.get("headings", ())),
                        "removed": tuple(tuple(r) for r in p.get("removed", ())),
                    }
                )
                for p in pdf_pages
            ],
            strategy,
        )
    tokens = [c.token_count for c in out]
    return dg.Output(
        [asdict(c) for c in out],
        metadata={
            "chunks": len(out),
            "max_tokens": max(tokens),
            "mean_tokens": round(sum(tokens) / len(tokens), 1),
            "model_limit": svc.embedder.max_content_tokens,
            "strategy": strategy.value,
        },
    )


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
    with _rollback_on_failure(context, svc):
        strategy = config.resolve(ingest.get_document(svc, context.partition_key))
        stats = ingest.stage_chunks(svc, context.partition_key, _chunks_from(chunks), strategy)
    return dg.MaterializeResult(metadata=stats)


@dg.asset_check(
    asset=chunk_points,
    partitions_def=documents_partitions,
    blocking=True,
    description="Chunk rows in SQL equal points in Qdrant for this document, in total and for the version "
    "being built. Blocking: on a mismatch the version is not published (the previous one "
    "stays searchable) and the run fails.",
)
def chunk_counts_match(context: dg.AssetCheckExecutionContext, ragaudit: RagauditResource) -> dg.AssetCheckResult:
    svc = ragaudit.services()
    st = ingest.count_check(svc, context.partition_key)
    passed = st.pop("passed")
    if not passed and (st["staged_sql"] or st["staged_qdrant"]):
        # a run that staged a version: live_index will not run, so undo the staged version here,
        # whoever launched the run. A check run on its own (the UI's "Execute checks") staged
        # nothing: it reports the damaged live version and changes nothing (`ragaudit reindex
        # --doc NAME` repairs it)
        ingest.rollback(svc, context.partition_key, f"asset check chunk_counts_match failed: {st}", keep_failed=True)
    return dg.AssetCheckResult(passed=passed, severity=dg.AssetCheckSeverity.ERROR, metadata=st)


@dg.asset(
    partitions_def=documents_partitions,
    group_name="ingestion",
    deps=[chunk_points],
    description="The document's searchable version: the staged chunks turn live, the version they replace is "
    "deleted (points, rows, and its stored file when nothing else refers to it).",
)
def live_index(
    context: dg.AssetExecutionContext,
    config: IngestConfig,
    ragaudit: RagauditResource,
    chunks: list[dict],
    pdf_pages: list[dict],
) -> dg.MaterializeResult:
    svc = ragaudit.services()
    with _rollback_on_failure(context, svc):
        stats = ingest.publish(
            svc,
            context.partition_key,
            strategy=config.resolve(ingest.get_document(svc, context.partition_key)),
            pages=len(pdf_pages),
            extractor=pdf_pages[0]["extractor"] if pdf_pages else "none",
            title=chunks[0]["header"] if chunks else "",
            extraction=extraction_report(pdf_pages),
        )
    return dg.MaterializeResult(metadata={k: v for k, v in stats.items() if v is not None})


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
    from ragaudit.evaluate.goldgen import generate_for_document

    svc = ragaudit.services()
    strategy = config.resolve(ingest.get_document(svc, context.partition_key))
    stats = generate_for_document(svc, context.partition_key, _chunks_from(chunks), strategy)
    return dg.MaterializeResult(metadata=stats)


@dg.asset_check(asset=gold_qa_pairs, description="Every stored gold pair has its evidence span verbatim in its chunk.")
def evidence_spans_verbatim(context: dg.AssetCheckExecutionContext, ragaudit: RagauditResource) -> dg.AssetCheckResult:
    from ragaudit.evaluate.goldgen import verify_stored_pairs

    st = verify_stored_pairs(ragaudit.services())
    return dg.AssetCheckResult(passed=st["not_verbatim"] == 0 and st["missing_chunk"] == 0, metadata=st)


@dg.asset_check(
    asset=live_index,
    partitions_def=documents_partitions,
    additional_ins={"pdf_pages": dg.AssetIn("pdf_pages")},
    description="Every page with text is spanned by at least one live chunk of the document (a page "
    "lost by the chunker cannot be found or cited).",
)
def pages_have_chunks(
    context: dg.AssetCheckExecutionContext, ragaudit: RagauditResource, pdf_pages: list[dict]
) -> dg.AssetCheckResult:
    st = ingest.page_coverage(ragaudit.services(), context.partition_key, [(p["number"], p["text"]) for p in pdf_pages])
    return dg.AssetCheckResult(passed=not st["uncovered"], metadata={**st, "uncovered": str(st["uncovered"])})


@dg.asset_check(
    asset=live_index,
    description="No Qdrant point without its SQL chunk row and document, and no chunk "
    "row without its point, over the whole index.",
)
def no_orphans(context: dg.AssetCheckExecutionContext, ragaudit: RagauditResource) -> dg.AssetCheckResult:
    st = ingest.orphans(ragaudit.services())
    return dg.AssetCheckResult(
        passed=st["orphan_points"] == 0 and st["orphan_rows"] == 0, metadata={**st, "examples": str(st["examples"])}
    )

"""Asset checks of the ingestion assets: the blocking count check between SQL rows and Qdrant
points of the version being built (a mismatch keeps the previous version), page coverage, orphans
over the whole index, and the gold pairs' verbatim evidence."""

import warnings

import dagster as dg

from ragaudit.evaluate.goldgen import verify_stored_pairs
from ragaudit.ingest import documents as ingest

from .assets import chunk_points, doc_id, documents_partitions, gold_qa_pairs, live_index
from .resources import RagauditResource

# The per-document asset checks use partitioned checks, a Dagster preview feature chosen on
# purpose (a check result per document); its PreviewWarning printed twice on every CLI and server
# start, burying the real output. Only that one message is silenced.
warnings.filterwarnings(
    "ignore", message="Specifying a partitions_def on an AssetCheckSpec", category=dg.PreviewWarning
)


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
    st = ingest.count_check(svc, doc_id(context))
    passed = st.pop("passed")
    if not passed and (st["staged_sql"] or st["staged_qdrant"]):
        # a run that staged a version: live_index will not run, so undo the staged version here,
        # whoever launched the run. A check run on its own (the UI's "Execute checks") staged
        # nothing: it reports the damaged live version and changes nothing (`ragaudit reindex
        # --doc NAME` repairs it)
        ingest.rollback(svc, doc_id(context), f"asset check chunk_counts_match failed: {st}", keep_failed=True)
    return dg.AssetCheckResult(passed=passed, severity=dg.AssetCheckSeverity.ERROR, metadata=st)


@dg.asset_check(asset=gold_qa_pairs, description="Every stored gold pair has its evidence span verbatim in its chunk.")
def evidence_spans_verbatim(context: dg.AssetCheckExecutionContext, ragaudit: RagauditResource) -> dg.AssetCheckResult:
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
    st = ingest.page_coverage(ragaudit.services(), doc_id(context), [(p["number"], p["text"]) for p in pdf_pages])
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


INGEST_CHECKS = [chunk_counts_match, evidence_spans_verbatim, pages_have_chunks, no_orphans]

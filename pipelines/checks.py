"""Asset checks of the ingestion assets: the blocking count check between SQL rows and Qdrant
points of the version being built (a mismatch keeps the previous version), page coverage, orphans
over the whole index, and the gold pairs' verbatim evidence."""

import warnings

import dagster as dg

from ragaudit.evaluate.goldgen import verify_stored_pairs
from ragaudit.ingest import documents as ingest

from .assets import chunk_points, doc_id, documents_partitions, gold_qa_pairs, live_index
from .partitions import check_evaluation, partition_key, report_runless
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
    if not context.has_partition_key:
        # a check run without a partition (the UI's "Execute all"): every document, reported only
        _every_document(context, svc, "chunk_counts_match", "chunk_points", lambda d: ingest.count_check(svc, d))
    st = ingest.count_check(svc, doc_id(context))
    passed = st.pop("passed")
    if not passed and (st["staged_sql"] or st["staged_qdrant"]):
        # a run that staged a version: live_index will not run, so undo the staged version here,
        # whoever launched the run. A check run on its own (the UI's "Execute checks") staged
        # nothing: it reports the damaged live version and changes nothing (`ragaudit reindex
        # --doc NAME` repairs it)
        ingest.rollback(svc, doc_id(context), f"asset check chunk_counts_match failed: {st}", keep_failed=True)
    return dg.AssetCheckResult(passed=passed, severity=dg.AssetCheckSeverity.ERROR, metadata=st)


def _every_document(context, svc, check_name: str, asset: str, check) -> None:
    """A per-document check launched without a partition (the UI's "Execute all" on the asset's
    checks): each document with a live version is checked (``check(document_id)`` -> a dict with
    ``passed``) and its result recorded on the document's partition, as an ingestion records it;
    then the run fails with the summary. Dagster cannot attach a partitioned check's result to a
    run without a partition, so the run itself cannot hold a result."""
    results = []
    for doc in ingest.live_document_rows(svc):
        st = check(doc.id)
        key = partition_key(doc)
        report_runless(context.instance, check_evaluation(check_name, asset, st, key))
        results.append((key, st))
    failed = [key for key, st in results if not st["passed"]]
    raise dg.Failure(
        description=f"{check_name} checks one document per run; run without a document partition, it checked "
        f"each of the {len(results)} documents with a live version and recorded the result on the document's "
        f"partition: {len(failed)} failed. Select a document partition to run it as a check of one document.",
        metadata={"documents": len(results), "failed": len(failed), "failed_documents": str(failed[:20])},
        allow_retries=False,
    )


@dg.asset_check(asset=gold_qa_pairs, description="Every stored gold pair has its evidence span verbatim in its chunk.")
def evidence_spans_verbatim(context: dg.AssetCheckExecutionContext, ragaudit: RagauditResource) -> dg.AssetCheckResult:
    st = verify_stored_pairs(ragaudit.services())
    return dg.AssetCheckResult(passed=st["not_verbatim"] == 0 and st["missing_chunk"] == 0, metadata=st)


@dg.asset_check(
    asset=live_index,
    partitions_def=documents_partitions,
    description="Every page with text is spanned by at least one live chunk of the document (a page "
    "lost by the chunker cannot be found or cited). Run without a partition, it checks every document.",
)
def pages_have_chunks(context: dg.AssetCheckExecutionContext, ragaudit: RagauditResource) -> dg.AssetCheckResult:
    svc = ragaudit.services()

    def coverage(document_id: str) -> dict:
        st = ingest.page_coverage(svc, document_id)  # the pages with text, from the stored extraction report
        return {**st, "passed": st["recorded"] and not st["uncovered"]}

    if not context.has_partition_key:
        _every_document(context, svc, "pages_have_chunks", "live_index", coverage)
    st = coverage(doc_id(context))
    meta = {k: v for k, v in st.items() if k != "passed"} | {"uncovered": str(st["uncovered"])}
    if not st["recorded"]:
        meta["why"] = "the pages with text were not recorded when this version was built: `ragaudit reindex --doc NAME`"
    return dg.AssetCheckResult(passed=st["passed"], metadata=meta)


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

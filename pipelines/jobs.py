"""The ingestion jobs and the run requests that launch them.

- ``ingest_document``: the asset job of one document (its partition, ``partitions``), what an upload,
  ``ragaudit reindex`` and a Materialize click in the UI run;
- ``ingest_batch``: several queued documents in one run (small landing-folder files: one
  Dagster run costs seconds of overhead);
- ``reindex_changed``: the re-ingestion schedule's run (``schedules``): queues the documents that
  changed and, with a Qdrant server, ingests them in the run;
- ``ingest_files_job`` (``bulk``): a batch of files in one run (``ragaudit ingest``).
"""

import dagster as dg

from ragaudit.ingest import documents as ingest
from ragaudit.ingest import reindex
from ragaudit.types import Strategy

from .assets import INGEST_ASSETS, gold_pairs, strategy_run_config
from .bulk import ingest_files_job
from .partitions import ingested, partition_key, record_ingested
from .resources import RagauditResource

ingest_document = dg.define_asset_job(
    "ingest_document",
    selection=dg.AssetSelection.assets(*INGEST_ASSETS),  # partitioned by document (inferred from the assets)
    description="Extract, chunk, embed and index one document, then generate its gold Q&A pairs "
    "(partition = document id).",
)

BATCH_OP = "ingest_documents"


class BatchConfig(dg.Config):
    document_ids: list[str]


def _stages_with_gold_pairs(svc, document_id: str, strategy: Strategy) -> dict:
    """A ``Runner``: the document's stages in this op, then its gold pairs (as the asset job's);
    returns ``run_stages``' report."""
    return ingest.run_stages(svc, document_id, strategy, after_publish=gold_pairs)


@dg.op(
    name=BATCH_OP,
    description="Ingest several queued documents in one run (small landing-folder files: one "
    "Dagster run costs seconds of overhead). Each document is staged, count-checked and published on its own; "
    "a failure keeps that document's previous version and the batch goes on.",
)
def ingest_documents(context: dg.OpExecutionContext, config: BatchConfig, ragaudit: RagauditResource) -> dict:
    return _ingest_queued(context, ragaudit.services(), config.document_ids)


def _ingest_queued(context: dg.OpExecutionContext, svc, document_ids: list[str], **metadata) -> dict:
    """Ingest queued documents one by one in this op, record their partitions, and fail the op
    (after the others) if any failed; ``metadata``: more output metadata of the op."""
    done, failed, outcomes = [], {}, []
    for doc_id in document_ids:
        out = ingest.run_queued(svc, doc_id, _stages_with_gold_pairs)
        if out is None:
            continue
        outcomes.append(out)
        if out.ok:
            done.append(doc_id)
        else:
            failed[out.doc_name] = out.message
    # every document built gets its partition's materializations and check results, as the asset job records them
    record_ingested(svc, context.instance, ingested(outcomes), log_event=context.log_event)
    context.add_output_metadata({**metadata, "ingested": len(done), "failed": len(failed)})
    if failed:
        raise dg.Failure(
            f"{len(failed)} of {len(document_ids)} document(s) failed (previous versions kept)",
            metadata={"failed": dg.MetadataValue.json(failed)},
        )
    return {"ingested": done}


@dg.job(description="Ingest a batch of queued documents in one run (landing folder).")
def ingest_batch():
    ingest_documents()


@dg.op(
    name="queue_changed_documents",
    description="Queue the documents that need re-ingestion (changed bytes, build settings, lost points, "
    "failed last run; ragaudit.ingest.reindex). Embedded store: the serving process's worker ingests them; "
    "Qdrant server: this op ingests them, as ingest_documents does.",
)
def queue_changed_documents(context: dg.OpExecutionContext, ragaudit: RagauditResource) -> dict:
    svc = ragaudit.services()
    embedded = svc.settings.embedded  # only the serving process may open an embedded store
    plan = reindex.plan(svc, verify_index=not embedded)
    queued = [d.document_id for d in plan.todo if reindex.enqueue(svc, d)]
    if plan.todo:
        context.log.info(f"{len(queued)} of {len(plan.todo)} changed document(s) queued; {plan.summary()}")
    else:
        context.log.info(f"nothing to re-ingest: {plan.summary()}")
    counts = {"queued": len(queued), "unchanged": plan.unchanged, "skipped": len(plan.skipped)}
    if embedded or not queued:
        context.add_output_metadata(counts)
        return {"queued": queued}
    return _ingest_queued(context, svc, queued, **counts)


@dg.job(
    description="Re-ingest the documents that changed (the run of reindex_schedule): queued for the serving "
    "process with the embedded store, ingested in this run with a Qdrant server."
)
def reindex_changed():
    queue_changed_documents()


def run_requests(svc, queued: list[tuple[str, int]], key: str) -> list[dg.RunRequest]:
    """Run requests for ``[(document id, size in bytes)]`` of queued documents: large ones one
    ``ingest_document`` run each, building the strategy each was queued with (run config), small
    ones batched in ``ingest_batch`` runs (settings ``landing_batch_max_bytes``,
    ``landing_batch_size``)."""
    st = svc.settings
    big = [i for i, n in queued if n > st.landing_batch_max_bytes]
    small = [i for i, n in queued if i not in big]
    out = [
        dg.RunRequest(
            job_name="ingest_document",
            partition_key=partition_key(ingest.get_document(svc, i)),
            run_key=f"{key}:{i}",
            run_config=strategy_run_config(ingest.requested_strategy(ingest.get_document(svc, i))),
            tags={"ragaudit/document_id": i},
        )
        for i in big
    ]
    for a in range(0, len(small), st.landing_batch_size):
        ids = small[a : a + st.landing_batch_size]
        out.append(
            dg.RunRequest(
                job_name="ingest_batch",
                run_key=f"{key}:batch:{a}",
                run_config={"ops": {BATCH_OP: {"config": {"document_ids": ids}}}},
                tags={"ragaudit/documents": str(len(ids))},
            )
        )
    return out


JOBS = [ingest_document, ingest_batch, reindex_changed, ingest_files_job]

"""The ingestion jobs and the run requests that launch them.

- ``ingest_document``: the asset job of one document (its partition, ``partitions``), what an upload,
  ``ragaudit reindex`` and a Materialize click in the UI run;
- ``ingest_batch``: several queued documents in one run (small landing-folder files,
  re-ingestion: one Dagster run costs seconds of overhead);
- ``ingest_files_job`` (``bulk``): a batch of files in one run (``ragaudit ingest``).
"""

import dagster as dg

from ragaudit.ingest import documents as ingest
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
    svc = ragaudit.services()
    done, failed, outcomes = [], {}, []
    for doc_id in config.document_ids:
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
    context.add_output_metadata({"ingested": len(done), "failed": len(failed)})
    if failed:
        raise dg.Failure(
            f"{len(failed)} of {len(config.document_ids)} document(s) failed (previous versions kept)",
            metadata={"failed": dg.MetadataValue.json(failed)},
        )
    return {"ingested": done}


@dg.job(description="Ingest a batch of queued documents in one run (landing folder, re-ingestion).")
def ingest_batch():
    ingest_documents()


def run_requests(svc, queued: list[tuple[str, int]], key: str, batch_all: bool = False) -> list[dg.RunRequest]:
    """Run requests for ``[(document id, size in bytes)]`` of queued documents: large ones one
    ``ingest_document`` run each, building the strategy each was queued with (run config), small
    ones batched in ``ingest_batch`` runs (settings ``landing_batch_max_bytes``,
    ``landing_batch_size``); ``batch_all``: every document in ``ingest_batch`` runs (the schedule
    targets that job)."""
    st = svc.settings
    big = [] if batch_all else [i for i, n in queued if n > st.landing_batch_max_bytes]
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


JOBS = [ingest_document, ingest_batch, ingest_files_job]

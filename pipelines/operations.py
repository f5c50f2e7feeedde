"""Ingestion operations in Dagster: the batch job, the landing-folder sensor and the
re-ingestion schedule (shown, started and stopped in the Dagster UI).

Who executes the runs: with a Qdrant server (``RAGAUDIT_QDRANT_URL``) the sensor and the
schedule request ordinary runs (``ingest_document`` per large document, ``ingest_batch`` for
small ones) and the daemon launches them. In the embedded mode only the serving process may
open the Qdrant folder: the sensor and the schedule put the documents in status ``queued`` in
SQL and the serving process's worker (``ragaudit.ingest.queue``, polling) runs them as Dagster runs of
the shared instance, so they appear in the UI all the same (see the README, "Ingestion operations").
"""

import json

import dagster as dg

from ragaudit.ingest import documents as ingest
from ragaudit.ingest import reindex

from .assets import documents_partitions, strategy_run_config
from .resources import RagauditResource

BATCH_OP = "ingest_documents"


class BatchConfig(dg.Config):
    document_ids: list[str]


@dg.op(
    name=BATCH_OP,
    description="Ingest several queued documents in one run (small landing-folder files: one "
    "Dagster run costs seconds of overhead). Each document is staged, count-checked and published on its own; "
    "a failure keeps that document's previous version and the batch goes on.",
)
def ingest_documents(context: dg.OpExecutionContext, config: BatchConfig, ragaudit: RagauditResource) -> dict:
    svc = ragaudit.services()
    done, failed = [], {}
    for doc_id in config.document_ids:
        out = ingest.run_queued(svc, doc_id, ingest.run_stages)
        if out is None:
            continue
        if out.ok:
            done.append(doc_id)
            context.log_event(
                dg.AssetMaterialization(
                    asset_key="live_index",
                    partition=doc_id,
                    metadata={
                        "doc_name": out.doc_name,
                        "chunks": (out.document or {}).get("chunk_count", 0),
                        "batch": True,
                    },
                )
            )
        else:
            failed[out.doc_name] = out.message
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


def _requests(svc, queued: list[tuple[str, int]], key: str, batch_all: bool = False) -> list[dg.RunRequest]:
    """Run requests for ``[(document id, size in bytes)]`` of queued documents: large ones one
    partition run each, building the strategy each was queued with (run config), small ones batched (settings ``landing_batch_max_bytes``, ``landing_batch_size``);
    ``batch_all``: every document in ``ingest_batch`` runs (the schedule targets that job)."""
    st = svc.settings
    big = [] if batch_all else [i for i, n in queued if n > st.landing_batch_max_bytes]
    small = [i for i, n in queued if i not in big]
    out = [
        dg.RunRequest(
            job_name="ingest_document",
            partition_key=i,
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


def build_sensor(jobs: list, interval_s: int = 30) -> dg.SensorDefinition:
    @dg.sensor(
        jobs=jobs,
        name="landing_folder_sensor",
        minimum_interval_seconds=interval_s,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Landing folder (RAGAUDIT_LANDING_DIR): new or changed PDFs in any subfolder become "
        "documents named by their path below the folder, and runs (small files batched).",
    )
    def landing_folder_sensor(context: dg.SensorEvaluationContext, ragaudit: RagauditResource):
        return scan_landing_folder(context, ragaudit.services())

    return landing_folder_sensor


def scan_landing_folder(context, svc):
    """One sensor evaluation: register new/changed landing PDFs; the cursor maps each handled
    file to ``[size, mtime_ns]`` so unchanged files are not read again."""
    root = svc.settings.landing_dir
    if root is None:
        return dg.SkipReason("RAGAUDIT_LANDING_DIR is not set")
    seen = json.loads(context.cursor) if context.cursor else {}
    files = reindex.scan_landing(root)
    changed = [f for f in files if seen.get(f.path) != [f.size, f.mtime_ns]]
    queued, refused, deferred = reindex.register_landing(svc, changed)
    later = {f.path for f in deferred}
    cursor = {f.path: [f.size, f.mtime_ns] for f in files if f.path not in later}
    cursor.update({p: seen[p] for p in later if p in seen})
    for name, why in refused.items():
        context.log.warning("landing file %s refused: %s", name, why)
    if not queued:
        return dg.SensorResult(
            skip_reason=f"{len(files)} PDF(s) in the landing folder, none new or changed"
            + (f"; {len(refused)} refused" if refused else ""),
            cursor=json.dumps(cursor),
        )
    ids = [i for i, _ in queued]
    parts = [documents_partitions.build_add_request(ids)]
    if svc.settings.embedded:  # the serving process owns the store: its worker runs them
        return dg.SensorResult(
            skip_reason=f"{len(ids)} document(s) queued for the serving process",
            cursor=json.dumps(cursor),
            dynamic_partitions_requests=parts,
        )
    key = str(sorted(cursor.items()).__hash__())
    return dg.SensorResult(
        run_requests=_requests(svc, [(i, f.size) for i, f in queued], key),
        cursor=json.dumps(cursor),
        dynamic_partitions_requests=parts,
    )


def reindex_changed(svc, key: str):
    """Plan and queue re-ingestion of changed documents; returns a schedule/sensor result."""
    plan = reindex.plan(svc, verify_index=not svc.settings.embedded)
    queued = [(d.document_id, len(d.data) if d.data is not None else 0) for d in plan.todo if reindex.enqueue(svc, d)]
    summary = f"{len(queued)} document(s) to re-ingest, {plan.unchanged} unchanged (skipped)" + (
        f", {len(plan.skipped)} skipped ({'; '.join(f'{k}: {v}' for k, v in list(plan.skipped.items())[:5])})"
        if plan.skipped
        else ""
    )
    if not queued or svc.settings.embedded:
        return dg.SkipReason(summary + (" — queued for the serving process" if queued else ""))
    return _requests(svc, queued, key, batch_all=True)


def build_schedule(cron: str, enabled: bool) -> dg.ScheduleDefinition:
    @dg.schedule(
        cron_schedule=cron,
        job=ingest_batch,
        name="reindex_schedule",
        default_status=dg.DefaultScheduleStatus.RUNNING if enabled else dg.DefaultScheduleStatus.STOPPED,
        description="Re-ingest documents whose bytes (landing-folder file), chunking strategy, embedding "
        "model or index settings changed since their last ingestion; unchanged ones are skipped "
        "and counted (RAGAUDIT_REINDEX_CRON, RAGAUDIT_REINDEX_SCHEDULE_ENABLED).",
    )
    def reindex_schedule(context: dg.ScheduleEvaluationContext, ragaudit: RagauditResource):
        svc = ragaudit.services()
        out = reindex_changed(
            svc, context.scheduled_execution_time.isoformat() if context.scheduled_execution_time else "manual"
        )
        if isinstance(out, dg.SkipReason):
            context.log.info(out.skip_message)
        return out

    return reindex_schedule

"""The re-ingestion schedule (``RAGAUDIT_REINDEX_CRON``, ``RAGAUDIT_REINDEX_SCHEDULE_ENABLED``):
documents whose bytes or build settings changed get a new version (``ragaudit.ingest.reindex``).
In the embedded mode the documents are queued for the serving process, as the sensor's are
(see ``sensors``)."""

import dagster as dg

from ragaudit.ingest import reindex

from .jobs import ingest_batch, run_requests
from .resources import RagauditResource, environment_settings

_SETTINGS = environment_settings()


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
    return run_requests(svc, queued, key, batch_all=True)


@dg.schedule(
    cron_schedule=_SETTINGS.reindex_cron,
    job=ingest_batch,
    name="reindex_schedule",
    default_status=dg.DefaultScheduleStatus.RUNNING
    if _SETTINGS.reindex_schedule_enabled
    else dg.DefaultScheduleStatus.STOPPED,
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

"""The re-ingestion schedule (``RAGAUDIT_REINDEX_CRON``, ``RAGAUDIT_REINDEX_SCHEDULE_ENABLED``):
documents whose bytes or build settings changed get a new version (``ragaudit.ingest.reindex``).

Evaluating the schedule only plans (``reindex.plan`` reads, changes nothing), so a tick preview in
the UI changes no document: it returns a skip reason when nothing changed, else a run request of
the job ``reindex_changed`` (``jobs``), whose run queues the changed documents; in the embedded
mode the serving process's worker ingests them, as the sensor's (see ``sensors``)."""

import dagster as dg

from ragaudit.ingest import reindex

from .jobs import reindex_changed
from .resources import RagauditResource, environment_settings

_SETTINGS = environment_settings()


@dg.schedule(
    cron_schedule=_SETTINGS.reindex_cron,
    job=reindex_changed,
    name="reindex_schedule",
    default_status=dg.DefaultScheduleStatus.RUNNING
    if _SETTINGS.reindex_schedule_enabled
    else dg.DefaultScheduleStatus.STOPPED,
    description="Re-ingest documents whose bytes (landing-folder file), chunking strategy, embedding "
    "model or index settings changed since their last ingestion; unchanged ones are skipped "
    "and counted. A tick only looks: when something changed it requests a reindex_changed run, "
    "which queues (and, with a Qdrant server, ingests) them (RAGAUDIT_REINDEX_CRON, "
    "RAGAUDIT_REINDEX_SCHEDULE_ENABLED).",
)
def reindex_schedule(context: dg.ScheduleEvaluationContext, ragaudit: RagauditResource):
    svc = ragaudit.services()
    plan = reindex.plan(svc, verify_index=not svc.settings.embedded)
    if not plan.todo:
        context.log.info(f"nothing changed: {plan.summary()}")
        return dg.SkipReason(f"nothing changed: {plan.summary()}")
    at = context.scheduled_execution_time
    return dg.RunRequest(
        run_key=f"reindex:{at.isoformat()}" if at else None,
        tags={"ragaudit/documents": str(len(plan.todo))},
    )

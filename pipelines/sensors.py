"""The landing-folder sensor (``RAGAUDIT_LANDING_DIR``): new or changed PDFs become documents and runs.

Who executes the runs: with a Qdrant server (``RAGAUDIT_QDRANT_URL``) the sensor requests
ordinary runs (``ingest_document`` per large document, ``ingest_batch`` for small ones) and the
daemon launches them. In the embedded mode only the serving process may open the Qdrant folder:
the sensor puts the documents in status ``queued`` in SQL and the serving process's worker
(``ragaudit.ingest.queue``, polling) runs them as Dagster runs of the shared instance, so they
appear in the UI all the same.

An evaluation registers the new and changed files itself (stores their bytes, status ``queued``),
so the UI's *Test sensor* does too; the re-ingestion schedule (``schedules``) instead only plans
and leaves the queueing to its run. Moving registration into a run would need the cursor to
advance only once that run has registered the files (a failed run must not lose them).
"""

import json
import warnings

import dagster as dg

from ragaudit.ingest import documents as ingest
from ragaudit.ingest import reindex

from .jobs import ingest_batch, ingest_document, run_requests
from .partitions import documents_partitions, partition_key
from .resources import RagauditResource, environment_settings

# dagster's @sensor hands SensorDefinition its ``owners`` argument (None here) and so warns, at every
# load of the code location, that the parameter is in beta: a warning about dagster's own call
warnings.filterwarnings(
    "ignore", message=r"Parameter `owners` of initializer `SensorDefinition", category=dg.BetaWarning
)


@dg.sensor(
    jobs=[ingest_document, ingest_batch],
    name="landing_folder_sensor",
    minimum_interval_seconds=environment_settings().landing_interval_s,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Landing folder (RAGAUDIT_LANDING_DIR): new or changed PDFs in any subfolder become "
    "documents named by their path below the folder, and runs (small files batched).",
)
def landing_folder_sensor(context: dg.SensorEvaluationContext, ragaudit: RagauditResource):
    return scan_landing_folder(context, ragaudit.services())


def scan_landing_folder(context, svc):
    """One sensor evaluation: register new/changed landing PDFs; the cursor maps each handled
    file to ``[size, mtime_ns]`` so unchanged files are not read again."""
    root = svc.settings.landing_dir
    if root is None:
        return dg.SkipReason(
            "RAGAUDIT_LANDING_DIR is not set: no landing folder to scan (set it, for the webserver, "
            "the daemon and the API alike, to a folder whose PDFs are to be ingested)"
        )
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
    parts = [documents_partitions.build_add_request([partition_key(ingest.get_document(svc, i)) for i in ids])]
    if svc.settings.embedded:  # the serving process owns the store: its worker runs them
        return dg.SensorResult(
            skip_reason=f"{len(ids)} document(s) queued for the serving process",
            cursor=json.dumps(cursor),
            dynamic_partitions_requests=parts,
        )
    key = str(sorted(cursor.items()).__hash__())
    return dg.SensorResult(
        run_requests=run_requests(svc, [(i, f.size) for i, f in queued], key),
        cursor=json.dumps(cursor),
        dynamic_partitions_requests=parts,
    )

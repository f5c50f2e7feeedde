"""The one seam between the serving process and Dagster: run the ingestion assets in-process.

In the embedded mode the serving process owns the Qdrant local folder, so it executes the
asset job itself (``dagster.materialize`` with the process's shared ``Services``); the runs
are recorded in the Dagster instance under ``data_dir/dagster_home`` (or ``$DAGSTER_HOME``)
and appear in the Dagster UI.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from pathlib import Path

import dagster as dg
from dagster._core.execution.api import execute_run
from dagster._core.storage.dagster_run import DagsterRunStatus, RunsFilter
from dagster._utils.hosted_user_process import recon_job_from_origin

import ragaudit.ingest.guard  # noqa: F401  (defines PDFError subclasses: too many pages, parse bounds exceeded)
from ragaudit.ingest.documents import INGEST_LOCK, IngestError, get_document, run_stages
from ragaudit.ingest.pdf import PDFError
from ragaudit.platform import tracing
from ragaudit.services import Services, services_key
from ragaudit.types import DEFAULT_STRATEGY, Strategy

from .assets import INGEST_ASSETS, gold_pairs, strategy_run_config
from .bulk import BULK_OP, ingest_files_job, pop_hooks, register_hooks
from .checks import INGEST_CHECKS
from .launcher import HANDED_TAG, WORKER_TAG, this_worker, worker_gone_message, worker_state
from .partitions import SEPARATOR, add_partition, record_ingested, remove_partitions
from .resources import RagauditResource

log = logging.getLogger(__name__)

_INSTANCES: dict[str, dg.DagsterInstance] = {}
BLOCKING_CHECKS = {"chunk_counts_match"}  # a failed one means the run did not publish its version
_LOCK = threading.Lock()
_DEFAULT_YAML = "telemetry:\n  enabled: false\n"


# lines of an exception's message that say where to read more or repeat the statement, not what failed
# (SQLAlchemy appends "(Background on this error at: ...)" and the SQL with its parameters)
_BOILERPLATE = ("(Background on this error at:", "[SQL:", "[parameters:")


def error_line(message: str) -> str:
    """The line of an exception ``message`` that says what failed: its first line that is not
    boilerplate (``_BOILERPLATE``), else "unknown error"."""
    lines = [ln.strip() for ln in message.strip().splitlines()]
    return next((ln for ln in lines if ln and not ln.startswith(_BOILERPLATE)), "unknown error")


def dagster_home(svc: Services) -> Path:
    """``$DAGSTER_HOME`` when set (production), else ``data_dir/dagster_home`` with a dagster.yaml."""
    env = os.environ.get("DAGSTER_HOME")
    home = Path(env) if env else svc.settings.dagster_home
    home.mkdir(parents=True, exist_ok=True)
    cfg = home / "dagster.yaml"
    if not cfg.exists():
        repo_yaml = Path(__file__).resolve().parents[1] / "dagster.yaml"
        cfg.write_text(repo_yaml.read_text() if repo_yaml.exists() else _DEFAULT_YAML)
    return home


def instance_for(svc: Services) -> dg.DagsterInstance:
    home = str(dagster_home(svc))
    with _LOCK:
        inst = _INSTANCES.get(home)
        if inst is None:
            inst = _INSTANCES[home] = dg.DagsterInstance.from_config(home)
        return inst


class DagsterRunner:
    """Callable runner for ``ragaudit.ingest.documents.ingest_bytes``: runs the job, forgets dropped partitions."""

    def __call__(self, svc: Services, document_id: str, strategy: Strategy) -> None:
        run_ingestion(svc, document_id, strategy)

    def forget(self, svc: Services, document_id: str) -> None:
        remove_partition(svc, document_id)


class RecordedRunner(DagsterRunner):
    """Runner of the serving process's express lane (``ragaudit.ingest.queue``): the stages run in
    this thread without a Dagster run (``run_stages``), then their materializations and check
    results are reported to the instance (``partitions.record_ingested``, runless events), so the
    partition is materialized with its checks as after an asset-job run.

    Why not a Dagster run: every in-process run's setup reconfigures Python logging
    (``logging.config.dictConfig``, under logging's module lock, flushing every handler under its
    lock) while a run in another thread holds its event handler's lock and waits for the module
    lock: two runs at once in one process deadlock. The main lane's runs stay Dagster runs."""

    def __call__(self, svc: Services, document_id: str, strategy: Strategy) -> dict:
        report = run_stages(svc, document_id, strategy, after_publish=gold_pairs)
        try:
            record_ingested(svc, instance_for(svc), [(get_document(svc, document_id), report)])
        except Exception:  # the version is published and searchable: Dagster's record of it must not fail it
            log.exception(
                "document %s is ingested, but its materializations could not be recorded in Dagster "
                "(the serving process records them from the live version when it next starts)",
                document_id,
            )
        return report


def run_ingestion(svc: Services, document_id: str, strategy: Strategy) -> None:
    """Materialize pdf_pages -> chunks -> chunk_points -> live_index -> gold_qa_pairs for one
    document partition, building ``strategy`` (the run's config, ``strategy_run_config``).

    Raises the stage's ``PDFError`` (bad PDF found late) or ``IngestError`` naming the failed step.
    """
    with tracing.span(
        "dagster.run",
        **{"ragaudit.document_id": document_id, "ragaudit.strategy": Strategy.parse(strategy).value},
    ) as run_span:
        _run_ingestion(svc, document_id, strategy, run_span)


def _run_ingestion(svc: Services, document_id: str, strategy: Strategy, run_span) -> None:
    instance = instance_for(svc)
    key = add_partition(instance, get_document(svc, document_id))
    result = dg.materialize(
        [*INGEST_ASSETS, *INGEST_CHECKS],
        partition_key=key,
        instance=instance,
        resources={"ragaudit": RagauditResource(services_key=services_key(svc.settings))},
        raise_on_error=False,
        run_config={
            **strategy_run_config(strategy),
            "loggers": {"console": {"config": {"log_level": "WARNING"}}},
        },
        tags={
            "ragaudit/document_id": document_id,
            "ragaudit/document": key.rsplit(SEPARATOR, 1)[0][:255],
            WORKER_TAG: this_worker(),
        },
    )
    if run_span is not None:
        run_span.set_attributes(
            {
                "dagster.run_id": result.run_id,
                "dagster.job": result.dagster_run.job_name,
                "dagster.success": result.success,
            }
        )
    for ev in result.get_asset_check_evaluations():
        if not ev.passed and ev.check_name in BLOCKING_CHECKS:
            meta = {k: getattr(v, "value", v) for k, v in (ev.metadata or {}).items()}
            raise IngestError(
                f"asset check {ev.check_name} failed: {meta}; the previous version stays searchable",
                stage=ev.check_name,
            )
    if result.success:
        return
    for ev in result.all_events:
        if ev.is_step_failure:
            err = ev.step_failure_data.error
            cause = err
            while (
                cause is not None
                and cause.cause is not None
                and cause.cls_name in ("DagsterExecutionStepExecutionError", "DagsterUserCodeExecutionError")
            ):
                cause = cause.cause
            msg = error_line((cause or err).message) if (cause or err) else "unknown error"
            msg = msg.split(": ", 1)[1] if msg.startswith(tuple(c + ":" for c in PDF_ERROR_NAMES)) else msg
            if cause is not None and cause.cls_name in PDF_ERROR_NAMES:
                exc = PDF_ERROR_NAMES[cause.cls_name](msg)
                raise exc
            raise IngestError(f"stage {ev.step_key} failed: {msg}", stage=ev.step_key or "unknown")
    raise IngestError("ingestion run failed", stage="run")


def remove_partition(svc: Services, document_id: str) -> None:
    """Forget a document's partition (after deletion or a refused first ingestion)."""
    remove_partitions(instance_for(svc), document_id)


def _pdf_error_names() -> dict[str, type[PDFError]]:

    out, todo = {}, [PDFError]
    while todo:  # every PDFError subclass, wherever defined
        c = todo.pop()
        out[c.__name__] = c
        todo.extend(c.__subclasses__())
    return out


PDF_ERROR_NAMES = _pdf_error_names()


def execute_launched_run(svc: Services, run_id: str) -> str:
    """Execute a run that the Dagster webserver/daemon created and handed over
    (``ragaudit.pipelines.launcher.StoreOwnerRunLauncher``), in this process, against the shared instance:
    the UI follows it like any run. Returns the run's final status name; ``KeyError`` for an
    unknown run id. Call from the ingestion worker (one writer)."""

    instance = instance_for(svc)
    run = instance.get_run_by_id(run_id)
    if run is None:
        raise KeyError(f"run {run_id} not found in the Dagster instance")
    if run.status not in (DagsterRunStatus.NOT_STARTED, DagsterRunStatus.STARTING):
        return run.status.value  # already executed (a repeated hand-over)
    recon = recon_job_from_origin(run.job_code_origin)
    with INGEST_LOCK:
        instance.add_run_tags(run_id, {WORKER_TAG: this_worker()})  # run monitoring checks this process
        run = instance.get_run_by_id(run_id)
        if run.status not in (DagsterRunStatus.NOT_STARTED, DagsterRunStatus.STARTING):
            return run.status.value  # failed or canceled while it waited
        with tracing.span("dagster.run", **{"dagster.job": run.job_name, "dagster.run_id": run_id}) as run_span:
            execute_run(recon, run, instance)
            status = instance.get_run_by_id(run_id).status.value
            if run_span is not None:
                run_span.set_attribute("dagster.status", status)
    return status


def recover_runs(svc: Services, requeue) -> dict[str, list[str]]:
    """At the serving process's start: Dagster runs left in progress by stopped processes.

    A ``STARTED``/``STARTING`` run whose in-process worker (tag ``ragaudit/run_worker``) is a
    process of this host that is gone is reported failed with the reason (the documents it was
    ingesting are re-queued from SQL by the ingestion queue). In the embedded mode, a run handed
    to a serving process (tag ``ragaudit/handed_to``) that never started is given to ``requeue``
    (``IngestQueue.submit_run``): the previous process accepted it and stopped before executing
    it. Returns ``{failed: [run ids], requeued: [run ids]}``."""

    instance = instance_for(svc)
    out: dict[str, list[str]] = {"failed": [], "requeued": []}
    statuses = [DagsterRunStatus.STARTED, DagsterRunStatus.STARTING, DagsterRunStatus.NOT_STARTED]
    for rec in instance.get_run_records(RunsFilter(statuses=statuses)):
        run = rec.dagster_run
        worker = run.tags.get(WORKER_TAG)
        if worker and worker_state(worker) == "gone":
            instance.report_run_failed(run, worker_gone_message(worker))
            out["failed"].append(run.run_id)
        elif (
            not worker
            and run.tags.get(HANDED_TAG)
            and run.status != DagsterRunStatus.NOT_STARTED
            and svc.settings.embedded
        ):
            requeue(run.run_id)
            out["requeued"].append(run.run_id)
    return out


def run_bulk(
    svc: Services,
    files: list,
    knowledge_base: str = "default",
    strategy: Strategy = DEFAULT_STRATEGY,
    *,
    on_outcome=None,
    timings: dict | None = None,
) -> list:
    """Ingest ``files`` (``ragaudit.ingest.bulk.BulkFile``) in ONE Dagster run of ``ingest_files_job`` in this
    process (the shared instance records it; the UI shows one ``live_index`` materialization per
    document). Returns the ``IngestOutcome`` per file, in order; ``on_outcome(index, outcome)``
    and ``timings`` as in ``ragaudit.ingest.bulk.ingest_files``. Raises ``IngestError`` (stage ``run``) if the
    run itself fails (a document's failure is an outcome, not an exception)."""

    key = uuid.uuid4().hex
    hooks = {"on_outcome": on_outcome, "timings": {} if timings is None else timings}
    register_hooks(key, hooks)
    with tracing.span(
        "dagster.run", **{"dagster.job": ingest_files_job.name, "ragaudit.documents": len(files)}
    ) as run_span:
        try:
            result = ingest_files_job.execute_in_process(
                run_config={
                    "ops": {
                        BULK_OP: {
                            "config": {
                                "files": [{"path": str(f.path), "name": f.name} for f in files],
                                "knowledge_base": knowledge_base,
                                "strategy": Strategy.parse(strategy).value,
                                "hooks": key,
                            }
                        }
                    },
                    "loggers": {"console": {"config": {"log_level": "WARNING"}}},
                },
                instance=instance_for(svc),
                resources={"ragaudit": RagauditResource(services_key=services_key(svc.settings))},
                raise_on_error=False,
                tags={"ragaudit/documents": str(len(files)), WORKER_TAG: this_worker()},
            )
        finally:
            hooks = pop_hooks(key)
        if run_span is not None:
            run_span.set_attributes({"dagster.run_id": result.run_id, "dagster.success": result.success})
    if not result.success or "outcomes" not in hooks:
        msg = "ingestion run failed"
        for ev in result.all_events:
            if ev.is_step_failure and ev.step_failure_data.error is not None:
                msg = f"ingestion run failed: {error_line(ev.step_failure_data.error.message)}"
        raise IngestError(msg, stage="run")
    return hooks["outcomes"]

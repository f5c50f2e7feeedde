"""A Dagster run launcher that hands runs to the process owning the embedded Qdrant store.

Qdrant's local mode (and Qdrant Edge) admit one process per storage folder, and in the embedded
mode that process is the API (``ragaudit serve``). Dagster's default launcher starts every run
in a new process, which cannot open the folder while the API runs. So, in the embedded mode,
this launcher (configured in ``dagster.yaml``) does not start a process: it POSTs the run id to
the API's internal endpoint ``POST /internal/dagster/runs``; the API's ingestion worker executes
the run in-process with Dagster's ``execute_run`` against the same instance (``DAGSTER_HOME``),
one at a time with the uploads, so the UI shows it as an ordinary run with its logs, asset
materializations and checks. Runs from the UI's Materialize button, the landing-folder sensor
and the re-ingestion schedule all go this way.

With a Qdrant server (``RAGAUDIT_QDRANT_URL`` set) any process may write, and the launcher
delegates to Dagster's ``DefaultRunLauncher`` unchanged.

If the API cannot be reached the run is marked failed with the reason (start ``ragaudit serve``,
or use a Qdrant server); nothing is executed behind the API's back.

Run-worker health (Dagster's run monitoring, ``run_monitoring`` in ``dagster.yaml``): a run that
a ragaudit process executes in-process (the API's worker, or ``ragaudit ingest``/``reindex``)
carries the tag ``ragaudit/run_worker`` = ``host:pid:process start time`` of that process. The
daemon's monitoring asks ``check_run_worker_health`` about every ``STARTED`` run: when that process
is gone (stopped or killed mid-run) the run is reported ``FAILED`` and the daemon marks it failed
with the reason, instead of leaving it ``STARTED`` forever. ``ragaudit serve`` does the same for
such runs when it starts (``ragaudit.pipelines.runner.recover_runs``), and executes again the runs that
were handed to its previous process but never started.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from typing import Any

import httpx
import psutil
from dagster._core.launcher import CheckRunHealthResult, DefaultRunLauncher, LaunchRunContext, RunLauncher, WorkerStatus
from dagster._core.storage.dagster_run import DagsterRun
from dagster._serdes import ConfigurableClass
from dagster._serdes.config_class import ConfigurableClassData

from ragaudit.platform.settings import Settings

INTERNAL_RUNS_PATH = "/internal/dagster/runs"
WORKER_TAG = "ragaudit/run_worker"  # host:pid:start time of the process executing the run in-process
HANDED_TAG = "ragaudit/handed_to"  # the serving process (URL) an embedded-mode run was handed to


def this_worker() -> str:
    """This process as a run worker: ``host:pid:start time`` (psutil's ``create_time``, seconds
    since the epoch, 2 decimals), so a later process reusing the pid is not taken for it."""

    return f"{socket.gethostname()}:{os.getpid()}:{psutil.Process().create_time():.2f}"


def worker_state(worker: str) -> str:
    """``alive`` / ``gone`` for a ``this_worker()`` value of this host (the process exists with
    that start time, or not); ``elsewhere`` for another host's process (cannot be checked here)."""

    try:
        host, pid, started = worker.rsplit(":", 2)
        pid_n, started_f = int(pid), float(started)
    except ValueError:
        return "gone"  # not a value this code wrote: nothing can be executing it
    if host != socket.gethostname():
        return "elsewhere"
    try:
        return "alive" if abs(psutil.Process(pid_n).create_time() - started_f) < 0.05 else "gone"
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return "gone"
    except psutil.AccessDenied:
        return "alive"  # exists, owned by another user: assume it is the worker


def worker_gone_message(worker: str) -> str:
    host, pid, _ = worker.rsplit(":", 2)
    return (
        f"the process that was executing this run (pid {pid} on {host}: `ragaudit serve`, or a "
        "`ragaudit ingest`/`reindex` command) stopped before the run finished; documents it was ingesting keep "
        "their previous version and are ingested again when `ragaudit serve` starts"
    )


def handover_failed_message(settings, url: str, error: Exception) -> str:
    """Why a run could not be handed to the serving process: the URL tried, the setting(s) it comes
    from with the values this Dagster process sees, and what to do. Names settings, never keys."""
    if isinstance(error, httpx.HTTPStatusError):
        code = error.response.status_code
        why = f"HTTP {code}" + (
            " (the API key: the Dagster processes send the first of RAGAUDIT_API_KEYS)" if code in (401, 403) else ""
        )
    else:
        why = type(error).__name__
    if settings.api_url:
        source = "RAGAUDIT_API_URL"
    else:
        source = f"RAGAUDIT_HOST/RAGAUDIT_PORT (here {settings.host}, {settings.port})"
    head = f"the serving process that owns the embedded Qdrant store did not take the run: POST {url} failed ({why})"
    if isinstance(error, httpx.HTTPStatusError) and error.response.status_code in (401, 403):
        return (
            f"{head}. The API refused this process's key: export the same RAGAUDIT_API_KEYS for the Dagster "
            "webserver and daemon as for `ragaudit serve`"
        )
    return (
        f"{head}. That URL is set by {source}: start `ragaudit serve`, and give the Dagster webserver and "
        "daemon the RAGAUDIT_HOST/RAGAUDIT_PORT it listens on (or RAGAUDIT_API_URL), or use a Qdrant server "
        "(RAGAUDIT_QDRANT_URL)"
    )


class StoreOwnerRunLauncher(RunLauncher, ConfigurableClass):
    """``launch_run``: embedded mode -> POST ``{run_id}`` to ``<api_url>/internal/dagster/runs``
    (``Settings.internal_api_url``: ``RAGAUDIT_API_URL``, default ``http://<RAGAUDIT_HOST>:<RAGAUDIT_PORT>``,
    the very settings ``ragaudit serve`` listens on; the first of ``RAGAUDIT_API_KEYS`` is sent as
    ``X-API-Key``); Qdrant server -> ``DefaultRunLauncher``. A failed hand-over fails the run with
    ``handover_failed_message``.
    """

    def __init__(self, inst_data: ConfigurableClassData | None = None):
        self._inst_data = inst_data
        self._default: DefaultRunLauncher | None = None
        super().__init__()

    @property
    def inst_data(self) -> ConfigurableClassData | None:
        return self._inst_data

    @classmethod
    def config_type(cls) -> dict:
        return {}

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData, config_value: Mapping[str, Any]):
        return cls(inst_data=inst_data)

    def _delegate(self) -> DefaultRunLauncher:
        if self._default is None:
            self._default = DefaultRunLauncher()
            self._default.register_instance(self._instance)
        return self._default

    def launch_run(self, context: LaunchRunContext) -> None:

        settings = Settings()
        if not settings.embedded:
            return self._delegate().launch_run(context)
        run = context.dagster_run
        headers = {}
        if settings.api_keys:
            headers["X-API-Key"] = settings.api_keys[0].get_secret_value()
        url = settings.internal_api_url + INTERNAL_RUNS_PATH
        # recorded before the hand-over: a serving process that starts later re-queues the run
        # if the one that accepted it stopped before executing it
        self._instance.add_run_tags(run.run_id, {HANDED_TAG: settings.internal_api_url})
        try:
            r = httpx.post(url, json={"run_id": run.run_id}, headers=headers, timeout=30.0)
            r.raise_for_status()
        except Exception as e:  # no API, refused: fail the run visibly rather than hang in STARTING
            self._instance.report_run_failed(run, handover_failed_message(settings, url, e))
            return
        self._instance.report_engine_event(f"run handed to the serving process at {url}", run, cls=self.__class__)

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run: DagsterRun) -> CheckRunHealthResult:
        """Called by the daemon's run monitoring for ``STARTED`` runs. ``FAILED`` (with the reason)
        when the ragaudit process executing the run in-process is gone; ``RUNNING`` while it
        lives. Runs executed in a process of Dagster's default launcher (Qdrant server mode) and
        runs of another host's process are not checked here (``RUNNING``, the message says so);
        the latter are failed by that host's ``ragaudit serve`` when it starts."""
        worker = run.tags.get(WORKER_TAG)
        if not worker:
            return CheckRunHealthResult(WorkerStatus.RUNNING, "not executed by a ragaudit process: not checked")
        state = worker_state(worker)
        if state == "gone":
            return CheckRunHealthResult(WorkerStatus.FAILED, worker_gone_message(worker), run_worker_id=worker)
        msg = "run worker alive" if state == "alive" else "run worker on another host: checked when it restarts"
        return CheckRunHealthResult(WorkerStatus.RUNNING, msg, run_worker_id=worker)

    def terminate(self, run_id: str) -> bool:
        if self._default is not None and self._instance.get_run_by_id(run_id) is not None:
            return self._default.terminate(run_id)
        return False  # a run in the serving process finishes (it is one document; staged until published)

    def dispose(self) -> None:
        if self._default is not None:
            self._default.dispose()

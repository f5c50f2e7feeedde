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
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dagster._core.launcher import DefaultRunLauncher, LaunchRunContext, RunLauncher
from dagster._serdes import ConfigurableClass
from dagster._serdes.config_class import ConfigurableClassData

INTERNAL_RUNS_PATH = "/internal/dagster/runs"


class StoreOwnerRunLauncher(RunLauncher, ConfigurableClass):
    """``launch_run``: embedded mode -> POST ``{run_id}`` to ``<api_url>/internal/dagster/runs``
    (``api_url``: setting ``RAGAUDIT_API_URL``, default ``http://127.0.0.1:<RAGAUDIT_PORT>``; the
    first of ``RAGAUDIT_API_KEYS`` is sent as ``X-API-Key``); Qdrant server -> ``DefaultRunLauncher``.
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
        import httpx

        from core.settings import Settings

        settings = Settings()
        if not settings.embedded:
            return self._delegate().launch_run(context)
        run = context.dagster_run
        headers = {}
        if settings.api_keys:
            headers["X-API-Key"] = settings.api_keys[0].get_secret_value()
        url = settings.internal_api_url.rstrip("/") + INTERNAL_RUNS_PATH
        try:
            r = httpx.post(url, json={"run_id": run.run_id}, headers=headers, timeout=30.0)
            r.raise_for_status()
        except Exception as e:  # no API, refused: fail the run visibly rather than hang in STARTING
            why = f"HTTP {e.response.status_code}" if isinstance(e, httpx.HTTPStatusError) else type(e).__name__
            self._instance.report_run_failed(
                run, f"the serving process that owns the embedded Qdrant store did not take the run ({url}: {why}); "
                     "start `ragaudit serve`, or use a Qdrant server (RAGAUDIT_QDRANT_URL)")
            return
        self._instance.report_engine_event(f"run handed to the serving process at {url}", run, cls=self.__class__)

    def terminate(self, run_id: str) -> bool:
        if self._default is not None and self._instance.get_run_by_id(run_id) is not None:
            return self._default.terminate(run_id)
        return False  # a run in the serving process finishes (it is one document; staged until published)

    def dispose(self) -> None:
        if self._default is not None:
            self._default.dispose()

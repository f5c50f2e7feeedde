"""Dagster definitions of ragaudit's ingestion: load with ``dagster dev -m ragaudit.pipelines.definitions``
or ``dagster asset materialize -m ragaudit.pipelines.definitions --select '*' --partition <document id>``.

Modules, as in Dagster's project layout: ``assets`` (the per-document ingestion assets),
``checks`` (their asset checks), ``jobs`` (the jobs and their run requests), ``sensors`` (the
landing folder), ``schedules`` (re-ingestion), ``resources`` (the ``Services`` resource); beside
them ``bulk`` (the one-run batch of files of ``ragaudit ingest``), ``runner`` (in-process runs of
the serving process and the CLI) and ``launcher`` (the run launcher of the embedded mode).
"""

from __future__ import annotations

import dagster as dg

from .assets import INGEST_ASSETS
from .checks import INGEST_CHECKS
from .jobs import JOBS
from .resources import RagauditResource
from .schedules import reindex_schedule
from .sensors import landing_folder_sensor

__all__ = ["INGEST_ASSETS", "INGEST_CHECKS", "defs"]

defs = dg.Definitions(
    assets=INGEST_ASSETS,
    asset_checks=INGEST_CHECKS,
    jobs=JOBS,
    sensors=[landing_folder_sensor],
    schedules=[reindex_schedule],
    resources={"ragaudit": RagauditResource()},
    # One process per run: the embedded Qdrant store is single-process (see docs/architecture.md).
    executor=dg.in_process_executor,
)

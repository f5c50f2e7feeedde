"""One Dagster run for a batch of files (``ragaudit ingest``, the bench): ``ingest_files``.

A run costs seconds of Dagster overhead; paid once per batch instead of once per document.
Inside, ``ragaudit.ingest.bulk.ingest_files`` parses PDFs in a child process ahead of the document being
embedded. Each document built gets its partition with the materializations of every asset and
its checks' results, as an asset-job run records them (``partitions.record_ingested``), so the
Dagster UI shows which documents the run built and what each stage did.
"""

import threading
from pathlib import Path
from typing import Any, Callable

import dagster as dg

from ragaudit.ingest.bulk import BulkFile, ingest_files
from ragaudit.types import DEFAULT_STRATEGY, Strategy

from .assets import gold_pairs
from .partitions import ingested, record_ingested
from .resources import RagauditResource

BULK_OP = "ingest_files"
# In-process callers hand the run their callbacks and receive the outcomes through this
# registry (a run's config must be plain data); key = the run's ``hooks`` config value.
_HOOKS: dict[str, dict[str, Any]] = {}
_HOOKS_LOCK = threading.Lock()


class BulkFileConfig(dg.Config):
    path: str
    name: str


class BulkConfig(dg.Config):
    files: list[BulkFileConfig]
    knowledge_base: str = "default"
    strategy: Strategy = DEFAULT_STRATEGY
    hooks: str = ""


def register_hooks(key: str, hooks: dict[str, Any]) -> None:
    with _HOOKS_LOCK:
        _HOOKS[key] = hooks


def pop_hooks(key: str) -> dict[str, Any]:
    with _HOOKS_LOCK:
        return _HOOKS.pop(key, {})


@dg.op(
    name=BULK_OP,
    description="Ingest a batch of PDF files in one run: each file is validated and extracted once "
    "in a bounded child process, ahead of the file being embedded (both cores busy); each document is staged, "
    "count-checked and published on its own, a failure keeps that document's previous version and the batch "
    "goes on.",
)
def ingest_files_op(context: dg.OpExecutionContext, config: BulkConfig, ragaudit: RagauditResource) -> dict:
    svc = ragaudit.services()
    with _HOOKS_LOCK:
        hooks = _HOOKS.get(config.hooks, {})
    on_outcome: Callable | None = hooks.get("on_outcome")
    timings: dict[str, float] = hooks.get("timings", {})
    files = [BulkFile(Path(f.path), f.name) for f in config.files]
    outcomes = ingest_files(
        svc,
        files,
        config.knowledge_base,
        config.strategy,
        on_outcome=on_outcome,
        timings=timings,
        after_publish=gold_pairs,
    )
    record_ingested(svc, context.instance, ingested(outcomes), log_event=context.log_event)
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.status] = counts.get(o.status, 0) + 1
    context.add_output_metadata({k: v for k, v in counts.items()})
    hooks["outcomes"] = outcomes
    return counts


@dg.job(description="Ingest a batch of PDF files in one run (ragaudit ingest): parsing overlapped with embedding.")
def ingest_files_job():
    ingest_files_op()

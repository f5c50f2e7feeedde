"""The ``documents`` dynamic partitions: one per document, named so an operator recognises it.

Key: ``<knowledge base>/<document name> · <document id>``, e.g.
``default/reports/20080102X00002.pdf · 3f2a…`` (the full 32-hex id). The Dagster UI lists, searches
and sorts partitions by key only (dynamic partitions have no label of their own), so the
readable part comes first; the id that ends the key is what the assets resolve
(``document_id``), so names need no escaping and two documents of the same name in two knowledge
bases never share a key. Dagster refuses ``...`` and control characters in keys: document names
hold no control characters (``ragaudit.text.docnames``), and a ``...`` in a name is shown as
``…``. A key that is a bare document id (a test's ``build_asset_context``, or an instance
whose partitions are keyed by id) resolves to itself.

The same module records, for documents ingested outside the asset job (``ragaudit ingest``'s
batch run, the ``ingest_batch`` job, the serving process's express lane), what each asset and
check of the asset job would have recorded (``document_events``), from the report of
``ragaudit.ingest.documents.run_stages``: every ready document's partitions are materialized
with their checks' results, whichever path ingested it.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import dagster as dg
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from ragaudit.evaluate.goldgen import verify_stored_pairs
from ragaudit.ingest import documents as ingest
from ragaudit.platform.db import Document, QAPair

documents_partitions = dg.DynamicPartitionsDefinition(name="documents")
SEPARATOR = " · "
INGEST_ASSET_NAMES = ("pdf_pages", "chunks", "chunk_points", "live_index", "gold_qa_pairs")
_ID_AT_END = re.compile(r"(?:^|" + re.escape(SEPARATOR) + r")([0-9a-f]{32})$")


def partition_key(doc: Any) -> str:
    """The partition key of a document (a ``Document`` row or its ``as_dict()``)."""
    get = doc.get if isinstance(doc, dict) else lambda k: getattr(doc, k)
    label = f"{get('knowledge_base')}/{get('doc_name')}".replace("...", "…")
    return f"{label}{SEPARATOR}{get('id')}"


def document_id(key: str) -> str:
    """The document id a partition key names (the id that ends it; a bare id is itself)."""
    m = _ID_AT_END.search(key)
    return m.group(1) if m else key


def add_partition(instance: dg.DagsterInstance, doc: Any) -> str:
    """Add the document's partition (idempotent); returns its key."""
    key = partition_key(doc)
    if not instance.has_dynamic_partition(documents_partitions.name, key):
        instance.add_dynamic_partitions(documents_partitions.name, [key])
    return key


def remove_partitions(instance: dg.DagsterInstance, doc_id: str) -> list[str]:
    """Delete every partition of a document (whatever name its key carries); returns the keys."""
    keys = [k for k in instance.get_dynamic_partitions(documents_partitions.name) if document_id(k) == doc_id]
    for k in keys:
        instance.delete_dynamic_partition(documents_partitions.name, k)
    return keys


def check_evaluation(check: str, asset: str, st: dict[str, Any], key: str | None, **kw) -> dg.AssetCheckEvaluation:
    """The ``AssetCheckEvaluation`` of ``check`` on ``asset`` for partition ``key`` from a result dict
    with ``passed`` (its other entries are the metadata; lists as text)."""
    meta = {k: (str(v) if isinstance(v, list) else v) for k, v in st.items() if k != "passed"}
    return dg.AssetCheckEvaluation(
        asset_key=dg.AssetKey(asset), check_name=check, passed=bool(st["passed"]), metadata=meta, partition=key, **kw
    )


def document_events(key: str, report: dict[str, Any]) -> list[dg.AssetMaterialization | dg.AssetCheckEvaluation]:
    """The materializations of ``pdf_pages``, ``chunks``, ``chunk_points``, ``live_index`` and
    ``gold_qa_pairs`` (when the report has it) for partition ``key``, and the results of its partitioned checks
    (``chunk_counts_match``, ``pages_have_chunks``), from a ``run_stages`` report."""
    label = {"document": key.rsplit(SEPARATOR, 1)[0]}
    out: list[dg.AssetMaterialization | dg.AssetCheckEvaluation] = [
        dg.AssetMaterialization(asset_key=asset, partition=key, metadata={**label, **report[asset]})
        for asset in INGEST_ASSET_NAMES
        if report.get(asset) is not None
    ]
    checks = report["checks"]
    out.append(
        check_evaluation(
            "chunk_counts_match",
            "chunk_points",
            checks["chunk_counts_match"],
            key,
            severity=dg.AssetCheckSeverity.ERROR,
            blocking=True,
        )
    )
    out.append(check_evaluation("pages_have_chunks", "live_index", checks["pages_have_chunks"], key))
    return out


def index_check_events(svc) -> list[dg.AssetCheckEvaluation]:
    """The results of the whole-index checks (``no_orphans``, ``evidence_spans_verbatim``) now."""
    orphans = ingest.orphans(svc)
    pairs = verify_stored_pairs(svc)
    return [
        check_evaluation(
            "no_orphans",
            "live_index",
            {**orphans, "passed": orphans["orphan_points"] == 0 and orphans["orphan_rows"] == 0},
            None,
        ),
        check_evaluation(
            "evidence_spans_verbatim",
            "gold_qa_pairs",
            {**pairs, "passed": pairs["not_verbatim"] == 0 and pairs["missing_chunk"] == 0},
            None,
        ),
    ]


log = logging.getLogger(__name__)


def report_runless(instance: dg.DagsterInstance, ev: dg.AssetMaterialization | dg.AssetCheckEvaluation) -> None:
    """``instance.report_runless_asset_event(ev)``, so that a check result reported without a run
    is the one the UI shows for its partition. Dagster's check-execution index holds one runless
    result per (asset, check, partition) (a unique index with run id ""), so a document ingested
    again under the same partition (a new version of the same name) would fail to record its
    result and the first version's would stay shown: the earlier runless result's index row is
    removed first (its event stays in the event log). On a storage that is not Dagster's SQL
    event log, a repeated result is logged and skipped."""
    if isinstance(ev, dg.AssetCheckEvaluation):
        _forget_runless_result(instance, ev)
    try:
        instance.report_runless_asset_event(ev)
    except IntegrityError:
        if not isinstance(ev, dg.AssetCheckEvaluation):
            raise
        log.warning("check %s of partition %s already has a result reported without a run", ev.check_name, ev.partition)


def _forget_runless_result(instance: dg.DagsterInstance, ev: dg.AssetCheckEvaluation) -> None:
    """Delete the check-execution index row of an earlier runless result of ``ev``'s asset, check
    and partition (SQL event log storages: SQLite, PostgreSQL)."""
    from dagster._core.storage.event_log.schema import AssetCheckExecutionsTable
    from dagster._core.storage.event_log.sql_event_log import SqlEventLogStorage

    storage = instance.event_log_storage
    if not isinstance(storage, SqlEventLogStorage):
        return
    t = AssetCheckExecutionsTable
    with storage.index_connection() as conn:
        conn.execute(
            t.delete().where(
                t.c.asset_key == ev.asset_key.to_string(),
                t.c.check_name == ev.check_name,
                t.c.partition == ev.partition,
                t.c.run_id == "",
            )
        )


def record_ingested(svc, instance: dg.DagsterInstance, done: list[tuple[Any, dict]], log_event=None) -> list[str]:
    """Record in Dagster documents ingested outside the asset job, ``done`` = ``[(document row or
    its as_dict(), run_stages report)]``: their partitions, materializations and check results
    (``document_events``), then the whole-index checks once. ``log_event``: the op context's
    ``log_event`` inside a run; None = reported to ``instance`` without a run
    (``report_runless_asset_event``). Returns the partition keys."""
    emit = log_event or (lambda ev: report_runless(instance, ev))
    keys = []
    for doc, report in done:
        key = add_partition(instance, doc)
        keys.append(key)
        for ev in document_events(key, report):
            emit(ev)
    if keys:
        for ev in index_check_events(svc):
            emit(ev)
    return keys


def ingested(outcomes: list) -> list[tuple[dict, dict]]:
    """``[(document, report)]`` of the ``IngestOutcome``s whose stages ran (status ``ingested``)."""
    return [(o.document, o.stages) for o in outcomes if o.status == "ingested" and o.document and o.stages]


def reconcile(svc, instance: dg.DagsterInstance) -> dict[str, int]:
    """Make the instance agree with the documents table (the serving process calls it as it
    starts, before its queue runs anything): every ``ready`` document has its partition under its
    key (a partition of an older key, e.g. a bare id, is replaced), partitions of documents that
    are gone are deleted, and a ready document's partition with no materialization of an
    ingestion asset (an instance created after the document was built, or an older key) gets
    one reported from its live version (``pages``, ``chunks``, ``recorded_from``:
    ``live version``), with ``chunk_counts_match`` checked now; ``gold_qa_pairs`` only when the
    document has stored pairs. ``pages_have_chunks`` needs the page texts and is left to the next
    ingestion. Returns ``{added, removed, recorded}`` (partitions, partitions, documents)."""
    with svc.sessions() as s:
        docs = {d.id: d for d in s.scalars(select(Document))}
        with_pairs = set(s.scalars(select(QAPair.document_id).distinct()))
    name = documents_partitions.name
    keys = set(instance.get_dynamic_partitions(name))
    wanted = {i: partition_key(d) for i, d in docs.items()}
    stale = [k for k in keys if wanted.get(document_id(k)) != k]
    for k in stale:
        instance.delete_dynamic_partition(name, k)
    ready = {i: d for i, d in docs.items() if d.status == "ready"}
    missing = [wanted[i] for i in ready if wanted[i] not in keys]
    if missing:
        instance.add_dynamic_partitions(name, missing)
    done = {a: instance.get_materialized_partitions(dg.AssetKey(a)) for a in INGEST_ASSET_NAMES}
    recorded = 0
    for i, d in ready.items():
        key = wanted[i]
        todo = [a for a in INGEST_ASSET_NAMES if key not in done[a] and (a != "gold_qa_pairs" or i in with_pairs)]
        if not todo:
            continue
        meta = {
            "document": key.rsplit(SEPARATOR, 1)[0],
            "pages": d.pages,
            "chunks": d.chunk_count,
            "recorded_from": "live version",
        }
        for a in todo:
            instance.report_runless_asset_event(dg.AssetMaterialization(asset_key=a, partition=key, metadata=meta))
        st = ingest.count_check(svc, i)
        report_runless(
            instance,
            check_evaluation("chunk_counts_match", "chunk_points", st, key, severity=dg.AssetCheckSeverity.ERROR),
        )
        recorded += 1
    return {"added": len(missing), "removed": len(stale), "recorded": recorded}

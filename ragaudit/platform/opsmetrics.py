"""Aggregates over ``query_logs`` (GET /metrics) and Prometheus exposition (GET /metrics/prometheus).

Percentile definition: numpy's ``method="linear"`` (Hyndman & Fan 1996, type 7, the default of
numpy, R and Excel's PERCENTILE.INC): for sorted values x[0..n-1], P_q is the linear
interpolation at position (n-1)*q/100. The rows of the window are fetched and the percentiles
computed in Python with numpy, so SQLite and PostgreSQL give identical numbers (neither has a
portable percentile function: SQLite has none, PostgreSQL's ``percentile_cont`` is the same
type 7 but would be a second implementation to keep in step).

What counts: every logged request in the window (``since <= created_at < until``), failures
and cache hits included. Latency percentiles of a stage use the rows where that stage ran
(non-NULL); ``total`` covers every request (a cache hit's total is the time it took to serve it).
Cost: ``cost_usd`` as logged (0 for cache hits: their original cost is on the original row).
``total``/``mean`` sum the known costs; rows whose cost is unknown (NULL: the model has no price
in litellm's map) are counted in ``unknown`` with their models in ``unknown_models``, never
added as 0.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import select

from ragaudit.platform.db import QueryLog
from ragaudit.platform.llmcall import CLIENT_DISCONNECTED
from ragaudit.platform.telemetry import STAGE_COLUMNS

PERCENTILES = (50, 95, 99)
PERCENTILE_METHOD = "linear"  # numpy name; Hyndman & Fan type 7
GROUP_BY = ("mode", "model", "label", "endpoint")
#: other names accepted for a logged endpoint (``query_logs.endpoint`` says ``stream`` for /query/stream)
ENDPOINT_ALIASES = {"query_stream": "stream"}


def percentiles(values: list[float]) -> dict[str, float | None]:
    """``{"p50", "p95", "p99"}`` of ``values`` (ms) with numpy's 'linear' method (Hyndman-Fan type 7);
    ``None`` each when ``values`` is empty."""
    if not values:
        return {f"p{p}": None for p in PERCENTILES}
    qs = np.percentile(np.asarray(values, dtype=float), PERCENTILES, method=PERCENTILE_METHOD)
    return {f"p{p}": round(float(v), 3) for p, v in zip(PERCENTILES, qs)}


def parse_time(value: str | datetime | None) -> datetime | None:
    """ISO 8601 -> aware UTC datetime (naive input is taken as UTC). ``ValueError`` if unparsable."""
    if value is None or value == "":
        return None
    dt = value if isinstance(value, datetime) else datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc)


_COLS = [
    "mode",
    "model",
    "label",
    "endpoint",
    "cache_hit",
    "error_kind",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    *STAGE_COLUMNS.values(),
]


# the error kinds of requests rejected as invalid with a 4xx reply (a body that fails validation or
# is over the size limit, an unknown model on the OpenAI-compatible route): the client's mistake,
# not a failure of the server
CLIENT_ERROR_KINDS = frozenset({"validation_error", "body_too_large", "model_not_found"})


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Statistics of ``rows`` (dicts with the ``query_logs`` columns used here).

    Returns ``{count, errors, error_rate, client_disconnects, client_errors, cache_hits, cache_hit_rate,
    latency_ms: {stage: {p50, p95, p99, n}}, cost_usd: {total, mean, known, unknown, unknown_models},
    tokens: {prompt, completion, total}}``; rates are in [0, 1], ``None`` when there are no rows.
    A request whose client went away before its end (``error_kind`` ``ClientDisconnected``) is
    counted in ``client_disconnects``, not as an error: nothing failed on the server's side; so is a
    request the API rejected as invalid (``CLIENT_ERROR_KINDS``: a 4xx reply), in ``client_errors``.
    """
    n = len(rows)
    left = sum(1 for r in rows if r["error_kind"] == CLIENT_DISCONNECTED)
    rejected = sum(1 for r in rows if r["error_kind"] in CLIENT_ERROR_KINDS)
    errors = sum(1 for r in rows if r["error_kind"]) - left - rejected
    hits = sum(1 for r in rows if r["cache_hit"])
    latency = {}
    for stage, col in STAGE_COLUMNS.items():
        vals = [r[col] for r in rows if r[col] is not None]
        latency[stage] = {**percentiles(vals), "n": len(vals)}
    known = [r["cost_usd"] for r in rows if r["cost_usd"] is not None]
    unknown_models = sorted({str(r["model"]) for r in rows if r["cost_usd"] is None})
    cost = float(sum(known))
    prompt = int(sum(r["prompt_tokens"] or 0 for r in rows))
    completion = int(sum(r["completion_tokens"] or 0 for r in rows))
    return {
        "count": n,
        "errors": errors,
        "error_rate": errors / n if n else None,
        "client_disconnects": left,
        "client_errors": rejected,
        "cache_hits": hits,
        "cache_hit_rate": hits / n if n else None,
        "latency_ms": latency,
        "cost_usd": {
            "total": round(cost, 8),
            "mean": round(cost / len(known), 8) if known else None,
            "known": len(known),
            "unknown": n - len(known),
            "unknown_models": unknown_models,
        },
        "tokens": {"prompt": prompt, "completion": completion, "total": prompt + completion},
    }


def compute_metrics(
    sessions: Any,
    since: str | datetime | None = None,
    until: str | datetime | None = None,
    group_by: str | None = None,
    endpoint: str | None = None,
) -> dict[str, Any]:
    """Aggregate ``query_logs`` rows with ``since <= created_at < until`` (ISO 8601, UTC if naive).

    ``group_by``: one of ``mode``, ``model``, ``label``, ``endpoint`` or ``None``; ``endpoint``
    filters to one endpoint as logged (``query``, ``stream``, ``search``; ``ENDPOINT_ALIASES``
    names are mapped to theirs). Returns ``{window, group_by, percentile_method, overall: summary,
    groups: [{key, **summary}]}`` (see ``summarize``). Raises ``ValueError`` for an unknown
    ``group_by`` or an unparsable time.
    """
    if group_by is not None and group_by not in GROUP_BY:
        raise ValueError(f"unknown group_by {group_by!r}; valid: {', '.join(GROUP_BY)}")
    t0, t1 = parse_time(since), parse_time(until)
    endpoint = ENDPOINT_ALIASES.get(endpoint, endpoint) if endpoint else endpoint
    q = select(*[getattr(QueryLog, c) for c in _COLS])
    if t0 is not None:
        q = q.where(QueryLog.created_at >= t0)
    if t1 is not None:
        q = q.where(QueryLog.created_at < t1)
    if endpoint:
        q = q.where(QueryLog.endpoint == endpoint)
    with sessions() as s:
        rows = [dict(r._mapping) for r in s.execute(q)]
    out: dict[str, Any] = {
        "window": {"since": t0.isoformat() if t0 else None, "until": t1.isoformat() if t1 else None},
        "endpoint": endpoint,
        "group_by": group_by,
        "percentile_method": "numpy 'linear' (Hyndman & Fan type 7), computed in Python for every database",
        "overall": summarize(rows),
        "groups": [],
    }
    if group_by:
        groups: dict[Any, list[dict]] = {}
        for r in rows:
            groups.setdefault(r[group_by], []).append(r)
        out["groups"] = [
            {"key": k, **summarize(v)} for k, v in sorted(groups.items(), key=lambda kv: (kv[0] is None, str(kv[0])))
        ]
    return out


class PrometheusMetrics:
    """In-process Prometheus metrics of this API process, in their own ``CollectorRegistry``.

    ``observe(row)`` is the ``TelemetryWriter`` observer: it counts each request and puts its
    latencies (seconds) into histograms. ``TelemetryStatsCollector(writer)`` registered on
    ``registry`` adds ``ragaudit_telemetry_rows_{written,dropped}_total`` and
    ``ragaudit_telemetry_rows_pending``. ``render()`` -> text exposition format 0.0.4.
    """

    BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

    def __init__(self):
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("ragaudit_requests", "Logged requests", ["endpoint", "mode", "status"], registry=r)
        self.cache_hits = Counter(
            "ragaudit_cache_hits", "Requests served from the answer/retrieval cache", ["endpoint"], registry=r
        )
        self.latency = Histogram(
            "ragaudit_request_latency_seconds",
            "Total request latency",
            ["endpoint", "mode"],
            buckets=self.BUCKETS,
            registry=r,
        )
        self.stage = Histogram(
            "ragaudit_stage_latency_seconds", "Latency of each stage", ["stage"], buckets=self.BUCKETS, registry=r
        )
        self.cost = Counter("ragaudit_cost_usd", "LLM/embedding cost in USD", ["model"], registry=r)
        self.tokens = Counter("ragaudit_tokens", "LLM tokens", ["model", "kind"], registry=r)
        self.cost_unknown = Counter(
            "ragaudit_cost_unknown",
            "Requests whose cost is unknown (model without a price in litellm's map)",
            ["model"],
            registry=r,
        )

    def observe(self, row: dict[str, Any]) -> None:
        """Count one telemetry row (the dict ``TelemetryWriter.record`` builds)."""
        ep, mode = row["endpoint"], row["mode"] or ""
        kind = row["error_kind"]
        status = (
            "ok"
            if not kind
            else "disconnected"
            if kind == CLIENT_DISCONNECTED
            else "rejected"
            if kind in CLIENT_ERROR_KINDS
            else "error"
        )
        self.requests.labels(ep, mode, status).inc()
        if row["cache_hit"]:
            self.cache_hits.labels(ep).inc()
        if row["total_ms"] is not None:
            self.latency.labels(ep, mode).observe(row["total_ms"] / 1000)
        for stage, col in STAGE_COLUMNS.items():
            if stage != "total" and row[col] is not None:
                self.stage.labels(stage).observe(row[col] / 1000)
        model = row["model"] or "none"
        if row["cost_usd"] is None:
            self.cost_unknown.labels(model).inc()
        elif row["cost_usd"]:
            self.cost.labels(model).inc(row["cost_usd"])
        if row["prompt_tokens"]:
            self.tokens.labels(model, "prompt").inc(row["prompt_tokens"])
        if row["completion_tokens"]:
            self.tokens.labels(model, "completion").inc(row["completion_tokens"])

    def render(self) -> bytes:

        return generate_latest(self.registry)


class TelemetryStatsCollector(Collector):
    """Exposes a ``TelemetryWriter``'s written/dropped/pending row counts to Prometheus."""

    def __init__(self, writer: Any):
        self.writer = writer

    def collect(self):
        st = self.writer.stats()
        yield CounterMetricFamily("ragaudit_telemetry_rows_written", "query_logs rows written", value=st["written"])
        yield CounterMetricFamily(
            "ragaudit_telemetry_rows_dropped",
            "query_logs rows dropped (queue full, database down too long)",
            value=st["dropped"],
        )
        yield GaugeMetricFamily(
            "ragaudit_telemetry_rows_pending", "query_logs rows buffered, not yet written", value=st["pending"]
        )

"""Aggregated telemetry: GET /metrics (JSON, from query_logs) and GET /metrics/prometheus."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, HTTPException, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy.exc import SQLAlchemyError

from ragaudit.platform.opsmetrics import compute_metrics, parse_time

from ..deps import PrometheusDep, RequireReadKey, ServicesDep, TelemetryDep
from ..schemas import ErrorOut

router = APIRouter(tags=["metrics"], dependencies=[RequireReadKey])


@router.get("/metrics", responses={400: {"model": ErrorOut}, 422: {"model": ErrorOut}, 503: {"model": ErrorOut}})
async def metrics(
    svc: ServicesDep,
    telemetry: TelemetryDep,
    since: str | None = Query(None, description="ISO 8601, inclusive; naive = UTC"),
    until: str | None = Query(None, description="ISO 8601, exclusive; naive = UTC; not before since"),
    group_by: Literal["mode", "model", "label", "endpoint"] | None = None,
    endpoint: Literal["query", "stream", "search", "query_stream", "chat", "chat_stream", "mcp_ask", "mcp_search"]
    | None = Query(
        None,
        description="Rows of one route: query (/query), stream (/query/stream; query_stream is "
        "accepted for it too), search (/search), chat and chat_stream (/v1/chat/completions), "
        "mcp_ask and mcp_search (the MCP tools)",
    ),
) -> dict:
    """Count, error rate, cache-hit rate, P50/P95/P99 latency (total and per stage, ms), cost (USD)
    and tokens over the logged requests in ``[since, until)``, overall and per ``group_by`` value.

    Percentiles: numpy 'linear' (Hyndman & Fan type 7), computed in Python from the rows, so
    SQLite and PostgreSQL agree. ``telemetry`` reports this process's writer: rows written,
    dropped (never silently) and still buffered. 400 for a time that is not ISO 8601, 422 for
    ``until`` before ``since`` or an unknown ``endpoint`` / ``group_by``.
    """
    try:
        t0, t1 = parse_time(since), parse_time(until)
    except ValueError as e:
        raise HTTPException(400, f"since/until must be ISO 8601 times ({e})") from None
    if t0 is not None and t1 is not None and t1 < t0:
        raise HTTPException(
            422, f"until ({until}) is before since ({since}): the window [since, until) would be negative"
        )
    try:
        out = await run_in_threadpool(compute_metrics, svc.sessions, t0, t1, group_by, endpoint)
    except ValueError as e:
        raise HTTPException(400, str(e)) from None
    except SQLAlchemyError as e:
        raise HTTPException(503, f"database unavailable ({type(e).__name__})") from None
    out["telemetry"] = telemetry.stats()
    return out


@router.get("/metrics/prometheus", response_class=Response)
def prometheus(prom: PrometheusDep) -> Response:
    """This process's counters and histograms in the Prometheus text format (prometheus_client)."""
    return Response(prom.render(), media_type=CONTENT_TYPE_LATEST)

"""Aggregated telemetry: GET /metrics (JSON, from query_logs) and GET /metrics/prometheus."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, HTTPException, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy.exc import SQLAlchemyError

from ragaudit.platform.opsmetrics import compute_metrics

from ..deps import PrometheusDep, RequireReadKey, ServicesDep, TelemetryDep
from ..schemas import ErrorOut

router = APIRouter(tags=["metrics"], dependencies=[RequireReadKey])


@router.get("/metrics", responses={400: {"model": ErrorOut}, 503: {"model": ErrorOut}})
async def metrics(
    svc: ServicesDep,
    telemetry: TelemetryDep,
    since: str | None = Query(None, description="ISO 8601, inclusive; naive = UTC"),
    until: str | None = Query(None, description="ISO 8601, exclusive; naive = UTC"),
    group_by: Literal["mode", "model", "label", "endpoint"] | None = None,
    endpoint: str | None = Query(None, description="query | query_stream | search"),
) -> dict:
    """Count, error rate, cache-hit rate, P50/P95/P99 latency (total and per stage, ms), cost (USD)
    and tokens over the logged requests in ``[since, until)``, overall and per ``group_by`` value.

    Percentiles: numpy 'linear' (Hyndman & Fan type 7), computed in Python from the rows, so
    SQLite and PostgreSQL agree. ``telemetry`` reports this process's writer: rows written,
    dropped (never silently) and still buffered.
    """
    try:
        out = await run_in_threadpool(compute_metrics, svc.sessions, since, until, group_by, endpoint)
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

"""Health of the parts the service depends on: API, database, Qdrant, embedding model, LLM, telemetry."""

from __future__ import annotations

import time
from typing import Any, Callable

import httpx
from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from sqlalchemy import text

from ragaudit.platform.llmcall import load_litellm

from ..deps import ServicesDep

router = APIRouter(tags=["health"])

#: parts whose status decides 200 vs 503
REQUIRED = ("api", "database", "qdrant", "embedding_model", "llm")


def _timed(fn: Callable[[], dict[str, Any] | None]) -> dict[str, Any]:
    """Run a probe: ``{status: up|down, latency_ms, ...detail}``; a failure reports its type only
    (messages can carry URLs or credentials)."""
    t = time.perf_counter()
    try:
        detail = fn() or {}
        status = detail.pop("status", "up")
        return {"status": status, "latency_ms": round((time.perf_counter() - t) * 1000, 2), **detail}
    except Exception as e:
        return {"status": "down", "latency_ms": round((time.perf_counter() - t) * 1000, 2), "error": type(e).__name__}


def llm_probe(settings: Any) -> dict[str, Any]:
    """LLM status without spending tokens.

    No model configured: the offline extractive answerer, always up. Otherwise: litellm's local
    price map says whether the model is known (``known_price``); with ``llm_api_base`` set, an HTTP
    GET of the base URL (any HTTP response, even 404, proves the server is reachable; a connection
    error or timeout means down). Without an api_base (hosted provider) reachability is not probed.
    """
    model = settings.llm_model
    if not model:
        return {"configured": False, "model": "extractive (offline)", "cost": "0 (local)"}
    litellm = load_litellm()

    try:
        info = litellm.get_model_info(model)
        known = info.get("input_cost_per_token") is not None
    except Exception:
        known = False
    out: dict[str, Any] = {"configured": True, "model": model, "known_price": known}
    if settings.llm_api_base:
        try:
            r = httpx.get(settings.llm_api_base, timeout=min(5.0, settings.llm_timeout_s))
            out.update(reachable=True, http_status=r.status_code)
        except httpx.HTTPError as e:
            out.update(status="down", reachable=False, error=type(e).__name__)
    else:
        out["reachable"] = "not probed (hosted provider; a probe would need a paid call)"
    return out


@router.get("/health")
async def health(svc: ServicesDep, request: Request) -> JSONResponse:
    """Status and latency (ms) of API, database, Qdrant (collection, points), embedding model, LLM
    and the telemetry writer; 200 only when every required part (all but telemetry) is up, else 503."""

    def db():
        with svc.engine.connect() as c:
            c.execute(text("SELECT 1"))
        return {"url": svc.settings.redacted_database_url()}

    def qdrant():
        exists = svc.store.exists()
        out = {
            "location": svc.store.location,
            "collection": svc.store.collection,
            "collection_exists": exists,
            "points": svc.store.count() if exists else 0,
        }
        return out

    def model():
        e = svc.embedder
        return {"model": svc.settings.embedding_model, "loaded": True, "dim": e.dim, "max_seq_length": e.max_seq_length}

    def probe_all() -> dict[str, Any]:
        return {
            "api": {"status": "up", "latency_ms": 0.0},
            "database": _timed(db),
            "qdrant": _timed(qdrant),
            "embedding_model": _timed(model),
            "llm": _timed(lambda: llm_probe(svc.settings)),
        }

    parts = await run_in_threadpool(probe_all)
    telemetry = getattr(request.app.state, "telemetry", None)
    if telemetry is not None:
        st = telemetry.stats()
        parts["telemetry"] = {
            "status": "up" if st["alive"] else "down",
            "required": False,
            "degraded": bool(st["failing"] or st["dropped"]),
            **st,
        }
    ok = all(parts[p]["status"] == "up" for p in REQUIRED)
    return JSONResponse({"status": "ok" if ok else "degraded", "parts": parts}, status_code=200 if ok else 503)

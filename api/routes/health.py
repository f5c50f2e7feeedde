"""Health of the parts the service depends on."""

from __future__ import annotations

import time

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy import text

from ..deps import ServicesDep

router = APIRouter(tags=["health"])


def _timed(fn):
    t = time.perf_counter()
    try:
        detail = fn()
        return {"status": "up", "latency_ms": round((time.perf_counter() - t) * 1000, 2), **(detail or {})}
    except Exception as e:
        return {"status": "down", "latency_ms": round((time.perf_counter() - t) * 1000, 2),
                "error": f"{type(e).__name__}: {str(e)[:200]}"}


@router.get("/health")
def health(svc: ServicesDep) -> JSONResponse:
    """Status and latency of database, Qdrant and embedding model; 200 only when all are up."""

    def db():
        with svc.engine.connect() as c:
            c.execute(text("SELECT 1"))
        return {"url": svc.settings.redacted_database_url()}

    def qdrant():
        exists = svc.store.exists()
        return {"location": svc.store.location, "collection": svc.store.collection, "collection_exists": exists,
                "points": svc.store.count() if exists else 0}

    def model():
        e = svc.embedder
        return {"model": svc.settings.embedding_model, "dim": e.dim, "max_seq_length": e.max_seq_length}

    parts = {"api": {"status": "up"}, "database": _timed(db), "qdrant": _timed(qdrant), "embedding_model": _timed(model),
             "llm": {"status": "up", "configured": bool(svc.settings.llm_model),
                     "model": svc.settings.llm_model or "extractive (offline)"}}
    ok = all(p["status"] == "up" for p in parts.values())
    return JSONResponse({"status": "ok" if ok else "degraded", "parts": parts}, status_code=200 if ok else 503)

"""FastAPI application factory: ``create_app(settings)``; ``ragaudit serve`` runs it with uvicorn."""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.staticfiles import StaticFiles

from core.cache import AnswerCache
from core.opsmetrics import PrometheusMetrics, TelemetryStatsCollector
from core.query import QueryService
from core.services import get_services
from core.settings import Settings
from core.telemetry import TelemetryWriter

from .errors import install_error_handlers
from .limits import UploadSizeLimit
from .routes import documents, evaluation, health, metrics, query

log = logging.getLogger(__name__)
FRONTEND_DIST = Path(__file__).resolve().parents[1] / "frontend" / "dist"


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the API. Settings are validated here (``pydantic.ValidationError`` on bad values)."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        svc = get_services(settings)
        _ = svc.engine  # migrate the schema before serving
        app.state.services = svc
        # telemetry rows are written by a background thread; Prometheus counters see every row
        prom = PrometheusMetrics()
        telemetry = TelemetryWriter.from_services(svc, background=True, observer=prom.observe)
        prom.registry.register(TelemetryStatsCollector(telemetry))
        app.state.prometheus, app.state.telemetry = prom, telemetry
        app.state.query_service = QueryService(svc, telemetry=telemetry, cache=AnswerCache.from_services(svc))
        try:
            yield
        finally:
            telemetry.close(timeout=10.0)

    app = FastAPI(title="ragaudit", version="0.1.0", lifespan=lifespan,
                  description="Self-hosted RAG whose every answer can be audited: cited answers, "
                              "per-retriever ranks, timings and cost.")
    app.state.settings = settings
    app.add_middleware(CORSMiddleware, allow_origins=list(settings.cors_origins),
                       allow_methods=["*"], allow_headers=["*"], expose_headers=["Content-Range"])
    install_error_handlers(app)
    app.add_middleware(UploadSizeLimit, max_bytes=settings.max_upload_mb * 1024 * 1024)
    app.include_router(documents.router)
    app.include_router(query.router)
    app.include_router(health.router)
    app.include_router(metrics.router)
    app.include_router(evaluation.router)
    if FRONTEND_DIST.is_dir():
        app.mount("/", StaticFiles(directory=FRONTEND_DIST, html=True), name="frontend")
    return app

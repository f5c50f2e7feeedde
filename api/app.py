"""FastAPI application factory: ``create_app(settings)``; ``ragaudit serve`` runs it with uvicorn."""

from __future__ import annotations

import logging
import threading
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match, Mount, Route

from ragaudit.answer.answerability import warm_up as warm_up_gate
from ragaudit.ingest.queue import IngestQueue
from ragaudit.pipelines.partitions import reconcile
from ragaudit.pipelines.runner import DagsterRunner, RecordedRunner, execute_launched_run, instance_for, recover_runs
from ragaudit.platform import tracing
from ragaudit.platform.cache import AnswerCache
from ragaudit.platform.opsmetrics import PrometheusMetrics, TelemetryStatsCollector
from ragaudit.platform.settings import Settings
from ragaudit.platform.telemetry import TelemetryWriter
from ragaudit.query import QueryService
from ragaudit.services import get_services
from ragaudit.types import Mode

from .admin import create_admin_app
from .errors import (
    install_error_handlers,
    is_openai_path,
    openai_error_response,
    short_errors,
    short_input,
    validation_message,
)
from .limits import JsonBodyLimit, UploadSizeLimit
from .mcp_server import MCPEndpoint, build_mcp_server, http_session_manager
from .routes import (
    document_files,
    documents,
    eval_views,
    evaluation,
    health,
    internal,
    metrics,
    openai_compat,
    query,
)

log = logging.getLogger(__name__)
FRONTEND_DIST = Path(__file__).resolve().parents[1] / "frontend" / "dist"


QUERY_ENDPOINTS = {"/query": "query", "/query/stream": "stream", "/search": "search", "/v1/chat/completions": "chat"}


def body_question(body: dict) -> str:
    """The question a request body carries: ``question``, or the last message's text content
    (a chat completion request)."""
    if isinstance(body.get("question"), str):
        return body["question"]
    messages = body.get("messages")
    if isinstance(messages, list) and messages and isinstance(messages[-1], dict):
        content = messages[-1].get("content")
        return content if isinstance(content, str) else ""
    return ""


def record_rejected(
    telemetry: TelemetryWriter, endpoint: str, body: object, default_top_k: int, error_kind: str = "validation_error"
) -> None:
    """One query_logs row for a request of ``endpoint`` that failed validation (422): whatever of
    question / top_k / scope the body carried, ``error_kind="validation_error"`` (a question cut to
    ``QUESTION_MAX_CHARS`` by the writer, scope values shortened as the 422 echoes them). ``mode`` is the
    body's mode when it names one (hybrid when absent) and ``invalid`` otherwise: the mode is a label
    of /metrics groups and of Prometheus series, so a client's made-up values must not each open one."""
    b = body if isinstance(body, dict) else {}
    mode = b.get("mode") or Mode.hybrid.value
    mode = mode if isinstance(mode, str) and mode in {m.value for m in Mode} else "invalid"
    question = body_question(b)
    top_k = b.get("top_k")
    top_k = top_k if isinstance(top_k, int) and not isinstance(top_k, bool) and 0 < top_k < 1_000_000 else default_top_k
    scope_keys = ("doc_name", "doc_names", "knowledge_base", "document_ids", "page_min", "page_max", "strategy")
    scope = {k: short_input(b[k]) for k in scope_keys if b.get(k) not in (None, [], "")}
    telemetry.record(
        endpoint=endpoint,
        question=question,
        mode=mode,
        top_k=top_k,
        scope=scope or None,
        error_kind=error_kind,
    )


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the API. Settings are validated here (``pydantic.ValidationError`` on bad values)."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        # the OTLP exporter (when OTEL_EXPORTER_OTLP_ENDPOINT is set) exists before the first request,
        # so FastAPI's HTTP span of every request is recorded as its trace's root
        tracing.tracer()
        svc = get_services(settings)
        _ = svc.engine  # migrate the schema before serving
        app.state.services = svc
        # telemetry rows are written by a background thread; Prometheus counters see every row
        prom = PrometheusMetrics()
        telemetry = TelemetryWriter.from_services(svc, background=True, observer=prom.observe)
        prom.registry.register(TelemetryStatsCollector(telemetry))
        app.state.prometheus, app.state.telemetry = prom, telemetry
        app.state.query_service = QueryService(svc, telemetry=telemetry, cache=AnswerCache.from_services(svc))
        # what the answerability gate defers to its first question (language profiles, word lists,
        # place tables) loads beside the startup, not in the first user's request
        app.state.warm_up = threading.Thread(target=_warm_up_gate, name="gate-warm-up", daemon=True)
        app.state.warm_up.start()
        # create the Dagster instance's storage now, before anything is served: Dagster's SQLite
        # storage is not safe to create from several processes at once (the webserver and daemon,
        # started after the API answers /health, then find it ready)
        instance = instance_for(svc)
        # the instance agrees with the documents table before anything runs: every ready document's
        # partition under its key and materialized (documents built before this instance, older keys)
        try:
            fixed = reconcile(svc, instance)
            if any(fixed.values()):
                log.info("Dagster partitions brought in line with the documents: %s", fixed)
        except Exception:  # the database or the instance is down: the next start tries again
            log.exception("could not bring the Dagster partitions in line with the documents")

        # uploads are ingested by the queue's lanes (Dagster runs in the main lane, a short document
        # beside them with its events reported to Dagster); documents left queued or half-run by a
        # stopped server are re-queued from SQL here
        jobs = IngestQueue(
            svc,
            DagsterRunner(),
            poll_s=2.0 if settings.embedded else None,
            run_executor=execute_launched_run,
            express_runner=RecordedRunner(),
        )
        app.state.ingest_queue = jobs
        jobs.start()
        # Dagster runs a stopped process left in progress: failed with the reason, or executed
        # here if they were handed over and never started
        try:
            recovered = recover_runs(svc, jobs.submit_run)
            if any(recovered.values()):
                log.warning(
                    "Dagster runs left by a stopped process: %d marked failed, %d handed-over runs "
                    "started again; documents a stopped run was building are re-queued from SQL",
                    len(recovered["failed"]),
                    len(recovered["requeued"]),
                )
        except Exception:  # never keep the API from serving
            log.exception("could not check the Dagster runs left by a stopped process")
        # the MCP tools at /mcp: a server and session manager per lifespan (a manager runs once)
        mcp_server = build_mcp_server(lambda: app.state.query_service, lambda: app.state.services)
        app.state.mcp_sessions = http_session_manager(mcp_server)
        try:
            async with app.state.mcp_sessions.run():
                yield
        finally:
            # this lifespan's own queue, not app.state's: a second lifespan of the same app (a test
            # client's) replaced app.state.ingest_queue, and stopping that one twice left this
            # worker polling the database after its files were deleted
            jobs.stop(timeout=5.0)
            telemetry.close(timeout=10.0)
            tracing.force_flush()
            # close the database connections this process holds: SQLite then folds its write-ahead
            # log into ragaudit.db and deletes it, so a stopped server leaves one file to copy (the
            # engine opens new connections if the services are used again, as by a next lifespan)
            svc.engine.dispose()

    # FastAPIOffline: /docs and /redoc load Swagger UI / ReDoc from files shipped in the fastapi-offline
    # package (served under /static-offline-docs), so they work with no network
    app = FastAPIOffline(
        title="ragaudit",
        version="0.1.0",
        lifespan=lifespan,
        description="Self-hosted RAG whose every answer can be audited: cited answers, "
        "per-retriever ranks, timings and cost.",
    )
    app.state.settings = settings

    @app.exception_handler(RequestValidationError)
    async def log_rejected_query(request: Request, exc: RequestValidationError):
        """A /query, /query/stream, /search or /v1/chat/completions request rejected by validation
        still gets its query_logs row (``error_kind`` = ``validation_error``); the reply is
        FastAPI's usual 422 with each ``input`` shortened (``short_input``), or under ``/v1/``
        OpenAI's 400 ``invalid_request_error``."""
        endpoint = QUERY_ENDPOINTS.get(request.url.path)
        telemetry = getattr(request.app.state, "telemetry", None)
        if endpoint and telemetry is not None:
            if endpoint == "chat" and isinstance(exc.body, dict) and exc.body.get("stream") is True:
                endpoint = "chat_stream"
            record_rejected(telemetry, endpoint, exc.body, settings.top_k)
        if is_openai_path(request.url.path):  # OpenAI clients expect 400 and their error object
            message, param = validation_message(list(exc.errors()))
            return openai_error_response(400, {"message": message, "param": param})
        return JSONResponse(status_code=422, content={"detail": jsonable_encoder(short_errors(exc.errors()))})

    # inside CORS (added first): a browser client can read the 413
    def log_too_large(scope: dict, path: str) -> None:
        """A /query, /query/stream, /search or /v1/chat/completions body over the limit (413) gets
        its query_logs row too (``error_kind`` = ``body_too_large``, no question: nothing of the
        body is read), so rejected requests are counted whatever rejected them."""
        endpoint = QUERY_ENDPOINTS.get(path)
        telemetry = getattr(scope["app"].state, "telemetry", None) if "app" in scope else None
        if endpoint and telemetry is not None:
            record_rejected(telemetry, endpoint, {}, settings.top_k, error_kind="body_too_large")

    app.add_middleware(JsonBodyLimit, on_refused=log_too_large)
    app.add_middleware(
        CORSMiddleware,
        allow_origins=list(settings.cors_origins),
        allow_methods=["*"],
        allow_headers=["*"],
        expose_headers=["Content-Range"],
    )
    app.include_router(document_files.router)
    install_error_handlers(app)
    app.add_middleware(UploadSizeLimit, max_bytes=settings.max_upload_mb * 1024 * 1024)
    app.include_router(documents.router)
    app.include_router(query.router)
    app.include_router(openai_compat.router)
    # MCP over streamable HTTP, behind /query's key rule (ask can spend money). Stateless: POST only
    # (no server-initiated stream to GET, no session to DELETE; those answer 405, as the spec allows)
    app.router.routes.append(Route("/mcp", MCPEndpoint(), methods=["POST"], include_in_schema=False))
    app.include_router(health.router)
    app.include_router(metrics.router)
    app.include_router(evaluation.router)
    app.include_router(eval_views.router)
    app.include_router(internal.router)
    # react-admin bridge (ra-data-simple-rest protocol); services exist once the lifespan has run
    app.mount("/admin/api", create_admin_app(lambda: app.state.services, lambda: app.state.settings), name="admin-api")
    if FRONTEND_DIST.is_dir():
        app.mount("/", FrontendFiles(directory=FRONTEND_DIST, html=True), name="frontend")
    return app


def _warm_up_gate() -> None:
    try:
        log.info("answerability gate warmed up in %.1f s", warm_up_gate())
    except Exception:  # a first question then loads what is missing itself
        log.exception("could not warm up the answerability gate")


class FrontendFiles(StaticFiles):
    """The built web UI at ``/``. Mounted last, it would answer every request no API route took,
    so ``GET /query`` (a POST-only API path) got the UI's 404; a request whose path is an API
    route's, with a method that route does not have, gets ``405`` with ``Allow`` (RFC 9110 §15.5.6)."""

    async def __call__(self, scope, receive, send) -> None:

        if scope["type"] == "http":
            for route in scope["app"].router.routes:  # API routers (not this mount)
                if not isinstance(route, Mount) and route.matches(scope)[0] == Match.PARTIAL:
                    # the app's 405 handler (ragaudit.api.errors) adds Allow from the OpenAPI document
                    raise StarletteHTTPException(405, "Method Not Allowed")
        await super().__call__(scope, receive, send)

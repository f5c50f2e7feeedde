"""FastAPI dependencies as ``Annotated`` aliases (one place), including API-key access control.

Access when ``RAGAUDIT_API_KEYS`` is set (a valid key in ``X-API-Key: <key>`` or
``Authorization: Bearer <key>``):

- ``RequireWriteKey``: writes (uploads, deletion, re-ingestion, dataset import) always need a key;
- ``RequirePaidKey``: so does every route that can call a paid model (``/query``,
  ``/query/stream``: an LLM answer when ``llm_model`` is set; ``/evaluate``: answers and the LLM
  judge), whatever the read setting;
- ``RequirePrivateKey``: stored PDFs and users' questions (query logs) need a key unless
  ``RAGAUDIT_FILES_AND_QUERY_LOGS_OPEN=true`` and reads are open;
- ``RequireReadKey``: other reads need one only when ``RAGAUDIT_READ_REQUIRES_API_KEY=true``.

Without keys every route is open. Keys are compared in constant time (``hmac.compare_digest``)
and never echoed: the 401 says only that a key is missing or invalid. The admin bridge
(``ragaudit.api.admin``) applies the same rules through ``key_required``.

Usage in a router::

    @router.post("/evaluate", dependencies=[RequirePaidKey])
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, HTTPException, Request

from ragaudit.ingest.queue import IngestQueue
from ragaudit.platform.opsmetrics import PrometheusMetrics
from ragaudit.platform.settings import Settings
from ragaudit.platform.telemetry import TelemetryWriter
from ragaudit.query import QueryService
from ragaudit.services import Services


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


def get_services_dep(request: Request) -> Services:
    return request.app.state.services


def get_query_service(request: Request) -> QueryService:
    return request.app.state.query_service


def get_telemetry(request: Request) -> TelemetryWriter:
    return request.app.state.telemetry


def get_prometheus(request: Request) -> PrometheusMetrics:
    return request.app.state.prometheus


def get_ingest_queue(request: Request) -> IngestQueue:
    return request.app.state.ingest_queue


SettingsDep = Annotated[Settings, Depends(get_settings)]
ServicesDep = Annotated[Services, Depends(get_services_dep)]
QueryServiceDep = Annotated[QueryService, Depends(get_query_service)]
TelemetryDep = Annotated[TelemetryWriter, Depends(get_telemetry)]
PrometheusDep = Annotated[PrometheusMetrics, Depends(get_prometheus)]
IngestQueueDep = Annotated[IngestQueue, Depends(get_ingest_queue)]


def presented_key(request: Request) -> str | None:
    """The key sent in ``X-API-Key`` or ``Authorization: Bearer``; ``None`` if neither."""
    key = request.headers.get("x-api-key")
    if key:
        return key.strip()
    auth = request.headers.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return None


def key_is_valid(presented: str | None, settings: Settings) -> bool:
    """True when ``presented`` equals one of ``settings.api_keys``; every configured key is
    compared (constant time per key, no early exit), so timing reveals nothing."""
    if presented is None:
        return False
    given = presented.encode("utf-8")
    ok = False
    for k in settings.api_keys:
        ok |= hmac.compare_digest(given, k.get_secret_value().encode("utf-8"))
    return ok


def key_required(settings: Settings, level: str) -> bool:
    """Whether a route of access ``level`` needs a key under ``settings``: ``"write"`` and
    ``"paid"`` whenever keys are set, ``"private"`` unless ``files_and_query_logs_open`` with
    reads open, ``"read"`` when ``read_requires_api_key``. Always False without keys."""
    if not settings.api_keys:
        return False
    if level in ("write", "paid"):
        return True
    if level == "private":
        return settings.read_requires_api_key or not settings.files_and_query_logs_open
    if level == "read":
        return settings.read_requires_api_key
    raise ValueError(f"unknown access level {level!r}")


def _check(request: Request, level: str) -> None:
    settings: Settings = request.app.state.settings
    if key_required(settings, level) and not key_is_valid(presented_key(request), settings):
        raise HTTPException(
            401,
            "missing or invalid API key (send X-API-Key or Authorization: Bearer)",
            headers={"WWW-Authenticate": "Bearer"},
        )


def require_write_key(request: Request) -> None:
    """Raises 401 unless a valid API key is sent (only when ``RAGAUDIT_API_KEYS`` is set)."""
    _check(request, "write")


def require_paid_key(request: Request) -> None:
    """Raises 401 unless a valid API key is sent, when keys are set, whatever the read setting:
    the route can call a paid model."""
    _check(request, "paid")


def require_private_key(request: Request) -> None:
    """Raises 401 unless a valid key is sent, when keys are set and ``files_and_query_logs_open`` is
    false or reads are closed (stored PDFs, users' questions)."""
    _check(request, "private")


def require_read_key(request: Request) -> None:
    """Raises 401 unless a valid key is sent, when keys are set and ``read_requires_api_key`` is true."""
    _check(request, "read")


RequireWriteKey = Depends(require_write_key)
RequirePaidKey = Depends(require_paid_key)
RequirePrivateKey = Depends(require_private_key)
RequireReadKey = Depends(require_read_key)

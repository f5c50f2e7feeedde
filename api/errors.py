"""HTTP error details that keep the API true to its OpenAPI document, and OpenAI's error shape
under ``/v1/``.

``405 Method Not Allowed`` must list in ``Allow`` every method the path supports (RFC 9110
§15.5.6). Starlette answers from the first route whose path matches, so a path served by two
routes (``GET /evaluate`` and ``POST /evaluate``) named only one; this handler recomputes
``Allow`` from the OpenAPI document's operations on the path.

Every error of a path under ``/v1/`` (the OpenAI-compatible door, ``api.routes.openai_compat``)
is sent as OpenAI sends it, ``{"error": {"message", "type", "code", "param"}}``, so OpenAI
clients raise their usual exceptions: a missing key (401) has ``code: invalid_api_key``, a
request that fails validation is ``400 invalid_request_error`` (not FastAPI's 422 list).

A request that fails validation elsewhere gets FastAPI's 422 ``{"detail": [{type, loc, msg,
input, ctx?}]}``, with every ``input`` shortened (``short_input``): a 10 MB question refused as
too long is not sent back whole.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route, compile_path

from ragaudit.platform.telemetry import clip_text

_HTTP_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


def allowed_methods(app: FastAPI, path: str) -> list[str]:
    """Sorted methods the OpenAPI document gives for the path template(s) matching ``path``
    (the document is what clients and schemathesis check ``Allow`` against), plus those of
    routes left out of the document (``/mcp``, served by the MCP SDK)."""
    methods: set[str] = set()
    for template, ops in app.openapi().get("paths", {}).items():
        regex, _, _ = compile_path(template)
        if regex.match(path):
            methods |= {m.upper() for m in ops if m in _HTTP_METHODS}
    for route in app.router.routes:
        if isinstance(route, Route) and not route.include_in_schema and route.methods:
            if route.path_regex.match(path):
                methods |= set(route.methods) - {"HEAD"}
    return sorted(methods)


OPENAI_PREFIX = "/v1/"


def is_openai_path(path: str) -> bool:
    return path.startswith(OPENAI_PREFIX) or path == OPENAI_PREFIX.rstrip("/")


def openai_error(status: int, message: str, code: str | None = None, param: str | None = None) -> HTTPException:
    """An ``HTTPException`` whose body, under ``/v1/``, is OpenAI's error object with this
    message, code and param (type from the status: ``openai_error_type``)."""
    return HTTPException(status, {"message": message, "code": code, "param": param})


def openai_error_type(status: int) -> str:
    """OpenAI's ``error.type`` for an HTTP status: ``invalid_request_error`` for 4xx (401 and 404
    included, as OpenAI sends them), ``server_error`` for 5xx."""
    return "server_error" if status >= 500 else "invalid_request_error"


def openai_error_response(status: int, detail: Any, headers: dict[str, str] | None = None) -> JSONResponse:
    """``{"error": {"message", "type", "code", "param"}}`` for ``detail`` (a string or the dict
    ``openai_error`` makes)."""
    if isinstance(detail, dict) and "message" in detail:
        err = {"message": detail["message"], "code": detail.get("code"), "param": detail.get("param")}
    else:
        code = {401: "invalid_api_key", 404: "not_found", 405: "method_not_allowed"}.get(status)
        err = {"message": str(detail), "code": code, "param": None}
    err["type"] = openai_error_type(status)
    return JSONResponse({"error": err}, status_code=status, headers=headers)


def validation_message(errors: list[dict[str, Any]]) -> tuple[str, str | None]:
    """One readable line for a list of pydantic errors, and the first error's field path."""
    parts, param = [], None
    for e in errors:
        loc = ".".join(str(x) for x in e.get("loc", ()) if x != "body")
        param = param or loc or None
        parts.append(f"{loc}: {e.get('msg', 'invalid')}" if loc else str(e.get("msg", "invalid")))
    return "; ".join(parts) or "invalid request", param


#: at most this many characters of a string, and this many items of a list or object, of a
#: rejected request are echoed in a validation error's ``input``
INPUT_ECHO_CHARS = 200
INPUT_ECHO_ITEMS = 20


def short_input(value: Any, depth: int = 0) -> Any:
    """``value`` (a validation error's ``input``: any JSON value) with each string cut to
    ``INPUT_ECHO_CHARS`` characters and each list or object to ``INPUT_ECHO_ITEMS`` items, a marker
    saying how long it was (``clip_text``; ``"…"`` for the items left out); nested deeper than
    three levels, a value is replaced by ``"…"``."""
    if isinstance(value, str):
        return clip_text(value, INPUT_ECHO_CHARS)
    if isinstance(value, (bytes, bytearray)):
        return short_input(value.decode("utf-8", "replace"), depth)
    if isinstance(value, (list, tuple, dict)) and depth >= 3:
        return "…"
    if isinstance(value, (list, tuple)):
        out = [short_input(v, depth + 1) for v in value[:INPUT_ECHO_ITEMS]]
        if len(value) > INPUT_ECHO_ITEMS:
            out.append(f"… [cut: {len(value):,} items in all]")
        return out
    if isinstance(value, dict):
        items = list(value.items())
        out = {clip_text(str(k), INPUT_ECHO_CHARS): short_input(v, depth + 1) for k, v in items[:INPUT_ECHO_ITEMS]}
        if len(items) > INPUT_ECHO_ITEMS:
            out["…"] = f"cut: {len(items):,} fields in all"
        return out
    return value


def short_errors(errors: Any) -> list[dict[str, Any]]:
    """Pydantic/FastAPI validation errors with their ``input`` shortened (``short_input``) and the
    other fields as they are."""
    return [{**e, "input": short_input(e["input"])} if "input" in e else dict(e) for e in errors]


def install_error_handlers(app: FastAPI) -> None:
    """Register the 405 handler and the OpenAI error shape under ``/v1/`` on ``app`` (other HTTP
    errors keep FastAPI's handling)."""

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException):
        if exc.status_code == 405:
            methods = allowed_methods(app, request.url.path)
            if methods:
                exc = StarletteHTTPException(
                    405, exc.detail, headers={**(exc.headers or {}), "Allow": ", ".join(methods)}
                )
        if is_openai_path(request.url.path):
            return openai_error_response(exc.status_code, exc.detail, exc.headers)
        return await http_exception_handler(request, exc)

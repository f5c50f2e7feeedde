"""HTTP error details that keep the API true to its OpenAPI document.

``405 Method Not Allowed`` must list in ``Allow`` every method the path supports (RFC 9110
§15.5.6). Starlette answers from the first route whose path matches, so a path served by two
routes (``GET /evaluate`` and ``POST /evaluate``) named only one; this handler recomputes
``Allow`` from the OpenAPI document's operations on the path.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import compile_path

_HTTP_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


def allowed_methods(app: FastAPI, path: str) -> list[str]:
    """Sorted methods the OpenAPI document gives for the path template(s) matching ``path``
    (the document is what clients and schemathesis check ``Allow`` against)."""
    methods: set[str] = set()
    for template, ops in app.openapi().get("paths", {}).items():
        regex, _, _ = compile_path(template)
        if regex.match(path):
            methods |= {m.upper() for m in ops if m in _HTTP_METHODS}
    return sorted(methods)


def install_error_handlers(app: FastAPI) -> None:
    """Register the 405 handler on ``app`` (other HTTP errors keep FastAPI's handling)."""

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException):
        if exc.status_code == 405:
            methods = allowed_methods(app, request.url.path)
            if methods:
                exc = StarletteHTTPException(
                    405, exc.detail, headers={**(exc.headers or {}), "Allow": ", ".join(methods)}
                )
        return await http_exception_handler(request, exc)

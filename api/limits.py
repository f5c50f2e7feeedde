"""Request-size guards: an upload whose declared size exceeds the limit is refused with 413 before
any of its body is read or parsed (no multipart spooling, no PDF parsing).

Starlette parses a multipart body completely before the route runs, so the route's own size
check (which still guards chunked uploads without ``Content-Length``) comes after the whole file
was received; this ASGI middleware answers from the headers alone.

The JSON bodies of the query and evaluation routes have a limit of their own
(``JsonBodyLimit``, 1 MB): a body far larger than any valid request is refused with 413 before it
is parsed, validated or logged.
"""

from __future__ import annotations

import json
import logging
from typing import Any

#: allowance for the multipart envelope (boundaries, part headers, form fields) on top of the file
MULTIPART_OVERHEAD = 64 * 1024


async def send_too_large(send: Any, payload: dict[str, Any]) -> None:
    """Answer 413 with ``payload`` as JSON and close the connection (the body is not read)."""
    body = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class UploadSizeLimit:
    """ASGI middleware: ``POST`` to ``path`` with ``Content-Length`` above ``max_bytes`` +
    ``MULTIPART_OVERHEAD`` gets ``413 {"detail": ...}`` at once."""

    def __init__(self, app: Any, max_bytes: int, path: str = "/documents"):
        self.app = app
        self.max_bytes = max_bytes
        self.path = path

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"].rstrip("/") == self.path:
            length = dict(scope.get("headers") or []).get(b"content-length")
            if length is not None and length.isdigit() and int(length) > self.max_bytes + MULTIPART_OVERHEAD:
                mb = self.max_bytes / (1024 * 1024)
                await send_too_large(
                    send,
                    {"detail": f"file too large: limit is {mb:g} MB (RAGAUDIT_MAX_UPLOAD_MB)", "code": "too_large"},
                )
                return
        await self.app(scope, receive, send)


#: the largest JSON body ``POST /query``, ``/query/stream``, ``/search``, ``/evaluate`` and
#: ``/v1/chat/completions`` accept (a question is at most 4,000 characters; a conversation sent to
#: the chat door carries its earlier turns too)
JSON_BODY_MAX_BYTES = 1024 * 1024
JSON_BODY_PATHS = ("/query", "/query/stream", "/search", "/evaluate", "/v1/chat/completions")


class JsonBodyLimit:
    """ASGI middleware: a ``POST`` to one of ``paths`` whose body is larger than ``max_bytes`` gets
    ``413`` before anything parses it (under ``/v1/`` as OpenAI's error object). A declared
    ``Content-Length`` above the limit is refused from the headers; a body sent without one
    (chunked) is read up to the limit, then refused, or else handed on unchanged."""

    def __init__(
        self,
        app: Any,
        max_bytes: int = JSON_BODY_MAX_BYTES,
        paths: tuple[str, ...] = JSON_BODY_PATHS,
        on_refused: Any = None,
    ):
        self.app = app
        self.max_bytes = max_bytes
        self.paths = {p.rstrip("/") for p in paths}
        self.on_refused = on_refused  # called with (ASGI scope, path) for each body refused

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if not (scope["type"] == "http" and scope["method"] == "POST" and scope["path"].rstrip("/") in self.paths):
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and length.isdigit():
            if int(length) > self.max_bytes:
                await self._refuse(scope, send)
                return
            await self.app(scope, receive, send)
            return
        # no declared length: read the body (up to the limit) before the app does, then replay it
        messages, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left: let the app see it
                messages.append(message)
                break
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                await self._refuse(scope, send)
                return
            messages.append(message)
            if not message.get("more_body", False):
                break

        async def replay() -> dict:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: dict, send: Any) -> None:
        if self.on_refused is not None:
            try:
                self.on_refused(scope, scope["path"].rstrip("/"))
            except Exception:  # recording a refusal never changes the reply
                logging.getLogger(__name__).exception("recording a refused body failed")
        message = f"request body too large: the limit is {self.max_bytes // 1024:,} KB"
        if scope["path"].startswith("/v1/"):
            payload: dict[str, Any] = {
                "error": {"message": message, "type": "invalid_request_error", "code": "too_large", "param": None}
            }
        else:
            payload = {"detail": message, "code": "too_large"}
        await send_too_large(send, payload)

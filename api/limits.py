"""Request-size guard: an upload whose declared size exceeds the limit is refused with 413 before
any of its body is read or parsed (no multipart spooling, no PDF parsing).

Starlette parses a multipart body completely before the route runs, so the route's own size
check (which still guards chunked uploads without ``Content-Length``) comes after the whole file
was received; this ASGI middleware answers from the headers alone.
"""

from __future__ import annotations

import json
from typing import Any

#: allowance for the multipart envelope (boundaries, part headers, form fields) on top of the file
MULTIPART_OVERHEAD = 64 * 1024


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
                body = json.dumps(
                    {"detail": f"file too large: limit is {mb:g} MB (RAGAUDIT_MAX_UPLOAD_MB)", "code": "too_large"}
                ).encode()
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
                return
        await self.app(scope, receive, send)

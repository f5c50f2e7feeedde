"""A fake OpenAI-compatible chat server on 127.0.0.1 for fault tests of the LLM path.

The behaviour is chosen by the first path segment, so one server serves every fault and the
model name stays free (a priced name such as ``gpt-4o-mini`` or an unpriced one)::

    api_base = f"{server.url}/ok/v1"         # answers at once (JSON or SSE)
    api_base = f"{server.url}/slow/v1"       # streams one token every ``token_interval`` s, for ~60 s
    api_base = f"{server.url}/stall/v1"      # accepts the request, then sends nothing for 60 s
    api_base = f"{server.url}/late/v1"       # answers a stream only after ``late_s`` s, then as ``slow``
    api_base = f"{server.url}/error500/v1"   # HTTP 500 with an OpenAI-style error body
    api_base = f"{server.url}/malformed/v1"  # HTTP 200 whose body is not JSON
    api_base = f"{server.url}/trickle/v1"    # a valid JSON body sent one byte every ``token_interval`` s
    api_base = f"{server.url}/obey/v1"       # a model that obeys instructions found in its sources
    api_base = f"{server.url}/empty/v1"      # a reply with no text: finish_reason "length", usage given

``obey`` answers like a model that follows text inside its sources (indirect prompt injection):
when the prompt holds "reply only with: X" it answers "X [n]" citing the source that holds it,
else it answers with the source sentence sharing most words with the question, cited.
``server.bodies[behaviour]`` keeps the request bodies (the prompts sent).
``server.requests[behaviour]`` counts requests received; ``server.closed_at[behaviour]`` holds
the ``time.monotonic()`` at which each streamed/stalled response was torn down (the client went
away or the body ended), so a test can tell how soon the upstream request was closed.
Start with ``FakeLLM().start()``; ``stop()`` shuts uvicorn down and joins its thread.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import time
from collections import defaultdict

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

ANSWER = "The Act was signed into law on October 28, 1998 [1]."

# the numbered sources of a prompt: "<source n="1" ...>text</source>", or "[1] doc, page p:\ntext"
_SOURCE = re.compile(
    r'<source n="(\d+)"[^>]*>\n(.*?)\n</source>|^\[(\d+)\] [^\n]*:\n(.*?)(?=\n\n\[\d+\] |\n\nQuestion:|\Z)', re.S | re.M
)
_OBEYED = re.compile(r"reply only with:?\s*(.+?)\s*(?:;|\n|$)", re.I)


def obedient_answer(messages: list[dict]) -> str:
    """What a model that obeys instructions found anywhere in its sources answers (see module doc)."""
    prompt = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "user")
    sources = [
        (int(m.group(1) or m.group(3)), m.group(2) if m.group(1) else m.group(4)) for m in _SOURCE.finditer(prompt)
    ]
    for n, text in sources:
        hit = _OBEYED.search(text)
        if hit:
            said = hit.group(1).rstrip(".")
            return f"{said[:1].upper()}{said[1:]} [{n}]."
    question = prompt.rsplit("Question:", 1)[-1]
    words = set(re.findall(r"\w+", question.lower()))
    best = max(
        (
            (len(words & set(re.findall(r"\w+", s.lower()))), n, s.strip())
            for n, t in sources
            for s in re.split(r"(?<=[.!?])\s+", t)
        ),
        default=(0, 1, "No sources."),
    )
    return f"{best[2].rstrip('.')} [{best[1]}]."


def _completion(model: str, text: str) -> dict:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 12, "total_tokens": 112},
    }


def _chunk(model: str, delta: dict, finish: str | None = None, usage: dict | None = None) -> str:
    body = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}] if usage is None else [],
    }
    if usage is not None:
        body["usage"] = usage
    return f"data: {json.dumps(body)}\n\n"


class FakeLLM:
    """See the module docstring. ``token_interval`` (s) paces the ``slow`` stream."""

    def __init__(self, token_interval: float = 0.2, stall_s: float = 60.0, late_s: float = 3.0):
        self.token_interval = token_interval
        self.stall_s = stall_s
        self.late_s = late_s
        self.requests: dict[str, int] = defaultdict(int)
        self.bodies: dict[str, list[dict]] = defaultdict(list)
        self.closed_at: dict[str, list[float]] = defaultdict(list)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def base(self, behaviour: str) -> str:
        """The ``api_base`` for one behaviour (ok, slow, stall, error500, malformed)."""
        return f"{self.url}/{behaviour}/v1"

    async def _chat(self, request: Request) -> Response:
        kind = request.path_params["kind"]
        body = await request.json()
        self.requests[kind] += 1
        self.bodies[kind].append(body)
        model, stream = body.get("model", "fake"), bool(body.get("stream"))
        answer = obedient_answer(body.get("messages", [])) if kind == "obey" else ANSWER
        if kind == "error500":
            return JSONResponse({"error": {"message": "upstream exploded", "type": "server_error"}}, 500)
        if kind == "malformed":
            return Response("this is not json {", media_type="application/json")
        if kind == "stall" and not stream:
            try:
                await asyncio.sleep(self.stall_s)
            except asyncio.CancelledError:  # the client went away or the server stops
                return Response(status_code=499)
            finally:
                self.closed_at[kind].append(time.monotonic())
            return JSONResponse(_completion(model, ANSWER))
        if kind == "trickle" and not stream:  # a valid body, one byte every token_interval s: no read ever times out
            payload = json.dumps(_completion(model, ANSWER)).encode()

            async def trickle():
                try:
                    for i in range(len(payload)):
                        yield payload[i : i + 1]
                        await asyncio.sleep(self.token_interval)
                finally:
                    self.closed_at[kind].append(time.monotonic())

            return StreamingResponse(trickle(), media_type="application/json")
        if kind == "empty":  # the output limit spent before any text (a reasoning model's usual way)
            usage = {"prompt_tokens": 100, "completion_tokens": 64, "total_tokens": 164}
            if not stream:
                out = _completion(model, "")
                out["choices"][0]["finish_reason"] = "length"
                return JSONResponse({**out, "usage": usage})
            events = [_chunk(model, {"role": "assistant", "content": ""}), _chunk(model, {}, "length")]
            events += [_chunk(model, {}, usage=usage), "data: [DONE]\n\n"]
            return Response("".join(events), media_type="text/event-stream")
        if not stream:
            return JSONResponse(_completion(model, answer))
        if kind == "late":  # no response headers for late_s: the provider has not started replying
            await asyncio.sleep(self.late_s)

        async def events():
            try:
                yield _chunk(model, {"role": "assistant", "content": ""})
                if kind == "stall":
                    await asyncio.sleep(self.stall_s)
                words = answer.split(" ")
                n = len(words) if kind in ("ok", "obey") else int(60 / self.token_interval)
                for i in range(n):
                    yield _chunk(model, {"content": words[i % len(words)] + " "})
                    if kind in ("slow", "late"):
                        await asyncio.sleep(self.token_interval)
                yield _chunk(model, {}, "stop")
                yield _chunk(model, {}, usage={"prompt_tokens": 100, "completion_tokens": n, "total_tokens": 100 + n})
                yield "data: [DONE]\n\n"
            finally:
                self.closed_at[kind].append(time.monotonic())

        return StreamingResponse(events(), media_type="text/event-stream")

    def start(self) -> "FakeLLM":
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        app = Starlette(routes=[Route("/{kind}/v1/chat/completions", self._chat, methods=["POST"])])
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("fake LLM server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
            self._server.force_exit = True
        if self._thread is not None:
            self._thread.join(10)
        self._server = self._thread = None

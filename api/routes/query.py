"""Question answering and retrieval-only search."""

from __future__ import annotations

import json
import threading
import time

from fastapi import APIRouter, HTTPException
from fastapi.concurrency import iterate_in_threadpool, run_in_threadpool
from sse_starlette.sse import EventSourceResponse
from starlette.background import BackgroundTask

from ragaudit.platform.llmcall import Cancellation, generation_failed

from ..deps import QueryServiceDep, RequirePaidKey, RequireReadKey
from ..schemas import AnswerOut, ErrorOut, QueryIn, SearchOut

router = APIRouter(tags=["query"], dependencies=[RequireReadKey])


def answer_stream(content, cancel: Cancellation, stop_unfinished) -> EventSourceResponse:
    """The SSE response of a streamed answer: ``stop_unfinished`` runs as its background task, and
    a client's disconnect fires ``cancel`` at once (sse-starlette's close handler). The stream's
    own cancellation cannot stop sooner: it waits for the worker thread inside ``next()``, which
    may be blocked until the LLM starts replying."""

    async def client_left(_message) -> None:
        cancel.cancel()

    return EventSourceResponse(
        content, background=BackgroundTask(stop_unfinished), client_close_handler_callable=client_left
    )


def close_generator_soon(gen, within_s: float = 30.0) -> None:
    """Close a sync generator from a daemon thread. A worker thread may still be inside its
    ``next()`` (then ``close()`` raises ``ValueError``); retry until that step returns, so the
    generator's own cleanup (its query_logs row) always runs."""

    def run() -> None:
        deadline = time.monotonic() + within_s
        while True:
            try:
                gen.close()
                return
            except ValueError:  # "generator already executing"
                if time.monotonic() > deadline:
                    return
                time.sleep(0.02)

    threading.Thread(target=run, name="ragaudit-stream-close", daemon=True).start()


@router.post(
    "/query",
    response_model=AnswerOut,
    dependencies=[RequirePaidKey],
    responses={400: {"model": ErrorOut}, 401: {"model": ErrorOut}, 502: {"model": ErrorOut}},
)
async def query(body: QueryIn, qs: QueryServiceDep) -> dict:
    """Answer a question from the knowledge base with numbered citations ``[n]``.

    Retrieval: dense and BM25 top-N under the same scope filter, fused with RRF (k=60);
    each retrieved chunk shows its rank in each list. Timings in ms, cost in USD.
    """
    try:
        return await run_in_threadpool(qs.ask, body.question, body.to_scope(), body.top_k, body.mode)
    except ValueError as e:
        raise HTTPException(400, str(e)) from None
    except Exception as e:  # LLM/API failure: its kind and why, never the provider message (it can echo request data)
        # (timeouts included: RAGAUDIT_LLM_TIMEOUT_S x (1 + RAGAUDIT_LLM_RETRIES) bounds the wait)
        raise HTTPException(502, generation_failed(e)) from None


@router.post("/search", response_model=SearchOut, responses={400: {"model": ErrorOut}})
async def search(body: QueryIn, qs: QueryServiceDep) -> dict:
    """Retrieval only (no answer): the fused top_k chunks with per-retriever ranks and scores.

    Logged (one query_logs row, endpoint "search") and cached like /query."""
    try:
        return await run_in_threadpool(qs.search_logged, body.question, body.to_scope(), body.top_k, body.mode)
    except ValueError as e:
        raise HTTPException(400, str(e)) from None


@router.post(
    "/query/stream",
    dependencies=[RequirePaidKey],
    responses={
        401: {"model": ErrorOut},
        200: {"content": {"text/event-stream": {}}, "description": "Server-Sent Events: sources, token*, done"},
        400: {"model": ErrorOut},
    },
)
async def query_stream(body: QueryIn, qs: QueryServiceDep) -> EventSourceResponse:
    """Stream an answer as Server-Sent Events (sse-starlette).

    Events: ``sources`` first (the numbered chunks with their per-retriever ranks), then
    ``token`` events (``{"text": delta}``), then ``done`` (label, citations, citation check,
    timings in ms incl. ``ttft`` = time to first token, usage). A failure during generation
    is sent as an ``error`` event. A client that leaves before ``done`` (even before the first
    byte) still gets its query_logs row, ``error_kind`` ``ClientDisconnected``, with the tokens
    and cost of what the model had produced by then.
    """
    cancel = Cancellation()
    try:
        events = await run_in_threadpool(
            lambda: qs.stream(body.question, body.to_scope(), body.top_k, body.mode, cancel=cancel)
        )
        first = await run_in_threadpool(next, events)  # retrieval errors surface as HTTP 400 here
    except ValueError as e:
        raise HTTPException(400, str(e)) from None

    state = {"finished": False, "closed": False}

    def stop_unfinished() -> None:
        """The client went away before ``done``: stop upstream and close ``events``, whose cleanup
        writes the row (``ClientDisconnected``). Runs once, from ``gen``'s ``finally`` or, when
        the client left before the first byte and ``gen`` never started, as the response's
        background task (sse-starlette runs it however the stream ended)."""
        if state["finished"] or state["closed"]:
            return
        state["closed"] = True
        cancel.cancel()
        close_generator_soon(events)

    async def gen():
        try:
            yield {"event": first[0], "data": json.dumps(first[1], ensure_ascii=False)}
            async for name, data in iterate_in_threadpool(events):
                yield {"event": name, "data": json.dumps(data, ensure_ascii=False)}
            state["finished"] = True
        finally:
            stop_unfinished()

    return answer_stream(gen(), cancel, stop_unfinished)

"""Question answering and retrieval-only search."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException
from fastapi.concurrency import run_in_threadpool

from ..deps import QueryServiceDep
from ..schemas import AnswerOut, ErrorOut, QueryIn, SearchOut

router = APIRouter(tags=["query"])


@router.post("/query", response_model=AnswerOut, responses={400: {"model": ErrorOut}, 502: {"model": ErrorOut}})
async def query(body: QueryIn, qs: QueryServiceDep) -> dict:
    """Answer a question from the knowledge base with numbered citations ``[n]``.

    Retrieval: dense and BM25 top-N under the same scope filter, fused with RRF (k=60);
    each retrieved chunk shows its rank in each list. Timings in ms, cost in USD.
    """
    try:
        return await run_in_threadpool(qs.ask, body.question, body.to_scope(), body.top_k, body.mode)
    except ValueError as e:
        raise HTTPException(400, str(e)) from None


@router.post("/search", response_model=SearchOut, responses={400: {"model": ErrorOut}})
async def search(body: QueryIn, qs: QueryServiceDep) -> dict:
    """Retrieval only (no answer): the fused top_k chunks with per-retriever ranks and scores."""
    try:
        res = await run_in_threadpool(qs.search, body.question, body.to_scope(), body.top_k, body.mode)
    except ValueError as e:
        raise HTTPException(400, str(e)) from None
    return {"question": body.question, "mode": res.mode.value, "retrieved": [c.to_json() for c in res.chunks],
            "timings_ms": {k: round(v, 2) for k, v in res.timings_ms.items()}}

"""Question answering: retrieve, answer with citations, log one telemetry row.

``QueryService.ask`` returns the answer JSON of the API and ``ragaudit ask --json``:
``{query_id, answer, label, citations[], retrieved[], timings_ms{}, usage{}, citation_check{}}``
with timings in ms and cost in USD.
"""

from __future__ import annotations

import hashlib
import logging
import time
from typing import Any

from .answer import AnswerResult, ExtractiveAnswerer, LLMAnswerer
from .db import QueryLog, new_id
from .retrieval import Mode, Retriever
from .services import Services
from .store import Scope

log = logging.getLogger(__name__)


def build_answerer(svc: Services) -> ExtractiveAnswerer | LLMAnswerer:
    """The LLM answerer when ``llm_model`` is set, else the offline extractive one."""
    s = svc.settings
    if s.llm_model:
        return LLMAnswerer(
            s.llm_model,
            api_base=s.llm_api_base or None,
            api_key=s.llm_api_key.get_secret_value() if s.llm_api_key else None,
            temperature=s.llm_temperature,
            max_tokens=s.llm_max_tokens,
            timeout=s.llm_timeout_s,
        )
    return ExtractiveAnswerer(svc.embedder)


class QueryService:
    """Answers questions over the knowledge base of ``svc``."""

    def __init__(self, svc: Services, answerer: Any = None, reranker: Any = None):
        self.svc = svc
        s = svc.settings
        self.retriever = Retriever(svc.store, svc.embedder, rrf_k=s.rrf_k, candidates=s.candidates, reranker=reranker)
        self.answerer = answerer or build_answerer(svc)

    def search(self, question: str, scope: Scope | None = None, top_k: int | None = None,
               mode: Mode | str = Mode.hybrid):
        """Retrieval only. See ``Retriever.retrieve``."""
        return self.retriever.retrieve(question, scope, top_k or self.svc.settings.top_k, mode)

    def ask(self, question: str, scope: Scope | None = None, top_k: int | None = None,
            mode: Mode | str = Mode.hybrid, log_query: bool = True) -> dict[str, Any]:
        """Answer ``question`` from the top-``top_k`` chunks within ``scope``.

        Raises ``ValueError`` for an empty question or an unknown mode; API errors of the LLM
        propagate (and are logged with their error kind).
        """
        t0 = time.perf_counter()
        top_k = top_k or self.svc.settings.top_k
        mode = Mode.parse(mode)
        scope = scope or Scope()
        qid = new_id()
        try:
            res = self.retriever.retrieve(question, scope, top_k, mode)
            t = time.perf_counter()
            ans: AnswerResult = self.answerer.answer(question, res.chunks)
            gen_ms = (time.perf_counter() - t) * 1000
        except Exception as e:
            if log_query:
                self._log(qid, question, scope, mode, top_k, None, None, (time.perf_counter() - t0) * 1000,
                          error_kind=type(e).__name__)
            raise
        total = (time.perf_counter() - t0) * 1000
        timings = {k: round(v, 2) for k, v in res.timings_ms.items()}
        timings.update(generation=round(gen_ms, 2), total=round(total, 2))
        out = {
            "query_id": qid,
            "question": question,
            "answer": ans.answer,
            "label": ans.label,
            "citations": [c.to_json() for c in ans.citations],
            "citation_check": ans.citation_check,
            "retrieved": [c.to_json() for c in res.chunks],
            "mode": mode.value,
            "scope": scope.as_dict(),
            "timings_ms": timings,
            "usage": {"model": ans.model, "prompt_tokens": ans.prompt_tokens,
                      "completion_tokens": ans.completion_tokens, "cost_usd": ans.cost_usd},
        }
        if log_query:
            self._log(qid, question, scope, mode, top_k, out, ans, total)
        return out

    def _log(self, qid: str, question: str, scope: Scope, mode: Mode, top_k: int, out: dict | None,
             ans: AnswerResult | None, total_ms: float, error_kind: str | None = None) -> None:
        t = (out or {}).get("timings_ms", {})
        row = QueryLog(
            id=qid, endpoint="query", question=question,
            question_hash=hashlib.sha256(question.encode()).hexdigest(), scope=scope.as_dict(), mode=mode.value,
            top_k=top_k, strategy=scope.strategy, model=ans.model if ans else None, label=ans.label if ans else None,
            embed_ms=t.get("embed"), vector_ms=t.get("vector"), bm25_ms=t.get("bm25"), fusion_ms=t.get("fusion"),
            rerank_ms=t.get("rerank"), generation_ms=t.get("generation"), total_ms=total_ms,
            prompt_tokens=ans.prompt_tokens if ans else 0, completion_tokens=ans.completion_tokens if ans else 0,
            cost_usd=ans.cost_usd if ans else 0.0,
            retrieved_ids=[r["chunk_id"] for r in out["retrieved"]] if out else None,
            cited_ids=[c["chunk_id"] for c in out["citations"]] if out else None, error_kind=error_kind,
        )
        try:
            with self.svc.sessions.begin() as s:
                s.add(row)
        except Exception as e:  # telemetry must never fail a query
            log.warning("query log row dropped: %s", type(e).__name__)

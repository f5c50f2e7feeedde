"""Question answering: retrieve, answer with citations, log one telemetry row.

``QueryService.ask`` returns the answer JSON of the API and ``ragaudit ask --json``:
``{query_id, answer, label, citations[], retrieved[], timings_ms{}, usage{}, citation_check{}}``
with timings in ms and cost in USD.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from .answer import AnswerResult, ExtractiveAnswerer, LLMAnswerer
from .cache import AnswerCache
from .db import new_id
from .retrieval import Mode, Retriever
from .services import Services
from .store import Scope
from .telemetry import TelemetryWriter

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

    def __init__(self, svc: Services, answerer: Any = None, reranker: Any = None,
                 telemetry: TelemetryWriter | None = None, cache: AnswerCache | None = None):
        """``telemetry``: where query_logs rows go (default: written synchronously on ``svc``'s database);
        ``cache``: optional answer/retrieval cache (``None`` = no caching)."""
        self.svc = svc
        s = svc.settings
        self.retriever = Retriever(svc.store, svc.embedder, rrf_k=s.rrf_k, candidates=s.candidates, reranker=reranker)
        self.answerer = answerer or build_answerer(svc)
        self.telemetry = telemetry or TelemetryWriter.from_services(svc, background=False)
        self.cache = cache

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
        ckey = self._cache_key("answer", question, scope, mode, top_k, self._model_name()) if log_query else None
        hit = self.cache.get(ckey) if ckey else None
        if hit is not None:
            return self._serve_cached(hit, qid, question, scope, mode, top_k, t0)
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
            out["cache"] = {"hit": False}
            if ckey:
                self.cache.put(ckey, out)
        return out

    def _log(self, qid: str, question: str, scope: Scope, mode: Mode, top_k: int, out: dict | None,
             ans: AnswerResult | None, total_ms: float, error_kind: str | None = None) -> None:
        t = dict((out or {}).get("timings_ms", {}))
        t["total"] = total_ms
        self.telemetry.record(
            query_id=qid, endpoint="query", question=question, scope=scope.as_dict(), mode=mode.value,
            top_k=top_k, strategy=scope.strategy, model=ans.model if ans else self._model_name(),
            label=ans.label if ans else None, timings_ms=t,
            prompt_tokens=ans.prompt_tokens if ans else 0, completion_tokens=ans.completion_tokens if ans else 0,
            cost_usd=ans.cost_usd if ans else 0.0,
            retrieved_ids=[r["chunk_id"] for r in out["retrieved"]] if out else None,
            cited_ids=[c["chunk_id"] for c in out["citations"]] if out else None, error_kind=error_kind)

    # --- answer/retrieval cache and /search telemetry (telemetry branch) ---
    def _model_name(self) -> str:
        return getattr(self.answerer, "name", None) or getattr(self.answerer, "model", None) or "unknown"

    def _cache_key(self, kind: str, question: str, scope: Scope, mode: Mode, top_k: int, model: str):
        return self.cache.key(kind, question, scope.as_dict(), mode.value, top_k, scope.strategy, model) \
            if self.cache is not None else None

    def _serve_cached(self, hit: dict, qid: str, question: str, scope: Scope, mode: Mode, top_k: int,
                      t0: float) -> dict[str, Any]:
        """A cached answer as a new request: new query_id, cost 0, original id/cost under ``cache``."""
        orig_id, usage = hit["query_id"], hit["usage"]
        total = (time.perf_counter() - t0) * 1000
        hit.update(query_id=qid, question=question, timings_ms={"total": round(total, 2)},
                   cache={"hit": True, "original_query_id": orig_id, "original_cost_usd": usage["cost_usd"],
                          "original_timings_ms": hit["timings_ms"]},
                   usage={**usage, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0})
        self.telemetry.record(
            query_id=qid, endpoint="query", question=question, scope=scope.as_dict(), mode=mode.value, top_k=top_k,
            strategy=scope.strategy, model=usage["model"], label=hit["label"], cache_hit=True,
            cache_source_id=orig_id, timings_ms={"total": total},
            retrieved_ids=[r["chunk_id"] for r in hit["retrieved"]], cited_ids=[c["chunk_id"] for c in hit["citations"]])
        return hit

    def search_logged(self, question: str, scope: Scope | None = None, top_k: int | None = None,
                      mode: Mode | str = Mode.hybrid) -> dict[str, Any]:
        """Retrieval for the /search endpoint, cached and logged (one query_logs row, endpoint "search").

        Returns ``{query_id, question, mode, retrieved[], timings_ms{}, cache{hit, original_query_id?}}``
        (ms). The model named in the row is the embedding model (local: cost 0). Raises ``ValueError``
        like ``Retriever.retrieve`` (the failure is logged with its error kind first).
        """
        t0 = time.perf_counter()
        top_k = top_k or self.svc.settings.top_k
        scope = scope or Scope()
        qid = new_id()
        model = self.svc.settings.embedding_model
        row = dict(query_id=qid, endpoint="search", question=question, scope=scope.as_dict(), top_k=top_k,
                   strategy=scope.strategy, model=model)
        try:
            mode = Mode.parse(mode)
            ckey = self._cache_key("search", question, scope, mode, top_k, model)
            hit = self.cache.get(ckey) if ckey else None
            if hit is None:
                res = self.retriever.retrieve(question, scope, top_k, mode)
        except Exception as e:
            self.telemetry.record(**row, mode=str(getattr(mode, "value", mode))[:16],
                                  timings_ms={"total": (time.perf_counter() - t0) * 1000}, error_kind=type(e).__name__)
            raise
        total = (time.perf_counter() - t0) * 1000
        if hit is not None:
            orig = hit["query_id"]
            hit.update(query_id=qid, question=question, timings_ms={"total": round(total, 2)},
                       cache={"hit": True, "original_query_id": orig, "original_cost_usd": 0.0,
                              "original_timings_ms": hit["timings_ms"]})
            self.telemetry.record(**row, mode=mode.value, cache_hit=True, cache_source_id=orig,
                                  timings_ms={"total": total}, retrieved_ids=[r["chunk_id"] for r in hit["retrieved"]])
            return hit
        timings = {k: round(v, 2) for k, v in res.timings_ms.items()}
        timings["total"] = round(total, 2)
        out = {"query_id": qid, "question": question, "mode": res.mode.value,
               "retrieved": [c.to_json() for c in res.chunks], "timings_ms": timings, "cache": {"hit": False}}
        self.telemetry.record(**row, mode=mode.value, timings_ms={**res.timings_ms, "total": total},
                              retrieved_ids=[c.chunk_id for c in res.chunks])
        if ckey:
            self.cache.put(ckey, out)
        return out

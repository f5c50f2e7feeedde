"""Views of an evaluation run for the dashboard: ``GET /evaluate/{run_id}/intervals``.

The results JSON (``ragaudit.evaluate.evaluation``) has each mode's mean metrics and CIs for *differences*
between modes; the dashboard also charts each mode's metric with its own 95% interval. This
computes them from the run's per-question values: a percentile bootstrap of the mean
(``scipy.stats.bootstrap``, Efron & Tibshirani 1993, ch. 13) with a fixed seed, so the same run
always shows the same interval.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from fastapi import APIRouter, HTTPException
from fastapi.concurrency import run_in_threadpool

from ragaudit.evaluate import runs as evalruns

from ..deps import RequireReadKey, ServicesDep
from ..schemas import ErrorOut

router = APIRouter(tags=["evaluation"], dependencies=[RequireReadKey])

RETRIEVAL = ("hit@1", "hit@5", "hit@10", "mrr", "ndcg@10", "evidence_recall@5", "evidence_recall@10")
ANSWER = (
    "exact_match",
    "f1",
    "concise_coverage",
    "concise_precision",
    "exact_match_gold_guided",
    "f1_gold_guided",
    "refusal_accuracy",
    "citation_validity",
    "answered_cited",
    "faithfulness",
    "context_relevance",
    "answer_relevance",
)


def mean_ci(values: list[float], resamples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """``{"mean", "ci95": [lo, hi] | None, "n"}`` of ``values``: percentile bootstrap of the mean
    (seeded). ``ci95`` is None for fewer than 2 values; constant values give a point interval."""
    from scipy.stats import bootstrap  # deferred: scipy.stats (seconds to import), only for bootstrap intervals

    x = np.asarray(values, dtype=float)
    out: dict[str, Any] = {"mean": round(float(x.mean()), 6) if len(x) else None, "ci95": None, "n": int(len(x))}
    if len(x) < 2:
        return out
    if np.all(x == x[0]):
        out["ci95"] = [round(float(x[0]), 6)] * 2
        return out
    res = bootstrap(
        (x,),
        np.mean,
        vectorized=True,
        n_resamples=resamples,
        confidence_level=0.95,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    out["ci95"] = [round(float(res.confidence_interval.low), 6), round(float(res.confidence_interval.high), 6)]
    return out


def _value(v: Any) -> float | None:
    if isinstance(v, dict):
        v = v.get("value")
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if np.isnan(f) else f


def run_intervals(results: dict[str, Any]) -> dict[str, Any]:
    """Per mode, per metric: mean and 95% bootstrap interval over the run's questions.
    Returns ``{"method", "retrieval": {mode: {metric: {mean, ci95, n}}}, "answers": {...}}``."""
    out: dict[str, Any] = {
        "method": "percentile bootstrap of the mean, 2000 resamples, seed 0",
        "retrieval": {},
        "answers": {},
    }
    questions = results.get("questions") or []
    for mode in results.get("modes") or {}:
        out["retrieval"][mode] = {}
        for k in RETRIEVAL:
            vals = [_value(((q.get("retrieval") or {}).get(mode) or {}).get("metrics", {}).get(k)) for q in questions]
            vals = [v for v in vals if v is not None]
            if vals:
                out["retrieval"][mode][k] = mean_ci(vals)
    for mode in results.get("answers") or {}:
        out["answers"][mode] = {}
        for k in ANSWER:
            vals = [_value(((q.get("answers") or {}).get(mode) or {}).get("metrics", {}).get(k)) for q in questions]
            vals = [v for v in vals if v is not None]
            if vals:
                out["answers"][mode][k] = mean_ci(vals)
    return out


@router.get("/evaluate/{run_id}/intervals", responses={404: {"model": ErrorOut}, 409: {"model": ErrorOut}})
async def evaluation_intervals(run_id: str, svc: ServicesDep) -> dict:
    """Each mode's metrics with 95% intervals (percentile bootstrap over the run's questions).
    404 for an unknown run, 409 while it has no results yet."""
    try:
        run = await run_in_threadpool(evalruns.get_run, svc, run_id)
    except KeyError as e:
        raise HTTPException(404, e.args[0]) from None
    if not run.get("results"):
        raise HTTPException(409, f"run {run_id} has no results yet (status {run['status']})")
    return await run_in_threadpool(run_intervals, run["results"])

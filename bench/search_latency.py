"""Retrieval latency through the API at the size of a small knowledge base, per stage.

    .venv/bin/python -m bench.search_latency --data-dir DIR [--pdfs FOLDER ...] [--rounds 3]
        [--save OUT.json]

The PDFs (default: the shared dev corpus) are ingested into ``DIR`` once (reused after that).
The API then runs under uvicorn on that folder, with the answer/retrieval cache off
(``RAGAUDIT_CACHE_TTL_S=0``), and every dev question is sent to ``POST /search`` ``--rounds``
times per mode, the modes interleaved question by question so that load changes hit all alike.
Reported per mode: the client-side P50/P95 of ``/search`` (HTTP included) and the P50/P95 of each
stage the API reports in ``timings_ms`` (embed, vector, bm25, document = the named-document leg,
fusion, neighbors); the baseline measured in the same run is the dense leg alone (mode
``vector``), so ``hybrid / vector (P95)`` is the price of fusion and the retrieval rules. The
target: hybrid ``/search`` P95 within 50 ms at this size on a quiet machine (the load average is
recorded; compare ratios on a loaded one).

Percentiles: numpy 'linear' (Hyndman & Fan type 7).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from collections import defaultdict
from pathlib import Path

import httpx

from . import _env  # noqa: F401  (run as python -m bench.search_latency)
from .__main__ import pct, start_api, stop_api
from .answer_quality import SHARED
from .quality_sets import ensure_index

MODES = ("hybrid", "vector", "bm25")
TARGET_P95_MS = 50.0


def measure(base: str, questions: list[str], rounds: int) -> dict:
    """``{mode: {"search_ms": P50/P95, "stages": {stage: P50/P95}, "n"}}`` over every question x
    round, modes interleaved. Raises httpx.HTTPStatusError on a non-2xx answer."""
    client_ms: dict[str, list[float]] = defaultdict(list)
    stage_ms: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    with httpx.Client(timeout=60) as c:
        for q in questions[:3]:  # warm up: model, store, BM25 statistics
            c.post(f"{base}/search", json={"question": q}).raise_for_status()
        for _ in range(rounds):
            for q in questions:
                for mode in MODES:
                    t = time.perf_counter()
                    r = c.post(f"{base}/search", json={"question": q, "mode": mode})
                    client_ms[mode].append((time.perf_counter() - t) * 1000)
                    r.raise_for_status()
                    for stage, ms in r.json().get("timings_ms", {}).items():
                        stage_ms[mode][stage].append(float(ms))
    return {
        m: {
            "n": len(client_ms[m]),
            "search_ms": pct(client_ms[m]),
            "stages": {s: pct(v) for s, v in sorted(stage_ms[m].items()) if any(v)},
        }
        for m in MODES
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, required=True, help="index folder (created once, then reused)")
    ap.add_argument("--pdfs", type=Path, action="append", help="PDF folder(s); default the shared dev corpus")
    ap.add_argument("--questions", type=Path, default=SHARED / "dev_questions.jsonl")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--save", type=Path)
    args = ap.parse_args(argv)
    logging.disable(logging.WARNING)
    from ragaudit.platform.settings import Settings
    from ragaudit.services import get_services, release_services

    folders = args.pdfs or [SHARED / "pdfs"]
    settings = Settings(_env_file=None, data_dir=args.data_dir, database_url="", qdrant_url="", llm_model="")
    svc = get_services(settings)
    try:
        ensure_index(svc, folders)
        chunks = svc.store.count()
    finally:  # the API below opens the same embedded store
        release_services(settings)
    questions = [json.loads(line)["question"] for line in args.questions.read_text().splitlines() if line.strip()]
    proc, base, _ = start_api(args.data_dir)
    try:
        res = measure(base, questions, args.rounds)
    finally:
        stop_api(proc)
    load = os.getloadavg()[0]
    out = {"chunks": chunks, "questions": len(questions), "rounds": args.rounds, "load_average_1m": load, **res}
    h, v = res["hybrid"]["search_ms"]["p95"], res["vector"]["search_ms"]["p95"]
    out["hybrid / vector (P95)"] = round(h / v, 2) if h and v else None
    out["target"] = {"hybrid /search P95 <= 50 ms": None if h is None else h <= TARGET_P95_MS}
    print(f"/search through the API at {chunks} chunks, {len(questions)} questions x {args.rounds} rounds")
    print(f"load average (1 min) at the end: {load:.2f}")
    print("| mode | /search P50 / P95 ms | " + " | ".join(f"{s} P95" for s in res["hybrid"]["stages"]) + " |")
    print("|" + "---|" * (2 + len(res["hybrid"]["stages"])))
    for m in MODES:
        cells = [str(res[m]["stages"].get(s, {}).get("p95", "—")) for s in res["hybrid"]["stages"]]
        print(f"| {m} | {res[m]['search_ms']['p50']} / {res[m]['search_ms']['p95']} | " + " | ".join(cells) + " |")
    print(f"hybrid / vector (P95): {out['hybrid / vector (P95)']}; target met: {out['target']}")
    if args.save:
        args.save.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

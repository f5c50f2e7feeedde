"""Retrieval quality table: chunking strategies x retrieval modes on a gold question set.

One command (ingests the PDFs with every strategy into a throw-away data folder, then scores
hit@1/5/10 and MRR per mode; ``scoped`` questions are asked of their own document, ``refuse``
questions are skipped):

    .venv/bin/python bench/retrieval_quality.py [--pdfs ../shared/corpus/pdfs]
        [--dataset ../shared/corpus/dev_questions.jsonl] [--strategies sentence,heading,fixed,semantic]
        [--modes vector,bm25,hybrid] [--fusions rrf,rrf_fill,dbsf] [--save FILE] [--json]

``--fusions`` scores hybrid retrieval once per fusion method on the same index; ``--save``
writes per-question metrics ({variant: {"modes", "questions": {id: {mode: metrics}}}}, variant
``default`` = the settings' fusion, others ``<strategy>:<fusion>``) for ``bench/split_compare.py``,
which compares two such files (e.g. two checkouts) on each half of the dev set with CIs.

Prints a markdown table; the ``ratio`` column is hybrid hit@5 over the best single retriever
measured in the same run (the baseline).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

if __package__:  # python -m bench.NAME: offline defaults, repository on sys.path (bench/_env.py)
    from . import _env
else:  # python bench/NAME.py
    import _env
SHARED = _env.SHARED


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pdfs", type=Path, default=SHARED / "pdfs")
    ap.add_argument("--dataset", type=Path, default=SHARED / "dev_questions.jsonl")
    ap.add_argument("--strategies", default="sentence,heading,fixed,semantic")
    ap.add_argument("--modes", default="vector,bm25,hybrid")
    ap.add_argument("--fusions", default="", help="extra hybrid runs, one per fusion method")
    ap.add_argument("--save", type=Path, help="per-question metrics JSON for bench/split_compare.py")
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--bulk",
        action="store_true",
        help="ingest as `ragaudit ingest` does (one Dagster run, "
        "parsing overlapped with embedding) instead of one run per document",
    )
    ap.add_argument("--data-dir", type=Path, help="data folder to ingest into (default: a new temporary one)")
    ap.add_argument(
        "--reuse",
        action="store_true",
        help="skip ingestion and score the index already in --data-dir (same chunking only: "
        "fusion and re-scoring changes need no re-ingestion)",
    )
    args = ap.parse_args()
    _env.need_corpus(args.pdfs, args.dataset)

    import logging

    logging.disable(logging.WARNING)
    from ragaudit.evaluate.evaluation import load_dataset, retrieval_eval
    from ragaudit.ingest.documents import ingest_bytes
    from ragaudit.pipelines.runner import DagsterRunner
    from ragaudit.platform.settings import Settings
    from ragaudit.query import QueryService
    from ragaudit.services import get_services
    from ragaudit.types import Scope

    strategies = [s for s in args.strategies.split(",") if s]
    modes = [m for m in args.modes.split(",") if m]
    if args.reuse and not args.data_dir:
        ap.error("--reuse needs --data-dir")
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="ragaudit-bench-"))
    data_dir.mkdir(parents=True, exist_ok=True)
    svc = get_services(Settings(_env_file=None, data_dir=data_dir, database_url="", qdrant_url="", llm_model=""))
    questions = load_dataset(args.dataset)
    pdfs = sorted(args.pdfs.glob("*.pdf"))
    results: dict[str, dict] = {}
    saved: dict[str, dict] = {}
    ingest_s: dict[str, float] = {}
    for strategy in strategies:
        t = time.perf_counter()
        if args.reuse:
            outs = []
        elif args.bulk:
            from ragaudit.ingest.bulk import BulkFile
            from ragaudit.pipelines.runner import run_bulk

            outs = run_bulk(svc, [BulkFile(f, f.name) for f in pdfs], strategy=strategy)
        else:
            outs = [ingest_bytes(svc, f.read_bytes(), f.name, DagsterRunner(), strategy=strategy) for f in pdfs]
        for out in outs:
            if not out.ok:
                print(f"{out.doc_name}: {out.status}: {out.message}", file=sys.stderr)
        ingest_s[strategy] = time.perf_counter() - t
        qs = QueryService(svc)
        r = retrieval_eval(qs.retriever, questions, modes, scope=Scope(strategy=strategy))
        results[strategy] = r["modes"]
        per_q = {q["id"]: {m: q["retrieval"][m]["metrics"] for m in q["retrieval"]} for q in r["questions"]}
        saved["default" if strategy == strategies[0] else strategy] = {"modes": r["modes"], "questions": per_q}
        for fusion in [f for f in args.fusions.split(",") if f]:
            qs.retriever.fusion = fusion
            rf = retrieval_eval(qs.retriever, questions, ["hybrid"], scope=Scope(strategy=strategy))
            results[strategy][f"hybrid:{fusion}"] = rf["modes"]["hybrid"]
            saved[f"{strategy}:{fusion}"] = {
                "modes": rf["modes"],
                "questions": {q["id"]: {"hybrid": q["retrieval"]["hybrid"]["metrics"]} for q in rf["questions"]},
            }
        qs.retriever.fusion = svc.settings.fusion
    svc.close()
    if args.save:
        args.save.write_text(json.dumps(saved, indent=1))
    if args.json:
        print(json.dumps({"strategies": results, "ingest_seconds": ingest_s}, indent=2))
        return 0
    print(f"{len(pdfs)} PDFs, {sum(1 for q in questions if not q.is_refusal)} questions ({args.dataset.name})\n")
    print("| strategy | mode | hit@1 | hit@5 | hit@10 | MRR | ratio hit@5 vs best single |")
    print("|---|---|---|---|---|---|---|")
    for strategy, per_mode in results.items():
        best_single = max((v["hit@5"] for m, v in per_mode.items() if m in ("vector", "bm25")), default=0) or 1
        for mode, v in per_mode.items():
            print(
                f"| {strategy} | {mode} | {v['hit@1']:.3f} | {v['hit@5']:.3f} | {v['hit@10']:.3f} | {v['mrr']:.3f} "
                f"| {v['hit@5'] / best_single:.2f} |"
            )
    print(
        "\ningest seconds (all PDFs, incl. model load for the first): "
        + ", ".join(f"{k} {v:.0f}" for k, v in ingest_s.items())
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

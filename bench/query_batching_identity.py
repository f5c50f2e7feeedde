"""Coalesced Edge dense queries return each request's plain results: every dev question, unscoped and
scoped to its document, on an ingested data folder.

    .venv/bin/python -m bench.query_batching_identity --data DATA_DIR [--batch 8]

Per question, the plain retrieval (``EdgeVectorStore.batch_queries = False``) is compared with the
same retrieval run in a coalesced ``query_batch`` of ``--batch`` requests (forced: the script takes
the batcher's turn until all of them have queued, as in ``tests/core/test_store_query_batching.py``).
Compared: every /search field of every retrieved chunk and both legs' full candidate lists. Query
vectors come from the real model, computed one by one first (concurrent embeddings are batched by
the embedder, which can change their last bits: not what is compared here). Prints JSON with the
number of requests, Edge calls, and mismatches (each named). Exact ties (equal scores) at the
prefetch cut can be chosen differently by any two Edge calls, plain ones included: on a store
filled by replicating points (the bench's 50k) tie groups are everywhere and this check is not
meaningful; run it on really ingested documents.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def main(argv: list[str] | None = None) -> int:
    from bench.__main__ import dev_questions
    from ragaudit.platform.settings import Settings
    from ragaudit.query import QueryService
    from ragaudit.services import get_services, release_services
    from ragaudit.types import Scope

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=5)
    args = ap.parse_args(argv)
    st = Settings(_env_file=None, data_dir=args.data, cache_ttl_s=0, llm_model="", database_url="", qdrant_url="")
    svc = get_services(st)
    try:
        r = QueryService(svc).retriever
        vectors = {}
        real = r.embedder

        class Cached:
            def embed_query(self, text: str):
                if text not in vectors:
                    vectors[text] = real.embed_query(text)
                return vectors[text]

        r.embedder = Cached()
        cases = [
            (q["id"], q["question"], scope)
            for q in dev_questions()
            for scope in (None, Scope(doc_names=[q["doc_name"]]))
        ]

        def result(i: int) -> dict:
            _, question, scope = cases[i]
            res = r.retrieve(question, scope, args.top_k, "hybrid")
            return {"retrieved": [c.to_json() for c in res.chunks], "candidates": res.candidates}

        store = svc.store
        store.batch_queries = False
        plain = [result(i) for i in range(len(cases))]
        store.batch_queries = True
        b = store._h.batcher
        calls0, queries0 = b.calls, b.queries
        got: dict[int, dict] = {}
        for start in range(0, len(cases), args.batch):
            idx = list(range(start, min(start + args.batch, len(cases))))
            with b._lock:
                b._busy = True
            threads = [threading.Thread(target=lambda i=i: got.__setitem__(i, result(i))) for i in idx]
            for t in threads:
                t.start()
            # every request has queued its dense query, or finished without one (a question in a
            # script the dense leg skips)
            while len(b._pending) + sum(i in got for i in idx) < len(idx):
                time.sleep(0.002)
            with b._lock:
                first = b._pending[0] if b._pending else None
                if first is None:
                    b._busy = False
            if first is not None:
                first.event.set()
            for t in threads:
                t.join()
        bad = [
            f"{cases[i][0]} {'scoped' if cases[i][2] else 'unscoped'}" for i in range(len(cases)) if got[i] != plain[i]
        ]
        out = {
            "data": str(args.data),
            "points": store.count(),
            "requests": len(cases),
            "edge_calls": b.calls - calls0,
            "queries_in_them": b.queries - queries0,
            "mismatches": len(bad),
            "mismatched": bad,
        }
        print(json.dumps(out, indent=1))
        return 1 if bad else 0
    finally:
        release_services(st)


if __name__ == "__main__":
    raise SystemExit(main())

"""Embedded vector store backends on real embeddings: Qdrant local mode (qdrant-client, today's
embedded store) vs Qdrant Edge (``qdrant-edge-py``, Qdrant's in-process engine), same points,
same queries, same run.

    python -m bench.store_backends [--sizes 10000] [--questions 20] [--data-dir DIR]

Points: the live points of an existing ragaudit data folder (``--data-dir``), else the sample
PDFs ingested into a temporary one; replicated under new document names up to each size
(real vectors: chunk dense vector, sentence-window multivector, BM25 sparse vector). Queries:
dev-set questions, embedded once beforehand, so only the store is timed: the dense leg (MaxSim
over the window multivector) and the BM25 leg (sparse, IDF), each unscoped and scoped to one
document, with ragaudit's filter (not a staged point, primary strategy only; scoped: + doc_key).
Also: upsert rate and whether both backends return the same top-20 ids.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

if __package__:  # python -m bench.NAME: offline defaults, repository on sys.path (bench/_env.py)
    from ._env import ROOT
else:  # python bench/NAME.py
    from _env import ROOT

from bench.__main__ import dev_questions, load_points, pct  # noqa: E402


def replicate(points: list[Any], n: int) -> list[tuple[str, dict, dict]]:
    """``n`` (id, vectors, payload) copies of ``points``; copy i of a document is ``<name>#<i>``."""
    from ragaudit.text.docnames import name_key

    out = []
    for i in range(n):
        src = points[i % len(points)]
        copy = i // len(points)
        payload = dict(src.payload)
        if copy:
            payload["doc_name"] = f"{payload['doc_name']}#{copy}"
            payload["doc_key"] = name_key(payload["doc_name"])
            payload["document_id"] = f"{payload.get('document_id')}-{copy}"
        out.append((str(uuid.uuid5(uuid.NAMESPACE_URL, f"{src.id}/{copy}")), src.vector, payload))
    return out


class LocalBackend:
    name = "qdrant local mode"

    def __init__(self, dim: int):
        from qdrant_client import QdrantClient

        from ragaudit.index.store import VectorStore

        self.tmp = tempfile.mkdtemp(prefix="bench-local-")
        self.store = VectorStore("bench", path=self.tmp)
        self.store.client.close()
        self.store.client = QdrantClient(":memory:")  # query path identical to the on-disk local mode
        self.store.ensure_collection(dim)

    def upsert(self, rows):
        from qdrant_client import models

        for i in range(0, len(rows), 256):
            self.store.client.upsert(
                "bench",
                points=[
                    models.PointStruct(
                        id=pid,
                        vector={
                            k: (models.SparseVector(indices=v.indices, values=v.values) if k == "bm25" else v)
                            for k, v in vec.items()
                        },
                        payload=pl,
                    )
                    for pid, vec, pl in rows[i : i + 256]
                ],
                wait=True,
            )

    def dense(self, qvec, doc_key: str | None, limit=20):
        from ragaudit.index.store import scope_filter
        from ragaudit.types import Scope

        flt = scope_filter(Scope(doc_names=[doc_key]) if doc_key else Scope())
        return [h.id for h in self.store.search_dense(qvec, flt, limit, windows=True)]

    def sparse(self, svec, doc_key: str | None, limit=20):
        from ragaudit.index.store import scope_filter
        from ragaudit.types import Scope

        flt = scope_filter(Scope(doc_names=[doc_key]) if doc_key else Scope())
        return [h.id for h in self.store.search_sparse(svec, flt, limit)]

    def close(self):
        self.store.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


class EdgeBackend:
    name = "qdrant edge"

    def __init__(self, dim: int):
        import qdrant_edge as qe

        self.qe = qe
        self.tmp = tempfile.mkdtemp(prefix="bench-edge-")
        cfg = qe.EdgeConfig(
            vectors={
                "dense": qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine),
                "windows": qe.EdgeVectorParams(
                    size=dim,
                    distance=qe.Distance.Cosine,
                    multivector_config=qe.MultiVectorConfig(comparator=qe.MultiVectorComparator.MaxSim),
                ),
            },
            sparse_vectors={"bm25": qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        )
        self.shard = qe.EdgeShard.create(self.tmp, cfg)
        for field in ("doc_key", "doc_name", "document_id", "knowledge_base", "strategy"):
            self.shard.update(qe.UpdateOperation.create_field_index(field, qe.PayloadSchemaType.Keyword))
        for field in ("live", "primary"):
            self.shard.update(qe.UpdateOperation.create_field_index(field, qe.PayloadSchemaType.Bool))

    def upsert(self, rows):
        qe = self.qe
        for i in range(0, len(rows), 512):
            pts = []
            for pid, vec, pl in rows[i : i + 512]:
                v = {
                    "dense": vec["dense"],
                    "windows": vec["dense_windows"],
                    "bm25": qe.SparseVector(indices=list(vec["bm25"].indices), values=list(vec["bm25"].values)),
                }
                pts.append(qe.Point(pid, v, pl))
            self.shard.update(qe.UpdateOperation.upsert_points(pts))
        self.shard.flush()

    def _filter(self, doc_key):
        qe = self.qe
        must = [qe.FieldCondition(key="doc_key", match=qe.MatchAny(any=[doc_key]))] if doc_key else None
        return qe.Filter(
            must=must,
            must_not=[
                qe.FieldCondition(key="live", match=qe.MatchValue(False)),
                qe.FieldCondition(key="primary", match=qe.MatchValue(False)),
            ],
        )

    def dense(self, qvec, doc_key, limit=20):
        qe = self.qe
        req = qe.QueryRequest(
            limit=limit,
            query=qe.Query.Nearest([list(map(float, qvec))], using="windows"),
            filter=self._filter(doc_key),
            with_payload=True,
        )
        return [str(p.id) for p in self.shard.query(req)]

    def sparse(self, svec, doc_key, limit=20):
        qe = self.qe
        if not svec.indices:
            return []
        req = qe.QueryRequest(
            limit=limit,
            query=qe.Query.Nearest(qe.SparseVector(indices=list(svec.indices), values=list(svec.values)), using="bm25"),
            filter=self._filter(doc_key),
            with_payload=True,
        )
        return [str(p.id) for p in self.shard.query(req)]

    def close(self):
        self.shard.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def measure(backend, rows, queries) -> dict[str, Any]:
    t = time.perf_counter()
    backend.upsert(rows)
    up = time.perf_counter() - t
    out: dict[str, Any] = {"upsert_points_per_s": round(len(rows) / up, 1)}
    ids: dict[str, list] = {}
    for leg in ("dense", "sparse"):
        for scoped in (False, True):
            lat, got = [], []
            for qvec, svec, key in queries:
                t = time.perf_counter()
                res = getattr(backend, leg)(qvec if leg == "dense" else svec, key if scoped else None)
                lat.append((time.perf_counter() - t) * 1000)
                got.append(res)
            name = f"{leg}{' scoped' if scoped else ''}"
            out[name] = pct(lat)
            ids[name] = got
    return out, ids


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.store_backends")
    ap.add_argument("--sizes", default="10000")
    ap.add_argument("--questions", type=int, default=20)
    ap.add_argument("--data-dir", type=Path)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)

    from ragaudit.index.sparse import bm25_query_vector
    from ragaudit.platform.settings import Settings
    from ragaudit.services import get_services

    tmp = None
    if args.data_dir is None:
        from ragaudit.ingest.documents import ingest_bytes
        from ragaudit.pipelines.runner import DagsterRunner

        tmp = Path(tempfile.mkdtemp(prefix="bench-backends-"))
        svc = get_services(Settings(_env_file=None, data_dir=tmp, llm_model="", store_backend="local"))
        for pdf in sorted((ROOT / "samples").glob("*.pdf")):
            ingest_bytes(svc, pdf.read_bytes(), pdf.name, DagsterRunner())
    else:
        svc = get_services(Settings(_env_file=None, data_dir=args.data_dir, llm_model=""))  # RAGAUDIT_STORE_BACKEND
    points = [p for p in load_points(svc.store) if p.payload.get("live", True) is not False]
    docs = sorted({p.payload["doc_key"] for p in points})
    qs = dev_questions()[: args.questions]
    queries = [
        (svc.embedder.embed([q["question"]])[0], bm25_query_vector(q["question"]), docs[i % len(docs)])
        for i, q in enumerate(qs)
    ]
    result: dict[str, Any] = {"source_points": len(points), "questions": len(queries), "sizes": {}}
    for n in [int(x) for x in args.sizes.split(",")]:
        rows = replicate(points, n)
        per: dict[str, Any] = {}
        ids = {}
        for cls in (LocalBackend, EdgeBackend):
            b = cls(svc.embedder.dim)
            try:
                per[b.name], ids[b.name] = measure(b, rows, queries)
            finally:
                b.close()
        a, e = ids["qdrant local mode"], ids["qdrant edge"]
        per["same top-20 ids (share of queries)"] = {
            k: round(sum(set(x) == set(y) for x, y in zip(a[k], e[k])) / len(a[k]), 3) for k in a
        }
        result["sizes"][str(n)] = per
        print(json.dumps({n: per}, indent=1), flush=True)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    if tmp is not None:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

"""One-command benchmark: ``python -m bench`` (from the repository root).

Everything is measured in one run on this machine, each result next to a baseline measured in
the same run, and written to ``bench/results/<date>-<machine>.json`` plus a printed table:

1. **Ingestion** of the PDFs (default: the 9 PDFs behind the first 39 dev questions in the shared corpus,
   ``--pdfs DIR`` or ``RAGAUDIT_BENCH_PDFS`` for another folder, ``--all`` for every PDF there)
   through ``ingest_bytes`` + the Dagster asset job, as ``ragaudit ingest`` does: pages/s,
   chunks/s, and the time split per stage (validate, extract, chunk, embed, upsert,
   SQL/bookkeeping, gold pairs, Dagster overhead = end-to-end minus the stages). The embedding
   floor is one batched ``encode`` of exactly the texts ingestion embedded. Baseline, same run:
   the naive pipeline of comparable projects (pdfplumber ``extract_text()`` per page, 512-word
   windows, one ``encode`` call and one Qdrant upsert per window).
2. **Retrieval-only latency** (``Retriever.retrieve``, query embedding included) P50/P95 per mode
   (vector, bm25, hybrid), unscoped and scoped to one document, at 1k, 10k and 50k chunks in the
   embedded mode: Qdrant Edge (the default), and qdrant-client local mode (the other embedded backend)
   at 1k (``--local-sizes``) with fewer questions (its filtered queries take seconds). The collections
   replicate the ingested points (real embeddings) under new document names, written through
   ``VectorStore.upsert``. Baseline, same run: BM25 in Python over all chunks (rank_bm25
   ``BM25Okapi``) + brute-force numpy cosine + RRF, and Edge with the exact MaxSim scan of every
   sentence window (a single-stage dense leg), both interleaved question by question
   with the default so that load changes hit all alike. Ratios: scoped / unscoped, baseline / Edge.
3. **Concurrency**: the API (uvicorn subprocess, embedded Edge store filled to ``--api-chunks``
   = 50k chunks) under 1 client, then 8 concurrent clients for a fixed time (/search hybrid,
   every 4th request /query): throughput, P50/P95 (ms), errors. Then /search from 1 client
   idle, and again while the API ingests a large PDF (the corpus concatenated, ``--big-pages``).
4. **Memory**: peak RSS (VmHWM) of the API process at 50k chunks, and of this process.

The load average is recorded with each section: on a shared machine, compare ratios (measured
in the same run) rather than absolute numbers.

Percentiles: numpy 'linear' (Hyndman & Fan type 7).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

if __package__:  # python -m bench.NAME: offline defaults, repository on sys.path (bench/_env.py)
    from ._env import ROOT, SHARED, need_corpus
else:  # python bench/NAME.py
    from _env import ROOT, SHARED, need_corpus

import numpy as np  # noqa: E402

MODES = ("vector", "bm25", "hybrid")


def pct(values: list[float]) -> dict[str, float | None]:
    """P50/P95 (ms) with numpy's 'linear' method; None when empty."""
    if not values:
        return {"p50": None, "p95": None, "n": 0}
    p50, p95 = np.percentile(np.asarray(values, dtype=float), [50, 95], method="linear")
    return {"p50": round(float(p50), 2), "p95": round(float(p95), 2), "n": len(values)}


def machine() -> dict[str, Any]:
    import psutil

    return {
        "node": platform.node(),
        "cpus": os.cpu_count(),
        "cpu": platform.processor() or platform.machine(),
        "memory_gb": round(psutil.virtual_memory().total / 1e9, 1),
        "python": platform.python_version(),
        "load_avg_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def default_pdfs(folder: Path, all_pdfs: bool) -> list[Path]:
    if all_pdfs or not (SHARED / "dev_questions.jsonl").exists():
        return sorted(folder.glob("*.pdf"))
    names = set()
    for line in (SHARED / "dev_questions.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("doc_name") and int(r["id"].split("-")[1]) <= 39:
            names.add(r["doc_name"])
    return sorted(folder / n for n in names if (folder / n).exists())


def dev_questions() -> list[dict]:
    path = SHARED / "dev_questions.jsonl"
    if not path.exists():
        return [{"question": q, "doc_name": None} for q in ("What is the probable cause?", "What was the revenue?")]
    return [r for r in map(json.loads, path.read_text().splitlines()) if r.get("doc_name")]


# --------------------------------------------------------------------------- 1. ingestion
class StageClock:
    """Self-time per stage of nested wrapped calls (a child's time is not counted in its parent)."""

    def __init__(self):
        self.totals: dict[str, float] = defaultdict(float)
        self.embedded_texts: list[str] = []
        self._local = threading.local()

    def wrap(self, name: str, fn: Callable) -> Callable:
        clock = self

        def wrapper(*a, **kw):
            stack = clock._local.__dict__.setdefault("stack", [])
            stack.append(0.0)
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                elapsed = time.perf_counter() - t
                child = stack.pop()
                clock.totals[name] += elapsed - child
                if stack:
                    stack[-1] += elapsed

        return wrapper


@contextlib.contextmanager
def instrumented(clock: StageClock):
    """Patch the ingestion stages (module attributes the Dagster assets call) with timers."""
    import ragaudit.evaluate.goldgen
    import ragaudit.index.embedding
    import ragaudit.index.store
    import ragaudit.ingest.documents

    patches = [
        (ragaudit.ingest.documents, "inspect_pdf_bounded", "validate"),
        (ragaudit.ingest.documents, "extract_pages_bounded", "extract"),
        (ragaudit.ingest.documents, "build_chunks", "chunk"),
        (ragaudit.ingest.documents, "stage_chunks", "sql+bookkeeping"),
        (ragaudit.ingest.documents, "publish", "sql+bookkeeping"),
        (ragaudit.ingest.documents, "count_check", "sql+bookkeeping"),
        (ragaudit.evaluate.goldgen, "generate_for_document", "gold pairs"),
        (ragaudit.index.store.VectorStore, "upsert", "upsert"),
    ]
    saved = [(obj, attr, getattr(obj, attr)) for obj, attr, _ in patches]
    orig_embed = ragaudit.index.embedding.Embedder.embed

    def embed(self, texts):
        clock.embedded_texts.extend(texts)
        return orig_embed(self, texts)

    saved.append((ragaudit.index.embedding.Embedder, "embed", orig_embed))
    for obj, attr, name in patches:
        setattr(obj, attr, clock.wrap(name, getattr(obj, attr)))
    ragaudit.index.embedding.Embedder.embed = clock.wrap("embed", embed)
    try:
        yield
    finally:
        for obj, attr, fn in saved:
            setattr(obj, attr, fn)


def bench_ingestion(pdfs: list[Path], data_dir: Path) -> dict[str, Any]:
    from ragaudit.ingest.documents import ingest_bytes
    from ragaudit.pipelines.runner import DagsterRunner
    from ragaudit.platform.settings import Settings
    from ragaudit.services import get_services

    settings = Settings(_env_file=None, data_dir=data_dir, cache_ttl_s=0, llm_model="")
    svc = get_services(settings)
    svc.embedder.embed(["warm up"])
    _ = svc.engine
    clock = StageClock()
    per_doc, pages, chunks = [], 0, 0
    t_all = time.perf_counter()
    with instrumented(clock):
        for pdf in pdfs:
            t = time.perf_counter()
            out = ingest_bytes(svc, pdf.read_bytes(), pdf.name, DagsterRunner())
            secs = time.perf_counter() - t
            doc = out.document or {}
            per_doc.append(
                {
                    "pdf": pdf.name,
                    "status": out.status,
                    "seconds": round(secs, 2),
                    "pages": doc.get("pages", 0),
                    "chunks": doc.get("chunk_count", 0),
                }
            )
            pages += doc.get("pages", 0)
            chunks += doc.get("chunk_count", 0)
            print(
                f"  ingested {pdf.name}: {out.status}, {doc.get('pages')} pages, {doc.get('chunk_count')} chunks, "
                f"{secs:.1f} s",
                flush=True,
            )
    total = time.perf_counter() - t_all
    stages = {k: round(v, 2) for k, v in clock.totals.items()}
    stages["dagster overhead"] = round(total - sum(clock.totals.values()), 2)
    texts = clock.embedded_texts
    t = time.perf_counter()
    svc.embedder.embed(texts)
    floor = time.perf_counter() - t
    return {
        "documents": per_doc,
        "pages": pages,
        "chunks": chunks,
        "seconds": round(total, 2),
        "pages_per_s": round(pages / total, 2),
        "chunks_per_s": round(chunks / total, 2),
        "stages_s": stages,
        "embedded_texts": len(texts),
        "embedding_floor_s": round(floor, 2),
        "ratio_to_floor": round(total / floor, 2) if floor else None,
    }


def bench_naive(pdfs: list[Path], embedder) -> dict[str, Any]:
    """pdfplumber extract_text() per page (pages closed), 512-word windows, one encode and one
    upsert (Qdrant local mode, in memory) per window."""
    import pdfplumber
    from qdrant_client import QdrantClient, models

    client = QdrantClient(":memory:")
    client.create_collection(
        "naive", vectors_config=models.VectorParams(size=embedder.dim, distance=models.Distance.COSINE)
    )
    t_extract = t_embed = t_upsert = 0.0
    windows_n = pages = 0
    t_all = time.perf_counter()
    for pdf in pdfs:
        t = time.perf_counter()
        words: list[str] = []
        with pdfplumber.open(pdf) as doc:
            for page in doc.pages:
                words += (page.extract_text() or "").split()
                page.close()
                pages += 1
        windows = [" ".join(words[i : i + 512]) for i in range(0, len(words), 512)]
        t_extract += time.perf_counter() - t
        for w in windows:
            t = time.perf_counter()
            vec = embedder.model.encode([w], normalize_embeddings=True)[0]
            t_embed += time.perf_counter() - t
            t = time.perf_counter()
            client.upsert(
                "naive",
                points=[
                    models.PointStruct(id=str(uuid.uuid4()), vector=vec.tolist(), payload={"text": w, "doc": pdf.name})
                ],
            )
            t_upsert += time.perf_counter() - t
            windows_n += 1
    total = time.perf_counter() - t_all
    client.close()
    return {
        "pages": pages,
        "windows": windows_n,
        "seconds": round(total, 2),
        "pages_per_s": round(pages / total, 2),
        "stages_s": {"extract+chunk": round(t_extract, 2), "embed": round(t_embed, 2), "upsert": round(t_upsert, 2)},
    }


# --------------------------------------------------------------------------- 2. retrieval at scale
class StoredPoint:
    """A point read back from a store: ``vector`` = {dense, dense_windows, bm25 (SparseVector)}."""

    __slots__ = ("id", "vector", "payload")

    def __init__(self, pid: str, vector: dict[str, Any], payload: dict[str, Any]):
        self.id, self.vector, self.payload = pid, vector, payload


def load_points(store) -> list[StoredPoint]:
    """Every point of the ingested collection, with its vectors (through the store interface, so
    any backend)."""
    from ragaudit.index.store import DENSE, SPARSE, WINDOWS

    rows = list(store.iter_payloads())
    names = [DENSE, SPARSE] + ([WINDOWS] if store.has_windows() else [])
    out = []
    for i in range(0, len(rows), 256):
        part = rows[i : i + 256]
        vecs = store.get_vectors([pid for pid, _ in part], names)
        out += [StoredPoint(pid, vecs[pid], pl) for pid, pl in part if pid in vecs]
    return out


def fill_store(store, points: list[StoredPoint], n: int, skip: int = 0, batch: int = 256) -> float:
    """Upsert replicated copies ``skip .. n-1`` of ``points`` (see ``replicate``) into ``store``
    through ``VectorStore.upsert`` (the ingestion path); returns seconds."""
    from ragaudit.index.store import DENSE, SPARSE, WINDOWS

    from .store_backends import replicate

    rows = replicate(points, n)[skip:]
    t = time.perf_counter()
    for i in range(0, len(rows), batch):
        part = rows[i : i + batch]
        store.upsert(
            [r[0] for r in part],
            [r[1][DENSE] for r in part],
            [r[1][SPARSE] for r in part],
            [r[2] for r in part],
            windows=[r[1].get(WINDOWS) or [r[1][DENSE]] for r in part],
        )
    if hasattr(store, "flush"):
        store.flush()
    return time.perf_counter() - t


def synthetic_store(points: list[StoredPoint], n: int, dim: int, backend: str = "edge"):
    """A VectorStore of ``n`` points replicating ``points``; copy i of a document is named
    ``<doc_name>#<i>`` (copy 0 keeps the real name). ``backend``: ``edge`` (a temporary folder) or
    ``local`` (qdrant-client local mode in memory: the query code path of the on-disk local mode
    without its one-SQLite-commit-per-point upserts)."""
    from qdrant_client import QdrantClient

    from ragaudit.index.store import open_store

    tmp = tempfile.mkdtemp(prefix=f"ragaudit-bench-{backend}-")
    store = open_store("bench", backend=backend, path=tmp)
    if backend == "local":
        store.client.close()
        store.client = QdrantClient(":memory:")
    store.ensure_collection(dim)
    fill_store(store, points, n)
    store.bench_tmp = tmp
    return store


def close_synthetic(store) -> None:
    store.close()
    shutil.rmtree(getattr(store, "bench_tmp", ""), ignore_errors=True)


class PythonBaseline:
    """rank_bm25 BM25Okapi over all chunk texts + brute-force cosine over chunk vectors + RRF (k=60)."""

    def __init__(self, points: list[Any], n: int, embedder):
        from rank_bm25 import BM25Okapi

        self.embedder = embedder
        texts, vecs, self.docs = [], [], []
        for i in range(n):
            p = points[i % len(points)]
            texts.append(p.payload.get("text", ""))
            v = p.vector.get("dense") if isinstance(p.vector, dict) else p.vector
            vecs.append(v)
            self.docs.append(
                p.payload.get("doc_name") if i < len(points) else f"{p.payload.get('doc_name')}#{i // len(points)}"
            )
        self.bm25 = BM25Okapi([self.tok(t) for t in texts])
        self.vecs = np.asarray(vecs, dtype=np.float32)
        self.docs_arr = np.asarray(self.docs, dtype=object)

    @staticmethod
    def tok(text: str) -> list[str]:
        return re.findall(r"\w+", text.lower())

    def search(self, question: str, doc: str | None = None, k: int = 20) -> list[int]:
        qv = self.embedder.embed([question])[0]
        bm = self.bm25.get_scores(self.tok(question))
        dense = self.vecs @ qv
        if doc is not None:
            mask = self.docs_arr == doc
            bm = np.where(mask, bm, -np.inf)
            dense = np.where(mask, dense, -np.inf)
        fused: dict[int, float] = defaultdict(float)
        for ranking in (np.argsort(-bm)[:k], np.argsort(-dense)[:k]):
            for r, i in enumerate(ranking, start=1):
                fused[int(i)] += 1.0 / (60 + r)
        return sorted(fused, key=lambda i: -fused[i])[:5]


def _cells(retr, qs: list[dict], modes=MODES) -> dict[str, Any]:
    from ragaudit.types import Scope

    res: dict[str, Any] = {}
    for q in qs[:2]:  # warm-up (first calls load lazily built state)
        retr.retrieve(q["question"], Scope(doc_names=[q["doc_name"]]), 5, "hybrid")
    for scoped in (False, True):
        for mode in modes:
            lat, store_lat, embed_lat = [], [], []
            for q in qs:
                scope = Scope(doc_names=[q["doc_name"]]) if scoped else Scope()
                t = time.perf_counter()
                r = retr.retrieve(q["question"], scope, 5, mode)
                lat.append((time.perf_counter() - t) * 1000)
                store_lat.append(r.timings_ms.get("vector", 0.0) + r.timings_ms.get("bm25", 0.0))
                embed_lat.append(r.timings_ms.get("embed", 0.0))
            cell = pct(lat)
            cell["store_p95"] = pct(store_lat)["p95"]  # the two store queries only (no embedding, no fusion)
            cell["embed_p95"] = pct(embed_lat)["p95"]
            res[f"{mode}{' scoped' if scoped else ''}"] = cell
    return res


def _cells_interleaved(variants: dict[str, tuple[Any, tuple[str, ...]]], qs: list[dict]) -> dict[str, dict[str, Any]]:
    """Like ``_cells`` for several variants at once, interleaved question by question (the order
    alternates per question), so a load change on a shared machine hits every variant alike and
    their ratios hold. ``variants``: name -> (a ``Retriever``, or a ``PythonBaseline`` (hybrid
    only), modes to measure). Returns name -> cell -> P50/P95 (+ store/embed P95 for retrievers)."""
    from ragaudit.types import Scope

    for obj, _ in variants.values():
        if hasattr(obj, "retrieve"):
            for q in qs[:2]:  # warm-up (first calls load lazily built state)
                obj.retrieve(q["question"], Scope(doc_names=[q["doc_name"]]), 5, "hybrid")
    out: dict[str, dict[str, Any]] = {name: {} for name in variants}
    for scoped in (False, True):
        for mode in MODES:
            names = [n for n, (_, modes) in variants.items() if mode in modes]
            if not names:
                continue
            lat: dict[str, list[float]] = defaultdict(list)
            store_lat: dict[str, list[float]] = defaultdict(list)
            embed_lat: dict[str, list[float]] = defaultdict(list)
            for i, q in enumerate(qs):
                for name in names if i % 2 == 0 else names[::-1]:
                    obj = variants[name][0]
                    t = time.perf_counter()
                    if hasattr(obj, "retrieve"):
                        r = obj.retrieve(
                            q["question"], Scope(doc_names=[q["doc_name"]]) if scoped else Scope(), 5, mode
                        )
                        lat[name].append((time.perf_counter() - t) * 1000)
                        store_lat[name].append(r.timings_ms.get("vector", 0.0) + r.timings_ms.get("bm25", 0.0))
                        embed_lat[name].append(r.timings_ms.get("embed", 0.0))
                    else:
                        obj.search(q["question"], q["doc_name"] if scoped else None)
                        lat[name].append((time.perf_counter() - t) * 1000)
            for name in names:
                cell = pct(lat[name])
                if store_lat[name]:
                    cell["store_p95"] = pct(store_lat[name])["p95"]
                    cell["embed_p95"] = pct(embed_lat[name])["p95"]
                out[name][f"{mode}{' scoped' if scoped else ''}"] = cell
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a and b else None


def bench_retrieval(
    svc, sizes: list[int], questions: list[dict], n_q: int, local_sizes: list[int], local_q: int
) -> dict[str, Any]:
    """Per size: Retriever.retrieve P50/P95 on the embedded default (Qdrant Edge), on local mode
    (sizes in ``local_sizes``, ``local_q`` questions: ~1 s per filtered query at 10k) and the
    Python baseline, plus the ratios the targets are stated in."""
    from ragaudit.retrieve.retriever import Retriever

    points = [p for p in load_points(svc.store) if p.payload.get("live", True) is not False]
    qs = questions[:n_q]
    out: dict[str, Any] = {
        "source_points": len(points),
        "questions": len(qs),
        "local_mode_questions": local_q,
        "sizes": {},
    }
    s = svc.settings

    def retriever(store, dense_prefetch: int = s.dense_prefetch):
        return Retriever(
            store,
            svc.embedder,
            rrf_k=s.rrf_k,
            candidates=s.candidates,
            dense_skip_scripts=s.dense_skip_scripts,
            dense_windows=s.dense_window_tokens > 0,
            fusion=s.fusion,
            dense_prefetch=dense_prefetch,
        )

    for n in sizes:
        res: dict[str, Any] = {}
        t = time.perf_counter()
        store = synthetic_store(points, n, svc.embedder.dim, "edge")
        res["edge_build_s"] = round(time.perf_counter() - t, 1)
        t = time.perf_counter()
        base = PythonBaseline(points, n, svc.embedder)
        res["baseline_build_s"] = round(time.perf_counter() - t, 1)
        try:  # Edge, Edge with the exact MaxSim scan (single-stage dense) and the baseline, interleaved
            variants: dict[str, tuple[Any, tuple[str, ...]]] = {
                "edge": (retriever(store), MODES),
                "baseline": (base, ("hybrid",)),
            }
            if s.dense_prefetch:
                variants["edge_exact_scan"] = (retriever(store, 0), ("vector", "hybrid"))
            res.update(_cells_interleaved(variants, qs))
        finally:
            close_synthetic(store)
            del base
        if n in local_sizes:
            t = time.perf_counter()
            store = synthetic_store(points, n, svc.embedder.dim, "local")
            res["local_build_s"] = round(time.perf_counter() - t, 1)
            try:
                res["local"] = _cells(retriever(store), qs[:local_q])
            finally:
                close_synthetic(store)
        e = res["edge"]
        res["ratios"] = {
            "edge hybrid scoped / unscoped (P95)": _ratio(e["hybrid scoped"]["p95"], e["hybrid"]["p95"]),
            "python baseline / edge hybrid (P95)": _ratio(res["baseline"]["hybrid"]["p95"], e["hybrid"]["p95"]),
            "python baseline / edge hybrid scoped (P95)": _ratio(
                res["baseline"]["hybrid scoped"]["p95"], e["hybrid scoped"]["p95"]
            ),
        }
        if "edge_exact_scan" in res:
            x = res["edge_exact_scan"]
            res["ratios"]["edge exact scan / two-stage: hybrid (P95)"] = _ratio(x["hybrid"]["p95"], e["hybrid"]["p95"])
            res["ratios"]["python baseline / edge exact scan hybrid (P95)"] = _ratio(
                res["baseline"]["hybrid"]["p95"], x["hybrid"]["p95"]
            )
        if "local" in res:
            res["ratios"]["local mode / edge hybrid scoped (P95)"] = _ratio(
                res["local"]["hybrid scoped"]["p95"], e["hybrid scoped"]["p95"]
            )
        res["load_avg"] = [round(x, 2) for x in os.getloadavg()]
        out["sizes"][str(n)] = res
        print(
            f"  retrieval at {n} chunks (Qdrant Edge): hybrid P95 {e['hybrid']['p95']} ms, scoped "
            f"{e['hybrid scoped']['p95']} ms; local mode hybrid scoped P95 "
            f"{res.get('local', {}).get('hybrid scoped', {}).get('p95')} ms; python baseline P95 "
            f"{res['baseline']['hybrid']['p95']} ms; load {res['load_avg']}",
            flush=True,
        )
    return out


# --------------------------------------------------------------------------- 3. concurrency
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def vm_hwm_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def big_pdf(folder: Path, out: Path, max_pages: int) -> int:
    """Concatenate the PDFs of ``folder`` (sorted, repeated if needed) into ``out`` up to
    ``max_pages`` pages; returns the page count. A large document made of real pages."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    files = sorted(folder.glob("*.pdf"))
    n = 0
    while n < max_pages and files:
        before = n
        for f in files:
            try:
                reader = PdfReader(f)  # owner-password files (empty user password) open as they are
                for page in reader.pages:
                    if n >= max_pages:
                        break
                    writer.add_page(page)
                    n += 1
            except Exception:  # a PDF pypdf cannot read is skipped: the page count says what was built
                continue
        if n == before:
            break
    with out.open("wb") as fh:
        writer.write(fh)
    return n


def bench_concurrency(
    data_dir: Path, questions: list[dict], seconds: float, big: Path | None = None, ingest_seconds: float = 60.0
) -> dict[str, Any]:
    """Against the API (uvicorn subprocess on ``data_dir``): 1 client, then 8 concurrent clients
    for ``seconds`` each (/search hybrid, every 4th request /query); then, with ``big`` uploaded
    (202, ingested by the API's background worker), 1 client's /search while it ingests, for up
    to ``ingest_seconds``. The API's peak RSS (VmHWM) at the end."""
    import httpx

    proc, base, log_path = start_api(data_dir)
    try:
        with httpx.Client(timeout=60) as c:  # warm up
            points = c.get(f"{base}/health").json()["parts"]["qdrant"].get("points")
            for q in questions[:3]:
                c.post(f"{base}/search", json={"question": q["question"]})
                c.post(f"{base}/query", json={"question": q["question"]})
        rss_before_ingest = vm_hwm_mb(proc.pid)

        def run(clients: int, until: Callable[[], bool] | None = None, search_only: bool = False) -> dict[str, Any]:
            lat: dict[str, list[float]] = defaultdict(list)
            errors: dict[str, int] = defaultdict(int)
            stop_at = time.monotonic() + seconds

            def done() -> bool:
                return until() if until else time.monotonic() >= stop_at

            def client(idx: int) -> None:
                rnd = random.Random(idx)
                i = 0
                with httpx.Client(timeout=60) as c:
                    while not done():
                        q = rnd.choice(questions)["question"]
                        path = "/query" if i % 4 == 3 and not search_only else "/search"
                        i += 1
                        t = time.perf_counter()
                        try:
                            r = c.post(f"{base}{path}", json={"question": q, "mode": "hybrid"})
                            ok = r.status_code == 200
                        except httpx.HTTPError:
                            ok = False
                        lat[path].append((time.perf_counter() - t) * 1000)
                        if not ok:
                            errors[path] += 1

            threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
            t0 = time.perf_counter()
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            wall = time.perf_counter() - t0
            n = sum(len(v) for v in lat.values())
            return {
                "clients": clients,
                "seconds": round(wall, 1),
                "requests": n,
                "throughput_rps": round(n / wall, 2),
                "errors": sum(errors.values()),
                "search_ms": pct(lat["/search"]),
                "query_ms": pct(lat["/query"]),
                "load_avg": [round(x, 2) for x in os.getloadavg()],
            }

        single = run(1)
        print(f"  1 client: {single['throughput_rps']} req/s, /search P95 {single['search_ms']['p95']} ms", flush=True)
        eight = run(8)
        print(
            f"  8 clients: {eight['throughput_rps']} req/s, /search P95 {eight['search_ms']['p95']} ms, "
            f"errors {eight['errors']}",
            flush=True,
        )
        out: dict[str, Any] = {
            "api_points": points,
            "single": single,
            "eight": eight,
            "api_peak_rss_mb_before_ingestion": rss_before_ingest,
            "ratios": {
                "8 clients / 1 client /search P95": _ratio(eight["search_ms"]["p95"], single["search_ms"]["p95"])
            },
        }
        if big is not None:
            idle = run(1, search_only=True)
            with httpx.Client(timeout=120) as c:
                r = c.post(f"{base}/documents", files={"file": (big.name, big.read_bytes(), "application/pdf")})
                r.raise_for_status()
                doc_id = r.json()["document"]["id"]
            statuses: list[str] = []
            t_up = time.monotonic()
            last = [0.0]

            def ingest_over() -> bool:
                if time.monotonic() - t_up > ingest_seconds:
                    return True
                if time.monotonic() - last[0] > 1.0:
                    last[0] = time.monotonic()
                    try:
                        st = httpx.get(f"{base}/documents/{doc_id}", timeout=30).json().get("status")
                    except httpx.HTTPError:
                        st = "unknown"
                    statuses.append(st)
                    return st in ("ready", "failed")
                return False

            during = run(1, until=ingest_over, search_only=True)
            during["document_statuses_seen"] = sorted(set(statuses))
            during["ingestion_finished"] = bool(statuses) and statuses[-1] in ("ready", "failed")
            out.update(idle_search=idle, search_during_ingestion=during, big_pdf=big.name)
            out["ratios"]["/search P95 during ingestion / idle"] = _ratio(
                during["search_ms"]["p95"], idle["search_ms"]["p95"]
            )
            print(
                f"  /search during the ingestion of {big.name}: P95 {during['search_ms']['p95']} ms vs idle "
                f"{idle['search_ms']['p95']} ms (statuses {during['document_statuses_seen']})",
                flush=True,
            )
        out["api_peak_rss_mb"] = vm_hwm_mb(proc.pid)
        return out
    finally:
        stop_api(proc)
        text = log_path.read_text(errors="replace")
        log_path.unlink(missing_ok=True)
        if "out" in locals():
            out["api_stderr"] = {"lines": len(text.splitlines()), "tracebacks": text.count("Traceback (most recent")}


def start_api(data_dir: Path, cwd: Path = ROOT, timeout_s: float = 120) -> tuple[subprocess.Popen, str, Path]:
    """``ragaudit.api.app:create_app`` under uvicorn on a free port of 127.0.0.1, over ``data_dir``
    (embedded stores, cache off, no LLM), importing the code of ``cwd``. Returns the process, the
    base URL and the API's log (stdout and stderr, ``<data_dir>-api.log`` beside it). Its own
    session, so ``stop_api`` also stops the helpers it starts (parse children, Dagster's
    compute-log tails) before the data folder is removed. Raises RuntimeError with the log's tail
    when it does not answer /health within ``timeout_s`` (it is stopped first)."""
    import httpx

    env = {
        **os.environ,
        "RAGAUDIT_DATA_DIR": str(data_dir),
        "RAGAUDIT_CACHE_TTL_S": "0",
        "RAGAUDIT_LLM_MODEL": "",
        "RAGAUDIT_DATABASE_URL": "",
        "RAGAUDIT_QDRANT_URL": "",
    }
    port = free_port()
    log_path = data_dir.parent / f"{data_dir.name}-api.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "ragaudit.api.app:create_app", "--factory", "--host", "127.0.0.1"]
            + ["--port", str(port), "--log-level", "warning"],
            cwd=cwd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                return proc, base, log_path
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            stop_api(proc)
            raise RuntimeError(f"the API of {cwd} did not start: " + log_path.read_text(errors="replace")[-2000:])
        time.sleep(0.5)


def stop_api(proc: subprocess.Popen) -> None:
    """SIGTERM the API (started with ``start_new_session``) and wait; then stop whatever is left of
    its process group (an ingestion it was running: the parse child, Dagster's compute-log
    ``tail``), so nothing outlives the bench's temporary folders."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        time.sleep(0.5)


# --------------------------------------------------------------------------- report
def table(r: dict[str, Any]) -> str:
    m = r["machine"]
    lines = [
        f"ragaudit bench {r['date']} on {m['node']}: {m['cpus']} CPUs ({m['cpu']}), {m['memory_gb']} GB RAM, "
        f"load average at start {m['load_avg_at_start']}",
        "",
    ]
    from .ingestion import ingestion_table

    lines += ingestion_table(r)
    ret = r.get("retrieval")
    if ret:
        sizes = list(ret["sizes"])
        lines += [
            "| Retrieval-only P50 / P95 ms (query embedding included; store = P95 of the store queries alone) | "
            + " | ".join(f"{n} chunks" for n in sizes)
            + " |",
            "|---|" + "---|" * len(sizes),
        ]
        rows = [("Qdrant Edge (embedded default)", "edge", m) for m in [*MODES, *(f"{m} scoped" for m in MODES)]]
        rows += [
            ("Qdrant Edge, exact MaxSim scan (single-stage dense)", "edge_exact_scan", m)
            for m in ("vector", "hybrid", "vector scoped", "hybrid scoped")
        ]
        rows += [("qdrant-client local mode", "local", m) for m in [*MODES, *(f"{m} scoped" for m in MODES)]]
        rows += [("baseline: Python BM25 + numpy cosine + RRF", "baseline", m) for m in ("hybrid", "hybrid scoped")]
        for label, key, mode in rows:
            cells = [(v.get(key) or {}).get(mode) for v in ret["sizes"].values()]
            if any(cells):
                lines.append(
                    f"| {label}: {mode} | "
                    + " | ".join(
                        (
                            f"{c['p50']} / {c['p95']}"
                            + (f" (store {c['store_p95']})" if c.get("store_p95") is not None else "")
                        )
                        if c
                        else "-"
                        for c in cells
                    )
                    + " |"
                )
        for k in next(iter(ret["sizes"].values()))["ratios"]:
            lines.append(
                f"| ratio {k} | " + " | ".join(str(v["ratios"].get(k, "-")) for v in ret["sizes"].values()) + " |"
            )
        lines.append(
            "| load average (1, 5, 15 min) after the size | "
            + " | ".join(str(v["load_avg"]) for v in ret["sizes"].values())
            + " |"
        )
        lines.append("")
    con = r.get("concurrency")
    if con:
        lines += [
            f"| API on {con.get('api_points')} chunks (uvicorn, /search + every 4th /query) | req/s | "
            "/search P50 / P95 ms | /query P50 / P95 ms | errors | load average |",
            "|---|---|---|---|---|---|",
        ]
        for k, label in (
            ("single", "1 client"),
            ("eight", "8 clients"),
            ("idle_search", "1 client, /search only, idle"),
            ("search_during_ingestion", f"1 client, /search only, while {con.get('big_pdf')} ingests"),
        ):
            c = con.get(k)
            if c:
                lines.append(
                    f"| {label}, {c['seconds']} s | {c['throughput_rps']} | "
                    f"{c['search_ms']['p50']} / {c['search_ms']['p95']} | {c['query_ms']['p50']} / "
                    f"{c['query_ms']['p95']} | {c['errors']} | {c['load_avg']} |"
                )
        lines.append("")
        lines += [f"Ratio {k}: {v}" for k, v in con["ratios"].items()]
        lines.append(
            f"Peak RSS: API process {con['api_peak_rss_mb']} MB ({con['api_peak_rss_mb_before_ingestion']} MB "
            f"before the ingestion); bench process {r['bench_peak_rss_mb']} MB"
        )
    if r.get("section_seconds"):
        lines += [
            "",
            "Wall seconds per section: "
            + ", ".join(f"{k} {v}" for k, v in r["section_seconds"].items())
            + f"; whole bench {r.get('seconds')} s",
        ]
    targets = r.get("targets")
    if targets:
        lines += ["", "| Target | measured | met |", "|---|---|---|"]
        lines += [f"| {t['target']} | {t['measured']} | {t['met']} |" for t in targets]
    return "\n".join(lines)


def check_targets(r: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's latency targets against this run's numbers (None = not measured)."""
    out = []

    def add(target: str, measured: float | None, ok: Callable[[float], bool]) -> None:
        out.append({"target": target, "measured": measured, "met": None if measured is None else bool(ok(measured))})

    sizes = (r.get("retrieval") or {}).get("sizes", {})
    for n, limit in (("10000", 50), ("50000", 150)):
        e = sizes.get(n, {}).get("edge", {})
        add(
            f"hybrid P95 <= {limit} ms at {n} chunks (embedded)",
            (e.get("hybrid") or {}).get("p95"),
            lambda v, x=limit: v <= x,
        )
        add(
            f"scoped hybrid P95 <= 1.5x unscoped at {n}",
            sizes.get(n, {}).get("ratios", {}).get("edge hybrid scoped / unscoped (P95)"),
            lambda v: v <= 1.5,
        )
    add(
        "python BM25 baseline / embedded hybrid P95 >= 10 at 50000",
        sizes.get("50000", {}).get("ratios", {}).get("python baseline / edge hybrid (P95)"),
        lambda v: v >= 10,
    )
    ing, nai, syn = r.get("ingestion") or {}, r.get("naive") or {}, r.get("synthetic") or {}
    add("ingestion of the PDFs <= 1.5x its embedding floor", ing.get("ratio_to_floor"), lambda v: v <= 1.5)
    add("ingestion of the PDFs / naive pipeline <= 1", _ratio(ing.get("seconds"), nai.get("seconds")), lambda v: v <= 1)
    add(
        "synthetic corpus (one 615-page PDF): ingesting process peak RSS MB < 1024",
        (syn.get("peak_rss_mb") or {}).get("process"),
        lambda v: v < 1024,
    )
    add("whole bench wall minutes < 15", round(r["seconds"] / 60, 1) if r.get("seconds") else None, lambda v: v < 15)
    con = r.get("concurrency") or {}
    add(
        "/search P95 during ingestion <= 3x idle",
        con.get("ratios", {}).get("/search P95 during ingestion / idle"),
        lambda v: v <= 3,
    )
    add("8 clients: 0 errors", (con.get("eight") or {}).get("errors"), lambda v: v == 0)
    add(
        "8 clients /search P95 <= 3x single client",
        con.get("ratios", {}).get("8 clients / 1 client /search P95"),
        lambda v: v <= 3,
    )
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--pdfs",
        type=Path,
        default=Path(os.environ.get("RAGAUDIT_BENCH_PDFS", SHARED / "pdfs")),
        help="folder of PDFs (default: the shared corpus)",
    )
    ap.add_argument(
        "--all", action="store_true", help="every PDF in the folder, not only those behind the first 39 dev questions"
    )
    ap.add_argument("--questions", type=int, default=20, help="questions per latency cell")
    ap.add_argument("--sizes", default="1000,10000,50000", help="collection sizes (chunks) for the latency table")
    ap.add_argument(
        "--local-sizes",
        default="1000",
        help="sizes also measured on qdrant-client local mode (the other embedded backend; ~1-3 s per "
        "filtered query from 10k up, so 10k costs a minute of the 15-minute budget: add it by hand)",
    )
    ap.add_argument("--local-questions", type=int, default=8, help="questions per local-mode cell")
    ap.add_argument(
        "--api-chunks",
        type=int,
        default=50000,
        help="chunks in the API's store for the concurrency and memory section (replicas of the ingested)",
    )
    ap.add_argument(
        "--big-pages",
        type=int,
        default=400,
        help="pages of the large PDF (the corpus concatenated) ingested while /search is measured",
    )
    ap.add_argument(
        "--ingest-seconds",
        type=float,
        default=40.0,
        help="longest /search window during that ingestion (one client: several hundred requests, enough for a P95)",
    )
    ap.add_argument("--concurrency-seconds", type=float, default=20.0)
    ap.add_argument(
        "--synthetic-pages",
        type=int,
        default=2000,
        help="pages of the synthetic ingestion corpus (made from the PDFs; one document of 615 pages)",
    )
    ap.add_argument(
        "--synthetic-floor-sample",
        type=float,
        default=0.03,
        help="share of the synthetic corpus's embedded texts embedded for its floor (a seeded random "
        "sample, its time scaled by texts / sampled texts; reported as an estimate). 3%% of ~27,000 "
        "texts is ~800: the estimate's error is a few per cent, the full floor would cost ~9 minutes",
    )
    ap.add_argument(
        "--per-document",
        action="store_true",
        help="also ingest the PDFs with one Dagster run per document (the upload path)",
    )
    ap.add_argument(
        "--skip", action="append", default=[], choices=["retrieval", "concurrency", "synthetic", "ingestion-load"]
    )
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = ap.parse_args(argv)
    need_corpus(args.pdfs)

    from ragaudit.platform.settings import Settings
    from ragaudit.services import get_services, release_services

    pdfs = default_pdfs(args.pdfs, args.all)
    if not pdfs:
        sys.exit(f"no PDFs in {args.pdfs}")
    questions = [
        q for q in dev_questions() if (args.pdfs / q["doc_name"]).exists() and q["doc_name"] in {p.name for p in pdfs}
    ] or dev_questions()
    random.Random(0).shuffle(questions)
    settings_probe = Settings(_env_file=None)
    result: dict[str, Any] = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine(),
        "pdfs": [p.name for p in pdfs],
        "store_backend": settings_probe.store_backend,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{result['date'][:10]}-{re.sub(r'[^A-Za-z0-9_.-]', '_', platform.node())}.json"
    t_start = time.perf_counter()

    def save() -> str:  # after every section: an interrupted run keeps what it measured
        result["bench_peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        result["seconds"] = round(time.perf_counter() - t_start, 1)
        result["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
        result["targets"] = check_targets(result)
        text = table(result)
        path.write_text(json.dumps({**result, "table": text}, indent=2))
        return text

    @contextlib.contextmanager
    def section(name: str):  # wall seconds per section, in the result (the 15-minute budget)
        t = time.perf_counter()
        try:
            yield
        finally:
            secs = result.setdefault("section_seconds", {})[name] = round(time.perf_counter() - t, 1)
            print(f"   [{name}: {secs} s wall, {round(time.perf_counter() - t_start)} s since the start]", flush=True)

    data_dir = Path(tempfile.mkdtemp(prefix="ragaudit-bench-"))
    work = Path(tempfile.mkdtemp(prefix="ragaudit-bench-files-"))
    try:
        from .ingestion import bench_bulk_ingestion, bench_synthetic

        print(f"1. ingestion of {len(pdfs)} PDFs", flush=True)
        with section("ingestion"):
            result["ingestion"] = bench_bulk_ingestion(pdfs, data_dir)
        svc = get_services(Settings(_env_file=None, data_dir=data_dir, cache_ttl_s=0, llm_model=""))
        print("   naive baseline", flush=True)
        with section("naive"):
            result["naive"] = bench_naive(pdfs, svc.embedder)
        save()
        if args.per_document:
            print("   one Dagster run per document", flush=True)
            other = Path(tempfile.mkdtemp(prefix="ragaudit-bench-pd-"))
            try:
                result["ingestion_per_document"] = bench_ingestion(pdfs, other)
                release_services(Settings(_env_file=None, data_dir=other, cache_ttl_s=0, llm_model=""))
            finally:
                shutil.rmtree(other, ignore_errors=True)
            save()
        if "synthetic" not in args.skip and args.synthetic_pages:
            print(f"   synthetic corpus of ~{args.synthetic_pages} pages (subprocess)", flush=True)
            with section("synthetic"):
                result["synthetic"] = bench_synthetic(pdfs, args.synthetic_pages, args.synthetic_floor_sample)
            save()
        if "retrieval" not in args.skip:
            print("2. retrieval latency", flush=True)
            sizes = [int(x) for x in args.sizes.split(",") if x]
            local = [int(x) for x in args.local_sizes.split(",") if x]
            with section("retrieval"):
                result["retrieval"] = bench_retrieval(
                    svc, sizes, questions, args.questions, local, args.local_questions
                )
            save()
        if "concurrency" not in args.skip:
            big = None
            with section("api store"):
                if args.api_chunks > svc.store.count():
                    points = [p for p in load_points(svc.store) if p.payload.get("live", True) is not False]
                    secs = fill_store(svc.store, points, args.api_chunks, skip=len(points))
                    print(f"   the API's store filled to {svc.store.count()} chunks in {secs:.0f} s", flush=True)
                if "ingestion-load" not in args.skip:
                    big = work / "large.pdf"
                    pages = big_pdf(args.pdfs, big, args.big_pages)
                    result["big_pdf_pages"] = pages
                release_services(svc.settings)  # frees the embedded store's folder for the API process
            print(
                "3. concurrency" + (f" and /search during a {result['big_pdf_pages']}-page ingestion" if big else ""),
                flush=True,
            )
            with section("concurrency"):
                result["concurrency"] = bench_concurrency(
                    data_dir, questions, args.concurrency_seconds, big, args.ingest_seconds
                )
        else:
            release_services(svc.settings)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    text = save()
    print()
    print(text)
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()

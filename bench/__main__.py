"""One-command benchmark: ``python -m bench`` (from the repository root).

Everything is measured in one run on this machine, each result next to a baseline measured in
the same run, and written to ``bench/results/<date>-<machine>.json`` plus a printed table:

1. **Ingestion** of the PDFs (default: the 9 PDFs behind dev-001..dev-039 in the shared corpus,
   ``--pdfs DIR`` or ``RAGAUDIT_BENCH_PDFS`` for another folder, ``--all`` for every PDF there)
   through ``ingest_bytes`` + the Dagster asset job, as ``ragaudit ingest`` does: pages/s,
   chunks/s, and the time split per stage (validate, extract, chunk, embed, upsert,
   SQL/bookkeeping, gold pairs, Dagster overhead = end-to-end minus the stages). The embedding
   floor is one batched ``encode`` of exactly the texts ingestion embedded. Baseline, same run:
   the naive pipeline of comparable projects (pdfplumber ``extract_text()`` per page, 512-word
   windows, one ``encode`` call and one Qdrant upsert per window).
2. **Retrieval-only latency** (``Retriever.retrieve``, query embedding included) P50/P95 per mode
   (vector, bm25, hybrid), unscoped and scoped to one document, at 1k and 10k chunks
   (``--scale-50k`` adds 50k) in the embedded mode (Qdrant local mode). The larger collections
   replicate the ingested points (real embeddings) under new document names, in an in-memory
   local-mode collection (query code path identical to the on-disk one). Baseline, same run:
   BM25 in Python over all chunks (rank_bm25 ``BM25Okapi``) + brute-force numpy cosine + RRF.
3. **Concurrency**: the API (uvicorn subprocess on the ingested data) under 1 client, then 8
   concurrent clients for a fixed time (/search hybrid, every 4th request /query): throughput,
   P50/P95 (ms), errors; the API's peak RSS (VmHWM).
4. **Memory**: peak RSS of this process and of the API process.

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

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

SHARED = ROOT.parent / "shared" / "corpus"
MODES = ("vector", "bm25", "hybrid")


def pct(values: list[float]) -> dict[str, float | None]:
    """P50/P95 (ms) with numpy's 'linear' method; None when empty."""
    if not values:
        return {"p50": None, "p95": None, "n": 0}
    p50, p95 = np.percentile(np.asarray(values, dtype=float), [50, 95], method="linear")
    return {"p50": round(float(p50), 2), "p95": round(float(p95), 2), "n": len(values)}


def machine() -> dict[str, Any]:
    import psutil

    return {"node": platform.node(), "cpus": os.cpu_count(), "cpu": platform.processor() or platform.machine(),
            "memory_gb": round(psutil.virtual_memory().total / 1e9, 1), "python": platform.python_version(),
            "load_avg_at_start": [round(x, 2) for x in os.getloadavg()]}


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
    import core.embedding
    import core.goldgen
    import core.ingest
    import core.store

    patches = [(core.ingest, "inspect_pdf_bounded", "validate"), (core.ingest, "extract_pages_bounded", "extract"),
               (core.ingest, "build_chunks", "chunk"), (core.ingest, "stage_chunks", "sql+bookkeeping"),
               (core.ingest, "publish", "sql+bookkeeping"), (core.ingest, "count_check", "sql+bookkeeping"),
               (core.goldgen, "generate_for_document", "gold pairs"), (core.store.VectorStore, "upsert", "upsert")]
    saved = [(obj, attr, getattr(obj, attr)) for obj, attr, _ in patches]
    orig_embed = core.embedding.Embedder.embed

    def embed(self, texts):
        clock.embedded_texts.extend(texts)
        return orig_embed(self, texts)

    saved.append((core.embedding.Embedder, "embed", orig_embed))
    for obj, attr, name in patches:
        setattr(obj, attr, clock.wrap(name, getattr(obj, attr)))
    core.embedding.Embedder.embed = clock.wrap("embed", embed)
    try:
        yield
    finally:
        for obj, attr, fn in saved:
            setattr(obj, attr, fn)


def bench_ingestion(pdfs: list[Path], data_dir: Path) -> dict[str, Any]:
    from core.ingest import ingest_bytes
    from core.services import get_services
    from core.settings import Settings
    from pipelines.runner import DagsterRunner

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
            per_doc.append({"pdf": pdf.name, "status": out.status, "seconds": round(secs, 2),
                            "pages": doc.get("pages", 0), "chunks": doc.get("chunk_count", 0)})
            pages += doc.get("pages", 0)
            chunks += doc.get("chunk_count", 0)
            print(f"  ingested {pdf.name}: {out.status}, {doc.get('pages')} pages, {doc.get('chunk_count')} chunks, "
                  f"{secs:.1f} s", flush=True)
    total = time.perf_counter() - t_all
    stages = {k: round(v, 2) for k, v in clock.totals.items()}
    stages["dagster overhead"] = round(total - sum(clock.totals.values()), 2)
    texts = clock.embedded_texts
    t = time.perf_counter()
    svc.embedder.embed(texts)
    floor = time.perf_counter() - t
    return {"documents": per_doc, "pages": pages, "chunks": chunks, "seconds": round(total, 2),
            "pages_per_s": round(pages / total, 2), "chunks_per_s": round(chunks / total, 2),
            "stages_s": stages, "embedded_texts": len(texts), "embedding_floor_s": round(floor, 2),
            "ratio_to_floor": round(total / floor, 2) if floor else None}


def bench_naive(pdfs: list[Path], embedder) -> dict[str, Any]:
    """pdfplumber extract_text() per page (pages closed), 512-word windows, one encode and one
    upsert (Qdrant local mode, in memory) per window."""
    import pdfplumber
    from qdrant_client import QdrantClient, models

    client = QdrantClient(":memory:")
    client.create_collection("naive", vectors_config=models.VectorParams(size=embedder.dim,
                                                                         distance=models.Distance.COSINE))
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
        windows = [" ".join(words[i:i + 512]) for i in range(0, len(words), 512)]
        t_extract += time.perf_counter() - t
        for w in windows:
            t = time.perf_counter()
            vec = embedder.model.encode([w], normalize_embeddings=True)[0]
            t_embed += time.perf_counter() - t
            t = time.perf_counter()
            client.upsert("naive", points=[models.PointStruct(id=str(uuid.uuid4()), vector=vec.tolist(),
                                                              payload={"text": w, "doc": pdf.name})])
            t_upsert += time.perf_counter() - t
            windows_n += 1
    total = time.perf_counter() - t_all
    client.close()
    return {"pages": pages, "windows": windows_n, "seconds": round(total, 2), "pages_per_s": round(pages / total, 2),
            "stages_s": {"extract+chunk": round(t_extract, 2), "embed": round(t_embed, 2), "upsert": round(t_upsert, 2)}}


# --------------------------------------------------------------------------- 2. retrieval at scale
def load_points(store) -> list[Any]:
    """Every live point of the ingested collection, with vectors."""
    out, offset = [], None
    while True:
        pts, offset = store.client.scroll(store.collection, limit=256, offset=offset, with_payload=True,
                                          with_vectors=True)
        out += pts
        if offset is None:
            return out


def synthetic_store(points: list[Any], n: int, dim: int):
    """A VectorStore (Qdrant local mode, in memory) of ``n`` points replicating ``points``; copy i
    of a document is named ``<doc_name>#<i>`` (copy 0 keeps the real name)."""
    from qdrant_client import QdrantClient, models

    from core.store import VectorStore

    from .store_backends import replicate

    tmp = tempfile.mkdtemp(prefix="ragaudit-bench-store-")
    store = VectorStore("bench", path=tmp)
    store.client.close()
    store.client = QdrantClient(":memory:")
    store.ensure_collection(dim)
    batch = []
    for pid, vector, payload in replicate(points, n):
        batch.append(models.PointStruct(id=pid, vector=vector, payload=payload))
        if len(batch) == 256:
            store.client.upsert("bench", points=batch, wait=True)
            batch = []
    if batch:
        store.client.upsert("bench", points=batch, wait=True)
    shutil.rmtree(tmp, ignore_errors=True)
    return store


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
            self.docs.append(p.payload.get("doc_name") if i < len(points) else f"{p.payload.get('doc_name')}#{i // len(points)}")
        self.bm25 = BM25Okapi([self.tok(t) for t in texts])
        self.vecs = np.asarray(vecs, dtype=np.float32)

    @staticmethod
    def tok(text: str) -> list[str]:
        return re.findall(r"\w+", text.lower())

    def search(self, question: str, doc: str | None = None, k: int = 20) -> list[int]:
        qv = self.embedder.embed([question])[0]
        bm = self.bm25.get_scores(self.tok(question))
        dense = self.vecs @ qv
        if doc is not None:
            mask = np.asarray([d == doc for d in self.docs])
            bm = np.where(mask, bm, -np.inf)
            dense = np.where(mask, dense, -np.inf)
        fused: dict[int, float] = defaultdict(float)
        for ranking in (np.argsort(-bm)[:k], np.argsort(-dense)[:k]):
            for r, i in enumerate(ranking, start=1):
                fused[int(i)] += 1.0 / (60 + r)
        return sorted(fused, key=lambda i: -fused[i])[:5]


def bench_retrieval(svc, sizes: list[int], questions: list[dict], n_q: int) -> dict[str, Any]:
    from core.retrieval import Retriever
    from core.store import Scope

    points = load_points(svc.store)
    points = [p for p in points if p.payload.get("live", True) is not False]
    qs = questions[:n_q]
    out: dict[str, Any] = {"source_points": len(points), "questions": len(qs), "sizes": {}}
    s = svc.settings
    for n in sizes:
        t = time.perf_counter()
        store = synthetic_store(points, n, svc.embedder.dim)
        build_s = time.perf_counter() - t
        retr = Retriever(store, svc.embedder, rrf_k=s.rrf_k, candidates=s.candidates,
                         dense_skip_scripts=s.dense_skip_scripts, dense_windows=s.dense_window_tokens > 0)
        res: dict[str, Any] = {"build_s": round(build_s, 1)}
        for scoped in (False, True):
            for mode in MODES:
                lat = []
                for q in qs:
                    scope = Scope(doc_names=[q["doc_name"]]) if scoped else Scope()
                    t = time.perf_counter()
                    retr.retrieve(q["question"], scope, 5, mode)
                    lat.append((time.perf_counter() - t) * 1000)
                res[f"{mode}{' scoped' if scoped else ''}"] = pct(lat)
        store.close()
        base = PythonBaseline(points, n, svc.embedder)
        for scoped in (False, True):
            lat = []
            for q in qs:
                t = time.perf_counter()
                base.search(q["question"], q["doc_name"] if scoped else None)
                lat.append((time.perf_counter() - t) * 1000)
            res[f"baseline python bm25+dense rrf{' scoped' if scoped else ''}"] = pct(lat)
        out["sizes"][str(n)] = res
        print(f"  retrieval at {n} chunks: hybrid P95 {res['hybrid']['p95']} ms, scoped {res['hybrid scoped']['p95']} ms, "
              f"python baseline {res['baseline python bm25+dense rrf']['p95']} ms", flush=True)
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


def bench_concurrency(data_dir: Path, questions: list[dict], seconds: float) -> dict[str, Any]:
    import httpx

    port = free_port()
    env = {**os.environ, "RAGAUDIT_DATA_DIR": str(data_dir), "RAGAUDIT_CACHE_TTL_S": "0",
           "RAGAUDIT_LLM_MODEL": "", "RAGAUDIT_DATABASE_URL": "", "RAGAUDIT_QDRANT_URL": ""}
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "api.app:create_app", "--factory", "--host", "127.0.0.1",
                             "--port", str(port), "--log-level", "warning"], cwd=ROOT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("API did not start")
            time.sleep(0.5)
        with httpx.Client(timeout=60) as c:  # warm up
            for q in questions[:3]:
                c.post(f"{base}/search", json={"question": q["question"]})
                c.post(f"{base}/query", json={"question": q["question"]})

        def run(clients: int) -> dict[str, Any]:
            lat: dict[str, list[float]] = defaultdict(list)
            errors = defaultdict(int)
            stop_at = time.monotonic() + seconds

            def client(idx: int) -> None:
                rnd = random.Random(idx)
                i = 0
                with httpx.Client(timeout=60) as c:
                    while time.monotonic() < stop_at:
                        q = rnd.choice(questions)["question"]
                        path = "/query" if i % 4 == 3 else "/search"
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
            return {"clients": clients, "seconds": round(wall, 1), "requests": n, "throughput_rps": round(n / wall, 2),
                    "errors": sum(errors.values()), "search_ms": pct(lat["/search"]), "query_ms": pct(lat["/query"])}

        single = run(1)
        print(f"  1 client: {single['throughput_rps']} req/s, /search P95 {single['search_ms']['p95']} ms", flush=True)
        eight = run(8)
        print(f"  8 clients: {eight['throughput_rps']} req/s, /search P95 {eight['search_ms']['p95']} ms, "
              f"errors {eight['errors']}", flush=True)
        return {"single": single, "eight": eight, "api_peak_rss_mb": vm_hwm_mb(proc.pid)}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


# --------------------------------------------------------------------------- report
def table(r: dict[str, Any]) -> str:
    m = r["machine"]
    lines = [f"ragaudit bench {r['date']} on {m['node']}: {m['cpus']} CPUs ({m['cpu']}), {m['memory_gb']} GB RAM, "
             f"load average at start {m['load_avg_at_start']}", ""]
    from .ingestion import ingestion_table

    lines += ingestion_table(r)
    ret = r.get("retrieval")
    if ret:
        keys = [*MODES, *(f"{m} scoped" for m in MODES), "baseline python bm25+dense rrf",
                "baseline python bm25+dense rrf scoped"]
        lines += ["| Retrieval-only P50 / P95 ms (query embedding included) | " +
                  " | ".join(f"{n} chunks" for n in ret["sizes"]) + " |",
                  "|---|" + "---|" * len(ret["sizes"])]
        for k in keys:
            lines.append(f"| {k} | " + " | ".join(f"{v[k]['p50']} / {v[k]['p95']}" for v in ret["sizes"].values()) + " |")
        lines.append("")
    con = r.get("concurrency")
    if con:
        lines += ["| API (uvicorn, /search + every 4th /query) | req/s | /search P50 / P95 ms | /query P50 / P95 ms | errors |",
                  "|---|---|---|---|---|"]
        for k in ("single", "eight"):
            c = con[k]
            lines.append(f"| {c['clients']} client(s), {c['seconds']} s | {c['throughput_rps']} | "
                         f"{c['search_ms']['p50']} / {c['search_ms']['p95']} | {c['query_ms']['p50']} / {c['query_ms']['p95']} | "
                         f"{c['errors']} |")
        lines.append("")
        lines.append(f"Peak RSS: API process {con['api_peak_rss_mb']} MB; bench process {r['bench_peak_rss_mb']} MB")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--pdfs", type=Path, default=Path(os.environ.get("RAGAUDIT_BENCH_PDFS", SHARED / "pdfs")),
                    help="folder of PDFs (default: the shared corpus)")
    ap.add_argument("--all", action="store_true", help="every PDF in the folder, not only those behind dev-001..039")
    ap.add_argument("--questions", type=int, default=20, help="questions per latency cell")
    ap.add_argument("--scale-50k", action="store_true", help="also measure retrieval at 50k chunks")
    ap.add_argument("--concurrency-seconds", type=float, default=20.0)
    ap.add_argument("--sizes", default="1000,10000", help="collection sizes (chunks) for the latency table")
    ap.add_argument("--skip", action="append", default=[], choices=["retrieval", "concurrency", "synthetic"])
    ap.add_argument("--synthetic-pages", type=int, default=2000, help="pages of the synthetic ingestion corpus "
                    "(made from the PDFs; one document of 615 pages)")
    ap.add_argument("--synthetic-floor-sample", type=float, default=0.1,
                    help="share of the synthetic corpus's embedded texts embedded for its floor (estimate)")
    ap.add_argument("--per-document", action="store_true",
                    help="also ingest the PDFs with one Dagster run per document (the upload path)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = ap.parse_args(argv)

    from core.services import get_services, release_services
    from core.settings import Settings

    pdfs = default_pdfs(args.pdfs, args.all)
    if not pdfs:
        sys.exit(f"no PDFs in {args.pdfs}")
    questions = [q for q in dev_questions() if (args.pdfs / q["doc_name"]).exists() and q["doc_name"] in
                 {p.name for p in pdfs}] or dev_questions()
    random.Random(0).shuffle(questions)
    result: dict[str, Any] = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "machine": machine(),
                              "pdfs": [p.name for p in pdfs]}
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{result['date'][:10]}-{re.sub(r'[^A-Za-z0-9_.-]', '_', platform.node())}.json"

    def save() -> str:  # after every section: an interrupted run keeps what it measured
        result["bench_peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        text = table(result)
        path.write_text(json.dumps({**result, "table": text}, indent=2))
        return text

    data_dir = Path(tempfile.mkdtemp(prefix="ragaudit-bench-"))
    try:
        from .ingestion import bench_bulk_ingestion, bench_synthetic

        print(f"1. ingestion of {len(pdfs)} PDFs", flush=True)
        result["ingestion"] = bench_bulk_ingestion(pdfs, data_dir)
        svc = get_services(Settings(_env_file=None, data_dir=data_dir, cache_ttl_s=0, llm_model=""))
        print("   naive baseline", flush=True)
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
            result["synthetic"] = bench_synthetic(pdfs, args.synthetic_pages, args.synthetic_floor_sample)
            save()
        if "retrieval" not in args.skip:
            print("2. retrieval latency", flush=True)
            sizes = [int(x) for x in args.sizes.split(",")] + ([50000] if args.scale_50k else [])
            result["retrieval"] = bench_retrieval(svc, sizes, questions, args.questions)
            save()
        release_services(svc.settings)  # frees the Qdrant folder for the API process
        if "concurrency" not in args.skip:
            print("3. concurrency", flush=True)
            result["concurrency"] = bench_concurrency(data_dir, questions, args.concurrency_seconds)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    text = save()
    print()
    print(text)
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()

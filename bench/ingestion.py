"""Ingestion rows of ``python -m bench``: the path of ``ragaudit ingest`` (one Dagster run for the
batch, ``ragaudit.ingest.bulk``: each PDF validated and extracted once in a bounded child process, ahead of
the one being embedded), its stage split, its embedding-only floor, and a synthetic ~2,000-page
corpus (made from the same PDFs with pypdf) measured in a subprocess for its peak memory.

``python -m bench.ingestion --pages 615`` alone: build one N-page PDF and report the time and
peak memory of ingesting it (this process + its parse children).

Stage times are self-times on their thread: ``validate`` and ``extract`` run in the parse child,
overlapped with the embedding of the previous file, so the stages add up to more than the wall
time; ``wait for parsing`` is the time the embedding thread sat idle waiting for the next file;
``dagster overhead`` is the run's wall time minus the time inside the op.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

if __package__:  # python -m bench.NAME: offline defaults, repository on sys.path (bench/_env.py)
    from ._env import ROOT, SHARED, need_corpus
else:  # python bench/NAME.py
    from _env import ROOT, SHARED, need_corpus


def peak_rss_mb() -> dict[str, float]:
    """Peak RSS (MB) of this process and of its largest waited-for child (Dagster's helper
    processes; the parse children are the forkserver's, reported by ``ragaudit.ingest.bulk`` instead)."""
    return {
        "process": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "largest_child": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
    }


class StageRSS:
    """This process's RSS sampled every ``every`` seconds on a daemon thread, each sample labelled
    with the stage the ingestion is in (the last ``status`` written by ``ragaudit.ingest.documents.set_progress``:
    extracting, chunking, embedding, indexing = count check + publish + gold pairs; ``waiting for
    parsing`` before the first). ``result()``:
    per stage in order of appearance, ``{"peak": MB, "end": MB}`` (its highest and its last sample),
    so a peak can be attributed to the stage that made it."""

    def __init__(self, every: float = 0.01):
        self.every, self.label = every, "waiting for parsing"
        self.stages: dict[str, list[float]] = {}
        self._stop = threading.Event()
        self._page = os.sysconf("SC_PAGE_SIZE")
        self._thread = threading.Thread(target=self._run, name="bench-rss", daemon=True)

    def rss_mb(self) -> float:
        with open("/proc/self/statm") as f:  # resident pages; cheaper than psutil at 100 Hz
            return int(f.read().split()[1]) * self._page / 2**20

    def listener(self, document_id: str | None, values: dict[str, Any]) -> None:
        if document_id is not None and values.get("status"):
            self.label = str(values["status"])

    def _run(self) -> None:
        while not self._stop.is_set():
            r = self.rss_mb()
            st = self.stages.setdefault(self.label, [r, r])
            st[0], st[1] = max(st[0], r), r
            self._stop.wait(self.every)

    def __enter__(self) -> "StageRSS":
        from ragaudit.ingest.documents import add_progress_listener

        add_progress_listener(self.listener)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        from ragaudit.ingest.documents import remove_progress_listener

        self._stop.set()
        self._thread.join()
        remove_progress_listener(self.listener)

    def result(self) -> dict[str, dict[str, float]]:
        return {k: {"peak": round(v[0], 1), "end": round(v[1], 1)} for k, v in self.stages.items()}


@contextlib.contextmanager
def capture_embedded(texts: list[str]):
    """Record every text handed to ``Embedder.embed`` (to embed exactly them again for the floor)."""
    import ragaudit.index.embedding

    orig = ragaudit.index.embedding.Embedder.embed

    def embed(self, batch):
        texts.extend(batch)
        return orig(self, batch)

    ragaudit.index.embedding.Embedder.embed = embed
    try:
        yield
    finally:
        ragaudit.index.embedding.Embedder.embed = orig


def embedding_floor(embedder, texts: list[str], sample: float = 1.0, seed: int = 0) -> dict[str, Any]:
    """Seconds of ONE batched ``encode`` of ``texts`` (the CPU floor of what ingestion embedded).
    With ``sample`` < 1 a seeded random sample of that share is embedded and the time scaled by
    ``len(texts) / len(sample)`` (reported as an estimate)."""
    chosen = texts if sample >= 1 else random.Random(seed).sample(texts, max(1, round(len(texts) * sample)))
    t = time.perf_counter()
    embedder.embed(list(chosen))
    secs = time.perf_counter() - t
    scale = len(texts) / len(chosen) if chosen else 1.0
    return {
        "seconds": round(secs * scale, 2),
        "texts": len(texts),
        "embedded_for_floor": len(chosen),
        "estimated": sample < 1,
    }


def bench_bulk_ingestion(pdfs: list[Path], data_dir: Path, *, floor_sample: float = 1.0) -> dict[str, Any]:
    """Ingest ``pdfs`` as ``ragaudit ingest`` does (``ragaudit.pipelines.runner.run_bulk``) into a fresh
    ``data_dir``; returns pages/s, chunks/s, the stage split (s) and the embedding floor."""
    from ragaudit.ingest.bulk import BulkFile
    from ragaudit.pipelines.runner import run_bulk
    from ragaudit.platform.settings import Settings
    from ragaudit.services import get_services

    settings = Settings(_env_file=None, data_dir=data_dir, cache_ttl_s=0, llm_model="")
    svc = get_services(settings)
    svc.embedder.embed(["warm up"])
    _ = svc.engine
    import psutil

    # this process with the model loaded and warm, the store and SQL open: what ingestion adds is
    # the peak minus this (the document's share of this process's peak)
    rss_ready = round(psutil.Process().memory_info().rss / 2**20, 1)
    texts: list[str] = []
    timings: dict[str, float] = {}
    per_doc: list[dict[str, Any]] = []

    def done(_: int, out) -> None:
        d = out.document or {}
        per_doc.append(
            {
                "pdf": out.doc_name,
                "status": out.status,
                "seconds": round(out.seconds, 2),
                "pages": d.get("pages", 0),
                "chunks": d.get("chunk_count", 0),
            }
        )
        print(f"  {out.status} {out.doc_name}: {d.get('pages')} pages, {d.get('chunk_count')} chunks", flush=True)

    t = time.perf_counter()
    with capture_embedded(texts), StageRSS() as stage_rss:
        run_bulk(svc, [BulkFile(p, p.name) for p in pdfs], on_outcome=done, timings=timings)
    total = time.perf_counter() - t
    pages = sum(d["pages"] or 0 for d in per_doc)
    chunks = sum(d["chunks"] or 0 for d in per_doc)
    inside = timings.pop("bulk wall", total)
    child_rss = round(timings.pop("parse child peak rss mb", 0.0), 1)
    stages = {k: round(v, 2) for k, v in timings.items()}
    stages["dagster overhead"] = round(total - inside, 2)
    rss = peak_rss_mb()  # before the floor's own encode
    floor = embedding_floor(svc.embedder, texts, floor_sample)
    return {
        "path": "ragaudit ingest (one Dagster run, parsing overlapped with embedding)",
        "documents": per_doc,
        "pages": pages,
        "chunks": chunks,
        "seconds": round(total, 2),
        "pages_per_s": round(pages / total, 2),
        "chunks_per_s": round(chunks / total, 2),
        "stages_s": stages,
        "embedded_texts": len(texts),
        "embedding_floor_s": floor["seconds"],
        "embedding_floor": floor,
        "ratio_to_floor": round(total / floor["seconds"], 2) if floor["seconds"] else None,
        "peak_rss_mb": {
            **rss,
            "parse_child": child_rss,
            "process_ready": rss_ready,
            "process_growth": round(rss["process"] - rss_ready, 1),
            "process_by_stage": stage_rss.result(),
        },
        "load_avg_after": [round(x, 2) for x in os.getloadavg()],
    }


def concatenate(sources: list[Path], pages: int, out: Path) -> int:
    """Write ``out``: the pages of ``sources`` in order, repeated, up to ``pages`` pages (pypdf;
    PDFs encrypted with an empty user password are decrypted). Returns the page count written."""
    from pypdf import PdfReader, PdfWriter

    readers = []
    for s in sources:
        r = PdfReader(str(s), strict=False)
        if r.is_encrypted:
            r.decrypt("")
        readers.append(r)
    w = PdfWriter()
    n = 0
    while n < pages:
        for r in readers:
            for p in r.pages:
                if n >= pages:
                    break
                w.add_page(p)
                n += 1
    with out.open("wb") as f:
        w.write(f)
    return n


def synthetic_corpus(pdfs: list[Path], pages: int, folder: Path, big_pages: int = 615) -> list[Path]:
    """About ``pages`` pages made from ``pdfs``: documents of one pass over ``pdfs`` each (their
    page count), then one ``big_pages``-page document (the large-PDF case), in that order.

    The large document goes last: ``ragaudit ingest`` handles files in the given order, and a
    615-page file first leaves the model idle for its whole parse (~100 s on the 2-core bench
    machine, reported as ``wait for parsing``); behind the others it is parsed while they are embedded.
    The wait for a first file's parse is what the 9-PDF row measures."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    big = min(big_pages, pages)
    one_pass = 0
    for p in pdfs:
        from pypdf import PdfReader

        r = PdfReader(str(p), strict=False)
        if r.is_encrypted:
            r.decrypt("")
        one_pass += len(r.pages)
    rest = max(0, pages - big)
    for i in range(math.ceil(rest / one_pass) if one_pass else 0):
        n = min(one_pass, rest - i * one_pass)
        path = folder / f"synthetic-{i + 1:02d}.pdf"
        concatenate(pdfs, n, path)
        out.append(path)
    if big:
        concatenate(pdfs, big, folder / f"synthetic-{big}p.pdf")
        out.append(folder / f"synthetic-{big}p.pdf")
    return out


def run_isolated(pdfs: list[Path], floor_sample: float) -> dict[str, Any]:
    """``bench_bulk_ingestion`` in a fresh interpreter (its peak RSS is the ingestion's alone)."""
    with tempfile.TemporaryDirectory(prefix="ragaudit-bench-ing-") as tmp:
        res = Path(tmp) / "result.json"
        cmd = [
            sys.executable,
            "-m",
            "bench.ingestion",
            "--run",
            "--floor-sample",
            str(floor_sample),
            "--json",
            str(res),
            *map(str, pdfs),
        ]
        subprocess.run(cmd, cwd=ROOT, check=True)
        return json.loads(res.read_text())


def bench_synthetic(pdfs: list[Path], pages: int, floor_sample: float) -> dict[str, Any]:
    """The synthetic ~``pages``-page corpus (``synthetic_corpus``) through ``bench_bulk_ingestion``
    in a subprocess; ``floor_sample`` of the embedded texts is embedded for the floor estimate."""
    with tempfile.TemporaryDirectory(prefix="ragaudit-bench-synth-") as tmp:
        files = synthetic_corpus(pdfs, pages, Path(tmp) / "pdfs")
        out = run_isolated(files, floor_sample)
    out["corpus"] = f"{len(files)} PDFs made from {len(pdfs)} corpus PDFs (the last one of 615 pages)"
    return out


def ingestion_table(r: dict[str, Any]) -> list[str]:
    """Markdown lines of the ingestion rows of a bench result ``r`` (``ingestion``, ``naive``,
    optional ``ingestion_per_document`` and ``synthetic``)."""
    ing, nai = r.get("ingestion"), r.get("naive")
    if not (ing and nai):
        return []
    per_page_naive = nai["seconds"] / nai["pages"] if nai["pages"] else 0.0

    def row(label: str, x: dict[str, Any]) -> str:
        rss = x.get("peak_rss_mb") or {}
        grew = f" (+{rss['process_growth']} over {rss['process_ready']} ready)" if "process_growth" in rss else ""
        mem = f"{rss['process']}{grew} / {rss.get('parse_child', '?')}" if rss else ""
        return (
            f"| {label} | {x['pages']} | {x['chunks']} | {x['seconds']} | {x['pages_per_s']} | "
            f"{x.get('chunks_per_s', '')} | {x['embedding_floor_s']} ({x['embedded_texts']} texts"
            f"{', estimated from a sample' if (x.get('embedding_floor') or {}).get('estimated') else ''}) | "
            f"{x['ratio_to_floor']}x | {round(x['seconds'] / (per_page_naive * x['pages']), 2) if x['pages'] else ''}x"
            f" | {mem} |"
        )

    lines = [
        "| Ingestion | pages | chunks | seconds | pages/s | chunks/s | embedding floor s | / floor | / naive | "
        "peak RSS MB (process / parse child) |",
        "|---|---|---|---|---|---|---|---|---|---|",
        row("ragaudit ingest (end to end)", ing),
    ]
    if r.get("ingestion_per_document"):
        row_pd = r["ingestion_per_document"]
        lines.append(
            f"| ragaudit, one Dagster run per document (upload path) | {row_pd['pages']} | {row_pd['chunks']} | "
            f"{row_pd['seconds']} | {row_pd['pages_per_s']} | {row_pd['chunks_per_s']} | "
            f"{row_pd['embedding_floor_s']} | {row_pd['ratio_to_floor']}x | "
            f"{round(row_pd['seconds'] / nai['seconds'], 2)}x | |"
        )
    lines.append(
        f"| naive baseline (same run) | {nai['pages']} | {nai['windows']} windows | {nai['seconds']} | "
        f"{nai['pages_per_s']} | | | | 1x | |"
    )
    syn = r.get("synthetic")
    if syn:
        lines.append(row(f"synthetic corpus: {syn.get('corpus', '')}", syn))
    lines += [
        "",
        "ragaudit / naive on the synthetic corpus uses the naive pipeline's seconds per page of this run "
        "(the synthetic pages are these PDFs' pages).",
        "",
        "Stages (s; validate and extract run in the parse child, overlapped): "
        + ", ".join(f"{k} {v}" for k, v in sorted(ing["stages_s"].items(), key=lambda kv: -kv[1])),
        "Naive stages (s): " + ", ".join(f"{k} {v}" for k, v in nai["stages_s"].items()),
    ]
    if syn:
        lines.append(
            "Synthetic corpus stages (s): "
            + ", ".join(f"{k} {v}" for k, v in sorted(syn["stages_s"].items(), key=lambda kv: -kv[1]))
        )
    return lines + [""]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.ingestion", description=__doc__.split("\n\n")[0])
    ap.add_argument("pdfs", nargs="*", type=Path)
    ap.add_argument("--run", action="store_true", help="ingest the given PDFs (used by the bench's subprocess)")
    ap.add_argument(
        "--pages", type=int, default=0, help="build one PDF of this many pages from the corpus and ingest it"
    )
    ap.add_argument("--floor-sample", type=float, default=1.0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ragaudit-bench-") as tmp:
        pdfs = args.pdfs
        if args.pages:
            from bench.__main__ import default_pdfs

            need_corpus(SHARED / "pdfs")
            src = default_pdfs(SHARED / "pdfs", all_pdfs=True)
            pdfs = [Path(tmp) / f"big-{args.pages}p.pdf"]
            concatenate(src, args.pages, pdfs[0])
        out = bench_bulk_ingestion(pdfs, Path(tmp) / "data", floor_sample=args.floor_sample)
    from ragaudit.services import release_services  # noqa: F401  (services die with the process)

    text = json.dumps(out, indent=2)
    if args.json:
        args.json.write_text(text)
    else:
        print(text)


if __name__ == "__main__":
    main()

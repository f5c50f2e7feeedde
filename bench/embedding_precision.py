"""Embedding model precision on this CPU: fp32 as shipped against int8 dynamic quantization of its
Linear layers (torch ``quantize_dynamic``; ``quantize``), on real texts, in one process and one run:

    .venv/bin/python -m bench.embedding_precision [--reps 3] [--threads 1,2] [--windows 400]
        [--questions 40] [--candidates int8,int8_per_tensor,int8_no_ffn_out] [--out DIR]

- the texts ingestion embeds for the bench's 9 PDFs (those behind the first 39 dev questions: the sentence
  windows of every chunk with its context header, made by ``ragaudit.ingest.documents.embed_windows`` itself;
  the ``embedding floor`` of ``python -m bench``; a seeded sample of ``--windows`` of them, all
  with 0), embedded with ``Embedder.embed`` as ingestion does;
- dev-set questions (a seeded sample of ``--questions``) as queries: one at a time
  (``/search``'s single client) and in batches of 8 (what ``embed_query`` combines under 8
  concurrent clients).

Variants (``quantize``): ``int8`` (per-channel weight scales), ``int8_per_tensor``,
``int8_no_ffn_out``.

Each repetition times every precision back to back, the order alternating between repetitions
(so a load change on the shared machine hits both alike), at each intra-op thread count. Printed:
median seconds / ms per precision and the ratio fp32 / candidate measured in the same run;
vector agreement (cosine of each candidate vector with the fp32 vector of the same text: min,
1st percentile, mean; fp32 at 1 vs 2 threads as the noise floor); top-10 windows per question
shared with fp32. Retrieval and answer quality: ``bench/answer_quality.py`` with every embedding
made by the same variant:

    .venv/bin/python -m bench.embedding_precision --answer-quality int8 -- --data FRESH_DIR
        --save RUN.json --compare BASE.json

(docs/evaluation.md, design choices). Writes ``bench/results/<date>-<machine>-embedding-precision.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

if __package__:  # python -m bench.NAME: offline defaults, repository on sys.path (bench/_env.py)
    from ._env import ROOT, SHARED, need_corpus
else:  # python bench/NAME.py
    from _env import ROOT, SHARED, need_corpus

import numpy as np  # noqa: E402


class _Recorder:
    """Stands in for the embedder inside ``embed_windows`` only to collect the texts it would
    embed (tokenizer calls go to the real model's tokenizer); the vectors it returns are unused."""

    def __init__(self, embedder):
        self._e = embedder
        self.dim = embedder.dim
        self.texts: list[str] = []

    def __getattr__(self, name: str):
        return getattr(self._e, name)

    def embed(self, texts: list[str]) -> np.ndarray:
        self.texts.extend(texts)
        return np.zeros((len(texts), self.dim), dtype=np.float32)


def window_texts(pdfs: list[Path], embedder) -> list[str]:
    """The texts ingestion embeds for ``pdfs`` under the default settings: pages as
    ``ragaudit.ingest.pdf.extract_pages`` reads them, chunks of ``chunk_document`` (default strategy and
    budgets), windows with their headers as ``ragaudit.ingest.documents.embed_windows`` builds them."""
    from ragaudit.ingest.chunking import chunk_document, document_title
    from ragaudit.ingest.documents import DEFAULT_STRATEGY, embed_windows
    from ragaudit.ingest.pdf import extract_pages
    from ragaudit.platform.settings import Settings

    st = Settings(_env_file=None)
    rec = _Recorder(embedder)
    svc = SimpleNamespace(embedder=rec, settings=st)
    for p in pdfs:
        pages = extract_pages(p.read_bytes())
        chunks = chunk_document(
            pages,
            embedder,
            document_title(p.name, pages),
            DEFAULT_STRATEGY,
            st.chunk_max_tokens,
            st.chunk_overlap_sentences,
            embedder=embedder,
            overlap_fraction=st.chunk_overlap_fraction,
            atomic_units=st.chunk_atomic_units,
        )
        embed_windows(svc, chunks)
    return rec.texts


def _pct(values: list[float]) -> dict[str, float]:
    a = np.asarray(values, dtype=float)
    return {
        "p50": round(float(np.percentile(a, 50)), 2),
        "p95": round(float(np.percentile(a, 95)), 2),
        "mean": round(float(a.mean()), 2),
        "n": len(values),
    }


def _agreement(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """Cosine per row of two (n, d) unit-row matrices: min, 1st percentile, mean."""
    cos = np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return {
        "min": round(float(cos.min()), 5),
        "p01": round(float(np.percentile(cos, 1)), 5),
        "mean": round(float(cos.mean()), 5),
        "n": int(len(cos)),
    }


def _top10_overlap(q_ref: np.ndarray, w_ref: np.ndarray, q_new: np.ndarray, w_new: np.ndarray) -> dict[str, float]:
    """Per question, the share of its top-10 windows by fp32 (brute-force dot over all windows)
    that are also in the candidate's top 10; and how often the top-1 window is the same."""
    ref = np.argsort(-(q_ref @ w_ref.T), axis=1)[:, :10]
    new = np.argsort(-(q_new @ w_new.T), axis=1)[:, :10]
    shared = [len(set(r) & set(n)) / 10 for r, n in zip(ref, new)]
    return {
        "mean_shared_top10": round(float(np.mean(shared)), 4),
        "min_shared_top10": round(float(np.min(shared)), 2),
        "same_top1": round(float(np.mean(ref[:, 0] == new[:, 0])), 4),
        "questions": int(len(ref)),
    }


VARIANTS = ("fp32", "int8", "int8_per_tensor", "int8_no_ffn_out")


def quantize(model, variant: str):
    """Quantize ``model``'s Linear layers in place for ``variant`` and return it (eager-mode dynamic
    quantization, ``torch.ao.quantization.quantize_dynamic``: int8 weights, activations quantized
    per call per tensor, int8 matrix products by the quantized engine, fbgemm / x86 here;
    deprecated in favour of torchao but shipped in the installed torch; Zafrir et al., "Q8BERT",
    2019). ``int8``: every Linear, one weight scale per output channel; ``int8_per_tensor``: every
    Linear, one weight scale per layer; ``int8_no_ffn_out``: per-channel, every Linear but each
    layer's FFN output projection (its input, the GELU output, has the widest range)."""
    import warnings

    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the torch.ao deprecation notice
        from torch.ao.quantization import default_dynamic_qconfig, per_channel_dynamic_qconfig, quantize_dynamic

        linears = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
        if variant == "int8":
            spec: Any = {n: per_channel_dynamic_qconfig for n in linears}
        elif variant == "int8_per_tensor":
            spec = {n: default_dynamic_qconfig for n in linears}
        elif variant == "int8_no_ffn_out":
            spec = {
                n: per_channel_dynamic_qconfig
                for n in linears
                if not (n.endswith("output.dense") and "attention" not in n)
            }
        else:
            raise ValueError(f"unknown variant {variant!r}: one of {VARIANTS[1:]}")
        return quantize_dynamic(model, spec, dtype=torch.qint8, inplace=True)


def load_variant(name: str):
    """The bundled model as ``ragaudit.index.embedding.Embedder`` loads it on the torch backend (the int8
    variants quantize torch's Linear layers), then ``quantize``d unless ``name`` is ``fp32``.
    Raises ``ValueError`` for an unknown name."""
    from ragaudit.index.embedding import Embedder

    if name not in VARIANTS:
        raise ValueError(f"unknown variant {name!r}: one of {VARIANTS}")
    e = Embedder(backend="torch")
    if name != "fp32":
        quantize(e.model, name)
    e.variant = name
    return e


def answer_quality(variant: str, argv: list[str]) -> int:
    """``bench/answer_quality.py`` with ``argv`` (its own options: ``--data`` a fresh folder,
    ``--save``, ``--compare``...), every embedding of the run (ingestion and questions) made by
    ``variant``: the shared embedder of the bundled model is replaced before anything loads it."""
    import ragaudit.services
    from bench import answer_quality as aq

    emb = load_variant(variant)
    orig = ragaudit.services.shared_embedder
    ragaudit.services.shared_embedder = lambda model, batch_size=32, *a: (
        emb if model == "bundled:all-MiniLM-L6-v2" else orig(model, batch_size, *a)
    )
    sys.argv = ["bench/answer_quality.py", *argv]
    return aq.main()


def measure(
    embedders: dict[str, Any], texts: list[str], questions: list[str], threads: list[int], reps: int
) -> dict[str, Any]:
    """Per thread count and precision: seconds of ``embed(texts)`` and ms per single / batch-of-8
    question embedding, ``reps`` times (order alternating). Returns timings and the vectors of
    the last repetition per (threads, precision)."""
    import torch

    names = list(embedders)
    out: dict[str, Any] = {}
    vectors: dict[tuple[int, str], tuple[np.ndarray, np.ndarray]] = {}
    for t in threads:
        torch.set_num_threads(t)
        for e in embedders.values():
            e.threads = t  # Embedder restores its default thread count after each call: make it t
        cell = {n: {"windows_s": [], "query_single_ms": [], "query_batch8_ms": []} for n in names}
        for rep in range(reps):
            for n in names if rep % 2 == 0 else names[::-1]:
                e = embedders[n]
                t0 = time.perf_counter()
                w = e.embed(texts)
                cell[n]["windows_s"].append(round(time.perf_counter() - t0, 3))
                qv = []
                for q in questions:
                    t0 = time.perf_counter()
                    qv.append(e.embed([q])[0])
                    cell[n]["query_single_ms"].append((time.perf_counter() - t0) * 1000)
                for i in range(0, len(questions) - 7, 8):
                    t0 = time.perf_counter()
                    e.embed(questions[i : i + 8])
                    cell[n]["query_batch8_ms"].append((time.perf_counter() - t0) * 1000)
                vectors[(t, n)] = (w, np.asarray(qv))
                print(
                    f"  threads={t} rep={rep + 1} {n}: windows {cell[n]['windows_s'][-1]:.1f} s, load "
                    f"{os.getloadavg()[0]:.2f}",
                    flush=True,
                )
        res: dict[str, Any] = {}
        for n in names:
            c = cell[n]
            res[n] = {
                "windows_s": c["windows_s"],
                "windows_s_median": float(np.median(c["windows_s"])),
                "texts_per_s": round(len(texts) / float(np.median(c["windows_s"])), 1),
                "query_single_ms": _pct(c["query_single_ms"]),
                "query_batch8_ms": _pct(c["query_batch8_ms"]),
            }
        for n in names[1:]:
            r = res[n]
            r["speedup_vs_fp32"] = {
                "windows": round(res["fp32"]["windows_s_median"] / r["windows_s_median"], 2),
                "windows_per_rep": [round(a / b, 2) for a, b in zip(cell["fp32"]["windows_s"], cell[n]["windows_s"])],
                "query_single_p50": round(res["fp32"]["query_single_ms"]["p50"] / r["query_single_ms"]["p50"], 2),
                "query_single_p95": round(res["fp32"]["query_single_ms"]["p95"] / r["query_single_ms"]["p95"], 2),
                "query_batch8_p50": round(res["fp32"]["query_batch8_ms"]["p50"] / r["query_batch8_ms"]["p50"], 2),
                "query_batch8_p95": round(res["fp32"]["query_batch8_ms"]["p95"] / r["query_batch8_ms"]["p95"], 2),
            }
        out[f"threads_{t}"] = res
    return {"timings": out, "vectors": vectors}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pdfs", type=Path, default=SHARED / "pdfs")
    ap.add_argument("--dataset", type=Path, default=SHARED / "dev_questions.jsonl")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", default="1,2", help="intra-op thread counts, comma list")
    ap.add_argument(
        "--candidates",
        default="int8,int8_per_tensor,int8_no_ffn_out",
        help=f"variants compared with fp32, comma list of {VARIANTS[1:]}",
    )
    ap.add_argument(
        "--windows",
        type=int,
        default=400,
        help="seeded random sample of the window texts timed and compared (0 = all; all ~1,600 take ~4x longer)",
    )
    ap.add_argument("--questions", type=int, default=40, help="seeded random sample of the dev questions (0 = all 85)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    ap.add_argument(
        "--answer-quality",
        metavar="VARIANT",
        choices=VARIANTS,
        help="instead: run bench/answer_quality.py with this variant; the options after -- are its own",
    )
    argv = sys.argv[1:]
    rest: list[str] = []
    if "--" in argv:
        argv, rest = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    args = ap.parse_args(argv)
    if args.answer_quality:
        return answer_quality(args.answer_quality, rest)
    need_corpus(args.pdfs, args.dataset)
    import torch

    from bench.__main__ import default_pdfs, machine
    from ragaudit.evaluate.evaluation import load_dataset

    load_start = os.getloadavg()
    pdfs = default_pdfs(args.pdfs, False)
    embedders = {"fp32": load_variant("fp32")}
    for c in [c.strip() for c in args.candidates.split(",") if c.strip()]:
        embedders[c] = load_variant(c)
    t0 = time.perf_counter()
    all_texts = window_texts(pdfs, embedders["fp32"])
    texts = all_texts
    if 0 < args.windows < len(all_texts):
        texts = random.Random(0).sample(all_texts, args.windows)
    print(
        f"{len(all_texts)} window texts from {len(pdfs)} PDFs ({time.perf_counter() - t0:.0f} s to extract and "
        f"chunk); {len(texts)} timed"
    )
    questions = [q.question for q in load_dataset(args.dataset)]
    if 0 < args.questions < len(questions):
        questions = random.Random(0).sample(questions, args.questions)
    for e in embedders.values():
        e.embed(["warm up", "warm up the model once"])
    threads = [int(x) for x in args.threads.split(",")]
    m = measure(embedders, texts, questions, threads, args.reps)
    vec = m["vectors"]
    agreement: dict[str, Any] = {}
    t_ref = max(threads)
    w32, q32 = vec[(t_ref, "fp32")]
    if len(threads) > 1:
        w1, q1 = vec[(min(threads), "fp32")]
        agreement["fp32_1_vs_2_threads (noise floor)"] = {
            "windows": _agreement(w1, w32),
            "questions": _agreement(q1, q32),
        }
    for n in list(embedders)[1:]:
        w, q = vec[(t_ref, n)]
        agreement[f"{n}_vs_fp32"] = {
            "windows": _agreement(w, w32),
            "questions": _agreement(q, q32),
            "top10_windows_per_question": _top10_overlap(q32, w32, q, w),
        }
    result = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine(),
        "load_avg_at_start": [round(x, 2) for x in load_start],
        "load_avg_at_end": [round(x, 2) for x in os.getloadavg()],
        "torch": torch.__version__,
        "quantized_engine": torch.backends.quantized.engine,
        "pdfs": [p.name for p in pdfs],
        "window_texts_ingested": len(all_texts),
        "window_texts": len(texts),
        "window_sample_seed": 0,
        "questions": len(questions),
        "reps": args.reps,
        "timings": m["timings"],
        "agreement": agreement,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = (
        args.out / f"{result['date'][:10]}-{re.sub(r'[^A-Za-z0-9_.-]', '_', platform.node())}-embedding-precision.json"
    )
    path.write_text(json.dumps(result, indent=1))
    print(table(result))
    print(f"\nwritten to {path}")
    return 0


def table(r: dict[str, Any]) -> str:
    """Markdown table of ``main``'s result: per thread count and precision, medians and ratios."""
    lines = [
        f"load average at start {r['load_avg_at_start']}, at end {r['load_avg_at_end']}; "
        f"{r['window_texts']} of the {r['window_texts_ingested']} window texts ingestion embeds (seeded sample), "
        f"{r['questions']} questions, {r['reps']} repetitions",
        "",
        "| threads | precision | windows s (median) | texts/s | × fp32 | query 1 P50 / P95 ms | × fp32 P50 | "
        "query batch of 8 P50 / P95 ms | × fp32 P50 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for tk, res in r["timings"].items():
        for n, x in res.items():
            s = x.get("speedup_vs_fp32", {})
            lines.append(
                f"| {tk.split('_')[1]} | {n} | {x['windows_s_median']:.1f} | {x['texts_per_s']} | "
                f"{s.get('windows', 1.0)}× | {x['query_single_ms']['p50']} / {x['query_single_ms']['p95']} | "
                f"{s.get('query_single_p50', 1.0)}× | {x['query_batch8_ms']['p50']} / "
                f"{x['query_batch8_ms']['p95']} | {s.get('query_batch8_p50', 1.0)}× |"
            )
    lines += ["", "| vectors | texts | cosine min | cosine 1st pct | cosine mean |", "|---|---|---|---|---|"]
    for k, a in r["agreement"].items():
        for what in ("windows", "questions"):
            lines.append(f"| {k}, {what} | {a[what]['n']} | {a[what]['min']} | {a[what]['p01']} | {a[what]['mean']} |")
        if "top10_windows_per_question" in a:
            t = a["top10_windows_per_question"]
            lines.append(
                f"| {k}: top-10 windows per question shared with fp32 | {t['questions']} | "
                f"min {t['min_shared_top10']} | same top-1 {t['same_top1']} | {t['mean_shared_top10']} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())

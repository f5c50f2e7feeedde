"""Model threads while a parse child holds a core: ``python -m bench.parse_overlap [--rounds N]``.

Alternating rounds of a fixed length: this process embeds 64-text groups of sentence windows
(``window_spans`` of 64 word pieces over the extracted text of ``--pdf``) while a bounded parse
child (``ragaudit.ingest.guard.run_bounded(extract_pages)``) parses the same PDF over and over, with

- **A**: the model at its default thread count (it contends with the child for the two cores),
- **B**: one thread fewer while the child runs (``ragaudit.index.embedding.cores_busy``, what ``ragaudit.ingest.bulk`` does).

Prints texts embedded per second and pages parsed per second per configuration (means over the
rounds, each round with the load average): B is better when it parses more without embedding
correspondingly less. Alternating A/B keeps a drifting machine load from favouring one of them.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from pathlib import Path

if __package__:  # python -m bench.NAME: offline defaults, repository on sys.path (bench/_env.py)
    from ._env import SHARED, need_corpus
else:  # python bench/NAME.py
    from _env import SHARED, need_corpus


def main(argv: list[str] | None = None) -> dict:
    from ragaudit.index.embedding import Embedder, cores_busy
    from ragaudit.ingest.guard import run_bounded
    from ragaudit.ingest.pdf import extract_pages
    from ragaudit.text.sentences import window_spans

    ap = argparse.ArgumentParser(prog="python -m bench.parse_overlap", description=__doc__.split("\n\n")[0])
    ap.add_argument("--pdf", type=Path, default=SHARED / "pdfs" / "dmca.pdf")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=12.0, help="length of one round")
    args = ap.parse_args(argv)
    need_corpus(args.pdf)
    emb = Embedder()
    data = args.pdf.read_bytes()
    texts = [p.text[a:b] for p in extract_pages(data) for a, b in window_spans(p.text, emb, 64) if p.text.strip()]
    emb.embed(texts[:8])
    run_bounded(len, (b"x",), timeout_s=60, memory_mb=3000)  # the forkserver is up before timing
    res: dict[str, list] = {"A: default threads": [], "B: one thread fewer while parsing": []}
    for _ in range(args.rounds):
        for cfg in res:
            stop, pages = threading.Event(), [0]

            def parse(stop=stop, pages=pages) -> None:
                while not stop.is_set():
                    pages[0] += len(run_bounded(extract_pages, (data,), timeout_s=600, memory_mb=3000))

            th = threading.Thread(target=parse)
            th.start()
            t0, n, i = time.perf_counter(), 0, 0
            while time.perf_counter() - t0 < args.seconds:
                group = texts[i : i + 64] or texts[:64]
                i = (i + 64) % max(1, len(texts))
                if cfg.startswith("B"):
                    with cores_busy():
                        emb.embed(group)
                else:
                    emb.embed(group)
                n += len(group)
            stop.set()
            th.join()
            wall = time.perf_counter() - t0
            res[cfg].append(
                {
                    "texts_per_s": round(n / wall, 2),
                    "pages_per_s": round(pages[0] / wall, 3),
                    "load_avg_1m": round(os.getloadavg()[0], 2),
                }
            )
            print(cfg, res[cfg][-1], flush=True)
    out = {
        cfg: {
            "texts_per_s": round(sum(r["texts_per_s"] for r in v) / len(v), 2),
            "pages_per_s": round(sum(r["pages_per_s"] for r in v) / len(v), 3),
            "rounds": v,
        }
        for cfg, v in res.items()
    }
    print(json.dumps({k: {kk: vv for kk, vv in v.items() if kk != "rounds"} for k, v in out.items()}, indent=1))
    return out


if __name__ == "__main__":
    main()

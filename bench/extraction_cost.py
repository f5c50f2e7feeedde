"""CPU cost of ``ragaudit.ingest.pdf.extract_pages`` per page, on two checkouts back to back (issue 11: the
parse child's CPU is the remaining lever of ingestion on 2 cores).

    python -m bench.extraction_cost --base /path/to/base/checkout --reps 2 --out result.json

Each rep runs, in a fresh interpreter per checkout (its own ``ragaudit.ingest.pdf``), ``extract_pages`` on
the bench's PDFs (``bench.__main__.default_pdfs``: the 9 behind the first 39 dev questions) and reports the
process CPU seconds (``time.process_time``: less sensitive than wall time to other processes on a
shared machine) and wall seconds per PDF. Base and branch alternate within each rep, so both see
the same load; the load average is recorded before and after.

``--e2e``: instead, per checkout, ``bench.ingestion.bench_bulk_ingestion`` on the same PDFs (the
path of ``ragaudit ingest``, with its embedding-only floor) followed by ``bench.__main__.bench_naive``
in the same process, as ``python -m bench`` does: the ratios to floor and to naive of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

if __package__:  # python -m bench.NAME: offline defaults, repository on sys.path (bench/_env.py)
    from ._env import ROOT, SHARED, need_corpus
else:  # python bench/NAME.py
    from _env import ROOT, SHARED, need_corpus

CHILD = r"""
import json, sys, time
sys.path.insert(0, '.')
from ragaudit.ingest.pdf import extract_pages
out = {}
for path in sys.argv[1:]:
    data = open(path, 'rb').read()
    c, w = time.process_time(), time.perf_counter()
    pages = extract_pages(data)
    out[path.rsplit('/', 1)[-1]] = {"pages": len(pages), "cpu_s": time.process_time() - c,
                                    "wall_s": time.perf_counter() - w}
print(json.dumps(out))
"""


E2E = r"""
import json, os, sys, tempfile
sys.path.insert(0, '.')
from pathlib import Path
from bench.ingestion import bench_bulk_ingestion
from bench.__main__ import bench_naive
from ragaudit.platform.settings import Settings
from ragaudit.services import get_services
pdfs = [Path(p) for p in sys.argv[1:]]
data = Path(tempfile.mkdtemp(prefix="ragaudit-bench-"))
ing = bench_bulk_ingestion(pdfs, data)
svc = get_services(Settings(_env_file=None, data_dir=data, cache_ttl_s=0, llm_model=""))
nai = bench_naive(pdfs, svc.embedder)
print(json.dumps({"ingestion": ing, "naive": nai, "ratio_to_floor": ing["ratio_to_floor"],
                  "ratio_to_naive": round(ing["seconds"] / nai["seconds"], 2)}))
os._exit(0)
"""


def run(root: Path, pdfs: list[Path], code: str = CHILD) -> dict:
    env = {
        **os.environ,
        "PYTHONDONTWRITEBYTECODE": "1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    res = subprocess.run(
        [sys.executable, "-c", code, *map(str, pdfs)], cwd=root, env=env, check=True, capture_output=True, text=True
    )
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    from bench.__main__ import default_pdfs

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, required=True, help="checkout of the base commit")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--e2e", action="store_true", help="end to end ingestion + naive baseline per checkout")
    args = ap.parse_args()
    need_corpus(SHARED / "pdfs")
    pdfs = default_pdfs(SHARED / "pdfs", False)
    if args.e2e:
        result = {
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "pdfs": [p.name for p in pdfs],
            "load_avg_before": [round(x, 2) for x in os.getloadavg()],
        }
        for name, root in (("branch", ROOT), ("base", args.base)):
            out = run(root, pdfs, E2E)
            ing = out["ingestion"]
            result[name] = {
                "seconds": ing["seconds"],
                "embedding_floor_s": ing["embedding_floor_s"],
                "ratio_to_floor": out["ratio_to_floor"],
                "naive_s": out["naive"]["seconds"],
                "ratio_to_naive": out["ratio_to_naive"],
                "stages_s": ing.get("stages_s"),
                "load_avg": [round(x, 2) for x in os.getloadavg()],
                "raw": out,
            }
            print(
                f"{name}: {ing['seconds']} s, floor {ing['embedding_floor_s']} s ({out['ratio_to_floor']}x), "
                f"naive {out['naive']['seconds']} s ({out['ratio_to_naive']}x), stages {ing.get('stages_s')}, "
                f"load {result[name]['load_avg']}",
                file=sys.stderr,
                flush=True,
            )
        text = json.dumps(result, indent=2)
        if args.out:
            args.out.write_text(text)
        print(text)
        return
    result: dict = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "pdfs": [p.name for p in pdfs],
        "load_avg_before": [round(x, 2) for x in os.getloadavg()],
        "reps": [],
    }
    for rep in range(args.reps):
        order = [("base", args.base), ("branch", ROOT)] if rep % 2 == 0 else [("branch", ROOT), ("base", args.base)]
        row = {}
        for name, root in order:
            per = run(root, pdfs)
            pages = sum(v["pages"] for v in per.values())
            row[name] = {
                "cpu_s": round(sum(v["cpu_s"] for v in per.values()), 2),
                "wall_s": round(sum(v["wall_s"] for v in per.values()), 2),
                "pages": pages,
                "load_avg": [round(x, 2) for x in os.getloadavg()],
                "per_pdf_cpu_s": {k: round(v["cpu_s"], 3) for k, v in per.items()},
            }
            print(
                f"rep {rep + 1} {name}: {row[name]['cpu_s']} s CPU, {row[name]['wall_s']} s wall, {pages} pages, "
                f"load {row[name]['load_avg']}",
                file=sys.stderr,
                flush=True,
            )
        row["cpu_ratio_branch_to_base"] = round(row["branch"]["cpu_s"] / row["base"]["cpu_s"], 3)
        result["reps"].append(row)
    result["load_avg_after"] = [round(x, 2) for x in os.getloadavg()]
    cpu = {k: sorted(r[k]["cpu_s"] for r in result["reps"]) for k in ("base", "branch")}
    pages = result["reps"][0]["base"]["pages"]
    result["summary"] = {
        k: {"median_cpu_s": v[len(v) // 2], "cpu_ms_per_page": round(1000 * v[len(v) // 2] / pages, 1)}
        for k, v in cpu.items()
    }
    result["summary"]["cpu_ratio_branch_to_base"] = round(
        cpu["branch"][len(cpu["branch"]) // 2] / cpu["base"][len(cpu["base"]) // 2], 3
    )
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()

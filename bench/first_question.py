"""A fresh process's first question, with and without the gate's warm-up, interleaved.

    .venv/bin/python -m bench.first_question [--rounds 5] [--out FILE.json]

The API warms up the answerability gate in a background thread at startup
(``ragaudit.answer.answerability.warm_up``: langdetect's profiles, wordfreq's list, lemminflect,
the place tables). This measures what that saves the first user: ``samples/*.pdf`` are indexed
once into a temporary data folder; then each round starts two fresh Python processes over it,
one asking the questions cold, one after ``warm_up()`` has returned (as it has a few seconds
after the API starts), in alternating order so load changes hit both alike. Per process: the
first question's total and gate time (ms, from the answer's ``timings_ms``) and the second's.
Prints medians per side and the ratio warm / cold of the first question, measured in this run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__:  # python -m bench.NAME: offline defaults, repository on sys.path (bench/_env.py)
    from ._env import ROOT
    from .quality_sets import ensure_index
else:  # python bench/NAME.py
    from _env import ROOT
    from quality_sets import ensure_index

QUESTIONS = [
    "What was the pilot's total flight experience?",
    "Which law does the DMCA summary say implements the WIPO treaties?",
]

CHILD = """
import json, sys, time
from ragaudit.platform.settings import Settings
from ragaudit.query import QueryService
from ragaudit.services import get_services

qs = QueryService(get_services(Settings(data_dir=sys.argv[1])))
if sys.argv[2] == "warm":
    from ragaudit.answer.answerability import warm_up

    warm_up()
out = []
for q in json.loads(sys.argv[3]):
    r = qs.ask(q, log_query=False)
    out.append({"total": r["timings_ms"]["total"], "gate": r["timings_ms"].get("gate", 0.0)})
print(json.dumps(out))
"""


def index_samples(data: Path) -> None:
    """Ingest ``samples/*.pdf`` into ``data``, then release the store (the children open it)."""
    from ragaudit.platform.settings import Settings
    from ragaudit.services import get_services, release_services

    settings = Settings(data_dir=data)
    try:
        ensure_index(get_services(settings), [ROOT / "samples"])
    finally:
        release_services(settings)


def one(data: Path, side: str) -> list[dict[str, float]]:
    p = subprocess.run(
        [sys.executable, "-c", CHILD, str(data), side, json.dumps(QUESTIONS)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if p.returncode:
        raise SystemExit(f"first_question: the {side} process failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ragaudit-first-question-") as tmp:
        data = Path(tmp) / "data"
        index_samples(data)
        runs: dict[str, list[list[dict[str, float]]]] = {"cold": [], "warm": []}
        for i in range(args.rounds):
            for side in ("cold", "warm") if i % 2 == 0 else ("warm", "cold"):
                runs[side].append(one(data, side))
    res = {}
    for side, rs in runs.items():
        res[side] = {
            f"{which}_{k}_ms_p50": round(statistics.median(r[n][k] for r in rs), 1)
            for n, which in ((0, "first"), (1, "second"))
            for k in ("total", "gate")
        }
    res["ratio_first_total_warm_over_cold"] = round(
        res["warm"]["first_total_ms_p50"] / res["cold"]["first_total_ms_p50"], 3
    )
    res["rounds"] = args.rounds
    print(json.dumps(res, indent=1))
    if args.out:
        args.out.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()

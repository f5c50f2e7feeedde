"""Honest tuning split: compare two retrieval runs question by question, on each half of the dev set.

The dev set is split by the parity of the question number (odd or even):
tune on one half, confirm on the other, and keep a change only if it helps or is neutral on both.
Inputs are per-question metric files written by ``bench/retrieval_quality.py --save FILE`` (the
runs may come from two checkouts, e.g. before and after a change to extraction or chunking),
or one file holding several fusion variants of one run (``--fusions``).

    .venv/bin/python bench/split_compare.py BASE.json NEW.json [--variant-a default --variant-b rrf_fill]

Prints, per half and for both halves together, each metric of A and B and the paired bootstrap
95% CI of B - A (``ragaudit.evaluate.evaluation.paired_bootstrap_ci``: 2000 resamples, seed 0).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

if __package__:  # python -m bench.NAME: offline defaults, repository on sys.path (bench/_env.py)
    from . import _env  # noqa: F401
else:  # python bench/NAME.py
    import _env  # noqa: F401

METRICS = ("hit@1", "hit@5", "hit@10", "mrr")


def half(qid: str) -> str:
    """``"odd"`` or ``"even"`` by the number in the question id (``dev-NNN`` with an odd NNN -> odd)."""
    m = re.search(r"(\d+)\s*$", qid)
    return "odd" if m and int(m.group(1)) % 2 else "even"


def compare(a: dict, b: dict, mode: str = "hybrid", resamples: int = 2000) -> dict:
    """Per half (odd, even, all): ``{metric: paired_bootstrap_ci(b, a)}`` over the questions both
    runs scored. ``a``/``b``: ``{question id: {mode: {metric: value}}}``."""
    from ragaudit.evaluate.evaluation import paired_bootstrap_ci

    ids = sorted(set(a) & set(b))
    out = {}
    for part in ("odd", "even", "all"):
        sel = [i for i in ids if part == "all" or half(i) == part]
        out[part] = {
            m: paired_bootstrap_ci([b[i][mode][m] for i in sel], [a[i][mode][m] for i in sel], resamples=resamples)
            for m in METRICS
        }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path, nargs="?")
    ap.add_argument("--variant-a", default="default")
    ap.add_argument("--variant-b", default="default")
    ap.add_argument("--mode", default="hybrid")
    args = ap.parse_args()
    ra = json.loads(args.a.read_text())[args.variant_a]["questions"]
    rb = json.loads((args.b or args.a).read_text())[args.variant_b]["questions"]
    res = compare(ra, rb, args.mode)
    print(f"A = {args.a.name}:{args.variant_a}   B = {(args.b or args.a).name}:{args.variant_b}   mode {args.mode}\n")
    print("| half | n | metric | A | B | B - A | 95% CI (paired bootstrap) |")
    print("|---|---|---|---|---|---|---|")
    for part, per in res.items():
        for m, r in per.items():
            ci = r["ci95"] or [float("nan")] * 2
            print(
                f"| {part} | {r['n']} | {m} | {r['b']:.3f} | {r['a']:.3f} | {r['diff']:+.3f} | [{ci[0]:+.3f}, {ci[1]:+.3f}] |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

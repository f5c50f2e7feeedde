"""Fit the concise answer's confidence model, and say how well it holds on parts it was not fitted on.

    .venv/bin/python -m bench.concise_calibration RECORDS.json [...] [--target-precision 0.8] [--write]

``RECORDS.json``: per-question records of ``bench/quality_sets.py`` run with
``--setting concise_min_confidence=0`` (every candidate shown, so each has its features and
whether it was right). The held-out sets are never used. The model is a logistic regression
(scikit-learn, L2, ``C``) of "right" (token F1 against the gold answer at least
``answer_quality.RIGHT_F1``) on a few features of ``ragaudit.answer.concise.Concise.features``
chosen because their direction is the same on every part (``FEATURES``), plus one indicator per
extractor.

Honesty: the rules that extract concise answers were written looking at the tuning parts, so a
model fitted and scored on the same questions looks far better than it is (an in-sample AUC of
0.93 fell to 0.4-0.5 on the other parts). The score reported here is leave-one-part-out: each
part's confidences come from a model fitted on the other parts. The threshold is the lowest
confidence at which those out-of-part predictions are *certified* to reach ``--target-precision``:
the lower end of the Wilson interval (``--confidence-level``, 95%) of their precision at or above
it reaches the target (``certified_threshold``). Taking the lowest confidence at which the observed
precision just reaches the target (a few answers, all right) overstates it: such a threshold, fitted
at 0.80 on the tuning parts, showed one right concise answer in six on the held-out sets scored
after it. When no confidence is certified, the threshold is 1.0 and no concise answer is shown by
default (``RAGAUDIT_CONCISE_MIN_CONFIDENCE`` still lowers it). The stored model is then fitted on
every part. ``--write`` stores the weights and the threshold with
their provenance in ``ragaudit/answer/concise_calibration.json``, which ``concise.confidence`` reads.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import subprocess
from pathlib import Path

if __package__:
    from . import _env  # noqa: F401
    from .answer_quality import part
    from .quality_sets import HELD_OUT
else:
    import _env  # noqa: F401
    from answer_quality import part
    from quality_sets import HELD_OUT

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "ragaudit" / "answer" / "concise_calibration.json"
# features whose effect on "right" has the same sign on every part (the extractors' own scores
# such as "near" flipped sign between the parts they were written from and the others)
FEATURES = ["margin", "label", "top_sentence", "two_asks", "passage_rank", "legs_agree"]


def examples(files: list[Path]) -> list[tuple[str, dict, int, str]]:
    """``(rule, features, right, question id)`` of every shown concise answer (held-out excluded)."""
    out = []
    for f in files:
        for qid, r in json.loads(f.read_text()).items():
            if part(qid) in HELD_OUT or r.get("set") != "dev" or not r.get("answerable"):
                continue
            if not r.get("concise_shown") or not r.get("concise_rule"):
                continue
            out.append((r["concise_rule"], dict(r.get("concise_features") or {}), int(r["concise_right"]), qid))
    return out


def matrix(ex, rules: list[str]):
    import numpy as np

    cols = [f"rule:{r}" for r in rules] + FEATURES
    return cols, np.array([[1.0 if c == f"rule:{e[0]}" else float(e[1].get(c, 0.0)) for c in cols] for e in ex])


def certified_threshold(confidences, right, target: float, level: float = 0.95) -> tuple[float, int, float]:
    """``(threshold, shown, lower bound)``: the lowest of ``confidences`` at which the answers at or
    above it are right often enough that the lower end of the Wilson score interval of their
    precision (``level``; Wilson, JASA 1927, via ``scipy.stats.binomtest``) is at least ``target``,
    with how many it shows and that lower end. ``(1.0, 0, best lower end)`` when no confidence is
    certified. ``confidences``: out-of-part probabilities, ``right``: 0/1, same length."""
    import numpy as np
    from scipy.stats import binomtest

    conf, y = np.asarray(confidences, dtype=float), np.asarray(right, dtype=int)
    best = (1.0, 0, 0.0)
    lowest = 0.0
    for th in sorted(set(conf.tolist()), reverse=True):
        s = conf >= th
        low = float(binomtest(int(y[s].sum()), int(s.sum())).proportion_ci(level, method="wilson").low)
        lowest = max(lowest, low)
        if low >= target:
            best = (float(th), int(s.sum()), low)
    return best if best[1] else (1.0, 0, lowest)


def main(argv: list[str] | None = None) -> int:
    import numpy as np
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("records", type=Path, nargs="+")
    ap.add_argument("--target-precision", type=float, default=0.8)
    ap.add_argument("--confidence-level", type=float, default=0.95, help="of the precision's Wilson interval")
    ap.add_argument("--C", type=float, default=0.5)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args(argv)
    ex = examples(args.records)
    rules = sorted({e[0] for e in ex})
    cols, X = matrix(ex, rules)
    y = np.array([e[2] for e in ex])
    parts = np.array([part(e[3]) for e in ex])
    print(f"{len(ex)} shown concise answers, {y.sum()} right ({y.mean():.2f}); parts {sorted(set(parts))}")
    oof = np.zeros(len(ex))
    for p in sorted(set(parts)):
        held = parts == p
        m = LogisticRegression(C=args.C, max_iter=5000).fit(X[~held], y[~held])
        oof[held] = m.predict_proba(X[held])[:, 1]
    auc = roc_auc_score(y, oof)
    print(f"leave-one-part-out AUC {auc:.3f}")
    threshold, n_shown, low = certified_threshold(oof, y, args.target_precision, args.confidence_level)
    for th in (0.4, 0.5, 0.6, 0.7):
        s = oof >= th
        prec = y[s].mean() if s.any() else float("nan")
        print(f"threshold {th:.3f}: shows {s.mean():.2f} of the candidates, precision {prec:.2f}")
    if n_shown:
        print(f"certified threshold {threshold:.4f}: shows {n_shown}, precision's lower bound {low:.2f}")
    else:
        print(
            f"no confidence is certified at precision {args.target_precision} (best lower bound {low:.2f}): threshold 1.0"
        )
    for p in sorted(set(parts)):
        s = (parts == p) & (oof >= threshold)
        n = (parts == p).sum()
        print(f"  {p:8s} at threshold: shown {s.sum()}/{n}, right {y[s].sum()} ({y[s].mean() if s.any() else 0:.2f})")
    model = LogisticRegression(C=args.C, max_iter=5000).fit(X, y)
    for c, w in zip(cols, model.coef_[0]):
        print(f"  {c:28s} {w:+.3f}")
    print(f"  {'bias':28s} {model.intercept_[0]:+.3f}")
    if args.write:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        OUT.write_text(
            json.dumps(
                {
                    "about": "logistic model of P(concise answer right), fitted by bench/concise_calibration.py",
                    "fitted_on": {
                        "parts": sorted(set(parts.tolist())),
                        "examples": len(ex),
                        "right": int(y.sum()),
                        "date": datetime.date.today().isoformat(),
                        "commit": commit.stdout.strip(),
                        "leave_one_part_out_auc": round(float(auc), 3),
                    },
                    "target_precision": args.target_precision,
                    "confidence_level": args.confidence_level,
                    "certified": bool(n_shown),
                    "precision_lower_bound": round(low, 3),
                    # rounded down: the stored threshold shows every answer the certified one does
                    "threshold": math.floor(threshold * 1e4) / 1e4,
                    "bias": round(float(model.intercept_[0]), 4),
                    "rule": {r: round(float(w), 4) for r, w in zip(rules, model.coef_[0][: len(rules)])},
                    "features": {f: round(float(w), 4) for f, w in zip(FEATURES, model.coef_[0][len(rules) :])},
                },
                indent=1,
            )
            + "\n"
        )
        print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

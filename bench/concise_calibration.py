"""Fit the concise answer's confidence model on the tuning question sets.

    .venv/bin/python -m bench.concise_calibration RECORDS.json [...] [--parts tune,probe1,ext1]
        [--target-precision 0.85] [--write]

``RECORDS.json``: per-question records of ``bench/quality_sets.py`` run with
``--setting concise_min_confidence=0`` (every candidate shown, so each has its features and
whether it was right). Only the parts named in ``--parts`` (the tuning parts) are used. The model
is a logistic regression (scikit-learn, L2, C=1) of "right" (token F1 against the gold answer at
least ``answer_quality.RIGHT_F1``) on the extractor (one indicator per rule) and the numeric
features of ``ragaudit.answer.concise.Concise.features``. The threshold is the lowest confidence
at which precision on the tuning parts reaches ``--target-precision`` (at most the confidence
of the right answers ranked highest). ``--write`` stores the weights and the threshold with
their provenance in ``ragaudit/answer/concise_calibration.json``, which ``concise.confidence``
reads.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
from pathlib import Path

if __package__:
    from . import _env  # noqa: F401
    from .answer_quality import part
else:
    import _env  # noqa: F401
    from answer_quality import part

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "ragaudit" / "answer" / "concise_calibration.json"


def examples(files: list[Path], parts: set[str]) -> list[tuple[str, dict, int, str]]:
    """``(rule, features, right, question id)`` of every shown concise answer in the parts."""
    out = []
    for f in files:
        for qid, r in json.loads(f.read_text()).items():
            if part(qid) not in parts or r.get("set") != "dev" or not r.get("answerable"):
                continue
            if not r.get("concise_shown") or not r.get("concise_rule"):
                continue
            feats = (r.get("concise_features") or {}).copy()
            out.append((r["concise_rule"], feats, int(r["concise_right"]), qid))
    return out


def main(argv: list[str] | None = None) -> int:
    import numpy as np
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("records", type=Path, nargs="+")
    ap.add_argument("--parts", default="tune,probe1,ext1")
    ap.add_argument("--target-precision", type=float, default=0.85)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args(argv)
    ex = examples(args.records, {p.strip() for p in args.parts.split(",")})
    rules = sorted({e[0] for e in ex})
    feats = sorted({k for e in ex for k in e[1]})
    cols = [f"rule:{r}" for r in rules] + feats
    X = np.array([[1.0 if c == f"rule:{e[0]}" else float(e[1].get(c, 0.0)) for c in cols] for e in ex])
    y = np.array([e[2] for e in ex])
    print(f"{len(ex)} shown concise answers on {args.parts}: {y.sum()} right ({y.mean():.2f})")
    model = LogisticRegression(C=1.0, max_iter=5000).fit(X, y)
    p = model.predict_proba(X)[:, 1]
    auc = roc_auc_score(y, p) if 0 < y.sum() < len(y) else float("nan")
    print(f"in-sample AUC {auc:.3f}")
    for c, w in zip(cols, model.coef_[0]):
        print(f"  {c:32s} {w:+.3f}")
    print(f"  {'bias':32s} {model.intercept_[0]:+.3f}")
    threshold = 1.0
    for th in sorted(set(np.round(p, 4)), reverse=True):
        shown = p >= th
        if y[shown].mean() >= args.target_precision:
            threshold = float(th)
    for th in (0.3, 0.4, 0.5, 0.6, 0.7, threshold):
        s = p >= th
        print(
            f"threshold {th:.3f}: coverage {s.mean():.2f} of shown, precision {y[s].mean() if s.any() else float('nan'):.2f}"
        )
    if args.write:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        OUT.write_text(
            json.dumps(
                {
                    "about": "logistic model of P(concise answer right) fitted by bench/concise_calibration.py",
                    "fitted_on": {
                        "parts": args.parts,
                        "examples": len(ex),
                        "right": int(y.sum()),
                        "date": datetime.date.today().isoformat(),
                        "commit": commit.stdout.strip(),
                        "in_sample_auc": round(auc, 3),
                    },
                    "target_precision": args.target_precision,
                    "threshold": round(threshold, 4),
                    "bias": round(float(model.intercept_[0]), 4),
                    "rule": {r: round(float(w), 4) for r, w in zip(rules, model.coef_[0][: len(rules)])},
                    "features": {f: round(float(w), 4) for f, w in zip(feats, model.coef_[0][len(rules) :])},
                },
                indent=1,
            )
            + "\n"
        )
        print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

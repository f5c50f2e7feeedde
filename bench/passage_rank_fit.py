"""Fit the passage-rank weights (``ragaudit.retrieve.passage_rank``) and show what they are worth.

    .venv/bin/python -m bench.passage_rank_fit --data-root DIR [--sets dev,probes,...] [--save OUT.json]

For every answerable question of the sets (indexes reused from ``bench/quality_sets.py``:
``DIR/<set>``; the held-out sets are refused), the hybrid fused candidates are retrieved with passage
ranking off (``retrieval.passage_rank`` disabled), each labelled by whether it holds the question's
evidence. Weights are fitted by pairwise logistic regression (every evidence chunk against every
other candidate of the same question, both orders, no intercept; scikit-learn
``LogisticRegression``, C = 1).

Prints, per set, hit@1 / hit@5 / hit@10 / MRR of the fused order and of the order by weights fitted
on the other sets only (leave one set out: the set scored took no part in the fit), the same over
all questions (a question where passage ranking does not run, because the cross-lingual list, or the
multilingual one for an English question, ranked candidates, keeps the fused order and takes no part in the fit), and the
weights fitted on every set (the ones to ship in ``WEIGHTS``). A set must not
get worse for the weights to ship: this is the check that they carry to documents they were not
fitted on.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

if __package__:
    from . import _env  # noqa: F401
    from .quality_sets import HELD_OUT, SETS
else:
    import _env  # noqa: F401
    from quality_sets import HELD_OUT, SETS

TUNING = "dev,probes,external,heldout,heldout2,heldout3,heldout16,heldout17,heldout18"


def candidates(data_root: Path, name: str) -> list[dict]:
    """``[{set, id, question, parts, applies, cands: [{text, doc, position, holds: [bool per evidence
    part]}]}]`` for the answerable questions of set ``name``, fused order, passage ranking off;
    ``applies``: whether passage ranking runs for the question (not when the cross-lingual list, or
    the multilingual one for an English question, ranked candidates)."""
    from ragaudit.evaluate import metrics
    from ragaudit.evaluate.evaluation import evidence_parts, load_dataset, question_scope
    from ragaudit.platform.settings import Settings
    from ragaudit.query import QueryService
    from ragaudit.retrieve.retriever import non_english
    from ragaudit.services import get_services
    from ragaudit.types import Mode

    svc = get_services(
        Settings(
            _env_file=None,
            data_dir=data_root / name,
            database_url="",
            qdrant_url="",
            llm_model="",
            disabled_rules="retrieval.passage_rank",
        )
    )
    retriever = QueryService(svc).retriever
    out = []
    for q in load_dataset(SETS[name][1]):
        if q.is_refusal:
            continue
        parts = evidence_parts(q)
        res = retriever.retrieve(q.question, question_scope(q), 2 * retriever.candidates, Mode.hybrid)
        cands = [
            {
                "text": c.text,
                "doc": c.doc_name,
                "position": c.rank,
                "holds": [metrics.contains_evidence(c.text, ev) for ev in parts],
            }
            for c in res.chunks
        ]
        # passage ranking does not run where a model reading across languages ranked candidates
        fired = {f.rule for f in res.rules}
        across = "retrieval.cross_lingual" in fired or (
            "retrieval.multilingual" in fired and non_english(q.question) is None
        )
        out.append(
            {
                "set": name,
                "id": q.id,
                "question": q.question,
                "parts": len(parts),
                "cands": cands,
                "applies": not across,
            }
        )
    return out


def hit_rank(rec: dict, order: list[int]) -> int | None:
    """Rank at which every evidence part has been retrieved in ``order`` (None if some is not)."""
    ranks = []
    for p in range(rec["parts"]):
        r = next((k for k, i in enumerate(order, 1) if rec["cands"][i]["holds"][p]), None)
        if r is None:
            return None
        ranks.append(r)
    return max(ranks) if ranks else None


def summary(recs: list[dict], orders: list[list[int]]) -> dict[str, float]:
    ranks = [hit_rank(r, o) for r, o in zip(recs, orders)]
    n = len(recs) or 1
    return {
        "hit@1": sum(1 for k in ranks if k and k <= 1) / n,
        "hit@5": sum(1 for k in ranks if k and k <= 5) / n,
        "hit@10": sum(1 for k in ranks if k and k <= 10) / n,
        "MRR": sum(1 / k for k in ranks if k) / n,
    }


def _row(name: str, questions: int, fused: dict, ranked: dict) -> str:
    """One markdown row: set, questions, then hit@1 / hit@5 / hit@10 / MRR of both orders."""
    cells = [" / ".join(f"{m[k]:.3f}" for k in m) for m in (fused, ranked)]
    return f"| {name} | {questions} | {cells[0]} | {cells[1]} |"


def fit(recs: list[dict], feats: list) -> "object":
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    xs, ys = [], []
    for r, f in zip(recs, feats):
        if not r["applies"]:
            continue
        pos = [i for i, c in enumerate(r["cands"]) if any(c["holds"])]
        neg = [i for i, c in enumerate(r["cands"]) if not any(c["holds"])]
        for p in pos:
            for q in neg:
                xs += [f[p] - f[q], f[q] - f[p]]
                ys += [1, 0]
    return LogisticRegression(C=1.0, max_iter=5000, fit_intercept=False).fit(np.array(xs), np.array(ys))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-root", type=Path, required=True)
    ap.add_argument("--sets", default=TUNING)
    ap.add_argument("--save", type=Path)
    args = ap.parse_args()
    logging.disable(logging.WARNING)

    from ragaudit.retrieve.passage_rank import FEATURES, Candidate, features

    names = [s.strip() for s in args.sets.split(",") if s.strip()]
    if held := sorted(set(names) & HELD_OUT):
        ap.error(f"held-out sets are scored once, never fitted on: {', '.join(held)}")
    recs = [r for name in names for r in candidates(args.data_root, name)]
    feats = [features(r["question"], [Candidate(c["text"], c["doc"], c["position"]) for c in r["cands"]]) for r in recs]
    rows = {}
    print("| set | questions | fused hit@1 / hit@5 / hit@10 / MRR | passage rank (other sets' fit) |")
    print("|---|---|---|---|")
    base_all, new_all, recs_all = [], [], []
    for name in names:
        idx = [i for i, r in enumerate(recs) if r["set"] == name]
        rest = [i for i, r in enumerate(recs) if r["set"] != name]
        model = fit([recs[i] for i in rest], [feats[i] for i in rest])
        test = [recs[i] for i in idx]
        base = [list(range(len(r["cands"]))) for r in test]
        new = [
            sorted(range(len(feats[i])), key=lambda j, s=model.decision_function(feats[i]): (-s[j], j))
            if recs[i]["applies"] and len(feats[i])
            else list(range(len(feats[i])))
            for i in idx
        ]
        b, n = summary(test, base), summary(test, new)
        rows[name] = {"questions": len(test), "fused": b, "passage_rank": n}
        base_all += base
        new_all += new
        recs_all += test
        print(_row(name, len(test), b, n))
    b, n = summary(recs_all, base_all), summary(recs_all, new_all)
    rows["all"] = {"questions": len(recs_all), "fused": b, "passage_rank": n}
    print(_row("all", len(recs_all), b, n))
    model = fit(recs, feats)
    weights = {f: round(float(w), 2) for f, w in zip(FEATURES, model.coef_[0])}
    print("weights fitted on every set:", json.dumps(weights))
    if args.save:
        args.save.write_text(json.dumps({"sets": rows, "weights": weights}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

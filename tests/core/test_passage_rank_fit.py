"""The passage-rank fit's scoring and fitting (bench/passage_rank_fit.py) on records written here."""

from bench.passage_rank_fit import fit, hit_rank, summary
from ragaudit.retrieve.passage_rank import FEATURES, Candidate, features


def _rec(question: str, texts: list[str], holds: list[list[bool]], applies: bool = True) -> dict:
    cands = [{"text": t, "doc": "d.pdf", "position": i, "holds": h} for i, (t, h) in enumerate(zip(texts, holds), 1)]
    return {"set": "s", "id": "s-1", "question": question, "parts": len(holds[0]), "cands": cands, "applies": applies}


def test_hit_rank_needs_every_evidence_part():
    """A two-part record is found at the rank of its later part, and not at all when a part is
    missing; ``summary`` turns the ranks into hit@1/5/10 and MRR."""
    rec = _rec("q?", ["a", "b", "c"], [[False, False], [True, False], [False, True]])
    assert hit_rank(rec, [0, 1, 2]) == 3 and hit_rank(rec, [2, 1, 0]) == 2
    one = _rec("q?", ["a", "b"], [[False, False], [True, False]])
    assert hit_rank(one, [0, 1]) is None
    assert summary([rec, one], [[2, 1, 0], [0, 1]]) == {"hit@1": 0.0, "hit@5": 0.5, "hit@10": 0.5, "MRR": 0.25}


def test_the_fit_learns_the_window_feature_and_skips_questions_it_does_not_rank():
    """Evidence that sits second in fused order but holds the question's rare words: the fitted
    weight of the window coverage is positive and the fitted order puts the evidence first. A
    record marked as not ranked (a cross-language question) adds no pair: fitting on it alone
    fails for want of pairs."""
    import pytest

    recs = []
    for word in ("storage", "endurance", "premium", "quorum"):
        recs.append(
            _rec(
                f"What {word} level does the dam report give?",
                ["The dam report covers the dam and its report.", f"The {word} level is full.", "Other text."],
                [[False], [True], [False]],
            )
        )
    feats = [features(r["question"], [Candidate(c["text"], c["doc"], c["position"]) for c in r["cands"]]) for r in recs]
    model = fit(recs, feats)
    w = dict(zip(FEATURES, model.coef_[0]))
    assert w["window_coverage"] > 0
    scores = model.decision_function(feats[0])
    assert scores[1] > scores[0]
    skipped = [dict(r, applies=False) for r in recs]
    with pytest.raises(ValueError):
        fit(skipped, feats)

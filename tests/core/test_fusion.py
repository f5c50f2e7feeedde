"""Reciprocal Rank Fusion (Cormack et al., SIGIR 2009) as implemented in core.retrieval."""

import pytest

from core.retrieval import Mode, reciprocal_rank_fusion


def test_rrf_scores_and_order():
    fused = dict(reciprocal_rank_fusion({"vector": ["a", "b", "c"], "bm25": ["c", "a"]}, k=60))
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert fused["b"] == pytest.approx(1 / 62)
    order = [pid for pid, _ in reciprocal_rank_fusion({"vector": ["a", "b", "c"], "bm25": ["c", "a"]}, k=60)]
    assert order == ["a", "c", "b"]


def test_rrf_k_changes_weighting_and_must_be_positive():
    lists = {"vector": ["x", "y"], "bm25": ["y", "z"]}
    assert reciprocal_rank_fusion(lists, k=1)[0][0] == "y"
    with pytest.raises(ValueError):
        reciprocal_rank_fusion(lists, k=0)


def test_mode_errors_list_valid_values():
    with pytest.raises(ValueError, match="vector, bm25, hybrid, hybrid_rerank"):
        Mode.parse("dense")

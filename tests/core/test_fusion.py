"""Reciprocal Rank Fusion (Cormack et al., SIGIR 2009) as implemented in core.retrieval."""

import pytest

from core.retrieval import Fusion, Mode, distribution_score_fusion, reciprocal_rank_fusion


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


def test_exact_ties_are_broken_by_the_second_signal_deterministically():
    """fails if an exact RRF tie is left to input order: (1, 4) and (4, 1) have the same score,
    the chunk that matches the question's identifier (or has the higher BM25 score) must win
    whichever list is given first."""
    lists = {"vector": ["twin", "x", "y", "exact"], "bm25": ["exact", "x", "y", "twin"]}
    flipped = {"bm25": lists["bm25"], "vector": lists["vector"]}
    tb = {"exact": (1, 3.5, 0.62), "twin": (0, 0.4, 0.66)}
    for ls in (lists, flipped):
        fused = reciprocal_rank_fusion(ls, k=60, tiebreak=tb)
        order = [pid for pid, _ in fused]
        assert dict(fused)["exact"] == pytest.approx(dict(fused)["twin"])
        assert order.index("exact") == order.index("twin") - 1
    # without a second signal the id decides, never the order of the input lists
    assert reciprocal_rank_fusion(lists)[:2] == reciprocal_rank_fusion(flipped)[:2]


def test_rrf_fill_keeps_one_retrievers_clear_hit():
    """A chunk at dense rank 7 that BM25 does not return: plain RRF puts it below every chunk both
    lists returned (fused rank 19 here); fails if rrf_fill does not lift it above chunks that
    both lists rank in their bottom half."""
    top, mid, bottom = [f"t{i}" for i in range(6)], [f"m{i}" for i in range(4)], [f"z{i}" for i in range(8)]
    dense = top + ["solo"] + mid + ["d1"] + bottom
    bm25 = top + mid + ["b1", "b2"] + bottom
    plain = [pid for pid, _ in reciprocal_rank_fusion({"vector": dense, "bm25": bm25})]
    filled = [pid for pid, _ in reciprocal_rank_fusion({"vector": dense, "bm25": bm25}, fill_missing=True)]
    assert plain.index("solo") == 18  # below every chunk both lists returned
    assert filled.index("solo") <= 12  # above the chunks both lists rank 14th or lower
    assert all(filled.index("solo") < filled.index(z) for z in bottom[1:])


def test_distribution_based_score_fusion():
    """DBSF scales each list over mean +- 3 sd; fails if raw score scales leak through (BM25
    scores in the tens would otherwise always beat cosine similarities)."""
    fused = dict(distribution_score_fusion({"vector": {"a": 0.9, "b": 0.5, "c": 0.1},
                                            "bm25": {"a": 10.0, "c": 30.0}}))
    assert set(fused) == {"a", "b", "c"}
    assert all(0.0 <= v <= 2.0 for v in fused.values())
    assert fused["a"] > fused["b"]  # top of the dense list and present in BM25
    with pytest.raises(ValueError, match="rrf, rrf_fill, dbsf"):
        Fusion.parse("borda")

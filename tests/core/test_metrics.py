"""Metric units: SQuAD EM/F1 as the official v1.1 script defines them, ranking metrics,
citation validity, the paired bootstrap and quote verification of the judges."""

import math
import warnings

import pytest

from ragaudit.evaluate import metrics
from ragaudit.evaluate.evaluation import paired_bootstrap_ci
from ragaudit.evaluate.judge import DeterministicJudge, _verify, split_claims


def test_squad_reasons_say_what_matched():
    """Fails if the EM/F1 reasons stop showing the match, the normalised strings or the F1."""
    assert metrics.exact_match("the NYC08CA055.", "NYC08CA055").reason == "matches gold after SQuAD normalisation"
    assert metrics.exact_match("NYC08CA056", "NYC08CA055").reason == "'nyc08ca056' != 'nyc08ca055'"
    assert metrics.token_f1("october 28 extra", "October 28").reason == "token F1 0.80 over 3 answer tokens"
    # F1 is the harmonic mean 2pr/(p+r): p = 1/4, r = 1/2 -> 1/3
    assert metrics.token_f1("x b c d", "x e").value == pytest.approx(1 / 3)


def test_squad_normalisation_and_scores():
    # SQuAD v1.1 normalize_answer: lower, strip punctuation and articles a/an/the, squeeze spaces
    assert metrics.normalize_answer("The  Cat, a hat!") == "cat hat"
    assert metrics.exact_match("the NYC08CA055.", "NYC08CA055").value == 1.0
    assert metrics.exact_match("NYC08CA056", "NYC08CA055").value == 0.0
    # precision 2/3, recall 2/2 -> F1 = 0.8
    assert metrics.token_f1("october 28 extra", "October 28").value == pytest.approx(0.8)
    # parenthetical notes of the gold answer are an alternative ground truth (max over them)
    assert metrics.exact_match("FBVIF", "FBVIF (French registered)").value == 1.0
    assert metrics.token_f1("nothing relevant", "FBVIF").value == 0.0


def test_concise_answer_is_shortest_best_span():
    ans = "The Act was signed into law by President Clinton on October 28, 1998. [1]"
    assert metrics.concise_answer(ans, "October 28, 1998 (signed by President Clinton)") == "october 28 1998"
    assert metrics.concise_answer("no overlap at all [2]", "42") == ""


def test_ranking_metrics():
    ctx = ["alpha beta", "gamma  delta", "the evidence here", "more evidence two"]
    ref = ["evidence here", "evidence two"]
    assert metrics.hit_at_k(ctx, ref, 3).value == 0.0 and metrics.hit_at_k(ctx, ref, 4).value == 1.0
    assert metrics.reciprocal_rank(ctx, ref).value == pytest.approx(1 / 4)
    assert metrics.evidence_recall_at_k(ctx, ref, 3).value == 0.5
    ideal = 1 + 1 / math.log2(3)
    assert metrics.ndcg_at_k(ctx, ref, 10).value == pytest.approx((1 / math.log2(4) + 1 / math.log2(5)) / ideal)
    # a duplicate of an already-found passage earns no second gain
    assert metrics.ndcg_at_k(["evidence here", "evidence here"], ["evidence here"]).value == pytest.approx(1.0)


def test_empty_reference_is_nan_with_warning():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = metrics.hit_at_k(["x"], [], 5)
    assert math.isnan(r.value) and "empty" in r.reason and any(issubclass(x.category, RuntimeWarning) for x in w)


def test_citation_validity():
    gold = [("a.pdf", 3), ("a.pdf", 4)]
    assert metrics.citation_validity([{"doc_name": "a.pdf", "page": 4}], [], gold).value == 1.0
    assert metrics.citation_validity([{"doc_name": "a.pdf", "page": 9}], [], gold).value == 0.0
    assert metrics.citation_validity([{"doc_name": "a.pdf", "page": 3}], [7], gold).value == 0.0
    assert metrics.citation_validity([], [], gold).value == 0.0
    # a quote across a page break is on both pages: citing pages 2-3 points at gold page 3
    across = {"doc_name": "a.pdf", "page": 2, "pages": [2, 3]}
    assert metrics.citation_validity([across], [], gold).value == 1.0
    assert metrics.citation_validity([{**across, "doc_name": "b.pdf"}], [], gold).value == 0.0
    assert metrics.citation_validity([{"doc_name": "a.pdf", "page": 2, "pages": [2]}], [], gold).value == 0.0


def test_paired_bootstrap_is_seeded_and_brackets_the_difference():
    a = [1, 1, 1, 0, 1, 1, 0, 1, 1, 1]
    b = [1, 0, 1, 0, 0, 1, 0, 1, 0, 1]
    r1 = paired_bootstrap_ci(a, b, resamples=1000, seed=7)
    r2 = paired_bootstrap_ci(a, b, resamples=1000, seed=7)
    assert r1 == r2 and r1["diff"] == pytest.approx(0.3)
    lo, hi = r1["ci95"]
    assert lo <= 0.3 <= hi and lo < hi
    with pytest.raises(ValueError):
        paired_bootstrap_ci([1, 0], [1])


def test_quote_not_in_cited_chunk_is_unsupported():
    contexts = ["The pilot, age 85, was landing.", "Unrelated text."]
    claims = split_claims("The pilot was 85 years old [1]. The plane was purple [2].")
    verdicts = {0: (True, "The pilot, age 85, was landing.", 1), 1: (True, "The plane was purple.", 2)}
    faith, rows = _verify(claims, verdicts, contexts)
    assert [r["supported"] for r in rows] == [True, False]
    assert "not found" in rows[1]["reason"] and faith.value == 0.5
    # a citation followed by more text ends a claim
    assert [(c.text, c.cites) for c in split_claims("A first claim [1] A second one [2].")] == [
        ("A first claim", [1]),
        ("A second one.", [2]),
    ]
    # the deterministic judge accepts the verbatim claim, rejects it against another context
    j = DeterministicJudge()
    assert j.judge("q", "The pilot, age 85, was landing. [1]", contexts).faithfulness.value == 1.0
    assert j.judge("q", "The pilot, age 85, was landing. [1]", contexts[::-1]).faithfulness.value == 0.0


def test_citation_support_is_supported_over_cited_claims():
    """Fails if ``citation_support`` is not supported_claims / claims, is defined without cited
    claims, or drops the first unsupported claim from its reason."""
    import math

    import pytest

    from ragaudit.evaluate.metrics import citation_support

    r = citation_support(
        {
            "claims": 4,
            "supported_claims": 3,
            "unsupported": [{"claim": "Signed by Bush in 2005.", "reason": "not in the quote: number 2005"}],
        }
    )
    assert r.value == 0.75 and "3/4" in r.reason and "Bush" in r.reason and "number 2005" in r.reason
    assert citation_support({"claims": 2, "supported_claims": 2, "unsupported": []}).value == 1.0
    assert citation_support({"claims": 1, "supported_claims": 0}).value == 0.0
    with pytest.warns(RuntimeWarning):
        assert math.isnan(citation_support({"claims": 0, "supported_claims": 0}).value)
    with pytest.warns(RuntimeWarning):
        assert math.isnan(citation_support({}).value)


@pytest.mark.parametrize(
    "name,call",
    [
        ("hit@5", lambda: metrics.hit_at_k(["x"], [], 5)),
        ("mrr", lambda: metrics.reciprocal_rank(["x"], [])),
        ("ndcg@10", lambda: metrics.ndcg_at_k(["x"], [], 10)),
        ("evidence_recall@5", lambda: metrics.evidence_recall_at_k(["x"], [], 5)),
        ("exact_match", lambda: metrics.exact_match("x", "")),
        ("f1", lambda: metrics.token_f1("x", "")),
        ("citation_validity", lambda: metrics.citation_validity([{"doc_name": "a", "page": 1}], [], [])),
    ],
)
def test_every_undefined_metric_is_nan_with_a_named_warning(name, call):
    """Fails if a metric's undefined case is not NaN, or its reason and warning do not name the
    metric and the empty input exactly (e.g. ``_nan("mrr", None)``)."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = call()
    what = "gold places" if name == "citation_validity" else "reference"
    assert math.isnan(r.value) and r.reason == f"{what} is empty"
    (warning,) = w
    assert warning.category is RuntimeWarning and str(warning.message) == f"{name}: {what} is empty; returning NaN"


def test_ranking_metrics_when_nothing_or_part_is_retrieved():
    """Fails if MRR gives credit (1.0) when the evidence is missing, evidence recall counts the
    missing parts instead of the found ones, an empty evidence string matches everything, evidence
    broken at a line end by another extractor or a row's leader dots printed otherwise is not
    found (or other words are), hit@k
    accepts a multipart question with one part found, or the reasons stop saying where/why."""
    ctx = ["alpha beta", "the evidence here"]
    assert metrics.reciprocal_rank(ctx, ["absent"]).value == 0.0
    assert metrics.reciprocal_rank(ctx, ["absent"]).reason == "evidence not retrieved"
    assert metrics.reciprocal_rank(ctx, ["evidence here"]).reason == "evidence complete at rank 2"
    assert metrics.hit_at_k(ctx, ["evidence here"], 5).reason == "all evidence found by rank 2"
    assert metrics.hit_at_k(ctx, ["evidence here", "absent"], 5).value == 0.0
    assert metrics.hit_at_k(ctx, ["absent"], 5).reason == "evidence not retrieved"
    r = metrics.evidence_recall_at_k(ctx, ["evidence here", "absent", "alpha"], 5)
    assert r.value == pytest.approx(2 / 3) and r.reason == "2/3 evidence strings in top 5"
    assert metrics.ndcg_at_k(ctx, ["evidence here", "absent"], 10).reason == "1/2 evidence strings in top 10"
    assert not metrics.contains_evidence("anything", "   ")
    # whitespace dropped by an extractor still matches, either way round
    assert metrics.contains_evidence("the evi dence here", "evidence here")
    assert metrics.contains_evidence("the evidence here", "evi dence here")
    assert not metrics.contains_evidence("the evidence", "evidence here")
    # a word broken at a line end, joined by one extractor and not by the other
    assert metrics.contains_evidence("in which THOMAS, GORSUCH, and BARRETT joined", "THOMAS, GOR- SUCH, and BARRETT")
    assert metrics.contains_evidence("la edad de vein- ticinco años", "edad de veinticinco años")
    assert not metrics.contains_evidence("la edad de treinta años", "edad de vein- ticinco años")
    # a table's leader dots, as dots or as one ellipsis
    assert metrics.contains_evidence("Used cars and trucks … 2.421 179.579", "Usedcarsandtrucks........ 2.421 179.579")
    assert not metrics.contains_evidence("Used cars and trucks … 2.421 179.579", "Usedcarsandtrucks........ 2.521")
    # a subscript or footnote mark printed in the line by one extractor, on the next line by another
    row = "Dióxido de Azufre (SO ) 2 24 horas 250 NE más de 7 veces al año"
    assert metrics.contains_evidence(row, "Dióxido de Azufre (SO) 24 horas 250 NE")
    assert metrics.contains_evidence("Benceno (C H ) 6 6 Anual 2 Media", "Benceno (CH) Anual 2 Media")
    # ... but the evidence's own characters must all be there: another value is no match
    assert not metrics.contains_evidence("Benceno (C H ) 6 6 Anual 5 Media", "Benceno (CH) Anual 2 Media")
    assert not metrics.contains_evidence("Total 3 2 1 revenue", "Total revenue")
    # ... and the other way round: evidence copied from an extractor that printed a script apart
    # (or on the next line) against text that keeps it in its word
    assert metrics.contains_evidence("Dióxido de Azufre (SO2) 24 horas 250 NE", "Azufre (SO ) 2 24 horas 250")
    assert metrics.contains_evidence("ICC1 Supply Current VCC = 5.0V READ 1.0 mA", "Supply Current V = 5.0V READ")
    assert metrics.contains_evidence("The I2C-bus carries data", "2 I C-bus carries data")
    # only a short symbol takes a script, only where the evidence lacks it, and values still count
    assert not metrics.contains_evidence("Benceno (C6H6) Anual 5 Media", "Benceno (C H ) 6 6 Anual 2 Media")
    assert not metrics.contains_evidence("See Table 12 for the totals", "See Table 1 for the totals")
    assert not metrics.contains_evidence("Supply Current VOLTAGE = 5.0V", "Supply Current V = 5.0V")
    assert not metrics.contains_evidence("Total revenues was 3", "Total revenue was 3")
    assert not metrics.contains_evidence("Dióxido de Azufre (SO) 24 horas", "Dióxido de Azufre (SO ) 2 24 horas")


def test_metric_result_json_rounds_and_maps_nan_to_null():
    """Fails if ``MetricResult.to_json`` stops rounding to 6 places or emits NaN instead of null."""
    assert metrics.MetricResult(1 / 3, "r").to_json() == {"value": 0.333333, "reason": "r"}
    assert metrics.MetricResult(float("nan"), "n").to_json() == {"value": None, "reason": "n"}
    assert metrics.MetricResult(None, "n").to_json() == {"value": None, "reason": "n"}  # type: ignore[arg-type]


def test_refusal_correct_both_ways():
    """Fails if a refusal label is not recognised (refused, clarifying), the comparison is
    inverted, or the reason stops naming the label and the expectation."""
    assert metrics.refusal_correct("refused", True).value == 1.0
    assert metrics.refusal_correct("clarifying", True).value == 1.0
    assert metrics.refusal_correct("answered", True).value == 0.0
    assert metrics.refusal_correct("unsupported", False).value == 1.0
    assert metrics.refusal_correct("refused", False).value == 0.0
    assert metrics.refusal_correct("refused", False).reason == "label 'refused'; should not refuse"
    assert metrics.refusal_correct("answered", True).reason == "label 'answered'; should refuse"

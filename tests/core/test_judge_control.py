"""The judge control (answers judged against another question's context) can fail: a lenient judge
makes it report ``all_failed: false``. The lenient judge is a real ``LLMJudge`` whose model output
is a litellm ``mock_response`` that calls every claim supported and quotes a real sentence of the
(wrong) context -- what a careless judge model does."""

import json

from ragaudit.evaluate.judge import DeterministicJudge, LLMJudge, judge_control

NTSB = "The pilot's misjudged clearance over obstacles during final approach. The airplane struck a fence."
DMCA = "The DMCA was signed into law by President Clinton on October 28, 1998. It has five titles."


def _answers():
    per_q = [{"id": "q1"}, {"id": "q2"}]
    answers = {
        "q1": {
            "question": "What caused the accident?",
            "label": "answered",
            "answer": "The pilot misjudged the clearance over obstacles [1].",
            "retrieved": [{"chunk_id": "n1", "doc_name": "ntsb.pdf", "text": NTSB}],
        },
        "q2": {
            "question": "When was the DMCA signed?",
            "label": "answered",
            "answer": "It was signed on October 28, 1998 [1].",
            "retrieved": [{"chunk_id": "d1", "doc_name": "dmca.pdf", "text": DMCA}],
        },
    }
    return per_q, answers


def test_a_strict_judge_fails_every_control():
    """Fails if a control is counted as failed only when faithfulness is exactly 0 or the
    mismatched pairs are not built (n must be 2)."""
    per_q, answers = _answers()
    out = judge_control(per_q, answers, DeterministicJudge(), 3)
    assert out["n"] == 2 and out["failed"] == 2 and out["all_failed"] is True
    assert out["verdict"].startswith("judge ok")
    assert [(p["answer_of"], p["context_of"]) for p in out["pairs"]] == [("q1", "q2"), ("q2", "q1")]


def test_a_lenient_judge_makes_the_control_report_all_failed_false():
    """Fails if the control is hard-wired ("all_failed": True, or every pair "failed": True), or if
    the faithfulness threshold (< 0.5 fails) is inverted: the lenient judge passes the answer of q1
    against q2's DMCA context with faithfulness 1.0, and that control must not count as failed."""
    per_q, answers = _answers()
    lenient = json.dumps(
        {
            "claims": [{"i": 0, "supported": True, "source": 1, "quote": DMCA.split(". ")[0] + "."}],
            "context_relevance": 1.0,
            "answer_relevance": 1.0,
        }
    )
    out = judge_control(per_q, answers, LLMJudge("gpt-4o-mini", mock_response=lenient), 3)
    assert out["n"] == 2 and out["all_failed"] is False and out["failed"] == 1
    assert out["verdict"] == "judge too lenient: it scored 1 of 2 mismatched pairs faithful"
    by_answer = {p["answer_of"]: p for p in out["pairs"]}
    assert by_answer["q1"]["faithfulness"] == 1.0 and by_answer["q1"]["failed"] is False
    # the same quote is not in q1's NTSB context: that control still fails (quotes are verified)
    assert by_answer["q2"]["faithfulness"] == 0.0 and by_answer["q2"]["failed"] is True


def test_deterministic_judge_support_rules():
    """Fails if the offline judge's support rule changes: a claim found verbatim at offset 0 of a
    cited context is supported with itself as quote (``>= 0`` -> ``> 0``); the last source number
    is valid (``n <= len`` -> ``n < len``); an invalid [n] does not stop the search (``continue`` ->
    ``break``); the threshold is inclusive (0.8 of the terms passes, ``>=`` -> ``>``); ties keep the
    first sentence; the quote and source reported are the best sentence's."""
    j = DeterministicJudge()
    ctx = [
        "Alpha beta gamma delta epsilon. Other words here.",
        "Filler sentence first. Alpha beta gamma delta zeta. Alpha beta gamma delta eta.",
    ]
    from ragaudit.evaluate.judge import Claim

    assert j._support(Claim(0, "Alpha beta gamma delta epsilon.", [1]), ctx) == (
        True,
        "Alpha beta gamma delta epsilon.",
        1,
    )
    # 4 of the 5 terms (0.8) in the first matching sentence of source 2 (the last source), after an invalid [7]
    assert j._support(Claim(0, "alpha beta gamma delta omega", [7, 2]), ctx) == (
        True,
        "Alpha beta gamma delta zeta.",
        2,
    )
    assert j._support(Claim(0, "alpha beta gamma omega psi", [2]), ctx)[0] is False  # 3/5 < 0.8
    assert j._support(Claim(0, "alpha beta", [9]), ctx) == (False, "", None)


def test_deterministic_judge_scores_and_reasons():
    """Fails if context relevance is not the mean share of question terms per context, the
    undefined cases are not NaN with their reasons, or faithfulness stops counting claims."""
    import math

    j = DeterministicJudge()
    r = j.judge(
        "alpha beta",
        "Alpha beta gamma delta epsilon [1]. Unrelated made up claim [2].",
        ["Alpha beta gamma delta epsilon.", "alpha only"],
    )
    assert r.faithfulness.value == 0.5 and r.faithfulness.reason == "1/2 claims supported by a verified quote"
    assert r.context_relevance.value == 0.75
    assert r.context_relevance.reason == "mean share of question terms per context over 2"
    assert math.isnan(r.answer_relevance.value) and r.answer_relevance.reason == "no answer text or no embedder"
    assert [c["supported"] for c in r.claims] == [True, False]
    empty = j.judge("alpha", "Alpha beta [1].", [])
    assert math.isnan(empty.context_relevance.value) and empty.context_relevance.reason == "no retrieved contexts"
    assert empty.claims[0]["reason"] == "judge: not supported"


def test_uncited_claims_and_judge_errors_never_pass():
    """Fails if a claim citing no source counts as supported (``sup = True``), if a judge that
    errors counts as a control that failed as it should (``ok_fail = True`` on exception), or if
    faithfulness exactly 0.5 counts as failed (``< 0.5`` -> ``<= 0.5``)."""
    from ragaudit.evaluate.judge import _verify, split_claims

    faith, rows = _verify(
        split_claims("Alpha beta gamma without a source."), {0: (True, "Alpha beta", None)}, ["Alpha beta gamma"]
    )
    assert faith.value == 0.0 and rows[0]["reason"] == "claim cites no source"
    per_q, answers = _answers()
    broken = judge_control(per_q, answers, LLMJudge("gpt-4o-mini", mock_response="not json"), 3)
    assert broken["failed"] == 0 and broken["all_failed"] is False
    assert broken["pairs"][0]["reason"].startswith("judge failed: ValueError")
    half = json.dumps(
        {
            "claims": [
                {"i": 0, "supported": True, "source": 1, "quote": DMCA.split(". ")[0] + "."},
                {"i": 1, "supported": False},
            ],
            "context_relevance": 1.0,
            "answer_relevance": 1.0,
        }
    )
    answers["q1"]["answer"] = "The pilot misjudged the clearance [1]. The airplane struck a fence [1]."
    out = judge_control(per_q, answers, LLMJudge("gpt-4o-mini", mock_response=half), 3)
    row = next(p for p in out["pairs"] if p["answer_of"] == "q1")
    assert row["faithfulness"] == 0.5 and row["failed"] is False

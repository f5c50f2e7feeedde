"""The concise answer's threshold is certified, not just observed (bench/concise_calibration.py),
and a threshold of 1.0 withholds every concise answer (ragaudit.answer.concise.choose)."""

from bench.concise_calibration import certified_threshold
from ragaudit.answer import concise
from ragaudit.answer.concise import Concise, choose


def test_a_few_right_answers_certify_no_threshold():
    """Three answers of highest confidence, all right, have an observed precision of 1.0 but a
    Wilson 95% lower bound of 0.44. Fails if such a tail is taken as reaching precision 0.80
    (the threshold must stay 1.0, showing nothing) or if the best lower bound is not reported."""
    conf = [0.9, 0.85, 0.8] + [0.5 + i / 1000 for i in range(40)]
    right = [1, 1, 1] + [0] * 40
    th, shown, low = certified_threshold(conf, right, 0.8)
    assert (th, shown) == (1.0, 0)
    assert 0.43 < low < 0.45


def test_enough_right_answers_certify_the_lowest_threshold_that_holds():
    """Twenty-five answers from 0.7 up, all right, then wrong ones from 0.6 down. One wrong answer
    among 26 still certifies precision 0.80 (Wilson lower bound 0.81), two among 27 do not (0.77).
    Fails if the threshold is not the lowest confidence whose answers at or above it are
    certified (0.6, showing 26), or if it goes lower."""
    conf = [0.7 + i / 100 for i in range(25)] + [0.6 - i / 100 for i in range(10)]
    right = [1] * 25 + [0] * 10
    th, shown, low = certified_threshold(conf, right, 0.8)
    assert abs(th - 0.6) < 1e-9 and shown == 26 and 0.8 <= low < 0.82


def test_a_threshold_of_one_withholds_every_concise_answer_and_says_why(monkeypatch):
    """Fails if a candidate is shown when the fitted threshold is 1.0 (no confidence certified),
    even at the highest confidence the model can give, or if the X-ray's reason does not say that
    no confidence is certified."""
    monkeypatch.setitem(concise.CALIBRATION, "threshold", 1.0)
    monkeypatch.setitem(concise.CALIBRATION, "bias", 60.0)  # confidence 1.0
    quote = "The report was filed on March 3, 2024."
    c = Concise("March 3, 2024", "date", "concise.typed_span", "a date span", quote)
    shown, fired = choose("When was the report filed?", [c], [quote])
    assert shown is None and fired[-1].rule == "concise.min_confidence" and fired[-1].effect == "withheld"
    assert "certified" in fired[-1].reason and "0.80" in fired[-1].reason, fired[-1].reason
    # the auditor reads the withheld candidate, its confidence and the threshold in the rule itself
    assert fired[-1].details == {"candidate": "March 3, 2024", "type": "date", "confidence": 1.0, "threshold": 1.0}
    assert fired[-1].reason.startswith("“March 3, 2024” (confidence 1.00) withheld"), fired[-1].reason
    # a deployment's own threshold under it shows the answer
    shown, _ = choose("When was the report filed?", [c], [quote], min_confidence=0.5)
    assert shown is not None and shown.text == "March 3, 2024"

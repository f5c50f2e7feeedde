"""The ablation's exact simulation of a gate rule switched off (bench/rule_ablation.py)."""

from bench.rule_ablation import metrics_by_part, without_gate_rule


def _rec(answerable: bool, rules: list[str], label: str) -> dict:
    refused = label == "refused"
    r = {"set": "dev", "answerable": answerable, "rules": rules, "label": label}
    r["refusal_ok"] = float(refused != answerable)
    if answerable:
        r["false_refusal"] = float(refused)
    else:
        r["false_answer"] = float(not refused)
    return r


def test_switching_a_gate_rule_off_answers_what_it_alone_refused():
    """Fails if a question refused by the rule alone stays refused, if one another gate rule also
    refused is answered, or if refusal accuracy does not follow (answering is right only for an
    answerable question)."""
    recs = {
        "a-001": _rec(True, ["gate.x"], "refused"),  # false refusal by x alone: answered, right
        "a-003": _rec(False, ["gate.x"], "refused"),  # right refusal by x alone: answered, wrong
        "a-005": _rec(False, ["gate.x", "gate.y"], "refused"),  # y refuses too: stays refused
        "a-007": _rec(True, [], "answered"),
    }
    off = without_gate_rule(recs, "gate.x")
    assert [off[q]["label"] for q in sorted(off)] == ["answered", "answered", "refused", "answered"]
    assert off["a-001"]["refusal_ok"] == 1.0 and off["a-001"]["false_refusal"] == 0.0
    assert off["a-003"]["refusal_ok"] == 0.0 and off["a-003"]["false_answer"] == 1.0
    on, after = metrics_by_part(recs), metrics_by_part(off)
    (part,) = on
    assert on[part]["refusal acc"] == 0.75 and after[part]["refusal acc"] == 0.75
    assert after[part]["false refusals"] - on[part]["false refusals"] == -1
    assert after[part]["false answers"] - on[part]["false answers"] == 1


def test_an_answer_never_made_has_no_citation_validity():
    """A question the rule alone refused has no answer to score once the rule is off: its
    citation validity (0 for the refusal, which cites nothing) leaves the mean. Fails if the
    refusal's 0 is kept as the answer's score."""
    recs = {"a-001": _rec(True, ["gate.x"], "refused"), "a-003": _rec(True, [], "answered")}
    recs["a-001"]["citation_validity"], recs["a-003"]["citation_validity"] = 0.0, 1.0
    on, after = metrics_by_part(recs), metrics_by_part(without_gate_rule(recs, "gate.x"))
    (part,) = on
    assert on[part]["citation validity"] == 0.5 and after[part]["citation validity"] == 1.0


def test_each_question_set_is_reported_as_its_own_part():
    """Fails if the held-out sets' questions or their generated cases are split into the shared dev
    set's tune / confirm parts (by question-number parity) instead of being reported as their own
    set, or if the dev set stops being split so, or if a held-out set may be ablated."""
    import pytest

    from bench.answer_quality import part
    from bench.rule_ablation import main

    assert [part(i) for i in ("dev-901", "dev-902", "dev-903:sibling")] == ["tune", "confirm", "tune"]
    ids = (
        "heldout-901",
        "heldout-902:excluded",
        "heldout2-901",
        "heldout3-901",
        "heldout4-901",
        "heldout5-901",
        "heldout6-901",
        "heldout7-901",
        "probe2-901",
    )
    assert [part(i) for i in ids] == [
        "heldout",
        "heldout",
        "heldout2",
        "heldout3",
        "heldout4",
        "heldout5",
        "heldout6",
        "heldout7",
        "probe2",
    ]
    for held_out in ("heldout4", "heldout5", "heldout6", "heldout7"):
        with pytest.raises(SystemExit):
            main(["--data-root", "unused", "--sets", held_out])

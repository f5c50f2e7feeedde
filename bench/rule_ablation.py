"""Each rule of the answer path switched off alone, on every question set: what it is worth.

    .venv/bin/python -m bench.rule_ablation --data-root DIR [--sets dev,probes,external]
        [--rules retrieval.table_vote,...] [--save OUT.json]

One run with every rule on records, per question, every gate rule's verdict
(``QueryService(gate_every_rule=True)``: the first still decides), so switching a gate rule off is
computed exactly from that run: a question refused by that rule alone is answered, one another
rule also refuses stays refused. A retrieval or concise rule changes what is retrieved or shown,
so each is switched off in a run of its own (``RAGAUDIT_DISABLED_RULES``). Indexes are reused
from ``bench/quality_sets.py`` (``DIR/<set>``); the held-out sets (``HELD_OUT``) are never used here.

For each rule and part the table gives, rule off minus rule on: hit@1, hit@5 and MRR
(answerable questions), refusal accuracy (dataset questions and generated refusal cases), false
refusals and false answers (counts), citation validity, concise precision and coverage, and the rule's cost: mean
ms per question of the gate rule itself (timed in the base run), or the change of mean seconds
per question for a rule switched off in its own run. A rule pays on a part when switching it off
makes that part worse; it must pay on the parts it was not written from.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import time
from collections import defaultdict
from pathlib import Path

if __package__:
    from . import _env  # noqa: F401
    from .answer_quality import part, run
    from .quality_sets import HELD_OUT, SETS, ensure_index
else:
    import _env  # noqa: F401
    from answer_quality import part, run
    from quality_sets import HELD_OUT, SETS, ensure_index

REFUSING = ("refused", "clarifying")


def metrics_by_part(recs: dict) -> dict[str, dict[str, float]]:
    """Per part: the means and counts the table compares (see the module docstring)."""
    out: dict[str, dict[str, float]] = {}
    for p in sorted({part(i) for i in recs}):
        ids = [i for i in recs if part(i) == p]
        ans = [recs[i] for i in ids if recs[i]["set"] == "dev" and recs[i]["answerable"]]
        must = [recs[i] for i in ids if not recs[i]["answerable"]]
        every = [recs[i] for i in ids]
        shown = [r for r in ans if r.get("concise_shown")]

        def mean(rs, k):
            v = [float(r[k]) for r in rs if r.get(k) is not None]
            return sum(v) / len(v) if v else float("nan")

        out[p] = {
            "hit@1": mean(ans, "hit@1"),
            "hit@5": mean(ans, "hit@5"),
            "MRR": mean(ans, "mrr"),
            "refusal acc": mean(every, "refusal_ok"),
            "false refusals": sum(float(r.get("false_refusal") or 0) for r in ans),
            "false answers": sum(float(r.get("false_answer") or 0) for r in must),
            "citation validity": mean(ans, "citation_validity"),
            "concise precision": mean(shown, "concise_right"),
            "concise coverage": mean(ans, "concise_shown"),
            "s/question": mean([r for r in every if "seconds" in r], "seconds"),
        }
    return out


def without_gate_rule(recs: dict, rule: str) -> dict:
    """``recs`` as they would be with gate rule ``rule`` off: a record it refused (it fired first)
    is answered unless another gate rule fired too. An answer such a question would get is not
    known from this run, so its answer metrics (concise, citations) are left out."""
    out = {}
    for qid, r in recs.items():
        gate = [x for x in r.get("rules", []) if x.startswith("gate.")]
        r = dict(r)
        if gate and gate[0] == rule and r.get("label") in REFUSING and len(gate) == 1:
            r["label"] = "answered"
            r["refusal_ok"] = float(r["answerable"])  # answering is right only for an answerable question
            if r["answerable"]:
                r["false_refusal"] = 0.0
                r["concise_shown"] = None  # unknown: the answer was never made
                r["citation_validity"] = None
            else:
                r["false_answer"] = 1.0
        out[qid] = r
    return out


def timed_gate() -> dict[str, list[float]]:
    """Wrap every gate rule with a timer; returns ``{rule: [ms, ...]}`` filled as questions run."""
    from ragaudit.answer.answerability import GATE
    from ragaudit.platform.rules import Rule

    times: dict[str, list[float]] = defaultdict(list)

    def wrap(rule: Rule) -> Rule:
        def run(g):
            t = time.perf_counter()
            try:
                return rule.run(g)
            finally:
                times[rule.name].append((time.perf_counter() - t) * 1000)

        return Rule(rule.name, rule.why, run)

    GATE.rules = [wrap(r) for r in GATE.rules]
    return times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-root", type=Path, required=True)
    ap.add_argument("--sets", default="dev,probes,external")
    ap.add_argument("--rules", default="", help="only these rules (comma-separated); default all")
    ap.add_argument("--save", type=Path, help="write the table rows (JSON)")
    args = ap.parse_args(argv)
    sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    if HELD_OUT & set(sets):
        ap.error("a held-out set is scored once, never ablated")
    logging.disable(logging.WARNING)
    import ragaudit.query  # noqa: F401  (registers every stage's rules)
    from ragaudit.evaluate.evaluation import load_dataset
    from ragaudit.platform.rules import all_rules
    from ragaudit.platform.settings import Settings
    from ragaudit.services import get_services

    wanted = {r.strip() for r in args.rules.split(",") if r.strip()}
    rules = [r.name for r in all_rules() if not wanted or r.name in wanted]
    times = timed_gate()
    rows = []
    for name in sets:
        folders, questions = SETS[name]
        qs = load_dataset(questions)

        svc = get_services(
            Settings(_env_file=None, data_dir=args.data_root / name, database_url="", qdrant_url="", llm_model="")
        )

        def services(disabled: str, svc=svc):
            # the same stores (one open store per folder and process), other settings
            alt = copy.copy(svc)
            alt.settings = svc.settings.model_copy(update={"disabled_rules": [disabled]})
            return alt

        ensure_index(svc, folders)
        times.clear()
        base = run(svc, qs, every_rule=True)
        n_q = len(base)
        on = metrics_by_part(base)
        for rule in rules:
            if rule.startswith("gate."):
                off = metrics_by_part(without_gate_rule(base, rule))
                cost = sum(times.get(rule, [])) / max(1, n_q)
            else:
                t = time.perf_counter()
                recs = run(services(rule), qs)
                print(f"{name}: {rule} off in {time.perf_counter() - t:.0f} s", flush=True)
                off = metrics_by_part(recs)
                cost = None
            for p in on:
                row = {"rule": rule, "set": name, "part": p}
                for k, v in on[p].items():
                    row[k] = off[p][k] - v
                row["gate ms/question"] = cost
                rows.append(row)
            if args.save:  # after every rule: a long run stopped early keeps what it measured
                args.save.write_text(json.dumps(rows, indent=1))
    cols = ["hit@1", "hit@5", "MRR", "refusal acc", "false refusals", "false answers", "citation validity"]
    cols += ["concise precision"]
    cols += ["concise coverage", "s/question", "gate ms/question"]
    print("| rule | part | " + " | ".join(f"Δ {c}" for c in cols) + " |")
    print("|" + "---|" * (len(cols) + 2))
    for r in rows:
        cells = ["—" if r[c] is None or r[c] != r[c] else f"{r[c]:+.3f}" for c in cols]
        print(f"| {r['rule']} | {r['part']} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

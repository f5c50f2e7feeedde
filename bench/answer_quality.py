"""Answer quality on the dev set and the generated refusal set, per tuning part, with CIs.

One command (hybrid retrieval, offline answerer; ingests the PDFs into ``--data`` when it has
no documents yet, so a second run reuses the index):

    .venv/bin/python bench/answer_quality.py --data DIR [--pdfs ../shared/corpus/pdfs]
        [--dataset ../shared/corpus/dev_questions.jsonl] [--save RUN.json] [--compare BASE.json]

Per question it records hit@1/5/10 and MRR (answerable questions), whether the refusal decision
was right (answerable questions refused = false refusals; unanswerable ones answered = false
answers), citation validity, and the answerer's own concise answer (no gold guidance: the
reply's ``concise``): its coverage (shown on answerable questions), its precision (right when
shown: token F1 against the gold answer at least ``RIGHT_F1``) and EM / F1 of the shown ones,
beside the gold-guided span's EM / F1 (``metrics.concise_answer``, an upper bound).
The generated refusal set (``ragaudit.evaluate.refusalset``: each gold question asked of its most similar
other document, and of the knowledge base without its document) is answered too; every case
must be refused.

Parts are fixed by the question number's parity (an odd number = tuning, even = confirm;
a generated case belongs to its source question's part). Each table cell is the mean with its
95% bootstrap CI; with ``--compare`` the paired bootstrap CI of this run minus the base run
(``ragaudit.evaluate.evaluation.paired_bootstrap_ci``, 2000 resamples, seed 0) over the same questions.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

if __package__:  # python -m bench.NAME: offline defaults, repository on sys.path (bench/_env.py)
    from . import _env
else:  # python bench/NAME.py
    import _env
SHARED = _env.SHARED

# (row name, record key, which records): "ans" = answerable dev questions, "dev" = all dev
# questions, "ref" = dev refuse questions + generated cases, "gen" = generated cases only
ROWS = [
    ("hit@1", "hit@1", "ans"),
    ("hit@5", "hit@5", "ans"),
    ("hit@10", "hit@10", "ans"),
    ("MRR", "mrr", "ans"),
    ("refusal accuracy, dataset questions", "refusal_ok", "dev"),
    ("refusal accuracy, generated set", "refusal_ok", "gen"),
    ("false refusals (share of answerable)", "false_refusal", "ans"),
    ("false answers (share of must-refuse: dev + generated)", "false_answer", "ref"),
    ("citation validity", "citation_validity", "ans"),
    ("audit label `answered` (share of answers not refused)", "audit_answered", "ans"),
    ("concise answer coverage (shown / answerable)", "concise_shown", "ans"),
    ("concise answer precision (right when shown: token F1 >= 0.5)", "concise_right", "shown"),
    ("F1 of shown concise answers", "f1", "shown"),
    ("EM of shown concise answers", "em", "shown"),
    ("F1, gold-guided span (upper bound)", "f1_gold_guided", "ans"),
    ("EM, gold-guided span (upper bound)", "em_gold_guided", "ans"),
]


RIGHT_F1 = 0.5  # a shown concise answer is right when its token F1 against the gold answer is at least this


def part(qid: str) -> str:
    """``"tune"`` (odd question number) or ``"confirm"`` (even) by the first number in the id for the
    shared dev set (``dev-NNN``); an id named after its set (``probe2-NNN``, ``heldout-NNN``,
    ``heldout2-NNN``) belongs to that set, a generated case (``heldout-004:sibling``) to its question's."""
    named = re.match(r"([a-z]+\d*)-\d+", qid)
    if named and named.group(1) != "dev":
        return named.group(1)
    m = re.search(r"(\d+)", qid)
    return "tune" if m and int(m.group(1)) % 2 else "confirm"


def _ensure_index(svc, pdfs: Path) -> None:
    from ragaudit.evaluate.refusalset import indexed_texts
    from ragaudit.ingest.documents import ingest_bytes
    from ragaudit.pipelines.runner import DagsterRunner

    have = set(indexed_texts(svc))
    for f in sorted(pdfs.glob("*.pdf")):
        if f.name not in have:
            out = ingest_bytes(svc, f.read_bytes(), f.name, DagsterRunner())
            if not out.ok:
                print(f"{f.name}: {out.status}: {out.message}", file=sys.stderr)


def run(svc, questions, top_k: int | None = None, every_rule: bool = False) -> dict:
    """Per-question records ``{id: {...}}`` for the dev questions and the generated cases.
    ``every_rule``: every gate rule's verdict is listed in each record's ``rules``
    (``QueryService(gate_every_rule=True)``; the first still decides)."""
    from ragaudit.evaluate import metrics
    from ragaudit.evaluate.evaluation import _retrieval_record, question_scope
    from ragaudit.evaluate.refusalset import indexed_texts, refusal_set
    from ragaudit.query import QueryService
    from ragaudit.types import Mode, Scope

    qs = QueryService(svc, gate_every_rule=every_rule)
    recs: dict[str, dict] = {}
    for q in questions:
        scope = question_scope(q)
        r: dict = {"kind": q.kind, "set": "dev", "answerable": not q.is_refusal}
        if not q.is_refusal:
            m = _retrieval_record(q, qs.retriever, scope, Mode.hybrid, 10)["metrics"]
            r.update({k: m[k] for k in ("hit@1", "hit@5", "hit@10", "mrr")})
        t0 = time.perf_counter()
        out = qs.ask(q.question, scope, top_k, Mode.hybrid, log_query=False)
        r["seconds"] = time.perf_counter() - t0
        refused = out["label"] in metrics.REFUSAL_LABELS
        r.update(label=out["label"], refusal_ok=float(refused == q.is_refusal))
        if q.is_refusal:
            r["false_answer"] = float(not refused)
        else:
            r["false_refusal"] = float(refused)
            concise = {} if refused else (out.get("concise") or {})
            if not refused and "concise" not in out and out.get("concise_answer"):
                concise = {"text": out["concise_answer"]}  # a reply of a version without the ``concise`` object
            own = concise.get("text") or ""
            gg = "" if refused else metrics.concise_answer(out["answer"], q.answer)
            if not refused:  # the citation audit passed (not uncited / unsupported)
                r["audit_answered"] = float(out["label"] == "answered")
            f1 = metrics.token_f1(own, q.answer).value if own else None
            r.update(
                concise=own,
                concise_shown=float(bool(own)),
                concise_right=float(f1 >= RIGHT_F1) if own else None,
                concise_rule=concise.get("rule"),
                concise_type=concise.get("type"),
                concise_confidence=concise.get("confidence"),
                concise_features=concise.get("features"),
                f1=f1,
                em=metrics.exact_match(own, q.answer).value if own else None,
                f1_gold_guided=metrics.token_f1(gg, q.answer).value,
                em_gold_guided=metrics.exact_match(gg, q.answer).value,
                citation_validity=metrics.citation_validity(
                    out["citations"], (out.get("citation_check") or {}).get("invalid_numbers", []), q.gold_places()
                ).value,
            )
        r["answer"] = out["answer"][:300]
        r["rules"] = [f["rule"] for f in out.get("rules") or []]
        recs[q.id] = r
    for c in refusal_set(questions, indexed_texts(svc)):
        out = qs.ask(c.question, Scope(doc_names=c.doc_names), top_k, Mode.hybrid, log_query=False)
        refused = out["label"] in metrics.REFUSAL_LABELS
        recs[c.id] = {
            "kind": c.variant,
            "set": "generated",
            "answerable": False,
            "label": out["label"],
            "refusal_ok": float(refused),
            "false_answer": float(not refused),
            "scope": c.doc_names if c.variant == "sibling" else f"all but {c.source_doc}",
            "similarity": c.similarity,
            "answer": out["answer"][:300],
            "rules": [f["rule"] for f in out.get("rules") or []],
        }
    return recs


def _select(recs: dict, which: str, p: str) -> list[str]:
    ids = [i for i in recs if p == "all" or part(i) == p]
    if which == "ans":
        return [i for i in ids if recs[i]["set"] == "dev" and recs[i]["answerable"]]
    if which == "shown":
        return [i for i in ids if recs[i]["set"] == "dev" and recs[i]["answerable"] and recs[i].get("concise_shown")]
    if which == "dev":
        return [i for i in ids if recs[i]["set"] == "dev"]
    if which == "ref":
        return [i for i in ids if not recs[i]["answerable"]]
    return [i for i in ids if recs[i]["set"] == "generated"]


def table(new: dict, base: dict | None = None) -> str:
    """Markdown table: per part and row, n, base, new and the difference with CIs."""
    import numpy as np

    from ragaudit.evaluate.evaluation import paired_bootstrap_ci

    def ci_mean(v):
        if len(v) < 2 or np.all(np.asarray(v) == v[0]):
            return f"{np.mean(v):.3f}" if v else "—"
        from scipy.stats import bootstrap

        r = bootstrap(
            (np.asarray(v, float),), np.mean, n_resamples=2000, method="percentile", rng=np.random.default_rng(0)
        )
        return f"{np.mean(v):.3f} [{r.confidence_interval.low:.2f}, {r.confidence_interval.high:.2f}]"

    head = "| part | metric | n | " + (
        "before (95% CI) | after (95% CI) | after − before, paired 95% CI |" if base else "value (95% CI) |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    parts = sorted({part(i) for i in new}, key=lambda x: (x not in ("tune", "confirm"), x != "tune", x))
    for p in [*parts, "all"]:
        for name, key, which in ROWS:
            ids = [i for i in _select(new, which, p) if new[i].get(key) is not None]
            if base is not None:
                ids = [i for i in ids if i in base and base[i].get(key) is not None]
            if not ids:
                continue
            b = [float(new[i][key]) for i in ids]
            if base is None:
                lines.append(f"| {p} | {name} | {len(ids)} | {ci_mean(b)} |")
                continue
            a = [float(base[i][key]) for i in ids]
            c = paired_bootstrap_ci(b, a, resamples=2000, seed=0)
            lo, hi = c["ci95"] or (float("nan"), float("nan"))
            lines.append(
                f"| {p} | {name} | {len(ids)} | {ci_mean(a)} | {ci_mean(b)} | {c['diff']:+.3f} [{lo:+.2f}, {hi:+.2f}] |"
            )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="data folder (index reused between runs)")
    ap.add_argument("--pdfs", type=Path, default=SHARED / "pdfs")
    ap.add_argument("--dataset", type=Path, default=SHARED / "dev_questions.jsonl")
    ap.add_argument("--top-k", type=int)
    ap.add_argument("--save", type=Path, help="write the per-question records (JSON)")
    ap.add_argument("--compare", type=Path, help="a base run's --save file: paired differences")
    ap.add_argument("--only-table", action="store_true", help="no run: print the table of --save vs --compare")
    args = ap.parse_args()
    if args.only_table:
        if not args.save:
            ap.error("--only-table needs --save")
        print(table(json.loads(args.save.read_text()), json.loads(args.compare.read_text()) if args.compare else None))
        return 0
    _env.need_corpus(args.pdfs, args.dataset)
    import logging

    logging.disable(logging.WARNING)
    from ragaudit.evaluate.evaluation import load_dataset
    from ragaudit.platform.settings import Settings
    from ragaudit.services import get_services

    svc = get_services(Settings(_env_file=None, data_dir=args.data, database_url="", qdrant_url="", llm_model=""))
    _ensure_index(svc, args.pdfs)
    t = time.perf_counter()
    recs = run(svc, load_dataset(args.dataset), args.top_k)
    if args.save:
        args.save.write_text(json.dumps(recs, indent=1, ensure_ascii=False))
    base = json.loads(args.compare.read_text()) if args.compare else None
    gen = [r for r in recs.values() if r["set"] == "generated"]
    print(
        f"{len(recs) - len(gen)} dev questions, {len(gen)} generated refusal cases "
        f"({sum(r['kind'] == 'sibling' for r in gen)} sibling, {sum(r['kind'] == 'excluded' for r in gen)} excluded) "
        f"in {time.perf_counter() - t:.0f} s\n"
    )
    print(table(recs, base))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

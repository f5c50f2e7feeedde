"""Evaluation over gold question sets (JSONL in the format of the shared dev set).

Retrieval metrics (no LLM): hit@k (a retrieved chunk contains the evidence string,
whitespace-normalised; ``multipage`` needs every part; ``also_found_in`` places count), MRR
(reciprocal rank of the first hit, 0 when none in the list).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from .citations import normalize_ws
from .retrieval import Mode, Retriever
from .store import Scope


@dataclass
class GoldQuestion:
    id: str
    question: str
    answer: str
    kind: str
    doc_name: str | None
    page: int | None
    evidence: str
    extra_evidence: list[dict[str, Any]] = field(default_factory=list)
    also_found_in: list[dict[str, Any]] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def is_refusal(self) -> bool:
        return self.kind == "refuse"

    def scope(self) -> Scope:
        """``scoped`` questions are asked of their own document; all others of the whole corpus."""
        return Scope(doc_names=[self.doc_name]) if self.kind == "scoped" and self.doc_name else Scope()


def load_dataset(path: str | Path) -> list[GoldQuestion]:
    """Read a JSONL gold set. Raises ``ValueError`` naming the line of a malformed record."""
    out = []
    for i, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            out.append(GoldQuestion(
                id=str(d.get("id", f"q{i}")), question=d["question"], answer=d.get("answer", ""),
                kind=d.get("kind", "fact"), doc_name=d.get("doc_name"), page=d.get("page"),
                evidence=d.get("evidence") or "", extra_evidence=d.get("extra_evidence") or [],
                also_found_in=d.get("also_found_in") or [], raw=d))
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise ValueError(f"{path}:{i}: malformed record ({e})") from None
    return out


def evidence_parts(q: GoldQuestion) -> list[str]:
    """Normalised evidence strings that must all be retrieved."""
    parts = [q.evidence] + [x.get("evidence", "") for x in q.extra_evidence]
    return [normalize_ws(p) for p in parts if p and p.strip()]


def _contains(text: str, ev: str) -> bool:
    t = normalize_ws(text)
    return ev in t or ev.replace(" ", "") in t.replace(" ", "")


def evidence_ranks(q: GoldQuestion, texts: list[str]) -> list[int | None]:
    """1-based rank of the first chunk containing each evidence part (None if absent)."""
    out = []
    for ev in evidence_parts(q):
        out.append(next((i for i, t in enumerate(texts, start=1) if _contains(t, ev)), None))
    return out


def hit_rank(q: GoldQuestion, texts: list[str]) -> int | None:
    """Rank at which all evidence parts have been retrieved (max over parts), or None."""
    ranks = evidence_ranks(q, texts)
    if not ranks or any(r is None for r in ranks):
        return None
    return max(ranks)  # type: ignore[arg-type]


def retrieval_eval(retriever: Retriever, questions: Iterable[GoldQuestion], modes: list[Mode | str],
                   k_max: int = 10) -> dict[str, Any]:
    """hit@1/5/10 and MRR per mode over the non-refusal questions, plus a per-question list."""
    qs = [q for q in questions if not q.is_refusal]
    result: dict[str, Any] = {"modes": {}, "questions": []}
    per_q: dict[str, dict[str, Any]] = {q.id: {"id": q.id, "kind": q.kind, "question": q.question, "ranks": {}}
                                       for q in qs}
    for m in modes:
        mode = Mode.parse(m)
        hits = {1: 0, 5: 0, 10: 0}
        rr = 0.0
        for q in qs:
            res = retriever.retrieve(q.question, q.scope(), k_max, mode)
            r = hit_rank(q, [c.text for c in res.chunks])
            per_q[q.id]["ranks"][mode.value] = r
            if q.kind == "scoped":
                per_q[q.id].setdefault("scope_violations", {})[mode.value] = sum(
                    1 for c in res.chunks if c.doc_name != q.doc_name)
            for k in hits:
                hits[k] += int(r is not None and r <= k)
            rr += 1.0 / r if r else 0.0
        n = len(qs) or 1
        result["modes"][mode.value] = {"hit@1": hits[1] / n, "hit@5": hits[5] / n, "hit@10": hits[10] / n,
                                       "mrr": rr / n, "n": len(qs)}
    result["questions"] = list(per_q.values())
    return result

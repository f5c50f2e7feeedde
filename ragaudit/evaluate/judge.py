"""Judges of answer quality: faithfulness, context relevance and answer relevance.

Faithfulness (after ragas' definition: supported claims / claims): the answer is split into
claims (its sentences, ``citations.claim_parts``). A claim counts as supported only
when a supporting *quote* is given that really occurs (whitespace-normalised) in a chunk the
claim cites ``[n]`` — whoever proposed the quote. So a judge model cannot make a claim supported
by inventing a quote: quotes not found in the cited chunk are counted unsupported.

- ``DeterministicJudge`` (``judge: "deterministic"``, offline): the quote is the claim itself
  when it occurs verbatim in a cited chunk, else the cited chunk's sentence covering the most of
  the claim's terms, accepted when it covers at least ``min_term_recall`` (0.8) of them.
  Context relevance = mean over the contexts of the share of the question's terms they contain;
  answer relevance = cosine similarity of question and answer embeddings (clipped to [0, 1]).
- ``LLMJudge`` (``judge: <litellm model>``): one call per answer returning JSON (validated with
  pydantic) with a verdict and quote per claim and 0-1 ratings of context and answer relevance.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
from pydantic import BaseModel, Field, ValidationError

from ragaudit.answer.citations import claim_parts, find_quote, normalize_ws, strip_citations
from ragaudit.evaluate.goldgen import parse_json_object
from ragaudit.evaluate.metrics import REFUSAL_LABELS, MetricResult, term_overlap
from ragaudit.index.sparse import tokenize
from ragaudit.platform.llmcall import load_litellm
from ragaudit.text.injection import DATA_NOT_INSTRUCTIONS, delimit
from ragaudit.text.sentences import sentence_spans


@dataclass
class Claim:
    """One claim of an answer with the sources ``[n]`` it cites."""

    i: int
    text: str
    cites: list[int]


def split_claims(response: str) -> list[Claim]:
    """Claims of ``response`` (``citations.claim_parts``): its sentences, further cut after a
    citation that is followed by more text (``"A [1] B [2]."`` is two claims), citations
    stripped, with their cited numbers. Fragments of fewer than 2 words are dropped."""
    return [Claim(i, t, nums) for i, (t, nums) in enumerate(claim_parts(response))]


@dataclass
class JudgeResult:
    """Scores of one answer; ``claims`` lists ``{claim, cites, supported, quote, source, reason}``.
    Cost in USD and tokens of the judge call (0 for the deterministic judge)."""

    judge: str
    faithfulness: MetricResult
    context_relevance: MetricResult
    answer_relevance: MetricResult
    claims: list[dict[str, Any]] = field(default_factory=list)
    cost_usd: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0


def _verify(
    claims: list[Claim], verdicts: dict[int, tuple[bool, str, int | None]], contexts: Sequence[str]
) -> tuple[MetricResult, list[dict[str, Any]]]:
    """Faithfulness from per-claim verdicts ``{i: (supported, quote, source n)}``: a claim is
    supported only if the quote occurs in a context that the claim cites."""
    rows = []
    ok = 0
    for c in claims:
        sup, quote, src = verdicts.get(c.i, (False, "", None))
        reason = ""
        if not c.cites:
            sup, reason = False, "claim cites no source"
        elif not sup:
            reason = reason or "judge: not supported"
        else:
            cands = [src] if src in c.cites else c.cites
            where = next(
                (n for n in cands if 1 <= n <= len(contexts) and find_quote(quote, contexts[n - 1]) >= 0), None
            )
            if where is None:
                sup, reason = False, "supporting quote not found in the cited chunk"
            else:
                src, reason = where, f"quote found in source [{where}]"
        ok += int(sup)
        rows.append(
            {"claim": c.text, "cites": c.cites, "supported": bool(sup), "quote": quote, "source": src, "reason": reason}
        )
    if not claims:
        return MetricResult(float("nan"), "no claims in the answer"), rows
    return MetricResult(ok / len(claims), f"{ok}/{len(claims)} claims supported by a verified quote"), rows


class DeterministicJudge:
    """Offline judge; see the module docstring. ``name = "deterministic"``."""

    name = "deterministic"

    def __init__(self, embedder: Any = None, min_term_recall: float = 0.8):
        self.embedder = embedder
        self.min_term_recall = min_term_recall

    def _support(self, claim: Claim, contexts: Sequence[str]) -> tuple[bool, str, int | None]:
        terms = set(tokenize(claim.text))
        best: tuple[float, str, int | None] = (0.0, "", None)
        for n in claim.cites:
            if not 1 <= n <= len(contexts):
                continue
            ctx = contexts[n - 1]
            if find_quote(claim.text, ctx) >= 0:
                return True, claim.text, n
            for s, e in sentence_spans(ctx):
                sent = ctx[s:e]
                rec = len(terms & set(tokenize(sent))) / len(terms) if terms else 0.0
                if rec > best[0]:
                    best = (rec, normalize_ws(sent), n)
        return best[0] >= self.min_term_recall, best[1], best[2]

    def judge(self, user_input: str, response: str, retrieved_contexts: Sequence[str]) -> JudgeResult:
        """Score ``response`` to ``user_input`` given the numbered ``retrieved_contexts`` (1-based)."""
        claims = split_claims(response)
        faith, rows = _verify(claims, {c.i: self._support(c, retrieved_contexts) for c in claims}, retrieved_contexts)
        if retrieved_contexts:
            vals = [term_overlap(user_input, t, tokenize) for t in retrieved_contexts]
            ctx = MetricResult(float(np.mean(vals)), f"mean share of question terms per context over {len(vals)}")
        else:
            ctx = MetricResult(float("nan"), "no retrieved contexts")
        ans_text = strip_citations(response)
        if self.embedder is not None and ans_text:
            v = self.embedder.embed([user_input, ans_text])
            cos = float(np.clip(v[0] @ v[1], 0.0, 1.0))
            ansr = MetricResult(cos, "cosine similarity of question and answer embeddings")
        else:
            ansr = MetricResult(float("nan"), "no answer text or no embedder")
        return JudgeResult(self.name, faith, ctx, ansr, rows)


JUDGE_SYSTEM_PROMPT = (
    "You are a strict evaluation judge for a question answering system that cites numbered sources. "
    "For each numbered claim of the answer, decide whether the source it cites supports it, and if so copy "
    "the supporting sentence character for character from that source. Also rate from 0 to 1 how relevant the "
    "sources are to the question (context_relevance) and how directly the answer addresses the question "
    "(answer_relevance). Reply with JSON only: "
    '{"claims": [{"i": 0, "supported": true, "source": 1, "quote": "..."}], '
    '"context_relevance": 0.0, "answer_relevance": 0.0}. ' + DATA_NOT_INSTRUCTIONS
)


class _Verdict(BaseModel):
    i: int
    supported: bool
    source: int | None = None
    quote: str = ""


class _Judgement(BaseModel):
    claims: list[_Verdict] = Field(default_factory=list)
    context_relevance: float = Field(ge=0, le=1)
    answer_relevance: float = Field(ge=0, le=1)


class LLMJudge:
    """Judge through litellm (``name`` = the model string). Raises ``ValueError`` when the model's
    output is not valid judgement JSON and litellm's exceptions for API errors."""

    def __init__(self, model: str, **completion_kwargs: Any):
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        self.name = model
        self.kwargs = {k: v for k, v in completion_kwargs.items() if v not in (None, "")}

    def judge(self, user_input: str, response: str, retrieved_contexts: Sequence[str]) -> JudgeResult:
        litellm = load_litellm()

        claims = split_claims(response)
        sources = "\n\n".join(delimit(t, n=n) for n, t in enumerate(retrieved_contexts, 1))
        listed = "\n".join(f"{c.i}. {c.text} (cites {c.cites or 'nothing'})" for c in claims)
        resp = litellm.completion(
            model=self.name,
            messages=[
                {"role": "system", "content": JUDGE_SYSTEM_PROMPT},
                {
                    "role": "user",
                    "content": f"Question: {user_input}\n\nSources:\n{sources}\n\nAnswer claims:\n{listed}",
                },
            ],
            **self.kwargs,
        )
        usage = getattr(resp, "usage", None)
        try:
            cost = float(litellm.completion_cost(completion_response=resp) or 0.0)
        except Exception:  # model without a known price
            cost = 0.0
        try:
            j = _Judgement.model_validate(parse_json_object(resp.choices[0].message.content or ""))
        except ValidationError as e:
            raise ValueError(f"judge output invalid: {e.error_count()} errors") from None
        verdicts = {v.i: (v.supported, v.quote, v.source) for v in j.claims}
        faith, rows = _verify(claims, verdicts, retrieved_contexts)
        return JudgeResult(
            self.name,
            faith,
            MetricResult(j.context_relevance, f"rated by {self.name}"),
            MetricResult(j.answer_relevance, f"rated by {self.name}"),
            rows,
            cost,
            getattr(usage, "prompt_tokens", 0) or 0,
            getattr(usage, "completion_tokens", 0) or 0,
        )


def build_judge(svc: Any) -> DeterministicJudge | LLMJudge:
    """``judge_model`` if set ("deterministic" forces the offline judge), else ``llm_model``,
    else the deterministic judge."""
    s = svc.settings
    model = s.judge_model or s.llm_model
    if model and model != "deterministic":
        return LLMJudge(
            model,
            api_base=s.llm_api_base or None,
            api_key=s.llm_api_key.get_secret_value() if s.llm_api_key else None,
            temperature=0.0,
            max_tokens=max(s.llm_max_tokens, 1024),
            timeout=s.llm_timeout_s,
            max_retries=s.llm_retries,
        )
    return DeterministicJudge(svc.embedder)


def judge_control(
    per_q: list[dict[str, Any]], answers_by_id: dict[str, dict[str, Any]], judge: Any, n: int
) -> dict[str, Any]:
    """The judge control: score up to ``n`` answers against another question's retrieved context
    (sharing no chunk and, when possible, no document). A control *fails* when faithfulness < 0.5
    (or is undefined); a working judge fails all of them, so ``all_failed`` false means the judge
    is too lenient.

    ``per_q``: ``[{"id"}]`` in run order; ``answers_by_id``: id -> answer JSON (``question``,
    ``answer``, ``label``, ``retrieved[{chunk_id, doc_name, text}]``). Returns ``{"judge", "n",
    "failed", "all_failed", "verdict", "rule", "pairs": [{answer_of, context_of, faithfulness,
    failed, reason}]}``: ``failed`` counts the pairs the judge rejected, as it should, and
    ``verdict`` says in words whether the judge passed its control ("judge ok: ..."); a judge
    error counts as a control that did not fail."""
    cands = [
        (p["id"], answers_by_id[p["id"]])
        for p in per_q
        if p["id"] in answers_by_id and answers_by_id[p["id"]]["label"] not in REFUSAL_LABELS
    ]
    pairs = []
    for i, (qid, out) in enumerate(cands):
        if len(pairs) >= n:
            break
        mine = {r["chunk_id"] for r in out["retrieved"]}
        docs = {r["doc_name"] for r in out["retrieved"][:1]}
        others = [
            (oid, o) for oid, o in cands[i + 1 :] + cands[:i] if not mine & {r["chunk_id"] for r in o["retrieved"]}
        ]
        others.sort(key=lambda x: x[1]["retrieved"][0]["doc_name"] in docs if x[1]["retrieved"] else True)
        if others:
            pairs.append((qid, out, others[0][0], others[0][1]))
    rows = []
    failed = 0
    for qid, out, oid, other in pairs:
        try:
            j = judge.judge(out["question"], out["answer"], [r["text"] for r in other["retrieved"]])
            v = j.faithfulness.value
            ok_fail = v is None or math.isnan(v) or v < 0.5
            reason = j.faithfulness.reason
        except Exception as e:
            v, ok_fail, reason = None, False, f"judge failed: {type(e).__name__}"
        failed += int(ok_fail)
        rows.append(
            {
                "answer_of": qid,
                "context_of": oid,
                "faithfulness": None if v is None or math.isnan(v) else round(float(v), 6),
                "failed": bool(ok_fail),
                "reason": reason,
            }
        )
    if not rows:
        verdict = "not run: fewer than two answered questions with disjoint contexts"
    elif failed == len(rows):
        verdict = f"judge ok: it scored all {len(rows)} mismatched answer/context pairs unfaithful"
    else:
        verdict = f"judge too lenient: it scored {len(rows) - failed} of {len(rows)} mismatched pairs faithful"
    return {
        "judge": judge.name,
        "n": len(rows),
        "failed": failed,
        "all_failed": failed == len(rows),
        "verdict": verdict,
        "rule": "faithfulness of an answer judged against another question's context must be < 0.5",
        "pairs": rows,
    }

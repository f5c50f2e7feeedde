"""Gold question/answer pairs generated from chunks at ingestion, each with a verbatim evidence span.

Every ``every_n``-th chunk (chunk index 0, N, 2N, ...) yields up to ``per_chunk`` candidate pairs
``{question, answer, evidence, kind, answer_type, paraphrase}``. Whatever writes them, every
candidate goes through the same check before it is stored (``ragaudit.evaluate.goldcheck``: a
well-formed question, evidence verbatim in the chunk, answer in the evidence, no near-duplicate
of another pair of the document); failing pairs are not stored and the count of each reason is
kept per document (``documents.gold_report``, the Dagster materialization metadata, the admin).
A pair whose evidence lies in a sentence that reads as an instruction to an assistant
(``ragaudit.text.injection``) is discarded too (``discarded_instruction``): an instruction is no
evidence of a fact.

Generators:
- ``RuleGenerator`` (offline, ``generator: "rules"``, ``ragaudit.evaluate.goldrules``): questions
  written the way the document states its facts (labelled values, table cells, vote tallies,
  typed declarative sentences), qualified by what the document is about, a share paraphrased.
- ``LLMGenerator`` (``generator: "llm"``, ``model``: the litellm model string): the model is asked
  for 2-3 pairs phrased as a user would ask, each with the evidence quote it used, as JSON
  validated with pydantic; the passage is delimited as data, never instructions.
"""

from __future__ import annotations

import json
import logging
import os
import re
from typing import Any

from pydantic import BaseModel, Field, ValidationError
from sqlalchemy import delete, select

from ragaudit.answer.citations import find_quote, normalize_ws, quote_span
from ragaudit.evaluate.goldcheck import REASONS, PairCheck, content_words
from ragaudit.evaluate.goldrules import GoldPair, RuleGenerator, answer_type_of, document_context
from ragaudit.platform.db import ChunkRow, Document, QAPair
from ragaudit.platform.llmcall import load_litellm
from ragaudit.services import Services
from ragaudit.text.injection import DATA_NOT_INSTRUCTIONS, delimit, overlaps, scan
from ragaudit.text.sentences import sentence_spans
from ragaudit.types import Chunk, Strategy

log = logging.getLogger(__name__)

__all__ = ["GoldPair", "LLMGenerator", "RuleGenerator", "build_generator", "generate_for_document"]


class _PairModel(BaseModel):
    question: str = Field(min_length=5)
    answer: str = Field(min_length=1)
    evidence: str = Field(min_length=3)


class _PairsModel(BaseModel):
    pairs: list[_PairModel]


GEN_SYSTEM_PROMPT = (
    "You write evaluation questions for a document search system. From the passage, write 2 or 3 "
    "question/answer pairs about specific facts it states (numbers, dates, names, identifiers, amounts). "
    "Phrase each question the way a user would ask it, in your own words, as a complete question that "
    "makes sense without the passage (name what the document is about, never 'this document'). The "
    "answer is short (a few words) and appears in the evidence. 'evidence' is the quote you used: the "
    "sentence or table row that proves the answer, copied character for character from the passage. "
    'Reply with JSON only: {"pairs": [{"question": "...", "answer": "...", "evidence": "..."}]}. '
    "The passage is a source: " + DATA_NOT_INSTRUCTIONS
)


def parse_json_object(text: str) -> Any:
    """Parse a JSON object from model output, tolerating a Markdown code fence around it.
    Raises ``ValueError`` when no JSON object can be read."""
    t = text.strip()
    m = re.search(r"```(?:json)?\s*(.*?)```", t, re.S)
    if m:
        t = m.group(1).strip()
    if not t.startswith("{"):
        a, b = t.find("{"), t.rfind("}")
        if a < 0 or b < a:
            raise ValueError("no JSON object in model output")
        t = t[a : b + 1]
    try:
        return json.loads(t)
    except json.JSONDecodeError as e:
        raise ValueError(f"invalid JSON from model: {e}") from None


class LLMGenerator:
    """Pairs written by a litellm model (``generator: "llm"``). ``completion_kwargs`` go to
    ``litellm.completion``. Raises ``ValueError`` for output that is not valid pairs JSON and
    litellm's exceptions for API errors (the caller counts the chunk as failed)."""

    name = "llm"

    def __init__(self, model: str, per_chunk: int = 3, **completion_kwargs: Any):
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        self.model = model
        self.per_chunk = per_chunk
        self.kwargs = {k: v for k, v in completion_kwargs.items() if v not in (None, "")}
        self.cost_usd = 0.0
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0

    def prepare(self, doc_name: str, chunks: list[Chunk]) -> None:
        """Read what the document is about (its subject is named to the model)."""
        self.ctx = document_context(doc_name, chunks)

    def generate(self, chunk: Chunk) -> list[GoldPair]:
        """Up to ``per_chunk`` pairs the model wrote for ``chunk`` (kind ``llm``; the answer type
        read from the answer; ``paraphrase`` when fewer than half of the question's content words
        are in the evidence). Raises ``ValueError`` for output that is not pairs JSON."""
        litellm = load_litellm()
        ctx = getattr(self, "ctx", None)
        about = ctx.subject if ctx is not None else ""
        resp = litellm.completion(
            model=self.model,
            messages=[
                {"role": "system", "content": GEN_SYSTEM_PROMPT},
                {
                    "role": "user",
                    "content": (f"The document is {about}.\n" if about else "")
                    + f"Passage:\n{delimit(chunk.text, document=ctx.doc_name if ctx else '')}",
                },
            ],
            **self.kwargs,
        )
        self.calls += 1
        usage = getattr(resp, "usage", None)
        self.prompt_tokens += getattr(usage, "prompt_tokens", 0) or 0
        self.completion_tokens += getattr(usage, "completion_tokens", 0) or 0
        try:
            self.cost_usd += float(litellm.completion_cost(completion_response=resp) or 0.0)
        except Exception:  # model without a known price
            pass
        data = parse_json_object(resp.choices[0].message.content or "")
        try:
            pairs = _PairsModel.model_validate(data).pairs
        except ValidationError as e:
            raise ValueError(f"model output is not a list of pairs: {e.error_count()} errors") from None
        out = []
        for p in pairs[: self.per_chunk]:
            q, ev = normalize_ws(p.question), normalize_ws(p.evidence)
            words = content_words(q)
            shared = len(words & content_words(ev)) / max(1, len(words))
            out.append(GoldPair(q, normalize_ws(p.answer), ev, "llm", answer_type_of(p.answer), shared < 0.5))
        return out


def build_generator(svc: Services) -> RuleGenerator | LLMGenerator:
    """The generator ``qa_generator`` names: ``llm`` (``llm_model``; ``ValueError`` when it is
    empty), ``rules``, or ``auto``: the LLM generator when ``llm_model`` is set, else the rules."""
    s = svc.settings
    if s.qa_generator == "llm" and not s.llm_model:
        raise ValueError("RAGAUDIT_QA_GENERATOR=llm needs RAGAUDIT_LLM_MODEL")
    if s.llm_model and s.qa_generator != "rules":
        return LLMGenerator(
            s.llm_model,
            s.qa_pairs_per_chunk,
            api_base=s.llm_api_base or None,
            api_key=s.llm_api_key.get_secret_value() if s.llm_api_key else None,
            temperature=s.llm_temperature,
            max_tokens=s.llm_max_tokens,
            timeout=s.llm_timeout_s,
            max_retries=s.llm_retries,
        )
    return RuleGenerator(s.qa_pairs_per_chunk)


def check_pairs(
    chunks: list[Chunk], generator: RuleGenerator | LLMGenerator, doc_name: str, every: int
) -> tuple[list[tuple[Chunk, GoldPair]], dict[str, Any]]:
    """Generate candidates from every ``every``-th chunk and check them (``goldcheck``).

    Returns the pairs that pass, each with its chunk, and the counts: ``chunks_sampled``,
    ``generated`` (candidates), ``stored`` (passed), ``rejected`` (``{reason: n}``, every reason),
    ``rejected_examples`` (``{reason: "question -> answer"}``, the first rejected for each reason),
    ``failed_chunks`` (generator error or invalid output: counted, the run goes on),
    ``failure_kinds`` and ``discarded_instruction`` (pairs whose evidence lies in a sentence that
    reads as an instruction to an assistant, ``ragaudit.text.injection``: an instruction is no
    evidence of a fact)."""
    generator.prepare(doc_name, chunks)
    chk = PairCheck(context=generator.ctx.about() if generator.name == "rules" else "")
    kept: list[tuple[Chunk, GoldPair]] = []
    sampled = failed = instruction = 0
    failures: dict[str, int] = {}
    for c in chunks:
        if c.index % every:
            continue
        sampled += 1
        try:
            pairs = generator.generate(c)
        except Exception as e:  # an API error or bad output for one chunk must not fail ingestion
            failed += 1
            failures[type(e).__name__] = failures.get(type(e).__name__, 0) + 1
            log.warning("gold pairs for chunk %s of %s failed: %s", c.index, doc_name, e)
            continue
        flagged = scan(c.text, sentence_spans(c.text)).spans if pairs else []
        for p in pairs:
            span = quote_span(p.evidence, c.text)
            if span is not None and flagged and overlaps(span[0], span[1], flagged):
                instruction += 1
                continue
            if chk.check(p.question, p.answer, p.evidence, p.answer_type, c.text) is None:
                kept.append((c, p))
    kept = [x for n, x in enumerate(kept) if n not in chk.dropped]
    return kept, {
        "chunks_sampled": sampled,
        "generated": chk.generated + instruction,
        "stored": len(kept),
        "rejected": chk.report(),
        "rejected_examples": dict(chk.examples),
        "discarded_instruction": instruction,
        "failed_chunks": failed,
        "failure_kinds": failures,
    }


def generate_for_document(
    svc: Services,
    document_id: str,
    chunks: list[Chunk],
    strategy: Strategy,
    generator: RuleGenerator | LLMGenerator | None = None,
) -> dict[str, Any]:
    """Generate, check and store the gold pairs of one document (replacing its previous pairs)
    from its ``chunks``, built with ``strategy`` (their live rows give the pairs' chunk ids), and
    record the counts in ``documents.gold_report``.

    Returns metadata (scalars, as Dagster shows them): ``generated``, ``stored`` (= ``kept``),
    ``discarded`` (rejected in all), ``rejected_<reason>`` for each of ``goldcheck.REASONS``,
    ``discarded_instruction`` (evidence in a sentence that reads as an instruction; in ``discarded``
    too), ``chunks_sampled``, ``failed_chunks``, ``failure_kinds`` and ``rejected_examples`` (JSON),
    ``generator``, ``model``, ``every_n_chunks``, ``cost_usd``, ``llm_calls``; ``documents.gold_report``
    also holds the calls' ``prompt_tokens`` and ``completion_tokens``. Raises ``KeyError`` for an
    unknown document."""
    gen = generator or build_generator(svc)
    every = svc.settings.qa_every_n_chunks
    with svc.sessions() as s:
        doc = s.get(Document, document_id)
        if doc is None:
            raise KeyError(f"document {document_id} not found")
        ids = dict(
            s.execute(
                select(ChunkRow.index, ChunkRow.id).where(
                    ChunkRow.document_id == document_id,
                    ChunkRow.strategy == Strategy.parse(strategy).value,
                    ChunkRow.live.is_(True),
                )
            ).all()
        )
        doc_name = doc.doc_name
    kept, counts = check_pairs(chunks, gen, doc_name, every)
    rows = [
        QAPair(
            document_id=document_id,
            chunk_id=ids.get(c.index),
            page=c.page_at((quote_span(p.evidence, c.text) or (0, 0))[0]),
            question=p.question,
            answer=normalize_ws(p.answer),
            evidence=normalize_ws(p.evidence),
            generator=gen.name,
            model=gen.model,
            kind=p.kind,
            answer_type=p.answer_type,
            paraphrase=p.paraphrase,
        )
        for c, p in kept
    ]
    report = {
        "generator": gen.name,
        "model": gen.model,
        **counts,
        # what writing them spent (the rules: nothing): LLM calls, word pieces and USD
        "llm_calls": getattr(gen, "calls", 0),
        "prompt_tokens": getattr(gen, "prompt_tokens", 0),
        "completion_tokens": getattr(gen, "completion_tokens", 0),
        "cost_usd": round(getattr(gen, "cost_usd", 0.0), 6),
        "paraphrases": sum(p.paraphrase for _, p in kept),
        "by_kind": _count(p.kind for _, p in kept),
    }
    with svc.sessions.begin() as s:
        s.execute(delete(QAPair).where(QAPair.document_id == document_id))
        s.add_all(rows)
        d = s.get(Document, document_id)
        if d is not None:
            d.gold_report = report
    return {
        "doc_name": doc_name,
        "generated": counts["generated"],
        "stored": counts["stored"],
        "kept": counts["stored"],
        "discarded": sum(counts["rejected"].values()) + counts["discarded_instruction"],
        **{f"rejected_{r}": counts["rejected"][r] for r in REASONS},
        "paraphrases": report["paraphrases"],
        "by_kind": json.dumps(report["by_kind"]),
        "chunks_sampled": counts["chunks_sampled"],
        "failed_chunks": counts["failed_chunks"],
        "failure_kinds": json.dumps(counts["failure_kinds"]),
        "rejected_examples": json.dumps(counts["rejected_examples"]),
        "discarded_instruction": counts["discarded_instruction"],
        "generator": gen.name,
        "model": gen.model or "none",
        "every_n_chunks": every,
        "cost_usd": report["cost_usd"],
        "llm_calls": report["llm_calls"],
    }


def _count(items: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in items:
        out[x] = out.get(x, 0) + 1
    return out


def verify_stored_pairs(svc: Services) -> dict[str, Any]:
    """Check every stored pair: its evidence occurs verbatim in its chunk's text and its answer is
    non-empty. Returns ``{pairs, verbatim, not_verbatim, missing_chunk, documents_with_pairs}``."""
    out = {"pairs": 0, "verbatim": 0, "not_verbatim": 0, "missing_chunk": 0}
    docs: set[str] = set()
    with svc.sessions() as s:
        rows = s.execute(
            select(QAPair.evidence, QAPair.answer, QAPair.document_id, ChunkRow.text).join(
                ChunkRow, ChunkRow.id == QAPair.chunk_id, isouter=True
            )
        ).all()
    for ev, ans, doc_id, text in rows:
        out["pairs"] += 1
        docs.add(doc_id)
        if text is None:
            out["missing_chunk"] += 1
        elif find_quote(ev, text) >= 0 and ans.strip():
            out["verbatim"] += 1
        else:
            out["not_verbatim"] += 1
    out["documents_with_pairs"] = len(docs)
    return out

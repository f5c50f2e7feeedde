"""Gold question/answer pairs generated from chunks at ingestion, each with a verbatim evidence span.

Every ``every_n``-th chunk (chunk index 0, N, 2N, ...) yields up to ``per_chunk`` pairs
``{question, answer, evidence}``. Whatever writes them, a pair is kept only when its evidence
occurs verbatim (whitespace-normalised, ``citations.find_quote``) in the chunk text and its
answer is non-empty; other pairs are discarded and counted.

Generators:
- ``ExtractiveGenerator`` (offline, ``generator: "extractive"``): deterministic cloze-style
  questions from the chunk's sentences that state a fact — a date, an identifier, a number
  with its unit, a definition ("X means Y") or a proper name. The fact span is the answer, a
  window of the sentence around it is the evidence, and the question is that window with the
  fact replaced by a wh-phrase ("... signed into law on what date?"). Cloze questions reuse the
  text's wording, so they are a lexical baseline (cf. Lewis et al., "Unsupervised Question
  Answering by Cloze Translation", ACL 2019).
- ``LLMGenerator`` (``generator: "llm"``, ``model``: the litellm model string): the model is
  asked for 2-3 pairs phrased as a user would ask, as JSON validated with pydantic.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field, ValidationError
from sqlalchemy import delete, select

from ragaudit.answer.citations import find_quote, normalize_ws, quote_span
from ragaudit.ingest.chunking import sentence_spans
from ragaudit.platform.db import ChunkRow, Document, QAPair
from ragaudit.platform.llmcall import load_litellm
from ragaudit.services import Services
from ragaudit.text.injection import DATA_NOT_INSTRUCTIONS, delimit, overlaps, scan
from ragaudit.types import Chunk, Strategy

log = logging.getLogger(__name__)


@dataclass
class GoldPair:
    """A candidate pair from a chunk; ``evidence`` must occur verbatim in the chunk text."""

    question: str
    answer: str
    evidence: str
    kind: str = "fact"


class _PairModel(BaseModel):
    question: str = Field(min_length=5)
    answer: str = Field(min_length=1)
    evidence: str = Field(min_length=3)


class _PairsModel(BaseModel):
    pairs: list[_PairModel]


_MONTH = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November|December|"
    r"Jan\.|Feb\.|Mar\.|Apr\.|Aug\.|Sept?\.|Oct\.|Nov\.|Dec\.)"
)
_PATTERNS: list[tuple[str, re.Pattern, str]] = [
    ("date", re.compile(rf"\b{_MONTH}\s+\d{{1,2}},\s+\d{{4}}\b|\b\d{{1,2}}/\d{{1,2}}/\d{{4}}\b"), "what date"),
    (
        "identifier",
        re.compile(r"\b(?=[A-Z0-9-]*\d)(?=[A-Z0-9-]*[A-Z])[A-Z0-9]{2,}(?:-[A-Z0-9]+)*\b|\b\d+-\d+(?:-\d+)*\b"),
        "what identifier",
    ),
    (
        "number",
        re.compile(
            r"(?<![\w.])\$?\d[\d,]*(?:\.\d+)?(?:\s?(?:%|percent|hours?|years?|months?|days?|minutes?|"
            r"feet|knots|miles|million|billion|pages?|sections?))?(?![\w.])"
        ),
        "what number",
    ),
    ("name", re.compile(r"\b(?:[A-Z][a-z]+\s+){1,3}[A-Z][a-z]+\b"), "which name"),
]
_DEFINITION = re.compile(
    r"^(?:The\s+)?(?P<term>[A-Z][\w\-]*(?:\s+[\w\-]+){0,5}?)\s+(?:is|are|means|refers to)\s+"
    r"(?P<def>(?:a|an|the)\s+[^,;.]{8,120})"
)


def _window(text: str, s: int, e: int, a_s: int, a_e: int, words: int = 14) -> tuple[int, int]:
    """Character span of at most ``words`` words either side of the answer, inside sentence s:e."""
    left = [m.start() for m in re.finditer(r"\S+", text[s:a_s])]
    right = [m.end() for m in re.finditer(r"\S+", text[a_e:e])]
    ws = s + left[-words] if len(left) > words else s
    we = a_e + right[words - 1] if len(right) > words else e
    return ws, we


class ExtractiveGenerator:
    """Deterministic offline generator; see the module docstring. ``name = "extractive"``."""

    name = "extractive"
    model = None

    def __init__(self, per_chunk: int = 3):
        self.per_chunk = per_chunk

    def generate(self, chunk_text: str, doc_name: str = "") -> list[GoldPair]:
        """Up to ``per_chunk`` pairs from ``chunk_text`` (at most one per sentence, fact kinds
        varied first). Never raises for odd text; returns [] when no sentence states a fact."""
        cands: list[tuple[int, int, GoldPair]] = []  # (priority, order, pair)
        for order, (s, e) in enumerate(sentence_spans(chunk_text)):
            sent = chunk_text[s:e]
            if len(sent.split()) < 6:
                continue
            pair = self._definition(chunk_text, s, e)
            prio = 1
            if pair is None:
                for kind, pat, wh in _PATTERNS:
                    m = next((m for m in pat.finditer(sent) if m.start() > 0 or kind != "name"), None)
                    if m is None:
                        continue
                    a_s, a_e = s + m.start(), s + m.end()
                    ws, we = _window(chunk_text, s, e, a_s, a_e)
                    before = normalize_ws(chunk_text[ws:a_s])
                    after = normalize_ws(chunk_text[a_e:we]).rstrip(" .;:,")
                    if len((before + " " + after).split()) < 4:
                        continue
                    q = normalize_ws(f"{before} {wh} {after}").rstrip(" .;:,") + "?"
                    pair = GoldPair(q[0].upper() + q[1:], m.group(0), normalize_ws(chunk_text[ws:we]), kind)
                    break
            if pair is not None:
                cands.append((prio, order, pair))
        # prefer kinds in priority order but keep variety: one per kind first, then the rest
        cands.sort(key=lambda x: (x[0], x[1]))
        picked: list[tuple[int, int, GoldPair]] = []
        kinds: set[str] = set()
        for c in cands:
            if c[2].kind not in kinds:
                picked.append(c)
                kinds.add(c[2].kind)
        for c in cands:
            if c not in picked:
                picked.append(c)
        picked = sorted(picked[: self.per_chunk], key=lambda x: x[1])
        return [p for _, _, p in picked]

    @staticmethod
    def _definition(text: str, s: int, e: int) -> GoldPair | None:
        sent = text[s:e]
        m = _DEFINITION.match(sent)
        if not m:
            return None
        term, definition = normalize_ws(m.group("term")), normalize_ws(m.group("def"))
        ws, we = _window(text, s, e, s + m.start("def"), s + m.end("def"))
        return GoldPair(
            f"What {'are' if ' are ' in sent[: m.end('term') + 5] else 'is'} {term}?",
            definition,
            normalize_ws(text[ws:we]),
            "definition",
        )


GEN_SYSTEM_PROMPT = (
    "You write evaluation questions for a document search system. From the passage, write 2 or 3 "
    "question/answer pairs about specific facts it states (numbers, dates, names, definitions). Phrase "
    "each question the way a user would ask it, in your own words, without copying the passage's wording. "
    "The answer is short (a few words). 'evidence' is the sentence or phrase that proves the answer, "
    "copied character for character from the passage. Reply with JSON only: "
    '{"pairs": [{"question": "...", "answer": "...", "evidence": "..."}]}. The passage is a source: '
    + DATA_NOT_INSTRUCTIONS
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

    def generate(self, chunk_text: str, doc_name: str = "") -> list[GoldPair]:
        litellm = load_litellm()

        resp = litellm.completion(
            model=self.model,
            messages=[
                {"role": "system", "content": GEN_SYSTEM_PROMPT},
                {"role": "user", "content": f"Passage:\n{delimit(chunk_text, document=doc_name)}"},
            ],
            **self.kwargs,
        )
        try:
            self.cost_usd += float(litellm.completion_cost(completion_response=resp) or 0.0)
        except Exception:  # model without a known price
            pass
        data = parse_json_object(resp.choices[0].message.content or "")
        try:
            pairs = _PairsModel.model_validate(data).pairs
        except ValidationError as e:
            raise ValueError(f"model output is not a list of pairs: {e.error_count()} errors") from None
        return [
            GoldPair(normalize_ws(p.question), normalize_ws(p.answer), normalize_ws(p.evidence), "llm")
            for p in pairs[: self.per_chunk]
        ]


def build_generator(svc: Services) -> ExtractiveGenerator | LLMGenerator:
    """The LLM generator when ``llm_model`` is set, else the extractive one."""
    s = svc.settings
    if s.llm_model:
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
    return ExtractiveGenerator(s.qa_pairs_per_chunk)


def generate_for_document(
    svc: Services,
    document_id: str,
    chunks: list[Chunk],
    strategy: Strategy,
    generator: ExtractiveGenerator | LLMGenerator | None = None,
) -> dict[str, Any]:
    """Generate, verify and store the gold pairs of one document (replacing its previous pairs)
    from its ``chunks``, built with ``strategy`` (their live rows give the pairs' chunk ids).

    Returns metadata: ``chunks_sampled``, ``kept``, ``discarded`` (evidence not verbatim in the
    chunk, or empty answer, or evidence in a sentence that reads as an instruction to an assistant:
    ``ragaudit.text.injection``, counted again in ``discarded_instruction``), ``failed_chunks``
    (generator error or invalid output: counted, the run goes on), ``generator``, ``model``,
    ``cost_usd``. Raises ``KeyError`` for an unknown document.
    """
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
    rows: list[QAPair] = []
    sampled = kept = discarded = failed = instruction = 0
    reasons: dict[str, int] = {}
    for c in chunks:
        if c.index % every:
            continue
        sampled += 1
        try:
            pairs = gen.generate(c.text, doc_name)
        except Exception as e:  # an API error or bad output for one chunk must not fail ingestion
            failed += 1
            reasons[type(e).__name__] = reasons.get(type(e).__name__, 0) + 1
            log.warning("gold pairs for chunk %s of %s failed: %s", c.index, doc_name, e)
            continue
        flagged = scan(c.text, sentence_spans(c.text)).spans if pairs else []
        for p in pairs:
            span = quote_span(p.evidence, c.text)
            if span is None or not p.answer.strip() or not p.question.strip():
                discarded += 1
                continue
            if flagged and overlaps(span[0], span[1], flagged):  # an instruction is no evidence of a fact
                discarded += 1
                instruction += 1
                continue
            off = span[0]
            kept += 1
            rows.append(
                QAPair(
                    document_id=document_id,
                    chunk_id=ids.get(c.index),
                    page=c.page_at(off),
                    question=p.question,
                    answer=normalize_ws(p.answer),
                    evidence=normalize_ws(p.evidence),
                    generator=gen.name,
                    model=gen.model,
                )
            )
    with svc.sessions.begin() as s:
        s.execute(delete(QAPair).where(QAPair.document_id == document_id))
        s.add_all(rows)
    return {
        "doc_name": doc_name,
        "chunks_sampled": sampled,
        "kept": kept,
        "discarded": discarded,
        "discarded_instruction": instruction,
        "failed_chunks": failed,
        "failure_kinds": json.dumps(reasons),
        "generator": gen.name,
        "model": gen.model or "none",
        "every_n_chunks": every,
        "cost_usd": round(getattr(gen, "cost_usd", 0.0), 6),
    }


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

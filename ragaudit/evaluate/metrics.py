"""Evaluation metrics as small units with named inputs, each returning a value and a reason.

Inputs follow the ragas naming (explodinggradients/ragas ``metrics/_context_precision.py``):
``user_input`` (the question), ``retrieved_contexts`` (chunk texts, best first), ``response``
(the answer), ``reference`` (the gold answer, or the gold evidence strings for retrieval).
Every metric returns ``MetricResult(value, reason)``; ``value`` is a float in [0, 1] (or NaN,
with a ``RuntimeWarning``, when an input it needs is empty).

Sources:
- hit@k, MRR: Voorhees, "The TREC-8 Question Answering Track Report" (1999).
- nDCG@k: Järvelin & Kekäläinen, "Cumulated gain-based evaluation of IR techniques",
  ACM TOIS 20(4), 2002 (binary gains, log2 discount).
- Exact match / token F1: the official SQuAD v1.1 evaluation script
  (``evaluate-v1.1.py``, Rajpurkar et al., EMNLP 2016): ``normalize_answer`` lower-cases,
  removes punctuation, the articles a/an/the and extra whitespace; F1 is the harmonic mean of
  token precision and recall over the bag of normalised tokens; the score is the max over the
  ground truths.
"""

from __future__ import annotations

import functools
import math
import re
import string
import warnings
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ragaudit.answer.citations import normalize_ws, strip_citations


@dataclass(frozen=True)
class MetricResult:
    """A metric value (float, NaN when undefined) and a human-readable reason."""

    value: float
    reason: str

    def to_json(self) -> dict[str, Any]:
        v = (
            None
            if self.value is None or (isinstance(self.value, float) and math.isnan(self.value))
            else round(float(self.value), 6)
        )
        return {"value": v, "reason": self.reason}


def _nan(metric: str, what: str) -> MetricResult:
    warnings.warn(f"{metric}: {what} is empty; returning NaN", RuntimeWarning, stacklevel=3)
    return MetricResult(float("nan"), f"{what} is empty")


# --------------------------------------------------------------------------- evidence matching


# a hyphen between two letters, with or without the line break after it: "GOR- SUCH" as one
# extractor prints a word broken at a line end, "GORSUCH" as another joins it
_LETTER_HYPHEN = re.compile(r"(?<=[^\W\d_])[-\u00ad‐‑]\s*(?=[^\W\d_])")


# a table's leader dots between a row label and its numbers, printed as dots or one ellipsis
_LEADER = re.compile(r"(?:\s*(?:\.{2,}|…)\s*)+")


def contains_evidence(text: str, evidence: str) -> bool:
    """True when ``evidence`` occurs in ``text`` after whitespace normalisation, or, as extractors
    differ in both, with all whitespace removed (spaces dropped: "Usedcarsandtrucks") and with
    hyphens between letters removed (a word broken at a line end: "vein- ticinco" against
    "veinticinco") and a table's leader dots as one ellipsis ("Shelter.......... 35.418" against
    "Shelter … 35.418"); both sides are normalised alike. Last, ``text`` may hold up to two
    one-character tokens between two words of ``evidence``: a subscript, superscript or footnote
    mark that one extractor prints in the line and another on the line below ("(SO ) 2 24 horas"
    against "(SO) 24 horas"); every character of ``evidence`` must still occur, in order. And
    the other way round: a script the evidence prints apart may be glued to its word in ``text``
    ("(SO ) 2 24 horas" against "(SO2) 24 horas"; ``_scripts_glued``)."""
    t, ev = normalize_ws(text), normalize_ws(evidence)
    if not ev:
        return False
    if ev in t or ev.replace(" ", "") in t.replace(" ", ""):
        return True

    def fold(s: str) -> str:
        return _LEADER.sub("…", _LETTER_HYPHEN.sub("", s))

    ft, fev = fold(t), fold(ev)
    if fev.replace(" ", "") in ft.replace(" ", ""):
        return True
    if _with_marks(fev).search(ft) is not None:
        return True
    return _scripts_glued(fev, ft.replace(" ", ""))


# a token standing alone in evidence that may be a sub- or superscript the extractor the evidence
# was copied from printed apart ("(SO ) 2", "V = 5.0V" with "CC" on the next line): one to three
# digits, one to three capitals, or one small letter
_SHORT_TOKEN = re.compile(r"\d{1,3}|[A-Z]{1,3}|[a-z]")
SCRIPT_TOKENS = 4  # evidence with more such tokens than this is not read this way (a row of small numbers)
SCRIPT_CHARS = 6  # at most this many letters or digits glued to the words of evidence in all


def _scripts_glued(evidence: str, text: str) -> bool:
    """Whether ``text`` (whitespace removed) holds ``evidence`` (whitespace-normalised) with its
    sub- and superscripts glued to their word, where evidence copied from an extractor that printed
    them apart has them as tokens of their own or not at all: "Dióxido de Azufre (SO ) 2 24 horas"
    against "(SO2) 24 horas", "Supply Current V = 5.0V" against "VCC = 5.0V". Up to
    ``SCRIPT_CHARS`` letters or digits in all may follow a symbol of one to three letters that
    ends a word of the evidence or stands before a mark; a short token (``_SHORT_TOKEN``) of the
    evidence may be missing only where it is one of them (moved into the word); every other
    character must match, in order."""
    tokens = evidence.split(" ")
    short = sum(1 for tk in tokens if _SHORT_TOKEN.fullmatch(tk))
    if short > SCRIPT_TOKENS or len(tokens) - short < 2:
        return False
    pattern, movable = _glued_pattern(evidence)
    for m in pattern.finditer(text):
        groups = m.groupdict()
        glued = [g for name, g in groups.items() if name.startswith("g") and g]
        moved = [movable[name] for name, g in groups.items() if name.startswith("d") and g is None]
        if sum(map(len, glued)) <= SCRIPT_CHARS and all(any(d in g for g in glued) for d in moved):
            return True
    return False


@functools.lru_cache(maxsize=4096)
def _glued_pattern(evidence: str) -> tuple[re.Pattern[str], dict[str, str]]:
    """``_scripts_glued``'s pattern over whitespace-free text, and its optional tokens by group
    name: each ``_SHORT_TOKEN`` optional (group ``dN``); after a run of one to three letters that
    ends a word or stands before a mark, up to three word characters (group ``gN``; possessive
    before a mark, so that it cannot take the mark)."""
    parts, movable, n = [], {}, 0
    for tk in (t for t in evidence.split(" ") if t):
        chars = []
        for k, ch in enumerate(tk):
            chars.append(re.escape(ch))
            # a script follows a symbol of one to three letters ("SO2", "VCC", "I2C", "PM10")
            run = re.search(r"[^\W\d_]+$", tk[: k + 1])
            if not ch.isalpha() or run is None or len(run.group(0)) > 3:
                continue
            if k + 1 == len(tk):
                chars.append(f"(?P<g{n}>\\w{{0,3}}?)")
            elif not (tk[k + 1].isalnum() or tk[k + 1] == "_"):
                chars.append(f"(?P<g{n}>\\w{{0,3}}+)")
            else:
                continue
            n += 1
        body = "".join(chars)
        if _SHORT_TOKEN.fullmatch(tk):
            movable[f"d{n}"] = tk
            body = f"(?P<d{n}>{body})?"
            n += 1
        parts.append(body)
    return re.compile("".join(parts)), movable


@functools.lru_cache(maxsize=4096)
def _with_marks(evidence: str) -> re.Pattern[str]:
    """``evidence`` as a pattern: each word's characters with optional spaces between them, and
    up to two one-character tokens allowed between words (``contains_evidence``)."""
    words = [r"\s?".join(map(re.escape, w)) for w in evidence.split(" ") if w]
    return re.compile(r"\s*(?:\s\S(?=\s)){0,2}\s*".join(words))


def evidence_part_ranks(retrieved_contexts: Sequence[str], reference: Sequence[str]) -> list[int | None]:
    """1-based rank of the first context containing each evidence string (None if absent)."""
    return [
        next((i for i, t in enumerate(retrieved_contexts, 1) if contains_evidence(t, ev)), None) for ev in reference
    ]


def _all_found_rank(retrieved_contexts: Sequence[str], reference: Sequence[str]) -> int | None:
    ranks = evidence_part_ranks(retrieved_contexts, reference)
    if not ranks or any(r is None for r in ranks):
        return None
    return max(ranks)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- retrieval metrics


def hit_at_k(retrieved_contexts: Sequence[str], reference: Sequence[str], k: int) -> MetricResult:
    """1.0 when every evidence string of ``reference`` is contained in the top ``k`` contexts."""
    if not reference:
        return _nan(f"hit@{k}", "reference")
    r = _all_found_rank(retrieved_contexts, reference)
    ok = r is not None and r <= k
    return MetricResult(float(ok), f"all evidence found by rank {r}" if r else "evidence not retrieved")


def reciprocal_rank(retrieved_contexts: Sequence[str], reference: Sequence[str]) -> MetricResult:
    """1 / (rank at which all evidence parts have been retrieved); 0 when not retrieved."""
    if not reference:
        return _nan("mrr", "reference")
    r = _all_found_rank(retrieved_contexts, reference)
    return MetricResult(1.0 / r if r else 0.0, f"evidence complete at rank {r}" if r else "evidence not retrieved")


def ndcg_at_k(retrieved_contexts: Sequence[str], reference: Sequence[str], k: int = 10) -> MetricResult:
    """nDCG@k with binary gains (Järvelin & Kekäläinen 2002).

    A context at rank i has gain 1 when it contains an evidence string not already covered by a
    higher-ranked context (so duplicates of one passage do not count twice); DCG = sum gain_i /
    log2(i + 1). The ideal DCG places one context per evidence string at ranks 1..R.
    """
    if not reference:
        return _nan(f"ndcg@{k}", "reference")
    covered: set[int] = set()
    dcg = 0.0
    for i, t in enumerate(retrieved_contexts[:k], start=1):
        new = [j for j, ev in enumerate(reference) if j not in covered and contains_evidence(t, ev)]
        if new:
            covered.update(new)
            dcg += 1.0 / math.log2(i + 1)
    idcg = sum(1.0 / math.log2(i + 1) for i in range(1, min(len(reference), k) + 1))
    return MetricResult(dcg / idcg, f"{len(covered)}/{len(reference)} evidence strings in top {k}")


def evidence_recall_at_k(retrieved_contexts: Sequence[str], reference: Sequence[str], k: int) -> MetricResult:
    """Share of the evidence strings contained in the top ``k`` contexts (partial credit for
    ``multipage`` questions, unlike hit@k)."""
    if not reference:
        return _nan(f"evidence_recall@{k}", "reference")
    ranks = evidence_part_ranks(retrieved_contexts[:k], reference)
    found = sum(1 for r in ranks if r is not None)
    return MetricResult(found / len(reference), f"{found}/{len(reference)} evidence strings in top {k}")


# --------------------------------------------------------------------------- SQuAD EM / F1


def normalize_answer(s: str) -> str:
    """SQuAD v1.1 ``normalize_answer``: lower case, drop punctuation, articles and extra spaces."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def gold_variants(reference: str) -> list[str]:
    """Ground truths for one gold answer: the answer itself and, when it carries a parenthetical
    note (``"FBVIF (French registered)"``), the answer without it. Scores are the max over them,
    as SQuAD takes the max over its several ground truths."""
    out = [reference]
    bare = normalize_ws(re.sub(r"\([^)]*\)", " ", reference))
    if bare and bare != normalize_ws(reference):
        out.append(bare)
    return out


def _f1_tokens(pred: list[str], gold: list[str]) -> float:
    common = Counter(pred) & Counter(gold)
    same = sum(common.values())
    if same == 0:
        return 0.0
    p, r = same / len(pred), same / len(gold)
    return 2 * p * r / (p + r)


def exact_match(response: str, reference: str) -> MetricResult:
    """SQuAD exact match (1.0/0.0) of normalised ``response`` against any gold variant."""
    if not reference or not normalize_answer(reference):
        return _nan("exact_match", "reference")
    golds = gold_variants(reference)
    ok = any(normalize_answer(response) == normalize_answer(g) for g in golds)
    return MetricResult(
        float(ok),
        "matches gold after SQuAD normalisation"
        if ok
        else f"{normalize_answer(response)!r} != {normalize_answer(golds[-1])!r}",
    )


def token_f1(response: str, reference: str) -> MetricResult:
    """SQuAD token F1 of ``response`` against the gold answer (max over gold variants)."""
    if not reference or not normalize_answer(reference):
        return _nan("f1", "reference")
    pred = normalize_answer(response).split()
    best = max(_f1_tokens(pred, normalize_answer(g).split()) for g in gold_variants(reference))
    return MetricResult(best, f"token F1 {best:.2f} over {len(pred)} answer tokens")


def concise_answer(response: str, reference: str) -> str:
    """The concise answer used for EM/F1: the shortest contiguous span of the (normalised,
    citation-free) response with the highest token F1 against the gold answer.

    This is gold-guided span selection, an upper bound for a concise-answer extractor: it
    measures whether the answer *contains* the gold tokens close together, and is what EM and
    F1 are computed on (``f1_full`` scores the whole response). O(n^2) in answer tokens.
    """

    toks = normalize_answer(strip_citations(response)).split()
    if not toks or not reference:
        return ""
    best, best_span = -1.0, (0, 0)
    for gold in gold_variants(reference):
        g = Counter(normalize_answer(gold).split())
        glen = sum(g.values())
        if not glen:
            continue
        for i in range(len(toks)):
            seen: Counter = Counter()
            same = 0
            for j in range(i, min(len(toks), i + 4 * glen + 8)):
                t = toks[j]
                seen[t] += 1
                if seen[t] <= g.get(t, 0):
                    same += 1
                if same == 0:
                    continue
                n = j - i + 1
                p, r = same / n, same / glen
                f = 2 * p * r / (p + r)
                if f > best + 1e-12 or (abs(f - best) <= 1e-12 and n < best_span[1] - best_span[0]):
                    best, best_span = f, (i, j + 1)
    return " ".join(toks[best_span[0] : best_span[1]]) if best > 0 else ""


# --------------------------------------------------------------------------- answer metrics

REFUSAL_LABELS = ("refused", "clarifying")


def refusal_correct(label: str, should_refuse: bool) -> MetricResult:
    """1.0 when a ``refuse`` question was refused (or answered with a clarifying question) and
    any other question was not."""
    refused = label in REFUSAL_LABELS
    ok = refused == should_refuse
    return MetricResult(float(ok), f"label {label!r}; {'should' if should_refuse else 'should not'} refuse")


def citation_validity(
    citations: Sequence[dict[str, Any]], invalid_numbers: Sequence[int], gold_places: Sequence[tuple[str, int]]
) -> MetricResult:
    """1.0 when the answer cites at least one source, every cited ``[n]`` names a source, and a
    citation points at a gold (doc_name, page) — the gold page, a page of ``extra_evidence`` or
    an ``also_found_in`` place. A citation points at every page its quote is on (``pages``: a
    sentence across a page break is on both; else ``page``)."""
    if not gold_places:
        return _nan("citation_validity", "gold places")
    if not citations:
        return MetricResult(0.0, "no citations")
    if invalid_numbers:
        return MetricResult(0.0, f"cited numbers with no source: {list(invalid_numbers)}")
    places = {(d, int(p)) for d, p in gold_places}

    def on(c: dict[str, Any]) -> list[int]:
        return [int(p) for p in c.get("pages") or [c.get("page") or 0]]

    hit = [(c, p) for c in citations for p in on(c) if (c.get("doc_name"), p) in places]
    if hit:
        return MetricResult(1.0, f"cites gold {hit[0][0]['doc_name']} p.{hit[0][1]}")
    got = sorted({f"{c.get('doc_name')} p.{c.get('page')}" for c in citations})
    return MetricResult(0.0, f"cites {', '.join(got)}; gold is {sorted(places)}")


def citation_support(citation_check: dict[str, Any]) -> MetricResult:
    """Share of an answer's cited claims whose citations support them: ``supported_claims /
    claims`` of the reply's ``citation_check`` (``citations.audit_citations``: every quote of the
    claim occurs in its chunk and holds the claim's numbers, dates and names). NaN (with a warning)
    when the answer has no cited claim (refusals, answers citing nothing)."""
    claims = int(citation_check.get("claims") or 0)
    if claims <= 0:
        return _nan("citation_support", "cited claims")
    ok = int(citation_check.get("supported_claims") or 0)
    bad = citation_check.get("unsupported") or []
    why = f"; first unsupported: {bad[0]['claim'][:80]!r}: {bad[0]['reason']}" if bad else ""
    return MetricResult(ok / claims, f"{ok}/{claims} cited claims supported by their quotes{why}")


def term_overlap(user_input: str, text: str, tokenize: Callable[[str], list[str]]) -> float:
    """Share of the distinct terms of ``user_input`` that occur in ``text`` (0 when no terms)."""
    q = set(tokenize(user_input))
    return len(q & set(tokenize(text))) / len(q) if q else 0.0

"""Passage ranking: re-order the fused candidates by where the question's words sit in each passage.

Both legs score a chunk as a whole against the whole question. Within one document that is what
decides the first passage wrongly most often: the document's own name and subject are in every
chunk of it, so BM25 and the dense model both prefer the passage that repeats the question's
general words ("Turner Dam", "inspection") over the one sentence that answers it ("the
recommended safe storage level is Full Storage"). This stage reads the candidates of both legs
once more (the fused list, ~40 chunks) with signals neither leg has:

- **local IDF**: a question term weighs ``ln((N + 1) / (1 + df))`` where ``df`` is the number of
  the ``N`` candidates holding it, so a term every candidate holds counts for nothing and one
  that a single passage holds counts most (query-dependent term weighting over the retrieved set:
  Xu & Croft, "Query expansion using local and global document analysis", SIGIR 1996). Proper
  names of the question count at ``NAME_WEIGHT``: a name identifies the document (printed once,
  on its first page), not the passage that answers;
- **best window**: the weighted share of the question's terms held by the best window of two
  consecutive lines or sentences of the chunk (term proximity as passage evidence: Callan,
  "Passage-level evidence in document retrieval", SIGIR 1994), and the same over windows that
  hold a value of the type the question asks for (a number for "how many / how much / what
  percentage", a date or year for "when", a person's name for "who");
- the share of words holding digits, for a question asking for a number;
- the candidate's fused position and its document's best position.

The score is a linear function of these seven features whose weights were fitted by pairwise
logistic regression (RankNet's loss with a linear scorer: Burges et al., ICML 2005) on the tuning
question sets: ``python -m bench.passage_rank_fit`` re-fits them and prints each set's hit@1/5 with
the weights fitted on the other sets only. The candidates are re-ordered by it (ties keep the fused
order); the X-ray shows each chunk's ``scores.passage_rank`` and, when the order changed, the rule
``retrieval.passage_rank`` with the passage that moved up.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ragaudit.index.sparse import tokenize
from ragaudit.text.anchors import question_anchors
from ragaudit.text.answer_types import HAS_NUMBER

# feature name -> weight (pairwise logistic regression on the tuning sets; bench/passage_rank_fit.py)
WEIGHTS: dict[str, float] = {
    "fused_rr": 6.33,
    "log_position": -0.84,
    "document_best": 1.04,
    "number_density": 3.83,
    "window_coverage": 4.28,
    "typed_window_coverage": 2.9,
    "chunk_coverage": 1.07,
}
FEATURES = tuple(WEIGHTS)
# a question's proper names weigh this share of their local IDF: they pick the document, not the passage
NAME_WEIGHT = 0.3
RRF_K = 60  # the fused position's reciprocal, scaled like RRF's: 60 / (60 + position)

_ASKS_NUMBER = re.compile(
    r"\b(how (many|much|long|big|large|often|old|far|high|fast)|what (percentage|share|proportion|number|"
    r"amount|price|value|rate|size))\b",
    re.I,
)
_ASKS_DATE = re.compile(r"\b(when|(what|which) (year|date))\b", re.I)
_ASKS_PERSON = re.compile(r"\s*who\b", re.I)
_DIGIT = re.compile(r"\d")
# a number written out ("protection continues for ten years")
_NUMBER = re.compile(
    r"\d|\b(one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|fifty|"
    r"sixty|seventy|eighty|ninety|hundred|thousand|million|billion|half|twice|double)\b",
    re.I,
)
_DATE = re.compile(r"\b(1[89]|20)\d\d\b|\d{1,2}/\d{1,2}/\d{2,4}")
_PERSON = re.compile(r"[A-Z][a-z]+ [A-Z][a-z]+")
_SEGMENT = re.compile(r"(?<=[.!?;:])\s+|\n")


def answer_type(question: str) -> str | None:
    """What the question asks for: ``"number"``, ``"date"``, ``"person"`` or None (other)."""
    q = question.strip()
    if _ASKS_NUMBER.search(q):
        return "number"
    if _ASKS_DATE.search(q):
        return "date"
    if _ASKS_PERSON.match(q):
        return "person"
    return None


def _has_type(text: str, kind: str | None) -> bool:
    if kind == "number":
        return bool(HAS_NUMBER.search(text))  # digits or a number written out ("ten years")
    if kind == "date":
        return bool(_DATE.search(text))
    if kind == "person":
        return bool(_PERSON.search(text))
    return False


@functools.lru_cache(maxsize=65536)
def _segment_terms(segment: str) -> frozenset[str]:
    """BM25 terms of one line or sentence (cached: the same passages come back query after query)."""
    return frozenset(tokenize(segment))


def segments(text: str) -> list[str]:
    """``text``'s lines and sentences (split at line breaks and after . ! ? ; : before a space)."""
    return [s for s in _SEGMENT.split(text) if s.strip()]


def question_terms(question: str) -> list[str]:
    """The question's BM25 terms (stemmed, stop words out) of two or more characters, in order, once."""
    return list(dict.fromkeys(t for t in tokenize(question) if len(t) > 1))


@dataclass
class Candidate:
    """What the features read of one fused candidate: its text, document and 1-based fused position."""

    text: str
    doc: str
    position: int


def features(question: str, candidates: Sequence[Candidate]) -> np.ndarray:
    """Feature matrix, shape ``(len(candidates), len(FEATURES))``, columns in ``FEATURES`` order:

    - ``fused_rr``: ``60 / (60 + position)``; ``log_position``: ``ln(position)``;
    - ``document_best``: ``1 / (best position of the candidate's document)``;
    - ``number_density``: share of the chunk's whitespace words holding a digit, when the
      question asks for a number, else 0;
    - ``window_coverage``: best share, over windows of two consecutive lines or sentences, of the
      question terms' local-IDF weight that the window holds; ``typed_window_coverage``: the same
      over windows holding a value of the question's answer type (0 when it has none);
    - ``chunk_coverage``: the share for the whole chunk.

    All in [0, 1] except ``log_position`` (0 for the first)."""
    terms = question_terms(question)
    names = set(tokenize(" ".join(a.text for a in question_anchors(question) if a.kind == "name")))
    kind = answer_type(question)
    texts = [segments(c.text) for c in candidates]
    segs = [[_segment_terms(x) for x in lines] for lines in texts]
    token_sets = [frozenset().union(*s) for s in segs]
    n = len(candidates)
    weight = {t: math.log((n + 1) / (1 + sum(1 for ts in token_sets if t in ts))) for t in terms}
    weight = {t: w * NAME_WEIGHT if t in names else w for t, w in weight.items() if w > 0}
    total = sum(weight.values()) or 1.0
    best_of_doc: dict[str, int] = {}
    for c in candidates:
        best_of_doc[c.doc] = min(best_of_doc.get(c.doc, c.position), c.position)
    out = np.zeros((n, len(FEATURES)))
    for i, (c, held, lines) in enumerate(zip(candidates, token_sets, texts)):
        best = typed = 0.0
        for j in range(len(lines)):
            words = segs[i][j] | segs[i][j + 1] if j + 1 < len(lines) else segs[i][j]
            share = sum(w for t, w in weight.items() if t in words) / total
            best = max(best, share)
            if kind and share > typed and _has_type(" ".join(lines[j : j + 2]), kind):
                typed = share
        words = c.text.split()
        density = sum(1 for w in words if _DIGIT.search(w)) / (len(words) or 1) if kind == "number" else 0.0
        out[i] = (
            RRF_K / (RRF_K + c.position),
            math.log(c.position),
            1.0 / best_of_doc[c.doc],
            density,
            best,
            typed,
            sum(w for t, w in weight.items() if t in held) / total,
        )
    return out


def scores(question: str, candidates: Sequence[Candidate]) -> np.ndarray:
    """The passage-rank score of each candidate (``features @ WEIGHTS``), shape ``(len(candidates),)``."""
    if not candidates:
        return np.zeros(0)
    return features(question, candidates) @ np.array([WEIGHTS[f] for f in FEATURES])


def order(question: str, candidates: Sequence[Candidate]) -> tuple[list[int], np.ndarray]:
    """``(indices best first, scores)``: the candidates by passage-rank score, ties in fused order."""
    s = scores(question, candidates)
    return sorted(range(len(candidates)), key=lambda i: (-s[i], i)), s

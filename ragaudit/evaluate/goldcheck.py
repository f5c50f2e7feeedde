"""The check every gold pair passes before it is stored, whichever generator wrote it.

A pair ``{question, answer, evidence, answer_type}`` of a chunk is rejected for the first of
these reasons (``REASONS``, in this order):

- ``not_a_question``: the question does not start with a question word or an auxiliary (a
  fronted prepositional phrase is allowed before one: "On what date ...", "In Apple Inc.'s
  Form 10-Q, what ..."), or does not end with "?";
- ``placeholder``: it holds a bracketed placeholder or a gap (``[...]``, ``{x}``, ``<X>``,
  "( what number )", "...", "___");
- ``dangling_fragment``: a fragment of a line or a cut phrase: fewer than four words, unbalanced
  brackets or quotes, a word cut at a hyphen ("-Votes"), or a last word that cannot end a
  question ("... of the?");
- ``answer_too_short``: the answer is shorter than its type allows (a date without a year or
  month, an amount or count without a digit, an identifier of fewer than three characters, a
  person's name of one word, an organisation's of one word that is no acronym, any answer
  without two letters or one digit);
- ``evidence_not_verbatim``: the evidence does not occur in the chunk text (whitespace
  normalised, ``citations.find_quote``);
- ``answer_not_in_evidence``: the answer does not occur in the evidence (case and spacing
  ignored; an amount may carry the scale word of its table, "63,355 million" for a cell "63,355"
  under "(In millions)");
- ``near_duplicate``: another pair of the same document already kept asks nearly the same
  (the same answer with at least ``DUPLICATE_WITH_SAME_ANSWER`` Jaccard overlap of the
  questions' content words, or ``DUPLICATE`` overlap whatever the answer). When the two answers
  differ, the question is ambiguous within its document (the same words ask for the quarter's
  and the year's figure), so the pair kept earlier is dropped too (``dropped``, counted under
  the same reason).

``PairCheck`` keeps the pairs of one document, counts rejections per reason and keeps the first
rejected question and answer of each reason as its example (shown with the counts, so a reader
sees what a reason caught).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field

from ragaudit.answer.citations import find_quote, normalize_ws
from ragaudit.text.dates import MONTH_PREFIX
from ragaudit.text.function_words import AUXILIARY, STOP_WORDS

REASONS = (
    "not_a_question",
    "placeholder",
    "dangling_fragment",
    "answer_too_short",
    "evidence_not_verbatim",
    "answer_not_in_evidence",
    "near_duplicate",
)
DUPLICATE = 0.85
DUPLICATE_WITH_SAME_ANSWER = 0.3
EXAMPLE_CHARS = 160  # of a rejected question and its answer shown as the reason's example

_WH = r"what|which|who|whom|whose|when|where|why|how"
_OPENER = re.compile(rf"(?i)^(?:{_WH}|{AUXILIARY})\b")
# a fronted prepositional phrase: "On what date ...", "In the 10-Q of X, what ...", "According to X, how ..."
_PREP = r"in|on|at|for|by|during|under|according to|from|to|of|with|as of|after|before|since|within|per|among"
_PREP_WH = re.compile(rf"(?i)^(?:{_PREP})\s+(?:{_WH})\b")
_PREP_CLAUSE = re.compile(rf"(?i)^(?:{_PREP})\b[^?]{{1,200}}?,\s+(?:{_WH}|{AUXILIARY})\b")
_PLACEHOLDER = re.compile(
    rf"[\[\]{{}}<>]|\(\s*(?:{_WH})\b[^)]*\)|\(\s*\)|\.\.\.|…|_{{2,}}|\bX{{3,}}\b|\b(?:TBD|TODO|PLACEHOLDER)\b",
    re.I,
)
_BAD_LAST = frozenset(
    """a an the of to in on for and or with by at from as that which whose its their his her our your
    is was are were be been being this these those than per via into onto upon nor but if""".split()
)
_WORD = re.compile(r"[^\W_]+(?:['’.-][^\W_]+)*")
_MONTH = re.compile(rf"(?i)\b{MONTH_PREFIX}")
_YEAR = re.compile(r"(?<!\d)(?:1[5-9]|20)\d\d(?!\d)")
_NUMERIC_DATE = re.compile(r"\b\d{1,2}[/.-]\d{1,2}[/.-]\d{2,4}\b|\b\d{4}-\d{2}-\d{2}\b")
_SCALE_WORDS = re.compile(r"(?i)\s*\b(?:million|billion|thousand|trillion)s?\b")


def content_words(text: str) -> set[str]:
    """Lower-cased words of ``text`` without stop words (the near-duplicate comparison)."""
    return {w.lower() for w in _WORD.findall(text) if w.lower() not in STOP_WORDS}


def question_problem(question: str) -> str | None:
    """The first form problem of ``question`` (``not_a_question``, ``placeholder`` or
    ``dangling_fragment``), or None when it is a well-formed question."""
    q = question.strip()
    if not q.endswith("?") or not (_OPENER.match(q) or _PREP_WH.match(q) or _PREP_CLAUSE.match(q)):
        return "not_a_question"
    if _PLACEHOLDER.search(q):
        return "placeholder"
    words = _WORD.findall(q)
    if len(words) < 4:
        return "dangling_fragment"
    if q.count("(") != q.count(")") or q.count('"') % 2 or q.count("“") != q.count("”"):
        return "dangling_fragment"
    if re.search(r"(?:^|\s)[-–]\w|\w[-–](?:\s|\?)", q):
        return "dangling_fragment"  # a word cut at a hyphen: "Broker Non -Votes", "Non-?"
    if words[-1].lower() in _BAD_LAST or q.rstrip("?").rstrip().endswith((",", ";", ":", "-", "'s")):
        return "dangling_fragment"
    if (
        re.search(r"\?.", q)
        or "\n" in q
        or "  " in q
        or any(unicodedata.category(ch)[0] == "C" or ch == "\ufffd" for ch in q)
    ):
        return "dangling_fragment"  # two questions, a line break or a gap in the extracted text inside
    return None


def answer_too_short(answer: str, answer_type: str) -> bool:
    """Whether ``answer`` is shorter than its type allows (see the module docstring)."""
    a = normalize_ws(answer)
    letters = sum(ch.isalpha() for ch in a)
    digits = sum(ch.isdigit() for ch in a)
    if letters < 2 and digits < 1:
        return True
    if answer_type == "date":
        return not (_NUMERIC_DATE.search(a) or (_YEAR.search(a) and (_MONTH.search(a) or len(a) == 4)))
    if answer_type in ("amount", "count", "percent"):
        return digits < 1
    if answer_type == "identifier":
        return len(a) < 3
    if answer_type == "person":
        return len(a.split()) < 2
    if answer_type == "organisation":
        return len(a.split()) < 2 and not re.fullmatch(r"[A-Z&]{2,}", a)
    return len(a) < 2


def _folded(text: str) -> str:
    return re.sub(r"\s+", "", normalize_ws(text).lower().replace("’", "'"))


def answer_in_evidence(answer: str, evidence: str) -> bool:
    """Whether ``answer`` occurs in ``evidence`` (case and spacing ignored; a scale word of the
    answer may come from the table's unit line rather than the evidence)."""
    a, e = _folded(answer), _folded(evidence)
    if a and a in e:
        return True
    core = _folded(_SCALE_WORDS.sub("", answer))
    return bool(core) and core != a and re.search(r"\d", core) is not None and core in e


@dataclass
class PairCheck:
    """Checks the candidate pairs of one document in order (``check``); ``rejected`` counts the
    reasons, ``generated`` every candidate seen. ``context``: the qualifier the generator adds to
    every question of the document (its subject); its words are left out when questions are
    compared, so two questions are near-duplicates for what they ask, not for what they share."""

    context: str = ""
    generated: int = 0
    rejected: Counter = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)  # reason -> the first question rejected for it
    dropped: set[int] = field(default_factory=set)
    _kept: list[tuple[set[str], str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._context_words = content_words(self.context)

    def check(self, question: str, answer: str, evidence: str, answer_type: str, chunk_text: str) -> str | None:
        """The reason to reject the pair (counted), or None when it passes (then it is remembered
        for the near-duplicate test of later pairs, as kept pair number ``len(kept) - 1``; a later
        pair can still drop it, see ``dropped``)."""
        self.generated += 1
        reason = self._reason(question, answer, evidence, answer_type, chunk_text)
        if reason:
            self.rejected[reason] += 1
            self.examples.setdefault(reason, f"{question[:EXAMPLE_CHARS]} -> {answer[:EXAMPLE_CHARS]}")
        return reason

    def _reason(self, question: str, answer: str, evidence: str, answer_type: str, chunk_text: str) -> str | None:
        problem = question_problem(question)
        if problem:
            return problem
        if answer_too_short(answer, answer_type):
            return "answer_too_short"
        if find_quote(evidence, chunk_text) < 0:
            return "evidence_not_verbatim"
        if not answer_in_evidence(answer, evidence):
            return "answer_not_in_evidence"
        words, key = content_words(question) - self._context_words, _folded(answer)
        for n, (other, other_key) in enumerate(self._kept):
            overlap = len(words & other) / max(1, len(words | other))
            if overlap >= DUPLICATE and key != other_key and n not in self.dropped:
                self.dropped.add(n)  # the same question with another answer: ambiguous, both go
                self.rejected["near_duplicate"] += 1
            if overlap >= DUPLICATE or (key == other_key and overlap >= DUPLICATE_WITH_SAME_ANSWER):
                return "near_duplicate"
        self._kept.append((words, key))
        return None

    def report(self) -> dict[str, int]:
        """``{reason: count}`` for every reason (zeros included), in ``REASONS`` order."""
        return {r: int(self.rejected.get(r, 0)) for r in REASONS}

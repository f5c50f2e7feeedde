"""Deciding whether a question can be answered from the retrieved sources, before answering.

Similarity scores alone cannot decide this (scores of good and off-topic matches overlap), so
the check is on content: the question's *anchors* -- full dates, proper names and acronyms --
must occur in the documents the sources come from. A question whose anchors are absent asks
about something the knowledge base does not contain (``refused``); a question with no content
words left after removing function and deictic words has no referent (``clarifying``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .citations import normalize_ws
from .sparse import STOP_WORDS, tokenize

_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_DATE = re.compile(rf"\b(?:{_MONTHS})\s+\d{{1,2}},\s+\d{{4}}\b")
_CAP_RUN = re.compile(r"\b(?:[A-Z][A-Za-z&.'’\-]*[A-Za-z]|[A-Z]{2,})(?:\s+(?:of\s+|and\s+|&\s+)?(?:[A-Z][A-Za-z&.'’\-]*[A-Za-z]|[A-Z]{2,}))*")
_QUESTION_WORDS = {"what", "which", "who", "whom", "whose", "when", "where", "why", "how", "is", "are", "was", "were",
                   "do", "does", "did", "can", "could", "would", "should", "will", "according", "in", "on", "for",
                   "if", "the", "a", "an", "i", "my", "give", "list", "tell", "please", "explain", "describe", "to"}
_VAGUE = {"tell", "more", "about", "that", "this", "it", "they", "them", "those", "these", "there", "thing", "things",
          "something", "anything", "stuff", "explain", "info", "information", "detail", "details", "say", "said",
          "know", "please", "else", "elaborate", "further", "go", "on", "me", "you", "can", "could", "what", "about"}


@dataclass(frozen=True)
class Anchor:
    """A phrase the sources must contain: ``kind`` is date | name."""

    text: str
    kind: str


def question_anchors(question: str) -> list[Anchor]:
    """Full dates and proper names / acronyms of ``question`` (not its first word, no digits)."""
    anchors = [Anchor(m.group(0), "date") for m in _DATE.finditer(question)]
    masked = _DATE.sub(" ", question)
    for m in _CAP_RUN.finditer(masked):
        phrase = re.sub(r"['’]s$", "", m.group(0)).strip(" .-'’")
        words = phrase.split()
        if (m.start() == 0 or masked[: m.start()].rstrip().endswith(("?", ".", "!"))) and words \
                and not words[0].isupper():
            words = words[1:]  # sentence-initial capital, not a name
        words = [w for w in words if w.lower() not in _QUESTION_WORDS]
        if not words or any(ch.isdigit() for ch in "".join(words)):
            continue
        phrase = " ".join(words)
        if len(phrase) >= 3:
            anchors.append(Anchor(phrase, "name"))
    return anchors


def _present(anchor: Anchor, text_lower: str, terms: set[str]) -> bool:
    if anchor.kind == "date":
        return normalize_ws(anchor.text).lower() in text_lower
    words = [w for w in tokenize(anchor.text) if w not in STOP_WORDS]
    if not words:
        return True
    if normalize_ws(anchor.text).lower() in text_lower:
        return True
    found = sum(1 for w in words if w in terms)
    return found / len(words) >= 0.6


_MONTH_WORDS = set(_MONTHS.lower().split("|"))


def content_terms(question: str) -> set[str]:
    """Stemmed content terms of a question (no stop, question or deictic words)."""
    return {t for t in tokenize(question) if t not in _VAGUE and t not in _QUESTION_WORDS and len(t) > 1}


def _supported(anchor: Anchor, others: set[str], sentences: list[set[str]], sentence_texts: list[str]) -> bool:
    """The anchor occurs in a source passage together with another content term of the question."""
    words = set(tokenize(anchor.text))
    for terms, text in zip(sentences, sentence_texts):
        has = (normalize_ws(anchor.text).lower() in text) or (words and len(words & terms) / len(words) >= 0.6)
        if has and (not others or (terms - words) & others):
            return True
    return False


def missing_anchors(question: str, document_texts: list[str], source_passages: list[str] | None = None) -> list[str]:
    """Anchors of ``question`` the knowledge base cannot answer about, or [] when answerable.

    - a full date must occur verbatim in the source documents;
    - a name passes when at least 60% of its words occur in the documents and, when
      ``source_passages`` are given, the question names one thing only and that name is only
      mentioned in passing (at most twice in any one document), in one retrieved passage
      together with another content term of the question (so "the capital of Australia" is not
      answered from a passage that merely lists Australia);
    - the question is refused when a date is missing or at least half of its names are.
    Month names alone are not anchors.
    """
    anchors = [a for a in question_anchors(question) if a.text.lower() not in _MONTH_WORDS]
    if not anchors:
        return []
    text = normalize_ws(" ".join(document_texts)).lower()
    terms = set(tokenize(text))
    missing = [a for a in anchors if not _present(a, text, terms)]
    if source_passages is not None:
        q_terms = content_terms(question)
        sent_texts = [normalize_ws(x).lower() for x in source_passages]
        sent_terms = [set(tokenize(x)) for x in sent_texts]
        docs_lower = [normalize_ws(t).lower() for t in document_texts]
        names = [a for a in anchors if a.kind == "name"]
        for a in (names if len(names) == 1 else []):  # a question about one named thing
            if a in missing:
                continue
            needle = normalize_ws(a.text).lower()
            if max((d.count(needle) for d in docs_lower), default=0) > 2:
                continue  # a subject of the documents (e.g. the company), not a passing mention
            others = q_terms - set(tokenize(a.text))
            if others and not _supported(a, others, sent_terms, sent_texts):
                missing.append(a)
    if any(a.kind == "date" for a in missing):
        return [a.text for a in missing]
    names = [a for a in anchors if a.kind == "name"]
    if names and sum(1 for a in missing if a.kind == "name") / len(names) >= 0.5:
        return [a.text for a in missing]
    return []


def is_vague(question: str) -> bool:
    """True when no content word is left after removing function, question and deictic words."""
    words = [w for w in re.findall(r"[^\W_]+", question.lower()) if w not in STOP_WORDS and w not in _VAGUE]
    return len(words) == 0

"""The question of a chat conversation: the last user turn, joined to the previous one when it is a
follow-up that cannot be searched on its own.

A chat client (an OpenAI-compatible UI) sends the whole conversation each time. ragaudit answers
the *last user message*; earlier turns only decide what that message refers to:

* The last user message is a **follow-up** when it starts as a continuation (*and ...*, *what
  about ...*, *how about ...*, *also ...*: "And in 2020?", "What about Microsoft?"), or when it
  names nothing of its own (no proper name, acronym, identifier, date or number:
  ``ragaudit.text.anchors.question_anchors``) and either refers back (a pronoun or demonstrative such as
  *it*, *they*, *that*, *those*, *there*; not the existential "there is/were") or is too vague or
  generic to search (``is_vague`` / ``is_underspecified``: "What was the total?").
* A follow-up is searched and answered as ``"<previous standalone user message> <follow-up>"``,
  where the previous standalone message is the latest earlier user message that was not itself a
  follow-up (so a chain of follow-ups keeps one subject, and the question stays two turns long).
* Anything else is asked as it stands; assistant, system and tool turns are not searched (an
  earlier answer would pull retrieval towards what was already said).

The rule is deterministic and offline (no model rewrites the question); the question actually
asked is returned with a note saying it was joined, so the answer's X-ray shows it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ragaudit.answer.answerability import is_underspecified, is_vague
from ragaudit.text.anchors import question_anchors
from ragaudit.types import QUESTION_MAX_CHARS

# words that point back to something said before
_REFERRING = {
    "it",
    "its",
    "they",
    "them",
    "their",
    "theirs",
    "this",
    "that",
    "these",
    "those",
    "he",
    "him",
    "his",
    "she",
    "her",
    "there",
    "then",
    "same",
    "former",
    "latter",
}
_EXISTENTIAL = re.compile(r"\b(?:(?:is|are|was|were|be|been)\s+there|there\s+(?:is|are|was|were|be|been))\b")
_CONTINUATION = re.compile(r"^\s*(and|also|what about|how about|and what about|what else|else)\b", re.IGNORECASE)


@dataclass(frozen=True)
class ConversationQuestion:
    """``question``: what is searched and answered; ``last``: the last user message as sent;
    ``joined_with``: the earlier user message it was joined to (``None`` = asked as it stands)."""

    question: str
    last: str
    joined_with: str | None = None

    @property
    def note(self) -> str | None:
        """The X-ray note when the question was joined, else ``None``."""
        if self.joined_with is None:
            return None
        return (
            "follow-up question: the last user message names nothing of its own, so it was asked "
            f"together with the previous user question: {self.question!r}"
        )


def is_follow_up(message: str) -> bool:
    """True when ``message`` starts as a continuation ("and ...", "what about ..."), or names
    nothing (no anchor, no digit) and refers back or is too vague to search alone; see the module
    docstring."""
    if _CONTINUATION.match(message):
        return True
    if question_anchors(message) or re.search(r"\d", message):
        return False
    # existential "there" ("Were there any injuries?", "there was") points at nothing said before
    text = _EXISTENTIAL.sub(" ", message.lower())
    words = set(re.findall(r"[^\W\d_]+", text))
    return bool(words & _REFERRING) or is_vague(message) or is_underspecified(message)


def conversation_question(user_messages: list[str], max_chars: int = QUESTION_MAX_CHARS) -> ConversationQuestion:
    """The question for the last of ``user_messages`` (the conversation's user turns, oldest first).

    Raises ``ValueError`` when there is no user message or the last one is blank. A joined question
    longer than ``max_chars`` is not joined (the last message is asked alone)."""
    if not user_messages:
        raise ValueError("the conversation has no user message: the last user message is the question")
    last = user_messages[-1]
    if not last.strip():
        raise ValueError("the last user message is empty")
    if not is_follow_up(last):
        return ConversationQuestion(last, last)
    for earlier in reversed(user_messages[:-1]):
        if earlier.strip() and not is_follow_up(earlier):
            joined = f"{earlier.strip()} {last.strip()}"
            if len(joined) > max_chars:
                break
            return ConversationQuestion(joined, last, earlier)
    return ConversationQuestion(last, last)

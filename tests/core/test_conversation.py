"""The question of a chat conversation (ragaudit.answer.conversation): which last user messages are
follow-ups, and what they are joined to."""

from __future__ import annotations

import pytest

from ragaudit.answer.conversation import conversation_question, is_follow_up

DMCA = "When was the DMCA signed into law?"


@pytest.mark.parametrize(
    "message,follow_up",
    [
        ("Who signed it?", True),  # refers back, names nothing
        ("What happened there?", True),
        ("And in 2020?", True),  # a continuation, even with a number
        ("What about Microsoft?", True),
        ("What was the total?", True),  # generic measure only
        (DMCA, False),  # names its subject
        ("Were there any injuries?", False),  # existential "there"
        ("What were the weather conditions?", False),
        ("Who signed the DMCA?", False),
    ],
)
def test_follow_up_detection(message, follow_up):
    """Fails if a question that names its subject is joined to an older one, or a pronoun-only
    question is searched alone."""
    assert is_follow_up(message) is follow_up


def test_follow_up_joins_the_latest_standalone_user_question():
    """A chain of follow-ups keeps one subject: each is joined to the last standalone question,
    never to the accumulated text; a standalone last message is asked as it stands.

    Fails if the joined question grows with every turn or takes a follow-up as its subject."""
    q = conversation_question([DMCA, "Who signed it?", "And where?"])
    assert q.question == f"{DMCA} And where?" and q.joined_with == DMCA and q.last == "And where?"
    assert q.note and DMCA in q.note
    alone = conversation_question(["Who signed it?", "What were the weather conditions?"])
    assert alone.question == "What were the weather conditions?" and alone.joined_with is None and alone.note is None
    assert conversation_question(["Who signed it?"]).question == "Who signed it?"  # nothing to join


def test_no_user_message_or_blank_last_is_an_error():
    """Fails if an empty conversation or a blank last message is asked anyway."""
    with pytest.raises(ValueError, match="no user message"):
        conversation_question([])
    with pytest.raises(ValueError, match="empty"):
        conversation_question([DMCA, "  "])


def test_joined_question_over_the_limit_is_not_joined():
    """Fails if a join past the question length limit is sent (the request would be refused)."""
    long_q = "Why did the DMCA " + "really " * 700 + "pass?"
    q = conversation_question([long_q, "Who signed it?"], max_chars=4000)
    assert q.question == "Who signed it?" and q.joined_with is None

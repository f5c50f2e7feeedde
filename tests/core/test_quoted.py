"""``quoted``: how messages cite a passage or a word (refusal reasons, the closest passage, the
concise answer's rule reasons) without doubling the quote marks the source already has."""

from __future__ import annotations

import pytest

from ragaudit.text.sentences import quoted


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("Seoul", "“Seoul”"),
        ('"Brown Act"', "“Brown Act”"),  # a term the question quoted
        ("“The Act provides for five titles.”", "“The Act provides for five titles.”"),  # a quoted sentence
        ("  “Nested ‘inner’ marks”  ", "“Nested ‘inner’ marks”"),
        (
            '"An opening mark whose partner is in the next sentence',
            "“An opening mark whose partner is in the next sentence”",
        ),
        ("the end of a quotation cut at the span.”", "“the end of a quotation cut at the span.”"),
    ],
)
def test_marks_of_the_source_at_the_ends_are_not_doubled(text, shown):
    """fails if a passage that carries its own quote marks is shown as “"…"” or ““…””."""
    assert quoted(text) == shown


@pytest.mark.parametrize(
    "text",
    ['He said "no" twice.', "“a” and “b” differ", "the workers’ fund", "it’s “Fund” money"],
)
def test_marks_inside_and_apostrophes_are_kept(text):
    """fails if stripping reaches into the text: a pair of marks inside it, or an apostrophe at its end."""
    assert quoted(text) == f"“{text}”"

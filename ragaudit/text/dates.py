"""Month and weekday names, as documents and questions write them.

``MONTHS``: the twelve month names as printed ("January"); ``MONTH_ABBREVIATIONS``: the short
forms statements, reports and forms print ("Jan", "Sept"; a trailing period is part of the
abbreviation in text: "Sept. 30") -> the month's name in lower case. ``WEEKDAYS``: the seven day
names. Regular-expression fragments for matching them (each a non-capturing group):

- ``MONTH_NAME``: a month's name in full, capitalised as printed ("December"); case-sensitive
  unless the pattern using it sets ``re.I``;
- ``MONTH_PREFIX``: a word that begins as a month's three-letter abbreviation does, with any
  letters after it and an optional trailing period ("Dec", "December", "Sept."); for
  case-insensitive patterns (``re.I``) that read dates and column headers next to their digits
  ("Sept. 30, 2023", "December 31, December 25,"). It takes a word that only begins so as well
  ("Marketing 12 15", "declined 2023"): the patterns built on it (the concise answer's and the
  answerer's dates, chunking's header rows, gold checks) read those so;
- ``WEEKDAY``: a day's name in full ("Monday");
- ``FULL_DATE`` (compiled): a full date as prose prints it, "December 30, 2023".

``MONTH_WORDS``: the twelve names in lower case. ``month_of`` reads a word as a month, in full or
abbreviated.
"""

from __future__ import annotations

import re

MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
# a month's three-letter form ("May" is its own), and "Sept" as well as "Sep" for September
MONTH_ABBREVIATIONS = {m[:3].lower(): m.lower() for m in MONTHS if m != "May"} | {"sept": "september"}

MONTH_WORDS = frozenset(m.lower() for m in MONTHS)

MONTH_NAME = "(?:" + "|".join(MONTHS) + ")"
MONTH_PREFIX = "(?:" + "|".join(m[:3].lower() for m in MONTHS) + r")[a-z]*\.?"
WEEKDAY = "(?:" + "|".join(WEEKDAYS) + ")"
# a full date as printed in prose and on cover pages, the month's name capitalised: "December 30, 2023"
FULL_DATE = re.compile(rf"\b{MONTH_NAME}\s+\d{{1,2}},\s+\d{{4}}\b")


def month_of(word: str) -> str | None:
    """The month ``word`` names, as its full name in lower case ("Sept." -> "september", "may" ->
    "may"), or None. Case is not checked: whether "may" or "March" is a month or a verb is the
    caller's to decide (a date's month is capitalised)."""
    w = word.lower().rstrip(".")
    if w in MONTH_ABBREVIATIONS:
        return MONTH_ABBREVIATIONS[w]
    return w if w.capitalize() in MONTHS else None

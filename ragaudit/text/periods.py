"""Reporting periods: the spans of months financial statements report ("Three Months Ended",
"the first nine months of 2023").

Interim and annual statements head their columns with the period each covers: three, six, nine
or twelve months ended a date (a retailer's "13 Weeks Ended" counts weeks instead). Questions
name the same periods in words or digits ("nine months", "6-month"), or as a quarter (three
months) or the first half of a year (six). A period is named here by its number word:
``"three"``, ``"six"``, ``"nine"``, ``"twelve"`` (and ``"<n> weeks"`` for a header counting
weeks).

- ``MONTHS_PERIOD``: a number of months a statement reports, in words or digits ("nine months",
  "9-month");
- ``PERIOD_ENDED``: a column header's period, any count of months or weeks ("Three Months Ended",
  "13 Weeks Ended"), a regular-expression fragment for case-insensitive patterns;
- ``period_name``, ``months_periods``, ``header_periods`` (a header's month counts in words),
  ``asked_period`` read them.
"""

from __future__ import annotations

import re

# the months a statement's column can cover, as a number word -> its digits
PERIOD_MONTHS = {"three": "3", "six": "6", "nine": "9", "twelve": "12"}
_COUNT = "(?:" + "|".join([*PERIOD_MONTHS, *PERIOD_MONTHS.values()]) + ")"
MONTHS_PERIOD = re.compile(rf"(?i)\b{_COUNT}[\s-]+months?\b")
PERIOD_ENDED = r"(?:three|six|nine|twelve|\d{1,2})\s+(?:months|weeks)\s+ended"
# a column header's period as the concise answer's column choice reads it: months in words
_HEADER_PERIOD = re.compile(rf"(?i)\b({'|'.join(PERIOD_MONTHS)})\s+months\s+ended\b")
_DIGITS = {d: w for w, d in PERIOD_MONTHS.items()}
# periods a question names without counting months: a quarter is three, a half-year six
_ASKED_OTHERWISE = [("six", re.compile(r"(?i)\bfirst half\b")), ("three", re.compile(r"(?i)\bquarter\b"))]


def period_name(phrase: str) -> str:
    """The period ``phrase`` names ("Nine Months Ended", "9-month", "six months"): its number
    word ("nine"; digits of 3, 6, 9 or 12 months read as the word), or ``"<n> weeks"`` for a count
    of weeks ("13 Weeks Ended" -> "13 weeks")."""
    words = re.split(r"[\s-]+", phrase.strip().lower())
    n = _DIGITS.get(words[0], words[0])
    return f"{n} weeks" if len(words) > 1 and words[1].startswith("week") else n


def months_periods(text: str) -> set[str]:
    """The reporting periods ``text`` names as months (``MONTHS_PERIOD``), by ``period_name``:
    "the first nine months and the 3 months ended" -> ``{"nine", "three"}``."""
    return {period_name(m.group(0)) for m in MONTHS_PERIOD.finditer(text)}


def header_periods(line: str) -> list[str]:
    """The periods of three, six, nine or twelve months a column-header ``line`` names in words,
    left to right, by their number word: "Three Months Ended Nine Months Ended" -> ``["three",
    "nine"]``. A count in digits ("3 Months Ended") or of weeks ("13 Weeks Ended") is not read
    here (``PERIOD_ENDED`` matches those too)."""
    return [m.group(1).lower() for m in _HEADER_PERIOD.finditer(line)]


def asked_period(question: str) -> str | None:
    """The reporting period ``question`` asks for, by ``period_name``: the months it names, a
    "quarter" (three) or "first half" (six); when it names several, the first of nine, six,
    twelve, three it names ("the first nine months ... and the quarter": "nine"); None when it
    names none."""
    named = months_periods(question) | {name for name, pat in _ASKED_OTHERWISE if pat.search(question)}
    return next((name for name in ("nine", "six", "twelve", "three") if name in named), None)

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
  ``asked_period`` read them;
- ``named_quarters``: the quarters of a year a text names ("the third quarter of fiscal 2023",
  "Q3 2023", "Q4 FY23").
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


_ORDINAL = {"first": 1, "second": 2, "third": 3, "fourth": 4, "1st": 1, "2nd": 2, "3rd": 3, "4th": 4}
_ORD = "|".join(_ORDINAL)
_YEAR = r"(?:19|20)\d\d"
# "third quarter of fiscal (year) 2023", "fourth fiscal quarter of 2023", "third-quarter 2023"
_QUARTER_OF_YEAR = re.compile(
    rf"(?i)\b({_ORD})[\s-]+(?:fiscal\s+)?quarter(?:\s+of)?(?:\s+(?:the\s+)?(?:fiscal|calendar))?(?:\s+year)?\s+({_YEAR})\b"
)
# "fiscal 2023 third quarter", "2023 fourth quarter"
_YEAR_QUARTER = re.compile(rf"(?i)\b({_YEAR})\s+(?:fiscal\s+)?({_ORD})[\s-]+quarter\b")
# "Q3 2023", "Q3 FY23", "Q3 FY 2023", "Q3'23", "Q3-2023"
_Q_YEAR = re.compile(r"(?<![\w])Q([1-4])\s*(?:[-'’]\s*|FY\s*)?((?:19|20)?\d\d)\b")
# "2023 Q3", "FY23 Q4", "FY2023 Q4"
_YEAR_Q = re.compile(r"(?<![\w])(?:FY\s*)?((?:19|20)?\d\d)\s+Q([1-4])\b")


def _year(y: str) -> int:
    return int(y) if len(y) == 4 else 2000 + int(y)


def named_quarters(text: str) -> set[tuple[int, int]]:
    """The quarters of a year ``text`` names, as ``(quarter 1-4, year)``: "the third quarter of
    fiscal 2023" and "Q3 FY23" -> ``{(3, 2023)}``. Fiscal and calendar years are not told apart (a
    filing names its quarters by its own fiscal year); a two-digit year is of the 2000s; "Q3" or
    "the third quarter" without a year is not read."""
    out = {(_ORDINAL[m.group(1).lower()], int(m.group(2))) for m in _QUARTER_OF_YEAR.finditer(text)}
    out |= {(_ORDINAL[m.group(2).lower()], int(m.group(1))) for m in _YEAR_QUARTER.finditer(text)}
    out |= {(int(m.group(1)), _year(m.group(2))) for m in _Q_YEAR.finditer(text)}
    out |= {(int(m.group(2)), _year(m.group(1))) for m in _YEAR_Q.finditer(text)}
    return out

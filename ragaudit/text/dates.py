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
abbreviated. ``header_dates`` reads the dates a table's column header prints over two lines.
"""

from __future__ import annotations

import re
from functools import lru_cache

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


@lru_cache(maxsize=256)
def date_forms(full_date: str) -> re.Pattern[str] | None:
    """A pattern for the calendar date ``full_date`` ("December 8, 2007", as ``FULL_DATE``
    matches it) in the forms documents print it, case-insensitive: the month in full or
    abbreviated ("Dec. 8, 2007", "December 08, 2007"), day before month ("8 December 2007"),
    numeric month/day/year as US forms and reports print it ("12/08/2007", "12/8/07",
    "12-08-2007"), ISO 8601 ("2007-12-08") and day.month.year with dots ("08.12.2007").
    A numeric day/month/year with slashes ("08/12/2007") is not read: it is a different date
    in month/day order. None when ``full_date`` is not such a date. Cached: the gate asks for
    the same question's dates against every document it reads."""
    m = re.fullmatch(rf"\s*({MONTH_NAME})\s+(\d{{1,2}}),\s+(\d{{4}})\s*", full_date)
    if not m:
        return None
    name, day, year = m.group(1), int(m.group(2)), m.group(3)
    month = MONTHS.index(name) + 1
    short = [a for a, full in MONTH_ABBREVIATIONS.items() if full == name.lower()]
    mon = "(?:" + "|".join([name] + [rf"{a}\.?" for a in short]) + ")"
    d, mo, yy = rf"0?{day}", rf"0?{month}", rf"(?:{year}|{year[2:]})"
    forms = [
        rf"{mon}\s+{d}(?:st|nd|rd|th)?,?\s+{year}",
        rf"{d}(?:st|nd|rd|th)?\s+(?:of\s+)?{mon},?\s+{year}",
        rf"{mo}([/-]){d}\1{yy}",
        rf"{year}-{month:02d}-{day:02d}",
        rf"{d}\.{mo}\.{year}",
    ]
    return re.compile(r"(?i)(?<![\w/.-])(?:" + "|".join(forms) + r")(?![\w/]|-\d|\.\d)")


# a column header's dates over two lines: "June 25, June 26," then "2022 2021" (financial statements)
_HEADER_DAYS = re.compile(rf"((?:{MONTH_NAME}\.?\s+\d{{1,2}},?[ \t]*)+)$", re.M)
_HEADER_DAY = re.compile(rf"({MONTH_NAME})\.?\s+(\d{{1,2}})")
_HEADER_YEARS = re.compile(r"[ \t]*((?:(?:19|20)\d\d[ \t]+)*(?:19|20)\d\d)\b")


@lru_cache(maxsize=64)
def header_dates(text: str) -> frozenset[str]:
    """The full dates ("June 26, 2021") that the column headers of ``text``'s tables print over
    two lines: a line ending in month-and-day cells ("Three Months Ended June 25, June 26,") over a
    line starting with as many years ("2022 2021"), the i-th day with the i-th year, as financial
    statements head their columns. Such a date occurs nowhere else in the text written whole.
    Lines whose counts differ pair nothing. Cached: a document's text comes back on every
    question about it."""
    out = set()
    for m in _HEADER_DAYS.finditer(text):
        nxt = _HEADER_YEARS.match(text, m.end() + 1) if text[m.end() : m.end() + 1] == "\n" else None
        if not nxt:
            continue
        days = _HEADER_DAY.findall(m.group(1))
        years = nxt.group(1).split()
        if len(days) == len(years):
            out.update(f"{month} {int(day)}, {year}" for (month, day), year in zip(days, years))
    return frozenset(out)

"""Answer types: what kind of value a question asks for, and what such a value looks like.

Expected answer types (Harabagiu et al., "FALCON: Boosting Knowledge for Answer Engines", TREC-9,
2000; Li & Roth, "Learning Question Classifiers", COLING 2002), read from the question's
wh-phrase. Two readers use them, at two grains:

- ``TYPES`` (a span of each of 12 types: date, time, duration, length, speed, percent, year, age,
  money, number, identifier, name) and ``Q_TYPES`` (the question patterns asking for each, in
  precedence order) type the concise answer's spans (``ragaudit.answer.concise``) and the gold
  pairs' answers (``ragaudit.evaluate.goldrules``);
- ``SENTENCE_TYPES`` (a duration, a date or a percentage: name, question pattern, sentence pattern),
  ``NUMBER_QUESTION`` and ``HAS_NUMBER`` give the extractive answerer's sentence score its
  answer-type bonus (``ragaudit.answer.answerers.answer_type_bonus``). These coarser patterns rank
  sentences; the answerer's rankings are measured with them, so they are kept as they are rather
  than derived from ``Q_TYPES``.
"""

from __future__ import annotations

import re

from ragaudit.text.dates import MONTH_PREFIX

_NUMWORD = (
    r"(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|fifty|hundred)"
)
_NUMBER = rf"(?:\d[\d,]*(?:\.\d+)?|{_NUMWORD})"
_SCALE = r"(?:\s?(?:million|billion|thousand|trillion|[mbk]n?)\b)?"
_UNITS = (
    r"(?:years?|months?|weeks?|days?|hours?|minutes?|seconds?|feet|foot|ft|meters?|miles?|knots?|degrees?|"
    r"shares?|votes?|stores?|records?|pages?|tables?|questions?|articles?|gpus?|percent|%)"
)
_CJK_UNIT = r"(?:亿元|万元|元|亿|万|个|家|人|次|年|月|天|%)"
# a digit may follow CJK text directly ("达372.53亿元"): no \b there, so "not after a Latin letter or digit"
_NB = r"(?<![A-Za-z0-9_.$])"
# qualifiers that are part of a value ("about 56 feet", "more than 9%")
_APPROX = r"(?:(?:about|approximately|approx\.|roughly|nearly|almost|around|over|under|more than|less than|up to|at least|at most)\s+)?"

TYPES: dict[str, re.Pattern] = {
    "date": re.compile(
        rf"\b{MONTH_PREFIX}\s+\d{{1,2}},?\s+\d{{4}}\b|\b\d{{1,2}}/\d{{1,2}}/\d{{2,4}}\b|"
        rf"\b\d{{1,2}}\s+{MONTH_PREFIX}\s+\d{{4}}\b|\b{MONTH_PREFIX}\s+\d{{4}}\b|\d{{4}}年\d{{1,2}}月(?:\d{{1,2}}日)?",
        re.I,
    ),
    # a clock time ("8 am", "10:30 a.m.", "0826 eastern standard time", "1730 EST", "14:05")
    "time": re.compile(
        r"(?<![\w.:])(?:[01]?\d|2[0-3])(?::[0-5]\d)?\s?(?:a\.m\.|p\.m\.|am\b|pm\b)|"
        r"(?<![\w.:])(?:[01]\d|2[0-3]):?[0-5]\d(?:\s(?:(?:eastern|central|mountain|pacific|local|"
        r"coordinated universal|universal)\s(?:standard |daylight )?time|[ECMP][SD]T|UTC|GMT|Z)\b)|"
        r"(?<![\w.:])(?:[01]?\d|2[0-3]):[0-5]\d(?![\d:])",
        re.I,
    ),
    "duration": re.compile(
        rf"(?<![\w.]){_APPROX}{_NUMBER}(?:\s|-)+(?:years?|months?|weeks?|days?|hours?|minutes?)\b", re.I
    ),
    # a distance or size ("3078 feet", "100 feet wide" -> "100 feet", "1,500-foot", "2.5 nm")
    "length": re.compile(
        rf"(?<![\w.]){_APPROX}\d[\d,]*(?:\.\d+)?(?:\s|-)?(?:feet|foot|ft|meters?|metres?|km|"
        r"kilometers?|miles?|nm|nautical miles?|inches|inch|yards?|cm|mm)\b",
        re.I,
    ),
    # a speed ("15 knots", "120 mph", "8 kts")
    "speed": re.compile(
        rf"(?<![\w.]){_APPROX}\d[\d,]*(?:\.\d+)?\s?(?:knots?|kts|mph|miles per hour|km/h|"
        r"kph|kilometers per hour|m/s|meters per second|feet per (?:second|minute)|fpm)(?![\w/])",
        re.I,
    ),
    "percent": re.compile(rf"{_APPROX}{_NB}\d[\d,]*(?:\.\d+)?\s?(?:%|percent\b)", re.I),
    # a year on its own ("created in 1934", "(2019)"), for "in what year" questions
    "year": re.compile(r"(?<![\w.,$])(?:1[5-9]|20)\d\d(?![\w,%]|\.\d)"),
    # a person's age as reports print it ("age 85", "Age: 85", "aged 32", "a 54-year-old pilot")
    "age": re.compile(r"(?i)(?:(?<=\bage )|(?<=\bage: )|(?<=\baged ))\d{1,3}\b|\b\d{1,3}(?=[- ]years?[- ]old\b)"),
    "money": re.compile(
        rf"{_APPROX}(?:\$|US\$|USD\s?|€|£|¥)\s?\d[\d,]*(?:\.\d+)?{_SCALE}|"
        rf"{_APPROX}{_NB}\d[\d,]*(?:\.\d+)?\s?(?:million|billion)?\s?(?:dollars|yuan|euros?|亿元|万元|元)",
        re.I,
    ),
    "number": re.compile(
        rf"{_APPROX}{_NB}(?:\d[\d,]*(?:\.\d+)?|\b{_NUMWORD}\b)(?:{_SCALE})"
        rf"(?:\s?{_CJK_UNIT}|\s{_UNITS}\b)?(?![A-Za-z0-9_])",
        re.I,
    ),
    # a call with its arguments ("doc.save(filename, garbage=3, deflate=1)"), else one token holding
    # a digit, two capitals or an underscore ("NYC08CA055", "VARCHAR(128)", "istio_requests_total")
    "identifier": re.compile(
        r"(?<![\w.])[A-Za-z_][\w.]*\([^()]{0,80}\)|"
        r"(?<![\w])(?=[\w./()-]*\d|[A-Z0-9_]*[A-Z]{2}|\w*_\w)[A-Za-z0-9][\w./()-]*[\w)](?![\w])"
    ),
    "name": re.compile(r"\b[A-Z][\w&.'-]*(?:\s+(?:of\s+|de\s+|&\s+)?[A-Z][\w&.'-]*)*"),
}

Q_TYPES: list[tuple[str, re.Pattern]] = [
    (
        "duration",
        re.compile(
            r"\bhow long\b(?!.*\b(feet|foot|meters?|miles?|wide|tall)\b)|\bfor how many "
            r"(years|months|weeks|days)\b|\bwhat (period|duration|term|time ?frame)\b|"
            r"\bwithin what time\b|\bhow much ([\w-]+ ){0,2}time\b",
            re.I,
        ),
    ),
    (
        "time",
        re.compile(
            r"\b(what|which) time\b|\bat what (hour|time)\b|\bwhen does\b.*\b(open|close|start|begin|end|"
            r"depart|arrive|leave)s?\b|几点",
            re.I,
        ),
    ),
    ("speed", re.compile(r"\bhow fast\b|\b(what|which)( [\w-]+){0,3} (speed|velocity)\b|\bat what speed\b", re.I)),
    (
        "length",
        re.compile(
            r"\bhow (far|wide|tall|high|deep)\b|\bhow long\b.*\b(feet|foot|meters?|miles?|wide|"
            r"runway|strip|distance|road|bridge)\b|\b(what|which)( [\w-]+){0,2} (length|width|"
            r"height|distance|depth|altitude|elevation)\b",
            re.I,
        ),
    ),
    (
        "year",
        re.compile(r"\b(in )?(what|which) year\b|\byear of (its |their )?(founding|creation|establishment)\b", re.I),
    ),
    (
        "date",
        re.compile(
            r"\b(when|what date|on what (calendar )?date|which day|what day)\b|何时|什么时候|哪一?天|哪年", re.I
        ),
    ),
    (
        "percent",
        re.compile(
            r"\b(what (percent(age)?|share|proportion|fraction)|how much of|(what|which)( [\w-]+){1,3} "
            r"(rate|margin|accuracy|share)|what (rate|margin|accuracy)|"
            # "What was the effective tax rate ...?", "What is the annual growth rate ...?"
            r"what (is|was|are|were) the ([\w-]+ ){0,3}(rate|percentage|ratio))\b|%|百分比|比例",
            re.I,
        ),
    ),
    (
        "money",
        re.compile(
            r"\bhow much\b.*\b(spen[dt]|cost|pay|paid|revenue|sales|income|earn|expense|price|"
            r"generate|bring in|worth|fee|budget|capital)|\bwhat (amount|price|cost)\b|"
            r"\b(revenue|sales|income|expenditure|cost)\b.*\?$|"
            # a measure noun asks for an amount ("What is the closing balance of the fund?")
            r"\bwhat (is|was|are|were) the ([\w-]+ ){0,2}(balance|amount|price|fee|budget|deficit|"
            r"surplus|profit|loss|payment|salary)\b",
            re.I,
        ),
    ),
    ("age", re.compile(r"\bhow old\b|\b(what|which) age\b|\bat what age\b", re.I)),
    (
        "number",
        re.compile(
            r"\bhow (many|much|old|far|large|big|often|fast|high|tall)\b|\bwhat (number|score|"
            r"value|threshold|size|total|age|count|speed)\b|\b(what|which) [\w-]+ (score|value|"
            r"threshold|number|count)\b|\bon which line\b|多少|几",
            re.I,
        ),
    ),
    (
        "identifier",
        re.compile(
            r"\b(what|which) (is the )?[\w\s'’.()-]{0,60}?\b(number|no\.?|id|identifier|code|"
            r"command|statement|registration|metric|type|call|key|exhibit|line|instance)\b",
            re.I,
        ),
    ),
    (
        "name",
        re.compile(
            r"\b(who|whom|whose)\b|\b(which|what) (library|company|firm|authority|agency|person|"
            r"provider|tool|vendor|country|city|state|organi[sz]ation|bank|auditor)\b|谁|哪家",
            re.I,
        ),
    ),
]


NUMBER_QUESTION = re.compile(
    r"\b(how (many|much|old|long|often|far|large|big)|what (percent|percentage|share|amount|number|"
    r"rate|range|score|accuracy|price|cost|value|total|size)|when|what date|which year|what year)\b",
    re.I,
)
HAS_NUMBER = re.compile(
    r"\d|\b(one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|"
    r"forty|fifty|hundred|thousand|million|billion|half|quarter|dozen)\b",
    re.I,
)
_NUM = r"(\d[\d,.]*|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|fifty|hundred)"
# Expected answer types (Harabagiu et al., "FALCON: Boosting Knowledge for Answer Engines", TREC-9, 2000):
# (name, question pattern, pattern of a sentence that has an answer of that type).
SENTENCE_TYPES = [
    (
        "a duration",
        re.compile(
            r"\bhow long\b(?!.*\b(feet|foot|meters?|miles?|inches|wide|tall)\b)|\bfor how many (years|months|weeks|days)|"
            r"\bwhat (period|duration|term)\b",
            re.I,
        ),
        re.compile(rf"\b{_NUM}[\s-]+(years?|months?|weeks?|days?|hours?|minutes?)\b", re.I),
    ),
    (
        "a date",
        re.compile(r"\b(when|what date|on what (calendar )?date|which day)\b", re.I),
        re.compile(rf"\b{MONTH_PREFIX}\s+\d{{1,2}},?\s+\d{{4}}\b|\b\d{{1,2}}/\d{{1,2}}/\d{{2,4}}\b", re.I),
    ),
    (
        "a percentage",
        re.compile(r"\b(what percent(age)?|what (\w+ )?(rate|margin|accuracy|share))\b", re.I),
        re.compile(r"\d\s?%|\bper ?cent\b", re.I),
    ),
]

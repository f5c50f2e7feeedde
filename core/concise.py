"""The concise answer: the span of an answer sentence that answers the question's type.

The question's expected answer type (Harabagiu et al., "FALCON: Boosting Knowledge for Answer
Engines", TREC-9, 2000; Li & Roth, "Learning Question Classifiers", COLING 2002) is read from its
wh-phrase: a date ("when", "on what date"), a duration ("how long", "for how many years"), a
percentage ("what percent", "what rate"), an amount of money ("how much ... spend / revenue /
cost"), a count or number ("how many", "how old", "what ... score"), an identifier ("what is
the ... number", "which command / statement / registration"), a name ("who", "which library /
company / authority"). Every span of that type in the sentence is a candidate; one right after a
colon wins (a form field's value), else the one with most question terms around it, then the
nearest one (a table row reads label, then cells: the first cell after the row label), then
the earliest. No gold answer is involved: this is what EM / F1 are computed on
(``metrics.concise_answer`` is the gold-guided upper bound).
"""

from __future__ import annotations

import re

from .sparse import STOP_WORDS, tokenize

_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
_NUMWORD = r"(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|fifty|hundred)"
_NUMBER = rf"(?:\d[\d,]*(?:\.\d+)?|{_NUMWORD})"
_SCALE = r"(?:\s?(?:million|billion|thousand|trillion|[mbk]n?)\b)?"
_UNITS = (r"(?:years?|months?|weeks?|days?|hours?|minutes?|seconds?|feet|foot|ft|meters?|miles?|knots?|degrees?|"
          r"shares?|votes?|stores?|records?|pages?|tables?|questions?|articles?|gpus?|percent|%)")

TYPES: dict[str, re.Pattern] = {
    "date": re.compile(rf"\b{_MONTH}\s+\d{{1,2}},?\s+\d{{4}}\b|\b\d{{1,2}}/\d{{1,2}}/\d{{2,4}}\b|"
                       rf"\b\d{{1,2}}\s+{_MONTH}\s+\d{{4}}\b|\b{_MONTH}\s+\d{{4}}\b", re.I),
    "duration": re.compile(rf"\b{_NUMBER}(?:\s|-)+(?:years?|months?|weeks?|days?|hours?|minutes?)\b", re.I),
    "percent": re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?\s?(?:%|percent\b)", re.I),
    "money": re.compile(rf"(?:\$|US\$|USD\s?|€|£|¥)\s?\d[\d,]*(?:\.\d+)?{_SCALE}|"
                        rf"\b\d[\d,]*(?:\.\d+)?\s?(?:million|billion)?\s?(?:dollars|yuan|euros?|亿元|万元|元)", re.I),
    "number": re.compile(rf"(?<![\w.$])(?:\d[\d,]*(?:\.\d+)?|\b{_NUMWORD}\b)(?:{_SCALE})(?:\s{_UNITS}\b)?(?![\w])", re.I),
    "identifier": re.compile(r"(?<![\w])(?=[\w./()-]*\d|[A-Z0-9_]*[A-Z]{2})[A-Za-z0-9][\w./()-]*[\w)](?![\w])"),
    "name": re.compile(r"\b[A-Z][\w&.'-]*(?:\s+(?:of\s+|de\s+|&\s+)?[A-Z][\w&.'-]*)*"),
}

_PRONOUNS = {"we", "i", "you", "he", "she", "they", "it", "this", "that", "these", "those", "our", "their", "his",
             "her", "its", "table", "figure", "section", "page", "note", "item", "part"}

_Q_TYPES: list[tuple[str, re.Pattern]] = [
    ("duration", re.compile(r"\bhow long\b(?!.*\b(feet|foot|meters?|miles?|wide|tall)\b)|\bfor how many "
                            r"(years|months|weeks|days)\b|\bwhat (period|duration|term|time ?frame)\b|"
                            r"\bwithin what time\b", re.I)),
    ("date", re.compile(r"\b(when|what date|on what (calendar )?date|which day|what day)\b", re.I)),
    ("percent", re.compile(r"\b(what (percent(age)?|share|proportion|fraction)|how much of|(what|which)( [\w-]+){1,3} "
                           r"(rate|margin|accuracy|share)|what (rate|margin|accuracy))\b|%", re.I)),
    ("money", re.compile(r"\bhow much\b.*\b(spen[dt]|cost|pay|paid|revenue|sales|income|earn|expense|price|"
                         r"generate|bring in|worth|fee|budget|capital)|\bwhat (amount|price|cost)\b|"
                         r"\b(revenue|sales|income|expenditure|cost)\b.*\?$", re.I)),
    ("number", re.compile(r"\bhow (many|much|old|far|large|big|often|fast|high|tall)\b|\bwhat (number|score|"
                          r"value|threshold|size|total|age|count|speed)\b|\b(what|which) [\w-]+ (score|value|"
                          r"threshold|number|count)\b|\bon which line\b", re.I)),
    ("identifier", re.compile(r"\b(what|which) (is the )?[\w\s'’.-]{0,60}?\b(number|no\.?|id|identifier|code|"
                              r"command|statement|registration|metric|type|call|key|exhibit|line|instance)\b", re.I)),
    ("name", re.compile(r"\b(who|whom|whose)\b|\b(which|what) (library|company|firm|authority|agency|person|"
                        r"provider|tool|vendor|country|city|state|organi[sz]ation|bank|auditor)\b", re.I)),
]


def question_type(question: str) -> str | None:
    """Expected answer type of ``question``: date | duration | percent | money | number |
    identifier | name, or None (a description, a reason, a list). The earliest matching
    wh-phrase decides ("How many stores ... when the year ended?" asks for a count)."""
    found = [(m.start(), i, t) for i, (t, pat) in enumerate(_Q_TYPES) if (m := pat.search(question))]
    if not found:
        return None
    return min(found)[2]


def _fallback_types(t: str) -> list[str]:
    return {"money": ["money", "number"], "number": ["number", "money", "percent"], "percent": ["percent", "number"],
            "duration": ["duration", "date"], "identifier": ["identifier", "number"]}.get(t, [t])


def concise_span(question: str, sentence: str) -> str | None:
    """The span of ``sentence`` that answers ``question``'s type (see ``question_type``), or None
    when the type is unknown or the sentence has no span of it. Spans whose words all occur in
    the question are skipped (they restate it: "fiscal 2023" in "... for fiscal 2023?")."""
    t = question_type(question)
    if t is None:
        return None
    q_terms = set(tokenize(question))
    q_low = question.lower()
    positions = [(m.start(), m.end()) for m in re.finditer(r"[^\W_]+", sentence)
                 if (w := m.group(0).lower()) not in STOP_WORDS and set(tokenize(w)) & q_terms]
    for typ in _fallback_types(t):
        cands = []
        for m in TYPES[typ].finditer(sentence):
            span = m.group(0).strip(" ,.;:")
            if not span or span.lower() in q_low or (set(tokenize(span)) and set(tokenize(span)) <= q_terms
                                                      and typ in ("name", "identifier")):
                continue
            if typ == "identifier" and not re.search(r"\d|[A-Z]{2}|_", span):
                continue
            if typ == "name" and (span.lower() in STOP_WORDS or span.lower() in _PRONOUNS
                                  or (not sentence[:m.start()].strip() and " " not in span)):
                continue  # "We ...", a capitalised first word: not a name
            # a form field's value follows its label's colon; else the span with most question terms
            # around it (60 characters before, 30 after), then the nearest one
            after_colon = sentence[:m.start()].rstrip().endswith(":")
            near = len({sentence[a:b].lower() for a, b in positions if b > m.start() - 60 and a < m.end() + 30
                        and (b <= m.start() or a >= m.end())})
            gaps = [m.start() - e for s, e in positions if e <= m.start()] + \
                   [s - m.end() for s, e in positions if s >= m.end()]
            cands.append((not after_colon, -near, min(gaps) if gaps else 10_000, m.start(), span))
        if cands:
            return min(cands)[4]
    return None

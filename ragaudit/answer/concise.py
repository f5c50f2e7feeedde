"""The concise answer: the span of an answer sentence that answers the question's type.

The question's expected answer type (Harabagiu et al., "FALCON: Boosting Knowledge for Answer
Engines", TREC-9, 2000; Li & Roth, "Learning Question Classifiers", COLING 2002) is read from its
wh-phrase: a speed ("how fast", "what wind speed"), a distance or size ("how far", "how long
was the runway", "what length"), a clock time ("at what time", "when does ... open"), a date ("when", "on what date"), a duration ("how long", "for how many years", "how
much time"), a percentage ("what percent", "what rate"), an amount of money ("how much ... spend
/ revenue / cost"), an age ("how old": "age 85", "a 54-year-old"), a count or number ("how many",
"what ... score", "多少"; a bare year is a time, not a count, unless the question asks "what year"), an
identifier ("what is the ... number", "which command / statement / registration"), a name ("who",
"which library / company / authority").

``concise_answer`` looks at the answerer's best sentences (not only the first): every span of the
type in each of them is a candidate, scored by the sentence's own score (relative to the best
sentence), the question terms around the span, and whether it is a form field's value whose
label, or the caption printed under its line, names the question's terms ("Commission file
number: 0-23985"; "94-2404110" over "(I.R.S. Employer Identification No.)"), a form's "line 22"
being no value but a place on the form, like "page 4". A span is the value with
what belongs to it: an approximate qualifier ("about 56 feet"), a range ("$400 million to $475
million"), a rate's denominator ("$145 per record"), the question's head noun in front of an
identifier ("Grant IIS-00325657"). A question without such a type gets the cell of a table row
under the column the question names, else None. No gold answer is involved: this
is what EM / F1 are computed on (``metrics.concise_answer`` is the gold-guided upper bound).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from ragaudit.index.sparse import CJK_CHAR, question_row_terms, row_label_terms, tokenize
from ragaudit.platform.rules import Registry, Rule
from ragaudit.text.answer_types import _NUMWORD, Q_TYPES, TYPES
from ragaudit.text.dates import MONTH_PREFIX
from ragaudit.text.function_words import AUXILIARY, STOP_WORDS
from ragaudit.text.periods import asked_period, header_periods
from ragaudit.text.sentences import quoted as in_quotes
from ragaudit.types import Concise, Fired

_PRONOUNS = {
    "we",
    "i",
    "you",
    "he",
    "she",
    "they",
    "it",
    "this",
    "that",
    "these",
    "those",
    "our",
    "their",
    "his",
    "her",
    "its",
    "table",
    "figure",
    "section",
    "page",
    "note",
    "item",
    "part",
}

_WH_BEFORE = re.compile(r"(?i)\b(?:what|which|who|whom|whose|how|where|why)\b")


def without_conjunction_when(question: str) -> str:
    """``question`` with each "when" that joins a clause, rather than asks, replaced by "as": a
    "when" after another wh-word ("Which parts were damaged *when* it hit the lights?", "What was
    the pilot doing *when* the plane slowed?") asks for no date, unless "and", "or" or a comma
    starts a second question with it ("..., and when was his last medical exam?")."""

    def repl(m: re.Match) -> str:
        before = question[: m.start()]
        if _WH_BEFORE.search(before) and not re.search(r"(?i)(?:\band|\bor|[,;])\s*$", before):
            return "as"
        return m.group(0)

    return re.sub(r"(?i)\bwhen\b", repl, question)


def question_type(question: str) -> str | None:
    """Expected answer type of ``question``: speed | length | time | year | date | duration | percent | money | age |
    number |
    identifier | name, or None (a description, a reason, a list). The earliest matching
    wh-phrase decides ("How many stores ... when the year ended?" asks for a count); a "when" after
    another wh-word joins a clause and asks nothing ("Which parts were damaged when it hit ...?")."""
    question = without_conjunction_when(question)
    found = [(m.start(), i, t) for i, (t, pat) in enumerate(Q_TYPES) if (m := pat.search(question))]
    if not found:
        return None
    return min(found)[2]


def _fallback_types(t: str) -> list[str]:
    return {
        "time": ["time", "date"],
        "date": ["date", "time"],
        "speed": ["speed", "number"],
        "length": ["length", "number"],
        "duration": ["duration", "length", "date"],
        "money": ["money", "number"],
        "number": ["number", "money", "percent"],
        "percent": ["percent", "number"],
        "identifier": ["identifier", "number"],
        "age": ["age", "number"],
        "year": ["year", "date"],
    }.get(t, [t])


_HEAD = re.compile(rf"(?i)\b(?:what|which)\s+(?!{AUXILIARY}\b)(?:[\w'’.-]+\s+){{0,5}}?([A-Za-z]+)\s+{AUXILIARY}\b")


def head_noun(question: str) -> str | None:
    """The noun a "What/Which ... X <verb>" question asks for, lower-cased ("Under which National
    Science Foundation grant was ..." -> "grant"), or None."""
    m = _HEAD.search(question)
    return m.group(1).lower() if m else None


def _q_terms(question: str) -> set[str]:
    return {t for t in tokenize(question) if t not in STOP_WORDS}


_ASKS_YEAR = re.compile(r"(?i)\b(?:what|which)\s+(?:[\w-]+\s+)?years?\b(?!\s+(?:old|long))")


def _typed_spans(question: str, sentence: str, t: str) -> list[tuple[int, int, int, str]]:
    """``(tier, start, end, span)`` of every span of ``t`` (tier 0) or its fallback types in ``sentence``."""
    q_terms = set(tokenize(question))
    q_low = question.lower()
    head = head_noun(question)
    out = []
    dates = [(m.start(), m.end()) for m in TYPES["date"].finditer(sentence)]
    for rank, typ in enumerate(_fallback_types(t)):
        for m in TYPES[typ].finditer(sentence):
            tier: float = rank
            raw = m.group(0)
            lead = len(raw) - len(raw.lstrip(" ,.;:"))
            start, span = m.start() + lead, raw.strip(" ,.;:")
            if (
                not span
                or span.lower() in q_low
                or (set(tokenize(span)) and set(tokenize(span)) <= q_terms and typ in ("name", "identifier"))
            ):
                continue
            if span.endswith(")") and "(" not in span:
                span = span[:-1].rstrip()  # "RCAC)" of "(RCAC)": the bracket closes the sentence's, not the span's
            if not span or _malformed(question, t, typ, sentence, start, start + len(span), span):
                continue
            if typ == "identifier" and not re.search(r"\d|[A-Z]{2}|_|\(", span):
                continue
            if typ == "name" and (
                span.lower() in STOP_WORDS
                or span.lower() in _PRONOUNS
                or (not sentence[: m.start()].strip() and " " not in span)
                or re.search(r"\d", span)
            ):
                continue  # "We ...", a capitalised first word, a code with digits ("DFW08WA043"): not a name
            if t in ("money", "number", "age", "percent") and _other_measure(t, typ, span):
                continue  # "2,300 feet" for an age, "88%" for an amount of money, a bare year for money
            if typ in ("number", "identifier", "money") and _structure_ref(question, sentence, start, span):
                continue
            if (
                typ in ("number", "percent", "duration", "length", "speed")
                and t != "date"
                and any(a <= start < b for a, b in dates)
            ):
                continue  # the day or year of a date ("July 1, 2023") is no count
            end = start + len(span)
            if typ == "number" and re.fullmatch(rf"(?i){_NUMWORD}", span):
                tier += 0.5  # a bare number word is often a pronoun ("one groups items"): after the digits
            if (
                typ == "number"
                and t != "date"
                and re.fullmatch(r"(?:19|20)\d\d", span)
                and not _ASKS_YEAR.search(question)
            ):
                tier += 1  # a bare year ("the 2024 annual meeting", "In 1990, ...") names a time, not a count
            if typ in ("money", "number", "percent", "duration", "date", "length", "speed"):
                # a range ("$400 million to $475 million") or a rate ("$145 per record") is one value
                rng = re.match(r"\s*(?:to|through|until|–|—|-)\s*", sentence[end:])
                if rng and (m2 := TYPES[typ].match(sentence, end + rng.end())):
                    end = end + rng.end() + len(m2.group(0).rstrip(" ,.;:"))
                per = re.match(r"\s+per\s+[a-z]+", sentence[end:])
                if per and typ in ("money", "number"):
                    end += per.end()
                span = sentence[start:end]
            if typ == "identifier" and head and head not in ("number", "no", "id", "type", "code"):
                # the question's head noun printed in front of the identifier belongs to it ("Grant IIS-00325657")
                before = re.search(rf"(?i)\b{re.escape(head)}\s+$", sentence[:start])
                if before:
                    start, span = before.start(), sentence[before.start() : end]
            out.append((tier, start, end, span))
    return out


_ASKS_NUMBER = re.compile(r"(?i)\bnumber\b|\bno\.")
_CITATION_YEAR = re.compile(r"(?:19|20)\d\d[a-z]")  # "Smith 2017b": a reference's year and its letter


def _malformed(question: str, asked: str | None, typ: str, sentence: str, start: int, end: int, span: str) -> bool:
    """A candidate that is not a value as documents print one, whatever the question:

    - a piece of a longer number: "000" of "1.000" (a thousands group), "1" of "1.5" read apart,
      "30" of the clock time "8:30", a number with leading zeros ("000" of "1 000");
    - a reference's year with its letter ("2017b", "2023a") for a number or an identifier;
    - an identifier without a digit when the question asks for a number ("the USDL number",
      "the publication number": "CPI-U", "RCAC" are names the sentence mentions);
    - for an amount of money, a span without digits ("Three Months") or a bare integer below 100
      without a currency or scale ("1", "19": a footnote, a count, an item);
    - a name followed by a colon: a form's label ("Aircraft Make: Cessna"), not its value."""
    if typ in ("number", "money", "percent", "identifier") and re.match(r"\d", span):
        if re.search(r"\d[.,:]$", sentence[:start]) or re.match(r"[.,:]\d", sentence[end:]):
            return True
        if re.fullmatch(r"0\d+", span):
            return True
    if typ in ("number", "identifier") and _CITATION_YEAR.fullmatch(span):
        return True
    if asked == "identifier" and typ == "identifier" and _ASKS_NUMBER.search(question) and not re.search(r"\d", span):
        return True
    if asked == "money" and (not re.search(r"\d", span) or (typ == "number" and re.fullmatch(r"\d{1,2}", span))):
        return True
    return typ == "name" and bool(re.match(r"\s*:", sentence[end:]))


_LENGTH_UNIT = re.compile(
    r"(?i)\b(?:feet|foot|ft|meters?|metres?|km|miles?|nm|inch(?:es)?|yards?|cm|mm|knots?|kts|mph|degrees?)\b"
)


def _other_measure(asked: str, typ: str, span: str) -> bool:
    """A span that measures something else than what a numeric question asks for: a length,
    speed or angle for an age, count or amount ("2,300 feet" for "How old was the pilot?"), a
    percentage for an amount of money or an age, and a bare year for an amount of money or an age
    ("2023" for "How much did NVIDIA write off?")."""
    if _LENGTH_UNIT.search(span) and asked in ("age", "money", "percent"):
        return True
    if span.rstrip().endswith("%") or re.search(r"(?i)\bpercent\b", span):
        return asked in ("money", "age")
    return asked in ("money", "age") and bool(re.fullmatch(r"(?:19|20)\d\d", span.strip()))


# a form's "line 22" numbers the form's structure as "page 4" numbers a document's, and a contract's
# "Schedule 3" or a statute's "Article 79" its own
_STRUCTURE = re.compile(
    r"(?i)(?:\b(?:table|figure|fig\.|section|chapter|appendix|note|page|pages|p\.|item|part|line|lines|"
    r"schedule|exhibit|annex|attachment|article|art\.|clause|paragraph|para\.|form)|§)"
    r"\s*$"
)


def _structure_ref(question: str, sentence: str, start: int, span: str) -> bool:
    """A span that numbers the document's own structure, not a value: after "Table", "Section",
    "page", "Schedule", "Article", "§" ... (unless the question names that word), a sentence-opening section number ("3.2.2
    Built-in global variables"), a table of contents' page number after leader dots ("… 19")."""
    before = sentence[:start]
    m = _STRUCTURE.search(before)
    if m and m.group(0).strip().lower().rstrip(".") not in question.lower():
        return True
    if not before.strip() and re.fullmatch(r"\d+(?:\.\d+)+\.?", span):
        return True
    return bool(re.search(r"(?:…|\.{3,})\s*$", before))


def _near_terms(sentence: str, start: int, end: int, q_terms: set[str], idf: dict[str, float] | None = None) -> float:
    """Distinct question terms within 60 characters before and 30 after the span (outside it;
    20 and 10 characters, each a term, in CJK text),
    each weighted by ``idf`` (its inverse frequency among the candidate sentences, 0..1; a term
    every sentence has says little about where the answer is) or 1."""
    seen: set[str] = set()
    before, after = (20, 10) if CJK_CHAR.search(sentence) else (60, 30)  # a CJK character says about a word
    for m in re.finditer(r"[^\W_]", sentence) if before == 20 else re.finditer(r"[^\W_]+", sentence):
        a, b = m.start(), m.end()
        if b > start - before and a < end + after and (b <= start or a >= end):
            w = m.group(0).lower()
            if w not in STOP_WORDS:
                seen |= set(tokenize(w)) & q_terms
    return sum(idf.get(t, 1.0) if idf is not None else 1.0 for t in seen)


def _label_words_match(label: str, q_terms: set[str]) -> float:
    """0.5 + 0.5 x the share of the words naming a field's ``label`` that are question terms, or 0
    when they name none of them. The words naming it are its last two ("Commission file
    *number*"), or, for a label of the shape "X of Y", the last two of X ("*Closing balance* of the
    reserve fund"); the better share counts."""
    words = re.findall(r"[^\W_][\w/().&'-]*", label)
    heads = [words[-2:]]
    tail = words[-8:]
    if "of" in (w.lower() for w in tail[1:]):
        at = max(i for i, w in enumerate(tail) if w.lower() == "of" and i > 0)
        heads.append(tail[:at][-2:])
    best = 0.0
    for head in heads:
        terms = set(tokenize(" ".join(head))) - STOP_WORDS
        if terms:
            best = max(best, len(terms & q_terms) / len(terms))
    return 0.5 + 0.5 * best if best else 0.0


def _label_match(sentence: str, start: int, q_terms: set[str], caption: str = "") -> float:
    """When the span is a field's value (it follows a colon): 0.5 + 0.5 x the share of the
    label's last two words that are question terms ("Commission file number: 0-23985"), or 0
    when they name none of them (another field: "Accident Number: DEN08WA042" for a question
    about a registration); 0 when the span follows no colon. ``caption``: the form caption
    printed under the sentence's line, which labels the values on it as SEC cover pages print
    them ("California 94-2404110" over "(State or other jurisdiction (I.R.S. Employer
    Identification No.)"); its last two words count as a label too (the larger match wins)."""
    from_caption = _label_words_match(caption, q_terms) if caption else 0.0
    before = sentence[:start].rstrip()
    if not before.endswith(":"):
        return from_caption
    return max(from_caption, _label_words_match(before[:-1], q_terms))


_FOCUS = re.compile(
    r"(?i)^\s*(?:what|which)\s+(?:is|was|are|were)\s+(?:the\s+)?(?P<focus>[\w'’ -]+?)\s+"
    r"(?:of|for|in|at|on|from|to|by|with|during|that|which|behind)\b"
)


def question_focus(question: str) -> set[str]:
    """Terms of what a "What is/was the X of Y?" question asks for: X ("the *probable cause* of the
    Beech A23 accident" -> {probable, cause}); Y only says of what. Empty for other shapes."""
    m = _FOCUS.search(question)
    return set(tokenize(m.group("focus"))) - STOP_WORDS if m else set()


_YEARS_LINE = re.compile(r"(?:(?:19|20)\d\d\s+)+(?:19|20)\d\d")
_DATES_LINE = re.compile(
    rf"(?i)(?:{MONTH_PREFIX}\s+\d{{1,2}}(?:,\s*(?:(?:19|20)\d\d)?)?\s*)+"
)  # "December 31, December 25,"
_CELL = re.compile(r"(?<![\w.])(?:\$\s?)?\(?-?\d+(?:,\d{3})*(?:\.\d+)?\)?%?(?![\w.])")


_UNIT_LINE = re.compile(r"(?i)^\s*\((?:dollars |\$ |amounts )?in (?:millions|thousands|billions)\b[^)]*\)\s*$")
_FISCAL_YEAR = re.compile(r"(?i)\bfiscal(?:\s+year)?\s+(?:19|20)\d\d\b|\bFY\s?(?:19|20)?\d\d\b")


def table_cell(question: str, row: str, context: str) -> str | None:
    """The cell of table ``row`` under the column the question names, or None.

    ``context``: the text before the row (its table's header line is among its last 15 lines: a
    line of two or more words without digits, one of which, not the first -- that is the row
    labels' column --, is a question term: "Dataset Train Dev Test" for "How many test
    questions ..."). The row's numeric cells are aligned to the header's words from the right
    (a label column or a header spanning two columns shifts the left end): used only when the
    row has no more numeric cells than the header has words. A header line of years ("2022 2023",
    as financial statements print them) picks the column of the year the question names, when the
    row has one cell per year and the question names one year that heads one column; under a
    line of periods ("Three Months Ended Nine Months Ended") the period the question names
    (``asked_period``) first picks its share of the columns. A unit line ("(In millions)") is
    passed over."""
    if _DATES_LINE.fullmatch(row.strip()):
        return None  # a header of period-end dates ("December 31, December 25,"), not a row
    q_terms = _q_terms(question)
    cells = [m.group(0) for m in _CELL.finditer(row)]
    label = _CELL.sub(" ", row).split()
    if len(cells) < 2 or len(label) > 6 or not set(tokenize(" ".join(label))) & q_terms:
        return None  # not a table row (a label and two or more cells) the question names
    q_years = set(re.findall(r"\b(?:19|20)\d\d\b", question))
    groups, below_is_row = 0, True
    above = list(reversed(context.rstrip("\n").split("\n")[-15:]))
    for at, line in enumerate(above):
        if _UNIT_LINE.match(line):
            continue  # "(In millions)" between the header and the rows
        if (
            groups < 3
            and below_is_row
            and line.strip()
            and not re.search(r"\d", line)
            and (len(line.split()) <= 2 or (len(line.split()) <= 4 and line.rstrip().endswith(":")))
        ):
            groups += 1  # a row group's label ("AWS", "North America", "Current liabilities:") above rows
            below_is_row = False
            continue
        below_is_row = bool(_CELL.search(line))
        if q_years and _YEARS_LINE.fullmatch(line.strip()):
            # a header of years ("2022 2023" over "Total net sales 116,444 127,358"): the column of
            # the one year the question names, when each year heads one cell of the row
            years = line.split()
            cols = range(len(years))
            # "Three Months Ended Nine Months Ended" over "2023 2022 2023 2022": the question's
            # period picks its half before its year picks the column
            spans = next((found for up in above[at + 1 : at + 4] if len(found := header_periods(up)) >= 2), [])
            asked = asked_period(question)
            # a fiscal year ("the first nine months of fiscal year 2023") is not the calendar year of
            # a column's end date (NVIDIA's fiscal 2023 ends in January 2023): no column for it
            if asked in spans and len(years) % len(spans) == 0 and not _FISCAL_YEAR.search(question):
                w = len(years) // len(spans)
                cols = range(spans.index(asked) * w, (spans.index(asked) + 1) * w)
            named = [i for i in cols if years[i] in q_years]
            if len(q_years) == 1 and len(named) == 1 and len(years) == len(cells):
                return cells[named[0]]
            return None
        if _CELL.search(line):
            continue  # another data row of the table
        words = line.split()
        caps = sum(w[:1].isupper() for w in words)
        if not 2 <= len(words) <= 10 or caps < 0.6 * len(words):
            return None  # the first line above the rows is no header row
        label_terms = set(tokenize(" ".join(label)))
        hits = [j for j, w in enumerate(words) if j > 0 and (set(tokenize(w)) - label_terms) & q_terms]
        if not hits:
            return None
        k, j, n = len(words), hits[-1], len(cells)
        if n > k or n < k - j:
            return None
        return cells[n - (k - j)]
    return None


RELATIVE_POOL = 0.75  # sentences scoring at least this share of the best are searched for the span
WIDE_POOL = 0.5  # ... and down to this share for a span of exactly the type asked for
NEAR_WEIGHT = 0.1  # weight of each question term near a span, against the sentence's relative score
LABEL_WEIGHT = 0.5  # weight of a form field's label naming the question's terms


def _cell_has_type(cell: str, t: str | None) -> bool:
    """A table cell answers a question of type ``t`` only as that type: a percentage question
    ("how much of total sales ...") not with an amount ("$ 10,323"), a money question not with a
    percentage."""
    pct = cell.rstrip().endswith("%")
    return pct if t == "percent" else not pct if t == "money" else True


_SECOND_ASK = re.compile(
    r"(?i)(?:,|\band\b|;)\s*(?:how|what|which|when|who|why|where|whether|did|does|do|is|are|was|were)\b|"
    r"\b(?:compare[sd]?|comparison|relate[sd]?|versus|vs\.?)\b"
)


def asks_two_things(question: str) -> bool:
    """The question asks two things ("What was X, and how does it compare with Y?", "How did
    operational spending relate to revenue?"): one span cannot answer it."""
    return bool(_SECOND_ASK.search(question))


def _focus_terms(question: str) -> set[str]:
    """Terms of what the question asks for: the X of "What was the X of Y", the counted noun of
    "how many X", the head noun of "What/Which ... X <verb>"."""
    terms = set(question_focus(question))
    if m := _COUNTED.search(question):
        terms |= set(tokenize(m.group(1).split()[-1]))
    if head := head_noun(question):
        terms |= set(tokenize(head))
    return terms - STOP_WORDS


def _beside_focus(sentence: str, start: int, end: int, focus: set[str]) -> float:
    """1.0 when a term of what the question asks for is among the three words after the span or
    the four before it ("four *function zones*", "*operating income* $ 6,976"), else 0.0."""
    if not focus:
        return 0.0
    after = re.findall(r"[^\W_]+", sentence[end:])[:3]
    before = re.findall(r"[^\W_]+", sentence[:start])[-4:]
    return 1.0 if set(tokenize(" ".join(after + before))) & focus else 0.0


def _row_label(row: str) -> str:
    return " ".join(_CELL.sub(" ", row).split())


def concise_candidates(question: str, sentences: list[tuple], disabled: frozenset[str] = frozenset()) -> list[Concise]:
    """Every concise answer the extractors of ``CONCISE`` find for ``question`` among
    ``sentences`` (``(score, text)``, ``(score, text, context)`` or ``(score, text, context,
    caption)``, best first; the score is the answerer's sentence score, any scale; ``context`` the
    text before the sentence in its chunk, for ``table_cell``; ``caption`` the form caption
    printed under the sentence's line, which labels its values, for ``_label_match``), best
    first, with the features ``confidence`` reads; ``disabled`` extractors are skipped.

    Candidates come from the sentences scoring at least ``RELATIVE_POOL`` x the best. A table
    row's cell under the column the question names (``table_cell``) comes first. A typed
    question (``question_type``) takes the spans of its own type, then of a fallback type (a count
    may be printed as money); among those the highest of: the sentence's relative score +
    ``NEAR_WEIGHT`` x distinct question terms around the span + ``LABEL_WEIGHT`` x a form label's
    (or caption's) share of question terms (``_label_match``), then the best sentence, then the
    earliest. An untyped question gets no span but a table cell. Spans
    whose words all occur in the question are skipped (they restate it: "fiscal 2023" in "... for
    fiscal 2023?")."""
    if not sentences:
        return []
    top = max(x[0] for x in sentences) or 1.0
    wide = [
        (x[0] / top if top > 0 else 1.0, x[1], x[2] if len(x) > 2 else "", x[3] if len(x) > 3 else "")
        for x in sentences
        if x[0] >= WIDE_POOL * top or x[0] == top
    ]
    pool = [x for x in wide if x[0] >= RELATIVE_POOL]
    t = question_type(question)
    q_terms = _q_terms(question)
    two = float(asks_two_things(question))
    out: list[Concise] = []

    def overlap(text: str) -> float:
        return len(q_terms & set(tokenize(text))) / len(q_terms) if q_terms else 0.0

    if t in (None, "number", "money", "percent") and "concise.table_cell" not in disabled:
        # a row whose whole label the question names ("Effective tax rate 696.2 % ... 51.4 %" for
        # "What was Intel's effective tax rate ...?") before a row sharing a word with it
        # ("Provision for (benefit from) taxes ..."), each group in score order
        q_rows = question_row_terms(question)
        named = [x for x in pool if q_rows & set(row_label_terms(x[1]))]
        for rel, text, context, _ in named + [x for x in pool if not any(x is y for y in named)]:
            if context and (cell := table_cell(question, text, context)) and _cell_has_type(cell, t):
                whole = any(x is text for _, x, _, _ in named)
                out.append(
                    Concise(
                        cell,
                        t or "table_cell",
                        "concise.table_cell",
                        f"the cell of the table row {in_quotes(_row_label(text))} under the column the question names",
                        text,
                        features={"rel": rel, "row_named": float(whole), "overlap": overlap(text), "two_asks": two},
                    )
                )
    if t is None:
        return out
    if "concise.typed_span" in disabled:
        return out
    n = len(wide)
    df = {q: sum(1 for _, text, _, _ in wide if q in set(tokenize(text))) for q in q_terms}
    idf = {q: math.log((n + 1) / (df[q] + 0.5)) / math.log((n + 1) / 0.5) for q in q_terms}
    cands = []
    # a field is the one asked for when its label holds what the question asks for: the X of "What
    # is the X of Y" when it has that shape ("the landing gear type of the aircraft in the accident
    # at ..." names no "Accident Number" field), else any of its terms
    label_terms = question_focus(question) or q_terms
    for i, (rel, text, _, caption) in enumerate(wide):
        for tier, start, end, span in _typed_spans(question, text, t):
            if tier > 0 and rel < RELATIVE_POOL:
                continue  # another type than asked for: only from the best sentences
            near = _near_terms(text, start, end, q_terms, idf)
            label = _label_match(text, start, label_terms, caption)
            value = rel + NEAR_WEIGHT * near + LABEL_WEIGHT * label
            cands.append((tier, -value, i, start, span, text, rel, near, label))
    cands.sort(key=lambda c: c[:4])
    focus = _focus_terms(question)
    for c in cands:
        tier, neg, i, start, span, text, rel, near, label = c
        # the best candidate of another value in the same tier: how clearly this one wins
        rival = next((-d[1] for d in cands if d[0] == tier and _norm_value(d[4]) != _norm_value(span)), None)
        same = sum(1 for d in cands if _norm_value(d[4]) == _norm_value(span))
        out.append(
            Concise(
                span,
                t,
                "concise.typed_span",
                f"{'an' if t[:1] in 'aeiou' else 'a'} {t} span{' (of a fallback type)' if tier else ''} of the sentence"
                + (", beside the question's words" if near else "")
                + (", the value of a field the question names" if label else ""),
                text,
                features={
                    "rel": rel,
                    "tier": float(tier),
                    "near": near,
                    "label": label,
                    "top_sentence": float(i == 0),
                    "margin": -neg - rival if rival is not None else 1.0,
                    "agree": float(same),
                    "overlap": overlap(text),
                    "beside_focus": _beside_focus(text, start, start + len(span), focus),
                    "two_asks": two,
                },
            )
        )
    return out


def _norm_value(span: str) -> str:
    return re.sub(r"[\s,$]", "", span.lower())


def concise_answer(question: str, sentences: list[tuple]) -> str | None:
    """The text of the best of ``concise_candidates`` (no confidence threshold), or None."""
    cands = concise_candidates(question, sentences)
    return cands[0].text if cands else None


def concise_span(question: str, sentence: str) -> str | None:
    """The span of one ``sentence`` that answers ``question`` (``concise_answer`` over it alone),
    or None when the question's type is unknown, or the sentence has no span of the type."""
    return concise_answer(question, [(1.0, sentence)])


_NUM_WORDS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen twenty".split()
    )
}
_COUNTED = re.compile(
    rf"(?i)\bhow many\s+((?:[\w'’-]+\s+){{0,3}}?[\w'’-]+?)\s+(?:{AUXILIARY}|does|do|did|were|are|in|of|on|at|for|to|"
    r"did|has|have|had)\b"
)


def _as_number(text: str) -> float | None:
    t = text.lower().replace(",", "").strip()
    if t in _NUM_WORDS:
        return float(_NUM_WORDS[t])
    m = re.search(r"-?\d+(?:\.\d+)?", t)
    return float(m.group(0)) if m else None


def contradicts(question: str, concise: Concise, quoted: list[str]) -> str | None:
    """Why ``concise`` contradicts the sentences the answer quotes, or None.

    A count question ("How many *function zones* ...?") whose quoted sentences state the count of
    what it asks for ("... divided into four function zones") is answered by that count: a
    concise answer with another number ("1") is withheld, whatever extracted it. The counted noun
    is the phrase after "how many" up to its verb; a quoted count is a number (digits or a number
    word) at most two words before that phrase's last word."""
    m = _COUNTED.search(question)
    if not m:
        return None
    head = m.group(1).split()[-1]
    head_terms = set(tokenize(head))
    if not head_terms:
        return None
    mine = _as_number(concise.text)
    stated = []
    for s in quoted:
        words = list(re.finditer(r"[\w,.'’-]+", s))
        for k, w in enumerate(words):
            if not set(tokenize(w.group(0))) & head_terms:
                continue
            for j in range(max(0, k - 3), k):
                v = _as_number(words[j].group(0).rstrip(".,"))
                if v is not None and re.fullmatch(
                    r"(?i)\d[\d,]*(?:\.\d+)?|" + "|".join(_NUM_WORDS), words[j].group(0).rstrip(".,")
                ):
                    stated.append((v, s[words[j].start() : w.end()]))
                    break
    if stated and not any(v == mine for v, _ in stated):
        return f"the quoted sentence says {in_quotes(stated[0][1])}, not {concise.text}"
    return None


def confidence(c: Concise) -> float:
    """The probability that ``c`` is right (token F1 >= 0.5 against a person's answer), from its
    extractor and features by a logistic model (``CALIBRATION``: weights per extractor and per
    feature, fitted on the tuning question sets by ``bench/concise_calibration.py``); 0..1."""
    z = (
        CALIBRATION["bias"]
        + CALIBRATION["rule"].get(c.rule, 0.0)
        + sum(CALIBRATION["features"].get(k, 0.0) * v for k, v in c.features.items())
    )
    return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))


def choose(
    question: str,
    candidates: list[Concise],
    quoted: list[str],
    min_confidence: float | None = None,
    disabled: frozenset[str] = frozenset(),
) -> tuple[Concise | None, list[Fired]]:
    """The concise answer to show, or None, and the rules that decided: the first candidate (the
    extractors' best) with its ``confidence``, withheld when it contradicts the quoted sentences
    (``contradicts``; rule ``concise.contradicts_quote``) or its confidence is under
    ``min_confidence`` (rule ``concise.min_confidence``; 1.0 withholds every one). Withheld means
    the quoted sentences stand alone: no concise answer beats a wrong one. ``min_confidence`` None =
    the fitted threshold (``CALIBRATION["threshold"]``: 1.0 when no confidence was certified to
    reach the target precision, ``bench/concise_calibration.py``)."""
    if min_confidence is None:
        min_confidence = float(CALIBRATION["threshold"])
    if not candidates:
        return None, []
    c = candidates[0]
    c = Concise(c.text, c.type, c.rule, c.reason, c.sentence, confidence(c), c.features)
    made = Fired(c.rule, "extracted", f"{in_quotes(c.text)}: {c.reason} (confidence {c.confidence:.2f})")
    if "concise.contradicts_quote" not in disabled and (why := contradicts(question, c, quoted)):
        return None, [made, Fired("concise.contradicts_quote", "withheld", why)]
    if "concise.min_confidence" not in disabled and (c.confidence < min_confidence or min_confidence >= 1.0):
        why = (
            f"confidence {c.confidence:.2f} is under {min_confidence:.2f}"
            if min_confidence < 1.0
            else "no confidence of the calibration is certified to reach precision "
            f"{float(CALIBRATION.get('target_precision', 0.8)):.2f} on question sets it was not fitted on"
        )
        return None, [
            made,
            Fired(
                "concise.min_confidence",
                "withheld",
                f"{in_quotes(c.text)} (confidence {c.confidence:.2f}) withheld: {why}; the quoted sentences stand alone",
                {
                    "candidate": c.text,
                    "type": c.type,
                    "confidence": round(c.confidence, 4),
                    "threshold": min_confidence,
                },
            ),
        ]
    return c, [made]


# the confidence model and its threshold, with where and when they were fitted (``confidence``)
CALIBRATION: dict[str, Any] = json.loads((Path(__file__).parent / "concise_calibration.json").read_text())


def _extractor(name: str, why: str) -> Rule:
    return Rule(name, why, lambda *a, **k: None)  # extraction runs in concise_candidates, by name


CONCISE = Registry(
    "concise",
    [
        _extractor(
            "concise.table_cell", "the cell of a table row the question names, under the column the question names"
        ),
        _extractor("concise.typed_span", "a span of the answer type the question's wh-phrase asks for"),
        Rule(
            "concise.contradicts_quote",
            "a concise count that differs from the count the quoted sentence states is withheld",
            contradicts,
        ),
        _extractor("concise.min_confidence", "a concise answer whose calibrated confidence is low is withheld"),
    ],
)

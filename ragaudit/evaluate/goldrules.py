"""The offline gold-pair generator: questions written the way a document states its facts.

Each pair has a verbatim ``evidence`` span of its chunk, a typed ``answer`` and a ``kind`` (the
source of the question):

- ``labelled_value``: a form field "Label: value" ("Registration: N5921D") asked as "What is the
  registration of the aircraft in the accident at Tallahassee, FL on December 8, 2007?": the label,
  the entity its form section describes ("Pilot Information" -> the pilot) and what the document
  is about (``DocContext.subject``), so the question makes sense outside the document;
- ``table_cell``: a table row label x a column header x the table's period or caption ("What were
  total net sales for the three months ended June 25, 2022 in Apple Inc.'s Form 10-Q ...?");
- ``vote_table``: a vote tally under "For Against Abstain Broker Non-Votes" ("How many votes were
  cast against Patricia A. Little in the election of directors ...?"), the row label or, for a
  tally without one, the proposal printed above the table;
- ``sentence``: a declarative sentence whose answer span has a clear type (a date, an amount, a
  percentage, a count, a person or organisation, an identifier) turned into a wh-question by a
  small grammar over the sentence (subject, auxiliary or past-tense verb, predicate, typed
  adjunct): "X was signed into law ... on October 28, 1998." -> "When was X signed into law ...?";
  "X increased 9% to ..." -> "By what percentage did X increase ...?". Verb forms come from
  ``lemminflect`` (its dictionary ships with the package). The rules are in the spirit of
  Heilman & Smith, "Good Question! Statistical Ranking for Question Generation", NAACL 2010
  (declarative-to-interrogative transformations with subject-auxiliary inversion), without a
  parser: no maintained English parser ships its model as a package here (spaCy's models are
  published outside PyPI; the PyPI copies are unofficial re-uploads).

A share of the questions (``paraphrase_share``, chosen by a stable hash) is phrased with other
words than the evidence: a synonym from a small table ("registration" -> "tail number", "cast
against" -> "opposed", "net sales" -> "revenue") or, failing that, the document qualifier moved to
the front ("In Apple Inc.'s Form 10-Q ..., what were ...?"); those pairs are marked
``paraphrase``. Every pair still goes through ``goldcheck`` before it is stored.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from datetime import datetime

from lemminflect import getAllLemmas, getInflection

from ragaudit.answer.citations import normalize_ws
from ragaudit.ingest.chunking import page_tables
from ragaudit.text.answer_types import TYPES
from ragaudit.text.dates import MONTH_NAME, MONTH_PREFIX
from ragaudit.text.periods import PERIOD_ENDED
from ragaudit.text.sentences import sentence_spans
from ragaudit.types import Chunk


@dataclass
class GoldPair:
    """A candidate pair of a chunk; ``evidence`` must occur verbatim in the chunk text.

    ``kind``: labelled_value | table_cell | vote_table | sentence | llm; ``answer_type``: date |
    amount | percent | count | person | organisation | identifier | text."""

    question: str
    answer: str
    evidence: str
    kind: str = "sentence"
    answer_type: str = "text"
    paraphrase: bool = False


# ------------------------------------------------------------------------------ document context
@dataclass
class DocContext:
    """What a document is about, read once from all its chunks: ``title`` (its heading),
    ``issuer`` (a filing's registrant), ``subject`` (a noun phrase naming the document or the event
    it reports, used in questions: "Apple Inc.'s Form 10-Q for the quarterly period ended June
    25, 2022"), ``event`` (an accident or incident the document reports, "the accident at
    Tallahassee, FL on December 8, 2007", or ""), ``text`` (the document text rebuilt from the
    chunks' offsets) and ``page_starts`` (document offset of each page's text)."""

    doc_name: str
    title: str = ""
    issuer: str = ""
    subject: str = ""
    event: str = ""
    text: str = ""
    page_starts: dict[int, int] = field(default_factory=dict)

    def about(self) -> str:
        """ " in <subject>" (or " in the <event>"), the qualifier appended to a question."""
        if self.event:
            return f" in the {self.event}"
        return f" in {self.subject}" if self.subject else ""


_EXACT_NAME = re.compile(r"(?i)^\s*\(?exact name of (?:the )?registrant")
_FORM = re.compile(r"^\s*FORM\s+(\d{1,2}-[A-Z]{1,2}|[0-9]{2,4}[A-Z]{0,2})\s*$", re.M)
_PERIOD = re.compile(r"(?i)for the (quarterly period|fiscal year|year|quarter) ended\s+([A-Z][a-z]+ \d{1,2}, \d{4})")
_REPORT_DATE = re.compile(r"(?i)date of report[^:\n]*:\s*([A-Z][a-z]+ \d{1,2}, \d{4})")
_MONTH_NAME = re.compile(rf"\b{MONTH_NAME}\b")
_CORP_SUFFIX = re.compile(r"(?i)\b(?:inc|corp|corporation|ltd|llc|plc|co|company|group|holdings)\b\.?,?$")


def _title_case(name: str) -> str:
    """An all-capitals name in title case ("NVIDIA CORPORATION" -> "Nvidia Corporation"; "ULTA
    BEAUTY, INC." -> "Ulta Beauty, Inc.")."""
    if name.upper() != name:
        return name
    small = {"OF", "AND", "THE", "FOR", "IN", "ON", "TO", "A", "AN", "OR"}
    words = name.split()
    out = []
    for i, w in enumerate(words):
        if w in small and i > 0:
            out.append(w.lower())
        elif len(w) <= 3 and w.isalpha() and w not in small | {"INC"}:
            out.append(w)
        else:
            out.append(w.title())
    return " ".join(out)


def _possessive(name: str) -> str:
    return name + ("'" if name.endswith("s") else "'s")


def _rebuild_text(chunks: list[Chunk]) -> tuple[str, dict[int, int]]:
    """The document text from the chunks' offsets (gaps, if any, as newlines) and each page's start."""
    end = max((c.char_end for c in chunks), default=0)
    buf = ["\n"] * end
    starts: dict[int, int] = {}
    for c in chunks:
        buf[c.char_start : c.char_end] = list(c.text)
        for page, off in c.page_breaks or [(c.page_start, 0)]:
            starts[page] = min(starts.get(page, end), c.char_start + off)
    return "".join(buf), starts


def _heading(chunks: list[Chunk], doc_name: str) -> str:
    """The document's title: the heading in the context header ("stem | heading"), unless it is a
    date or a list of names, else the first line of the text."""
    first = chunks[0].header.split("\n")[0] if chunks else ""
    heading = first.split(" | ", 1)[1].strip() if " | " in first else ""
    line = next((ln.strip() for ln in (chunks[0].text.splitlines() if chunks else []) if ln.strip()), "")
    if not heading or _MONTH_NAME.search(heading) or len(heading.split()) > 16:
        heading = line
    return _title_case(heading[:120])


def document_context(doc_name: str, chunks: list[Chunk]) -> DocContext:
    """Read what the document is about (see ``DocContext``) from its chunks."""
    text, starts = _rebuild_text(chunks)
    ctx = DocContext(doc_name=doc_name, text=text, page_starts=starts, title=_heading(chunks, doc_name))
    head = text[:6000]
    lines = head.splitlines()
    for i, ln in enumerate(lines):
        if _EXACT_NAME.match(ln):
            prev = next((x.strip() for x in reversed(lines[:i]) if x.strip()), "")
            if prev and len(prev.split()) <= 6:
                ctx.issuer = _title_case(prev)
            break
    form = _FORM.search(head)
    if ctx.issuer and form:
        period = _PERIOD.search(head)
        report = _REPORT_DATE.search(head)
        when = (
            f" for the {period.group(1).lower()} ended {period.group(2)}"
            if period
            else (f" dated {report.group(1)}" if report else "")
        )
        ctx.subject = f"{_possessive(ctx.issuer)} Form {form.group(1)}{when}"
    fields = dict((lab.lower(), val) for lab, val, _ in labelled_values(head[:3000]))
    if "location" in fields and re.search(r"(?i)\b(accident|incident)\b", ctx.title + " " + head[:300]):
        what = "incident" if re.search(r"(?i)\bincident\b", ctx.title) else "accident"
        when = _date_words(fields.get("date & time", "") or fields.get("date", ""))
        ctx.event = f"{what} at {fields['location']}" + (f" on {when}" if when else "")
        ctx.subject = f"the report on the {ctx.event}"
    if not ctx.subject:
        ctx.title = _full_title(ctx.title, text[:3000])
        m = re.match(r"^(.{3,60}?)\s+(?:Announces|Reports)\s+(.{5,120})$", ctx.title)
        if m:  # a press release: "Ulta Beauty Announces Fourth Quarter Fiscal 2022 Results"
            ctx.issuer = m.group(1)
            ctx.subject = f"{_possessive(m.group(1))} {m.group(2)}"
        else:
            kind = "paper" if re.search(r"(?m)^\s*Abstract\s*$", head) else "document"
            ctx.subject = f'the {kind} "{ctx.title}"' if ctx.title else ""
    return ctx


def _full_title(title: str, head: str) -> str:
    """``title`` completed from the first page when the context header cut it ("... for Fiscal
    202"): the lines of ``head`` from where the title starts, joined while they continue it, up to
    20 words. A title that is a label line ("Project Name: X") keeps its value only."""
    title = re.sub(r"^[A-Z][\w ]{0,30}:\s+(?=[A-Z])", "", title).rstrip(" .")
    words = title.split()
    if len(words) < 3:
        return title
    key = " ".join(words[:3])
    at = re.search(r"\s+".join(map(re.escape, words[:3])), head)  # where the title starts, across line breaks
    if at is None:
        return title
    lines = head[at.start() :].split("\n")
    out: list[str] = []
    for ln in lines:
        ln = ln.strip()
        if not ln or (out and (ln[0].islower() is False and len(" ".join(out).split()) >= len(words))):
            break
        out.append(ln)
        if len(" ".join(out).split()) >= 20:
            break
    full = normalize_ws(" ".join(out))
    return (full if full.startswith(key) and len(full) >= len(title) else title).rstrip(" .")


def _date_words(value: str) -> str:
    """A date as words ("12/08/2007, 1730 EST" -> "December 8, 2007"); "" when none is found."""
    m = re.search(r"\b(\d{1,2})/(\d{1,2})/(\d{4})\b", value)
    if m:
        try:
            d = datetime(int(m.group(3)), int(m.group(1)), int(m.group(2)))
        except ValueError:
            return ""
        return f"{d:%B} {d.day}, {d.year}"
    m = TYPES["date"].search(value)
    return m.group(0) if m else ""


# ------------------------------------------------------------------------------ answer types
_ORG = re.compile(
    r"(?i)\b(?:inc|corp|corporation|llc|llp|ltd|plc|company|board|office|agency|university|association|"
    r"bank|exchange|market|commission|department|administration|institute|council|committee|court|"
    r"bureau|service|ministry|foundation|group|authority|organization|organisation)\b\.?"
)


def answer_type_of(value: str) -> str:
    """The type of an answer span: date | percent | amount | count | identifier | organisation |
    person | text."""
    v = value.strip()
    if TYPES["date"].fullmatch(v) or re.fullmatch(r"\d{1,2}/\d{1,2}/\d{2,4}", v):
        return "date"
    if TYPES["percent"].fullmatch(v) or re.fullmatch(r"\(?-?\d[\d,.]*\)?\s?%", v):
        return "percent"
    if TYPES["money"].fullmatch(v) or re.fullmatch(r"\$\s?\(?[\d,.]+\)?(?:\s(?:million|billion|thousand))?", v):
        return "amount"
    if re.fullmatch(r"\(?[\d,]+(?:\.\d+)?\)?(?:\s+[a-zA-Z]+){0,2}", v):
        return "count"
    if re.fullmatch(r"(?=.*\d)[A-Z0-9][A-Za-z0-9./-]{2,}", v) or re.fullmatch(r"[A-Z]{2,}\d[\w-]*", v):
        return "identifier"
    words = v.split()
    if _ORG.search(v) and words[0][:1].isupper():
        return "organisation"
    if 2 <= len(words) <= 4 and all(re.fullmatch(r"[A-Z][a-z'’-]+|[A-Z]\.?", w) for w in words):
        return "person"
    return "text"


# ------------------------------------------------------------------------------ labelled values
_LABEL_RUN = re.compile(
    r"(?:[A-Z(][\w/()&'.#-]*)(?:,?[ \t]+(?:[A-Z(/][\w/()&'.#-]*|of|and|or|in|to|per|for|at|on|by|from|with|&|/))*[ \t]*:(?!//)"
)
_SENTENCE_LABEL = re.compile(r"^([A-Z][a-z]+(?:[ -][a-z][a-z'’]*){1,7}):\s+(\S.*)$")
_JOINERS = {"of", "and", "or", "in", "to", "per", "for", "at", "on", "by", "from", "with", "&", "/"}
_EMPTY_VALUES = re.compile(r"(?i)^(?:n/?a|none|no|yes|unknown|not applicable|-+|—|–|\(?none\)?)$")


def _label_words(run: str, first: bool) -> str:
    """The label at the end of a capitalised run before a colon. The run may hold the previous
    field's value too ("1730 EST Registration", "Piper PA-22-150 Aircraft Damage"): mid-line, the
    label is its last two words (joiners not counted), dropping a leading word in capitals, with
    a digit or of one letter; at the start of a line, the whole run (up to six words)."""
    words = run.split()
    if first:
        return " ".join(words) if len(words) <= 6 else ""
    out: list[str] = []
    content = 0
    for w in reversed(words):
        if w in _JOINERS:  # lower-case joiners only: "OR" after "Lakeview," is a state, not "or"
            out.insert(0, w)
            continue
        if content == 2 and not (out and out[0] in _JOINERS):
            break
        out.insert(0, w)
        content += 1
    while out and (
        out[0].lower() in _JOINERS
        or re.search(r"\d", out[0])
        or len(out[0]) == 1
        or (out[0].isupper() and len(out) > 1)
    ):
        out.pop(0)
    return " ".join(out)


def labelled_values(text: str) -> list[tuple[str, str, tuple[int, int]]]:
    """``(label, value, (line start, line end))`` of each "Label: value" field of ``text``'s
    lines, values running to the next label of the line (forms print two fields a line:
    "Location: Tallahassee, FL Accident Number: NYC08CA055"). A field whose value is empty or
    another label's is left out; a value wrapped onto the next line is left out (its end is
    unknown)."""
    out = []
    pos = 0
    lines = text.split("\n")
    # a single "Label: value" line counts only in a form: three or more lines of the text start with a label
    form = sum(1 for ln in lines if re.match(r"^[A-Z][\w/&' -]{0,40}:\s", ln)) >= 3
    for n, line in enumerate(lines):
        start = pos
        pos += len(line) + 1
        runs = list(_LABEL_RUN.finditer(line))
        if not runs:
            # a line-initial label in sentence case with a number as its value ("Closing balance of
            # the reserve fund: 48,215 dollars."): a statement of one fact, in a form or not
            sm = _SENTENCE_LABEL.match(line)
            if sm and re.search(r"\d", sm.group(2)) and len(sm.group(2).split()) <= 8 and ";" not in sm.group(2):
                out.append((sm.group(1), sm.group(2).rstrip(". "), (start, start + len(line))))
            continue
        if len(line) > 200:
            continue
        labels = []
        for i, m in enumerate(runs):
            run = m.group(0)[:-1].strip()
            lab = _label_words(run, first=(i == 0 and not line[: m.start()].strip()))
            if not lab:
                continue
            lab_start = m.start() + m.group(0).rfind(lab)
            words = lab.split()
            if labels and len(words) == 2 and words[0].isalpha():
                before = line[labels[-1][2] : lab_start].strip()
                wants_digits = re.search(r"(?i)\b(?:year|date|number|time|age|no\.?)$", labels[-1][0])
                # the previous field would be empty ("Landing Gear Type: Tailwheel Seats: 4"), or a
                # number whose unit the two-word cut took ("7 Hours Engines:"): the first word is its value
                nxt = runs[i + 1].start() if i + 1 < len(runs) else len(line)
                after = line[m.end() : nxt].strip()  # this field's own value: none, and both are empty
                if (not before and not wants_digits and after) or (
                    re.fullmatch(r"[\d,.]+", before) and words[0].lower() in _UNIT_WORDS
                ):
                    lab, lab_start = words[1], lab_start + len(words[0]) + 1
            labels.append((lab, lab_start, m.end()))
        if len(labels) == 1 and (not form or len(line.split()) > 10 or line[: labels[0][1]].strip()):
            continue  # one label outside a form, in a long line or after other words: running text
        suspect = False
        for i, (lab, _s, e) in enumerate(labels):
            end = labels[i + 1][1] if i + 1 < len(labels) else len(line)
            value = line[e:end].strip(" ,;")
            if suspect:  # the words before this label may be the start of it ("Last Flight Review or ...")
                suspect = False
                continue
            if i + 1 < len(labels):
                nxt_end = labels[i + 2][1] if i + 2 < len(labels) else len(line)
                nxt_value = line[labels[i + 1][2] : nxt_end].strip()
                one_word = (
                    len(value.split()) == 1 and value.isalpha() and value[:1].isupper() and getAllLemmas(value.lower())
                )
                if _label_or_value(value) or (one_word and not nxt_value):
                    # "Instrument Rating(s): Second Pilot Present:": both fields are empty
                    suspect = True
                    continue
            if len(_CELL.findall(value)) >= 2 and not re.search(r"[A-Za-z]{3}", value):
                continue  # several amounts: a row of a table, not one value
            if (
                value.endswith(("/", ":", "-"))
                or ";" in value
                or "(s)" in value
                or re.fullmatch(r"\(.*\)", value)
                or value.count("(") != value.count(")")
            ):
                continue
            nxt = lines[n + 1].strip() if n + 1 < len(lines) else ""
            wrapped = i + 1 == len(labels) and nxt and ":" not in nxt and nxt[:1].islower()
            if value and not wrapped and len(value.split()) <= 8 and not value.endswith(":"):
                out.append((lab, value, (start, start + len(line))))
    return out


_UNIT_WORDS = {"hours", "hour", "feet", "ft", "knots", "lbs", "miles", "minutes", "days", "years", "inches", "degrees"}


def _label_or_value(value: str) -> bool:
    """Whether the words between two labels on a line may start the next label rather than be a
    value: "None Second" (an empty value, then a word of "Second Pilot Present:") or two or more
    capitalised dictionary words without a digit ("Last Flight" of "Last Flight Review or
    Equivalent:"). Names ("Robert J Gretz") and codes ("PA-22-150") are values."""
    words = value.split()
    if len(words) >= 2 and _EMPTY_VALUES.match(words[0]) and words[1][:1].isupper():
        return True
    return (
        len(words) >= 2
        and all(w.isalpha() and w[:1].isupper() for w in words)
        and bool(getAllLemmas(words[0].lower()))
        and all(getAllLemmas(w.lower()) or w.isupper() for w in words)
    )


# entities a form section describes ("Pilot Information" -> "the pilot")
_ENTITIES = {
    "pilot",
    "aircraft",
    "airplane",
    "helicopter",
    "vehicle",
    "vessel",
    "operator",
    "owner",
    "registrant",
    "issuer",
    "borrower",
    "applicant",
    "patient",
    "employee",
    "company",
    "driver",
}


# labels that name nothing about the document on their own (a signature block's "By:", "Date:")
_GENERIC_LABELS = {
    "by",
    "date",
    "name",
    "title",
    "signature",
    "page",
    "note",
    "notes",
    "see",
    "source",
    "tel",
    "fax",
    "phone",
    "telephone",
    "email",
    "e-mail",
    "address",
    "re",
    "to",
    "from",
    "cc",
    "subject",
    "its",
    "attn",
    "type",
    "rtype",
    "returns",
    "return",
    "example",
    "examples",
    "parameters",
    "default",
    "usage",
    "figure",
    "table",
}


def _section_at(chunk: Chunk, offset: int) -> str:
    """The form section a line of ``chunk`` sits in: the last short title line ending in
    "Information" above it in the chunk, else the chunk's section."""
    above = chunk.text[:offset].split("\n")
    for ln in reversed(above):
        ln = ln.strip()
        if re.fullmatch(r"[A-Z][\w/&' -]{0,60}\bInformation\b[\w/&' -]{0,40}", ln) and ":" not in ln:
            return ln
    return chunk.section.split(" > ")[-1] if chunk.section else ""


def _label_phrase(label: str) -> str:
    """A label as a noun phrase: words in title case lowered, acronyms kept ("Date & Time" ->
    "date and time", "Investigator In Charge (IIC)" -> "investigator in charge")."""
    label = re.sub(r"\s*\([^)]*\)", "", label).replace("&", "and")
    words = [w if (w.isupper() and len(w) > 1) or re.search(r"\d", w) else w.lower() for w in label.split()]
    return " ".join(words).strip()


def _plural(phrase: str) -> bool:
    """Whether a noun phrase takes a plural verb, judged by its head (the words before "of")."""
    head = re.split(r"\s+(?:of|for|in|from|by|at|on)\s+", phrase)[0]
    last = head.split()[-1] if head else ""
    return (
        (last.endswith("s") and not last.endswith(("ss", "us", "is", "series", "news")))
        or "(s)" in head
        or " and " in head
    )


def labelled_value_pairs(chunk: Chunk, ctx: DocContext) -> list[GoldPair]:
    """Pairs from the form fields of ``chunk`` (see the module docstring)."""
    out = []
    for label, value, (s, e) in labelled_values(chunk.text):
        entity = ""
        m = re.match(r"^([A-Z][a-z]+)\b.*\bInformation\b", _section_at(chunk, s))
        if m and m.group(1).lower() in _ENTITIES:
            entity = m.group(1).lower()
        if _EMPTY_VALUES.match(value) or label.lower() in _GENERIC_LABELS:
            continue
        if label.isupper() and len(label) > 3 and value.upper() == value:
            continue  # a heading in capitals ("TITLE III: COMPUTER MAINTENANCE OR REPAIR"), no field
        phrase = _label_phrase(label)
        if not phrase or len(phrase.split()) > 8:
            continue
        if re.search(r"(?i)\b(?:year|date|number|time|age)\b", phrase) and not re.search(r"\d", value):
            continue  # a field that holds a number, read without one: its value is the next field's label
        if entity and entity not in phrase:
            of = f" of the {entity}{ctx.about()}"
        else:
            of = ctx.about() or ""
        if ctx.event and ctx.event.split()[0] in phrase.split():
            of = f" for the {ctx.event}"  # "the accident number for the accident at ..."
        if _plural(phrase) and answer_type_of(value) in ("organisation", "person"):
            nxt = chunk.text[e + 1 :].split("\n", 1)[0]
            if nxt.strip() and ":" not in nxt:
                continue  # a list of names running onto the next lines ("Joint Book-Running Managers:")
        verb = "are" if _plural(phrase) else "is"
        q = f"What {verb} the {phrase}{of}?"
        answer = value
        atype = answer_type_of(value)
        if atype == "date" or phrase.startswith("date"):
            d = TYPES["date"].search(value) or re.search(r"\d{1,2}/\d{1,2}/\d{4}", value)
            if not d:
                continue  # a date field without a date: its value was read from the next field
            answer, atype = d.group(0), "date"
        evidence = normalize_ws(chunk.text[s:e])
        out.append(GoldPair(q, answer, evidence, "labelled_value", atype))
    return out


# ------------------------------------------------------------------------------ tables
_CELL = re.compile(r"(?<![\w.])(?:\$\s?)?\(?-?\$?\s?\d[\d,]*(?:\.\d+)?\)?\s?%?(?![\w.])|(?<!\S)(?:N/A|—|–)(?!\S)")
_HEADER_CELL = re.compile(
    rf"(?i){PERIOD_ENDED}|(?:fiscal\s+)?(?:years?|quarters?)\s+ended"
    rf"|{MONTH_PREFIX}\s+\d{{1,2}},?(?:\s+(?:19|20)\d\d)?"
    r"|broker\s+non-votes|\S+"
)
_VOTE_WORDS = ("for", "against", "abstain", "abstentions", "withheld", "broker non-votes")
_UNIT = re.compile(r"(?i)\((?:dollars |\$ |amounts )?in (millions|thousands|billions)\b([^)]*)\)")


@dataclass
class Row:
    """A table row: ``label``, value ``cells`` as ``(column header, value)`` left to right, the
    table's ``caption``, ``unit`` line, ``title`` (the text above it: a vote tally's proposal),
    the row's ``line`` (verbatim), whether the table is a vote tally (``votes``) and the
    ``group`` label the row sits under ("Net sales")."""

    label: str
    cells: list[tuple[str, str]]
    caption: str = ""
    unit: str = ""
    title: str = ""
    line: str = ""
    votes: bool = False
    group: str = ""


def _row_values(line: str) -> tuple[str, list[str]]:
    """A row line as its label and value cells (the trailing run of numbers, dashes and N/A).

    ``line`` is a row chunking already found (``page_tables``; whether a line is a row is
    ``ragaudit.text.lines.is_row``'s to decide): this splits it, taking "N/A" and dashes as cells
    a gold answer can name and footnote marks ("(1)") as no cells."""
    found = list(_CELL.finditer(line))
    if not found or line[found[-1].end() :].strip():
        return line.strip(), []
    k = len(found) - 1
    while k > 0 and not line[found[k - 1].end() : found[k].start()].strip():
        k -= 1
    while k < len(found) - 1 and re.fullmatch(r"\(\d\)", found[k].group(0).strip()):
        k += 1  # a footnote mark after the label ("Wearables, Home and Accessories (1)")
    cells = [m.group(0).strip() for m in found[k:]]
    label = line[: found[k].start()].strip()
    # footnote marks between the label and the values ("Michelle L. (1)") are not cells
    return re.sub(r"\s*\(\d\)$", "", label), cells


def _header_cells(line: str) -> list[str]:
    return [m.group(0).strip() for m in _HEADER_CELL.finditer(line) if not re.fullmatch(r"\(\d\)", m.group(0))]


def _columns(header_lines: list[str], n: int) -> list[str] | None:
    """Column headers for ``n`` value cells from the table's header lines (top to bottom): a line
    of ``n`` cells gives each column a part, a line of ``k`` cells dividing ``n`` spans ``n / k``
    columns each, a line of ``n + 1`` cells has a label column first. None when a column has no
    header."""
    cols = [""] * n
    for ln in header_lines:
        if _UNIT.search(ln):
            continue
        cells = _header_cells(ln)
        if len(cells) == n + 1:
            cells = cells[1:]
        if not cells:
            continue
        if len(cells) == n:
            parts = cells
        elif n % len(cells) == 0:
            parts = [cells[i // (n // len(cells))] for i in range(n)]
        else:
            continue
        cols = [f"{c} {p}".strip() for c, p in zip(cols, parts)]
    cols = [c.rstrip(" ,") for c in cols]
    return cols if all(cols) else None


_VOTE_HEAD = re.compile(r"(?i)\bfor\b.*\bagainst\b|\bvotes\s+percentage\b")


def _title_above(text: str, start: int) -> str:
    """The proposal a vote tally counts: the title-case lines right above the paragraph that
    leads into the table, else the lead-in's first sentence."""
    above = text[max(0, start - 1500) : start].split("\n")[-10:]
    lines = [ln.strip() for ln in above]
    lines = lines[: max(0, len(lines))]
    paras: list[list[str]] = [[]]
    for ln in lines:
        if not ln or _row_values(ln)[1] or _VOTE_HEAD.search(ln):
            paras = [[]]  # only what follows the last row or header above counts
            continue
        paras[-1].append(ln)
    block = [ln for p in paras for ln in p][-8:]

    small = {
        "of",
        "the",
        "to",
        "and",
        "for",
        "a",
        "an",
        "in",
        "on",
        "with",
        "without",
        "or",
        "if",
        "is",
        "by",
        "all",
        "then",
        "that",
        "may",
        "be",
        "as",
        "at",
    }

    def titleish(ln: str) -> bool:
        words = [w for w in re.findall(r"[A-Za-z’']+", ln) if w.lower() not in small]
        lower = sum(not w[0].isupper() for w in words)
        return bool(words) and lower <= 1 and not ln.endswith((".", ":")) and not _VOTE_HEAD.search(ln)

    runs: list[list[str]] = [[]]
    for ln in block:
        # a one-word line continues a title line (a title wrapped as "... With a Majority" / "Standard")
        cont = bool(runs[-1]) and (runs[-1][-1].split()[-1].lower() in small or len(runs[-1][-1].split()) >= 6)
        if titleish(ln) and (len(ln.split()) >= 2 or cont):
            runs[-1].append(ln)
        elif runs[-1]:
            runs.append([])
    runs = [r for r in runs if r and len(" ".join(r).split()) >= 3]
    if runs:
        return normalize_ws(" ".join(runs[-1]))
    # a lead-in that names the proposal: "With respect to the proposal to ratify X, the votes were cast ..."
    lead = re.search(
        r"(?i)with respect to the (proposal(?: to|,)\s.+?),\s+the votes were", normalize_ws(" ".join(block))
    )
    return lead.group(1) if lead else ""


def _is_header_line(line: str) -> bool:
    """A column-header line: no value cells, or values that are only years or days of a month
    ("June 25, June 26, | 2022 2021")."""
    _, cells = _row_values(line)
    if not cells:
        return True
    return all(re.fullmatch(r"(?:19|20)\d\d|\d{1,2},?", c) for c in cells)


def _group_above(ptext: str, row_start: int, table_start: int) -> str:
    """The group label a row sits under inside its table ("Net sales:" over "Products"): the
    nearest line above the row, after the table's start, that ends in ":" (at most 12 lines up)."""
    above = ptext[table_start:row_start].split("\n")[-13:-1]
    for ln in reversed(above):
        m = re.fullmatch(r"\s*([A-Z][^:\d]{2,50}):\s*", ln)
        if m:
            return m.group(1).strip()
    return ""


def table_rows(chunk: Chunk, ctx: DocContext) -> list[Row]:
    """The table rows of ``chunk`` with their column headers, read from the document text around
    the chunk (the product's own table detection, ``chunking.page_tables``). A table found
    without a header of its own (statement tables are cut into blocks at their group labels)
    takes the header of the table above it on the page."""
    out: list[Row] = []
    pages = sorted(ctx.page_starts.items())
    for k, (_page, pstart) in enumerate(pages):
        pend = pages[k + 1][1] - 2 if k + 1 < len(pages) else len(ctx.text)
        if pend <= chunk.char_start or pstart >= chunk.char_end:
            continue
        ptext = ctx.text[pstart:pend]
        rows, tables = page_tables(ptext)
        heads_of: list[list[str]] = []
        for n, t in enumerate(tables):
            heads = [h.strip() for h in t.header.split(" | ") if h.strip() and _is_header_line(h)]
            # a block of the same table cut at a group label ("Investing activities:") takes the header
            # above; a table after a paragraph or caption is another table
            between = ptext[tables[n - 1].extent[1] : t.extent[0]] if n else ""
            if not heads and heads_of and len([x for x in between.split("\n") if x.strip()]) <= 2:
                heads = heads_of[-1]
            heads_of.append(heads)
        for rs, re_, tid in rows:
            ds, de = pstart + rs, pstart + re_
            if ds < chunk.char_start or de > chunk.char_end:
                continue
            t, heads = tables[tid], heads_of[tid]
            line = ptext[rs:re_]
            label, cells = _row_values(line)
            if not cells or any(c.endswith(",") for c in cells) or re.search(r"(?i)\b(?:as of|ended)\s*\w*$", label):
                continue
            votes = any(re.search(r"(?i)\bfor\b", h) and re.search(r"(?i)\bagainst\b", h) for h in heads)
            if votes and label and not re.search(r"\d", label):
                nxt = ptext[re_ + 1 :].split("\n", 1)[0].strip()
                if nxt and re.fullmatch(r"[A-Z][\w.'’-]*(?: [A-Z][\w.'’-]*)?", nxt):
                    label = f"{label} {nxt}"  # a name wrapped onto the next line ("Michelle L." / "Collins")
            unit = next((m.group(0) for h in heads if (m := _UNIT.search(h))), "")
            if not unit:
                um = _UNIT.search(ptext[max(0, t.extent[0] - 400) : rs])
                unit = um.group(0) if um else ""
            title = ""
            if votes:
                above = ptext[:rs].split("\n")[-8:]
                heads_at = [i for i, ln in enumerate(above) if _VOTE_HEAD.search(ln) and re.search(r"(?i)against", ln)]
                top = rs - sum(len(x) + 1 for x in above[heads_at[-1] :]) if heads_at else t.extent[0]
                title = _title_above(ptext, max(0, top))
            cols = _vote_columns(heads, cells) if votes else _columns(heads, len(cells))
            if not cols:
                continue
            group = "" if votes else _group_above(ptext, rs, max(0, rs - 600))
            out.append(Row(label, list(zip(cols, cells)), t.caption, unit, title, line, votes, group))
    return out


def _vote_columns(heads: list[str], cells: list[str]) -> list[str] | None:
    """Column names of a vote tally's cells: the categories of its first header line ("For
    Against Abstain Broker Non-Votes"), each over a votes column and, when the table prints them,
    a percentage column."""
    cats = [c.lower() for c in _header_cells(heads[0])] if heads else []
    cats = [c for c in cats if c in _VOTE_WORDS]
    if not cats:
        return None
    if len(cells) == len(cats):
        return cats
    if len(cells) == 2 * len(cats):
        return [f"{c} {'votes' if i % 2 == 0 else 'percentage'}" for c in cats for i in range(2)]
    return None


def _scaled(value: str, unit: str, label: str) -> str:
    """A cell as an answer: spacing of "$ 63,355" closed, and the unit line's scale added to an
    amount ("(In millions)" -> "$63,355 million") unless the unit line has exceptions."""
    v = re.sub(r"\$\s+", "$", value.strip())
    m = _UNIT.search(unit)
    if m and not m.group(2).strip() and "%" not in v and not re.search(r"(?i)per share|shares", label):
        v = f"{v} {m.group(1)[:-1]}"
    return v


def _period_phrase(header: str) -> str:
    """A column header as a period phrase: "Three Months Ended June 25, 2022" -> "for the three
    months ended June 25, 2022"; "2022" -> "in 2022"; "" when it is no period."""
    h = normalize_ws(re.sub(r"\s*\([^)]*\)", "", header))
    m = re.match(rf"(?i)^({PERIOD_ENDED}|(?:fiscal )?years? ended)\s+(.*)$", h)
    if m:
        return f"for the {m.group(1).lower()} {m.group(2)}".strip()
    if re.fullmatch(r"(?:19|20)\d\d", h):
        return f"in {h}"
    if re.fullmatch(r"(?i)(?:fiscal|fy)\s*(?:19|20)?\d\d", h):
        return f"in {h}"
    if _MONTH_NAME.search(h) and re.search(r"\d{4}", h):
        return f"as of {h}"
    return ""


def _vote_pairs(row: Row, ctx: DocContext) -> list[GoldPair]:
    """One question per vote category of the row (the category picked by a stable hash so a
    document's set mixes them)."""
    about = ctx.about()
    title = row.title
    if row.label:
        target = row.label
        where = f" in the {_lower_first(title)}" if title and len(title.split()) <= 8 else ""
    else:
        if not title or len(title.split()) > 30:
            return []
        target = "the " + _lower_first(re.sub(r"^(?:An?|The)\s+", "", title))
        where = ""
    counts = [(c, v) for c, v in row.cells if not c.endswith("percentage") and re.search(r"\d", v) and "%" not in v]
    if not counts:
        return []
    cat, value = counts[_stable(row.line) % len(counts)]
    cat = cat.replace(" votes", "")
    on = "for" if row.label else "on"
    templates = {
        "for": f"How many votes were cast for {target}{where}{about}?",
        "against": f"How many votes were cast against {target}{where}{about}?",
        "abstain": f"How many abstentions were recorded {on} {target}{where}{about}?",
        "abstentions": f"How many abstentions were recorded {on} {target}{where}{about}?",
        "withheld": f"How many votes were withheld from {target}{where}{about}?",
        "broker non-votes": f"How many broker non-votes were recorded {on} {target}{where}{about}?",
    }
    q = templates.get(cat)
    if q is None:
        return []
    return [GoldPair(q, value, normalize_ws(row.line), "vote_table", "count")]


def _lower_first(phrase: str) -> str:
    """A title as a phrase inside a sentence: its first word in lower case unless it is a name or
    an acronym ("Election of Directors" -> "election of Directors")."""
    words = phrase.split()
    if words and not (words[0].isupper() and len(words[0]) > 1):
        words[0] = words[0].lower()
    return " ".join(words)


def _row_phrase(label: str, group: str, text: str) -> str:
    """A row label as a noun phrase: its first word lowered unless the label holds a name ("Total
    net sales" -> "total net sales", "Greater China" kept), with its group for a one-word label
    ("Products" under "Net sales" -> "net sales of products"; a "by ..." group keeps its head:
    "Net sales by reportable segment" over "Europe" -> "net sales of Europe")."""
    words = label.split()
    proper = any(w[:1].isupper() for w in words[1:]) or not (
        _common(words[0], text) or "ADJ" in getAllLemmas(words[0].lower())
    )
    phrase = label if proper or words[0].isupper() else words[0].lower() + label[len(words[0]) :]
    if group and len(words) <= 2 and not (re.match(r"(?i)total\b", label) and len(words) > 1):
        g = re.sub(r"(?i)\s+by\s+.*$", "", group).strip()
        gwords = g.split()
        g_proper = any(w[:1].isupper() for w in gwords[1:]) or not _common(gwords[0], text)
        g = g if g_proper or gwords[0].isupper() else g[0].lower() + g[1:]
        if len(words) == 1 and "NOUN" not in getAllLemmas(words[0].lower()):
            return f"{words[0].lower()} {g}"  # "Diluted" under "Net income per share" -> "diluted net income per share"
        if g_proper and not proper:
            return f"{phrase} of {g}"  # "Americas:" over "Operating income" -> "operating income of Americas"
        return f"{g} of {phrase}"
    return phrase


def _common(word: str, text: str) -> bool:
    """Whether a capitalised word is a common word: it occurs in lower case in the document text."""
    w = word.lower()
    return bool(w) and re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", text) is not None


# one-word row labels that name a measure on their own ("Revenue $ 7,192")
_MEASURES = {
    "revenue",
    "revenues",
    "sales",
    "income",
    "expenses",
    "inventories",
    "goodwill",
    "receivables",
    "assets",
    "liabilities",
    "equity",
    "cash",
    "dividends",
    "depreciation",
    "amortization",
    "backlog",
}


def table_cell_pairs(chunk: Chunk, ctx: DocContext) -> list[GoldPair]:
    """Pairs from the table rows of ``chunk``: vote tallies and row x column cells."""
    out = []
    for row in table_rows(chunk, ctx):
        if row.votes:
            out.extend(_vote_pairs(row, ctx))
            continue
        label = normalize_ws(re.sub(r"\(\d\)|[*†‡®™]", "", row.label)).strip(" :")
        if not re.search(r"[A-Za-z]{3}", label) or len(label.split()) > 10 or not row.cells:
            continue
        if re.search(r"(?i)(?:\bto|\band|\bor|[-–,])$", label) or re.search(r"\d\s*%|\$\s?\d", label):
            continue  # a range or a cut label ("Operating margin 14.7% to"), not a row name
        if label.lower() in ("total", "other", "net", "subtotal", "all other") and not row.group:
            continue  # says nothing without the group it totals
        if (
            len(label.split()) == 1
            and not row.group
            and (not _common(label, ctx.text) or label.lower() not in _MEASURES)
        ):
            continue  # a name ("iPad", "Services") without the measure its row gives
        # the first column with a period header (the current period is printed first)
        col, value = next(((h, v) for h, v in row.cells if re.search(r"\d", v)), (None, None))
        if col is None or value is None:
            continue
        period = _period_phrase(col)
        label_phrase = _row_phrase(label, row.group, ctx.text)
        if re.search(r"(?i)\bended\b", period) and not _MONTH_NAME.search(period):
            continue  # a period header read without its month ("three months ended 2022")
        if period:
            verb = "were" if _plural(label_phrase) else "was"
            q = f"What {verb} {label_phrase} {period}{ctx.about()}?"
        elif row.caption:
            # a column that is no period is asked only with the table's caption ("Table 2")
            table = f" in {row.caption.split('.')[0].split(':')[0].strip()}"
            q = f"What is the {_label_phrase(col)} value for {label}{table}{ctx.about()}?"
        else:
            continue
        answer = _scaled(value, row.unit, label)
        atype = answer_type_of(value.replace(" ", ""))
        if atype == "count" and "$" in answer:
            atype = "amount"
        out.append(GoldPair(q, answer, normalize_ws(row.line), "table_cell", atype))
    return out


# ------------------------------------------------------------------------------ typed sentences
_PRONOUN_SUBJECT = re.compile(
    r"(?i)^(?:it|this|that|these|those|they|he|she|we|i|you|there|here|such|which|its|their|his|her|our|each|both|all|some|one)\b"
)
_NUM_WORDS = r"(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|fifty|hundred)"
_MODALS = {"must", "shall", "should", "may", "might", "can", "could", "will", "would"}
_AUX_WORDS = {"was": "was", "were": "were", "is": "is", "are": "are"}
_DATE_PREP = r"(?:on|in|as of|effective|dated|from|by|until|through|since)"
_DATE = TYPES["date"].pattern
_CHANGE_VERBS = {"increased", "decreased", "rose", "fell", "grew", "declined", "dropped", "climbed", "improved"}
_AMOUNT_VERBS = {"totaled", "totalled", "amounted", "reached", "was", "were", "is", "are", "equaled", "equalled"}


def _is_verb_form(word: str, tag: str) -> str | None:
    """The lemma of ``word`` when it is the ``tag`` form of a verb (VBD past tense, VBN
    participle), per lemminflect's dictionary; else None."""
    lemmas = getAllLemmas(word.lower()).get("VERB")
    if not lemmas:
        return None
    lemma = lemmas[0]
    forms = getInflection(lemma, tag=tag) or ()
    return lemma if word.lower() in forms else None


def _clean_subject(subj: str, text: str = "", issuer: str = "") -> str | None:
    """A sentence's subject usable in a question: no parenthetical or footnote mark ("The Digital
    Millennium Copyright Act (DMCA)1" -> "the Digital Millennium Copyright Act"), 1-12 words, no
    pronoun, no clause inside (a comma or a verb form alone)."""
    s = re.sub(r"\s*\([^)]*\)\d*", "", subj).strip()
    s = re.sub(r"(?<=[A-Za-z])\d+$", "", s).strip()
    if issuer and s.lower() in ("the company", "we", "the registrant", "the corporation"):
        return issuer  # the filer names itself so; a question outside the document names it
    if not s or _PRONOUN_SUBJECT.match(s) or any(ch in s for ch in ',;:"“'):
        return None
    if re.search(r"(?i)\b(?:was|were|is|are|has|have|had|which|that|who|also|not)\b", s):
        return None  # a clause, not a noun phrase
    words = s.split()
    if not 1 <= len(words) <= 12 or not re.match(r"[A-Z]", s):
        return None
    if words[0] in ("The", "A", "An") or (
        text and len(words) > 1 and not any(w[:1].isupper() for w in words[1:]) and _common(words[0], text)
    ):
        words[0] = words[0].lower()
    return " ".join(words)


def _trim_predicate(pred: str) -> str:
    """A predicate without parentheticals; "" when it holds a clause break (a comma) or ends in
    a word that needs the date it loses ("dated")."""
    pred = normalize_ws(re.sub(r"\s*\([^)]*\)\d*", "", pred)).strip(" ,;")
    if "," in pred or ";" in pred or re.search(r"(?i)\b(?:dated|effective|as of)$", pred):
        return ""
    return pred


def _sentence_pair(sent: str, ctx: DocContext) -> GoldPair | None:
    """One typed wh-question from ``sent`` (see the module docstring), or None."""
    s = normalize_ws(sent)
    if not s.endswith(".") or len(s.split()) < 6 or len(s.split()) > 50 or s.count("(") != s.count(")"):
        return None
    body = s[:-1]
    # a leading time adverbial ("During fiscal 2022, the Company opened ...") moves to the question's end
    lead = ""
    lm = re.match(r"^((?:During|In|For|At the end of|As of|Through|By the end of)\s[^,]{3,70}),\s+(.+)$", body)
    if lm and re.search(r"(?i)\b(?:19|20)\d\d\b|quarter|fiscal|year|month|week", lm.group(1)):
        lead = " " + lm.group(1)[0].lower() + lm.group(1)[1:]
        body = lm.group(2)[0].upper() + lm.group(2)[1:]

    def adjunct(rest: str) -> str:
        return _adjunct(rest) or lead

    # 1) SUBJ AUX PRED PREP DATE  -> When AUX SUBJ PRED?
    m = re.match(
        rf"^(?P<subj>.+?)\s+(?P<aux>was|were|is|are)\s+(?P<pred>.+?)\s+{_DATE_PREP}\s+(?P<date>{_DATE})(?P<rest>.*)$",
        body,
        re.I,
    )
    if m and _is_verb_form(m.group("pred").split()[0], "VBN"):
        subj = _clean_subject(m.group("subj"), ctx.text, ctx.issuer)
        pred = _trim_predicate(m.group("pred"))
        if subj and pred and len(pred.split()) <= 12:
            q = f"When {m.group('aux').lower()} {subj} {pred}{lead}{_qualify(subj + ' ' + pred, ctx)}?"
            return GoldPair(q, m.group("date"), s, "sentence", "date")
    # 2) SUBJ VBD OBJ PREP DATE -> When did SUBJ VB OBJ?
    m = re.match(
        rf"^(?P<subj>.+?)\s+(?P<verb>[a-z]+)\s+(?P<obj>.+?)\s+{_DATE_PREP}\s+(?P<date>{_DATE})(?P<rest>.*)$", body
    )
    if m:
        lemma = _is_verb_form(m.group("verb"), "VBD")
        subj = _clean_subject(m.group("subj"), ctx.text, ctx.issuer)
        obj = _trim_predicate(m.group("obj"))
        if lemma and lemma not in ("be", "have") and subj and obj and len(obj.split()) <= 12:
            q = f"When did {subj} {lemma} {obj}{lead}{_qualify(subj + ' ' + obj, ctx)}?"
            return GoldPair(q, m.group("date"), s, "sentence", "date")
    # 3) SUBJ increased/decreased PCT (to AMOUNT) -> By what percentage did SUBJ increase?
    m = re.match(
        r"^(?P<subj>.+?)\s+(?P<verb>[a-z]+)\s+(?:by\s+)?(?P<pct>\d[\d,.]*\s?%|\d[\d,.]*\s+percent)(?P<rest>.*)$", body
    )
    if m and m.group("verb") in _CHANGE_VERBS:
        lemma = _is_verb_form(m.group("verb"), "VBD")
        subj = _clean_subject(m.group("subj"), ctx.text, ctx.issuer)
        rest = adjunct(m.group("rest"))
        if lemma and subj:
            q = f"By what percentage did {subj} {lemma}{rest}{_qualify(subj + rest, ctx)}?"
            return GoldPair(q, m.group("pct"), s, "sentence", "percent")
    # 4) SUBJ was/totaled AMOUNT|COUNT (PREP ...) -> What was SUBJ (PREP ...)?
    m = re.match(
        rf"^(?P<subj>.+?)\s+(?P<verb>{'|'.join(sorted(_AMOUNT_VERBS))})(?:\s+to)?\s+(?:approximately\s+|about\s+)?(?P<val>{TYPES['money'].pattern}|{TYPES['percent'].pattern}|\d[\d,]*(?:\.\d+)?(?:\s(?:million|billion))?)(?P<rest>.*)$",
        body,
        re.I,
    )
    if m:
        subj = _clean_subject(m.group("subj"), ctx.text, ctx.issuer)
        val = m.group("val").strip()
        rest = adjunct(m.group("rest"))
        if subj and re.search(r"\d", val):
            verb = m.group("verb").lower()
            be = verb if verb in _AUX_WORDS else ("were" if _plural(subj) else "was")
            atype = answer_type_of(val)
            wh = "What" if atype != "count" else "How many"
            if wh == "How many":
                return None  # "How many was X" is not English; counts come from tables and fields
            q = f"{wh} {be} {subj}{rest}{_qualify(subj + rest, ctx)}?"
            return GoldPair(q, val, s, "sentence", "amount" if atype == "count" else atype)
    # 5) SUBJ VBD COUNT NOUNS -> How many NOUNS did SUBJ VB?
    m = re.match(
        rf"^(?P<subj>.+?)\s+(?P<verb>[a-z]+)\s+(?:approximately\s+|about\s+|a total of\s+)?"
        rf"(?P<num>\d[\d,.]*(?:\s(?:million|billion|thousand))?|{_NUM_WORDS})\s+"
        r"(?P<noun>(?:[a-z][a-z-]+\s){0,2}[a-z][a-z-]+s)\b(?P<rest>.*)$",
        body,
    )
    if m:
        lemma = _is_verb_form(m.group("verb"), "VBD")
        subj = _clean_subject(m.group("subj"), ctx.text, ctx.issuer)
        noun = m.group("noun")
        if lemma and lemma not in ("be", "have") and subj and "NOUN" in getAllLemmas(noun.split()[-1]):
            rest = adjunct(m.group("rest"))
            q = f"How many {noun} did {subj} {lemma}{rest}{_qualify(subj + rest, ctx)}?"
            return GoldPair(q, f"{m.group('num')} {noun}", s, "sentence", "count")
    # 6) NAME VBD/AUX-VBN ... -> Who/Which organisation ...?
    m = re.match(
        r"^(?P<name>(?:[A-Z][\w.&'’-]*\s+){1,5}?(?:[A-Z][\w.&'’-]*|LLP|LLC|Inc\.))\s+(?P<vp>(?:was|were|is|has been)\s+[a-z]+\s.+|[a-z]+\s.+)$",
        body,
    )
    if m and not m.group("name").startswith("The "):
        name = m.group("name")
        atype = answer_type_of(name)
        vp = _trim_predicate(m.group("vp"))
        if len(vp.split()) < 3:
            return None
        first = vp.split()[0]
        ok = (first in ("was", "were", "is") and _is_verb_form(vp.split()[1], "VBN")) or (
            first not in _MODALS and _is_verb_form(first, "VBD")
        )
        if atype in ("person", "organisation") and ok and 3 <= len(vp.split()) <= 20:
            wh = "Who" if atype == "person" else "Which organisation"
            if first == "were":
                vp = "was " + vp[5:]
            return GoldPair(f"{wh} {vp}{_qualify(vp, ctx)}?", name, s, "sentence", atype)
    return None


def _adjunct(rest: str) -> str:
    """A short prepositional adjunct kept from the rest of a sentence ("for the fourth quarter"),
    else ""."""
    r = normalize_ws(rest)
    m = re.match(r"^,?\s*((?:for|in|during|as of|at)\s+[^,;]{3,60}?)(?:,|;|$| compared| to | from )", r + "$")
    return " " + m.group(1).strip() if m else ""


def _qualify(question_text: str, ctx: DocContext) -> str:
    """The document qualifier for a sentence question (" in <subject>"), unless the question
    already names what the document is about: its issuer, the place of its event, or three
    content words of its title."""
    q = question_text.lower()
    if ctx.issuer:  # a filer's or issuer's document: the question must name the issuer
        return "" if ctx.issuer.lower() in q else ctx.about()
    if ctx.event and ctx.event.split(" at ", 1)[-1].split(",")[0].lower() in q:
        return ""
    title = {w.lower() for w in re.findall(r"[A-Za-z]{3,}", ctx.title)} - {"the", "and", "for", "with"}
    if len(title & {w.lower() for w in re.findall(r"[A-Za-z]{3,}", question_text)}) >= 3:
        return ""
    return ctx.about()


def sentence_pairs(chunk: Chunk, ctx: DocContext) -> list[GoldPair]:
    """Pairs from the declarative sentences of ``chunk`` (at most one per sentence)."""
    out = []
    for s, e in sentence_spans(chunk.text):
        sent = chunk.text[s:e]
        if "\n" in sent.strip() and len(sent.split("\n")) > 6:
            continue
        pair = _sentence_pair(sent, ctx)
        if pair is not None:
            out.append(pair)
    return out


# ------------------------------------------------------------------------------ paraphrases
# question-side synonyms: (pattern in the question, replacement); the first one found applies
_SYNONYMS: list[tuple[re.Pattern, str]] = [
    (re.compile(r"\bthe registration of the aircraft\b"), "the aircraft's tail number"),
    (re.compile(r"\bthe registration in the\b"), "the aircraft's tail number in the"),
    (re.compile(r"\bwere cast against\b"), "opposed"),
    (re.compile(r"\bwere cast for\b"), "supported"),
    (re.compile(r"\bsigned into law\b"), "enacted"),
    (re.compile(r"\bnet sales\b"), "net revenues"),
    (re.compile(r"\bnet income\b"), "net profit"),
    (re.compile(r"\bincome tax expense\b"), "tax charge"),
    (re.compile(r"\bWhat is the age of the pilot\b"), "How old was the pilot"),
    (re.compile(r"\bcommission file number\b"), "SEC file number"),
    (re.compile(r"\bemployer identification\b"), "tax ID"),
    (re.compile(r"\baccident\b"), "crash"),
    (re.compile(r"\bincrease\b"), "rise"),
    (re.compile(r"\bdecrease\b"), "fall"),
    (re.compile(r"\bappointed\b"), "named"),
    (re.compile(r"\belected\b"), "chosen"),
    (re.compile(r"\bestablished\b"), "founded"),
    (re.compile(r"\bpublished\b"), "released"),
    (re.compile(r"\bpurchased\b"), "bought"),
    (re.compile(r"\bemployees\b"), "staff"),
]


def _stable(text: str) -> int:
    return zlib.crc32(text.encode("utf-8"))


def paraphrase(pair: GoldPair, ctx: DocContext) -> GoldPair | None:
    """``pair`` asked with other words: the first synonym of ``_SYNONYMS`` that applies to a
    word the evidence also uses, else the document qualifier moved to the front. None when
    neither applies."""
    q = pair.question
    ev = pair.evidence.lower()
    for pat, repl in _SYNONYMS:
        m = pat.search(q)
        if m and (m.group(0).split()[-1].lower() in ev or pair.kind in ("labelled_value", "vote_table")):
            return GoldPair(pat.sub(repl, q, count=1), pair.answer, pair.evidence, pair.kind, pair.answer_type, True)
    about = ctx.about()
    if about and q.endswith(about + "?"):
        core = q[: -len(about) - 1]
        front = about.strip()
        front = front[0].upper() + front[1:]
        return GoldPair(
            f"{front}, {core[0].lower() + core[1:]}?", pair.answer, pair.evidence, pair.kind, pair.answer_type, True
        )
    return None


# ------------------------------------------------------------------------------ the generator
class RuleGenerator:
    """The offline generator (``name = "rules"``): labelled values, table cells, vote tallies and
    typed sentences of a chunk, a share of them paraphrased; see the module docstring.

    ``prepare(doc_name, chunks)`` reads the document context once; ``generate(chunk)`` returns
    up to ``per_chunk`` candidates (source kinds varied first). Never raises for odd text."""

    name = "rules"
    model = None

    def __init__(self, per_chunk: int = 3, paraphrase_share: float = 0.25):
        self.per_chunk = per_chunk
        self.paraphrase_share = paraphrase_share
        self.ctx = DocContext(doc_name="")

    def prepare(self, doc_name: str, chunks: list[Chunk]) -> None:
        self.ctx = document_context(doc_name, chunks)

    def candidates(self, chunk: Chunk) -> list[GoldPair]:
        """Every candidate of ``chunk`` before selection, in source order."""
        return (
            labelled_value_pairs(chunk, self.ctx) + table_cell_pairs(chunk, self.ctx) + sentence_pairs(chunk, self.ctx)
        )

    def generate(self, chunk: Chunk) -> list[GoldPair]:
        cands = self.candidates(chunk)
        # variety: one of each kind first (in a per-chunk rotating order), then the rest
        picked: list[GoldPair] = []
        by_kind: dict[str, list[GoldPair]] = {}
        for p in cands:
            by_kind.setdefault(p.kind, []).append(p)
        kinds = list(by_kind)
        rot = chunk.index % len(kinds) if kinds else 0
        kinds = kinds[rot:] + kinds[:rot]
        # table rows: the most specific labels first (a row named "Weighted-average diluted shares"
        # is one a reader can find and place; "Products" or "Other" depend on the rows around them)
        if "table_cell" in by_kind:
            by_kind["table_cell"].sort(key=lambda p: -len(re.findall(r"[A-Za-z]{2,}", _row_values(p.evidence)[0])))
        while len(picked) < self.per_chunk and any(by_kind.values()):
            for k in kinds:
                if by_kind[k] and len(picked) < self.per_chunk:
                    lst = by_kind[k]
                    at = 0 if k == "table_cell" else _stable(f"{chunk.index}{k}{len(lst)}") % len(lst)
                    picked.append(lst.pop(at))
        out = []
        for p in picked:
            if (_stable(p.question) % 1000) < self.paraphrase_share * 1000:
                alt = paraphrase(p, self.ctx)
                if alt is not None:
                    p = alt
            out.append(p)
        return out

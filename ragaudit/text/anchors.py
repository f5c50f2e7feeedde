"""The anchors of a question: the full dates, identifiers, proper names and acronyms it names,
which documents that answer it must contain (the answerability gate, ``ragaudit.answer.answerability``)
and by which retrieval tells which documents a question is about (``ragaudit.retrieve.retriever``).

A name is a run of capitalised words ("Vance W. Amory Airport", "Public Law"), without the
sentence's first word, question words, a capitalised word that only qualifies a lower-case one
("American-registered") or the asker ("I'm"); a possessive ends one name and marks it as the
owner of what follows ("*Apple's* Commission File Number"). An identifier mixes letters and
digits or joins words with "_" ("1040NR", "PA-22-150", "CLIENT_IPADDR"), a fiscal period
("FY2023", "Q3") aside; one of two or three letters and digits starts with a letter ("W-9",
"E2E", "EC2") and is found only whole (not inside "W-95"). A full date is a month's name, a day and a year ("December 30, 2023").
A file name the question gives ("... in 20071229X02007.pdf?") is no anchor: it names a document,
not words its text holds. In a question in German, which capitalises every noun, only a word with
two or more capitals ("EU", "BVerfG") is read as a name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ragaudit.text.dates import FULL_DATE
from ragaudit.text.function_words import QUESTION_WORDS, STOP_WORDS
from ragaudit.text.language import detect_language

# a capital (ASCII or Latin-1: "Zürich", "Nación", "Ångström") and any letter, digits aside
_UP = "A-ZÀ-ÖØ-Þ"
_LET = "A-Za-zÀ-ÖØ-öø-ÿ"
_CAP_RUN = re.compile(
    rf"\b(?:[{_UP}][{_LET}&.'’\-]*[{_LET}]|[{_UP}]{{2,}})(?:\s+(?:of\s+|and\s+|&\s+)?"
    rf"(?:[{_UP}][{_LET}&.'’\-]*[{_LET}]|[{_UP}]{{2,}}|[{_UP}]\.(?=\s+[{_UP}])))*"
)


# languages that capitalise every noun (German, Luxembourgish): there a capitalised word is no name
NOUN_CAPITALISING = frozenset({"de", "lb"})

# a capitalised word joined to a lower-case one describes it ("American-registered", "U.S.-based"):
# an adjective, not the name of something the documents must contain
_QUALIFIER = re.compile(r"^[A-Z][\w.'’]*(?:-[a-z][a-z-]*)+$")


# an identifier: letters and digits mixed, or words joined by "_" ("1040NR", "F172", "PA-22-150",
# "CLIENT_IPADDR"); a fiscal period ("FY2023", "Q3", "2023Q4") or a filing form ("10-Q") is not one
_IDENT = re.compile(
    r"(?<![\w-])(?=[\w./-]*\d)(?=[\w./-]*[A-Za-z])[A-Za-z0-9][\w./-]*[A-Za-z0-9]|"
    r"(?<![\w-])[A-Za-z0-9]+(?:_[A-Za-z0-9]+)+"
)
_PERIOD = re.compile(
    r"(?i)(?:fy|cy|q[1-4]|h[12])[\s-]?\d{2,4}|\d{4}[\s-]?(?:q[1-4]|h[12])|\d{1,2}-[a-z]|"
    r"\d+(?:st|nd|rd|th|s)"
)
# a number joined to a lower-case word is a quantity ("12-month", "30-day"), not an identifier
_QUANTITY = re.compile(r"\d+(?:\.\d+)?-[a-z]{2,}")
# a short identifier starts with a letter ("W-9", "E2E", "EC2", "A23"); one starting with a digit is
# a quantity with its unit as often ("5G", "10am", "3D")
_SHORT_ID = re.compile(r"[A-Za-z][\w-]{1,3}")
_SHORT_PERIOD = re.compile(r"(?i)(?:q[1-4]|h[12]|fy\d|[a-z]\d?)")  # "Q4", "H1", "FY3"; a letter and a digit ("v2")
# a file name ("20071229X02007.pdf") says where to look, not what the documents' text contains
_FILE_NAME = re.compile(r"(?<![\w./-])[\w.-]+\.pdf\b", re.I)
# an acronym or a product name with a run of capitals ("CUDA", "OpenCL", "HP"), not "McDonald"
_ACRONYM_LIKE = re.compile(r"[A-Z]{2}")
_TITLE_ABBR = re.compile(r"\b(?:Dr|Mr|Mrs|Ms|Prof|St|Sen|Rep|Gen|Capt|Sgt|Jr|Sr|[A-Z])\.$")  # a title or an initial


def without_file_names(question: str) -> str:
    """``question`` with each PDF file name it gives ("... in 20071229X02007.pdf?") blanked out."""
    return _FILE_NAME.sub(" ", question)


@dataclass(frozen=True)
class Anchor:
    """A phrase the sources must contain: ``kind`` is date | id | name; ``owner``: the question
    writes the name as a possessive ("*Apple's* Commission File Number"), whom it is about."""

    text: str
    kind: str
    owner: bool = False


def question_anchors(question: str) -> list[Anchor]:
    """Full dates, identifiers and proper names / acronyms of ``question`` (not its first word, no
    digits; not the letters of an identifier: "EduMIPS64" is one identifier, not also the name
    "EduMIPS")."""
    anchors = [Anchor(m.group(0), "date") for m in FULL_DATE.finditer(question)]
    masked = without_file_names(FULL_DATE.sub(" ", question))
    nouns_capitalised = detect_language(question) in NOUN_CAPITALISING
    ids: list[tuple[int, int]] = []  # spans of the identifiers kept
    for m in _IDENT.finditer(masked):
        tok = m.group(0).strip(".-/")
        if _PERIOD.fullmatch(tok) or _QUANTITY.fullmatch(tok):
            continue
        if len(re.sub(r"[\W_]", "", tok)) >= 4 or (_SHORT_ID.fullmatch(tok) and not _SHORT_PERIOD.fullmatch(tok)):
            anchors.append(Anchor(tok, "id"))
            ids.append(m.span())
    for a, b in ids:  # the letters of an identifier are no name ("EduMIPS" of "EduMIPS64", "PSA" of "P63/PSA/BCL-2")
        masked = masked[:a] + " " * (b - a) + masked[b:]
    for m in _CAP_RUN.finditer(masked):
        phrase = re.sub(r"['’]s$", "", m.group(0)).strip(" .-'’")
        words = phrase.split()
        before = masked[: m.start()].rstrip()
        if (
            (not before.strip(' ¿¡"“‘(') or (before.endswith(("?", ".", "!")) and not _TITLE_ABBR.search(before)))
            and words
            and not words[0].isupper()
        ):
            words = words[1:]  # sentence-initial capital, not a name
        words = [
            w
            for w in words
            if w.lower() not in QUESTION_WORDS and not _QUALIFIER.match(w) and not re.fullmatch(r"I['’]\w+", w)
        ]  # "I'm", "I've": the asker, not a name
        if nouns_capitalised:  # "Mindestalter", "Mehrheiten": nouns; "EU", "BVerfG" still name one thing
            words = [w for w in words if sum(c.isupper() for c in w) >= 2]
        # a possessive ends one name ("Apple Inc.'s IRS Employer Identification Number": the owner
        # and what it owns are two things to find)
        groups: list[list[str]] = [[]]
        owners: list[bool] = [False]
        for i, w in enumerate(words):
            if (
                w == "and"
                and groups[-1]
                and i + 1 < len(words)
                and (_ACRONYM_LIKE.search(groups[-1][-1]) or _ACRONYM_LIKE.search(words[i + 1]))
            ):
                # "OpenCL and CUDA", "Bank of America and AIG": two things, each to be found, while
                # "Procter and Gamble" is one name
                groups.append([])
                owners.append(False)
                continue
            owner = re.search(r"['’]s$", w)
            groups[-1].append(re.sub(r"['’]s$", "", w) if owner else w)
            if owner:
                owners[-1] = True
                groups.append([])
                owners.append(False)
        owners[-1] = re.search(r"['’]s$", m.group(0)) is not None  # the run's last name ("Intel's revenue")
        for g, owned in zip(groups, owners):
            if not g or any(ch.isdigit() for ch in "".join(g)):
                continue
            phrase = " ".join(g).strip(" .-'’")
            if len(phrase) >= 3 or (re.fullmatch(r"[A-Z]{2}", phrase) and phrase.lower() not in STOP_WORDS):
                anchors.append(Anchor(phrase, "name", owned))
    return anchors

"""Who wrote a document, as documents print it and as questions ask it.

A paper, report or judgment prints its authorship once, in its title block at its opening: the
names (with affiliation markers), their institutions and e-mail addresses, or a byline ("by
Andrea Spadaccini"), or the bench ("[J.K. Maheshwari* and Vijay Bishnoi, JJ.]"). The words a
question uses ("authors", "wrote", "affiliated", "institution") are rarely printed there.
``asks_authorship`` tells a question asking who wrote the document (or where its authors work)
from one that only mentions them ("What setting do the authors recommend?").
"""

from __future__ import annotations

import re
from functools import lru_cache

# a question that asks who wrote something, or where its authors work
_ASKS_AUTHORSHIP = re.compile(
    r"(?i)\bwho\s+(?:wrote|authored|co-?authored)\b"
    r"|\bwho\s+(?:is|are|was|were)\s+(?:the\s+)?(?:co-?)?authors?\b"
    r"|\b(?:list|name|give)\s+(?:me\s+)?(?:all\s+)?(?:of\s+)?the\s+(?:co-?)?authors\b"
    r"|\bwhat\s+are\s+the\s+(?:names\s+of\s+the\s+)?(?:co-?)?authors\b"
    r"|\bauthors?['’]?s?\s+(?:names|affiliations?)\b"
    r"|\b(?:which|what)\s+(?:institutions?|universit(?:y|ies)|organi[sz]ations?|affiliations?|labs?|"
    r"laborator(?:y|ies)|compan(?:y|ies))\b.*\b(?:authors?|affiliated|wrote|written)\b"
)

# the words a question asks authorship with: a title block prints names, not these words
AUTHOR_BLOCK_WORDS = frozenset(
    {"author", "authors", "authored", "co-author", "co-authors", "wrote", "written", "writer", "writers"}
    | {"affiliated", "affiliation", "affiliations"}
)
# where authors work, as a question about authorship names it: the title block prints the
# institution's own name ("University of Washington"), not the word "institution"
AFFILIATION_WORDS = frozenset(
    {"institution", "institutions", "university", "universities", "organisation", "organisations"}
    | {"organization", "organizations", "lab", "labs", "laboratory", "laboratories", "company", "companies"}
)


# a byline: "by" and a name of two or more capitalised words ("by Andrea Spadaccini", "By J. R.
# Cavalcante")
_BYLINE = re.compile(r"\b[Bb]y\s+(?:[A-Z]\.\s*)*[A-Z][\w'’-]+(?:\s+(?:[A-Z]\.\s*)*[A-Z][\w'’-]+)+")
# a paper's author block: three or more names of two to four capitalised words in a row, each
# followed by a comma, "and" or an affiliation marker ("Zejiang Shen1, Ruochen Zhang2, Melissa Dell3")
_NAME = r"[A-Z][\w'’-]+(?:\s+(?:[A-Z]\.\s*)*[A-Z][\w'’-]+){1,3}[\d∗*†‡§¶]*(?:\s*\(\s*\))?"
_AUTHOR_LIST = re.compile(rf"{_NAME}(?:\s*(?:,\s*(?:and\s+)?|\s+and\s+){_NAME}){{2,}}")
# a court's bench: judges' names joined by "and", then "JJ." ("J.K. Maheshwari* and Vijay Bishnoi, JJ.");
# the author of the judgment is marked (*)
_JUDGE = r"(?:[A-Z]\.\s*)*[A-Z][\w'’-]+(?:\s+(?:[A-Z]\.\s*)*[A-Z][\w'’-]+)*\*?"
_BENCH = re.compile(rf"{_JUDGE}(?:\s*,\s*{_JUDGE})*\s+and\s+{_JUDGE},?\s*JJ\.")


def prints_authors(text: str) -> bool:
    """True when ``text`` prints who wrote a document the way a title block does: a byline ("by
    Andrea Spadaccini"), a paper's author list (three or more names in a row: "Vladimir Karpukhin∗,
    Barlas Oğuz∗, Sewon Min†") or a court's bench ("J.K. Maheshwari* and Vijay Bishnoi, JJ.")."""
    return any(p.search(text) is not None for p in (_BYLINE, _AUTHOR_LIST, _BENCH))


@lru_cache(maxsize=1024)
def asks_authorship(question: str) -> bool:
    """True when ``question`` asks who wrote a document or where its authors work ("Who are the
    authors of the DPR paper?", "Who wrote the judgment?", "Which institutions are the authors
    affiliated with?"); False for one that mentions authors without asking who they are ("What
    setting do the authors recommend?"). Cached: the answerer asks it of every candidate sentence."""
    return _ASKS_AUTHORSHIP.search(question) is not None

"""``answerability.text_terms``: the per-text cached token set equals tokenizing the joined text."""

from __future__ import annotations

from ragaudit.answer.answerability import text_terms
from ragaudit.answer.citations import normalize_ws
from ragaudit.index.sparse import tokenize
from ragaudit.ingest.pdf import extract_pages
from tests.conftest import SAMPLES

TRICKY = [
    "Pub. L. No. 105-",
    "304, 112 Stat. 2860",
    "CuratedTREC and",
    "HR_SCHEMA.EMPLOYEES",
    "IREXの基準",
    "とは",
    "PC–12/47E",
    "ﬁnal ligature",
    "  spaced\n\ttext  ",
    "",
    "10-",
    "Q filing",
    "Oğuz Küttler",
    "dual-\nencoder",
    "94-2404110",
    "Fig. 3",
]


def _joined(texts: list[str]) -> set[str]:
    return set(tokenize(normalize_ws(" ".join(texts)).lower()))


def test_union_of_cached_pieces_equals_the_joined_tokenization():
    """Fails if a token could span two texts (CJK runs, identifiers, abbreviations at a boundary)
    so that the cached per-text sets miss or add a term, or if the cache returns another text's
    set. Checked on boundary-tricky strings and on the lines of the sample PDFs' page text."""
    assert text_terms(TRICKY) == _joined(TRICKY)
    for i in range(len(TRICKY)):  # every adjacent pair as the boundary
        pair = TRICKY[i : i + 2]
        assert text_terms(pair) == _joined(pair), pair
    evidence = [
        line
        for pdf in sorted(SAMPLES.glob("*.pdf"))
        for page in extract_pages(pdf.read_bytes())
        for line in page.text.splitlines()
    ]
    assert len(evidence) > 300
    assert text_terms(evidence) == _joined(evidence)
    assert text_terms(evidence[:3]) == _joined(evidence[:3])  # cached pieces, another combination

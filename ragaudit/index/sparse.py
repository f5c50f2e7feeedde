"""BM25 as Qdrant sparse vectors, with a tokenizer that keeps identifiers whole.

Document side: each term gets the BM25 saturated term frequency
``tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))`` (Robertson & Zaragoza, "The
Probabilistic Relevance Framework: BM25 and Beyond", 2009); Qdrant multiplies in the IDF
(collection created with ``Modifier.IDF``), so the score of a query is sum over matched terms
of idf(t) * saturated tf(t, d) -- Okapi BM25. Query side: weight 1 per distinct term.
``avgdl`` is a setting (an estimate of the average chunk length), as in Qdrant's own BM25.

Tokenizer (the same one serves index and query):
- lower-cased; identifiers such as ``16.11.1``, ``snake_case``, ``HR_SCHEMA.EMPLOYEES``,
  ``CVE-2021-44228``, ``94-2404110``, ``$18.0`` and dates ``10/28/1998`` are kept as one token
  and also indexed split into their parts, so partial matches still score;
- plain alphabetic words are Snowball-stemmed (PyStemmer, English) and English stop words dropped;
  tokens with digits or joiners are never stemmed;
- Unicode variants are folded first (``fold``: NFKC, dash variants as "-");
- CJK runs become overlapping character bigrams (plus unigrams), as Lucene's CJKAnalyzer does;
  a Latin or digit run glued to CJK text ("IREXの基準") is a token of its own (``irex``);
- CamelCase and mixed-case names (``CuratedTREC``, ``TriviaQA``, ``getUserName``) are kept whole
  and also indexed split at their case changes (``curated``, ``trec``), as code search does;
- acronyms: a run of two or more capitalised words in a question ("Natural Questions") also
  asks for its initials (``nq``, weight ``ACRONYM_WEIGHT``), which is how tables and papers
  refer to it;
- abbreviations: a capitalised word of 2-5 letters with a period, followed by a number, a
  lower-case word or another initial (``Pub. L. No. 105-304``, ``112 Stat. 2860``, ``Fig. 3``,
  ``Sec. 512``, ``Dept. of``) is also indexed as ``abbr:<word>``; on the query side every word of
  4+ letters also asks for ``abbr:<prefix>`` (2-5 letters, weight ``ABBREVIATION_WEIGHT``), so
  "Public Law ... Statutes" finds "Pub. L. ... Stat.". A sentence-final word ("... the Act. The")
  is not an abbreviation by this rule.
- table row labels: a line of a passage that is a label of 2-6 words followed by numeric cells
  ("Gross margin 40,215 34,670", "Research and development $ 7,709 $ 6,306") is also indexed as one
  term ``row:<label's words>`` (``row_label_terms``), and a question asks for ``row:<n-gram>`` for
  every run of 2-6 of its words (``ROW_LABEL_WEIGHT``): a statement row is matched by its whole
  label, as a reader finds a line item, and not only by words that prose paragraphs repeat more
  often. One-word labels ("Total", "Revenue", "Services") head rows of most tables and say little
  about which row is meant, so they are left out.
"""

from __future__ import annotations

import re
import unicodedata
import zlib
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

import Stemmer

from ragaudit.text.function_words import STOP_WORDS
from ragaudit.text.language import detect_language

_STEMMER = Stemmer.Stemmer("english")

# An identifier-ish token: alnum runs joined by . _ - / : , (joiners only between alnums).
_WORD = re.compile(r"[^\W_]+(?:[._\-/:,'’][^\W_]+)*|_+[^\W_]+(?:_[^\W_]+)*", re.UNICODE)
_SPLIT = re.compile(r"[._\-/:,'’]+")
# one Chinese/Japanese/Korean character (kana, CJK ideographs, compatibility ideographs, Hangul);
# shared with pdf (CJK pages) and retrieval (CJK questions)
CJK_CHAR = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")
_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+")


_ABBREVIATION = re.compile(r"(?<![\w.])([A-Z][a-z]{1,4})\.(?=\s+(?:\d|[a-z]|[A-Z]\.))")
ABBREVIATION_WEIGHT = 0.5


def abbreviation_terms(text: str) -> list[str]:
    """``abbr:<word>`` terms for the abbreviations in ``text`` (see the module docstring)."""
    return [f"abbr:{m.group(1).lower()}" for m in _ABBREVIATION.finditer(text) if m.group(1).lower() not in STOP_WORDS]


_CAPITALISED_RUN = re.compile(r"\b[A-Z][a-z]+(?:\s+[A-Z][a-z]+)+\b")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
ACRONYM_WEIGHT = 0.5


def acronym_queries(text: str) -> set[str]:
    """Initials of runs of 2-5 capitalised words in ``text`` ("Natural Questions" -> ``nq``);
    question words and stop words ("What", "In") do not start a run."""
    out: set[str] = set()
    for m in _CAPITALISED_RUN.finditer(text):
        words = [w for w in m.group(0).split()]
        while words and words[0].lower() in STOP_WORDS:
            words = words[1:]
        if 2 <= len(words) <= 5:
            out.add("".join(w[0] for w in words).lower())
    return out


def _camel_parts(token: str) -> list[str]:
    """Parts of a mixed-case token at its case changes, or ``[]`` when it has none."""
    if not re.search(r"[a-z][A-Z]|[A-Z]{2}[a-z]", token):
        return []
    return [p.lower() for p in _CAMEL.findall(token)]


def abbreviation_queries(text: str) -> set[str]:
    """``abbr:<prefix>`` terms a question asks for: 2-5 letter prefixes of its words of 4+ letters."""
    out: set[str] = set()
    for w in re.findall(r"[A-Za-z]{4,}", text):
        w = w.lower()
        if w in STOP_WORDS:
            continue
        out.update(f"abbr:{w[:n]}" for n in range(2, min(5, len(w) - 1) + 1))
    return out


# dash and hyphen variants (U+2010..U+2015, minus sign, small/full-width hyphen-minus) -> "-"
_DASHES = re.compile(r"[\u2010-\u2015\u2212\ufe58\ufe63\uff0d]")


def fold(text: str) -> str:
    """Text as matching sees it: Unicode NFKC (full-width letters and digits, ligatures such as
    "ﬁ", superscripts and other compatibility variants become their plain forms) and every dash
    variant as "-", so "PC–12/47E" (en dash) and "PC-12/47E" are one identifier. Used for
    tokens only: page text and quotes keep the document's own characters."""
    return _DASHES.sub("-", unicodedata.normalize("NFKC", text))


def _stem(word: str) -> str:
    return _STEMMER.stemWord(word) if word.isalpha() else word


def tokenize(text: str) -> list[str]:
    """Split ``text`` into BM25 terms (with repeats). See the module docstring; the text is
    ``fold``-ed first."""
    text = fold(text)
    out: list[str] = []
    for m in _CJK_RUN.finditer(text):
        run = m.group(0)
        out.extend(run)  # unigrams
        out.extend(run[i : i + 2] for i in range(len(run) - 1))
    non_cjk = _CJK_RUN.sub(" ", text)
    for m in _WORD.finditer(non_cjk):
        cased = m.group(0).strip("_")
        tok = cased.lower()
        if not tok:
            continue
        parts = [p for p in _SPLIT.split(tok.replace("_", ".")) if p]
        camel = [p for piece in _SPLIT.split(cased.replace("_", ".")) for p in _camel_parts(piece)]
        if camel:
            out.append(tok.rstrip(",.'’"))
            out.extend(_stem(p) for p in camel if p not in STOP_WORDS)
            if len(parts) > 1:
                out.extend(_stem(p) for p in parts if p not in STOP_WORDS)
            continue
        if len(parts) > 1:
            out.append(tok.rstrip(",.'’"))
            for p in parts:
                if p not in STOP_WORDS:
                    out.append(_stem(p))
        elif tok not in STOP_WORDS:
            out.append(_stem(tok))
    return out


def term_id(term: str) -> int:
    """Stable 32-bit index of a term (CRC-32); collisions are rare and only add noise."""
    return zlib.crc32(term.encode("utf-8"))


@dataclass(frozen=True)
class SparseVector:
    indices: list[int]
    values: list[float]


def _merge(weights: dict[int, float]) -> SparseVector:
    items = sorted(weights.items())
    return SparseVector([i for i, _ in items], [v for _, v in items])


# a table cell's number as one token: "40,215", "7,709", "(2,466)", "$(95)", "696.2", "(1.3)%"
_CELL_NUMBER = re.compile(r"^\$?\(?[-+]?\$?\d[\d,]*(?:\.\d+)?\)?%?$")
_NIL = re.compile(r"^[—–-]+$")  # a dash for nil


# the row reader's revision, recorded in the build info (a document built with another revision is
# re-ingested by `reindex --changed`): bump it when `row_label` changes which lines yield labels.
# This revision reads a nil percentage ("— %") as a cell, so rows such as
# "Graphics 1,493 606 887 146 % 3,751 3,739 12 — %" get their label term
ROW_LABELS_REVISION = 2


def row_label(line: str) -> str | None:
    """The label of a table row, or None when ``line`` is not one: the words before a trailing run
    of numeric cells ("Gross margin 40,215 34,670" -> "Gross margin"). A cell is a number with
    the marks a statement prints apart from it -- "$ 7,709", "$ (95)", "696.2 %", "(1,353) %" --
    or a dash for nil, with or without "%"; the label must hold a letter. Read token by token from
    the end, in time linear in the line (a regular expression with a lazy label and optional
    spaces in every cell backtracked for milliseconds on long lines of numbers).

    This decides which lines give a ``row:`` term, not whether a line is a table row
    (``ragaudit.text.lines.is_row``, which chunking uses, asks that numbers make 40% of its
    words): a long label before two cells is a row label here, and ``row_label_terms`` bounds its
    length."""
    toks = line.split()
    i = len(toks)
    while i > 0:
        j = i
        closing = 0
        if toks[j - 1] == "%":
            j, closing = j - 1, 1
        if j > 0 and toks[j - 1] in (")", ")%") and not (closing and toks[j - 1] == ")%"):
            j, closing = j - 1, closing + 1
        if not (j > 0 and (_CELL_NUMBER.match(toks[j - 1]) or _NIL.match(toks[j - 1]))):
            break
        if _NIL.match(toks[j - 1]) and closing and toks[i - 1] == ")":
            break  # "— )" closes nothing
        j -= 1
        while j > 0 and toks[j - 1] in ("$", "(", "$(", "($") and not _NIL.match(toks[j]):
            j -= 1
        i = j
    if i == len(toks) or i == 0:
        return None
    label = " ".join(toks[:i])
    return label if re.search(r"[A-Za-z]", label) else None


_LABEL_WORD = re.compile(r"[A-Za-z]+")
ROW_LABEL_MIN_WORDS = 2  # "Total", "Revenue": a one-word label names no particular row
ROW_LABEL_MAX_WORDS = 6  # a longer "label" is a prose line that happens to end in a number
# query weight of a row label the question names. Measured (bench/answer_quality.py, fresh indexes):
# 2.0 with 2+ word labels was chosen on the tuning parts (dev odd, probe1, ext1: ext1 hit@5
# +0.105) over 1.0 (ext1 +0.000) and over 1+ word labels at 1.0 (dev tune hit@5 -0.026)
ROW_LABEL_WEIGHT = 2.0


def label_words(text: str) -> list[str]:
    """The words a row label or a question is matched by: alphabetic words, lower-cased,
    stop words out, stemmed ("Research and development" -> ``["research", "develop"]``)."""
    words = (w.lower() for w in _LABEL_WORD.findall(fold(text)))  # "Apple's" -> "apple", "s" (dropped)
    return [_stem(w) for w in words if w not in STOP_WORDS and len(w) > 1]


def row_label_terms(text: str) -> list[str]:
    """``row:<label words>`` for every line of ``text`` that is a table row: a label of
    ``ROW_LABEL_MIN_WORDS`` to ``ROW_LABEL_MAX_WORDS`` words followed by numeric cells only
    ("Gross margin 40,215 34,670" -> ``row:gross margin``; footnote marks such as "(1)" in the
    label are dropped; a "Total ..." row is also indexed without "total", as that is what the row
    is the total of)."""
    out = []
    for line in text.splitlines():
        label = row_label(line)
        if label is None:
            continue
        words = label_words(re.sub(r"\(\w\)|\(\d\)", " ", label))
        if ROW_LABEL_MIN_WORDS <= len(words) <= ROW_LABEL_MAX_WORDS:
            out.append("row:" + " ".join(words))
            if words[0] == "total" and len(words) > ROW_LABEL_MIN_WORDS:
                out.append("row:" + " ".join(words[1:]))
    return out


def question_row_terms(text: str) -> set[str]:
    """``row:<n-gram>`` for every run of ``ROW_LABEL_MIN_WORDS`` to ``ROW_LABEL_MAX_WORDS``
    consecutive ``label_words`` of a question: the row labels it could name."""
    words = label_words(text)
    return {
        "row:" + " ".join(words[i:j])
        for i in range(len(words))
        for j in range(i + ROW_LABEL_MIN_WORDS, min(i + ROW_LABEL_MAX_WORDS, len(words)) + 1)
    }


# Snowball stemmers (PyStemmer) of the languages other than English whose documents and questions
# also get their own language's stems (``language_terms``), by ISO 639-1 code
_SNOWBALL = {
    "ca": "catalan",
    "da": "danish",
    "de": "german",
    "es": "spanish",
    "fi": "finnish",
    "fr": "french",
    "hu": "hungarian",
    "it": "italian",
    "nl": "dutch",
    "no": "norwegian",
    "pt": "portuguese",
    "ro": "romanian",
    "ru": "russian",
    "sv": "swedish",
    "tr": "turkish",
}
# the language stems' revision, recorded in the build info (``bm25_language_stems``): a version
# built before them is re-ingested by `reindex --changed`
LANGUAGE_STEMS_REVISION = 1


def text_language(text: str) -> str | None:
    """``ragaudit.text.language.detect_language`` of ``text`` when it is one of ``_SNOWBALL`` (not
    English), else None."""
    language = detect_language(text)
    return language if language in _SNOWBALL else None


@lru_cache(maxsize=None)
def _language_stemmer(language: str) -> Stemmer.Stemmer:
    return Stemmer.Stemmer(_SNOWBALL[language])


def language_terms(text: str, language: str | None) -> list[str]:
    """The stems ``language``'s Snowball stemmer gives the words of ``text`` (with repeats) where
    they differ from ``tokenize``'s English stem ("duran" -> "dur", "Präsidenten" -> "prasident"),
    so a Spanish question's "dura" finds the constitution's "duran"; [] for None or English. Added
    to a document's and a question's BM25 terms in that language; English stems stay as they are."""
    if not language or language not in _SNOWBALL:
        return []
    stem = _language_stemmer(language).stemWord
    out = []
    for m in _WORD.finditer(_CJK_RUN.sub(" ", fold(text))):
        for w in _SPLIT.split(m.group(0).lower()):
            if w.isalpha() and w not in STOP_WORDS:
                s = stem(w)
                if s != _stem(w):
                    out.append(s)
    return out


def bm25_document_vector(
    text: str,
    k1: float = 1.2,
    b: float = 0.75,
    avgdl: float = 120.0,
    rows: str | None = None,
    language: str | None = None,
) -> SparseVector:
    """Sparse BM25 document vector: term id -> saturated tf (IDF applied by Qdrant).

    ``rows``: the passage whose table rows are indexed as ``row_label_terms`` (weight 1 each, not
    length-normalised: a label names its row whatever the chunk's length); None = no row terms.
    They do not count in the document length. ``language``: the document's language
    (``text_language``), whose stems are added (``language_terms``), not counted in the length."""
    terms = tokenize(text)
    dl = len(terms) or 1
    terms += abbreviation_terms(text)
    terms += language_terms(text, language)
    tf = Counter(terms)
    weights: dict[int, float] = {}
    norm = k1 * (1 - b + b * dl / avgdl)
    for term, f in tf.items():
        tid = term_id(term)
        weights[tid] = weights.get(tid, 0.0) + f * (k1 + 1) / (f + norm)
    for term in set(row_label_terms(rows or "")):
        tid = term_id(term)
        weights[tid] = weights.get(tid, 0.0) + 1.0
    return _merge(weights)


def bm25_query_vector(text: str, languages: bool = False) -> SparseVector:
    """Sparse query vector: weight 1.0 per distinct term, ``ABBREVIATION_WEIGHT`` per abbreviation
    prefix, ``ACRONYM_WEIGHT`` per acronym of a capitalised run (a term of the question keeps 1.0),
    ``ROW_LABEL_WEIGHT`` per row label the question could name (``question_row_terms``).
    ``languages``: a question in another language than English (``text_language``) also gets that
    language's stems (``language_terms``), weight 1.0 each."""
    weights = {term_id(t): ABBREVIATION_WEIGHT for t in abbreviation_queries(text)}
    weights.update({term_id(t): ACRONYM_WEIGHT for t in acronym_queries(text)})
    weights.update({term_id(t): ROW_LABEL_WEIGHT for t in question_row_terms(text)})
    if languages:
        weights.update({term_id(t): 1.0 for t in set(language_terms(text, text_language(text)))})
    weights.update({term_id(t): 1.0 for t in set(tokenize(text))})
    return _merge(weights)

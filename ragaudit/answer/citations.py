"""Citation parsing and checking for answers that cite numbered sources ``[n]``.

An answer is checked sentence by sentence: every ``[n]`` must name a source (1..len(sources)),
and every sentence that states something must carry a citation. Quotes attached to citations
must occur verbatim (after whitespace normalisation) in the cited chunk.

A bracketed number that is the documents' own text (a paper's reference "[34]", a clause "[3]")
is written ``\\[34]`` when quoted into an answer (``escape_markers``; CommonMark's backslash
escape, so a Markdown view shows "[34]"): only an unescaped ``[n]`` cites a source, and claims
are compared with their quotes unescaped (``strip_citations``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ragaudit.index.sparse import tokenize
from ragaudit.text.dates import month_of
from ragaudit.text.function_words import STOP_WORDS
from ragaudit.text.injection import REASON as INSTRUCTION_REASON
from ragaudit.text.injection import overlaps
from ragaudit.text.sentences import sentence_spans

_CITE = re.compile(r"(?<!\\)\[(\d+(?:\s*,\s*\d+)*)\]")
_DOC_MARKER = re.compile(r"(?<!\\)\[(?=\d+(?:\s*,\s*\d+)*\])")
_ESCAPED_MARKER = re.compile(r"\\\[(?=\d+(?:\s*,\s*\d+)*\])")
_WS = re.compile(r"\s+")


def normalize_ws(text: str) -> str:
    """Collapse whitespace runs to one space and strip (the dev set's evidence normalisation)."""
    return _WS.sub(" ", text).strip()


def escape_markers(text: str) -> str:
    """Document text to be quoted in an answer, with each ``[n]`` of its own written ``\\[n]`` so
    it is not read as a citation: ``"tests from [34] on"`` -> ``"tests from \\[34] on"``."""
    return _DOC_MARKER.sub(r"\\[", text)


def unescape_markers(text: str) -> str:
    """The inverse of ``escape_markers``: ``"\\[34]"`` -> ``"[34]"``."""
    return _ESCAPED_MARKER.sub("[", text)


def cited_numbers(text: str) -> list[int]:
    """All source numbers cited in ``text``, in order of appearance, e.g. ``"a [1][2,3]"`` -> [1, 2, 3]."""
    out = []
    for m in _CITE.finditer(text):
        out.extend(int(x) for x in m.group(1).split(","))
    return out


_CITE_WITH_SPACE = re.compile(r"\s*" + _CITE.pattern)


def strip_citations(text: str) -> str:
    """``text`` without its ``[n]`` markers (and the space before them), whitespace-normalised,
    the document's own bracketed numbers unescaped: ``"Signed in 1998 [1]."`` -> ``"Signed in
    1998."``, ``"as in \\[34] [2]"`` -> ``"as in [34]"``."""
    return unescape_markers(normalize_ws(_CITE_WITH_SPACE.sub("", text)))


_BOUNDARY = re.compile(r"(?P<stop>[.!?。！？]['\")\]”’]*)(?P<cites>(?:\s*\[\d+(?:\s*,\s*\d+)*\])*)\s+(?=[^\s\[])")


# a list item's marker right after a citation, a colon or the start ("[1] 1.", ": b.", "(iii)."):
# the period that follows it numbers the quoted item and ends no sentence
_LIST_MARKER = re.compile(r"(?:^|\]\s+|[:;]\s+)\(?(?:\d{1,3}|[a-zA-Z]|[ivxIVX]{2,4})\)?$")


def _sentence_ends(text: str) -> set[int]:
    """Offsets in ``text`` right after each sentence's last character, as the chunker's sentence
    segmenter (``ragaudit.text.sentences.sentence_spans``: pysbd plus its abbreviation rule) sees the text with
    its citation markers removed."""

    plain, where, pos = [], [], 0
    for m in _CITE.finditer(text):
        plain.append(text[pos : m.start()])
        where.extend(range(pos, m.start()))
        pos = m.end()
    plain.append(text[pos:])
    where.extend(range(pos, len(text)))
    return {where[e - 1] + 1 for _, e in sentence_spans("".join(plain)) if e > 0}


def split_answer_sentences(text: str) -> list[str]:
    """Split an answer into sentences; citations right after the full stop stay with their sentence.

    A full stop followed by a space ends a sentence when a citation follows it (``"... 1998. [1]
    It ..."``: the writer closed the sentence) or when the sentence segmenter the answerer quotes
    with (pysbd, ``ragaudit.text.sentences.sentence_spans``) ends one there, so the period of an abbreviation or
    initial inside a quoted sentence ("Apple Inc. and", "Michelle L. Collins", "e.g.", "U.S.
    Code", "St. Kitts") does not cut it into an uncited fragment and a claim without its quote.
    Example: ``"One thing. [1] Two things [2]."`` -> ``["One thing. [1]", "Two things [2]."]``.
    """
    ends = None
    out, pos = [], 0
    for m in _BOUNDARY.finditer(text):
        if not m.group("cites") and _LIST_MARKER.search(text, 0, m.start("stop")):
            continue  # "... components: [1] 1. An off-the-shelf toolkit": a list item's number, not an end
        if not m.group("cites"):
            if ends is None:
                ends = _sentence_ends(text)
            if not any(m.start("stop") < e <= m.end("stop") for e in ends):
                continue
        out.append(text[pos : m.end()].strip())
        pos = m.end()
    out.append(text[pos:].strip())
    return [x for x in out if x]


@dataclass
class CitationReport:
    """``invalid_numbers``: cited n with no source; ``uncited_sentences``: claims with no [n]."""

    cited: list[int] = field(default_factory=list)
    invalid_numbers: list[int] = field(default_factory=list)
    uncited_sentences: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.invalid_numbers and not self.uncited_sentences and bool(self.cited)

    def to_json(self) -> dict:
        return {
            "ok": self.ok,
            "cited": self.cited,
            "invalid_numbers": self.invalid_numbers,
            "uncited_sentences": self.uncited_sentences,
        }


def check_citations(answer: str, n_sources: int) -> CitationReport:
    """Check ``answer`` against ``n_sources`` numbered sources (1-based)."""
    rep = CitationReport()
    for sent in split_answer_sentences(answer):
        nums = cited_numbers(sent)
        if not nums:
            if len(strip_citations(sent).split()) >= 3:  # ignore fragments like "Yes."
                rep.uncited_sentences.append(sent)
            continue
        for n in nums:
            if n not in rep.cited:
                rep.cited.append(n)
            if not 1 <= n <= n_sources and n not in rep.invalid_numbers:
                rep.invalid_numbers.append(n)
    return rep


def find_quote(quote: str, chunk_text: str) -> int:
    """Offset of ``quote`` in ``chunk_text`` comparing whitespace-normalised text, or -1."""
    span = quote_span(quote, chunk_text)
    return span[0] if span else -1


def quote_span(quote: str, chunk_text: str) -> tuple[int, int] | None:
    """``(start, end)`` of ``quote`` in ``chunk_text`` comparing whitespace-normalised text, or None."""
    q = normalize_ws(quote)
    if not q:
        return None
    # map normalised offsets back to the original text
    norm_chars, index_map = [], []
    prev_space = True
    for i, ch in enumerate(chunk_text):
        if ch.isspace():
            if not prev_space:
                norm_chars.append(" ")
                index_map.append(i)
            prev_space = True
        else:
            norm_chars.append(ch)
            index_map.append(i)
            prev_space = False
    pos = "".join(norm_chars).find(q)
    return (index_map[pos], index_map[pos + len(q) - 1] + 1) if pos >= 0 else None


# --------------------------------------------------------------------------- claim support
#
# A citation is *verified* when its quote occurs in the cited chunk's text, and *supports* its
# claim (the answer sentence that carries it) when the quote holds the claim's key facts: every
# number (digits or a number word), every month and every name of the claim, no negation the
# quote lacks, and at least ``MIN_TERM_RECALL`` of the claim's content terms (stemmed, as BM25
# indexes them). This is the lexical-overlap form of claim verification: a cheap, deterministic
# check of the "key facts" an auditor reads first (cf. the FEVER task, Thorne et al., NAACL 2018:
# a claim is SUPPORTED only when the evidence states it). It catches wrong numbers, dates and
# names ("signed by President Bush in 2005" citing "signed ... by President Clinton on October
# 28, 1998"); it does not understand paraphrases that share no words, which then count as
# unsupported -- a false alarm an auditor can see, never a false assurance.

MIN_TERM_RECALL = 0.5
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_NUMBER_WORDS = {
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
    "ten": "10",
    "eleven": "11",
    "twelve": "12",
    "twenty": "20",
    "thirty": "30",
    "forty": "40",
    "fifty": "50",
    "hundred": "100",
    "thousand": "1000",
    "million": "1000000",
    "billion": "1000000000",
}
_WORD = re.compile(r"[^\W_]+(?:['’.-][^\W_]+)*")
_NEGATIONS = frozenset({"not", "no", "never", "none", "neither", "nor", "without", "cannot"})


def _numbers(text: str) -> set[str]:
    """Numbers of ``text`` as digit strings, thousands separators removed ("1,000" -> "1000";
    "ten" -> "10")."""
    out = {m.group(0).replace(",", "") for m in _NUMBER.finditer(text)}
    out |= {_NUMBER_WORDS[w.lower()] for w in _WORD.findall(text) if w.lower() in _NUMBER_WORDS}
    return out


def _months(text: str) -> set[str]:
    """Month names of ``text`` (capitalised, full or abbreviated), as full lower-case names."""
    out = set()
    for w in _WORD.findall(text):
        if not w[0].isupper():  # "May 5" and "Oct." are months; the verbs "may" and "march" are not
            continue
        if month := month_of(w):
            out.add(month)
    return out


def _names(text: str) -> list[str]:
    """Proper names and acronyms of ``text``: capitalised words other than the first word
    (which is capitalised anyway) and words in capitals anywhere, excluding stop words and months."""

    out = []
    for i, m in enumerate(_WORD.finditer(text)):
        w = m.group(0)
        if not w[0].isupper() or w.lower() in STOP_WORDS or month_of(w):
            continue
        if i == 0 and not (len(w) > 1 and w.isupper()):
            continue
        if w not in out:
            out.append(w)
    return out


def _negated(text: str) -> bool:
    words = [w.lower() for w in _WORD.findall(text)]
    return any(w in _NEGATIONS or w.endswith("n't") for w in words)


@dataclass
class Support:
    """Verdict of ``claim_support``: ``supports`` and a human-readable ``reason``; ``missing``
    lists the key facts of the claim absent from the quote."""

    supports: bool
    reason: str
    missing: list[str] = field(default_factory=list)


def claim_support(claim: str, quote: str, min_term_recall: float = MIN_TERM_RECALL) -> Support:
    """Does ``quote`` support ``claim``? (Both plain text; citations ``[n]`` in the claim are ignored.)

    Supported when the claim quotes the source verbatim, or when the quote contains every number,
    month and name of the claim, does not lack a negation the claim makes, and holds at least
    ``min_term_recall`` of the claim's content terms (``sparse.tokenize``: stemmed, stop words
    dropped). Returns ``Support(supports, reason, missing)``. An empty quote supports nothing.
    """

    c, q = strip_citations(claim), normalize_ws(quote)
    if not q:
        return Support(False, "no quote")
    if q.casefold() in c.casefold() and len(q.split()) >= 0.5 * len(c.split()):
        return Support(True, "the claim quotes the source verbatim")
    missing = []
    q_numbers = _numbers(q)
    missing += [f"number {n}" for n in sorted(_numbers(c)) if n not in q_numbers]
    q_months = _months(q)
    missing += [f"month {m}" for m in sorted(_months(c)) if m not in q_months]
    q_terms = set(tokenize(q))
    missing += [f"name {n}" for n in _names(c) if not set(tokenize(n)) <= q_terms]
    if _negated(c) and not _negated(q):
        missing.append("the claim's negation")
    terms = set(tokenize(c))
    recall = len(terms & q_terms) / len(terms) if terms else 0.0
    if recall < min_term_recall:
        missing.append(f"terms ({recall:.0%} of the claim's terms, need {min_term_recall:.0%})")
    if missing:
        return Support(False, "not in the quote: " + "; ".join(missing), missing)
    return Support(True, f"numbers, dates and names of the claim are in the quote; {recall:.0%} of its terms")


@dataclass
class CitationVerdict:
    """Per citation: ``verified`` (quote occurs in the cited chunk), ``supports`` (the quote
    supports the claim that carries the citation) and the ``reason``."""

    verified: bool
    supports: bool
    reason: str


def verify_citation(
    claim: str,
    quote: str,
    chunk_text: str | None,
    together_with: list[tuple[int, str]] | None = None,
    instructions: list[tuple[int, int]] | None = None,
) -> CitationVerdict:
    """Verdict on one citation of ``claim`` quoting ``quote`` from a chunk with text ``chunk_text``
    (``None``: the cited chunk is not among the sources).

    ``together_with``: ``(n, quote)`` of the claim's other citations; when the quote alone does
    not support the claim but all the claim's quotes together do, it supports "together with [m]".
    ``instructions``: spans of ``chunk_text`` that read as instructions to an assistant
    (``ragaudit.text.injection``); a quote overlapping one supports nothing (``injection.REASON``):
    an instruction found in a document is not evidence of what it tells the model to say.
    """
    if chunk_text is None:
        return CitationVerdict(False, False, "the cited chunk is not among the sources")
    span = quote_span(quote, chunk_text)
    if span is None:
        return CitationVerdict(False, False, "the quote does not occur in the cited chunk")
    if instructions and overlaps(span[0], span[1], instructions):
        return CitationVerdict(True, False, INSTRUCTION_REASON)
    alone = claim_support(claim, quote)
    if alone.supports or not together_with:
        return CitationVerdict(True, alone.supports, alone.reason)
    joint = claim_support(claim, " ".join([quote] + [q for _, q in together_with]))
    if joint.supports:
        others = "".join(f"[{n}]" for n, _ in together_with)
        return CitationVerdict(True, True, f"together with {others}: {joint.reason}")
    return CitationVerdict(True, False, alone.reason)


ANSWER_LABELS = ("answered", "refused", "clarifying", "uncited", "unsupported")


def answer_label(
    label: str, report: CitationReport, verdicts: list[CitationVerdict], unsupported_claims: int = 0
) -> str:
    """The label of an answer after its citation audit.

    ``refused`` / ``clarifying`` stay; otherwise ``uncited`` when a cited ``[n]`` names no source,
    a sentence that states something cites nothing, or nothing is cited; ``unsupported`` when a
    citation's quote is not in its chunk or does not support its claim, or a cited claim has no
    quote (``unsupported_claims`` > 0); else ``answered``.
    """
    if label in ("refused", "clarifying"):
        return label
    if not report.ok:
        return "uncited"
    if unsupported_claims or not verdicts or not all(v.verified and v.supports for v in verdicts):
        return "unsupported"
    return "answered"


_AFTER_CITE = re.compile(r"(?<=\])\s+(?=[^\s\[])")


def _cut_after_citations(sent: str) -> list[str]:
    """``sent`` cut where a citation is followed by more text (not after an escaped ``\\[34]``)."""
    ends = {m.end() for m in _CITE.finditer(sent)}
    parts, pos = [], 0
    for m in _AFTER_CITE.finditer(sent):
        if m.start() in ends:
            parts.append(sent[pos : m.start()])
            pos = m.end()
    parts.append(sent[pos:])
    return parts


def claim_parts(answer: str) -> list[tuple[str, list[int]]]:
    """Claims of ``answer``: its sentences, further cut after a citation that is followed by more
    text (``"A [1] B [2]."`` is two claims), each as (text without citations, cited numbers).
    Fragments of fewer than 2 words are dropped."""
    out = []
    for sent in split_answer_sentences(answer):
        for part in _cut_after_citations(sent):
            t = strip_citations(part)
            if len(t.split()) >= 2:
                out.append((t, cited_numbers(part)))
    return out


@dataclass
class CitedQuote:
    """One citation as the audit sees it: source number ``n``, the ``chunk_id`` it names, its
    ``quote`` and the ``claim`` (answer text without citations) that carries it."""

    n: int
    chunk_id: str
    quote: str
    claim: str


def audit_citations(
    answer: str,
    label: str,
    cites: list[CitedQuote],
    sources: list[tuple[str, str]],
    instructions: list[list[tuple[int, int]]] | None = None,
) -> tuple[list[CitationVerdict], dict, str]:
    """Audit the citations of ``answer`` against its numbered ``sources`` (``(chunk_id, text)``, 1-based).

    ``instructions``: per source, the spans of its text that read as instructions to an assistant
    (flagged at ingestion); a quote overlapping one supports nothing, and takes no part in
    another quote's joint support (``verify_citation``).

    Returns ``(verdicts, citation_check, label)``: one ``CitationVerdict`` per citation (a citation
    naming a chunk other than source n's is not verified); ``citation_check`` = ``check_citations``'s
    report plus ``claims`` (claims citing a valid source), ``supported_claims`` (those with at least
    one quote, every one verified and supporting) and ``unsupported`` (``[{claim, cites, reason}]``);
    and the label from ``answer_label``. Refusals and clarifications keep their label, count no
    claims and list no uncited sentences (their sentences say what was searched and not found; the
    quote of the closest passage they may cite is still verified and its ``[n]`` checked).
    """
    rep = check_citations(answer, len(sources))
    if label in ("refused", "clarifying"):
        # "The documents do not contain the answer ... do not mention X." is the system saying what
        # it searched, not a claim about the documents: only its quote of the closest passage is checked
        rep.uncited_sentences = []
    verdicts = []

    def own(c: CitedQuote) -> tuple[str | None, list[tuple[int, int]]]:
        ok = 1 <= c.n <= len(sources) and sources[c.n - 1][0] == c.chunk_id
        return (sources[c.n - 1][1] if ok else None), (instructions[c.n - 1] if ok and instructions else [])

    def instruction(c: CitedQuote) -> bool:
        text, spans = own(c)
        span = quote_span(c.quote, text) if text is not None and spans else None
        return span is not None and overlaps(span[0], span[1], spans)

    for i, c in enumerate(cites):
        text, spans = own(c)
        others = [(o.n, o.quote) for j, o in enumerate(cites) if j != i and o.claim == c.claim and not instruction(o)]
        verdicts.append(verify_citation(c.claim, c.quote, text, others, spans))
    check = rep.to_json()
    unsupported = []
    n_claims = 0
    if label not in ("refused", "clarifying"):
        for text, nums in claim_parts(answer):
            if not any(1 <= n <= len(sources) for n in nums):
                continue
            n_claims += 1
            mine = [v for c, v in zip(cites, verdicts) if c.claim == text]
            if not mine:
                unsupported.append({"claim": text, "cites": nums, "reason": "no quote of a cited source was found"})
            elif not all(v.verified and v.supports for v in mine):
                bad = next(v for v in mine if not (v.verified and v.supports))
                unsupported.append({"claim": text, "cites": nums, "reason": bad.reason})
    check.update(claims=n_claims, supported_claims=n_claims - len(unsupported), unsupported=unsupported)
    return verdicts, check, answer_label(label, rep, verdicts, len(unsupported))

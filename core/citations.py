"""Citation parsing and checking for answers that cite numbered sources ``[n]``.

An answer is checked sentence by sentence: every ``[n]`` must name a source (1..len(sources)),
and every sentence that states something must carry a citation. Quotes attached to citations
must occur verbatim (after whitespace normalisation) in the cited chunk.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_CITE = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")
_WS = re.compile(r"\s+")


def normalize_ws(text: str) -> str:
    """Collapse whitespace runs to one space and strip (the dev set's evidence normalisation)."""
    return _WS.sub(" ", text).strip()


def cited_numbers(text: str) -> list[int]:
    """All source numbers cited in ``text``, in order of appearance, e.g. ``"a [1][2,3]"`` -> [1, 2, 3]."""
    out = []
    for m in _CITE.finditer(text):
        out.extend(int(x) for x in m.group(1).split(","))
    return out


def strip_citations(text: str) -> str:
    return normalize_ws(_CITE.sub("", text))


_BOUNDARY = re.compile(r"[.!?。！？]['\")\]”’]*(?:\s*\[\d+(?:\s*,\s*\d+)*\])*\s+(?=[^\s\[])")


def split_answer_sentences(text: str) -> list[str]:
    """Split an answer into sentences; citations right after the full stop stay with their sentence."""
    out, pos = [], 0
    for m in _BOUNDARY.finditer(text):
        out.append(text[pos:m.end()].strip())
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
        return {"ok": self.ok, "cited": self.cited, "invalid_numbers": self.invalid_numbers,
                "uncited_sentences": self.uncited_sentences}


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
    q = normalize_ws(quote)
    if not q:
        return -1
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
    return index_map[pos] if pos >= 0 else -1

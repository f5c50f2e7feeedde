"""A generated refusal set: answerable gold questions asked where their answer is not.

Two variants per gold question of document D (``GoldQuestion`` with a gold answer):

- ``sibling``: asked with the scope set to the document most like D (same type: the highest
  TF-IDF cosine between the indexed texts, e.g. the other quarter's 10-Q of one company or
  another accident report of one agency -- decided from the texts, never from file names);
- ``excluded``: asked of the whole knowledge base with D left out of the scope (as if D were
  deleted).

Both must be refused. A case is generated only when the searched documents cannot hold the
answer: the question is not of kind ``scoped`` (those apply to sibling documents by
construction), neither the gold evidence nor any number / identifier of the gold answer (nor a
non-numeric answer's text) occurs in them, and D's ``also_found_in`` documents are left out too.
This errs towards leaving a case out rather than demanding a refusal of an answerable question.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from ragaudit.answer.citations import normalize_ws
from ragaudit.evaluate.evaluation import GoldQuestion, evidence_parts
from ragaudit.index.sparse import tokenize
from ragaudit.platform.db import ChunkRow, Document


@dataclass(frozen=True)
class RefusalCase:
    """One generated must-refuse question: ``doc_names`` is the scope it is asked in."""

    id: str
    source_id: str
    question: str
    variant: str  # sibling | excluded
    source_doc: str
    doc_names: list[str] = field(default_factory=list)
    similarity: float | None = None  # TF-IDF cosine of the sibling to the source document

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _fold(text: str) -> str:
    """Lower case, whitespace removed (extractors differ in spacing): for containment tests."""
    return re.sub(r"\s+", "", normalize_ws(text).lower())


def document_siblings(doc_texts: dict[str, str]) -> dict[str, tuple[str, float]]:
    """``{doc_name: (most similar other doc_name, cosine)}`` by TF-IDF cosine of the texts
    (scikit-learn ``TfidfVectorizer`` with sublinear tf over ``ragaudit.index.sparse.tokenize`` tokens;
    Salton & Buckley 1988). Needs at least two documents; a document with no text gets none."""
    from sklearn.feature_extraction.text import (
        TfidfVectorizer,  # deferred: scikit-learn (seconds to import), only for the refusal set
    )

    names = [n for n, t in doc_texts.items() if t.strip()]
    if len(names) < 2:
        return {}
    vec = TfidfVectorizer(tokenizer=tokenize, lowercase=False, sublinear_tf=True, token_pattern=None)
    m = vec.fit_transform([doc_texts[n] for n in names])
    sim = (m @ m.T).toarray()
    out = {}
    for i, n in enumerate(names):
        sim[i, i] = -1.0
        j = int(sim[i].argmax())
        out[n] = (names[j], round(float(sim[i, j]), 4))
    return out


def _answer_keys(answer: str) -> list[str]:
    """What would give the answer away: its numbers / identifiers, else its text before any
    parenthesis or semicolon (folded)."""
    keys = [t.strip(".,;:()") for t in re.findall(r"\S*\d\S*", answer)]
    keys = [k for k in keys if len(re.sub(r"\D", "", k)) >= 2 or re.search(r"[A-Za-z]", k)]
    if keys:
        return [_fold(k) for k in keys]
    core = re.split(r"[(;]", answer)[0].strip(" .,")
    return [_fold(core)] if core else []


def _holds_answer(q: GoldQuestion, text_folded: str) -> bool:
    if any(_fold(ev) in text_folded for ev in evidence_parts(q)):
        return True
    return any(k and k in text_folded for k in _answer_keys(q.answer))


def refusal_set(questions: list[GoldQuestion], doc_texts: dict[str, str]) -> list[RefusalCase]:
    """The generated refusal cases for ``questions`` over the knowledge base ``doc_texts``
    (``{doc_name: indexed text}``), in question order, sibling before excluded. Questions whose
    document is not in ``doc_texts`` are skipped."""
    siblings = document_siblings(doc_texts)
    folded = {n: _fold(t) for n, t in doc_texts.items()}
    out: list[RefusalCase] = []
    for q in questions:
        if q.is_refusal or q.kind == "scoped" or not q.doc_name or q.doc_name not in doc_texts or not q.answer:
            continue
        own = {q.doc_name} | {x.get("doc_name") for x in q.also_found_in if x.get("doc_name")}
        sib = siblings.get(q.doc_name)
        if sib and sib[0] not in own and not _holds_answer(q, folded[sib[0]]):
            out.append(RefusalCase(f"{q.id}:sibling", q.id, q.question, "sibling", q.doc_name, [sib[0]], sib[1]))
        rest = [n for n in doc_texts if n not in own]
        if rest and not any(_holds_answer(q, folded[n]) for n in rest):
            out.append(RefusalCase(f"{q.id}:excluded", q.id, q.question, "excluded", q.doc_name, rest))
    return out


def indexed_texts(svc: Any, knowledge_base: str | None = None) -> dict[str, str]:
    """``{doc_name: text}`` of every document (of ``knowledge_base``, or all), rebuilt from its
    live chunks of its primary strategy in text order, overlaps dropped."""

    out: dict[str, str] = {}
    with svc.sessions() as s:
        docs = s.execute(select(Document.id, Document.doc_name, Document.strategy, Document.knowledge_base)).all()
        for doc_id, name, strategy, kb in docs:
            if knowledge_base and kb != knowledge_base:
                continue
            rows = s.execute(
                select(ChunkRow.char_start, ChunkRow.char_end, ChunkRow.text)
                .where(ChunkRow.document_id == doc_id, ChunkRow.strategy == strategy, ChunkRow.live.is_(True))
                .order_by(ChunkRow.char_start)
            ).all()
            parts, end = [], 0
            for cs, ce, text in rows:
                if ce <= end:
                    continue
                parts.append(text[max(0, end - cs) :])
                end = ce
            out[name] = " ".join(parts)
    return out

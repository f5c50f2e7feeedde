"""The audit claims, on the real sample knowledge base (the session-scoped ``kb``: three PDFs ingested
through Dagster into Qdrant local mode, real embedding model), each by a test that fails when the
claim breaks. LLM answers are litellm ``mock_response`` (no network)."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from ragaudit.answer.answerers import LLMAnswerer
from ragaudit.platform.db import QueryLog
from ragaudit.query import QueryService
from ragaudit.types import Scope
from tests.conftest import DMCA_QUESTION

BUSH = "The DMCA was signed by President Bush in 2005 [1]."
CLINTON = "The DMCA was signed into law by President Clinton on October 28, 1998 [1]."


def _row(svc, query_id):
    with svc.sessions() as s:
        return s.scalar(select(QueryLog).where(QueryLog.id == query_id))


@pytest.mark.parametrize("answer,label,supports", [(BUSH, "unsupported", False), (CLINTON, "answered", True)])
def test_llm_answer_is_audited_in_reply_stream_and_telemetry(kb, answer, label, supports):
    """The issue's must-show: a mocked LLM answer "signed by President Bush in 2005 [1]" is not
    ``answered`` and its citation has ``supports: false``; the true answer (Clinton, October 28,
    1998) is ``answered`` / ``supports: true`` -- in the /query reply, in the /query/stream ``done``
    event and in ``query_logs.label``. Fails if ``answer_label`` returns "answered" whenever the
    [n] numbers are valid (ignoring the support verdicts), if ``supports`` is hard-wired True in
    ``audit_answer``, or if the label written to telemetry is not the audited one."""
    qs = QueryService(kb, answerer=LLMAnswerer("gpt-4o-mini", mock_response=answer))
    out = qs.ask(DMCA_QUESTION, Scope(doc_names=["dmca.pdf"]), top_k=3)
    assert out["retrieved"][0]["page_start"] == 1  # source [1] is the page-1 chunk with the signing sentence
    assert out["label"] == label
    assert [(c["n"], c["verified"], c["supports"]) for c in out["citations"]] == [(1, True, supports)]
    assert "Clinton" in out["citations"][0]["quote"] and out["citations"][0]["reason"]
    assert _row(kb, out["query_id"]).label == label

    events = list(qs.stream(DMCA_QUESTION, Scope(doc_names=["dmca.pdf"]), top_k=3))
    done = events[-1][1]
    assert events[-1][0] == "done" and done["label"] == label
    assert [c["supports"] for c in done["citations"]] == [supports]
    assert _row(kb, done["query_id"]).label == label


def test_issue_case_page_scope_holds_through_neighbour_expansion(kb):
    """The issue's case: /query with doc_name=dmca.pdf, page_min=5, page_max=5 returned a neighbour
    chunk from page 6 (neighbour expansion fetched it by id, outside the Qdrant filter). Since list
    items are atomic units (on by default) no page-5 chunk ends mid-list, so page 5 no longer fetches
    a neighbour; page 10 does (its chunk ending in "! The content of the retained material must not
    be modified." continues on page 11). Fails if ``Retriever.retrieve`` stops passing its chunks
    through ``enforce_scope``, or ``admits`` ignores ``page_max``, or neither scope fetches a
    neighbour past its page (then the test no longer tests the case)."""
    qs = QueryService(kb)
    seen_neighbour_drop = False
    for page, question in (
        (5, "What does the DMCA say about the limitations on liability of service providers?"),
        (5, "Which exemptions and limitations does Title I list?"),
        (5, DMCA_QUESTION),
        (10, "What conditions apply to caching of retained material by a service provider?"),
    ):
        for mode in ("hybrid", "bm25"):
            res = qs.retriever.retrieve(
                question, Scope(doc_names=["dmca.pdf"], page_min=page, page_max=page), 5, mode, neighbors=5
            )
            assert res.chunks and all(c.page_start == page and c.page_end == page for c in res.chunks)
            seen_neighbour_drop |= any("left out" in n for n in res.notes)
    # the situation the issue describes did occur: a neighbour past page_max was fetched and left out
    assert seen_neighbour_drop


# questions about the three sample PDFs (the DMCA summary, two NTSB reports) and a few about
# documents the knowledge base does not hold
QUESTIONS = [
    DMCA_QUESTION,
    "What does the DMCA say about circumventing technological protection measures?",
    "Which exemptions from the anti-circumvention rules does the DMCA give libraries and archives?",
    "What conditions apply to caching of retained material by a service provider?",
    "What does Title II of the DMCA say about the liability of online service providers?",
    "What was the probable cause of the accident?",
    "How old was the pilot who hit trees on final approach to his private airstrip?",
    "What registration did the aircraft involved in the Tallahassee accident carry?",
    "Who was the investigator in charge of the accident?",
    "What were the wind and visibility at the time of the accident?",
    "How many hours had the pilot flown in the 90 days before the accident?",
    "What was Apple's net sales in the third quarter of 2023?",
    "Which dose of the vaccine was given to the trial's participants?",
]


@pytest.fixture(scope="module")
def api(kb):
    from ragaudit.api.app import create_app

    with TestClient(create_app(kb.settings)) as client:  # the same shared services as ``kb``
        yield client


def _sse(body: str) -> dict[str, dict]:
    out = {}
    for block in body.replace("\r\n", "\n").split("\n\n"):
        ev = next((ln[6:].strip() for ln in block.splitlines() if ln.startswith("event:")), None)
        data = "\n".join(ln[5:].strip() for ln in block.splitlines() if ln.startswith("data:"))
        if ev and data:
            out.setdefault(ev, json.loads(data))
    return out


def _in_scope(item: dict, body: dict, doc_ids: dict[str, str]) -> list[str]:
    """What is wrong with one retrieved item (``doc_name, document_id, page_start, page_end,
    strategy``) for the request ``body``; checked here independently of ``ragaudit.retrieve.scope``."""
    bad = []
    names = set(body.get("doc_names") or []) | ({body["doc_name"]} if body.get("doc_name") else set())
    if names and item["doc_name"] not in names:
        bad.append(f"doc_name {item['doc_name']}")
    if body.get("knowledge_base") and body["knowledge_base"] != "default":
        bad.append(f"knowledge_base {body['knowledge_base']}")  # every sample is in "default"
    if body.get("document_ids") and doc_ids[item["doc_name"]] not in body["document_ids"]:
        bad.append(f"document_id of {item['doc_name']}")
    if body.get("strategy") and item.get("strategy") not in (None, body["strategy"]):
        bad.append(f"strategy {item.get('strategy')}")
    if body.get("page_min") and item["page_start"] < body["page_min"]:
        bad.append(f"page_start {item['page_start']} < {body['page_min']}")
    if body.get("page_max") and item["page_end"] > body["page_max"]:
        bad.append(f"page_end {item['page_end']} > {body['page_max']}")
    return bad


@st.composite
def scoped_requests(draw, questions, doc_ids):
    names = sorted(doc_ids) + ["not-ingested.pdf"]
    body = {
        "question": draw(st.sampled_from(questions)),
        "top_k": draw(st.integers(1, 8)),
        "mode": draw(st.sampled_from(["vector", "bm25", "hybrid"])),
    }
    how = draw(st.sampled_from(["none", "doc_name", "doc_names"]))
    if how == "doc_name":
        body["doc_name"] = draw(st.sampled_from(names))
    elif how == "doc_names":
        body["doc_names"] = draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
    if draw(st.booleans()):
        body["knowledge_base"] = draw(st.sampled_from(["default", "other"]))
    if draw(st.integers(0, 3)) == 0:
        body["document_ids"] = draw(
            st.lists(st.sampled_from(sorted(doc_ids.values())), min_size=1, max_size=2, unique=True)
        )
    if draw(st.booleans()):
        body["page_min"] = draw(st.integers(1, 18))
    if draw(st.booleans()):
        body["page_max"] = draw(st.integers(body.get("page_min", 1), 18))
    if draw(st.integers(0, 3)) == 0:
        body["strategy"] = draw(st.sampled_from(["sentence", "fixed"]))
    return draw(st.sampled_from(["/query", "/query/stream", "/search"])), body


def test_random_scopes_return_nothing_out_of_scope(kb, api):
    """Property: for random scopes (doc_name / doc_names, knowledge_base, document_ids, page range,
    strategy) x mode x endpoint (/query, /query/stream, /search) over ``QUESTIONS``, no
    ``retrieved`` item and no citation lies outside the scope; citations name a retrieved chunk on
    a page inside the range. Each /query and /search request is preceded by the same question
    without a scope, whose cached reply must not be served for the scoped one. 40 examples, derandomized (the same examples on every run). Fails if neighbour
    expansion, the cache key or any endpoint bypasses ``enforce_scope`` / the Qdrant filter, or if
    ``clip_to_pages`` leaves text of a page outside the range."""
    doc_ids = {d["doc_name"]: d["id"] for d in api.get("/documents").json()}
    questions = QUESTIONS
    stats = {"requests": 0, "items": 0, "citations": 0, "cache_hits": 0, "clipped": 0}

    @settings(
        max_examples=40,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(scoped_requests(questions, doc_ids))
    def check(req):
        path, body = req
        if path == "/query/stream":
            with api.stream("POST", path, json=body) as r:
                assert r.status_code == 200, body
                ev = _sse("".join(r.iter_text()))
            retrieved = ev["sources"]["sources"]
            citations = ev["done"]["citations"]
        else:
            # the same request without a scope first: its reply is cached, and must not be served
            # for the scoped request (the cache key holds the scope)
            unscoped = {k: body[k] for k in ("question", "top_k", "mode")}
            assert api.post(path, json=unscoped).status_code == 200
            r = api.post(path, json=body)
            assert r.status_code == 200, (body, r.text)
            out = r.json()
            retrieved, citations = out["retrieved"], out.get("citations", [])
            stats["cache_hits"] += bool((out.get("cache") or {}).get("hit"))
            stats["clipped"] += any("cut to the pages" in n for n in out.get("notes", []))
        stats["requests"] += 1
        stats["items"] += len(retrieved)
        stats["citations"] += len(citations)
        for item in retrieved:
            assert not _in_scope(item, body, doc_ids), (
                path,
                body,
                item["doc_name"],
                item["page_start"],
                item["page_end"],
                _in_scope(item, body, doc_ids),
            )
        ids = {x["chunk_id"] for x in retrieved}
        for c in citations:
            assert c["chunk_id"] in ids, (path, body, c)
            fake = {"doc_name": c["doc_name"], "page_start": c["page"], "page_end": c["page"]}
            assert not _in_scope(fake, body, doc_ids), (path, body, c)

    check()
    # the property was exercised, not vacuous: items, citations and cache hits were checked
    assert stats["items"] > 40 and stats["citations"] > 5 and stats["cache_hits"] >= 1, stats


def test_a_scope_that_holds_no_chunk_is_refused_saying_so(kb):
    """A scope naming no indexed document ("dmca.PDF": names match exactly; knowledge base "Default";
    pages past the document's end) is refused with "Nothing was searched" and a note naming the
    scope, in /query's reply and in retrieval's notes (/search); a scope that holds chunks keeps
    the ordinary outcome. Fails if a typo in a scope reads like "the documents do not say"."""
    qs = QueryService(kb)
    for scope in (
        Scope(doc_names=["dmca.PDF"]),
        Scope(knowledge_base="Default"),
        Scope(doc_names=["dmca.pdf"], page_min=400),
    ):
        out = qs.ask(DMCA_QUESTION, scope)
        assert out["label"] == "refused" and "Nothing was searched" in out["answer"], out["answer"]
        assert any("no indexed chunk is in the scope" in n for n in out["notes"]), out["notes"]
        res = qs.retriever.retrieve(DMCA_QUESTION, scope, 5, "bm25")
        assert res.scope_empty and not res.chunks
    out = qs.ask("What is the airspeed velocity of an unladen swallow?", Scope(doc_names=["dmca.pdf"]))
    assert "Nothing was searched" not in out["answer"] and out["answer"].startswith("The documents do not")
    assert not any("no indexed chunk" in n for n in out["notes"])
    assert not qs.retriever.retrieve(DMCA_QUESTION, Scope(doc_names=["dmca.pdf"]), 5, "bm25").scope_empty


def test_an_empty_index_says_nothing_was_searched(tmp_path, embedder):
    """A fresh install (or a process pointed at the wrong data folder) holds no chunk: an unscoped
    question is refused with "Nothing was searched" and how to ingest, in /query's reply and in
    /search's notes, not with "nothing in the searched documents matches it" as if the documents
    had been read. Fails if an empty index reads like a question the documents do not answer."""
    from ragaudit.api.app import create_app
    from ragaudit.services import get_services, release_services
    from tests.conftest import make_settings

    settings = make_settings(tmp_path / "data")
    get_services(settings)
    try:
        with TestClient(create_app(settings)) as client:
            out = client.post("/query", json={"question": DMCA_QUESTION}).json()
            assert out["label"] == "refused", out
            assert (
                out["answer"].startswith("Not answered. Nothing was searched") and "ingest PDFs first" in out["answer"]
            )
            assert "do not contain" not in out["answer"], out["answer"]  # no document was read
            hits = client.post("/search", json={"question": DMCA_QUESTION}).json()
            assert not hits["retrieved"] and any("holds no document yet" in n for n in hits["notes"]), hits
    finally:
        release_services(settings)


def test_an_index_with_documents_never_reports_itself_empty(kb):
    """The unscoped counterpart on a populated index: a question nothing matches is refused as not
    answered by the documents, never as an empty index (the count runs only when no chunk came back)."""
    qs = QueryService(kb)
    out = qs.ask("What is the airspeed velocity of an unladen swallow?")
    assert out["label"] == "refused" and "Nothing was searched" not in out["answer"], out["answer"]
    res = qs.retriever.retrieve("zzqxw", Scope(), 5, "bm25")
    assert not res.chunks and not res.scope_empty and not any("no document yet" in n for n in res.notes)


@pytest.mark.parametrize(
    "question,doc",
    [
        ("If I file to protect the shape of my boat's hull, for how long am I covered?", "dmca.pdf"),
        ("Which chapter does the Vessel Hull Design Protection Act add to Title 17?", "dmca.pdf"),
    ],
)
def test_offline_answer_quoting_an_abbreviation_is_audited_as_answered(kb, question, doc):
    """The offline answerer quotes whole sentences and cites each; its audit must not call them
    uncited. Fails if the answer's sentence split cuts a quote at the period of an abbreviation
    ("Title 17 of the U.S. Code"): the fragment before it counted as a sentence citing
    nothing (label ``uncited``) and the rest as a claim without its quote (16 of 77 answerable dev
    questions were labelled ``uncited`` that way: "Apple Inc.", "Michelle L. Collins", "St. Kitts")."""
    out = QueryService(kb).ask(question, Scope(doc_names=[doc]), log_query=False)
    quoted = " ".join(c["quote"] for c in out["citations"])
    assert "U.S. Code" in quoted, quoted  # the case: an abbreviation inside a quoted sentence
    assert out["citation_check"]["uncited_sentences"] == [], out["citation_check"]
    assert out["citation_check"]["unsupported"] == [], out["citation_check"]
    assert out["label"] == "answered", out["answer"]


def test_a_refusal_lists_no_uncited_sentences_and_its_quote_is_checked(kb):
    """A refusal says what was searched ("The documents do not contain the answer ... do not mention
    X.") and quotes the closest passage. Fails if those statements are reported as uncited claims
    (``citation_check.ok`` was false on every refusal), or if the closest passage's citation is not
    checked any more (it must name a real source and its quote be verified)."""
    out = QueryService(kb).ask("Who won the 2019 Tour de France?", log_query=False)
    assert out["label"] == "refused", out["answer"]
    check = out["citation_check"]
    assert check["uncited_sentences"] == [] and check["invalid_numbers"] == [], check
    assert check["cited"] and check["ok"], check
    assert out["citations"] and all(c["verified"] for c in out["citations"]), out["citations"]

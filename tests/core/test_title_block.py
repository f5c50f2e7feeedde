"""A question asking who wrote a document is answered from its title block (``retrieval.title_block``,
``ragaudit.text.authorship``): a paper prints its authors and their institutions once, under its
title, in words the question does not use ("Who are the authors?" shares no word with "Vladimir
Karpukhin∗, Barlas Oğuz∗, ..."). Real PDF, the real Qdrant Edge store and embedding model."""

from __future__ import annotations

import pytest

from ragaudit.answer.answerers import AUTHORS_BONUS, answer_type_bonus
from ragaudit.text.authorship import asks_authorship, prints_authors
from ragaudit.types import Mode, Scope
from tests.conftest import DATA, SAMPLES


@pytest.mark.parametrize(
    "question",
    [
        "Who are the authors of the DPR paper?",
        "Who wrote the judgment?",
        "Who authored this report?",
        "List the authors of the paper.",
        "What are the authors' affiliations?",
        "Which institutions are the authors affiliated with?",
    ],
)
def test_questions_asking_who_wrote_a_document(question):
    assert asks_authorship(question)


@pytest.mark.parametrize(
    "question",
    [
        "What setting do the authors recommend for the parameter mL?",
        "How reliably could the authors' web scraper pull the body text?",
        "Which institution regulates the bonds?",
        "Who signed the agreement for the sponsor?",
    ],
)
def test_questions_that_only_mention_authors_do_not_ask_who_they_are(question):
    assert not asks_authorship(question)


def test_how_title_blocks_print_their_authors():
    assert prints_authors("Zejiang Shen1, Ruochen Zhang2, Melissa Dell3, Benjamin Charles Germain")
    assert prints_authors("[J.K. Maheshwari* and Vijay Bishnoi, JJ.]")
    assert prints_authors("A field guide by Andrea Spadaccini")
    assert not prints_authors("The Court and the Senate agreed.")
    assert not prints_authors("Judgment of the High Court and of the Tribunal.")
    # the bonus goes to a first-page sentence printing names, for a question asking who wrote it
    names = "Vladimir Karpukhin∗, Barlas Oğuz∗, Sewon Min†, Patrick Lewis,"
    assert answer_type_bonus("Who are the authors of the paper?", names) == AUTHORS_BONUS
    assert answer_type_bonus("Who are the authors of the paper?", names, first_page=False) == 0.0
    assert answer_type_bonus("Who are the authors of the paper?", "We train DPR on NQ.") == 0.0
    assert answer_type_bonus("What setting do the authors recommend?", names) == 0.0


@pytest.fixture(scope="module")
def papers(tmp_path_factory, embedder):
    """The DPR paper (13 pages) and the DMCA summary, ingested."""
    from ragaudit.ingest.documents import ingest_bytes
    from ragaudit.pipelines.runner import DagsterRunner
    from ragaudit.services import get_services, release_services
    from tests.conftest import make_settings

    settings = make_settings(tmp_path_factory.mktemp("papers"))
    svc = get_services(settings)
    for path in (DATA / "karpukhin2020-dpr.pdf", SAMPLES / "dmca.pdf"):
        assert ingest_bytes(svc, path.read_bytes(), path.name, DagsterRunner()).status == "ingested"
    yield svc
    release_services(settings)


def test_who_wrote_a_paper_is_answered_from_its_title_block(papers):
    """Fails if the opening passage is not brought to rank 1 for a question asking who wrote the
    paper, or if the answer does not quote the author list: before, the passages repeating
    "paper" and "DPR" were quoted and the author list never was."""
    from ragaudit.query import QueryService

    qs = QueryService(papers)
    question = "Who are the authors of the DPR paper?"
    ret = qs.retriever.retrieve(question, Scope(), 5, Mode.hybrid)
    top = ret.chunks[0]
    assert top.doc_name == "karpukhin2020-dpr.pdf" and top.page_start == 1 and "Karpukhin" in top.text
    assert "retrieval.title_block" in [f.rule for f in ret.rules]
    out = qs.ask(question, log_query=False)
    assert out["label"] == "answered", out["answer"]
    first = out["citations"][0]
    assert (first["doc_name"], first["page"]) == ("karpukhin2020-dpr.pdf", 1)
    assert "Vladimir Karpukhin" in out["answer"] and "Danqi Chen" in out["answer"]
    # only the title block is quoted: the sentences repeating "paper" and "DPR" answer nothing
    assert {(c["doc_name"], c["page"]) for c in out["citations"]} == {("karpukhin2020-dpr.pdf", 1)}, out["answer"]
    assert "retrieval.title_block" in [r["rule"] for r in out["rules"]]

    # switched off, the opening passage is not among the top 5: the rule is what finds it
    qs.retriever.title_block_on = False
    try:
        off = qs.retriever.retrieve(question, Scope(), 5, Mode.hybrid)
    finally:
        qs.retriever.title_block_on = True
    assert all(c.page_start > 1 or "Karpukhin" not in c.text for c in off.chunks)


def test_where_the_authors_work_is_not_refused_for_the_word_institution(papers):
    """Fails if "universities" (printed nowhere: the title block names "University of Washington")
    refuses a question asking where the authors work."""
    from ragaudit.query import QueryService

    out = QueryService(papers).ask("Which universities are the DPR paper's authors affiliated with?", log_query=False)
    assert out["label"] == "answered", out["answer"]
    assert "University of Washington" in out["answer"] and "Princeton University" in out["answer"]


def test_a_question_mentioning_the_authors_is_not_sent_to_the_title_block(papers):
    from ragaudit.query import QueryService

    ret = QueryService(papers).retriever.retrieve(
        "Which library do the authors use to index the passage embeddings offline?", Scope(), 5, Mode.hybrid
    )
    assert "retrieval.title_block" not in [f.rule for f in ret.rules]

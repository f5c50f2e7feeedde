"""Passage ranking (ragaudit.retrieve.passage_rank) on small candidate lists written here."""

import pytest

from ragaudit.retrieve import passage_rank
from ragaudit.retrieve.passage_rank import FEATURES, Candidate, answer_type, features, order

DAM = [
    "Turner Dam inspection report. The Turner Dam was inspected in August. The inspection of the "
    "dam covered the spillway and the outlet of Turner Dam.",
    "Turner Dam inspection: the embankment of the dam shows minor seepage at the toe. Turner Dam "
    "inspection staff noted the outlet works.",
    "Turner Dam inspection. Based on this inspection the recommended safe storage level is Full "
    "Storage.\nThe next inspection of the dam is due next year.",
]


def col(name):
    return FEATURES.index(name)


def test_a_term_every_candidate_holds_weighs_nothing_and_the_answering_window_comes_first():
    """ "Turner", "Dam" and "inspection" are in every candidate: by local IDF they weigh nothing,
    so the window holding "safe storage level" and "recommended" decides, and the third fused
    candidate comes first. Fails if the common words counted, or if the fused order stood."""
    q = "What safe storage level did the inspection recommend for Turner Dam?"
    cands = [Candidate(t, "dam.pdf", i) for i, t in enumerate(DAM, start=1)]
    f = features(q, cands)
    assert f[0, col("window_coverage")] == 0.0 and f[1, col("window_coverage")] == 0.0
    assert f[2, col("window_coverage")] == pytest.approx(1.0)
    idx, scores = order(q, cands)
    assert idx[0] == 2 and scores[2] > scores[0]
    # a question of the common words only gives every candidate the same coverage: the fused order stands
    idx, _ = order("When was the Turner Dam inspection?", cands)
    assert idx == [0, 1, 2]


def test_a_value_of_the_asked_type_beside_the_terms_counts_for_a_number_question():
    """Both passages hold "write cycles"; only one holds a number in the same window. The typed
    coverage is the window's coverage there and 0 in the other; for a question that asks no
    number neither counts."""
    cands = [
        Candidate("Write Cycle Timing\nSCL SDA diagram of the write cycle", "eeprom.pdf", 1),
        Candidate("Features\nEndurance: 100,000 Write Cycles\nData Retention: 40 Years", "eeprom.pdf", 2),
        Candidate("Pin names and the package outline", "eeprom.pdf", 3),
    ]
    f = features("How many write cycles is the memory rated for?", cands)
    typed = col("typed_window_coverage")
    assert f[1, typed] > 0 and f[0, typed] == 0.0
    assert f[1, col("number_density")] > f[0, col("number_density")] == 0.0
    g = features("Why does the memory limit its write cycles?", cands)
    assert g[:, typed].tolist() == [0.0, 0.0, 0.0] and g[:, col("number_density")].tolist() == [0.0, 0.0, 0.0]


def test_a_name_of_the_question_weighs_less_than_its_other_words(monkeypatch):
    """ "Madill" is printed once, on the report's first lines; the pilot's age is on another chunk.
    At full weight the name alone would cover more of the question than the answer's window."""
    q = "How old was the pilot in the Madill, Oklahoma accident?"
    cands = [
        Candidate("Location: Madill, Oklahoma Case Number: DFW08CA044\nAircraft: Cessna 152", "r.pdf", 1),
        Candidate("The pilot, age 17, held a student pilot certificate.", "r.pdf", 2),
        Candidate("Weather at the airport was clear; the wind was calm.", "r.pdf", 3),
    ]
    w = col("window_coverage")
    f = features(q, cands)
    assert f[1, w] > f[0, w]
    monkeypatch.setattr(passage_rank, "NAME_WEIGHT", 1.0)
    g = features(q, cands)
    assert g[0, w] > g[1, w]


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("How many shares were repurchased?", "number"),
        ("What percentage of members voted?", "number"),
        ("When was the agreement signed?", "date"),
        ("In which year did the survey start?", "date"),
        ("How long is the warranty, and when does it start?", "number"),
        ("Who signed the report?", "person"),
        ("Why is there no ratio control?", None),
    ],
)
def test_answer_type(question, kind):
    assert answer_type(question) == kind


def test_positions_and_documents_are_features_too():
    """The fused position and the best position of the candidate's document enter the score: with
    no word of the question anywhere, the best document's passages come first, each document's in
    fused order (the third candidate, of the first one's document, passes the second)."""
    cands = [
        Candidate(t, d, i) for i, (t, d) in enumerate([("alpha", "a.pdf"), ("beta", "b.pdf"), ("gamma", "a.pdf")], 1)
    ]
    f = features("Which delta?", cands)
    assert f[:, col("document_best")].tolist() == [1.0, 0.5, 1.0]
    assert f[0, col("log_position")] == 0.0
    idx, _ = order("Which delta?", cands)
    assert idx == [0, 2, 1]
    assert order("Which delta?", [])[0] == []

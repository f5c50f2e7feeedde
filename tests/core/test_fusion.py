"""Reciprocal Rank Fusion (Cormack et al., SIGIR 2009) as implemented in ragaudit.retrieve.retriever."""

import pytest

from ragaudit.retrieve.retriever import Fusion, distribution_score_fusion, reciprocal_rank_fusion
from ragaudit.types import Mode


def test_rrf_scores_and_order():
    fused = dict(reciprocal_rank_fusion({"vector": ["a", "b", "c"], "bm25": ["c", "a"]}, k=60))
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert fused["b"] == pytest.approx(1 / 62)
    order = [pid for pid, _ in reciprocal_rank_fusion({"vector": ["a", "b", "c"], "bm25": ["c", "a"]}, k=60)]
    assert order == ["a", "c", "b"]


def test_rrf_k_changes_weighting_and_must_be_positive():
    lists = {"vector": ["x", "y"], "bm25": ["y", "z"]}
    assert reciprocal_rank_fusion(lists, k=1)[0][0] == "y"
    with pytest.raises(ValueError):
        reciprocal_rank_fusion(lists, k=0)


def test_mode_errors_list_valid_values():
    with pytest.raises(ValueError, match="vector, bm25, hybrid, hybrid_rerank"):
        Mode.parse("dense")


def test_exact_ties_are_broken_by_the_second_signal_deterministically():
    """fails if an exact RRF tie is left to input order: (1, 4) and (4, 1) have the same score,
    the chunk that matches the question's identifier (or has the higher BM25 score) must win
    whichever list is given first."""
    lists = {"vector": ["twin", "x", "y", "exact"], "bm25": ["exact", "x", "y", "twin"]}
    flipped = {"bm25": lists["bm25"], "vector": lists["vector"]}
    tb = {"exact": (1, 3.5, 0.62), "twin": (0, 0.4, 0.66)}
    for ls in (lists, flipped):
        fused = reciprocal_rank_fusion(ls, k=60, tiebreak=tb)
        order = [pid for pid, _ in fused]
        assert dict(fused)["exact"] == pytest.approx(dict(fused)["twin"])
        assert order.index("exact") == order.index("twin") - 1
    # without a second signal the id decides, never the order of the input lists
    assert reciprocal_rank_fusion(lists)[:2] == reciprocal_rank_fusion(flipped)[:2]


def test_rrf_fill_keeps_one_retrievers_clear_hit():
    """A chunk at dense rank 7 that BM25 does not return: plain RRF puts it below every chunk both
    lists returned (fused rank 19 here); fails if rrf_fill does not lift it above chunks that
    both lists rank in their bottom half."""
    top, mid, bottom = [f"t{i}" for i in range(6)], [f"m{i}" for i in range(4)], [f"z{i}" for i in range(8)]
    dense = top + ["solo"] + mid + ["d1"] + bottom
    bm25 = top + mid + ["b1", "b2"] + bottom
    plain = [pid for pid, _ in reciprocal_rank_fusion({"vector": dense, "bm25": bm25})]
    filled = [pid for pid, _ in reciprocal_rank_fusion({"vector": dense, "bm25": bm25}, fill_missing=True)]
    assert plain.index("solo") == 18  # below every chunk both lists returned
    assert filled.index("solo") <= 12  # above the chunks both lists rank 14th or lower
    assert all(filled.index("solo") < filled.index(z) for z in bottom[1:])


def test_distribution_based_score_fusion():
    """DBSF scales each list over mean +- 3 sd; fails if raw score scales leak through (BM25
    scores in the tens would otherwise always beat cosine similarities)."""
    fused = dict(distribution_score_fusion({"vector": {"a": 0.9, "b": 0.5, "c": 0.1}, "bm25": {"a": 10.0, "c": 30.0}}))
    assert set(fused) == {"a", "b", "c"}
    assert all(0.0 <= v <= 2.0 for v in fused.values())
    assert fused["a"] > fused["b"]  # top of the dense list and present in BM25
    with pytest.raises(ValueError, match="rrf, rrf_fill, dbsf"):
        Fusion.parse("borda")


def test_a_tie_left_after_the_scores_goes_by_position_not_by_point_id():
    """Point ids embed the random document id, so two ingestions of the same PDFs give the same
    chunks other ids: a tie the scores leave open was broken by the id string, and one probe
    question's answer changed between two fresh ingestions (the named-document leg fused its two
    scoped lists with no second signal at all). Fails if the order follows the ids."""
    from ragaudit.index.store import PointHit
    from ragaudit.retrieve.retriever import Retriever

    r = Retriever.__new__(Retriever)
    r.fusion, r.rrf_k, r.table_vote = "rrf", 60, True
    r._fill_payloads = lambda hits, ids: None
    orders = []
    for first, second in (("a-id", "b-id"), ("b-id", "a-id")):  # the same two chunks, ids swapped
        p5 = {"doc_name": "r.pdf", "chunk_index": 5, "text": "runway 04", "header": ""}
        p0 = {"doc_name": "r.pdf", "chunk_index": 0, "text": "runway 04", "header": ""}
        hits = {
            "vector": {first: PointHit(first, 0.5, p5), second: PointHit(second, 0.5, p0)},
            "bm25": {second: PointHit(second, 3.0, p0), first: PointHit(first, 3.0, p5)},
        }
        fused, votes = r._fuse("How long was the runway?", hits, {n: list(h) for n, h in hits.items()})
        assert votes == {}  # prose: no table chunk
        orders.append([hits["vector"][pid].payload["chunk_index"] for pid, _ in fused])
    assert orders == [[0, 5], [0, 5]], orders


def _statement_and_prose():
    """The income statement rows and an MD&A paragraph of Apple's Q3 2023 10-Q (tests/data)."""
    from tests.conftest import DATA
    from tests.pdf_pages import pages as extract_pages_once

    pages = extract_pages_once(DATA / "2023 Q3 AAPL.pdf")
    text = pages[3].text
    start = text.index("Cost of sales:")
    statement = text[start : text.index("Operating income", start)]
    mdna = next(p.text for p in pages if "The growth in research and development" in p.text)
    start = mdna.index("Research and Development\n")
    return statement, mdna[start : mdna.index("Provision for Income Taxes", start)]


def test_a_table_chunk_naming_the_questions_row_gets_bm25s_rank_as_its_dense_vote():
    """The dense leg cannot read a column of numbers: Microsoft's income statement ("Gross margin
    40,215 34,670") was dense rank 56 for "What was the reported gross margin ...?" and BM25 rank
    5, and RRF left it at 11 under prose both legs ranked in the middle. A table chunk holding a
    row whose whole label the question names takes BM25's rank for the dense vote too; prose,
    a table the question names no row of, and a "why" question do not. Fails if the vote is lost
    or given to what cannot be a row value."""
    from ragaudit.index.store import PointHit
    from ragaudit.retrieve.retriever import Retriever, is_table_chunk, table_votes

    statement, prose = _statement_and_prose()
    assert is_table_chunk(statement) and not is_table_chunk(prose)
    q = "How much did Apple spend on research and development in the third quarter of 2023?"
    texts = {"prose": prose, "table": statement}
    assert table_votes(q, ["prose", "table"], texts) == {"table": 2}
    assert table_votes("What is Apple's business address?", ["prose", "table"], texts) == {}
    assert table_votes("Why did research and development expense increase?", ["prose", "table"], texts) == {}

    r = Retriever.__new__(Retriever)
    r.fusion, r.rrf_k = "rrf", 60
    r._fill_payloads = lambda hits, ids: None
    dense = ["p1", "p2", "p3", "p4"]  # prose the dense leg likes; it never returned the table
    bm25 = ["table", "p4", "p3"]
    payload = {pid: {"text": prose, "header": "", "doc_name": "a.pdf", "chunk_index": i} for i, pid in enumerate(dense)}
    payload["table"] = {"text": statement, "header": "", "doc_name": "a.pdf", "chunk_index": 9}
    hits = {
        "vector": {pid: PointHit(pid, 0.5 - i / 100, payload[pid]) for i, pid in enumerate(dense)},
        "bm25": {pid: PointHit(pid, 9.0 - i, payload[pid]) for i, pid in enumerate(bm25)},
    }
    order = {}
    for on in (False, True):
        r.table_vote = on
        fused, votes = r._fuse(q, hits, {"vector": dense, "bm25": bm25})
        order[on] = [pid for pid, _ in fused]
        assert votes == ({"table": 1} if on else {})
    assert order[False].index("table") >= 2 and order[True][0] == "table", order
    assert dict(fused)["table"] == pytest.approx(2 / 61)  # BM25's 1 / (k + 1), counted for both legs


def test_a_legs_exact_tie_goes_by_position_not_by_point_id():
    """Two overlapping chunks share a sentence window, so the dense leg gives them one MaxSim score
    (0.743768 for two chunks of Amazon's Q3 2023 10-Q), and the store returns such ties in point id
    order. Point ids embed the random document id: two fresh ingestions of the same PDFs ranked the
    two chunks in opposite orders and the answer quoted another sentence. Each leg's exact ties go by
    (document, chunk index). Fails if the leg's order follows the ids."""
    from ragaudit.index.store import PointHit
    from ragaudit.retrieve.retriever import Retriever

    r = Retriever.__new__(Retriever)
    r._fill_payloads = lambda hits, ids: None  # payloads already there
    orders = []
    for first, second in (("a-id", "b-id"), ("b-id", "a-id")):  # the same two chunks, ids swapped
        leg = [
            PointHit("top", 0.9, {"doc_name": "z.pdf", "chunk_index": 9}),
            PointHit(first, 0.743768, {"doc_name": "q3.pdf", "chunk_index": 152}),
            PointHit(second, 0.743768, {"doc_name": "q3.pdf", "chunk_index": 151}),
            PointHit("low", 0.5, {"doc_name": "a.pdf", "chunk_index": 0}),
        ]
        orders.append([h.payload["chunk_index"] for h in r._by_position(leg).values()])
    assert orders == [[9, 151, 152, 0], [9, 151, 152, 0]], orders


def test_the_named_documents_check_breaks_fusion_ties_by_position_not_by_point_id():
    """Before re-ranking within the documents a question's names select, the retriever checks
    whether the two legs' fused top passages already all come from them. That check fused with
    ties broken by point id, and point ids embed the random document id: on two fresh ingestions
    of the same eleven PDFs, a question ("how much did Apple spend on research and development")
    was answered from Apple's 10-Q on one index and Intel's on the other. Fails if the check's
    verdict follows the ids of two exactly tied passages."""
    from ragaudit.index.store import PointHit
    from ragaudit.retrieve.retriever import Retriever

    r = Retriever.__new__(Retriever)
    r.fusion, r.rrf_k, r.table_vote = "rrf", 60, True
    r._fill_payloads = lambda hits, ids: None
    verdicts = []
    for apple, intel in (("a-id", "b-id"), ("b-id", "a-id")):  # the same two chunks, ids swapped
        pa = {"doc_name": "AAPL.pdf", "chunk_index": 4, "document_id": "aapl", "text": "research", "header": ""}
        pi = {"doc_name": "INTC.pdf", "chunk_index": 5, "document_id": "intc", "text": "research", "header": ""}
        # dense ranks Apple's chunk 1st and Intel's 2nd, BM25 the other way round: an exact RRF tie
        hits = {
            "vector": {apple: PointHit(apple, 0.6, pa), intel: PointHit(intel, 0.5, pi)},
            "bm25": {intel: PointHit(intel, 9.0, pi), apple: PointHit(apple, 9.0, pa)},
        }
        verdicts.append(r._top_already_in("What did Apple spend on research?", hits, ["aapl"], 1))
    assert verdicts[0] == verdicts[1], verdicts


def test_a_row_with_a_code_between_its_label_and_numbers_is_named_by_its_leading_label():
    """A table of connection points prints location, voltage, a code and two factors per row
    ("Riverbend North 132 QRBN 0.9649 0.9560"): read from its trailing numbers, the row's label
    would be "Riverbend North 132 QRBN", which no question names. Fails if the table chunk does
    not get its table vote for a question naming "Riverbend North", or gets one for a place it
    does not list."""
    from ragaudit.retrieve.retriever import is_table_chunk, table_votes

    table = "\n".join(
        [
            "Table 4 Northern loads",
            "Location Voltage [kV] TNI code 2020/21 MLF 2019/20 MLF",
            "Ashford Vale 33 QASV 1.0161 1.0164",
            "Riverbend North 132 QRBN 0.9649 0.9560",
            "Riverbend North 33 QRBS 0.9710 0.9641",
            "Stony Point West 110 QSPW 1.0142 1.0128",
            "Tarrawong Hills 66 QTWH 0.9141 0.9100",
        ]
    )
    prose = "Loss factors for each connection point are published before the financial year begins."
    assert is_table_chunk(table)
    texts = {"prose": prose, "table": table}
    q = "What is the 2020/21 loss factor for the Riverbend North 33 kV connection point?"
    assert table_votes(q, ["prose", "table"], texts) == {"table": 2}
    assert table_votes("What is the loss factor for Lake Corrigan?", ["prose", "table"], texts) == {}

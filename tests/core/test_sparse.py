"""The BM25 tokenizer keeps identifiers whole; document vectors follow the BM25 tf saturation."""

import pytest

from ragaudit.index.sparse import (
    ABBREVIATION_WEIGHT,
    ROW_LABEL_WEIGHT,
    abbreviation_terms,
    acronym_queries,
    bm25_document_vector,
    bm25_query_vector,
    language_terms,
    question_row_terms,
    row_label_terms,
    term_id,
    text_language,
    tokenize,
)


@pytest.mark.parametrize(
    "ident",
    [
        "16.11.1",
        "snake_case",
        "hr_schema.employees",
        "cve-2021-44228",
        "94-2404110",
        "10/28/1998",
        "qibm_db_secadm",
        "nyc08ca055",
    ],
)
def test_identifiers_stay_single_tokens(ident):
    toks = tokenize(f"see {ident.upper()} here")
    assert ident in toks


def test_identifiers_also_indexed_split_and_words_stemmed():
    toks = tokenize("HR_SCHEMA.EMPLOYEES running")
    assert {"hr", "schema", "employe", "run"} <= set(toks)
    assert "the" not in tokenize("the pilot")


def test_cjk_bigrams():
    toks = tokenize("授信额度")
    assert {"授信", "信额", "额度", "授"} <= set(toks)


def test_bm25_saturation_and_length_normalisation():
    k1, b, avgdl = 1.2, 0.75, 10.0
    v = bm25_document_vector("pilot pilot pilot landing", k1, b, avgdl)
    w = dict(zip(v.indices, v.values))
    dl = 4
    norm = k1 * (1 - b + b * dl / avgdl)
    assert w[term_id("pilot")] == pytest.approx(3 * (k1 + 1) / (3 + norm))
    assert w[term_id("land")] == pytest.approx(1 * (k1 + 1) / (1 + norm))
    q = dict(zip(*bm25_query_vector("pilot pilot").__dict__.values()))
    assert q[term_id("pilot")] == 1.0  # once per distinct term
    assert q[term_id("abbr:pil")] == ABBREVIATION_WEIGHT and q[term_id("row:pilot pilot")] == ROW_LABEL_WEIGHT
    assert len(q) == 5  # pilot + abbr:pi/pil/pilo + the row label "Pilot pilot" it could name


def _dot(q, d):
    dw = dict(zip(d.indices, d.values))
    return sum(w * dw.get(i, 0.0) for i, w in zip(q.indices, q.values))


def test_abbreviations_match_the_words_they_shorten():
    footnote = "1 Pub. L. No. 105-304, 112 Stat. 2860 (Oct. 28, 1998)."
    assert abbreviation_terms(footnote) == ["abbr:pub", "abbr:stat", "abbr:oct"]
    q = bm25_query_vector("What is the Public Law number and Statutes at Large citation?")
    assert _dot(q, bm25_document_vector(footnote)) > 0  # no shared word: only the abbreviations match
    assert _dot(q, bm25_document_vector("An unrelated sentence about boats.")) == 0


def test_sentence_final_words_and_stop_words_are_not_abbreviations():
    assert abbreviation_terms("It amends the Act. The Office reports. See Fig. 3 and Sec. 512, Dept. of Labor") == [
        "abbr:fig",
        "abbr:sec",
        "abbr:dept",
    ]
    assert abbreviation_terms("No. 5") == []  # "no" is a stop word


def test_mixed_case_names_are_also_indexed_split():
    toks = tokenize("CuratedTREC and TriviaQA, getUserName")
    assert {"curatedtrec", "curat", "trec", "triviaqa", "trivia", "qa", "getusername", "get", "user", "name"} <= set(
        toks
    )
    assert tokenize("DB2 NQ") == ["db2", "nq"]  # no case change inside: unchanged


def test_capitalised_runs_ask_for_their_acronym():
    assert acronym_queries("What top-20 accuracy does BM25 reach on Natural Questions?") == {"nq"}
    assert "dmca" in acronym_queries("Who signed the Digital Millennium Copyright Act?")
    assert acronym_queries("What Is it") == set()  # a question word does not start a run
    q = bm25_query_vector("accuracy on Natural Questions")
    assert _dot(q, bm25_document_vector("Retriever NQ TriviaQA WQ")) > 0


def test_latin_run_glued_to_cjk_is_its_own_token():
    """fails if a Latin run inside CJK text is lost or swallowed by the CJK bigrams ("IREXの基準")."""
    toks = tokenize("IREXの基準")
    assert "irex" in toks and {"の基", "基準"} <= set(toks)
    assert {"amazon", "惠普", "主要"} <= set(tokenize("惠普云主要架在Amazon上"))
    assert "istio_requests_total" in tokenize("指标istio_requests_total指标")


def test_unicode_variants_fold_for_matching():
    """fails if dash variants, full-width forms or ligatures make a different token than the
    plain form (the question types "PC-12/47E", the page has "PC–12/47E")."""
    assert tokenize("PC–12/47E") == tokenize("PC-12/47E") == tokenize("PC—12/47E")
    assert "pc-12/47e" in tokenize("PC–12/47E")
    assert tokenize("ＩＲＥＸの基準") == tokenize("IREXの基準")
    assert tokenize("ﬁnancial ﬂow") == tokenize("financial flow")
    q = bm25_query_vector("PC-12/47E")
    assert _dot(q, bm25_document_vector("The Pilatus PC–12/47E was damaged.")) > _dot(
        q, bm25_document_vector("The Pilatus PC–12 was damaged.")
    )


# lines of a real statement page (Microsoft's 10-Q income statement, Amazon's segment table)
STATEMENT = """Cost of revenue:
Service and other 12,771 11,150
Total cost of revenue 16,302 15,452
Gross margin 40,215 34,670
Research and development $ 7,709 $ 6,306
Operating loss $ (2,466) $ (95) $ (5,518) $ (2,237)
Effective tax rate 696.2 % 642.0 % 51.4 % (1.3)%
Net income — — — — 9,243 9,243
Professional Visualization (1) 416 200 1,090 1,318
Our effective tax rate was 18% and 19% for the three months ended September 30, 2023 and 2022"""


def test_table_rows_are_indexed_by_their_whole_label():
    terms = row_label_terms(STATEMENT)
    # "Service and other": one word once "and other" are out, as "Total", "Revenue": no particular row
    assert terms == [
        "row:total cost revenu",
        "row:cost revenu",
        "row:gross margin",
        "row:research develop",
        "row:oper loss",
        "row:effect tax rate",
        "row:net incom",
        "row:profession visual",
    ]
    # a heading without cells and a prose line ending in numbers name no row
    assert not row_label_terms(
        "Cost of revenue:\nOur effective tax rate was 18% and 19% for the three months ended "
        "September 30, 2023 and 2022"
    )


def test_a_question_naming_a_row_matches_its_label_not_its_scattered_words():
    q = bm25_query_vector("How much did Apple spend on research and development?")
    assert "row:research develop" in question_row_terms("How much did Apple spend on research and development?")
    assert not any(" " not in t for t in question_row_terms("How much did Apple spend on research and development?"))
    row = bm25_document_vector(
        "Operating expenses:\nResearch and development $ 7,709 $ 6,306",
        rows=("Operating expenses:\nResearch and development $ 7,709 $ 6,306"),
    )
    same_words = bm25_document_vector("Operating expenses:\nResearch and development $ 7,709 $ 6,306")
    text = "Research and, in some markets, development continue."
    prose = bm25_document_vector(text, rows=text)
    assert _dot(q, row) == pytest.approx(_dot(q, same_words) + ROW_LABEL_WEIGHT * 1.0)  # query weight x presence
    assert _dot(q, prose) < _dot(q, row)
    # the row term is not length-normalised and does not lengthen the passage
    long_row = "\n".join(["Research and development $ 7,709 $ 6,306"] + [f"Item {i} {i},000" for i in range(60)])
    w = dict(zip(*bm25_document_vector(long_row, rows=long_row).__dict__.values()))
    assert w[term_id("row:research develop")] == 1.0
    assert dict(zip(*bm25_document_vector(long_row).__dict__.values()))[term_id("research")] == w[term_id("research")]


def test_a_table_row_label_is_read_in_time_linear_in_the_line():
    """A line of many numbers that is no row ("... 8 , 4 ) )" in SQL, a long list of figures)
    made the row regular expression backtrack for milliseconds per line, which was most of
    retrieval's fusion time (the speed is measured by ``python -m bench``, not here). Fails if a
    row's label is not found, if a nil percentage ("— %") is not a cell, if a header of dates or
    a code line is taken for a row, or if a 400-number line is misread."""
    from ragaudit.index.sparse import row_label

    assert row_label("Gross margin 40,215 34,670") == "Gross margin"
    assert row_label("Research and development $ 7,709 $ (6,306)") == "Research and development"
    assert row_label("Graphics 1,493 606 887 146 % 3,751 3,739 12 — %") == "Graphics"
    assert row_label("Effective tax rate 696.2 % (1.3)%") == "Effective tax rate"
    assert row_label("July 30, July 31, $ %") is None
    assert row_label("SUBSTR ( C . TAX_ID , 8 , 4 ) )") is None
    assert row_label("1,234 5,678") is None  # no label
    long_line = "Figures " + " ".join(["1,234"] * 400) + " end"
    assert row_label(long_line) is None
    assert row_label("Figures " + " ".join(["1,234"] * 400)) == "Figures"


def test_a_document_and_a_question_in_another_language_share_its_stems():
    """Fails if a Spanish, German or French text is not recognised as such, if an English question
    (or a few words) is taken for another language, or if the Spanish stem that joins "dura" (the
    question) and "duran" (the constitution) is missing from the document vector or, with
    ``languages``, from the query vector; or if English text gets another language's stems."""
    es = "El Presidente y vicepresidente duran en sus funciones el término de cuatro años y podrán ser reelegidos."
    assert text_language(es) == "es"
    assert (
        text_language("Das Grundgesetz kann nur durch ein Gesetz geändert werden, das seinen Wortlaut ändert.") == "de"
    )
    assert text_language("Quelle est la durée du mandat du Président de la République française ?") == "fr"
    for en in ("What was the 12-month percent change in the beef index?", "NVIDIA revenue Q3 2023", "PC-12/47E"):
        assert text_language(en) is None, en
    q = "¿Cuánto dura el mandato del Presidente de la Nación?"
    assert "dur" in language_terms(es, "es") and "dur" in language_terms(q, text_language(q))
    assert language_terms("The presidents served four years.", None) == []
    doc = bm25_document_vector(es, language="es")
    with_stems = set(bm25_query_vector(q, languages=True).indices) & set(doc.indices)
    without = set(bm25_query_vector(q).indices) & set(bm25_document_vector(es).indices)
    assert term_id("dur") in with_stems and term_id("dur") not in without

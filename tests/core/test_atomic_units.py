"""Chunks never cut a SQL statement or a list item, on small PDFs made here: a statement is whole
when it fits in a chunk, else cut between clauses only (never inside a ``WHEN ... THEN ( ... )``
arm); a list item of several sentences is whole when it fits, else cut at sentence ends only,
and an item running over a page break counts with its continuation."""

from __future__ import annotations

import pytest
from fpdf import FPDF

from ragaudit.ingest.chunking import (
    ATOMIC_UNITS_REVISION,
    chunk_document,
    code_clauses,
    code_statements,
    document_list_items,
    document_text,
)
from ragaudit.ingest.pdf import extract_pages

FILLER = [f"Paragraph {i} says something about the annual meeting and the board of the company." for i in range(1, 9)]


def _pdf(pages_lines: list[list[str]]):
    pdf = FPDF(unit="pt", format=(612, 792))
    pdf.set_auto_page_break(False)
    pdf.set_font("Helvetica", size=9)
    for lines in pages_lines:
        pdf.add_page()
        y = 40
        for ln in lines:
            if ln:
                pdf.text(40, y, ln)
            y += 12
    return extract_pages(bytes(pdf.output()))


def _holding(chunks, needle: str):
    return [c for c in chunks if needle in c.text]


SQL = [
    "To implement this column mask, run the SQL statement that is shown in the next example.",
    "CREATE MASK HR_SCHEMA.MASK_TAX_ID_ON_EMPLOYEES",
    "ON HR_SCHEMA.EMPLOYEES AS EMPLOYEES",
    "FOR COLUMN TAX_ID",
    "RETURN",
    "CASE",
    "WHEN VERIFY_GROUP_FOR_USER ( SESSION_USER , 'HR' ) = 1",
    "THEN EMPLOYEES . TAX_ID",
    "WHEN VERIFY_GROUP_FOR_USER ( SESSION_USER , 'MGR' ) = 1",
    "AND SESSION_USER = EMPLOYEES . USER_ID",
    "THEN EMPLOYEES . TAX_ID",
    "WHEN VERIFY_GROUP_FOR_USER ( SESSION_USER , 'MGR' ) = 1",
    "AND SESSION_USER <> EMPLOYEES . USER_ID",
    "THEN ( 'XXX-XX-' CONCAT QSYS2 . SUBSTR ( EMPLOYEES . TAX_ID , 8 , 4 ) )",
    "WHEN VERIFY_GROUP_FOR_USER ( SESSION_USER , 'EMP' ) = 1",
    "THEN C . TAX_ID",
    "ELSE 'XXX-XX-XXXX'",
    "END",
    "ENABLE ;",
]
ARM = (
    "WHEN VERIFY_GROUP_FOR_USER ( SESSION_USER , 'MGR' ) = 1\nAND SESSION_USER <> EMPLOYEES . USER_ID\n"
    "THEN ( 'XXX-XX-' CONCAT QSYS2 . SUBSTR ( EMPLOYEES . TAX_ID , 8 , 4 ) )"
)


def test_sql_statement_and_clauses_are_found():
    """fails if ``code_statements`` misses the statement (or runs it into the prose after it) or
    ``code_clauses`` splits a ``WHEN ... AND ... THEN ( ... )`` arm."""
    pages = _pdf([FILLER[:3] + SQL + FILLER[3:]])
    t = pages[0].text
    stmts = code_statements(t)
    assert [t[a:b].split("\n")[0] for a, b in stmts] == ["CREATE MASK HR_SCHEMA.MASK_TAX_ID_ON_EMPLOYEES"]
    assert t[stmts[0][0] : stmts[0][1]].endswith("ENABLE ;")
    assert ARM in [t[a:b] for a, b in code_clauses(t, stmts)]
    # prose that starts with a keyword or ends in a semicolon is not code; a one-line statement is
    assert code_statements("Select the option you want; then continue.\nSET the value;") == []
    one = "SET CURRENT SCHEMA HR_SCHEMA;"
    assert code_statements(f"Then run this:\n{one}\nDone.") == [(15, 15 + len(one))]


def test_comment_lines_above_a_statement_belong_to_it():
    """fails if the ``/* ... */`` or ``--`` comment lines that document a statement are left out
    of it (``_SQL_COMMENT``): a chunk could then end with the comments and start the next with
    the statement they describe."""
    lead = "Run the SQL statements that are shown in the example.\n"
    code = "/* Active Row Access Control (permissions) */\n-- and the masks\nALTER TABLE HR.EMPLOYEES\nACTIVATE ROW ACCESS CONTROL;"
    assert code_statements(lead + code + "\nThen look at the table.") == [(len(lead), len(lead) + len(code))]


@pytest.mark.parametrize("max_tokens", [220, 256])
def test_sql_statement_whole_when_it_fits(embedder, max_tokens):
    """fails if a SQL statement that fits in a chunk is not one unit: the sentence splitter cuts
    it at "THEN C ." and the packer closes a chunk between its lines."""
    chunks = chunk_document(
        _pdf([FILLER[:5] + SQL + FILLER[5:]]), embedder, "redp", "sentence", max_tokens, atomic_units=True
    )
    holding = _holding(chunks, "CREATE MASK")
    assert holding and all("ENABLE ;" in c.text and "THEN C . TAX_ID" in c.text for c in holding)


@pytest.mark.parametrize("max_tokens", [90, 120, 150])
def test_long_sql_statement_is_cut_between_clauses(embedder, max_tokens):
    """fails if a statement too long for one chunk is cut inside a clause (``code_clauses``
    not merged): the ``WHEN ... AND ... THEN ( 'XXX-XX-' CONCAT ... )`` arm must be whole in a
    chunk, and no chunk starts with a clause's continuation or ends inside a bracket."""
    chunks = chunk_document(
        _pdf([FILLER[:3] + SQL + FILLER[3:]]), embedder, "redp", "sentence", max_tokens, atomic_units=True
    )
    assert not any("CREATE MASK" in c.text and "ENABLE ;" in c.text for c in chunks), "the statement should not fit"
    assert any(ARM in c.text for c in chunks)
    for c in chunks:
        first = c.text.lstrip().split("\n")[0]
        assert not first.startswith(("THEN", "AND ")), first
        assert c.text.count("(") == c.text.count(")"), c.text[-80:]


ITEM = [
    "- Managers see a masked version of the tax number. The first five characters are replaced",
    "with the X character. For example, XXX-XX-1234 is what a manager sees on the screen.",
]
LIST = (
    [
        "The rules to enforce include the following ones:",
        "- Human Resources can see the unmasked number of the employees.",
    ]
    + ITEM
    + ["- Employees can see only their own number."]
)


@pytest.mark.parametrize("max_tokens", [60, 80, 100, 120])
def test_list_item_of_several_sentences_stays_whole(embedder, max_tokens):
    """fails if the sentences of one list item (``list_items``) can be packed into two chunks."""
    chunks = chunk_document(
        _pdf([FILLER[:3] + LIST + FILLER[3:]]), embedder, "redp", "sentence", max_tokens, atomic_units=True
    )
    holding = _holding(chunks, "Managers see")
    assert holding and all("XXX-XX-1234 is what a manager sees on the screen." in c.text for c in holding)


def _wrapped(paragraph: str, width: int = 90) -> list[str]:
    """``paragraph`` wrapped into lines that never end at a sentence end (so the lines form one
    paragraph, as in a PDF whose sentence runs on to the next line)."""
    words, lines, cur = paragraph.split(), [], ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > width and not cur.endswith("."):
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}" if cur else w
    return lines + [cur]


def test_list_item_longer_than_a_chunk_is_cut_at_sentence_ends(embedder):
    """fails if an over-long item is cut anywhere but at a sentence end, or if the item after it
    is merged into it (``list_items`` must end an item where the next bullet starts)."""
    long_item = "1. Quorum. " + " ".join(
        f"Clause {i} of the quorum rule applies to each meeting of the board." for i in range(1, 13)
    )
    lines = (
        FILLER[:2]
        + _wrapped(long_item)
        + ["2. Notice. Notice of each meeting is given ten days before it."]
        + FILLER[2:]
    )
    pages = _pdf([lines])
    text, _ = document_text(pages)
    items = document_list_items(pages)
    assert [text[a:b][:10] for a, b in items] == ["1. Quorum.", "2. Notice."]
    assert " ".join(text[items[0][0] : items[0][1]].split()).endswith(
        "Clause 12 of the quorum rule applies to each meeting of the board."
    )
    chunks = chunk_document(pages, embedder, "bylaws", "sentence", 80, atomic_units=True)
    a, b = items[0]
    assert not any(c.char_start <= a and b <= c.char_end for c in chunks), "the item should not fit in one chunk"
    for c in chunks:
        if a < c.char_end < b:  # a boundary inside the long item falls at a sentence end
            assert text[: c.char_end].endswith("board."), text[c.char_end - 40 : c.char_end]
    assert any(text[items[1][0] : items[1][1]] in c.text for c in chunks)


def test_list_item_over_a_page_break_counts_with_its_continuation(embedder):
    """fails if ``document_list_items`` ends an item at the page break when its sentence runs on
    to the next page, or if the chunker cuts such an item although it fits in a chunk."""
    p1 = FILLER[:6] + [
        "(a) Eligibility. Whenever the Board solicits proxies for an annual meeting, it shall include in",
        "its proxy materials the name of any person nominated for election to",
    ]
    p2 = [
        "the Board by an eligible stockholder. The stockholder must hold three percent of the shares.",
        "(b) Number. The maximum number of nominees is two.",
    ] + FILLER[6:]
    pages = _pdf([p1, p2])
    text, _ = document_text(pages)
    items = document_list_items(pages)
    assert text[items[0][0] : items[0][1]].endswith("three percent of the shares.")
    for max_tokens in (80, 100, 140):
        chunks = chunk_document(pages, embedder, "bylaws", "sentence", max_tokens, atomic_units=True)
        assert any(c.char_start <= items[0][0] and items[0][1] <= c.char_end for c in chunks), max_tokens
        assert any(c.page_start == 1 and c.page_end == 2 for c in chunks if "(a) Eligibility" in c.text)


BACK_COVER = [
    "Back cover",
    "This paper describes how row and column access control protects the columns of a table.",
    "It offers examples of row permissions and column masks for each kind of user.",
    "Readers should know object level security and the SQL language.",
    "Experts from around the world",
    "wrote this paper",
    "from their own projects.",
    "For more information:",
    "example.com/papers",
    "REDP-9999-00",
]
MORE = [f"Section {i} explains one more rule of the board about the annual meeting." for i in range(1, 12)]


def test_last_chunk_is_the_documents_last_window(embedder):
    """The last chunk is the document's last window up to the model's limit: the same text
    whether an early page holds a SQL statement kept whole or not (whole statements move every
    later boundary; on redp5110 the back cover's publication number was left in a tail chunk
    without the text saying what the publication is). Fails if the tail is left where greedy
    packing ends it (``_pack(full_tail=False)``), if it passes the model's limit, or if a chunk
    whose own units all sit in the last chunk is kept (a near-duplicate)."""
    lasts = []
    for first in (FILLER + MORE, FILLER[:3] + SQL + FILLER[3:] + MORE):
        pages = _pdf([first, BACK_COVER])
        text, _ = document_text(pages)
        chunks = chunk_document(pages, embedder, "redp", "sentence", 200, atomic_units=True)
        last = chunks[-1]
        assert last.text.endswith("REDP-9999-00") and "This paper describes" in last.text
        assert embedder.count_tokens([last.indexed_text])[0] <= embedder.max_content_tokens
        for prev, c in zip([None] + chunks[:-2], chunks[:-1]):
            own_from = max(c.char_start, prev.char_end if prev else 0)
            assert text[own_from : last.char_start].strip(), f"chunk {c.index} repeats the last chunk"
        lasts.append(last.text)
    assert lasts[0] == lasts[1]


def test_chunk_atomic_units_setting_reaches_ingestion(tmp_path, embedder):
    """``RAGAUDIT_CHUNK_ATOMIC_UNITS=true`` ingests dmca.pdf with the atomic-unit chunker (its
    chunks equal ``chunk_document(..., atomic_units=True)``, which differ from those with it off) and
    records it in the build info as the chunker's revision (``ATOMIC_UNITS_REVISION``, so a version
    built by the revision without the last-window rule, recorded as ``True``, is re-chunked); off,
    the build info has no such key (fingerprints of versions built before the setting are
    unchanged). Fails if the setting is not passed to the chunker or is left out of the
    fingerprint when on, or if the recorded value matches the first revision's."""
    from sqlalchemy import select

    from ragaudit.ingest.chunking import document_title
    from ragaudit.ingest.documents import build_info, ingest_bytes
    from ragaudit.pipelines.runner import DagsterRunner
    from ragaudit.platform.db import ChunkRow
    from ragaudit.services import get_services, release_services
    from tests.conftest import SAMPLES, make_settings

    settings = make_settings(tmp_path / "on", chunk_atomic_units=True)
    svc = get_services(settings)
    try:
        data = (SAMPLES / "dmca.pdf").read_bytes()
        out = ingest_bytes(svc, data, "dmca.pdf", DagsterRunner())
        assert out.status == "ingested", out
        with svc.sessions() as s:
            stored = [
                t for t in s.scalars(select(ChunkRow.text).where(ChunkRow.live.is_(True)).order_by(ChunkRow.index))
            ]
        recorded = build_info(svc, "sentence")["chunk_atomic_units"]
        assert recorded == ATOMIC_UNITS_REVISION and recorded is not True and recorded != 1
    finally:
        release_services(settings)
    pages = extract_pages(data)
    title = document_title("dmca.pdf", pages)
    st = settings
    kw = dict(embedder=embedder, overlap_fraction=st.chunk_overlap_fraction)
    on = chunk_document(
        pages, embedder, title, "sentence", st.chunk_max_tokens, st.chunk_overlap_sentences, atomic_units=True, **kw
    )
    off = chunk_document(
        pages, embedder, title, "sentence", st.chunk_max_tokens, st.chunk_overlap_sentences, atomic_units=False, **kw
    )
    assert stored == [c.text for c in on] and stored != [c.text for c in off]
    off_settings = make_settings(tmp_path / "off", chunk_atomic_units=False)
    svc = get_services(off_settings)
    try:
        assert "chunk_atomic_units" not in build_info(svc, "sentence")
    finally:
        release_services(off_settings)


def test_atomic_units_are_the_default_and_builds_without_them_are_rechunked(fresh_services, monkeypatch):
    """Atomic units are on by default (``Settings`` and ``chunk_document``), and a document built
    with them off (no ``chunk_atomic_units`` key in its build info) is stale under the default:
    ``reindex.plan`` names it with ``chunk_atomic_units: None -> <revision>``, and
    once rebuilt it is current. Fails if the default is off again, if the chunker's default and the
    setting's disagree, or if ``_changed_settings`` misses a key present only in the current build
    info (versions chunked without atomic units would be kept)."""
    import inspect

    from sqlalchemy import select

    from ragaudit.ingest import reindex
    from ragaudit.ingest.chunking import DEFAULT_ATOMIC_UNITS
    from ragaudit.ingest.documents import ingest_bytes
    from ragaudit.pipelines.runner import DagsterRunner
    from ragaudit.platform.db import Document
    from ragaudit.platform.settings import Settings
    from tests.conftest import SAMPLES

    assert Settings.model_fields["chunk_atomic_units"].default is True
    assert inspect.signature(chunk_document).parameters["atomic_units"].default is DEFAULT_ATOMIC_UNITS is True
    svc = fresh_services
    now = svc.settings
    assert now.chunk_atomic_units is True  # the test settings keep the default
    monkeypatch.setattr(svc, "settings", now.model_copy(update={"chunk_atomic_units": False}))
    doc = ingest_bytes(svc, (SAMPLES / "20080102X00002.pdf").read_bytes(), "a.pdf", DagsterRunner()).document
    assert "chunk_atomic_units" not in doc["built_with"]
    assert reindex.plan(svc).todo == []
    monkeypatch.setattr(svc, "settings", now)
    p = reindex.plan(svc)
    assert [(d.doc_name, d.reasons) for d in p.todo] == [
        ("a.pdf", [f"chunk_atomic_units: None -> {ATOMIC_UNITS_REVISION}"])
    ]
    out = reindex.run(svc, DagsterRunner())
    assert [r["doc_name"] for r in out["reingested"]] == ["a.pdf"] and not out["failed"]
    assert reindex.plan(svc).todo == []
    with svc.sessions() as s:
        built = s.scalars(select(Document.built_with).where(Document.doc_name == "a.pdf")).one()
    assert built["chunk_atomic_units"] == ATOMIC_UNITS_REVISION

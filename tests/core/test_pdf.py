"""Bad input is refused with a specific error; odd but valid PDFs open; pages are exact."""

import pytest

from ragaudit.ingest.pdf import (
    CorruptPDFError,
    EmptyFileError,
    EncryptedPDFError,
    NotAPDFError,
    NoTextError,
    collapse_leaders,
    extract_pages,
    inspect_pdf,
)
from tests.conftest import BAD, DATA, EDGE, SAMPLES

EXPECTED = {
    "NCT06155240_Prot_SAP_000.pdf": (NoTextError, "no extractable text"),
    "crazyones-encrypted-256.pdf": (EncryptedPDFError, "password-protected"),
    "image-only-3pages.pdf": (NoTextError, "3 page(s)"),
    "libreoffice-writer-password.pdf": (EncryptedPDFError, "password-protected"),
    "ocr_test.pdf": (NoTextError, "scanned or image-only"),
    "password-example.pdf": (EncryptedPDFError, "password"),
    "plain-text-renamed.pdf": (NotAPDFError, "not a PDF"),
    "table-multi-row-column-cells.pdf": (NoTextError, "no text layer"),
    "truncated-2kb-dpr.pdf": (CorruptPDFError, "corrupt or truncated"),
    "truncated-half-dpr.pdf": (CorruptPDFError, "corrupt or truncated"),
    "zero-byte.pdf": (EmptyFileError, "empty file"),
}


def test_every_bad_file_is_covered():
    names = {p.name for p in BAD.glob("*.pdf")}
    assert names - {"pdf-bad-color-space.pdf"} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_bad_file_refused_with_specific_message(name):
    exc, words = EXPECTED[name]
    with pytest.raises(exc) as info:
        inspect_pdf((BAD / name).read_bytes())
    assert words in str(info.value)


def test_bad_color_space_uses_fallback_extractor():
    data = (BAD / "pdf-bad-color-space.pdf").read_bytes()
    inspect_pdf(data)
    pages = extract_pages(data)
    assert pages[0].extractor == "pypdfium2"
    assert len(pages[0].text) > 2000
    # PDFium's hyphen marker (U+FFFE, a noncharacter) is read as the hyphen it stands for
    assert "\ufffe" not in pages[0].text and "Scope 2 (market-based)" in pages[0].text


@pytest.mark.parametrize("name", ["copy-protected.pdf", "zen_of_python_corrupted.pdf"])
def test_edge_files_open(name):
    data = (EDGE / name).read_bytes()
    info = inspect_pdf(data)
    pages = extract_pages(data)
    assert info.pages == len(pages) and sum(len(p.text) for p in pages) > 500


def test_near_empty_pdf_refused():
    with pytest.raises(NoTextError, match=r"almost no extractable text \(\d characters\)"):
        inspect_pdf((EDGE / "malformed-from-issue-932.pdf").read_bytes())


def test_empty_password_encryption_opens_with_exact_pages():
    data = (SAMPLES / "dmca.pdf").read_bytes()
    info = inspect_pdf(data)
    assert info.encrypted and info.pages == 18
    pages = extract_pages(data)
    assert [p.number for p in pages] == list(range(1, 19))
    assert "signed into law by" in pages[0].text
    assert "ten years from the date protection begins" in pages[16].text


def test_tightly_set_words_stay_apart():
    """DPR page 4 is set tightly: a fixed 3 pt word gap glued its words together."""
    pages = extract_pages((DATA / "karpukhin2020-dpr.pdf").read_bytes())
    assert "effective strategy for learning a dual-encoder model" in pages[3].text
    assert "CuratedTREC 1,353 1,125 133 694" in pages[3].text  # table rows keep their layout


def test_cid_coded_page_comes_from_pypdfium2():
    """Page 3 of the Redpaper sample uses fonts without a Unicode map: pdfminer returns (cid:NN)."""
    pages = extract_pages((DATA / "redp5110_sampled.pdf").read_bytes())
    assert pages[2].extractor == "pypdfium2" and "(cid:" not in pages[2].text
    assert "Because no one else is IBM." in pages[2].text
    assert pages[1].extractor == "pdfplumber" and len(pages) == 18


def test_chinese_pages_keep_their_words_unspaced():
    pages = extract_pages((DATA / "chinese-tables.pdf").read_bytes())
    assert "尚未使用的授信额度为120.47亿元" in pages[0].text.replace(" ", "").replace("\n", "")
    assert "授信额度" in pages[0].text


def test_table_of_contents_dot_leaders_collapse():
    pages = extract_pages((DATA / "redp5110_sampled.pdf").read_bytes())
    toc = pages[1].text
    assert "Notices … vii" in toc and "1.3 DB2 for i security controls … 3" in toc
    assert ". . . ." not in toc and "...." not in toc
    assert collapse_leaders("Wait... what? Preface . . . . . . xi") == "Wait... what? Preface … xi"

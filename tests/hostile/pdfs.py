"""Hostile PDFs built on the fly (a few KB in the repo would hide what they are), and the
functions the bound tests run in a child process (kept here: the child imports this light
module, not the test module with the whole app)."""

from __future__ import annotations

import zlib


def bomb_pdf(inflated_mb: int = 50) -> bytes:
    """A valid one-page PDF whose content stream is ~150 KB of Flate data that inflates to
    ``inflated_mb`` MB of text-drawing operators (a decompression bomb: 1:300)."""
    c = zlib.compressobj(9)
    line = b"BT /F1 12 Tf 72 712 Td (bomb) Tj ET\n"
    block = line * (1024 * 1024 // len(line))
    stream = b"".join([c.compress(block) for _ in range(inflated_mb)] + [c.flush()])
    return one_page_pdf(
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    )


def one_page_pdf(contents: bytes, font: bytes) -> bytes:
    """A one-page US Letter PDF file: ``contents`` (the content stream object, dictionary and
    stream) drawn with ``font`` (a font dictionary) as ``/F1``, with its cross-reference table."""
    return pdf_file(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
            b"/Resources << /Font << /F1 5 0 R >> >> >>",
            contents,
            font,
        ]
    )


def pdf_file(objs: list[bytes]) -> bytes:
    """A PDF file of the objects ``objs`` (numbered from 1; object 1 is the catalog), with its
    cross-reference table."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, o in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + o + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    for o in offsets:
        out += b"%010d 00000 n \n" % o
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    return bytes(out)


def hog_memory() -> int:
    """Allocates 2 GB."""
    return len(bytearray(2 * 1024**3))


def spin() -> None:
    """Never returns."""
    while True:
        pass


def refuse() -> None:
    from ragaudit.ingest.pdf import NoTextError

    raise NoTextError("no text here")

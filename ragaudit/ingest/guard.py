"""Per-document time and memory bounds on PDF parsing, and the page limit.

A hostile or broken PDF can make a parser loop (pdfminer on a crafted content stream) or eat
memory (a decompression bomb: a few hundred KB that inflate to gigabytes). Validation
(``inspect_pdf``) and extraction (``extract_pages``) therefore run in a child process with
``RLIMIT_AS`` (address space, MB) and a wall-clock timeout; the serving process is never the
one that blows up. On a breach the child is killed and the document is refused with
``PDFTooComplexError`` (HTTP 422) saying which bound was hit.

Children come from a ``forkserver`` started once per process with ``ragaudit.ingest.pdf`` preloaded, so a
call costs a fork (~10-30 ms), not an interpreter start, and never forks the (threaded) server
itself. ``parse_timeout_s <= 0`` runs inline without bounds (used by benchmarks of the parser).
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import resource
import threading
import time
from typing import Any, Callable

from ragaudit.ingest.pdf import Page, PDFError, PDFInfo, _open_pdfium, extract_pages, inspect_pdf

log = logging.getLogger(__name__)


class PDFTooComplexError(PDFError):
    """Parsing the PDF exceeded the per-document time or memory bound."""

    code = "too_complex"


class PDFTooManyPagesError(PDFError):
    """The PDF has more pages than ``max_pdf_pages``."""

    code = "too_many_pages"


_CTX_LOCK = threading.Lock()
_CTX: Any = None


def _context() -> Any:
    global _CTX
    with _CTX_LOCK:
        if _CTX is None:
            ctx = mp.get_context("forkserver")
            ctx.set_forkserver_preload(["ragaudit.ingest.pdf"])
            _CTX = ctx
        return _CTX


def _child(conn: Any, memory_mb: int, fn: Callable, args: tuple, progress: bool = False) -> None:
    try:
        limit = int(memory_mb) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        kw = {"on_page": lambda done, total: conn.send(("progress", done, total))} if progress else {}
        try:
            out: tuple = ("ok", fn(*args, **kw))
        except MemoryError:
            out = ("memory", None)
        except BaseException as e:  # a PDFError (refusal) or a parser crash: hand it to the parent
            out = ("error", e)
        try:
            conn.send(out)
        except (BrokenPipeError, ConnectionResetError, EOFError):
            pass  # the parent stopped waiting (timeout, shutdown): nobody is left to tell
        except Exception:  # an exception that does not pickle: send its text instead
            conn.send(("error", RuntimeError(f"{type(out[1]).__name__}: {str(out[1])[:300]}")))
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        conn.close()


def run_bounded(
    fn: Callable,
    args: tuple,
    *,
    timeout_s: float,
    memory_mb: int,
    what: str = "parsing",
    on_page: Callable[[int, int], None] | None = None,
) -> Any:
    """``fn(*args)`` in a child process limited to ``memory_mb`` MB of address space and
    ``timeout_s`` seconds; returns its result (pickled back).

    ``on_page(done, total)``: ``fn`` is called with an ``on_page`` keyword whose calls in the child
    reach this callback in the calling thread as they happen (pages extracted so far; an error
    in the callback is logged, never fails the parse).
    Raises what ``fn`` raised (e.g. ``PDFError``), or ``PDFTooComplexError`` when the time or
    memory bound is hit or the child dies (e.g. a native parser aborting on allocation failure).
    ``fn`` must be a module-level function (it is pickled by name)."""
    ctx = _context()
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, memory_mb, fn, args, on_page is not None), daemon=True)
    proc.start()
    child.close()
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            if not parent.poll(max(0.0, deadline - time.monotonic())):
                raise PDFTooComplexError(
                    f"PDF refused: {what} took longer than the {timeout_s:g} s bound per document "
                    "(RAGAUDIT_PDF_PARSE_TIMEOUT_S); the file may be crafted to stall the parser"
                )
            try:
                msg = parent.recv()
            except EOFError:  # the child died without answering (killed by the kernel, native abort)
                proc.join(5)
                raise PDFTooComplexError(
                    f"PDF refused: the parser died while {what} (exit code {proc.exitcode}); "
                    f"most likely it exceeded the {memory_mb} MB memory bound "
                    "(RAGAUDIT_PDF_PARSE_MEMORY_MB)"
                ) from None
            if msg[0] != "progress":
                status, value = msg
                break
            try:
                on_page(msg[1], msg[2])
            except Exception:
                log.exception("page progress callback failed")
    finally:
        parent.close()
        if proc.is_alive():
            proc.kill()
        proc.join(5)
    if status == "ok":
        return value
    if status == "memory":
        raise PDFTooComplexError(
            f"PDF refused: {what} needed more than the {memory_mb} MB memory bound per "
            "document (RAGAUDIT_PDF_PARSE_MEMORY_MB); the file may be a decompression bomb"
        )
    raise value


def _inspect(data: bytes, min_text_chars: int, max_pages: int) -> PDFInfo:
    doc = _open_pdfium(data)
    try:
        n = len(doc)
    finally:
        doc.close()
    if max_pages and n > max_pages:
        raise PDFTooManyPagesError(
            f"PDF refused: it has {n} pages; the limit is {max_pages} "
            "(RAGAUDIT_MAX_PDF_PAGES); split it into smaller documents"
        )
    return inspect_pdf(data, min_text_chars)


def inspect_pdf_bounded(data: bytes, settings: Any) -> PDFInfo:
    """``inspect_pdf`` plus the page limit (``max_pdf_pages``), under the time/memory bounds of
    ``settings`` (``pdf_parse_timeout_s``, ``pdf_parse_memory_mb``). Raises the ``PDFError``
    subclasses of ``inspect_pdf``, ``PDFTooManyPagesError`` or ``PDFTooComplexError``."""
    args = (data, settings.min_text_chars, settings.max_pdf_pages)
    if settings.pdf_parse_timeout_s <= 0:
        return _inspect(*args)
    return run_bounded(
        _inspect,
        args,
        timeout_s=settings.pdf_parse_timeout_s,
        memory_mb=settings.pdf_parse_memory_mb,
        what="validating",
    )


def extract_pages_bounded(data: bytes, settings: Any, on_page: Callable[[int, int], None] | None = None) -> list[Page]:
    """``extract_pages`` under the per-document time/memory bounds of ``settings``; raises its
    ``PDFError`` subclasses or ``PDFTooComplexError``. ``on_page(done, total)`` is called in this
    thread as pages are extracted (``run_bounded``)."""
    if settings.pdf_parse_timeout_s <= 0:
        return extract_pages(data, on_page=on_page)
    return run_bounded(
        extract_pages,
        (data,),
        timeout_s=settings.pdf_parse_timeout_s,
        memory_mb=settings.pdf_parse_memory_mb,
        what="extracting text",
        on_page=on_page,
    )


def _parse(data: bytes, min_text_chars: int, max_pages: int) -> tuple[PDFInfo, list[Page], dict[str, float]]:

    t0 = time.perf_counter()
    info = _inspect(data, min_text_chars, max_pages)
    t1 = time.perf_counter()
    pages = extract_pages(data)
    return (
        info,
        pages,
        {
            "validate": t1 - t0,
            "extract": time.perf_counter() - t1,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        },
    )


def parse_pdf_bounded(data: bytes, settings: Any) -> tuple[PDFInfo, list[Page], dict[str, float]]:
    """Validation (page limit, ``inspect_pdf``) and extraction (``extract_pages``) in ONE child
    process under the bounds of ``settings``: the bytes cross the process boundary once and one
    fork pays for both (bulk ingestion, ``ragaudit.ingest.bulk``). Returns ``(info, pages, stats)`` with
    ``stats = {"validate": s, "extract": s, "peak_rss_mb": MB}`` measured in the child. Raises like
    ``inspect_pdf_bounded`` and ``extract_pages_bounded``; the time bound covers both steps."""
    args = (data, settings.min_text_chars, settings.max_pdf_pages)
    if settings.pdf_parse_timeout_s <= 0:
        return _parse(*args)
    return run_bounded(
        _parse,
        args,
        timeout_s=settings.pdf_parse_timeout_s,
        memory_mb=settings.pdf_parse_memory_mb,
        what="validating and extracting text",
    )

"""Shared fixtures: real sample PDFs, a real ingested knowledge base (Qdrant local mode,
SQLite, bundled embedding model) and, for integration tests, a real PostgreSQL server."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

_MAIN_PID = os.getpid()
_STOPPED: list[str] = []  # the signal that asked the run to stop, once one has


def _terminated(signum, frame):
    """SIGTERM in the test process unwinds like Ctrl-C: pytest then tears the session's fixtures
    down, so the servers they started (the PostgreSQL of ``pg_url``, API and Dagster processes)
    stop with it instead of outliving it. A process forked from it dies as by default. Processes
    started with exec get SIGTERM's default action (a handler is not inherited; an ignore is).
    The stop is also recorded (``_STOPPED``): code that defers or swallows the interrupt (Dagster's
    in-process run holds it until its step ends) cannot keep the run going past the current test
    (``pytest_runtest_protocol``)."""
    if os.getpid() != _MAIN_PID:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    _STOPPED.append(signal.Signals(signum).name)
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _interrupted(signum, frame):
    """SIGINT (Ctrl-C): Python's own handler, the stop recorded as for SIGTERM."""
    if os.getpid() == _MAIN_PID:
        _STOPPED.append("SIGINT")
    signal.default_int_handler(signum, frame)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """After each test, a run asked to stop (SIGTERM, SIGINT) stops, tearing its fixtures down, even
    when the interrupt was swallowed inside the test."""
    yield
    if _STOPPED:
        item.session.shouldstop = f"stopped by {_STOPPED[0]}"


def _sigterm_not_ignored() -> None:
    """Give SIGTERM ``_terminated`` if it is ignored or at its default action, and give an ignored
    SIGINT Python's handler. SIGTERM gets ignored when the suite runs as a
    background job (the shell ignores SIGINT there) and Dagster's ``setup_interrupt_handlers`` maps
    SIGTERM to SIGINT's disposition; every process started afterwards inherits the ignore: Dagster's
    compute-log ``tail -F`` readers then survive their terminate() (each run waited its 30 s
    cleanup timeout, and the readers outlived the suite), and a server stopped with SIGTERM would
    not stop."""
    if signal.getsignal(signal.SIGTERM) in (signal.SIG_IGN, signal.SIG_DFL):
        signal.signal(signal.SIGTERM, _terminated)
    if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.default_int_handler):
        # Python's own Ctrl-C handler (recording the stop), as in a foreground run: what Dagster copies
        # onto SIGTERM is then a handler, which processes started later do not inherit (an ignore they would)
        signal.signal(signal.SIGINT, _interrupted)


_sigterm_not_ignored()


@pytest.fixture(autouse=True)
def sigterm_not_ignored():
    """Each test starts (and ends) with SIGTERM handled, never ignored (``_sigterm_not_ignored``)."""
    _sigterm_not_ignored()
    yield
    _sigterm_not_ignored()


os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
DATA = Path(__file__).resolve().parent / "data"
BAD = DATA / "bad"
EDGE = DATA / "edge"
CASES = DATA / "cases"  # small PDFs made for one fault each (tests/data/SOURCES.md)

DMCA_QUESTION = "On what date was the Digital Millennium Copyright Act signed into law?"


def fresh_python(code: str, *args: str, timeout: float = 300):
    """Run ``code`` in a new Python process (nothing this test session loaded or opened is shared)
    from the repository root with ``args`` as ``sys.argv[1:]``; its ``CompletedProcess`` (text)."""
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def make_settings(data_dir: Path, **kw):
    from ragaudit.platform.settings import Settings

    # explicit values: the tests never depend on the developer's RAGAUDIT_* environment
    # RAGAUDIT_TEST_STORE_BACKEND=local runs the suite on qdrant-client's local mode instead of Qdrant Edge
    base = dict(
        data_dir=data_dir,
        database_url="",
        qdrant_url="",
        llm_model="",
        embedding_model="bundled:all-MiniLM-L6-v2",
        store_backend=os.environ.get("RAGAUDIT_TEST_STORE_BACKEND", "edge"),
    )
    base.update(kw)
    return Settings(_env_file=None, **base)


_WORDS = (
    "harbour ledger orchard copper lantern meadow quarry signal timber valley beacon cellar "
    "compass dune ember falcon glacier hollow island juniper kestrel lagoon marble nectar oasis"
).split()


def finished_run(client, run_id: str, tries: int = 600, every_s: float = 0.2) -> dict:
    """``GET /evaluate/{run_id}`` through ``client`` until the run is ``done`` or ``failed`` (or
    ``tries`` polls ``every_s`` apart have passed); returns the last reply."""
    import time

    for _ in range(tries):
        got = client.get(f"/evaluate/{run_id}").json()
        if got["status"] in ("done", "failed"):
            break
        time.sleep(every_s)
    return got


def text_pdf(pages: int, topic: str) -> bytes:
    """A PDF of ``pages`` pages of plain English prose about ``topic`` (fpdf2, fixed creation
    date: the same arguments give the same bytes). Each page holds about 300 words in sentences
    that differ from page to page, so it chunks and embeds like a real report of that length."""
    import datetime

    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_creation_date(datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc))
    pdf.set_font("helvetica", size=11)
    for p in range(1, pages + 1):
        pdf.add_page()
        sentences = []
        for k in range(18):
            a, b = _WORDS[(p * 7 + k) % len(_WORDS)], _WORDS[(p * 3 + k * 5) % len(_WORDS)]
            sentences.append(
                f"On page {p} the {topic} survey records that the {a} station near the {b} "
                f"field measured {p * 100 + k} units during week {k + 1}."
            )
        pdf.multi_cell(0, 6, " ".join(sentences))
    return bytes(pdf.output())


@pytest.fixture(scope="module", autouse=True)
def ingest_workers_stop_with_their_app():
    """Every ingestion worker thread (``ragaudit.ingest.queue``, thread names ``ragaudit-ingest*``) a
    module starts has ended once the module's fixtures are torn down (its app's lifespan
    stopped it). Fails if an app is left running past its test data: its worker went on polling
    a deleted database ("could not read queued documents", sqlite "unable to open database
    file" at the end of the suite)."""
    import threading
    import time

    def workers() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name.startswith("ragaudit-ingest") and t.is_alive()}

    yield  # no app outlives its module (apps started at collection time included)
    deadline = time.monotonic() + 15  # a stop() may be waiting for a run to finish
    while (left := workers()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"{len(left)} ingestion worker thread(s) outlived their app (lifespan never stopped)"


@pytest.fixture(scope="session")
def embedder():
    from ragaudit.services import shared_embedder

    return shared_embedder("bundled:all-MiniLM-L6-v2")


@pytest.fixture(scope="session")
def kb(tmp_path_factory, embedder):
    """A knowledge base with the three sample PDFs ingested through the Dagster asset job."""
    from ragaudit.ingest.documents import ingest_bytes
    from ragaudit.pipelines.runner import DagsterRunner
    from ragaudit.services import get_services, release_services

    settings = make_settings(tmp_path_factory.mktemp("kb"))
    svc = get_services(settings)
    outcomes = {}
    for f in sorted(SAMPLES.glob("*.pdf")):
        outcomes[f.name] = ingest_bytes(svc, f.read_bytes(), f.name, DagsterRunner())
    assert all(o.status == "ingested" for o in outcomes.values()), outcomes
    svc.outcomes = outcomes  # type: ignore[attr-defined]
    yield svc
    release_services(settings)


@pytest.fixture()
def fresh_services(tmp_path, embedder):
    """An empty knowledge base of its own (for tests that change documents)."""
    from ragaudit.services import get_services, release_services

    settings = make_settings(tmp_path / "data")
    svc = get_services(settings)
    yield svc
    release_services(settings)


@pytest.fixture(scope="session")
def pg_url():
    """URL of a fresh database on a real PostgreSQL server started for this test session."""
    url = os.environ.get("RAGAUDIT_TEST_DATABASE_URL")
    if url:
        yield url
        return
    from tests.pg import PostgresServer

    server = PostgresServer()
    try:
        yield server.start()
    finally:
        server.stop()

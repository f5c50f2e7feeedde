"""A test run asked to stop stops, even when a test swallows the interrupt.

``tests/conftest.py`` turns SIGTERM and SIGINT into KeyboardInterrupt so that the session's
fixtures are torn down (``test_pg_teardown.py``). Code under test may catch that interrupt or
defer it (Dagster's in-process run holds it until its step ends); the run must still stop after
the current test rather than go on for half an hour. The test runs pytest on ``stop_holder.py`` in
a child process and signals it while its first test swallows the interrupt."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.system.stop_holder import PROBE

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_ends_the_run_after_the_test_that_swallowed_it(tmp_path, sig):
    """Fails if the second test of the child run runs, or if the child does not exit with pytest's
    'interrupted' status, naming the signal."""
    probe = tmp_path / "probe.txt"
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(Path(__file__).with_name("stop_holder.py")),
        ],
        cwd=ROOT,
        env={**os.environ, PROBE: str(probe)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 120
        while not probe.exists():
            assert child.poll() is None, child.stdout.read().decode(errors="replace")
            assert time.monotonic() < deadline, "the child's first test never started"
            time.sleep(0.05)
        child.send_signal(sig)
        out = child.communicate(timeout=120)[0].decode(errors="replace")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    lines = probe.read_text().split("\n")
    assert "interrupted" in lines, out  # the signal reached the test as KeyboardInterrupt
    assert "second test ran" not in lines, out
    assert child.returncode == pytest.ExitCode.INTERRUPTED, out
    assert f"stopped by {sig.name}" in out, out

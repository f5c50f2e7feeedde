"""The child run of ``test_stop_signal.py``: a test that swallows the interrupt a stop signal raises
(as Dagster's in-process run holds one until its step ends), then a test that must not run. Not
collected on its own (no ``test_`` prefix); that test runs this file."""

from __future__ import annotations

import os
import time
from pathlib import Path

PROBE = "RAGAUDIT_STOP_PROBE"


def test_swallows_the_interrupt():
    """Writes ``started`` to the file ``$RAGAUDIT_STOP_PROBE`` names, then waits 8 s, catching
    every KeyboardInterrupt."""
    probe = Path(os.environ[PROBE])
    probe.write_text("started\n")
    end = time.monotonic() + 8
    while time.monotonic() < end:
        try:
            time.sleep(0.05)
        except KeyboardInterrupt:
            with probe.open("a") as f:
                f.write("interrupted\n")


def test_runs_only_if_the_run_goes_on():
    with Path(os.environ[PROBE]).open("a") as f:
        f.write("second test ran\n")

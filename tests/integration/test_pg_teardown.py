"""A test run stopped with SIGTERM stops the PostgreSQL server its session started.

The test runs pytest on ``pg_holder.py`` (not collected on its own) in a child process, waits until that
test has the server up, sends the child SIGTERM and checks that the server's postmaster is gone
and its temporary folder removed. Without ``tests/conftest.py``'s SIGTERM handler the child dies
at once and the server keeps running.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.pg_holder import PROBE

ROOT = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie waiting to be reaped."""
    try:
        if Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1] == "Z":
            return False
    except (FileNotFoundError, IndexError):
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # the server runs as 'postgres' when the tests run as root
        return True
    return True


@pytest.mark.skipif(bool(os.environ.get("RAGAUDIT_TEST_DATABASE_URL")), reason="an existing server is used")
def test_sigterm_stops_the_session_postgres(tmp_path):
    probe = tmp_path / "server.txt"
    env = {**os.environ, PROBE: str(probe)}
    child = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(Path(__file__).with_name("pg_holder.py"))],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 120
        while not probe.exists() or len(probe.read_text().split()) < 2:
            assert child.poll() is None, child.stdout.read().decode(errors="replace")
            assert time.monotonic() < deadline, "the child test never had its server up"
            time.sleep(0.2)
        data_dir, pid = probe.read_text().split()
        assert _alive(int(pid))
        child.send_signal(signal.SIGTERM)
        out = child.communicate(timeout=120)[0].decode(errors="replace")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    deadline = time.monotonic() + 30
    while _alive(int(pid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    outlived = _alive(int(pid))
    if outlived:  # stop what the child left behind, then fail
        os.kill(int(pid), signal.SIGTERM)
        shutil.rmtree(Path(data_dir).parent, ignore_errors=True)
    assert not outlived, f"PostgreSQL (pid {pid}) outlived the stopped test run:\n{out}"
    assert not Path(data_dir).parent.exists(), out

"""CLI progress on stderr: plain lines with ETA when not a TTY, a tqdm bar on a terminal."""

from __future__ import annotations

import io

from ragaudit.api.progress import Progress


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_throttled_with_eta():
    """Not a TTY: the first update and the last always print, others at most every ``every_s``;
    ETA = elapsed / done x remaining. Fails if lines are printed per update or the ETA is wrong."""
    out = io.StringIO()
    p = Progress("eval", stream=out, every_s=3600)
    for i in range(1, 11):
        p.update(i, 10)
    p.close()
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("eval: 1/10 (10%), elapsed ") and lines[-1].startswith("eval: 10/10 (100%)")
    assert len(lines) == 2
    assert p.line(3, 12, 30.0) == "eval: 3/12 (25%), elapsed 00:30, ETA 01:30"
    assert p.line(0, 12, 1.0).endswith("ETA ?")


def test_tty_gets_a_bar():
    """On a terminal: a tqdm bar (carriage-return updates with rate and remaining time)."""
    out = FakeTTY()
    p = Progress("eval", stream=out)
    for i in range(1, 5):
        p.update(i, 4)
    p.close()
    text = out.getvalue()
    assert "\r" in text and "4/4" in text and "eval" in text

"""Progress of long CLI work on stderr: a tqdm bar with rate and ETA on a terminal, plain lines
(at most one per ``every_s`` seconds, plus the last) when stderr is not a TTY (logs, CI)."""

from __future__ import annotations

import sys
import time
from typing import IO, Any

from tqdm import tqdm


class Progress:
    """``update(done, total)`` after each unit of work; ``close()`` at the end.

    ``label``: what is counted (e.g. "questions x modes"). ETA = elapsed / done x (total - done),
    formatted by ``tqdm.format_interval``."""

    def __init__(self, label: str, *, stream: IO[str] | None = None, every_s: float = 5.0, tty: bool | None = None):
        self.label = label
        self.stream = stream or sys.stderr
        self.every_s = every_s
        self.tty = self.stream.isatty() if tty is None else tty
        self._bar: Any = None
        self._t0 = time.monotonic()
        self._last: float | None = None

    def update(self, done: int, total: int) -> None:
        if self.tty:
            if self._bar is None:
                self._bar = tqdm(total=total, desc=self.label, file=self.stream, unit="q", dynamic_ncols=True)
            self._bar.total = total
            self._bar.update(done - self._bar.n)
            return
        now = time.monotonic()
        if done < total and self._last is not None and now - self._last < self.every_s:
            return
        self._last = now
        self.stream.write(self.line(done, total, now - self._t0) + "\n")
        self.stream.flush()

    def line(self, done: int, total: int, elapsed: float) -> str:
        """``"<label>: 12/57 (21%), elapsed 00:30, ETA 01:52"``."""

        eta = tqdm.format_interval(elapsed / done * (total - done)) if done else "?"
        share = f"{100 * done / total:.0f}%" if total else "-"
        return f"{self.label}: {done}/{total} ({share}), elapsed {tqdm.format_interval(elapsed)}, ETA {eta}"

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

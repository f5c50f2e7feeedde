"""Per-file and per-stage progress of ``ragaudit ingest`` on stderr.

On a terminal: a tqdm bar over the files (rate and ETA), its description the file being built
and its stage with counters ("embedding 120/300 chunks"), and the file being parsed ahead.
When stderr is not a terminal (logs, CI): plain lines, one per stage change of a file, and
counter updates at most every ``every_s`` seconds. Result lines go to stdout, unchanged.

Events come from ``ragaudit.ingest.documents.add_progress_listener`` (``set_progress`` writes and
``ragaudit.ingest.bulk``'s ``parsing`` / ``registered`` events), so the stages report themselves.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import IO, Any

from tqdm import tqdm


class IngestProgress:
    """``listener(document_id, values)`` for ``ragaudit.ingest.documents.add_progress_listener``;
    ``result(line)`` prints a file's result line on stdout (and moves the bar);
    ``close()`` at the end."""

    def __init__(
        self,
        total: int,
        *,
        stream: IO[str] | None = None,
        out: IO[str] | None = None,
        tty: bool | None = None,
        every_s: float = 5.0,
    ):
        self.total = total
        self.stream = stream or sys.stderr
        self.out = out or sys.stdout
        self.tty = self.stream.isatty() if tty is None else tty
        self.every_s = every_s
        self._lock = threading.Lock()
        self._files: dict[str, tuple[int, str]] = {}  # document id -> (index, name)
        self._state: dict[str, dict[str, Any]] = {}
        self._last_line: dict[str, tuple[str, float]] = {}
        self._parsing = ""
        self._bar: Any = None
        if self.tty:
            self._bar = tqdm(total=total, file=self.stream, unit="file", dynamic_ncols=True, leave=False)

    # ------------------------------------------------------------------ events
    def listener(self, document_id: str | None, values: dict[str, Any]) -> None:
        with self._lock:
            if document_id is None or values.get("status") == "registered":
                if "file" not in values:
                    return
                if document_id is not None:
                    self._files[document_id] = (values["index"], values["file"])
                    self._state[document_id] = {}
                    return
                if values.get("status") == "parsing":
                    self._parsing = values["file"]
                    self._emit(
                        f"[{values['index'] + 1}/{values['total']}] {values['file']}: parsing",
                        key=f"parse:{values['index']}",
                        stage="parsing",
                    )
                return
            if document_id not in self._files:
                return
            st = self._state[document_id]
            st.update(values)
            index, name = self._files[document_id]
            if self._parsing == name:
                self._parsing = ""
            self._emit(
                f"[{index + 1}/{self.total}] {name}: {self.stage_text(st)}",
                key=document_id,
                stage=str(st.get("status", "")),
                final=st.get("status") == "embedding"
                and bool(st.get("chunks_total"))
                and st.get("chunks_done") == st.get("chunks_total"),
            )

    @staticmethod
    def stage_text(st: dict[str, Any]) -> str:
        """``"embedding 120/300 chunks"``, ``"extracting"`` (pages when known), ``"indexing 300 chunks"``."""
        status = st.get("status", "")
        if status == "embedding" and st.get("chunks_total"):
            return f"embedding {st.get('chunks_done', 0)}/{st['chunks_total']} chunks"
        if status == "indexing" and st.get("chunks_total"):
            return f"indexing {st['chunks_total']} chunks"
        if status in ("extracting", "chunking") and st.get("pages_total"):
            return f"{status} {st['pages_total']} pages"
        return str(status)

    def _emit(self, line: str, *, key: str, stage: str, final: bool = False) -> None:
        """Draw ``line`` (the bar's description on a terminal, else a line on ``stream``). Off a
        terminal a counter update of the same stage within ``every_s`` is skipped, except the
        ``final`` one (embedding N/N): a small file embeds within seconds, and its reader should
        still see that every chunk was embedded."""
        if self._bar is not None:
            desc = line if not self._parsing or self._parsing in line else f"{line} (parsing {self._parsing})"
            self._bar.set_description_str(desc[:120], refresh=True)
            return
        now = time.monotonic()
        last = self._last_line.get(key)
        if last is not None and (
            last[0] == line
            or (not final and last[0].rsplit(":", 1)[-1].split()[:1] == [stage] and now - last[1] < self.every_s)
        ):
            return  # same line, or a counter update of the same stage within every_s
        self._last_line[key] = (line, now)
        self.stream.write(line + "\n")
        self.stream.flush()

    # ------------------------------------------------------------------ results
    def result(self, line: str) -> None:
        """Print a file's result line on stdout and count the file as done."""
        with self._lock:
            if self._bar is not None:
                self._bar.clear()
                self.out.write(line + "\n")
                self.out.flush()
                self._bar.update(1)
            else:
                self.out.write(line + "\n")
                self.out.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

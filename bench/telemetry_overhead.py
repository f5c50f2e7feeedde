"""Telemetry overhead per /search request: background writer vs no telemetry, same process, same run.

    python bench/telemetry_overhead.py [N]

Ingests samples/20080102X00002.pdf into a temporary SQLite knowledge base, then times N
retrieval requests (QueryService.search_logged, cache off) three ways, interleaved in rounds:
baseline (a writer whose record() does nothing), background writer (the API's), synchronous
writer (the old inline write). Prints medians (ms) and ratios against the baseline.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__:  # python -m bench.NAME: offline defaults, repository on sys.path (bench/_env.py)
    from ._env import ROOT
else:  # python bench/NAME.py
    from _env import ROOT

from ragaudit.ingest.documents import ingest_bytes  # noqa: E402
from ragaudit.pipelines.runner import DagsterRunner  # noqa: E402
from ragaudit.platform.settings import Settings  # noqa: E402
from ragaudit.platform.telemetry import TelemetryWriter  # noqa: E402
from ragaudit.query import QueryService  # noqa: E402
from ragaudit.services import get_services  # noqa: E402


class NullWriter(TelemetryWriter):
    def record(self, **kw):  # baseline: no telemetry at all
        return ""


def main(n: int = 300) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="ragaudit-bench-"))
    svc = get_services(Settings(_env_file=None, data_dir=tmp, cache_ttl_s=0))
    pdf = ROOT / "samples" / "20080102X00002.pdf"
    ingest_bytes(svc, pdf.read_bytes(), pdf.name, DagsterRunner())
    writers = {
        "baseline (no telemetry)": NullWriter(svc.sessions, background=False),
        "background writer": TelemetryWriter.from_services(svc, background=True),
        "synchronous write": TelemetryWriter.from_services(svc, background=False),
    }
    services = {k: QueryService(svc, telemetry=w) for k, w in writers.items()}
    qs = ["probable cause of the accident", "weather conditions", "pilot report", "aircraft damage"]
    for s in services.values():  # warm up
        s.search_logged(qs[0], top_k=3, mode="bm25")
    times: dict[str, list[float]] = {k: [] for k in services}
    for i in range(n):
        for k, s in services.items():
            t = time.perf_counter()
            s.search_logged(qs[i % 4], top_k=3, mode="bm25")
            times[k].append((time.perf_counter() - t) * 1000)
    writers["background writer"].close(30)
    base = statistics.median(times["baseline (no telemetry)"])
    print(f"{n} /search requests (bm25, top_k=3, SQLite), median latency per request:")
    for k, v in times.items():
        med = statistics.median(v)
        print(f"  {k:26s} {med:7.3f} ms   ratio {med / base:5.3f}   (+{med - base:.3f} ms)")
    st = writers["background writer"].stats()
    print(f"background writer: written {st['written']}, dropped {st['dropped']}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)

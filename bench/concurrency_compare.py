"""Concurrency A/B: the API of another checkout (before) and of this one (after), interleaved.

    .venv/bin/python -m bench.concurrency_compare --base ../base-checkout --data DATA_DIR
        [--seconds 10] [--rounds 3]

``DATA_DIR`` is an ingested data folder (e.g. kept from ``python -m bench`` or ``ragaudit ingest``;
``--fill N`` first replicates its points up to N chunks, as the bench's API section does). It is
copied once for the base checkout (each embedded store allows one process per folder); both APIs
(uvicorn subprocesses) run at the same time, and windows of 1 client then 8 concurrent clients
(/search hybrid, every 4th request /query) alternate between them, the order swapped every round,
so that load changes on a shared machine hit both alike. Prints P50/P95 (ms) per endpoint, the
8-client / 1-client /search P95 ratio, requests/s and errors per side (JSON). Percentiles: numpy
'linear'. Both servers are stopped (SIGTERM) at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import threading
import time
from collections import defaultdict
from pathlib import Path

if __package__:  # python -m bench.NAME: offline defaults, repository on sys.path (bench/_env.py)
    from ._env import ROOT
else:  # python bench/NAME.py
    from _env import ROOT


def window(base: str, questions: list[dict], clients: int, seconds: float, lat: dict, errors: dict) -> None:
    """``clients`` threads send requests for ``seconds``; latencies (ms) into ``lat[(clients, path)]``."""
    import httpx

    stop_at = time.monotonic() + seconds

    def client(idx: int) -> None:
        rnd = random.Random(idx * 7919 + time.monotonic_ns())
        i = 0
        with httpx.Client(timeout=120) as c:
            while time.monotonic() < stop_at:
                path = "/query" if i % 4 == 3 else "/search"
                i += 1
                t = time.perf_counter()
                try:
                    ok = (
                        c.post(
                            f"{base}{path}", json={"question": rnd.choice(questions)["question"], "mode": "hybrid"}
                        ).status_code
                        == 200
                    )
                except httpx.HTTPError:
                    ok = False
                lat[(clients, path)].append((time.perf_counter() - t) * 1000)
                if not ok:
                    errors[clients] += 1

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main(argv: list[str] | None = None) -> int:
    import httpx

    from bench.__main__ import dev_questions, fill_store, load_points, pct, start_api, stop_api

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, required=True, help="the other checkout (before)")
    ap.add_argument("--data", type=Path, required=True, help="an ingested data folder")
    ap.add_argument("--fill", type=int, default=0, help="first replicate its points up to this many chunks")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    if args.fill:
        from ragaudit.platform.settings import Settings
        from ragaudit.services import get_services, release_services

        st = Settings(_env_file=None, data_dir=args.data, cache_ttl_s=0, llm_model="", database_url="", qdrant_url="")
        svc = get_services(st)
        if svc.store.count() < args.fill:
            points = [p for p in load_points(svc.store) if p.payload.get("live", True) is not False]
            fill_store(svc.store, points, args.fill, skip=len(points))
        release_services(st)
    base_data = args.data.with_name(args.data.name + "-base")
    if not base_data.exists():
        shutil.copytree(args.data, base_data)
    questions = dev_questions()
    random.Random(0).shuffle(questions)
    sides = {"before": (args.base.resolve(), base_data), "after": (ROOT, args.data)}
    procs: dict[str, tuple[subprocess.Popen, str]] = {}
    try:
        for name, (root, data) in sides.items():
            procs[name] = start_api(data, cwd=root, timeout_s=300)[:2]
            with httpx.Client(timeout=120) as c:  # warm up
                for q in questions[:3]:
                    c.post(f"{procs[name][1]}/search", json={"question": q["question"]})
                    c.post(f"{procs[name][1]}/query", json={"question": q["question"]})
        lat = {n: defaultdict(list) for n in sides}
        errors = {n: defaultdict(int) for n in sides}
        loads = []
        for r in range(args.rounds):
            order = list(sides) if r % 2 == 0 else list(sides)[::-1]
            for clients in (1, 8):
                for name in order:
                    window(procs[name][1], questions, clients, args.seconds, lat[name], errors[name])
            loads.append([round(x, 2) for x in os.getloadavg()])
        out: dict = {"load_avg_after_each_round": loads}
        for name in sides:
            o = {f"{c} client{'s' if c > 1 else ''} {p}": pct(v) for (c, p), v in sorted(lat[name].items())}
            s1, s8 = o["1 client /search"]["p95"], o["8 clients /search"]["p95"]
            o["ratio 8 clients / 1 client /search P95"] = round(s8 / s1, 2) if s1 and s8 else None
            o["requests per s, 8 clients"] = round(
                sum(len(v) for (c, _), v in lat[name].items() if c == 8) / (args.seconds * args.rounds), 2
            )
            o["errors"] = {f"{c} clients": n for c, n in errors[name].items()}
            out[name] = o
        print(json.dumps(out, indent=1))
    finally:
        for proc, _ in procs.values():
            stop_api(proc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

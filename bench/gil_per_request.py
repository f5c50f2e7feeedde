"""GIL-held time per /search, A/B between another checkout (before) and this one (after), interleaved.

    .venv/bin/python -m bench.gil_per_request --base ../base-checkout --data DATA_DIR [--fill 50000]
        [--seconds 15] [--rounds 2] [--mix] [--py-spy PATH] [--out FILE.json]

Why: Qdrant Edge calls and our Python hold the GIL, so with G ms of GIL per request no number of
cores serves more than 1000 / G requests/s, and 8 closed-loop clients queue behind it. Both APIs
(uvicorn subprocesses, the data folder copied once for the base as in ``bench.concurrency_compare``)
run at the same time; windows of 1 client then 8 clients (/search hybrid; ``--mix``: every 4th
request /query) alternate between them, the order swapped every round. During each window
``py-spy record --gil`` (``pip install py-spy``; sampled at ``--rate`` Hz, only the thread holding
the GIL) samples the API: GIL-held ms per request = samples / rate / requests, split by the
innermost part of the stack it falls in (Edge dense/sparse/payload calls, embedding, telemetry,
HTTP stack, our retrieval Python). Without py-spy only latencies are reported. Prints and writes
JSON: P50/P95 (ms, numpy 'linear'), requests/s, errors, 8/1-client P95 ratio and the GIL split
per side, the load average after each round.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# (label, substrings of a stack), first match wins; a stack is py-spy's raw "frame;frame;..." line
PARTS = [
    ("edge dense query", ("search_dense",)),
    ("edge sparse query", ("search_sparse",)),
    ("edge payloads", ("get_payloads",)),
    ("embedding", ("embed_query", "ragaudit/index/embedding.py", "sentence_transformers", "torch/", "onnxruntime")),
    ("telemetry", ("ragaudit/platform/telemetry.py", "opsmetrics.py")),
    (
        "retrieval python",
        (
            "ragaudit/retrieve/retriever.py",
            "ragaudit/index/store.py",
            "ragaudit/index/sparse.py",
            "ragaudit/retrieve/scope.py",
        ),
    ),
    ("query service", ("ragaudit/query.py",)),
    (
        "http stack (uvicorn, starlette, fastapi, pydantic, anyio)",
        ("uvicorn", "starlette", "fastapi", "pydantic", "anyio", "httptools", "asyncio"),
    ),
]


def part_of(stack: str) -> str:
    for label, keys in PARTS:
        if any(k in stack for k in keys):
            return label
    return "other"


def gil_split(raw: Path) -> Counter:
    """Samples per part of a ``py-spy record -f raw`` file."""
    out: Counter = Counter()
    if not raw.exists():
        return out
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if n.isdigit():
            out[part_of(stack)] += int(n)
    return out


def window(base: str, questions: list[dict], clients: int, seconds: float, mix: bool, lat: dict, errors: dict) -> int:
    """``clients`` closed-loop threads for ``seconds``; latencies (ms) into ``lat[(clients, path)]``;
    returns the number of requests sent."""
    import httpx

    stop_at = time.monotonic() + seconds
    sent = [0] * clients

    def client(idx: int) -> None:
        rnd = random.Random(idx * 7919 + time.monotonic_ns())
        i = 0
        with httpx.Client(timeout=120) as c:
            while time.monotonic() < stop_at:
                path = "/query" if mix and i % 4 == 3 else "/search"
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
                sent[idx] += 1
                if not ok:
                    errors[clients] += 1

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(sent)


def main(argv: list[str] | None = None) -> int:
    import httpx

    from bench.__main__ import dev_questions, fill_store, load_points, pct
    from bench.concurrency_compare import start_api

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, required=True, help="the other checkout (before)")
    ap.add_argument("--data", type=Path, required=True, help="an ingested data folder")
    ap.add_argument("--fill", type=int, default=0, help="first replicate its points up to this many chunks")
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--mix", action="store_true", help="every 4th request is a /query (as the bench's section)")
    ap.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    ap.add_argument("--py-spy", default=shutil.which("py-spy"), help="py-spy executable (default: on PATH)")
    ap.add_argument("--out", type=Path, default=None, help="also write the JSON here")
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
    lat = {n: defaultdict(list) for n in sides}
    errors = {n: defaultdict(int) for n in sides}
    sent = {n: Counter() for n in sides}
    gil = {n: defaultdict(Counter) for n in sides}
    spy_dir = Path(tempfile.mkdtemp(prefix="gil-"))
    loads = []
    try:
        for name, (root, data) in sides.items():
            procs[name] = start_api(root, data)
            with httpx.Client(timeout=120) as c:  # warm up
                for q in questions[:5]:
                    c.post(f"{procs[name][1]}/search", json={"question": q["question"]})
                    if args.mix:
                        c.post(f"{procs[name][1]}/query", json={"question": q["question"]})
        for r in range(args.rounds):
            order = list(sides) if r % 2 == 0 else list(sides)[::-1]
            for clients in (1, 8):
                for name in order:
                    spy = None
                    raw = spy_dir / f"{name}-{clients}-{r}.txt"
                    if args.py_spy:
                        spy = subprocess.Popen(
                            [
                                args.py_spy,
                                "record",
                                "-p",
                                str(procs[name][0].pid),
                                "-f",
                                "raw",
                                "-o",
                                str(raw),
                                "--gil",
                                "-r",
                                str(args.rate),
                                "--nonblocking",
                                "-d",
                                str(int(args.seconds) + 1),
                            ],
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                        )
                        time.sleep(0.5)
                    sent[name][clients] += window(
                        procs[name][1], questions, clients, args.seconds, args.mix, lat[name], errors[name]
                    )
                    if spy:
                        spy.wait()
                        gil[name][clients] += gil_split(raw)
            loads.append([round(x, 2) for x in os.getloadavg()])
        out: dict = {
            "load_avg_after_each_round": loads,
            "seconds": args.seconds,
            "rounds": args.rounds,
            "mix": args.mix,
            "py_spy_rate_hz": args.rate if args.py_spy else None,
        }
        for name in sides:
            o: dict = {f"{c} client{'s' if c > 1 else ''} {p}": pct(v) for (c, p), v in sorted(lat[name].items())}
            s1, s8 = o["1 client /search"]["p95"], o["8 clients /search"]["p95"]
            o["ratio 8 clients / 1 client /search P95"] = round(s8 / s1, 2) if s1 and s8 else None
            o["requests per s, 8 clients"] = round(sent[name][8] / (args.seconds * args.rounds), 2)
            o["requests per s, 1 client"] = round(sent[name][1] / (args.seconds * args.rounds), 2)
            o["errors"] = {f"{c} clients": n for c, n in errors[name].items()}
            if args.py_spy:
                for c in (1, 8):
                    n = sent[name][c] or 1
                    split = gil[name][c]
                    o[f"GIL-held ms per request, {c} client{'s' if c > 1 else ''}"] = {
                        "total": round(sum(split.values()) / args.rate * 1000 / n, 2),
                        **{k: round(v / args.rate * 1000 / n, 2) for k, v in split.most_common()},
                    }
            out[name] = o
        text = json.dumps(out, indent=1)
        print(text)
        if args.out:
            args.out.write_text(text + "\n")
    finally:
        for proc, _ in procs.values():
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(spy_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

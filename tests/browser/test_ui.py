"""The web UI in a real browser: the API (serving the built frontend) runs under uvicorn on a free
127.0.0.1 port with a temporary data folder; tests/browser/ui_flow.mjs drives headless Chromium
(Debian's package, through playwright-core, no browser download) through upload, chat,
citations, X-ray, admin, evaluation (one run, then two compared) and observability, and prints
what it saw as JSON.

Needs ``frontend/dist`` and ``frontend/node_modules`` (``scripts/test.sh`` builds them) and
``/usr/bin/chromium`` (``scripts/test.sh`` installs it with apt-get when missing). Without them
the test is skipped, except under CI (``CI`` set), where that is a failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import BAD, CASES, ROOT, SAMPLES
from tests.fake_llm import FakeLLM

FRONTEND = ROOT / "frontend"
CHROMIUM = os.environ.get("RAGAUDIT_CHROMIUM", "/usr/bin/chromium")
PLAYWRIGHT = FRONTEND / "node_modules" / "playwright-core"
DOC = "20071229X02007.pdf"
API_KEY = "ui-test-key"
# a sibling NTSB report (same layout, another accident), added between the two evaluation runs
SIBLING = "20080102X00002.pdf"


def _missing() -> str | None:
    if not (FRONTEND / "dist" / "index.html").is_file():
        return "frontend/dist is not built (scripts/test.sh builds it)"
    if not PLAYWRIGHT.is_dir():
        return "frontend/node_modules has no playwright-core (npm ci)"
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} missing (apt-get install -y chromium)"
    if shutil.which("node") is None:
        return "node is not on PATH"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _serve(data: Path, **env_over: str):
    """uvicorn serving create_app() on a free port with ``data/data`` as its data folder (offline
    settings, API key ``API_KEY``; ``env_over`` overrides); yields the base URL; stopped with
    SIGTERM (then SIGKILL) on exit."""
    port = _free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "RAGAUDIT_DATA_DIR": str(data / "data"),
        "RAGAUDIT_DATABASE_URL": "",
        "RAGAUDIT_QDRANT_URL": "",
        "RAGAUDIT_LLM_MODEL": "",
        "RAGAUDIT_API_KEYS": API_KEY,  # the UI sends the key it keeps (stored PDFs need it too)
        "RAGAUDIT_EMBEDDING_MODEL": "bundled:all-MiniLM-L6-v2",
        # by default no concise answer is shown (no confidence is certified); a deployment that
        # accepts them from 0.7 shows one, which the UI must put above the quote
        "RAGAUDIT_CONCISE_MIN_CONFIDENCE": "0.7",
        "HF_HUB_OFFLINE": "1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "TOKENIZERS_PARALLELISM": "false",
        **env_over,
    }
    log = open(data / "server.log", "wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "--factory",
            "ragaudit.api.app:create_app",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=data,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                pytest.fail("server exited: " + (data / "server.log").read_text()[-3000:])
            try:
                if httpx.get(base + "/health", timeout=5).status_code in (200, 503):
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("server did not start in 180 s")
            time.sleep(0.5)
        yield base
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _browser_ready() -> None:
    """Skip (fail under CI) when the built UI, playwright-core, Chromium or node is missing."""
    why = _missing()
    if why:
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The offline API and UI (``_serve``): ``(base URL, data folder)``."""
    _browser_ready()
    data = tmp_path_factory.mktemp("ui")
    with _serve(data) as base:
        yield base, data


def _run_flow(script: str, cfg: dict, tmp_path: Path) -> dict:
    """Run ``tests/browser/<script>`` with ``cfg`` as its config file; its printed JSON result."""
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    p = subprocess.run(
        ["node", str(Path(__file__).with_name(script)), str(tmp_path / "cfg.json")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = [x for x in p.stdout.splitlines() if x.startswith("{")]
    assert lines, f"no result from the browser script: {p.stdout[-2000:]} {p.stderr[-3000:]}"
    out = json.loads(lines[-1])
    assert out["ok"], (
        f"browser step {out.get('step')} failed: {out.get('error')}\nsteps: {json.dumps(out['steps'])[:3000]}"
    )
    return out


def _gold(question: str, answer: str, page: int, evidence: str, kind: str = "fact") -> dict:
    return {"doc_name": DOC, "page": page, "question": question, "answer": answer, "evidence": evidence, "kind": kind}


# a small gold set on DOC (the Tallahassee accident report), written from its page text; the first
# question is the one asked in the chat
GOLD = [
    _gold(
        "What is the NTSB accident number of the December 2007 accident in Tallahassee, Florida?",
        "NYC08CA055",
        1,
        "Location: Tallahassee, FL Accident Number: NYC08CA055",
        "identifier",
    ),
    _gold(
        "What registration did the Piper in the Tallahassee accident carry?",
        "N5921D",
        1,
        "Registration: N5921D",
        "identifier",
    ),
    _gold(
        "How many hours had the pilot flown the accident airplane in the 90 days before the accident?",
        "about 17 hours",
        1,
        "the pilot flew the accident airplane about 17 hours during the 90-day period preceding the accident",
    ),
    _gold(
        "Who was the investigator in charge of the Tallahassee accident?",
        "Robert J Gretz",
        3,
        "Investigator In Charge (IIC): Robert J Gretz",
    ),
    _gold(
        "What surface did the private airstrip's runway have?",
        "Grass/turf",
        3,
        "Runway Surface Type: Grass/turf",
        "paraphrase",
    ),
    # must be refused: the report names no such thing
    {
        "doc_name": None,
        "page": None,
        "question": "What is the capital of Australia?",
        "answer": "REFUSE",
        "evidence": None,
        "kind": "refuse",
    },
]


def test_ui_end_to_end(server, tmp_path):
    """Upload, streamed cited answer, citation dialog + PDF page, X-ray mode switch, refusal reason,
    admin chunks of the document, refused non-verbatim gold-pair edit, evaluation with intervals,
    observability counts equal to /metrics.

    fails if: the upload never reaches ready or the bad file's reason is not shown; the answer lacks
    the gold answer or its citation names another page; the concise answer the API shows is not
    shown above the quote; the citation dialog lacks the highlighted
    quote or its PDF button does not open the stored PDF at that page with API keys set (a plain
    link cannot send the key), or the admin document page's "open" does not; switching the X-ray to vector does not
    change the ranks (BM25 ranks and passage-rank scores must vanish); the scope picker's document and page range are not
    sent or a chunk outside them is shown; two quotes of one source are listed alike or one inline
    citation opens another's quote; the admin list shows chunks of another document or
    a wrong total; a non-verbatim evidence edit is saved; the X-ray's timings legend names a stage that did not run; the evaluation page offers hybrid_rerank with no reranker configured, or shows no per-mode interval;
    the two-run comparison (the same gold set before and after a sibling report is added) shows
    another run's means or intervals, a wrong difference, the runs in pick order instead of
    earlier-first, ranks other than the API's, or marks the wrong questions as changed;
    the observability count differs from /metrics.
    """
    base, data = server
    qs = [{"id": f"ui-{i}", **r} for i, r in enumerate(GOLD, 1)]
    q = qs[0]
    dataset = tmp_path / "ui-gold.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in qs))
    shots = Path(os.environ.get("RAGAUDIT_UI_SCREENSHOTS", str(tmp_path / "shots")))
    cfg = {
        "base": base,
        "good_pdf": str(SAMPLES / DOC),
        "bad_pdf": str(BAD / "password-example.pdf"),
        "sibling_pdf": str(SAMPLES / SIBLING),
        "same_name_a": str(CASES / "same-name" / "branch_alder" / "report.pdf"),
        "same_name_b": str(CASES / "same-name" / "branch_birch" / "report.pdf"),
        "question": q["question"],
        "expect_page": q["page"],
        "dataset_jsonl": str(dataset),
        "screenshots": str(shots),
        "chromium": CHROMIUM,
        "playwright_core": str(PLAYWRIGHT),
        "api_key": API_KEY,
    }
    s = _run_flow("ui_flow.mjs", cfg, tmp_path)["steps"]

    # upload and refusal
    assert "password" in s["refusal"].lower(), s["refusal"]
    assert "ready" in s["upload"]
    # while it ran, the row counted the pages extracted and chunks embedded (the API's progress)
    assert any(re.search(r"\d+ of \d+ (pages|chunks)", c) for c in s["ingest_captions"]), s["ingest_captions"]
    # streamed answer with a citation naming the right page
    assert q["answer"].split()[0].lower() in s["answer"].lower(), s["answer"]
    assert s["label"] == "answered"
    # the concise answer the API shows (an identifier read from a form label, above the set threshold)
    # stands above the quote, with its type and confidence
    assert s["concise"] and s["concise"].splitlines()[0] == q["answer"] and "identifier" in s["concise"], s["concise"]
    assert s["cite_title"] == f"{DOC}, page {q['page']}"
    assert f"{DOC}, page {q['page']}" in s["citation_title"]
    assert (
        s["quote"].strip()
        and s["quote"].split()[0]
        in httpx.get(f"{base}/admin/api/chunks", params={"filter": json.dumps({"q": s["quote"]})}).text
    )
    # the PDF at the cited page, with API keys set: shown from a blob: URL fetched with the key
    # (a plain link is refused: the stored file needs the key)
    assert s["pdf_plain_status"] == 401
    for pdf in (s["pdf"], s["admin_pdf"]):
        assert pdf["url"].startswith("blob:") and pdf["status"] == 200, pdf
        assert pdf["type"] == "application/pdf" and pdf["magic"] == "%PDF-", pdf
    assert s["pdf"]["url"].endswith(f"#page={q['page']}"), s["pdf"]
    # the picked document's chip names it in full; its pages and status show on hover
    assert [c["text"] for c in s["scope_chips"]] == [DOC], s["scope_chips"]
    assert s["scope_chips"][0]["title"].startswith(f"{DOC} ("), s["scope_chips"]
    # the tab names the document (and the cited page), not the blob's id
    assert s["pdf"]["title"] == f"{DOC} \u2013 page {q['page']}", s["pdf"]
    assert s["admin_pdf"]["title"] == DOC, s["admin_pdf"]
    # the document's gold report shows its counts, and one example for each reason that rejected
    gold = s["gold"]
    assert f"{gold['report']['stored']} stored" in gold["text"], gold
    reasons = [r for r, n in gold["report"]["rejected"].items() if n]
    assert len(gold["examples"]) == len(reasons), gold
    for r, li in zip(reasons, gold["examples"]):
        assert li == f"first rejected as {r.replace('_', ' ')}: {gold['report']['rejected_examples'][r]}", gold
    # X-ray: the vector run has no BM25 ranks, hybrid had some; ranks moved or chunks changed
    before, after = s["xray"]["before"], s["xray"]["after"]
    assert any(r["bm25"] != "–" for r in before) and all(r["bm25"] == "–" for r in after)
    assert all(r["vector"] != "–" for r in after)
    # hybrid re-orders the fused candidates by passage rank: each row shows its fused (RRF) position
    # and its passage-rank score; a vector run is the single retriever's order, with neither
    assert all(r["fused"].isdigit() for r in before), before
    ranked = [r for r in before if "(neighbour)" not in r["label"]]  # a neighbour chunk is added after ranking
    assert ranked and all(r["passage_rank"] != "–" for r in ranked) and all(r["passage_rank"] == "–" for r in after)
    assert [r["chunk"] for r in before] != [r["chunk"] for r in after] or any(r["moved"] != "=" for r in after)
    # the citations diff names each added or removed cited chunk by document and page
    diff = re.fullmatch(
        r"citations: (\d+) added(?: \((.+)\))?, (\d+) removed(?: \((.+)\))?", s["xray"]["citations_diff"]
    )
    assert diff, s["xray"]["citations_diff"]
    for count, names in ((diff[1], diff[2]), (diff[3], diff[4])):
        assert (int(count) == 0) == (names is None), s["xray"]["citations_diff"]
        assert names is None or all(re.fullmatch(rf"{re.escape(DOC)} p\.\d+", n) for n in names.split(", ")), names
    # the timings legend names the stages that ran: in hybrid mode passage ranking is the rerank
    # stage (no cross-encoder is configured); no name outside the API's stages
    assert {"embed", "vector", "bm25", "fusion", "rerank", "generation"} <= set(s["legend"]), s["legend"]
    stages = {"embed", "vector", "bm25", "document", "fusion", "rerank", "neighbors", "gate", "generation"}
    assert set(s["legend"]) <= stages, s["legend"]
    # each row shows its chunk's opening words, so chunks of one page are told apart
    for r in before:
        assert r["snippet"].strip("“”…") and r["snippet"].strip("“”…")[:20] in " ".join(
            httpx.get(f"{base}/admin/api/chunks/{r['chunk']}", headers={"X-API-Key": API_KEY}).json()["text"].split()
        ), r
    same_page = [r["snippet"] for r in before if [x["label"] for x in before].count(r["label"]) > 1]
    assert len(set(same_page)) == len(same_page), before
    # scope picker: the request carries the picked document and page range, and every retrieved
    # chunk (the X-ray's "DOC p.N" cells) is that document at that page
    sc = s["scope"]
    assert sc["body"]["document_ids"] == [s["doc"]["id"]], sc["body"]
    assert sc["body"]["page_min"] == sc["page"] == sc["body"]["page_max"], sc["body"]
    assert sc["rows"] and all(r.startswith(f"{DOC} p.{sc['page']}") for r in sc["rows"]), sc["rows"]
    # one list item per source number (a source quoted twice is not listed twice under its number),
    # holding a link to each of its quotes; each inline [n] opens its own quote, not the last one twice
    numbers = [c["n"] for c in sc["cite_list"]]
    assert len(set(numbers)) == len(numbers), sc["cite_list"]
    assert sum(c["quotes"] for c in sc["cite_list"]) == sc["citations"] == len(sc["opened"]), sc
    assert len(set(sc["opened"])) == sc["citations"], sc
    # admin: chunks of that document only, total = its chunk count
    n = s["doc"]["chunk_count"]
    assert s["admin_rows"] == min(n, 25) and set(s["admin_doc_cells"]) == {DOC}
    assert s["admin_pagination"].endswith(f"of {n}"), s["admin_pagination"]
    # gold pair: non-verbatim evidence refused, stored evidence unchanged
    assert "verbatim" in s["pair_refusal"] and s["pair_evidence_kept"] is True
    # evaluation: the configured modes offered and checked, hybrid_rerank (no reranker) disabled
    assert {m["mode"]: (m["checked"], m["disabled"]) for m in s["eval_modes"]} == {
        "hybrid": (True, False),
        "vector": (True, False),
        "bm25": (True, False),
        "hybrid_rerank": (False, True),
    }, s["eval_modes"]
    # evaluation: one row per mode with an interval
    assert len(s["ci_rows"]) == 3 and all("[" in r for r in s["ci_rows"]), s["ci_rows"]
    assert s["question_rows"] == len(qs) and all(f == "true" for f in s["failure_flags"])
    # a must-refuse question has no evidence to find: no "miss" shown for it, and its label
    refuse = [q["id"] for q in qs if q["kind"] == "refuse"]
    cells = {row[0]: row[2:] for row in s["question_cells"]}
    assert refuse and all(c.startswith("–") for i in refuse for c in cells[i]), {i: cells[i] for i in refuse}
    assert s["failure_rows"] <= s["question_rows"]
    # a refused page range reads as the API's message, not as its JSON
    assert "page_max (2) is before page_min (5)" in s["range_error"], s["range_error"]
    assert '"loc"' not in s["range_error"] and "[{" not in s["range_error"], s["range_error"]
    # a cell's X-ray says it is asked again, with the run's top_k (the default 5), not 5 + neighbours
    assert "Asked again" in s["eval_xray"]["note"], s["eval_xray"]
    assert [c for c in s["eval_xray"]["chips"] if c.startswith("top_k")] == ["top_k 5"], s["eval_xray"]
    _check_comparison(base, s["compare"])
    # observability: the page shows /metrics' numbers
    obs = s["obs"]
    assert obs["shown"] == obs["metrics_count"] and obs["shown"] >= 2, obs
    assert sorted(obs["groups_shown"]) == sorted(obs["groups_metrics"]), obs
    assert obs["health_rows"] >= 4
    # 9: a different file under a taken name is never a silent replacement
    same = s["same_name"]
    assert same["first_replaces"] == 0, same
    assert "replaces version 1" in same["second_replaces"] and "another name" in same["second_replaces"], same
    assert not s["page_errors"], s["page_errors"]


def _check_comparison(base: str, cmp: dict) -> None:
    """The comparison panel against the API's JSON for the same two runs: A is the earlier run and
    B the later, whatever order they were picked in; each mode's mean and 95% interval are that
    run's ``/intervals`` values and B - A their difference; each question's "A -> B" cells are the
    runs' ranks and answer labels and it is marked changed exactly when one of them differs; the
    panel says that the knowledge base changed between the runs (a document was added)."""
    runs = sorted(httpx.get(f"{base}/evaluate").json(), key=lambda r: r["created_at"])
    assert len(runs) == 2, [r["id"] for r in runs]
    a, b = (httpx.get(f"{base}/evaluate/{r['id']}").json() for r in runs)
    iv_a, iv_b = (httpx.get(f"{base}/evaluate/{r['id']}/intervals").json() for r in runs)
    # the flow picked the later run first, so pick order and time order disagree
    assert (cmp["run_a"], cmp["run_b"]) == (a["id"], b["id"]), (cmp["run_a"], cmp["run_b"])
    # a sibling report was added between the runs: the panel says the knowledge base changed
    xa, xb = a["results"]["index"], b["results"]["index"]
    assert xb["version"] > xa["version"] and xb["documents"] == xa["documents"] + 1, (xa, xb)
    note = cmp["index_note"] or ""
    assert f"index version {xa['version']} → {xb['version']}" in note, note
    assert f"{xa['documents']} → {xb['documents']} documents" in note, note
    assert [t.split(" (")[0] for t in cmp["run_index"]] == [f" · index version {x['version']}" for x in (xa, xb)], cmp[
        "run_index"
    ]
    assert cmp["run_views"] == [a["id"], b["id"]], cmp["run_views"]

    def ci(iv: dict, mode: str, metric: str) -> dict:
        return iv["retrieval"].get(mode, {}).get(metric) or iv["answers"][mode][metric]

    def same(text: str, want: float | list[float] | None) -> bool:
        """``text`` is the page's rendering of ``want``: "0.767" or "[0.500, 1.000]" (3 decimals),
        "–" for a missing value (a mean of no question, no interval below 2 questions)."""
        if isinstance(want, list):
            parts = text.strip("[]").split(", ")
            return len(parts) == 2 and all(same(t, w) for t, w in zip(parts, want))
        if want is None:
            return text in ("–", "[–, –]")
        return text != "–" and abs(float(text) - want) < 6e-4

    modes = [m for m in a["results"]["modes"] if m in b["results"]["modes"]]
    differs = False
    for metric, rows in cmp["metrics"].items():
        assert [r["mode"] for r in rows] == modes, (metric, rows)
        for r in rows:
            x, y = ci(iv_a, r["mode"], metric), ci(iv_b, r["mode"], metric)
            assert same(r["a-mean"], x["mean"]) and same(r["b-mean"], y["mean"]), (metric, r, x, y)
            assert same(r["a-ci"], x["ci95"]) and same(r["b-ci"], y["ci95"]), (metric, r, x, y)
            assert same(r["diff"], y["mean"] - x["mean"]), (metric, r, x, y)
            differs |= x["mean"] != y["mean"]
    # the sibling report moves some evidence down; identical runs could not catch swapped columns
    assert differs, cmp["metrics"]

    def shown(q: dict | None, mode: str) -> str:
        if q is None:
            return "–"
        rank, label = q["ranks"].get(mode), ((q.get("answers") or {}).get(mode) or {}).get("label")
        # a must-refuse question has no retrieval record: no evidence to miss
        text = str(rank) if rank is not None else "miss" if mode in q["retrieval"] else "–"
        return text + (f" · {label}" if label else "")

    qa = {q["id"]: q for q in a["results"]["questions"]}
    qb = {q["id"]: q for q in b["results"]["questions"]}
    ids = list(qa) + [i for i in qb if i not in qa]
    assert [q["id"] for q in cmp["questions"]] == ids
    changed = []
    for row in cmp["questions"]:
        want = {m: f"{shown(qa.get(row['id']), m)} → {shown(qb.get(row['id']), m)}" for m in modes}
        assert row["cells"] == want, (row, want)
        if any(shown(qa.get(row["id"]), m) != shown(qb.get(row["id"]), m) for m in modes):
            changed.append(row["id"])
        assert row["changed"] == ("true" if row["id"] in changed else "false"), (row, changed)
    assert changed, "the sibling report changed no rank: the comparison cannot be checked"
    assert cmp["only_changed"] == changed, (cmp["only_changed"], changed)
    assert cmp["changed_count"] == f"Questions changed: {len(changed)} of {len(ids)}", cmp["changed_count"]


def test_the_page_names_an_icon_the_server_serves(server):
    """Fails if the UI's page names no icon, or the icon it names is not served (a browser then
    asks for /favicon.ico and logs a 404 on every visit)."""
    base, _ = server
    page = httpx.get(base + "/", timeout=10)
    href = re.search(r'<link rel="icon"[^>]*href="([^"]+)"', page.text)
    assert href, page.text[:400]
    icon = httpx.get(base + href.group(1), timeout=10)
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml")
    assert icon.text.lstrip().startswith("<svg")


def test_a_failed_llm_answer_keeps_its_xray(tmp_path):
    """A chat question whose LLM call fails (the fake OpenAI-compatible server on 127.0.0.1
    answering HTTP 500): the turn shows the failure in ragaudit's words and keeps the X-ray of
    what retrieval found, its chunks and stage timings, so the stage that failed is visible.

    Fails if the X-ray disappears with the error (it was only shown for a finished answer), if its
    rows are not the chunks the request logged as retrieved, or if the provider's message reaches the page."""
    _browser_ready()
    llm = FakeLLM().start()
    try:
        with _serve(
            tmp_path,
            RAGAUDIT_LLM_MODEL="openai/gpt-4o-mini",
            RAGAUDIT_LLM_API_BASE=llm.base("error500"),
            RAGAUDIT_LLM_API_KEY="sk-fake",
            RAGAUDIT_QA_GENERATOR="rules",  # ingestion writes no gold pair with the failing model
        ) as base:
            with open(SAMPLES / DOC, "rb") as f:
                r = httpx.post(
                    f"{base}/documents",
                    params={"wait": "true"},
                    files={"file": (DOC, f, "application/pdf")},
                    headers={"X-API-Key": API_KEY},
                    timeout=300,
                )
            assert r.status_code == 201, r.text
            cfg = {
                "base": base,
                "question": GOLD[0]["question"],
                "doc_name": DOC,
                "screenshots": os.environ.get("RAGAUDIT_UI_SCREENSHOTS", str(tmp_path / "shots")),
                "chromium": CHROMIUM,
                "playwright_core": str(PLAYWRIGHT),
                "api_key": API_KEY,
            }
            s = _run_flow("failed_answer.mjs", cfg, tmp_path)["steps"]
            logged = _logged_row(base, GOLD[0]["question"])
    finally:
        llm.stop()
    assert logged["error_kind"] == "InternalServerError" and logged["endpoint"] == "stream", logged
    assert s["error"].startswith("InternalServerError: the LLM provider failed"), s["error"]
    assert "upstream exploded" not in s["page_text"]  # the provider's own message
    assert s["failed_chip"] and "generation failed" in s["failed_chip"], s["failed_chip"]
    assert s["xray_rows"] and s["xray_rows"] == logged["retrieved_ids"], (s["xray_rows"], logged)
    assert s["timings_bar"] == 1
    assert s["rules_box"] == 0  # no answer, so no answer rule ran: not "rules that fired: none"
    assert not s["page_errors"], s["page_errors"]


def _logged_row(base: str, question: str) -> dict:
    """The newest query_logs row of ``question``, read through the admin API (rows are written by
    a background writer: waits up to 10 s for it)."""
    deadline = time.monotonic() + 10
    while True:
        r = httpx.get(
            f"{base}/admin/api/query_logs",
            params={"filter": json.dumps({"q": question}), "sort": json.dumps(["created_at", "DESC"])},
            headers={"X-API-Key": API_KEY},
        )
        r.raise_for_status()
        if r.json() or time.monotonic() > deadline:
            assert r.json(), f"no query_logs row for {question!r}"
            return r.json()[0]
        time.sleep(0.3)


def test_an_admin_list_without_the_key_opens_the_key_page(server, tmp_path):
    """With RAGAUDIT_API_KEYS set, a browser without the key opens the query-log list: the server
    answers 401, and the UI opens the API-key page saying why; with the key saved there, the same
    list shows the logged requests. A question asked in the chat without the key gets an error that
    links to the key page.

    Fails if the chat's refusal does not link to the key page, if the refused list is shown as an empty list ("No Query logs found", which it was), or if
    the key saved on the key page is not sent by the admin views."""
    base, _ = server
    _browser_ready()
    r = httpx.post(f"{base}/search", json={"question": "accident number"}, headers={"X-API-Key": API_KEY})
    assert r.status_code == 200, r.text
    assert httpx.get(f"{base}/admin/api/query_logs").status_code == 401
    cfg = {
        "base": base,
        "api_key": API_KEY,
        "chromium": CHROMIUM,
        "playwright_core": str(PLAYWRIGHT),
        "screenshots": os.environ.get("RAGAUDIT_UI_SCREENSHOTS", str(tmp_path / "shots")),
    }
    s = _run_flow("no_key.mjs", cfg, tmp_path)["steps"]
    # a question asked without the key says so and links to the key page
    assert "API key" in s["chat_error"] and "#/key" in s["chat_key_url"], s
    assert "#/key" in s["url"] and "valid API key" in s["notice"], s
    assert s["rows_with_key"] >= 1 and s["url_with_key"].endswith("#/query_logs"), s
    assert not s["page_errors"], s["page_errors"]

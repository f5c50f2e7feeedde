"""Evaluation end to end on the real sample knowledge base: ``ragaudit eval --json`` and
``POST /evaluate`` give the same results; the LLM generation and judge paths with litellm's
``mock_response`` (no network)."""

import json
import re
import time

import litellm
from fastapi.testclient import TestClient
from sqlalchemy import select
from typer.testing import CliRunner

from ragaudit.api.app import create_app
from ragaudit.api.cli import app
from ragaudit.evaluate.evaluation import EvalParams, describe_question_counts
from ragaudit.evaluate.runs import create_run, execute_run, summarize
from ragaudit.ingest.documents import ingest_bytes
from ragaudit.pipelines.runner import DagsterRunner, instance_for
from ragaudit.platform.db import QAPair
from ragaudit.text.sentences import sentence_spans
from tests.conftest import DATA, ROOT, SAMPLES

SMALL = DATA / "eval_small.jsonl"
VOLATILE = {"latency_ms", "seconds", "run_id", "p50", "p95"}


def _stable(obj):
    """The results without the fields that differ between two runs (timings, run id)."""
    if isinstance(obj, dict):
        return {k: _stable(v) for k, v in obj.items() if k not in VOLATILE}
    if isinstance(obj, list):
        return [_stable(v) for v in obj]
    return obj


def _readme_evaluation_example() -> tuple[str, dict]:
    """The gold set file and the ``POST /evaluate`` body of the README's curl example."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    upload = re.search(r"curl -s -F file=@(\S+) localhost:8000/datasets\n", text)
    start = re.search(r"curl -s localhost:8000/evaluate -H 'content-type: application/json' -d '(\{.*?\})'\n", text)
    assert upload and start, "the README shows no evaluation over HTTP"
    return upload.group(1), json.loads(start.group(1))


SPLIT_12 = "12 questions: 11 answerable (retrieval metrics), 1 must-refuse (refusal accuracy covers all 12)"


def test_question_counts_in_words():
    """Fails if the counts in words lose the split, claim refusal accuracy for a retrieval-only
    run, or if a run's summary reads its counts wrongly (also from results that name the
    must-refuse count ``n_refuse`` only)."""
    assert describe_question_counts(12, 1, answers=True) == SPLIT_12
    assert describe_question_counts(1, 0, answers=True) == (
        "1 question: 1 answerable (retrieval metrics), 0 must-refuse (refusal accuracy covers it)"
    )
    assert describe_question_counts(5, 2, answers=False) == (
        "5 questions: 3 answerable (retrieval metrics), 2 must-refuse (not scored: retrieval-only run)"
    )
    s = summarize({"dataset": {"name": "x", "n_questions": 7, "n_refuse": 3}, "modes": {}, "answers": {"hybrid": {}}})
    assert (s["n_questions"], s["n_answerable"], s["n_unanswerable"]) == (7, 4, 3)
    assert s["question_split"] == (
        "7 questions: 4 answerable (retrieval metrics), 3 must-refuse (refusal accuracy covers all 7)"
    )


def test_the_cli_table_says_how_many_concise_answers_em_and_f1_count(capsys):
    """EM and F1 are computed over the concise answers shown, and few pass the confidence
    threshold: fails if the CLI's answer line leaves out concise coverage and precision, so a
    reader sees an EM near 0 without why."""
    from ragaudit.api.cli import _print_eval_table

    res = {
        "dataset": {"name": "x.jsonl"},
        "judge": "deterministic",
        "modes": {},
        "answers": {
            "hybrid": {
                "exact_match": 0.05,
                "f1": 0.06,
                "concise_coverage": 0.1,
                "concise_precision": 1.0,
                "latency_ms": {"mean": 12.0},
                "cost_usd": {"total": 0.0},
            }
        },
    }
    _print_eval_table(res, "2 questions")
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("answers hybrid:"))
    assert "concise_coverage 0.100" in line and "concise_precision 1.000" in line, line


def test_cli_eval_json_then_api_run_gives_the_same_results(kb, monkeypatch):
    """Fails if the CLI and the API disagree on a run of the same set, if metrics leave their
    ranges, or if the default modes include one the settings cannot run (hybrid_rerank without
    a reranker) or differ between the CLI, the API and GET /modes; if the results, the run's
    summary or the CLI's table do not say which questions the retrieval metrics count (answerable
    ones, not the must-refuse one); or if the README's curl example of an evaluation does not
    start a run here."""
    from ragaudit.answer import concise

    monkeypatch.setenv("RAGAUDIT_DATA_DIR", str(kb.settings.data_dir))
    for var in ("RAGAUDIT_DATABASE_URL", "RAGAUDIT_QDRANT_URL", "RAGAUDIT_LLM_MODEL", "RAGAUDIT_JUDGE_MODEL"):
        monkeypatch.delenv(var, raising=False)
    # every extracted concise answer is shown, in the CLI's run and the API's alike, so that EM / F1
    # and precision are checked on the extractors' spans (the threshold: tests/core/test_concise.py)
    monkeypatch.setitem(concise.CALIBRATION, "threshold", 0.0)
    res = CliRunner().invoke(app, ["eval", "--dataset", str(SMALL), "--json"])
    assert res.exit_code == 0, res.output
    cli = json.loads(res.stdout)
    assert "eval (questions x modes): 36/36 (100%)" in res.stderr  # progress (plain lines: not a TTY)

    assert cli["judge"] == "deterministic" and cli["answerer"] == "extractive"
    assert cli["dataset"] == {
        "name": "eval_small.jsonl",
        "n_questions": 12,
        "n_answerable": 11,
        "n_unanswerable": 1,
        "n_refuse": 1,
    }
    # default modes: the configured ones (no reranker here, so no hybrid_rerank, not even as skipped)
    assert set(cli["modes"]) == {"vector", "bm25", "hybrid"} and cli["skipped_modes"] == {}
    for v in cli["modes"].values():
        assert v["n"] == cli["dataset"]["n_answerable"]  # the refuse question is not a retrieval question
        assert set(v) >= {"hit@1", "hit@5", "hit@10", "mrr", "ndcg@10", "evidence_recall@5", "evidence_recall@10"}
        assert 0 < v["mrr"] <= v["hit@10"] <= 1 and v["hit@1"] <= v["hit@5"] <= v["hit@10"]
    assert cli["modes"]["hybrid"]["hit@5"] >= 0.9
    for m, a in cli["answers"].items():
        assert a["n"] == 12 and a["counts"]["f1"] == 11 and a["counts"]["citation_validity"] == 11
        for k in ("exact_match", "f1", "refusal_accuracy", "citation_validity", "faithfulness"):
            assert a[k] is not None and 0 <= a[k] <= 1, (m, k)
        assert a["f1"] >= a["exact_match"] and a["faithfulness"] >= 0.5 and a["cost_usd"]["total"] == 0.0
        # coverage over the questions with a gold answer; precision over the shown concise answers only
        assert a["counts"]["concise_coverage"] == 11
        shown = round(a["concise_coverage"] * 11)
        assert a["counts"].get("concise_precision", 0) == shown, (m, a["counts"])
    ci = cli["comparisons"]["hybrid_vs_vector"]
    # beside the concise answer's F1 (0 when withheld), what an offline answerer is judged by:
    # refusal accuracy over every question, citation validity over those with a gold page
    assert set(ci) == {"hit@5", "f1", "refusal_accuracy", "citation_validity"}, set(ci)
    for metric in ci:
        lo, hi = ci[metric]["ci95"]
        assert lo <= ci[metric]["diff"] <= hi and ci[metric]["seed"] == 0
    assert ci["refusal_accuracy"]["n"] == 12 and ci["citation_validity"]["n"] == 11, ci
    jc = cli["judge_control"]
    assert jc["judge"] == "deterministic" and jc["n"] >= 1 and jc["failed"] == jc["n"]

    q = {x["id"]: x for x in cli["questions"]}
    dmca = q["sample-001"]
    # EM / F1 on the answerer's own concise answer; the gold-guided span is kept beside it as an upper bound
    assert dmca["answers"]["hybrid"]["concise_answer"] == "October 28, 1998"
    assert dmca["answers"]["hybrid"]["concise_answer_gold_guided"] == "october 28 1998"
    assert dmca["answers"]["hybrid"]["metrics"]["exact_match"]["value"] == 1.0
    assert dmca["answers"]["hybrid"]["metrics"]["exact_match_gold_guided"]["value"] == 1.0
    assert dmca["answers"]["hybrid"]["metrics"]["concise_coverage"]["value"] == 1.0
    assert dmca["answers"]["hybrid"]["metrics"]["concise_precision"]["value"] == 1.0
    # a withheld concise answer: no precision, coverage 0, F1 0; as many as the coverage says
    withheld = [
        x["answers"]["hybrid"]["metrics"]
        for x in cli["questions"]
        if x["answers"]["hybrid"]["metrics"].get("concise_coverage", {}).get("value") == 0.0
    ]
    assert len(withheld) == 11 - round(cli["answers"]["hybrid"]["concise_coverage"] * 11)
    for m in withheld:
        assert "concise_precision" not in m and m["f1"]["value"] == 0.0
    for a in cli["answers"].values():
        assert a["f1_gold_guided"] >= a["f1"] and a["exact_match_gold_guided"] >= a["exact_match"]
    assert set(dmca["retrieval"]["hybrid"]["list_ranks"]) == {"fused", "vector", "bm25"}
    assert dmca["retrieval"]["hybrid"]["list_ranks"]["fused"] == dmca["ranks"]["hybrid"]
    assert len(dmca["retrieval"]["hybrid"]["retrieved_chunk_ids"]) == 10
    assert q["sample-008"]["retrieval"]["hybrid"]["scope_violations"] == 0
    assert "exact_match" not in q["sample-012"]["answers"]["hybrid"]["metrics"]
    assert "answered_cited" not in q["sample-012"]["answers"]["hybrid"]["metrics"]  # a refuse question
    for x in cli["questions"]:  # answered_cited = label answered and a citation on a gold place
        m = x["answers"]["hybrid"]
        if "answered_cited" in m["metrics"]:
            want = m["label"] == "answered" and m["metrics"]["citation_validity"]["value"] == 1.0
            assert m["metrics"]["answered_cited"]["value"] == float(want)
    assert cli["answers"]["hybrid"]["counts"]["answered_cited"] == 11

    # the table the CLI prints says what its n column counts, in words
    res = CliRunner().invoke(app, ["eval", "--dataset", str(SMALL), "--modes", "hybrid", "--retrieval-only"])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[1] == (
        "12 questions: 11 answerable (retrieval metrics), 1 must-refuse (not scored: retrieval-only run)"
    ), lines
    assert lines[3].startswith("hybrid") and lines[3].split()[-1] == "11", lines

    # the API, as the README shows it: import the same file, start a run, it returns at once and
    # completes in the background
    upload, body = _readme_evaluation_example()
    assert ROOT / upload == SMALL and body == {"dataset": SMALL.name}
    with TestClient(create_app(kb.settings)) as client:
        with open(ROOT / upload, "rb") as f:  # curl -F file=@PATH sends the file's name
            r = client.post("/datasets", files={"file": (SMALL.name, f, "application/x-ndjson")})
        assert r.status_code == 201 and r.json()["n_questions"] == 12
        assert any(d["name"] == "eval_small.jsonl" for d in client.get("/datasets").json())
        assert any(d["name"] == "generated" and d["n_questions"] > 0 for d in client.get("/datasets").json())
        t = time.perf_counter()
        r = client.post("/evaluate", json=body)
        assert r.status_code == 202 and time.perf_counter() - t < 5
        run = r.json()
        assert run["status"] in ("queued", "running") and run["results"] is None
        assert run["params"]["modes"] == ["vector", "bm25", "hybrid"]  # the configured modes, recorded
        assert client.get("/modes").json() == {
            "available": ["vector", "bm25", "hybrid"],
            "unavailable": {"hybrid_rerank": "no reranker configured (RAGAUDIT_RERANKER_MODEL)"},
        }
        deadline = time.time() + 300
        while run["status"] in ("queued", "running") and time.time() < deadline:
            time.sleep(1)
            run = client.get(f"/evaluate/{run['id']}").json()
        assert run["status"] == "done", run["error"]
        assert run["progress"]["done"] == run["progress"]["total"] == 36
        assert _stable(run["results"]) == _stable(cli)
        summary = run["summary"]
        assert (summary["n_questions"], summary["n_answerable"], summary["n_unanswerable"]) == (12, 11, 1)
        assert summary["question_split"] == SPLIT_12
        assert summary["modes"]["hybrid"]["n"] == summary["n_answerable"]
        for k in ("citation_validity", "concise_precision", "concise_coverage", "refusal_accuracy"):
            assert summary["answers"]["hybrid"][k] == run["results"]["answers"]["hybrid"][k], k
        assert summary["answers"]["hybrid"]["citation_validity"] is not None
        listed = client.get("/evaluate").json()
        assert run["id"] in [x["id"] for x in listed] and cli["run_id"] in [x["id"] for x in listed]
        assert client.get("/evaluate/nope").status_code == 404
        assert client.post("/evaluate", json={"dataset": "no-such-set"}).status_code == 404
        bad = client.post("/datasets", files={"file": ("bad.jsonl", b'{"id": "x"}\n', "application/x-ndjson")})
        assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "file", 1, "question"]


FAKE = "The aircraft was painted purple."


def _fake_llm(real_completion, calls):
    """A stand-in for a paid model: builds each reply from the prompt and returns it through
    litellm's own ``mock_response`` path (usage, cost and response objects are litellm's)."""

    def first_sentence(text):
        s, e = sentence_spans(text)[0]
        return text[s:e]

    def completion(model, messages, **kw):
        system, user = messages[0]["content"], messages[-1]["content"]
        if system.startswith("You write evaluation questions"):
            calls["generate"] += 1
            # the passage inside its <source> delimiters (the prompt treats it as data)
            passage = user.split("Passage:\n", 1)[1].split(">\n", 1)[1].rsplit("\n</source>", 1)[0]
            ev = first_sentence(passage)
            q = f"What does the report say about {' '.join(w.strip(':;,.') for w in ev.split()[:8])}?"
            reply = {
                "pairs": [
                    {"question": q, "answer": ev.split()[0], "evidence": ev},
                    {"question": "What colour was the aircraft?", "answer": "purple", "evidence": FAKE},
                ]
            }
        elif system.startswith("You are a strict evaluation judge"):
            calls["judge"] += 1
            sources = user.split("Sources:\n", 1)[1].split("\n\nAnswer claims:\n")[0]
            claims = user.split("Answer claims:\n", 1)[1].splitlines()
            verdicts = []
            for line in claims:
                i, text = line.split(". ", 1)
                text = text.rsplit(" (cites", 1)[0]
                if "painted purple" in text:  # the "judge" hallucinates support with an invented quote
                    verdicts.append({"i": int(i), "supported": True, "source": 1, "quote": FAKE})
                else:
                    sup = text in re.sub(r"\s+", " ", sources)
                    verdicts.append({"i": int(i), "supported": sup, "source": 1, "quote": text if sup else ""})
            reply = {"claims": verdicts, "context_relevance": 0.75, "answer_relevance": 0.5}
        else:
            calls["answer"] += 1
            src1 = user.split('<source n="1"', 1)[1].split(">\n", 1)[1].split("\n</source>", 1)[0]
            return real_completion(
                model=model, messages=messages, mock_response=f"{first_sentence(src1)} [1] {FAKE[:-1]} [1].", **kw
            )
        return real_completion(model=model, messages=messages, mock_response=json.dumps(reply), **kw)

    return completion


def test_llm_generation_and_judge_paths_with_mock_responses(tmp_path, embedder, monkeypatch):
    from ragaudit.services import get_services, release_services
    from tests.conftest import make_settings

    calls = {"generate": 0, "judge": 0, "answer": 0}
    monkeypatch.setattr(litellm, "completion", _fake_llm(litellm.completion, calls))
    model = "openai/gpt-4o-mini"
    settings = make_settings(tmp_path / "llm", llm_model=model, llm_api_key="sk-test")
    svc = get_services(settings)
    try:
        out = ingest_bytes(svc, (SAMPLES / "20080102X00002.pdf").read_bytes(), "20080102X00002.pdf", DagsterRunner())
        assert out.status == "ingested", out.message
        n_chunks = out.document["chunk_count"]
        sampled = len(range(0, n_chunks, 3))
        assert calls["generate"] == sampled
        md = (
            instance_for(svc)
            .get_latest_materialization_event(__import__("dagster").AssetKey("gold_qa_pairs"))
            .asset_materialization.metadata
        )
        # one pair per chunk had evidence that is not in the chunk: discarded and counted
        assert md["kept"].value == sampled and md["discarded"].value == sampled
        assert md["generator"].value == "llm" and md["model"].value == model
        with svc.sessions() as s:
            pairs = s.scalars(select(QAPair)).all()
        assert len(pairs) == sampled and {(p.generator, p.model) for p in pairs} == {("llm", model)}
        assert all(FAKE not in p.evidence for p in pairs)

        run_id = create_run(svc, "generated", EvalParams(modes=["vector", "hybrid"], top_k=1))
        res = execute_run(svc, run_id)
        assert res["judge"] == model and res["answerer"] == model
        assert calls["answer"] == 2 * sampled and calls["judge"] >= 2 * sampled
        for q in res["questions"]:
            a = q["answers"]["hybrid"]
            fake = [c for c in a["claims"] if c["quote"] == FAKE]
            assert fake and not fake[0]["supported"] and "not found in the cited chunk" in fake[0]["reason"]
            assert a["metrics"]["context_relevance"]["value"] == 0.75
        faith = res["answers"]["hybrid"]["faithfulness"]
        assert faith is not None and faith <= 0.5  # the invented quote never counts as support
        assert res["answers"]["hybrid"]["cost_usd"]["total"] > 0  # litellm prices the mocked usage
        jc = res["judge_control"]
        assert jc["judge"] == model and jc["n"] >= 1 and jc["failed"] == jc["n"] and jc["all_failed"]
    finally:
        release_services(settings)


def test_a_run_records_the_knowledge_base_it_searched(fresh_services):
    """Fails if a run's ``index`` does not change when a document is added between two runs
    (their comparison would not show that the collection changed), if it counts other than the
    live chunks and their documents, or if a document added while a run is going is not flagged."""
    from ragaudit.evaluate.evaluation import evaluate, load_dataset

    svc = fresh_services
    questions = [q for q in load_dataset(SMALL) if q.doc_name == "dmca.pdf"][:2]
    assert questions
    params = EvalParams(modes=["bm25"], answers=False)
    ingest_bytes(svc, (SAMPLES / "dmca.pdf").read_bytes(), "dmca.pdf", DagsterRunner())
    first = evaluate(svc, questions, params)["index"]
    assert first["documents"] == 1 and first["chunks"] > 10 and first["changed_during_run"] is False
    sibling = SAMPLES / "20080102X00002.pdf"
    ingest_bytes(svc, sibling.read_bytes(), sibling.name, DagsterRunner())
    second = evaluate(svc, questions, params)["index"]
    assert second["version"] > first["version"] and second["documents"] == 2 and second["chunks"] > first["chunks"]

    def add_one(done, total):
        if done == 1:
            other = SAMPLES / "20071229X02007.pdf"
            ingest_bytes(svc, other.read_bytes(), other.name, DagsterRunner())

    third = evaluate(svc, questions, params, progress=add_one)["index"]
    assert third["documents"] == 2 and third["changed_during_run"] is True, third

"""GET /evaluate/{id}/intervals: each mode's metrics with a 95% bootstrap interval, from a real run."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from ragaudit.api.app import create_app
from ragaudit.api.routes.eval_views import mean_ci
from tests.conftest import SAMPLES, finished_run, make_settings


def test_mean_ci_properties():
    """fails if the interval does not bracket the mean, is not reproducible, ignores the spread,
    or claims an interval from one value."""
    vals = [1, 0, 1, 1, 0, 1, 1, 1, 0, 1]
    a, b = mean_ci(vals), mean_ci(vals)
    assert a == b and a["n"] == 10 and a["mean"] == 0.7
    lo, hi = a["ci95"]
    assert 0 <= lo < 0.7 < hi <= 1
    wider = mean_ci([1, 0] * 3)["ci95"]
    narrower = mean_ci([1, 0] * 50)["ci95"]
    assert wider[1] - wider[0] > narrower[1] - narrower[0]
    assert mean_ci([1, 1, 1])["ci95"] == [1.0, 1.0]
    assert mean_ci([0.5])["ci95"] is None and mean_ci([])["mean"] is None


def test_intervals_of_a_run(tmp_path, embedder):
    """fails if the intervals' means disagree with the run's own per-mode means (wrong per-question
    values read), if a mode is missing, if an unknown/unfinished run is not a clear 4xx, if a
    finished run read alone lacks the summary the list of runs shows, or if that summary
    miscounts the questions its retrieval metrics cover."""
    from ragaudit.services import release_services

    settings = make_settings(tmp_path / "ev")
    with TestClient(create_app(settings)) as c:
        # an accident report (labelled values) and a statute (sentences): enough gold pairs for intervals
        for name in ("dmca.pdf", "20071229X02007.pdf"):
            with open(SAMPLES / name, "rb") as f:
                assert (
                    c.post(
                        "/documents", params={"wait": "true"}, files={"file": (name, f, "application/pdf")}
                    ).status_code
                    == 201
                )
        assert c.get("/evaluate/nope/intervals").status_code == 404
        run = c.post("/evaluate", json={"dataset": "generated", "modes": ["vector", "bm25"], "answers": False}).json()
        r = finished_run(c, run["id"])
        assert r["status"] == "done", r
        # a finished run read alone carries the same summary as in the list of runs
        listed = next(x for x in c.get("/evaluate").json() if x["id"] == run["id"])
        assert r["summary"] is not None and r["summary"] == listed["summary"]
        assert r["summary"]["modes"]["bm25"]["hit@5"] == r["results"]["modes"]["bm25"]["hit@5"]
        # generated pairs all have evidence: every one counts in the retrieval metrics; no answers, no refusals scored
        n = r["summary"]["n_questions"]
        assert n > 0 and r["summary"]["n_answerable"] == n == r["results"]["modes"]["bm25"]["n"]
        assert r["summary"]["question_split"] == (
            f"{n} questions: {n} answerable (retrieval metrics), 0 must-refuse (not scored: retrieval-only run)"
        )
        iv = c.get(f"/evaluate/{run['id']}/intervals")
        assert iv.status_code == 200, iv.text
        body = iv.json()
        assert set(body["retrieval"]) == {"vector", "bm25"} and body["answers"] == {}
        for mode, metrics in r["results"]["modes"].items():
            for k in ("hit@5", "mrr"):
                got = body["retrieval"][mode][k]
                assert got["mean"] == pytest.approx(metrics[k], abs=1e-6)
                assert got["n"] == metrics["n"]
                assert got["ci95"][0] <= got["mean"] <= got["ci95"][1]
    release_services(settings)

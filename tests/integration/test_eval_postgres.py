"""Datasets, gold pairs and evaluation runs on a real PostgreSQL 15 server (JSON columns,
migration 0002, cascade of a document's gold pairs on delete)."""

import pytest
from sqlalchemy import inspect, select

from ragaudit.evaluate.evaluation import EvalParams
from ragaudit.evaluate.runs import create_run, execute_run, get_run, import_dataset, list_datasets
from ragaudit.ingest.documents import delete_document, ingest_bytes
from ragaudit.pipelines.runner import DagsterRunner
from ragaudit.platform.db import EvalRun, QAPair
from ragaudit.services import get_services, release_services
from tests.conftest import DATA, SAMPLES, make_settings

pytestmark = pytest.mark.integration


def test_gold_pairs_datasets_and_runs_on_postgres(pg_url, tmp_path, embedder):
    settings = make_settings(tmp_path / "pg-eval", database_url=pg_url)
    svc = get_services(settings)
    try:
        assert {"eval_datasets", "eval_questions", "eval_runs"} <= set(inspect(svc.engine).get_table_names())
        out = ingest_bytes(svc, (SAMPLES / "20080102X00002.pdf").read_bytes(), "ntsb.pdf", DagsterRunner())
        assert out.status == "ingested"
        with svc.sessions() as s:
            assert s.scalars(select(QAPair).where(QAPair.document_id == out.document["id"])).all()
        ds = import_dataset(svc, "pg-small", (DATA / "eval_small.jsonl").read_text())
        assert ds["n_questions"] == 12 and any(d["name"] == "pg-small" for d in list_datasets(svc))
        run_id = create_run(svc, "pg-small", EvalParams(modes=["bm25", "hybrid"], answers=False))
        res = execute_run(svc, run_id)
        assert res["modes"]["hybrid"]["n"] == 11 and "answers" not in res
        stored = get_run(svc, run_id)
        assert stored["status"] == "done" and stored["results"]["modes"] == res["modes"]
        delete_document(svc, out.document["id"])
        with svc.sessions() as s:
            assert s.scalars(select(QAPair)).all() == []
            s.delete(s.get(EvalRun, run_id))
            s.commit()
    finally:
        release_services(settings)

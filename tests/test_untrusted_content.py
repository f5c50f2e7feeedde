"""What a document contains is neither lost nor obeyed, end to end through the API (uploads run
the Dagster asset job): repeated lines that are content stay answerable, what extraction removes
is counted in the extraction report (API document JSON, admin document view, Dagster metadata of
``pdf_pages``)."""

from __future__ import annotations

import dagster as dg
import pytest
from fastapi.testclient import TestClient

from ragaudit.api.app import create_app
from tests.conftest import make_settings
from tests.core.test_hidden_text import REAL, white_text_statement
from tests.core.test_running_lines import meter_log


@pytest.fixture(scope="module")
def app(tmp_path_factory, embedder):
    from ragaudit.services import get_services, release_services

    settings = make_settings(tmp_path_factory.mktemp("content"))
    with TestClient(create_app(settings)) as c:
        yield c, get_services(settings)
    release_services(settings)


def upload(client, name: str, data: bytes) -> dict:
    r = client.post("/documents", params={"wait": "true"}, files={"file": (name, data, "application/pdf")})
    assert r.status_code == 201, r.text
    return r.json()["document"]


def pdf_pages_metadata(svc, document_id: str) -> dict:
    from ragaudit.pipelines.runner import instance_for

    recs = (
        instance_for(svc)
        .fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("pdf_pages"), asset_partitions=[document_id]), limit=1
        )
        .records
    )
    assert recs, "no pdf_pages materialization for the document"
    return recs[0].asset_materialization.metadata


def test_meter_log_answers_the_month_asked_for(app):
    """Fails if the readings of months 2-6 are removed as running lines: asked for month 4, the
    answer then quoted month 1's reading (the only one left), labelled answered."""
    client, _ = app
    doc = upload(client, "meter-log.pdf", meter_log())
    r = client.post("/query", json={"question": "What was the meter 7 reading for month 4?"})
    assert r.status_code == 200, r.text
    out = r.json()
    assert "4583" in out["concise_answer"], out
    assert out["label"] == "answered", out
    assert "month 4: 4583 kWh" in out["citations"][0]["quote"]
    assert all(c["supports"] for c in out["citations"])
    assert doc["extraction_report"]["running_lines"]["removed"] == 0


def test_extraction_report_in_api_admin_and_dagster(app):
    """Fails if the extraction report of a document version (hidden characters, running lines
    removed, with examples) is missing from the API document JSON, the admin document view or
    the Dagster materialization metadata of pdf_pages, or if they disagree."""
    client, svc = app
    doc = upload(client, "statement.pdf", white_text_statement())
    rep = doc["extraction_report"]
    assert rep["hidden_text"]["by_reason"] == {"background_colour": rep["hidden_text"]["chars"]}
    assert rep["hidden_text"]["chars"] > 50
    assert "99,999" in rep["hidden_text"]["examples"][0]["text"]
    assert client.get(f"/documents/{doc['id']}").json()["extraction_report"] == rep
    admin = client.get(f"/admin/api/documents/{doc['id']}")
    assert admin.status_code == 200 and admin.json()["extraction_report"] == rep
    md = pdf_pages_metadata(svc, doc["id"])
    assert md["hidden_chars_removed"].value == rep["hidden_text"]["chars"]
    assert md["running_lines_removed"].value == 0
    assert md["extraction_report"].value == rep
    # and the text a reader sees is what is searched
    chunks = client.post("/search", json={"question": "closing balance of the reserve fund"}).json()
    texts = " ".join(c["text"] for c in chunks["retrieved"] if c["doc_name"] == "statement.pdf")
    assert REAL in texts and "99,999" not in texts

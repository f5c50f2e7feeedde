"""The main job end to end on real PDFs: CLI ingest -> Dagster -> Qdrant + SQL -> cited answer."""

import json

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from ragaudit.api.cli import app
from ragaudit.ingest.documents import ingest_bytes
from ragaudit.pipelines.runner import DagsterRunner
from ragaudit.platform.db import ChunkRow, Document
from ragaudit.query import QueryService
from ragaudit.types import Scope
from tests.conftest import BAD, DMCA_QUESTION, EDGE, ROOT, SAMPLES


def test_dmca_question_cites_page_one(kb):
    out = QueryService(kb).ask(DMCA_QUESTION)
    assert out["label"] == "answered"
    assert "October 28, 1998" in out["answer"]
    assert any(
        c["doc_name"] == "dmca.pdf" and c["page"] == 1 and "October 28, 1998" in c["quote"] for c in out["citations"]
    )
    top = [r for r in out["retrieved"] if r["neighbor_of"] is None]
    assert [r["rank"] for r in top] == [1, 2, 3, 4, 5]
    for r in top:  # "fused": the RRF position, passage ranking re-ordered the list
        assert set(r["ranks"]) == {"vector", "bm25", "fused"}
        assert r["ranks"]["vector"] is not None or r["ranks"]["bm25"] is not None
    for r in out["retrieved"][5:]:  # neighbours of chunks cut from a list/table: same section, next chunk
        src = next(x for x in top if x["chunk_id"] == r["neighbor_of"])
        assert r["ranks"] == {"vector": None, "bm25": None} and r["section"] == src["section"]
    assert set(out["timings_ms"]) >= {"embed", "vector", "bm25", "fusion", "gate", "generation", "total"}
    assert out["usage"] == {"model": "extractive", "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}


def test_scope_restricts_both_legs(kb):
    out = QueryService(kb).search(
        "What was the probable cause of the accident?", Scope(doc_names=["20080102X00002.pdf"]), 10
    )
    assert out.chunks and {c.doc_name for c in out.chunks} == {"20080102X00002.pdf"}


def test_reingest_unchanged_is_a_no_op(kb):
    with kb.sessions() as s:
        before = sorted(s.scalars(select(ChunkRow.id)))
    out = ingest_bytes(kb, (SAMPLES / "dmca.pdf").read_bytes(), "dmca.pdf", DagsterRunner())
    assert out.status == "unchanged"
    with kb.sessions() as s:
        assert sorted(s.scalars(select(ChunkRow.id))) == before
    assert kb.store.count() == len(before)


def _docs(svc):
    with svc.sessions() as s:
        return sorted((d.doc_name, d.sha256, d.status) for d in s.scalars(select(Document)))


def test_changed_file_replaces_old_version_and_failure_keeps_it(fresh_services, monkeypatch):
    svc = fresh_services
    runner = DagsterRunner()
    a = (SAMPLES / "20071229X02007.pdf").read_bytes()
    b = (SAMPLES / "20080102X00002.pdf").read_bytes()
    assert ingest_bytes(svc, a, "report.pdf", runner).status == "ingested"
    old_ids = set(p for p, _ in svc.store.iter_payloads())
    q = QueryService(svc)
    assert "NYC08CA055" in " ".join(c.text for c in q.search("accident number NYC08CA055", top_k=3).chunks)

    # a failing embedding stage: the previous version stays fully queryable, no partial chunks
    real_embed = svc.embedder.embed
    calls = {"n": 0}

    def flaky(texts):
        calls["n"] += 1
        if len(texts) > 1:
            raise RuntimeError("embedding backend crashed")
        return real_embed(texts)

    monkeypatch.setattr(svc.embedder, "embed", flaky)
    out = ingest_bytes(svc, b, "report.pdf", runner)
    assert out.status == "failed" and "embedding backend crashed" in out.message and "chunk_points" in out.message
    monkeypatch.setattr(svc.embedder, "embed", real_embed)
    assert set(p for p, _ in svc.store.iter_payloads()) == old_ids
    with svc.sessions() as s:
        doc = s.scalar(select(Document))
        assert doc.status == "failed" and doc.pending_sha256 is None and "crashed" in doc.error
    assert "NYC08CA055" in " ".join(c.text for c in q.search("accident number NYC08CA055", top_k=3).chunks)

    # the changed file, ingested for real, replaces the old chunks
    out = ingest_bytes(svc, b, "report.pdf", runner)
    assert out.status == "ingested"
    new = {p: pl for p, pl in svc.store.iter_payloads()}
    assert not (set(new) & old_ids)
    assert {pl["doc_sha256"] for pl in new.values()} == {out.document["sha256"]}
    with svc.sessions() as s:
        assert set(s.scalars(select(ChunkRow.id))) == set(new)
    assert out.document["ingest_version"] == 2


def test_failed_first_ingestion_leaves_nothing(fresh_services, monkeypatch):
    svc = fresh_services

    def boom(texts):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(svc.embedder, "embed", boom)
    out = ingest_bytes(svc, (SAMPLES / "dmca.pdf").read_bytes(), "dmca.pdf", DagsterRunner())
    assert out.status == "failed"
    assert _docs(svc) == [] and svc.store.count() == 0


def test_cli_ingest_bad_and_edge_files(tmp_path, monkeypatch, embedder):
    monkeypatch.setenv("RAGAUDIT_DATA_DIR", str(tmp_path / "cli"))
    for var in ("RAGAUDIT_DATABASE_URL", "RAGAUDIT_QDRANT_URL", "RAGAUDIT_LLM_MODEL"):
        monkeypatch.delenv(var, raising=False)
    runner = CliRunner()
    res = runner.invoke(app, ["ingest", str(SAMPLES / "20080102X00002.pdf")])
    assert res.exit_code == 0, res.output
    for f in sorted(BAD.glob("*.pdf")):
        if f.name == "pdf-bad-color-space.pdf":
            continue
        res = runner.invoke(app, ["ingest", str(f)])
        assert res.exit_code == 1, (f.name, res.output)
        assert res.stdout.startswith("refused") and f.name in res.stdout
    res = runner.invoke(app, ["ingest", str(EDGE / "copy-protected.pdf"), str(EDGE / "zen_of_python_corrupted.pdf")])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["documents", "--json"])
    names = sorted(d["doc_name"] for d in json.loads(res.output))
    assert names == ["20080102X00002.pdf", "copy-protected.pdf", "zen_of_python_corrupted.pdf"]
    res = runner.invoke(app, ["ask", "What registration did the Reims F172 M carry?", "--json"])
    out = json.loads(res.output)
    assert "FBVIF" in " ".join(r["text"] for r in out["retrieved"][:3])
    from ragaudit.services import release_services
    from tests.conftest import make_settings

    release_services(make_settings(tmp_path / "cli"))


@pytest.mark.parametrize("command", ["ingest", "ask", "documents", "serve", "eval"])
def test_cli_help_renders(command):
    res = CliRunner().invoke(app, [command, "--help"])
    assert res.exit_code == 0, res.output
    assert "Usage" in res.output


@pytest.mark.parametrize("command", [["ingest", "x.pdf"], ["ask", "x?"], ["eval", "--dataset", "generated"]])
def test_cli_refuses_an_unknown_strategy_listing_the_valid_ones(command):
    """Fails if ``--strategy`` takes an unknown value (before anything is opened or ingested)
    instead of a usage error (exit 2) that names every valid strategy."""
    res = CliRunner().invoke(app, [*command, "--strategy", "paragraph"])
    assert res.exit_code == 2, res.output
    assert "paragraph" in res.output and all(s in res.output for s in ("fixed", "sentence", "heading", "semantic"))


@pytest.mark.parametrize("backend", ["edge", "local"])
def test_cli_says_when_the_embedded_store_is_in_use(tmp_path, monkeypatch, backend):
    """The embedded stores are single-process: the CLI names the problem in one line instead of a
    traceback, and ``documents``, which reads the database only, still lists. Fails if the Edge
    store opens without its folder lock, the error is not caught, or ``documents`` needs the store."""
    import subprocess
    import sys

    from ragaudit.platform.settings import Settings

    store = Settings(_env_file=None, data_dir=tmp_path / "busy", store_backend=backend).qdrant_path
    store.mkdir(parents=True)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import sys, time; sys.path.insert(0, {str(ROOT)!r}); "
            "from ragaudit.index.store import open_store; "
            f"c = open_store('ragaudit_chunks', backend={backend!r}, path={str(store)!r}); "
            "print('ready', flush=True); time.sleep(120)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        monkeypatch.setenv("RAGAUDIT_DATA_DIR", str(tmp_path / "busy"))
        monkeypatch.setenv("RAGAUDIT_STORE_BACKEND", backend)
        for var in ("RAGAUDIT_DATABASE_URL", "RAGAUDIT_QDRANT_URL"):
            monkeypatch.delenv(var, raising=False)
        res = CliRunner().invoke(app, ["ask", "anything at all?"])
        assert res.exit_code == 1
        assert "is in use by another process" in res.output and "Traceback" not in res.output
        # listing the documents reads the database only: it works while the store is held
        res = CliRunner().invoke(app, ["documents", "--json"])
        assert res.exit_code == 0, res.output
        assert json.loads(res.output) == []
    finally:
        holder.kill()
        holder.wait()


def test_cli_citation_quote_is_cut_between_words():
    """``ragaudit ask`` prints each quote in at most 160 characters. Fails if the cut falls inside a
    word or a value (the slice ``[:160]`` printed "... as of April 1, 2023, $3." for "$3.1 billion")."""
    from ragaudit.api.cli import citation_line

    quote = (
        "Revenue "
        + "grew steadily across every region " * 3
        + "and so the backlog stood, as of April 1, 2023, $3.1 billion."
    )
    assert quote.index("$3.1") < 160 < quote.index("billion")
    line = citation_line({"n": 2, "doc_name": "q.pdf", "page": 7, "quote": quote})
    shown = line.split(': "', 1)[1].rstrip('"')
    assert line.startswith("  [2] q.pdf p.7: ") and len(shown) <= 160
    assert shown.endswith(" …") and "$3." not in shown, shown
    assert quote.startswith(shown.removesuffix(" …")), shown
    short = citation_line({"n": 1, "doc_name": "q.pdf", "page": 1, "quote": "Net sales were $81,797."})
    assert short.endswith('"Net sales were $81,797."')

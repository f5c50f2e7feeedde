"""Dagster definitions load; the assets run directly and through dg.materialize on a real PDF."""

import dagster as dg
from sqlalchemy import func, select

from ragaudit.ingest.documents import register
from ragaudit.pipelines.definitions import INGEST_ASSETS, INGEST_CHECKS, defs
from ragaudit.pipelines.resources import RagauditResource
from ragaudit.platform.db import ChunkRow
from ragaudit.services import services_key
from tests.conftest import SAMPLES


def test_definitions_load():
    dg.Definitions.validate_loadable(defs)
    job = defs.resolve_job_def("ingest_document")
    assert {n.name for n in job.nodes_in_topological_order} >= {"pdf_pages", "chunks", "chunk_points"}
    keys = {a.key.to_user_string() for a in defs.resolve_all_asset_specs()}
    assert {"pdf_pages", "chunks", "chunk_points"} <= keys


def test_assets_called_directly_then_materialized(fresh_services, tmp_path):
    from ragaudit.pipelines.assets import chunks, pdf_pages

    svc = fresh_services
    data = (SAMPLES / "20080102X00002.pdf").read_bytes()
    doc, needs_run = register(svc, data, "20080102X00002.pdf")
    assert needs_run
    res = RagauditResource(services_key=services_key(svc.settings))
    pages_out = pdf_pages(dg.build_asset_context(partition_key=doc.id), ragaudit=res)
    assert pages_out.metadata["pages"].value == 3
    chunks_out = chunks(dg.build_asset_context(partition_key=doc.id), ragaudit=res, pdf_pages=pages_out.value)
    assert chunks_out.metadata["max_tokens"].value <= svc.embedder.max_content_tokens

    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("documents", [doc.id])
    result = dg.materialize(
        [*INGEST_ASSETS, *INGEST_CHECKS], partition_key=doc.id, instance=instance, resources={"ragaudit": res}
    )
    assert result.success
    mat = result.asset_materializations_for_node("chunk_points")[0]
    n_chunks = mat.metadata["chunks"].value
    with svc.sessions() as s:
        assert s.scalar(select(func.count()).select_from(ChunkRow)) == n_chunks
    assert svc.store.count(doc.id) == n_chunks
    checks = result.get_asset_check_evaluations()
    assert checks and all(c.passed for c in checks)

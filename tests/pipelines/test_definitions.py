"""Dagster definitions load; the assets run directly and through dg.materialize on a real PDF."""

import dagster as dg
from sqlalchemy import func, select

from ragaudit.ingest.documents import get_document, register
from ragaudit.pipelines.definitions import INGEST_ASSETS, INGEST_CHECKS, defs
from ragaudit.pipelines.resources import RagauditResource
from ragaudit.platform.db import ChunkRow
from ragaudit.services import services_key
from ragaudit.types import Strategy
from tests.conftest import SAMPLES


def test_definitions_load():
    dg.Definitions.validate_loadable(defs)
    job = defs.resolve_job_def("ingest_document")
    assert {n.name for n in job.nodes_in_topological_order} >= {"pdf_pages", "chunks", "chunk_points"}
    keys = {a.key.to_user_string() for a in defs.resolve_all_asset_specs()}
    assert {"pdf_pages", "chunks", "chunk_points"} <= keys


def test_loading_the_code_location_prints_no_dagster_warning():
    """The code location as the webserver and daemon load it, in a fresh process: nothing on stderr.
    Fails if dagster's warnings about its own calls come back (a BetaWarning about the sensor's
    ``owners`` at every load, a PreviewWarning about partitioned asset checks), which filled the
    server, webserver and daemon logs."""
    import subprocess
    import sys

    code = "import ragaudit.pipelines.definitions as d; d.defs.get_repository_def()"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Warning" not in r.stderr, r.stderr[-2000:]


def test_assets_called_directly_then_materialized(fresh_services, tmp_path):
    """Fails if the assets cannot be called directly, if a run without config does not build the
    strategy the document was queued with, if the strategy in the run config does not reach the
    chunker, the points, the rows and the document (one typed value, one way), or if the
    materialized version's counts or checks fail."""
    from ragaudit.pipelines.assets import IngestConfig, chunks, pdf_pages, strategy_run_config

    svc = fresh_services
    data = (SAMPLES / "20080102X00002.pdf").read_bytes()
    doc, needs_run = register(svc, data, "20080102X00002.pdf")
    assert needs_run
    res = RagauditResource(services_key=services_key(svc.settings))
    pages_out = pdf_pages(dg.build_asset_context(partition_key=doc.id), ragaudit=res)
    assert pages_out.metadata["pages"].value == 3
    ctx = dg.build_asset_context(partition_key=doc.id)
    chunks_out = chunks(ctx, config=IngestConfig(), ragaudit=res, pdf_pages=pages_out.value)
    assert chunks_out.metadata["max_tokens"].value <= svc.embedder.max_content_tokens
    assert chunks_out.metadata["strategy"].value == "sentence"  # queued with the default

    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("documents", [doc.id])
    result = dg.materialize(
        [*INGEST_ASSETS, *INGEST_CHECKS],
        partition_key=doc.id,
        instance=instance,
        resources={"ragaudit": res},
        run_config=strategy_run_config(Strategy.fixed),
    )
    assert result.success
    assert result.asset_materializations_for_node("chunks")[0].metadata["strategy"].value == "fixed"
    assert {p["strategy"] for _, p in svc.store.iter_payloads()} == {"fixed"}
    assert get_document(svc, doc.id).strategy == "fixed"
    mat = result.asset_materializations_for_node("chunk_points")[0]
    n_chunks = mat.metadata["chunks"].value
    with svc.sessions() as s:
        assert s.scalar(select(func.count()).select_from(ChunkRow)) == n_chunks
    assert svc.store.count(doc.id) == n_chunks
    checks = result.get_asset_check_evaluations()
    assert checks and all(c.passed for c in checks)


def test_a_run_that_does_not_publish_leaves_the_document_as_it_found_it(fresh_services):
    """Materializing ``pdf_pages`` (or ``chunks``) alone from the Dagster UI ended with the run's
    success and the document still ``extracting``: a new upload of it was refused as busy until
    the server restarted. Fails if such a run leaves a published document in a running status
    instead of ``ready``, a never-published one anything but ``queued``, or if the document
    cannot then be uploaded again."""
    from ragaudit.pipelines.assets import chunks, pdf_pages

    svc = fresh_services
    data = (SAMPLES / "20080102X00002.pdf").read_bytes()
    doc, _ = register(svc, data, "20080102X00002.pdf")
    res = RagauditResource(services_key=services_key(svc.settings))
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("documents", [doc.id])

    def run(selection):
        result = dg.materialize(
            INGEST_ASSETS, selection=selection, partition_key=doc.id, instance=instance, resources={"ragaudit": res}
        )
        assert result.success
        return get_document(svc, doc.id)

    # never published: back in the queue, for the run that builds it
    assert run([pdf_pages, chunks]).status == "queued"
    assert run(INGEST_ASSETS).status == "ready"
    version = get_document(svc, doc.id).ingest_version
    # published: ready again, the same version still live
    after = run([pdf_pages])
    assert (after.status, after.ingest_version) == ("ready", version)
    again, needs_run = register(svc, data, "20080102X00002.pdf")  # not refused as busy
    assert again.id == doc.id and not needs_run


def test_materializing_live_index_alone_keeps_the_document_and_says_what_to_run(fresh_services):
    """Materializing ``live_index`` alone from the Dagster UI for a document already ``ready`` has
    nothing of a new version to publish. Fails if such a run marks the
    document anything but what it was (``ready`` with its live version, or ``queued`` with the
    version that waits), loses a chunk, or fails without saying which run builds the document."""
    from ragaudit.pipelines.assets import live_index, pdf_pages
    from ragaudit.query import QueryService
    from ragaudit.types import Scope

    svc = fresh_services
    name = "20080102X00002.pdf"
    doc, _ = register(svc, (SAMPLES / name).read_bytes(), name)
    res = RagauditResource(services_key=services_key(svc.settings))
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("documents", [doc.id])

    def run(selection):
        return dg.materialize(
            INGEST_ASSETS,
            selection=selection,
            partition_key=doc.id,
            instance=instance,
            resources={"ragaudit": res},
            raise_on_error=False,
        )

    def searchable() -> int:
        hits = QueryService(svc).retriever.retrieve("airplane accident pilot", Scope(doc_names=[name]), 5, "bm25")
        return len(hits.chunks)

    assert run(INGEST_ASSETS).success
    live = get_document(svc, doc.id)
    assert live.status == "ready" and searchable()
    n_points = svc.store.count(doc.id)

    result = run([live_index])
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure).step_failure_data.user_failure_data
    assert failure is not None and "ingest_document" in failure.description, failure
    after = get_document(svc, doc.id)
    assert (after.status, after.error, after.ingest_version) == ("ready", None, live.ingest_version)
    assert svc.store.count(doc.id) == n_points and searchable()
    # with pdf_pages (which marks the document extracting) but not chunk_points: ready again too
    assert not run([pdf_pages, live_index]).success
    after = get_document(svc, doc.id)
    assert (after.status, after.ingest_version) == ("ready", live.ingest_version)

    # a new version waits (other bytes under the same name): still queued with it afterwards
    other = (SAMPLES / "20071229X02007.pdf").read_bytes()
    queued, needs_run = register(svc, other, name)
    assert needs_run and queued.status == "queued" and queued.pending_sha256
    assert not run([live_index]).success
    after = get_document(svc, doc.id)
    assert (after.status, after.pending_sha256, after.ingest_version) == (
        "queued",
        queued.pending_sha256,
        live.ingest_version,
    )
    assert svc.store.count(doc.id) == n_points and searchable()
    assert run(INGEST_ASSETS).success  # the whole chain builds the waiting version
    assert get_document(svc, doc.id).ingest_version == live.ingest_version + 1

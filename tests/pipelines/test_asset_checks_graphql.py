"""The must-show of issue 10: an asset check broken on purpose (one Qdrant point deleted) fails in
the Dagster UI's data and passes again after ``ragaudit reindex --doc NAME``.

Everything an operator touches is real: the API serving on a port (embedded Qdrant, owner of the
store), the Dagster GraphQL schema the UI reads and writes (``dagster_graphql``; the same schema
``dagster-webserver`` serves, here over an in-process workspace instead of a code-server
subprocess), the queued-run daemon's dequeue iteration, the ``StoreOwnerRunLauncher`` handing the
check run to the API over HTTP, and the ``ragaudit`` command in a process of its own. Starting the
webserver and daemon as processes is covered once by tests/system/test_dagster_launcher.py."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest
import uvicorn

from tests.conftest import ROOT, SAMPLES
from tests.dagster_gql import LAUNCH, RUN

pytestmark = pytest.mark.slow
PDF = SAMPLES / "20080102X00002.pdf"

# what the UI's asset page shows for each check: its latest execution (status, metadata)
EXECUTIONS = """
query Executions($key: AssetKeyInput!, $name: String!) {
  assetCheckExecutions(assetKey: $key, checkName: $name, limit: 1) {
    runId status partition
    evaluation { success metadataEntries { label ... on IntMetadataEntry { intValue } } }
  }
}"""
CHECKS = [("chunk_points", "chunk_counts_match"), ("live_index", "no_orphans")]


class LiveAPI:
    """``create_app()`` under uvicorn on ``port`` in a thread (lifespan included); stopped on exit."""

    def __init__(self, app, port: int):
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 120
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "the API did not start"
            time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(30)
        assert not self.thread.is_alive(), "the API did not stop"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_broken_check_fails_in_dagster_graphql_and_passes_after_reindex(tmp_path, monkeypatch, embedder):
    """Ingest a real PDF through the API, delete one of its Qdrant points, execute the checks
    through GraphQL as the UI's "Execute checks" does (run queued, dequeued by the daemon's
    iteration, handed to the API by the launcher): the checks' latest executions read through
    GraphQL are FAILED (rows 1 more than points, 1 orphan row), the document is left as it was;
    ``ragaudit reindex --doc NAME`` (its own process, while the API holds the store) rebuilds it
    through the API, and the checks executed again read SUCCEEDED.

    Fails if the checks cannot fail (a lost point goes unnoticed), if a check-only run marks the
    document failed or deletes anything, if ``reindex --doc`` skips a document whose live
    version looks unchanged (the damage stayed), if ``reindex`` cannot run beside ``ragaudit
    serve`` (store in use: exit 1), or if the launcher/API/daemon chain loses a check run."""
    from dagster._core.remote_origin import InProcessCodeLocationOrigin
    from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import InProcessWorkspaceLoadTarget
    from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import QueuedRunCoordinatorDaemon
    from dagster_graphql.test.utils import execute_dagster_graphql

    from ragaudit.api.app import create_app
    from ragaudit.pipelines.partitions import partition_key
    from ragaudit.pipelines.runner import instance_for
    from ragaudit.platform.settings import Settings
    from ragaudit.services import get_services, release_services

    data, port = tmp_path / "data", _port()
    home = data / "dagster_home"
    home.mkdir(parents=True)
    shutil.copy(ROOT / "dagster.yaml", home / "dagster.yaml")  # StoreOwnerRunLauncher, queued runs
    for k in [k for k in os.environ if k.startswith("RAGAUDIT_")]:
        monkeypatch.delenv(k)
    env = dict(
        RAGAUDIT_DATA_DIR=str(data),
        RAGAUDIT_PORT=str(port),
        DAGSTER_HOME=str(home),
        RAGAUDIT_EMBEDDING_MODEL="bundled:all-MiniLM-L6-v2",
    )
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    settings = Settings(_env_file=None)  # what `ragaudit serve` reads; runs of the launcher read the same
    svc = get_services(settings)
    base = f"http://127.0.0.1:{port}"
    try:
        with LiveAPI(create_app(settings), port):
            r = httpx.post(
                base + "/documents",
                params={"wait": "true"},
                timeout=300,
                files={"file": ("report.pdf", PDF.read_bytes(), "application/pdf")},
            )
            assert r.status_code == 201, r.text
            doc = r.json()["document"]

            instance = instance_for(svc)
            origin = InProcessCodeLocationOrigin(
                LoadableTargetOrigin(module_name="ragaudit.pipelines.definitions", working_directory=str(ROOT)),
                location_name="ragaudit",
            )
            with WorkspaceProcessContext(instance, InProcessWorkspaceLoadTarget(origin)) as workspace:

                def gql(query: str, **variables):
                    res = execute_dagster_graphql(workspace.create_request_context(), query, variables)
                    assert not res.errors, res.errors
                    return res.data

                def execute_checks() -> str:
                    """The UI's "Execute checks": a run of the asset job with only the checks selected."""
                    out = gql(
                        LAUNCH,
                        params={
                            "selector": {
                                "repositoryLocationName": "ragaudit",
                                "repositoryName": "__repository__",
                                "jobName": "__ASSET_JOB",
                                "assetSelection": [],
                                "assetCheckSelection": [{"assetKey": {"path": [a]}, "name": n} for a, n in CHECKS],
                            },
                            "executionMetadata": {"tags": [{"key": "dagster/partition", "value": partition_key(doc)}]},
                            "runConfigData": {},
                        },
                    )["launchRun"]
                    assert out["__typename"] == "LaunchRunSuccess", out
                    run_id = out["run"]["runId"]
                    daemon = QueuedRunCoordinatorDaemon(interval_seconds=1)
                    t, state = time.monotonic(), None
                    while time.monotonic() - t < 120:
                        state = gql(RUN, id=run_id)["runOrError"]["status"]
                        if state == "QUEUED":
                            list(daemon.run_iteration(workspace))  # what `dagster-daemon run` does each tick
                        if state in ("SUCCESS", "FAILURE", "CANCELED"):
                            break
                        time.sleep(0.5)
                    assert state in ("SUCCESS", "FAILURE"), state
                    assert "run handed to the serving process" in str(instance.all_logs(run_id))  # not run here
                    return run_id

                def latest() -> dict[str, dict]:
                    """The latest execution of each check, once it has an evaluation: the document reads
                    ``ready`` at publish, while the run's checks after publish may still be executing."""
                    out, t = {}, time.monotonic()
                    for asset, name in CHECKS:
                        while True:
                            (ex,) = gql(EXECUTIONS, key={"path": [asset]}, name=name)["assetCheckExecutions"]
                            if ex["evaluation"] is not None or time.monotonic() - t > 120:
                                break
                            time.sleep(0.5)
                        assert ex["evaluation"] is not None, ex  # still executing after 2 minutes
                        out[name] = {
                            "run": ex["runId"],
                            "status": ex["status"],
                            **{m["label"]: m.get("intValue") for m in ex["evaluation"]["metadataEntries"]},
                        }
                    return out

                run_id = execute_checks()
                healthy = latest()
                assert {n: c["status"] for n, c in healthy.items()} == {n: "SUCCEEDED" for _, n in CHECKS}, healthy
                assert healthy["chunk_counts_match"]["run"] == run_id

                # break it on purpose: one point of the document deleted from Qdrant
                victim = next(pid for pid, pl in svc.store.iter_payloads() if pl.get("document_id") == doc["id"])
                svc.store.delete_points([victim])
                run_id = execute_checks()
                broken = latest()
                assert {n: (c["status"], c["run"]) for n, c in broken.items()} == {
                    n: ("FAILED", run_id) for _, n in CHECKS
                }, broken
                assert broken["chunk_counts_match"]["sql"] == broken["chunk_counts_match"]["qdrant"] + 1
                assert broken["no_orphans"]["orphan_rows"] == 1 and broken["no_orphans"]["orphan_points"] == 0
                after_check = httpx.get(f"{base}/documents/{doc['id']}").json()
                assert after_check["status"] == "ready" and after_check["ingest_version"] == 1  # reported, not touched

                # the operator repairs it by name, in a shell of their own, while the API serves
                cli_env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGAUDIT_", "DAGSTER_"))}
                cli = subprocess.run(
                    [sys.executable, "-m", "ragaudit.api.cli", "reindex", "--doc", "report.pdf"],
                    cwd=ROOT,
                    env={**cli_env, **env, "PYTHONPATH": str(ROOT)},
                    capture_output=True,
                    text=True,
                    timeout=300,
                )
                assert cli.returncode == 0, (cli.stdout, cli.stderr)
                assert "1 re-ingested, 0 failed" in cli.stdout, cli.stdout
                assert "held by the serving process" in cli.stderr and "named with --doc" in cli.stdout
                repaired = httpx.get(f"{base}/documents/{doc['id']}").json()
                assert repaired["status"] == "ready" and repaired["ingest_version"] == 2

                # the rebuild's own checks passed, and so do the checks executed again from the UI
                assert {n: c["status"] for n, c in latest().items()} == {n: "SUCCEEDED" for _, n in CHECKS}
                run_id = execute_checks()
                again = latest()
                assert {n: (c["status"], c["run"]) for n, c in again.items()} == {
                    n: ("SUCCEEDED", run_id) for _, n in CHECKS
                }, again
                assert again["no_orphans"]["orphan_rows"] == 0
    finally:
        release_services(settings)

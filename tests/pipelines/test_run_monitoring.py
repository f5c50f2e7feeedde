"""Dagster runs whose ragaudit process was killed mid-run: Dagster's run monitoring (the daemon's
``monitor_started_run``, through ``StoreOwnerRunLauncher.check_run_worker_health``) and the
serving process's start-up (``ragaudit.pipelines.runner.recover_runs``) mark them failed with the reason,
instead of leaving them STARTED forever."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap

from fastapi.testclient import TestClient

from tests.conftest import ROOT, make_settings

# A real worker: a process that executes a Dagster run in-process, tagged as ragaudit's runners
# tag theirs, and blocks inside the op until it is killed.
WORKER = textwrap.dedent("""
    import sys, time
    import dagster as dg
    from ragaudit.pipelines.launcher import WORKER_TAG, this_worker

    @dg.op
    def long_step(context):
        print("started", context.run_id, flush=True)
        time.sleep(600)

    @dg.job
    def long_job():
        long_step()

    instance = dg.DagsterInstance.from_config(sys.argv[1])
    long_job.execute_in_process(instance=instance, tags={WORKER_TAG: this_worker()})
""")


def _start_worker(home: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("DAGSTER_HOME", None)
    p = subprocess.Popen(
        [sys.executable, "-c", WORKER, home],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    return p


def _run_id(p: subprocess.Popen) -> str:
    for line in p.stdout:
        if line.startswith("started "):
            return line.split()[1]
    raise AssertionError(f"the worker exited ({p.wait()}) before its run started")


def _kill(p: subprocess.Popen) -> None:
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGKILL)
    p.wait(30)
    p.stdout.close()


def _failure_message(instance, run_id: str) -> str:
    from dagster import DagsterEventType

    (ev,) = instance.all_logs(run_id, of_type=DagsterEventType.RUN_FAILURE)
    return ev.message


def test_runs_of_a_killed_worker_end_failed_with_the_reason(tmp_path, monkeypatch, embedder):
    """Two runs executing in worker processes that are then killed (SIGKILL, as a crash or an
    OOM kill would): while the worker lives the launcher's health check says RUNNING; once it is
    gone, the daemon's run monitoring marks the first run FAILURE, and ``ragaudit serve``'s
    start-up marks the second one FAILURE, both with a message saying the process stopped.
    Fails if the launcher does not support health checks (monitoring skips the run: it stays
    STARTED), if a dead worker is reported RUNNING (pid not checked, or a reused pid taken for
    it), if a live one is reported failed, or if the API's start-up leaves orphaned runs STARTED."""
    from dagster import DagsterRunStatus, RunsFilter
    from dagster._core.launcher import WorkerStatus
    from dagster._daemon.monitoring.run_monitoring import monitor_started_run

    from ragaudit.api.app import create_app
    from ragaudit.pipelines.launcher import StoreOwnerRunLauncher
    from ragaudit.pipelines.runner import dagster_home, instance_for
    from ragaudit.services import get_services, release_services

    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    settings = make_settings(tmp_path / "data")
    svc = get_services(settings)
    try:
        home = str(dagster_home(svc))  # the repo's dagster.yaml: StoreOwnerRunLauncher, run monitoring on
        instance = instance_for(svc)
        assert isinstance(instance.run_launcher, StoreOwnerRunLauncher) and instance.run_monitoring_enabled
        workers = [_start_worker(home) for _ in range(2)]
        try:
            run_ids = [_run_id(p) for p in workers]
            runs = [instance.get_run_by_id(r) for r in run_ids]
            assert [r.status for r in runs] == [DagsterRunStatus.STARTED] * 2
            alive = instance.run_launcher.check_run_worker_health(runs[0])
            assert alive.status == WorkerStatus.RUNNING, alive
        finally:
            for p in workers:
                _kill(p)

        # the daemon's monitoring iteration for a STARTED run, as `dagster-daemon run` executes it
        health = instance.run_launcher.check_run_worker_health(instance.get_run_by_id(run_ids[0]))
        assert health.status == WorkerStatus.FAILED and "stopped before the run finished" in health.msg
        (record,) = instance.get_run_records(filters=RunsFilter(run_ids=[run_ids[0]]))
        monitor_started_run(instance, None, record, logging.getLogger("test"))
        assert instance.get_run_by_id(run_ids[0]).status == DagsterRunStatus.FAILURE
        assert f"pid {workers[0].pid}" in _failure_message(instance, run_ids[0])

        # the second run is still STARTED until the serving process starts
        assert instance.get_run_by_id(run_ids[1]).status == DagsterRunStatus.STARTED
        with TestClient(create_app(settings)) as client:
            assert client.get("/health").status_code == 200
        assert instance.get_run_by_id(run_ids[1]).status == DagsterRunStatus.FAILURE
        assert "stopped before the run finished" in _failure_message(instance, run_ids[1])
    finally:
        release_services(settings)

"""The embedded mode's run launcher, end to end with real processes: the API (``ragaudit
serve``), the Dagster webserver and the Dagster daemon share one ``DAGSTER_HOME`` as docs/operations.md
says; a re-ingestion launched through Dagster's GraphQL API (as the UI's Materialize button does)
is handed to the API, which owns the Qdrant folder and executes it, while queries keep being
answered."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from ragaudit.pipelines.partitions import partition_key
from tests.conftest import ROOT, SAMPLES
from tests.dagster_gql import LAUNCH, RUN

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proc:
    """A subprocess in its own process group, stopped with SIGTERM (SIGKILL after 20 s)."""

    def __init__(self, args: list[str], env: dict, log: Path):
        self.log = log
        self.fh = open(log, "wb")
        self.p = subprocess.Popen(
            args, env=env, cwd=ROOT, stdout=self.fh, stderr=subprocess.STDOUT, start_new_session=True
        )

    def stop(self) -> None:
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGTERM)
            try:
                self.p.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait(10)
        self.fh.close()

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


def _wait(url: str, proc: Proc, timeout: float = 120.0) -> None:
    t = time.monotonic()
    while time.monotonic() - t < timeout:
        assert proc.p.poll() is None, proc.tail()
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"{url} did not come up:\n{proc.tail()}")


LOCATION = """{ workspaceOrError { ... on Workspace { locationEntries { name } } } }"""
# what the UI's asset page shows of a partitioned asset: which partitions are materialized
PARTITIONS = """query($key: AssetKeyInput!) { assetNodeOrError(assetKey: $key) { ... on AssetNode {
  assetPartitionStatuses { ... on DefaultPartitionStatuses { materializedPartitions unmaterializedPartitions } } } } }"""
# what the UI's sensor page shows: its latest ticks, a skipped one with its reason
TICKS = """query($sel: SensorSelector!) { sensorOrError(sensorSelector: $sel) { __typename ... on Sensor {
  sensorState { ticks(limit: 5) { status skipReason } } } } }"""
ASSETS = ["pdf_pages", "chunks", "chunk_points", "live_index", "gold_qa_pairs"]


def test_reingestion_launched_from_dagster_runs_in_the_api_while_it_serves(tmp_path):
    """Fails if a run launched by the Dagster webserver/daemon is executed in a process of its
    own (it cannot open the Qdrant folder the API holds: the run fails), if the launcher or the
    internal endpoint lose the run (it never finishes), if the run is not recorded in the shared
    instance (GraphQL would not see SUCCESS), or if executing it blocks or breaks queries (every
    query sent every 100 ms meanwhile must answer 200). Also fails if the UI's data shows the
    uploaded document's partitions as missing or under a key that does not name the document
    (knowledge base and name), or if the landing-folder sensor's ticks, with no landing folder
    set, do not say why they skip."""
    data = tmp_path / "data"
    home = data / "dagster_home"
    home.mkdir(parents=True)
    shutil.copy(ROOT / "dagster.yaml", home / "dagster.yaml")
    api_port, web_port = _port(), _port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGAUDIT_", "DAGSTER_"))}
    env.update(
        RAGAUDIT_DATA_DIR=str(data),
        RAGAUDIT_PORT=str(api_port),
        RAGAUDIT_LANDING_INTERVAL_S="5",  # the daemon evaluates the sensor often enough to see a tick
        DAGSTER_HOME=str(home),
        PYTHONPATH=str(ROOT),
        HF_HUB_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
    )
    procs: list[Proc] = []
    try:
        api = Proc(
            [sys.executable, "-m", "ragaudit.api.cli", "serve", "--port", str(api_port)], env, tmp_path / "api.log"
        )
        procs.append(api)
        base = f"http://127.0.0.1:{api_port}"
        _wait(base + "/health", api)  # the API creates the Dagster storage before it serves (docs/operations.md)
        web = Proc(
            [
                str(BIN / "dagster-webserver"),
                "-m",
                "ragaudit.pipelines.definitions",
                "-h",
                "127.0.0.1",
                "-p",
                str(web_port),
            ],
            env,
            tmp_path / "web.log",
        )
        procs.append(web)
        daemon = Proc(
            [str(BIN / "dagster-daemon"), "run", "-m", "ragaudit.pipelines.definitions"], env, tmp_path / "daemon.log"
        )
        procs.append(daemon)
        r = httpx.post(
            base + "/documents",
            params={"wait": "true"},
            timeout=300,
            files={"file": ("report.pdf", (SAMPLES / "20080102X00002.pdf").read_bytes(), "application/pdf")},
        )
        assert r.status_code == 201, r.text
        doc = r.json()["document"]
        _wait(f"http://127.0.0.1:{web_port}/server_info", web)
        gql = f"http://127.0.0.1:{web_port}/graphql"

        def graphql(query: str, **variables):
            res = httpx.post(gql, json={"query": query, "variables": variables}, timeout=30)
            assert res.status_code == 200, res.text
            return res.json()["data"]

        location = graphql(LOCATION)["workspaceOrError"]["locationEntries"][0]["name"]
        key = partition_key(doc)
        assert key == f"default/report.pdf · {doc['id']}"
        for asset in ASSETS:  # the upload's run materialized every asset of the document's partition
            st = graphql(PARTITIONS, key={"path": [asset]})["assetNodeOrError"]["assetPartitionStatuses"]
            assert st == {"materializedPartitions": [key], "unmaterializedPartitions": []}, (asset, st)

        answers: list[int] = []
        errors: list[str] = []
        stop = threading.Event()

        def query_loop():
            with httpx.Client(timeout=10) as c:
                while not stop.is_set():
                    try:
                        res = c.post(
                            base + "/search",
                            json={"question": "What registration did the Reims F172 M carry?", "top_k": 3},
                        )
                        answers.append(res.status_code)
                        if res.status_code != 200 or not res.json()["retrieved"]:
                            errors.append(res.text[:200])
                    except httpx.HTTPError as e:
                        errors.append(repr(e))
                    stop.wait(0.1)

        loop = threading.Thread(target=query_loop)
        loop.start()
        try:
            out = graphql(
                LAUNCH,
                params={
                    "selector": {
                        "repositoryLocationName": location,
                        "repositoryName": "__repository__",
                        "jobName": "ingest_document",
                    },
                    "executionMetadata": {"tags": [{"key": "dagster/partition", "value": key}]},
                    "runConfigData": {},
                },
            )["launchRun"]
            assert out["__typename"] == "LaunchRunSuccess", out
            run_id = out["run"]["runId"]
            t, state = time.monotonic(), None
            while time.monotonic() - t < 240:
                state = graphql(RUN, id=run_id)["runOrError"]["status"]
                if state in ("SUCCESS", "FAILURE", "CANCELED"):
                    break
                time.sleep(1)
        finally:
            stop.set()
            loop.join()
        assert state == "SUCCESS", (state, api.tail(), daemon.tail())
        assert errors == [] and len(answers) >= 10, (errors[:3], len(answers))
        after = httpx.get(f"{base}/documents/{doc['id']}").json()
        assert after["status"] == "ready" and after["ingest_version"] == doc["ingest_version"] + 1
        sensor = {"repositoryLocationName": location, "repositoryName": "__repository__"}
        t, ticks = time.monotonic(), []
        while time.monotonic() - t < 60:
            res = graphql(TICKS, sel={**sensor, "sensorName": "landing_folder_sensor"})["sensorOrError"]
            ticks = res["sensorState"]["ticks"]
            if ticks:
                break
            time.sleep(1)
        assert ticks and ticks[0]["status"] == "SKIPPED", (ticks, daemon.tail())
        assert "RAGAUDIT_LANDING_DIR is not set" in ticks[0]["skipReason"], ticks
        assert (
            "handed to the serving process"
            in httpx.post(
                gql,
                json={
                    "query": """query($id: ID!) {
            logsForRun(runId: $id) { ... on EventConnection { events { ... on EngineEvent { message } } } } }""",
                    "variables": {"id": run_id},
                },
            ).text
        )
    finally:
        for p in reversed(procs):
            p.stop()
    for p in procs:
        assert p.p.returncode is not None

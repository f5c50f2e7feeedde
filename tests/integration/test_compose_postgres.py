"""The compose file's environment against a real PostgreSQL (tests/pg.py): the API ingests and
answers with its SQL data in PostgreSQL, Dagster records the run in PostgreSQL (deploy/dagster.yaml),
and the Dagster daemon starts and reports healthy against it.

Here there is no Qdrant server and no Docker: the compose values are used as written except the
host names/credentials (``postgres:5432`` -> the test server), the container paths (-> temporary
folders) and ``RAGAUDIT_QDRANT_URL`` (dropped: Qdrant runs embedded; the Qdrant server path is
the same ``QdrantClient`` API)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, SAMPLES

pytestmark = pytest.mark.integration


def _interpolate(value: str) -> str:
    """Compose's ``${VAR:-default}`` with the variables unset (the defaults)."""
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", value)


def test_compose_environment_runs_api_dagster_and_a_run_on_postgres(pg_url, tmp_path, monkeypatch, embedder):
    """Fails if a compose variable is not understood by the code (the API would fall back to
    SQLite, or Dagster to its SQLite storage), if Dagster's PostgreSQL storage does not work
    with the pinned drivers, or if the daemon cannot start on it."""
    import psycopg
    from fastapi.testclient import TestClient
    from sqlalchemy.engine import make_url

    from ragaudit.api.app import create_app
    from ragaudit.platform.settings import Settings
    from ragaudit.services import release_services

    url = make_url(pg_url)
    with psycopg.connect(host=url.host, port=url.port, user=url.username, dbname="postgres", autocommit=True) as c:
        for db in ("ragaudit", "dagster"):
            if not c.execute("SELECT 1 FROM pg_database WHERE datname = %s", (db,)).fetchone():
                c.execute(f"CREATE DATABASE {db}")
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    env = {k: _interpolate(str(v)) for k, v in compose["x-ragaudit-env"].items()}
    here = f"{url.username}@{url.host}:{url.port}/"
    for k in ("RAGAUDIT_DATABASE_URL", "DAGSTER_PG_URL"):
        env[k] = re.sub(r"ragaudit:[^@]*@postgres:5432/", here, env[k])
        assert here in env[k], env[k]
    env.pop("RAGAUDIT_QDRANT_URL")
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(ROOT / "deploy" / "dagster.yaml", home / "dagster.yaml")
    env.update(
        RAGAUDIT_DATA_DIR=str(tmp_path / "data"), RAGAUDIT_LANDING_DIR=str(tmp_path / "landing"), DAGSTER_HOME=str(home)
    )
    for k in [k for k in os.environ if k.startswith("RAGAUDIT_")]:
        monkeypatch.delenv(k)
    for k, v in env.items():
        monkeypatch.setenv(k, v)

    daemon_env = {**os.environ, "PYTHONPATH": str(ROOT)}
    log = open(tmp_path / "daemon.log", "wb")
    daemon = subprocess.Popen(
        [str(Path(sys.executable).parent / "dagster-daemon"), "run", "-m", "ragaudit.pipelines.definitions"],
        cwd=ROOT,
        env=daemon_env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    settings = Settings(_env_file=None)
    try:
        assert settings.database_url.startswith("postgresql+psycopg://") and settings.qdrant_url == ""
        with TestClient(create_app(settings)) as client:
            r = client.post(
                "/documents",
                params={"wait": "true"},
                files={"file": ("dmca.pdf", (SAMPLES / "dmca.pdf").read_bytes(), "application/pdf")},
            )
            assert r.status_code == 201, r.text
            doc = r.json()["document"]
            assert client.get("/health").json()["parts"]["database"]["status"] == "up"
            r = client.post("/search", json={"question": "Digital Millennium Copyright Act", "top_k": 2})
            assert r.json()["retrieved"]
        import dagster as dg

        instance = dg.DagsterInstance.from_config(str(home))
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        runs = instance.get_runs(dg.RunsFilter(tags={"ragaudit/document_id": doc["id"]}))
        assert [r.status.value for r in runs] == ["SUCCESS"]
        ok, t = False, time.monotonic()
        while time.monotonic() - t < 90 and not ok:
            assert daemon.poll() is None, (tmp_path / "daemon.log").read_text()[-2000:]
            ok = (
                subprocess.run(
                    [str(Path(sys.executable).parent / "dagster-daemon"), "liveness-check"],
                    env=daemon_env,
                    cwd=ROOT,
                    capture_output=True,
                ).returncode
                == 0
            )
            time.sleep(2)
        assert ok, (tmp_path / "daemon.log").read_text()[-2000:]
    finally:
        os.killpg(daemon.pid, signal.SIGTERM)
        try:
            daemon.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(daemon.pid, signal.SIGKILL)
            daemon.wait(10)
        log.close()
        release_services(settings)

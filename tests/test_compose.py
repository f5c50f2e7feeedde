"""docker-compose.yml is wired only through environment variables the code knows (Docker is not
available here, so the wiring is checked statically; tests/integration/test_compose_postgres.py
runs the same environment against a real PostgreSQL)."""

from __future__ import annotations

import re

import yaml

from ragaudit.platform.settings import Settings
from tests.conftest import ROOT

COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]


def _env(service: str) -> dict[str, str]:
    return {k: str(v) for k, v in (SERVICES[service].get("environment") or {}).items()}


def test_services_ports_and_health_checks():
    """Fails if a service of the production stack is missing, a port is not published, a
    service has no health check, or a dependency waits for health that is never reported."""
    assert set(SERVICES) == {"postgres", "qdrant", "api", "dagster-webserver", "dagster-daemon"}
    ports = {name: [str(p) for p in s.get("ports", [])] for name, s in SERVICES.items()}
    assert ports["api"] == ["8000:8000"] and ports["dagster-webserver"] == ["3000:3000"]
    assert ports["qdrant"] == ["6333:6333"]
    for name, s in SERVICES.items():
        assert s.get("healthcheck", {}).get("test"), f"{name} has no health check"
        for dep, cond in (s.get("depends_on") or {}).items():
            assert dep in SERVICES and cond["condition"] in ("service_healthy", "service_started"), (name, dep)
    assert re.search(r"EXPOSE .*8000.*3000", (ROOT / "Dockerfile").read_text())
    assert "/health" in " ".join(SERVICES["api"]["healthcheck"]["test"])


def test_every_variable_is_a_setting_and_the_urls_agree():
    """Fails if compose sets a RAGAUDIT_* variable that no Settings field reads (a typo silently
    ignored: pydantic-settings drops unknown variables), if the API, webserver and daemon do not
    share one environment, or if the URLs point at other services' names or ports."""
    fields = set(Settings.model_fields)
    app_services = ("api", "dagster-webserver", "dagster-daemon")
    envs = {s: _env(s) for s in app_services}
    assert envs["api"] == envs["dagster-webserver"] == envs["dagster-daemon"]
    env = envs["api"]
    names = [k for k in env if k.startswith("RAGAUDIT_")]
    assert names and all(k.removeprefix("RAGAUDIT_").lower() in fields for k in names), [
        k for k in names if k.removeprefix("RAGAUDIT_").lower() not in fields
    ]
    assert "@postgres:5432/" in env["RAGAUDIT_DATABASE_URL"] and env["RAGAUDIT_QDRANT_URL"] == "http://qdrant:6333"
    assert env["RAGAUDIT_API_URL"] == "http://api:8000"
    assert env["DAGSTER_PG_URL"].startswith("postgresql+psycopg2://")  # Dagster's storage needs psycopg2
    dagster_yaml = yaml.safe_load((ROOT / "deploy" / "dagster.yaml").read_text())
    assert dagster_yaml["storage"]["postgres"]["postgres_url"] == {"env": "DAGSTER_PG_URL"}
    db = env["DAGSTER_PG_URL"].rsplit("/", 1)[1]
    assert f"CREATE DATABASE {db}" in (ROOT / "deploy" / "postgres-init.sql").read_text()
    pg = _env("postgres")
    assert env["RAGAUDIT_DATABASE_URL"].rsplit("/", 1)[1] == pg["POSTGRES_DB"]


def test_volumes_are_declared_and_mounted_where_the_settings_point():
    """Fails if a named volume is used but not declared, or if the data or landing folders the
    settings name are not the mounted volumes (files would vanish with the container, or the
    sensor would watch an empty folder)."""
    declared = set(COMPOSE["volumes"])
    env = _env("api")
    for name, s in SERVICES.items():
        for v in s.get("volumes", []):
            src = v.split(":")[0]
            if not src.startswith((".", "/")):
                assert src in declared, (name, v)
    for name in ("api", "dagster-webserver", "dagster-daemon"):
        mounts = {v.split(":")[1]: v.split(":")[0] for v in SERVICES[name]["volumes"]}
        assert mounts[env["RAGAUDIT_DATA_DIR"]] == "files"
        assert mounts[env["RAGAUDIT_LANDING_DIR"]] == "landing"
        assert mounts[env["DAGSTER_HOME"] + "/dagster.yaml"] == "./deploy/dagster.yaml"
    assert any(v.startswith("pgdata:") for v in SERVICES["postgres"]["volumes"])
    assert any(v.startswith("qdrant:") for v in SERVICES["qdrant"]["volumes"])

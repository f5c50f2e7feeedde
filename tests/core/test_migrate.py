"""Migrations when several processes start at once against one fresh database."""

from __future__ import annotations

import subprocess
import sys

import pytest
from sqlalchemy import create_engine, text

SCRIPT = """
import sys
from ragaudit.platform.db import make_engine, migrate
migrate(make_engine(sys.argv[1]))
"""


def _migrate_concurrently(url: str, n: int = 6) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT, url], stderr=subprocess.PIPE, text=True) for _ in range(n)]
    errors = [p.communicate(timeout=300)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), errors


def test_concurrent_migrations_of_a_fresh_sqlite_database_leave_one_head(tmp_path):
    """The API, Dagster webserver and daemon migrate the same fresh database at start-up. Fails if
    migrations are not serialised: two processes upgraded together and left two rows in
    ``alembic_version`` ("more than one head", every later start failed), or crashed on
    "table ... already exists"."""
    url = f"sqlite:///{tmp_path / 'ragaudit.db'}"
    _migrate_concurrently(url)
    with create_engine(url).connect() as c:
        assert c.execute(text("SELECT count(*) FROM alembic_version")).scalar() == 1


@pytest.mark.integration
def test_concurrent_migrations_on_postgresql_leave_one_head(pg_url):
    """The same on the real PostgreSQL server (advisory lock)."""
    from tests.test_document_identity import fresh_pg_database

    url = fresh_pg_database(pg_url)
    _migrate_concurrently(url)
    with create_engine(url).connect() as c:
        assert c.execute(text("SELECT count(*) FROM alembic_version")).scalar() == 1

"""The child run of ``test_pg_teardown.py``: a test holding the session's PostgreSQL server until
its run is stopped. Not collected on its own (no ``test_`` prefix); that test runs this file."""

from __future__ import annotations

import os
import time
from pathlib import Path

PROBE = "RAGAUDIT_PG_TEARDOWN_PROBE"


def test_holds_the_server(pg_url):
    """Writes the server's data folder and postmaster pid to the file ``$RAGAUDIT_PG_TEARDOWN_PROBE``
    names, then waits to be stopped."""
    out = os.environ[PROBE]
    import sqlalchemy as sa

    with sa.create_engine(pg_url).connect() as c:
        data_dir = c.execute(sa.text("SHOW data_directory")).scalar_one()
    pid = int((Path(data_dir) / "postmaster.pid").read_text().split()[0])
    Path(out).write_text(f"{data_dir}\n{pid}\n")
    time.sleep(300)

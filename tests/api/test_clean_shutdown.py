"""A stopped API leaves its SQLite database as one file: the write-ahead log is folded back into
``ragaudit.db`` and deleted when the lifespan ends, so copying ``ragaudit.db`` after a stop copies
every write."""

import json
import textwrap

from tests.conftest import fresh_python

PROBE = textwrap.dedent(
    """
    import json, sqlite3, sys
    from pathlib import Path
    from fastapi.testclient import TestClient
    from ragaudit.api.app import create_app
    from ragaudit.platform.settings import Settings

    data = Path(sys.argv[1])
    settings = Settings(
        _env_file=None, data_dir=data, database_url="", qdrant_url="", llm_model="",
        embedding_model="bundled:all-MiniLM-L6-v2",
    )
    with TestClient(create_app(settings)) as client:
        r = client.post("/query", json={"question": "Which harbour keeps the lantern lit?"})
        assert r.status_code == 200, r.text
        client.app.state.telemetry.flush(30)
        during = (data / "ragaudit.db-wal").exists()
    after = sorted(p.name for p in data.glob("ragaudit.db-*"))
    logs = sqlite3.connect(data / "ragaudit.db").execute("select count(*) from query_logs").fetchone()[0]
    print(json.dumps({"log_while_serving": during, "left_beside_db": after, "query_logs": logs}))
    """
)


def test_a_stopped_api_leaves_no_write_ahead_log(tmp_path):
    """Fails if ``ragaudit.db-wal`` or ``-shm`` remains after the API's lifespan ends (its
    connections were left open, so SQLite kept the log beside the database), or if the query's log
    row is not in ``ragaudit.db`` alone afterwards. The log must exist while serving, or the test
    would not test the stop."""
    p = fresh_python(PROBE, str(tmp_path / "data"))
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got == {"log_while_serving": True, "left_beside_db": [], "query_logs": 1}, p.stdout

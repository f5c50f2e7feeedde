"""The embedded mode's run launcher finds the API from the settings ``ragaudit serve`` listens on,
and a hand-over that fails says which URL it tried and which setting sets it."""

from __future__ import annotations

import shutil
import socket

import dagster as dg
from dagster._core.launcher import LaunchRunContext

from tests.conftest import ROOT, make_settings


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens on it once the socket is closed


def test_internal_api_url_follows_host_and_port(tmp_path):
    """Fails if the launcher's URL ignores RAGAUDIT_HOST or RAGAUDIT_PORT (a server on another
    port or address is not found), if a wildcard bind address is used as a destination, or if an
    explicit RAGAUDIT_API_URL does not win."""
    s = make_settings(tmp_path, port=8791)
    assert s.internal_api_url == "http://127.0.0.1:8791"
    assert make_settings(tmp_path, host="0.0.0.0", port=9001).internal_api_url == "http://127.0.0.1:9001"
    assert make_settings(tmp_path, host="10.0.0.7", port=9001).internal_api_url == "http://10.0.0.7:9001"
    assert make_settings(tmp_path, host="::", port=9001).internal_api_url == "http://[::1]:9001"
    assert make_settings(tmp_path, api_url="http://api:8000/", port=9001).internal_api_url == "http://api:8000"


@dg.op
def _noop() -> None:
    pass


@dg.job
def _one_op_job():
    _noop()


def test_a_failed_handover_names_the_url_and_the_setting(tmp_path, monkeypatch):
    """A run launched while nothing listens on RAGAUDIT_PORT ends FAILURE with a message naming
    the URL it tried (that port) and the settings that set it. Fails if the launcher uses a fixed
    port (8000) instead of RAGAUDIT_PORT, or if the message leaves out the URL or the setting."""
    port = _closed_port()
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(ROOT / "dagster.yaml", home / "dagster.yaml")
    for k in ("RAGAUDIT_API_URL", "RAGAUDIT_QDRANT_URL", "RAGAUDIT_API_KEYS"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("RAGAUDIT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RAGAUDIT_HOST", "127.0.0.1")
    monkeypatch.setenv("RAGAUDIT_PORT", str(port))
    with dg.DagsterInstance.from_config(str(home)) as instance:
        run = instance.create_run_for_job(_one_op_job)
        instance.run_launcher.launch_run(LaunchRunContext(dagster_run=run, workspace=None))
        run = instance.get_run_by_id(run.run_id)
        assert run.status == dg.DagsterRunStatus.FAILURE
        (ev,) = instance.all_logs(run.run_id, of_type=dg.DagsterEventType.RUN_FAILURE)
    url = f"http://127.0.0.1:{port}/internal/dagster/runs"
    assert f"POST {url} failed (ConnectError)" in ev.message, ev.message
    assert f"RAGAUDIT_HOST/RAGAUDIT_PORT (here 127.0.0.1, {port})" in ev.message, ev.message


def test_a_refused_key_is_named_as_the_cause(tmp_path):
    """The serving process answered 401: the message says the Dagster processes need the API's
    RAGAUDIT_API_KEYS, not to check the host and port (the URL was right). Fails if a refused key is
    explained as a wrong address."""
    import httpx

    from ragaudit.pipelines.launcher import handover_failed_message
    from ragaudit.platform.settings import Settings

    url = "http://127.0.0.1:8787/internal/dagster/runs"
    req = httpx.Request("POST", url)
    err = httpx.HTTPStatusError("401", request=req, response=httpx.Response(401, request=req))
    settings = Settings(_env_file=None, data_dir=tmp_path, port=8787)
    msg = handover_failed_message(settings, url, err)
    assert f"POST {url} failed (HTTP 401" in msg and "export the same RAGAUDIT_API_KEYS" in msg, msg
    assert "RAGAUDIT_HOST/RAGAUDIT_PORT" not in msg, msg
    down = handover_failed_message(settings, url, httpx.ConnectError("refused"))
    assert "RAGAUDIT_HOST/RAGAUDIT_PORT (here" in down and "API_KEYS" not in down, down

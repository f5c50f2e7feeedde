"""API keys: write and paid routes need a key when keys are configured; read routes when the setting says
so; the key never appears in logs, stdout/stderr, database rows, stored files or responses."""

import logging
import secrets

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import MetaData, select

from ragaudit.api.app import create_app
from ragaudit.api.deps import key_is_valid
from tests.api.test_telemetry import upload
from tests.conftest import make_settings


@pytest.fixture()
def keyed(tmp_path, embedder):
    from ragaudit.services import release_services

    key = "rk-" + secrets.token_hex(16)
    settings = make_settings(
        tmp_path / "keys", api_keys=f"other-key-1, {key}", read_requires_api_key=False, cors_origins="http://ui.example"
    )
    yield settings, key
    release_services(settings)


def test_api_key_required_for_writes_and_never_leaks(keyed, caplog, capsys):
    settings, key = keyed
    caplog.set_level(logging.DEBUG)
    responses = []

    def keep(r):
        responses.append(r)
        return r

    with TestClient(create_app(settings)) as client:
        assert keep(upload(client)).status_code == 401
        r = keep(upload(client, headers={"X-API-Key": key + "x"}))
        assert r.status_code == 401 and r.json()["detail"].startswith("missing or invalid API key")
        assert keep(upload(client, headers={"X-API-Key": key})).status_code == 201
        doc_id = keep(client.get("/documents")).json()[0]["id"]  # reads are open by default
        # the key sent on reads too (where it is not needed) is neither echoed nor stored
        keep(
            client.post(
                "/query", json={"question": "what was the probable cause?", "top_k": 2}, headers={"X-API-Key": key}
            )
        )
        keep(
            client.post(
                "/search", json={"question": "probable cause", "top_k": 2}, headers={"Authorization": f"Bearer {key}"}
            )
        )
        keep(client.get("/metrics", headers={"X-API-Key": key}))
        keep(client.get("/metrics/prometheus"))
        keep(client.get("/health"))
        r = keep(
            client.options("/query", headers={"Origin": "http://ui.example", "Access-Control-Request-Method": "POST"})
        )
        assert r.headers["access-control-allow-origin"] == "http://ui.example"
        assert keep(client.delete(f"/documents/{doc_id}")).status_code == 401
        assert (
            keep(client.delete(f"/documents/{doc_id}", headers={"Authorization": f"Bearer {key}"})).status_code == 200
        )
        client.app.state.telemetry.flush(30)
        svc = client.app.state.services
        # every row of every table
        md = MetaData()
        md.reflect(svc.engine)
        with svc.engine.connect() as c:
            dump = "\n".join(repr(row) for t in md.sorted_tables for row in c.execute(select(t)))

    out = capsys.readouterr()
    logs = "\n".join(r.getMessage() for r in caplog.records) + caplog.text
    bodies = "\n".join(r.text + repr(dict(r.headers)) for r in responses)
    files = b"".join(p.read_bytes() for p in settings.data_dir.rglob("*") if p.is_file())
    assert "what was the probable cause?" in dump and logs  # the rows and logs searched are real
    for where, text in {
        "database rows": dump,
        "logs": logs,
        "stdout": out.out,
        "stderr": out.err,
        "responses": bodies,
    }.items():
        assert text.count(key) == 0, where
    assert files.count(key.encode()) == 0  # SQLite file + WAL, Qdrant folder, stored PDFs


def test_read_routes_closed_by_setting(tmp_path, embedder):
    from ragaudit.services import release_services

    settings = make_settings(tmp_path / "closed", api_keys="k-123456", read_requires_api_key=True)
    try:
        with TestClient(create_app(settings)) as client:
            assert client.post("/search", json={"question": "x"}).status_code == 401
            assert client.get("/documents").status_code == 401
            assert client.get("/metrics").status_code == 401
            assert client.post("/search", json={"question": "x"}, headers={"X-API-Key": "k-123456"}).status_code == 200
            assert client.get("/health").status_code == 200  # probes stay open
    finally:
        release_services(settings)


def test_key_comparison():
    s = make_settings(__import__("pathlib").Path("/tmp/unused"), api_keys="a1,b2")
    assert key_is_valid("b2", s) and key_is_valid("a1", s)
    assert not key_is_valid("b", s) and not key_is_valid(None, s) and not key_is_valid("", s)
    assert "b2" not in repr(s) and "b2" not in str(s.model_dump())


#: Who may call each route of the app when ``RAGAUDIT_API_KEYS`` is set:
#: ``open`` never needs a key (probes, API docs, the web UI's files); ``read`` needs one only when
#: ``read_requires_api_key``; ``private`` (stored PDFs, users' questions) needs one unless
#: ``files_and_query_logs_open`` with reads open; ``key`` (writes, and every route that can call a
#: paid model) always. ``/admin/api/{resource}`` routes are listed per resource.
ACCESS = {
    ("GET", "/openapi.json"): "open",
    ("GET", "/docs"): "open",
    ("GET", "/docs/oauth2-redirect"): "open",
    ("GET", "/redoc"): "open",
    ("GET", "/static-offline-docs/{path}"): "open",
    ("GET", "/health"): "open",
    ("GET", "/metrics/prometheus"): "read",
    ("GET", "/metrics"): "read",
    ("POST", "/documents"): "key",
    ("GET", "/documents"): "read",
    ("GET", "/documents/{document_id}"): "read",
    ("GET", "/documents/{document_id}/events"): "read",
    ("GET", "/documents/{document_id}/file"): "private",
    ("DELETE", "/documents/{document_id}"): "key",
    ("POST", "/query"): "key",  # an LLM answer when a model is configured
    ("POST", "/query/stream"): "key",
    ("POST", "/search"): "read",  # retrieval only: local models
    ("POST", "/datasets"): "key",
    ("GET", "/datasets"): "read",
    ("POST", "/evaluate"): "key",  # answers and the LLM judge
    ("GET", "/modes"): "read",
    ("GET", "/evaluate"): "read",
    ("GET", "/evaluate/{run_id}"): "read",
    ("GET", "/evaluate/{run_id}/intervals"): "read",
    ("POST", "/internal/dagster/runs"): "key",
    ("POST", "/v1/chat/completions"): "key",  # the OpenAI-compatible door to /query
    ("GET", "/v1/models"): "read",
    ("GET", "/v1/models/{model:path}"): "read",
    ("POST", "/mcp"): "key",  # MCP (stateless streamable HTTP): its ask tool answers as /query
    **{
        (method, f"/admin/api/{resource}{tail}"): level
        for resource, reads in {
            "documents": "read",
            "chunks": "read",
            "qa_pairs": "read",
            "datasets": "read",
            "query_logs": "private",  # users' questions
            "eval_runs": "read",
        }.items()
        for method, tail, level in [
            ("GET", "", reads),
            ("GET", "/{id}", reads),
            ("POST", "", "key"),  # writes (re-ingestion generates gold Q&A through the LLM)
            ("PUT", "/{id}", "key"),
            ("DELETE", "/{id}", "key"),
        ]
    },
    ("GET", "/{path}"): "open",  # the built web UI (mounted only when frontend/dist exists)
}


def route_table(app) -> set[tuple[str, str]]:
    """Every (method, path) the app answers, from ``app.routes``: included routers (FastAPI's
    ``iter_route_contexts``, as its OpenAPI generator walks them), the routes of mounted sub-apps
    (the admin bridge, one entry per resource) and mounted static folders (``{path}``). ``HEAD``
    is left out where ``GET`` is served by the same handler."""
    from fastapi.routing import iter_route_contexts
    from starlette.routing import Mount

    from ragaudit.api.admin import RESOURCES

    out: set[tuple[str, str]] = set()

    def walk(routes, prefix: str) -> None:
        for ctx in iter_route_contexts(routes):
            route = ctx.original_route
            if isinstance(route, Mount):
                sub = getattr(route.app, "routes", None)
                if sub is None:  # a static folder
                    out.add(("GET", f"{prefix}{route.path}/{{path}}"))
                else:
                    walk(sub, prefix + route.path)
                continue
            methods = set(ctx.methods or ())
            assert methods, f"route {ctx.path} has no methods (a websocket?): classify it"
            if "GET" in methods:
                methods.discard("HEAD")
            path = prefix + ctx.path
            for method in methods:
                if "{resource}" in path:
                    out.update((method, path.replace("{resource}", r)) for r in RESOURCES)
                else:
                    out.add((method, path))

    walk(app.routes, "")
    return out


def needs_key(level: str, settings) -> bool:
    """Whether a route of ``level`` must refuse a request without a key under ``settings``."""
    if not settings.api_keys or level == "open":
        return False
    if level == "key":
        return True
    if level == "private":
        return settings.read_requires_api_key or not settings.files_and_query_logs_open
    return settings.read_requires_api_key


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"api_keys": "k-route-table"},
        {"api_keys": "k-route-table", "files_and_query_logs_open": True},
        {"api_keys": "k-route-table", "read_requires_api_key": True},
        {"api_keys": "k-route-table", "read_requires_api_key": True, "files_and_query_logs_open": True},
    ],
    ids=["no-keys", "keys-reads-open", "keys-reads-open-files-logs-open", "keys-reads-closed", "keys-closed-logs-open"],
)
def test_every_route_follows_its_access_level(tmp_path, embedder, config):
    """Walks the app's whole route table (``app.routes``, included routers and mounted sub-apps)
    and calls each route without a key, then with one. Fails if a route is missing from ACCESS or
    listed there but gone (a new route must be classified), if a route that can spend money
    (``/query``, ``/query/stream``: an LLM answer when a model is configured) or writes answers
    without a key while keys are set, if stored PDFs or query logs (users' questions) are readable
    without a key while keys are set and the setting does not open them, or if a route refuses a
    valid key or asks for one that its level does not need."""
    from ragaudit.api.app import FRONTEND_DIST
    from ragaudit.services import release_services

    settings = make_settings(tmp_path / "routes", **config)
    key = "k-route-table"
    app = create_app(settings)
    found = route_table(app)
    expected = {r for r in ACCESS if r != ("GET", "/{path}") or FRONTEND_DIST.is_dir()}
    assert found - expected == set(), f"routes without an access level in ACCESS: {sorted(found - expected)}"
    assert expected - found == set(), f"ACCESS lists routes the app does not have: {sorted(expected - found)}"
    fill = {"{document_id}": "nope", "{run_id}": "nope", "{id}": "nope"}
    wrong = []
    try:
        with TestClient(app) as client:
            for method, path in sorted(found):
                url = path.replace("{path}", "index.html" if path == "/{path}" else "redoc.standalone.js")
                for k, v in fill.items():
                    url = url.replace(k, v)
                body = {"json": {}} if method in ("POST", "PUT") else {}
                level = ACCESS[(method, path)]
                r = client.request(method, url, **body)
                refused = r.status_code == 401
                if refused:
                    assert "missing or invalid API key" in r.text, (method, url, r.text)
                if refused != needs_key(level, settings):
                    wrong.append((method, path, level, r.status_code))
                if settings.api_keys:
                    r = client.request(method, url, headers={"X-API-Key": key}, **body)
                    if r.status_code == 401:
                        wrong.append((method, path, level, "401 with a valid key"))
    finally:
        release_services(settings)
    assert not wrong, f"routes not following their access level under {config}: {wrong}"

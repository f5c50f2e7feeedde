"""The MCP server driven by the official ``mcp`` SDK's client: over stdio (spawning ``ragaudit mcp``)
and over streamable HTTP at /mcp of the real app under uvicorn on 127.0.0.1, with the API-key
rule. One data folder with dmca.pdf ingested, shared by both transports (one at a time: the
embedded store has one owner process)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import SecretStr
from sqlalchemy import select

from ragaudit.api.app import create_app
from ragaudit.platform.db import QueryLog
from tests.conftest import DMCA_QUESTION, SAMPLES, make_settings
from tests.live import LiveServer

KEY = "mcp-test-key"
TOOLS = {"search", "ask", "list_documents", "get_chunk"}


@pytest.fixture(scope="module")
def settings(tmp_path_factory, embedder):
    """Settings of a data folder with dmca.pdf ingested; its services released (the folder is free)."""
    from ragaudit.ingest.documents import ingest_bytes
    from ragaudit.pipelines.runner import DagsterRunner
    from ragaudit.services import get_services, release_services

    s = make_settings(tmp_path_factory.mktemp("mcp"))
    out = ingest_bytes(get_services(s), (SAMPLES / "dmca.pdf").read_bytes(), "dmca.pdf", DagsterRunner())
    assert out.status == "ingested", out
    release_services(s)
    yield s
    release_services(s)


async def exercise(client: Client) -> dict:
    """List the tools and call each one; returns what the assertions need."""
    tools = {t.name: t for t in (await client.list_tools()).tools}
    found = await client.call_tool("search", {"question": DMCA_QUESTION, "top_k": 3})
    answer = await client.call_tool("ask", {"question": DMCA_QUESTION, "doc_names": ["dmca.pdf"]})
    docs = await client.call_tool("list_documents", {})
    first = found.structured_content["retrieved"][0]
    chunk = await client.call_tool("get_chunk", {"chunk_id": first["chunk_id"]})
    missing = await client.call_tool("get_chunk", {"chunk_id": "no-such-chunk"})
    bad = await client.call_tool("search", {"question": DMCA_QUESTION, "top_k": 0})
    return dict(tools=tools, found=found, answer=answer, docs=docs, first=first, chunk=chunk, missing=missing, bad=bad)


def check(r: dict) -> None:
    assert set(r["tools"]) == TOOLS
    assert {"question", "doc_names", "page_min", "page_max", "top_k", "mode"} <= set(
        r["tools"]["ask"].input_schema["properties"]
    )
    found = r["found"].structured_content
    assert not r["found"].is_error and len(found["retrieved"]) == 3
    assert all(c["ranks"]["vector"] or c["ranks"]["bm25"] for c in found["retrieved"])
    assert [c["rank"] for c in found["retrieved"]] == [1, 2, 3]
    ans = r["answer"].structured_content
    assert not r["answer"].is_error and ans["label"] == "answered" and "1998" in ans["answer"]
    assert ans["citations"] and all(c["verified"] and c["supports"] for c in ans["citations"])
    assert ans["scope"] == {"doc_names": ["dmca.pdf"]}
    assert [d["doc_name"] for d in r["docs"].structured_content["documents"]] == ["dmca.pdf"]
    chunk = r["chunk"].structured_content
    assert chunk["chunk_id"] == r["first"]["chunk_id"] and chunk["text"] == r["first"]["text"]
    assert chunk["doc_name"] == "dmca.pdf" and chunk["page_start"] == r["first"]["page_start"]
    assert r["missing"].is_error and "no searchable chunk" in r["missing"].content[0].text
    assert r["bad"].is_error and "top_k" in r["bad"].content[0].text


def test_stdio_ragaudit_mcp_serves_every_tool(settings):
    """``ragaudit mcp`` spawned by the SDK's stdio client: lists the four tools, and search (ranks),
    ask (verified, supporting citations), list_documents and get_chunk answer; bad input and an
    unknown chunk are tool errors with a readable reason; the calls are logged as mcp_search/mcp_ask.

    Fails if anything but protocol messages reaches stdout (the client cannot parse), if a tool is
    missing, or if the tools bypass QueryService (no rows)."""
    env = {
        "RAGAUDIT_DATA_DIR": str(settings.data_dir),
        "RAGAUDIT_DATABASE_URL": "",
        "RAGAUDIT_QDRANT_URL": "",
        "RAGAUDIT_LLM_MODEL": "",
        "RAGAUDIT_EMBEDDING_MODEL": settings.embedding_model,
        "RAGAUDIT_STORE_BACKEND": settings.store_backend,
        "HF_HUB_OFFLINE": "1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "TOKENIZERS_PARALLELISM": "false",
    }
    if os.environ.get("RAGAUDIT_EMBEDDING_CACHE_DIR"):
        env["RAGAUDIT_EMBEDDING_CACHE_DIR"] = os.environ["RAGAUDIT_EMBEDDING_CACHE_DIR"]
    params = StdioServerParameters(
        command=str(Path(sys.executable).parent / "ragaudit"), args=["mcp"], env=env, cwd=str(settings.data_dir)
    )

    async def run() -> dict:
        with anyio.fail_after(240):
            async with Client(params) as client:
                return await exercise(client)

    check(anyio.run(run))
    from ragaudit.services import get_services

    with get_services(settings).sessions() as s:  # the child has exited: its rows are written
        logged = sorted((r.endpoint, r.error_kind or "") for r in s.scalars(select(QueryLog)))
    assert logged == [("mcp_ask", ""), ("mcp_search", ""), ("mcp_search", "validation_error")]


@pytest.fixture(scope="module")
def http_base(settings):
    """The API on the same folder, keys set, reads open (after the stdio test: one owner)."""
    app = create_app(settings.model_copy(update={"api_keys": [SecretStr(KEY)], "read_requires_api_key": False}))
    with LiveServer(app) as base:
        yield app, base


def _client(base: str, key: str | None) -> Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(120, read=120))
    return Client(streamable_http_client(f"{base}/mcp", http_client=http))


def test_streamable_http_at_mcp_serves_every_tool(http_base):
    """The SDK's streamable HTTP client at /mcp with the API key: the same four tools and answers
    as over stdio, logged in the API's query_logs.

    Fails if /mcp is not served by the API process or the tools differ between transports."""
    app, base = http_base

    async def run() -> dict:
        with anyio.fail_after(120):
            async with _client(base, KEY) as client:
                return await exercise(client)

    check(anyio.run(run))
    app.state.telemetry.flush(10)
    with app.state.services.sessions() as s:
        assert s.scalars(select(QueryLog).where(QueryLog.endpoint == "mcp_ask")).all()


@pytest.mark.parametrize("key", [None, "wrong-key"])
def test_mcp_over_http_needs_the_key(http_base, key):
    """Without a key or with a wrong one, /mcp answers 401 even with reads open (the /query rule:
    ask can call a paid model) and the client cannot even connect; nothing is logged as an MCP
    call.

    Fails if /mcp is mounted outside the key rule, or under the read rule only."""
    app, base = http_base
    before = mcp_rows(app)
    r = httpx.post(f"{base}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=_h(key))
    assert r.status_code == 401 and KEY not in r.text

    async def run() -> None:
        with anyio.fail_after(60):
            async with _client(base, key) as client:
                await client.list_tools()

    with pytest.raises(BaseException) as e:  # the SDK raises an ExceptionGroup around its error
        anyio.run(run)
    assert e.group_contains(MCPError) or isinstance(e.value, MCPError), repr(e.value)
    assert mcp_rows(app) == before


def mcp_rows(app) -> int:
    app.state.telemetry.flush(10)
    with app.state.services.sessions() as s:
        return len(s.scalars(select(QueryLog).where(QueryLog.endpoint.like("mcp_%"))).all())


def _h(key: str | None) -> dict:
    return {"Authorization": f"Bearer {key}"} if key else {}

"""OpenTelemetry traces received by a small OTLP/HTTP receiver on 127.0.0.1 (http.server decoding
the protobuf ExportTraceServiceRequest with opentelemetry-proto), the exporter pointed at it by
the standard environment variables only. Requests run on the session's knowledge base; the
ingestion trace on a one-page PDF made here."""

from __future__ import annotations

import gzip
import itertools
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from fastapi.testclient import TestClient
from fpdf import FPDF
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import TracerProvider
from sqlalchemy import select

from ragaudit.api.app import create_app
from ragaudit.platform import tracing
from ragaudit.platform.db import QueryLog
from tests.conftest import make_settings

ROW_STAGES = {"embed": "embed_ms", "vector": "vector_ms", "bm25": "bm25_ms", "fusion": "fusion_ms"}
_n = itertools.count()


@dataclass
class Span:
    name: str
    trace_id: str
    span_id: str
    parent: str
    start: int
    end: int
    attrs: dict = field(default_factory=dict)
    service: str = ""

    @property
    def ms(self) -> float:
        return (self.end - self.start) / 1e6


def _value(v):
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


class OTLPReceiver:
    """OTLP/HTTP trace receiver (POST /v1/traces, protobuf, optionally gzip) keeping every span."""

    def __init__(self):
        self.spans: list[Span] = []
        self.paths: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                req = ExportTraceServiceRequest()
                req.ParseFromString(body)
                receiver.paths.append(self.path)
                for rs in req.resource_spans:
                    res = {kv.key: _value(kv.value) for kv in rs.resource.attributes}
                    for ss in rs.scope_spans:
                        for sp in ss.spans:
                            receiver.spans.append(
                                Span(
                                    sp.name,
                                    sp.trace_id.hex(),
                                    sp.span_id.hex(),
                                    sp.parent_span_id.hex(),
                                    sp.start_time_unix_nano,
                                    sp.end_time_unix_nano,
                                    {kv.key: _value(kv.value) for kv in sp.attributes},
                                    res.get("service.name", ""),
                                )
                            )
                out = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args):  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def trace(self, trace_id: str, names: set[str], timeout: float = 20) -> dict[str, Span]:
        """The spans of ``trace_id`` by name once every name in ``names`` has arrived."""
        deadline = time.monotonic() + timeout
        while True:
            tracing.force_flush()
            got = {s.name: s for s in self.spans if s.trace_id == trace_id}
            if names <= set(got) or time.monotonic() > deadline:
                assert names <= set(got), (names - set(got), sorted(got))
                return got
            time.sleep(0.05)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def receiver():
    r = OTLPReceiver()
    yield r
    tracing.shutdown()  # flushed to the receiver while it still listens
    r.stop()


@pytest.fixture()
def otlp_env(receiver, monkeypatch):
    """The standard variable pointing at the receiver (the exporter appends /v1/traces)."""
    for var in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_SERVICE_NAME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    return receiver


def row_of(app, query_id: str) -> QueryLog:
    app.state.telemetry.flush(10)
    with app.state.services.sessions() as s:
        return s.scalars(select(QueryLog).where(QueryLog.id == query_id)).one()


def test_tracing_off_without_the_variables(kb, receiver, monkeypatch):
    """No OTLP variable (the module's first test: no provider made yet in this process): no
    tracer provider is installed, no span is made or sent, the answer's trace_id and the row's
    are null.

    Fails if tracing is on by default (a cost for every request) or a stale id is stored."""
    for var in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    tracing.force_flush()
    n = len(receiver.spans)
    assert tracing.tracer() is None and tracing.start_request("x", time.perf_counter()) is None
    assert not isinstance(trace.get_tracer_provider(), TracerProvider)  # the API's no-op proxy
    with TestClient(create_app(kb.settings)) as client:
        body = client.post("/query", json={"question": f"Were there any injuries? ({next(_n)})"}).json()
        row = row_of(client.app, body["query_id"])
    assert body["trace_id"] is None and body["trace_url"] is None and row.trace_id is None
    time.sleep(0.3)
    assert len(receiver.spans) == n


def test_query_trace_spans_carry_the_timings_of_its_query_logs_row(kb, otlp_env):
    """POST /query with OTEL_EXPORTER_OTLP_ENDPOINT set: one trace (id in the answer and in the
    query_logs row) whose root ragaudit.query has a child per stage; each stage span lasts exactly
    the ms its row column holds (and says so in ragaudit.ms), the root lasts total_ms, the stages
    lie inside the root in order, and the generation span names the model, tokens and cost.

    Fails if spans are timed separately from the row (numbers differ), if the trace id is not
    stored, or if the stages are not children of the request's root span."""
    question = f"What was the probable cause of the accident? ({next(_n)})"
    with TestClient(create_app(kb.settings)) as client:
        body = client.post("/query", json={"question": question}).json()
        row = row_of(client.app, body["query_id"])
    tid = body["trace_id"]
    assert re.fullmatch(r"[0-9a-f]{32}", tid) and row.trace_id == tid
    spans = otlp_env.trace(tid, {"POST /query", "ragaudit.query", *ROW_STAGES, "rerank", "neighbors", "generation"})
    root = spans["ragaudit.query"]
    http = spans["POST /query"]  # FastAPI's own request span (global provider) is the trace's root
    assert http.parent == "" and root.service == "ragaudit"
    by_id = {s.span_id: s for s in spans.values()}
    up = root
    while up.parent:  # ragaudit.query -> fastapi.endpoint -> POST /query
        up = by_id[up.parent]
    assert up is http
    assert root.attrs["ragaudit.query_id"] == row.id and root.attrs["ragaudit.endpoint"] == "query"
    assert abs(root.ms - row.total_ms) < 1e-6 and root.attrs["ragaudit.total_ms"] == row.total_ms
    # hybrid: passage ranking is the rerank stage (rerank_ms)
    for stage, col in {**ROW_STAGES, "rerank": "rerank_ms", "generation": "generation_ms"}.items():
        sp = spans[stage]
        assert sp.parent == root.span_id, stage
        assert sp.attrs["ragaudit.ms"] == getattr(row, col), stage
        assert abs(sp.ms - getattr(row, col)) < 1e-6, (stage, sp.ms, getattr(row, col))
    assert abs(spans["neighbors"].ms - body["timings_ms"]["neighbors"]) < 1e-6
    order = [spans[s] for s in ("embed", "vector", "bm25", "fusion", "rerank", "neighbors", "generation")]
    slack = 10_000  # ns: durations are the row's numbers, rounded to 0.01 ms
    assert root.start <= order[0].start and order[-1].end <= root.end + slack
    assert all(a.end <= b.start + slack for a, b in zip(order, order[1:]))
    gen = spans["generation"].attrs
    assert gen["gen_ai.request.model"] == row.model == "extractive"
    assert gen["gen_ai.usage.input_tokens"] == row.prompt_tokens and gen["ragaudit.cost_usd"] == row.cost_usd == 0.0
    # a stage that did not run has no span: a BM25 query embeds nothing, searches no vectors and
    # ranks no passages
    with TestClient(create_app(kb.settings)) as client:
        bm25 = client.post("/query", json={"question": f"{question} (bm25)", "mode": "bm25"}).json()
    lexical = otlp_env.trace(bm25["trace_id"], {"POST /query", "ragaudit.query", "bm25", "fusion", "generation"})
    assert not {"embed", "vector", "rerank"} & set(lexical), sorted(lexical)


def test_search_stream_and_cache_hit_are_traced_with_their_rows(kb, otlp_env):
    """/search, /query/stream and a cached /query each get their own trace, its id in their row;
    the cache hit's trace is the root alone, as long as its row's total.

    Fails if a door skips the trace or stores another id than the one returned."""
    question = f"What were the weather conditions? ({next(_n)})"
    with TestClient(create_app(kb.settings)) as client:
        found = client.post("/search", json={"question": question}).json()
        first = client.post("/query", json={"question": question}).json()
        again = client.post("/query", json={"question": question}).json()
        stream = client.post("/query/stream", json={"question": question}).text
        rows = {k: row_of(client.app, v["query_id"]) for k, v in {"s": found, "q": first, "h": again}.items()}
    done = [ln[5:] for ln in stream.replace("\r\n", "\n").split("\n") if ln.startswith("data:")][-1]
    stream_tid = re.search(r'"trace_id": "([0-9a-f]{32})"', done).group(1)
    assert len({found["trace_id"], first["trace_id"], again["trace_id"], stream_tid}) == 4
    spans = otlp_env.trace(found["trace_id"], {"ragaudit.search", *ROW_STAGES})
    assert rows["s"].trace_id == found["trace_id"] and "generation" not in spans
    assert all(abs(spans[s].ms - getattr(rows["s"], c)) < 1e-6 for s, c in ROW_STAGES.items())
    assert again["cache"]["hit"] and rows["h"].trace_id == again["trace_id"]
    hit = otlp_env.trace(again["trace_id"], {"ragaudit.query"})
    assert not set(hit) & {*ROW_STAGES, "generation"} and hit["ragaudit.query"].attrs["ragaudit.cache_hit"] is True
    assert abs(hit["ragaudit.query"].ms - rows["h"].total_ms) < 1e-6
    assert "ragaudit.stream" in otlp_env.trace(stream_tid, {"ragaudit.stream", "generation"})


def test_rerank_span_with_a_cross_encoder_and_the_traces_endpoint_variable(kb, receiver, monkeypatch, tmp_path):
    """hybrid_rerank with a real cross-encoder, exported through OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
    (the full URL): the rerank span lasts the row's rerank_ms.

    Fails if the traces-specific variable is ignored or the rerank stage has no span."""
    from sentence_transformers import CrossEncoder

    from ragaudit.index.embedding import resolve_model_path
    from ragaudit.query import QueryService

    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"{receiver.url}/v1/traces")
    ce = CrossEncoder(str(resolve_model_path("bundled:all-MiniLM-L6-v2")), num_labels=1, device="cpu")
    ce.save(str(tmp_path / "ce"))
    qs = QueryService(kb, reranker=CrossEncoder(str(tmp_path / "ce"), device="cpu", local_files_only=True))
    out = qs.ask(f"Were there any injuries? ({next(_n)})", mode="hybrid_rerank")
    with kb.sessions() as s:
        row = s.get(QueryLog, out["query_id"])
    spans = receiver.trace(out["trace_id"], {"ragaudit.query", "rerank"})
    assert row.trace_id == out["trace_id"] and row.rerank_ms > 0
    assert spans["rerank"].attrs["ragaudit.ms"] == row.rerank_ms and abs(spans["rerank"].ms - row.rerank_ms) < 1e-6


def test_ingestion_run_is_one_trace_with_its_stages(tmp_path, embedder, otlp_env):
    """Ingesting a PDF through the Dagster runner: a dagster.run span (run id, job) whose trace holds
    the stage spans extract, chunk, embed_index, count_check and publish, with their counts.

    Fails if the stages of a run are not traced, or land in other traces than their run's."""
    from ragaudit.ingest.documents import ingest_bytes
    from ragaudit.pipelines.runner import DagsterRunner
    from ragaudit.services import get_services, release_services

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=12)
    for i in range(12):
        pdf.cell(
            0, 8, f"Line {i}: the harbour authority inspected berth {i} on 3 May 2021.", new_x="LMARGIN", new_y="NEXT"
        )
    settings = make_settings(tmp_path / "data")
    try:
        out = ingest_bytes(get_services(settings), bytes(pdf.output()), "harbour.pdf", DagsterRunner())
        assert out.status == "ingested", out
    finally:
        release_services(settings)
    names = {"dagster.run", "ingest.extract", "ingest.chunk", "ingest.embed_index", "ingest.publish"}
    doc_id = out.document["id"]
    deadline = time.monotonic() + 20
    while not (
        runs := [s for s in otlp_env.spans if s.name == "dagster.run" and s.attrs.get("ragaudit.document_id") == doc_id]
    ):
        assert time.monotonic() < deadline, "no dagster.run span for the document"
        tracing.force_flush()
        time.sleep(0.05)
    (run,) = runs
    spans = otlp_env.trace(run.trace_id, names | {"ingest.count_check"})
    assert run.parent == "" and run.attrs["dagster.success"] is True and run.attrs["dagster.run_id"]
    assert spans["ingest.extract"].attrs["ragaudit.pages"] == 1
    assert spans["ingest.chunk"].attrs["ragaudit.chunks"] >= 1
    assert spans["ingest.count_check"].attrs["ragaudit.passed"] is True
    assert all(run.start <= spans[n].start and spans[n].end <= run.end for n in names - {"dagster.run"})

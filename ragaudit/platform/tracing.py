"""OpenTelemetry traces of requests and ingestion runs, exported over OTLP/HTTP.

On when the standard ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT`` is
set (read at each request, so a process picks up what its environment says); off otherwise, and
off with ``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none``. Off, every function here
returns ``None`` or does nothing: no span object is created. On, spans go through a
``BatchSpanProcessor`` to ``OTLPSpanExporter`` (opentelemetry-exporter-otlp-proto-http), which
reads the other standard variables itself (``OTEL_EXPORTER_OTLP_HEADERS``, ``..._TIMEOUT``,
``OTEL_BSP_SCHEDULE_DELAY``); ``OTEL_SERVICE_NAME`` names the service (default ``ragaudit``).
The first provider made is also installed as the global one, so spans of libraries that use
the global tracer join the same traces: FastAPI's HTTP request spans (the API calls ``tracer()``
at start-up, before the first request) become each request's root, and the MCP SDK's
``tools/call`` spans the parent of a tool's request span.

Requests (``QueryService``): ``start_request`` opens the trace's root span at the moment the
request's total time is measured from; ``RequestTrace.finish`` adds one child span per stage
that ran (embed, vector, bm25, document, fusion, rerank, neighbors, generation) with the
start measured by the retriever and the duration *taken from the timings dict that is written
to the query_logs row*: the span's end minus start is that number of ms (to the nanosecond), and
the attribute ``ragaudit.ms`` carries the same float. The root ends at start + total ms. So a
trace and its row never disagree. The trace id (32 hex digits) is stored in
``query_logs.trace_id`` and returned as ``trace_id`` in the answer.

Ingestion: ``span(name, **attributes)`` is a live span (current while its block runs) for the
ingestion stages (``ingest.extract``, ``ingest.chunk``, ``ingest.embed_index``,
``ingest.publish``) and for Dagster runs (``dagster.run``).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, TypeVar

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])

ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
TRACER_NAME = "ragaudit"

_lock = threading.Lock()
_provider: Any = None  # the SDK TracerProvider in use, or None
_provider_key: str | None = None  # the endpoint it exports to
_global_set = False


def export_endpoint() -> str | None:
    """The OTLP endpoint the environment names (the traces one first), or ``None`` when tracing
    is off (no endpoint, ``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none``)."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return None
    for var in ENDPOINT_VARS:
        value = os.environ.get(var, "").strip()
        if value:
            return value
    return None


def tracer() -> Any:
    """The ragaudit tracer when tracing is on, else ``None``. Builds the provider on first use
    and again when the endpoint changed (the old one is flushed and shut down)."""
    global _provider, _provider_key, _global_set
    key = export_endpoint()
    if key is None:
        if _provider is not None:  # turned off since: stop exporting (the global provider included)
            shutdown()
        return None
    if _provider is not None and _provider_key == key:
        return _provider.get_tracer(TRACER_NAME)
    with _lock:
        if _provider is None or _provider_key != key:
            # deferred: the SDK and exporter load only in a process that exports traces
            from opentelemetry import trace  # deferred: the OpenTelemetry SDK, loaded only when traces are exported
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                OTLPSpanExporter,  # deferred: the OpenTelemetry SDK, loaded only when traces are exported
            )
            from opentelemetry.sdk.resources import (
                Resource,  # deferred: the OpenTelemetry SDK, loaded only when traces are exported
            )
            from opentelemetry.sdk.trace import (
                TracerProvider,  # deferred: the OpenTelemetry SDK, loaded only when traces are exported
            )
            from opentelemetry.sdk.trace.export import (
                BatchSpanProcessor,  # deferred: the OpenTelemetry SDK, loaded only when traces are exported
            )

            old = _provider
            attrs = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": "ragaudit"}
            provider = TracerProvider(resource=Resource.create(attrs))
            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
            _provider, _provider_key = provider, key
            if not _global_set:
                trace.set_tracer_provider(provider)
                _global_set = True
            if old is not None:
                old.shutdown()
            log.info("OpenTelemetry traces are exported over OTLP/HTTP to %s", key)
    return _provider.get_tracer(TRACER_NAME)


def force_flush(timeout_s: float = 10.0) -> bool:
    """Export the spans still buffered now; ``True`` when none is left (or tracing is off)."""
    p = _provider
    return True if p is None else bool(p.force_flush(int(timeout_s * 1000)))


def shutdown() -> None:
    """Flush and stop the exporter (servers call it when they stop)."""
    global _provider, _provider_key
    with _lock:
        p, _provider, _provider_key = _provider, None, None
    if p is not None:
        p.shutdown()


def trace_id_hex(span: Any) -> str | None:
    """A span's trace id as 32 lower-case hex digits (W3C trace context), ``None`` if invalid."""
    ctx = span.get_span_context()
    return format(ctx.trace_id, "032x") if ctx.is_valid else None


def _attrs(values: dict[str, Any]) -> dict[str, Any]:
    """Attributes OpenTelemetry accepts: ``None`` left out, other values as given."""
    return {k: v for k, v in values.items() if v is not None}


class RequestTrace:
    """The trace of one request; see the module docstring. Made by ``start_request``."""

    def __init__(self, tr: Any, name: str, t0: float, attributes: dict[str, Any]):
        from opentelemetry import trace  # deferred: the OpenTelemetry SDK, loaded only when traces are exported
        from opentelemetry.trace import (
            SpanKind,  # deferred: the OpenTelemetry SDK, loaded only when traces are exported
        )

        self.t0 = t0
        # the wall-clock time of perf_counter() == t0 (spans need epoch ns; durations come from perf_counter)
        self.t0_ns = time.time_ns() - round((time.perf_counter() - t0) * 1e9)
        self._tracer = tr
        # under a server span already open for this request (FastAPI's own HTTP span, the MCP SDK's
        # tools/call span) the request's span is an inner one of the same trace
        inner = trace.get_current_span().get_span_context().is_valid
        kind = SpanKind.INTERNAL if inner else SpanKind.SERVER
        self.span = tr.start_span(name, kind=kind, start_time=self.t0_ns, attributes=_attrs(attributes))
        self.trace_id = trace_id_hex(self.span)

    def ns(self, perf: float) -> int:
        """Epoch nanoseconds of the ``time.perf_counter()`` value ``perf``."""
        return self.t0_ns + round((perf - self.t0) * 1e9)

    @contextmanager
    def active(self) -> Iterator[None]:
        """Make the root span current in this thread while the block runs (spans opened there,
        such as ingestion's or a library's, become its children); it is not ended here."""
        from opentelemetry import trace  # deferred: the OpenTelemetry SDK, loaded only when traces are exported

        with trace.use_span(self.span, end_on_exit=False):
            yield

    def set(self, **attributes: Any) -> None:
        """Set attributes of the root span (``None`` values left out)."""
        self.span.set_attributes(_attrs(attributes))

    def finish(
        self,
        timings_ms: dict[str, float | None],
        starts: dict[str, float],
        error_kind: str | None = None,
        generation: dict[str, Any] | None = None,
    ) -> str | None:
        """Add a child span per stage of ``starts`` (stage -> ``perf_counter()`` at its start)
        found in ``timings_ms`` (stage -> ms, the row's numbers), then end the root at
        ``timings_ms["total"]`` ms after its start. ``generation``: attributes of the generation
        span (model, tokens, cost). ``error_kind`` marks the root as failed. Returns the trace id."""
        from opentelemetry import trace  # deferred: the OpenTelemetry SDK, loaded only when traces are exported
        from opentelemetry.trace import (  # deferred: the OpenTelemetry SDK, loaded only when traces are exported
            Status,
            StatusCode,
        )

        parent = trace.set_span_in_context(self.span)
        for stage, start in sorted(starts.items(), key=lambda kv: kv[1]):
            ms = timings_ms.get(stage)
            if ms is None:
                continue
            attrs = {"ragaudit.stage": stage, "ragaudit.ms": float(ms)}
            if stage == "generation" and generation:
                attrs.update(generation)
            begin = self.ns(start)
            child = self._tracer.start_span(stage, context=parent, start_time=begin, attributes=_attrs(attrs))
            child.end(end_time=begin + round(float(ms) * 1e6))
        total = timings_ms.get("total")
        if total is not None:
            self.span.set_attribute("ragaudit.total_ms", float(total))
        if timings_ms.get("ttft") is not None:
            self.span.set_attribute("ragaudit.ttft_ms", float(timings_ms["ttft"]))
        if error_kind:
            self.span.set_status(Status(StatusCode.ERROR, error_kind))
            self.span.set_attribute("error.type", error_kind)
        end = self.t0_ns + round(float(total) * 1e6) if total is not None else None
        self.span.end(end_time=end)
        return self.trace_id


def start_request(name: str, t0: float, **attributes: Any) -> RequestTrace | None:
    """A ``RequestTrace`` whose root span ``name`` starts at ``t0`` (a ``time.perf_counter()``
    value), or ``None`` when tracing is off. Attributes with ``None`` values are left out."""
    tr = tracer()
    if tr is None:
        return None
    try:
        return RequestTrace(tr, name, t0, attributes)
    except Exception as e:  # tracing never fails a request
        log.warning("could not start a trace: %s", type(e).__name__)
        return None


@contextmanager
def span(name: str, **attributes: Any) -> Iterator[Any]:
    """A live span around the block (current while it runs), or nothing when tracing is off.
    Yields the span (``None`` when off) so the block can add attributes; an exception leaving
    the block is recorded on it and re-raised."""
    tr = tracer()
    if tr is None:
        yield None
        return
    with tr.start_as_current_span(name, attributes=_attrs(attributes)) as s:
        yield s


def annotate(**attributes: Any) -> None:
    """Set attributes on the current span (nothing when tracing is off or no span is current);
    ``None`` values are left out, other values must be str, bool, int or float."""
    if export_endpoint() is None:
        return
    from opentelemetry import trace  # deferred: the OpenTelemetry SDK, loaded only when traces are exported

    trace.get_current_span().set_attributes(_attrs(attributes))


def traced(name: str) -> Callable[[F], F]:
    """Decorator: the call runs inside ``span(name)``; a returned dict's scalar values become the
    span's attributes (``ragaudit.<key>``). With tracing off the function is called directly."""

    def deco(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if export_endpoint() is None:
                return fn(*args, **kwargs)
            with span(name) as s:
                out = fn(*args, **kwargs)
                if s is not None and isinstance(out, dict):
                    s.set_attributes(
                        {f"ragaudit.{k}": v for k, v in out.items() if isinstance(v, (str, bool, int, float))}
                    )
                return out

        return wrapper  # type: ignore[return-value]

    return deco

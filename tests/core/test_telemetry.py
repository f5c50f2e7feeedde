"""TelemetryWriter and the QueryService telemetry/cache paths on the real knowledge base (SQLite),
with a paid model faked by litellm's mock_response."""

import litellm
import pytest
from sqlalchemy import create_engine, select

from ragaudit.answer.answerers import LLMAnswerer
from ragaudit.platform.cache import AnswerCache, normalize_question
from ragaudit.platform.db import QueryLog, make_sessionmaker
from ragaudit.platform.opsmetrics import percentiles
from ragaudit.platform.telemetry import TelemetryWriter, question_hash
from ragaudit.query import QueryService


def _row(svc, qid):
    with svc.sessions() as s:
        return s.get(QueryLog, qid)


def test_llm_cost_cache_hit_and_failure_rows(kb):
    tele = TelemetryWriter.from_services(kb, background=False)
    cache = AnswerCache(kb.sessions, ttl_s=60)
    qs = QueryService(
        kb,
        answerer=LLMAnswerer("gpt-4o-mini", mock_response="It was signed on October 28, 1998 [1]."),
        telemetry=tele,
        cache=cache,
    )
    q = "When was the Digital Millennium Copyright Act signed?"
    first = qs.ask(q, top_k=2)
    row = _row(kb, first["query_id"])
    assert row.model == "gpt-4o-mini" and row.cost_usd > 0 and row.prompt_tokens > 0 and not row.cache_hit
    assert row.cost_usd == pytest.approx(first["usage"]["cost_usd"]) and row.endpoint == "query"
    assert row.retrieved_ids == [r["chunk_id"] for r in first["retrieved"]] and row.total_ms > 0

    again = qs.ask("  when was the digital millennium copyright act SIGNED? ", top_k=2)  # normalised: same key
    assert again["cache"]["hit"] and again["cache"]["original_query_id"] == first["query_id"]
    assert again["usage"]["cost_usd"] == 0 and again["cache"]["original_cost_usd"] == first["usage"]["cost_usd"]
    hit = _row(kb, again["query_id"])
    assert hit.cache_hit and hit.cost_usd == 0 and hit.cache_source_id == first["query_id"]
    assert qs.ask(q, top_k=3)["cache"]["hit"] is False  # top_k is part of the key

    failing = QueryService(
        kb,
        answerer=LLMAnswerer(
            "gpt-4o-mini", mock_response=litellm.RateLimitError("slow down", llm_provider="openai", model="gpt-4o-mini")
        ),
        telemetry=tele,
    )
    with pytest.raises(litellm.RateLimitError):
        failing.ask("What is a vessel hull design?", top_k=2)
    with kb.sessions() as s:
        err = s.scalars(select(QueryLog).where(QueryLog.error_kind == "RateLimitError")).all()
    assert len(err) == 1 and err[0].model == "gpt-4o-mini" and err[0].cost_usd == 0
    assert tele.stats()["written"] == 4 and tele.stats()["dropped"] == 0


def test_question_hash_only_setting(kb):
    tele = TelemetryWriter(kb.sessions, store_question=False, background=False)
    out = QueryService(kb, telemetry=tele).search_logged("vessel hull protection", top_k=2)
    row = _row(kb, out["query_id"])
    assert row.question is None and row.question_hash == question_hash("vessel hull protection")
    assert row.endpoint == "search" and row.model == kb.settings.embedding_model and row.cost_usd == 0


def test_unreachable_database_rows_are_counted_not_lost():
    # a real connection attempt to a closed port: retried for retry_max_s, then dropped and counted
    engine = create_engine("postgresql+psycopg://nobody@127.0.0.1:9/none?connect_timeout=1")
    tele = TelemetryWriter(make_sessionmaker(engine), queue_size=5, batch_size=2, retry_max_s=0.5)
    for i in range(12):
        tele.record(endpoint="search", question=f"q{i}", mode="bm25", top_k=2, timings_ms={"total": 1.0})
    assert tele.flush(30)
    st = tele.stats()
    assert st["recorded"] == 12 and st["written"] == 0 and st["dropped"] == 12 and st["pending"] == 0
    assert st["last_error"] == "OperationalError"
    tele.close(1)


def test_percentile_definition_and_normalisation():
    # numpy 'linear' = Hyndman-Fan type 7: position (n-1)*q
    assert percentiles([1.0, 2.0, 3.0, 4.0]) == {"p50": 2.5, "p95": 3.85, "p99": 3.97}
    assert percentiles([]) == {"p50": None, "p95": None, "p99": None}
    assert normalize_question("  What\tIS  ｘ? ") == "what is x?"


def test_background_writer_polls_and_writes_every_row(kb):
    """The background thread polls the queue instead of waiting in ``Queue.get`` (a waiting thread
    is woken by every ``record`` and takes the GIL mid-request). Fails if the idle thread waits on
    the queue's condition, or if a row recorded while it sleeps is not written (or lost at close)."""
    import time

    tele = TelemetryWriter(kb.sessions, background=True, batch_size=3)
    try:
        time.sleep(3 * TelemetryWriter.POLL_S)
        assert tele._queue.not_empty._waiters == type(tele._queue.not_empty._waiters)()  # nobody to wake
        ids = [
            tele.record(endpoint="search", question=f"poll {i}", mode="bm25", top_k=2, timings_ms={"total": 1.0})
            for i in range(7)
        ]
        assert tele.flush(30)
        assert tele.stats()["written"] == 7
        with kb.sessions() as s:
            assert len(s.execute(select(QueryLog.id).where(QueryLog.id.in_(ids))).all()) == 7
        last = tele.record(endpoint="search", question="at close", mode="bm25", top_k=2)
    finally:
        tele.close(10)
    assert tele.stats()["written"] == 8 and tele.stats()["dropped"] == 0
    with kb.sessions() as s:
        assert s.execute(select(QueryLog.id).where(QueryLog.id == last)).first() is not None

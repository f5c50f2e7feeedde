"""The OpenAI-compatible door (/v1/chat/completions, /v1/models) driven by the official ``openai``
Python package against the real app under uvicorn on 127.0.0.1, on the session's knowledge base
(the three sample PDFs), with API keys set and required for reads."""

from __future__ import annotations

import json
import re

import httpx
import openai
import pytest
from pydantic import SecretStr
from sqlalchemy import select

from ragaudit.api.app import create_app
from ragaudit.platform.db import QueryLog
from tests.conftest import DMCA_QUESTION
from tests.live import LiveServer

KEY = "sk-ragaudit-test-key"
NTSB = "20080102X00002.pdf"


@pytest.fixture(scope="module")
def server(kb):
    """The app on the ``kb`` services (same data), keys set, reads need a key; one server per module."""
    settings = kb.settings.model_copy(update={"api_keys": [SecretStr(KEY)], "read_requires_api_key": True})
    app = create_app(settings)
    with LiveServer(app) as base:
        yield app, base


@pytest.fixture(scope="module")
def client(server):
    _, base = server
    with openai.OpenAI(base_url=f"{base}/v1", api_key=KEY, max_retries=0, timeout=120) as c:
        yield c


def rows(app, **where) -> list[QueryLog]:
    app.state.telemetry.flush(10)
    with app.state.services.sessions() as s:
        q = select(QueryLog).order_by(QueryLog.created_at)
        for k, v in where.items():
            q = q.where(getattr(QueryLog, k) == v)
        return list(s.scalars(q))


def test_non_streaming_answer_carries_citations_label_usage_and_its_row(server, client):
    """A plain ``chat.completions.create``: the content has the [n] markers, the message carries
    the audited citations (verified, supports) and the label, usage has tokens and cost, and the
    query_logs row (endpoint chat) is the request's, with the cited chunk ids. /query with the same
    question then is a cache hit of this very answer: one service behind both doors.

    Fails if the door answers by another path than QueryService.ask (no row, no cache hit), drops
    the citations or the label from the message, or leaves usage without the cost."""
    app, base = server
    r = client.chat.completions.create(model="ragaudit", messages=[{"role": "user", "content": DMCA_QUESTION}])
    msg = r.choices[0].message
    assert r.object == "chat.completion" and r.model == "ragaudit" and r.choices[0].finish_reason == "stop"
    assert re.search(r"\[\d+\]", msg.content), msg.content
    assert "1998" in msg.content
    extra = msg.model_extra
    assert extra["label"] == "answered"
    cites = extra["citations"]
    assert cites and all(c["verified"] and c["supports"] for c in cites)
    assert {"n", "doc_name", "page", "quote", "verified", "supports", "reason", "chunk_id"} <= set(cites[0])
    assert all(f"[{c['n']}]" in msg.content for c in cites)
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert r.usage.model_extra["cost_usd"] == 0.0  # the offline answerer
    audit = r.model_extra["ragaudit"]
    assert r.id == f"chatcmpl-{audit['query_id']}"
    assert audit["retrieved"] and audit["timings_ms"]["total"] > 0
    (row,) = rows(app, id=audit["query_id"])
    assert row.endpoint == "chat" and row.label == "answered" and row.error_kind is None
    assert row.question == DMCA_QUESTION and row.model == "extractive"
    assert row.cited_ids == [c["chunk_id"] for c in cites]
    q = httpx.post(f"{base}/query", json={"question": DMCA_QUESTION}, headers={"X-API-Key": KEY}, timeout=60)
    assert q.status_code == 200, q.text
    assert q.json()["cache"]["hit"] and q.json()["cache"]["original_query_id"] == audit["query_id"]
    assert q.json()["answer"] == msg.content
    m = httpx.get(f"{base}/metrics", params={"endpoint": "chat"}, headers={"X-API-Key": KEY}, timeout=30)
    assert m.status_code == 200 and m.json()["overall"]["count"] >= 1  # the door's rows, filtered by /metrics


def test_streaming_sends_chunks_then_citations_then_usage_then_done(server, client):
    """``stream=True`` with ``stream_options.include_usage``: chat.completion.chunk events whose
    content deltas join to the answer, a last choice chunk with finish_reason stop carrying the
    citations and label, a usage chunk with no choices, and ``data: [DONE]`` on the wire; the row
    is logged with endpoint chat_stream.

    Fails if the stream is not OpenAI's framing (the SDK raises or sees no chunks), if include_usage
    is ignored, or if the citations never reach a streaming client."""
    app, base = server
    question = "What was the probable cause of the accident?"
    chunks = list(
        client.chat.completions.create(
            model="ragaudit",
            messages=[{"role": "user", "content": question}],
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"doc_names": [NTSB]},
        )
    )
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    last = [c for c in chunks if c.choices][-1]
    assert last.choices[0].finish_reason == "stop"
    delta = last.choices[0].delta.model_extra
    assert delta["label"] in ("answered", "refused")
    assert all(re.search(rf"\[{c['n']}\]", text) for c in delta["citations"])
    assert all(c["doc_name"] == NTSB for c in delta["citations"])
    usage = chunks[-1]
    assert usage.choices == [] and usage.usage is not None and usage.usage.model_extra["cost_usd"] == 0.0
    qid = chunks[0].model_extra["ragaudit"]["query_id"]
    assert last.model_extra["ragaudit"]["query_id"] == qid
    assert all(r["doc_name"] == NTSB for r in chunks[0].model_extra["ragaudit"]["retrieved"])
    (row,) = rows(app, id=qid)
    assert row.endpoint == "chat_stream" and row.label == delta["label"] and row.error_kind is None
    # the wire itself ends with the literal [DONE] event
    body = {"model": "ragaudit", "stream": True, "messages": [{"role": "user", "content": question}]}
    with httpx.stream(
        "POST", f"{base}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {KEY}"}, timeout=60
    ) as resp:
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
        datas = [ln[5:].strip() for ln in resp.iter_lines() if ln.startswith("data:")]
    assert datas[-1] == "[DONE]"
    assert json.loads(datas[-2])["choices"][0]["finish_reason"] == "stop"
    assert "usage" not in json.loads(datas[0])  # include_usage not asked for here


def test_unknown_model_is_404_model_not_found(server, client):
    """A model name that names no knowledge base (or another vendor's model) is OpenAI's 404 with
    code model_not_found, type invalid_request_error; the refusal has its query_logs row.

    Fails if an unknown knowledge base silently searches every document, if the error is not
    OpenAI's shape (the SDK would not raise NotFoundError with the code), or if its row is logged
    under a mode (it was under hybrid)."""
    app, _ = server
    for model in ("ragaudit:no-such-kb", "gpt-4o", "ragaudit:default:sideways"):
        with pytest.raises(openai.NotFoundError) as e:
            client.chat.completions.create(model=model, messages=[{"role": "user", "content": DMCA_QUESTION}])
        assert e.value.code == "model_not_found" and e.value.type == "invalid_request_error"
        assert e.value.body["param"] == "model"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("ragaudit:no-such-kb")
    refused = rows(app, error_kind="model_not_found")
    # an unknown model runs in no mode: its rows are not counted under one (/metrics groups, Prometheus)
    assert refused and {r.mode for r in refused} == {"invalid"}, {r.mode for r in refused}


def test_models_list_what_exists_and_the_name_picks_kb_and_mode(server, client):
    """/v1/models lists ragaudit, ragaudit:KB and ragaudit:KB:MODE for the knowledge base that
    exists, every mode the server runs included (hybrid too; no rerank mode without a reranker);
    asking ragaudit:default:bm25 runs BM25 only.

    Fails if the listing invents names or the mode in the name is not used."""
    ids = [m.id for m in client.models.list()]
    assert ids == [
        "ragaudit",
        "ragaudit:default",
        "ragaudit:default:vector",
        "ragaudit:default:bm25",
        "ragaudit:default:hybrid",
    ]
    assert client.models.retrieve("ragaudit:default:hybrid").id == "ragaudit:default:hybrid"  # accepted, so listed
    assert client.models.retrieve("ragaudit:default:bm25").id == "ragaudit:default:bm25"
    r = client.chat.completions.create(
        model="ragaudit:default:bm25", messages=[{"role": "user", "content": "What were the weather conditions?"}]
    )
    audit = r.model_extra["ragaudit"]
    assert audit["mode"] == "bm25" and audit["scope"] == {"knowledge_base": "default"}
    ranked = [c for c in audit["retrieved"] if not c["neighbor_of"]]  # neighbours are no leg's hit
    assert ranked and all(c["ranks"]["vector"] is None and c["ranks"]["bm25"] is not None for c in ranked)


def test_scope_from_metadata_and_body_and_conflict(server, client):
    """Scope from ``metadata`` (strings) and from top-level body fields (``extra_body``) is the
    /query scope: every retrieved chunk is in the named document and page range. The same field
    with two values is a 400.

    Fails if metadata is ignored (chunks of other documents come back) or a conflict is resolved
    silently."""
    r = client.chat.completions.create(
        model="ragaudit",
        messages=[{"role": "user", "content": "What were the weather conditions?"}],
        metadata={"doc_names": json.dumps([NTSB]), "page_max": "1"},
        extra_body={"top_k": 3},
    )
    audit = r.model_extra["ragaudit"]
    assert audit["scope"] == {"doc_names": [NTSB], "page_max": 1}
    assert audit["retrieved"] and all(c["doc_name"] == NTSB and c["page_start"] <= 1 for c in audit["retrieved"])
    assert len([c for c in audit["retrieved"] if not c["neighbor_of"]]) <= 3
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model="ragaudit",
            messages=[{"role": "user", "content": "What were the weather conditions?"}],
            metadata={"top_k": "2"},
            extra_body={"top_k": 3},
        )
    assert e.value.body["param"] == "top_k" and e.value.type == "invalid_request_error"


def test_doc_name_scopes_and_an_unknown_field_is_refused_naming_it(server, client):
    """``doc_name`` (the singular field /query accepts) scopes the answer, from ``extra_body`` or
    ``metadata``; a field that is neither an OpenAI parameter nor a scope field (``page_start``, a
    typo of ``page_min``) is OpenAI's 400 ``unknown_parameter`` naming it, logged as a client
    error; every parameter of OpenAI's request the installed SDK knows is accepted.

    Fails if ``doc_name`` or ``page_start`` is dropped silently (the answer then came from another
    document, label answered), or if a standard parameter a client sends is refused."""
    app, _ = server
    question = [{"role": "user", "content": "What were the weather conditions?"}]
    for how in ({"extra_body": {"doc_name": NTSB}}, {"metadata": {"doc_name": NTSB}}):
        r = client.chat.completions.create(model="ragaudit", messages=question, **how)
        audit = r.model_extra["ragaudit"]
        assert audit["scope"] == {"doc_names": [NTSB]}, (how, audit["scope"])
        assert audit["retrieved"] and all(c["doc_name"] == NTSB for c in audit["retrieved"]), how
    before = len(rows(app, error_kind="validation_error"))
    for extra in ({"page_start": 3}, {"doc_name": NTSB, "knowledgebase": "default", "pages": "1-2"}):
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model="ragaudit", messages=question, extra_body=extra)
        unknown = [k for k in extra if k != "doc_name"]
        assert e.value.code == "unknown_parameter" and e.value.type == "invalid_request_error"
        assert e.value.body["param"] == unknown[0] and all(k in e.value.message for k in unknown), e.value.message
        assert "page_min" in e.value.message and "doc_name" in e.value.message  # says what is accepted
    assert len(rows(app, error_kind="validation_error")) - before == 2
    # every parameter of OpenAI's chat-completions request is accepted (and not used)
    from openai.types.chat.completion_create_params import CompletionCreateParamsBase

    from ragaudit.api.routes.openai_compat import OPENAI_PARAMS, ChatCompletionIn

    known = set(CompletionCreateParamsBase.__annotations__) | {"stream"}
    assert known - set(ChatCompletionIn.model_fields) <= OPENAI_PARAMS, known - OPENAI_PARAMS
    r = client.chat.completions.create(
        model="ragaudit",
        messages=question,
        temperature=0.2,
        top_p=0.9,
        n=1,
        stop=["\n\n"],
        max_tokens=200,
        max_completion_tokens=200,
        presence_penalty=0.0,
        frequency_penalty=0.0,
        logit_bias={"50256": -100},
        logprobs=False,
        top_logprobs=0,
        user="u-1",
        seed=7,
        response_format={"type": "text"},
        tool_choice="none",
        parallel_tool_calls=False,
        metadata={"client": "test", "doc_names": NTSB},
        store=False,
        service_tier="auto",
        modalities=["text"],
        reasoning_effort="low",
        safety_identifier="s-1",
        prompt_cache_key="k",
        verbosity="low",
        extra_body={"top_k": 3, "page_max": 2, "strategy": "sentence"},
    )
    audit = r.model_extra["ragaudit"]
    assert audit["scope"] == {"doc_names": [NTSB], "page_max": 2, "strategy": "sentence"}, audit["scope"]
    assert audit["retrieved"] and all(c["doc_name"] == NTSB for c in audit["retrieved"])


def test_follow_up_is_asked_with_the_previous_user_question(server, client):
    """Earlier turns are context: "Who signed it?" after the DMCA question is asked as both user
    turns together (the assistant turn is not searched), and the notes say so.

    Fails if the follow-up is searched alone (no subject: a clarifying answer) or the joining is silent."""
    r = client.chat.completions.create(
        model="ragaudit",
        messages=[
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": DMCA_QUESTION},
            {"role": "assistant", "content": "It was signed on October 28, 1998 [1]."},
            {"role": "user", "content": "Who signed it?"},
        ],
    )
    audit = r.model_extra["ragaudit"]
    assert audit["question"] == f"{DMCA_QUESTION} Who signed it?"
    assert any(n.startswith("follow-up question") for n in audit["notes"])
    assert all(c["doc_name"] == "dmca.pdf" for c in r.choices[0].message.model_extra["citations"])


def test_bad_requests_are_400_in_openai_shape_and_logged(server, client):
    """No user message last, an image part, n=2, and a body that fails validation: 400
    invalid_request_error naming the problem (never FastAPI's 422 list); each refusal has a row.

    Fails if a non-text part is dropped silently or validation errors escape as 422."""
    app, _ = server
    before = len(rows(app, error_kind="validation_error"))
    cases = [
        ([{"role": "user", "content": DMCA_QUESTION}, {"role": "assistant", "content": "ok"}], {}, "user"),
        (
            [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}],
            {},
            "only text content",
        ),
        ([{"role": "user", "content": DMCA_QUESTION}], {"n": 2}, "n must be 1"),
        ([], {}, "messages"),
        ([{"role": "user", "content": "bad \x00 byte"}], {}, "control character"),
        ([{"role": "user", "content": DMCA_QUESTION}, {"role": "user", "content": " \n "}], {}, "empty"),
    ]
    for messages, extra, words in cases:
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model="ragaudit", messages=messages, **extra)
        assert e.value.status_code == 400 and e.value.type == "invalid_request_error"
        assert words in e.value.message, e.value.message
    assert len(rows(app, error_kind="validation_error")) - before == len(cases)


def test_key_rules_apply_to_the_door(server):
    """With keys set and reads requiring one: no key or a wrong key is 401 (AuthenticationError,
    code invalid_api_key) on /v1/models and /v1/chat/completions; the key works as Bearer (the
    SDK's way) and as X-API-Key. With reads open, /v1/models is open and an answer still needs
    the key (/query's rule for a route that can call a paid model).

    Fails if the door is mounted outside the key dependencies /query uses."""
    _, base = server
    with openai.OpenAI(base_url=f"{base}/v1", api_key="wrong-key", max_retries=0) as bad:
        with pytest.raises(openai.AuthenticationError) as e:
            bad.models.list()
        assert e.value.code == "invalid_api_key" and e.value.type == "invalid_request_error"
        with pytest.raises(openai.AuthenticationError):
            bad.chat.completions.create(model="ragaudit", messages=[{"role": "user", "content": DMCA_QUESTION}])
    body = {"model": "ragaudit", "messages": [{"role": "user", "content": DMCA_QUESTION}]}
    none = httpx.post(f"{base}/v1/chat/completions", json=body, timeout=30)
    assert none.status_code == 401 and none.json()["error"]["code"] == "invalid_api_key"
    ok = httpx.get(f"{base}/v1/models", headers={"X-API-Key": KEY})
    assert ok.status_code == 200 and ok.json()["object"] == "list"
    assert KEY not in httpx.get(f"{base}/v1/models", headers={"X-API-Key": "nope"}).text
    # reads open: the model list needs no key, an answer (a possibly paid model call) still does
    app = server[0]
    closed = app.state.settings
    app.state.settings = closed.model_copy(update={"read_requires_api_key": False})
    try:
        assert httpx.get(f"{base}/v1/models").status_code == 200
        paid = httpx.post(f"{base}/v1/chat/completions", json=body, timeout=30)
        assert paid.status_code == 401 and paid.json()["error"]["code"] == "invalid_api_key"
    finally:
        app.state.settings = closed

"""OpenAI-compatible chat door: ``POST /v1/chat/completions`` and ``GET /v1/models``.

Another door to the same service as ``/query``: every answer is ``QueryService.ask`` (or
``QueryService.stream`` with ``stream: true``), so the telemetry row (endpoint ``chat`` /
``chat_stream``), the answer cache, the scope enforcement, the citation audit and the trace are
those of ``/query``; the API-key rules are ``/query``'s: ``/v1/chat/completions`` can call a paid
model (``RequirePaidKey``: a key whenever keys are set), ``/v1/models`` is a read
(``RequireReadKey``).

Model names choose the knowledge base and the retrieval mode: ``ragaudit`` (every knowledge base,
hybrid), ``ragaudit:KB`` (one knowledge base, hybrid), ``ragaudit:KB:MODE`` (MODE = vector |
bm25 | hybrid | hybrid_rerank, the last only with a reranker). ``GET /v1/models`` lists the names
that exist; any other name is ``404 model_not_found``.

The question is the last user message; earlier user turns only resolve a follow-up
(``ragaudit.answer.conversation``); assistant, system and tool turns are not searched. The scope
(same fields as ``/query``: ``doc_name``, ``doc_names``, ``document_ids``, ``page_min``,
``page_max``, ``strategy``, ``top_k``) comes from top-level body fields (the OpenAI SDK's
``extra_body``) or from ``metadata`` (strings: lists as JSON arrays or comma-separated, numbers as
digits); a field given in both with different values is refused. The other parameters of OpenAI's
request (``OPENAI_PARAMS``: ``temperature``, ``max_tokens``, ...) are accepted and not used: the
server's settings decide; ``n`` > 1 and ``tools`` are refused (one cited answer from the
documents, no tool calls). A top-level field that is neither is refused (400
``unknown_parameter`` naming it): a misspelt scope field (``page_start``) would otherwise widen the
search without a word.

Reply: ``choices[0].message.content`` is the answer with its ``[n]`` markers;
``choices[0].message`` also carries ``citations`` (the objects of ``/query``: ``n``, document,
page(s), ``quote``, ``verified``, ``supports``, ``reason``) and ``label``; ``usage`` has the tokens
and ``cost_usd``; ``ragaudit`` holds the whole ``/query`` answer JSON (retrieved chunks with
ranks, timings, notes, ``query_id``, ``trace_id``). Streamed, the chunks carry the tokens, then a
last chunk with ``finish_reason: stop`` whose ``delta`` has ``citations`` and ``label``, then (with
``stream_options.include_usage``) a chunk with ``usage`` and no choices, then ``data: [DONE]``.
Errors are OpenAI's shape (``api.errors``).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.concurrency import iterate_in_threadpool, run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy import select
from sse_starlette.sse import EventSourceResponse

from ragaudit.answer.conversation import conversation_question
from ragaudit.platform.db import Document
from ragaudit.platform.llmcall import Cancellation, generation_failed
from ragaudit.platform.telemetry import TelemetryWriter, clip_text
from ragaudit.services import Services
from ragaudit.types import Mode, Scope

from ..deps import QueryServiceDep, RequirePaidKey, RequireReadKey, ServicesDep, TelemetryDep
from ..errors import openai_error, validation_message
from ..schemas import ChatCompletionOut, ModelListOut, ModelOut, OpenAIErrorOut, QueryIn
from .query import answer_stream, close_generator_soon

router = APIRouter(prefix="/v1", tags=["openai"], dependencies=[RequireReadKey])

MODEL_PREFIX = "ragaudit"
SCOPE_FIELDS = ("doc_name", "doc_names", "document_ids", "page_min", "page_max", "strategy", "top_k")
#: the parameters of OpenAI's chat-completions request other than those ``ChatCompletionIn``
#: declares: accepted and not used (the server's settings decide how answers are generated)
OPENAI_PARAMS = frozenset(
    {
        "audio",
        "frequency_penalty",
        "function_call",
        "functions",
        "logit_bias",
        "logprobs",
        "max_completion_tokens",
        "max_tokens",
        "modalities",
        "moderation",
        "parallel_tool_calls",
        "prediction",
        "presence_penalty",
        "prompt_cache_key",
        "prompt_cache_options",
        "prompt_cache_retention",
        "reasoning_effort",
        "response_format",
        "safety_identifier",
        "seed",
        "service_tier",
        "stop",
        "store",
        "temperature",
        "tool_choice",
        "top_logprobs",
        "top_p",
        "user",
        "verbosity",
        "web_search_options",
    }
)
#: fields of ``/query`` that this door takes from elsewhere (the model name, the last user message)
_NOT_HERE = ("knowledge_base", "mode", "question")
_LIST_FIELDS = {"doc_names", "document_ids"}
_INT_FIELDS = {"page_min", "page_max", "top_k"}


class ChatMessageIn(BaseModel):
    """One message of the conversation (``content``: a string or a list of ``{"type": "text",
    "text": ...}`` parts)."""

    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list[dict[str, Any]] | None = None


class StreamOptionsIn(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = False


class ChatCompletionIn(BaseModel):
    """OpenAI's chat completion request, with ``/query``'s scope fields at the top level. Other
    fields of OpenAI's request (``OPENAI_PARAMS``: temperature, max_tokens, user, ...) are accepted
    and not used; any other field is refused by ``parse_request`` (400 ``unknown_parameter``)."""

    model_config = ConfigDict(extra="allow")
    model: str = Field(description="ragaudit | ragaudit:KB | ragaudit:KB:MODE (GET /v1/models lists them)")
    messages: list[ChatMessageIn] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptionsIn | None = None
    metadata: dict[str, str] | None = Field(
        default=None, description="Scope fields as strings (doc_names as a JSON array or comma-separated)"
    )
    n: int | None = Field(default=None, description="1 (one cited answer)")
    tools: list[dict[str, Any]] | None = None
    doc_name: str | None = None
    doc_names: list[str] | None = None
    document_ids: list[str] | None = None
    page_min: int | None = None
    page_max: int | None = None
    strategy: str | None = None
    top_k: int | None = None


@dataclass
class ChatRequest:
    """A validated chat request: what ``QueryService`` is asked."""

    model: str
    question: str
    scope: Scope
    top_k: int | None
    mode: Mode
    note: str | None  # the follow-up note (conversation), shown with the answer's notes


def knowledge_bases(svc: Services) -> list[str]:
    """Names of the knowledge bases that hold at least one document, sorted."""
    with svc.sessions() as s:
        return sorted(s.scalars(select(Document.knowledge_base).distinct()))


def available_modes(svc: Services) -> list[Mode]:
    """Retrieval modes this server can run (``Settings.available_modes``, as ``GET /modes``:
    ``hybrid_rerank`` only with a reranker)."""
    return [Mode(m) for m in svc.settings.available_modes]


def model_names(svc: Services) -> list[str]:
    """Every model name ``/v1/chat/completions`` accepts, as ``/v1/models`` lists them: ``ragaudit``,
    then per knowledge base ``ragaudit:KB`` (hybrid) and ``ragaudit:KB:MODE`` for every mode this
    server runs (``ragaudit:KB:hybrid`` included: the same as ``ragaudit:KB``)."""
    names = [MODEL_PREFIX]
    modes = available_modes(svc)
    for kb in knowledge_bases(svc):
        names.append(f"{MODEL_PREFIX}:{kb}")
        names.extend(f"{MODEL_PREFIX}:{kb}:{m.value}" for m in modes)
    return names


def resolve_model(svc: Services, model: str) -> tuple[str | None, Mode]:
    """``(knowledge base or None for all, mode)`` of a model name; raises the 404
    ``model_not_found`` error for a name that does not exist (``GET /v1/models``)."""
    not_found = openai_error(
        404,
        f"The model {model!r} does not exist: use 'ragaudit', 'ragaudit:KB' or 'ragaudit:KB:MODE' "
        "(GET /v1/models lists them)",
        code="model_not_found",
        param="model",
    )
    if model == MODEL_PREFIX:
        return None, Mode.hybrid
    if not model.startswith(MODEL_PREFIX + ":"):
        raise not_found
    rest = model[len(MODEL_PREFIX) + 1 :]
    kb, mode = rest, Mode.hybrid
    head, sep, tail = rest.rpartition(":")
    if sep and tail in {m.value for m in Mode}:
        kb, mode = head, Mode(tail)
    if not kb or kb not in knowledge_bases(svc) or mode not in available_modes(svc):
        raise not_found
    return kb, mode


def _message_text(m: ChatMessageIn, i: int) -> str:
    """The text of a message; a part that is not text is refused (nothing is dropped)."""
    if m.content is None:
        return ""
    if isinstance(m.content, str):
        return m.content
    texts = []
    for part in m.content:
        if part.get("type") != "text" or not isinstance(part.get("text"), str):
            raise openai_error(
                400,
                f"messages[{i}]: only text content is supported (got a {part.get('type')!r} part)",
                code="unsupported_content",
                param=f"messages[{i}].content",
            )
        texts.append(part["text"])
    return "\n".join(texts)


def _metadata_value(name: str, raw: str) -> Any:
    """A scope field given in ``metadata`` (strings only) as its typed value."""
    raw = raw.strip()
    if name in _LIST_FIELDS:
        if raw.startswith("["):
            try:
                value = json.loads(raw)
            except json.JSONDecodeError:
                raise openai_error(400, f"metadata.{name}: not a JSON array", param=f"metadata.{name}") from None
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise openai_error(400, f"metadata.{name}: a JSON array of strings", param=f"metadata.{name}")
            return value
        return [v.strip() for v in raw.split(",") if v.strip()]
    if name in _INT_FIELDS:
        if not raw.isdigit():
            raise openai_error(400, f"metadata.{name}: a whole number, got {raw!r}", param=f"metadata.{name}")
        return int(raw)
    return raw or None


def scope_fields(body: ChatCompletionIn) -> dict[str, Any]:
    """The scope fields of the request, from ``metadata`` and the top-level body fields; a field
    given in both with different values is refused (400)."""
    out: dict[str, Any] = {}
    for name, raw in (body.metadata or {}).items():
        if name in SCOPE_FIELDS:
            out[name] = _metadata_value(name, raw)
    for name in SCOPE_FIELDS:
        value = getattr(body, name)
        if value is None:
            continue
        if name in out and out[name] != value:
            raise openai_error(
                400,
                f"{name} is given in metadata ({out[name]!r}) and in the body ({value!r}) with different values",
                param=name,
            )
        out[name] = value
    return out


def parse_request(svc: Services, body: ChatCompletionIn) -> ChatRequest:
    """Validate a chat request: model, messages, scope. Raises the OpenAI-shaped ``HTTPException``
    (400 invalid_request_error, 404 model_not_found)."""
    if body.n not in (None, 1):
        raise openai_error(400, "n must be 1: ragaudit returns one cited answer", param="n")
    if body.tools:
        raise openai_error(
            400, "tools are not supported: ragaudit answers from its documents, with citations", param="tools"
        )
    extra = body.model_extra or {}
    for name in _NOT_HERE:
        if name in extra:
            raise openai_error(
                400,
                f"{name} is not a field of this door: the model name chooses the knowledge base and mode "
                "('ragaudit:KB:MODE') and the last user message is the question",
                param=name,
            )
    unknown = [clip_text(name, 100) for name in extra if name not in OPENAI_PARAMS]
    if unknown:
        shown = ", ".join(unknown[:10]) + (f" (and {len(unknown) - 10} more)" if len(unknown) > 10 else "")
        raise openai_error(
            400,
            f"Unrecognized request argument supplied: {shown}. Besides OpenAI's chat-completions "
            f"parameters, the scope fields are {', '.join(SCOPE_FIELDS)} (at the top level or in metadata)",
            code="unknown_parameter",
            param=unknown[0],
        )
    kb, mode = resolve_model(svc, body.model)
    users = [_message_text(m, i) for i, m in enumerate(body.messages) if m.role == "user"]
    for i, m in enumerate(body.messages):
        if m.role != "user":
            _message_text(m, i)  # every message is text (an image sent to another role is refused too)
    if not body.messages or body.messages[-1].role != "user":
        raise openai_error(400, "the last message must be the user's question (role 'user')", param="messages")
    fields = scope_fields(body)
    try:
        cq = conversation_question(users)
        q = QueryIn(question=cq.question, knowledge_base=kb, mode=mode, **fields)
    except ValidationError as e:
        msg, param = validation_message(e.errors(include_url=False))
        raise openai_error(400, msg, param=param) from None
    except ValueError as e:
        raise openai_error(400, str(e), param="messages") from None
    return ChatRequest(body.model, q.question, q.to_scope(), q.top_k, q.mode, cq.note)


def _usage(out_usage: dict[str, Any]) -> dict[str, Any]:
    p, c = int(out_usage.get("prompt_tokens") or 0), int(out_usage.get("completion_tokens") or 0)
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c, "cost_usd": out_usage.get("cost_usd")}


def completion_json(req: ChatRequest, out: dict[str, Any]) -> dict[str, Any]:
    """The ``chat.completion`` object of an answer JSON ``out`` (``QueryService.ask``)."""
    return {
        "id": f"chatcmpl-{out['query_id']}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": req.model,
        "system_fingerprint": None,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": out["answer"],
                    "refusal": None,
                    "citations": out["citations"],
                    "label": out["label"],
                },
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": _usage(out["usage"]),
        "ragaudit": out,
    }


def _record_refused(telemetry: TelemetryWriter, endpoint: str, body: ChatCompletionIn, kind: str) -> None:
    """The query_logs row of a chat request refused before it was asked (bad model, bad message).
    Its mode is the one the model name names (``ragaudit:KB:MODE``; hybrid when it names none), and
    ``invalid`` for a model that does not exist: the mode labels /metrics groups and Prometheus
    series, and an unknown model runs in no mode."""
    last = body.messages[-1].content if body.messages else ""
    parts = body.model.split(":") if isinstance(body.model, str) else []
    mode = parts[2] if len(parts) == 3 and parts[2] in {m.value for m in Mode} else Mode.hybrid.value
    telemetry.record(
        endpoint=endpoint,
        question=last if isinstance(last, str) else "",
        mode="invalid" if kind == "model_not_found" else mode,
        top_k=body.top_k if isinstance(body.top_k, int) and 0 < body.top_k <= 100 else 5,
        error_kind=kind,
    )


_ERRORS = {401: {"model": OpenAIErrorOut, "description": "missing or invalid API key"}}


@router.get("/models", response_model=ModelListOut, responses=_ERRORS)
def list_models(svc: ServicesDep) -> dict[str, Any]:
    """The model names ``/v1/chat/completions`` accepts (one per knowledge base and mode)."""
    return {"object": "list", "data": [_model_obj(n) for n in model_names(svc)]}


@router.get("/models/{model:path}", response_model=ModelOut, responses={**_ERRORS, 404: {"model": OpenAIErrorOut}})
def get_model(model: str, svc: ServicesDep) -> dict[str, Any]:
    """One model; ``404 model_not_found`` when it does not exist."""
    resolve_model(svc, model)
    return _model_obj(model)


def _model_obj(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 0, "owned_by": "ragaudit"}


@router.post(
    "/chat/completions",
    response_model=None,
    dependencies=[RequirePaidKey],
    responses={
        200: {
            "model": ChatCompletionOut,
            "content": {"text/event-stream": {}},
            "description": "chat.completion, or with stream=true chat.completion.chunk events then data: [DONE]",
        },
        400: {"model": OpenAIErrorOut},
        404: {"model": OpenAIErrorOut, "description": "model_not_found"},
        502: {"model": OpenAIErrorOut, "description": "the LLM failed"},
        **_ERRORS,
    },
)
async def chat_completions(
    body: ChatCompletionIn, request: Request, qs: QueryServiceDep, svc: ServicesDep, telemetry: TelemetryDep
):
    """Answer the conversation's last user message from the documents, with citations
    (OpenAI's chat completion format; see the module docstring)."""
    endpoint = "chat_stream" if body.stream else "chat"
    try:
        req = await run_in_threadpool(parse_request, svc, body)
    except HTTPException as e:
        code = e.detail.get("code") if isinstance(e.detail, dict) else None
        _record_refused(
            telemetry, endpoint, body, "model_not_found" if code == "model_not_found" else "validation_error"
        )
        raise
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        return await _stream(req, qs, include_usage)
    try:
        out = await run_in_threadpool(lambda: qs.ask(req.question, req.scope, req.top_k, req.mode, endpoint="chat"))
    except ValueError as e:
        raise openai_error(400, str(e)) from None
    except Exception as e:  # LLM/API failure: the kind only (provider messages can echo request data)
        raise openai_error(502, generation_failed(e), code="upstream_error") from None
    if req.note:
        out["notes"] = [req.note, *out.get("notes", [])]
    return completion_json(req, out)


async def _stream(req: ChatRequest, qs, include_usage: bool) -> EventSourceResponse:
    """``chat.completion.chunk`` events over Server-Sent Events, ending with ``data: [DONE]``."""
    cancel = Cancellation()
    try:
        events = await run_in_threadpool(
            lambda: qs.stream(req.question, req.scope, req.top_k, req.mode, cancel=cancel, endpoint="chat_stream")
        )
        first = await run_in_threadpool(next, events)  # retrieval errors are HTTP errors here
    except ValueError as e:
        raise openai_error(400, str(e)) from None
    created = int(time.time())
    sources = first[1]
    cid = f"chatcmpl-{sources['query_id']}"

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, str]:
        obj = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": req.model,
            "system_fingerprint": None,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            **extra,
        }
        if include_usage:
            obj["usage"] = None  # OpenAI: null on every chunk but the last
        return {"data": json.dumps(obj, ensure_ascii=False)}

    state = {"finished": False, "closed": False}

    def stop_unfinished() -> None:
        """The client left before the end: stop upstream and close ``events`` (its cleanup writes
        the row, ``ClientDisconnected``); once, from ``gen``'s ``finally`` or, when ``gen`` never
        started, as the response's background task (as ``/query/stream``)."""
        if state["finished"] or state["closed"]:
            return
        state["closed"] = True
        cancel.cancel()
        close_generator_soon(events)

    async def gen():
        try:
            notes = ([req.note] if req.note else []) + list(sources.get("notes", []))
            head = {
                "query_id": sources["query_id"],
                "question": req.question,
                "retrieved": sources["sources"],
                "notes": notes,
                "trace_id": sources.get("trace_id"),
                "trace_url": sources.get("trace_url"),
            }
            yield chunk({"role": "assistant", "content": ""}, ragaudit=head)
            async for name, data in iterate_in_threadpool(events):
                if name == "token":
                    yield chunk({"content": data["text"]})
                elif name == "done":
                    yield chunk(
                        {"citations": data["citations"], "label": data["label"]},
                        "stop",
                        ragaudit={k: v for k, v in data.items() if k not in ("answer", "citations")},
                    )
                    if include_usage:
                        yield {
                            "data": json.dumps(
                                {
                                    "id": cid,
                                    "object": "chat.completion.chunk",
                                    "created": created,
                                    "model": req.model,
                                    "system_fingerprint": None,
                                    "choices": [],
                                    "usage": _usage(data["usage"]),
                                }
                            )
                        }
                elif name == "error":
                    err = {
                        "message": f"answer generation failed ({data.get('detail') or data.get('error')})",
                        "type": "server_error",
                        "code": "upstream_error",
                        "param": None,
                    }
                    yield {"data": json.dumps({"error": err})}
            yield {"data": "[DONE]"}
            state["finished"] = True
        finally:
            stop_unfinished()

    return answer_stream(gen(), cancel, stop_unfinished)

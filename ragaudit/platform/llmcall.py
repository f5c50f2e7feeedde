"""Bounded, cancellable and priced LLM calls (litellm), shared by the answerer, judge and gold pairs.

* ``load_litellm()``: litellm, imported on first use (a heavy import) and configured once:
  ``suppress_debug_info`` keeps its "Provider List" hints (printed on stdout when it looks up a
  model it cannot map) out of stdout, so ``ragaudit ask --json`` prints JSON alone. Every module
  calling litellm gets it from here.
* ``litellm_kwargs(settings)``: the keyword arguments every ``litellm.completion`` call gets:
  ``timeout`` (s, per HTTP attempt) and ``max_retries`` (``llm_retries``, default 0: one
  upstream attempt; the OpenAI SDK under litellm otherwise retries twice, so a stalled provider
  answered after 3x the timeout).
* ``call_with_deadline(fn, seconds)``: a hard wall-clock bound on a blocking call. The HTTP read
  timeout only bounds the gap between two bytes; a provider that trickles its body slowly would
  still hold the request. Raises ``LLMDeadlineExceeded`` (a ``TimeoutError``) at the deadline.
* ``Cancellation`` + ``abort_stream``: when the client of ``/query/stream`` goes away, the
  upstream streaming request is closed at once (its socket is shut down, which wakes the
  thread blocked reading it), instead of running to its end.
* ``completion_cost_or_none(resp)``: the USD cost from litellm's price map, or ``None`` when the
  model has no price there (unknown is not free: never reported as 0); ``text_cost_or_none``
  the same for a prompt and a completion text (a stream cut short has no usage of its own).
"""

from __future__ import annotations

import logging
import re
import socket
import threading
from typing import Any, Callable, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")

#: ``query_logs.error_kind`` of a streamed request whose client disconnected before the end
CLIENT_DISCONNECTED = "ClientDisconnected"


class LLMDeadlineExceeded(TimeoutError):
    """The LLM call did not finish within its wall-clock deadline."""


class LLMCancelled(ConnectionAbortedError):
    """The client went away while the LLM call was still waiting for its first reply."""


class LLMEmptyStream(ConnectionError):
    """The provider's streamed reply ended without one event that could be read (a body that is not
    Server-Sent Events, or one closed at once): there is no answer, not an empty one."""


class LLMEmptyReply(ConnectionError):
    """The model's reply held no text: there is no answer, and it is not a refusal either.
    ``finish_reason`` is the provider's word for why it stopped (``length``: the output limit was
    reached first, as when a reasoning model spends it all on reasoning; ``content_filter``), or
    ``None``; ``usage`` is ``(prompt_tokens, completion_tokens, cost_usd)``, what the reply still
    cost."""

    def __init__(self, model: str, finish_reason: Any = None, usage: tuple[int, int, float | None] | None = None):
        reason = str(finish_reason) if finish_reason else ""
        # the provider's value, kept only when it is a word: never echo free text of a reply
        self.finish_reason = reason if re.fullmatch(r"[A-Za-z_]{1,32}", reason) else None
        self.usage = usage
        super().__init__(f"{model} replied with no text (finish_reason {self.finish_reason})")


# why an LLM call failed, by exception class (litellm's, the OpenAI SDK's, ours), said without the
# provider's message: it can echo request data (the prompt's text, a masked key)
FAILURE_REASONS = {
    "LLMDeadlineExceeded": "the LLM did not answer within RAGAUDIT_LLM_TIMEOUT_S x (1 + RAGAUDIT_LLM_RETRIES)",
    "Timeout": "the LLM did not answer within RAGAUDIT_LLM_TIMEOUT_S",
    "APITimeoutError": "the LLM did not answer within RAGAUDIT_LLM_TIMEOUT_S",
    "AuthenticationError": "the LLM provider refused the API key (RAGAUDIT_LLM_API_KEY)",
    "PermissionDeniedError": "the LLM provider denied access to the model",
    "NotFoundError": "the LLM provider does not serve the model (RAGAUDIT_LLM_MODEL)",
    "RateLimitError": "the LLM provider's rate limit or quota was reached",
    "ContextWindowExceededError": "the prompt is longer than the model's context window (lower top_k)",
    "ContentPolicyViolationError": "the LLM provider's content policy refused the request",
    "BadRequestError": "the LLM provider refused the request",
    "APIConnectionError": "the LLM could not be reached (RAGAUDIT_LLM_API_BASE)",
    "ServiceUnavailableError": "the LLM provider is unavailable",
    "InternalServerError": "the LLM provider failed or could not be reached (RAGAUDIT_LLM_API_BASE; /health says which)",
    "APIError": "the LLM provider's reply could not be read",
    "LLMEmptyStream": "the LLM provider's stream held no readable event (RAGAUDIT_LLM_API_BASE: is it an OpenAI-compatible server?)",
    "LLMEmptyReply": "the LLM replied with no text",
}

# what a finish_reason of an empty reply tells the operator
_EMPTY_FINISH = {
    "length": "the output token limit was reached before any text (a reasoning model can spend it all on reasoning)",
    "content_filter": "the provider's content filter withheld the reply",
}


def failure_reason(e: BaseException) -> str:
    """``"<ExceptionClass>: <why>"`` for an LLM call that raised ``e``: the first class in its MRO
    that ``FAILURE_REASONS`` names, else the class name alone; for ``LLMEmptyReply`` also its
    ``finish_reason`` and what it means. Never the provider's message."""
    why = next((FAILURE_REASONS[c.__name__] for c in type(e).__mro__ if c.__name__ in FAILURE_REASONS), None)
    finish = getattr(e, "finish_reason", None) if isinstance(e, LLMEmptyReply) else None
    if why and finish:
        why += (
            f" (finish_reason {finish}: {_EMPTY_FINISH[finish]})"
            if finish in _EMPTY_FINISH
            else f" (finish_reason {finish})"
        )
    return f"{type(e).__name__}: {why}" if why else type(e).__name__


#: modules whose exceptions are an LLM provider's (their messages can echo request data)
_PROVIDER_MODULES = ("litellm", "openai", "httpx", "httpcore")


def is_llm_failure(e: BaseException) -> bool:
    """True when ``e`` is the failure of an LLM call: a class ``FAILURE_REASONS`` names (ours,
    litellm's, the OpenAI SDK's) or any exception raised by litellm, the OpenAI SDK or its HTTP
    client. Its message is then the provider's: say ``failure_reason(e)`` instead."""
    mro = type(e).__mro__
    return any(c.__name__ in FAILURE_REASONS for c in mro) or any(
        c.__module__.split(".")[0] in _PROVIDER_MODULES for c in mro
    )


def generation_failed(e: BaseException) -> str:
    """What an LLM failure is called wherever it is shown (the 502 of /query, a failed evaluation
    run): ``"answer generation failed (<failure_reason>)"``, never the provider's message."""
    return f"answer generation failed ({failure_reason(e)})"


def load_litellm() -> Any:
    """The ``litellm`` module, configured: no debug banners on stdout (``suppress_debug_info``)."""
    import litellm  # deferred: a heavy import, needed only with a model

    litellm.suppress_debug_info = True
    return litellm


def litellm_kwargs(settings: Any) -> dict[str, Any]:
    """``{"timeout": llm_timeout_s, "max_retries": llm_retries}`` for ``litellm.completion``."""
    return {"timeout": settings.llm_timeout_s, "max_retries": settings.llm_retries}


def deadline_for(timeout_s: float | None, max_retries: int | None) -> float | None:
    """Wall-clock bound (s) of one call: ``timeout_s`` per attempt x attempts, plus 0.5 s of
    back-off per retry; ``None`` when no timeout is set."""
    if not timeout_s:
        return None
    retries = int(max_retries or 0)
    return float(timeout_s) * (retries + 1) + 0.5 * retries


def call_with_deadline(fn: Callable[[], T], seconds: float | None) -> T:
    """Run ``fn()`` and return its result, or raise ``LLMDeadlineExceeded`` after ``seconds``.

    ``fn`` runs in a daemon thread; on the deadline the caller gets its answer (an error) at once
    and the thread is left to end on its own HTTP timeout. Exceptions of ``fn`` propagate.
    ``seconds=None`` runs ``fn`` inline.
    """
    if seconds is None:
        return fn()
    box, done = _in_thread(fn, "ragaudit-llm-call")
    if not done.wait(seconds):
        raise LLMDeadlineExceeded(f"LLM call exceeded {seconds:.1f} s")
    return _outcome(box)


def _in_thread(fn: Callable[[], T], name: str, then: Callable[[T], None] | None = None):
    """Start ``fn()`` in a daemon thread; returns ``(box, done)``: ``done`` is set when it ends,
    ``box`` then holds its ``value`` or its ``error``; ``then(value)`` runs in the thread after."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # handed to the caller
            box["error"] = e
        finally:
            done.set()
            if then is not None and "value" in box:
                then(box["value"])

    threading.Thread(target=run, name=name, daemon=True).start()
    return box, done


def _outcome(box: dict[str, Any]) -> Any:
    if "error" in box:
        raise box["error"]
    return box["value"]


def open_stream(fn: Callable[[], T], cancel: "Cancellation | None") -> T:
    """``fn()`` (a call that opens a litellm stream: it returns once the provider's reply starts),
    given up when ``cancel`` fires first: the caller gets ``LLMCancelled`` at once (within 50 ms),
    and the stream, once it opens, is shut down (``abort_stream``) without being read.

    ``fn`` runs in a daemon thread; its exceptions propagate. ``cancel=None`` runs it inline."""
    if cancel is None:
        return fn()
    # the stream, once open, is shut down when ``cancel`` fires (at once if it already has)
    box, done = _in_thread(fn, "ragaudit-llm-open", lambda stream: cancel.on_cancel(lambda: abort_stream(stream)))
    while not done.wait(0.05):
        if cancel.cancelled:
            raise LLMCancelled("the client went away before the LLM replied")
    return _outcome(box)


class Cancellation:
    """A one-shot cancel signal with callbacks (thread-safe).

    ``on_cancel(fn)`` registers a closer (called at once if already cancelled); ``cancel()`` sets
    the flag and runs every closer once; closer errors are logged by type and swallowed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._closers: list[Callable[[], None]] = []
        self._event = threading.Event()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def on_cancel(self, fn: Callable[[], None]) -> None:
        with self._lock:
            if not self._event.is_set():
                self._closers.append(fn)
                return
        self._run(fn)

    def cancel(self) -> None:
        with self._lock:
            if self._event.is_set():
                return
            self._event.set()
            closers, self._closers = self._closers, []
        for fn in closers:
            self._run(fn)

    @staticmethod
    def _run(fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception as e:
            log.warning("cancel callback failed: %s", type(e).__name__)


def _http_response(stream: Any) -> Any:
    """The ``httpx.Response`` under a litellm stream wrapper (OpenAI-compatible providers), or None."""
    for obj in (stream, getattr(stream, "completion_stream", None)):
        resp = getattr(obj, "response", None)
        if resp is not None and hasattr(resp, "extensions"):
            return resp
    return None


def abort_stream(stream: Any) -> bool:
    """Close the connection of a litellm streaming response from any thread.

    Shuts the socket down (``SHUT_RDWR``), which also wakes a thread blocked reading it (closing
    the file descriptor alone does not on Linux); that thread then gets a read error. Returns
    True when a socket was found and shut down."""
    resp = _http_response(stream)
    if resp is None:
        return False
    ns = resp.extensions.get("network_stream")
    sock = ns.get_extra_info("socket") if ns is not None else None
    if not isinstance(sock, socket.socket):
        return False
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed
        pass
    return True


def completion_cost_or_none(resp: Any) -> float | None:
    """USD cost of a litellm response from litellm's price map; ``None`` when the model is not in
    it (a local or self-hosted model, or a new name): the cost is unknown, not zero."""
    litellm = load_litellm()

    try:
        return float(litellm.completion_cost(completion_response=resp))
    except Exception as e:  # litellm raises for unmapped models (NotFoundError / ModelNotMappedError)
        log.info("no price for model %s (%s): cost recorded as unknown", getattr(resp, "model", "?"), type(e).__name__)
        return None


def text_cost_or_none(model: str, messages: list[dict[str, Any]], completion: str) -> float | None:
    """USD cost of sending ``messages`` to ``model`` and receiving ``completion``, tokens counted by
    ``litellm.completion_cost`` with the model's tokenizer; ``None`` when the model has no price."""
    litellm = load_litellm()

    try:
        return float(litellm.completion_cost(model=model, messages=messages, completion=completion))
    except Exception as e:  # litellm raises for unmapped models
        log.info("no price for model %s (%s): cost recorded as unknown", model, type(e).__name__)
        return None

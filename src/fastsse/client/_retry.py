"""When a request is tried again, and after how long: the rules the engine applies between attempts.

A request is retried only while nothing of its answer has reached the caller, so no text or tool
argument is ever delivered twice:

- **before the first byte** of an event stream: a connection refused or reset, a timeout, a cut
  before the status line or before any of the body; an HTTP 408, 409, 429 or 5xx. The server's
  ``x-should-retry: true|false`` overrides the status rule, as the openai and anthropic SDKs read it.
- **behind the first-chunk gate** (``first_chunk_gate=True``): the stream is held until its first
  content-bearing event (text, reasoning, a refusal, a tool call, a finish) or its end; an error
  event before it (an OpenAI ``{"error": ...}`` chunk, Anthropic's ``overloaded_error``, a Responses
  ``response.failed`` or ``error``) or a failure of the transfer is a failure of that attempt, and
  the held events are dropped with it. Once content is out, nothing is retried.

The wait: ``retry-after-ms``, else ``Retry-After`` (the result's ``retry_after``) when it is at
most ``MAX_RETRY_AFTER``; else exponential backoff with full jitter, a uniform draw below
``min(BACKOFF_CAP, BACKOFF_BASE * 2**n)`` for the n-th retry (0.5 s, 1 s, 2 s ... 8 s).
A move to a fallback upstream waits for nothing; a request's ``timeout`` bounds every attempt
and every wait together.

An EventSource (``client/_source.py``) reconnects by the same status and curl rules
(``retryable_status``, ``RETRY_CODES``), after ``reconnect_wait``: the server's ``retry:`` (WHATWG's
reconnection time), with a floor, the caller's cap and backoff once connections deliver nothing.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, Final

import orjson

from .. import _backend
from .._errors import HTTPStatusError, TransportError
from ..apis import APIS

__all__ = ["Gate", "backoff", "reconnect_wait", "retryable", "wait_for"]

BACKOFF_BASE: Final = 0.5
BACKOFF_CAP: Final = 8.0
# A Retry-After longer than this is not waited for (the SDKs' 60 s): the request fails with it.
MAX_RETRY_AFTER: Final = 60.0

RETRY_STATUSES: Final = frozenset({408, 409, 429})
# curl's failures that say nothing about the request itself: it may go through on another try.
RETRY_CODES: Final = frozenset(
    {
        6,  # could not resolve host (a resolver's hiccup; the SDKs retry any connection error)
        7,  # could not connect
        16,  # HTTP/2 framing
        18,  # the answer ended early (a cut)
        28,  # timed out (an attempt's own timeout; the call's deadline is checked apart)
        52,  # an empty reply
        55,  # sending failed
        56,  # receiving failed (a reset)
        92,  # an HTTP/2 stream error
    }
)


def retryable_status(status: int, should_retry: str | None) -> bool:
    """Whether an answer of ``status`` is worth another attempt; ``should_retry`` is the server's
    ``x-should-retry`` header, which decides when it says ``true`` or ``false``."""
    if should_retry is not None:
        word = should_retry.strip().lower()
        if word == "true":
            return True
        if word == "false":
            return False
    return status in RETRY_STATUSES or 500 <= status <= 599


def retryable(outcome: Any, headers: dict[str, str]) -> bool:
    """Whether an attempt's ``outcome`` (a result dict, or the exception it raised) may be tried
    again, judged on what the server said (``headers``) and what broke; whether anything reached
    the caller is the engine's to know."""
    if isinstance(outcome, TransportError):
        return outcome.code in RETRY_CODES
    if isinstance(outcome, dict):
        http = no_stream(outcome)
        if http is not None:
            return retryable_status(http["status"], headers.get("x-should-retry"))
        verdict = outcome.get("verdict")
        return isinstance(verdict, dict) and bool(verdict.get("error"))  # an in-band error (the gate)
    return False


def no_stream(result: dict[str, Any]) -> dict[str, Any] | None:
    """A result's ``http`` when the answer was no stream (its ``error`` is set), else None."""
    http = result.get("http")
    return http if isinstance(http, dict) and http.get("error") is not None else None


def should_retry(outcome: Any, /) -> bool:
    """``should_retry(outcome) -> bool``: whether a failed request's ``outcome`` is one the
    resilience rules would try again (on the next upstream, or after a wait): a ``TransportError``
    of a retryable curl code (refused, reset, timed out, cut...), or an ``HTTPStatusError`` (or a
    result that was no stream) of 408, 409, 429 or 5xx, unless the server's ``x-should-retry``
    says otherwise. It says nothing of whether part of the answer already reached the caller:
    that is the caller's to know (never retry then)."""
    if isinstance(outcome, HTTPStatusError):
        return retryable_status(outcome.status, outcome.headers.get("x-should-retry"))
    return retryable(outcome, {})


def backoff(retry: int, rand: Callable[[], float] = random.random) -> float:
    """The wait before retry number ``retry`` (0 for the first) when the server named none:
    full jitter below ``min(BACKOFF_CAP, BACKOFF_BASE * 2**retry)``."""
    return rand() * min(BACKOFF_CAP, BACKOFF_BASE * 2.0 ** min(retry, 32))


def wait_for(
    retry: int, retry_after: float | None, rand: Callable[[], float] = random.random
) -> float | None:
    """Seconds to wait before retry number ``retry``: the server's ``retry_after`` when it is
    between 0 and ``MAX_RETRY_AFTER``, None when it asks for longer (give up), else ``backoff``."""
    if retry_after is not None:
        return retry_after if retry_after <= MAX_RETRY_AFTER else None
    return backoff(retry, rand)


# An EventSource's reconnection time when the server sent no ``retry:`` (WHATWG leaves it to the
# user agent; browsers take 3 to 5 s), and the least it waits whatever the server says: ``retry: 0``
# reconnects after 100 ms, not in a loop.
RECONNECT_DEFAULT: Final = 3.0
RECONNECT_FLOOR: Final = 0.1


def reconnect_wait(
    retry_ms: int | None,
    empty: int,
    cap: float,
    retry_after: float | None = None,
    rand: Callable[[], float] = random.random,
) -> float:
    """Seconds an EventSource waits before it reconnects, at most ``cap`` (``max_retry_delay``).

    ``retry_ms`` is the server's reconnection time (its last ``retry:``, ms; None: none sent, so
    ``RECONNECT_DEFAULT``), waited for as it is after a connection that delivered events, never
    less than ``RECONNECT_FLOOR``. ``empty`` counts the connections in a row that delivered none (a
    200 closed at once, a refusal, a 5xx): the wait is then drawn between half and all of the
    larger of that and ``BACKOFF_BASE * 2**(empty-1)`` (0.5 s, 1 s, 2 s ...; equal jitter: spread,
    yet never near zero, so an endless run of empty answers is a bounded rate). A 429's or 5xx's
    ``retry_after`` is waited for in full, up to ``cap``.
    """
    wait = max(RECONNECT_FLOOR, RECONNECT_DEFAULT if retry_ms is None else retry_ms / 1000)
    if empty:
        wait = min(cap, max(wait, BACKOFF_BASE * 2.0 ** min(empty - 1, 32)))
        wait -= rand() * wait / 2
    if retry_after is not None:
        wait = max(wait, retry_after)
    return min(cap, max(RECONNECT_FLOOR, wait))


# What counts as content, per API: the first such event opens the gate.
_CHAT_DELTA: Final = (
    "content",
    "reasoning_content",
    "reasoning",
    "refusal",
    "tool_calls",
    "function_call",
    "audio",
)
_RESPONSES_OPEN: Final = frozenset(
    {
        "response.output_text.delta",
        "response.refusal.delta",
        "response.function_call_arguments.delta",
        "response.mcp_call_arguments.delta",
        "response.custom_tool_call_input.delta",
        "response.reasoning_text.delta",
        "response.reasoning_summary_text.delta",
        "response.code_interpreter_call_code.delta",
        *APIS["responses"].whole,  # an answer's end opens the gate too
        "response.output_item.done",
    }
)
_MESSAGES_OPEN: Final = frozenset({"content_block_delta", "message_delta", *APIS["messages"].whole})


def _chat_content(chunk: Any) -> bool:
    choices = chunk.get("choices") if isinstance(chunk, dict) else None
    if not isinstance(choices, list):
        return False
    for choice in choices:
        if not isinstance(choice, dict):
            continue
        if choice.get("finish_reason"):
            return True
        delta = choice.get("delta")
        if isinstance(delta, dict) and any(delta.get(key) for key in _CHAT_DELTA):
            return True
    return False


def _responses_content(event: Any) -> bool:
    return isinstance(event, dict) and event.get("type") in _RESPONSES_OPEN


def _messages_content(event: Any) -> bool:
    if not isinstance(event, dict):
        return False
    kind = event.get("type")
    if kind in _MESSAGES_OPEN:
        return True
    if kind == "content_block_start":  # a tool call's name, or a block that starts with its text
        block = event.get("content_block")
        return isinstance(block, dict) and (block.get("type") != "text" or bool(block.get("text")))
    return False


def _any_event(event: Any) -> bool:
    return True  # an event stream of no known API: any event is the answer's content


CONTENT_TESTS: Final = {
    "chat": _chat_content,
    "responses": _responses_content,
    "messages": _messages_content,
    "events": _any_event,
}


def _bytes_test(target: str) -> Callable[[Any], bool]:
    """The content test of a byte-out format whose bytes are ``target``'s stream: the pieces are
    whole events (the writers cut at their ends), read and parsed, each tested as a fold's event
    would be, so the gate opens at the same event for ``format=None`` and a byte-out format.
    ``[DONE]`` opens it too: the answer's end."""
    test = CONTENT_TESTS[target]

    def content(piece: Any) -> bool:
        if not isinstance(piece, (bytes, bytearray)):
            return False
        for event in _backend.current.Decoder().feed(bytes(piece)):
            if event.data == "[DONE]":
                return True
            try:
                payload = orjson.loads(event.data)
            except orjson.JSONDecodeError:
                continue
            if test(payload):
                return True
        return False

    return content


class Gate:
    """The first-chunk gate around one attempt's ``on_chunk``: items are held until one carries
    content (``test``), then every held item and each later one goes to ``on_chunk`` in order.
    ``opened`` says whether anything went through; ``release()`` hands the held items over at
    the end of the last attempt (the caller then sees what it would have seen without the gate).
    """

    __slots__ = ("held", "on_chunk", "opened", "test")

    def __init__(self, on_chunk: Callable[[Any], Any] | None, test: Callable[[Any], bool]) -> None:
        self.on_chunk = on_chunk
        self.test = test
        self.held: list[Any] = []
        self.opened = False

    def __call__(self, item: Any) -> Any:
        if self.opened:
            return None if self.on_chunk is None else self.on_chunk(item)
        self.held.append(item)
        if self.test(item):
            return self.release()
        return None

    def release(self) -> Any:
        """Open the gate: every held item goes to ``on_chunk`` now. It returns what the last call
        returned (False stops the transfer; a future holds it), stopping at a False."""
        self.opened = True
        held, self.held = self.held, []
        answer = None
        if self.on_chunk is None:
            return None
        for item in held:
            answer = self.on_chunk(item)
            if answer is False:
                return False
        return answer


def gate_test(fmt: str, api: str) -> Callable[[Any], bool]:
    """The content test of a request's stream: the API's events for a fold, and for a byte-out
    format the same test on the events of the stream it writes (a relay's: chat; a passthrough's:
    ``api``'s; ``to-X``'s: X's)."""
    if fmt in CONTENT_TESTS:
        return CONTENT_TESTS[fmt]
    return _bytes_test("chat" if fmt == "relay" else api if fmt == "passthrough" else fmt[3:])

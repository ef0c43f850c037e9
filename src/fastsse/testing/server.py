"""An OpenAI-compatible streaming server on 127.0.0.1, for tests, demos and benchmarks (stdlib only).

``python -m fastsse serve [--port N]``, or from Python::

    with serve_in_thread() as server:           # a free port, a background thread
        client = OpenAI(base_url=server.base_url, api_key="x")   # "http://127.0.0.1:PORT/v1"

Endpoints: ``POST /v1/chat/completions`` (``"stream": true`` streams, false returns the full
``chat.completion`` of the same scenario) and ``GET /v1/models`` (the scenario names).
``GET /events?count=N&cut=K&retry=MS`` is a plain event stream for an EventSource: events
``id: n`` / ``data: event n`` for n from the request's ``Last-Event-ID`` + 1 up to N (default 10),
after ``retry: MS`` when asked; with ``cut=K`` the connection is cut after every K events (the
last one ends the body cleanly instead), and once the client has event N it is answered 204.
``POST /v1/responses`` and ``POST /v1/messages`` stream the same scenarios as OpenAI Responses and
Anthropic Messages events, translated from the chat stream as it is produced (``stream: true``
only; ``x-api-key`` is accepted for the api key), plus broken models listed in
``fastsse.testing._translated.BROKEN`` that reproduce gateway translation bugs. On
``/v1/chat/completions``, ``via-messages/NAME`` and ``via-responses/NAME`` stream scenario NAME
translated to that format and back to chat.

The request's ``model`` picks a scripted scenario: ``NAME[-N][:WRITE]``. Unknown names get ``plain``.

  plain         content with non-ASCII text (the default); honours the request's ``n``
  demo          reasoning_content, then a haiku (what ``python -m fastsse demo`` asks for)
  n2            plain with two choices, their chunks interleaved
  tools         two parallel tool calls (get_weather, get_time), fragments interleaved; finish tool_calls
  reasoning     reasoning_content deltas, then content
  refusal       refusal deltas
  long-N        N content chunks (default 1000), e.g. long-20000 for benchmarks; written one event per write
  huge-N        one content chunk of N characters (default 1 MiB) in a single event
  slow-N        plain, one token every N ms (default 50) with a ``: ping`` comment in between
  crlf          plain framed sse-starlette style: CRLF line endings and a leading ``: ping``
  error         a few chunks, then ``data: {"error": {...}}``, two more content chunks a client must
                not deliver, and the end of the body (no [DONE]); not streamed: HTTP 500 with the error
  disconnect    a few chunks, then half an event and the connection closes without ending the body
  flaky         the 1st, 3rd, 5th... request with this exact model string streams a role chunk, then
                an overloaded_error chunk before any content; the others are plain (for retries)
  localai       plain as LocalAI 3.7 sent it (seed 000): finish_reason "" on every chunk, role with
                "content": "" first, usage on every chunk, content "" in the final chunk
  localai-tools tools as LocalAI sent them: role repeated, every call with the request's id, "" reasons
  html          HTTP 200 with an HTML page instead of an event stream
  http-N        HTTP status N (default 500) with an OpenAI-style error object (429 and 503 with
                Retry-After: 1)

A Responses request with ``"background": true`` is kept whole under a response id of its own, and
``GET /v1/responses/{id}?stream=true&starting_after=N`` streams it again from the event after
sequence number N. ``cut-resume`` (plain content) cuts the first connection in the middle of an
event halfway through; ``cut-resume-repeat`` / ``cut-resume-skip`` then resume one event too early
or too late, as broken servers do.

On /v1/responses and /v1/messages every scenario but html and http-N is the chat stream translated,
and broken models reproduce gateway translation bugs (``fastsse check --api`` reports each):
  responses     orphan-delta, no-text-done, swallowed, error-swallowed, bad-sequence, no-item-done
  messages      zero-usage, tool-text-delta, empty-input-json, no-tool-name, no-block-stop,
                index-order, no-message-stop, error-swallowed
On /v1/chat/completions, via-messages/NAME and via-responses/NAME go there and back.

Every compliant scenario goes through ``ChatChunkEncoder``; with ``stream_options.include_usage`` a
usage chunk (``choices: []``) comes before ``data: [DONE]``. ``id`` and ``created`` are fixed per
scenario, so ``expected_completion(request)`` is exactly what a client should fold the stream into.

WRITE picks how the body reaches the socket, one HTTP chunk per write (chunked transfer encoding):
``small`` (the default except for long and huge) cuts it into uneven pieces of 1-11 bytes, with
short pauses, so reads end inside lines, CRLFs and UTF-8 sequences; ``event`` writes one event per
write; ``bulk`` coalesces up to 64 KiB per write for throughput. A server started with ``api_key``
answers 401 to requests without ``Authorization: Bearer <api_key>``. ``server.received`` holds the
(path, JSON body) of the last requests it was sent, for tests of what a client sends.
"""

from __future__ import annotations

import collections
import contextlib
import random
import re
import socket
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

import orjson

from .._errors import InvalidRequest
from ..chat.encode import ChatChunkEncoder

__all__ = ["SCENARIOS", "LoopbackServer", "expected_completion", "serve_in_thread"]

CREATED: Final = 1_700_000_000
RECEIVED_LIMIT: Final = 256  # request bodies a LoopbackServer keeps in ``received``
BACKGROUND_LIMIT: Final = 64  # background Responses streams a LoopbackServer keeps for resuming
FINGERPRINT: Final = "fp_fastsse"

SCENARIOS: Final[dict[str, str]] = {
    "plain": "content with non-ASCII text; honours n",
    "demo": "reasoning_content, then a haiku",
    "n2": "two choices, interleaved",
    "tools": "two parallel tool calls, finish tool_calls",
    "reasoning": "reasoning_content, then content",
    "refusal": "refusal deltas",
    "long": "long-N: N content chunks (default 1000)",
    "huge": "huge-N: one content event of N characters (default 1 MiB)",
    "slow": "slow-N: a token every N ms (default 50) with : ping comments",
    "crlf": "CRLF line endings and a : ping comment (sse-starlette framing)",
    "error": "an error object mid-stream, no [DONE] (500 when not streamed)",
    "flaky": "every other request of the same model string: overloaded_error before any content; else plain",
    "disconnect": "the connection closes in the middle of an event",
    "localai": "the LocalAI 3.7 stream bugs of seed 000",
    "localai-tools": "LocalAI's tool-call stream: role repeated, one id for every call",
    "html": "HTTP 200 with an HTML page instead of SSE",
    "http": "http-N: HTTP status N (default 500) with an OpenAI error object",
}
WRITE_MODES: Final = ("small", "event", "bulk")
_ROUTES: Final = {"/v1/chat/completions": "chat", "/v1/responses": "responses", "/v1/messages": "messages"}

PLAIN: Final = [
    "Hello", "!", " Streaming", " from", " the", " fastsse", " loopback", " server", ":",
    " héllo", " wörld", ",", " 你好", " 🌍", ".",
]  # fmt: skip
REASONING: Final = ["The user", " greets me", "; a short", " friendly", " reply", " fits", " — ok."]
DEMO_REASONING: Final = ["A haiku", ": five,", " seven,", " five", " syllables", "; the sea", "."]
DEMO: Final = [
    "Salt", " wind", " on", " the", " waves", " —", "\n", "the", " tide", " folds", " the", " moon's",
    " bright", " path", "\n", "back", " into", " the", " sea", ".", " 🌊",
]  # fmt: skip
REFUSAL: Final = ["I'm sorry", ", but I", " can't help", " with that."]
LONG: Final = [" lorem", " ipsum", " dolor", " sit", " amet", ",", " ünïcode", " token"]
TOOLS: Final = [
    ("call_weather_paris", "get_weather", ['{"city"', ': "Par', 'is", "unit": "c', 'elsius"}']),
    ("call_time_paris", "get_time", ['{"tz": "Eu', "rope/Paris", '"}']),
]
MID_STREAM_ERROR: Final = {
    "message": "The server had an error while generating the response (simulated mid-stream failure).",
    "type": "server_error",
    "param": None,
    "code": "internal_error",
}
HTML_PAGE: Final = (
    b"<!DOCTYPE html>\n<html><head><title>Welcome</title></head>\n"
    b"<body><h1>It works!</h1><p>This is not an event stream.</p></body></html>\n"
)

_MODEL: Final = re.compile(r"^(?P<name>.*?)(?:-(?P<n>\d+))?(?::(?P<write>small|event|bulk))?$")


def parse_model(model: str) -> tuple[str, int | None, str | None]:
    """Split a model name into (scenario, number, write mode); unknown scenarios become ``plain``."""
    m = _MODEL.match(model or "")
    assert m is not None
    name, number, write = m["name"], m["n"], m["write"]
    if name not in SCENARIOS:
        if model.split(":")[0] in SCENARIOS:  # a name that itself ends in -digits
            name, number = model.split(":")[0], None
        else:
            name, number = "plain", None
    return name, int(number) if number is not None else None, write


# Scripts: the semantic steps of a scenario, shared by the stream and the non-streamed answer.


def _script(name: str, number: int | None, n: int) -> list[tuple[Any, ...]]:
    steps: list[tuple[Any, ...]] = []
    if name in ("tools", "localai-tools"):
        steps.append(("role", 0))
        for call, (call_id, fn, _) in enumerate(TOOLS):
            steps.append(("tool", call, call_id, fn, ""))
        for k in range(max(len(parts) for _, _, parts in TOOLS)):
            for call, (_, _, parts) in enumerate(TOOLS):
                if k < len(parts):
                    steps.append(("args", call, parts[k]))
        steps.append(("finish", "tool_calls", 0))
        return steps
    if name == "n2":
        n = 2
    if name not in ("plain", "n2", "slow", "crlf", "localai"):
        n = 1
    for i in range(n):
        steps.append(("role", i))
    if name == "demo":
        steps += [("reasoning", t, 0) for t in DEMO_REASONING]
        steps += [("content", t, 0) for t in DEMO]
    elif name == "reasoning":
        steps += [("reasoning", t, 0) for t in REASONING]
        steps += [("content", t, 0) for t in ["Hello", "! Nice", " to meet", " you."]]
    elif name == "refusal":
        steps += [("refusal", t, 0) for t in REFUSAL]
    elif name == "long":
        count = 1000 if number is None else number
        steps += [("content", LONG[k % len(LONG)], 0) for k in range(count)]
    elif name == "huge":
        size = (1 << 20) if number is None else number
        unit = "fastsse huge event ✓ 0123456789 "
        steps.append(("content", (unit * (size // len(unit) + 1))[:size], 0))
    elif name in ("error", "disconnect"):
        steps += [("content", t, 0) for t in PLAIN[:6]]
    else:
        pause = (50 if number is None else number) / 1000 if name == "slow" else 0.0
        for k, token in enumerate(PLAIN):
            for i in range(n):
                if pause:
                    steps += [("comment", "ping"), ("pause", pause)]
                steps.append(("content", token if i == 0 or k else f"[{i}] {token}", i))
    if name not in ("error", "disconnect"):
        steps += [("finish", "stop", i) for i in range(n)]
    return steps


def _prompt_tokens(request: dict[str, Any]) -> int:
    count = 0
    for message in request.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            count += len(content.split())
    return count


def _usage(request: dict[str, Any], steps: list[tuple[Any, ...]]) -> dict[str, int]:
    prompt = _prompt_tokens(request)
    completion = sum(step[0] in ("content", "reasoning", "refusal", "tool", "args") for step in steps)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _request_n(request: dict[str, Any]) -> int:
    n = request.get("n", 1)
    return n if type(n) is int and 1 <= n <= 8 else 1


def expected_completion(request: dict[str, Any], /) -> dict[str, Any]:
    """``expected_completion(request) -> dict``: the ``chat.completion`` the scenario stands for.

    It is the non-streamed answer to ``request``, and what a client should fold the streamed answer
    into (``usage`` in a stream only with ``stream_options.include_usage``; the ``localai`` streams
    carry LocalAI's zero usage on every chunk instead). For ``error`` and ``disconnect`` it describes
    the part sent before the failure; ``html`` and ``http-N`` send no completion at all.
    """
    model = str(request.get("model") or "plain")
    name, number, _ = parse_model(model)
    steps = _script(name, number, _request_n(request))
    choices: dict[int, dict[str, Any]] = {}
    for step in steps:
        kind = step[0]
        if kind == "role":
            choices[step[1]] = {"message": {"role": "assistant", "content": None}, "finish_reason": None}
        elif kind in ("content", "reasoning", "refusal"):
            key = "reasoning_content" if kind == "reasoning" else kind
            message = choices[step[2]]["message"]
            message[key] = (message.get(key) or "") + step[1]
        elif kind == "tool":
            _, _call, call_id, fn, args = step
            calls = choices[0]["message"].setdefault("tool_calls", [])
            calls.append({"id": call_id, "type": "function", "function": {"name": fn, "arguments": args}})
        elif kind == "args":
            choices[0]["message"]["tool_calls"][step[1]]["function"]["arguments"] += step[2]
        elif kind == "finish":
            choices[step[2]]["finish_reason"] = step[1]
    return {
        "id": f"chatcmpl-{name}",
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "system_fingerprint": FINGERPRINT,
        "choices": [
            {"index": i, "message": c["message"], "logprobs": None, "finish_reason": c["finish_reason"]}
            for i, c in sorted(choices.items())
        ],
        "usage": _usage(request, steps),
    }


# Rendering a script as SSE bytes.


class _LocalAIEncoder:
    """The chunk shapes LocalAI 3.7 sent (seed 000 "Before", peers.md section 6): not compliant on purpose."""

    def __init__(self, *, id: str, model: str, created: int) -> None:
        self.head = {"created": created, "object": "chat.completion.chunk", "id": id, "model": model}
        self.request_id = id

    def _chunk(self, delta: dict[str, Any], finish_reason: str = "", index: int = 0) -> bytes:
        chunk = {
            **self.head,
            "choices": [{"index": index, "finish_reason": finish_reason, "delta": delta}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }
        return b"data: " + orjson.dumps(chunk) + b"\n\n"

    def role(self, role: str = "assistant", index: int = 0) -> bytes:
        return self._chunk({"role": role, "content": ""}, index=index)

    def content(self, text: str, /, index: int = 0) -> bytes:
        return self._chunk({"content": text}, index=index)

    reasoning = content
    refusal = content

    def tool_call(
        self,
        index: int,
        /,
        *,
        id: str | None = None,
        name: str | None = None,
        arguments: str = "",
        choice: int = 0,
    ) -> bytes:
        function = {"name": name} if name is not None else {"arguments": arguments}
        call = {"index": index, "id": self.request_id, "type": "function", "function": function}
        delta: dict[str, Any] = {"role": "assistant", "tool_calls": [call]}
        if name is None:
            delta["content"] = ""
        return self._chunk(delta, index=choice)

    def finish(self, reason: str = "stop", index: int = 0) -> bytes:
        return self._chunk({"content": ""}, reason, index=index)

    def usage(self, usage: dict[str, Any], /) -> bytes:
        return b""

    def done(self) -> bytes:
        return b"data: [DONE]\n\n"


class _Pause:
    __slots__ = ("seconds",)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds


_CUT: Final = object()  # close the connection without ending the body


def _events(request: dict[str, Any]) -> Iterator[bytes | _Pause | object]:
    """The stream of a scenario: event bytes, pauses, and possibly a cut."""
    model = str(request.get("model") or "plain")
    name, number, _ = parse_model(model)
    steps = _script(name, number, _request_n(request))
    ident = f"chatcmpl-{name}"
    encoder: Any
    if name.startswith("localai"):
        encoder = _LocalAIEncoder(id=ident, model=model, created=CREATED)
    else:
        encoder = ChatChunkEncoder(id=ident, model=model, created=CREATED, system_fingerprint=FINGERPRINT)
    crlf = name == "crlf"

    def out(event: bytes) -> bytes:
        return event.replace(b"\n", b"\r\n") if crlf else event

    if crlf:
        yield b": ping\r\n\r\n"
    for step in steps:
        kind = step[0]
        if kind == "role":
            yield out(encoder.role("assistant", step[1]))
        elif kind == "content":
            yield out(encoder.content(step[1], step[2]))
        elif kind == "reasoning":
            yield out(encoder.reasoning(step[1], step[2]))
        elif kind == "refusal":
            yield out(encoder.refusal(step[1], step[2]))
        elif kind == "tool":
            _, call, call_id, fn, args = step
            yield out(encoder.tool_call(call, id=call_id, name=fn, arguments=args))
        elif kind == "args":
            yield out(encoder.tool_call(step[1], arguments=step[2]))
        elif kind == "finish":
            yield out(encoder.finish(step[1], step[2]))
        elif kind == "comment":
            yield out(b": " + step[1].encode() + b"\n\n")
        elif kind == "pause":
            yield _Pause(step[1])
    if name == "error":
        yield b"data: " + orjson.dumps({"error": MID_STREAM_ERROR}) + b"\n\n"
        # a client must stop at the error: these two chunks must never reach its caller
        yield encoder.content(" never", 0)
        yield encoder.content(" delivered", 0)
        return
    if name == "disconnect":
        event = encoder.content(" and then the connection dropped", 0)
        yield event[: len(event) // 2]
        yield _CUT
        return
    options = request.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage"):
        yield out(encoder.usage(_usage(request, steps)))
    yield out(encoder.done())


def _error_body(status: int, message: str, type_: str, code: str | None) -> bytes:
    return orjson.dumps({"error": {"message": message, "type": type_, "param": None, "code": code}})


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # A many-streams client opens hundreds of connections at once; the default backlog (5) drops
    # the rest of the burst's SYNs and each retry costs the client a second.
    request_queue_size = 1024
    block_on_close = False
    app: LoopbackServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return  # a client dropped its keep-alive connection: routine, not worth a traceback
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fastsse-loopback"
    timeout = 30  # an idle keep-alive connection is dropped after this many seconds
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.app._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.app._track(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.app.verbose:
            super().log_message(format, *args)

    # plumbing

    def _send(
        self,
        status: int,
        body: bytes,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(
        self, status: int, message: str, type_: str = "invalid_request_error", code: str | None = None
    ) -> None:
        self._send(status, _error_body(status, message, type_, code))

    def _authorized(self) -> bool:
        key = self.server.app.api_key
        if key is None or self.headers.get("Authorization") == f"Bearer {key}":
            return True
        if self.headers.get("x-api-key") == key:  # how Anthropic clients send it
            return True
        self._error(401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key")
        return False

    def do_GET(self) -> None:
        self.server.app.requested.append(("GET", self.path))
        path, _, query = self.path.partition("?")
        if path.rstrip("/") == "/events":
            self._events(query)
            return
        if path.startswith("/v1/responses/"):
            if self._authorized():
                self._resume(path[len("/v1/responses/") :].strip("/"), urllib.parse.parse_qs(query))
            return
        if self.path.rstrip("/") != "/v1/models":
            self._error(404, f"Unknown path {self.path}", code="not_found")
            return
        if not self._authorized():
            return
        models = [
            {"id": name, "object": "model", "created": CREATED, "owned_by": "fastsse"} for name in SCENARIOS
        ]
        self._send(200, orjson.dumps({"object": "list", "data": models}))

    def do_POST(self) -> None:
        self.server.app.requested.append(("POST", self.path))
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        api = _ROUTES.get(self.path.rstrip("/"))
        if api is None:
            self._error(404, f"Unknown path {self.path}", code="not_found")
            return
        if not self._authorized():
            return
        try:
            request = orjson.loads(raw)
        except orjson.JSONDecodeError:
            request = None
        if not isinstance(request, dict):
            self._error(400, "The request body must be a JSON object.")
            return
        self.server.app.received.append((self.path.rstrip("/"), request))
        model = str(request.get("model") or "plain")
        if api != "chat":
            self._format(api, request, model)
            return
        via, slash, rest = model.partition("/")
        if slash and via in ("via-messages", "via-responses") and request.get("stream"):
            self._round_trip(via[4:], {**request, "model": rest}, rest)
            return
        name, number, write = parse_model(model)
        if name == "http":
            status = 500 if number is None else number
            if not 400 <= status <= 599:
                status = 500
            type_ = "server_error" if status >= 500 else "invalid_request_error"
            if status == 429:
                type_ = "rate_limit_error"
            message = f"Simulated HTTP {status} from the fastsse loopback server."
            # as real servers do, a rate limit and an overload say when to come back
            later = {"Retry-After": "1"} if status in (429, 503) else None
            self._send(status, _error_body(status, message, type_, f"http_{status}"), headers=later)
            return
        if name == "html":
            self._send(200, HTML_PAGE, "text/html; charset=utf-8")
            return
        if name == "flaky" and request.get("stream"):
            app = self.server.app
            with app._lock:
                count = app.flaky[model] = app.flaky.get(model, 0) + 1
            if count % 2:
                self._stream(request, model, "event", iter(_overloaded(request)))
                return
            request = {**request, "model": "plain"}
        if not request.get("stream"):
            self._complete(request, name)
            return
        if write is None:
            write = self.server.app.write or ("event" if name in ("long", "huge") else "small")
        self._stream(request, model, write)

    def _events(self, query: str) -> None:
        """``GET /events``: numbered events from the client's ``Last-Event-ID`` on (module docstring)."""
        params = {name: values[-1] for name, values in urllib.parse.parse_qs(query).items()}
        try:
            count, cut = int(params.get("count", 10)), int(params.get("cut", 0))
            retry = int(params["retry"]) if "retry" in params else None
        except ValueError:
            self._error(400, "count, cut and retry must be integers")
            return
        last = self.headers.get("Last-Event-ID", "").strip()
        n = int(last) if last.isdigit() else 0
        if n >= count:
            self.send_response(204)  # WHATWG: "no more", so the client stops reconnecting
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            if retry is not None:
                self._chunk(b"retry: %d\n\n" % retry)
            sent = 0
            while n < count:
                if self.server.app._stopping.is_set():
                    self._cut()
                    return
                n += 1
                self._chunk(b"id: %d\ndata: event %d\n\n" % (n, n))
                sent += 1
                if cut and sent >= cut and n < count:
                    self._cut()  # mid-body, as a server that crashed or a proxy that timed out
                    return
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True

    def _round_trip(self, via: str, request: dict[str, Any], model: str) -> None:
        """``via-messages/NAME``, ``via-responses/NAME``: the chat scenario translated there and back."""
        from . import _translated

        name, _, write = parse_model(model)
        if name in ("http", "html"):
            self._error(400, f"Scenario {name!r} cannot be translated.")
            return
        if write is None:
            write = self.server.app.write or ("event" if name in ("long", "huge") else "small")
        self._stream(request, model, write, _translated.round_trip(via, _events(request), CREATED))

    def _format(self, api: str, request: dict[str, Any], model: str) -> None:
        """``/v1/responses`` and ``/v1/messages``: a chat scenario translated, or a broken model."""
        from . import _translated

        if not request.get("stream"):
            self._error(400, f"The fastsse loopback server answers /v1/{api} only with stream: true.")
            return
        bug, _, write_mode = model.partition(":")
        broken = _translated.BROKEN[api].get(bug)
        base = broken[0] if broken is not None else model
        if broken is not None and write_mode:
            base = f"{base}:{write_mode}"
        name, _, write = parse_model(base)
        if name in ("http", "html"):
            self._error(400, f"Scenario {name!r} is served on /v1/chat/completions only.")
            return
        if api == "responses" and request.get("background") and broken is None:
            self._background(request, model, base)
            return
        chat = _translated.chat_request(api, request, base)
        items: Iterator[Any]
        if broken is not None:
            items = iter([_translated.broken_stream(api, bug, _events(chat))])
        else:
            items = _translated.format_events(api, _events(chat))
        if write is None:
            write = self.server.app.write or ("event" if name in ("long", "huge") else "small")
        self._stream(request, model, write, items)

    def _background(self, request: dict[str, Any], model: str, base: str) -> None:
        """A ``"background": true`` Responses request: the whole stream is kept under its response
        id for ``_resume``. ``cut-resume`` (the ``plain`` scenario) cuts the first connection in
        the middle of an event after half of the events; ``cut-resume-repeat`` and
        ``cut-resume-skip`` then resume one event too early or one too late, as broken servers do."""
        from . import _translated

        cut = base.split(":")[0].startswith("cut-resume")
        scenario = base.replace("cut-resume-repeat", "plain").replace("cut-resume-skip", "plain")
        scenario = scenario.replace("cut-resume", "plain")
        chat = _translated.chat_request("responses", request, scenario)
        body = b"".join(
            item for item in _translated.format_events("responses", _events(chat)) if isinstance(item, bytes)
        )
        events = _split_events(body)
        app = self.server.app
        scenario_id = next((_response_id(data) for _, data in events if b'"response.created"' in data), None)
        with app._lock:
            app.background_made += 1
            rid = f"resp_bg_{app.background_made}"  # one stream per request, resumable by its own id
        if scenario_id:
            was, now = b'"id":"%s"' % scenario_id.encode(), b'"id":"%s"' % rid.encode()
            events = [(seq, data.replace(was, now)) for seq, data in events]
        with app._lock:
            app.background[rid] = events
            app.broken_resume[rid] = base.split(":")[0]
            while len(app.background) > BACKGROUND_LIMIT:
                old, _ = app.background.popitem(last=False)
                app.broken_resume.pop(old, None)
        sent = events[: len(events) // 2] if cut else events
        items: list[Any] = [data for _, data in sent]
        if cut:
            half = events[len(events) // 2][1]
            items += [half[: len(half) // 2], _CUT]
        self._stream(request, model, "event", iter(items))

    def _resume(self, rid: str, query: dict[str, list[str]]) -> None:
        """``GET /v1/responses/{id}?stream=true&starting_after=N``: a kept background stream from the
        event after sequence number N (from the start without it)."""
        app = self.server.app
        with app._lock:
            events = app.background.get(rid)
            kind = app.broken_resume.get(rid, "")
        if events is None:
            self._error(404, f"No response with id {rid!r}.", code="not_found")
            return
        if query.get("stream", [""])[0] != "true":
            self._error(
                400, "The fastsse loopback server resumes background responses with stream=true only."
            )
            return
        after_text = query.get("starting_after", ["-1"])[0]
        after = int(after_text) if after_text.lstrip("-").isdigit() else -1
        if kind == "cut-resume-repeat":
            after -= 1  # sends the last event the client saw once more
        elif kind == "cut-resume-skip":
            after += 1  # leaves one event out
        self._stream({}, rid, "event", iter([data for seq, data in events if seq > after]))

    def _complete(self, request: dict[str, Any], name: str) -> None:
        if name == "error":
            self._error(500, str(MID_STREAM_ERROR["message"]), "server_error", "internal_error")
            return
        body = orjson.dumps(expected_completion(request))
        if name == "disconnect":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2])
            self._cut()
            return
        self._send(200, body)

    def _cut(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _stream(
        self, request: dict[str, Any], model: str, write: str, items: Iterator[Any] | None = None
    ) -> None:
        app = self.server.app
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("X-Accel-Buffering", "no")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        rng = random.Random(f"{app.seed}:{model}")
        pending = bytearray()
        sent = 0
        try:
            for item in _events(request) if items is None else items:
                if app._stopping.is_set():
                    self._cut()
                    return
                if isinstance(item, _Pause):
                    if pending:
                        self._chunk(bytes(pending))
                        pending.clear()
                    if app._stopping.wait(item.seconds):
                        self._cut()
                        return
                elif item is _CUT:
                    if pending:
                        self._chunk(bytes(pending))
                    self._cut()
                    return
                elif item:
                    assert isinstance(item, bytes)
                    if write == "bulk":
                        pending += item
                        if len(pending) >= 65536:
                            self._chunk(bytes(pending))
                            pending.clear()
                    elif write == "event":
                        self._chunk(item)
                    else:
                        for piece in _pieces(item, rng):
                            self._chunk(piece)
                            sent += len(piece)
                            if sent < 65536 and app.pause:
                                time.sleep(app.pause)
            if pending:
                self._chunk(bytes(pending))
            self.wfile.write(b"0\r\n\r\n")
        except OSError:  # the client went away (or stopped reading for `timeout` seconds)
            self.close_connection = True

    def _chunk(self, piece: bytes) -> None:
        self.wfile.write(b"%X\r\n%s\r\n" % (len(piece), piece))


def _overloaded(request: dict[str, Any]) -> list[bytes]:
    """A role chunk, then an overloaded error before any content (what a busy provider sends)."""
    head = {
        "id": "chatcmpl-flaky",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": request.get("model"),
    }
    role = {**head, "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}
    error = {"error": {"type": "overloaded_error", "message": "Overloaded (the fastsse loopback server)"}}
    return [b"data: " + orjson.dumps(role) + b"\n\n", b"data: " + orjson.dumps(error) + b"\n\n"]


def _split_events(body: bytes) -> list[tuple[int, bytes]]:
    """A compliant Responses stream (LF framing) as (sequence_number, the event's bytes) pairs."""
    out: list[tuple[int, bytes]] = []
    for block in body.split(b"\n\n"):
        if not block.strip():
            continue
        data = next((line[6:] for line in block.split(b"\n") if line.startswith(b"data: ")), b"{}")
        seq = orjson.loads(data).get("sequence_number", len(out))
        out.append((int(seq), block + b"\n\n"))
    return out


def _response_id(data: bytes) -> str | None:
    payload = orjson.loads(data.split(b"data: ", 1)[1])
    response = payload.get("response") if isinstance(payload, dict) else None
    return response.get("id") if isinstance(response, dict) else None


def _pieces(data: bytes, rng: random.Random) -> Iterator[bytes]:
    """Cut ``data`` into uneven pieces of 1-11 bytes; every other CRLF is cut between CR and LF."""
    pos, n = 0, len(data)
    while pos < n:
        end = min(n, pos + rng.randint(1, 11))
        cr = data.find(b"\r\n", pos, end)
        if cr >= 0 and rng.random() < 0.5:
            end = cr + 1
        yield data[pos:end]
        pos = end


class LoopbackServer:
    """``LoopbackServer(port=0, *, api_key=None, write=None, pause=0.0001, seed=0, verbose=False)``

    The server bound to 127.0.0.1 (``port=0``: a free port). ``start()`` serves from a daemon
    thread and returns the server; ``close()`` (or leaving the ``with`` block) stops it, ends the
    streams in progress and closes every connection. ``base_url`` is ``http://127.0.0.1:PORT/v1``.

    ``write`` forces a write mode for every stream (``"small"``, ``"event"`` or ``"bulk"``; a
    ``:MODE`` suffix on the model still wins); ``pause`` is the pause in seconds between the small
    pieces of the first 64 KiB of a stream; ``seed`` makes the piece sizes reproducible.
    It raises InvalidRequest for an unknown write mode and OSError if the port cannot be bound.
    """

    def __init__(
        self,
        port: int = 0,
        *,
        api_key: str | None = None,
        write: str | None = None,
        pause: float = 0.0001,
        seed: int = 0,
        verbose: bool = False,
    ) -> None:
        if write is not None and write not in WRITE_MODES:
            raise InvalidRequest(f"write must be one of {WRITE_MODES} or None, not {write!r}")
        self.api_key = api_key
        self.write = write
        self.pause = pause
        self.seed = seed
        self.verbose = verbose
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._serving = False  # serve_forever is running, on our thread or the caller's
        self._httpd = _HTTPServer(("127.0.0.1", port), _Handler)
        self._httpd.app = self
        self.port: int = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.base_url = f"{self.url}/v1"
        # (path, parsed body) of the last RECEIVED_LIMIT requests with a JSON object body, oldest
        # first: what a test asserts a client (a gateway) sent
        self.received: collections.deque[tuple[str, dict[str, Any]]] = collections.deque(
            maxlen=RECEIVED_LIMIT
        )
        # background Responses: id -> the whole stream's events as (sequence_number, bytes), kept for
        # GET /v1/responses/{id}?stream=true&starting_after=N (at most BACKGROUND_LIMIT, oldest dropped)
        self.background: collections.OrderedDict[str, list[tuple[int, bytes]]] = collections.OrderedDict()
        self.broken_resume: dict[str, str] = {}  # id -> the cut-resume variant it was made by
        self.background_made = 0
        self.flaky: dict[str, int] = {}  # model string -> requests seen (the flaky scenario)
        # (method, path with query) of the last RECEIVED_LIMIT requests of any kind, oldest first
        self.requested: collections.deque[tuple[str, str]] = collections.deque(maxlen=RECEIVED_LIMIT)

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)
                self._idle.notify_all()

    def start(self) -> LoopbackServer:
        """Serve from a daemon thread; return self."""
        if self._thread is None:
            self._thread = threading.Thread(target=self.serve_forever, name="fastsse-loopback", daemon=True)
            self._serving = True  # before the thread runs, so an immediate close() still shuts it down
            self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve on the calling thread until ``close()`` is called from another one (or Ctrl-C)."""
        self._serving = True
        try:
            self._httpd.serve_forever(poll_interval=0.05)
        finally:
            self._serving = False

    def close(self, timeout: float = 5.0) -> None:
        """Stop serving, end the streams in progress and close every connection (waits up to ``timeout`` s)."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        if self._serving:
            self._httpd.shutdown()
        if self._thread is not None:
            self._thread.join(timeout)
        with self._lock:
            for conn in list(self._connections):
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
            self._idle.wait_for(lambda: not self._connections, timeout)
        self._httpd.server_close()

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve_in_thread(
    port: int = 0,
    *,
    api_key: str | None = None,
    write: str | None = None,
    pause: float = 0.0001,
    seed: int = 0,
) -> LoopbackServer:
    """``serve_in_thread(port=0, *, api_key=None, write=None, pause=0.0001, seed=0) -> LoopbackServer``

    Start the loopback server in a background thread and return it; use it as a context manager
    (``with serve_in_thread() as server: server.base_url``) or call ``close()``.
    It raises OSError if the port cannot be bound.
    """
    return LoopbackServer(port, api_key=api_key, write=write, pause=pause, seed=seed).start()

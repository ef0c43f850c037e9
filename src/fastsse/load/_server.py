"""A scripted OpenAI-compatible server for load tests: known timing, thousands of streams on one core.

``python -m fastsse serve --scripted [--ttft-ms 50 --itl-ms 20 ...] [--cpu 0]``, or from Python::

    with serve_scripted_in_thread(itl_ms=5) as server:     # an asyncio loop on a background thread
        server.base_url                                    # "http://127.0.0.1:PORT/v1"

    with spawn_scripted_server(cpu=0, itl_ms=20) as server:  # its own process, pinned to core 0
        ...

It answers ``POST /v1/chat/completions`` (streamed, or the whole ``chat.completion`` when
``stream`` is false), ``POST /v1/responses`` and ``POST /v1/messages`` (streamed only: the same
script's chat stream translated as it is written by ``fastsse.translate``, the request's
``max_output_tokens`` / ``max_tokens`` standing for ``max_tokens``), ``POST /v1/completions``
(streamed only: the legacy ``text_completion`` chunks, ``choices[].text``, of the same script for
the request's ``prompt``; no role chunk, no reasoning, no logprobs), ``GET /v1/models`` and
``GET /fastsse/stats`` (the server's own counters:
streams, chunks, how late it wrote against its schedule, its CPU time). One asyncio loop writes
every stream from one schedule (a heap of due times), so a stream costs no task and no timer of
its own; each HTTP chunk is one ``transport.write``.

**The script** of a request is, from lowest to highest precedence: the server's defaults (the
command line), ``key=value`` pairs in the ``model`` name separated by ``,`` (e.g.
``"ttft_ms=200,itl_ms=10,tokens_per_chunk=4"``; a name without ``=`` selects nothing), and a
``"fastsse_script": {...}`` object in the request body. Keys (:class:`Script`):

  ttft_ms            time from the request to the first token-bearing chunk (default 50)
  itl_ms             time between token-bearing chunks (default 20; 0 sends them as fast as the socket takes them)
  chunks             token-bearing chunks; unset: ``ceil(max_tokens / tokens_per_chunk)`` when the
                     request has ``max_tokens`` / ``max_completion_tokens``, else 100
  tokens_per_chunk   tokens in each chunk (the last one may carry fewer to honour max_tokens)
  reasoning_chunks   the first N token-bearing chunks are ``reasoning_content`` deltas
  usage              "none", "final" (a usage chunk before [DONE]) or "continuous" (usage on every
                     chunk too, the role chunk's with completion_tokens 0, as vLLM sends it); unset: "continuous" if ``stream_options.continuous_usage_stats``,
                     "final" if ``stream_options.include_usage``, else "none"
  logprobs           one ``logprobs.content`` entry per token; unset: the request's ``logprobs``
  events_per_write   events per HTTP chunk (default 1: one event per chunk, as LLM servers flush);
                     a group is written when its last event is due
  chunk_per_event    each event of a group framed as an HTTP chunk of its own, the group still
                     sent in one socket write (default false): the many chunks per read that a
                     server which frames every event sends once it writes in batches
  truncate_after     after N token-bearing chunks, half an event and the connection closes
                     without ending the body (a cut stream)
  error_after        after N token-bearing chunks, ``data: {"error": {...}}`` and the body ends (no [DONE])
  status             answer this HTTP status with an OpenAI error object instead of a stream
  stamp              stamp every chunk with its send time (default true)

The role chunk is written as soon as the request is read; token chunk ``k`` (from 0) is due at
``ttft_ms + k * itl_ms`` after that; the final chunk (``finish_reason`` "length" when max_tokens
set the length, else "stop") goes with the last token chunk's write, then the usage chunk and
``data: [DONE]``. Token ``i`` (from 0, reasoning and content counted together) is the text
`` w<i>``, so a fold can be checked: see :func:`scripted_text`.

**Usage.** ``completion_tokens`` is the tokens written; ``prompt_tokens`` counts the
whitespace-separated words of every message's text (string contents and ``text`` parts, every
role, earlier assistant turns included) and of a legacy ``prompt``: no tokenizer, so a load test
knows the exact figure the server will report for the prompt it built.

**The send stamp.** Every JSON chunk starts with ``"fastsse_sent_ns": <time.monotonic_ns()>`` taken
just before the write that carries it (a field OpenAI clients ignore and folds keep as a provider
field); every Responses or Messages event ends with it. On one machine ``CLOCK_MONOTONIC`` is shared by all processes, so a client's receive time
from ``time.monotonic_ns()`` minus this stamp is the lag the client added. For clients on another
machine the response header ``X-Fastsse-Clock: <monotonic_ns> <epoch_ns>`` is one anchor pair taken
together: ``epoch = sent_ns - monotonic_ns + epoch_ns``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import heapq
import os
import re
import subprocess
import sys
import threading
import time
from array import array
from typing import Any, Final, cast

import orjson

from .._errors import InvalidRequest, LoadError
from ..chat.encode import ChatChunkEncoder
from ..translate import translator

__all__ = [
    "STAMP_FIELD",
    "Script",
    "ScriptedProcess",
    "ScriptedServer",
    "scripted_text",
    "serve_scripted_in_thread",
    "spawn_scripted_server",
]

STAMP_FIELD: Final = "fastsse_sent_ns"
CREATED: Final = 1_700_000_000
USAGE_MODES: Final = ("none", "final", "continuous")
_BURST: Final = 64  # writes of one stream per turn when several are due (itl 0): others get their turn
_LATE_KEEP: Final = 200_000  # lateness samples kept for the stats percentiles
_ERROR: Final = {
    "message": "Scripted mid-stream failure from the fastsse scripted server.",
    "type": "server_error",
    "param": None,
    "code": "internal_error",
}


@dataclasses.dataclass(frozen=True)
class Script:
    """``Script(*, ttft_ms=50.0, itl_ms=20.0, chunks=None, tokens_per_chunk=1, reasoning_chunks=0,
    usage=None, logprobs=None, events_per_write=1, chunk_per_event=False, truncate_after=None,
    error_after=None, status=None, stamp=True)``: the timing and shape of one scripted stream (see the module doc).

    ``Script.from_request(request, defaults)`` applies the model name's and ``fastsse_script``'s
    keys over ``defaults``; it raises InvalidRequest for an unknown key or a value of the wrong type.
    """

    ttft_ms: float = 50.0
    itl_ms: float = 20.0
    chunks: int | None = None
    tokens_per_chunk: int = 1
    reasoning_chunks: int = 0
    usage: str | None = None
    logprobs: bool | None = None
    events_per_write: int = 1
    chunk_per_event: bool = False
    truncate_after: int | None = None
    error_after: int | None = None
    status: int | None = None
    stamp: bool = True

    def __post_init__(self) -> None:
        if self.ttft_ms < 0 or self.itl_ms < 0:
            raise InvalidRequest("ttft_ms and itl_ms must be >= 0")
        if self.chunks is not None and self.chunks < 0:
            raise InvalidRequest("chunks must be >= 0")
        if self.tokens_per_chunk < 1 or self.events_per_write < 1:
            raise InvalidRequest("tokens_per_chunk and events_per_write must be >= 1")
        if self.usage is not None and self.usage not in USAGE_MODES:
            raise InvalidRequest(f"usage must be one of {USAGE_MODES}, not {self.usage!r}")
        if self.status is not None and not 400 <= self.status <= 599:
            raise InvalidRequest(f"status must be an HTTP error status 400-599, not {self.status}")

    @classmethod
    def from_request(cls, request: dict[str, Any], defaults: Script | None = None) -> Script:
        """The script of ``request`` over ``defaults`` (the module doc gives the precedence)."""
        base = defaults or cls()
        changes: dict[str, Any] = {}
        model = request.get("model")
        if isinstance(model, str) and "=" in model:
            for pair in re.split(r"[,;]", model):
                key, sep, value = pair.partition("=")
                if sep:
                    changes[key.strip()] = coerce_field(key.strip(), value.strip())
        extra = request.get("fastsse_script")
        if isinstance(extra, dict):
            for key, value in extra.items():
                changes[key] = coerce_field(key, value)
        return dataclasses.replace(base, **changes) if changes else base


_FIELDS: Final = {f.name: f for f in dataclasses.fields(Script)}
# the Script fields that take whole numbers (the others: floats, booleans, the usage mode)
INT_FIELDS: Final = {"chunks", "tokens_per_chunk", "reasoning_chunks", "events_per_write"} | {
    "truncate_after",
    "error_after",
    "status",
}


def coerce_field(key: str, value: Any) -> Any:
    """``coerce_field(key, value)``: ``value`` (a string from a model name or the command line, or a
    JSON value) as the type of the ``Script`` field ``key``; the one conversion the request's script
    and ``serve --scripted``'s options share.

    It raises InvalidRequest for an unknown key or a value that does not fit the field.
    """
    if key not in _FIELDS:
        raise InvalidRequest(f"unknown script key {key!r}; known: {', '.join(_FIELDS)}")
    if value is None or (value == "none" and key != "usage"):
        return None
    if key in ("logprobs", "stamp", "chunk_per_event"):
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("1", "true", "yes", "on"):
            return True
        if str(value).lower() in ("0", "false", "no", "off"):
            return False
        raise InvalidRequest(f"{key} must be a boolean, not {value!r}")
    if key == "usage":
        return str(value)
    try:
        if key in INT_FIELDS:
            if isinstance(value, (float, bool)):
                raise TypeError
            return int(value)
        return float(value)
    except (TypeError, ValueError):
        raise InvalidRequest(f"{key} must be a number, not {value!r}") from None


def scripted_text(start: int, count: int, /) -> str:
    """``scripted_text(start, count) -> str``: the text of tokens ``start .. start+count-1`` (`` w<i>`` each)."""
    return "".join(f" w{i}" for i in range(start, start + count))


# One request's plan: the events, pre-encoded (shared by every stream of the same plan), split
# where the send stamp goes, and grouped into HTTP chunks with a due time each.


@dataclasses.dataclass
class _Plan:
    writes: list[tuple[int, list[tuple[bytes, bytes] | bytes]]]  # (due ns after start, events)
    cut: bytes | None  # after the last write: this half event, then close without ending the body
    end: bool  # write the terminating chunk after the last write
    completion: dict[str, Any]  # the non-streamed answer
    chunk_per_event: bool = False  # each event of a write its own HTTP chunk


def _prompt_tokens(request: dict[str, Any]) -> int:
    # a "token" is a whitespace-separated word of any message's text, whatever its role: the
    # figure a load test can predict exactly without a tokenizer (the module doc says so)
    count = 0
    for message in request.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            count += len(content.split())
        elif isinstance(content, list):
            for part in content:
                text = part.get("text") if isinstance(part, dict) else None
                if isinstance(text, str):
                    count += len(text.split())
    prompt = request.get("prompt")
    if isinstance(prompt, str):
        count += len(prompt.split())
    return count


def _split(event: bytes, stamp: bool) -> tuple[bytes, bytes] | bytes:
    # b'data: {...' -> (b'data: {"fastsse_sent_ns":', b',...'): the stamp goes between at write time
    if not stamp or not event.startswith(b"data: {"):
        return event
    return (b'data: {"' + STAMP_FIELD.encode() + b'":', b"," + event[7:])


def _with_choice_extra(event: bytes, extra: bytes) -> bytes:
    # insert `"logprobs":{...},` before the choice's finish_reason (the encoder writes it last)
    at = event.rindex(b',"finish_reason":')
    return event[: at + 1] + extra + b"," + event[at + 1 :]


def _with_usage(event: bytes, usage: dict[str, int]) -> bytes:
    body = event.rstrip(b"\n")
    return body[:-1] + b',"usage":' + orjson.dumps(usage) + b"}\n\n"


def _plan(request: dict[str, Any], script: Script) -> _Plan:
    model = str(request.get("model") or "scripted")
    options = request.get("stream_options") if isinstance(request.get("stream_options"), dict) else {}
    assert isinstance(options, dict)
    usage_mode = script.usage or (
        "continuous"
        if options.get("continuous_usage_stats")
        else "final"
        if options.get("include_usage")
        else "none"
    )
    logprobs = script.logprobs if script.logprobs is not None else bool(request.get("logprobs"))
    tpc = script.tokens_per_chunk
    limit = request.get("max_completion_tokens") or request.get("max_tokens")
    if script.chunks is not None:
        counts = [tpc] * script.chunks
        reason = "stop"
    elif isinstance(limit, int) and limit > 0:
        counts = [tpc] * (limit // tpc) + ([limit % tpc] if limit % tpc else [])
        reason = "length"
    else:
        counts = [tpc] * 100
        reason = "stop"
    prompt = _prompt_tokens(request)
    encoder = ChatChunkEncoder(id="chatcmpl-scripted", model=model, created=CREATED)
    ttft, itl = int(script.ttft_ms * 1e6), int(script.itl_ms * 1e6)

    role = encoder.role()
    if usage_mode == "continuous":  # as vLLM does: usage from the first chunk on, so growth is countable
        role = _with_usage(role, {"prompt_tokens": prompt, "completion_tokens": 0, "total_tokens": prompt})
    events: list[tuple[int, bytes]] = [(0, role)]  # (due, event)
    done_tokens = 0
    reasoning: list[str] = []
    content: list[str] = []
    stop_at = next((n for n in (script.truncate_after, script.error_after) if n is not None), None)
    for k, count in enumerate(counts):
        if stop_at is not None and k >= stop_at:
            break
        text = scripted_text(done_tokens, count)
        is_reasoning = k < script.reasoning_chunks
        event = encoder.reasoning(text) if is_reasoning else encoder.content(text)
        (reasoning if is_reasoning else content).append(text)
        if logprobs:
            entries = [
                {"token": f" w{i}", "logprob": -0.5, "bytes": list(f" w{i}".encode()), "top_logprobs": []}
                for i in range(done_tokens, done_tokens + count)
            ]
            event = _with_choice_extra(event, b'"logprobs":' + orjson.dumps({"content": entries}))
        done_tokens += count
        if usage_mode == "continuous":
            event = _with_usage(
                event,
                {
                    "prompt_tokens": prompt,
                    "completion_tokens": done_tokens,
                    "total_tokens": prompt + done_tokens,
                },
            )
        events.append((ttft + k * itl, event))
    usage = {"prompt_tokens": prompt, "completion_tokens": done_tokens, "total_tokens": prompt + done_tokens}
    last_due = events[-1][0]
    cut: bytes | None = None
    end = True
    if script.truncate_after is not None and script.truncate_after < len(counts):
        nxt = encoder.content(scripted_text(done_tokens, counts[script.truncate_after]))
        cut = nxt[: len(nxt) // 2]
        end = False
        tail: list[bytes] = []
    elif script.error_after is not None and script.error_after < len(counts):
        tail = [b"data: " + orjson.dumps({"error": _ERROR}) + b"\n\n"]
    else:
        tail = [encoder.finish(reason)]
        if usage_mode == "continuous":
            tail[0] = _with_usage(tail[0], usage)
        if usage_mode != "none":
            tail.append(encoder.usage(usage))
        tail.append(encoder.done())
    # group into HTTP chunks: events_per_write events each, due when the last of them is due; the
    # tail goes with the last token chunk (as servers flush the finish with the last token)
    writes: list[tuple[int, list[tuple[bytes, bytes] | bytes]]] = []
    group: list[tuple[bytes, bytes] | bytes] = []
    per = script.events_per_write
    for i, (due, event) in enumerate(events):
        group.append(_split(event, script.stamp))
        if len(group) == per or i == len(events) - 1:
            writes.append((due, group))
            group = []
    if tail:
        if per == 1:
            writes.extend((last_due, [_split(e, script.stamp)]) for e in tail)
        else:
            writes[-1][1].extend(_split(e, script.stamp) for e in tail)
    message: dict[str, Any] = {"role": "assistant", "content": "".join(content) or None}
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    completion = {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": reason}],
        "usage": usage,
    }
    return _Plan(writes, cut, end, completion, script.chunk_per_event)


# the streaming routes and the API each speaks
_APIS: Final = {
    "/v1/chat/completions": "chat",
    "/v1/responses": "responses",
    "/v1/messages": "messages",
    "/v1/completions": "completions",
}


class _ToCompletions:
    """The chat chunks of a stream rewritten as legacy ``/v1/completions`` chunks as they are
    written: ``choices[].delta.content`` becomes ``choices[].text``; the role chunk and reasoning
    deltas (which the legacy API has no place for) are dropped, the usage chunk, error payloads,
    ``[DONE]`` and the send stamp (already in the chat bytes) kept."""

    def __init__(self) -> None:
        self._pending = b""

    def write(self, data: bytes) -> bytes:
        events = (self._pending + data).split(b"\n\n")
        self._pending = events.pop()
        return b"".join(self._event(e) for e in events if e)

    def close(self) -> bytes:
        rest, self._pending = self._pending, b""
        return self._event(rest) if rest.strip() else b""

    @staticmethod
    def _event(event: bytes) -> bytes:
        if not event.startswith(b"data: {"):
            return event + b"\n\n"  # [DONE], comments
        chunk = orjson.loads(event[6:])
        if "choices" not in chunk:
            return event + b"\n\n"  # an error payload
        choices = []
        for choice in chunk["choices"]:
            text = (choice.get("delta") or {}).get("content")
            finish = choice.get("finish_reason")
            if text is None and finish is None:
                continue  # the role chunk, a reasoning delta
            index = choice.get("index", 0)
            choices.append({"index": index, "text": text or "", "logprobs": None, "finish_reason": finish})
        if not choices and chunk["choices"]:
            return b""
        chunk["object"] = "text_completion"
        chunk["choices"] = choices
        if isinstance(chunk.get("id"), str):
            chunk["id"] = chunk["id"].replace("chatcmpl-", "cmpl-", 1)
        return b"data: " + orjson.dumps(chunk) + b"\n\n"


def chat_request(api: str, request: dict[str, Any], model: str) -> dict[str, Any]:
    """The chat request a Responses or Messages request stands for (prompt words count as tokens)."""
    if api == "messages":
        messages = request.get("messages")
        messages = messages if isinstance(messages, list) else []
        system = request.get("system")
        if isinstance(system, str):
            messages = [{"role": "system", "content": system}, *messages]
    else:
        given = request.get("input")
        messages = [{"role": "user", "content": given}] if isinstance(given, str) else []
        if isinstance(given, list):
            messages = [m for m in given if isinstance(m, dict)]
        instructions = request.get("instructions")
        if isinstance(instructions, str):
            messages = [{"role": "system", "content": instructions}, *messages]
    return {"model": model, "messages": messages, "stream": True, "stream_options": {"include_usage": True}}


def _as_chat(api: str, request: dict[str, Any]) -> dict[str, Any]:
    """The chat request a Responses or Messages request stands for: its messages (prompt words
    count as tokens), its output limit as max_tokens, usage on (both APIs always report it)."""
    out = chat_request(api, request, str(request.get("model") or "scripted"))
    limit = request.get("max_output_tokens" if api == "responses" else "max_tokens")
    if isinstance(limit, int):
        out["max_tokens"] = limit
    return out


def _error_body(status: int, message: str, type_: str, code: str | None) -> bytes:
    return orjson.dumps({"error": {"message": message, "type": type_, "param": None, "code": code}})


class _Stream:
    __slots__ = ("next", "plan", "proto", "stamp", "start", "translator")

    def __init__(self, proto: _Conn, plan: _Plan, start: int, api: str = "chat", stamp: bool = True) -> None:
        self.proto = proto
        self.plan = plan
        self.start = start
        self.next = 0  # index of the next write
        self.stamp = stamp
        # Responses, Messages, completions: the chat writes are translated as they are written
        self.translator: Any = None
        if api == "completions":
            self.translator = _ToCompletions()
            self.stamp = False  # the chat bytes carry it already, and it stays where it was
        elif api != "chat":
            self.translator = translator("chat", api)

    def body(self, chat: bytes, stamp: bytes) -> bytes:
        """What goes on the wire for these chat bytes: themselves, or their translation with the
        send stamp closing every event (a raw '}\n\n' only ends an event: JSON escapes newlines)."""
        if self.translator is None:
            return chat
        out: bytes = self.translator.write(chat)
        if self.stamp and out:
            out = out.replace(b"}\n\n", b',"' + STAMP_FIELD.encode() + b'":' + stamp + b"}\n\n")
        return out

    def tail(self) -> bytes:
        return b"" if self.translator is None else self.translator.close()


class _Conn(asyncio.Protocol):
    """One HTTP/1.1 keep-alive connection: reads requests, writes one response at a time."""

    def __init__(self, app: ScriptedServer) -> None:
        self.app = app
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.stream: _Stream | None = None
        self.paused = False
        self.waiting = False  # a due write found the transport paused
        self.continued = False  # "100 Continue" sent for the request being read
        self.close_after = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not subclasses
        self.app._conns.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.app._conns.discard(self)
        if self.stream is not None:
            self.app.active -= 1
            self.stream = None
        self.transport = None

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self.waiting and self.stream is not None:
            self.waiting = False
            self.app._schedule(time.monotonic_ns(), self.stream)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if self.stream is None:
            self._next_request()

    def _next_request(self) -> None:
        while self.stream is None and self.transport is not None:
            head_end = self.buf.find(b"\r\n\r\n")
            if head_end < 0:
                if len(self.buf) > 65536:
                    self._reply(
                        431, _error_body(431, "Request headers too large.", "invalid_request_error", None)
                    )
                    self.transport.close()
                return
            lines = bytes(self.buf[:head_end]).decode("latin-1").split("\r\n")
            parts = lines[0].split(" ")
            if len(parts) != 3:
                self._reply(400, _error_body(400, "Bad request line.", "invalid_request_error", None))
                self.transport.close()
                return
            method, path = parts[0], parts[1]
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length") or 0)
            if len(self.buf) < head_end + 4 + length:
                if headers.get("expect", "").lower() == "100-continue" and not getattr(
                    self, "_continued", False
                ):
                    self.continued = True
                    self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                return
            self.continued = False
            body = bytes(self.buf[head_end + 4 : head_end + 4 + length])
            del self.buf[: head_end + 4 + length]
            self.close_after = headers.get("connection", "").lower() == "close"
            self._handle(method, path.split("?")[0].rstrip("/"), body)
            if self.close_after and self.stream is None and self.transport is not None:
                self.transport.close()

    def _reply(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        assert self.transport is not None
        self.transport.write(
            b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s"
            % (status, _REASONS.get(status, b"Error"), content_type.encode(), len(body), body)
        )

    def _handle(self, method: str, path: str, body: bytes) -> None:
        app = self.app
        if method == "GET" and path == "/v1/models":
            models = [{"id": "scripted", "object": "model", "created": CREATED, "owned_by": "fastsse"}]
            self._reply(200, orjson.dumps({"object": "list", "data": models}))
            return
        if method == "GET" and path == "/fastsse/stats":
            self._reply(200, orjson.dumps(app.stats()))
            return
        api = _APIS.get(path) if method == "POST" else None
        if api is None:
            self._reply(404, _error_body(404, f"Unknown path {path}", "invalid_request_error", "not_found"))
            return
        try:
            request = orjson.loads(body)
            if not isinstance(request, dict):
                raise InvalidRequest("The request body must be a JSON object.")
            script = Script.from_request(request, app.defaults)
            if api != "chat":
                if not request.get("stream"):
                    raise InvalidRequest(f'This server streams {path} only: set "stream": true.')
                if api != "completions":  # a completions request plans as it is: prompt, max_tokens
                    request = _as_chat(api, request)
        except (orjson.JSONDecodeError, ValueError, TypeError) as exc:
            self._reply(400, _error_body(400, str(exc), "invalid_request_error", None))
            return
        if script.status is not None:
            type_ = "server_error" if script.status >= 500 else "invalid_request_error"
            msg = f"Scripted HTTP {script.status} from the fastsse scripted server."
            self._reply(script.status, _error_body(script.status, msg, type_, f"http_{script.status}"))
            return
        plan = app._plan(request, script)
        if not request.get("stream"):
            self._reply(200, orjson.dumps(plan.completion))
            return
        assert self.transport is not None
        start = time.monotonic_ns()
        self.transport.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
            b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n"
            b"X-Fastsse-Clock: %d %d\r\n\r\n" % (start, time.time_ns())
        )
        self.stream = _Stream(self, plan, start, api, script.stamp)
        app.active += 1
        app.total += 1
        app._write_due(self.stream, start)

    def _finish(self) -> None:
        self.stream = None
        self.app.active -= 1
        if self.close_after and self.transport is not None:
            self.transport.close()
        elif self.buf:
            self._next_request()


_REASONS: Final = {
    200: b"OK",
    400: b"Bad Request",
    401: b"Unauthorized",
    404: b"Not Found",
    429: b"Too Many Requests",
    431: b"Request Header Fields Too Large",
    500: b"Internal Server Error",
    503: b"Service Unavailable",
}


class ScriptedServer:
    """``ScriptedServer(port=0, *, defaults=None)``: the scripted server bound to 127.0.0.1.

    ``await server.start()`` listens on the running loop; ``serve_scripted_in_thread`` runs it on a
    thread of its own; ``python -m fastsse serve --scripted`` in a process of its own. ``defaults``
    is the :class:`Script` a request's own keys are applied over. ``base_url`` is
    ``http://127.0.0.1:PORT/v1`` once started. It raises OSError if the port cannot be bound.
    """

    def __init__(self, port: int = 0, *, defaults: Script | None = None) -> None:
        self.port = port
        self.defaults = defaults or Script()
        self.active = 0
        self.total = 0
        self.chunks = 0
        self._conns: set[_Conn] = set()
        self._heap: list[tuple[int, int, _Stream]] = []
        self._seq = 0
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due = 0
        self._ticking = False
        self._late = array("q")
        self._late_max = 0
        self._plans: dict[bytes, _Plan] = {}
        self._server: asyncio.base_events.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.base_url = ""

    async def start(self) -> ScriptedServer:
        """Listen on 127.0.0.1:port of the running loop; return self."""
        self._loop = asyncio.get_running_loop()
        self._server = await self._loop.create_server(
            lambda: _Conn(self), "127.0.0.1", self.port, backlog=4096, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        return self

    async def close(self) -> None:
        """Stop listening and drop every connection (streams in progress end cut)."""
        if self._server is not None:
            self._server.close()
        for conn in list(self._conns):
            if conn.transport is not None:
                conn.transport.abort()
        if self._timer is not None:
            self._timer.cancel()
        if self._server is not None:
            await self._server.wait_closed()

    def stats(self) -> dict[str, Any]:
        """The server's counters: streams active/total, chunks written, lateness against the schedule."""
        late = sorted(self._late)

        def pct(q: float) -> float:
            return late[min(len(late) - 1, int(q * len(late)))] / 1e3 if late else 0.0

        return {
            "streams_active": self.active,
            "streams_total": self.total,
            "chunks_written": self.chunks,
            "late_us": {"p50": pct(0.5), "p90": pct(0.9), "p99": pct(0.99), "max": self._late_max / 1e3},
            "cpu_s": time.process_time(),
            "pid": os.getpid(),
        }

    def _plan(self, request: dict[str, Any], script: Script) -> _Plan:
        # every stream of one script, model, prompt length and max_tokens shares one plan
        key = orjson.dumps(
            [
                dataclasses.astuple(script),
                request.get("model"),
                _prompt_tokens(request),
                request.get("max_tokens"),
                request.get("max_completion_tokens"),
                request.get("stream_options"),
                bool(request.get("logprobs")),
            ]
        )
        plan = self._plans.get(key)
        if plan is None:
            if len(self._plans) > 256:
                self._plans.clear()
            plan = self._plans[key] = _plan(request, script)
        return plan

    def _schedule(self, due: int, stream: _Stream) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (due, self._seq, stream))
        if self._ticking:
            return  # _tick arms the timer once, after its loop
        if self._timer is None or due < self._timer_due:
            if self._timer is not None:
                self._timer.cancel()
            assert self._loop is not None
            self._timer_due = due
            self._timer = self._loop.call_at(due / 1e9, self._tick)

    def _tick(self) -> None:
        self._timer = None
        heap = self._heap
        now = time.monotonic_ns()
        self._ticking = True
        try:
            while heap and heap[0][0] <= now:
                _, _, stream = heapq.heappop(heap)
                if stream.proto.stream is stream:  # else the connection went away meanwhile
                    self._write_due(stream, now)
        finally:
            self._ticking = False
        if heap:
            due = heap[0][0]
            assert self._loop is not None
            self._timer_due = due
            self._timer = self._loop.call_at(due / 1e9, self._tick)

    def _write_due(self, stream: _Stream, now: int) -> None:
        proto, plan = stream.proto, stream.plan
        transport = proto.transport
        writes = plan.writes
        burst = 0
        while transport is not None and stream.next < len(writes):
            due, events = writes[stream.next]
            due += stream.start
            if due > now:
                self._schedule(due, stream)
                return
            if proto.paused:
                proto.waiting = True
                return
            if burst == _BURST:  # the loop reads sockets before this stream's next turn
                self._schedule(now + 1, stream)
                return
            stamp = b"%d" % time.monotonic_ns()
            parts = [e if isinstance(e, bytes) else e[0] + stamp + e[1] for e in events]
            if plan.chunk_per_event:
                bodies = [stream.body(part, stamp) for part in parts]
                transport.write(b"".join(b"%X\r\n%s\r\n" % (len(b), b) for b in bodies if b))
            else:
                body = stream.body(b"".join(parts), stamp)
                if body:
                    transport.write(b"%X\r\n%s\r\n" % (len(body), body))
            late = time.monotonic_ns() - due
            if len(self._late) < _LATE_KEEP:
                self._late.append(late)
            else:
                self._late[self.chunks % _LATE_KEEP] = late
            self._late_max = max(self._late_max, late)
            self.chunks += 1
            stream.next += 1
            burst += 1
        if transport is None:
            return
        if plan.cut is not None:
            cut = plan.cut if stream.translator is None else b"event: "  # half an event either way
            transport.write(b"%X\r\n%s\r\n" % (len(cut) * 2, cut))  # promises more than it sends
            transport.close()
            return
        tail = stream.tail()
        if tail:
            transport.write(b"%X\r\n%s\r\n" % (len(tail), tail))
        transport.write(b"0\r\n\r\n")
        proto._finish()


class _Threaded:
    """A :class:`ScriptedServer` on an asyncio loop in a daemon thread (``serve_scripted_in_thread``)."""

    def __init__(self, server: ScriptedServer) -> None:
        self.server = server
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="fastsse-scripted", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error
        self.base_url = server.base_url
        self.port = server.port
        self.url = f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self.server.start())
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(self.server.close())
        self._loop.close()

    def stats(self) -> dict[str, Any]:
        """The server's counters (see ``ScriptedServer.stats``)."""
        return asyncio.run_coroutine_threadsafe(self._stats(), self._loop).result(5)

    async def _stats(self) -> dict[str, Any]:
        return self.server.stats()

    def close(self) -> None:
        """Stop the server and its thread; streams in progress end cut."""
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def __enter__(self) -> _Threaded:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve_scripted_in_thread(port: int = 0, **defaults: Any) -> _Threaded:
    """``serve_scripted_in_thread(port=0, **script_defaults) -> server``

    Start the scripted server on an asyncio loop in a background thread; ``script_defaults`` are
    :class:`Script` fields. The returned object has ``base_url``, ``port``, ``stats()`` and
    ``close()``, and is a context manager. It raises InvalidRequest for a bad script default and
    OSError if the port cannot be bound.
    """
    return _Threaded(ScriptedServer(port, defaults=Script(**defaults)))


class ScriptedProcess:
    """The scripted server in a child process (``spawn_scripted_server``): ``base_url``, ``pid``, ``close()``."""

    def __init__(self, proc: subprocess.Popen[str], base_url: str) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.base_url = base_url
        self.url = base_url[: -len("/v1")]

    def stats(self) -> dict[str, Any]:
        """The server's counters, fetched over HTTP from ``/fastsse/stats``."""
        import urllib.request

        with urllib.request.urlopen(f"{self.url}/fastsse/stats", timeout=10) as answer:
            stats: dict[str, Any] = orjson.loads(answer.read())
            return stats

    def close(self) -> None:
        """Terminate the child and wait for it."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> ScriptedProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _flags(script: Script) -> list[str]:
    out = []
    for field in dataclasses.fields(Script):
        value = getattr(script, field.name)
        if value is not None and value != field.default:
            out += [
                f"--{field.name.replace('_', '-')}",
                str(value).lower() if isinstance(value, bool) else str(value),
            ]
    return out


def spawn_scripted_server(
    *, cpu: int | None = None, loop: str = "auto", python: str | None = None, **defaults: Any
) -> ScriptedProcess:
    """``spawn_scripted_server(*, cpu=None, loop="auto", python=None, **script_defaults) -> ScriptedProcess``

    Run ``python -m fastsse serve --scripted --port 0`` in a child process (pinned to core ``cpu``
    when given, so its CPU is not the client's; ``loop``: "auto" (uvloop when installed), "asyncio"
    or "uvloop"), wait until it listens and return it; use it as a context manager. It raises InvalidRequest for a bad script default and LoadError if the child
    does not start.
    """
    argv = [python or sys.executable, "-m", "fastsse", "serve", "--scripted", "--port", "0", "--quiet"]
    argv += _flags(Script(**defaults))
    if cpu is not None:
        argv += ["--cpu", str(cpu)]
    argv += ["--loop", loop]
    env = dict(os.environ)
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline() if proc.stdout else ""
    if "http://" not in line:
        proc.kill()
        proc.wait()
        raise LoadError(f"the scripted server did not start: {line!r}")
    return ScriptedProcess(proc, line[line.index("http://") :].split()[0])

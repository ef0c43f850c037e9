"""Transport faults on 127.0.0.1: create_stream raises or reports as its docstring says, and never
runs past its timeout.

Two kinds of server: the package's loopback server (its ``disconnect``, ``slow-N``, ``huge-N``,
``html`` and ``http-N`` scenarios) and, for faults it does not script, a raw socket server in this
file that reads one request and then does exactly one bad thing (a TCP reset mid-event, silence
before or after the headers, an endless event, an endless line, a huge error body, a broken chunked
encoding). Every wait is bounded: short curl timeouts, socket timeouts on the raw server, and a
wall-clock bound on each call.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import sys
import time
from collections.abc import Callable
from typing import Any

import orjson
import pycurl
import pytest

import fastsse
import fastsse.client.sync
from _chat_helpers import assert_folds_to, not_a_stream
from _raw_server import RawServer
from fastsse.testing.server import expected_completion

# every test here runs on both engine drivers (the compiled libcurl driver and pycurl)
pytestmark = pytest.mark.usefixtures("driver")

MARGIN = 2.0  # seconds a call may take past its timeout (process scheduling on a busy CI box)


def request(model: str) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": "hi"}]}


def timed(fn: Callable[[], Any]) -> tuple[Any, BaseException | None, float]:
    start = time.monotonic()
    try:
        return fn(), None, time.monotonic() - start
    except BaseException as exc:
        return None, exc, time.monotonic() - start


SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None) -> bytes:
    body = {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    body["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
    return b"data: " + orjson.dumps(body) + b"\n\n"


FIRST = chunk({"role": "assistant", "content": "Hel"}) + chunk({"content": "lo"})


def wait_until_client_leaves(conn: socket.socket, limit: float = 10.0) -> None:
    """Keep the connection open, silent, until the client closes it (or ``limit`` passes)."""
    conn.settimeout(limit)
    with contextlib.suppress(OSError):
        while conn.recv(65536):
            pass


def call(base_url: str, model: str = "plain", **kwargs: Any) -> Any:
    kwargs.setdefault("connect_timeout", 2)
    return fastsse.create_stream(request(model), base_url=base_url, api_key="x", **kwargs)


# Faults the loopback server scripts


def test_disconnect_mid_event(server: Any, stream_backend: Any) -> None:
    seen: list[Any] = []
    _, exc, elapsed = timed(lambda: call(server.base_url, "disconnect", on_chunk=seen.append, timeout=5))
    assert isinstance(exc, fastsse.TransportError), exc
    assert exc.code == pycurl.E_PARTIAL_FILE
    want = expected_completion(request("disconnect"))["choices"][0]["message"]["content"]
    assert exc.result["choices"][0]["message"]["content"] == want
    assert len(seen) == 7  # the role chunk and six content chunks; not the half event
    assert exc.result["verdict"]["complete"] is False
    assert elapsed < 5


@pytest.mark.parametrize("timeout", [0.3, 1.0])
def test_stall_past_the_timeout(server: Any, stream_backend: Any, timeout: float) -> None:
    # slow-3000: a token every 3 s; the call must give up at its timeout, with what came so far.
    _, exc, elapsed = timed(lambda: call(server.base_url, "slow-3000", timeout=timeout))
    assert isinstance(exc, fastsse.TransportError), exc
    assert exc.code == pycurl.E_OPERATION_TIMEDOUT
    assert timeout * 0.9 <= elapsed < timeout + MARGIN
    assert exc.result["verdict"]["complete"] is False


def test_ten_megabyte_event_at_the_end(server: Any, stream_backend: Any) -> None:
    size = 10 << 20
    result, exc, elapsed = timed(lambda: call(server.base_url, f"huge-{size}", timeout=30))
    assert exc is None, exc
    assert len(result["choices"][0]["message"]["content"]) == size
    assert result["verdict"]["complete"] is True
    # With a cap below it: EventTooLarge (an SSEError), raised after curl is stopped, quickly.
    _, exc, elapsed = timed(
        lambda: call(server.base_url, f"huge-{size}", timeout=30, max_event_bytes=1 << 20)
    )
    assert isinstance(exc, fastsse.EventTooLarge), exc
    assert elapsed < 30


def test_html_with_status_200(server: Any, stream_backend: Any) -> None:
    result = call(server.base_url, "html", timeout=5)
    assert result["http"]["status"] == 200
    assert result["http"]["error"].lstrip().startswith("<!DOCTYPE html>")


@pytest.mark.parametrize("status", [400, 401, 429, 500, 503])
def test_http_error_status(server: Any, stream_backend: Any, status: int) -> None:
    result = call(server.base_url, f"http-{status}", timeout=5)
    assert result["http"]["status"] == status
    assert isinstance(result["http"]["error"], dict) and result["http"]["error"].get("message")


# Faults scripted here, on raw sockets


def _reset(conn: socket.socket) -> None:
    conn.sendall(SSE_HEAD + b"\r\n" + FIRST + b'data: {"choices":[{"index":0,"delta":{"content":"cut')
    time.sleep(0.05)
    # SO_LINGER with a zero timeout: close() sends RST instead of FIN.
    linger = struct.pack("HH", 1, 0) if sys.platform == "win32" else struct.pack("ii", 1, 0)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)


def test_tcp_reset_mid_event(stream_backend: Any) -> None:
    seen: list[Any] = []
    with RawServer(_reset) as raw:
        _, exc, elapsed = timed(lambda: call(raw.base_url, on_chunk=seen.append, timeout=5))
    assert isinstance(exc, fastsse.TransportError), exc
    assert exc.code in (pycurl.E_RECV_ERROR, pycurl.E_PARTIAL_FILE, pycurl.E_GOT_NOTHING)
    assert exc.result["choices"][0]["message"]["content"] == "Hello"
    assert len(seen) == 2
    assert elapsed < 5


def _silent(conn: socket.socket) -> None:
    wait_until_client_leaves(conn)


def _silent_after_headers(conn: socket.socket) -> None:
    conn.sendall(SSE_HEAD + b"\r\n" + FIRST)
    wait_until_client_leaves(conn)


def _silent_mid_event(conn: socket.socket) -> None:
    conn.sendall(SSE_HEAD + b"\r\n" + FIRST + b"data: {")
    wait_until_client_leaves(conn)


@pytest.mark.parametrize(
    ("script", "content"),
    [(_silent, None), (_silent_after_headers, "Hello"), (_silent_mid_event, "Hello")],
    ids=["no-answer", "after-headers", "mid-event"],
)
def test_silence_ends_at_the_timeout(stream_backend: Any, script: Any, content: str | None) -> None:
    with RawServer(script) as raw:
        _, exc, elapsed = timed(lambda: call(raw.base_url, timeout=0.5))
    assert isinstance(exc, fastsse.TransportError), exc
    assert exc.code == pycurl.E_OPERATION_TIMEDOUT
    assert elapsed < 0.5 + MARGIN
    choices = exc.result.get("choices") or []
    assert (choices[0]["message"]["content"] if choices else None) == content


def test_idle_timeout_ends_a_silent_stream(stream_backend: Any) -> None:
    # No total timeout: only the idle bound stops the wait once the server goes quiet mid-event.
    with RawServer(_silent_mid_event) as raw:
        _, exc, elapsed = timed(lambda: call(raw.base_url, timeout=None, idle_timeout=1))
    assert isinstance(exc, fastsse.TransportError), exc
    assert exc.code == pycurl.E_OPERATION_TIMEDOUT
    assert 1 <= elapsed < 1 + MARGIN  # the last byte's time against a clock, not curl's speed average
    assert exc.result["choices"][0]["message"]["content"] == "Hello"


def test_first_byte_timeout_ends_an_answer_that_never_starts(stream_backend: Any) -> None:
    # An upstream that accepts and never answers: the first-byte bound ends it, and names itself.
    with RawServer(_silent) as raw:
        _, exc, elapsed = timed(lambda: call(raw.base_url, timeout=None, first_byte_timeout=0.5))
    assert isinstance(exc, fastsse.TransportError), exc
    assert exc.code == pycurl.E_OPERATION_TIMEDOUT and "first_byte_timeout" in str(exc)
    assert 0.5 <= elapsed < 0.5 + MARGIN


def test_first_byte_timeout_leaves_a_started_answer_alone(stream_backend: Any) -> None:
    # Past the status line only idle_timeout counts: a short first-byte bound does not cut it.
    with RawServer(_silent_mid_event) as raw:
        _, exc, elapsed = timed(
            lambda: call(raw.base_url, timeout=None, first_byte_timeout=0.2, idle_timeout=1)
        )
    assert isinstance(exc, fastsse.TransportError), exc
    assert "idle_timeout" in str(exc) and 1 <= elapsed < 1 + MARGIN


def _endless_events(conn: socket.socket) -> None:
    conn.sendall(SSE_HEAD + b"\r\n")
    event = chunk({"content": "x"})
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        conn.sendall(event * 64)


def test_endless_stream_stops_at_the_timeout(stream_backend: Any) -> None:
    seen = 0

    def count(_: Any) -> None:
        nonlocal seen
        seen += 1

    with RawServer(_endless_events) as raw:
        _, exc, elapsed = timed(lambda: call(raw.base_url, on_chunk=count, timeout=1.0))
    assert isinstance(exc, fastsse.TransportError), exc
    assert exc.code == pycurl.E_OPERATION_TIMEDOUT
    assert elapsed < 1.0 + MARGIN
    assert seen > 100
    assert len(exc.result["choices"][0]["message"]["content"]) == seen


def _endless_line(conn: socket.socket) -> None:
    conn.sendall(SSE_HEAD + b"\r\n" + FIRST + b"data: ")
    block = b"y" * 65536
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        conn.sendall(block)


def test_endless_line_with_a_cap_raises_event_too_large(stream_backend: Any) -> None:
    # The cap ends the transfer at once (well before the timeout) and the partial result survives
    # in the chunks on_chunk saw.
    seen: list[Any] = []
    with RawServer(_endless_line) as raw:
        _, exc, elapsed = timed(
            lambda: call(raw.base_url, on_chunk=seen.append, timeout=10, max_event_bytes=1 << 20)
        )
    assert isinstance(exc, fastsse.EventTooLarge), exc
    assert len(seen) == 2
    assert elapsed < 5


def _huge_error_body(conn: socket.socket) -> None:
    body = b'{"error": {"message": "' + b"e" * (20 << 20) + b'"}}'
    conn.sendall(
        b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body)
    )
    conn.sendall(body)


def test_huge_error_body_is_kept_to_a_bound(stream_backend: Any) -> None:
    with RawServer(_huge_error_body) as raw:
        result, exc, elapsed = timed(lambda: call(raw.base_url, timeout=10))
    assert exc is None, exc
    assert elapsed < 10
    assert result["http"]["status"] == 500
    # Only the first MiB of the body is kept, so the JSON is cut and comes back as text.
    assert isinstance(result["http"]["error"], str) and len(result["http"]["error"]) <= 1 << 20


def _broken_chunked(conn: socket.socket) -> None:
    conn.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"%x\r\n" % len(FIRST)
        + FIRST
        + b"\r\nzz-not-hex\r\ndata: x\n\n\r\n"
    )
    wait_until_client_leaves(conn, 5)


def test_broken_chunked_encoding(stream_backend: Any) -> None:
    with RawServer(_broken_chunked) as raw:
        _, exc, elapsed = timed(lambda: call(raw.base_url, timeout=5))
    assert isinstance(exc, fastsse.TransportError), exc
    assert exc.result["choices"][0]["message"]["content"] == "Hello"
    assert elapsed < 5


def _untyped(*writes: bytes) -> Callable[[socket.socket], None]:
    """A 200 answer without a Content-Type, its body sent in the given writes (then closed)."""

    def script(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
        for piece in writes:
            conn.sendall(piece)
            time.sleep(0.05)  # separate reads for curl, so the first may be blanks only

    return script


def test_html_without_a_content_type_is_an_error_body(stream_backend: Any) -> None:
    # No Content-Type: the first byte decides. "<" is a page, never an event stream.
    page = b"<html><body>not an event stream</body></html>\n"
    with RawServer(_untyped(b"\r\n  ", page)) as raw:
        result = call(raw.base_url, timeout=5)
    assert not_a_stream(result) == {"error": "\r\n  " + page.decode(), "status": 200, "retry_after": None}


def test_sse_without_a_content_type_is_still_a_stream(stream_backend: Any) -> None:
    # Blank lines first (held until a real byte arrives), then a comment and the events.
    body = FIRST + chunk({}, "stop") + b"data: [DONE]\n\n"
    with RawServer(_untyped(b"\n", b": ping\n\n" + body[:10], body[10:])) as raw:
        result = call(raw.base_url, timeout=5)
    assert result["choices"][0]["message"]["content"] == "Hello"
    assert result["verdict"]["complete"] is True


def test_blank_body_without_a_content_type_is_an_empty_stream(stream_backend: Any) -> None:
    with RawServer(_untyped(b"\n\n")) as raw:
        result = call(raw.base_url, timeout=5)
    assert result["choices"] == [] and result["verdict"]["done"] is False


def test_json_answer_without_a_content_type(stream_backend: Any) -> None:
    answer = expected_completion(request("plain"))
    with RawServer(_untyped(b"\n" + orjson.dumps(answer))) as raw:
        result = call(raw.base_url, timeout=5)
    assert_folds_to(result, answer)


def _json_answer(conn: socket.socket) -> None:
    body = orjson.dumps(expected_completion(request("long-3000")))
    conn.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
    )
    conn.sendall(body)


def test_json_answer_is_bounded_by_max_event_bytes(stream_backend: Any) -> None:
    size = len(orjson.dumps(expected_completion(request("long-3000"))))
    with RawServer(_json_answer) as raw:
        result = call(raw.base_url, timeout=5, max_event_bytes=size)
        _, exc, _ = timed(lambda: call(raw.base_url, timeout=5, max_event_bytes=size - 1))
    assert_folds_to(result, expected_completion(request("long-3000")))
    assert isinstance(exc, fastsse.EventTooLarge) and exc.limit == size - 1

"""Chunked bodies on both engine drivers: the compiled driver reads them with libcurl's transfer
decoding off and cuts the chunks out itself (one write per socket read), pycurl's lets libcurl
decode them. Every vector here is HTTP/1.1's chunked coding as RFC 9112 section 7.1 and libcurl's
parser (lib/http_chunks.c) read it; the two drivers must give the same fold and the same typed
error (curl's code), losing nothing parsed before a bad byte.
"""

from __future__ import annotations

import concurrent.futures
import gzip
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson
import pycurl
import pytest

import fastsse
from _raw_server import RawServer
from test_engine import h2_server as h2_server  # an HTTP/2 server: no chunking at all

pytestmark = pytest.mark.usefixtures("driver")

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"


def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    body["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    return b"data: " + orjson.dumps(body) + b"\n\n"


EVENTS = [event({"role": "assistant", "content": "Hel"}), event({"content": "lo"}), event({}, "stop")]
STREAM = b"".join(EVENTS) + b"data: [DONE]\n\n"


def framed(pieces: list[bytes], last: bytes = b"0\r\n\r\n") -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + last


def request() -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def call(url: str, **kwargs: Any) -> tuple[dict[str, Any] | None, BaseException | None]:
    kwargs.setdefault("timeout", 10)
    try:
        return fastsse.create_stream(request(), base_url=url, api_key="x", connect_timeout=2, **kwargs), None
    except fastsse.FastSSEError as exc:
        return None, exc


def sends(
    *writes: bytes, head: bytes = HEAD, pause: float = 0.03, hold: float = 0.0
) -> Callable[[socket.socket], None]:
    """A script: the head, then each write as a socket write of its own (TCP_NODELAY, a pause
    between them, so curl reads them apart), then ``hold`` seconds with the connection open."""

    def script(conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.sendall(head + b"\r\n")
        for piece in writes:
            time.sleep(pause)
            conn.sendall(piece)
        time.sleep(hold)

    return script


def content(result: dict[str, Any]) -> str:
    return str(result["choices"][0]["message"]["content"])


def test_framing_libcurl_accepts_folds_the_same() -> None:
    # an extension, a space before it, a bare LF after a size, CRs before the LF after data, a
    # trailer, and bytes after the last chunk (dropped)
    body = (
        b"%x ;name=value\r\n%s\r\n" % (len(EVENTS[0]), EVENTS[0])
        + b"%x\n%s\r\r\n" % (len(EVENTS[1]), EVENTS[1])
        + b"%X\r\n%s\r\n" % (len(EVENTS[2]) + 14, EVENTS[2] + b"data: [DONE]\n\n")
        + b"0\r\nX-Trailer: 1\r\n\r\nleft over"
    )
    with RawServer(sends(body)) as raw:
        result, exc = call(raw.base_url)
    assert exc is None, exc
    assert result is not None
    assert content(result) == "Hello" and result["verdict"]["complete"] is True


@pytest.mark.parametrize(
    ("bad", "code"),
    [
        pytest.param(b"zz\r\nhello\r\n", pycurl.E_RECV_ERROR, id="non-hex"),
        pytest.param(b"-5\r\nhello\r\n", pycurl.E_RECV_ERROR, id="negative"),
        pytest.param(b"1ffffffffffffffff\r\nhello\r\n", pycurl.E_RECV_ERROR, id="17-digits"),
        pytest.param(b"ffffffffffffffff\r\nhello\r\n", pycurl.E_RECV_ERROR, id="over-2^63"),
        pytest.param(b"5\r\nhelloXX5\r\nworld\r\n", pycurl.E_RECV_ERROR, id="missing-crlf"),
        pytest.param(b"40\r\ndata: short\n\n", pycurl.E_PARTIAL_FILE, id="size-past-the-end"),
        pytest.param(b"0\r\nX-Trailer: 1\r\n", pycurl.E_PARTIAL_FILE, id="trailer-never-ended"),
    ],
)
def test_bad_chunking_is_curls_error_and_keeps_what_came_before(bad: bytes, code: int) -> None:
    # the good chunks and the bad bytes in one read, then in two: the bad byte's read, or the one
    # before it, is cut at the bad byte
    good = framed(EVENTS[:2], last=b"")
    for writes in ((good + bad,), (good, bad)):
        with RawServer(sends(*writes)) as raw:
            result, exc = call(raw.base_url)
        assert isinstance(exc, fastsse.TransportError), (writes, result)
        assert exc.code == code
        assert content(exc.result) == "Hello"  # nothing parsed before the bad byte is lost
        assert exc.result["verdict"]["complete"] is False


def test_a_chunk_header_split_at_every_byte() -> None:
    body = framed([EVENTS[0], EVENTS[1] + EVENTS[2], b"data: [DONE]\n\n"])
    start = len(EVENTS[0]) + 4  # the second chunk's size line, its data's start and its end
    cuts = list(range(start - 2, start + 8)) + list(range(len(body) - 25, len(body)))
    for cut in cuts:
        with RawServer(sends(body[:cut], body[cut:], pause=0.02)) as raw:
            result, exc = call(raw.base_url)
        assert exc is None, (cut, exc)
        assert result is not None and content(result) == "Hello" and result["verdict"]["complete"], cut


def test_every_byte_its_own_read() -> None:
    body = framed([EVENTS[0], EVENTS[1], EVENTS[2] + b"data: [DONE]\n\n"])
    with RawServer(sends(*(body[i : i + 1] for i in range(len(body))), pause=0.001)) as raw:
        result, exc = call(raw.base_url)
    assert exc is None, exc
    assert result is not None and content(result) == "Hello" and result["verdict"]["complete"]


def test_a_gibibyte_chunk_announced_and_never_sent_ends_on_the_idle_timeout() -> None:
    body = framed(EVENTS[:2], last=b"") + b"40000000\r\n" + EVENTS[2][:10]
    with RawServer(sends(body, hold=4.0)) as raw:
        start = time.monotonic()
        result, exc = call(raw.base_url, timeout=None, idle_timeout=0.5)
        took = time.monotonic() - start
    assert isinstance(exc, fastsse.TransportError), result
    assert exc.code == pycurl.E_OPERATION_TIMEDOUT
    assert content(exc.result) == "Hello"
    assert took < 3.5  # the idle timeout, not the server's close


def test_transfer_coding_other_than_chunked_is_curls_61() -> None:
    gz = gzip.compress(STREAM)
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: gzip, chunked\r\n"
    with RawServer(sends(framed([gz]), head=head)) as raw:
        result, exc = call(raw.base_url)
    assert isinstance(exc, fastsse.TransportError), result
    assert exc.code == pycurl.E_BAD_CONTENT_ENCODING
    assert "gzip" in str(exc)


@pytest.mark.parametrize("first", ["content-encoding", "transfer-encoding"])
def test_a_compressed_chunked_body_is_decoded(first: str) -> None:
    # libcurl decodes the content (a proxy that compressed anyway): it needs the chunks cut first
    gz = gzip.compress(STREAM)
    lines = [b"Content-Encoding: gzip\r\n", b"Transfer-Encoding: chunked\r\n"]
    if first == "transfer-encoding":
        lines.reverse()
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n" + b"".join(lines)
    with RawServer(sends(framed([gz[:20], gz[20:]]), head=head)) as raw:
        result, exc = call(raw.base_url)
    assert exc is None, exc
    assert result is not None and content(result) == "Hello" and result["verdict"]["complete"]


def test_a_body_with_a_content_length_is_not_dechunked() -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n" % len(STREAM)
    with RawServer(sends(STREAM[:30], STREAM[30:], head=head)) as raw:
        result, exc = call(raw.base_url)
    assert exc is None, exc
    assert result is not None and content(result) == "Hello" and result["verdict"]["complete"]


def test_a_hold_refuses_a_read_of_many_chunks_and_gets_it_again_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a slow consumer of the relayed bytes: the read after the first is refused (curl pauses) and
    # handed over again later; cut from where it began, its chunks come out once, in order
    from fastsse.client import _response

    words = [event({"content": f" w{i}"}) for i in range(12)]
    rest = framed(words[:5], last=b"") + b"%x\r\n%s" % (len(words[5]), words[5][:7])
    tail = words[5][7:] + b"\r\n" + framed([*words[6:], EVENTS[2], b"data: [DONE]\n\n"])
    pieces: list[bytes] = []
    answers: list[Any] = []
    write = _response.Response.write

    def counted(self: Any, data: bytes) -> Any:
        answers.append(write(self, data))
        return answers[-1]

    def on_bytes(piece: bytes) -> Any:
        pieces.append(piece)
        if len(pieces) == 1:
            future: concurrent.futures.Future[None] = concurrent.futures.Future()
            threading.Timer(0.3, future.set_result, (None,)).start()
            return future
        return None

    monkeypatch.setattr(_response.Response, "write", counted)
    with RawServer(sends(framed([EVENTS[0]], last=b""), rest, tail, pause=0.05)) as raw:
        result, exc = call(raw.base_url, on_chunk=on_bytes, format="passthrough")
    assert exc is None, exc
    assert result is not None and result["verdict"]["complete"] is True
    assert _response.WRITEFUNC_PAUSE in answers  # the read after the hold was refused
    assert b"".join(pieces) == EVENTS[0] + b"".join(words) + EVENTS[2] + b"data: [DONE]\n\n"


def test_chunks_that_share_a_read_share_its_stamp(driver: str) -> None:
    # ten events, each its own HTTP chunk, in one socket write: one read on the compiled driver
    # (one stamp for all), one write per chunk on pycurl's (libcurl's decoding calls it per chunk)
    words = [event({"content": f" w{i}"}) for i in range(10)]
    with RawServer(
        sends(framed([EVENTS[0]], last=b""), framed([*words, EVENTS[2], b"data: [DONE]\n\n"]))
    ) as raw:
        result, exc = call(raw.base_url, timing=True)
    assert exc is None, exc
    assert result is not None and result["verdict"]["complete"]
    token_reads = result["timing"]["token_reads"]
    assert len(token_reads) == 11
    if driver == "compiled":
        assert len(set(token_reads[1:])) == 1
    else:
        assert len(set(token_reads[1:])) == 10


def test_http2_has_no_chunking_to_cut(h2_server: Any) -> None:
    base_url, seen = h2_server
    with fastsse.Client(base_url=base_url, api_key="x", http2=True, timeout=30) as client:
        outcomes = client.run([request()] * 3)
    for outcome in outcomes:
        assert isinstance(outcome, dict), outcome
        assert content(outcome) == " t0 t1 t2 t3 t4" and outcome["verdict"]["complete"] is True
    assert {version for _, version in seen} == {"2"}


def test_load_counts_chunks_that_came_in_one_read(driver: str) -> None:
    # docs/load.md: events that came in one read share its stamp; ten HTTP chunks per server
    # write are one read on the compiled driver, ten writes on pycurl's
    from fastsse import load
    from fastsse.load import spawn_scripted_server

    model = "events_per_write=10,chunk_per_event=1"
    with spawn_scripted_server(ttft_ms=10, itl_ms=5, chunks=40, loop="asyncio") as server:
        doc = load.run(
            load.Config(url=server.base_url, model=model, requests=2, concurrency=2, loop="asyncio")
        )
    summary = doc["summary"]
    assert summary["outcomes"] == {"complete": 2} and summary["token_chunks"] == 80
    if driver == "compiled":
        assert summary["token_chunks_sharing_a_read"] >= 60  # 9 of each 10 share their read
    else:
        assert summary["token_chunks_sharing_a_read"] == 0

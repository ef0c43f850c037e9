"""Relay(max_event_bytes=...) (and so Normalizer): the Decoder's limit rules and a memory bound.

An endless line, endless ``data:`` lines or endless ``id:`` lines must not grow a gateway's relay
with the input. With a limit the relay, like ChatStream, stops at the oversized event: the write
that met it raises EventTooLarge, whose ``events`` holds the bytes that write had to send before
it, and nothing more is sent (a relayed answer with a hole in it must not look finished). Memory is
measured with tracemalloc while tens of MiB go through; one test reads from a raw socket server.
Written first for the pure-Python Normalizer (issue 12, point 9), kept for the Relay that replaced it.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

import fastsse
from _memory import traced_peak
from _raw_server import RawServer
from _sse_helpers import chunkings
from fastsse import EventTooLarge, Normalizer
from fastsse.sse._decoder_py import Decoder as UnlimitedDecoder

LIMIT = 64


ROLE = (
    b'data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m",'
    b'"choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}\n\n'
)


def chunk(content: str) -> bytes:
    body = {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    body["choices"] = [{"index": 0, "delta": {"content": content}, "finish_reason": None}]
    return b"data: " + orjson.dumps(body) + b"\n\n"


def run(relay: Any, pieces: list[bytes]) -> tuple[bytes, int]:
    """Feed ``pieces``; return all the output (close and the error's bytes included) and how many
    writes raised."""
    out, raised = [], 0
    for piece in pieces:
        try:
            out.append(relay.write(piece))
        except EventTooLarge as exc:
            assert len(exc.events) == 1 and isinstance(exc.events[0], bytes)
            out.append(exc.events[0])
            raised += 1
    out.append(relay.close())
    return b"".join(out), raised


CASES = {
    "long-line": chunk("a") + b"data: " + b"x" * 300 + b"\n\n" + chunk("b"),
    "long-data": chunk("a") + b"data: xxxxxxxxxxxxxxx\n" * 20 + b"\n" + chunk("b"),
    "long-comment": chunk("a") + b": " + b"c" * 300 + b"\n" + chunk("b"),
    "crlf": (chunk("a") + b"data: " + b"x" * 300 + b"\n\n" + chunk("b")).replace(b"\n", b"\r\n"),
    "cr": (chunk("a") + b"data: " + b"x" * 300 + b"\n\n" + chunk("b")).replace(b"\n", b"\r"),
    "unterminated": chunk("a") + b"data: " + b"x" * 300,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_stops_at_the_oversized_event_whatever_the_chunking(backend: Any, name: str) -> None:
    data = CASES[name]
    for how, pieces in chunkings(data, randoms=6):
        if how.startswith("split@") and int(how[6:]) % 7:
            continue  # every 7th two-way split is plenty
        relay = backend.Relay(max_event_bytes=LIMIT * 4)
        out, raised = run(relay, pieces)
        assert raised == 1, how
        contents = [
            orjson.loads(e.data)["choices"][0]["delta"]["content"] for e in UnlimitedDecoder().feed(out)
        ]
        assert contents == ["a"], how  # "b" came after the hole: never sent, no [DONE] either
        assert relay.verdict.too_large and not relay.verdict.complete, how


def test_bytes_before_the_dropped_event_are_kept(backend: Any) -> None:
    relay = backend.Relay(max_event_bytes=1 << 10)
    first = relay.write(ROLE + chunk("Hel"))
    with pytest.raises(EventTooLarge) as info:
        relay.write(chunk("lo") + b"data: " + b"x" * 5000 + b"\n\n" + chunk("!"))
    assert info.value.events == [chunk("lo")]
    assert relay.write(chunk("more")) == b"" and relay.close() == b""
    assert first == ROLE + chunk("Hel") and relay.text() == "Hello"


def test_a_stream_that_ends_inside_a_dropped_event_is_truncated(backend: Any) -> None:
    relay = backend.Relay(max_event_bytes=200)
    out = relay.write(chunk("x"))
    with pytest.raises(EventTooLarge):
        relay.write(b"data: " + b"y" * 300 + b"\n")
    out += relay.close()
    assert relay.truncated is True and b"[DONE]" not in out


@pytest.mark.parametrize("bad", [0, -1])
def test_limit_must_be_positive(backend: Any, bad: int) -> None:
    with pytest.raises(ValueError, match="max_event_bytes"):
        backend.Relay(max_event_bytes=bad)


@pytest.mark.parametrize("bad", [1.5, "64"])
def test_limit_must_be_an_int(backend: Any, bad: Any) -> None:
    with pytest.raises(TypeError):
        backend.Relay(max_event_bytes=bad)


def repeated(piece: bytes, total: int) -> Iterator[bytes]:
    for _ in range(total // len(piece)):
        yield piece


@pytest.mark.parametrize(
    ("head", "pattern", "total", "limit"),
    [
        (b"data: ", b"y" * (64 << 10), 32 << 20, 1 << 20),  # one endless line
        (b"", (b"data: " + b"x" * 58 + b"\n") * 16, 4 << 20, 256 << 10),  # data lines, no blank line
        (b"", b"id: 1\n" * 2048, 512 << 10, 32 << 10),  # the case: endless id lines
        (b": ", b"c" * (64 << 10), 32 << 20, 1 << 20),  # an endless comment
    ],
    ids=["endless-line", "endless-data", "endless-id", "endless-comment"],
)
def test_memory_stays_bounded(backend: Any, head: bytes, pattern: bytes, total: int, limit: int) -> None:
    relay = backend.Relay(max_event_bytes=limit)
    relay.write(chunk("before"))
    raised = 0
    with traced_peak() as peak:
        for piece in [head, *repeated(pattern, total)]:
            try:
                relay.write(piece)
            except EventTooLarge:
                raised += 1
    # The capped line or event, plus one input piece and what is made from it: a bound, not the input.
    assert peak.bytes < 5 * limit + 40 * len(pattern), peak.bytes
    endless_ids = head == b"" and pattern.startswith(b"id")
    assert raised == (0 if endless_ids else 1)
    # id lines hold nothing, so the stream goes on; after an oversized event the relay has stopped
    assert relay.write(b"\n\n" + chunk("after")).count(b"after") == (1 if endless_ids else 0)


def test_endless_id_lines_without_a_limit_stay_small() -> None:
    # No limit: id lines add nothing to an event, so they must not add memory either: the peak
    # after 4x the input is the peak of one piece's line objects, as after the first quarter.
    piece = b"id: 1\n" * 512
    peaks = []
    for writes in (25, 100):
        relay = fastsse.Relay()
        with traced_peak() as peak:
            for _ in range(writes):
                relay.write(piece)
        peaks.append(peak.bytes)
    assert peaks[1] < peaks[0] * 1.5 + 4096, peaks


def _endless_line(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
    first = chunk("Hel") + chunk("lo") + b"data: "
    conn.sendall(b"%x\r\n%s\r\n" % (len(first), first))
    block = b"y" * 65536
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        conn.sendall(b"%x\r\n%s\r\n" % (len(block), block))


def test_gateway_relay_from_a_real_server() -> None:
    # A gateway: upstream bytes (httpx from a raw server on 127.0.0.1) through the Relay.
    relay = fastsse.Relay(max_event_bytes=1 << 20)
    sent: list[bytes] = []
    start = time.monotonic()
    with (
        RawServer(_endless_line) as raw,
        httpx.Client(timeout=10) as client,
        client.stream("POST", raw.base_url + "/chat/completions", content=b"{}") as response,
    ):
        with pytest.raises(EventTooLarge) as info:
            for piece in response.iter_raw():
                sent.append(relay.write(piece))
        sent.extend(info.value.events)
    sent.append(relay.close())
    assert time.monotonic() - start < 10
    texts = [
        orjson.loads(e.data)["choices"][0]["delta"]["content"]
        for e in UnlimitedDecoder().feed(b"".join(sent))
    ]
    assert texts == ["Hel", "lo"]
    assert relay.truncated is True and not relay.verdict.complete


def test_the_deprecated_name_keeps_the_limit() -> None:
    # the event is over the limit before anything was sent: the one bytes to send is empty
    old = Normalizer(max_event_bytes=10)
    with pytest.raises(EventTooLarge) as info:
        old.write(b"data: " + b"x" * 20 + b"\n\n")
    assert (info.value.limit, info.value.events) == (10, [b""])
    assert old.verdict.too_large and not old.verdict.complete

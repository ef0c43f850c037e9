"""Normalizer(max_event_bytes=...): the Decoder's limit rules and a memory bound (issue 12, point 9).

An endless line, endless ``data:`` lines or endless ``id:`` lines used to grow the normaliser as fast
as the input. With a limit it drops the oversized event up to the next blank line, raises
EventTooLarge once the rest of the call's input is processed, and loses none of the repaired bytes
around it (the next ``write`` or ``close`` returns them). Which events survive and how many times
it raises is checked against each backend's Decoder on the same bytes and chunkings; memory is
measured with tracemalloc while tens of MiB go through; one test reads from a raw socket server.
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
from fastsse._decoder_py import Decoder as UnlimitedDecoder

LIMIT = 64


def chunk(content: str) -> bytes:
    body = {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    body["choices"] = [{"index": 0, "delta": {"content": content}, "finish_reason": None}]
    return b"data: " + orjson.dumps(body) + b"\n\n"


def run(norm: Normalizer, pieces: list[bytes]) -> tuple[bytes, int]:
    """Feed ``pieces``; return all the output (close included) and how many writes raised."""
    out, raised = [], 0
    for piece in pieces:
        try:
            out.append(norm.write(piece))
        except EventTooLarge as exc:
            assert exc.limit == norm.limit and exc.events == []
            raised += 1
    out.append(norm.close())
    return b"".join(out), raised


def decoded(backend: Any, pieces: list[bytes], limit: int) -> tuple[list[str], int]:
    decoder, events, raised = backend.Decoder(max_event_bytes=limit), [], 0
    for piece in pieces:
        try:
            events += decoder.feed(piece)
        except EventTooLarge as exc:
            events += exc.events
            raised += 1
    events += decoder.close()
    return [e.data for e in events], raised


# Non-JSON payloads pass through the normaliser unchanged, so its output events can be compared
# with the Decoder's one for one.
CASES = {
    "long-line": b"data: a\n\ndata: " + b"x" * 100 + b"\n\ndata: b\n\n",
    "long-data": b"data: a\n\n" + b"data: xxxxxxxxxxxxxxx\n" * 8 + b"\ndata: b\n\n",
    "long-comment": b": " + b"c" * 80 + b"\ndata: a\n\ndata: b\n\n",
    "long-id": b"data: a\n\nid: " + b"7" * 90 + b"\ndata: b\n\ndata: c\n\n",
    "exact": b"data: " + b"y" * (LIMIT - 6) + b"\n\ndata: " + b"z" * (LIMIT - 5) + b"\n\ndata: b\n\n",
    "two-lines-exact": b"data: " + b"y" * 28 + b"\ndata: " + b"y" * 29 + b"\n\ndata: b\n\n",
    "crlf": b"data: a\r\n\r\ndata: " + b"x" * 100 + b"\r\n\r\ndata: b\r\n\r\n",
    "cr": b"data: a\r\rdata: " + b"x" * 100 + b"\r\rdata: b\r\r",
    "unterminated": b"data: a\n\ndata: " + b"x" * 100,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_events_and_errors_as_the_decoder(backend: Any, name: str) -> None:
    data = CASES[name]
    for how, pieces in chunkings(data, randoms=6):
        if how.startswith("split@") and int(how[6:]) % 7:
            continue  # every 7th two-way split is plenty
        out, raised = run(Normalizer(max_event_bytes=LIMIT), pieces)
        events = [e.data for e in UnlimitedDecoder().feed(out)]
        want, want_raised = decoded(backend, pieces, LIMIT)
        assert [e for e in events if e != "[DONE]"] == want, how
        assert raised == want_raised, how


def test_output_around_the_dropped_event_is_kept() -> None:
    norm = Normalizer(max_event_bytes=1 << 10)
    first = norm.write(chunk("Hel"))
    with pytest.raises(EventTooLarge):
        norm.write(chunk("lo") + b"data: " + b"x" * 5000 + b"\n\n" + chunk("!"))
    rest = norm.write(b"") + norm.close()
    contents = [
        orjson.loads(e.data)["choices"][0]["delta"].get("content")
        for e in UnlimitedDecoder().feed(first + rest)
        if e.data != "[DONE]" and orjson.loads(e.data)["choices"]
    ]
    assert contents == ["Hel", "lo", "!", None]  # the last one is the added final chunk
    assert rest.endswith(b"data: [DONE]\n\n")


def test_a_stream_that_ends_inside_a_dropped_event_is_truncated() -> None:
    norm = Normalizer(max_event_bytes=100)
    out = norm.write(b"data: x\n\n")
    with pytest.raises(EventTooLarge):
        norm.write(b"data: " + b"y" * 200 + b"\n")
    out += norm.close()
    assert norm.truncated is True and b"[DONE]" not in out


@pytest.mark.parametrize("bad", [0, -1])
def test_limit_must_be_positive(bad: int) -> None:
    with pytest.raises(ValueError, match="max_event_bytes"):
        Normalizer(max_event_bytes=bad)


@pytest.mark.parametrize("bad", [1.5, "64"])
def test_limit_must_be_an_int(bad: Any) -> None:
    with pytest.raises(TypeError):
        Normalizer(max_event_bytes=bad)


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
def test_memory_stays_bounded(head: bytes, pattern: bytes, total: int, limit: int) -> None:
    norm = Normalizer(max_event_bytes=limit)
    norm.write(chunk("before"))
    raised = 0
    with traced_peak() as peak:
        for piece in [head, *repeated(pattern, total)]:
            try:
                norm.write(piece)
            except EventTooLarge:
                raised += 1
    # The capped line or event (data lines cost their object overhead too, ~1.7x for 58-byte
    # lines), plus one input piece and the line objects made from it: a bound, not the input.
    assert peak.bytes < 5 * limit + 40 * len(pattern), peak.bytes
    assert raised == (0 if head == b"" and pattern.startswith(b"id") else 1)
    assert norm.write(b"\n\n" + chunk("after")).count(b"after") == 1


def test_endless_id_lines_without_a_limit_stay_small() -> None:
    # No limit: id lines add nothing to an event, so they must not add memory either: the peak
    # after 4x the input is the peak of one piece's line objects, as after the first quarter.
    piece = b"id: 1\n" * 512
    peaks = []
    for writes in (25, 100):
        norm = Normalizer()
        with traced_peak() as peak:
            for _ in range(writes):
                norm.write(piece)
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
    # A gateway: upstream bytes (httpx from a raw server on 127.0.0.1) through the Normalizer.
    norm = Normalizer(max_event_bytes=1 << 20)
    sent: list[bytes] = []
    start = time.monotonic()
    with (
        RawServer(_endless_line) as raw,
        httpx.Client(timeout=10) as client,
        client.stream("POST", raw.base_url + "/chat/completions", content=b"{}") as response,
        pytest.raises(EventTooLarge),
    ):
        for piece in response.iter_raw():
            sent.append(norm.write(piece))
    sent.append(norm.close())
    assert time.monotonic() - start < 10
    texts = [
        orjson.loads(e.data)["choices"][0]["delta"]["content"]
        for e in UnlimitedDecoder().feed(b"".join(sent))
    ]
    assert texts == ["Hel", "lo"]
    assert norm.truncated is True


def test_normalizer_is_public_with_the_limit() -> None:
    assert fastsse.Normalizer is Normalizer
    assert Normalizer(max_event_bytes=10).limit == 10

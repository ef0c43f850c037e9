"""``fastsse.EventSource`` / ``AsyncEventSource`` (client/_source.py, the GET and events format of
the engine): reconnection, Last-Event-ID, the WHATWG stop rules and the no-duplicate rule, judged
by an independent raw server's request log and arrival times. Every case on both backends; the
cut stream on both drivers too."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import typing
from collections.abc import Callable
from typing import Any

import pytest

import fastsse
from _raw_server import RawServer
from fastsse.client import _retry
from fastsse.client._source import DEDUPE_IDS

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
CHUNKED = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
NO_CONTENT = b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n"
MODES = ("sync", "async")


def event(n: int | str, data: str | None = None) -> bytes:
    return b"id: %s\ndata: %s\n\n" % (str(n).encode(), (data or f"e{n}").encode())


def status(code: int, *headers: bytes, body: bytes = b"no", kind: bytes = b"text/plain") -> bytes:
    head = b"HTTP/1.1 %d X\r\nContent-Type: %s\r\nConnection: close\r\n" % (code, kind)
    for line in headers:
        head += line + b"\r\n"
    return head + b"Content-Length: %d\r\n\r\n" % len(body) + body


def replies(*items: bytes | Callable[[socket.socket], None]) -> Callable[[socket.socket], None]:
    """A script that sends the n-th reply to the n-th request (the last one from then on)."""
    count = [0]

    def script(conn: socket.socket) -> None:
        reply = items[min(count[0], len(items) - 1)]
        count[0] += 1
        if callable(reply):
            reply(conn)
        else:
            conn.sendall(reply)

    return script


def url(raw: RawServer) -> str:
    return f"http://127.0.0.1:{raw.port}/stream"


def last_ids(raw: RawServer) -> list[str | None]:
    """The Last-Event-ID each request carried (None: none), in arrival order."""
    return [dict(raw.headers(i)).get("last-event-id") for i in range(len(raw.requests))]


def gaps(raw: RawServer) -> list[float]:
    return [b - a for a, b in zip(raw.arrivals, raw.arrivals[1:], strict=False)]


def read(mode: str, address: str, **options: Any) -> tuple[list[Any], BaseException | None, Any]:
    """``(events, the exception that ended the source or None, the source)``, read by
    EventSource (``mode="sync"``) or AsyncEventSource."""
    got: list[Any] = []
    if mode == "sync":
        source = fastsse.EventSource(address, **options)
        try:
            with source:
                for item in source:
                    got.append(item)
        except Exception as exc:
            return got, exc, source
        return got, None, source

    async def main() -> tuple[list[Any], BaseException | None, Any]:
        source = fastsse.AsyncEventSource(address, **options)
        try:
            async with source:
                async for item in source:
                    got.append(item)
        except Exception as exc:
            return got, exc, source
        return got, None, source

    return asyncio.run(main())


def pairs(events: list[Any]) -> list[tuple[str, str]]:
    return [(e.id, e.data) for e in events]


def closed_cleanly(source: Any) -> bool:
    engine = source._engine
    return bool(engine.closed and not engine.active and not engine.pool and not engine.delayed)


# the rules, alone


def test_the_reconnect_wait() -> None:
    wait = _retry.reconnect_wait
    assert wait(None, 0, 30) == _retry.RECONNECT_DEFAULT  # no retry: from the server
    assert wait(250, 0, 30) == 0.25  # after events: the server's reconnection time, as it is
    assert wait(0, 0, 30) == _retry.RECONNECT_FLOOR  # retry: 0 is not a loop
    assert wait(999_999_999, 0, 30) == 30 and wait(999_999_999, 0, 2.5) == 2.5  # the cap
    # connections that delivered nothing: 0.5, 1, 2, 4 ... s, drawn in the upper half, capped
    assert [wait(0, n, 30, rand=lambda: 0.0) for n in (1, 2, 3, 4, 5)] == [0.5, 1, 2, 4, 8]
    assert [wait(0, n, 30, rand=lambda: 1.0) for n in (1, 2, 3)] == [0.25, 0.5, 1]
    assert 15 <= wait(0, 50, 30) <= 30
    assert wait(5000, 1, 30, rand=lambda: 0.0) == 5.0  # the server's longer delay still holds
    # a Retry-After is waited for in full, up to the cap
    assert wait(0, 1, 30, retry_after=7.0) == 7.0 and wait(0, 1, 2.0, retry_after=7.0) == 2.0


# delivery across reconnections


def test_a_stream_cut_every_3_events_delivers_each_once_in_order(stream_backend: Any, driver: str) -> None:
    # each connection: 3 events, then half of the next and a cut (no end of the chunked body)
    def cut_after(first: int) -> Callable[[socket.socket], None]:
        def script(conn: socket.socket) -> None:
            body = (b"retry: 10\n\n" if first == 1 else b"") + b"".join(
                event(n) for n in range(first, first + 3)
            )
            body += b"id: %d\ndata: half of it" % (first + 3)
            conn.sendall(CHUNKED + b"%X\r\n%s\r\n" % (len(body), body))

        return script

    for mode in MODES:
        with RawServer(
            replies(cut_after(1), cut_after(4), cut_after(7), HEAD + event(10), NO_CONTENT)
        ) as raw:
            events, error, source = read(mode, url(raw))
        assert error is None, error
        assert pairs(events) == [(str(n), f"e{n}") for n in range(1, 11)]
        assert [e.retry for e in events] == [10] * 10  # the reconnection time outlives its connection
        assert last_ids(raw) == [None, "3", "6", "9", "10"]
        assert (source.reconnects, source.dropped, source.last_event_id, source.retry) == (4, 0, "10", 10)
        assert all(gap >= 0.09 for gap in gaps(raw)), gaps(raw)  # the floor, not an instant retry
        for i in range(len(raw.requests)):
            head = dict(raw.headers(i))
            assert raw.requests[i].startswith(b"GET /stream HTTP/1.1\r\n")
            assert head["accept"] == "text/event-stream" and head["cache-control"] == "no-cache"
            assert "content-length" not in head  # a GET, with no body
        assert closed_cleanly(source)


@pytest.mark.parametrize("mode", MODES)
def test_headers_and_a_known_last_event_id_go_out_from_the_first_connection(
    stream_backend: Any, mode: str
) -> None:
    with RawServer(replies(HEAD + b"retry: 10\n\n" + event(41, "old") + event(42), NO_CONTENT)) as raw:
        events, error, source = read(
            mode,
            url(raw),
            headers={"Authorization": "Bearer k", "Accept": "text/event-stream; q=1"},
            last_event_id="41",
        )
    assert error is None and pairs(events) == [("42", "e42")] and source.dropped == 1
    assert last_ids(raw) == ["41", "42"]
    head = dict(raw.headers(0))
    assert head["authorization"] == "Bearer k" and head["accept"] == "text/event-stream; q=1"
    assert [name for name, _ in raw.headers(0)].count("accept") == 1  # the caller's replaced ours


def test_a_clean_end_reconnects_too(stream_backend: Any) -> None:
    with RawServer(replies(HEAD + b"retry: 10\n\n" + event(1), HEAD + event(2), NO_CONTENT)) as raw:
        events, error, _ = read("sync", url(raw))
    assert error is None and pairs(events) == [("1", "e1"), ("2", "e2")] and last_ids(raw) == [None, "1", "2"]


@pytest.mark.parametrize("mode", MODES)
def test_ids_going_back_are_not_delivered_twice(stream_backend: Any, mode: str) -> None:
    first = HEAD + b"retry: 10\n\n" + event(1) + event(2) + event(3) + b"data: c2\n\n"  # c2 has id 3 too
    # the server replays from 2 (an off-by-one), with c2, then an id never seen that sorts lower
    again = HEAD + event(2) + event(3) + b"data: c2\n\n" + event(0, "zero") + event(4)
    with RawServer(replies(first, again, NO_CONTENT)) as raw:
        events, error, source = read(mode, url(raw))
    assert error is None
    assert pairs(events) == [("1", "e1"), ("2", "e2"), ("3", "e3"), ("3", "c2"), ("0", "zero"), ("4", "e4")]
    assert source.dropped == 3 and last_ids(raw) == [None, "3", "4"]


@pytest.mark.parametrize("mode", MODES)
def test_an_event_before_any_id_of_its_connection_keeps_the_id_in_effect(
    stream_backend: Any, mode: str
) -> None:
    # WHATWG: the last event id outlives the connection; such an event is new, not a replay of id 5
    first = HEAD + b"retry: 10\n\n" + event(5)
    then = HEAD + b"data: after\n\n" + event(6) + b"id:\ndata: reset\n\n"  # an empty id resets it
    with RawServer(replies(first, then, NO_CONTENT)) as raw:
        events, error, source = read(mode, url(raw))
    assert error is None and source.dropped == 0
    assert pairs(events) == [("5", "e5"), ("5", "after"), ("6", "e6"), ("", "reset")]
    assert last_ids(raw) == [None, "5", None]  # no id in effect: no Last-Event-ID


@pytest.mark.parametrize("mode", MODES)
def test_an_id_with_nul_is_ignored(stream_backend: Any, mode: str) -> None:
    body = HEAD + b"retry: 10\n\n" + event(5) + b"id: 6\x00x\ndata: b\n\n" + b"id: 7\x00\n\n"
    with RawServer(replies(body, NO_CONTENT)) as raw:
        events, error, source = read(mode, url(raw))
    assert error is None and pairs(events) == [("5", "e5"), ("5", "b")]  # the id in effect before it
    assert source.dropped == 0 and last_ids(raw) == [None, "5"]


def test_an_id_only_block_moves_the_last_event_id(stream_backend: Any) -> None:
    with RawServer(replies(HEAD + b"retry: 10\n\n" + event(1) + b"id: 9\n\n", NO_CONTENT)) as raw:
        events, _, source = read("sync", url(raw))
    assert pairs(events) == [("1", "e1")] and last_ids(raw) == [None, "9"] and source.last_event_id == "9"


def test_a_non_ascii_id_goes_back_as_utf8(stream_backend: Any, driver: str) -> None:
    with RawServer(replies(HEAD + b"retry: 10\n\n" + event("\u00e9t\u00e9"), NO_CONTENT)) as raw:
        events, error, _ = read("sync", url(raw))
    assert error is None and events[0].id == "\u00e9t\u00e9"
    assert b"\r\nLast-Event-ID: \xc3\xa9t\xc3\xa9\r\n" in raw.requests[1]


def test_the_memory_of_ids_is_bounded(stream_backend: Any) -> None:
    many = HEAD + b"retry: 10\n\n" + b"".join(event(n) for n in range(DEDUPE_IDS + 1))
    replay = HEAD + event(1) + event(0)  # 1 is remembered, 0 forgotten (it was the oldest)
    with RawServer(replies(many, replay, NO_CONTENT)) as raw:
        events, error, source = read("sync", url(raw))
    assert error is None and len(events) == DEDUPE_IDS + 2 and events[-1].id == "0" and source.dropped == 1


# the server's retry: and a bounded rate


@pytest.mark.parametrize("mode", MODES)
def test_retry_0_is_not_a_loop(stream_backend: Any, mode: str) -> None:
    conns = [HEAD + b"retry: 0\n\n" + event(n) for n in range(1, 5)]
    with RawServer(replies(*conns, NO_CONTENT)) as raw:
        events, error, source = read(mode, url(raw))
    assert error is None and len(events) == 4 and source.retry == 0
    assert all(gap >= _retry.RECONNECT_FLOOR - 0.01 for gap in gaps(raw)), gaps(raw)


@pytest.mark.parametrize("mode", MODES)
def test_a_huge_retry_is_capped_by_max_retry_delay(stream_backend: Any, mode: str) -> None:
    with RawServer(replies(HEAD + b"retry: 999999999\n\n" + event(1), NO_CONTENT)) as raw:
        events, error, source = read(mode, url(raw), max_retry_delay=0.3)
    assert error is None and len(events) == 1 and source.retry == 999_999_999
    (gap,) = gaps(raw)
    assert 0.28 <= gap < 3, gap


@pytest.mark.parametrize("mode", MODES)
def test_an_endless_run_of_empty_answers_backs_off(stream_backend: Any, mode: str) -> None:
    # 200 then close, for ever, with retry: 0: the backoff (0.5 s, 1 s, 2 s ... in their upper
    # halves) bounds the rate; the source's own timeout ends it
    started = time.monotonic()
    with RawServer(replies(HEAD + b"retry: 0\n\n")) as raw:
        events, error, source = read(mode, url(raw), timeout=3.0)
    took = time.monotonic() - started
    assert events == [] and isinstance(error, fastsse.TransportError) and error.code == 28
    assert "timeout" in str(error) and took < 6
    assert 2 <= len(raw.requests) <= 5, gaps(raw)
    spaced = gaps(raw)
    assert all(gap >= 0.24 * 2**i for i, gap in enumerate(spaced)), spaced
    assert source.reconnects == len(raw.requests) - 1


def test_max_reconnects_bounds_the_connections(stream_backend: Any) -> None:
    with RawServer(replies(HEAD + b"retry: 0\n\n" + event(1), HEAD + event(2), HEAD + event(3))) as raw:
        events, error, source = read("sync", url(raw), max_reconnects=1)
    assert error is None and len(events) == 2 and len(raw.requests) == 2 and source.reconnects == 1
    with RawServer(replies(status(503, b"Retry-After: 0"))) as raw:
        _, error, source = read("sync", url(raw), max_reconnects=2, max_retry_delay=0.1)
    assert isinstance(error, fastsse.HTTPStatusError) and error.status == 503 and len(raw.requests) == 3


# the stop rules


@pytest.mark.parametrize("mode", MODES)
def test_a_204_ends_the_source(stream_backend: Any, mode: str) -> None:
    with RawServer(replies(NO_CONTENT)) as raw:
        events, error, source = read(mode, url(raw))
    assert events == [] and error is None and len(raw.requests) == 1 and source.reconnects == 0


@pytest.mark.parametrize("mode", MODES)
def test_a_404_fails_at_once(stream_backend: Any, mode: str) -> None:
    with RawServer(replies(status(404, b"X-Why: gone", body=b"no such stream"))) as raw:
        events, error, _ = read(mode, url(raw))
    assert events == [] and isinstance(error, fastsse.HTTPStatusError) and len(raw.requests) == 1
    assert error.status == 404 and error.headers["x-why"] == "gone" and error.body == b"no such stream"
    assert "HTTP 404" in str(error) and "/v1" not in str(error)  # no base_url hint: a URL is whole


@pytest.mark.parametrize("mode", MODES)
def test_an_html_200_fails(stream_backend: Any, mode: str) -> None:
    page = b"<!DOCTYPE html><html><body>hello</body></html>"
    with RawServer(replies(status(200, body=page, kind=b"text/html; charset=utf-8"))) as raw:
        events, error, _ = read(mode, url(raw))
    assert events == [] and isinstance(error, fastsse.HTTPStatusError) and len(raw.requests) == 1
    assert error.status == 200 and error.body == page and "not text/event-stream" in str(error)
    # no Content-Type at all is not an event stream either (no sniffing, as WHATWG says)
    with RawServer(replies(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + event(1))) as raw:
        events, error, _ = read(mode, url(raw))
    assert events == [] and isinstance(error, fastsse.HTTPStatusError) and error.status == 200


def test_a_redirect_is_not_followed(stream_backend: Any) -> None:
    with RawServer(replies(status(301, b"Location: http://127.0.0.1:9/elsewhere"))) as raw:
        _, error, _ = read("sync", url(raw))
    assert isinstance(error, fastsse.HTTPStatusError) and error.status == 301 and len(raw.requests) == 1
    assert error.headers["location"] == "http://127.0.0.1:9/elsewhere"


@pytest.mark.parametrize("mode", MODES)
def test_a_503_reconnects_after_its_retry_after(stream_backend: Any, mode: str) -> None:
    script = replies(
        HEAD + b"retry: 50\n\n" + event(1), status(503, b"Retry-After: 1"), HEAD + event(2), NO_CONTENT
    )
    with RawServer(script) as raw:
        events, error, _ = read(mode, url(raw))
    assert error is None and pairs(events) == [("1", "e1"), ("2", "e2")]
    assert last_ids(raw) == [None, "1", "1", "2"]
    before, after, last = gaps(raw)
    assert after >= 0.95 and before < after and last < after, gaps(raw)
    # x-should-retry: false decides, as for create_stream's retries
    with RawServer(replies(status(503, b"x-should-retry: false"))) as raw:
        _, error, _ = read(mode, url(raw))
    assert isinstance(error, fastsse.HTTPStatusError) and error.status == 503 and len(raw.requests) == 1


def test_a_refused_connection_is_tried_again(stream_backend: Any) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    _, error, source = read("sync", f"http://127.0.0.1:{port}/", max_reconnects=2, max_retry_delay=0.2)
    assert isinstance(error, fastsse.TransportError) and error.code == 7 and source.reconnects == 2
    assert 0.2 <= time.monotonic() - started < 5


def test_a_silent_connection_is_made_again(stream_backend: Any) -> None:
    def silent(conn: socket.socket) -> None:
        conn.sendall(HEAD + b"retry: 10\n\n" + event(1))
        conn.recv(1)  # until the client gives up on it

    with RawServer(replies(silent, NO_CONTENT)) as raw:
        events, error, _ = read("sync", url(raw), idle_timeout=0.3)
    assert error is None and pairs(events) == [("1", "e1")] and last_ids(raw) == [None, "1"]


# bounds


@pytest.mark.parametrize("mode", MODES)
def test_a_100_mb_event_past_max_event_bytes(stream_backend: Any, mode: str) -> None:
    piece = b"x" * (1 << 20)

    def huge(conn: socket.socket) -> None:
        conn.sendall(HEAD + event(1) + b"data: ")
        for _ in range(100):  # 100 MiB, unless the client stops reading first
            conn.sendall(piece)
        conn.sendall(b"\n\n")

    started = time.monotonic()
    with RawServer(replies(huge)) as raw:
        events, error, source = read(mode, url(raw), max_event_bytes=1 << 20)
    assert pairs(events) == [("1", "e1")]  # what came before it is delivered first
    assert isinstance(error, fastsse.EventTooLarge) and error.limit == 1 << 20
    assert len(raw.requests) == 1 and time.monotonic() - started < 20 and closed_cleanly(source)


def test_the_async_buffer_holds_the_transfer(stream_backend: Any) -> None:
    body = HEAD + b"".join(event(n) for n in range(20_000))

    async def main() -> tuple[int, int]:
        async with fastsse.AsyncEventSource(url(raw), max_reconnects=0) as source:
            first = await source.__anext__()
            assert first.id == "0"
            await asyncio.sleep(0.5)  # a slow consumer: curl stops reading, the server waits
            held = len(source._pending)
            rest = [e async for e in source]
            return held, len(rest)

    with RawServer(replies(body)) as raw:
        held, rest = asyncio.run(main())
    # the bound, plus at most one more read (16 KiB of 20-byte events)
    assert held <= 256 + 16384 // 20 and rest == 19_999


# close and cancellation


def test_close_during_the_reconnect_wait_is_prompt(stream_backend: Any) -> None:
    with RawServer(replies(HEAD + b"retry: 30000\n\n" + event(1))) as raw:
        source = fastsse.EventSource(url(raw))
        got = []
        started = 0.0
        for item in source:
            got.append(item)
            started = time.monotonic()
            threading.Timer(0.3, source.close).start()  # from another thread, during the 30 s wait
        waited = time.monotonic() - started
        assert pairs(got) == [("1", "e1")] and 0.25 < waited < 2 and len(raw.requests) == 1
        assert list(source) == [] and closed_cleanly(source)


def test_close_from_another_thread_while_streaming(stream_backend: Any) -> None:
    def slow(conn: socket.socket) -> None:
        conn.sendall(HEAD + event(1))
        conn.recv(1)

    with RawServer(replies(slow)) as raw:
        source = fastsse.EventSource(url(raw))
        threading.Timer(0.3, source.close).start()
        started = time.monotonic()
        got = list(source)
        assert pairs(got) == [("1", "e1")] and time.monotonic() - started < 2 and closed_cleanly(source)


def test_async_close_and_cancel_during_the_reconnect_wait(stream_backend: Any) -> None:
    async def read_all(source: Any, got: list[Any]) -> None:
        async for item in source:
            got.append(item)

    async def closing() -> tuple[list[Any], float, bool]:
        source = fastsse.AsyncEventSource(url(raw))
        got: list[Any] = []
        task = asyncio.ensure_future(read_all(source, got))
        while not got:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # in the 30 s wait now
        started = time.monotonic()
        await source.close()
        await asyncio.wait_for(task, 2)
        return got, time.monotonic() - started, closed_cleanly(source)

    async def cancelling() -> tuple[float, bool]:
        source = fastsse.AsyncEventSource(url(raw))
        got: list[Any] = []
        task = asyncio.ensure_future(read_all(source, got))
        while not got:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - started, closed_cleanly(source)

    with RawServer(replies(HEAD + b"retry: 30000\n\n" + event(1))) as raw:
        got, took, clean = asyncio.run(closing())
        assert pairs(got) == [("1", "e1")] and took < 1 and clean
        took, clean = asyncio.run(cancelling())
        assert took < 1 and clean and len(raw.requests) == 2  # one connection each, no reconnect


def test_leaving_the_loop_closes_the_connection(stream_backend: Any) -> None:
    def endless(conn: socket.socket) -> None:
        conn.sendall(HEAD + event(1) + event(2))
        conn.recv(1)

    with RawServer(replies(endless)) as raw:
        with fastsse.EventSource(url(raw)) as source:
            for _ in source:
                break
        assert closed_cleanly(source) and list(source) == []

        async def main() -> Any:
            async with fastsse.AsyncEventSource(url(raw)) as source:
                async for _ in source:
                    break
            return source

        assert closed_cleanly(asyncio.run(main()))


# the surface


def test_bad_options_fail_before_anything_is_sent() -> None:
    cases: list[tuple[dict[str, Any], type[BaseException], str]] = [
        ({"last_event_id": "a\nb"}, fastsse.InvalidRequest, "CR, LF or NUL"),
        ({"max_retry_delay": 0.01}, fastsse.InvalidRequest, "at least 0.1"),
        ({"max_reconnects": -1}, fastsse.InvalidRequest, "0 or more"),
        ({"max_event_bytes": 8}, fastsse.InvalidRequest, "at least 32"),
        ({"headers": {"Last-Event-ID": "4"}}, fastsse.InvalidRequest, "last_event_id="),
        ({"timeout": 0}, fastsse.InvalidRequest, "timeout must be"),
        ({"api_key": "k"}, TypeError, "unexpected keyword argument 'api_key'"),
    ]
    for options, error, words in cases:
        for cls in (fastsse.EventSource, fastsse.AsyncEventSource):
            with pytest.raises(error, match=words):
                cls("http://127.0.0.1:9/", **options)
    with pytest.raises(fastsse.InvalidRequest, match="http:// or https://"):
        fastsse.EventSource("file:///etc/passwd")


def test_the_two_sources_mirror_each_other() -> None:
    import inspect

    def public(cls: type) -> set[str]:
        return {name for name in dir(cls) if not name.startswith("_")}

    assert public(fastsse.EventSource) == public(fastsse.AsyncEventSource) - {"aclose"}
    assert public(fastsse.EventSource) >= {"close", "url", "last_event_id", "retry", "reconnects", "dropped"}
    assert inspect.signature(fastsse.EventSource) == inspect.signature(fastsse.AsyncEventSource)
    names = list(inspect.signature(fastsse.EventSource).parameters)
    assert names[0] == "url" and {"max_reconnects", "max_retry_delay", "idle_timeout", "http2"} <= set(names)
    assert "max_retry_delay" in (fastsse.EventSource.__doc__ or "")
    # one table: the signature, the TypedDict and the docs are made from the same rows
    from fastsse.client import _options

    assert names[1:] == list(_options.SOURCE_NAMES) == list(typing.get_type_hints(_options.SourceOptions))
    for name in names[1:]:
        row = _options.BY_NAME[name]
        assert inspect.signature(fastsse.EventSource).parameters[name].default == row.default
        assert f"``{name}``" in (fastsse.AsyncEventSource.__doc__ or "")
    source = fastsse.EventSource("http://127.0.0.1:9/x")
    assert (source.url, source.last_event_id, source.retry, source.reconnects, source.dropped) == (
        "http://127.0.0.1:9/x",
        "",
        None,
        0,
        0,
    )
    source.close()


def test_the_loopback_server_serves_numbered_events(server: Any) -> None:
    # fastsse.testing's /events: cut every 3 events, resumed from Last-Event-ID, a 204 at the end
    with fastsse.EventSource(server.url + "/events?count=7&cut=3&retry=10") as source:
        got = pairs(list(source))
    assert got == [(str(n), f"event {n}") for n in range(1, 8)] and source.reconnects == 3
    with fastsse.EventSource(server.url + "/events?count=3&retry=10", last_event_id="1") as source:
        assert [e.id for e in source] == ["2", "3"] and source.reconnects == 1

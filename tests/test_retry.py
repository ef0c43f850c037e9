"""Retries (``client/_retry.py`` and the engine's attempts): judged by an independent raw server's
arrival log, never by the client's own account. Every case on both backends and, through the
clients, both drivers where the engine runs."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from email.utils import formatdate
from pathlib import Path
from typing import Any

import orjson
import pytest

import fastsse
from _raw_server import RawServer
from fastsse.client import _retry

CHAT = {"model": "m", "messages": [{"role": "user", "content": "Hi"}]}
SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
CHUNK = b'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n'
FINISH = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
GOOD = SSE_HEAD + b'data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n' + CHUNK + FINISH

pytestmark = pytest.mark.usefixtures("library_defaults")


def status(code: int, *headers: bytes, body: bytes = b'{"error":{"message":"no","type":"busy"}}') -> bytes:
    head = b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nConnection: close\r\n" % code
    for line in headers:
        head += line + b"\r\n"
    return head + b"Content-Length: %d\r\n\r\n" % len(body) + body


def answers(*replies: bytes | Callable[[socket.socket], None]) -> Callable[[socket.socket], None]:
    """A script that sends the n-th reply to the n-th request (the last one from then on)."""
    count = [0]

    def script(conn: socket.socket) -> None:
        reply = replies[min(count[0], len(replies) - 1)]
        count[0] += 1
        if callable(reply):
            reply(conn)
        else:
            conn.sendall(reply)

    return script


def gaps(raw: RawServer) -> list[float]:
    return [b - a for a, b in zip(raw.arrivals, raw.arrivals[1:], strict=False)]


def call(raw: RawServer, **options: Any) -> Any:
    return fastsse.create_stream(CHAT, base_url=raw.base_url, api_key="x", timing=True, **options)


def test_a_429_forever_is_bounded_by_max_retries(stream_backend: Any) -> None:
    with RawServer(answers(status(429, b"retry-after-ms: 50"))) as raw:
        result = call(raw)
        assert len(raw.requests) == 3  # the first try and max_retries=2
        assert result["http"]["status"] == 429 and result["timing"]["attempts"] == 3
        assert all(gap >= 0.045 for gap in gaps(raw)), gaps(raw)
        assert result["timing"]["retry_wait"] >= 0.09e9
    with RawServer(answers(status(429, b"retry-after-ms: 10"))) as raw:
        assert call(raw, max_retries=5)["timing"]["attempts"] == 6 and len(raw.requests) == 6
    with RawServer(answers(status(429, b"retry-after-ms: 10"))) as raw:
        assert call(raw, max_retries=0)["timing"]["attempts"] == 1 and len(raw.requests) == 1


def test_a_retry_that_succeeds_returns_the_second_answer(stream_backend: Any) -> None:
    seen: list[Any] = []
    with RawServer(answers(status(503, b"retry-after-ms: 10"), GOOD)) as raw:
        result = call(raw, on_chunk=seen.append)
    assert result["verdict"]["complete"] and result["choices"][0]["message"]["content"] == "Hi"
    assert result["timing"]["attempts"] == 2 and len(raw.requests) == 2
    assert [c["choices"][0]["delta"] for c in seen] == [{"role": "assistant"}, {"content": "Hi"}, {}]


@pytest.mark.parametrize(
    ("header", "waits"),
    [
        (b"Retry-After: 99999", None),  # longer than anyone waits: fail now, with the answer
        (b"Retry-After: -1", "backoff"),  # unreadable: backoff
        (b"Retry-After: soon", "backoff"),
        (b"Retry-After: " + formatdate(time.time() - 3600, usegmt=True).encode(), 0.0),  # past: at once
        (b"Retry-After: 0", 0.0),
    ],
)
def test_retry_after_forms(stream_backend: Any, header: bytes, waits: Any) -> None:
    with RawServer(answers(status(503, header))) as raw:
        started = time.monotonic()
        result = call(raw, max_retries=1)
        took = time.monotonic() - started
    if waits is None:
        assert len(raw.requests) == 1 and result["http"]["retry_after"] == 99999.0 and took < 2
        return
    assert len(raw.requests) == 2
    (gap,) = gaps(raw)
    if waits == "backoff":
        assert gap <= _retry.BACKOFF_BASE + 1.0  # the first retry waits below 0.5 s (slack: a busy box)
    else:
        assert gap < 1.0


def test_retry_after_ms_wins_over_retry_after(stream_backend: Any) -> None:
    with RawServer(answers(status(429, b"Retry-After: 30", b"retry-after-ms: 20"))) as raw:
        call(raw, max_retries=1)
    assert len(raw.requests) == 2 and gaps(raw)[0] < 5  # not the 30 s of Retry-After


def test_x_should_retry_overrides_the_status(stream_backend: Any) -> None:
    with RawServer(answers(status(503, b"x-should-retry: false", b"retry-after-ms: 10"))) as raw:
        assert call(raw)["http"]["status"] == 503
    assert len(raw.requests) == 1
    with RawServer(answers(status(400, b"x-should-retry: true", b"retry-after-ms: 10"), GOOD)) as raw:
        assert call(raw)["verdict"]["complete"]
    assert len(raw.requests) == 2
    with RawServer(answers(status(400, b"retry-after-ms: 10"))) as raw:
        assert call(raw)["http"]["status"] == 400
    assert len(raw.requests) == 1  # a 400 is the caller's: never retried by itself


def _reset_after_status(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 9999\r\n\r\n")
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")


def test_a_reset_after_the_status_line_before_any_event_is_retried(stream_backend: Any) -> None:
    with RawServer(answers(_reset_after_status, GOOD)) as raw:
        result = call(raw)
    assert result["verdict"]["complete"] and len(raw.requests) == 2


def test_a_refused_connection_moves_to_the_fallback_at_once(
    stream_backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every backoff the engine could draw is 5 s here, so a wait before the fresh upstream would
    # show as >= 5 s in the wait the engine records (a jittered backoff can be near 0 s, which no
    # bound on the call's wall time could tell from no wait at all).
    from fastsse.client import _retry

    monkeypatch.setattr(_retry, "wait_for", lambda retry, retry_after, rand=None: 5.0)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    with RawServer(answers(GOOD)) as raw:
        result = fastsse.create_stream(
            CHAT, base_url=dead, api_key="x", fallbacks=[(raw.base_url, "other-key")], timing=True
        )
    assert result["verdict"]["complete"] and result["http"]["upstream"] == raw.base_url
    # no backoff before a fresh upstream: what the engine waited is its queue's latency, not 5 s
    assert result["timing"]["attempts"] == 2 and result["timing"]["retry_wait"] < 1_000_000_000
    assert dict(raw.headers())["authorization"] == "Bearer other-key"


def test_fallbacks_in_order_then_backoff_rounds(stream_backend: Any) -> None:
    with (
        RawServer(answers(status(503, b"retry-after-ms: 10"))) as a,
        RawServer(answers(status(502, b"retry-after-ms: 10"), GOOD)) as b,
    ):
        result = fastsse.create_stream(
            CHAT, base_url=a.base_url, api_key="x", fallbacks=[b.base_url], timing=True
        )
    # round 0: a, b (502); round 1: a (503), b (good)
    assert (len(a.requests), len(b.requests)) == (2, 2)
    assert result["http"]["upstream"] == b.base_url and result["timing"]["attempts"] == 4
    assert dict(b.headers())["authorization"] == "Bearer x"  # a bare URL keeps the request's key


def test_content_is_never_retried(stream_backend: Any) -> None:
    # a cut between two fragments of one tool call's arguments: the text would repeat
    tool = (
        SSE_HEAD.replace(b"Connection: close\r\n", b"Content-Length: 9999\r\n")
        + b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","type":"function",'
        b'"function":{"name":"f","arguments":"{\\"a\\""}}]}}]}\n\n'
    )
    seen: list[Any] = []
    with RawServer(answers(tool, GOOD)) as raw, pytest.raises(fastsse.TransportError) as info:
        call(raw, on_chunk=seen.append, first_chunk_gate=True)
    assert len(raw.requests) == 1 and len(seen) == 1
    partial = info.value.result
    assert partial["verdict"]["truncated"] and not partial["verdict"]["complete"]
    assert partial["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == '{"a"'


def test_an_error_event_after_content_is_not_retried(stream_backend: Any) -> None:
    late = SSE_HEAD + CHUNK + b'data: {"error":{"type":"overloaded_error","message":"busy"}}\n\n'
    with RawServer(answers(late, GOOD)) as raw:
        result = call(raw, first_chunk_gate=True)
    assert (
        len(raw.requests) == 1
        and result["verdict"]["error"]
        and result["choices"][0]["message"]["content"] == "Hi"
    )


OVERLOADED = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"m1","type":"message",'
    b'"role":"assistant","model":"c","content":[],"stop_reason":null,"usage":{"input_tokens":1,"output_tokens":0}}}\n\n'
    b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'
)
MESSAGE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"m2","type":"message",'
    b'"role":"assistant","model":"c","content":[],"stop_reason":null,"usage":{"input_tokens":1,"output_tokens":0}}}\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}\n\n'
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)


def test_the_gate_retries_an_overloaded_error_before_content(stream_backend: Any) -> None:
    body = {"model": "c", "max_tokens": 8, "messages": []}
    seen: list[str] = []
    with RawServer(answers(OVERLOADED, MESSAGE)) as raw:
        result = fastsse.create_stream(
            body,
            lambda e: seen.append(e["type"]),
            api="messages",
            base_url=raw.base_url,
            api_key="x",
            first_chunk_gate=True,
        )
    assert len(raw.requests) == 2 and result["verdict"]["complete"] and result["id"] == "m2"
    assert result["content"] == [{"type": "text", "text": "Hi"}]
    assert "error" not in seen and seen[0] == "message_start" and seen.count("message_start") == 1
    # without the gate the error is the answer (anthropic-sdk-python#688's case)
    with RawServer(answers(OVERLOADED, MESSAGE)) as raw:
        plain = fastsse.create_stream(body, api="messages", base_url=raw.base_url, api_key="x")
    assert len(raw.requests) == 1 and plain["verdict"]["why"] == "error: overloaded_error"


def test_the_gate_hands_over_what_it_held_when_retries_run_out(stream_backend: Any) -> None:
    error = SSE_HEAD + b'data: {"error":{"type":"server_error","message":"x"}}\n\n'
    seen: list[Any] = []
    with RawServer(answers(error)) as raw:
        result = call(raw, on_chunk=seen.append, first_chunk_gate=True, max_retries=1)
    assert len(raw.requests) == 2 and result["verdict"]["error"]
    assert seen == [{"error": {"type": "server_error", "message": "x"}}]  # as without the gate


def test_the_gate_on_a_relay(stream_backend: Any) -> None:
    error = SSE_HEAD + b'data: {"error":{"type":"server_error","message":"x"}}\n\n'
    sent: list[bytes] = []
    with RawServer(answers(error, GOOD)) as raw:
        result = call(raw, on_chunk=sent.append, format="relay", first_chunk_gate=True)
    assert len(raw.requests) == 2 and result["verdict"]["complete"]
    out = b"".join(sent)
    assert b"error" not in out and b'"content":"Hi"' in out and out.endswith(b"data: [DONE]\n\n")


def test_the_deadline_bounds_every_attempt_and_wait(stream_backend: Any) -> None:
    with RawServer(answers(status(503, b"retry-after-ms: 400"))) as raw:
        started = time.monotonic()
        result = call(raw, max_retries=10, timeout=1.0)
        took = time.monotonic() - started
    assert result["http"]["status"] == 503 and 2 <= len(raw.requests) <= 3 and took < 1.5


def test_backoff_is_full_jitter_below_a_doubling_cap() -> None:
    assert [_retry.backoff(n, lambda: 1.0) for n in range(7)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert _retry.backoff(3, lambda: 0.0) == 0.0
    assert _retry.wait_for(0, 2.0) == 2.0 and _retry.wait_for(0, 61.0) is None
    assert _retry.retryable_status(503, None) and _retry.retryable_status(409, None)
    assert not _retry.retryable_status(404, None) and not _retry.retryable_status(503, "false")


def _silent(conn: socket.socket) -> None:
    conn.sendall(status(503, b"retry-after-ms: 5000"))


def test_cancelling_during_the_backoff_is_prompt_and_leaves_nothing(stream_backend: Any) -> None:
    async def main() -> tuple[float, Any]:
        with RawServer(answers(status(503, b"retry-after-ms: 5000"))) as raw:
            async with fastsse.AsyncClient(base_url=raw.base_url, api_key="x") as client:
                task = asyncio.ensure_future(client.create_stream(CHAT))
                while not client._engine.delayed:
                    await asyncio.sleep(0.01)
                started = time.monotonic()
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                took = time.monotonic() - started
                engine = client._engine
                left = (engine.active, engine.waiting, [j for _, _, j in engine.delayed if not j.done])
                closing = asyncio.ensure_future(client.create_stream(CHAT))
                while len(engine.delayed) < 2:
                    await asyncio.sleep(0.01)
                await client.close()
                with pytest.raises(fastsse.ClientClosed):
                    await asyncio.wait_for(closing, 1.0)
        return took, left

    took, left = asyncio.run(main())
    assert took < 0.5 and left == ({}, __import__("collections").deque(), [])


def test_many_failing_at_once_spread_their_retries(stream_backend: Any) -> None:
    n = 200
    with RawServer(answers(status(500)), threaded=True, backlog=n) as raw:

        async def main() -> list[Any]:
            async with fastsse.AsyncClient(base_url=raw.base_url, api_key="x", max_connections=n) as client:
                return await asyncio.gather(*(client.create_stream(CHAT, max_retries=1) for _ in range(n)))

        results = asyncio.run(main())
        arrivals = sorted(raw.arrivals)
    assert len(arrivals) == 2 * n and all(r["http"]["status"] == 500 for r in results)
    retries = arrivals[n:]
    spread = retries[-1] - retries[0]
    # full jitter below 0.5 s: the second wave is spread out, not one burst
    assert spread > 0.15, spread
    buckets = [0] * 5
    for t in retries:
        buckets[min(4, int((t - retries[0]) / 0.1))] += 1
    assert max(buckets) < n * 0.6, buckets


def test_the_sync_client_retries_too(stream_backend: Any) -> None:
    with (
        RawServer(answers(status(429, b"retry-after-ms: 20"), GOOD)) as raw,
        fastsse.Client(base_url=raw.base_url, api_key="x") as client,
    ):
        result = client.create_stream(CHAT)
        outcomes = client.run([CHAT])
    assert result["timing"]["attempts"] == 2 and result["verdict"]["complete"]
    (again,) = outcomes  # the server answers well from its second request on: one attempt
    assert isinstance(again, dict) and again["verdict"]["complete"] and again["timing"]["attempts"] == 1
    assert len(raw.requests) == 3


def test_json_error_bodies_name_the_status(stream_backend: Any) -> None:
    with RawServer(answers(status(503, b"retry-after-ms: 10", body=orjson.dumps({"error": "down"})))) as raw:
        result = call(raw, max_retries=0)
    assert result["verdict"]["why"] == "HTTP 503: down"


def test_the_environment_sets_a_clients_default(monkeypatch: pytest.MonkeyPatch) -> None:
    with RawServer(answers(status(503, b"retry-after-ms: 10"))) as raw:
        monkeypatch.setenv("FASTSSE_MAX_RETRIES", "1")
        assert call(raw)["timing"]["attempts"] == 2  # read when create_stream makes its client
        assert call(raw, max_retries=0)["timing"]["attempts"] == 1  # an explicit value wins
        monkeypatch.setenv("FASTSSE_MAX_RETRIES", "two")
        with pytest.raises(fastsse.InvalidRequest, match="FASTSSE_MAX_RETRIES"):
            fastsse.Client()


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_no_retry_is_stranded_by_an_early_timer(stream_backend: Any, loop: str) -> None:
    # uvloop may fire a timer a little before time.monotonic() reaches its due time: the waits
    # between attempts are re-armed until they are really due, so every request ends
    if loop == "uvloop":
        uvloop = pytest.importorskip("uvloop")
    with RawServer(answers(status(503, b"retry-after-ms: 7")), threaded=True, backlog=64) as raw:

        async def main() -> list[Any]:
            async with fastsse.AsyncClient(base_url=raw.base_url, api_key="x", max_connections=32) as client:
                calls = [client.create_stream(CHAT, max_retries=3) for _ in range(32)]
                return await asyncio.wait_for(asyncio.gather(*calls), 20)

        results = uvloop.run(main()) if loop == "uvloop" else asyncio.run(main())
    assert len(results) == 32 and all(r["timing"]["attempts"] == 4 for r in results)
    assert len(raw.requests) == 32 * 4


def test_the_gate_opens_at_the_same_event_for_a_fold_and_for_bytes() -> None:
    # The first-chunk gate read content twice, once on parsed events and once by searching the
    # bytes, and the two disagreed (an empty "content":"" opened the bytes gate only). Both now
    # test the same events: each vector's events, framed as the stream's bytes, say what the
    # fold's test says of them.
    import json

    from fastsse.client._retry import gate_test

    vectors = Path(__file__).parent / "vectors"
    cases: list[tuple[str, Any]] = []
    for path in sorted((vectors / "chat").glob("*.json")):
        cases += [("chat", p) for p in json.loads(path.read_text())["payloads"] if isinstance(p, dict)]
    for api in ("responses", "messages"):
        for vector in json.loads((vectors / "formats" / f"{api}.json").read_text()):
            cases += [(api, e) for e in vector["events"] if isinstance(e, dict)]
    cases.append(("chat", {"choices": [{"index": 0, "delta": {"content": ""}}]}))
    assert len(cases) > 100
    opened = 0
    for api, event in cases:
        data = b"data: " + orjson.dumps(event) + b"\n\n"
        fold, passthrough = gate_test(api, api)(event), gate_test("passthrough", api)(data)
        assert fold == passthrough, (api, event)
        if api == "chat":
            assert gate_test("relay", "chat")(data) == fold, event
        opened += fold
    assert 0 < opened < len(cases)  # the vectors hold both kinds
    assert gate_test("relay", "chat")(b"data: [DONE]\n\n")  # the end of an answer opens it

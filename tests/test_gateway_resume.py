"""Resumable streams (``fastsse.gateway._resume``): the id line ``Recorder.piece`` adds to every
event of every piece the engine's byte formats hand on (LF from the relay and the translators, the
upstream's own CRLF or CR from the passthrough), and the answers kept in a real ``redis-server``
and resumed through ``serve_resume`` with a fake ASGI ``send``: the events after n, once, in
order, followed live, refused as the docs say (404, 409, 410, 416), bounded and expiring."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, ClassVar, TypeVar

import orjson
import pytest
import redis.asyncio
import uvicorn
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

import fastsse
from _raw_server import RawServer
from _redis import RedisServer, redis_server
from fastsse.gateway._resume import PREFIX, ROOM_BYTES, Recorder, Resumed, Resumer, serve_resume

T = TypeVar("T")
OWNER = b"\x01" * 32  # the digest of the caller's key
TTL = 30.0


def run(main: Callable[[], Awaitable[T]]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(main(), 60)

    return asyncio.run(bounded())


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    with redis_server() as server:
        yield server.url


@contextlib.asynccontextmanager
async def client(url: str) -> AsyncIterator[redis.asyncio.Redis]:
    """A client as the gateway's store makes it (a short socket timeout, one quick retry),
    closed after the tasks a failed test left behind are cancelled."""
    r = redis.asyncio.Redis.from_url(
        url,
        socket_timeout=0.5,
        socket_connect_timeout=0.5,
        retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
    )
    before = asyncio.all_tasks()
    try:
        yield r
    finally:
        left = [t for t in asyncio.all_tasks() - before if not t.done()]
        for task in left:
            task.cancel()
        await asyncio.gather(*left, return_exceptions=True)
        await r.aclose()


def event(i: int, eol: bytes = b"\n") -> bytes:
    return b'data: {"i": %d}%b%b' % (i, eol, eol)


def numbered(rec: Recorder, i: int, n: int, eol: bytes = b"\n") -> bytes:
    """``event(i)`` as the caller gets it: its id line last."""
    return b'data: {"i": %d}%bid: %s:%d%b%b' % (i, eol, rec.stream_id.encode(), n, eol, eol)


def after(out: bytes, k: int) -> bytes:
    """The framed LF events of ``out`` after its first ``k``."""
    return b"".join(e + b"\n\n" for e in out.split(b"\n\n")[k:-1])


def decode(data: bytes) -> list[tuple[str, str | None]]:
    """(data, id) of every event a WHATWG reader dispatches from ``data``."""
    return [(e.data, e.id) for e in fastsse.Decoder().feed(data)]


class Sink:
    """A fake ASGI ``send`` that keeps every message."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    async def __call__(self, message: dict[str, Any]) -> None:
        self.messages.append(message)

    @property
    def status(self) -> int:
        return int(self.messages[0]["status"])

    @property
    def headers(self) -> dict[bytes, bytes]:
        return dict(self.messages[0]["headers"])

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.messages[1:])

    @property
    def ended(self) -> bool:
        """The response's end went out (False: still open, or cut)."""
        return len(self.messages) > 1 and not self.messages[-1].get("more_body", False)

    def error(self) -> dict[str, Any]:
        assert self.headers[b"content-type"] == b"application/json" and self.ended
        err: dict[str, Any] = orjson.loads(self.body)["error"]
        assert set(err) == {"message", "type", "param", "code"} and err["message"]
        return err


async def until(check: Callable[[], Any], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not (await check() if asyncio.iscoroutinefunction(check) else check()):
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def resume(resumer: Resumer, rec_or_id: Recorder | str, last: str | None, owner: bytes = OWNER) -> Sink:
    sink = Sink()
    stream_id = rec_or_id if isinstance(rec_or_id, str) else rec_or_id.stream_id
    await asyncio.wait_for(serve_resume(resumer, stream_id, owner, last, sink), 20)
    return sink


# the id line, in the pieces of every byte format


class Offline:
    """What a Resumer needs of a client for framing only (nothing is written)."""

    class connection_pool:
        connection_kwargs: ClassVar[dict[str, Any]] = {}

    def register_script(self, script: str) -> None:
        return None


def recorder() -> Recorder:
    rec = Recorder(Resumer(Offline(), max_bytes=1 << 30, ttl=TTL), b"")  # type: ignore[arg-type]
    rec._listed = True  # nothing goes to the writer
    return rec


def frame_all(pieces: list[bytes]) -> tuple[Recorder, bytes]:
    async def main() -> tuple[Recorder, bytes]:
        rec = recorder()
        return rec, b"".join(rec.piece(p) for p in pieces)

    return run(main)


def test_every_event_of_a_piece_gets_its_id_last() -> None:
    upstream = b"id: up-7\ndata: a\n\n" + event(1) + b"event: delta\ndata: x\ndata: y\n\n"
    rec, out = frame_all([event(0), upstream])
    sid = rec.stream_id
    assert out == (
        numbered(rec, 0, 1)
        + b"id: up-7\ndata: a\nid: %s:2\n\n" % sid.encode()
        + numbered(rec, 1, 3)
        + b"event: delta\ndata: x\ndata: y\nid: %s:4\n\n" % sid.encode()
    )
    # ours wins over the upstream's own id: a reader's Last-Event-ID is always ours
    assert decode(out) == [
        ('{"i": 0}', f"{sid}:1"),
        ("a", f"{sid}:2"),
        ('{"i": 1}', f"{sid}:3"),
        ("x\ny", f"{sid}:4"),
    ]
    assert rec.header == (b"x-fastsse-stream", sid.encode()) and len(sid) == 22


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_line_ends_are_kept(eol: bytes) -> None:
    # a piece's own line ends frame its id line: a CRLF stream stays CRLF (no bare LF in it)
    rec, out = frame_all([event(1, eol) + event(2, eol), event(3, eol)])
    assert out == b"".join(numbered(rec, i, i, eol) for i in (1, 2, 3))
    if eol == b"\r\n":
        assert out.count(b"\n") == out.count(b"\r\n") == out.count(b"\r")
    assert decode(out) == [(f'{{"i": {i}}}', f"{rec.stream_id}:{i}") for i in (1, 2, 3)]


def test_comments_and_blank_lines_pass_unnumbered() -> None:
    pieces = [
        b": keepalive\n\n",
        event(1) + b": c1\n: c2\n\n\n\n" + event(2),
        b"\r\n: x\r\n\r\n" + event(3, b"\r\n"),
    ]
    rec, out = frame_all(pieces)
    sid = rec.stream_id.encode()
    assert out == (
        b": keepalive\n\n"
        + numbered(rec, 1, 1)
        + b": c1\n: c2\n\n\n\n"
        + numbered(rec, 2, 2)
        + b"\r\n: x\r\n\r\n"
        + numbered(rec, 3, 3, b"\r\n")
    )
    # an event with a comment line in it is an event
    rec, out = frame_all([b": note\ndata: z\n\n"])
    assert out == b": note\ndata: z\nid: %s:1\n\n" % rec.stream_id.encode()
    assert sid  # (the first recorder's id was used above)


def test_a_crlf_split_between_two_pieces() -> None:
    # "data: a" CR, then a CRLF blank line whose CR ends one piece and LF starts the next (the
    # passthrough cuts after the "\r\r" it takes for an event's end)
    rec, out = frame_all([b"data: a\r\r", b"\ndata: b\r\n\r\n"])
    assert decode(out) == [("a", f"{rec.stream_id}:1"), ("b", f"{rec.stream_id}:2")]
    sid = rec.stream_id.encode()
    assert out == b"data: a\rid: %s:1\r\r\ndata: b\r\nid: %s:2\r\n\r\n" % (sid, sid)


def test_any_split_gives_the_same_events() -> None:
    # pieces cut anywhere, even inside an event (the engine never does): the tail waits for the
    # next piece, and the reader sees every event once, with ids 1..n in order
    rng = random.Random(42)
    kinds = [b"\n", b"\r\n", b"\r"]
    for trial in range(200):
        eol = kinds[trial % 3] if trial < 150 else b""
        parts = []
        for i in range(12):
            e = eol or rng.choice(kinds)
            parts.append(event(i, e) if i % 4 else b": c%d%b%b" % (i, e, e) + event(i, e))
        stream = b"".join(parts)
        cuts = sorted(rng.sample(range(1, len(stream)), 6))
        pieces = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
        rec, out = frame_all(pieces)
        got = decode(out)
        assert [d for d, _ in got] == [f'{{"i": {i}}}' for i in range(12)], (trial, pieces)
        assert [i for _, i in got] == [f"{rec.stream_id}:{n}" for n in range(1, 13)]


def _messages_stream(eol: str) -> bytes:
    events = [
        {"type": "message_start", "message": {"id": "m1", "type": "message", "role": "assistant", "model": "x",
                                              "content": [], "stop_reason": None,
                                              "usage": {"input_tokens": 1, "output_tokens": 0}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        *[{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": f"w{i} "}}
          for i in range(6)],
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 6}},
        {"type": "message_stop"},
    ]  # fmt: skip
    return b"".join(f"event: {e['type']}{eol}data: {json.dumps(e)}{eol}{eol}".encode() for e in events)


@pytest.mark.parametrize("eol", ["\r\n", "\n"], ids=["CRLF", "LF"])
def test_passthrough_pieces_keep_the_upstreams_line_ends(eol: str) -> None:
    # the gateway's same-API path hands on the upstream's own bytes: a CRLF upstream's pieces
    # reach Recorder.piece as CRLF, each ending on an event's end
    body = _messages_stream(eol)

    def script(conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
        for at in range(0, len(body), 97):  # reads that end inside events
            conn.sendall(body[at : at + 97])
            time.sleep(0.005)

    async def main() -> tuple[list[bytes], bytes, Recorder]:
        rec = recorder()
        pieces: list[bytes] = []
        out: list[bytes] = []

        def on_chunk(data: bytes) -> None:
            pieces.append(data)
            out.append(rec.piece(data))

        async with fastsse.AsyncClient(api="messages", base_url=raw.base_url, api_key="k") as http:
            result = await http.create_stream(
                {"model": "x", "max_tokens": 5, "messages": []}, on_chunk, format="passthrough"
            )
        assert result["verdict"]["complete"] is True
        return pieces, b"".join(out), rec

    with RawServer(script) as raw:
        pieces, out, rec = run(main)
    assert len(pieces) > 2 and b"".join(pieces) == body
    assert all(p.endswith(eol.encode() * 2) for p in pieces)
    assert any(b"\r" in p for p in pieces) is (eol == "\r\n")
    assert out.count(b"\n") == out.count(b"\r\n") if eol == "\r\n" else b"\r" not in out
    got = fastsse.Decoder().feed(out)
    assert [e.id for e in got] == [f"{rec.stream_id}:{n}" for n in range(1, 12)]
    assert [e.data for e in got] == [e.data for e in fastsse.Decoder().feed(body)]


# kept in Redis, resumed


async def answer(
    resumer: Resumer, count: int, *, per_piece: int = 3, complete: bool = True
) -> tuple[Recorder, list[bytes]]:
    """An answer of ``count`` events in pieces of ``per_piece``, each piece written before the
    next (so the stream has several entries); returns the events as the caller got them."""
    rec = resumer.open(OWNER)
    got: list[bytes] = []
    for start in range(1, count + 1, per_piece):
        out = rec.piece(b"".join(event(i) for i in range(start, min(count + 1, start + per_piece))))
        got += [e + b"\n\n" for e in out.split(b"\n\n")[:-1]]
        await until(lambda: rec.backlog == 0)
    await rec.end(complete)
    return rec, got


def test_resume_after_n_gives_the_events_after_n_once_in_order(redis_url: str) -> None:
    async def main() -> None:
        async with client(redis_url) as r:
            resumer = Resumer(r, max_bytes=1 << 20, ttl=TTL)
            rec, got = await answer(resumer, 20, per_piece=3)
            assert len(got) == 20 and await r.xlen(PREFIX + rec.stream_id) == 7 + 1  # 7 entries, the end
            for n in range(20):
                sink = await resume(resumer, rec, f"{rec.stream_id}:{n}" if n else None)
                assert sink.status == 200 and sink.ended, n
                assert sink.headers[b"content-type"].startswith(b"text/event-stream")
                assert sink.headers[b"x-fastsse-stream"] == rec.stream_id.encode()
                assert sink.body == b"".join(got[n:]), n  # byte for byte as first sent, ids included
            sink = await resume(resumer, rec, f"{rec.stream_id}:20")  # the caller has them all
            assert sink.status == 204 and sink.body == b"" and sink.ended
            assert sink.headers[b"x-fastsse-stream"] == rec.stream_id.encode()

    run(main)


def test_a_cut_answer_resumes_cut(redis_url: str) -> None:
    async def main() -> None:
        async with client(redis_url) as r:
            resumer = Resumer(r, max_bytes=1 << 20, ttl=TTL)
            rec, got = await answer(resumer, 5, complete=False)
            sink = await resume(resumer, rec, f"{rec.stream_id}:2")
            # the events, then no end of the body: the server closes without it, the caller's client raises
            assert sink.status == 200 and sink.body == b"".join(got[2:]) and not sink.ended
            sink = await resume(resumer, rec, f"{rec.stream_id}:5")  # nothing more will come
            assert sink.status == 204 and sink.body == b"" and sink.ended

    run(main)


def test_a_resume_follows_a_streaming_answer_live(redis_url: str) -> None:
    async def main() -> None:
        async with client(redis_url) as r:
            resumer = Resumer(r, max_bytes=1 << 20, ttl=TTL)
            rec = resumer.open(OWNER)
            first = rec.piece(b"".join(event(i) for i in range(1, 4)))
            await until(lambda: rec.backlog == 0)
            sink = Sink()
            task = asyncio.create_task(
                serve_resume(resumer, rec.stream_id, OWNER, f"{rec.stream_id}:1", sink)
            )
            await until(lambda: sink.body.count(b"data: ") == 2)
            assert sink.body == after(first, 1)  # events 2 and 3
            later = rec.piece(event(4) + event(5))
            await until(lambda: sink.body.count(b"data: ") == 4)
            assert not task.done() and not sink.ended
            # the caller had events the writer had not written yet when it came back: they are awaited
            last = rec.piece(event(6))
            sink2 = Sink()
            await rec.end(True)
            result = await asyncio.wait_for(task, 10)
            assert result == Resumed(200, "complete", 5)
            assert sink.ended and sink.body == after(first, 1) + later + last
            task2 = serve_resume(resumer, rec.stream_id, OWNER, f"{rec.stream_id}:5", sink2)
            assert await asyncio.wait_for(task2, 10) == Resumed(200, "complete", 1)
            assert sink2.body == last and sink2.ended

    run(main)


def test_a_resume_for_events_not_written_yet_waits_for_them(redis_url: str) -> None:
    async def main() -> None:
        async with client(redis_url) as r:
            resumer = Resumer(r, max_bytes=1 << 20, ttl=TTL)
            rec = resumer.open(OWNER)
            rec.piece(event(1))
            await until(lambda: rec.backlog == 0)
            # the caller got events 2..5 and left; its resume reaches Redis before they do
            rec.piece(b"".join(event(i) for i in range(2, 6)))
            sink = Sink()
            task = asyncio.create_task(
                serve_resume(resumer, rec.stream_id, OWNER, f"{rec.stream_id}:5", sink)
            )
            more = rec.piece(event(6))
            await rec.end(True)
            assert (await asyncio.wait_for(task, 10)).events == 1
            assert sink.body == more and sink.ended

    run(main)


def test_not_found_is_one_answer_for_unknown_forged_and_others(redis_url: str) -> None:
    async def main() -> None:
        async with client(redis_url) as r:
            resumer = Resumer(r, max_bytes=1 << 20, ttl=TTL)
            rec, _ = await answer(resumer, 3)
            other, _ = await answer(resumer, 3)
            sid = rec.stream_id
            cases = [
                (rec, None, b"\x02" * 32),  # another key's stream
                (rec, f"{sid}:1", b""),  # a gateway without keys asking for a keyed stream
                ("A" * 22, None, OWNER),  # unknown (well formed)
                ("A" * 22, f"{'A' * 22}:1", OWNER),
                (sid[:-1], None, OWNER),  # forged: not an id's shape
                (sid + "/../x", None, OWNER),
                ("", None, OWNER),
                (rec, f"{other.stream_id}:1", OWNER),  # a Last-Event-ID of another stream
                (rec, "1", OWNER),  # no stream part
                (rec, f":{sid}:1", OWNER),
            ]
            bodies = set()
            for target, last, owner in cases:
                sink = await resume(resumer, target, last, owner)
                assert sink.status == 404, (target, last, owner)
                assert sink.error() == {
                    "message": "no such stream (unknown, expired, or not yours)",
                    "type": "not_found_error",
                    "param": None,
                    "code": "stream_not_found",
                }
                bodies.add(sink.body)
            assert len(bodies) == 1  # nothing tells an existing stream from an unknown one
            for last in (f"{sid}:x", f"{sid}:-1", f"{sid}:", f"{sid}:1.5", f"{sid}:{'9' * 19}"):
                sink = await resume(resumer, rec, last)
                assert sink.status == 400 and sink.error()["code"] == "bad_last_event_id", last
            # the owner's own resume, with Last-Event-ID as bytes or with spaces, works
            sink = await resume(resumer, rec, f" {sid}:2 ")
            assert sink.status == 200 and sink.body.count(b"data: ") == 1

    run(main)


def test_an_event_past_the_end(redis_url: str) -> None:
    async def main() -> None:
        async with client(redis_url) as r:
            resumer = Resumer(r, max_bytes=1 << 20, ttl=TTL)
            rec, _ = await answer(resumer, 4)
            for n in (5, 6, 10**17):
                sink = await resume(resumer, rec, f"{rec.stream_id}:{n}")
                assert sink.status == 416
                err = sink.error()
                assert err["code"] == "event_past_end" and "ended at event 4" in err["message"]
            sink = await resume(resumer, rec, f"{rec.stream_id}:4")  # every event: nothing to send
            assert sink.status == 204 and sink.body == b"" and sink.ended

    run(main)


def test_the_same_stream_resumed_twice_at_once(redis_url: str) -> None:
    async def main() -> None:
        async with client(redis_url) as r:
            resumer = Resumer(r, max_bytes=1 << 20, ttl=TTL)
            rec = resumer.open(OWNER)
            rec.piece(event(1))
            await until(lambda: rec.backlog == 0)
            first = Sink()
            task = asyncio.create_task(serve_resume(resumer, rec.stream_id, OWNER, None, first))
            await until(lambda: first.body.count(b"data: ") == 1)
            for last in (None, f"{rec.stream_id}:1"):
                second = await resume(resumer, rec, last)
                assert second.status == 409 and second.headers[b"retry-after"] == b"1"
                assert second.error()["code"] == "stream_busy"
            rec.piece(event(2))
            await rec.end(True)
            assert (await asyncio.wait_for(task, 10)).outcome == "complete"
            third = await resume(resumer, rec, None)  # the lock went with the first
            assert third.status == 200 and third.body == first.body and third.ended

    run(main)


def test_a_resuming_caller_that_leaves_frees_the_stream(redis_url: str) -> None:
    async def main() -> None:
        async with client(redis_url) as r:
            resumer = Resumer(r, max_bytes=1 << 20, ttl=TTL)
            rec = resumer.open(OWNER)
            rec.piece(event(1))
            await until(lambda: rec.backlog == 0)
            left = asyncio.Event()
            messages = [{"type": "http.request", "body": b"", "more_body": False}]

            async def receive() -> dict[str, Any]:
                if messages:
                    return messages.pop()
                await left.wait()
                return {"type": "http.disconnect"}

            sink = Sink()
            task = asyncio.create_task(
                serve_resume(resumer, rec.stream_id, OWNER, None, sink, receive=receive)
            )
            await until(lambda: sink.body.count(b"data: ") == 1)
            left.set()
            assert await asyncio.wait_for(task, 10) == Resumed(200, "caller_left", 1)
            again = Sink()
            task = asyncio.create_task(
                serve_resume(resumer, rec.stream_id, OWNER, f"{rec.stream_id}:1", again)
            )
            rec.piece(event(2))
            await rec.end(True)
            assert (await asyncio.wait_for(task, 10)).outcome == "complete" and again.status == 200

    run(main)


def test_past_max_bytes_a_resume_is_refused_never_given_a_gap(redis_url: str) -> None:
    async def main() -> None:
        async with client(redis_url) as r:
            one = len(Resumer(r, max_bytes=0, ttl=1).open(b"").piece(event(1)))  # an event's size
            resumer = Resumer(r, max_bytes=one * 10 + 5, ttl=TTL)  # 10 events fit
            rec = resumer.open(OWNER)
            rec.piece(b"".join(event(i) for i in range(1, 5)))
            await until(lambda: rec.backlog == 0)
            live = Sink()
            task = asyncio.create_task(serve_resume(resumer, rec.stream_id, OWNER, None, live))
            await until(lambda: live.body.count(b"data: ") == 4)
            sent = [rec.piece(b"".join(event(i) for i in range(s, s + 4))) for s in (5, 9, 13)]
            # the caller got every event with its id; recording stopped after the 10th
            assert b"".join(sent).count(b"id: ") == 12
            outcome = await asyncio.wait_for(task, 10)
            assert outcome == Resumed(200, "truncated", 10) and not live.ended  # a cut, not an end
            assert decode(live.body) == [(f'{{"i": {i}}}', f"{rec.stream_id}:{i}") for i in range(1, 11)]
            assert live.body.endswith(b"(resume_max_bytes)\n\n")
            rec.piece(event(17))
            await rec.end(True)
            for n in (0, 3, 10, 11, 16):
                sink = await resume(resumer, rec, f"{rec.stream_id}:{n}" if n else None)
                assert sink.status == 410 and sink.error()["code"] == "stream_truncated", n
            sink = await resume(resumer, rec, f"{rec.stream_id}:17")  # the caller has it all
            assert sink.status == 204 and sink.ended and sink.body == b""
            sink = await resume(resumer, rec, f"{rec.stream_id}:18")
            assert sink.status == 416
            assert await r.xlen(PREFIX + rec.stream_id) <= 10 + 1

    run(main)


def test_a_missing_entry_cuts_the_resume_where_it_is(redis_url: str) -> None:
    # events lost under the writer (keys that expired mid-answer, someone's XDEL): the resume
    # stops before the hole, it never skips it
    async def main() -> None:
        async with client(redis_url) as r:
            resumer = Resumer(r, max_bytes=1 << 20, ttl=TTL)
            rec, got = await answer(resumer, 9, per_piece=3)
            await r.xdel(PREFIX + rec.stream_id, "0-6")  # events 4..6
            sink = Sink()
            outcome = await serve_resume(resumer, rec.stream_id, OWNER, f"{rec.stream_id}:1", sink)
            assert outcome == Resumed(200, "gap", 2) and not sink.ended
            assert (
                sink.body
                == b"".join(got[1:3]) + b": fastsse: events of this answer expired before they were read\n\n"
            )

    run(main)


def test_keys_expire_ttl_after_the_end_and_bounded_while_streaming(redis_url: str) -> None:
    async def main() -> None:
        async with client(redis_url) as r:
            resumer = Resumer(r, max_bytes=1 << 20, ttl=5.0)
            rec = resumer.open(OWNER)
            rec.piece(event(1))
            await until(lambda: rec.backlog == 0)
            key = PREFIX + rec.stream_id
            for k in (key, key + ":meta"):  # an instance that dies now leaks them for ttl + 1 h
                assert (5 + 3600 - 60) * 1000 < await r.pttl(k) <= (5 + 3600) * 1000
            assert await r.hget(key + ":meta", "state") == b"streaming"
            await rec.end(True)
            for k in (key, key + ":meta"):
                assert 0 < await r.pttl(k) <= 5000
            meta = await r.hgetall(key + ":meta")
            assert meta == {b"owner": OWNER, b"state": b"ended", b"events": b"1", b"complete": b"1"}
            assert not await r.exists(key + ":lock")

    run(main)


def test_an_answer_is_found_from_its_start_before_any_event(redis_url: str) -> None:
    # a keep-alive comment may send the header before the upstream's first byte: a resume then
    # follows the answer from its first event
    async def main() -> None:
        async with client(redis_url) as r:
            resumer = Resumer(r, max_bytes=1 << 20, ttl=TTL)
            rec = resumer.open(OWNER)
            meta = PREFIX + rec.stream_id + ":meta"

            async def streaming() -> bool:
                return await r.hget(meta, "state") == b"streaming"

            await until(streaming)
            sink = Sink()
            task = asyncio.create_task(serve_resume(resumer, rec.stream_id, OWNER, None, sink))
            await until(lambda: sink.messages)
            assert sink.status == 200 and sink.body == b""
            assert rec.piece(b": ping\n\n") == b": ping\n\n"  # a comment: not kept
            first = rec.piece(event(1))
            await rec.end(False)
            assert await asyncio.wait_for(task, 10) == Resumed(200, "cut", 1)
            assert sink.body == first and not sink.ended
            # an answer that failed before its first byte ends with no event
            rec = resumer.open(OWNER)
            await rec.end(False)
            await rec.end(False)  # a second end waits for the first, writes nothing more
            assert await r.hgetall(PREFIX + rec.stream_id + ":meta") == {
                b"owner": OWNER,
                b"state": b"ended",
                b"events": b"0",
                b"complete": b"0",
            }
            assert 0 < await r.pttl(PREFIX + rec.stream_id) <= TTL * 1000

    run(main)


def test_two_instances_see_each_others_streams(redis_url: str) -> None:
    async def main() -> None:
        async with client(redis_url) as a, client(redis_url) as b:
            await both(a, b)

    async def both(a: redis.asyncio.Redis, b: redis.asyncio.Redis) -> None:
        one = Resumer(a, max_bytes=1 << 20, ttl=TTL)
        two = Resumer(b, max_bytes=1 << 20, ttl=TTL)
        rec = one.open(OWNER)
        got = rec.piece(event(1) + event(2))
        sink = Sink()
        await until(lambda: rec.backlog == 0)
        task = asyncio.create_task(serve_resume(two, rec.stream_id, OWNER, f"{rec.stream_id}:1", sink))
        await until(lambda: sink.body.count(b"data: ") == 1)
        more = rec.piece(event(3))
        await rec.end(True)
        assert (await asyncio.wait_for(task, 10)).outcome == "complete"
        assert sink.body == after(got, 1) + more
        busy = Sink()
        task = asyncio.create_task(serve_resume(one, rec.stream_id, OWNER, None, busy))
        await task
        assert busy.status == 200 and busy.ended  # the lock was released across instances too

    run(main)


def test_room_holds_the_upstream_while_redis_is_behind(redis_url: str) -> None:
    async def main() -> None:
        async with client(redis_url) as r:
            resumer = Resumer(r, max_bytes=64 << 20, ttl=TTL)
            rec = resumer.open(OWNER)
            assert rec.room() is None
            big = b"data: " + b"x" * 4000 + b"\n\n"
            rec.piece(big * (ROOM_BYTES // len(big) + 50))  # past the bound in one piece
            room = rec.room()
            assert room is not None and not room.done() and rec.room() is room
            await asyncio.wait_for(room, 10)
            assert rec.room() is None and rec.backlog == 0
            await rec.end(True)
            sink = await resume(resumer, rec, f"{rec.stream_id}:{ROOM_BYTES // len(big) + 49}")
            assert sink.status == 200 and sink.body.count(b"data: ") == 1 and sink.ended

    run(main)


def test_redis_killed_mid_answer(caplog: pytest.LogCaptureFixture) -> None:
    # the caller's bytes never wait on Redis: framing goes on, the writer's failure stops the
    # recording (logged), and once Redis is back the end says the answer was not kept
    async def main(server: RedisServer) -> None:
        async with client(server.url) as r:
            resumer = Resumer(r, max_bytes=1 << 20, ttl=TTL)
            rec = resumer.open(OWNER)
            rec.piece(event(1))
            await until(lambda: rec.backlog == 0)
            server.stop()
            out = rec.piece(event(2) + event(3))
            assert decode(out)[-1] == ('{"i": 3}', f"{rec.stream_id}:3")
            await until(lambda: rec.backlog == 0 and rec.room() is None)
            sink = await resume(resumer, rec, None)
            assert sink.status == 503 and sink.error()["code"] == "redis_unavailable"
            assert sink.headers[b"retry-after"] == b"1"
            server.start()
            rec.piece(event(4))
            await rec.end(True)
            sink = await resume(resumer, rec, f"{rec.stream_id}:1")
            assert sink.status == 410 and sink.error()["code"] == "stream_truncated"
            sink = await resume(resumer, rec, f"{rec.stream_id}:4")
            assert sink.status == 204 and sink.ended

    with caplog.at_level(logging.WARNING, logger="fastsse.gateway"), redis_server() as server:
        run(lambda: main(server))
    assert sum("resumable streams: Redis failed" in m for m in caplog.messages) == 1  # once an outage
    assert any("Redis answers again" in m for m in caplog.messages)


def test_many_answers_at_once_share_the_writer(redis_url: str) -> None:
    # 200 answers interleaved, each resumed from a random n: every one gets exactly its own rest
    async def main() -> None:
        async with client(redis_url) as r:
            resumer = Resumer(r, max_bytes=1 << 20, ttl=TTL)
            recs = [resumer.open(OWNER) for _ in range(200)]
            got: dict[str, list[bytes]] = {rec.stream_id: [] for rec in recs}
            rng = random.Random(7)
            for turn in range(12):
                for rec in recs:
                    out = rec.piece(b"".join(event(turn * 10 + k) for k in range(rng.randint(0, 3))))
                    got[rec.stream_id] += [e + b"\n\n" for e in out.split(b"\n\n")[:-1]]
                await asyncio.sleep(0)
            await asyncio.gather(*(rec.end(True) for rec in recs))
            for rec in recs:
                events = got[rec.stream_id]
                n = rng.randint(0, len(events))
                sink = await resume(resumer, rec, f"{rec.stream_id}:{n}")
                assert sink.status == (200 if n < len(events) else 204), (n, len(events))
                assert sink.ended and sink.body == b"".join(events[n:])

    run(main)


def test_an_eventsource_resumes_then_stops_at_the_end(redis_url: str) -> None:
    # a WHATWG reader over real HTTP (uvicorn): it resumes from its Last-Event-ID, reconnects when
    # the response ends, and the 204 that follows (it has every event) ends it: no endless loop
    async def record() -> tuple[str, list[bytes]]:
        async with client(redis_url) as r:
            rec, got = await answer(Resumer(r, max_bytes=1 << 20, ttl=TTL), 8)
            return rec.stream_id, got

    stream_id, got = run(record)
    results: list[Resumed] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        r = redis.asyncio.Redis.from_url(redis_url, socket_timeout=0.5)
        try:
            results.append(
                await serve_resume(
                    Resumer(r, max_bytes=1 << 20, ttl=TTL),
                    scope["path"].rsplit("/", 1)[1],
                    OWNER,
                    dict(scope["headers"]).get(b"last-event-id"),
                    send,
                    receive=receive,
                )
            )
        finally:
            await r.aclose()

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    serving = uvicorn.Server(uvicorn.Config(app, lifespan="off", log_level="warning", loop="asyncio"))
    thread = threading.Thread(target=serving.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not serving.started:
            assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
            time.sleep(0.01)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1/streams/{stream_id}"
        source = fastsse.EventSource(url, last_event_id=f"{stream_id}:3", timeout=20, max_retry_delay=0.2)
        events = list(source)  # ends: the 204
    finally:
        serving.should_exit = True
        thread.join(10)
        sock.close()
    assert [e.id for e in events] == [f"{stream_id}:{n}" for n in range(4, 9)]
    assert [(e.data, e.id) for e in events] == decode(b"".join(got[3:]))
    assert [(r.status, r.outcome, r.events) for r in results] == [(200, "complete", 5), (204, "complete", 0)]
    assert source.reconnects == 1

"""``fastsse.gateway.HttpServer``, the command's own HTTP/1.1 server, in-process on 127.0.0.1 with
small ASGI apps, read from raw sockets: the framing RFC 9112 asks for (chunked, Content-Length,
HTTP/1.0, HEAD, 204), keep-alive and pipelining in order, ``Expect: 100-continue``, a chunked and
a large request body, the bounds (a head past the limit, a malformed one, an idle or slowloris
connection), an app that fails, cuts or leaves no answer, a caller that leaves, and shutdown.
On asyncio's loop and on uvloop's where installed."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("httptools")

from fastsse.gateway import HttpServer

LOOPS = ["asyncio", *(["uvloop"] if importlib.util.find_spec("uvloop") else [])]

App = Callable[..., Any]


class Running:
    """An ``HttpServer`` serving ``app`` on its own loop in a thread."""

    def __init__(self, app: App, loop: str, **options: Any) -> None:
        self.app = app
        self.loop: asyncio.AbstractEventLoop
        if loop == "uvloop":
            import uvloop

            self.loop = uvloop.new_event_loop()
        else:
            self.loop = asyncio.new_event_loop()
        self.server = HttpServer(app, **options)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.started = threading.Event()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self.server.start(self.sock))
        self.started.set()
        self.loop.run_forever()

    def call(self, fn: Callable[[], Any]) -> None:
        self.loop.call_soon_threadsafe(fn)

    def connect(self, timeout: float = 10) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=timeout)

    def __enter__(self) -> Running:
        self.thread.start()
        assert self.started.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            self.server.close()
            for task in list(self.server.tasks):
                task.cancel()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()
        self.sock.close()


@pytest.fixture(params=LOOPS)
def loop(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def read_all(sock: socket.socket) -> bytes:
    out = b""
    with contextlib.suppress(socket.timeout, ConnectionResetError):
        while True:
            data = sock.recv(65536)
            if not data:
                break
            out += data
    return out


class Reader:
    """Answers off one socket in order: (status, headers, body, framing); ``framing`` is
    ``chunked``, ``length`` or ``close``, and a chunked body must end with its terminator."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""

    def _more(self) -> bool:
        data = self.sock.recv(65536)
        self.buf += data
        return bool(data)

    def head(self) -> tuple[int, dict[bytes, bytes]]:
        while b"\r\n\r\n" not in self.buf:
            assert self._more(), self.buf
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        assert lines[0].startswith(b"HTTP/1.1 "), lines[0]
        headers: dict[bytes, bytes] = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            assert name.lower() not in headers, name
            headers[name.lower()] = value.strip()
        return int(lines[0].split()[1]), headers

    def answer(self, method: str = "POST") -> tuple[int, dict[bytes, bytes], bytes, str]:
        status, headers = self.head()
        if status == 100:
            return self.answer(method)
        if method == "HEAD" or status in (204, 304):
            return status, headers, b"", "none"
        if b"content-length" in headers:
            size = int(headers[b"content-length"])
            while len(self.buf) < size:
                assert self._more()
            body, self.buf = self.buf[:size], self.buf[size:]
            return status, headers, body, "length"
        if headers.get(b"transfer-encoding") == b"chunked":
            chunks: list[bytes] = []
            while True:
                while b"\r\n" not in self.buf:
                    assert self._more(), "the body ended without its terminator"
                size_line, _, rest = self.buf.partition(b"\r\n")
                size = int(size_line, 16)
                while len(rest) < size + 2:
                    assert self._more(), "the body ended inside a chunk"
                    size_line, _, rest = self.buf.partition(b"\r\n")
                assert rest[size : size + 2] == b"\r\n"
                self.buf = rest[size + 2 :]
                if size == 0:
                    return status, headers, b"".join(chunks), "chunked"
                chunks.append(rest[:size])
        while self._more():
            pass
        body, self.buf = self.buf, b""
        return status, headers, body, "close"


def request(
    path: str = "/",
    body: bytes = b"",
    *,
    method: str = "POST",
    version: str = "1.1",
    extra: bytes = b"",
) -> bytes:
    head = f"{method} {path} HTTP/{version}\r\nhost: t\r\n".encode() + extra
    if method == "POST":
        head += b"content-length: %d\r\n" % len(body)
    return head + b"\r\n" + body


async def echo(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The request's method, path, query and body back; a streamed answer of three pieces at
    ``/stream``."""
    body = b""
    while True:
        message = await receive()
        assert message["type"] == "http.request"
        body += message["body"]
        if not message["more_body"]:
            break
    if scope["path"] == "/stream":
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]}
        )
        for piece in (b"one ", b"two ", body):
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        return
    text = b"%b %b %b %b" % (scope["method"].encode(), scope["path"].encode(), scope["query_string"], body)
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(text))],
        }
    )
    await send({"type": "http.response.body", "body": text})


def test_a_streamed_answer_is_chunked_and_the_connection_kept(loop: str) -> None:
    with Running(echo, loop) as server, server.connect() as sock:
        reader = Reader(sock)
        for n in range(3):
            sock.sendall(request("/stream", b"x%d" % n))
            status, headers, body, framing = reader.answer()
            assert (status, body, framing) == (200, b"one two x%d" % n, "chunked")
            assert headers[b"content-type"] == b"text/plain" and b"date" in headers
            assert b"server" not in headers and b"connection" not in headers


def test_a_length_answer_the_path_decoded_and_the_query(loop: str) -> None:
    with Running(echo, loop) as server, server.connect() as sock:
        sock.sendall(request("/a%20b?q=1&r=%20", b"hello"))
        status, _headers, body, framing = Reader(sock).answer()
        assert (status, body, framing) == (200, b"POST /a b q=1&r=%20 hello", "length")


def test_http_1_0_has_no_chunks_and_the_close_ends_the_answer(loop: str) -> None:
    with Running(echo, loop) as server, server.connect() as sock:
        sock.sendall(request("/stream", b"z", version="1.0"))
        status, headers, body, framing = Reader(sock).answer()
        assert (status, body, framing) == (200, b"one two z", "close")
        assert headers[b"connection"] == b"close" and b"transfer-encoding" not in headers


def test_pipelined_requests_are_answered_in_order(loop: str) -> None:
    order: list[str] = []

    async def slow_first(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await receive()
        order.append("start " + scope["path"])
        if scope["path"] == "/slow":
            await asyncio.sleep(0.2)
        order.append("end " + scope["path"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": scope["path"].encode()})

    with Running(slow_first, loop) as server, server.connect() as sock:
        sock.sendall(request("/slow") + request("/fast") + request("/third"))
        reader = Reader(sock)
        bodies = [reader.answer()[2] for _ in range(3)]
    assert bodies == [b"/slow", b"/fast", b"/third"]
    # the next one started only once the one before had ended
    assert order == ["start /slow", "end /slow", "start /fast", "end /fast", "start /third", "end /third"]


def test_a_flood_of_pipelined_requests_closes_the_connection(loop: str) -> None:
    # thousands of tiny requests in one read would each be parsed ahead of the first answer:
    # past MAX_PIPELINED the connection closes instead of holding them all
    from fastsse.gateway._http import MAX_PIPELINED

    release = threading.Event()
    started: list[str] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        started.append(scope["path"])
        while not release.is_set():
            await asyncio.sleep(0.01)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    with Running(app, loop) as server, server.connect() as sock:
        sock.sendall(b"GET /a HTTP/1.1\r\nhost: t\r\n\r\n" * (MAX_PIPELINED + 2))
        time.sleep(0.3)
        release.set()
        answer = read_all(sock)
        assert answer.count(b"HTTP/1.1 200 ") <= 1  # the first one, or none: it was cut
        assert started == ["/a"]


def test_expect_100_continue_is_answered_when_the_body_is_asked_for(loop: str) -> None:
    with Running(echo, loop) as server, server.connect() as sock:
        head = b"POST /e HTTP/1.1\r\nhost: t\r\nexpect: 100-continue\r\ncontent-length: 4\r\n\r\n"
        sock.sendall(head)
        assert sock.recv(64) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(b"body")
        status, _, body, _ = Reader(sock).answer()
        assert (status, body) == (200, b"POST /e  body")


def test_a_chunked_request_body_and_a_large_one_in_pieces(loop: str) -> None:
    with Running(echo, loop) as server, server.connect() as sock:
        sock.sendall(
            b"POST /c HTTP/1.1\r\nhost: t\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
        )
        assert Reader(sock).answer()[2] == b"POST /c  abcde"
        big = bytes(range(256)) * 4096  # 1 MiB: reading pauses past 64 KiB unread, then resumes
        sock.sendall(request("/big", big))
        status, _, body, _ = Reader(sock).answer()
        assert status == 200 and body == b"POST /big  " + big


def test_head_and_204_carry_no_body(loop: str) -> None:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        status = 204 if scope["path"] == "/none" else 200
        length = [] if status == 204 else [(b"content-length", b"5")]
        await send({"type": "http.response.start", "status": status, "headers": length})
        await send(
            {
                "type": "http.response.body",
                "body": b"" if scope["method"] == "HEAD" or status == 204 else b"hello",
            }
        )

    with Running(app, loop) as server, server.connect() as sock:
        reader = Reader(sock)
        sock.sendall(request("/", method="HEAD"))
        status, headers, _, _ = reader.answer("HEAD")
        assert (status, headers[b"content-length"]) == (200, b"5")
        sock.sendall(request("/none", method="GET"))
        assert reader.answer()[0] == 204
        sock.sendall(request("/", method="GET"))
        assert reader.answer()[2] == b"hello"  # no stray body bytes came before: the framing held


@pytest.mark.parametrize("where", ["header", "url", "many"])
def test_a_head_past_the_bound_is_a_431_and_the_connection_closes(loop: str, where: str) -> None:
    big = b"a" * (1 << 20)
    with Running(echo, loop) as server:
        with server.connect() as sock:
            if where == "header":
                data = b"GET / HTTP/1.1\r\nx-big: " + big + b"\r\n\r\n"
            elif where == "url":
                data = b"GET /?" + big + b" HTTP/1.1\r\n\r\n"
            else:
                data = b"GET / HTTP/1.1\r\n" + b"x-a: bcdefgh\r\n" * 8000 + b"\r\n"
            with contextlib.suppress(ConnectionResetError, BrokenPipeError):
                sock.sendall(data)
            answer = read_all(sock)
            assert answer.startswith(b"HTTP/1.1 431 ")
            assert b"connection: close\r\n" in answer
        with server.connect() as sock:  # and the server goes on
            sock.sendall(request("/ok", b"1"))
            assert Reader(sock).answer()[2] == b"POST /ok  1"


@pytest.mark.parametrize(
    "data",
    [
        b"GARBAGE\r\n\r\n",
        b"GET / HTTP/1.1\r\nbad header\r\n\r\n",
        b"POST / HTTP/1.1\r\ncontent-length: x\r\n\r\n",
        # a body framed two ways (request smuggling), an absurd length, two lengths that disagree
        b"POST / HTTP/1.1\r\ncontent-length: 4\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\ncontent-length: 99999999999999999999999\r\n\r\n",
        b"POST / HTTP/1.1\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\nab",
        b"POST / HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
    ],
    ids=["garbage", "header", "length", "smuggled", "absurd-length", "two-lengths", "bad-chunk"],
)
def test_a_malformed_request_is_a_400_and_the_connection_closes(loop: str, data: bytes) -> None:
    with Running(echo, loop) as server, server.connect() as sock:
        sock.sendall(data)
        answer = read_all(sock)
        assert answer.startswith(b"HTTP/1.1 400 ") and b"connection: close\r\n" in answer


def test_idle_and_half_sent_heads_are_closed_after_keep_alive_seconds(loop: str) -> None:
    with Running(echo, loop, keep_alive_seconds=0.3) as server:
        idle = server.connect()
        trickle = server.connect()
        kept = server.connect()
        start = time.monotonic()
        kept.sendall(request("/k", b"1"))
        assert Reader(kept).answer()[0] == 200
        for byte in b"POST /slow HTTP/1.1\r\n":  # a byte every 50 ms: the head never ends in time
            try:
                trickle.sendall(bytes([byte]))
            except OSError:
                break
            time.sleep(0.05)
        for sock in (idle, trickle, kept):
            sock.settimeout(5)
            assert read_all(sock) == b""
            sock.close()
        assert time.monotonic() - start < 4


@pytest.mark.parametrize("when", ["before", "after"])
def test_an_app_that_raises_gets_a_500_before_its_start_else_a_cut(loop: str, when: str) -> None:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if when == "after":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"part", "more_body": True})
        raise RuntimeError("boom")

    with Running(app, loop) as server, server.connect() as sock:
        sock.sendall(request("/", method="GET"))
        answer = read_all(sock)
    if when == "before":
        assert answer.startswith(b"HTTP/1.1 500 ") and answer.endswith(b"Internal Server Error")
    else:  # the part that went out, and no terminator: the caller's client raises
        assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"4\r\npart\r\n")


def test_an_app_returning_before_its_end_cuts_and_one_with_no_answer_is_a_500(loop: str) -> None:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["path"] == "/cut":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"part", "more_body": True})

    with Running(app, loop) as server:
        with server.connect() as sock:
            sock.sendall(request("/cut", method="GET"))
            assert read_all(sock).endswith(b"\r\n\r\n4\r\npart\r\n")
        with server.connect() as sock:
            sock.sendall(request("/nothing", method="GET"))
            assert read_all(sock).startswith(b"HTTP/1.1 500 ")


def test_a_caller_that_leaves_is_told_as_http_disconnect(loop: str) -> None:
    told = threading.Event()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert (await receive())["type"] == "http.request"
        if (await receive())["type"] == "http.disconnect":
            told.set()

    with Running(app, loop) as server:
        sock = server.connect()
        sock.sendall(request("/", b"x"))
        time.sleep(0.1)
        sock.close()
        assert told.wait(5)


def test_writes_wait_while_the_caller_does_not_read(loop: str) -> None:
    sent: list[int] = []
    piece = b"x" * 65536

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for n in range(400):  # 25 MiB, if nothing held it back
            await send({"type": "http.response.body", "body": piece, "more_body": True})
            sent.append(n)
        await send({"type": "http.response.body", "body": b""})

    with Running(app, loop) as server, server.connect(timeout=30) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        sock.sendall(request("/", method="GET"))
        time.sleep(0.5)
        held = len(sent)
        assert held < 200  # the sends waited for room
        status, _, body, framing = Reader(sock).answer("GET")
        assert (status, len(body), framing) == (200, 400 * 65536, "chunked")


@pytest.mark.parametrize(
    "headers",
    [[(b"x-bad", b"a\r\nset-cookie: b")], [(b"x-bad\n", b"a")], [(b"x-bad", b"a\x00")]],
)
def test_a_header_with_cr_lf_or_nul_is_never_written(loop: str, headers: list[tuple[bytes, bytes]]) -> None:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": headers})

    with Running(app, loop) as server, server.connect() as sock:
        sock.sendall(request("/", method="GET"))
        answer = read_all(sock)
        assert answer.startswith(b"HTTP/1.1 500 ") and b"set-cookie" not in answer


def test_content_length_is_held_to(loop: str) -> None:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"3")]})
        await send({"type": "http.response.body", "body": b"toolong"})

    with Running(app, loop) as server, server.connect() as sock:
        sock.sendall(request("/", method="GET"))
        answer = read_all(sock)
        assert b"toolong" not in answer  # the head went, the body did not, the connection closed


def test_shutdown_closes_idle_connections_and_lets_an_answer_end(loop: str) -> None:
    release = threading.Event()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        while not release.is_set():
            await asyncio.sleep(0.01)
        await send({"type": "http.response.body", "body": b"end"})

    with Running(app, loop) as server:
        idle = server.connect()
        busy = server.connect()
        busy.sendall(request("/", method="GET"))
        time.sleep(0.2)
        server.call(server.server.shutdown)
        idle.settimeout(5)
        assert read_all(idle) == b""
        release.set()
        status, _headers, body, _ = Reader(busy).answer("GET")
        assert (status, body) == (200, b"end")
        busy.settimeout(5)
        assert read_all(busy) == b""  # closed once its answer ended
        idle.close()
        busy.close()
        with pytest.raises(ConnectionRefusedError):  # the listener closed
            server.connect(timeout=1)


def test_a_whole_answer_ends_before_the_gateways_coroutines_resume(loop: str) -> None:
    """A streamed chat answer relayed through ``Gateway`` on this server (the command's path) ends
    its response (the chunked terminator) from the loop callback that read the upstream's end:
    when the attempt's coroutine resumes (``_succeeded``), the caller's response is complete
    already. The record still says complete, and the connection serves the next request."""
    from fastsse.gateway import Gateway, config_from
    from fastsse.testing.server import serve_in_thread

    with serve_in_thread(port=0) as upstream:
        gateway = Gateway(config_from({"upstream": [{"name": "u", "base_url": upstream.base_url}]}))
        complete_at_resume: list[bool] = []
        succeeded = gateway._succeeded

        def spy(up: Any) -> None:
            state = gateway._answers[asyncio.current_task()]  # type: ignore[index]
            complete_at_resume.append(bool(state.wire[1].response_complete))
            succeeded(up)

        gateway._succeeded = spy  # type: ignore[method-assign]
        # the response ends before the resume
        _two_chat_answers(gateway, loop, lambda: len(complete_at_resume) == 2)
    assert complete_at_resume == [True, True]


def test_a_complete_answer_ends_with_the_read_that_carried_its_done(
    loop: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The relay's ``[DONE]`` of a complete answer ends the caller's response at once
    (``Relay.complete``, the leg's ``on_complete``): when the upstream's ``Response.finish`` runs,
    right after that read, the caller's response is complete already; the record says complete."""
    from fastsse.client._response import Response
    from fastsse.gateway import Gateway, config_from
    from fastsse.testing.server import serve_in_thread

    with serve_in_thread(port=0) as upstream:
        records: list[dict[str, Any]] = []
        gateway = Gateway(
            config_from({"upstream": [{"name": "u", "base_url": upstream.base_url}]}),
            on_answer=records.append,
        )
        complete_at_finish: list[bool] = []
        finish = Response.finish

        def spy(self: Response, *args: Any) -> Any:
            states = list(gateway._answers.values())
            # the oldest answer in flight is this one: the caller, its response ended, may have
            # sent the next request before the upstream's own end came in a later read
            complete_at_finish.append(bool(states) and bool(states[0].wire[1].response_complete))
            return finish(self, *args)

        monkeypatch.setattr(Response, "finish", spy)
        _two_chat_answers(gateway, loop, lambda: len(records) == 2)  # ends before the record is made
    assert complete_at_finish == [True, True]
    assert [r["outcome"] for r in records] == ["complete", "complete"]


def _two_chat_answers(gateway: Any, loop: str, settled: Callable[[], bool]) -> None:
    """Two streamed chat answers through ``gateway`` on one connection, read whole; then, once
    ``settled()`` (within 10 s), the gateway's shutdown."""
    body = b'{"model": "plain", "stream": true, "messages": [{"role": "user", "content": "hi"}]}'
    with Running(gateway, loop) as server, server.connect() as sock:
        reader = Reader(sock)
        for _ in range(2):
            sock.sendall(request("/v1/chat/completions", body, extra=b"content-type: application/json\r\n"))
            status, _, text, framing = reader.answer()
            assert (status, framing) == (200, "chunked")
            assert text.endswith(b"data: [DONE]\n\n")
        deadline = time.monotonic() + 10
        while not settled():
            assert time.monotonic() < deadline, "timed out"
            time.sleep(0.005)
        server.call(lambda: asyncio.ensure_future(gateway.shutdown()))

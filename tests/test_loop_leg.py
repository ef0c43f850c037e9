"""``LoopLeg`` against libcurl: every scenario is run once by an ``AsyncClient`` (libcurl, the
oracle) and once by ``LoopLeg(AsyncClient(...))`` (the event loop's own HTTP/1.1), and the two
outcomes are compared (the result without its timing record, or the exception's class, code,
status, message and partial result, and the bytes ``on_chunk`` saw), beside what the scenario
itself says must happen.

A threaded server in this file answers by the request's ``model`` (``KIND-ARG``), on kept-alive
connections where the answer allows it, counting the connections it accepts. Every wait is
bounded: the clients' timeouts, the server's socket timeouts and ``asyncio.wait_for``.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import socketserver
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest

import fastsse
from _raw_server import clear_proxies
from fastsse.client import LoopLeg
from fastsse.client._response import WRITEFUNC_PAUSE
from test_engine_faults import END, chunk

SSE = b"Content-Type: text/event-stream\r\n"
CHUNKED = b"Transfer-Encoding: chunked\r\n"


def events(texts: list[str]) -> list[bytes]:
    """The events of a streamed answer whose content is ``texts`` joined."""
    return [chunk(texts[0], role=True)] + [chunk(t) for t in texts[1:]] + [END]


WORDS = ["Hello", ",", " loop", " leg", "!"]
BODY = b"".join(events(WORDS))


def framed(piece: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(piece), piece)


def head(status: str, *lines: bytes) -> bytes:
    return b"HTTP/1.1 " + status.encode() + b"\r\n" + b"".join(lines) + b"\r\n"


def length(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n" % len(body)


# the scenarios: (connection, server, argument, n-th request on this connection) -> keep it open


def _chunked(conn: socket.socket, srv: Upstream, arg: str, nth: int) -> bool:
    conn.sendall(head("200 OK", SSE, CHUNKED))
    for piece in events(WORDS):
        conn.sendall(framed(piece))
    conn.sendall(b"0\r\n\r\n")
    return True


def _one_send(conn: socket.socket, srv: Upstream, arg: str, nth: int) -> bool:
    # the whole chunked answer, each event its own chunk, in one write: one read on loopback
    body = b"".join(framed(piece) for piece in events(WORDS))
    conn.sendall(head("200 OK", SSE, CHUNKED) + body + b"0\r\n\r\n")
    return True


def _length(conn: socket.socket, srv: Upstream, arg: str, nth: int) -> bool:
    conn.sendall(head("200 OK", SSE, length(BODY)) + BODY)
    return True


def _close(conn: socket.socket, srv: Upstream, arg: str, nth: int) -> bool:
    conn.sendall(head("200 OK", SSE, b"Connection: close\r\n"))
    for piece in events(WORDS):
        conn.sendall(piece)
    return False


def _status(status: str, body: bytes, *lines: bytes) -> Callable[..., bool]:
    def scenario(conn: socket.socket, srv: Upstream, arg: str, nth: int) -> bool:
        conn.sendall(head(status, *lines, length(body)) + body)
        return True

    return scenario


RATE = orjson.dumps({"error": {"message": "slow down", "type": "rate_limit_error"}})
HTML = b"<html><body><h1>500 Internal Server Error</h1></body></html>"
WHOLE = orjson.dumps(
    {
        "id": "x",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "whole"}, "finish_reason": "stop"}
        ],
    }
)


def _r204(conn: socket.socket, srv: Upstream, arg: str, nth: int) -> bool:
    conn.sendall(head("204 No Content"))
    return True


def _cut(conn: socket.socket, srv: Upstream, arg: str, nth: int) -> bool:
    conn.sendall(head("200 OK", SSE, CHUNKED))
    for piece in events(WORDS)[:3]:
        conn.sendall(framed(piece))
    return False  # closed: the answer's last chunk never comes


def _empty(conn: socket.socket, srv: Upstream, arg: str, nth: int) -> bool:
    return False


OK_SSE = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"


def encoded(
    coding: str,
    data: bytes,
    *,
    raw: bool = False,
    chunks: bool = False,
    body: bytes | None = None,
    status: str = "200 OK",
    kind: str = "text/event-stream",
) -> bytes:
    """An answer with ``data`` under ``Content-Encoding: coding`` (or ``body`` as it is), each
    event flushed on its own with ``chunks``."""
    if body is None:
        body = data
        for name in (c.strip() for c in coding.split(",")):
            wbits = 31 if name.endswith("gzip") else -15 if raw else 15
            packer = zlib.compressobj(wbits=wbits)
            if chunks:
                pieces = [packer.compress(p) + packer.flush(zlib.Z_SYNC_FLUSH) for p in events(WORDS)]
                pieces.append(packer.flush())
                top = head(status, f"Content-Type: {kind}\r\n".encode(), CHUNKED)
                return top.replace(b"\r\n\r\n", f"\r\nContent-Encoding: {coding}\r\n\r\n".encode()) + (
                    b"".join(framed(p) for p in pieces if p) + b"0\r\n\r\n"
                )
            body = packer.compress(body) + packer.flush()
    lines = (f"Content-Type: {kind}\r\n".encode(), f"Content-Encoding: {coding}\r\n".encode(), length(body))
    return head(status, *lines) + body


# answers sent as they are, then the close: (the bytes, what both ways make of them)
RAW: dict[str, tuple[bytes, Any]] = {
    # no HTTP/1.x status line: libcurl's 1 (unsupported protocol: HTTP/0.9 is refused)
    "nothttp": (b"\x00\x01\x02 this is not HTTP at all \xff\xfe\r\n\r\n", 1),
    "version": (b"HTTP/9.9 200 OK\r\nContent-Length: 0\r\n\r\n", 1),
    "status": (b"HTTP/1.1 abc\r\n\r\n", 1),
    # a broken head or body after the status line
    "header": (b"HTTP/1.1 200 OK\r\nbad header line\r\nContent-Length: 0\r\n\r\n", 8),
    "chunksize": (OK_SSE + b"Transfer-Encoding: chunked\r\n\r\nzz\r\nabc", 56),
    "twolengths": (OK_SSE + b"Content-Length: 5\r\nContent-Length: 6\r\n\r\nabcde", 8),
    "short": (OK_SSE + b"Content-Length: 5\r\n\r\nab", 18),
    "continue": (b"HTTP/1.1 100 Continue\r\n\r\n" + OK_SSE + length(BODY) + b"\r\n" + BODY, 200),
    "http10": (b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + BODY, 200),
    "odd": (b"HTTP/1.1 599 Odd\r\nContent-Length: 0\r\n\r\n", 599),
    # compressed although identity was asked for: decoded (gzip, deflate with or without its
    # zlib wrapper, one coding over another), or 61 (a coding not known, bytes that do not decode)
    "gzip": (encoded("gzip", BODY), 200),
    "xgzip": (encoded("x-gzip", BODY), 200),
    "deflate": (encoded("deflate", BODY), 200),
    "rawdeflate": (encoded("deflate", BODY, raw=True), 200),
    "twice": (encoded("gzip, deflate", BODY), 200),
    "gzipchunks": (encoded("gzip", BODY, chunks=True), 200),
    "badgzip": (encoded("gzip", b"", body=b"this is no gzip stream"), 61),
    "unknown": (encoded("compress", b"", body=b"xxxx"), 61),
    "gzip500": (encoded("gzip", HTML, status="500 Internal Server Error", kind="text/html"), 500),
    # a status line with no reason phrase (and no space before it)
    "noreason": (b"HTTP/1.1 200\r\nContent-Type: text/event-stream\r\n" + length(BODY) + b"\r\n" + BODY, 200),
    "noreason429": (
        b"HTTP/1.1 429\r\nContent-Type: application/json\r\n" + length(RATE) + b"\r\n" + RATE,
        429,
    ),
    # a length and chunks: the chunks frame it (RFC 9112 6.3), as libcurl reads it
    "lengthandchunks": (
        OK_SSE + b"Content-Length: 3\r\n" + CHUNKED + b"\r\n" + framed(BODY) + b"0\r\n\r\n",
        200,
    ),
    # libcurl's bounds on an answer's head: 100 KiB a line (100), 300 KiB in all (56)
    "line90k": (OK_SSE + b"X-Big: " + b"a" * (90 << 10) + b"\r\n" + length(BODY) + b"\r\n" + BODY, 200),
    "line101k": (OK_SSE + b"X-Big: " + b"a" * (101 << 10) + b"\r\n" + length(BODY) + b"\r\n" + BODY, 100),
    "line2m": (OK_SSE + b"X-Big: " + b"a" * (2 << 20) + b"\r\n" + length(BODY) + b"\r\n" + BODY, 100),
    "status120k": (b"HTTP/1.1 200 " + b"O" * (120 << 10) + b"\r\nContent-Length: 0\r\n\r\n", 100),
    "head290k": (
        OK_SSE + b"".join(b"X-B%d: %b\r\n" % (i, b"a" * (29 << 10)) for i in range(10)) + b"\r\n",
        200,
    ),
    "head350k": (
        OK_SSE + b"".join(b"X-B%d: %b\r\n" % (i, b"a" * (35 << 10)) for i in range(10)) + b"\r\n",
        56,
    ),
    # lines ended by a bare LF, which libcurl reads as CRLF
    "barelf": (b"HTTP/1.1 200 OK\nContent-Type: text/event-stream\n" + length(BODY) + b"\n" + BODY, 200),
}

# answers the loop reads its own way, on purpose (test_where_the_loop_differs_on_purpose)
OWN: dict[str, tuple[bytes, int]] = {
    # the head cut before its end: libcurl gives a result (status 200, no choice); the loop a
    # TransportError 18 with the partial result, as for any answer cut short, which a caller
    # retries rather than taking an empty answer for a whole one
    "cuthead": (b"HTTP/1.1 200 OK\r\nCont", 18),
    # a 101 to a POST that asked for no upgrade: libcurl gives a result (status 101, "the stream
    # was cut") even with raise_for_status; the loop says the upstream left HTTP (8)
    "switch": (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\nxx", 8),
    # llhttp's strictness where RFC 9112 forbids the sender (a head the loop calls broken, 8):
    # an obs-fold continuation line, and a space between a header's name and its colon; both
    # are read by libcurl. The parser's lenient_headers would take the fold, but also NUL and
    # control bytes in values, which libcurl refuses
    "fold": (OK_SSE + b"X-A: b\r\n c\r\n" + length(BODY) + b"\r\n" + BODY, 8),
    "spacedname": (OK_SSE + b"X-A : b\r\n" + length(BODY) + b"\r\n" + BODY, 8),
    # Transfer-Encoding: identity (gone from HTTP/1.1): libcurl fails it (61, "unsolicited"); the
    # loop reads the body to the close, as for any answer with no length or chunks
    "teidentity": (OK_SSE + b"Transfer-Encoding: identity\r\nConnection: close\r\n\r\n" + BODY, 200),
    # chunk sizes ended by a bare LF: libcurl reads them; llhttp needs the CR after a chunk size
    # whatever its leniencies (bare-LF heads are read), and no HTTP/1.1 server sends this
    "barelfchunks": (
        b"HTTP/1.1 200 OK\nContent-Type: text/event-stream\nTransfer-Encoding: chunked\n\n"
        + b"".join(b"%x\n%b\n" % (len(piece), piece) for piece in events(WORDS))
        + b"0\n\n",
        56,
    ),
}


def _two_frames(conn: socket.socket, srv: Upstream, arg: str, nth: int) -> bool:
    conn.sendall(RAW["lengthandchunks"][0])
    return True  # kept open: the client may send another request on it


def _raw(conn: socket.socket, srv: Upstream, arg: str, nth: int) -> bool:
    conn.sendall(RAW[arg][0] if arg in RAW else OWN[arg][0])
    return False


def _slowhead(conn: socket.socket, srv: Upstream, arg: str, nth: int) -> bool:
    srv.quiet(conn, float(arg))
    return False


def _idle(conn: socket.socket, srv: Upstream, arg: str, nth: int) -> bool:
    conn.sendall(head("200 OK", SSE, b"Connection: close\r\n") + chunk("a", role=True))
    srv.quiet(conn, float(arg))
    return False


def _long(conn: socket.socket, srv: Upstream, arg: str, nth: int) -> bool:
    conn.sendall(head("200 OK", SSE, b"Connection: close\r\n") + chunk("a", role=True))
    for _ in range(int(arg)):
        time.sleep(0.1)
        conn.sendall(chunk("a"))
    conn.sendall(END)
    return False


def _big(conn: socket.socket, srv: Upstream, arg: str, nth: int) -> bool:
    # many events, as fast as the socket takes them, recording how far the server got
    model = f"big-{arg}"
    conn.sendall(head("200 OK", SSE, b"Connection: close\r\n"))
    count = 0
    for piece in big_events(int(arg)):
        conn.sendall(piece)
        count += len(piece)
        srv.sent[model] = count
    srv.sent[model] = -1  # all written
    return False


def big_events(n: int) -> list[bytes]:
    return events([f" w{i:06d}" + "x" * 200 for i in range(n)])


def _gzipped(conn: socket.socket, srv: Upstream, arg: str, nth: int) -> bool:
    # many events, gzipped, each flushed in a chunk of its own
    packer = zlib.compressobj(wbits=31)
    conn.sendall(head("200 OK", SSE, CHUNKED, b"Content-Encoding: gzip\r\n"))
    for piece in big_events(int(arg)):
        conn.sendall(framed(packer.compress(piece) + packer.flush(zlib.Z_SYNC_FLUSH)))
    conn.sendall(framed(packer.flush()) + b"0\r\n\r\n")
    return True


def _huge(conn: socket.socket, srv: Upstream, arg: str, nth: int) -> bool:
    body = b"".join(events(["a" * int(arg), "b"]))
    conn.sendall(head("200 OK", SSE, length(body)) + body)
    return True


def _gate(conn: socket.socket, srv: Upstream, arg: str, nth: int) -> bool:
    # the first event, then the rest once the test opens gate ARG; a client that leaves first is seen
    conn.sendall(head("200 OK", SSE, CHUNKED) + framed(chunk("one", role=True)))
    srv.started(arg).set()
    gate = srv.gate(arg)
    conn.settimeout(0.02)
    deadline = time.monotonic() + 10
    while not gate.is_set() and time.monotonic() < deadline:
        try:
            if not conn.recv(65536):
                srv.eof(arg).set()
                return False
        except TimeoutError:
            pass
    conn.settimeout(10)
    conn.sendall(framed(chunk(" two")) + framed(END) + b"0\r\n\r\n")
    return True


def _echo(conn: socket.socket, srv: Upstream, arg: str, nth: int) -> bool:
    # the normal answer, with the request's head kept for the test
    srv.heads[arg] = srv.last
    return _length(conn, srv, arg, nth)


def _keep_then_close(conn: socket.socket, srv: Upstream, arg: str, nth: int) -> bool:
    # a kept-alive answer, then the connection closed while idle
    conn.sendall(head("200 OK", SSE, length(BODY)) + BODY)
    time.sleep(0.05)
    return False


def _drop_kept(conn: socket.socket, srv: Upstream, arg: str, nth: int) -> bool:
    # a request that comes on a kept connection is met with the close (the race a server's idle
    # close makes); on a new connection it is answered
    if nth > 1:
        return False
    return _length(conn, srv, arg, nth)


SCENARIOS: dict[str, Callable[[socket.socket, Upstream, str, int], bool]] = {
    "chunked": _chunked,
    "onesend": _one_send,
    "length": _length,
    "close": _close,
    "r429": _status(
        "429 Too Many Requests", RATE, b"Content-Type: application/json\r\n", b"Retry-After: 7\r\n"
    ),
    "r500": _status("500 Internal Server Error", HTML, b"Content-Type: text/html\r\n"),
    "r302": _status("302 Found", b"", b"Location: http://example.invalid/v1/chat/completions\r\n"),
    "r204": _r204,
    "json": _status("200 OK", WHOLE, b"Content-Type: application/json\r\n"),
    "untyped": _status("200 OK", BODY),
    "cut": _cut,
    "empty": _empty,
    "raw": _raw,
    "twoframes": _two_frames,
    "slowhead": _slowhead,
    "idle": _idle,
    "long": _long,
    "big": _big,
    "huge": _huge,
    "gzipped": _gzipped,
    "gate": _gate,
    "echo": _echo,
    "keepclose": _keep_then_close,
    "dropkept": _drop_kept,
}


class Upstream(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.accepts = 0
        self.sent: dict[str, int] = {}
        self.heads: dict[str, tuple[bytes, bytes]] = {}
        self.last = (b"", b"")  # the last request's head and body (only the echo scenario reads it)
        self.events: dict[str, threading.Event] = {}
        self.base_url = f"http://127.0.0.1:{self.server_address[1]}/v1"

    def _event(self, name: str) -> threading.Event:
        with self.lock:
            return self.events.setdefault(name, threading.Event())

    def gate(self, name: str) -> threading.Event:
        return self._event(f"gate:{name}")

    def started(self, name: str) -> threading.Event:
        return self._event(f"started:{name}")

    def eof(self, name: str) -> threading.Event:
        return self._event(f"eof:{name}")

    def quiet(self, conn: socket.socket, seconds: float) -> None:
        """Send nothing for ``seconds``, or until the client closes."""
        conn.settimeout(seconds)
        with contextlib.suppress(TimeoutError):
            conn.recv(65536)
        conn.settimeout(10)


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        conn: socket.socket = self.request
        conn.settimeout(10)
        server: Upstream = self.server  # type: ignore[assignment]
        with server.lock:
            server.accepts += 1
        data = b""
        nth = 0
        with contextlib.suppress(OSError):
            while True:
                while b"\r\n\r\n" not in data:
                    more = conn.recv(65536)
                    if not more:
                        return
                    data += more
                top, _, data = data.partition(b"\r\n\r\n")
                size = next(
                    (
                        int(x.split(b":")[1])
                        for x in top.split(b"\r\n")
                        if x.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                while len(data) < size:
                    more = conn.recv(65536)
                    if not more:
                        return
                    data += more
                body, data = data[:size], data[size:]
                server.last = (top, body)
                nth += 1
                kind, _, arg = orjson.loads(body)["model"].partition("-")
                if not SCENARIOS[kind](conn, server, arg, nth):
                    return


@pytest.fixture(scope="module")
def srv() -> Iterator[Upstream]:
    server = Upstream()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        for event in list(server.events.values()):
            event.set()
        server.shutdown()
        server.server_close()


@pytest.fixture(params=["asyncio", "uvloop"])
def run(request: pytest.FixtureRequest) -> Callable[[Any], Any]:
    if request.param == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        return lambda coro: uvloop.run(coro)
    return asyncio.run


def uvloop_run(coro: Any) -> Any:
    """uvloop's run where it is installed (the tests that take a while run on one loop each)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - the test extra installs it
        return asyncio.run(coro)
    return uvloop.run(coro)


def req(model: str) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": "hi"}]}


def content(result: dict[str, Any]) -> str:
    return str(result["choices"][0]["message"]["content"])


_names = iter(range(1_000_000))


def fresh(prefix: str = "g") -> str:
    return f"{prefix}{next(_names)}"


@pytest.fixture(scope="module")
def blackhole() -> Iterator[str]:
    """The base URL of a port whose connections never complete: its listener's backlog is full
    (and it never accepts), so a new SYN is dropped."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(4):
        filler = socket.socket()
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            filler.connect(("127.0.0.1", port))
        fillers.append(filler)
    time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# the two ways, and what is compared


def client(srv: Upstream, **options: Any) -> fastsse.AsyncClient:
    settings: dict[str, Any] = {
        "base_url": srv.base_url,
        "api_key": "x",
        "max_retries": 0,
        "raise_for_status": True,
        "timing": True,
        "timeout": 10,
    }
    settings.update(options)
    return fastsse.AsyncClient(**settings)


class Outcome:
    """One run: the result or the exception, and the bytes ``on_chunk`` was given."""

    def __init__(self, value: Any, got: list[Any]) -> None:
        self.value = value
        self.got = got

    @property
    def result(self) -> dict[str, Any]:
        assert isinstance(self.value, dict), self.value
        return self.value

    @property
    def error(self) -> BaseException:
        assert isinstance(self.value, BaseException), self.value
        return self.value

    def joined(self) -> Any:
        """The bytes given to ``on_chunk`` (its chunks as they are in the chat format)."""
        if all(isinstance(piece, bytes) for piece in self.got):
            return b"".join(self.got)
        return self.got


def untimed(result: Any) -> Any:
    if not isinstance(result, dict):
        return result
    out = dict(result)
    out.pop("timing", None)
    return out


_DETAIL = re.compile(r"(: ).*( \(curl error \d+\))$")
_AFTER = re.compile(r"after \d+ milliseconds.*( \(curl error 28\))$")


def shape(outcome: Outcome) -> Any:
    """What must be the same both ways."""
    value = outcome.value
    if not isinstance(value, BaseException):
        return {"result": untimed(value), "bytes": outcome.joined() if outcome.got else None}
    message = str(value)
    if isinstance(value, fastsse.TransportError) and value.code in (1, 7, 8, 18, 52, 56, 61, 100):
        # libcurl words these in its own way (its strerror, "after 0 ms", its parser's words);
        # the URL and the code are the meaningful part
        message = _DETAIL.sub(r"\1...\2", message)
    elif isinstance(value, fastsse.TransportError) and value.code == 28:
        # libcurl counts the bytes it received ("with 739 bytes received"); the elapsed time
        # differs by a millisecond or so between two runs
        message = _AFTER.sub(r"after N ms\1", message)
    return {
        "class": type(value),
        "code": getattr(value, "code", None),
        "status": getattr(value, "status", None),
        "message": message,
        "result": untimed(getattr(value, "result", None)),
        "bytes": outcome.joined() if outcome.got else None,
    }


async def once(leg: Any, model: str, on_chunk: Any = None, collect: bool = False, **options: Any) -> Outcome:
    got: list[Any] = []
    callback = on_chunk
    if collect and on_chunk is None:

        def callback(piece: Any) -> None:
            got.append(piece)

    elif on_chunk is not None:

        def callback(piece: Any) -> Any:
            got.append(piece)
            return on_chunk(piece)

    try:
        value: Any = await asyncio.wait_for(leg.create_stream(req(model), callback, **options), 15)
    except Exception as exc:
        value = exc
    return Outcome(value, got)


async def both(
    srv: Upstream,
    model: str | Callable[[], str],
    *,
    setup: dict[str, Any] | None = None,
    taken: int = 1,
    **options: Any,
) -> tuple[Outcome, Outcome]:
    """The request run by libcurl, then by a LoopLeg (asserted to have taken it)."""
    out = []
    for on_loop in (False, True):
        name = model() if callable(model) else model
        plain = client(srv, **(setup or {}))
        leg: Any = LoopLeg(plain) if on_loop else plain
        try:
            out.append(await once(leg, name, **options))
        finally:
            await leg.close()
        if on_loop:
            assert leg.taken == taken
    return out[0], out[1]


def same(curl: Outcome, loop: Outcome) -> None:
    assert shape(loop) == shape(curl)


# 1. answers read whole: chunked, with a length, ended by the close; each format

FORMATS = [
    pytest.param({}, id="chat"),
    pytest.param({"format": "passthrough", "collect": True}, id="passthrough"),
    pytest.param({"format": "relay", "collect": True}, id="relay"),
]


@pytest.mark.parametrize("model", ["chunked", "length", "close", "untyped"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_whole_answer_is_the_same_both_ways(
    srv: Upstream, stream_backend: Any, run: Any, model: str, fmt: dict[str, Any]
) -> None:
    curl, loop = run(both(srv, model, **fmt))
    same(curl, loop)
    result = loop.result
    assert result["verdict"]["complete"] is True
    assert content(result) == "".join(WORDS)
    assert result["http"]["status"] == 200
    if fmt.get("format") == "passthrough":
        assert loop.joined() == BODY  # the upstream's bytes, unchanged
    elif fmt.get("format") == "relay":
        assert loop.joined().endswith(b"data: [DONE]\n\n") and b" loop" in loop.joined()


@pytest.mark.parametrize("fmt", FORMATS[1:])
def test_a_read_of_many_chunks_goes_on_as_one_piece(
    srv: Upstream, stream_backend: Any, run: Any, fmt: dict[str, Any]
) -> None:
    """A read is a socket read, not an HTTP chunk: an answer whose events come as one chunk each,
    all in one read, reaches ``on_chunk`` once on the loop (relayed, folded and written once in the
    gateway), as through the compiled libcurl driver (pycurl's libcurl, decoding the chunks, calls
    it once a chunk). The bytes are the same."""
    curl, loop = run(both(srv, "onesend", **fmt))
    same(curl, loop)
    assert loop.result["verdict"]["complete"] is True
    assert len(loop.got) == 1


def test_timing_is_recorded_both_ways(srv: Upstream, stream_backend: Any) -> None:
    curl, loop = asyncio.run(both(srv, "chunked"))
    assert set(loop.result["timing"]) == set(curl.result["timing"])
    timing = loop.result["timing"]
    assert timing["started"] <= timing["sent"] <= timing["end"]


# 2. kept-alive connections


def test_two_requests_in_a_row_reuse_one_connection(srv: Upstream, stream_backend: Any, run: Any) -> None:
    async def main(on_loop: bool) -> tuple[list[str], int]:
        plain = client(srv)
        leg: Any = LoopLeg(plain) if on_loop else plain
        before = srv.accepts
        try:
            texts = [content(await leg.create_stream(req(m))) for m in ("chunked", "length", "chunked")]
        finally:
            await leg.close()
        if on_loop:
            assert leg.taken == 3
        return texts, srv.accepts - before

    assert run(main(True)) == run(main(False)) == (["".join(WORDS)] * 3, 1)


@pytest.mark.parametrize(
    ("first", "accepts"),
    [
        ("r429", 1),
        ("r500", 1),
        ("r204", 1),
        ("r302", 1),
        ("json", 1),
        ("close", 2),
        ("cut", 2),
        ("long-20", 2),
    ],
)
def test_which_answers_leave_the_connection_kept(
    srv: Upstream, stream_backend: Any, run: Any, first: str, accepts: int
) -> None:
    # a whole answer with a length or chunks leaves it for the next request; one ended by the
    # close, cut, or stopped by on_chunk (long-20) does not
    async def main(on_loop: bool) -> tuple[Any, str, int]:
        plain = client(srv)
        leg: Any = LoopLeg(plain) if on_loop else plain
        before = srv.accepts
        try:
            one = await once(leg, first, on_chunk=lambda piece: False)
            then = content(await leg.create_stream(req("chunked")))
        finally:
            await leg.close()
        return shape(one), then, srv.accepts - before

    curl, loop = run(main(False)), run(main(True))
    assert loop == curl
    assert loop[1:] == ("".join(WORDS), accepts)


def test_an_answer_framed_two_ways_leaves_no_connection_kept(
    srv: Upstream, stream_backend: Any, run: Any
) -> None:
    # read by its chunks, but a connection whose answer also had a length is not used again
    async def main() -> int:
        leg = LoopLeg(client(srv))
        before = srv.accepts
        try:
            for model in ("twoframes", "chunked"):
                assert content(await leg.create_stream(req(model))) == "".join(WORDS)
        finally:
            await leg.close()
        return srv.accepts - before

    assert run(main()) == 2


def test_a_new_connection_sends_its_request_as_it_comes_up(
    srv: Upstream, stream_backend: Any, run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # in the callback that saw the connection up, not turns of a busy loop later (after the
    # connect's task, the wait on it and the transfer's task had each had a turn)
    from fastsse.client import _loop

    seen: list[bool] = []
    made = _loop._Connection.connection_made

    def connection_made(self: Any, transport: Any) -> None:
        opener = self.opener
        made(self, transport)
        seen.append(opener is not None and opener.sent is not None)

    monkeypatch.setattr(_loop._Connection, "connection_made", connection_made)

    async def main() -> str:
        leg = LoopLeg(client(srv))
        try:
            return content(await leg.create_stream(req("chunked")))
        finally:
            await leg.close()

    assert run(main()) == "".join(WORDS)
    assert seen == [True]


def test_answers_that_end_before_their_connects_return_keep_each_connection_once(
    srv: Upstream, stream_backend: Any, run: Any
) -> None:
    # a short answer can be whole before the task that opened its connection resumes: the
    # connection is kept by the answer's end only (kept twice, two requests would share it)
    async def main() -> tuple[list[str], int, int]:
        leg = LoopLeg(client(srv, max_connections=8))
        before = srv.accepts
        try:
            texts = []
            for _ in range(3):
                outcomes = await asyncio.gather(*(leg.create_stream(req("json")) for _ in range(8)))
                texts += [content(one) for one in outcomes]
            kept = sum(len(pool) for pool in leg._idle.values())
            distinct = len({id(c) for pool in leg._idle.values() for c in pool})
        finally:
            await leg.close()
        assert kept == distinct
        return texts, srv.accepts - before, kept

    texts, accepted, kept = run(main())
    assert texts == ["whole"] * 24
    assert accepted <= 8 and kept <= 8


@pytest.mark.parametrize("second", ["keepclose", "dropkept"])
def test_a_kept_connection_closed_by_the_server_is_replaced_once(
    srv: Upstream, stream_backend: Any, run: Any, second: str
) -> None:
    # keepclose: the server closes the kept connection while it is idle (its FIN is in before the
    # next request); dropkept: it closes it as the next request comes (nothing of an answer read)
    async def main(on_loop: bool) -> tuple[list[str], int]:
        plain = client(srv)
        leg: Any = LoopLeg(plain) if on_loop else plain
        before = srv.accepts
        try:
            first = content(await leg.create_stream(req(second if second == "keepclose" else "length")))
            await asyncio.sleep(0.12)
            then = content(await leg.create_stream(req(second)))
        finally:
            await leg.close()
        if on_loop:
            assert leg.taken == 2
        return [first, then], srv.accepts - before

    assert run(main(True)) == run(main(False)) == (["".join(WORDS)] * 2, 2)


def test_the_request_is_the_one_libcurl_sends(srv: Upstream, stream_backend: Any, run: Any) -> None:
    # the request line, the headers (names and values; libcurl's order is not kept) and the body
    names = iter(("curl", "loop"))
    curl, loop = run(both(srv, lambda: f"echo-{next(names)}", setup={"headers": {"X-Team": "a b"}}))
    same(curl, loop)
    heads = {}
    for name in ("curl", "loop"):
        top, body = srv.heads[name]
        line, *lines = top.split(b"\r\n")
        # pycurl's own User-Agent ("PycURL/7.x libcurl/8.x ..."), which the pycurl driver sends and
        # the compiled driver does not, is libcurl's binding speaking, not the client
        lines = [x for x in lines if not x.startswith(b"User-Agent: PycURL/")]
        heads[name] = (line, sorted(lines), body.replace(b"echo-" + name.encode(), b""))
    assert heads["loop"] == heads["curl"]
    line, lines, _ = heads["loop"]
    assert line == b"POST /v1/chat/completions HTTP/1.1"
    assert b"X-Team: a b" in lines and b"Accept-Encoding: identity" in lines


# 3. answers that are no stream (raise_for_status=True)


def test_429_with_retry_after(srv: Upstream, stream_backend: Any, run: Any) -> None:
    curl, loop = run(both(srv, "r429"))
    same(curl, loop)
    error = loop.error
    assert isinstance(error, fastsse.HTTPStatusError)
    assert error.status == 429 and error.retry_after == 7.0
    assert error.error == {"message": "slow down", "type": "rate_limit_error"}
    assert "slow down" in str(error)


def test_500_with_an_html_body(srv: Upstream, stream_backend: Any, run: Any) -> None:
    curl, loop = run(both(srv, "r500"))
    same(curl, loop)
    error = loop.error
    assert isinstance(error, fastsse.HTTPStatusError)
    assert error.status == 500 and error.body == HTML


def test_a_redirect_is_not_followed(srv: Upstream, stream_backend: Any, run: Any) -> None:
    curl, loop = run(both(srv, "r302"))
    same(curl, loop)
    error = loop.error
    assert isinstance(error, fastsse.HTTPStatusError)
    assert error.status == 302 and "example.invalid" in str(error)
    assert error.result["http"]["location"] == "http://example.invalid/v1/chat/completions"


def test_204(srv: Upstream, stream_backend: Any, run: Any) -> None:
    curl, loop = run(both(srv, "r204"))
    same(curl, loop)
    assert isinstance(loop.error, fastsse.HTTPStatusError) and loop.error.status == 204


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_json_answer_is_folded_as_its_stream(
    srv: Upstream, stream_backend: Any, run: Any, fmt: dict[str, Any]
) -> None:
    curl, loop = run(both(srv, "json", **fmt))
    same(curl, loop)
    assert content(loop.result) == "whole"
    assert loop.result["verdict"]["complete"] is True


# 4. failures of the transport


def test_a_cut_answer_keeps_its_partial_result(srv: Upstream, stream_backend: Any, run: Any) -> None:
    curl, loop = run(both(srv, "cut"))
    same(curl, loop)
    error = loop.error
    assert isinstance(error, fastsse.TransportError) and error.code == 18
    assert error.result is not None
    assert content(error.result) == "".join(WORDS[:3])
    assert error.result["verdict"]["complete"] is False


def test_an_empty_reply(srv: Upstream, stream_backend: Any, run: Any) -> None:
    curl, loop = run(both(srv, "empty"))
    same(curl, loop)
    assert isinstance(loop.error, fastsse.TransportError) and loop.error.code == 52


def test_connection_refused(srv: Upstream, stream_backend: Any, run: Any) -> None:
    port = closed_port()
    curl, loop = run(both(srv, "chunked", setup={"base_url": f"http://127.0.0.1:{port}/v1"}))
    same(curl, loop)
    error = loop.error
    assert isinstance(error, fastsse.TransportError) and error.code == 7
    assert not isinstance(error, ValueError)


@pytest.mark.parametrize("name", list(RAW))
def test_an_answer_that_breaks_http(srv: Upstream, stream_backend: Any, run: Any, name: str) -> None:
    curl, loop = run(both(srv, f"raw-{name}"))
    same(curl, loop)
    expected = RAW[name][1]
    if expected == 200 and name == "head290k":
        assert loop.result["verdict"]["complete"] is False  # no body: an empty stream
    elif expected == 200:
        assert content(loop.result) == "".join(WORDS)
    elif expected >= 300:
        assert isinstance(loop.error, fastsse.HTTPStatusError) and loop.error.status == expected
        if name == "gzip500":
            assert loop.error.body == HTML  # decoded
    else:
        assert isinstance(loop.error, fastsse.TransportError) and loop.error.code == expected


@pytest.mark.parametrize("name", list(OWN))
def test_where_the_loop_differs_on_purpose(srv: Upstream, stream_backend: Any, run: Any, name: str) -> None:
    async def main() -> Outcome:
        leg = LoopLeg(client(srv))
        try:
            return await once(leg, f"raw-{name}")
        finally:
            await leg.close()

    outcome = run(main())
    if OWN[name][1] == 200:
        assert content(outcome.result) == "".join(WORDS)
        return
    error = outcome.error
    assert isinstance(error, fastsse.TransportError) and error.code == OWN[name][1]
    assert error.result is not None and error.result["verdict"]["complete"] is False


# 5. timeouts


def test_first_byte_timeout(srv: Upstream, stream_backend: Any) -> None:
    start = time.monotonic()
    curl, loop = asyncio.run(both(srv, "slowhead-1.5", first_byte_timeout=0.3))
    assert time.monotonic() - start < 2.5  # each well before the server's 1.5 s
    same(curl, loop)
    error = loop.error
    assert isinstance(error, fastsse.TransportError) and error.code == 28
    assert "first_byte_timeout" in str(error)


def test_idle_timeout(srv: Upstream, stream_backend: Any) -> None:
    curl, loop = asyncio.run(both(srv, "idle-1.5", idle_timeout=0.3))
    same(curl, loop)
    error = loop.error
    assert isinstance(error, fastsse.TransportError) and error.code == 28
    assert "idle_timeout" in str(error)
    assert error.result is not None and content(error.result) == "a"


def test_total_timeout(srv: Upstream, stream_backend: Any) -> None:
    start = time.monotonic()
    curl, loop = asyncio.run(both(srv, "long-20", timeout=0.3))
    assert time.monotonic() - start < 3.0  # not the answer's 2 s, twice

    def cut(outcome: Outcome) -> Any:
        # how many chunks came before the timeout is the clock's, not the transport's
        out = shape(outcome)
        out["result"]["choices"][0]["message"]["content"] = "a..."
        return out

    assert cut(loop) == cut(curl)
    error = loop.error
    assert isinstance(error, fastsse.TransportError) and error.code == 28
    assert error.result is not None and content(error.result).startswith("a")


@pytest.mark.parametrize(
    ("options", "words"),
    [
        pytest.param({"connect_timeout": 0.2}, "Connection timed out after", id="connect_timeout"),
        pytest.param({"timeout": 0.2}, "Connection timed out after", id="timeout"),
        pytest.param({"first_byte_timeout": 0.2}, "first_byte_timeout", id="first_byte_timeout"),
    ],
)
def test_a_connection_that_never_completes(
    srv: Upstream, blackhole: str, stream_backend: Any, options: dict[str, Any], words: str
) -> None:
    # each timeout counts the connect: the call ends in about 0.2 s, not the next limit's time
    async def main(on_loop: bool) -> tuple[Outcome, float]:
        plain = client(srv, base_url=blackhole, **{"timeout": 5, **options})
        leg: Any = LoopLeg(plain) if on_loop else plain
        start = time.monotonic()
        try:
            return await once(leg, "chunked"), time.monotonic() - start
        finally:
            await leg.close()

    (curl, curl_took), (loop, loop_took) = asyncio.run(main(False)), asyncio.run(main(True))
    same(curl, loop)
    assert isinstance(loop.error, fastsse.TransportError) and loop.error.code == 28
    assert words in str(loop.error)
    assert loop_took < 2.0 and curl_took < 2.0, (curl_took, loop_took)


def test_closing_the_leg_while_it_connects(srv: Upstream, blackhole: str, stream_backend: Any) -> None:
    async def main(on_loop: bool) -> tuple[Any, float]:
        plain = client(srv, base_url=blackhole)
        leg: Any = LoopLeg(plain) if on_loop else plain
        task = asyncio.create_task(once(leg, "chunked"))
        await asyncio.sleep(0.2)
        start = time.monotonic()
        await leg.close()
        outcome = await asyncio.wait_for(task, 5)
        return shape(outcome), time.monotonic() - start

    (curl, curl_took), (loop, loop_took) = uvloop_run(main(False)), uvloop_run(main(True))
    assert loop == curl and loop["class"] is fastsse.ClientClosed
    assert loop_took < 1.0 and curl_took < 1.0, (curl_took, loop_took)


# 6. on_chunk


FORMAT_NAMES = [None, "passthrough", "relay"]


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
def test_on_chunk_returning_false_stops(
    srv: Upstream, stream_backend: Any, run: Any, fmt: str | None
) -> None:
    curl, loop = run(both(srv, "long-20", on_chunk=lambda piece: False, format=fmt))
    same(curl, loop)
    result = loop.result
    assert result["verdict"]["complete"] is False
    assert len(loop.got) == 1


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
def test_on_chunk_raising_is_reraised(srv: Upstream, stream_backend: Any, run: Any, fmt: str | None) -> None:
    class Boom(Exception):
        pass

    def explode(piece: Any) -> None:
        raise Boom("on_chunk")

    curl, loop = run(both(srv, "chunked", on_chunk=explode, format=fmt))
    assert type(curl.value) is type(loop.value) is Boom
    assert len(loop.got) == len(curl.got) == 1


# 7. backpressure


def test_a_held_relay_pauses_the_upstream(srv: Upstream, stream_backend: Any) -> None:
    count = 24_000  # about 8 MiB: the loopback's socket buffers hold about 3 of them
    expected = b"".join(big_events(count))

    async def main(on_loop: bool) -> tuple[bytes, int, int]:
        model = f"big-{count}"
        srv.sent.pop(model, None)
        loop = asyncio.get_running_loop()
        hold: asyncio.Future[None] = loop.create_future()
        got: list[bytes] = []

        def on_chunk(piece: bytes) -> Any:
            got.append(piece)
            return hold if len(got) == 1 else None

        plain = client(srv)
        leg: Any = LoopLeg(plain) if on_loop else plain
        try:
            task = asyncio.create_task(leg.create_stream(req(model), on_chunk, format="relay"))
            await asyncio.sleep(0.5)
            first = srv.sent.get(model, 0)
            await asyncio.sleep(0.3)
            second = srv.sent.get(model, 0)
            assert not task.done()
            hold.set_result(None)
            result = await asyncio.wait_for(task, 15)
        finally:
            await leg.close()
        if on_loop:
            assert leg.taken == 1
        assert result["verdict"]["complete"] is True
        return b"".join(got), first, second

    for on_loop in (False, True):
        got, first, second = asyncio.run(main(on_loop))
        assert 0 < first == second < len(expected), (on_loop, first, second)  # stalled while held
        assert got.count(b"data: [DONE]") == 1 and got.endswith(b"data: [DONE]\n\n")
        numbers = re.findall(rb" w(\d{6})", got)
        assert [int(n) for n in numbers] == list(range(count))  # all of it, in order


def test_a_held_transfer_is_not_idle(srv: Upstream, stream_backend: Any) -> None:
    # held for twice idle_timeout: not idle (the consumer is slow, not the upstream); then whole
    async def main(on_loop: bool) -> Outcome:
        loop = asyncio.get_running_loop()
        hold: asyncio.Future[None] = loop.create_future()
        loop.call_later(0.45, hold.set_result, None)
        plain = client(srv, idle_timeout=0.2)
        leg: Any = LoopLeg(plain) if on_loop else plain
        try:
            return await once(leg, "chunked", on_chunk=lambda piece: hold, format="relay")
        finally:
            await leg.close()

    curl, loop = uvloop_run(main(False)), uvloop_run(main(True))
    same(curl, loop)
    assert loop.result["verdict"]["complete"] is True and loop.joined().endswith(b"data: [DONE]\n\n")


def test_a_hold_past_the_timeout(srv: Upstream, stream_backend: Any) -> None:
    # never released: the total timeout still runs
    async def main(on_loop: bool) -> Outcome:
        hold: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        plain = client(srv, timeout=0.3)
        leg: Any = LoopLeg(plain) if on_loop else plain
        try:
            return await once(leg, "long-20", on_chunk=lambda piece: hold, format="relay")
        finally:
            await leg.close()

    curl, loop = asyncio.run(main(False)), asyncio.run(main(True))
    same(curl, loop)
    assert isinstance(loop.error, fastsse.TransportError) and loop.error.code == 28


@pytest.mark.parametrize("model", ["cut", "close"])
def test_an_answer_that_ends_while_held(srv: Upstream, stream_backend: Any, run: Any, model: str) -> None:
    # the upstream is done (cut, or ended by its close) while the consumer holds the transfer:
    # what was read before is delivered on the release, then the end is told
    async def main(on_loop: bool) -> Outcome:
        loop = asyncio.get_running_loop()
        hold: asyncio.Future[None] = loop.create_future()
        loop.call_later(0.15, hold.set_result, None)
        plain = client(srv)
        leg: Any = LoopLeg(plain) if on_loop else plain
        try:
            return await once(leg, model, on_chunk=lambda piece: hold, format="relay")
        finally:
            await leg.close()

    curl, loop = run(main(False)), run(main(True))
    same(curl, loop)
    text = loop.joined()
    assert text.count(b" loop") == 1 and (model == "cut") == (b"[DONE]" not in text)


def test_a_held_relay_of_a_gzipped_answer(srv: Upstream, stream_backend: Any) -> None:
    # the read a hold refused comes back once released: decoded once, nothing lost or repeated
    count = 3000

    async def main(on_loop: bool) -> bytes:
        loop = asyncio.get_running_loop()
        holds: list[asyncio.Future[None]] = []
        got: list[bytes] = []

        def on_chunk(piece: bytes) -> Any:
            got.append(piece)
            # a hold on the first pieces and then now and then, each released 50 ms later (a
            # read's pieces come as one on the loop, so it gives fewer pieces than libcurl)
            if len(got) <= 3 or len(got) % 500 == 1:
                hold: asyncio.Future[None] = loop.create_future()
                loop.call_later(0.05, hold.set_result, None)
                holds.append(hold)
                return hold
            return None

        plain = client(srv)
        leg: Any = LoopLeg(plain) if on_loop else plain
        try:
            result = await asyncio.wait_for(
                leg.create_stream(req(f"gzipped-{count}"), on_chunk, format="relay"), 10
            )
        finally:
            await leg.close()
        assert result["verdict"]["complete"] is True and len(holds) >= 2
        return b"".join(got)

    curl, loop = uvloop_run(main(False)), uvloop_run(main(True))
    assert loop == curl
    assert [int(n) for n in re.findall(rb" w(\d{6})", loop)] == list(range(count))


# 8. max_event_bytes


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@pytest.mark.parametrize("model", ["huge-5000", "json"])
def test_an_event_past_max_event_bytes(
    srv: Upstream, stream_backend: Any, run: Any, fmt: str | None, model: str
) -> None:
    # an event of 5000 bytes, or a whole JSON answer of about 200, past a limit of 100
    curl, loop = run(both(srv, model, max_event_bytes=100, format=fmt))
    assert type(curl.value) is type(loop.value) is fastsse.EventTooLarge
    assert str(loop.value) == str(curl.value)


def test_a_1_mib_event_within_the_limit(srv: Upstream, stream_backend: Any) -> None:
    size = (1 << 20) + 4321
    curl, loop = asyncio.run(both(srv, f"huge-{size}", max_event_bytes=2 << 20))
    same(curl, loop)
    assert content(loop.result) == "a" * size + "b"


# 9. max_connections


def test_max_connections_bounds_the_transfers(srv: Upstream, stream_backend: Any) -> None:
    async def main(on_loop: bool) -> tuple[Any, ...]:
        gate = fresh()
        plain = client(srv, max_connections=2)
        leg: Any = LoopLeg(plain) if on_loop else plain
        before = srv.accepts
        try:
            tasks = [asyncio.create_task(leg.create_stream(req(f"gate-{gate}"))) for _ in range(3)]
            await asyncio.sleep(0.25)
            running = srv.accepts - before  # the third waits for a slot
            # one more, with a timeout shorter than the wait: it fails in the queue
            late = await once(leg, f"gate-{gate}", timeout=0.2)
            srv.gate(gate).set()
            results = await asyncio.wait_for(asyncio.gather(*tasks), 10)
        finally:
            await leg.close()
        if on_loop:
            assert leg.taken == 4
        return running, srv.accepts - before, [content(r) for r in results], shape(late)

    curl, loop = asyncio.run(main(False)), asyncio.run(main(True))
    assert loop == curl
    running, accepted, texts, late = loop
    assert running == 2 and accepted == 2 and texts == ["one two"] * 3
    assert late["class"] is fastsse.TransportError and late["code"] == 28
    assert "max_connections=2" in late["message"]


def test_many_requests_share_max_connections(srv: Upstream, stream_backend: Any, run: Any) -> None:
    # 40 at once over 4 connections: every one whole, no more connections than allowed
    async def main(on_loop: bool) -> tuple[list[str], bool]:
        plain = client(srv, max_connections=4)
        leg: Any = LoopLeg(plain) if on_loop else plain
        before = srv.accepts
        try:
            models = ["chunked", "length", "r429", "json"] * 10
            outcomes = await asyncio.wait_for(asyncio.gather(*(once(leg, m) for m in models)), 10)
        finally:
            await leg.close()
        if on_loop:
            assert leg.taken == 40
        kinds = [
            type(o.value).__name__ if isinstance(o.value, BaseException) else content(o.value)
            for o in outcomes
        ]
        return kinds, srv.accepts - before <= 4

    curl, loop = run(main(False)), run(main(True))
    assert loop == curl
    assert loop == (["".join(WORDS), "".join(WORDS), "HTTPStatusError", "whole"] * 10, True)


def test_a_cancelled_wait_for_a_connection_frees_nothing_it_had_not(
    srv: Upstream, stream_backend: Any, run: Any
) -> None:
    # max_connections=1: the second request waits, is cancelled; the first ends; a third runs
    async def main(on_loop: bool) -> tuple[str, str, int]:
        gate = fresh()
        plain = client(srv, max_connections=1)
        leg: Any = LoopLeg(plain) if on_loop else plain
        before = srv.accepts
        try:
            first = asyncio.create_task(leg.create_stream(req(f"gate-{gate}")))
            await asyncio.get_running_loop().run_in_executor(None, srv.started(gate).wait, 5)
            waiting = asyncio.create_task(leg.create_stream(req("chunked")))
            await asyncio.sleep(0.05)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            srv.gate(gate).set()
            one = content(await asyncio.wait_for(first, 5))
            three = content(await asyncio.wait_for(leg.create_stream(req("chunked")), 5))
        finally:
            await leg.close()
        return one, three, srv.accepts - before

    assert run(main(True)) == run(main(False)) == ("one two", "".join(WORDS), 1)


# 10. leaving


def test_cancelling_closes_the_upstream_connection(srv: Upstream, stream_backend: Any, run: Any) -> None:
    async def main(on_loop: bool) -> float:
        gate = fresh()
        plain = client(srv)
        leg: Any = LoopLeg(plain) if on_loop else plain
        try:
            task = asyncio.create_task(leg.create_stream(req(f"gate-{gate}")))
            await asyncio.get_running_loop().run_in_executor(None, srv.started(gate).wait, 5)
            await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            start = time.monotonic()
            seen = await asyncio.get_running_loop().run_in_executor(None, srv.eof(gate).wait, 5)
            assert seen, "the server never saw the connection close"
            return time.monotonic() - start
        finally:
            await leg.close()

    assert run(main(False)) < 1.0
    assert run(main(True)) < 1.0


def test_closing_the_leg_fails_the_transfers_in_flight(srv: Upstream, stream_backend: Any, run: Any) -> None:
    # one transfer running, one waiting for the one connection allowed: both end with ClientClosed
    async def main(on_loop: bool) -> Any:
        gate = fresh()
        plain = client(srv, max_connections=1)
        leg: Any = LoopLeg(plain) if on_loop else plain
        tasks = [asyncio.create_task(once(leg, f"gate-{gate}")) for _ in range(2)]
        await asyncio.get_running_loop().run_in_executor(None, srv.started(gate).wait, 5)
        await asyncio.sleep(0.05)
        await leg.close()
        outcomes = await asyncio.wait_for(asyncio.gather(*tasks), 5)
        if on_loop:
            assert leg.taken == 2
        return [shape(outcome) for outcome in outcomes]

    curl, loop = run(main(False)), run(main(True))
    assert loop == curl
    for outcome in loop:
        assert outcome["class"] is fastsse.ClientClosed
        assert outcome["message"].startswith(srv.base_url)  # which request it was


# 11. what the leg hands to libcurl


@pytest.mark.parametrize(
    "setup",
    [
        pytest.param({"max_retries": 1}, id="retries"),
        pytest.param({"proxy": "http://127.0.0.1:{port}"}, id="proxy"),
        pytest.param({"base_url": "https://127.0.0.1:{port}/v1"}, id="https"),
    ],
)
def test_what_the_leg_does_not_take_goes_to_libcurl(
    srv: Upstream, stream_backend: Any, run: Any, setup: dict[str, Any]
) -> None:
    port = closed_port()
    setup = {k: v.format(port=port) if isinstance(v, str) else v for k, v in setup.items()}
    curl, loop = run(both(srv, "chunked", setup=setup, taken=0))
    same(curl, loop)
    if "max_retries" in setup:
        assert content(loop.result) == "".join(WORDS)
    else:
        assert isinstance(loop.error, fastsse.TransportError)


class _Kept:
    """A byte-out writer that keeps each piece it is given and hands it on as it came."""

    def __init__(self) -> None:
        self.got: list[bytes] = []

    def write(self, data: bytes) -> bytes:
        self.got.append(data)
        return data

    def close(self, *, truncated: bool = False) -> bytes:
        return b""

    def result(self) -> None:
        return None


def test_the_route_hands_a_byte_stream_each_read_itself(stream_backend: Any) -> None:
    """The leg's route gives a byte-out stream's writer the very bytes object the HTTP parser read,
    not a copy: from C on the compiled backend (``Feed._write_bytes``), through ``on_write`` on the
    Python one. The stream's stamps and its stop answer are the same either way."""
    from types import SimpleNamespace

    from fastsse.client import _streams

    compiled = stream_backend.name == "cython"
    cls = _streams._streams_c.BytesStream if compiled else _streams.BytesStream
    writer, sent, stops = _Kept(), [], []
    stream = cls(writer, lambda piece: sent.append(piece) or len(sent) < 2, True)
    route = _streams.new_route(stream.write, lambda: None, lambda: stops.append(1))
    response = SimpleNamespace(stopped=False, exc=None)
    assert route.direct(stream, response) is compiled  # compiled: the reads go past on_write
    reads = [b"data: one\n\n", b"data: two\n\n", b"data: three\n\n"]
    for data in reads:
        route(data)
    assert [got is data for got, data in zip(writer.got, reads[:2], strict=True)] == [True, True]
    assert sent == reads[:2]  # on_bytes answered False to the second: the third is dropped
    assert route.stopped and stops == [1] and response.stopped is compiled
    assert len(stream.timing()["reads"]) == 2


def test_the_route_joins_the_pieces_of_one_read(stream_backend: Any) -> None:
    """Between ``gather()`` and ``flush()`` (``read()``: the parser between them) the route keeps
    the parser's pieces and hands them on as one; a hold keeps the joined read; after a stop the
    kept pieces are dropped."""
    from fastsse.client import _streams

    written: list[bytes] = []
    answers: list[Any] = [None, None, WRITEFUNC_PAUSE]
    stops: list[int] = []
    pauses: list[int] = []
    route = _streams.new_route(
        lambda data: written.append(data) or answers.pop(0), lambda: pauses.append(1), lambda: stops.append(1)
    )
    route(b"alone")  # not gathering: at once
    assert written == [b"alone"]
    route.parse = lambda data: [route(data[i : i + 2]) for i in range(0, len(data), 2)]
    route.read(b"abcdef")  # three pieces, one write
    assert written == [b"alone", b"abcdef"]
    route.read(b"ghij")  # answered with a hold: the joined read is kept
    assert written[-1] == b"ghij" and route.held == [b"ghij"] and pauses == [1]
    route.read(b"kl")  # held: kept in order
    assert route.held == [b"ghij", b"kl"]
    route.held = None
    route.gather()
    route(b"mn")
    route.stopped = True
    route.flush()  # stopped before the flush: dropped
    assert len(written) == 3 and stops == []
    route.stopped = False
    route.flush()  # nothing kept any more
    assert len(written) == 3


@pytest.mark.parametrize(
    ("no_proxy", "options", "taken"),
    [
        pytest.param(None, {}, 0, id="proxied"),
        pytest.param("127.0.0.1", {}, 1, id="no_proxy-host"),
        pytest.param("*", {}, 1, id="no_proxy-all"),
        pytest.param(None, {"proxy": ""}, 1, id="proxy-none"),
    ],
)
def test_a_proxy_in_the_environment_sends_the_request_to_libcurl(
    srv: Upstream,
    stream_backend: Any,
    run: Any,
    monkeypatch: pytest.MonkeyPatch,
    no_proxy: str | None,
    options: dict[str, Any],
    taken: int,
) -> None:
    clear_proxies(monkeypatch)
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{closed_port()}")  # refuses: code 7
    if no_proxy is not None:
        monkeypatch.setenv("no_proxy", no_proxy)
    curl, loop = run(both(srv, "chunked", taken=taken, **options))
    same(curl, loop)
    if taken:
        assert content(loop.result) == "".join(WORDS)
    else:
        assert isinstance(loop.error, fastsse.TransportError)


def test_the_proxy_environment_is_read_when_the_leg_is_made(
    srv: Upstream, stream_backend: Any, run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    clear_proxies(monkeypatch)

    async def main() -> Outcome:
        leg: Any = LoopLeg(client(srv))
        try:
            monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{closed_port()}")
            outcome = await once(leg, "chunked")
        finally:
            await leg.close()
        assert leg.taken == 1  # documented: the leg does not see a later change
        return outcome

    assert content(run(main()).result) == "".join(WORDS)


# on_end: the outcome told as the transfer ends


@pytest.mark.parametrize("model", ["chunked", "cut", "gate"])
def test_on_end_is_told_the_outcome_before_the_call_returns(
    srv: Upstream, stream_backend: Any, run: Any, model: str
) -> None:
    """``on_end`` gets what the call returns or raises, once, from the loop's callback that read
    the end (before the awaiting coroutine resumed); a cancelled call tells it nothing."""

    async def main() -> tuple[list[Any], Any]:
        told: list[Any] = []
        returned = False

        def on_end(outcome: Any) -> None:
            told.append((outcome, returned))

        leg: Any = LoopLeg(client(srv))
        try:
            task = asyncio.ensure_future(leg.create_stream(req(model), on_end=on_end))
            if model == "gate":  # an answer that never comes: the call is cancelled
                await asyncio.sleep(0.2)
                task.cancel()
            try:
                outcome: Any = await task
            except (asyncio.CancelledError, fastsse.TransportError) as exc:
                outcome = exc
            returned = True
            await asyncio.sleep(0.05)
        finally:
            srv.gate(f"gate-{model}").set()
            await leg.close()
        assert leg.taken == 1
        return told, outcome

    told, outcome = run(main())
    if model == "gate":
        assert told == []
    else:
        assert told == [(outcome, False)]
        assert isinstance(outcome, fastsse.TransportError if model == "cut" else dict)


def test_on_end_of_a_call_handed_to_libcurl_and_one_that_raises(
    srv: Upstream, stream_backend: Any, run: Any
) -> None:
    async def main() -> tuple[list[Any], Any, Any, list[Any]]:
        told: list[Any] = []
        handled: list[Any] = []
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: handled.append(context))

        def on_end(outcome: Any) -> None:
            told.append(outcome)
            raise RuntimeError("a broken on_end")

        leg: Any = LoopLeg(client(srv))
        try:
            handed = await leg.create_stream(req("chunked"), on_end=on_end, format="events")
            taken = await leg.create_stream(req("chunked"), on_end=on_end)
        finally:
            await leg.close()
        assert leg.taken == 1
        return told, handed, taken, handled

    told, handed, taken, handled = run(main())
    assert told == [handed, taken]
    assert handed["verdict"]["complete"] and content(taken) == "".join(WORDS)
    assert [type(context["exception"]) for context in handled] == [RuntimeError, RuntimeError]


def test_a_kept_connection_is_never_given_another_reader(
    srv: Upstream, stream_backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The leg points its connection's one reader (``Reads``) at each answer's route rather than
    handing the transport a new protocol per answer: uvloop stops and starts reading the socket on
    each ``set_protocol`` (two epoll changes, four system calls an answer). Counted on asyncio's
    transport, whose methods can be wrapped (it calls ``set_protocol`` once itself, as it is
    made)."""
    import asyncio.selector_events as selector_events

    calls: list[Any] = []
    original = selector_events._SelectorTransport.set_protocol

    def counted(self: Any, protocol: Any) -> None:
        calls.append(protocol)
        original(self, protocol)

    monkeypatch.setattr(selector_events._SelectorTransport, "set_protocol", counted)

    async def main() -> list[str]:
        leg: Any = LoopLeg(client(srv))
        try:
            texts = [content(await leg.create_stream(req(m))) for m in ("chunked", "length", "chunked")]
        finally:
            await leg.close()
        assert leg.taken == 3
        return texts

    assert asyncio.run(main()) == ["".join(WORDS)] * 3
    assert len(calls) == 1  # the transport's own, as it is made: one connection, kept for the three


@pytest.mark.parametrize("model", ["chunked", "onesend", "cut"])
@pytest.mark.parametrize(
    ("fmt", "terminal"),
    [
        ("relay", b"data: [DONE]"),
        ("to-messages", b"event: message_stop\n"),
        ("to-responses", b"event: response.completed\n"),
    ],
)
def test_on_complete_is_told_once_the_terminal_event_went_on(
    srv: Upstream, stream_backend: Any, run: Any, model: str, fmt: str, terminal: bytes
) -> None:
    """``on_complete`` is called once, as soon as the last event of a complete answer reached
    ``on_chunk`` (a relay's ``[DONE]``, a translation's terminal event: Messages' ``message_stop``,
    Responses' ``response.completed``), before the transfer ends (``on_end``); never for an
    answer cut before it. A passthrough refuses it: its bytes do not say when the answer is
    complete."""

    async def main() -> list[Any]:
        sent: list[bytes] = []
        told: list[Any] = []

        def complete() -> None:
            last = b"".join(sent).rstrip(b"\n").rsplit(b"\n\n", 1)[-1]  # the last event sent so far
            told.append(("complete", last.startswith(terminal)))

        leg: Any = LoopLeg(client(srv))
        try:
            with contextlib.suppress(fastsse.TransportError):
                await leg.create_stream(
                    req(model),
                    sent.append,
                    format=fmt,
                    on_complete=complete,
                    on_end=lambda outcome: told.append(("end", type(outcome).__name__)),
                )
            with pytest.raises(TypeError, match="format='relay' or a translation"):
                await leg.create_stream(req(model), sent.append, format="passthrough", on_complete=print)
        finally:
            await leg.close()
        return told

    told = run(main())
    if model == "cut":
        assert told == [("end", "TransportError")]
    else:
        assert told == [("complete", True), ("end", "dict")]


def test_on_complete_waits_for_a_gate_that_holds_the_answer(
    srv: Upstream, stream_backend: Any, run: Any
) -> None:
    """With ``first_chunk_gate``, an answer without content stays held until its end: the relay's
    ``[DONE]`` is not ``on_chunk``'s then, so ``on_complete`` is not called (``on_end`` is)."""
    from fastsse.client._loop import _past_gate
    from fastsse.client._retry import Gate

    told: list[str] = []
    gate = Gate(None, lambda item: False)
    tell = _past_gate(lambda: told.append("complete"), gate)
    tell()
    assert told == []
    gate.release()
    tell()
    assert told == ["complete"]

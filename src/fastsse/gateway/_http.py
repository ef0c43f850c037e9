"""The command's own HTTP/1.1 server: one ASGI app (``Gateway``) on the event loop's protocol, with
llhttp (``httptools``) parsing the request's head and body, and no generic server between them.

``HttpServer(app, keep_alive_seconds=...)`` serves a listening socket (``start(sock)``), one
``Connection`` (an ``asyncio.Protocol``) per caller and one ``Exchange`` per request: the ASGI
``http`` scope, ``receive`` and ``send``, and the ``fastsse.wire`` extension through which a
``Downstream`` writes its answer's chunks to the caller's transport itself (from C with the
compiled backend). What the HTTP/1.1 rules ask of a server, it does:

- keep-alive, with the connection closed after ``keep_alive_seconds`` with no request (or with a
  head that has not ended: a caller sending a head a byte at a time is closed as well);
- pipelined requests answered in order, the next one started when the one before has ended (its
  head read meanwhile; reading pauses until then); past ``MAX_PIPELINED`` read ahead (in one
  read) the connection closes;
- HTTP/1.0: no chunked framing (RFC 9112 6.1), the answer ends with the connection's close;
- ``Expect: 100-continue`` answered when the app first asks for the body;
- a chunked request body; the body read on demand, reading paused past 64 KiB unread;
- a head past ``max_head_bytes`` is a 431 and the connection closes, a malformed one a 400;
- HEAD, 204 and 304 with no body; a ``Date`` header, no ``Server`` header;
- an app's ``send`` that breaks the ASGI order or the answer's framing (a body before the start,
  bytes past a Content-Length, CR, LF or NUL in a header) raises ``fastsse.UsageError``;
- an app that fails before its answer's start gets a 500; after it, or returning before its
  answer's end (the gateway's way to cut a stream), the connection closes without the chunked
  terminator, so the caller's client raises rather than take a part for the whole.

``shutdown()`` closes the idle connections and lets the others end their answer (then closes
them); ``close()`` closes them all at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from email.utils import formatdate
from http import HTTPStatus
from typing import Any, Final
from urllib.parse import unquote

import httptools

from .._errors import FastSSEError, UsageError

log = logging.getLogger(__name__.rpartition(".")[0])  # the package's logger, as _app's

MAX_HEAD_BYTES: Final = 64 * 1024  # the request line and headers (nginx allows 4 x 8 KiB, Node 16 KiB)
BODY_HIGH: Final = 64 * 1024  # unread request body past which reading pauses
# pipelined requests read ahead of the one being answered, past which the connection closes: the
# ones in one read are parsed before reading pauses, so a read of tiny requests would be thousands
MAX_PIPELINED: Final = 32
_STATUS: Final = {s.value: b"HTTP/1.1 %d %b\r\n" % (s.value, s.phrase.encode("latin-1")) for s in HTTPStatus}
_CONTINUE: Final = b"HTTP/1.1 100 Continue\r\n\r\n"
_END: Final = b"0\r\n\r\n"  # a chunked body's end
_DISCONNECT: Final = {"type": "http.disconnect"}
_ASGI: Final = {"version": "3.0", "spec_version": "2.3"}
_NO_BODY: Final = frozenset((204, 304))
_BAD: Final = frozenset(b"\r\n\0")


class _Stop(FastSSEError):
    """Raised from a parser callback to stop llhttp's parse: the caller passed a bound."""


def _plain(status: int, text: bytes) -> bytes:
    return (
        b"%bcontent-type: text/plain; charset=utf-8\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%b"
        % (
            _STATUS[status],
            len(text),
            text,
        )
    )


class _Gone:
    """A lost connection's transport: what the answer still calls on it does nothing."""

    def write(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        pass

    def is_closing(self) -> bool:
        return True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


_GONE: Final = _Gone()


class _Date:
    """The ``Date`` header's line, made once a second."""

    __slots__ = ("line", "second")

    def __init__(self) -> None:
        self.second = 0
        self.line = b""

    def __call__(self) -> bytes:
        now = int(time.time())
        if now != self.second:
            self.second = now
            self.line = b"date: %b\r\n" % formatdate(now, usegmt=True).encode()
        return self.line


class HttpServer:
    """Serves ``app`` (an ASGI 3 callable, its ``http`` scope only) on the sockets given to
    ``start``: ``keep_alive_seconds`` bounds a connection with no request in progress,
    ``max_head_bytes`` a request's line and headers."""

    def __init__(
        self,
        app: Any,
        *,
        keep_alive_seconds: float = 5.0,
        max_head_bytes: int = MAX_HEAD_BYTES,
    ) -> None:
        self.app = app
        self.keep_alive_seconds = keep_alive_seconds
        self.max_head_bytes = max_head_bytes
        self.connections: set[Connection] = set()
        self.tasks: set[asyncio.Task[None]] = set()
        self.closing = False
        self.date = _Date()
        self._servers: list[asyncio.AbstractServer] = []

    async def start(self, sock: Any, backlog: int = 4096) -> None:
        """Accept connections on the listening socket ``sock``."""
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: Connection(self), sock=sock, backlog=backlog)
        self._servers.append(server)

    def shutdown(self) -> None:
        """Stop accepting; close the idle connections now and the others once their answer ended."""
        self._stop_accepting()
        for connection in list(self.connections):
            connection.shutdown()

    async def wait(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the answers in progress, then cancel what is left and
        close every connection."""
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=timeout)
        for task in list(self.tasks):
            task.cancel()
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=1.0)
        self.close()

    def close(self) -> None:
        """Close every connection at once."""
        self._stop_accepting()
        for connection in list(self.connections):
            connection.abort()

    def _stop_accepting(self) -> None:
        self.closing = True
        for server in self._servers:
            server.close()


class Connection(asyncio.Protocol):
    """One caller's connection: its parser, its requests in order, its transport's flow."""

    # The answer streaming on this connection that writes to its transport itself (Downstream's
    # direct path), told when the transport fills (``paused``) and drains (``resumed``).
    fastsse_down: Any = None

    def __init__(self, server: HttpServer) -> None:
        self.server = server
        self.loop = asyncio.get_running_loop()
        self.transport: Any = None
        self.parser: Any = httptools.HttpRequestParser(self)
        self.client: tuple[str, int] | None = None
        self.sockname: tuple[str, int] | None = None
        self.current: Exchange | None = None  # the request being answered
        self.reading: Exchange | None = None  # the request whose body is being read
        self.waiting: deque[Exchange] = deque()  # pipelined requests, read and not yet started
        self.headers: list[tuple[bytes, bytes]] = []
        self.url = b""
        self.head = 0  # bytes of the request line and headers read so far
        self.head_over = False
        self.expect = False
        self.idle: asyncio.TimerHandle | None = None
        self.read_paused = False
        self.write_paused = False
        self.drained: asyncio.Future[None] | None = None
        self.lost = False

    # the transport's events

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        here = transport.get_extra_info("sockname")
        self.client = (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) else None
        self.sockname = (str(here[0]), int(here[1])) if isinstance(here, tuple) else None
        self.server.connections.add(self)
        if self.server.closing:
            transport.close()
            return
        self._arm()

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            pass  # no protocol to switch to: the request was answered as a plain one
        except httptools.HttpParserError:
            if self.head_over:
                self._refuse(431, b"Request header fields too large")
            else:
                self._refuse(400, b"Invalid HTTP request")

    def connection_lost(self, exc: BaseException | None) -> None:
        self.lost = True
        self.server.connections.discard(self)
        if self.idle is not None:
            self.idle.cancel()
            self.idle = None
        for exchange in (self.current, *self.waiting):
            if exchange is not None:
                exchange.disconnected = True
                exchange.wake()
        if self.reading is not None and self.reading is not self.current:
            self.reading.disconnected = True
        self._writable()
        # the parser, the transport and the requests never started point back here: cut, so a
        # closed connection goes at once rather than at the next full collection
        for exchange in self.waiting:
            exchange.scope["extensions"] = None
        self.waiting.clear()
        self.reading = None
        self.parser = None
        self.transport = _GONE

    def pause_writing(self) -> None:
        self.write_paused = True
        if self.fastsse_down is not None:
            self.fastsse_down.paused()

    def resume_writing(self) -> None:
        self.write_paused = False
        self._writable()
        if self.fastsse_down is not None:
            self.fastsse_down.resumed()

    def _writable(self) -> None:
        drained, self.drained = self.drained, None
        if drained is not None and not drained.done():
            drained.set_result(None)

    # the parser's callbacks

    def on_message_begin(self) -> None:
        self.url = b""
        self.headers = []
        self.head = 0
        self.expect = False

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        head = self.head = self.head + len(name) + len(value) + 4
        if head > self.server.max_head_bytes:  # as _count, inline: this runs for every header
            self._count(0)
        name = name.lower()
        value = value.rstrip(b" \t")  # llhttp keeps the trailing whitespace RFC 9110 5.5 excludes
        if name == b"expect" and value.lower() == b"100-continue":
            self.expect = True
        self.headers.append((name, value))

    def _count(self, size: int) -> None:
        # llhttp bounds no head: past the bound the parse stops (a callback that raises is a parser
        # error) and the answer is a 431
        self.head += size
        if self.head > self.server.max_head_bytes:
            self.head_over = True
            raise _Stop("request head too large")

    def on_headers_complete(self) -> None:
        if self.idle is not None:
            self.idle.cancel()
            self.idle = None
        parser = self.parser
        version = parser.get_http_version()
        url = httptools.parse_url(self.url)
        raw_path = url.path
        path = raw_path.decode("latin-1")
        scope: dict[str, Any] = {
            "type": "http",
            "asgi": _ASGI,
            "http_version": version,
            "server": self.sockname,
            "client": self.client,
            "scheme": "http",
            "method": parser.get_method().decode("ascii"),
            "root_path": "",
            "path": unquote(path) if "%" in path else path,
            "raw_path": raw_path,
            "query_string": url.query or b"",
            "headers": self.headers,
        }
        exchange = Exchange(self, scope, version != "1.0" and parser.should_keep_alive(), self.expect)
        scope["extensions"] = {"fastsse.wire": (self, exchange)}
        self.reading = exchange
        if self.current is None:
            self._start(exchange)
        else:  # pipelined: answered once the one before has ended
            if len(self.waiting) >= MAX_PIPELINED:
                raise _Stop("too many pipelined requests")  # a parser error: the close
            self.waiting.append(exchange)
            self.pause_reading()

    def on_body(self, body: bytes) -> None:
        exchange = self.reading
        if exchange is None or exchange.response_complete:
            return
        exchange.body += body
        if len(exchange.body) > BODY_HIGH:
            self.pause_reading()
        exchange.wake()

    def on_message_complete(self) -> None:
        exchange = self.reading
        if exchange is None or exchange.response_complete:
            return
        exchange.more_body = False
        exchange.wake()

    # requests

    def _start(self, exchange: Exchange) -> None:
        self.current = exchange
        server = self.server
        task = self.loop.create_task(exchange.run(server.app))
        server.tasks.add(task)
        task.add_done_callback(server.tasks.discard)

    def ended(self, exchange: Exchange) -> None:
        """``exchange``'s answer is complete: start the next pipelined request, or wait for one."""
        if self.current is exchange:
            self.current = None
        if self.lost or self.transport.is_closing():
            return
        if not exchange.keep_alive:
            self.transport.close()
            return
        self.resume_reading()
        if self.waiting:
            self._start(self.waiting.popleft())
        elif self.server.closing:
            self.transport.close()
        else:
            self._arm()

    def pause_reading(self) -> None:
        if not self.read_paused and not self.lost:
            self.read_paused = True
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.read_paused and not self.lost:
            self.read_paused = False
            self.transport.resume_reading()

    def drain(self) -> asyncio.Future[None]:
        """A future done once the transport takes writes again (or the connection is lost)."""
        if self.drained is None:
            self.drained = self.loop.create_future()
        return self.drained

    def _arm(self) -> None:
        if self.idle is None:
            self.idle = self.loop.call_later(self.server.keep_alive_seconds, self._expired)

    def _expired(self) -> None:
        self.idle = None
        if self.current is None and not self.lost:
            self.transport.close()

    def _refuse(self, status: int, text: bytes) -> None:
        # an answer whose head went out would be corrupted by another's bytes: it is cut instead;
        # a request still being read (its body broke) gets the error, and its app hears it left
        current = self.current
        if (current is None or not current.started) and not self.transport.is_closing():
            if current is not None:
                current.started = current.disconnected = True  # nothing more of its own goes out
                current.wake()
            self.transport.write(_plain(status, text))
        self.transport.close()

    def shutdown(self) -> None:
        """Close now if idle; else once the answer in progress ended."""
        if self.current is None:
            self.transport.close()
        else:
            self.current.keep_alive = False
            self.waiting.clear()

    def abort(self) -> None:
        if self.transport is not None and not self.lost:
            self.transport.close()


class Exchange:
    """One request and its answer: the ASGI scope, ``receive`` and ``send``. Its fields
    ``chunked_encoding`` and ``response_complete`` are what ``Downstream``'s direct path reads."""

    __slots__ = (
        "bare",
        "body",
        "chunked_encoding",
        "connection",
        "continue_due",
        "delivered",
        "disconnected",
        "keep_alive",
        "left",
        "more_body",
        "response_complete",
        "scope",
        "started",
        "waiter",
    )

    def __init__(self, connection: Connection, scope: dict[str, Any], keep_alive: bool, expect: bool):
        self.connection = connection
        self.scope = scope
        self.keep_alive = keep_alive
        self.continue_due = expect
        self.body = bytearray()
        self.more_body = True
        self.delivered = False  # the body's last part went to the app
        self.disconnected = False
        self.started = False
        self.response_complete = False
        self.chunked_encoding: bool | None = None
        self.left = 0  # bytes of a Content-Length answer still to send
        self.bare = False  # an answer with no body (HEAD, 204, 304)
        self.waiter: asyncio.Future[None] | None = None

    def wake(self) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def run(self, app: Any) -> None:
        connection = self.connection
        try:
            await app(self.scope, self.receive, self.send)
        except BaseException as exc:
            if not self.started and not self.disconnected:
                log.error("the gateway failed an answer: %r", exc, exc_info=exc)
                connection.transport.write(_plain(500, b"Internal Server Error"))
            elif not isinstance(exc, asyncio.CancelledError):
                log.error("the gateway failed an answer: %r", exc, exc_info=exc)
            connection.transport.close()
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
        else:
            if not self.started and not self.disconnected:
                log.error("the gateway returned no answer to %s %s", self.scope["method"], self.scope["path"])
                connection.transport.write(_plain(500, b"Internal Server Error"))
                connection.transport.close()
            elif not self.response_complete:
                connection.transport.close()  # a cut: no chunked terminator
        finally:
            self.scope["extensions"] = None  # the wire's cycle: (connection, self)
            if not self.response_complete:
                self.response_complete = True
                connection.ended(self)

    async def receive(self) -> dict[str, Any]:
        """The request's body (``http.request`` messages), then ``http.disconnect`` once the
        caller left or the answer is complete."""
        connection = self.connection
        if self.continue_due:
            self.continue_due = False
            if not connection.transport.is_closing():
                connection.transport.write(_CONTINUE)
        # wait while there is nothing to hand over: no body yet, or the body's end handed over
        while not (self.disconnected or self.response_complete) and (
            self.delivered or (self.more_body and not self.body)
        ):
            connection.resume_reading()
            self.waiter = connection.loop.create_future()
            await self.waiter
        if self.disconnected or self.response_complete:
            return _DISCONNECT
        body = bytes(self.body)
        self.body.clear()
        if not self.more_body:
            self.delivered = True
        return {"type": "http.request", "body": body, "more_body": self.more_body}

    async def send(self, message: dict[str, Any]) -> None:
        connection = self.connection
        if connection.write_paused and not self.disconnected:
            await connection.drain()
        if self.disconnected:
            return
        kind = message["type"]
        if not self.started:
            if kind != "http.response.start":
                raise UsageError(f"expected http.response.start, not {kind}")
            connection.transport.write(self._head(message["status"], message.get("headers", ())))
            return
        if self.response_complete:
            raise UsageError(f"{kind} after the answer's end")
        if kind != "http.response.body":
            raise UsageError(f"expected http.response.body, not {kind}")
        self._body(message.get("body", b""), message.get("more_body", False))

    def begin(self, status: int, headers: Any, body: bytes, end: bool = False) -> bool:
        """The answer's start and its first body piece (more to come) in one write, now: what
        ``send`` does for the two messages, without their coroutines. ``end``: the piece is the
        body's last, and its end goes in the same write (the answer is complete then). False
        (nothing done) when ``send`` would wait (the transport is full) or return (the caller
        left): use ``send``."""
        connection = self.connection
        if self.started or self.disconnected or connection.write_paused:
            return False
        head = self._head(status, headers)
        if self.chunked_encoding and body:
            connection.transport.write(b"%b%x\r\n%b\r\n%b" % (head, len(body), body, _END if end else b""))
            if end:
                self.end_written()
        else:
            connection.transport.write(head)
            self._body(body, not end)
        return True

    def _body(self, body: bytes, more: bool) -> None:
        connection = self.connection
        write = connection.transport.write
        if self.bare:  # HEAD, 204, 304: no body, whatever the app gave
            self.left = 0
        elif self.chunked_encoding:
            if more:
                if body:
                    write(b"%x\r\n%b\r\n" % (len(body), body))
            elif body:
                write(b"%x\r\n%b\r\n%b" % (len(body), body, _END))
            else:
                write(_END)
        elif body:
            if self.chunked_encoding is False:
                if len(body) > self.left:
                    raise UsageError("an answer longer than its Content-Length")
                self.left -= len(body)
            write(body)
        if not more:
            if self.chunked_encoding is False and self.left:
                raise UsageError("an answer shorter than its Content-Length")
            self.response_complete = True
            self.wake()
            connection.ended(self)

    def end_written(self) -> None:
        """The body's end went out with the answer's last piece, written on the transport by the
        direct path (``Downstream``'s sink): the answer is complete, as after ``_body``'s end."""
        if self.response_complete or not self.chunked_encoding:
            return
        self.response_complete = True
        self.wake()
        self.connection.ended(self)

    def _head(self, status: int, headers: Any) -> bytes:
        """The answer's status line and header fields, its framing decided (``started`` set)."""
        self.continue_due = False
        connection = self.connection
        out = [_STATUS.get(status) or b"HTTP/1.1 %d \r\n" % status, connection.server.date()]
        close = False
        for name, value in headers:
            if not _BAD.isdisjoint(name) or not _BAD.isdisjoint(value):
                raise UsageError(f"CR, LF or NUL in the answer's header {name!r}")
            name = name.lower()
            if name == b"content-length":
                if self.chunked_encoding is None:
                    self.left = int(value)
                    self.chunked_encoding = False
            elif name == b"transfer-encoding":
                if value.lower() == b"chunked":
                    self.chunked_encoding = True
                    self.left = 0
            elif name == b"connection" and b"close" in value.lower():
                close = True
            out.append(b"%b: %b\r\n" % (name, value))
        if close or connection.server.closing:
            self.keep_alive = False
        self.bare = self.scope["method"] == "HEAD" or status in _NO_BODY
        if self.chunked_encoding is None and not self.bare:
            if self.scope["http_version"] == "1.0":
                self.keep_alive = False  # no framing for 1.0 (RFC 9112 6.1): the close ends it
            else:
                self.chunked_encoding = True
                out.append(b"transfer-encoding: chunked\r\n")
        if not self.keep_alive and not close:
            out.append(b"connection: close\r\n")
        out.append(b"\r\n")
        self.started = True
        return b"".join(out)

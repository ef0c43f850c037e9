"""The upstream leg on the event loop: an ``AsyncClient``'s streamed requests over plain
``http://`` HTTP/1.1 sent and read by the loop itself (uvloop's or asyncio's transports, the answer
parsed by llhttp through ``httptools``), not by libcurl. This is the gateway's data plane: once an
answer's head is in, the connection's reads go to the route's ``read`` (``ReadRoute``: the
parser's ``feed_data``, its ``on_body`` pieces gathered; the connection's ``Reads``, set once, is
pointed at it, so the loop is never told of another reader) and the route hands each read to the
compiled stream from C, so a relayed read goes from the upstream's socket to the caller's without
a Python frame, with one read and one write however many HTTP chunks (events) the read holds.

``LoopLeg(client)`` takes what it can and hands the rest to the client (libcurl): it takes a
request whose URL is ``http://`` without user info, with no proxy (none set, none in the
environment for its host), no HTTP/2, no retries, fallbacks, first-chunk gate or resume, no
``curl=`` handle, and no header line libcurl reads its own way (``Name;`` sends an empty header;
``Host:`` and ``Content-Length:`` replace or remove libcurl's own). ``Name:`` with no value,
which removes a header libcurl would add (the client's ``Expect:``), is left out, as nothing is
added here. What it takes behaves as the client would: the same options checked the same way,
the same stream (``open_stream``), the same ``Response`` (status, headers, the body's mode,
holds), the same result and errors with libcurl's codes (7: no connection, 28: a timeout, 52: no
answer, 18 / 56: a cut answer, 23: stopped by ``on_chunk``, 1: no HTTP/1.x status line, 8: a
broken head, 61: a compressed answer that does not decode, 100 / 56: a head line past 100 KiB, a
head past 300 KiB), and the same timing record. The
request says ``Accept-Encoding: identity``; an answer compressed anyway (gzip, deflate) is decoded,
in Python, as libcurl decodes it. A kept-alive connection the server closed while it was idle is
replaced once, before anything of the answer was read, as libcurl does.
"""

from __future__ import annotations

import asyncio
import collections
import os
import socket
import time
import urllib.parse
import urllib.request
import zlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from .._errors import ClientClosed, TransportError
from . import _streams
from ._options import client_options
from ._plain import PLAIN
from ._request import ACCEPT_ENCODING, Preparer
from ._response import WRITEFUNC_PAUSE, Response
from .engine import (
    DEFAULT_MAX_CONNECTIONS,
    _Job,
    _silence_limit,
    new_job,
    open_stream,
    queue_timeout,
    settle,
    unhook,
)

httptools: Any
try:
    import httptools
except ImportError:  # pragma: no cover - the gateway extra installs it
    httptools = None


# What libcurl reads and llhttp refuses by default: a line ended by a bare LF, an answer with a
# Content-Length and chunks (the chunks frame it, RFC 9112 6.3; its connection is not kept)
_LENIENCIES: Final = {"lenient_optional_cr_before_lf": True, "lenient_chunked_length": True}


def _lenient() -> bool:
    """Whether this httptools takes ``_LENIENCIES`` (llhttp 9's; older ones cannot)."""
    if httptools is None:
        return False
    try:
        httptools.HttpResponseParser(object()).set_dangerous_leniencies(**_LENIENCIES)
    except (AttributeError, TypeError):  # pragma: no cover - an older httptools
        return False
    return True


_LENIENT: Final = _lenient()

# libcurl's result codes, for the same failures (TransportError.code)
UNSUPPORTED_PROTOCOL: Final = 1
COULDNT_RESOLVE: Final = 6
COULDNT_CONNECT: Final = 7
WEIRD_REPLY: Final = 8
PARTIAL: Final = 18
WRITE_ERROR: Final = 23
TIMED_OUT: Final = 28
GOT_NOTHING: Final = 52
RECV_ERROR: Final = 56
BAD_CONTENT_ENCODING: Final = 61
TOO_LARGE: Final = 100

# libcurl's bounds on an answer's head (CURL_MAX_HTTP_HEADER, MAX_HTTP_RESP_HEADER_SIZE): a line
# past the first fails with TOO_LARGE, a head past the second with RECV_ERROR
MAX_HEAD_LINE: Final = 100 << 10
MAX_HEAD: Final = 300 << 10

# what libcurl sends for the client's CURLOPT_ACCEPT_ENCODING (no compressed answer is asked for)
_ACCEPT_ENCODING: Final = f"Accept-Encoding: {ACCEPT_ENCODING}\r\n".encode("latin-1")

_PROXY_VARIABLES: Final = ("http_proxy", "all_proxy", "ALL_PROXY")  # libcurl ignores HTTP_PROXY


def _proxy_environment() -> str | None:
    """The environment's ``no_proxy`` list if it names a proxy libcurl would take for plain
    http:// ("" for no list), else None (no proxy, or ``no_proxy=*``)."""
    if not any(os.environ.get(name) for name in _PROXY_VARIABLES):
        return None
    no_proxy = os.environ.get("no_proxy") or os.environ.get("NO_PROXY") or ""
    return None if no_proxy.strip() == "*" else no_proxy


def _proxied(host: str, no_proxy: str | None) -> bool:
    """Whether libcurl would send a request to ``host`` through the environment's proxy, the
    environment being ``_proxy_environment()``'s ``no_proxy``."""
    if no_proxy is None:
        return False
    bypass = getattr(urllib.request, "proxy_bypass_environment")  # noqa: B009 - not in the stubs
    return not bypass(host, {"no": no_proxy})


class _Inflate:
    """A deflate decoder that takes the zlib stream the coding names or the bare deflate stream
    some servers send instead, as libcurl does."""

    __slots__ = ("first", "inflate")

    def __init__(self) -> None:
        self.inflate = zlib.decompressobj()
        self.first = True

    def decompress(self, data: bytes) -> bytes:
        if self.first:
            self.first = False
            try:
                return self.inflate.decompress(data)
            except zlib.error:
                self.inflate = zlib.decompressobj(-zlib.MAX_WBITS)
        return self.inflate.decompress(data)


def _decoders(coding: str) -> list[Any] | None:
    """The decoders of a Content-Encoding list, in the order they undo it; None if one is unknown
    (libcurl's own list may hold more: br and zstd where it was built with them)."""
    out: list[Any] = []
    for name in reversed(coding.split(",")):
        name = name.strip()
        if name in ("gzip", "x-gzip"):
            out.append(zlib.decompressobj(16 + zlib.MAX_WBITS))
        elif name == "deflate":
            out.append(_Inflate())
        elif name not in ("identity", ""):
            return None
    return out


class _Decoded:
    """``Response.write`` behind the decoders of a compressed answer, the route's ``on_write``.
    A read the consumer refused (held) comes back from the route as it was read, so its decoded
    bytes are kept for it rather than decoded twice."""

    __slots__ = ("decoded", "decoders", "fail", "refused", "write")

    def __init__(self, write: Any, decoders: list[Any], fail: Any) -> None:
        self.write = write
        self.decoders = decoders
        self.fail = fail
        self.refused: bytes | None = None
        self.decoded = b""

    def __call__(self, data: bytes) -> Any:
        if data is self.refused:
            out = self.decoded
        else:
            out = data
            try:
                for decoder in self.decoders:
                    out = decoder.decompress(out)
            except zlib.error as exc:
                self.fail(BAD_CONTENT_ENCODING, f"Error while processing content unencoding: {exc}")
                return 0
        self.refused = None
        if not out:
            return None
        answer = self.write(out)
        if answer == WRITEFUNC_PAUSE:
            self.refused, self.decoded = data, out
        return answer


class _Target:
    """Where a request goes: the address, the head of its request (the request line, Host and
    the spec's header lines) up to its Content-Length, and whether the leg's environment sends
    the host through a proxy (then libcurl takes it, unless the request says ``proxy=""``)."""

    __slots__ = ("head", "host", "port", "proxied")

    def __init__(self, host: str, port: int, head: bytes) -> None:
        self.host, self.port, self.head = host, port, head
        self.proxied = False


def _target(url: str, headers: tuple[str | bytes, ...], no_proxy: str | None) -> _Target | None:
    """The target of a request to ``url`` with ``headers`` (libcurl's header lines) in a proxy
    environment ``no_proxy`` (``_proxy_environment()``), or None when libcurl must send it (not
    plain http://, user info, a header line libcurl reads its own way)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() != "http" or "@" in parts.netloc or not parts.hostname:
        return None
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    head = [f"POST {path} HTTP/1.1\r\nHost: {parts.netloc}\r\n".encode("latin-1")]
    encoding = _ACCEPT_ENCODING  # libcurl's, unless a header of the request's own names one
    for line in headers:
        raw = line.encode("latin-1") if isinstance(line, str) else line
        name, colon, value = raw.partition(b":")
        if not colon or name.strip().lower() in (b"host", b"content-length", b"transfer-encoding"):
            return None
        if name.strip().lower() == b"accept-encoding":
            encoding = b""
        if not value.strip():  # libcurl's "leave this header out" ("Expect:"): nothing to leave out
            continue
        head.append(raw + b"\r\n")
    head.append(encoding)
    target = _Target(parts.hostname, parts.port or 80, b"".join(head))
    target.proxied = _proxied(parts.hostname, no_proxy)
    return target


class LoopLeg:
    """``LoopLeg(client)`` or ``LoopLeg(**options)``: an ``AsyncClient`` (``client``, or one made
    from ``options`` the first time libcurl is needed) with its streamed requests over plain
    ``http://`` driven by the event loop (the module's docstring says which). ``create_stream``
    and ``close`` are the leg's; every other name is the client's own. Made from ``options``, the
    leg checks them at once as the client would, and a gateway whose requests all go on the loop
    never loads libcurl. The proxy variables of the environment (``http_proxy``, ``all_proxy``,
    ``no_proxy``) are read once, when the leg is made, as the client reads its base URL and key:
    a request to a host they send through a proxy goes to libcurl; a change of them later is not
    seen by the leg."""

    def __init__(self, client: Any = None, /, **options: Any) -> None:
        if client is not None and options:
            raise TypeError("LoopLeg() takes a client or its options, not both")
        self._client = client
        self._options = options
        if client is not None:
            engine = client._engine
            self._defaults, self._prepare, self._max = engine.defaults, engine.prepare, engine.max_connections
        else:
            self._defaults, own = client_options(options, "LoopLeg()")
            self._prepare = Preparer(self._defaults)
            self._max = own.get("max_connections", DEFAULT_MAX_CONNECTIONS)
        self._busy = 0
        self._waiting: collections.deque[asyncio.Future[None]] = collections.deque()
        self._idle: dict[tuple[str, int], list[_Connection]] = {}
        # (url, header lines) -> its target: the gateway's requests share a few
        self._targets: dict[tuple[str, tuple[str | bytes, ...]], _Target | None] = {}
        self._transfers: set[_Transfer] = set()
        self._no_proxy = _proxy_environment()
        self._closed = False
        self.taken = 0  # requests this leg drove (the rest went to libcurl)

    @property
    def client(self) -> Any:
        """The ``AsyncClient`` behind the leg (made now if it was not)."""
        if self._client is None:
            from .aio import AsyncClient

            self._client = AsyncClient(**self._options)
        return self._client

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.client, name)

    def _target(self, job: _Job) -> _Target | None:
        """The target of ``job`` if this leg takes it, else None (libcurl takes it)."""
        spec, options = job.spec, job.options
        if (
            httptools is None
            or spec.method != "POST"
            or spec.http2
            or job.retries
            or len(job.specs) > 1
            or options.get("gate")
            or options.get("resumable")
            or options.get("curl") is not None
            or options["format"] == "events"
            or spec.api == PLAIN
            or spec.proxy
        ):
            return None
        key = (spec.url, spec.headers)
        if key in self._targets:
            target = self._targets[key]
        else:
            target = _target(spec.url, spec.headers, self._no_proxy)
            if len(self._targets) < 1024:
                self._targets[key] = target
        if target is None or (target.proxied and spec.proxy is None):
            return None
        return target

    async def create_stream(
        self,
        input: Mapping[str, Any],
        /,
        on_chunk: Any = None,
        *,
        on_end: Callable[[Any], None] | None = None,
        on_complete: Callable[[], None] | None = None,
        **options: Any,
    ) -> dict[str, Any]:
        """``AsyncClient.create_stream``, on the loop where the request allows it.

        ``on_end(outcome)``, if given, is called once with what the call returns or raises (the
        result, or the error) as soon as the transfer ends: for a transfer on the loop, in the
        loop's callback that read the answer's end, before the awaiting coroutines resume (a relay
        ends its caller's response there); for one handed to the client, when that returns. It is
        not called when the call is cancelled. What it raises goes to the loop's exception
        handler; the call's outcome stays.

        ``on_complete()``, if given (``format="relay"``, or a translation: ``"to-chat"``,
        ``"to-messages"``, ``"to-responses"``), is called at most once, for a transfer on the
        loop, as soon as the relay has handed ``on_chunk`` the ``[DONE]`` of a complete answer
        (``Relay.complete``: nothing after it can be sent), or the translator its terminal event
        (its ``complete``), in the callback that read it, before the transfer ends; not when a
        ``first_chunk_gate`` still holds the stream's output then. What it raises stops the
        transfer and is raised by the call, as ``on_chunk``'s own error is."""
        if on_complete is not None and not _completes(options.get("format")):
            raise TypeError(
                "on_complete= needs format='relay' or a translation ('to-chat', 'to-messages', "
                "'to-responses'): only those know their answer is complete"
            )
        if options.get("driver") is not None or options.get("curl") is not None:
            return await _ended(self.client.create_stream(input, on_chunk, **options), on_end)
        job = new_job(self._defaults, self._prepare, "loop", input, on_chunk, options)
        target = self._target(job)
        if target is None or self._closed:
            return await _ended(self.client._run(job), on_end)
        self.taken += 1
        transfer = _Transfer(self, job, target)
        transfer.on_end = on_end
        transfer.on_complete = on_complete
        self._transfers.add(transfer)
        try:
            outcome = await transfer.run()
        finally:
            self._transfers.discard(transfer)
        transfer._tell(outcome)  # one that ended before its transfer began (no slot): told here
        if isinstance(outcome, BaseException):
            raise outcome
        out: dict[str, Any] = outcome
        return out

    async def close(self) -> None:
        """Cut every transfer, close every kept connection, then close the client."""
        self._closed = True
        for transfer in list(self._transfers):  # the waiting ones too: their outcome is this
            url = transfer.job.spec.display_url
            transfer.fail(ClientClosed(f"{url}: the AsyncClient was closed before this answer ended"))
        for pool in self._idle.values():
            for connection in pool:
                connection.close()
        self._idle.clear()
        for waiter in self._waiting:
            if not waiter.done():
                waiter.set_exception(ClientClosed("the client is closed"))
        if self._client is not None:
            await self._client.close()

    # the bound on connections in use (the client's max_connections)

    async def _slot(self, job: _Job, deadline: float | None) -> None:
        if self._busy < self._max and not self._waiting:
            self._busy += 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        try:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            await asyncio.wait_for(asyncio.shield(waiter), left)
        except asyncio.TimeoutError:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._free()  # the slot came as the wait ran out: pass it on
            raise queue_timeout(job.spec, self._max) from None
        except BaseException:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._free()
            raise
        finally:
            if not waiter.done():
                waiter.cancel()
            if waiter in self._waiting:
                self._waiting.remove(waiter)

    def _free(self) -> None:
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot passes to it: _busy stays
                return
        self._busy -= 1

    # kept-alive connections

    def _kept(self, target: _Target) -> _Connection | None:
        pool = self._idle.get((target.host, target.port))
        while pool:
            connection = pool.pop()
            if not connection.transport.is_closing():
                return connection
        return None

    def _keep(self, connection: _Connection) -> None:
        if self._closed or connection.transport.is_closing():
            connection.close()
            return
        pool = self._idle.setdefault(connection.key, [])
        if len(pool) >= self._max:
            connection.close()
            return
        connection.idle(self)
        pool.append(connection)

    def _forget(self, connection: _Connection) -> None:
        pool = self._idle.get(connection.key)
        if pool is not None and connection in pool:
            pool.remove(connection)


async def _ended(call: Awaitable[dict[str, Any]], on_end: Callable[[Any], None] | None) -> dict[str, Any]:
    # a call handed to the client: on_end once it returned or raised (not when cancelled)
    if on_end is None:
        return await call
    try:
        result = await call
    except asyncio.CancelledError:
        raise
    except BaseException as exc:
        _call_on_end(on_end, exc)
        raise
    _call_on_end(on_end, result)
    return result


def _completes(fmt: Any) -> bool:
    # a byte-out format whose writer says when its answer is complete (the relay, a translator)
    return fmt == "relay" or (isinstance(fmt, str) and fmt.startswith("to-"))


def _past_gate(on_complete: Callable[[], None], gate: Any) -> Callable[[], None]:
    # a first-chunk gate may still hold the relay's output at its [DONE] (an answer without
    # content): then it is not on_chunk's yet, and on_complete is not called
    if gate is None:
        return on_complete

    def told() -> None:
        if gate.opened:
            on_complete()

    return told


def _call_on_end(on_end: Callable[[Any], None], outcome: Any) -> None:
    try:
        on_end(outcome)
    except Exception as exc:
        asyncio.get_running_loop().call_exception_handler(
            {"message": "LoopLeg: on_end raised", "exception": exc}
        )


def _retrieved(task: asyncio.Task[Any]) -> None:
    # a connect whose connection already sent its request: its outcome is not needed
    if not task.cancelled():
        task.exception()


class _Connection(asyncio.Protocol):
    """One connection to an upstream. Idle (in its leg's pool): any byte or the end closes it.
    During a transfer its reads go to the transfer: through ``on_data`` (Python) until the answer's
    head is in, then to the parser's ``feed_data`` itself. A new connection made for a transfer
    (``opener``) sends its request from ``connection_made``: the request goes out in the loop's
    callback that saw the connection up, not several turns of a busy loop later, once the task
    that opened it, the wait and the transfer's own task have each had their turn."""

    def __init__(self, key: tuple[str, int], opener: _Transfer | None = None) -> None:
        self.key = key
        self.transport: Any = None
        self.transfer: _Transfer | None = None
        self.leg: LoopLeg | None = None  # set while idle in its pool
        self.opener = opener
        # the loop keeps the data_received it finds when the transport is made: one switch for
        # the connection's life, pointed at the answer's route once its head is in (a
        # set_protocol per answer would stop and start reading the socket: two epoll changes)
        self.reads = _streams.new_reads(self._on_data)
        self.data_received = self.reads.feed  # type: ignore[method-assign]

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        opener, self.opener = self.opener, None
        if opener is not None and not opener.done.done() and opener.connection is None:
            opener.opened = True
            opener._attach(self)
            opener._send()

    def _on_data(self, data: bytes) -> None:
        # the reads no route takes: the answer's head, or bytes on an idle connection
        transfer = self.transfer
        if transfer is None:  # bytes no request asked for, on an idle connection
            self.close()
            return
        transfer.on_data(data)

    def eof_received(self) -> bool | None:
        return None  # the transport closes; connection_lost says the rest

    def connection_lost(self, exc: BaseException | None) -> None:
        self.reads.close()
        transfer, self.transfer = self.transfer, None
        if self.leg is not None:
            self.leg._forget(self)
            self.leg = None
        if transfer is not None:
            transfer.lost(exc)

    def listen(self, route: Any) -> None:
        """Hand the next reads to ``route.read`` (None: back to this connection's own reader)."""
        self.reads.route(route)

    def idle(self, leg: LoopLeg) -> None:
        self.transfer = None
        self.leg = leg
        self.listen(None)
        self.transport.resume_reading()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class _Transfer:
    """One request on the loop: its connection, parser, response and the checks of its timeouts."""

    def __init__(self, leg: LoopLeg, job: _Job, target: _Target) -> None:
        self.leg = leg
        self.job = job
        self.target = target
        self.loop = asyncio.get_running_loop()
        self.done: asyncio.Future[Any] = self.loop.create_future()
        self.connection: _Connection | None = None
        self.response: Response | None = None
        self.route: Any = None
        self.parser: Any = None
        self.sent: int | None = None
        self.got = False  # a byte of the answer arrived
        self.headed = False  # the answer's head is in (its body's reads go to the parser)
        self.complete = False
        self.framed = False  # the answer says how its body ends (a length, or chunks)
        self.twice = False  # it says so twice (a length and chunks)
        self.reused = False
        self.connecting = False  # waiting for a new connection
        self.opened = False  # a new connection sent the request from its connection_made
        self.timer: asyncio.TimerHandle | None = None
        self.deadline: float | None = None
        self.held_reads = False  # the connection's reading is paused for a hold
        self.on_body: Any = None  # the route, for the parser
        self.head_read = 0  # bytes of the reads that ended inside the answer's head
        self.head_line = 0  # bytes of those reads since their last LF (a line not ended yet)
        self.head_size = 0  # bytes of the head's lines, as the parser gave them
        self.status_size = 0  # bytes of the status line
        self.reason = b""  # its reason phrase, as far as it came
        self.stated = False  # the response has the status line
        self.on_end: Callable[[Any], None] | None = None  # told the outcome as the transfer ends
        self.on_complete: Callable[[], None] | None = None  # told as the stream's answer is complete

    # the transfer

    async def run(self) -> Any:
        job, leg = self.job, self.leg
        spec = job.spec
        self.deadline = time.monotonic() + spec.timeout_ms / 1000 if spec.timeout_ms else None
        try:
            await leg._slot(job, self.deadline)
        except TransportError as exc:
            settle(job, exc, None)
            return exc
        except ClientClosed:
            if self.done.done():  # closed while waiting: close() failed this transfer
                return self.done.result()
            raise
        try:
            job.started = time.monotonic_ns()
            stream, response = open_stream(job, direct=True)
            if self.on_complete is not None:
                stream.on_complete = _past_gate(self.on_complete, job.gate)
            self.response = response
            job.stream, job.response = stream, response
            self.route = _streams.new_route(response.write, self._pause, self._stopped)
            response.direct = self.route.direct
            response.on_release = self._released
            self._arm(time.monotonic())
            await self._connect()
            return await self.done
        except asyncio.CancelledError:
            self._abandon()
            raise
        finally:
            if self.timer is not None:
                self.timer.cancel()
            leg._free()

    async def _connect(self, fresh: bool = False) -> None:
        """Take a kept connection (``fresh``: never) or open one, and send the request on it."""
        leg, target, spec = self.leg, self.target, self.job.spec
        connection = None if fresh else leg._kept(target)
        self.reused = connection is not None
        if connection is None:
            limit = spec.connect_timeout_ms / 1000 if spec.connect_timeout_ms else None
            if self.deadline is not None:
                left = max(0.001, self.deadline - time.monotonic())
                limit = left if limit is None else min(limit, left)
            key = (target.host, target.port)
            making = self.loop.create_task(
                self.loop.create_connection(lambda: _Connection(key, self), target.host, target.port)
            )
            self.connecting = True
            try:
                # the transfer may end first (first_byte_timeout, idle_timeout, timeout, close()):
                # then the connect is dropped at once, not waited for to its own limit
                await asyncio.wait((making, self.done), timeout=limit, return_when=asyncio.FIRST_COMPLETED)
            finally:
                self.connecting = False
                if not making.done() and not self.opened:
                    making.cancel()
            if self.opened:
                self.opened = False
                # connection_made sent the request: the connect is over, whatever ended the wait
                # (the whole answer may be in, and its connection kept or another's already)
                if not making.done():
                    making.add_done_callback(_retrieved)
                return
            if making.cancelled() or not making.done():
                ms = round((limit or 0) * 1000)
                self.finish(TIMED_OUT, f"Connection timed out after {ms} milliseconds")
                return
            exc = making.exception()
            if isinstance(exc, OSError):
                if isinstance(exc, socket.gaierror):
                    self.finish(COULDNT_RESOLVE, f"Could not resolve host: {target.host}")
                else:
                    words = exc.strerror or str(exc)
                    self.finish(
                        COULDNT_CONNECT, f"Failed to connect to {target.host} port {target.port}: {words}"
                    )
                return
            _, connection = making.result()
        assert connection is not None
        if self.done.done():  # failed or cut while connecting
            leg._keep(connection)
            return
        self._attach(connection)
        self._send()

    def _attach(self, connection: _Connection) -> None:
        # the answer's reads go to this transfer from now on
        connection.transfer = self
        connection.leg = None
        self.connection = connection
        self.connecting = False
        self.on_body = self.route  # read once by the parser: each body read goes to the route
        self.parser = httptools.HttpResponseParser(self)
        if _LENIENT:
            self.parser.set_dangerous_leniencies(**_LENIENCIES)

    def _send(self) -> None:
        body, connection = self.job.spec.body, self.connection
        assert connection is not None
        self.sent = time.monotonic_ns()
        connection.transport.write(b"%sContent-Length: %d\r\n\r\n%s" % (self.target.head, len(body), body))

    # the parser's callbacks (the head, and a head's end)

    def on_data(self, data: bytes) -> None:
        # a read before the head's end: through Python, so a parse error is caught here; the
        # body's pieces in it go on as one once it is parsed (finish sends them first)
        self.got = True
        route = self.route
        route.gather()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self.finish(WEIRD_REPLY, "the upstream switched protocols")
        except httptools.HttpParserError as exc:
            if self.done.done():
                return
            if self.parser.get_status_code() == 0:  # no HTTP/1.x status line: libcurl refuses the protocol
                self.finish(UNSUPPORTED_PROTOCOL, f"the answer's status line is not HTTP/1.x ({exc})")
            else:
                if not self.stated:  # a status line, then a broken header: the status stands
                    self._state()
                what = "answer" if self.headed else "answer's head"
                self.finish(WEIRD_REPLY if not self.headed else RECV_ERROR, f"the {what} is not HTTP ({exc})")
            return
        finally:
            route.flush()
        if not self.headed and not self.done.done():  # all of this read is the head's
            self.head_read += len(data)
            end = data.rfind(b"\n")
            self.head_line = self.head_line + len(data) if end < 0 else len(data) - end - 1
            within = self._bound_head(self.head_line, self.head_read)
            if within and end >= 0 and not self.stated and self.parser.get_status_code():
                self._state()  # the status line ended in this read

    def _bound_head(self, line: int, size: int) -> bool:
        """Whether the head is still within libcurl's bounds (else the transfer ends as libcurl
        ends it): a hostile upstream's endless header is not kept."""
        if line > MAX_HEAD_LINE:
            self.finish(TOO_LARGE, "")
        elif size > MAX_HEAD:
            self.finish(RECV_ERROR, f"Too large response headers: {size} > {MAX_HEAD}")
        else:
            return True
        return False

    def on_message_begin(self) -> None:
        self.reason = b""
        self.status_size = 15  # "HTTP/1.1 200 " and its CRLF
        self.head_size += 15
        self.stated = False

    def on_status(self, reason: bytes) -> None:
        # once per piece of the reason phrase (a status line split across reads comes in pieces),
        # never for a status line without one ("HTTP/1.1 200"): the line is told once it is whole
        self.status_size += len(reason)
        self.head_size += len(reason)
        if self._bound_head(self.status_size, self.head_size):
            self.reason += reason

    def _state(self) -> None:
        # the status line is whole: the response learns it, as libcurl's header callback would
        assert self.response is not None
        self.stated = True
        self.response.header(b"HTTP/1.1 %d %s" % (self.parser.get_status_code(), self.reason))

    def on_header(self, name: bytes, value: bytes) -> None:
        assert self.response is not None
        if not self.stated:
            self._state()
        line = len(name) + len(value) + 4  # ": " and CRLF
        size = self.head_size = self.head_size + line
        if (line > MAX_HEAD_LINE or size > MAX_HEAD) and not self._bound_head(line, size):
            return  # (the bounds' test inline: this runs for every header of every answer)
        self.response.field(name, value)
        lower = name.lower()
        if lower == b"content-length" or (lower == b"transfer-encoding" and b"chunked" in value.lower()):
            if self.framed:  # a length and chunks: read by the chunks, the connection not kept
                self.twice = True
            self.framed = True

    def on_headers_complete(self) -> None:
        if not self.stated and not self.done.done():
            self._state()
        status = self.parser.get_status_code()
        if status < 200:  # 100 Continue and its kind: the answer's head comes after
            return
        self.headed = True
        if self.done.done():  # failed in the head
            return
        response, route = self.response, self.route
        assert response is not None
        coding = response.headers.get("content-encoding", "").strip().lower()
        if coding and coding != "identity":  # compressed although identity was asked for
            decoders = _decoders(coding)
            if decoders is None:
                self.finish(BAD_CONTENT_ENCODING, "Unrecognized content encoding type")
                return
            response.direct = None  # decoded in Python: never fed from C
            route.on_write = _Decoded(response.write, decoders, self.finish)
        connection = self.connection
        if connection is not None and not self.done.done():
            # the body's reads: no Python frame; each read's pieces go on as one
            route.parse = self.parser.feed_data
            connection.listen(route)

    def on_message_complete(self) -> None:
        if self.parser.get_status_code() < 200:
            self.headed = False
            return
        self.complete = True
        self.finish(0, "")

    # holds, stops, cuts, timeouts

    def _pause(self) -> None:
        # a consumer holds the transfer: the connection stops reading (TCP backpressure)
        connection = self.connection
        self.held_reads = True
        if connection is not None and not connection.transport.is_closing():
            connection.transport.pause_reading()

    def _released(self) -> None:
        # the hold ended: the kept reads go first (a new hold may keep the rest), then reading
        response, route = self.response, self.route
        if response is None or self.done.done():
            return
        response.paused = False
        response.last_activity = time.monotonic()
        held, route.held = route.held, None
        for data in held or ():
            route(data)
        if route.held is None and not route.stopped:
            self.held_reads = False
            connection = self.connection
            if connection is not None and not connection.transport.is_closing():
                connection.transport.resume_reading()
            if self.complete:
                self.finish(0, "")

    def _stopped(self) -> None:
        # the stream stopped (on_chunk said so, the caller left, a callback raised)
        self.loop.call_soon(self.finish, WRITE_ERROR, "")

    def lost(self, exc: BaseException | None) -> None:
        """The connection ended before the answer did."""
        if self.done.done():
            return
        self.connection = None
        if not self.got and self.reused and self.sent is not None:
            # a kept connection the server had closed: once more on a new one (nothing was read)
            self.loop.create_task(self._again())
            return
        if self.headed and not self.framed and exc is None:  # a body that ends with the connection
            self.complete = True
            self.finish(0, "")
        elif not self.got:
            self.finish(GOT_NOTHING, "Empty reply from server")
        elif exc is not None:
            self.finish(RECV_ERROR, f"Recv failure: {exc}")
        else:
            self.finish(PARTIAL, "transfer closed with outstanding read data remaining")

    async def _again(self) -> None:
        try:
            await self._connect(fresh=True)
        except BaseException as exc:  # pragma: no cover - _connect settles its own failures
            self.fail(exc)

    def _arm(self, now: float) -> None:
        spec, response = self.job.spec, self.response
        assert response is not None
        waits = []
        limit = _silence_limit(spec, response)[0]
        if limit is not None:
            waits.append(limit)
        if self.deadline is not None:
            waits.append(max(0.0, self.deadline - now))
        if waits:
            self.timer = self.loop.call_later(max(0.001, min(waits)), self._check)

    def _check(self) -> None:
        self.timer = None
        response = self.response
        if self.done.done() or response is None:
            return
        now = time.monotonic()
        if self.deadline is not None and now >= self.deadline:
            ms = self.job.spec.timeout_ms
            what = "Connection" if self.connecting else "Operation"  # libcurl's words for each
            self.finish(TIMED_OUT, f"{what} timed out after {ms} milliseconds")
            return
        limit, name = _silence_limit(self.job.spec, response)
        last = max(response.last_activity, self.route.last_read)
        if limit is not None and not response.paused and not self.held_reads and now - last >= limit:
            what = "no answer" if name == "first_byte_timeout" else "no data"
            self.finish(TIMED_OUT, f"{what} for {limit:g} s ({name})")
            return
        waits = []
        if limit is not None:
            waits.append(limit if (response.paused or self.held_reads) else max(0.001, last + limit - now))
        if self.deadline is not None:
            waits.append(self.deadline - now)
        if waits:
            self.timer = self.loop.call_later(max(0.001, min(waits)), self._check)

    # the end

    def finish(self, code: int, message: str) -> None:
        """The transfer ended with libcurl's ``code`` (0: the answer is whole): its outcome, as the
        engine settles a transfer."""
        if self.done.done():
            return
        response, job = self.response, self.job
        route = self.route
        if route is not None:
            route.flush()  # what the parser gave of this read before the end (or a broken piece)
            if self.done.done():  # the flush stopped the transfer
                return
        if code == 0 and route is not None and route.held is not None:
            return  # whole, but reads are held for the consumer: the end waits for the release
        connection, self.connection = self.connection, None
        if connection is not None:
            connection.transfer = None
            keep = (
                code == 0 and not self.twice and self.parser is not None and self.parser.should_keep_alive()
            )
            if keep:
                self.leg._keep(connection)
            else:
                connection.close()
        outcome: Any
        assert response is not None
        try:
            outcome = response.finish(code, message)
        except BaseException as exc:
            outcome = exc
        settle(job, outcome, self.sent)
        self._unhook()
        self.done.set_result(outcome)
        self._tell(outcome)

    def _tell(self, outcome: Any) -> None:
        on_end, self.on_end = self.on_end, None
        if on_end is not None:
            _call_on_end(on_end, outcome)

    def _unhook(self) -> None:
        # the transfer's parts point at each other (the route at the response and this transfer,
        # the parser at this transfer's callbacks): cut, so they go when the answer does
        route, self.route = self.route, None
        if route is not None:
            route.direct(None)
            route.stopped = True  # what the parser still has of this read, or after it, is dropped
            route.on_write = route.on_pause = route.on_stop = route.parse = None
        self.parser = self.on_body = None

    def fail(self, exc: BaseException) -> None:
        """End the transfer with ``exc`` (the client closed)."""
        if self.done.done():
            return
        connection, self.connection = self.connection, None
        if connection is not None:
            connection.transfer = None
            connection.close()
        settle(self.job, exc, self.sent)
        self._unhook()
        self.done.set_result(exc)
        self._tell(exc)

    def _abandon(self) -> None:
        # the awaiting task was cancelled: the connection goes, the job ends
        job = self.job
        connection, self.connection = self.connection, None
        if connection is not None:
            connection.transfer = None
            connection.close()
        if not job.done:
            job.done = True
            job.end = time.monotonic_ns()
        unhook(job)
        self._unhook()
        self.on_end = None  # cancelled: not told
        if not self.done.done():
            self.done.cancel()

"""The byte-out streams' Python twins (``client/_streams_c.pyx`` compiles the same three classes,
by the same names): ``BytesStream``, what the engine drives for a byte-out format, a writer whose
output goes to ``on_bytes``; ``PassThrough``, an API's own stream cut only at event boundaries; and
``WireSink``, a relayed piece framed as one HTTP/1.1 chunk and written to the caller's transport.
``client/_streams.py`` is the table that picks a twin for each request.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .. import _backend
from .._errors import EventTooLarge
from .._formats import api_format
from .._timing import Timing, anchor_pair, build_timing

SendBytes = Callable[[bytes], Any]


class BytesStream:
    """What the engine drives: a writer (``write(data) -> bytes``, ``close(truncated=) -> bytes``,
    ``result()``) whose output goes to ``on_bytes``. ``on_complete``, when set, is called once
    (with no argument) after a ``write`` whose output made the writer ``complete`` (a ``Relay``'s)
    went to ``on_bytes``."""

    __slots__ = ("_anchor", "_reads", "_send", "_stopped", "_writer", "holder", "on_complete")

    def __init__(self, writer: Any, on_bytes: SendBytes | None, timing: bool) -> None:
        self.holder: Any = None  # the engine's Response: it holds the transfer for a future
        self.on_complete: Callable[[], Any] | None = None
        self._writer = writer
        self._send = on_bytes
        self._reads: list[int] | None = [] if timing else None
        self._anchor = anchor_pair() if timing else None
        self._stopped = False

    def write(self, data: bytes, /) -> int | None:
        """The engine's write callback: None to go on, 0 to stop the transfer."""
        if self._reads is not None:
            self._reads.append(time.monotonic_ns())
        if self._stopped:
            return 0
        try:
            out = self._writer.write(data)
        except EventTooLarge as exc:
            self._stopped = True
            self._deliver(self._before(exc))
            raise
        # the piece that makes the answer complete: a sink may end the body with it
        last = self.on_complete is not None and self._writer.complete
        if out and not self._deliver(out, last):
            self._stopped = True
            return 0
        if last:
            told, self.on_complete = self.on_complete, None
            assert told is not None
            told()
        return None

    def _before(self, exc: EventTooLarge) -> bytes:
        # what the writer had to send before the oversized event
        before: bytes = self._writer.close(truncated=True)
        return before

    def _deliver(self, piece: bytes, last: bool = False) -> bool:
        # last: ``piece`` makes the writer's answer complete (a WireSink may end the body with it)
        send = self._send
        if not piece or send is None:
            return True
        answer = send.last(piece) if last and type(send) is WireSink else send(piece)
        if answer is None:
            return True
        if callable(getattr(answer, "add_done_callback", None)):  # "hold until this is done"
            if self.holder is not None:
                self.holder.hold(answer)
            return True
        return bool(answer)

    def close(self, *, truncated: bool = False) -> None:
        tail = self._writer.close(truncated=truncated)
        if not self._stopped:
            self._deliver(tail)

    def result(self) -> dict[str, Any]:
        out: dict[str, Any] = self._writer.result()
        return out

    def timing(self) -> Timing | None:
        if self._reads is None or self._anchor is None:
            return None
        return build_timing(self._reads, [], [], [], self._anchor)


def _boundary(data: bytes) -> int:
    """Where the last whole event of ``data`` ends (after its blank line), 0 if none does: LF, CRLF
    and CR line ends alike."""
    cut = data.rfind(b"\n\n") + 2
    crlf = data.rfind(b"\r\n\r\n") + 4
    cr = data.rfind(b"\r\r") + 2
    return max(cut if cut > 1 else 0, crlf if crlf > 3 else 0, cr if cr > 1 else 0)


class PassThrough:
    """``PassThrough(api, *, max_event_bytes=None)``: a writer that hands on an ``api`` stream's
    bytes unchanged, each write cut after its last whole event (the rest waits for the next read,
    so the caller never gets half an event), while the API's fused fold reads the same bytes for
    ``result()`` and its verdict. An event without its blank line at the end of the stream is not
    an event (the SSE rules): it is never handed on."""

    __slots__ = ("_fold", "_ready", "_tail")

    def __init__(self, api: str, *, max_event_bytes: int | None = None) -> None:
        cls = getattr(_backend.current, api_format(api).stream_name)
        self._fold = cls(None, max_event_bytes=max_event_bytes, timing=False)
        self._tail = b""
        self._ready = b""

    def write(self, data: bytes, /) -> bytes:
        data = bytes(data)
        held = self._tail + data if self._tail else data
        cut = _boundary(held)
        self._ready, self._tail = held[:cut], held[cut:]
        self._fold.write(data)  # EventTooLarge leaves the whole events before it in _ready
        out, self._ready = self._ready, b""
        return out

    def close(self, *, truncated: bool = False) -> bytes:
        out, self._ready, self._tail = self._ready, b"", b""
        self._fold.close(truncated=truncated)
        return out

    def result(self) -> dict[str, Any]:
        out: dict[str, Any] = self._fold.result()
        return out


class WireSink:
    """WireSink(slow)

    The caller's side of one streamed answer, as the transfer's ``on_chunk`` (the readable twin of
    the compiled ``WireSink`` in ``client/_streams_c.pyx``, which the compiled ``BytesStream`` calls
    without a Python frame). Each piece (the bytes of one upstream read) is stamped (``first_ns``,
    ``last_ns``, ``gaps``: the gaps between pieces by their bit length in ns), shown to ``first``
    until it returns true (the first content's detector, then dropped), and then:

    - while ``direct`` is set, framed as one HTTP/1.1 chunk (``<hex size>\\r\\n`` piece
      ``\\r\\n``) and handed to ``write`` (the caller's transport's ``write``), counted in
      ``relayed``; if ``write`` raises, ``direct`` is cleared and ``lost()`` is called (its return:
      False, stop the transfer);
    - otherwise handed to ``slow(piece)``, whose return is the transfer's (None, a future to hold
      it, False to stop it): the owner's own path for the response's start, held pieces and a
      paused socket.

    Once ``gone`` is set a piece goes to ``slow`` unstamped. The owner (``gateway.Downstream``)
    sets ``direct`` only while nothing of its own waits to be sent, so the bytes keep their order.

    ``ends``, when the owner sets it (a server whose body's end the sink may write), lets the piece
    that completes the answer (``last(piece)``; a ``BytesStream`` with ``on_complete``) end the
    body: written direct, it goes with the chunked terminator (``0\\r\\n\\r\\n``) in one write,
    and ``ends()`` is called once after it, for the owner's own record of the end. Such a piece
    that goes to ``slow`` instead (the response's start) is handed over as ``slow(piece, True)``,
    so the owner may end the body with it itself."""

    __slots__ = (
        "_gaps",
        "direct",
        "ends",
        "first",
        "first_ns",
        "gone",
        "last_ns",
        "lost",
        "relayed",
        "slow",
        "write",
    )

    def __init__(self, slow: Callable[..., Any]) -> None:
        self.slow = slow
        self.write: Callable[[bytes], Any] | None = None
        self.lost: Callable[[], Any] | None = None
        self.first: Callable[[bytes], Any] | None = None
        self.ends: Callable[[], Any] | None = None
        self.direct = False
        self.gone = False
        self.relayed = 0
        self.first_ns = 0
        self.last_ns = 0
        self._gaps = [0] * 64

    @property
    def gaps(self) -> list[int]:
        """The 64 gap counts as a list (``gaps[b]``: ``2**(b-1) <= gap < 2**b`` ns)."""
        return list(self._gaps)

    def __call__(self, data: bytes, /) -> Any:
        return self._put(data, False)

    def last(self, data: bytes, /) -> Any:
        """A call with the answer's last piece: with ``ends`` set and the piece written direct,
        the body's end goes with it."""
        return self._put(data, True)

    def _put(self, data: bytes, end: bool) -> Any:
        if self.gone:
            return self.slow(data)
        now = time.monotonic_ns()
        if self.last_ns:
            self._gaps[(now - self.last_ns).bit_length()] += 1
        else:
            self.first_ns = now
        self.last_ns = now
        if self.first is not None and self.first(data):
            self.first = None
        if not self.direct or type(data) is not bytes:
            return self.slow(data, True) if end and self.ends is not None else self.slow(data)
        if not data:
            return None
        assert self.write is not None
        ends = self.ends if end else None
        try:
            self.write(b"%x\r\n%b\r\n%b" % (len(data), data, b"" if ends is None else b"0\r\n\r\n"))
        except Exception:
            self.direct = False
            return self.lost() if self.lost is not None else False
        self.relayed += len(data)
        if ends is not None:
            self.ends = None
            ends()
        return None


# libcurl's CURL_WRITEFUNC_PAUSE, which Response.write answers a held read with
_PAUSE = 0x10000001


class ReadRoute:
    """Where each read of an answer's body goes when the event loop drives the transfer (the
    gateway's upstream leg): the HTTP parser's ``on_body``, to ``on_write`` (``Response.write``),
    whose answer it acts on: None goes on; ``WRITEFUNC_PAUSE`` (the consumer holds the transfer)
    keeps the read in ``held`` and calls ``on_pause()``; anything else stops (``on_stop()`` once,
    ``stopped`` set; later reads are dropped). While ``held`` is a list, reads are added to it in
    order. ``direct`` is the compiled twin's way past ``Response.write``: a Python stream is never
    fed from C, so it answers False.

    A read is a socket read, not an HTTP chunk: between ``gather()`` and ``flush()`` the pieces
    the parser gives (one per chunk of a chunked body) are kept and then go on as one, joined.
    ``read(data)`` takes one read of the body (the connection's ``Reads`` hands it on): ``parse``
    (the parser's ``feed_data``) between the two."""

    __slots__ = (
        "_gathering",
        "_pieces",
        "held",
        "last_read",
        "on_pause",
        "on_stop",
        "on_write",
        "parse",
        "stopped",
    )

    def __init__(
        self, on_write: Callable[[bytes], Any], on_pause: Callable[[], Any], on_stop: Callable[[], Any], /
    ) -> None:
        self.on_write = on_write
        self.on_pause = on_pause
        self.on_stop = on_stop
        self.held: list[bytes] | None = None
        self.last_read = 0.0
        self.stopped = False
        self.parse: Callable[[bytes], Any] | None = None
        self._gathering = False
        self._pieces: list[bytes] = []

    def direct(self, stream: Any, response: Any = None) -> bool:
        return stream is None

    def __call__(self, data: bytes, /) -> None:
        if self.stopped:
            return
        if self._gathering:
            self._pieces.append(data)
            return
        self._route(data)

    def gather(self) -> None:
        self._gathering = True

    def flush(self) -> None:
        self._gathering = False
        pieces = self._pieces
        if not pieces:
            return
        data = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        pieces.clear()
        if not self.stopped:
            self._route(data)

    def read(self, data: bytes, /) -> None:
        self._gathering = True
        try:
            assert self.parse is not None
            self.parse(data)
        finally:
            self.flush()

    def _route(self, data: bytes) -> None:
        if self.held is not None:
            self.held.append(data)
            return
        answer = self.on_write(data)
        if answer is None:
            return
        if answer == _PAUSE:
            self.held = [data]
            self.on_pause()
            return
        self.stopped = True
        self.on_stop()


class Reads:
    """Where a connection's reads go: ``feed`` is the connection's ``data_received``, set once, before its
    transport is made, so the loop never has to be told of another (uvloop stops and starts
    reading the socket for each ``set_protocol``). ``route(route)`` sends the next reads to
    ``route.read``; ``route(None)`` back to ``own`` (the connection's own reader). ``close()``
    drops both, so the connection and this are not left in a cycle. The twin of ``Reads`` in
    ``client/_streams_c.pyx``."""

    __slots__ = ("_own", "_read")

    def __init__(self, own: Callable[[bytes], Any], /) -> None:
        self._own: Callable[[bytes], Any] | None = own
        self._read: Callable[[bytes], Any] | None = None

    def route(self, route: Any, /) -> None:
        self._read = None if route is None else route.read

    def close(self) -> None:
        self._own = self._read = None

    def feed(self, data: bytes, /) -> Any:
        read = self._read if self._read is not None else self._own
        return None if read is None else read(data)

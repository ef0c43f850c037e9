"""The one table of stream formats the engine and the iterators build their streams from, and the
byte-out formats themselves.

``new_stream(format, on_chunk, ...)`` is the only place a request's stream class is found: the
fused fold of its API (``ChatStream``, ``ResponsesStream``, ``MessagesStream``) or a byte-out
writer. Every class comes from ``fastsse._backend.current``, the selected backend's namespace, read
at each request: the tests replace that one name to run every format on one backend.

The byte-out formats: a ``Relay`` (``format="relay"``), the API's own stream passed through
whole event by whole event (``format="passthrough"``, any API: the bytes unchanged, cut only at
event boundaries, the API's fold beside them), or a translator (``format="to-chat"``, ``"to-responses"``, ``"to-messages"``: the request's API
translated into that one) behind the engine's stream protocol, so a gateway gets the bytes to send
downstream out of the same write callback that would otherwise fold chunks.

With these formats the request's ``on_chunk`` receives ``bytes``: each non-empty piece to send
downstream, in order, the tail (``[DONE]`` or the target's terminal event when the answer is
whole) last; returning False stops the transfer (the downstream client went away), and returning
a future that is not done yet (an ``asyncio.Future`` with ``AsyncClient``, a
``concurrent.futures.Future`` with ``Client``) holds the transfer: curl stops reading its socket
(the server meets TCP backpressure) until the future is done, then reading resumes by itself;
the pieces already handed over stay handed over. The result is
the relay's or translator's ``result()``: the fold of the upstream, with its ``verdict`` (and
``timing``: the read stamps and ``first_byte``; token stamps are not recorded for these formats).

The ``events`` format reads any event stream with a ``Decoder``: ``on_chunk`` receives each
``fastsse.Event`` as it is dispatched (whatever the API; an ``EventSource``'s GET is read with it),
and the result counts them (``{"events": n, "verdict": ...}``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any, Final

from .. import _backend
from .._errors import EventTooLarge, InvalidRequest
from .._formats import api_format
from .._timing import Timing, anchor_pair, build_timing
from .._verdict import Verdict

# The compiled twin of _BytesStream and PassThrough, for the compiled driver's direct feed
if _backend.COMPILED:
    from . import _streams_c
else:
    _streams_c = None

SendBytes = Callable[[bytes], Any]

FORMATS: Final = (
    "chat",
    "responses",
    "messages",
    "relay",
    "passthrough",
    "to-chat",
    "to-responses",
    "to-messages",
    "events",
)


def check_format(name: object, /) -> None:
    """It raises InvalidRequest (a ValueError) unless ``name`` is one of ``FORMATS``."""
    if name not in FORMATS:
        raise InvalidRequest(f"unknown format {name!r}; known: {sorted(FORMATS)}")


def format_for(api: str, name: object, /) -> str:
    """The format a request of ``api`` is read with: ``name``, or the API's own fold for None.

    It raises InvalidRequest for an unknown format and for one that disagrees with ``api``: another
    API's fold (``api="chat", format="messages"`` would fold a chat answer as Messages), ``relay``
    for an API other than chat, ``to-X`` where X is ``api`` itself.
    """
    if name is None:
        return api  # "events" for an event stream's GET (prepare_get)
    check_format(name)
    assert isinstance(name, str)
    if name in ("chat", "responses", "messages") and name != api:
        raise InvalidRequest(
            f"format={name!r} with api={api!r}: a {api} answer is folded by its own format; "
            f"to translate it, use format='to-{name}'"
        )
    if name == "relay" and api != "chat":
        raise InvalidRequest(
            f"format='relay' repairs chat streams; api={api!r} takes 'to-chat' or its own fold"
        )
    if name == f"to-{api}":
        raise InvalidRequest(f"format {name!r}: the request's API is {api!r} already")
    return name


def new_stream(
    name: str,
    on_chunk: Callable[[Any], Any] | None,
    /,
    *,
    api: str,
    max_event_bytes: int | None,
    timing: bool,
    decoder: Any = None,
    direct: bool = False,
    keep_text: bool = True,
) -> Any:
    """A new stream for format ``name`` reading an answer of ``api``: the fused fold of an API
    (``on_chunk`` gets parsed events), a byte-out writer (``on_chunk`` gets the bytes to send on),
    or ``events`` (``on_chunk`` gets each ``Event``; ``decoder``, when given, is the Decoder it
    reads with, so that what it keeps, the last event id and retry, outlives one transfer).
    ``direct=True`` (the compiled driver's engine): a byte-out format is the compiled
    ``BytesStream`` the driver feeds from C, when the compiled backend is the current one.
    ``keep_text=False``: the relay's fold keeps the facts, not the text (``ChatAggregator``).

    It raises ValueError for an unknown format, or ``to-X`` where ``X`` is ``api`` itself.
    """
    check_format(name)
    if name == "events":
        return EventsStream(on_chunk, max_event_bytes=max_event_bytes, timing=timing, decoder=decoder)
    if direct and _streams_c is not None and _backend.current.name == "cython" and name != "events":
        compiled = _compiled_bytes(
            name, on_chunk, api=api, max_event_bytes=max_event_bytes, timing=timing, keep_text=keep_text
        )
        if compiled is not None:
            return compiled
    if name == "relay":
        return RelayStream(on_chunk, max_event_bytes=max_event_bytes, timing=timing, keep_text=keep_text)
    if name == "passthrough":
        return _BytesStream(PassThrough(api, max_event_bytes=max_event_bytes), on_chunk, timing)
    if name.startswith("to-"):
        return TranslateStream(
            on_chunk, source=api, target=name[3:], max_event_bytes=max_event_bytes, timing=timing
        )
    cls = getattr(_backend.current, api_format(name).stream_name)
    return cls(on_chunk, max_event_bytes=max_event_bytes, timing=timing)


def _compiled_bytes(
    name: str,
    on_chunk: SendBytes | None,
    /,
    *,
    api: str,
    max_event_bytes: int | None,
    timing: bool,
    keep_text: bool = True,
) -> Any:
    # A byte-out format on the compiled BytesStream (the twin of the classes below), or None
    assert _streams_c is not None
    if name == "relay":
        relay = _backend.current.Relay(max_event_bytes=max_event_bytes, keep_text=keep_text)
        return _streams_c.BytesStream(relay, on_chunk, timing, relay=True)
    if name == "passthrough":
        writer = _streams_c.PassThrough(api, max_event_bytes=max_event_bytes)
        return _streams_c.BytesStream(writer, on_chunk, timing)
    if name.startswith("to-"):
        from ..translate import translator

        writer = translator(api, name[3:], max_event_bytes=max_event_bytes)
        return _streams_c.BytesStream(writer, on_chunk, timing)
    return None


class _BytesStream:
    """What the engine drives: a writer (``write(data) -> bytes``, ``close(truncated=) -> bytes``,
    ``result()``) whose output goes to ``on_bytes``."""

    __slots__ = ("_anchor", "_reads", "_send", "_stopped", "_writer", "holder")

    def __init__(self, writer: Any, on_bytes: SendBytes | None, timing: bool) -> None:
        self.holder: Any = None  # the engine's Response: it holds the transfer for a future
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
        if out and not self._deliver(out):
            self._stopped = True
            return 0
        return None

    def _before(self, exc: EventTooLarge) -> bytes:
        # what the writer had to send before the oversized event
        before: bytes = self._writer.close(truncated=True)
        return before

    def _deliver(self, piece: bytes) -> bool:
        if not piece or self._send is None:
            return True
        answer = self._send(piece)
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
    sets ``direct`` only while nothing of its own waits to be sent, so the bytes keep their order."""

    __slots__ = (
        "_gaps",
        "direct",
        "first",
        "first_ns",
        "gone",
        "last_ns",
        "lost",
        "relayed",
        "slow",
        "write",
    )

    def __init__(self, slow: Callable[[bytes], Any], /) -> None:
        self.slow = slow
        self.write: Callable[[bytes], Any] | None = None
        self.lost: Callable[[], Any] | None = None
        self.first: Callable[[bytes], Any] | None = None
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
            return self.slow(data)
        if not data:
            return None
        assert self.write is not None
        try:
            self.write(b"%x\r\n%b\r\n" % (len(data), data))
        except Exception:
            self.direct = False
            return self.lost() if self.lost is not None else False
        self.relayed += len(data)
        return None


def new_sink(slow: Callable[[bytes], Any], /) -> Any:
    """A ``WireSink`` of the current backend (the compiled one when it is selected)."""
    if _streams_c is not None and _backend.current.name == "cython":
        return _streams_c.WireSink(slow)
    return WireSink(slow)


# What the engine hands its Response to as ``holder``: either twin of the byte-out stream
BYTES_STREAMS: tuple[type[Any], ...] = (
    (_BytesStream,) if _streams_c is None else (_BytesStream, _streams_c.BytesStream)
)


class RelayStream(_BytesStream):
    """``RelayStream(on_bytes=None, *, max_event_bytes=None, timing=False, keep_text=True)``: a ``Relay``."""

    __slots__ = ()

    def __init__(
        self,
        on_bytes: SendBytes | None = None,
        *,
        max_event_bytes: int | None = None,
        timing: bool = False,
        keep_text: bool = True,
    ) -> None:
        relay = _backend.current.Relay(max_event_bytes=max_event_bytes, keep_text=keep_text)
        super().__init__(relay, on_bytes, timing)

    def _before(self, exc: EventTooLarge) -> bytes:
        return exc.events[0] if exc.events else b""

    @property
    def relay(self) -> Any:
        """The ``Relay`` (``verdict``, ``text()``)."""
        return self._writer


class TranslateStream(_BytesStream):
    """``TranslateStream(on_bytes=None, *, source, target, max_event_bytes=None, timing=False)``:
    ``fastsse.translate.translator(source, target)``."""

    __slots__ = ()

    def __init__(
        self,
        on_bytes: SendBytes | None = None,
        *,
        source: str,
        target: str,
        max_event_bytes: int | None = None,
        timing: bool = False,
    ) -> None:
        from ..translate import translator

        writer = translator(source, target, max_event_bytes=max_event_bytes)
        super().__init__(writer, on_bytes, timing)

    @property
    def translator(self) -> Any:
        """The translator (``verdict``, ``dropped``)."""
        return self._writer


class EventsStream:
    """``EventsStream(on_event=None, *, max_event_bytes=None, timing=False, decoder=None)``: any
    event stream, decoded: ``on_event(event)`` is called with each ``fastsse.Event`` as it is
    dispatched; returning False stops the transfer. ``decoder`` (a ``Decoder`` made with the same
    ``max_event_bytes``) is read with instead of a new one.

    The engine's stream protocol: ``write(data)`` (None to go on, 0 to stop; EventTooLarge once
    every event completed beside the oversized one has been handed over), ``close(truncated=)``,
    ``result()`` (``{"events": n, "verdict": {...}}``: complete unless the bytes ended inside an
    event, the transfer broke or ``on_event`` stopped it) and ``timing()`` (the read stamps). It
    never takes the compiled driver's direct feed: each read comes through ``write``.
    """

    __slots__ = ("_aborted", "_anchor", "_count", "_decoder", "_reads", "_send", "_too_large", "_truncated")

    def __init__(
        self,
        on_event: Callable[[Any], Any] | None = None,
        *,
        max_event_bytes: int | None = None,
        timing: bool = False,
        decoder: Any = None,
    ) -> None:
        self._decoder = (
            decoder if decoder is not None else _backend.current.Decoder(max_event_bytes=max_event_bytes)
        )
        self._send = on_event
        self._reads: list[int] | None = [] if timing else None
        self._anchor = anchor_pair() if timing else None
        self._count = 0
        self._aborted = self._too_large = self._truncated = False

    @property
    def decoder(self) -> Any:
        """The ``Decoder`` (``last_event_id``, ``retry``)."""
        return self._decoder

    def write(self, data: bytes, /) -> int | None:
        """The engine's write callback: None to go on, 0 to stop the transfer."""
        if self._reads is not None:
            self._reads.append(time.monotonic_ns())
        if self._aborted or self._too_large:
            return 0
        try:
            events = self._decoder.feed(data)
        except EventTooLarge as exc:
            self._too_large = True
            self._deliver(exc.events)  # nothing parsed is lost: the events beside it go first
            raise
        if events and not self._deliver(events):
            self._aborted = True
            return 0
        return None

    def _deliver(self, events: list[Any]) -> bool:
        send = self._send
        if send is None:
            self._count += len(events)
            return True
        for event in events:
            self._count += 1
            if send(event) is False:
                return False
        return True

    def close(self, *, truncated: bool = False) -> None:
        """End the bytes: an event left unterminated is discarded (WHATWG), and counts as a cut."""
        self._decoder.close()
        self._truncated = truncated or self._decoder.truncated

    def result(self) -> dict[str, Any]:
        """``{"events": n, "verdict": {...}}``: the events dispatched, and whether the stream ended
        whole (``why`` says what stopped it otherwise)."""
        why = None
        if self._too_large:
            why = "an event passed max_event_bytes"
        elif self._aborted:
            why = "on_event stopped the stream"
        elif self._truncated:
            why = "the stream was cut inside an event"
        verdict = Verdict(
            complete=why is None,
            why=why,
            usage=False,
            error=False,
            aborted=self._aborted,
            too_large=self._too_large,
            truncated=self._truncated,
        )
        return {"events": self._count, "verdict": dataclasses.asdict(verdict)}

    def timing(self) -> Timing | None:
        """The read stamps (``reads``, ``first_byte``), or None without ``timing``."""
        if self._reads is None or self._anchor is None:
            return None
        return build_timing(self._reads, [], [], [], self._anchor)

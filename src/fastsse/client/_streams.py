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
from ..apis import NAMES
from ._streams_py import BytesStream, PassThrough, ReadRoute, Reads, WireSink

# The compiled twins of BytesStream, PassThrough and WireSink (the Python ones are in _streams_py),
# for the compiled driver's direct feed
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
    if name in NAMES and name != api:
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
        return BytesStream(PassThrough(api, max_event_bytes=max_event_bytes), on_chunk, timing)
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


def new_sink(slow: Callable[..., Any], /) -> Any:
    """A ``WireSink`` of the current backend (the compiled one when it is selected)."""
    if _streams_c is not None and _backend.current.name == "cython":
        return _streams_c.WireSink(slow)
    return WireSink(slow)


def new_route(
    on_write: Callable[[bytes], Any], on_pause: Callable[[], Any], on_stop: Callable[[], Any], /
) -> Any:
    """A ``ReadRoute`` of the current backend (the compiled one, which feeds a compiled stream
    from C, when it is selected)."""
    if _streams_c is not None and _backend.current.name == "cython":
        return _streams_c.ReadRoute(on_write, on_pause, on_stop)
    return ReadRoute(on_write, on_pause, on_stop)


def new_reads(own: Callable[[bytes], Any], /) -> Any:
    """A ``Reads`` of the current backend (the compiled one calls a compiled route from C)."""
    if _streams_c is not None and _backend.current.name == "cython":
        return _streams_c.Reads(own)
    return Reads(own)


# What the engine hands its Response to as ``holder``: either twin of the byte-out stream
BYTES_STREAMS: tuple[type[Any], ...] = (
    (BytesStream,) if _streams_c is None else (BytesStream, _streams_c.BytesStream)
)


class RelayStream(BytesStream):
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


class TranslateStream(BytesStream):
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

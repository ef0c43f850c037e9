"""Pure-Python SSE decoder: the readable reference for ``sse/_decoder_c.pyx``.

Both implement the WHATWG "event stream interpretation" rules byte for byte; the golden vectors in
``tests/vectors`` and the differential Hypothesis tests hold them to the same output.
"""

from __future__ import annotations

import re
from typing import Final

from .._errors import bad_input_type, event_limit, too_large
from ._fields import long_retry, split_field

_EOL: Final = re.compile(rb"[\r\n]")
_BOM: Final = b"\xef\xbb\xbf"
_CR: Final = 13
_LF: Final = 10


class Event:
    """One dispatched SSE event: ``Event(data="", event="message", id="", retry=None)``.

    ``data`` is the joined ``data:`` lines, ``event`` the type (``"message"`` unless an ``event:``
    field said otherwise), ``id`` the last event id in effect when it was dispatched (``""`` if none),
    ``retry`` the last valid ``retry:`` value in effect (``None`` if none). An Event is an object
    read by attribute, not a tuple: it cannot be unpacked or indexed. ``match`` takes its fields
    by position in the same order (``case Event(data, "error"):``). Events compare equal by value,
    across backends too, and are not hashable.
    """

    __slots__ = ("data", "event", "id", "retry")

    def __init__(
        self, data: str = "", event: str = "message", id: str = "", retry: int | None = None
    ) -> None:
        self.data = data
        self.event = event
        self.id = id
        self.retry = retry

    def __eq__(self, other: object) -> bool:
        if not _is_event(other):
            return NotImplemented
        return (self.data, self.event, self.id, self.retry) == (
            other.data,  # type: ignore[attr-defined]
            other.event,  # type: ignore[attr-defined]
            other.id,  # type: ignore[attr-defined]
            other.retry,  # type: ignore[attr-defined]
        )

    __hash__ = None  # type: ignore[assignment]
    __match_args__ = ("data", "event", "id", "retry")

    def __repr__(self) -> str:
        return f"Event(data={self.data!r}, event={self.event!r}, id={self.id!r}, retry={self.retry!r})"


def _is_event(obj: object) -> bool:
    # Events of both backends compare equal, so tests can compare them directly.
    return type(obj).__name__ == "Event" and type(obj).__module__.startswith("fastsse.")


def as_bytes(data: object, owner: object) -> bytes:
    """Normalise ``feed`` input to ``bytes``; anything but a byte buffer is a TypeError."""
    if type(data) is bytes:
        return data
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise bad_input_type(data, owner)


class Decoder:
    """Incremental SSE decoder: ``feed`` bytes as they arrive, get complete events back.

    ``Decoder(*, max_event_bytes=None)``. With ``max_event_bytes=N``, a line longer than N bytes
    or an event whose data would pass N bytes is dropped: the decoder skips to the next blank line
    and goes on, finishes the rest of the chunk, then ``feed`` raises ``EventTooLarge`` whose
    ``events`` attribute holds every event that call completed, in order, so nothing parsed is lost.
    Memory stays within about 2 N bytes. The default is no limit (real image events exceed 8 MiB).

    One decoder per stream: an instance is not safe to share between threads.
    """

    def __init__(self, *, max_event_bytes: int | None = None) -> None:
        self._limit = event_limit(max_event_bytes, type(self).__name__)
        self._last_id = ""
        self._retry: int | None = None
        self._stopped = False
        self._reset_stream()

    def _reset_stream(self) -> None:
        self._head = b""  # first bytes of the stream, held until the BOM question is settled
        self._bom_done = False
        self._pending_cr = False  # a CR ended the previous chunk: a leading LF belongs to it
        self._line = bytearray()  # the unterminated line
        self._reset_event()
        self._discarding = False  # skipping an oversized event up to its blank line
        self._discard_partial = False  # the skipped line in progress is not empty
        self._in_event = False  # a field line arrived since the last blank line
        self._truncated = False

    def _reset_event(self) -> None:
        self._data: list[bytes] = []
        self._data_size = -1  # bytes of the dispatched data so far; -1 while there is no data line
        self._type: bytes | None = None

    @property
    def last_event_id(self) -> str:
        """The last event id buffer: set by ``id:`` fields, kept across events."""
        return self._last_id

    @property
    def retry(self) -> int | None:
        """The last valid ``retry:`` value in milliseconds, or None."""
        return self._retry

    def feed(self, data: bytes | bytearray | memoryview, /) -> list[Event]:
        """Decode the next piece of the stream and return the events it completed.

        It raises TypeError if ``data`` is not a byte buffer (the decoder stays usable) and
        EventTooLarge as described on the class.
        """
        chunk = as_bytes(data, self)
        self._out: list[Event] = []
        self._overflowed = False
        self._scan(chunk)
        out = self._out
        self._out = []
        if self._overflowed:
            assert self._limit is not None
            raise too_large(self._limit, out)
        return out

    def close(self) -> list[Event]:
        """End the stream. An unterminated event is discarded, as the spec says, so this returns
        ``[]``; ``truncated`` tells whether one was pending. The decoder then starts a new stream,
        keeping ``last_event_id`` and ``retry`` (as a reconnecting EventSource does)."""
        truncated = bool(self._line or self._head) or self._in_event or self._discarding
        self._reset_stream()
        self._stopped = False
        self._truncated = truncated
        return []

    @property
    def truncated(self) -> bool:
        """After ``close()``: True if the stream ended inside an event (which was discarded)."""
        return self._truncated

    # The scanner. ``_on_event`` is the one hook a subclass overrides (ChatStream folds there).

    def _on_event(self, data: bytes, event_type: bytes | None) -> bool:
        """Called for every dispatched event; return True to stop scanning this stream."""
        etype = event_type.decode("utf-8", "replace") if event_type else "message"
        self._out.append(Event(data.decode("utf-8", "replace"), etype, self._last_id, self._retry))
        return False

    def _on_comment(self, line: bytes) -> bool:
        """Called for every comment line (``Relay`` forwards them); return True to stop."""
        return False

    def _scan(self, chunk: bytes) -> None:
        if self._stopped:
            return
        if not self._bom_done:
            chunk = self._strip_bom(chunk)
        if not chunk:
            return
        pos = 0
        n = len(chunk)
        if self._pending_cr:
            self._pending_cr = False
            if chunk[0] == _LF:
                pos = 1
        limit = self._limit
        while pos < n:
            m = _EOL.search(chunk, pos)
            if m is None:
                self._hold(chunk, pos, n)
                return
            end = m.start()
            if chunk[end] == _CR:
                if end + 1 < n:
                    nxt = end + 2 if chunk[end + 1] == _LF else end + 1
                else:
                    self._pending_cr = True
                    nxt = end + 1
            else:
                nxt = end + 1
            if self._discarding:
                blank = end == pos and not self._discard_partial
                self._discard_partial = False
                if blank:
                    self._discarding = False
                    self._in_event = False
                    self._reset_event()
                pos = nxt
                continue
            if self._line:
                self._line += chunk[pos:end]
                line = bytes(self._line)
                self._line.clear()
            else:
                line = chunk[pos:end]
            pos = nxt
            if limit is not None and len(line) > limit:
                self._overflow(partial=False)
                continue
            if self._process(line):
                self._stopped = True
                return

    def _hold(self, chunk: bytes, pos: int, n: int) -> None:
        if self._discarding:
            self._discard_partial = True
            return
        if self._limit is not None and len(self._line) + (n - pos) > self._limit:
            self._line.clear()
            self._overflow(partial=True)
            return
        self._line += chunk[pos:n]

    def _overflow(self, *, partial: bool) -> None:
        self._overflowed = True
        self._discarding = True
        self._discard_partial = partial
        self._reset_event()

    def _strip_bom(self, chunk: bytes) -> bytes:
        head = self._head + chunk
        if len(head) < 3 and _BOM.startswith(head):
            self._head = head
            return b""
        self._bom_done = True
        self._head = b""
        return head[3:] if head.startswith(_BOM) else head

    def _process(self, line: bytes) -> bool:
        if not line:
            self._in_event = False
            if self._data_size < 0:
                self._reset_event()
                return False
            data = b"\n".join(self._data)
            etype = self._type
            self._reset_event()
            return self._on_event(data, etype)
        if line[0] == 0x3A:  # ':' comment
            return self._on_comment(line)
        self._in_event = True
        name, value = split_field(line)
        if name == b"data":
            size = self._data_size + 1 + len(value)
            if self._limit is not None and size > self._limit:
                self._overflow(partial=False)
                return False
            self._data.append(value)
            self._data_size = size
        elif name == b"event":
            self._type = value
        elif name == b"id":
            if b"\x00" not in value:
                self._last_id = value.decode("utf-8", "replace")
        elif name == b"retry" and value and value.isdigit():
            retry = int(value) if len(value) <= 18 else long_retry(value)
            if retry is not None:
                self._retry = retry
        return False

"""What an event source decides between its connections, with no I/O of its own: the request each
connection sends, which events reach the caller, and whether the source reconnects (after how
long) or ends. ``EventSource`` (``sync.py``) and ``AsyncEventSource`` (``aio.py``) drive it on the
engine, one connection at a time.

**Reconnecting** (WHATWG "reestablish the connection", with the shared rules of ``_retry.py``):
a stream that ends (cleanly or cut), a refused or reset connection, a timeout of one connection
(``idle_timeout``), a 429, 408, 409 or 5xx (``x-should-retry`` deciding when sent) is followed by
a new connection after ``_retry.reconnect_wait``: the server's last ``retry:``, at least 0.1 s,
at most ``max_retry_delay``, with backoff and jitter while connections deliver nothing, and a
Retry-After waited for in full (up to the cap). A 204 ends the source (the server's "no more");
any other answer that is no event stream (a 4xx, a 3xx, a 200 of another Content-Type) raises
``HTTPStatusError``; a curl failure that another try cannot mend (TLS, a bad encoding) raises
``TransportError``. ``max_reconnects`` and ``timeout`` (the whole source's) bound it all.

**No event twice.** Ids are opaque strings, never compared as numbers. The source remembers the
last ``DEDUPE_IDS`` distinct ids it delivered (and ``last_event_id=``, given at the start). When
an ``id:`` field sets the id in effect to one of them, that event and every event after it under
the same id are dropped (``dropped`` counts them): a server that replays what was delivered, or
whose ids go back, repeats nothing. A new id is delivered whatever its order. An event with no id
in effect (``""``) cannot be told from another and is always delivered. An ``id`` holding NUL is
ignored, as WHATWG says, so its event carries the id in effect before it.

**The id and retry in effect** outlive a connection (WHATWG): an event that arrives before any
``id:`` field of its connection carries the source's ``last_event_id``, and one before any
``retry:`` field the source's ``retry``. Each connection's decoder is primed with an id no server
sends (a random token), so that such an event is known for what it is, rather than taken for a
repetition of the last id. ``last_event_id`` follows the stream's ids (an ``id:`` with no event
too, and an empty ``id:`` resets it, so no Last-Event-ID is sent), except that a replayed id
never moves it back.
"""

from __future__ import annotations

import collections
import secrets
import time
from collections.abc import Mapping
from typing import Any, Final

from .. import _backend
from .._errors import HTTPStatusError, InvalidRequest, TransportError, event_limit
from . import _retry
from ._options import SOURCE_SHARED
from ._request import RequestSpec, prepare_get

__all__ = ["DEDUPE_IDS", "Source"]

DEDUPE_IDS: Final = 1024
# The least max_event_bytes a source takes: the decoder's priming line (``id:`` and the token) fits.
MIN_EVENT_BYTES: Final = 32
# What each connection's GET is prepared with: the shared rows but the two the source applies
# itself (its whole ``timeout``, spread over the reconnections, and the ``driver`` of its client).
_TRANSPORT: Final = tuple(name for name in SOURCE_SHARED if name not in ("timeout", "driver"))
# curl's timeout of a connection fires when the source's own runs out, give or take a tick
_SLACK: Final = 0.005


class Source:
    """``Source(url, options)``: the state and the rules of one event source (``options`` checked
    by the options table). It raises InvalidRequest or TypeError for a bad URL or option, as
    ``prepare_get`` does, before anything is sent."""

    __slots__ = (
        "_deadline",
        "_decoder",
        "_empty",
        "_id",
        "_limit",
        "_new",
        "_replay",
        "_seen",
        "_seen_set",
        "_started",
        "_token",
        "_transport",
        "display_url",
        "dropped",
        "last_event_id",
        "max_reconnects",
        "max_retry_delay",
        "reconnects",
        "retry",
        "timeout",
        "url",
    )

    def __init__(self, url: str, options: Mapping[str, Any], /) -> None:
        self._transport = {name: options[name] for name in _TRANSPORT if name in options}
        self._limit = event_limit(options.get("max_event_bytes"), "EventSource")
        if self._limit is not None and self._limit < MIN_EVENT_BYTES:
            raise InvalidRequest(
                f"an EventSource's max_event_bytes must be at least {MIN_EVENT_BYTES}, not {self._limit}"
            )
        self.timeout: float | None = options.get("timeout")
        self.max_reconnects: int | None = options.get("max_reconnects")
        self.max_retry_delay: float = options.get("max_retry_delay", 30.0)
        self.last_event_id: str = options.get("last_event_id") or ""
        first = prepare_get(url, last_event_id=self.last_event_id, timeout=self.timeout, **self._transport)
        self.url = url
        self.display_url = first.display_url
        self.retry: int | None = None  # ms: the last retry: field, for the next connections
        self.reconnects = 0
        self.dropped = 0
        self._seen: collections.deque[str] = collections.deque()
        self._seen_set: set[str] = set()
        if self.last_event_id:
            self._remember(self.last_event_id)
        self._token = "\x7f" + secrets.token_hex(8)
        self._empty = 0  # connections in a row that delivered no event
        self._started = False
        self._deadline: float | None = None
        self._decoder: Any = None
        self._id = self._token  # the id in effect on this connection
        self._replay = False  # that id is one already delivered: its events are dropped
        self._new = 0  # events this connection delivered

    def _remember(self, event_id: str) -> None:
        seen = self._seen
        if len(seen) >= DEDUPE_IDS:
            self._seen_set.discard(seen.popleft())
        seen.append(event_id)
        self._seen_set.add(event_id)

    def connect(self) -> tuple[RequestSpec, Any]:
        """The next connection's ``(spec, decoder)``: a GET with ``Last-Event-ID`` when an id is
        known, and the rest of ``timeout`` as its own. It raises TransportError (code 28) if the
        source's ``timeout`` has run out."""
        now = time.monotonic()
        if not self._started:
            self._started = True
            self._deadline = None if self.timeout is None else now + self.timeout
        else:
            self.reconnects += 1
        left = None
        if self._deadline is not None:
            left = self._deadline - now
            if left <= 0:
                raise self._timed_out(None)
        spec = prepare_get(self.url, last_event_id=self.last_event_id, timeout=left, **self._transport)
        decoder = _backend.current.Decoder(max_event_bytes=self._limit)
        decoder.feed(f"id:{self._token}\n\n".encode())  # the id in effect until the server sets one
        decoder.close()  # a new stream (its BOM, its lines), the token kept
        self._decoder = decoder
        self._id = self._token
        self._replay = False
        self._new = 0
        return spec, decoder

    def admit(self, event: Any) -> Any:
        """``event`` as the caller gets it (with the id and retry in effect), or None when it is a
        replay of what was delivered (counted in ``dropped``). Called for each event, in order."""
        if event.retry is not None:
            self.retry = event.retry
        event_id = event.id
        restore = event_id == self._token  # no id field yet on this connection: the source's holds
        if not restore and event_id != self._id:  # an id field set a new id in effect
            self._id = event_id
            self._replay = bool(event_id) and event_id in self._seen_set
            if not self._replay:
                self.last_event_id = event_id
                if event_id:
                    self._remember(event_id)
        if self._replay:
            self.dropped += 1
            return None
        self._new += 1
        if restore or (event.retry is None and self.retry is not None):
            return type(event)(
                event.data, event.event, self.last_event_id if restore else event_id, self.retry
            )
        return event

    def _end_connection(self) -> None:
        # What the last connection's stream set with no event after it: a ``retry:`` counts at
        # once (WHATWG), an ``id:`` once its block was dispatched (a block of fields alone is, at
        # its blank line); the id of a block the cut left unfinished is not the last event id.
        decoder = self._decoder
        if decoder is None:
            return
        self._decoder = None
        if decoder.retry is not None:
            self.retry = decoder.retry
        buffer = decoder.last_event_id
        if decoder.truncated or buffer in (self._token, self._id) or buffer in self._seen_set:
            return
        self.last_event_id = buffer

    def settle(self, outcome: Any) -> float | None:
        """What follows a connection that ended with ``outcome`` (the engine's result dict, or the
        exception the connection raised): the seconds to wait before the next one, or None when
        the source ends here. It raises what ends the source with an error: ``outcome`` itself
        (HTTPStatusError, TransportError, EventTooLarge, ...), or TransportError (code 28) when
        the wait would pass ``timeout``."""
        self._end_connection()
        self._empty = 0 if self._new else self._empty + 1
        retry_after = None
        failure: BaseException | None = None
        if isinstance(outcome, HTTPStatusError):
            if outcome.status == 204:
                return None  # WHATWG: the server has no more to send
            if not _retry.retryable_status(outcome.status, outcome.headers.get("x-should-retry")):
                raise outcome
            retry_after, failure = outcome.retry_after, outcome
        elif isinstance(outcome, TransportError):
            if self._deadline is not None and time.monotonic() >= self._deadline - _SLACK:
                raise self._timed_out(outcome)
            if outcome.code not in _retry.RETRY_CODES:
                raise outcome
            failure = outcome
        elif isinstance(outcome, BaseException):
            raise outcome
        if self.max_reconnects is not None and self.reconnects >= self.max_reconnects:
            if failure is not None:
                raise failure
            return None
        wait = _retry.reconnect_wait(self.retry, self._empty, self.max_retry_delay, retry_after)
        if self._deadline is not None and time.monotonic() + wait >= self._deadline:
            raise self._timed_out(failure)
        return wait

    def _timed_out(self, cause: BaseException | None) -> TransportError:
        error = TransportError(
            f"{self.display_url}: timed out after {self.timeout:g} s (timeout), "
            f"{self.reconnects} reconnection(s) made (curl error 28)",
            code=28,
            result=getattr(cause, "result", None),
        )
        error.__cause__ = cause
        return error


class SourceFace:
    """What ``EventSource`` and ``AsyncEventSource`` both show of their ``Source`` (``_source``)."""

    _source: Source

    @property
    def url(self) -> str:
        """The URL the source connects to, as given."""
        return self._source.url

    @property
    def last_event_id(self) -> str:
        """The id in effect: sent as ``Last-Event-ID`` on the next connection (``""``: none)."""
        return self._source.last_event_id

    @property
    def retry(self) -> int | None:
        """The server's last ``retry:`` in milliseconds (the reconnection time), or None."""
        return self._source.retry

    @property
    def reconnects(self) -> int:
        """How many connections were made after the first."""
        return self._source.reconnects

    @property
    def dropped(self) -> int:
        """How many events were dropped as replays of ids already delivered."""
        return self._source.dropped

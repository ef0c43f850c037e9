"""The error tree, shared by both backends (the compiled modules import it from here): one root,
``FastSSEError``, and under it one type per whose-fault-it-is."""

from __future__ import annotations

import operator
from typing import Any


class FastSSEError(Exception):
    """Root of every error fastsse raises: ``except fastsse.FastSSEError`` catches them all.

    Whose fault it was is in the type: the stream's bytes (``SSEError``, a ``ValueError``), the
    caller's input (``InvalidRequest``, ``Untranslatable``: ``ValueError`` s too), the network
    (``TransportError``), the server's answer (``HTTPStatusError``), the code that drives an
    object (``UsageError``: a stream written again from its own callback or after ``close()``, a
    client from two threads; ``ClientClosed``: both ``RuntimeError`` s, and ``EncodeError``: an
    encoder asked for a stream its API does not allow, a ``ValueError``), or a load run
    (``LoadError``). ``except ValueError`` around a parse never catches a refused connection.

    ::

        FastSSEError
        ├── SSEError (ValueError)
        │   └── EventTooLarge
        ├── InvalidRequest (ValueError)
        ├── Untranslatable (ValueError)
        ├── EncodeError (ValueError)
        ├── TransportError
        │   └── BodyTooLarge
        ├── HTTPStatusError
        ├── UsageError (RuntimeError)
        ├── ClientClosed (RuntimeError)
        ├── LoadError (RuntimeError)
        └── the gateway's: CallerGone, TooLarge, BadHeader
    """


class SSEError(FastSSEError, ValueError):
    """Bad stream data: what the server sent cannot be read as the stream it claims to be."""


class EventTooLarge(SSEError):
    """A line or an event's data passed ``max_event_bytes``.

    ``events`` holds every event the same ``feed`` call completed (before and after the oversized
    one), so nothing already parsed is lost; ``limit`` is the bound that was passed.
    """

    def __init__(self, message: str, *, limit: int, events: list[Any] | None = None) -> None:
        super().__init__(message)
        self.limit = limit
        self.events: list[Any] = events if events is not None else []


class InvalidRequest(FastSSEError, ValueError):
    """A request that cannot be sent as given, found before a byte is sent: a URL that is not
    http(s), a header that would inject another, a timeout that is not a positive number, two
    credentials, an ``api=`` and a ``format=`` that disagree. The caller's input, never the
    server's."""


class Untranslatable(FastSSEError, ValueError):
    """A request or answer body holds something the target API cannot express (or is not what
    its API allows). ``field`` is the path of that field in the source body, e.g.
    ``messages[2].content[0].cache_control``."""

    def __init__(self, field: str, why: str) -> None:
        super().__init__(f"{field}: {why}")
        self.field = field


class EncodeError(FastSSEError, ValueError):
    """An encoder was asked for a stream its API does not allow: a delta after the finish, a tool
    call's arguments before its name, an index out of order, a value of the wrong kind. The
    encoding code's fault, found before a byte of it is written."""


class TransportError(FastSSEError):
    """The HTTP transfer failed: the connection was refused, TLS failed, it timed out, went idle
    or broke mid-stream. Not a ``ValueError``.

    ``code`` is curl's error code (7 refused, 28 timed out, 56 cut...) or None; ``result`` is the
    partial result folded from what arrived before the failure (the API's answer with its
    ``verdict``, and ``timing`` from a client).
    """

    def __init__(
        self, message: str, *, result: dict[str, Any] | None = None, code: int | None = None
    ) -> None:
        super().__init__(message)
        self.result: dict[str, Any] = result if result is not None else {}
        self.code = code


class BodyTooLarge(TransportError):
    """A plain request's answer (``Client.get`` / ``Client.request``) had more body bytes than its
    ``max_body_bytes``: the transfer was stopped there, and nothing of the body is returned (a
    cut body is never handed over as the whole one). ``limit`` is the bound; ``code`` is 63,
    curl's "larger than the allowed size"; ``result["http"]`` holds the answer's status."""

    def __init__(self, message: str, *, limit: int, result: dict[str, Any] | None = None) -> None:
        super().__init__(message, result=result, code=63)
        self.limit = limit


class HTTPStatusError(FastSSEError):
    """The server answered with no stream: an HTTP error status (4xx, 5xx), a redirect that is
    not followed, a 204, or a 200 whose body is neither a stream nor an answer. Raised only with
    ``raise_for_status=True``; by default the same facts come back as the result.

    ``status`` is the HTTP status, ``headers`` the answer's headers (names lower-cased),
    ``body`` its bytes (at most 1 MiB kept), ``error`` the parsed error object (the body's
    ``"error"`` member, else the parsed body, else its text), ``retry_after`` the seconds the
    server asked to wait (``retry-after-ms``, then ``Retry-After``), or None, and ``result`` the
    result the call would have returned.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int,
        headers: dict[str, str] | None = None,
        body: bytes = b"",
        error: Any = None,
        retry_after: float | None = None,
        result: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.headers: dict[str, str] = headers if headers is not None else {}
        self.body = body
        self.error = error
        self.retry_after = retry_after
        self.result: dict[str, Any] = result if result is not None else {}


class UsageError(FastSSEError, RuntimeError):
    """A client used in a way it cannot serve: from a second thread while another call runs, from a
    second event loop, or from inside its own ``on_chunk``. The caller's code, not the data."""


class LoadError(FastSSEError, RuntimeError):
    """A load run could not be carried out or read: a worker or Ray actor failed, the closed loop
    of a sweep completed nothing, the scripted server did not start, or the server's metrics page
    is not one. What the load measured is never raised: it is in the run's document."""


class ClientClosed(FastSSEError, RuntimeError):
    """The client was closed (``close()`` / ``aclose()``) before this request ended, or a request
    was made on a closed client."""


def too_large(limit: int, events: list[Any]) -> EventTooLarge:
    return EventTooLarge(
        f"an SSE line or event data exceeded max_event_bytes={limit}; the event was dropped",
        limit=limit,
        events=events,
    )


def bad_input_type(data: object, owner: object) -> TypeError:
    """The TypeError for a non-buffer given to ``owner.feed`` (a Decoder) or ``owner.write`` (a ChatStream),
    naming the call the user made, the same on both backends (the fused streams are written to)."""
    cls = type(owner).__name__
    call = f"{cls}.write()" if cls.endswith("Stream") else f"{cls}.feed()"
    hint = " (encode text first: text.encode())" if isinstance(data, str) else ""
    return TypeError(f"{call} takes bytes, bytearray or memoryview, not {type(data).__name__}{hint}")


def event_limit(value: object, call: str) -> int | None:
    """``max_event_bytes`` checked the same way on both backends: None, or an int of at least 1.

    It raises TypeError for a non-integer (a str, a float, a bool) and InvalidRequest below 1, naming
    ``call`` (``"Decoder"``, ``"iter_events"``...).
    """
    if value is None:
        return None
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(
            f"{call}(max_event_bytes=...) takes a positive int or None, not {type(value).__name__}"
        )
    limit = operator.index(value)  # type: ignore[arg-type]
    if limit < 1:
        raise InvalidRequest(f"{call}(max_event_bytes=...) takes a positive int or None, not {limit!r}")
    return limit

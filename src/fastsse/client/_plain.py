"""Plain requests through the engine: ``Client.get`` / ``Client.post`` (and ``AsyncClient``'s,
awaited), for what is not a stream (a model list, a health page) or is read as raw bytes (the
linter's ``check --url``).

A plain request is prepared from the client's own options, as a stream is (the URL checks, the
auth rule, the client's headers, every timeout, proxy, CA bundle, client certificate and HTTP/2),
then made a GET or a POST of ``path`` under the base URL with ``api="plain"``: the engine sends
every body byte of its answer, whatever the status and Content-Type, to a ``BodyStream`` and
turns the transfer into a ``Reply`` (``finish_plain``). Nothing is retried and no fallback is
tried: one request, one answer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import orjson

from .._errors import BodyTooLarge, HTTPStatusError, InvalidRequest, TransportError
from ._request import RequestSpec, _check_header, _header_pairs

if TYPE_CHECKING:
    from ._response import Response

PLAIN: Final = "plain"  # the RequestSpec.api of a plain request
MAX_BODY_BYTES: Final = 16 << 20  # the default bound on a plain answer's body kept in memory

# The lines every streaming request carries that a plain one does not: it asks for no event
# stream, and its body (if any) is the caller's, of the caller's type.
_STREAM_LINES: Final = frozenset({"Content-Type: application/json", "Accept: text/event-stream", "Expect:"})

OnBody = Callable[[bytes], "bool | None"]


@dataclasses.dataclass(frozen=True, slots=True)
class Reply:
    """The answer to ``Client.get`` / ``Client.post``: ``status`` (the HTTP status of the last
    header block), ``headers`` (names lower-cased, a repeated header's values joined with ", ",
    at most 256 kept), ``body`` (every byte of the body, decoded if it came compressed; ``b""``
    when ``on_body`` took it) and ``url`` (the URL asked, any password replaced by ``***``)."""

    status: int
    headers: Mapping[str, str]
    body: bytes
    url: str

    def __repr__(self) -> str:  # a body may be megabytes: its size, not its bytes
        return f"Reply(status={self.status}, url={self.url!r}, {len(self.body)} body bytes)"


def body_limit(value: Any, /) -> int | None:
    """``max_body_bytes`` checked: a positive int or None. It raises TypeError for another type,
    InvalidRequest for a value below 1."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"max_body_bytes must be an int or None, not {type(value).__name__}")
    if value < 1:
        raise InvalidRequest(f"max_body_bytes must be at least 1 (or None for no bound), not {value}")
    return value


def plain_spec(
    spec: RequestSpec,
    method: str,
    body: bytes,
    headers: Mapping[str, str] | Sequence[str] | None,
    /,
) -> RequestSpec:
    """``spec`` (a streaming request prepared from a client's options with the plain request's
    ``path``) made the plain ``method`` ("GET" or "POST") with ``body``: the streaming request's
    own lines (``Accept: text/event-stream``, its ``Content-Type``) go, the key and the client's
    headers stay, and ``headers`` (checked as any request's) replace those of the same name.

    It raises TypeError for a body that is not bytes or headers of the wrong type,
    InvalidRequest for a malformed header or one fastsse sets itself.
    """
    if not isinstance(body, (bytes, bytearray, memoryview)):
        raise TypeError(f"body must be bytes, not {type(body).__name__}")
    given = [_check_header(name, value) for name, value in _header_pairs(headers)]
    named = {line.split(":", 1)[0].lower() for line in given}
    kept = [
        line
        for line in spec.headers
        if line not in _STREAM_LINES
        and (line if isinstance(line, str) else line.decode("latin-1")).split(":", 1)[0].lower() not in named
    ]
    if method == "POST" and "expect" not in named:
        kept.append("Expect:")  # no 100-continue round trip before a large body
    return dataclasses.replace(
        spec, body=bytes(body), headers=(*kept, *given), api=PLAIN, method=method, max_event_bytes=None
    )


class BodyStream:
    """The engine's stream of a plain request: every body byte, kept up to ``limit`` (past it
    BodyTooLarge stops the transfer), or handed to ``on_body`` as it arrives when the status is
    below 400 (returning False stops the transfer). ``holder`` is the transfer's ``Response``, set
    by the engine: the status and URL are read from it."""

    __slots__ = ("_body", "_limit", "_send", "_size", "_stopped", "_truncated", "holder")

    def __init__(self, on_body: OnBody | None = None, *, limit: int | None = MAX_BODY_BYTES) -> None:
        self._send = on_body
        self._limit = limit
        self._body = bytearray()
        self._size = 0  # every body byte that arrived, kept or handed over
        self._stopped = self._truncated = False
        self.holder: Any = None

    def write(self, data: bytes, /) -> int | None:
        """The engine's write callback: None to go on, 0 to stop the transfer."""
        self._size += len(data)
        holder = self.holder
        if self._send is not None and holder.status < 400:
            if self._send(data) is False:
                self._stopped = True
                return 0
            return None
        limit = self._limit
        if limit is not None and len(self._body) + len(data) > limit:
            raise BodyTooLarge(
                f"{holder.spec.display_url}: the answer's body passed max_body_bytes={limit} "
                f"(HTTP {holder.status}); none of it is returned",
                limit=limit,
                result={"bytes": self._size, "http": holder.http()},
            )
        self._body += data
        return None

    def close(self, *, truncated: bool = False) -> None:
        self._truncated = self._truncated or truncated

    def body(self) -> bytes:
        """The bytes kept (none of those ``on_body`` took)."""
        return bytes(self._body)

    def result(self) -> dict[str, Any]:
        """``{"bytes": n}``: how many body bytes arrived (a TransportError's partial result)."""
        return {"bytes": self._size}

    def timing(self) -> None:
        return None


def finish_plain(response: Response, code: int, message: str, /) -> Reply:
    """The ``Reply`` of a finished plain transfer, given curl's ``code`` (0: OK) and ``message``.

    It raises what a callback caught (BodyTooLarge, ``on_body``'s own exception) unchanged;
    TransportError if curl failed and ``on_body`` did not stop the transfer (``.result`` holds
    ``bytes``, ``http`` and the answer's ``headers`` so far); HTTPStatusError for a status of 400
    or more when the spec has ``raise_for_status``.
    """
    stream = response.stream
    assert isinstance(stream, BodyStream)
    spec = response.spec
    if response.exc is not None or (code and not response.stopped):
        try:
            response.finish(code, message)  # raises the caught exception, or the TransportError
        except TransportError as exc:
            if exc.result.get("http") is not None and not isinstance(exc, BodyTooLarge):
                exc.result["headers"] = dict(response.headers)
            raise
    stream.close()
    reply = Reply(response.status, dict(response.headers), stream.body(), spec.display_url)
    if spec.raise_for_status and reply.status >= 400:
        raise HTTPStatusError(
            f"{spec.display_url}: HTTP {reply.status}",
            status=reply.status,
            headers=dict(reply.headers),
            body=reply.body,
            error=_error_of(reply.body),
            retry_after=response.retry_after(),
            result={"http": response.http()},
        )
    return reply


def _error_of(body: bytes) -> Any:
    """An error body's ``"error"`` member, else the parsed body, else its text (HTTPStatusError's
    ``error``, as a stream's)."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body.decode("utf-8", "replace")
    return parsed["error"] if isinstance(parsed, dict) and "error" in parsed else parsed

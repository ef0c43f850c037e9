"""The answer of one transfer: ``Response(spec, stream)`` is the handle's header and write sink. It
tracks the status line and the headers that matter, feeds an event stream to ``stream.write`` and
keeps a bounded copy of any other body; ``response.finish(code, message)`` turns the transfer's curl
code into the result dict (the API's answer with ``verdict`` and ``http``), or raises
(TransportError, EventTooLarge, whatever ``on_chunk`` raised, HTTPStatusError with
``raise_for_status``).
"""

from __future__ import annotations

import email.utils
import math
import time
from typing import Any

import orjson

from .._errors import HTTPStatusError, TransportError, too_large
from ._request import RequestSpec, redact
from ._whole import as_stream

ERROR_BODY_LIMIT = 1 << 20  # bytes of an error body (or foreign body) kept for the result


_BLANK = b" \t\r\n"


_monotonic = time.monotonic


# libcurl's CURL_WRITEFUNC_PAUSE (part of its ABI): the write callback did not take the bytes;
# curl keeps them and hands them over again once the transfer is resumed.
WRITEFUNC_PAUSE = 0x10000001


# Headers kept per answer (a server sending thousands must not grow the result with them).
_MAX_HEADERS = 256


# Leading blank bytes of an untyped body kept as they came; past this they are squeezed.
_HEAD_LIMIT = 1 << 16


# What curl says about a failure it gives no message for (its code, our words).
_CURL_WORDS = {
    23: "the answer could not be written (the reader stopped)",
    28: "timed out",
    56: "the connection broke while the answer was being received",
    61: "the answer came in a content encoding curl cannot decode",
    63: "the answer was larger than the allowed size",
    100: "the answer's headers (or another part of it) passed curl's size limit (a response header of "
    "about 100 KiB or more, or headers of about 300 KiB in all)",
}


def _discard(data: bytes) -> None:
    return None


def _squeeze(blanks: bytes | bytearray) -> bytes:
    """Leading blank bytes of an untyped body, cut to what can still change how the body reads:
    blank lines dispatch nothing, so only the last line end stays (a CR, which a following LF
    completes, or an LF) and one of the spaces or tabs after it (a line that starts with one is
    ignored by the SSE rules however many follow). At most two bytes, so a body of megabytes of
    blanks costs linear time and no memory."""
    end = max(blanks.rfind(b"\n"), blanks.rfind(b"\r"))
    if end < 0:
        return bytes(blanks[:1])
    return bytes(blanks[end : end + 2])


def _retry_after(value: str) -> float | None:
    """Seconds to wait from a Retry-After value (delta-seconds or an HTTP date), None if neither."""
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - time.time())


class Response:
    """The header and write callbacks of one transfer, and the classification of its outcome.

    ``status`` and the headers are those of the last header block (a 100 Continue or a proxy's
    CONNECT answer comes first). ``mode`` says where the body goes: ``"sse"`` to ``stream.write``,
    ``"json"`` (a non-streaming answer) or ``"body"`` (anything else) into a bounded buffer.
    ``last_activity`` (``time.monotonic()``) moves with every header line and body write, for an idle
    check. An exception in a callback is kept in ``exc`` and the transfer is stopped (``stopped``).
    """

    def __init__(self, spec: RequestSpec, stream: Any) -> None:
        self.spec = spec
        self.stream = stream
        self.status = 0
        self.content_type = ""
        # the last header block's headers, names lower-cased, repeated ones joined with ", "
        self.headers: dict[str, str] = {}
        self.mode = ""
        self.body = bytearray()
        # leading blank bytes of an untyped body, held until its first real byte; past _HEAD_LIMIT
        # cut to the two bytes that can still matter (``_squeeze``)
        self.head = bytearray()
        self.stopped = False
        self.fed = False  # a byte of an event stream reached the stream (so maybe the caller)
        self.exc: BaseException | None = None
        self.last_activity = time.monotonic()
        self.hold_until: Any = None  # a consumer's future: reading waits until it is done
        self.paused = False  # the last write was refused with WRITEFUNC_PAUSE; curl holds the bytes
        self.on_release: Any = None  # set by the engine: resume a paused transfer
        # The compiled driver's ``Curl.direct``, set by the engine: once the answer is an event
        # stream, the reads go to the stream from C (``directed``) until a hold turns it off.
        self.direct: Any = None
        self.directed = False

    def hold(self, until: Any, /) -> None:
        """Stop taking bytes (from the next write on) until the future ``until`` is done.

        Curl then stops reading the socket, so the server meets TCP backpressure; the bytes of the
        refused write are kept by curl and handed over again when ``on_release`` resumes it.
        """
        if until.done() or self.hold_until is until:
            return
        self.hold_until = until
        if self.directed:  # the next read comes here, to be refused (WRITEFUNC_PAUSE)
            self.direct(None)
            self.directed = False
        until.add_done_callback(self._release)

    def _release(self, until: Any = None) -> None:
        if until is not None and until is not self.hold_until:
            return
        self.hold_until = None
        if self.paused and self.on_release is not None:
            self.on_release()

    def header(self, line: bytes) -> int | None:
        try:
            self.last_activity = _monotonic()
            if line[:5] == b"HTTP/":
                parts = line.split(None, 2)
                self.status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
                self.content_type = ""
                self.headers = {}
                return None
            name, colon, value = line.partition(b":")
            return self.field(name, value) if colon else None
        except BaseException as exc:  # e.g. a KeyboardInterrupt: pycurl would only print it
            self.exc = exc
            self.stopped = True
            return 0

    def field(self, name: bytes, value: bytes) -> int | None:
        """``header(name + b": " + value)`` for a parser that splits the line itself (the loop's
        llhttp), and the second half of ``header``: the line's name and value recorded."""
        try:
            self.last_activity = _monotonic()
            key = name.strip().lower().decode("latin-1")
            text = value.strip().decode("latin-1")
            headers = self.headers
            if len(headers) < _MAX_HEADERS:
                held = headers.get(key)
                headers[key] = text if held is None else f"{held}, {text}"
            if key == "content-type":
                self.content_type = text.lower()
            return None
        except BaseException as exc:  # as header's
            self.exc = exc
            self.stopped = True
            return 0

    def _choose_mode(self, first: int) -> None:
        if self.spec.api == "events":
            # An EventSource reads a 200 that says it is an event stream, and nothing else (WHATWG
            # "fail the connection"): no sniffing, no JSON answer.
            self.mode = "sse" if self._event_stream() else "body"
            return
        if self.status >= 300 or self.status == 204:
            self.mode = "body"
        elif self.content_type.startswith("text/event-stream"):
            self.mode = "sse"
        elif self.content_type.startswith("application/json"):
            self.mode = "json"
        elif self.content_type:
            self.mode = "body"
        else:
            # No Content-Type (some servers omit it): the body's first byte tells. An event stream
            # never starts with "<" (an HTML error page) or "{" (a JSON answer).
            self.mode = "body" if first == 0x3C else "json" if first == 0x7B else "sse"

    def _event_stream(self) -> bool:
        """Whether the answer is one an EventSource reads: a 200 of MIME type text/event-stream."""
        return self.status == 200 and self.content_type.split(";", 1)[0].strip() == "text/event-stream"

    def write(self, data: bytes) -> int | None:
        self.last_activity = _monotonic()
        if self.mode == "sse" and self.hold_until is None:  # the stream's reads, once typed
            self.fed = True
            try:
                if self.stream.write(data) == 0:
                    self.stopped = True
                    return 0
                # not while a hold taken in this read stands: the next read must come here, refused
                if self.direct is not None and not self.directed and self.hold_until is None:
                    self.directed = self.direct(self.stream, self)
                    if not self.directed:
                        self.direct = None  # a stream C cannot feed (a byte format): do not ask again
                return None
            except BaseException as exc:  # re-raised unchanged by finish() once curl has stopped
                self.exc = exc
                self.stopped = True
                return 0
        hold = self.hold_until
        if hold is not None:
            if not hold.done():
                self.paused = True
                return WRITEFUNC_PAUSE
            self.hold_until = None
        try:
            if not self.mode:
                start = len(data) - len(data.lstrip(_BLANK))
                if start == len(data) and not self.content_type and 200 <= self.status < 300:
                    self.head += data
                    if len(self.head) > _HEAD_LIMIT:
                        self.head = bytearray(_squeeze(self.head))
                    return None
                self._choose_mode(data[start] if start < len(data) else 0)
                if self.head:
                    data, self.head = bytes(self.head) + data, bytearray()
            if self.mode == "sse":
                return self.write(data)  # the hold is over and the body typed: the path above
            room = ERROR_BODY_LIMIT - len(self.body)
            if self.mode == "json":
                # A whole completion (a server that ignored "stream"): kept, up to the cap if set.
                limit = self.spec.max_event_bytes
                if limit is not None and len(self.body) + len(data) > limit:
                    raise too_large(limit, [])
                room = len(data)
            self.body += data[: max(room, 0)]
            return None
        except BaseException as exc:  # as above
            self.exc = exc
            self.stopped = True
            return 0

    def finish(self, code: int = 0, message: str = "") -> dict[str, Any]:
        """The result of the finished transfer, given curl's result ``code`` (0: OK) and message.

        Whatever the answer, the result has one shape: the API's whole answer folded by the
        stream, with ``"verdict"`` and ``"http"`` (``http()``: the status, ``retry_after``,
        ``location``, ``upstream``, and ``error``, which is not None exactly when the answer was
        no stream: an HTTP error, a redirect, a 204, a body that is neither a stream nor JSON; its
        verdict says why). A JSON answer (a server that ignored ``stream``) is folded as the
        one-event stream it stands for.

        It raises whatever a callback caught (on_chunk's exception, EventTooLarge) unchanged;
        TransportError (``.code``, ``.result`` the partial fold) if curl failed and the transfer was
        not stopped on purpose (curl's 23 after an ``on_chunk`` that returned False is no failure);
        HTTPStatusError for an answer that is no stream when the spec has ``raise_for_status``.
        """
        if self.exc is not None:
            exc, self.exc = self.exc, None
            raise exc
        if code and not self.stopped:
            self.stream.close(truncated=True)  # a broken transfer is never a complete answer
            text = (
                message.replace(self.spec.url, self.spec.display_url)
                if message
                else _CURL_WORDS.get(code, "the transfer failed")
            )
            partial = dict(self.stream.result())
            partial["http"] = self.http()
            raise TransportError(
                f"{self.spec.display_url}: {text} (curl error {code})", result=partial, code=code
            )
        status = self.status
        if 300 <= status < 400 or status == 204:
            return self._no_stream(status)
        if self.mode == "body" or status >= 400:
            return self._error(status, bytes(self.body))
        if self.spec.api == "events" and not self._event_stream():  # an empty body of another type
            return self._error(status, b"")
        if not self.mode and self.head:  # an untyped body of blanks only: an empty stream
            self.stream.write(bytes(self.head))
        if self.mode == "json":
            return self._json_answer(bytes(self.body))
        self.stream.close()
        result = dict(self.stream.result())
        result["http"] = self.http()
        return result

    def http(self, error: Any = None) -> dict[str, Any]:
        """``result["http"]``: the transfer's facts beside the API's answer. ``status`` (0 before a
        status line), ``retry_after`` (``retry_after()``), ``location`` (the ``Location`` header,
        or None), ``upstream`` (the base URL that answered, set by the engine) and ``error``: the
        error of an answer that was no stream, None for a stream."""
        return {
            "status": self.status,
            "retry_after": self.retry_after(),
            "location": self.headers.get("location"),
            "upstream": None,
            "error": error,
        }

    def retry_after(self) -> float | None:
        """Seconds the server asked to wait: ``retry-after-ms``, else ``Retry-After`` (seconds or
        an HTTP date), None if neither is there or readable."""
        headers = self.headers
        value = headers.get("retry-after-ms")
        if value is not None:
            seconds = _retry_after_ms(value)
            if seconds is not None:
                return seconds
        value = headers.get("retry-after")
        return None if value is None else _retry_after(value)

    def _not_a_stream(self, status: int, error: Any, why: str, body: bytes = b"") -> dict[str, Any]:
        """The result of an answer that is no stream: the stream's (empty) fold, with ``http``
        holding its error (``why`` when the body named none) and a verdict that says ``why``; or
        HTTPStatusError."""
        result = dict(self.stream.result())
        http = result["http"] = self.http(error if error is not None else why)
        retry_after = http["retry_after"]
        verdict = result.get("verdict")
        if isinstance(verdict, dict):
            verdict["complete"] = False
            verdict["error"] = True
            verdict["why"] = why
        if self.spec.raise_for_status:
            raise HTTPStatusError(
                f"{self.spec.display_url}: {why}",
                status=status,
                headers=dict(self.headers),
                body=body,
                error=http["error"],
                retry_after=retry_after,
                result=result,
            )
        return result

    def _no_stream(self, status: int) -> dict[str, Any]:
        if status == 204:
            message = f"{self.spec.display_url} answered 204 No Content: no stream"
            return self._not_a_stream(status, message, "HTTP 204: no content")
        location = self.headers.get("location", "")
        where = redact(location) if location else "nowhere (no Location)"
        message = (
            f"{self.spec.display_url} answered {status}, a redirect to {where}, which is not followed: "
            "base_url is probably wrong (e.g. http:// where https:// is served)"
        )
        return self._not_a_stream(status, message, f"HTTP {status}: a redirect to {where}")

    def _error(self, status: int, body: bytes) -> dict[str, Any]:
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            error: Any = body.decode("utf-8", "replace")
        else:
            error = parsed["error"] if isinstance(parsed, dict) and "error" in parsed else parsed
        if self.spec.api == "events":
            return self._not_a_stream(status, error, _events_why(status, self.content_type, error), body)
        return self._not_a_stream(status, error, _status_why(status, error, self.spec.display_url), body)

    def _json_answer(self, body: bytes) -> dict[str, Any]:
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            parsed = None
        if not isinstance(parsed, dict):
            text = body.decode("utf-8", "replace")
            return self._not_a_stream(self.status, text, f"HTTP {self.status}: the answer is not JSON", body)
        if "error" in parsed:  # an error object with a 200 status: say which status it came with
            error = parsed["error"]
            return self._not_a_stream(self.status, error, _status_why(self.status, error, ""), body)
        # A whole answer (a server that ignored "stream"): the stream it stands for, folded, so the
        # result has the streamed shape (and on_chunk sees its content, a relay sends it on).
        self.stream.write(as_stream(self.spec.api, parsed))
        self.stream.close()
        return dict(self.stream.result())


def _status_why(status: int, error: Any, url: str) -> str:
    """The verdict's ``why`` for an HTTP error: the status, its reason, the server's words."""
    words = error.get("message") if isinstance(error, dict) else error if isinstance(error, str) else None
    kind = (error.get("type") or error.get("code")) if isinstance(error, dict) else None
    out = f"HTTP {status}"
    if isinstance(kind, str) and kind:
        out += f" {kind}"
    if isinstance(words, str) and words.strip():
        out += f": {words.strip()[:200]}"
    if status == 404 and url:
        out += f" (tried {url}; a base_url usually ends in /v1)"
    return out


def _events_why(status: int, content_type: str, error: Any) -> str:
    """The verdict's ``why`` for an event stream's GET answered with no event stream."""
    if status >= 300:
        return _status_why(status, error, "")  # no base_url hint: an EventSource's URL is the whole URL
    if status != 200:
        return f"HTTP {status}: an event stream comes with a 200"
    return f"HTTP 200 with Content-Type {content_type or '(none)'!r}: not text/event-stream"


def _retry_after_ms(value: str) -> float | None:
    try:
        ms = float(value.strip())
    except ValueError:
        return None
    return ms / 1000 if math.isfinite(ms) and ms >= 0 else None

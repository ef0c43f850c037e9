"""Transports: ``create_stream`` over pycurl, and event / chunk iterators over any byte iterator.

The scanning, parsing and folding all happen inside ``ChatStream.write`` (compiled for the cython
backend); this module only moves bytes and maps transport outcomes to results and errors.
"""

from __future__ import annotations

import math
import os
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import orjson

from .._backend import ChatStream, Decoder, Event
from .._errors import EventTooLarge, TransportError, too_large

OnChunk = Callable[[dict[str, Any]], "bool | None"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_ERROR_BODY_LIMIT = 1 << 20  # bytes of an HTTP error body kept for the result


def _import_pycurl() -> Any:
    try:
        import pycurl
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "create_stream needs pycurl: pip install 'fastsse-cython[curl]' (or pip install pycurl)"
        ) from exc
    return pycurl


_BLANK = b" \t\r\n"


class _Transfer:
    """Per-request state for the curl callbacks: status, headers, the body sink, a caught exception."""

    def __init__(self, stream: Any, max_event_bytes: int | None = None) -> None:
        self.stream = stream
        self.limit = max_event_bytes
        self.status = 0
        self.content_type = ""
        self.mode = ""  # "sse", "json" (a non-streaming answer) or "body" (an error or foreign body)
        self.body = bytearray()
        self.head = b""  # leading blank bytes of an untyped body, held until its first real byte
        self.stopped = False  # our write callback asked curl to stop
        self.exc: BaseException | None = None

    def header(self, line: bytes) -> None:
        if line[:5] == b"HTTP/":
            # a new header block (e.g. after 100 Continue); pycurl has no getinfo() during perform()
            self.content_type = ""
            parts = line.split(None, 2)
            self.status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
        elif line[:13].lower() == b"content-type:":
            self.content_type = line[13:].strip().decode("latin-1").lower()

    def _choose_mode(self, first: int) -> None:
        if self.status >= 400:
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

    def write(self, data: bytes) -> int | None:
        try:
            if not self.mode:
                start = len(data) - len(data.lstrip(_BLANK))
                if start == len(data) and not self.content_type and self.status < 400:
                    self.head += data
                    return None
                self._choose_mode(data[start] if start < len(data) else 0)
                if self.head:
                    data, self.head = self.head + data, b""
            if self.mode == "sse":
                if self.stream.write(data) == 0:
                    self.stopped = True
                    return 0
                return None
            room = _ERROR_BODY_LIMIT - len(self.body)
            if self.mode == "json":
                # A whole completion (a server that ignored "stream"): kept, up to the cap if set.
                if self.limit is not None and len(self.body) + len(data) > self.limit:
                    raise too_large(self.limit, [])
                room = len(data)
            self.body += data[: max(room, 0)]
            return None
        except BaseException as exc:  # re-raised unchanged by create_stream once curl has stopped
            self.exc = exc
            self.stopped = True
            return 0


def _http_error(status: int, body: bytes) -> dict[str, Any]:
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {"error": body.decode("utf-8", "replace"), "status": status}
    if isinstance(parsed, dict) and "error" in parsed:
        return {"error": parsed["error"], "status": status}
    return {"error": parsed, "status": status}


def _json_answer(body: bytes) -> dict[str, Any]:
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict):
        return parsed
    return {"error": body.decode("utf-8", "replace"), "status": 200}


def _setup(
    handle: Any,
    input: Mapping[str, Any],
    stream: Any,
    *,
    base_url: str | None,
    api_key: str | None,
    path: str,
    headers: Mapping[str, str] | Sequence[str] | None,
    timeout: float | None,
    connect_timeout: float | None,
    idle_timeout: float | None,
    max_event_bytes: int | None,
) -> tuple[_Transfer, str]:
    """Set every option one streaming request needs on ``handle``; return its transfer and URL."""
    pycurl = _import_pycurl()
    base = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
    body = orjson.dumps({**input, "stream": True})
    url = base.rstrip("/") + "/" + path.lstrip("/")

    header_lines = ["Content-Type: application/json", "Accept: text/event-stream", "Expect:"]
    if key:
        header_lines.append(f"Authorization: Bearer {key}")
    if isinstance(headers, Mapping):
        header_lines += [f"{name}: {value}" for name, value in headers.items()]
    elif headers:
        header_lines += list(headers)

    transfer = _Transfer(stream, max_event_bytes)
    handle.setopt(pycurl.URL, url)
    handle.setopt(pycurl.POST, 1)
    handle.setopt(pycurl.POSTFIELDS, body)
    handle.setopt(pycurl.POSTFIELDSIZE, len(body))
    handle.setopt(pycurl.HTTPHEADER, header_lines)
    handle.setopt(pycurl.WRITEFUNCTION, transfer.write)
    handle.setopt(pycurl.HEADERFUNCTION, transfer.header)
    handle.setopt(pycurl.NOSIGNAL, 1)
    handle.setopt(pycurl.TIMEOUT_MS, int(timeout * 1000) if timeout else 0)
    handle.setopt(pycurl.CONNECTTIMEOUT_MS, int(connect_timeout * 1000) if connect_timeout else 0)
    handle.setopt(pycurl.LOW_SPEED_LIMIT, 1 if idle_timeout else 0)
    handle.setopt(pycurl.LOW_SPEED_TIME, max(1, math.ceil(idle_timeout)) if idle_timeout else 0)
    return transfer, url


def _unset(handle: Any) -> None:
    """Drop what ``_setup`` put on a caller's own handle that must not outlive the request."""
    pycurl = _import_pycurl()
    handle.setopt(pycurl.HTTPHEADER, [])
    handle.unsetopt(pycurl.WRITEFUNCTION)
    handle.unsetopt(pycurl.HEADERFUNCTION)


def _outcome(
    handle: Any, stream: Any, transfer: _Transfer, url: str, code: int, message: str, pycurl: Any
) -> dict[str, Any]:
    """The result of a finished transfer (curl's ``code``, 0 for success), or raise its error."""
    if code and transfer.exc is None and not transfer.stopped:
        stream.close()
        raise TransportError(f"{url}: {message} (curl error {code})", result=stream.result(), code=code)
    if transfer.exc is not None:  # raised in a write callback, re-raised once curl has stopped
        raise transfer.exc
    status = transfer.status or int(handle.getinfo(pycurl.RESPONSE_CODE))
    if transfer.mode == "body" or status >= 400:
        return _http_error(status, bytes(transfer.body))
    if not transfer.mode and transfer.head:  # an untyped body of blanks only: an empty stream
        stream.write(transfer.head)
    if transfer.mode == "json":
        return _json_answer(bytes(transfer.body))
    stream.close()
    result: dict[str, Any] = stream.result()
    return result


def create_stream(
    input: Mapping[str, Any],
    on_chunk: OnChunk | None = None,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    path: str = "/chat/completions",
    headers: Mapping[str, str] | Sequence[str] | None = None,
    timeout: float | None = None,
    connect_timeout: float | None = None,
    idle_timeout: float | None = None,
    curl: Any = None,
    max_event_bytes: int | None = None,
) -> dict[str, Any]:
    """POST a chat request with ``"stream": true`` and return the folded ``chat.completion``.

    ``on_chunk(chunk)`` is called on this thread for every parsed chunk as it arrives (never for
    ``[DONE]``); returning ``False`` cancels the transfer and the partial result is returned without
    an error. ``base_url`` and ``api_key`` default to ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` (then
    the OpenAI endpoint), like the openai SDK. ``timeout`` bounds the whole transfer and
    ``connect_timeout`` the connection, in seconds; ``idle_timeout`` gives up on a server that
    goes silent, which suits long answers that a total ``timeout`` would cut: curl's low-speed
    check (under one byte a second for that many whole seconds; ``: ping`` keep-alives count),
    and since curl averages the speed over its last five seconds, silence after a burst is noticed
    up to about five seconds late. Pass a ``pycurl.Curl`` as ``curl`` to reuse its
    connection across calls (only the options this call needs are set on it; it is left open).
    Ctrl-C stops the call within about 0.1 s, even while the server is silent.

    It is one request on a ``fastsse.Client`` of its own (made and closed by the call, without the
    timing record); use a ``Client`` or ``AsyncClient`` to run many, or to keep connections open.

    The result carries ``"verdict"`` (whether ``[DONE]``, a finish reason and usage arrived). An HTTP
    status >= 400 returns ``{"error": <the server's error object or body>, "status": code}``; so does
    a 200 answer that is neither an event stream nor JSON (a body without a Content-Type is judged
    by its first byte: ``<`` is a page, ``{`` a JSON answer, anything else an event stream). A 200
    JSON answer (a server that ignored ``stream``) is returned as it came; with ``max_event_bytes``
    it may be at most that large (EventTooLarge otherwise).

    It raises TransportError (with ``.result``, the partial aggregate) if the connection is refused,
    times out or breaks mid-stream; whatever ``on_chunk`` raises, unchanged, after the transfer is
    stopped; EventTooLarge if an event passes ``max_event_bytes``; ImportError without pycurl.
    """
    from .engine import Client

    if curl is not None:
        _keep_connections(curl)
    with Client(max_connections=1, timing=False) as client:
        return client.create_stream(
            input,
            on_chunk,
            base_url=base_url,
            api_key=api_key,
            path=path,
            headers=headers,
            timeout=timeout,
            connect_timeout=connect_timeout,
            idle_timeout=idle_timeout,
            max_event_bytes=max_event_bytes,
            curl=curl,
        )


def _keep_connections(handle: Any) -> None:
    # A transfer on a multi handle leaves its connection in the multi's cache, which dies with the
    # call's Client. A share holding the connection cache, kept on the caller's handle, keeps it
    # open for the handle's next call, as curl_easy_perform did.
    pycurl = _import_pycurl()
    if getattr(handle, "_fastsse_share", None) is None:
        share = pycurl.CurlShare()
        share.setopt(pycurl.SH_SHARE, pycurl.LOCK_DATA_CONNECT)
        handle.setopt(pycurl.SHARE, share)
        handle._fastsse_share = share


def iter_events(source: Iterable[bytes], /, *, max_event_bytes: int | None = None) -> Iterator[Event]:
    """Yield the events of a stream given as an iterable of byte chunks (``httpx``'s
    ``response.iter_bytes()``, ``requests``' ``response.iter_content(None)``, a file opened ``rb``).

    It raises EventTooLarge after yielding every event completed before and beside the oversized one.
    """
    decoder = Decoder(max_event_bytes=max_event_bytes)
    for chunk in source:
        try:
            events = decoder.feed(chunk)
        except EventTooLarge as exc:
            yield from exc.events
            raise
        yield from events
    decoder.close()


async def aiter_events(
    source: AsyncIterable[bytes], /, *, max_event_bytes: int | None = None
) -> AsyncIterator[Event]:
    """The async form of ``iter_events`` (``httpx``'s ``aiter_bytes()``, aiohttp's ``content.iter_any()``)."""
    decoder = Decoder(max_event_bytes=max_event_bytes)
    async for chunk in source:
        try:
            events = decoder.feed(chunk)
        except EventTooLarge as exc:
            for event in exc.events:
                yield event
            raise
        for event in events:
            yield event
    decoder.close()


class ChunkIterator:
    """Iterates the parsed chat chunks of a byte stream; ``result()`` is the folded completion.

    Made by ``iter_chunks`` / ``aiter_chunks``. Iteration ends at the end of the input, after an error
    payload (which is yielded first), or when you stop iterating; ``result()`` may be called at any
    time and gives the aggregate of every chunk yielded so far, with its verdict. An event past
    ``max_event_bytes`` stops the stream: the chunks before it are yielded, then EventTooLarge is raised.
    """

    def __init__(self, source: Any, *, max_event_bytes: int | None = None) -> None:
        self._source = source
        self._pending: deque[dict[str, Any]] = deque()
        self._stream = ChatStream(self._pending.append, max_event_bytes=max_event_bytes)
        self._error: EventTooLarge | None = None

    def _drain(self) -> Iterator[dict[str, Any]]:
        while self._pending:
            yield self._pending.popleft()

    def _write(self, data: bytes) -> bool:
        try:
            return self._stream.write(data) == 0
        except EventTooLarge as exc:
            self._error = exc  # raised once the chunks folded before it have been yielded
            return True

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for data in self._source:
            stop = self._write(data)
            yield from self._drain()
            if stop:
                break
        else:
            self._stream.close()
        self._raise_if_failed()

    async def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        async for data in self._source:
            stop = self._write(data)
            for chunk in self._drain():
                yield chunk
            if stop:
                break
        else:
            self._stream.close()
        self._raise_if_failed()

    def _raise_if_failed(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise error

    def result(self) -> dict[str, Any]:
        return self._stream.result()


def iter_chunks(source: Iterable[bytes], /, *, max_event_bytes: int | None = None) -> ChunkIterator:
    """Parsed chat chunks of a byte iterable, in order; ``.result()`` on the returned iterator folds them."""
    return ChunkIterator(source, max_event_bytes=max_event_bytes)


def aiter_chunks(source: AsyncIterable[bytes], /, *, max_event_bytes: int | None = None) -> ChunkIterator:
    """The async form of ``iter_chunks``: ``async for chunk in aiter_chunks(response.aiter_bytes())``."""
    return ChunkIterator(source, max_event_bytes=max_event_bytes)

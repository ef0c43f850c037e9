"""Transports: ``create_stream`` over pycurl, and event / chunk iterators over any byte iterator.

The scanning, parsing and folding all happen inside ``ChatStream.write`` (compiled for the cython
backend); this module only moves bytes and maps transport outcomes to results and errors.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from .._backend import ChatStream, Decoder, Event
from .._errors import EventTooLarge, event_limit

OnChunk = Callable[[dict[str, Any]], "bool | None"]


def create_stream(
    input: Mapping[str, Any],
    on_chunk: OnChunk | None = None,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    api: str = "chat",
    path: str | None = None,
    headers: Mapping[str, str] | Sequence[str] | None = None,
    timeout: float | None = None,
    connect_timeout: float | None = None,
    idle_timeout: float | None = None,
    proxy: str | None = None,
    ca_bundle: str | None = None,
    client_cert: str | tuple[str, str] | None = None,
    curl: Any = None,
    max_event_bytes: int | None = None,
) -> dict[str, Any]:
    """POST a chat request with ``"stream": true`` and return the folded ``chat.completion``.

    ``api="responses"`` or ``api="messages"`` speaks the OpenAI Responses or the Anthropic Messages
    API instead: the default ``path`` becomes ``/responses`` or ``/messages``, Messages sends the key
    as ``x-api-key`` with ``anthropic-version`` (``api_key`` defaulting to ``ANTHROPIC_API_KEY``,
    ``base_url`` to ``https://api.anthropic.com/v1``), ``on_chunk`` receives each parsed event, and
    the result is the folded response or message (``ResponsesStream`` / ``MessagesStream``) with its
    ``FormatVerdict`` as ``"verdict"``. It raises ValueError for another ``api``.

    ``on_chunk(chunk)`` is called on this thread for every parsed chunk as it arrives (never for
    ``[DONE]``); returning ``False`` cancels the transfer and the partial result is returned without
    an error. ``base_url`` and ``api_key`` default to ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` (then
    the OpenAI endpoint), like the openai SDK; only http:// and https:// URLs are accepted, and
    redirects are not followed. ``api_key`` is sent as ``Authorization: Bearer``; an
    ``Authorization`` in ``headers`` replaces the environment's key (giving it and ``api_key=`` both
    is an error). ``headers`` is a mapping or a list of ``"Name: value"`` lines.

    ``timeout`` bounds the whole transfer and ``connect_timeout`` the connection, in seconds (None:
    no bound; fractions of a millisecond round up). ``idle_timeout`` gives up once that many seconds
    pass without a byte from the server (``: ping`` keep-alives count), which suits long answers a
    total ``timeout`` would cut; it is checked every 0.1 s. The wait is interruptible: Ctrl-C
    (KeyboardInterrupt) is acted on within about 0.1 s even while the server is silent.

    ``proxy`` is a proxy URL, or ``""`` for none; with None, curl follows ``http_proxy``,
    ``https_proxy``, ``ALL_PROXY`` and ``NO_PROXY`` from the environment (the key travels to an
    ``https://`` URL through the proxy's tunnel, but to an ``http://`` URL in clear through an http
    proxy). ``ca_bundle`` is a PEM file of CAs to trust, ``client_cert`` a PEM certificate file (or a
    ``(cert, key)`` pair of files). ``Accept-Encoding: identity`` is sent, and a body compressed
    anyway (gzip, deflate, br) is decoded. Pass a ``pycurl.Curl`` as ``curl`` to reuse its
    connection across calls: what this call set on it (headers with the key, body, callbacks, proxy
    and CA file) is cleared afterwards (back to libcurl's defaults, also for the timeouts, protocols
    and headers this call set), and the options it does not set are kept (``client_cert`` is
    refused with it: pycurl cannot unset a certificate, so set your own on your handle).

    The call is one request on a ``fastsse.Client`` of its own, made and closed by it (without the
    timing record): use a ``Client`` or ``AsyncClient`` to run many at once or keep connections open.

    The result carries ``"verdict"`` (whether ``[DONE]``, a finish reason and usage arrived). Answers
    that are no stream come back as ``{"error": ..., "status": code}``: an HTTP status >= 400 (the
    server's error object or body), a 3xx (with ``"location"``: redirects are not followed, so a
    wrong ``base_url`` shows here), a 204, a 200 body that is neither an event stream nor JSON (one
    without a Content-Type is judged by its first byte: ``<`` is a page, ``{`` a JSON answer), a 200
    JSON body holding ``"error"``. A ``Retry-After`` header adds ``"retry_after"`` (seconds). A 200
    JSON answer (a server that ignored ``stream``) is returned as it came; with ``max_event_bytes``
    it may be at most that large (EventTooLarge otherwise).

    It raises ValueError before sending anything if the URL is not http(s), a header name or value
    (``api_key`` included) holds CR, LF or NUL or is malformed, a timeout is ``<= 0``, or
    ``client_cert`` comes with ``curl``;
    TransportError (with ``.result``, the partial aggregate, and ``.code``, curl's error) if the
    connection is refused, times out, goes idle, breaks mid-stream or comes with a content encoding
    curl cannot decode (code 61); whatever ``on_chunk`` raises, unchanged, after the transfer is
    stopped; EventTooLarge if an event passes ``max_event_bytes``; ImportError without pycurl.
    """
    from .engine import Client

    event_limit(max_event_bytes, "create_stream")

    with Client(max_connections=1, timing=False) as client:
        return client.create_stream(
            input,
            on_chunk,
            api=api,
            base_url=base_url,
            api_key=api_key,
            path=path,
            headers=headers,
            timeout=timeout,
            connect_timeout=connect_timeout,
            idle_timeout=idle_timeout,
            proxy=proxy,
            ca_bundle=ca_bundle,
            client_cert=client_cert,
            max_event_bytes=max_event_bytes,
            curl=curl,
        )


def curl_failure(url: str, err: BaseException) -> tuple[str, int | None]:
    """The one wording of a failed transfer, ``URL: curl's message (curl error N)``, and curl's code."""
    args: tuple[Any, ...] = err.args
    code = args[0] if args and isinstance(args[0], int) else None
    message = args[1] if len(args) > 1 else str(err)
    return (f"{url}: {message} (curl error {code})" if code is not None else f"{url}: {message}"), code


def _check_source(source: object, call: str, *, want_async: bool) -> None:
    """A TypeError at the call for a source the iterator cannot read, saying which call fits it."""
    kind = type(source).__name__
    if isinstance(source, (bytes, bytearray, memoryview, str)):
        raise TypeError(
            f"{call}() takes an iterable of byte chunks (such as response.iter_bytes()), not {kind}; "
            f"for one piece already in memory pass [data]"
        )
    is_async, is_sync = hasattr(source, "__aiter__"), hasattr(source, "__iter__")
    other = call[1:] if want_async else "a" + call
    if want_async and not is_async:
        hint = f"; for a sync one ({kind}) use {other}()" if is_sync else f", not {kind}"
        raise TypeError(f"{call}() takes an async iterable of byte chunks{hint}")
    if not want_async and not is_sync:
        hint = f"; for an async one ({kind}) use {other}()" if is_async else f", not {kind}"
        raise TypeError(f"{call}() takes an iterable of byte chunks{hint}")


def _bad_chunk(chunk: object, call: str) -> TypeError:
    hint = (
        " (iterate the response's bytes, e.g. iter_bytes(), not its text)" if isinstance(chunk, str) else ""
    )
    return TypeError(
        f"{call}() needs chunks of bytes, bytearray or memoryview; the source gave {type(chunk).__name__}{hint}"
    )


def iter_events(source: Iterable[bytes], /, *, max_event_bytes: int | None = None) -> Iterator[Event]:
    """Yield the events of a stream given as an iterable of byte chunks (``httpx``'s
    ``response.iter_bytes()``, ``requests``' ``response.iter_content(None)``, a file opened ``rb``).

    It raises TypeError at the call if ``source`` is bytes or str (not an iterable of chunks) or an
    async iterable (use ``aiter_events``), and while iterating for a chunk that is not bytes;
    EventTooLarge after yielding every event completed before and beside the oversized one.
    """
    _check_source(source, "iter_events", want_async=False)
    return _iter_events(source, event_limit(max_event_bytes, "iter_events"))


def _iter_events(source: Iterable[bytes], limit: int | None) -> Iterator[Event]:
    decoder = Decoder(max_event_bytes=limit)
    for chunk in source:
        try:
            events = decoder.feed(chunk)
        except EventTooLarge as exc:
            yield from exc.events
            raise
        except TypeError:
            raise _bad_chunk(chunk, "iter_events") from None
        yield from events
    decoder.close()


def aiter_events(
    source: AsyncIterable[bytes], /, *, max_event_bytes: int | None = None
) -> AsyncIterator[Event]:
    """The async form of ``iter_events`` (``httpx``'s ``aiter_bytes()``, aiohttp's ``content.iter_any()``):
    ``async for event in aiter_events(response.aiter_bytes())``.

    It raises TypeError at the call if ``source`` is not an async iterable (a sync one: use
    ``iter_events``), and otherwise what ``iter_events`` raises.
    """
    _check_source(source, "aiter_events", want_async=True)
    return _aiter_events(source, event_limit(max_event_bytes, "aiter_events"))


async def _aiter_events(source: AsyncIterable[bytes], limit: int | None) -> AsyncIterator[Event]:
    decoder = Decoder(max_event_bytes=limit)
    async for chunk in source:
        try:
            events = decoder.feed(chunk)
        except EventTooLarge as exc:
            for event in exc.events:
                yield event
            raise
        except TypeError:
            raise _bad_chunk(chunk, "aiter_events") from None
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

    def __init__(self, source: Any, *, max_event_bytes: int | None = None, call: str = "iter_chunks") -> None:
        _check_source(source, call, want_async=call.startswith("a"))
        self._call = call
        self._source = source
        self._pending: deque[dict[str, Any]] = deque()
        self._stream = ChatStream(self._pending.append, max_event_bytes=event_limit(max_event_bytes, call))
        self._error: EventTooLarge | None = None

    def _drain(self) -> Iterator[dict[str, Any]]:
        while self._pending:
            yield self._pending.popleft()

    def _write(self, data: bytes) -> bool:
        try:
            return self._stream.write(data) == 0
        except TypeError:
            raise _bad_chunk(data, self._call) from None
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
    """Parsed chat chunks of a byte iterable, in order; ``.result()`` on the returned iterator folds them.

    It raises TypeError as ``iter_events`` does (an async source: use ``aiter_chunks``).
    """
    return ChunkIterator(source, max_event_bytes=max_event_bytes)


def aiter_chunks(source: AsyncIterable[bytes], /, *, max_event_bytes: int | None = None) -> ChunkIterator:
    """The async form of ``iter_chunks``: ``async for chunk in aiter_chunks(response.aiter_bytes())``.

    It raises TypeError as ``aiter_events`` does (a sync source: use ``iter_chunks``).
    """
    return ChunkIterator(source, max_event_bytes=max_event_bytes, call="aiter_chunks")

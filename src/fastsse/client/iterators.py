"""Event and chunk iterators over any byte iterator (httpx, requests, aiohttp, a file): the same
scanner and fold as the engine, with no transport of their own."""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from .. import _backend
from .._errors import EventTooLarge, event_limit

if TYPE_CHECKING:
    from ..chat import ChatStream
    from ..sse import Event

__all__ = ["ChunkIterator", "aiter_chunks", "aiter_events", "iter_chunks", "iter_events"]


# The SDKs' stream objects iterate parsed events, not bytes; where their raw bytes are.
_SDK_CALLS = {"openai": "client.chat.completions", "anthropic": "client.messages"}


def _check_source(source: object, call: str, *, want_async: bool) -> None:
    """A TypeError at the call for a source the iterator cannot read, saying which call fits it."""
    kind = type(source).__name__
    sdk = type(source).__module__.partition(".")[0]
    if sdk in _SDK_CALLS and "Stream" in kind:
        raise TypeError(
            f"{call}() takes the response's bytes, not the {sdk} SDK's {kind} (it has parsed them "
            f"already): use {_SDK_CALLS[sdk]}.with_streaming_response.create(..., stream=True) and "
            f"pass its response.iter_bytes()"
        )
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

    It raises TypeError at the call if ``source`` is bytes or str (not an iterable of chunks), an
    async iterable (use ``aiter_events``) or an openai / anthropic SDK stream (it yields parsed
    events: pass ``with_streaming_response``'s ``response.iter_bytes()``), and while iterating for
    a chunk that is not bytes;
    EventTooLarge after yielding every event completed before and beside the oversized one.
    """
    _check_source(source, "iter_events", want_async=False)
    return _iter_events(source, event_limit(max_event_bytes, "iter_events"))


def _iter_events(source: Iterable[bytes], limit: int | None) -> Iterator[Event]:
    decoder = _backend.current.Decoder(max_event_bytes=limit)
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
    decoder = _backend.current.Decoder(max_event_bytes=limit)
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
        self._stream: ChatStream = _backend.current.ChatStream(
            self._pending.append, max_event_bytes=event_limit(max_event_bytes, call)
        )
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
        source = iter(self._source)
        while True:
            try:
                data = next(source)
            except StopIteration:
                self._stream.close()
                break
            except Exception:
                self._cut()
                raise
            stop = self._write(data)
            yield from self._drain()
            if stop:
                break
        self._raise_if_failed()

    async def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        source = aiter(self._source)
        while True:
            try:
                data = await anext(source)
            except StopAsyncIteration:
                self._stream.close()
                break
            except Exception:
                self._cut()
                raise
            stop = self._write(data)
            for chunk in self._drain():
                yield chunk
            if stop:
                break
        self._raise_if_failed()

    def _cut(self) -> None:
        # The source raised (the SDK's httpx stream broke mid-answer): the bytes ended there, so
        # result() says the stream was cut, as a client's own transfer says it.
        with contextlib.suppress(Exception):  # the source's exception is the one the caller needs
            self._stream.close(truncated=True)

    def _raise_if_failed(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise error

    def result(self) -> dict[str, Any]:
        """The fold of every chunk yielded so far, with its verdict."""
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

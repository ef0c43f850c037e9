# cython: language_level=3, freethreading_compatible=True, annotation_typing=False
# cython: embedsignature=True, embedsignature.format=clinic
"""Compiled Messages -> chat and Responses -> chat translators; ``_translate_py.py`` holds their
readable twins and ``_translate.py`` the rules both share (``ChatFromMessages``,
``ChatFromResponses``). Each translator drives the compiled fold stream of its upstream with the
shared core as its callback.
"""

cimport cython

from typing import Any

from ._messages_c import MessagesStream
from ._responses_c import ResponsesStream
from ._translate import ChatFromMessages, ChatFromResponses


cdef class _ToChat:
    cdef object _core
    cdef object _stream

    @cython.binding(False)
    def write(self, data: bytes | bytearray | memoryview, /) -> bytes:
        """Translate the next upstream bytes; return the chat chunks they allow (maybe ``b""``).

        It raises TypeError for input other than bytes, bytearray or memoryview and EventTooLarge
        when an upstream event passes ``max_event_bytes``.
        """
        self._stream.write(data)
        out = self._core.out
        if len(out) == 1:
            return out.pop()
        return self._core.take()

    def close(self, *, truncated: bool = False) -> bytes:
        """The upstream ended: return the last chunks (no ``[DONE]`` when it was truncated).
        ``truncated=True`` says the transfer broke."""
        self._stream.close(truncated=truncated)
        return self._core.take()

    def result(self) -> dict[str, Any]:
        """The upstream's fold (``MessagesAggregator`` / ``ResponsesAggregator``) with its ``verdict``."""
        return self._stream.result()

    @property
    def verdict(self):
        """The upstream's verdict (``complete``, ``terminal``, ``why``, departures)."""
        return self._stream.verdict

    @property
    def complete(self) -> bool:
        """True when the upstream ended with its terminal event and ``[DONE]`` was written."""
        return self._core.complete

    @property
    def error(self) -> Any:
        """The upstream's error, carried downstream as a chat error payload, or None."""
        return self._core.error

    @property
    def dropped(self) -> int:
        """Upstream deltas with no chat counterpart (signatures, citations, redacted thinking)."""
        return self._core.dropped

    @property
    def skipped(self) -> int:
        """Upstream events that were not a JSON object or not of a known type."""
        return self._core.skipped


@cython.final
cdef class MessagesToChat(_ToChat):
    """MessagesToChat(*, created=None, include_usage=True, max_event_bytes=None)
--

Messages events in, chat chunks out; see the Python twin (``fastsse._translate_py``) for the
    mapping. Both behave identically."""

    def __init__(self, *, created: int | None = None, include_usage: bool = True, max_event_bytes: int | None = None) -> None:
        self._core = ChatFromMessages(created=created, include_usage=include_usage)
        self._stream = MessagesStream(self._core.on_event, max_event_bytes=max_event_bytes)


@cython.final
cdef class ResponsesToChat(_ToChat):
    """ResponsesToChat(*, created=None, include_usage=True, max_event_bytes=None)
--

Responses events in, chat chunks out; see the Python twin (``fastsse._translate_py``) for the
    mapping. Both behave identically."""

    def __init__(self, *, created: int | None = None, include_usage: bool = True, max_event_bytes: int | None = None) -> None:
        self._core = ChatFromResponses(created=created, include_usage=include_usage)
        self._stream = ResponsesStream(self._core.on_event, max_event_bytes=max_event_bytes)

"""Pure-Python translators: the readable twins of ``translate/_from_chat_c.pyx``.

Each translator is a fold stream of this backend (``chat._fold_py.ChatStream``,
``messages._fold_py.MessagesStream``, ``responses._fold_py.ResponsesStream``) whose callback is a core from
``translate/_rules.py``; every parsed chunk or event goes through that core, where the compiled
translators write the hot deltas themselves.
"""

from __future__ import annotations

from typing import Any

from ..chat import ChatVerdict
from ..chat._fold_py import ChatStream
from ..fold import FormatVerdict
from ..messages._fold_py import MessagesStream
from ..responses._fold_py import ResponsesStream
from ._rules import (
    ChatFromMessages,
    ChatFromResponses,
    FromChat,
    MessagesFromChat,
    ResponsesFromChat,
    ToChat,
)

__all__ = ["ChatToMessages", "ChatToResponses", "MessagesToChat", "ResponsesToChat"]


class _FromChat:
    _core: FromChat

    def __init__(self, core: FromChat, max_event_bytes: int | None) -> None:
        self._core = core
        self._stream = ChatStream(core.on_chunk, max_event_bytes=max_event_bytes)

    def write(self, data: bytes | bytearray | memoryview, /) -> bytes:
        """Translate the next upstream bytes; return what they allow downstream (maybe ``b""``).

        It raises TypeError for input other than bytes, bytearray or memoryview and EventTooLarge
        when an upstream event passes ``max_event_bytes``.
        """
        core = self._core
        self._stream.write(data)
        core.end_if(self._stream.aggregator.done)
        out = core.out
        if len(out) == 1:  # the usual read: one upstream event, one translated event
            return out.pop()
        return core.take()

    def close(self, *, truncated: bool = False) -> bytes:
        """The upstream ended: return the last bytes (none when it was truncated). ``truncated=True``
        says the transfer broke, so an answer without ``[DONE]`` is not taken as whole."""
        self._stream.close(truncated=truncated)
        self._core.end_if(self._stream.verdict.complete)
        return self._core.take()

    def result(self) -> dict[str, Any]:
        """The upstream's folded ``chat.completion`` with its ``verdict`` (see ``ChatStream``)."""
        return self._stream.result()

    @property
    def verdict(self) -> ChatVerdict:
        """The upstream's verdict (see ``ChatStream``); the translation ends with the target's terminal
        event when choice 0 finished and ``[DONE]`` came."""
        return self._stream.verdict

    @property
    def dropped(self) -> int:
        """Upstream fields with no counterpart that were left out (other choices, nameless tool calls)."""
        return self._core.dropped


class ChatToMessages(_FromChat):
    """``ChatToMessages(*, max_event_bytes=None)``: chat chunks in, Messages events out.

    ``message_start`` goes out with the first upstream chunk (usage 0 until the upstream reports
    it; the final ``message_delta`` carries the real input and output tokens). Reasoning becomes
    thinking blocks, content and refusals text blocks, tool calls ``tool_use`` blocks with their
    arguments as ``input_json_delta``; ``finish_reason`` maps to ``stop_reason`` and an upstream
    error to an ``error`` event. Only choice 0 is carried. One per stream; not thread-safe.
    """

    def __init__(self, *, max_event_bytes: int | None = None) -> None:
        super().__init__(MessagesFromChat(), max_event_bytes)


class ChatToResponses(_FromChat):
    """``ChatToResponses(*, max_event_bytes=None)``: chat chunks in, Responses events out.

    ``response.created`` and ``response.in_progress`` go out with the first upstream chunk.
    Reasoning becomes a reasoning item's summary text, content ``output_text`` and refusals
    ``refusal`` parts of a message item, tool calls ``function_call`` items; ``finish_reason``
    ``length`` / ``content_filter`` end with ``response.incomplete``, others with
    ``response.completed``; an upstream error becomes ``response.failed``. Only choice 0 is
    carried. One per stream; not thread-safe.
    """

    def __init__(self, *, max_event_bytes: int | None = None) -> None:
        super().__init__(ResponsesFromChat(), max_event_bytes)


class _ToChat:
    _core: ToChat
    _stream: Any

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
        out: dict[str, Any] = self._stream.result()
        return out

    @property
    def verdict(self) -> FormatVerdict:
        """The upstream's verdict (``complete``, ``terminal``, ``why``, departures)."""
        verdict: FormatVerdict = self._stream.verdict
        return verdict

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


class MessagesToChat(_ToChat):
    """``MessagesToChat(*, created=None, include_usage=True, max_event_bytes=None)``: Messages events in,
    chat chunks out.

    ``message_start`` gives the role chunk (``id`` and ``model`` carried; ``created`` is the given
    value or the current time, since Messages has none). Text deltas become ``content``, thinking
    deltas ``reasoning_content``, ``tool_use`` / ``server_tool_use`` blocks tool calls whose
    ``input_json_delta`` pieces are the arguments; ``message_stop`` gives the finish chunk
    (``stop_reason`` mapped), the usage chunk (merged from ``message_start`` and ``message_delta``,
    unless ``include_usage=False``) and ``[DONE]``; ``event: error`` gives a chat error payload.
    Web-search citations become ``url_citation`` annotations spanning their text block. Signatures,
    other citations and redacted thinking have no chat counterpart (``dropped`` counts them).
    """

    def __init__(
        self, *, created: int | None = None, include_usage: bool = True, max_event_bytes: int | None = None
    ) -> None:
        self._core = ChatFromMessages(created=created, include_usage=include_usage)
        self._stream = MessagesStream(self._core.on_event, max_event_bytes=max_event_bytes)


class ResponsesToChat(_ToChat):
    """``ResponsesToChat(*, created=None, include_usage=True, max_event_bytes=None)``: Responses events in,
    chat chunks out.

    ``response.created`` gives the role chunk (``id``, ``model``, ``created_at`` carried). Output
    text deltas become ``content``, refusal deltas ``refusal``, reasoning summary and reasoning text
    deltas ``reasoning_content``, ``function_call`` items tool calls (``call_id``, ``name``, argument
    deltas; arguments only the ``.done`` events carry are sent then), ``url_citation`` annotations
    the message's ``annotations`` (sent once, before the finish chunk). ``response.completed`` ends
    with ``stop`` (``tool_calls`` when the answer called a function), ``response.incomplete`` with
    ``length`` or ``content_filter``, then the usage chunk (unless ``include_usage=False``) and
    ``[DONE]``; ``response.failed`` and ``error`` give a chat error payload. Deltas for an item that
    was never announced are still carried.
    """

    def __init__(
        self, *, created: int | None = None, include_usage: bool = True, max_event_bytes: int | None = None
    ) -> None:
        self._core = ChatFromResponses(created=created, include_usage=include_usage)
        self._stream = ResponsesStream(self._core.on_event, max_event_bytes=max_event_bytes)

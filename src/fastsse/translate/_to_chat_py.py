"""Pure-Python Messages -> chat and Responses -> chat translators: the readable twins of
``translate/_to_chat_c.pyx``, by the same class names.

Each translator is a fold stream of this backend (``messages._fold_py.MessagesStream``,
``responses._fold_py.ResponsesStream``) whose callback is a core from ``translate/_rules.py``;
every parsed event goes through that core, where the compiled translators write the hot deltas
themselves.
"""

from __future__ import annotations

from typing import Any

from ..fold import FormatVerdict
from ..messages._fold_py import MessagesStream
from ..responses._fold_py import ResponsesStream
from ._rules import (
    ChatFromMessages,
    ChatFromResponses,
    ToChat,
)

__all__ = ["MessagesToChat", "ResponsesToChat"]


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

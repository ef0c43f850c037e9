"""Pure-Python chat -> Messages and chat -> Responses translators: the readable twins of
``translate/_from_chat_c.pyx``, by the same class names.

Each translator is this backend's ``chat._fold_py.ChatStream`` whose callback is a core from
``translate/_rules.py``; every parsed chunk goes through that core, where the compiled translators
write the hot deltas themselves.
"""

from __future__ import annotations

from typing import Any

from ..chat import ChatVerdict
from ..chat._fold_py import ChatStream
from ._rules import (
    FromChat,
    MessagesFromChat,
    ResponsesFromChat,
)

__all__ = ["ChatToMessages", "ChatToResponses"]


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
    def complete(self) -> bool:
        """True once the translation's terminal event (``message_stop``; ``response.completed`` or
        ``response.incomplete``) went out for a whole upstream answer (choice 0 finished, then
        ``[DONE]``, or a clean end): nothing after it, a cut included, sends more. An upstream
        error's event is not complete."""
        return self._core.complete

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

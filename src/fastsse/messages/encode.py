"""The Anthropic Messages stream grammar, written exactly: ``MessagesEncoder``.

Every event is ``event: <type>\\ndata: <compact JSON>\\n\\n`` with the type repeated in the payload:
``message_start`` (the message with empty ``content`` and a ``usage`` object), then content blocks,
each ``content_block_start`` / ``content_block_delta``... / ``content_block_stop`` under an ``index``
that counts from 0 in start order, then ``message_delta`` (``stop_reason``, ``stop_sequence``,
cumulative ``usage``) and ``message_stop``; or an ``error`` event in place of the end.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from .._errors import EncodeError

__all__ = ["MessagesEncoder", "chat_usage_to_messages"]

# chat finish_reason -> Messages stop_reason
STOP_REASONS: Final[dict[str, str]] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}


def chat_usage_to_messages(usage: dict[str, Any], /) -> dict[str, Any]:
    """``chat_usage_to_messages(usage) -> dict``: a chat ``usage`` object in the Messages shape.

    Anthropic's ``input_tokens`` excludes cache reads, so it is ``prompt_tokens`` minus
    ``prompt_tokens_details.cached_tokens``, which becomes ``cache_read_input_tokens``;
    ``completion_tokens`` -> ``output_tokens``. It raises TypeError if ``usage`` is not a dict.
    """
    if not isinstance(usage, dict):
        raise TypeError(f"usage must be a dict, not {type(usage).__name__}")
    prompt = usage.get("prompt_tokens")
    completion = usage.get("completion_tokens")
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    cached = cached if type(cached) is int else 0
    prompt = prompt if type(prompt) is int else 0
    return {
        "input_tokens": max(prompt - cached, 0),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cached,
        "output_tokens": completion if type(completion) is int else 0,
    }


_DELTA_KEY: Final = {"text": ("text_delta", "text"), "thinking": ("thinking_delta", "thinking")}


class MessagesEncoder:
    """``MessagesEncoder(*, id, model)``: writes one Messages event stream.

    Every method returns the bytes of zero or more events. ``start(usage=None)`` first
    (``message_start``; ``usage`` defaults to zero input and output tokens, the figures a stream
    knows before the upstream reports them); then any of ``text``, ``thinking``, ``signature``,
    ``tool_use`` and ``input_json``; then ``stop(stop_reason, ...)`` or ``error(...)``. Text and
    thinking go into one open block of their kind, opened on demand; a block of another kind
    closes it (a closed block is never reopened, so text after a tool call is a new block). Tool
    blocks are addressed by a caller-chosen ``key``; they stay open until ``stop`` so interleaved
    fragments of parallel calls are carried in arrival order. ``ping()`` is a keep-alive event.
    One encoder per stream; not thread-safe.

    Each method raises EncodeError (a ValueError) when the call would break the grammar: anything before
    ``start`` or after ``stop``/``error``, ``start`` twice, an empty delta, a tool block without id
    and name or a key used twice, input for an unknown key, a signature with no thinking block.
    """

    __slots__ = ("_ended", "_message", "_next", "_open", "_prefix", "_started", "_tools", "_usage")

    def __init__(self, *, id: str, model: str) -> None:
        if not isinstance(id, str) or not id:
            raise EncodeError("id must be a non-empty string")
        self._message: dict[str, Any] = {
            "id": id,
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": model,
            "stop_reason": None,
            "stop_sequence": None,
        }
        self._next = 0  # the index the next block gets
        self._open: tuple[str, int] | None = None  # the open text or thinking block
        self._prefix = b""  # the bytes of a delta event for the open block, up to the text
        self._tools: dict[object, list[Any]] = {}  # key -> [index, open]
        self._usage: dict[str, Any] = {}
        self._started = False
        self._ended = False

    @property
    def started(self) -> bool:
        """True once ``start()`` was written."""
        return self._started

    @property
    def ended(self) -> bool:
        """True once ``message_stop`` or ``error`` was written."""
        return self._ended

    @staticmethod
    def _event(type_: str, payload: bytes) -> bytes:
        return b"event: " + type_.encode() + b"\ndata: " + payload + b"\n\n"

    def _check(self, what: str) -> None:
        if not self._started:
            raise EncodeError(f"{what} before start(): the stream opens with message_start")
        if self._ended:
            raise EncodeError(f"{what} after the end of the message")

    def start(self, usage: dict[str, Any] | None = None) -> bytes:
        """``message_start``: the message with no content yet and ``usage``."""
        if self._started:
            raise EncodeError("start() twice")
        if usage is not None and not isinstance(usage, dict):
            raise TypeError(f"usage must be a dict, not {type(usage).__name__}")
        self._started = True
        self._usage = dict(usage) if usage else {"input_tokens": 0, "output_tokens": 0}
        message = dict(self._message)
        message["usage"] = self._usage
        return self._event("message_start", orjson.dumps({"type": "message_start", "message": message}))

    def ping(self) -> bytes:
        """``event: ping``, a keep-alive Anthropic sends between blocks."""
        self._check("ping()")
        return b'event: ping\ndata: {"type":"ping"}\n\n'

    def _block_start(self, block: dict[str, Any]) -> tuple[int, bytes]:
        index = self._next
        self._next += 1
        payload = orjson.dumps({"type": "content_block_start", "index": index, "content_block": block})
        return index, self._event("content_block_start", payload)

    def _block_stop(self, index: int) -> bytes:
        return self._event("content_block_stop", b'{"type":"content_block_stop","index":%d}' % index)

    def _delta(self, index: int, delta: dict[str, Any]) -> bytes:
        payload = orjson.dumps({"type": "content_block_delta", "index": index, "delta": delta})
        return self._event("content_block_delta", payload)

    def _close_open(self) -> bytes:
        if self._open is None:
            return b""
        index = self._open[1]
        self._open = None
        return self._block_stop(index)

    def _streamed(self, kind: str, delta: str) -> bytes:
        open_ = self._open
        if open_ is not None and open_[0] == kind and type(delta) is str and delta and not self._ended:
            # the hot path: one more delta for the open block, its event prefix built once
            return self._prefix + orjson.dumps(delta) + b"}}\n\n"
        self._check(f"{kind}()")
        if not isinstance(delta, str):
            raise TypeError(f"{kind} delta must be a str, not {type(delta).__name__}")
        if not delta:
            raise EncodeError(f"empty {kind} delta")
        out = b""
        if self._open is None or self._open[0] != kind:
            out = self._close_open()
            block: dict[str, Any] = (
                {"type": "text", "text": ""}
                if kind == "text"
                else {"type": "thinking", "thinking": "", "signature": ""}
            )
            index, started = self._block_start(block)
            self._open = (kind, index)
            delta_type, field = _DELTA_KEY[kind]
            self._prefix = (
                b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,'
                b'"delta":{"type":"%s","%s":' % (index, delta_type.encode(), field.encode())
            )
            out += started
        delta_type, field = _DELTA_KEY[kind]
        return out + self._delta(self._open[1], {"type": delta_type, field: delta})

    def text(self, delta: str, /) -> bytes:
        """A ``text_delta``, opening a text block when the open block is not one."""
        open_ = self._open
        if open_ is not None and open_[0] == "text" and type(delta) is str and delta and not self._ended:
            return self._prefix + orjson.dumps(delta) + b"}}\n\n"  # the hot path, inlined
        return self._streamed("text", delta)

    def thinking(self, delta: str, /) -> bytes:
        """A ``thinking_delta``, opening a thinking block when the open block is not one."""
        open_ = self._open
        if open_ is not None and open_[0] == "thinking" and type(delta) is str and delta and not self._ended:
            return self._prefix + orjson.dumps(delta) + b"}}\n\n"
        return self._streamed("thinking", delta)

    # the frames a compiled translator writes deltas into itself: the event's bytes up to the JSON
    # string; b"}}\n\n" follows it

    def _text_frame(self) -> tuple[str, bytes] | None:
        """(the open text or thinking block's kind, its delta event's bytes up to the string), or
        None when no block is open."""
        if self._open is None or self._ended:
            return None
        return self._open[0], self._prefix

    def _input_frame(self, key: object) -> bytes | None:
        """An ``input_json_delta`` event's bytes up to the string for the tool block of ``key``, or
        None when it is not open."""
        tool = self._tools.get(key)
        if tool is None or not tool[1] or self._ended:
            return None
        return (
            b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,'
            b'"delta":{"type":"input_json_delta","partial_json":' % tool[0]
        )

    def signature(self, signature: str, /) -> bytes:
        """A ``signature_delta`` for the open thinking block, which it then closes."""
        self._check("signature()")
        if self._open is None or self._open[0] != "thinking":
            raise EncodeError("signature() with no open thinking block")
        if not isinstance(signature, str) or not signature:
            raise EncodeError("empty signature")
        index = self._open[1]
        return self._delta(index, {"type": "signature_delta", "signature": signature}) + self._close_open()

    def redacted_thinking(self, data: str, /) -> bytes:
        """A whole ``redacted_thinking`` block (``{"type": "redacted_thinking", "data": ...}``, started
        and stopped), closing the open text or thinking block first."""
        self._check("redacted_thinking()")
        if not isinstance(data, str) or not data:
            raise EncodeError("empty redacted_thinking data")
        out = self._close_open()
        index, started = self._block_start({"type": "redacted_thinking", "data": data})
        return out + started + self._block_stop(index)

    def tool_use(self, key: object, /, *, id: str, name: str, input_json: str = "") -> bytes:
        """A new ``tool_use`` block (``input: {}``), then ``input_json`` if not empty."""
        self._check("tool_use()")
        if not id or not name:
            raise EncodeError("a tool_use block needs both id and name")
        if key in self._tools:
            raise EncodeError(f"tool key {key!r} used twice")
        out = self._close_open()
        index, started = self._block_start({"type": "tool_use", "id": id, "name": name, "input": {}})
        self._tools[key] = [index, True]
        out += started
        if input_json:
            out += self.input_json(key, input_json)
        return out

    def input_json(self, key: object, partial_json: str, /) -> bytes:
        """An ``input_json_delta`` for the tool block opened under ``key``."""
        self._check("input_json()")
        tool = self._tools.get(key)
        if tool is None or not tool[1]:
            raise EncodeError(f"input for tool {key!r}, which is not open")
        if not isinstance(partial_json, str) or not partial_json:
            raise EncodeError("empty input_json delta")
        return self._delta(tool[0], {"type": "input_json_delta", "partial_json": partial_json})

    def stop(
        self, stop_reason: str, /, *, stop_sequence: str | None = None, usage: dict[str, Any] | None = None
    ) -> bytes:
        """Close every open block (in index order), then ``message_delta`` with ``stop_reason``,
        ``stop_sequence`` and the cumulative ``usage`` (merged over ``start``'s), and ``message_stop``."""
        self._check("stop()")
        if not isinstance(stop_reason, str) or not stop_reason:
            raise EncodeError(f"stop_reason must be a non-empty string, not {stop_reason!r}")
        indexes = [tool[0] for tool in self._tools.values() if tool[1]]
        if self._open is not None:
            indexes.append(self._open[1])
            self._open = None
        out = b"".join(self._block_stop(i) for i in sorted(indexes))
        for tool in self._tools.values():
            tool[1] = False
        merged = dict(self._usage)
        if usage:
            merged.update(usage)
        self._ended = True
        delta = {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
            "usage": merged,
        }
        return (
            out
            + self._event("message_delta", orjson.dumps(delta))
            + b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
        )

    def error(self, *, type: str = "api_error", message: str) -> bytes:
        """``event: error`` with ``{"type": "error", "error": {"type", "message"}}``; it ends the stream."""
        if self._ended:
            raise EncodeError("error() after the end of the message")
        self._ended = True
        payload = orjson.dumps({"type": "error", "error": {"type": type, "message": message}})
        return self._event("error", payload)

"""Incremental stream translation between chat completions, Responses and Messages.

``translator(source, target)`` returns an object with ``write(data) -> bytes`` (the translated
bytes the new upstream bytes allow, possibly empty) and ``close() -> bytes``, one call per upstream
read, like a relay. Each upstream goes through its fused fold stream (``ChatStream``, ``MessagesStream``,
``ResponsesStream``: the compiled scanner, reader and fold), so the translation and the upstream's
fold come from one pass (``result()``, ``verdict``). Messages <-> Responses goes through chat.

The target's terminal event is written only when the upstream answer was whole (chat: a
``finish_reason`` and ``[DONE]``; Messages: ``message_stop``; Responses: ``response.completed`` or
``response.incomplete``); an upstream that stops early stays truncated downstream, and an upstream
error becomes the target's error. docs/translation.md lists the field mapping.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final, Protocol, TypeGuard

import orjson

from ._backend import ChatStream, MessagesStream, ResponsesStream
from ._chat import Verdict
from ._fold import FormatVerdict
from .encode import ChatChunkEncoder
from .encode_messages import STOP_REASONS, MessagesEncoder, chat_usage_to_messages
from .encode_responses import INCOMPLETE, ResponsesEncoder, chat_usage_to_responses

__all__ = [
    "APIS",
    "ChatToMessages",
    "ChatToResponses",
    "MessagesToChat",
    "ResponsesToChat",
    "Translator",
    "translator",
]

APIS: Final = ("chat", "responses", "messages")


class Translator(Protocol):
    """What every translator offers: ``write(data) -> bytes``, ``close() -> bytes`` and ``result()``,
    the upstream's fold with its verdict."""

    def write(self, data: bytes | bytearray | memoryview, /) -> bytes: ...

    def close(self, *, truncated: bool = False) -> bytes: ...

    def result(self) -> dict[str, Any]: ...


def _is_index(value: object) -> TypeGuard[int]:
    return type(value) is int and value >= 0


def _error_message(error: Any) -> tuple[str | None, str]:
    """(code or type, message) of an upstream error value of any shape."""
    if isinstance(error, dict):
        code = error.get("code") or error.get("type")
        message = error.get("message")
        return (str(code) if code is not None else None), (
            message if isinstance(message, str) else orjson.dumps(error).decode()
        )
    return None, error if isinstance(error, str) else orjson.dumps(error).decode()


# chat -> Messages / Responses


class _Call:
    __slots__ = ("args", "id", "key", "name", "started")

    def __init__(self, key: int) -> None:
        self.key = key
        self.id = ""
        self.name = ""
        self.args: list[str] = []  # arguments held until the name is known
        self.started = False


class _FromChat:
    """Reads a chat stream through ``ChatStream`` and calls the target's hooks for choice 0."""

    def __init__(self, *, max_event_bytes: int | None = None) -> None:
        self._stream = ChatStream(self._on_chunk, max_event_bytes=max_event_bytes)
        self._out: list[bytes] = []
        self._begun = False
        self._ended = False
        self._calls: dict[int, _Call] = {}
        self._last_call: int | None = None
        self._finish: str | None = None
        self._usage: dict[str, Any] | None = None
        self._dropped = 0
        self._notes_sent = 0  # chat annotations already carried (chat resends the whole list)

    # the relay protocol

    def write(self, data: bytes | bytearray | memoryview, /) -> bytes:
        """Translate the next upstream bytes; return what they allow downstream (maybe ``b""``).

        It raises TypeError for input other than bytes, bytearray or memoryview and EventTooLarge
        when an upstream event passes ``max_event_bytes``.
        """
        self._stream.write(data)
        if self._finish is not None and not self._ended and self._stream.aggregator.done:
            self._end()
        out = self._out
        if len(out) == 1:  # the usual read: one upstream event, one translated event
            return out.pop()
        return self._take()

    def close(self, *, truncated: bool = False) -> bytes:
        """The upstream ended: return the last bytes (none when it was truncated). ``truncated=True``
        says the transfer broke, so an answer without ``[DONE]`` is not taken as whole."""
        self._stream.close(truncated=truncated)
        if self._finish is not None and not self._ended and self._stream.verdict.complete:
            self._end()
        return self._take()

    def result(self) -> dict[str, Any]:
        """The upstream's folded ``chat.completion`` with its ``verdict`` (see ``ChatStream``)."""
        return self._stream.result()

    @property
    def verdict(self) -> Verdict:
        """The upstream's verdict (see ``ChatStream``); the translation ends with the target's terminal
        event when choice 0 finished and ``[DONE]`` came."""
        return self._stream.verdict

    @property
    def dropped(self) -> int:
        """Upstream fields with no counterpart that were left out (other choices, nameless tool calls)."""
        return self._dropped

    def _take(self) -> bytes:
        out = b"".join(self._out)
        self._out.clear()
        return out

    # the chunk walk

    def _on_chunk(self, chunk: dict[str, Any]) -> None:
        if self._ended:
            return
        if not self._begun:
            self._begun = True
            self._begin(chunk)
        error = chunk.get("error")
        if error is not None:
            self._ended = True
            self._fail(error)
            return
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self._usage = usage
        choices = chunk.get("choices")
        if type(choices) is not list:
            return
        for pos, choice in enumerate(choices):
            if type(choice) is not dict:
                continue
            index = choice.get("index")
            if (pos if index is None else index) != 0:
                self._dropped += 1
                continue
            delta = choice.get("delta")
            if delta is None:
                delta = choice.get("message")
            if type(delta) is dict:
                self._delta(delta)
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                self._finish = reason

    def _delta(self, delta: dict[str, Any]) -> None:
        if len(delta) == 1:
            # the hot path: a delta holding only content (or only reasoning)
            content = delta.get("content")
            if type(content) is str:
                if content:
                    self._out.append(self._text(content))
                return
        # one chunk may carry reasoning, content and tool calls at once: each is carried, in that order
        reasoning = delta.get("reasoning_content")
        if reasoning is None:
            reasoning = delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            self._out.append(self._reasoning(reasoning))
        content = delta.get("content")
        if isinstance(content, str) and content:
            self._out.append(self._text(content))
        refusal = delta.get("refusal")
        if isinstance(refusal, str) and refusal:
            self._out.append(self._refusal(refusal))
        notes = delta.get("annotations")
        if type(notes) is list and len(notes) > self._notes_sent:
            self._annotations(notes)
        calls = delta.get("tool_calls")
        if type(calls) is list:
            for fragment in calls:
                if type(fragment) is dict:
                    self._tool_fragment(fragment)
        legacy = delta.get("function_call")
        if type(legacy) is dict:
            self._tool_fragment({"index": 0, "function": legacy})

    def _tool_fragment(self, fragment: dict[str, Any]) -> None:
        index = fragment.get("index")
        if not _is_index(index):
            index = self._last_call if self._last_call is not None else 0
        function = fragment.get("function")
        name = args = None
        if type(function) is dict:
            name = function.get("name")
            args = function.get("arguments")
        name = name if isinstance(name, str) and name else None
        args = args if isinstance(args, str) and args else None
        call_id = fragment.get("id")
        call_id = call_id if isinstance(call_id, str) and call_id else None
        call = self._calls.get(index)
        if call is not None and call_id and name and call.id and call_id != call.id:
            call = None  # a new id with a name at a used index: a new call (Gemini, Ollama)
        if call is None:
            call = _Call(len(self._keys))
            self._calls[index] = call
            self._keys.append(call)
        self._last_call = index
        if call_id and not call.id:
            call.id = call_id
        if name and not call.name:
            call.name = name
        if not call.started:
            if args:
                call.args.append(args)
            if call.name:
                call.started = True
                if not call.id:
                    call.id = f"call_{call.key}"
                self._out.append(self._tool_start(call.key, call.id, call.name, "".join(call.args)))
                call.args.clear()
        elif args:
            self._out.append(self._tool_args(call.key, args))

    def _annotations(self, notes: list[Any]) -> None:
        # Messages has no place for them; ChatToResponses overrides
        self._dropped += len(notes) - self._notes_sent
        self._notes_sent = len(notes)

    def _end(self) -> None:
        self._ended = True
        for call in self._keys:
            if not call.started:
                self._dropped += 1  # a tool call that never got a name has no counterpart
        assert self._finish is not None
        self._out.append(self._stop(self._finish, self._usage))

    # the target's hooks: the encoder's delta methods themselves, bound in _begin (one call less per delta)

    _keys: list[_Call]
    _reasoning: Callable[[str], bytes]
    _text: Callable[[str], bytes]
    _refusal: Callable[[str], bytes]

    def _begin(self, chunk: dict[str, Any]) -> None:
        raise NotImplementedError

    def _tool_start(self, key: int, call_id: str, name: str, args: str) -> bytes:
        raise NotImplementedError

    def _tool_args(self, key: int, args: str) -> bytes:
        raise NotImplementedError

    def _stop(self, finish: str, usage: dict[str, Any] | None) -> bytes:
        raise NotImplementedError

    def _fail(self, error: Any) -> None:
        raise NotImplementedError


def _head(chunk: dict[str, Any], default_id: str) -> tuple[str, str]:
    ident = chunk.get("id")
    model = chunk.get("model")
    return (
        ident if isinstance(ident, str) and ident else default_id,
        model if isinstance(model, str) else "",
    )


class ChatToMessages(_FromChat):
    """``ChatToMessages(*, max_event_bytes=None)``: chat chunks in, Messages events out.

    ``message_start`` goes out with the first upstream chunk (usage 0 until the upstream reports
    it; the final ``message_delta`` carries the real input and output tokens). Reasoning becomes
    thinking blocks, content and refusals text blocks, tool calls ``tool_use`` blocks with their
    arguments as ``input_json_delta``; ``finish_reason`` maps to ``stop_reason`` and an upstream
    error to an ``error`` event. Only choice 0 is carried. One per stream; not thread-safe.
    """

    def __init__(self, *, max_event_bytes: int | None = None) -> None:
        super().__init__(max_event_bytes=max_event_bytes)
        self._keys = []
        self._enc: MessagesEncoder | None = None

    def _begin(self, chunk: dict[str, Any]) -> None:
        ident, model = _head(chunk, "msg_fastsse")
        self._enc = MessagesEncoder(id=ident, model=model)
        self._out.append(self._enc.start())
        self._text = self._refusal = self._enc.text
        self._reasoning = self._enc.thinking

    def _tool_start(self, key: int, call_id: str, name: str, args: str) -> bytes:
        assert self._enc is not None
        return self._enc.tool_use(key, id=call_id, name=name, input_json=args)

    def _tool_args(self, key: int, args: str) -> bytes:
        assert self._enc is not None
        return self._enc.input_json(key, args)

    def _stop(self, finish: str, usage: dict[str, Any] | None) -> bytes:
        assert self._enc is not None
        return self._enc.stop(
            STOP_REASONS.get(finish, "end_turn"),
            usage=chat_usage_to_messages(usage) if usage is not None else None,
        )

    def _fail(self, error: Any) -> None:
        assert self._enc is not None
        _, message = _error_message(error)
        kind = error.get("type") if isinstance(error, dict) else None
        self._out.append(
            self._enc.error(type=kind if isinstance(kind, str) else "api_error", message=message)
        )


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
        super().__init__(max_event_bytes=max_event_bytes)
        self._keys = []
        self._enc: ResponsesEncoder | None = None

    def _begin(self, chunk: dict[str, Any]) -> None:
        ident, model = _head(chunk, "resp_fastsse")
        created = chunk.get("created")
        self._enc = ResponsesEncoder(
            id=ident, model=model, created_at=created if type(created) is int else None
        )
        self._out.append(self._enc.start())
        self._text = self._enc.text
        self._refusal = self._enc.refusal
        self._reasoning = self._enc.reasoning

    def _annotations(self, notes: list[Any]) -> None:
        assert self._enc is not None
        for note in notes[self._notes_sent :]:
            cited = note.get("url_citation") if type(note) is dict else None
            try:
                if note.get("type") != "url_citation" or type(cited) is not dict:
                    raise ValueError("no counterpart")
                self._out.append(self._enc.annotation({"type": "url_citation", **cited}))
            except (ValueError, AttributeError):
                self._dropped += 1  # not a url_citation, or no open text part to hold it
        self._notes_sent = len(notes)

    def _tool_start(self, key: int, call_id: str, name: str, args: str) -> bytes:
        assert self._enc is not None
        return self._enc.function_call(key, call_id=call_id, name=name, arguments=args)

    def _tool_args(self, key: int, args: str) -> bytes:
        assert self._enc is not None
        return self._enc.arguments(key, args)

    def _stop(self, finish: str, usage: dict[str, Any] | None) -> bytes:
        assert self._enc is not None
        return self._enc.complete(
            usage=chat_usage_to_responses(usage) if usage is not None else None,
            incomplete_reason=INCOMPLETE.get(finish),
        )

    def _fail(self, error: Any) -> None:
        assert self._enc is not None
        code, message = _error_message(error)
        self._out.append(self._enc.fail(code=code, message=message))


# Messages / Responses -> chat

# Messages stop_reason -> chat finish_reason
FINISH_FROM_MESSAGES: Final[dict[str, str]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}


class _ToChat:
    """Reads an upstream through its fused fold stream and writes chat chunks with ``ChatChunkEncoder``."""

    _stream: Any

    def __init__(self, *, created: int | None, include_usage: bool) -> None:
        self._created = created
        self._include_usage = include_usage
        self._enc: ChatChunkEncoder | None = None
        self._out: list[bytes] = []
        self._ended = False
        self._complete = False
        self._error: Any = None
        self._calls: dict[int, int] = {}  # upstream block or output index -> chat tool-call index
        self._args_sent: dict[int, int] = {}  # chat tool-call index -> argument characters sent
        self._ids: set[str] = set()
        self._usage: dict[str, Any] | None = None
        self._dropped = 0
        self._skipped = 0
        self._prefixes: dict[str, bytes] = {}
        self._annotations: list[dict[str, Any]] = []  # url_citation annotations, sent before the end

    def write(self, data: bytes | bytearray | memoryview, /) -> bytes:
        """Translate the next upstream bytes; return the chat chunks they allow (maybe ``b""``).

        It raises TypeError for input other than bytes, bytearray or memoryview and EventTooLarge
        when an upstream event passes ``max_event_bytes``.
        """
        self._stream.write(data)
        out = self._out
        if len(out) == 1:
            return out.pop()
        return self._take()

    def close(self, *, truncated: bool = False) -> bytes:
        """The upstream ended: return the last chunks (no ``[DONE]`` when it was truncated).
        ``truncated=True`` says the transfer broke."""
        self._stream.close(truncated=truncated)
        return self._take()

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
        return self._complete

    @property
    def error(self) -> Any:
        """The upstream's error, carried downstream as a chat error payload, or None."""
        return self._error

    @property
    def dropped(self) -> int:
        """Upstream deltas with no chat counterpart (signatures, citations, redacted thinking)."""
        return self._dropped

    @property
    def skipped(self) -> int:
        """Upstream events that were not a JSON object or not of a known type."""
        return self._skipped

    def _take(self) -> bytes:
        out = b"".join(self._out)
        self._out.clear()
        return out

    def _on_event(self, payload: dict[str, Any]) -> None:
        # the fold stream parsed and folded it already; an untyped payload is in its verdict
        if self._ended:
            return
        kind = payload.get("type")
        if isinstance(kind, str):
            self._dispatch(kind, payload)
        else:
            self._skipped += 1

    def _dispatch(self, kind: str, payload: dict[str, Any]) -> None:
        raise NotImplementedError

    def _begin(self, ident: object, model: object, created: object = None) -> None:
        if self._enc is not None:
            return
        when = self._created if self._created is not None else created
        self._enc = ChatChunkEncoder(
            id=ident if isinstance(ident, str) and ident else "chatcmpl-fastsse",
            model=model if isinstance(model, str) else "",
            created=when if type(when) is int else int(time.time()),
        )
        self._out.append(self._enc.role())
        # the bytes ChatChunkEncoder writes for a delta of choice 0, around the text: the hot path
        head = self._enc._head + b'{"index":0,"delta":{"'
        self._prefixes = {key: head + field + b'":' for key, field in _CHAT_FIELDS.items()}

    def _ensure(self) -> ChatChunkEncoder:
        if self._enc is None:
            self._begin(None, None)
        assert self._enc is not None
        return self._enc

    def _content(self, key: str, text: object) -> None:
        if type(text) is str and text:
            if self._enc is None:
                self._begin(None, None)
            self._out.append(self._prefixes[key] + orjson.dumps(text) + b'},"finish_reason":null}]}\n\n')

    def _tool_start(self, upstream: int, call_id: object, name: object, args: str = "") -> None:
        if upstream in self._calls or not isinstance(name, str) or not name:
            self._dropped += 1
            return
        enc = self._ensure()
        index = len(self._calls)
        ident = (
            call_id if isinstance(call_id, str) and call_id and call_id not in self._ids else f"call_{index}"
        )
        self._ids.add(ident)
        self._calls[upstream] = index
        self._args_sent[index] = len(args)
        self._out.append(enc.tool_call(index, id=ident, name=name, arguments=args))

    def _tool_args(self, upstream: int, args: object) -> None:
        index = self._calls.get(upstream)
        if index is None or not isinstance(args, str) or not args:
            if index is None:
                self._dropped += 1
            return
        self._args_sent[index] += len(args)
        self._out.append(self._ensure().tool_call(index, arguments=args))

    def _finish(self, reason: str) -> None:
        enc = self._ensure()
        if self._annotations:
            # chat keeps the last annotations list a delta sends: all of them, once, before the end
            choice = {"index": 0, "delta": {"annotations": self._annotations}, "finish_reason": None}
            self._out.append(enc._head + orjson.dumps(choice) + b"]}\n\n")
        if reason == "tool_calls" and not self._calls:
            reason = "stop"
        self._out.append(enc.finish(reason))
        if self._include_usage and self._usage is not None:
            self._out.append(enc.usage(self._usage))
        self._out.append(enc.done())
        self._ended = True
        self._complete = True

    def _fail(self, error: Any) -> None:
        self._ensure()
        self._error = error
        self._ended = True
        self._out.append(b"data: " + orjson.dumps({"error": error}) + b"\n\n")


# _ToChat._content key -> the chat delta field (ChatChunkEncoder's default reasoning key)
_CHAT_FIELDS: Final = {"content": b"content", "reasoning": b"reasoning_content", "refusal": b"refusal"}


def _messages_usage(usage: dict[str, Any]) -> dict[str, Any]:
    def count(key: str) -> int:
        value = usage.get(key)
        return value if type(value) is int else 0

    cached = count("cache_read_input_tokens")
    prompt = count("input_tokens") + cached + count("cache_creation_input_tokens")
    completion = count("output_tokens")
    out: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached:
        out["prompt_tokens_details"] = {"cached_tokens": cached}
    return out


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
        super().__init__(created=created, include_usage=include_usage)
        self._stream = MessagesStream(self._on_event, max_event_bytes=max_event_bytes)
        self._chars = 0  # content characters sent: where the next text block starts
        self._text_at: dict[int, int] = {}  # text block index -> its start in the content
        self._cited: dict[int, list[dict[str, Any]]] = {}  # text block index -> its web citations
        self._merged: dict[str, Any] = {}
        self._stop_reason: str | None = None
        self._kinds: dict[int, str] = {}

    def _dispatch(self, kind: str, payload: dict[str, Any]) -> None:
        if kind == "content_block_delta":
            index = payload.get("index")
            delta = payload.get("delta")
            if not _is_index(index) or type(delta) is not dict:
                self._skipped += 1
                return
            dtype = delta.get("type")
            if dtype == "text_delta":
                text = delta.get("text")
                self._content("content", text)
                if type(text) is str:
                    self._chars += len(text)
            elif dtype == "citations_delta":
                self._citation(index, delta.get("citation"))
            elif dtype == "thinking_delta":
                self._content("reasoning", delta.get("thinking"))
            elif dtype == "input_json_delta":
                self._tool_args(index, delta.get("partial_json"))
            else:
                self._dropped += 1
        elif kind == "content_block_start":
            index = payload.get("index")
            block = payload.get("content_block")
            if not _is_index(index) or type(block) is not dict:
                self._skipped += 1
                return
            btype = block.get("type")
            if btype in ("tool_use", "server_tool_use"):
                given = block.get("input")
                args = orjson.dumps(given).decode() if isinstance(given, dict) and given else ""
                self._tool_start(index, block.get("id"), block.get("name"), args)
            elif btype == "text":
                self._ensure()
                self._text_at[index] = self._chars
                text = block.get("text")
                self._content("content", text)
                if type(text) is str:
                    self._chars += len(text)
            elif btype == "thinking":
                self._ensure()
                self._content("reasoning", block.get("thinking"))
            else:
                self._dropped += 1
        elif kind == "message_start":
            message = payload.get("message")
            if type(message) is not dict:
                message = {}
            usage = message.get("usage")
            if type(usage) is dict:
                self._merged.update(usage)
            self._begin(message.get("id"), message.get("model"))
        elif kind == "message_delta":
            delta = payload.get("delta")
            if type(delta) is dict and isinstance(delta.get("stop_reason"), str):
                self._stop_reason = delta["stop_reason"]
            usage = payload.get("usage")
            if type(usage) is dict:
                self._merged.update({k: v for k, v in usage.items() if v is not None})
        elif kind == "message_stop":
            if self._merged:
                self._usage = _messages_usage(self._merged)
            self._finish(FINISH_FROM_MESSAGES.get(self._stop_reason or "end_turn", "stop"))
        elif kind == "error":
            error = payload.get("error")
            self._fail(error if error is not None else payload)
        elif kind == "content_block_stop":
            index = payload.get("index")
            cited = self._cited.pop(index, None) if _is_index(index) else None
            if cited and _is_index(index):
                # a citation covers its whole text block: in chat, the block's span of the content
                span = {"start_index": self._text_at.get(index, 0), "end_index": self._chars}
                self._annotations += [{"type": "url_citation", "url_citation": {**c, **span}} for c in cited]
        elif kind != "ping":
            self._skipped += 1

    def _citation(self, index: int, citation: object) -> None:
        if (
            type(citation) is dict
            and citation.get("type") == "web_search_result_location"
            and index in self._text_at
        ):
            found = {k: citation[k] for k in ("url", "title") if isinstance(citation.get(k), str)}
            self._cited.setdefault(index, []).append(found)
        else:
            self._dropped += 1  # document and search-result locations have no chat counterpart


def _responses_usage(usage: dict[str, Any]) -> dict[str, Any]:
    def count(value: object) -> int:
        return value if type(value) is int else 0

    prompt = count(usage.get("input_tokens"))
    completion = count(usage.get("output_tokens"))
    total = usage.get("total_tokens")
    out: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": total if type(total) is int else prompt + completion,
    }
    # zero details are left out: they are what a chat usage without details means
    details = usage.get("input_tokens_details")
    if isinstance(details, dict) and count(details.get("cached_tokens")):
        out["prompt_tokens_details"] = {"cached_tokens": details["cached_tokens"]}
    details = usage.get("output_tokens_details")
    if isinstance(details, dict) and count(details.get("reasoning_tokens")):
        out["completion_tokens_details"] = {"reasoning_tokens": details["reasoning_tokens"]}
    return out


_RESPONSES_TEXT: Final = {
    "response.output_text.delta": "content",
    "response.refusal.delta": "refusal",
    "response.reasoning_summary_text.delta": "reasoning",
    "response.reasoning_text.delta": "reasoning",
}


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
        super().__init__(created=created, include_usage=include_usage)
        self._stream = ResponsesStream(self._on_event, max_event_bytes=max_event_bytes)

    def _dispatch(self, kind: str, payload: dict[str, Any]) -> None:
        key = _RESPONSES_TEXT.get(kind)
        if key is not None:
            self._content(key, payload.get("delta"))
        elif kind == "response.function_call_arguments.delta":
            index = payload.get("output_index")
            if _is_index(index):
                self._tool_args(index, payload.get("delta"))
        elif kind == "response.output_text.annotation.added":
            note = payload.get("annotation")
            if type(note) is dict and note.get("type") == "url_citation":
                cited = {k: note[k] for k in ("url", "title", "start_index", "end_index") if k in note}
                self._annotations.append({"type": "url_citation", "url_citation": cited})
            else:
                self._dropped += 1  # file and container citations have no chat counterpart
        elif kind in ("response.output_item.added", "response.output_item.done"):
            self._item(payload.get("output_index"), payload.get("item"))
        elif kind in ("response.created", "response.in_progress"):
            response = payload.get("response")
            if type(response) is dict:
                self._begin(response.get("id"), response.get("model"), response.get("created_at"))
        elif kind in ("response.completed", "response.incomplete"):
            response = payload.get("response")
            if type(response) is not dict:
                response = {}
            usage = response.get("usage")
            if type(usage) is dict:
                self._usage = _responses_usage(usage)
            reason = "tool_calls" if self._calls else "stop"
            if kind == "response.incomplete":
                details = response.get("incomplete_details")
                why = details.get("reason") if isinstance(details, dict) else None
                reason = "content_filter" if why == "content_filter" else "length"
            self._finish(reason)
        elif kind == "response.failed":
            response = payload.get("response")
            error = response.get("error") if type(response) is dict else None
            self._fail(error if error is not None else {"message": "response.failed"})
        elif kind == "error":
            error = payload.get("error")
            if error is None:
                error = {k: v for k, v in payload.items() if k not in ("type", "sequence_number")}
            self._fail(error)

    def _item(self, index: object, item: object) -> None:
        if not _is_index(index) or type(item) is not dict or item.get("type") != "function_call":
            return
        arguments = item.get("arguments")
        arguments = arguments if isinstance(arguments, str) else ""
        if index not in self._calls:
            self._tool_start(index, item.get("call_id"), item.get("name"), arguments)
            return
        # a done item whose argument deltas were never streamed (or only in part): send the rest
        sent = self._args_sent[self._calls[index]]
        if len(arguments) > sent:
            self._tool_args(index, arguments[sent:])


class _Chain:
    """Two translators in a row: Messages <-> Responses through chat."""

    def __init__(self, first: Translator, second: Translator) -> None:
        self._first = first
        self._second = second

    def write(self, data: bytes | bytearray | memoryview, /) -> bytes:
        return self._second.write(self._first.write(data))

    def close(self, *, truncated: bool = False) -> bytes:
        return self._second.write(self._first.close(truncated=truncated)) + self._second.close()

    def result(self) -> dict[str, Any]:
        """The upstream's fold (the first translator's), with its verdict."""
        return self._first.result()


def translator(source: str, target: str, /, **options: Any) -> Translator:
    """``translator(source, target, /, **options) -> Translator``

    Return a translator from ``source`` to ``target`` (each ``"chat"``, ``"responses"`` or
    ``"messages"``): ``ChatToMessages``, ``ChatToResponses``, ``MessagesToChat``,
    ``ResponsesToChat``, or for Messages <-> Responses the two through chat in a row. ``options``
    go to the class(es) (``max_event_bytes``; ``created`` and ``include_usage`` towards chat).
    It raises ValueError for an unknown API or ``source == target`` and TypeError for an option
    the class does not take.
    """
    if source not in APIS or target not in APIS:
        raise ValueError(f"unknown API {source if source not in APIS else target!r}; expected one of {APIS}")
    if source == target:
        raise ValueError(f"nothing to translate: source and target are both {source!r}")
    limit = {"max_event_bytes": options["max_event_bytes"]} if "max_event_bytes" in options else {}
    if source == "chat":
        return (ChatToMessages if target == "messages" else ChatToResponses)(**options)
    to_chat = (MessagesToChat if source == "messages" else ResponsesToChat)(
        **{k: v for k, v in options.items() if k != "max_event_bytes"} | limit
    )
    if target == "chat":
        return to_chat
    return _Chain(to_chat, (ChatToMessages if target == "messages" else ChatToResponses)(**limit))

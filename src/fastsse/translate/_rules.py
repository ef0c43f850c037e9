"""The translation rules both backends share: one implementation.

A core remembers what a translation has written (the target encoder's state, the tool calls
opened, the usage held for the end) and turns each parsed upstream chunk or event into the
target's bytes, appended to ``out`` in order. The pure-Python translators (``translate/_from_chat_py.py``, ``_to_chat_py.py``)
hand it every chunk; the compiled ones (``translate/_from_chat_c.pyx``) write the hot deltas themselves and
hand it the rest, syncing what they changed first, so both write the same bytes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final, TypeGuard

import orjson

from ..apis import APIS
from ..chat.encode import ChatChunkEncoder
from ..messages.encode import STOP_REASONS, MessagesEncoder, chat_usage_to_messages
from ..responses.encode import INCOMPLETE, ResponsesEncoder, chat_usage_to_responses

_RESPONSES_WHOLE: Final = APIS["responses"].whole


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


class FromChat:
    """What a chat -> Messages / Responses translation remembers, and the walk over each parsed
    chunk (choice 0) that calls the target's encoder. ``on_chunk`` is the fold stream's callback;
    ``out`` collects the translated bytes in order; ``end_if(whole)`` writes the terminal event
    once the upstream answer is whole (then ``complete``: nothing more is written). Both backends
    drive it: the pure one for every chunk, the compiled one for every chunk its fast path
    leaves."""

    def __init__(self) -> None:
        self.out: list[bytes] = []
        self.begun = False
        self.ended = False
        self.complete = False  # the terminal event of a whole answer went out (not an error's)
        self.calls: dict[int, _Call] = {}
        self.last_call: int | None = None
        self.finish: str | None = None
        self.usage: dict[str, Any] | None = None
        self.dropped = 0
        self.notes_sent = 0  # chat annotations already carried (chat resends the whole list)
        self.keys: list[_Call] = []

    def end_if(self, whole: bool) -> None:
        """Write the terminal event when choice 0 finished and ``whole`` (``[DONE]`` came, or the
        stream closed complete), once."""
        if whole and self.finish is not None and not self.ended:
            self._end()

    def take(self) -> bytes:
        """The bytes translated since the last call."""
        out = b"".join(self.out)
        self.out.clear()
        return out

    # the chunk walk

    def on_chunk(self, chunk: dict[str, Any]) -> None:
        if self.ended:
            return
        if not self.begun:
            self.begun = True
            self._begin(chunk)
        error = chunk.get("error")
        if error is not None:
            self.ended = True
            self._fail(error)
            return
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = usage
        choices = chunk.get("choices")
        if type(choices) is not list:
            return
        for pos, choice in enumerate(choices):
            if type(choice) is not dict:
                continue
            index = choice.get("index")
            if (pos if index is None else index) != 0:
                self.dropped += 1
                continue
            delta = choice.get("delta")
            if delta is None:
                delta = choice.get("message")
            if type(delta) is dict:
                self._delta(delta)
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                self.finish = reason

    def _delta(self, delta: dict[str, Any]) -> None:
        if len(delta) == 1:
            # the hot path: a delta holding only content (or only reasoning)
            content = delta.get("content")
            if type(content) is str:
                if content:
                    self.out.append(self._text(content))
                return
        # one chunk may carry reasoning, content and tool calls at once: each is carried, in that order
        reasoning = delta.get("reasoning_content")
        if reasoning is None:
            reasoning = delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            self.out.append(self._reasoning(reasoning))
        details = delta.get("reasoning_details")
        if type(details) is list:
            self._details(details)
        content = delta.get("content")
        if isinstance(content, str) and content:
            self.out.append(self._text(content))
        refusal = delta.get("refusal")
        if isinstance(refusal, str) and refusal:
            self.out.append(self._refusal(refusal))
        notes = delta.get("annotations")
        if type(notes) is list and len(notes) > self.notes_sent:
            self._annotations(notes)
        calls = delta.get("tool_calls")
        if type(calls) is list:
            for fragment in calls:
                if type(fragment) is dict:
                    self._tool_fragment(fragment)
        legacy = delta.get("function_call")
        if type(legacy) is dict:
            self._tool_fragment({"index": 0, "function": legacy})

    def _details(self, details: list[Any]) -> None:
        # OpenRouter's reasoning_details: the text is also in reasoning / reasoning_content, so only
        # what has no other place is carried: a thinking block's signature, a redacted block.
        for entry in details:
            if type(entry) is not dict:
                continue
            kind = entry.get("type")
            if kind == "reasoning.text":
                signature = entry.get("signature")
                if isinstance(signature, str) and signature:
                    self._signature(signature)
            elif kind == "reasoning.encrypted":
                data = entry.get("data")
                if isinstance(data, str) and data:
                    self._redacted(data)

    def _signature(self, signature: str) -> None:
        self.dropped += 1  # Responses has no place for it; MessagesFromChat overrides

    def _redacted(self, data: str) -> None:
        self.dropped += 1

    def _tool_fragment(self, fragment: dict[str, Any]) -> None:
        index = fragment.get("index")
        if not _is_index(index):
            index = self.last_call if self.last_call is not None else 0
        function = fragment.get("function")
        name = args = None
        if type(function) is dict:
            name = function.get("name")
            args = function.get("arguments")
        name = name if isinstance(name, str) and name else None
        args = args if isinstance(args, str) and args else None
        call_id = fragment.get("id")
        call_id = call_id if isinstance(call_id, str) and call_id else None
        call = self.calls.get(index)
        if call is not None and call_id and name and call.id and call_id != call.id:
            call = None  # a new id with a name at a used index: a new call (Gemini, Ollama)
        if call is None:
            call = _Call(len(self.keys))
            self.calls[index] = call
            self.keys.append(call)
        self.last_call = index
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
                self.out.append(self._tool_start(call.key, call.id, call.name, "".join(call.args)))
                call.args.clear()
        elif args:
            self.out.append(self._tool_args(call.key, args))

    def _annotations(self, notes: list[Any]) -> None:
        # Messages has no place for them; ChatToResponses overrides
        self.dropped += len(notes) - self.notes_sent
        self.notes_sent = len(notes)

    def _end(self) -> None:
        self.ended = self.complete = True
        for call in self.keys:
            if not call.started:
                self.dropped += 1  # a tool call that never got a name has no counterpart
        assert self.finish is not None
        self.out.append(self._stop(self.finish, self.usage))

    # the target's hooks: the encoder's delta methods themselves, bound in _begin (one call less per delta)

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


class MessagesFromChat(FromChat):
    """The chat -> Messages translation (the core of ``ChatToMessages``)."""

    def __init__(self) -> None:
        super().__init__()
        self.enc: MessagesEncoder | None = None

    def fast_state(self) -> tuple[Any, ...] | None:
        """What the compiled fast path writes with, read again after every event this core saw:
        None before the first chunk and after the end, else (the open block's kind or None, its
        delta frame, {chat tool-call index: the ``input_json_delta`` frame of its block}, the last
        tool-call index)."""
        enc = self.enc
        if enc is None or self.ended:
            return None
        frame = enc._text_frame()
        calls = {}
        for index, call in self.calls.items():
            if call.started:
                prefix = enc._input_frame(call.key)
                if prefix is not None:
                    calls[index] = prefix
        kind, prefix = frame if frame is not None else (None, None)
        return kind, prefix, calls, self.last_call

    def _begin(self, chunk: dict[str, Any]) -> None:
        ident, model = _head(chunk, "msg_fastsse")
        self.enc = MessagesEncoder(id=ident, model=model)
        self.out.append(self.enc.start())
        self._text = self._refusal = self.enc.text
        self._reasoning = self.enc.thinking

    def _signature(self, signature: str) -> None:
        # the signature of the open thinking block, which it closes; with none open it has no place
        assert self.enc is not None
        try:
            self.out.append(self.enc.signature(signature))
        except ValueError:
            self.dropped += 1

    def _redacted(self, data: str) -> None:
        assert self.enc is not None
        self.out.append(self.enc.redacted_thinking(data))

    def _tool_start(self, key: int, call_id: str, name: str, args: str) -> bytes:
        assert self.enc is not None
        return self.enc.tool_use(key, id=call_id, name=name, input_json=args)

    def _tool_args(self, key: int, args: str) -> bytes:
        assert self.enc is not None
        return self.enc.input_json(key, args)

    def _stop(self, finish: str, usage: dict[str, Any] | None) -> bytes:
        assert self.enc is not None
        return self.enc.stop(
            STOP_REASONS.get(finish, "end_turn"),
            usage=chat_usage_to_messages(usage) if usage is not None else None,
        )

    def _fail(self, error: Any) -> None:
        assert self.enc is not None
        _, message = _error_message(error)
        kind = error.get("type") if isinstance(error, dict) else None
        self.out.append(self.enc.error(type=kind if isinstance(kind, str) else "api_error", message=message))


class ResponsesFromChat(FromChat):
    """The chat -> Responses translation (the core of ``ChatToResponses``)."""

    def __init__(self) -> None:
        super().__init__()
        self.enc: ResponsesEncoder | None = None

    def fast_state(self) -> tuple[Any, ...] | None:
        """What the compiled fast path writes with, read again after every event this core saw:
        None before the first chunk and after the end, else (the open part's frame from
        ``ResponsesEncoder._text_frame`` or None, {chat tool-call index: its arguments frame},
        the last tool-call index, the next sequence number)."""
        enc = self.enc
        if enc is None or self.ended:
            return None
        calls = {}
        for index, call in self.calls.items():
            if call.started:
                frame = enc._arguments_frame(call.key)
                if frame is not None:
                    calls[index] = frame
        return enc._text_frame(), calls, self.last_call, enc.sequence_number

    def _begin(self, chunk: dict[str, Any]) -> None:
        ident, model = _head(chunk, "resp_fastsse")
        created = chunk.get("created")
        self.enc = ResponsesEncoder(
            id=ident, model=model, created_at=created if type(created) is int else None
        )
        self.out.append(self.enc.start())
        self._text = self.enc.text
        self._refusal = self.enc.refusal
        self._reasoning = self.enc.reasoning

    def _annotations(self, notes: list[Any]) -> None:
        assert self.enc is not None
        for note in notes[self.notes_sent :]:
            cited = note.get("url_citation") if type(note) is dict else None
            if type(cited) is not dict or note.get("type") != "url_citation":
                self.dropped += 1  # not a url_citation: it has no counterpart
                continue
            try:
                self.out.append(self.enc.annotation({"type": "url_citation", **cited}))
            except (ValueError, AttributeError):
                self.dropped += 1  # no open text part to hold it (the encoder's EncodeError)
        self.notes_sent = len(notes)

    def _tool_start(self, key: int, call_id: str, name: str, args: str) -> bytes:
        assert self.enc is not None
        return self.enc.function_call(key, call_id=call_id, name=name, arguments=args)

    def _tool_args(self, key: int, args: str) -> bytes:
        assert self.enc is not None
        return self.enc.arguments(key, args)

    def _stop(self, finish: str, usage: dict[str, Any] | None) -> bytes:
        assert self.enc is not None
        return self.enc.complete(
            usage=chat_usage_to_responses(usage) if usage is not None else None,
            incomplete_reason=INCOMPLETE.get(finish),
        )

    def _fail(self, error: Any) -> None:
        assert self.enc is not None
        code, message = _error_message(error)
        self.out.append(self.enc.fail(code=code, message=message))


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


# ToChat._content key -> the chat delta field (ChatChunkEncoder's default reasoning key)
_CHAT_FIELDS: Final = {"content": b"content", "reasoning": b"reasoning_content", "refusal": b"refusal"}
# what follows the JSON string in a chat chunk of choice 0: after a text delta, after a tool call's
# arguments fragment
TEXT_TAIL: Final = b'},"finish_reason":null}]}\n\n'
ARGUMENTS_TAIL: Final = b'}}]},"finish_reason":null}]}\n\n'
# a Messages thinking delta in chat: reasoning_content, THINKING_MID, the same string again,
# THINKING_TAIL with the block's index
THINKING_FORMAT: Final = "anthropic-claude-v1"
THINKING_MID: Final = b',"reasoning_details":[{"type":"reasoning.text","text":'
THINKING_TAIL: Final = b',"format":"anthropic-claude-v1","index":%d}]},"finish_reason":null}]}\n\n'


class ToChat:
    """What a Messages / Responses -> chat translation remembers: ``on_event`` takes each event the
    fold stream parsed and writes chat chunks with ``ChatChunkEncoder`` into ``out``. Both backends
    drive it: the pure one for every event, the compiled one for every event its fast path leaves."""

    def __init__(self, *, created: int | None, include_usage: bool) -> None:
        self._created = created
        self._include_usage = include_usage
        self.enc: ChatChunkEncoder | None = None
        self.out: list[bytes] = []
        self.ended = False
        self.complete = False
        self.error: Any = None
        self.calls: dict[int, int] = {}  # upstream block or output index -> chat tool-call index
        self.args_sent: dict[int, int] = {}  # chat tool-call index -> argument characters sent
        self._ids: set[str] = set()
        self._usage: dict[str, Any] | None = None
        self.dropped = 0
        self.skipped = 0
        self.prefixes: dict[str, bytes] = {}
        self._annotations: list[dict[str, Any]] = []  # url_citation annotations, sent before the end

    def take(self) -> bytes:
        """The chat bytes translated since the last call."""
        out = b"".join(self.out)
        self.out.clear()
        return out

    def on_event(self, payload: dict[str, Any]) -> None:
        # the fold stream parsed and folded it already; an untyped payload is in its verdict
        if self.ended:
            return
        kind = payload.get("type")
        if isinstance(kind, str):
            self._dispatch(kind, payload)
        else:
            self.skipped += 1

    def _dispatch(self, kind: str, payload: dict[str, Any]) -> None:
        raise NotImplementedError

    def fast_state(self) -> tuple[Any, ...] | None:
        """What the compiled fast path writes with, read again after every event this core saw:
        None before the role chunk and after the end, else (the frames of a content, reasoning and
        refusal delta up to the JSON string, {upstream block or output index: (chat tool-call
        index, the frame of its arguments fragment up to the string)}, whether a reasoning delta
        carries its string twice). The text frames end with ``TEXT_TAIL`` (a reasoning delta of
        Messages with ``THINKING_MID``, the string, ``THINKING_TAIL``), the arguments frames with
        ``ARGUMENTS_TAIL``."""
        enc = self.enc
        if enc is None or self.ended:
            return None
        head = enc._head + b'{"index":0,"delta":{"tool_calls":[{"index":'
        calls = {up: (i, head + b'%d,"function":{"arguments":' % i) for up, i in self.calls.items()}
        prefixes = self.prefixes
        return prefixes["content"], prefixes["reasoning"], prefixes["refusal"], calls, self._THINKING

    _THINKING = False  # reasoning deltas carry reasoning_details too (THINKING_MID, THINKING_TAIL)

    def _begin(self, ident: object, model: object, created: object = None) -> None:
        if self.enc is not None:
            return
        when = self._created if self._created is not None else created
        self.enc = ChatChunkEncoder(
            id=ident if isinstance(ident, str) and ident else "chatcmpl-fastsse",
            model=model if isinstance(model, str) else "",
            created=when if type(when) is int else int(time.time()),
        )
        self.out.append(self.enc.role())
        # the bytes ChatChunkEncoder writes for a delta of choice 0, around the text: the hot path
        head = self.enc._head + b'{"index":0,"delta":{"'
        self.prefixes = {key: head + field + b'":' for key, field in _CHAT_FIELDS.items()}

    def _ensure(self) -> ChatChunkEncoder:
        if self.enc is None:
            self._begin(None, None)
        assert self.enc is not None
        return self.enc

    def _content(self, key: str, text: object) -> None:
        if type(text) is str and text:
            if self.enc is None:
                self._begin(None, None)
            self.out.append(self.prefixes[key] + orjson.dumps(text) + TEXT_TAIL)

    def _tool_start(self, upstream: int, call_id: object, name: object, args: str = "") -> None:
        if upstream in self.calls or not isinstance(name, str) or not name:
            self.dropped += 1
            return
        enc = self._ensure()
        index = len(self.calls)
        ident = (
            call_id if isinstance(call_id, str) and call_id and call_id not in self._ids else f"call_{index}"
        )
        self._ids.add(ident)
        self.calls[upstream] = index
        self.args_sent[index] = len(args)
        self.out.append(enc.tool_call(index, id=ident, name=name, arguments=args))

    def _tool_args(self, upstream: int, args: object) -> None:
        index = self.calls.get(upstream)
        if index is None or not isinstance(args, str) or not args:
            if index is None:
                self.dropped += 1
            return
        self.args_sent[index] += len(args)
        self.out.append(self._ensure().tool_call(index, arguments=args))

    def _finish(self, reason: str) -> None:
        enc = self._ensure()
        if self._annotations:
            # chat keeps the last annotations list a delta sends: all of them, once, before the end
            choice = {"index": 0, "delta": {"annotations": self._annotations}, "finish_reason": None}
            self.out.append(enc._head + orjson.dumps(choice) + b"]}\n\n")
        if reason == "tool_calls" and not self.calls:
            reason = "stop"
        self.out.append(enc.finish(reason))
        if self._include_usage and self._usage is not None:
            self.out.append(enc.usage(self._usage))
        self.out.append(enc.done())
        self.ended = True
        self.complete = True

    def _fail(self, error: Any) -> None:
        self._ensure()
        self.error = error
        self.ended = True
        self.out.append(b"data: " + orjson.dumps({"error": error}) + b"\n\n")


def _messages_usage(usage: dict[str, Any]) -> dict[str, Any]:
    # no helper function: this runs once per whole answer translated (translate.response)
    get = usage.get
    cached, fresh, written, completion = (
        get("cache_read_input_tokens"),
        get("input_tokens"),
        get("cache_creation_input_tokens"),
        get("output_tokens"),
    )
    cached = cached if type(cached) is int else 0
    prompt = cached + (fresh if type(fresh) is int else 0) + (written if type(written) is int else 0)
    completion = completion if type(completion) is int else 0
    out: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached:
        out["prompt_tokens_details"] = {"cached_tokens": cached}
    return out


class ChatFromMessages(ToChat):
    """The Messages -> chat translation (the core of ``MessagesToChat``)."""

    _THINKING = True

    def __init__(self, *, created: int | None = None, include_usage: bool = True) -> None:
        super().__init__(created=created, include_usage=include_usage)
        self.chars = 0  # content characters sent: where the next text block starts
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
                self.skipped += 1
                return
            dtype = delta.get("type")
            if dtype == "text_delta":
                text = delta.get("text")
                self._content("content", text)
                if type(text) is str:
                    self.chars += len(text)
            elif dtype == "citations_delta":
                self._citation(index, delta.get("citation"))
            elif dtype == "thinking_delta":
                self._thinking(index, delta.get("thinking"))
            elif dtype == "input_json_delta":
                self._tool_args(index, delta.get("partial_json"))
            elif (
                dtype == "signature_delta" and isinstance(delta.get("signature"), str) and delta["signature"]
            ):
                # chat's place for it is OpenRouter's reasoning_details, under the block's index,
                # where the block's thinking went too: what a client sends back to go on
                self._detail(index, {"type": "reasoning.text", "signature": delta["signature"]})
            else:
                self.dropped += 1
        elif kind == "content_block_start":
            index = payload.get("index")
            block = payload.get("content_block")
            if not _is_index(index) or type(block) is not dict:
                self.skipped += 1
                return
            btype = block.get("type")
            if btype in ("tool_use", "server_tool_use"):
                given = block.get("input")
                args = orjson.dumps(given).decode() if isinstance(given, dict) and given else ""
                self._tool_start(index, block.get("id"), block.get("name"), args)
            elif btype == "text":
                self._ensure()
                self._text_at[index] = self.chars
                text = block.get("text")
                self._content("content", text)
                if type(text) is str:
                    self.chars += len(text)
            elif btype == "thinking":
                self._ensure()
                self._thinking(index, block.get("thinking"))
            elif btype == "redacted_thinking" and isinstance(block.get("data"), str) and block["data"]:
                self._detail(index, {"type": "reasoning.encrypted", "data": block["data"]})
            else:
                self.dropped += 1
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
                span = {"start_index": self._text_at.get(index, 0), "end_index": self.chars}
                self._annotations += [{"type": "url_citation", "url_citation": {**c, **span}} for c in cited]
        elif kind != "ping":
            self.skipped += 1

    def _thinking(self, index: int, text: object) -> None:
        # thinking goes out as reasoning_content and, for the client that sends the block back
        # with its signature, as a reasoning_details part under the block's index (OpenRouter's
        # shape: both names in one delta)
        if type(text) is str and text:
            if self.enc is None:
                self._begin(None, None)
            piece = orjson.dumps(text)
            self.out.append(self.prefixes["reasoning"] + piece + THINKING_MID + piece + THINKING_TAIL % index)

    def _detail(self, index: int, entry: dict[str, Any]) -> None:
        # one reasoning_details entry in OpenRouter's shape, under the block's index
        enc = self._ensure()
        entry["format"] = THINKING_FORMAT
        entry["index"] = index
        choice = {"index": 0, "delta": {"reasoning_details": [entry]}, "finish_reason": None}
        self.out.append(enc._head + orjson.dumps(choice) + b"]}\n\n")

    def _citation(self, index: int, citation: object) -> None:
        if (
            type(citation) is dict
            and citation.get("type") == "web_search_result_location"
            and index in self._text_at
        ):
            found = {k: citation[k] for k in ("url", "title") if isinstance(citation.get(k), str)}
            self._cited.setdefault(index, []).append(found)
        else:
            self.dropped += 1  # document and search-result locations have no chat counterpart


def _responses_usage(usage: dict[str, Any]) -> dict[str, Any]:
    prompt = usage.get("input_tokens")
    prompt = prompt if type(prompt) is int else 0
    completion = usage.get("output_tokens")
    completion = completion if type(completion) is int else 0
    total = usage.get("total_tokens")
    out: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": total if type(total) is int else prompt + completion,
    }
    # zero details are left out: they are what a chat usage without details means
    details = usage.get("input_tokens_details")
    if isinstance(details, dict) and type(details.get("cached_tokens")) is int and details["cached_tokens"]:
        out["prompt_tokens_details"] = {"cached_tokens": details["cached_tokens"]}
    details = usage.get("output_tokens_details")
    if (
        isinstance(details, dict)
        and type(details.get("reasoning_tokens")) is int
        and details["reasoning_tokens"]
    ):
        out["completion_tokens_details"] = {"reasoning_tokens": details["reasoning_tokens"]}
    return out


_RESPONSES_TEXT: Final = {
    "response.output_text.delta": "content",
    "response.refusal.delta": "refusal",
    "response.reasoning_summary_text.delta": "reasoning",
    "response.reasoning_text.delta": "reasoning",
}


class ChatFromResponses(ToChat):
    """The Responses -> chat translation (the core of ``ResponsesToChat``)."""

    def __init__(self, *, created: int | None = None, include_usage: bool = True) -> None:
        super().__init__(created=created, include_usage=include_usage)

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
                self.dropped += 1  # file and container citations have no chat counterpart
        elif kind in ("response.output_item.added", "response.output_item.done"):
            self._item(payload.get("output_index"), payload.get("item"))
        elif kind in ("response.created", "response.in_progress"):
            response = payload.get("response")
            if type(response) is dict:
                self._begin(response.get("id"), response.get("model"), response.get("created_at"))
        elif kind in _RESPONSES_WHOLE:
            response = payload.get("response")
            if type(response) is not dict:
                response = {}
            usage = response.get("usage")
            if type(usage) is dict:
                self._usage = _responses_usage(usage)
            reason = "tool_calls" if self.calls else "stop"
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
        if index not in self.calls:
            self._tool_start(index, item.get("call_id"), item.get("name"), arguments)
            return
        # a done item whose argument deltas were never streamed (or only in part): send the rest
        sent = self.args_sent[self.calls[index]]
        if len(arguments) > sent:
            self._tool_args(index, arguments[sent:])

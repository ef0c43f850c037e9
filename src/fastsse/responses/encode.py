"""The OpenAI Responses stream grammar, written exactly: ``ResponsesEncoder``.

Every event is ``event: <type>\\ndata: <compact JSON>\\n\\n`` and its payload repeats the type and
carries a ``sequence_number`` that starts at 0 and grows by one. Output items are announced with
``response.output_item.added`` before any delta names their ``output_index``, every part and item is
closed with its ``.done`` events carrying the whole text, and the stream ends with exactly one of
``response.completed``, ``response.incomplete`` or ``response.failed`` holding the full response.
"""

from __future__ import annotations

import time
from typing import Any, Final

import orjson

from .._errors import EncodeError

__all__ = ["ResponsesEncoder", "chat_usage_to_responses"]

# chat finish_reason -> (terminal status, incomplete_details.reason)
INCOMPLETE: Final[dict[str, str]] = {"length": "max_output_tokens", "content_filter": "content_filter"}


def chat_usage_to_responses(usage: dict[str, Any], /) -> dict[str, Any]:
    """``chat_usage_to_responses(usage) -> dict``: a chat ``usage`` object in the Responses shape.

    ``prompt_tokens`` -> ``input_tokens``, ``completion_tokens`` -> ``output_tokens``, the cached
    and reasoning token details carried over (0 when absent), ``total_tokens`` kept or summed.
    It raises TypeError if ``usage`` is not a dict.
    """
    if not isinstance(usage, dict):
        raise TypeError(f"usage must be a dict, not {type(usage).__name__}")
    prompt = _int(usage.get("prompt_tokens"))
    completion = _int(usage.get("completion_tokens"))
    total = usage.get("total_tokens")
    prompt_details = usage.get("prompt_tokens_details")
    completion_details = usage.get("completion_tokens_details")
    cached = _int(prompt_details.get("cached_tokens")) if isinstance(prompt_details, dict) else 0
    reasoning = (
        _int(completion_details.get("reasoning_tokens")) if isinstance(completion_details, dict) else 0
    )
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": total if type(total) is int else prompt + completion,
    }


def _int(value: object) -> int:
    return value if type(value) is int else 0


class _Item:
    __slots__ = ("arguments", "call_id", "done", "id", "index", "kind", "name", "notes", "part", "parts")

    def __init__(self, kind: str, index: int, id: str) -> None:
        self.kind = kind  # "message", "reasoning" or "function_call"
        self.index = index
        self.id = id
        self.done = False
        self.parts: list[list[Any]] = []  # [part type, fragments]: message content or reasoning summary
        self.part: list[Any] | None = None  # the open part
        self.call_id = ""
        self.name = ""
        self.arguments: list[str] = []
        self.notes: dict[int, list[dict[str, Any]]] = {}  # content index -> annotations

    def as_dict(self) -> dict[str, Any]:
        status = "completed" if self.done else "in_progress"
        if self.kind == "message":
            content = [
                _part_dict(kind, "".join(frags), self.notes.get(pos))
                for pos, (kind, frags) in enumerate(self.parts)
            ]
            return {
                "id": self.id,
                "type": "message",
                "status": status,
                "role": "assistant",
                "content": content,
            }
        if self.kind == "reasoning":
            summary = [{"type": "summary_text", "text": "".join(frags)} for _, frags in self.parts]
            return {"id": self.id, "type": "reasoning", "summary": summary}
        return {
            "id": self.id,
            "type": "function_call",
            "status": status,
            "arguments": "".join(self.arguments),
            "call_id": self.call_id,
            "name": self.name,
        }


def _part_dict(kind: str, text: str, notes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    if kind == "refusal":
        return {"type": "refusal", "refusal": text}
    return {"type": "output_text", "text": text, "annotations": list(notes) if notes else []}


class ResponsesEncoder:
    """``ResponsesEncoder(*, id, model, created_at=None)``: writes one Responses event stream.

    Every method returns the bytes of zero or more events. ``start()`` first (``response.created``
    and ``response.in_progress``); then any of ``text``, ``refusal``, ``reasoning``,
    ``function_call`` and ``arguments``, which open the items and parts they need; then exactly one
    of ``complete(...)`` or ``fail(...)``. Text and refusals go into one open ``message`` item (a
    switch between them opens a new content part), reasoning into one open ``reasoning`` item
    (a summary part); text or a refusal closes an open reasoning item, reasoning closes an open
    message, and a function call closes both, since none can be reopened. Function calls are items of their own, addressed by a
    caller-chosen ``key``; several may be open at once and their deltas may interleave. ``complete``
    closes every open item in ``output_index`` order. ``created_at`` defaults to the current time.
    One encoder per stream; not thread-safe.

    Each method raises EncodeError (a ValueError) when the call would break the grammar: anything before
    ``start`` or after the terminal event, ``start`` twice, an empty delta, a function call
    without ``call_id`` and ``name`` or a key used twice, arguments for an unknown or finished call.
    """

    __slots__ = (
        "_calls",
        "_ended",
        "_fast",
        "_fast_head",
        "_fast_tail",
        "_fast_where",
        "_items",
        "_message",
        "_reasoning",
        "_response",
        "_seq",
        "_started",
    )

    def __init__(self, *, id: str, model: str, created_at: int | None = None) -> None:
        if not isinstance(id, str) or not id:
            raise EncodeError("id must be a non-empty string")
        self._response: dict[str, Any] = {
            "id": id,
            "object": "response",
            "created_at": int(time.time()) if created_at is None else created_at,
            "status": "in_progress",
            "error": None,
            "incomplete_details": None,
            "model": model,
            "output": [],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": None,
        }
        self._seq = 0
        self._items: list[_Item] = []
        self._calls: dict[object, _Item] = {}
        self._message: _Item | None = None
        self._reasoning: _Item | None = None
        self._started = False
        self._ended = False
        self._fast: str | None = None  # the kind whose open part the cached event pieces address
        self._fast_head = self._fast_where = self._fast_tail = b""

    @property
    def sequence_number(self) -> int:
        """The ``sequence_number`` the next event will carry."""
        return self._seq

    @property
    def started(self) -> bool:
        """True once ``start()`` was written."""
        return self._started

    @property
    def ended(self) -> bool:
        """True once the terminal event was written."""
        return self._ended

    def _event(self, type_: str, body: dict[str, Any]) -> bytes:
        payload = {"type": type_, "sequence_number": self._seq}
        payload.update(body)
        self._seq += 1
        return b"event: " + type_.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"

    def _check(self, what: str) -> None:
        if not self._started:
            raise EncodeError(f"{what} before start(): the stream opens with response.created")
        if self._ended:
            raise EncodeError(f"{what} after the terminal event")

    def start(self) -> bytes:
        """``response.created`` and ``response.in_progress``, with an empty output."""
        if self._started:
            raise EncodeError("start() twice")
        self._started = True
        snapshot = dict(self._response)
        return self._event("response.created", {"response": snapshot}) + self._event(
            "response.in_progress", {"response": snapshot}
        )

    # items and parts

    def _add_item(self, kind: str, prefix: str, call_id: str = "", name: str = "") -> tuple[_Item, bytes]:
        index = len(self._items)
        item = _Item(kind, index, f"{prefix}_{index}_{self._response['id']}")
        item.call_id = call_id
        item.name = name
        self._items.append(item)
        return item, self._event(
            "response.output_item.added", {"output_index": index, "item": item.as_dict()}
        )

    def _close_part(self, item: _Item) -> bytes:
        self._fast = None
        part = item.part
        if part is None:
            return b""
        item.part = None
        text = "".join(part[1])
        pos = len(item.parts) - 1
        if item.kind == "reasoning":
            where = {"item_id": item.id, "output_index": item.index, "summary_index": pos}
            return self._event("response.reasoning_summary_text.done", {**where, "text": text}) + self._event(
                "response.reasoning_summary_part.done",
                {**where, "part": {"type": "summary_text", "text": text}},
            )
        where = {"item_id": item.id, "output_index": item.index, "content_index": pos}
        if part[0] == "refusal":
            done = self._event("response.refusal.done", {**where, "refusal": text})
        else:
            done = self._event("response.output_text.done", {**where, "text": text, "logprobs": []})
        part_dict = _part_dict(part[0], text, item.notes.get(pos))
        return done + self._event("response.content_part.done", {**where, "part": part_dict})

    def _close_item(self, item: _Item) -> bytes:
        if item.done:
            return b""
        out = self._close_part(item)
        if item.kind == "function_call":
            out += self._event(
                "response.function_call_arguments.done",
                {
                    "item_id": item.id,
                    "output_index": item.index,
                    "name": item.name,
                    "arguments": "".join(item.arguments),
                },
            )
        item.done = True
        if item is self._message:
            self._message = None
        elif item is self._reasoning:
            self._reasoning = None
        return out + self._event(
            "response.output_item.done", {"output_index": item.index, "item": item.as_dict()}
        )

    def _content(self, kind: str, delta: str) -> bytes:
        item = self._reasoning if kind == "reasoning" else self._message
        if item is not None and self._fast == kind and type(delta) is str and delta and not self._ended:
            # the hot path: one more delta for the open part, its event built around a cached prefix
            assert item.part is not None
            item.part[1].append(delta)
            seq = self._seq
            self._seq = seq + 1
            return self._fast_head + b"%d" % seq + self._fast_where + orjson.dumps(delta) + self._fast_tail
        self._check(f"{kind}()")
        if not isinstance(delta, str):
            raise TypeError(f"{kind} delta must be a str, not {type(delta).__name__}")
        if not delta:
            raise EncodeError(f"empty {kind} delta")
        out = b""
        if kind == "reasoning":
            if self._message is not None:
                out += self._close_item(self._message)
            item = self._reasoning
            if item is None:
                item, added = self._add_item("reasoning", "rs")
                self._reasoning = item
                out += added
        else:
            if self._reasoning is not None:
                out += self._close_item(self._reasoning)
            item = self._message
            if item is None:
                item, added = self._add_item("message", "msg")
                self._message = item
                out += added
        part_kind = "summary_text" if kind == "reasoning" else kind
        part = item.part
        if part is None or part[0] != part_kind:
            out += self._close_part(item)
            part = [part_kind, []]
            item.parts.append(part)
            item.part = part
            pos = len(item.parts) - 1
            if kind == "reasoning":
                out += self._event(
                    "response.reasoning_summary_part.added",
                    {
                        "item_id": item.id,
                        "output_index": item.index,
                        "summary_index": pos,
                        "part": {"type": "summary_text", "text": ""},
                    },
                )
            else:
                out += self._event(
                    "response.content_part.added",
                    {
                        "item_id": item.id,
                        "output_index": item.index,
                        "content_index": pos,
                        "part": _part_dict(kind, ""),
                    },
                )
        part[1].append(delta)
        pos = len(item.parts) - 1
        self._cache_fast(kind, item, pos)
        if kind == "reasoning":
            return out + self._event(
                "response.reasoning_summary_text.delta",
                {"item_id": item.id, "output_index": item.index, "summary_index": pos, "delta": delta},
            )
        if kind == "refusal":
            return out + self._event(
                "response.refusal.delta",
                {"item_id": item.id, "output_index": item.index, "content_index": pos, "delta": delta},
            )
        return out + self._event(
            "response.output_text.delta",
            {
                "item_id": item.id,
                "output_index": item.index,
                "content_index": pos,
                "delta": delta,
                "logprobs": [],
            },
        )

    def _cache_fast(self, kind: str, item: _Item, pos: int) -> None:
        event = {
            "reasoning": "response.reasoning_summary_text.delta",
            "refusal": "response.refusal.delta",
            "text": "response.output_text.delta",
        }[kind]
        index_key = b"summary_index" if kind == "reasoning" else b"content_index"
        self._fast = kind
        self._fast_head = b'event: %s\ndata: {"type":"%s","sequence_number":' % (
            event.encode(),
            event.encode(),
        )
        self._fast_where = b',"item_id":%s,"output_index":%d,"%s":%d,"delta":' % (
            orjson.dumps(item.id),
            item.index,
            index_key,
            pos,
        )
        self._fast_tail = b',"logprobs":[]}\n\n' if kind == "text" else b"}\n\n"

    # the frames a compiled translator writes deltas into itself (it also appends each delta to
    # the frame's fragments and advances the sequence number, through _set_sequence_number)

    def _text_frame(self) -> tuple[str, bytes, bytes, bytes, list[str]] | None:
        """(kind, head, where, tail, fragments) of the open part the last text, refusal or
        reasoning delta went to: an event is ``head + sequence number + where + JSON string +
        tail``. None when no such part is open."""
        if self._fast is None or self._ended:
            return None
        item = self._reasoning if self._fast == "reasoning" else self._message
        assert item is not None and item.part is not None
        return self._fast, self._fast_head, self._fast_where, self._fast_tail, item.part[1]

    def _arguments_frame(self, key: object) -> tuple[bytes, bytes, bytes, list[str]] | None:
        """(head, where, tail, fragments) of the ``function_call_arguments.delta`` events of the
        call opened under ``key``, or None when it is not open."""
        item = self._calls.get(key)
        if item is None or item.done or self._ended:
            return None
        event = b"response.function_call_arguments.delta"
        head = b'event: %s\ndata: {"type":"%s","sequence_number":' % (event, event)
        where = b',"item_id":%s,"output_index":%d,"delta":' % (orjson.dumps(item.id), item.index)
        return head, where, b"}\n\n", item.arguments

    def _set_sequence_number(self, seq: int) -> None:
        self._seq = seq

    def text(self, delta: str, /) -> bytes:
        """An ``output_text`` delta, opening the message item and the text part when needed."""
        if self._fast == "text" and type(delta) is str and delta and not self._ended:
            # the hot path, inlined: the open text part of the open message
            part = self._message.part  # type: ignore[union-attr]
            part[1].append(delta)  # type: ignore[index]
            seq = self._seq
            self._seq = seq + 1
            return self._fast_head + b"%d" % seq + self._fast_where + orjson.dumps(delta) + self._fast_tail
        return self._content("text", delta)

    def annotation(self, annotation: dict[str, Any], /) -> bytes:
        """``response.output_text.annotation.added`` for the open text part, which keeps it
        (``annotation_index`` counts from 0 per part).

        It raises EncodeError (a ValueError) when no text part is open and TypeError if ``annotation`` is not a dict.
        """
        self._check("annotation()")
        if not isinstance(annotation, dict):
            raise TypeError(f"annotation must be a dict, not {type(annotation).__name__}")
        item = self._message
        if item is None or item.part is None or item.part[0] != "text":
            raise EncodeError("annotation() with no open output_text part")
        notes = item.notes.setdefault(len(item.parts) - 1, [])
        notes.append(annotation)
        return self._event(
            "response.output_text.annotation.added",
            {
                "item_id": item.id,
                "output_index": item.index,
                "content_index": len(item.parts) - 1,
                "annotation_index": len(notes) - 1,
                "annotation": annotation,
            },
        )

    def refusal(self, delta: str, /) -> bytes:
        """A ``refusal`` delta, opening the message item and the refusal part when needed."""
        return self._content("refusal", delta)

    def reasoning(self, delta: str, /) -> bytes:
        """A reasoning summary delta, opening the reasoning item and its summary part when needed."""
        return self._content("reasoning", delta)

    def function_call(self, key: object, /, *, call_id: str, name: str, arguments: str = "") -> bytes:
        """A new ``function_call`` item (``output_item.added``), then ``arguments`` if not empty.

        ``key`` is how later ``arguments(key, ...)`` calls find it (e.g. the chat tool-call index).
        """
        self._check("function_call()")
        if not call_id or not name:
            raise EncodeError("a function call needs both call_id and name")
        if key in self._calls:
            raise EncodeError(f"function call key {key!r} used twice")
        out = b""
        for open_ in (self._reasoning, self._message):
            if open_ is not None:
                out += self._close_item(open_)
        item, added = self._add_item("function_call", "fc", call_id, name)
        self._calls[key] = item
        out += added
        if arguments:
            out += self.arguments(key, arguments)
        return out

    def arguments(self, key: object, delta: str, /) -> bytes:
        """A ``function_call_arguments.delta`` for the call opened under ``key``."""
        self._check("arguments()")
        item = self._calls.get(key)
        if item is None:
            raise EncodeError(f"arguments for function call {key!r}, which was never opened")
        if item.done:
            raise EncodeError(f"arguments for function call {key!r} after it was closed")
        if not isinstance(delta, str) or not delta:
            raise EncodeError("empty arguments delta")
        item.arguments.append(delta)
        return self._event(
            "response.function_call_arguments.delta",
            {"item_id": item.id, "output_index": item.index, "delta": delta},
        )

    # the end

    def _close_all(self) -> bytes:
        return b"".join(self._close_item(item) for item in self._items)

    def complete(self, *, usage: dict[str, Any] | None = None, incomplete_reason: str | None = None) -> bytes:
        """Close every open item, then ``response.completed`` (or ``response.incomplete`` with
        ``incomplete_details.reason`` when ``incomplete_reason`` is given) with the full response.
        ``usage`` is in the Responses shape (see ``chat_usage_to_responses``)."""
        self._check("complete()")
        out = self._close_all()
        self._ended = True
        response = self._response
        response["output"] = [item.as_dict() for item in self._items]
        response["usage"] = usage
        if incomplete_reason is None:
            response["status"] = "completed"
            return out + self._event("response.completed", {"response": response})
        response["status"] = "incomplete"
        response["incomplete_details"] = {"reason": incomplete_reason}
        return out + self._event("response.incomplete", {"response": response})

    def fail(self, *, code: str | None, message: str, usage: dict[str, Any] | None = None) -> bytes:
        """``response.failed`` with ``error: {code, message}``; open items stay unfinished
        (the answer was not whole) but are listed in the response's ``output``."""
        self._check("fail()")
        self._ended = True
        response = self._response
        response["status"] = "failed"
        response["error"] = {"code": code or "server_error", "message": message}
        response["output"] = [item.as_dict() for item in self._items]
        response["usage"] = usage
        return self._event("response.failed", {"response": response})

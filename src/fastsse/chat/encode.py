"""The server side: one SSE event as bytes, and OpenAI chat chunks in exactly the shape clients expect.

``encode_event`` writes any event; ``ChatChunkEncoder`` writes a ``chat.completion.chunk`` stream
in the compliant shape of seed 000 (LocalAI#7180): a role-only first chunk, content chunks with
``finish_reason`` null, a final chunk with ``"delta": {}`` and the real reason, an optional usage
chunk with ``choices: []``, then ``data: [DONE]``. Each event is ``data: <compact JSON>\\n\\n``.
Calls that would produce a stream ``fastsse.check_stream`` reports raise EncodeError (a ValueError) instead.
"""

from __future__ import annotations

import re
import time
from typing import Any, Final

import orjson

from .._errors import EncodeError

__all__ = ["ChatChunkEncoder", "encode_event"]

_NEWLINE: Final = re.compile(r"\r\n|\r|\n")
DONE: Final = b"data: [DONE]\n\n"


def _lines(field: str, text: str) -> list[str]:
    return [f"{field}: {line}" if line else f"{field}:" for line in _NEWLINE.split(text)]


def _single_line(field: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{field} must be a str, not {type(value).__name__}")
    if "\r" in value or "\n" in value:
        raise EncodeError(f"{field} must not contain CR or LF: {value!r}")
    return value


def encode_event(
    data: str | bytes | None = None,
    /,
    *,
    event: str | None = None,
    id: str | None = None,
    retry: int | None = None,
    comment: str | None = None,
) -> bytes:
    """``encode_event(data=None, /, *, event=None, id=None, retry=None, comment=None) -> bytes``

    Return one SSE event, LF line endings, ending in a blank line. Data holding LF, CR or CRLF
    becomes one ``data:`` line per line, so a spec-compliant decoder gives back ``data`` with every
    CR and CRLF turned into LF (SSE cannot carry them otherwise); every other character round-trips.
    ``data`` may be ``str`` or UTF-8 ``bytes``. With only ``comment``, the result is a keep-alive
    (``: ping\\n\\n``) that dispatches nothing; a multi-line comment becomes several comment lines.
    ``event=""`` means the default type ``message``; ``id=""`` resets the client's last event id.

    It raises EncodeError (a ValueError) if ``event`` or ``id`` contains CR or LF, ``id`` contains NUL, ``retry`` is
    negative, or every argument is None; TypeError if an argument has the wrong type.
    """
    lines: list[str] = []
    if comment is not None:
        if not isinstance(comment, str):
            raise TypeError(f"comment must be a str, not {type(comment).__name__}")
        lines += [f": {line}" if line else ":" for line in _NEWLINE.split(comment)]
    if event is not None:
        lines.append(f"event: {_single_line('event', event)}" if event else "event:")
    if id is not None:
        if "\0" in _single_line("id", id):
            raise EncodeError(f"id must not contain NUL (clients ignore such ids): {id!r}")
        lines.append(f"id: {id}" if id else "id:")
    if retry is not None:
        if type(retry) is not int:
            raise TypeError(f"retry must be an int (milliseconds), not {type(retry).__name__}")
        if retry < 0:
            raise EncodeError(f"retry must be >= 0 milliseconds, not {retry}")
        lines.append(f"retry: {retry}")
    if data is not None:
        if isinstance(data, (bytes, bytearray, memoryview)):
            data = bytes(data).decode("utf-8")
        elif not isinstance(data, str):
            raise TypeError(f"data must be str or bytes, not {type(data).__name__}")
        lines += _lines("data", data)
    if not lines:
        raise EncodeError("encode_event needs data, a field or a comment; all were None")
    lines.append("\n")
    return "\n".join(lines).encode("utf-8")


class _Choice:
    __slots__ = ("finished", "started", "tool_ids")

    def __init__(self) -> None:
        self.started = False
        self.finished = False
        self.tool_ids: list[str] = []  # by tool-call index: each call's id, sent once


class ChatChunkEncoder:
    """``ChatChunkEncoder(*, id, model, created=None, system_fingerprint=None, reasoning_key="reasoning_content")``

    Writes one chat stream; every method returns the bytes of one event. Per choice ``index``:
    ``role()`` first, then any of ``content`` / ``reasoning`` / ``refusal`` / ``tool_call``, then
    ``finish(reason)``; after every started choice finished, optionally ``usage(...)``; then ``done()``.
    ``created`` defaults to the current time. ``reasoning_key`` names the field ``reasoning()``
    writes: ``"reasoning_content"`` (DeepSeek, LocalAI, older vLLM) or ``"reasoning"`` (vLLM 0.9
    and later, OpenRouter, Ollama). One encoder per stream; not thread-safe.

    Each method raises EncodeError (a ValueError) when the call would make the stream non-compliant: a delta before
    ``role`` or after ``finish``, ``role`` or ``finish`` twice, empty text, ``finish("")``,
    ``finish("tool_calls")`` without tool calls, a tool call's first fragment without ``id`` and
    ``name`` or a later one repeating them, a new tool-call index that skips one, an id used twice,
    ``usage`` or ``done`` while a choice is unfinished, and anything after ``done``.
    """

    __slots__ = ("_choices", "_done", "_head", "_ids", "_reasoning_key", "_usage_sent")

    def __init__(
        self,
        *,
        id: str,
        model: str,
        created: int | None = None,
        system_fingerprint: str | None = None,
        reasoning_key: str = "reasoning_content",
    ) -> None:
        if reasoning_key not in ("reasoning_content", "reasoning"):
            raise EncodeError(
                f'reasoning_key must be "reasoning_content" or "reasoning", not {reasoning_key!r}'
            )
        self._reasoning_key = reasoning_key
        head: dict[str, Any] = {
            "id": id,
            "object": "chat.completion.chunk",
            "created": int(time.time()) if created is None else created,
            "model": model,
        }
        if system_fingerprint is not None:
            head["system_fingerprint"] = system_fingerprint
        # every chunk shares this prefix; only the choices (or usage) differ
        self._head = b"data: " + orjson.dumps(head)[:-1] + b',"choices":['
        self._choices: dict[int, _Choice] = {}
        self._ids: set[str] = set()
        self._usage_sent = False
        self._done = False

    def _chunk(self, index: int, delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        choice = {"index": index, "delta": delta, "finish_reason": finish_reason}
        return self._head + orjson.dumps(choice) + b"]}\n\n"

    def _check_open(self, what: str) -> None:
        if self._done:
            raise EncodeError(f"{what} after done(): nothing may follow data: [DONE]")
        if self._usage_sent:
            raise EncodeError(f"{what} after usage(): the usage chunk is the last one before [DONE]")

    def _open(self, index: int, what: str) -> _Choice:
        self._check_open(what)
        choice = self._choices.get(index)
        if choice is None or not choice.started:
            raise EncodeError(
                f"{what} for choice {index} before role(index={index}): the first chunk carries the role"
            )
        if choice.finished:
            raise EncodeError(f"{what} for choice {index} after finish(index={index})")
        return choice

    def role(self, role: str = "assistant", index: int = 0) -> bytes:
        """The first chunk of choice ``index``: ``{"delta": {"role": role}}``, no content, finish_reason null."""
        self._check_open("role()")
        if not role:
            raise EncodeError("role must be a non-empty string")
        if index < 0:
            raise EncodeError(f"choice index must be >= 0, not {index}")
        choice = self._choices.setdefault(index, _Choice())
        if choice.started:
            raise EncodeError(f"role() twice for choice {index}: clients concatenate a repeated role")
        choice.started = True
        return self._chunk(index, {"role": role})

    def _text(self, key: str, text: str, index: int) -> bytes:
        self._open(index, f"{key}()")
        if not isinstance(text, str):
            raise TypeError(f"{key} text must be a str, not {type(text).__name__}")
        if not text:
            raise EncodeError(f"empty {key}: an empty delta makes some clients end the stream early")
        return self._chunk(index, {key: text})

    def content(self, text: str, /, index: int = 0) -> bytes:
        """A content delta for choice ``index``."""
        return self._text("content", text, index)

    def reasoning(self, text: str, /, index: int = 0) -> bytes:
        """A reasoning delta, under the encoder's ``reasoning_key``."""
        return self._text(self._reasoning_key, text, index)

    def refusal(self, text: str, /, index: int = 0) -> bytes:
        """A ``refusal`` delta."""
        return self._text("refusal", text, index)

    def tool_call(
        self,
        index: int,
        /,
        *,
        id: str | None = None,
        name: str | None = None,
        arguments: str = "",
        choice: int = 0,
    ) -> bytes:
        """One fragment of tool call ``index`` in choice ``choice``.

        The first fragment of an index carries ``id`` and ``name`` (and ``type: "function"``);
        later ones carry only ``arguments``, which clients concatenate. Indexes start at 0 and a
        new one is the next unused number, so every client's list-position merge works.
        """
        state = self._open(choice, "tool_call()")
        calls = state.tool_ids
        if index == len(calls):
            if not id or not name:
                raise EncodeError(f"the first fragment of tool call {index} needs both id and name")
            if id in self._ids:
                raise EncodeError(f"tool call id {id!r} already used: ids must be unique across calls")
            self._ids.add(id)
            calls.append(id)
            call: dict[str, Any] = {
                "index": index,
                "id": id,
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
        elif 0 <= index < len(calls):
            if id is not None or name is not None:
                raise EncodeError(
                    f"tool call {index} already has its id and name; clients concatenate repeats"
                )
            if not arguments:
                raise EncodeError(f"empty arguments fragment for tool call {index}")
            call = {"index": index, "function": {"arguments": arguments}}
        else:
            raise EncodeError(
                f"tool call index {index} skips {len(calls)}: indexes start at 0 and grow by one"
            )
        return self._chunk(choice, {"tool_calls": [call]})

    def finish(self, reason: str = "stop", index: int = 0) -> bytes:
        """The final chunk of choice ``index``: ``{"delta": {}, "finish_reason": reason}``."""
        choice = self._open(index, "finish()")
        if not isinstance(reason, str) or not reason:
            raise EncodeError(f"finish reason must be a non-empty string, not {reason!r}")
        if reason == "tool_calls" and not choice.tool_ids:
            raise EncodeError(f'finish("tool_calls") for choice {index}, which made no tool call')
        choice.finished = True
        return self._chunk(index, {}, reason)

    def _check_finished(self, what: str) -> None:
        if self._done:
            raise EncodeError(f"{what} after done(): nothing may follow data: [DONE]")
        if not self._choices:
            raise EncodeError(f"{what} before any choice started")
        open_ = sorted(i for i, c in self._choices.items() if not c.finished)
        if open_:
            raise EncodeError(f"{what} while choice(s) {open_} have no finish() yet")

    def usage(self, usage: dict[str, Any], /) -> bytes:
        """The usage chunk: ``"choices": []`` and ``usage``; it comes after every choice finished."""
        self._check_finished("usage()")
        if self._usage_sent:
            raise EncodeError("usage() twice")
        if not isinstance(usage, dict):
            raise TypeError(f"usage must be a dict, not {type(usage).__name__}")
        self._usage_sent = True
        return self._head + b'],"usage":' + orjson.dumps(usage) + b"}\n\n"

    def done(self) -> bytes:
        """``data: [DONE]``, the end of the stream."""
        self._check_finished("done()")
        self._done = True
        return DONE

"""The pure-Python Normalizer as it stood before Relay replaced it (fastsse 34c50e4,
src/fastsse/normalize.py), kept only so the relay benchmark can measure what it replaced."""

from __future__ import annotations

from typing import Any

import orjson

from fastsse.chat.encode import DONE
from fastsse.sse.lint import _Framer

__all__ = ["Normalizer"]

_TEXT_KEYS = ("content", "reasoning_content", "reasoning", "refusal")


class _Choice:
    __slots__ = ("finished", "sent")

    def __init__(self) -> None:
        self.finished = False
        self.sent: dict[int, set[str]] = {}  # tool-call index -> which of "id", "name" went out

    @property
    def tools(self) -> bool:
        return bool(self.sent)


def _data_event(raw: bytes) -> bytes:
    return b"".join(b"data: " + line + b"\n" if line else b"data:\n" for line in raw.split(b"\n")) + b"\n"


class Normalizer(_Framer):
    """``Normalizer()``: ``write(data) -> bytes`` for each upstream piece, then ``close() -> bytes``.

    Each call returns the compliant bytes it can already emit (often ``b""``); concatenated they form
    the repaired stream. The module docstring lists every change. One normaliser per stream.

    ``write`` raises TypeError for anything but a byte buffer and ValueError after ``close``.
    """

    def __init__(self) -> None:
        super().__init__()
        self._out: list[bytes] = []
        self._choices: dict[int, _Choice] = {}
        self._head: dict[str, Any] | None = None  # id, object, created, model of the first chunk
        self._done = False
        self._errored = False
        self._closed = False
        self.truncated = False
        """After ``close()``: the upstream ended in the middle of a line, so nothing was added."""

    def write(self, data: bytes | bytearray | memoryview, /) -> bytes:
        """Take the next upstream bytes; return the repaired bytes ready to send."""
        if self._closed:
            raise ValueError("write() after close(): a Normalizer repairs one stream")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"write() takes bytes, bytearray or memoryview, not {type(data).__name__}")
        self._feed_lines(bytes(data))
        return self._take()

    def close(self) -> bytes:
        """End the upstream; return the last repaired bytes (missing finals and ``[DONE]`` included)."""
        if self._closed:
            return b""
        self._closed = True
        self._close_lines()
        if self.truncated:
            return self._take()
        if self.data is not None:
            # every line of the last event arrived, only its blank line is missing: keep the event
            start, data, event_type = self.start, b"\n".join(self.data), self.type
            self._reset()
            assert start is not None
            self.on_event(start, data, event_type)
        if not self._done and not self._errored:
            self._finish_open_choices()
            self._out.append(DONE)
            self._done = True
        return self._take()

    def _take(self) -> bytes:
        out = b"".join(self._out)
        self._out.clear()
        return out

    # framing hooks

    def on_line(self, offset: int, line: bytes, ending: str | None) -> None:
        if ending is None:
            if line and line[0] != 0x3A:
                self.truncated = True
            return
        if line and line[0] == 0x3A and not self._done:
            self._out.append(line + b"\n\n")

    def on_event(self, offset: int, data: bytes, event_type: bytes | None) -> None:
        if self._done:
            return
        if data == b"[DONE]":
            self._finish_open_choices()
            self._out.append(DONE)
            self._done = True
            return
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            self._out.append(_data_event(data))
            return
        if event_type == b"error" or (isinstance(chunk, dict) and chunk.get("error")):
            self._errored = True
            prefix = b"event: error\n" if event_type == b"error" else b""
            self._out.append(prefix + b"data: " + orjson.dumps(chunk) + b"\n\n")
            return
        if not isinstance(chunk, dict) or not isinstance(chunk.get("choices"), list):
            self._out.append(
                _data_event(data) if b"\n" not in data else b"data: " + orjson.dumps(chunk) + b"\n\n"
            )
            return
        self._chunk(chunk, data)

    # chunks

    def _chunk(self, chunk: dict[str, Any], raw: bytes) -> None:
        changed = b"\n" in raw
        if self._head is None:
            self._head = {k: chunk[k] for k in ("id", "created", "model") if k in chunk}
        for key in ("id", "created"):
            if key in self._head and chunk.get(key) != self._head[key]:
                chunk[key] = self._head[key]
                changed = True
        if chunk.get("object") != "chat.completion.chunk":
            chunk["object"] = "chat.completion.chunk"
            changed = True
        choices: list[Any] = chunk["choices"]
        if not choices:
            if not chunk.get("usage"):
                return  # an empty chunk: some clients end the stream on it (LocalAI#1886)
            self._finish_open_choices()  # the usage chunk comes after every final chunk
        kept: list[Any] = []
        finals: list[tuple[int, str]] = []
        for choice in choices:
            if (
                not isinstance(choice, dict)
                or type(choice.get("index")) is not int
                or not isinstance(choice.get("delta"), dict)
            ):
                kept.append(choice)
                continue
            outcome = self._choice(choice)
            if outcome is None:
                kept.append(choice)
                continue
            changed = True
            keep, final = outcome
            if keep:
                kept.append(choice)
            if final is not None:
                finals.append((choice["index"], final))
        if changed:
            if kept or not choices or chunk.get("usage"):
                chunk["choices"] = kept
                self._out.append(b"data: " + orjson.dumps(chunk) + b"\n\n")
        else:
            self._out.append(b"data: " + raw + b"\n\n")
        for index, reason in finals:
            self._out.append(self._final(index, reason))

    def _choice(self, choice: dict[str, Any]) -> tuple[bool, str | None] | None:
        """Repair one choice entry in place. None: untouched. Else (keep the entry, final reason to append)."""
        index: int = choice["index"]
        delta: dict[str, Any] = choice["delta"]
        state = self._choices.get(index)
        first = state is None
        if state is None:
            state = self._choices[index] = _Choice()
        changed = False
        if delta.get("content") == "":
            del delta["content"]  # empty content carries nothing, and ends some clients' streams
            changed = True
        if first:
            if delta.get("role") is None:
                choice["delta"] = delta = {
                    "role": "assistant",
                    **{k: v for k, v in delta.items() if k != "role"},
                }
                changed = True
        elif "role" in delta:
            del delta["role"]
            changed = True
        calls = delta.get("tool_calls")
        if calls == []:
            del delta["tool_calls"]
            changed = True
        elif isinstance(calls, list):
            changed = self._tool_calls(state, calls) or changed
        reason = choice.get("finish_reason")
        if reason == "":
            choice["finish_reason"] = reason = None
            changed = True
        if state.finished:
            return (True, None) if changed else None
        if reason is None:
            if not first and not any(v is not None and v != "" for v in delta.values()):
                return (False, None)  # nothing to deliver: an empty delta is noise, or worse
            return (True, None) if changed else None
        state.finished = True
        if reason == "tool_calls" and not state.tools:
            reason = "stop"
            changed = True
        if all(v is None for v in delta.values()):
            if delta:
                choice["delta"] = {}
                changed = True
            if not changed:
                return None
            choice["finish_reason"] = reason
            return (True, None)
        # the reason rides on a chunk with text in it: send the text, then an empty-delta final chunk
        choice["finish_reason"] = None
        return (True, reason)

    @staticmethod
    def _tool_calls(state: _Choice, calls: list[Any]) -> bool:
        """Drop an id or name a tool call already sent (clients would concatenate it); True if changed."""
        changed = False
        for call in calls:
            if not isinstance(call, dict) or type(call.get("index")) is not int:
                continue
            sent = state.sent.setdefault(call["index"], set())
            function = call.get("function")
            if call.get("id"):
                if "id" in sent:
                    del call["id"]
                    changed = True
                sent.add("id")
            if isinstance(function, dict) and function.get("name"):
                if "name" in sent:
                    del function["name"]
                    changed = True
                sent.add("name")
        return changed

    def _final(self, index: int, reason: str) -> bytes:
        head = self._head or {}
        chunk = {
            "id": head.get("id", ""),
            "object": "chat.completion.chunk",
            "created": head.get("created", 0),
            "model": head.get("model", ""),
            "choices": [{"index": index, "delta": {}, "finish_reason": reason}],
        }
        return b"data: " + orjson.dumps(chunk) + b"\n\n"

    def _finish_open_choices(self) -> None:
        for index in sorted(self._choices):
            state = self._choices[index]
            if not state.finished:
                state.finished = True
                self._out.append(self._final(index, "tool_calls" if state.tools else "stop"))

"""A whole (non-streamed) answer as the stream it stands for, so that a server that ignored
``"stream": true`` gives a result of the streamed shape: ``as_stream(api, answer) -> bytes``.

The bytes are what a compliant server of that API would have sent for the same answer in one
go; the request's own stream (a fold, a relay, a translator) reads them as any other stream, so
its ``on_chunk`` sees the content and a relay sends a real stream downstream.
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["as_stream"]


def _event(payload: Any, name: str | None = None) -> bytes:
    head = b"event: " + name.encode() + b"\n" if name else b""
    return head + b"data: " + orjson.dumps(payload) + b"\n\n"


def _chat(answer: dict[str, Any]) -> bytes:
    choices = []
    for position, choice in enumerate(answer.get("choices") or ()):
        if not isinstance(choice, dict):
            continue
        message = choice.get("message")
        delta = {k: v for k, v in message.items() if v is not None} if isinstance(message, dict) else {}
        calls = delta.get("tool_calls")
        if isinstance(calls, list):  # a streamed call fragment carries its index
            delta["tool_calls"] = [
                {"index": i, **call} if isinstance(call, dict) and "index" not in call else call
                for i, call in enumerate(calls)
            ]
        out = {
            "index": choice.get("index", position),
            "delta": delta,
            "finish_reason": choice.get("finish_reason"),
        }
        if choice.get("logprobs") is not None:
            out["logprobs"] = choice["logprobs"]
        choices.append(out)
    chunk = {k: v for k, v in answer.items() if k != "choices"}
    chunk["object"] = "chat.completion.chunk"
    chunk["choices"] = choices
    return _event(chunk) + b"data: [DONE]\n\n"


def _responses(answer: dict[str, Any]) -> bytes:
    output = [item for item in answer.get("output") or () if isinstance(item, dict)]
    status = answer.get("status")
    terminal = {"incomplete": "response.incomplete", "failed": "response.failed"}.get(
        status if isinstance(status, str) else "", "response.completed"
    )
    seq = 0
    out = [
        _event(
            {"type": "response.created", "sequence_number": seq, "response": {**answer, "output": []}},
            "response.created",
        )
    ]
    for index, item in enumerate(output):
        for kind in ("response.output_item.added", "response.output_item.done"):
            seq += 1
            out.append(
                _event({"type": kind, "sequence_number": seq, "output_index": index, "item": item}, kind)
            )
    seq += 1
    out.append(_event({"type": terminal, "sequence_number": seq, "response": answer}, terminal))
    return b"".join(out)


def _messages(answer: dict[str, Any]) -> bytes:
    content = [block for block in answer.get("content") or () if isinstance(block, dict)]
    start = {**answer, "content": [], "stop_reason": None, "stop_sequence": None}
    out = [_event({"type": "message_start", "message": start}, "message_start")]
    for index, block in enumerate(content):
        out.append(
            _event(
                {"type": "content_block_start", "index": index, "content_block": block}, "content_block_start"
            )
        )
        out.append(_event({"type": "content_block_stop", "index": index}, "content_block_stop"))
    delta = {"stop_reason": answer.get("stop_reason"), "stop_sequence": answer.get("stop_sequence")}
    tail: dict[str, Any] = {"type": "message_delta", "delta": delta}
    if answer.get("usage") is not None:
        tail["usage"] = answer["usage"]
    out.append(_event(tail, "message_delta"))
    out.append(_event({"type": "message_stop"}, "message_stop"))
    return b"".join(out)


_WRITERS = {"chat": _chat, "responses": _responses, "messages": _messages}


def as_stream(api: str, answer: dict[str, Any]) -> bytes:
    """The event stream of ``api`` that carries ``answer`` (a ``chat.completion``, a ``response``,
    a ``message``) whole: one chunk then ``[DONE]`` for chat, the lifecycle and item events for
    Responses, the message and block events for Messages."""
    return _WRITERS[api](answer)

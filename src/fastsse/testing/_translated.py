"""The loopback server's Responses (``POST /v1/responses``) and Messages (``POST /v1/messages``) models.

Every chat scenario is served in both formats, translated from its chat stream by
``fastsse.translate`` as the chat bytes are produced (pauses, comments and cuts included), so
``reasoning``, ``tools``, ``error``, ``disconnect``, ``slow-N``... mean the same on all three routes.
The broken models below reproduce translation bugs reported against gateways; each rewrites the
compliant translation of its base scenario, and ``fastsse check --api`` reports it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Final

import orjson

from ..apis import APIS
from ..load._server import chat_request
from ..sse import Decoder
from ..translate import translator

__all__ = ["BROKEN", "broken_stream", "chat_request", "format_events", "round_trip"]

Events = list[tuple[str, dict[str, Any]]]


def _drop(kind: str) -> Callable[[Events], Events]:
    return lambda events: [(t, p) for t, p in events if t != kind]


def _responses_orphan_delta(events: Events) -> Events:
    # output_text.delta with no output_item.added / content_part.added before it (Envoy AI Gateway)
    return [
        (t, p)
        for t, p in events
        if not (t == "response.output_item.added" and p["item"]["type"] == "message")
        and t != "response.content_part.added"
    ]


def _responses_swallowed(events: Events) -> Events:
    # the first deltas swallowed and no terminal event (LiteLLM's Responses bridge)
    out: Events = []
    swallowed = 0
    for t, p in events:
        if t == "response.output_text.delta" and swallowed < 3:
            swallowed += 1
            continue
        if t in APIS["responses"].terminal:
            continue
        out.append((t, p))
    return out


def _responses_error_swallowed(events: Events) -> Events:
    # a mid-stream failure reported as a normal completion: the client never raises
    out: Events = []
    for t, p in events:
        if t == "response.failed":
            response = dict(p["response"], status="completed", error=None)
            t, p = "response.completed", dict(p, type="response.completed", response=response)
        out.append((t, p))
    return out


def _responses_sequence(events: Events) -> Events:
    # sequence numbers that restart after the first items (two upstream streams spliced)
    return [(t, dict(p, sequence_number=k if k < 4 else k - 3)) for k, (t, p) in enumerate(events)]


def _messages_zero_usage(events: Events) -> Events:
    # usage 0 in message_start and no input_tokens at the end: billing and context tracking see 0
    out: Events = []
    for t, p in events:
        if t == "message_delta":
            p = dict(p, usage={"output_tokens": p["usage"].get("output_tokens", 0)})
        out.append((t, p))
    return out


def _messages_tool_text(events: Events) -> Events:
    # tool input sent as text_delta instead of input_json_delta: the SDK drops it
    out: Events = []
    for t, p in events:
        delta = p.get("delta") if t == "content_block_delta" else None
        if isinstance(delta, dict) and delta.get("type") == "input_json_delta":
            p = dict(p, delta={"type": "text_delta", "text": delta["partial_json"]})
        out.append((t, p))
    return out


def _messages_empty_input(events: Events) -> Events:
    # every input_json_delta emitted empty: the tool input is lost
    out: Events = []
    for t, p in events:
        delta = p.get("delta") if t == "content_block_delta" else None
        if isinstance(delta, dict) and delta.get("type") == "input_json_delta":
            p = dict(p, delta={"type": "input_json_delta", "partial_json": ""})
        out.append((t, p))
    return out


def _messages_no_name(events: Events) -> Events:
    # the tool name lost (a chunk carried text and tool calls at once)
    out: Events = []
    for t, p in events:
        block = p.get("content_block") if t == "content_block_start" else None
        if isinstance(block, dict) and block.get("type") == "tool_use":
            p = dict(p, content_block=dict(block, name=""))
        out.append((t, p))
    return out


def _messages_index_order(events: Events) -> Events:
    # blocks numbered from 1, so the SDK's content[index] points one block off
    out: Events = []
    for t, p in events:
        if "index" in p:
            p = dict(p, index=p["index"] + 1)
        out.append((t, p))
    return out


def _messages_error_swallowed(events: Events) -> Events:
    # a mid-stream error turned into a normal end_turn: the client never raises
    out: Events = []
    for t, p in events:
        if t == "error":
            out.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 0}}))  # fmt: skip
            out.append(("message_stop", {"type": "message_stop"}))
            continue
        out.append((t, p))
    return out


# api -> model name -> (base chat scenario, rewrite, what it reproduces)
BROKEN: Final[dict[str, dict[str, tuple[str, Callable[[Events], Events], str]]]] = {
    "responses": {
        "orphan-delta": ("plain", _responses_orphan_delta, "output_text.delta with no output_item.added"),
        "no-text-done": ("plain", _drop("response.output_text.done"), "no response.output_text.done"),
        "swallowed": ("plain", _responses_swallowed, "first deltas swallowed, no terminal event"),
        "error-swallowed": ("error", _responses_error_swallowed, "a failure reported as completed"),
        "bad-sequence": ("plain", _responses_sequence, "sequence_number restarts mid-stream"),
        "no-item-done": ("tools", _drop("response.output_item.done"), "no response.output_item.done"),
    },
    "messages": {
        "zero-usage": ("plain", _messages_zero_usage, "usage 0 in message_start and never corrected"),
        "tool-text-delta": ("tools", _messages_tool_text, "tool input as text_delta"),
        "empty-input-json": ("tools", _messages_empty_input, "input_json_delta emitted empty"),
        "no-tool-name": ("tools", _messages_no_name, "tool_use with an empty name"),
        "no-block-stop": ("reasoning", _drop("content_block_stop"), "no content_block_stop"),
        "index-order": ("tools", _messages_index_order, "content block indexes start at 1"),
        "no-message-stop": ("plain", _drop("message_stop"), "no message_stop"),
        "error-swallowed": ("error", _messages_error_swallowed, "an error turned into end_turn"),
    },
}


def format_events(api: str, chat_items: Iterator[Any]) -> Iterator[Any]:
    """Translate a chat scenario's items (event bytes, pauses, cuts) into ``api`` as they come."""
    t = translator("chat", api)
    for item in chat_items:
        if isinstance(item, bytes):
            out = t.write(item)
            if out:
                yield out
        else:
            yield item  # a pause, or the cut: the translation stays truncated like its upstream
    tail = t.close()
    if tail:
        yield tail


def round_trip(via: str, chat_items: Iterator[Any], created: int) -> Iterator[Any]:
    """A chat scenario's items translated to ``via`` and back to chat as they come."""
    there = translator("chat", via)
    back = translator(via, "chat", created=created)
    for item in chat_items:
        if isinstance(item, bytes):
            out = back.write(there.write(item))
            if out:
                yield out
        else:
            yield item
    tail = back.write(there.close()) + back.close()
    if tail:
        yield tail


def broken_stream(api: str, name: str, chat_items: Iterator[Any]) -> bytes:
    """The compliant translation of the base scenario, rewritten by the broken model ``name``."""
    _, rewrite, _ = BROKEN[api][name]
    t = translator("chat", api)
    body = b"".join(t.write(item) for item in chat_items if isinstance(item, bytes)) + t.close()
    decoder = Decoder()
    events: Events = [(ev.event, orjson.loads(ev.data)) for ev in decoder.feed(body) + decoder.close()]
    events = rewrite(events)
    if api == "responses" and name != "bad-sequence":
        # one bug per model: dropped events leave no gap in the numbering
        events = [(t, dict(p, sequence_number=k)) for k, (t, p) in enumerate(events)]
    return b"".join(b"event: " + t.encode() + b"\ndata: " + orjson.dumps(p) + b"\n\n" for t, p in events)

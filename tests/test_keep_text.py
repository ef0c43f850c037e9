"""``keep_text=False``: the chat fold keeps the facts (finish reasons, usage, tool calls' ids and
names, errors, the verdict) and not the text, whose characters it counts in ``text_chars``.

Expectations come from tests/vectors/recorded_chat.json (written from the recorded streams with
jq, never printed by fastsse): every field but the text as listed there, the text fields ``""``
where the vector has text, and ``text_chars`` the sum of the vector's text lengths. The relay's
bytes do not change with the option, and its memory does not grow with the answer's length.
"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from _recorded import recorded

VECTOR = Path(__file__).parent / "vectors" / "recorded_chat.json"
STREAMS: list[dict[str, Any]] = json.loads(VECTOR.read_text(encoding="utf-8"))["streams"]
IDS = [s["file"].removesuffix(".sse") for s in STREAMS]
TEXT_FIELDS = ("content", "reasoning_content", "reasoning", "refusal")


def _length(value: Any) -> int:
    if value is None:
        return 0
    return int(value["length"]) if isinstance(value, dict) else len(value)


def _chars(want: dict[str, Any]) -> int:
    total = 0
    for choice in want["choices"]:
        total += sum(_length(choice[field]) for field in TEXT_FIELDS)
        total += _length(choice.get("text"))
        total += sum(len(call["arguments"]) for call in choice["tool_calls"])
    return total


def _fold(backend: SimpleNamespace, data: bytes, keep_text: bool) -> dict[str, Any]:
    decoder = backend.Decoder()
    agg = backend.ChatAggregator(keep_text=keep_text)
    for event in [*decoder.feed(data), *decoder.close()]:
        agg.feed_event(event)
    agg.close(truncated=decoder.truncated)
    result: dict[str, Any] = agg.result()
    return result


@pytest.mark.parametrize("want", STREAMS, ids=IDS)
def test_the_facts_of_every_recorded_stream_without_its_text(
    backend: SimpleNamespace, want: dict[str, Any]
) -> None:
    result = _fold(backend, recorded("chat", want["file"]), keep_text=False)
    assert result["text_chars"] == _chars(want)
    for key in ("id", "model", "created", "usage"):
        assert result[key] == want[key], key
    assert result.get("error") == want["error"]
    verdict = result["verdict"]
    assert verdict["complete"] is want["verdict"]["complete_closed"]
    assert verdict["finish_reasons"] == want["verdict"]["finish_reasons"]
    for choice, expected in zip(result["choices"], want["choices"], strict=True):
        message = choice["message"]
        assert choice["finish_reason"] == expected["finish_reason"]
        assert message["role"] == expected["role"]
        for field in TEXT_FIELDS:
            assert message.get(field) == (None if expected[field] is None else ""), field
        calls = [
            (c["id"], c["function"]["name"], c["function"]["arguments"])
            for c in message.get("tool_calls", [])
        ]
        assert calls == [(c["id"], c["name"], "") for c in expected["tool_calls"]]


def test_a_hand_counted_stream(backend: SimpleNamespace) -> None:
    chunks = [
        {
            "id": "a",
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": "héllo "}}],
        },
        {"id": "a", "choices": [{"index": 0, "delta": {"content": "wörld 🙂", "reasoning_content": "ok"}}]},
        {
            "id": "a",
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "f", "arguments": '{"a":'},
                            }
                        ]
                    },
                }
            ],
        },
        {
            "id": "a",
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]},
                    "finish_reason": "tool_calls",
                }
            ],
        },
        {"id": "a", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 9, "total_tokens": 12}},
    ]
    for keep in (True, False):
        agg = backend.ChatAggregator(keep_text=keep)
        for chunk in chunks:
            agg.feed_data(orjson.dumps(chunk))  # bytes: the compiled fast reader's path
        agg.feed_data("[DONE]")
        result = agg.result()
        message = result["choices"][0]["message"]
        if keep:
            assert "text_chars" not in result
            assert message["content"] == "héllo wörld 🙂"
        else:
            # 6 + 7 characters of content, 2 of reasoning, 7 of arguments
            assert result["text_chars"] == 22
            assert message["content"] == "" and message["reasoning_content"] == ""
            assert message["tool_calls"][0]["function"] == {"name": "f", "arguments": ""}
        assert result["usage"]["completion_tokens"] == 9
        assert result["verdict"]["complete"] is True


@pytest.mark.parametrize("want", STREAMS[:12], ids=IDS[:12])
def test_the_relayed_bytes_do_not_change(backend: SimpleNamespace, want: dict[str, Any]) -> None:
    data = recorded("chat", want["file"])
    out = {}
    for keep in (True, False):
        relay = backend.Relay(keep_text=keep)
        sent = b"".join(relay.write(data[i : i + 97]) for i in range(0, len(data), 97)) + relay.close()
        out[keep] = (sent, relay.result()["verdict"])
    assert out[True] == out[False]


def _answer(chars: int, per_event: int = 4000) -> list[bytes]:
    word = "zażółć " * (per_event // 7)
    events = [
        b'data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n'
    ]
    done = 0
    while done < chars:
        events.append(
            b"data: "
            + orjson.dumps(
                {
                    "id": "x",
                    "object": "chat.completion.chunk",
                    "choices": [{"index": 0, "delta": {"content": word}}],
                }
            )
            + b"\n\n"
        )
        done += len(word)
    events.append(
        b'data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    )
    return events


@pytest.mark.parametrize("keep", [False, True])
def test_a_long_answer_costs_no_memory_without_its_text(backend: SimpleNamespace, keep: bool) -> None:
    """20 million characters through a Relay: without the text the fold's memory stays under
    1 MB; with it, the text is there (which shows the measure can fail)."""
    events = _answer(20_000_000)
    relay = backend.Relay(keep_text=keep)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for event in events:
            relay.write(event)
        relay.close()
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    result = relay.result()
    assert result["verdict"]["complete"] is True
    if keep:
        assert held > 19_000_000
    else:
        assert held < 1_000_000
        assert result["text_chars"] >= 20_000_000


def test_the_client_option(stream_backend: SimpleNamespace, server: Any) -> None:
    import fastsse

    request = {"model": "long-300", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    got: dict[bool, tuple[bytes, dict[str, Any]]] = {}
    for keep in (True, False):
        sent: list[bytes] = []
        result = fastsse.create_stream(
            request, sent.append, base_url=server.base_url, format="relay", keep_text=keep, timing=False
        )
        got[keep] = (b"".join(sent), result)
    text = got[True][1]["choices"][0]["message"]["content"]
    assert len(text) > 300
    lean = got[False][1]
    assert lean["choices"][0]["message"]["content"] == ""
    assert lean["text_chars"] == len(text)
    assert lean["verdict"] == got[True][1]["verdict"]
    assert got[False][0].count(b"data: ") == got[True][0].count(b"data: ")

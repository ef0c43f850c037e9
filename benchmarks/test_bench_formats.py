"""The Responses and Messages folds, per event, against ``orjson.loads`` of the same payloads and
against the SDKs' own accumulation of the same streams. Group ``fold:<corpus>``; corpora are built
here from a fixed seed, shaped like what the two APIs send:

- ``responses-text``: a message of ``N`` ``response.output_text.delta`` events as OpenAI sends them
  (``sequence_number``, ``item_id``, indexes, ``logprobs: []``, ``obfuscation``), words of 1-8
  characters, about 8% non-ASCII; the lifecycle and done events; a ``response.completed`` with
  the whole output and usage.
- ``responses-tools``: one function call whose arguments arrive in ``N`` deltas.
- ``messages-text`` / ``messages-tools``: the Anthropic equivalents (``text_delta`` with a ping
  every 100 events; ``input_json_delta`` pieces of a tool's input).

Contenders: ``fastsse-cython`` / ``fastsse-python`` (``feed_data`` of every payload as bytes, then
``result()``); ``fastsse-stream`` (the compiled fused stream over the raw bytes in 16 KiB reads:
scanning included); ``floor`` (``orjson.loads`` of every payload, nothing else); ``openai-sdk``
(what ``openai.Stream`` does per event, ``json.loads`` then ``construct_type`` into
``ResponseStreamEvent``, then ``ResponseStreamState.handle_event``, the SDK's ``responses.stream``
accumulation); ``anthropic-sdk`` (``json.loads``, ``construct_type`` into ``RawMessageStreamEvent``,
``accumulate_event``, what ``messages.stream`` runs; pings skipped as its ``Stream`` does). Every
contender's final text is checked against the corpus.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

import orjson
import pytest

import fastsse

WORDS = [
    "the",
    "answer",
    "is",
    "stream",
    "token",
    "fold",
    "gateway",
    "event",
    "déjà",
    "naïve",
    "数据",
    "🙂",
    "a",
    "of",
]


def _scale(config: pytest.Config) -> float:
    from conftest import _scale as scale

    return scale(config)


def _pieces(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        word = rng.choice(WORDS) if rng.random() < 0.08 else rng.choice(WORDS[:8])
        out.append((" " + word)[: rng.randint(1, 8)])
    return out


def _arguments(n: int) -> list[str]:
    text = json.dumps({"rows": [{"id": i, "name": f"item {i}", "ok": i % 3 == 0} for i in range(n // 6 + 1)]})
    step = max(len(text) // n, 1)
    return [text[i : i + step] for i in range(0, len(text), step)]


def _responses(pieces: list[str], tools: bool) -> tuple[list[bytes], str]:
    rng = random.Random(7)
    seq = iter(range(10**9))
    resp = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "status": "in_progress",
        "model": "gpt-x",
        "output": [],
        "usage": None,
        "error": None,
        "incomplete_details": None,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "text": {"format": {"type": "text"}},
    }
    text = "".join(pieces)
    if tools:
        item = {
            "id": "fc_1",
            "type": "function_call",
            "status": "in_progress",
            "call_id": "call_1",
            "name": "f",
            "arguments": "",
        }
        done_item = {**item, "status": "completed", "arguments": text}
        middle = [
            {
                "type": "response.output_item.added",
                "sequence_number": next(seq),
                "output_index": 0,
                "item": item,
            }
        ]
        middle += [
            {
                "type": "response.function_call_arguments.delta",
                "sequence_number": next(seq),
                "item_id": "fc_1",
                "output_index": 0,
                "delta": p,
                "obfuscation": "x" * rng.randint(4, 12),
            }
            for p in pieces
        ]
        middle += [
            {
                "type": "response.function_call_arguments.done",
                "sequence_number": next(seq),
                "item_id": "fc_1",
                "output_index": 0,
                "arguments": text,
            }
        ]
    else:
        item = {"id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant", "content": []}
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        done_item = {**item, "status": "completed", "content": [{**part, "text": text}]}
        middle = [
            {
                "type": "response.output_item.added",
                "sequence_number": next(seq),
                "output_index": 0,
                "item": item,
            },
            {
                "type": "response.content_part.added",
                "sequence_number": next(seq),
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "part": part,
            },
        ]
        middle += [
            {
                "type": "response.output_text.delta",
                "sequence_number": next(seq),
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "delta": p,
                "logprobs": [],
                "obfuscation": "x" * rng.randint(4, 12),
            }
            for p in pieces
        ]
        middle += [
            {
                "type": "response.output_text.done",
                "sequence_number": next(seq),
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "text": text,
                "logprobs": [],
            },
            {
                "type": "response.content_part.done",
                "sequence_number": next(seq),
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "part": {**part, "text": text},
            },
        ]
    events = [
        {"type": "response.created", "sequence_number": next(seq), "response": resp},
        {"type": "response.in_progress", "sequence_number": next(seq), "response": resp},
        *middle,
        {
            "type": "response.output_item.done",
            "sequence_number": next(seq),
            "output_index": 0,
            "item": done_item,
        },
        {
            "type": "response.completed",
            "sequence_number": next(seq),
            "response": {
                **resp,
                "status": "completed",
                "output": [done_item],
                "usage": {
                    "input_tokens": 10,
                    "input_tokens_details": {"cached_tokens": 0},
                    "output_tokens": len(pieces),
                    "output_tokens_details": {"reasoning_tokens": 0},
                    "total_tokens": 10 + len(pieces),
                },
            },
        },
    ]
    return [orjson.dumps(e) for e in events], text


def _messages(pieces: list[str], tools: bool) -> tuple[list[bytes], str]:
    usage = {
        "input_tokens": 10,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 1,
        "service_tier": "standard",
    }
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-x",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": usage,
            },
        }
    ]
    if tools:
        events.append(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}},
            }
        )
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces]
    else:
        events.append(
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
        )
        deltas = [{"type": "text_delta", "text": p} for p in pieces]
    for i, delta in enumerate(deltas):
        if i % 100 == 50:
            events.append({"type": "ping"})
        events.append({"type": "content_block_delta", "index": 0, "delta": delta})
    events += [
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use" if tools else "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": len(pieces)},
        },
        {"type": "message_stop"},
    ]
    return [orjson.dumps(e) for e in events], "".join(pieces)


CORPORA = ("responses-text", "responses-tools", "messages-text", "messages-tools")


class Corpus:
    def __init__(self, name: str, n: int) -> None:
        self.name = name
        self.api, kind = name.split("-")
        pieces = _arguments(n) if kind == "tools" else _pieces(random.Random(11), n)
        build = _responses if self.api == "responses" else _messages
        self.payloads, self.text = build(pieces, kind == "tools")
        self.strs = [p.decode() for p in self.payloads]
        self.tools = kind == "tools"
        raw = b"".join(
            b"event: " + orjson.loads(p)["type"].encode() + b"\ndata: " + p + b"\n\n" for p in self.payloads
        )
        self.reads = [raw[i : i + 16384] for i in range(0, len(raw), 16384)]


@pytest.fixture(scope="module")
def corpora(pytestconfig: pytest.Config) -> dict[str, Corpus]:
    n = max(int(2000 * _scale(pytestconfig)), 40)
    return {name: Corpus(name, n) for name in CORPORA}


def _final_text(api: str, tools: bool, result: dict[str, Any]) -> str:
    if api == "responses":
        item = result["output"][0]
        return item["arguments"] if tools else item["content"][0]["text"]
    block = result["content"][0]
    return json.dumps(block["input"]) if tools else block["text"]


def _fastsse(backend_name: str) -> Callable[[Corpus], Callable[[], Any]]:
    def prepare(c: Corpus) -> Callable[[], Any]:
        try:
            ns = fastsse.get_backend(backend_name)
        except ImportError as exc:
            pytest.skip(str(exc))
        cls = ns.ResponsesAggregator if c.api == "responses" else ns.MessagesAggregator

        def run() -> Any:
            agg = cls()
            feed = agg.feed_data
            for p in c.payloads:
                feed(p)
            return _final_text(c.api, c.tools, agg.result())

        return run

    return prepare


def _stream(c: Corpus) -> Callable[[], Any]:
    try:
        ns = fastsse.get_backend("cython")
    except ImportError as exc:
        pytest.skip(str(exc))
    cls = ns.ResponsesStream if c.api == "responses" else ns.MessagesStream

    def run() -> Any:
        stream = cls()
        write = stream.write
        for r in c.reads:
            write(r)
        stream.close()
        return _final_text(c.api, c.tools, stream.aggregator.result())

    return run


def _floor(c: Corpus) -> Callable[[], Any]:
    loads = orjson.loads

    def run() -> Any:
        for p in c.payloads:
            loads(p)
        return None

    return run


def _openai(c: Corpus) -> Callable[[], Any]:
    if c.api != "responses":
        pytest.skip("the openai SDK folds Responses streams")
    from openai._models import construct_type
    from openai._types import omit
    from openai.lib.streaming.responses._responses import ResponseStreamState
    from openai.types.responses import ResponseStreamEvent

    def run() -> Any:
        state: Any = ResponseStreamState(input_tools=omit, text_format=omit)
        for s in c.strs:
            state.handle_event(construct_type(type_=ResponseStreamEvent, value=json.loads(s)))
        final = state._completed_response
        item = final.output[0]
        return item.arguments if c.tools else item.content[0].text

    return run


def _anthropic(c: Corpus) -> Callable[[], Any]:
    if c.api != "messages":
        pytest.skip("the anthropic SDK folds Messages streams")
    from anthropic._models import construct_type
    from anthropic.lib.streaming._messages import accumulate_event
    from anthropic.types import RawMessageStreamEvent

    def run() -> Any:
        snapshot = None
        bufs: dict[int, bytes] = {}
        for s in c.strs:
            data = json.loads(s)
            if data["type"] == "ping":
                continue
            event = construct_type(type_=RawMessageStreamEvent, value=data)
            snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=bufs)
        block = snapshot.content[0]  # type: ignore[union-attr]
        return json.dumps(block.input) if c.tools else block.text

    return run


CONTENDERS: dict[str, Callable[[Corpus], Callable[[], Any]]] = {
    "fastsse-cython": _fastsse("cython"),
    "fastsse-python": _fastsse("python"),
    "fastsse-stream": _stream,
    "floor": _floor,
    "openai-sdk": _openai,
    "anthropic-sdk": _anthropic,
}


def _cases() -> list[Any]:
    return [
        pytest.param(corpus, name, id=f"{corpus}-{name}")
        for corpus in CORPORA
        for name in CONTENDERS
        if not (name == "openai-sdk" and corpus.startswith("messages"))
        and not (name == "anthropic-sdk" and corpus.startswith("responses"))
    ]


@pytest.mark.parametrize(("corpus_name", "name"), _cases())
def test_fold(benchmark: Any, corpora: dict[str, Corpus], corpus_name: str, name: str) -> None:
    c = corpora[corpus_name]
    run = CONTENDERS[name](c)
    benchmark.group = f"fold:{corpus_name}"
    benchmark.extra_info.update(
        contender=name, corpus=corpus_name, events=len(c.payloads), bytes=sum(map(len, c.payloads))
    )
    if name.endswith("sdk") and benchmark.enabled:
        got = benchmark.pedantic(run, rounds=3, iterations=1, warmup_rounds=1)
    else:
        got = benchmark(run)
    if name != "floor":
        expected = json.dumps(json.loads(c.text)) if c.tools and c.api == "messages" else c.text
        assert got == expected
